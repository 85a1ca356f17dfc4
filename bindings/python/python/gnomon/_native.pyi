# The Rust extension (bindings/python/src); gnomon/__init__.py wraps it.
# Checked against the compiled module by mypy's stubtest
# (tests/test_types.py::test_stubs_match_the_compiled_module).
from typing import Any, Dict, List, Optional, Tuple, Union

__all__ = [
    "build_request", "measure", "query", "verify", "verify_proof", "verify_report", "verify_server_list", "versions"
]

def versions() -> List[Tuple[str, int]]: ...
def build_request(
    version: Union[str, int],
    nonce: Optional[bytes] = None,
    public_key: Optional[Union[str, bytes]] = None,
    size: Optional[int] = None,
) -> bytes: ...
def verify(request: bytes, response: bytes, public_key: Union[str, bytes]) -> Dict[str, Any]: ...
def query(
    address: str,
    public_key: Union[str, bytes],
    *,
    version: Optional[Union[str, int]] = None,
    timeout: float = 2.0,
    tcp: Optional[bool] = None,
) -> Dict[str, Any]: ...
def measure(
    server_list: bytes,
    *,
    ask: Optional[int] = None,
    quorum: int = 2,
    max_liars: Optional[int] = None,
    timeout: float = 2.0,
    tcp: Optional[bool] = None,
) -> Dict[str, Any]: ...
def verify_report(report: bytes) -> Dict[str, Any]: ...
def verify_proof(
    bundle: bytes,
    device: bytes,
    keys: List[Union[str, bytes]],
    elapsed_us: int,
    quorum: int,
    max_liars: Optional[int],
    max_radius_us: Optional[int],
    servers: Optional[List[int]] = None,
) -> Dict[str, Any]: ...
def verify_server_list(
    lists: List[Tuple[bytes, bytes]],
    keys: List[str],
    threshold: int,
    now: int,
    seen: Optional[str] = None,
) -> Dict[str, Any]: ...
