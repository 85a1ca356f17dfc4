"""Fixtures for the Python package's tests: the wheel built and installed
once per session, and real `gnomon serve` processes on loopback.

Run by scripts/test-all in the venv it makes (target/python-venv, with
maturin and pytest from PyPI):

    target/python-venv/bin/python -m pytest bindings/python/tests
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "bindings" / "python"
VECTORS = REPO / "tests" / "external-vectors"
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
# Generous bounds against hangs, never expected times.
START_TIMEOUT = 60.0


def skip(test: str, reason: str) -> None:
    """Skip, and say so in scripts/test-all's list of tests that could not run."""
    line = f"SKIPPED bindings/python/tests::{test}: {reason}"
    log = os.environ.get("GNOMON_SKIP_LOG")
    if log:
        with open(log, "a") as f:
            f.write(line + "\n")
    pytest.skip(reason)


def gnomon_bin() -> Path:
    exe = Path(os.environ.get("GNOMON_BIN", REPO / "target" / "debug" / "gnomon"))
    if not exe.is_file():
        pytest.fail(f"{exe} missing: `cargo build -p gnomon` first (in scripts/test-all, its test build makes it)")
    return exe


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built with maturin from the package's own pyproject.toml
    in the `bindings-check` profile: the `bindings` profile a user's wheel
    is built with (release code that unwinds on panic), unoptimised but for
    the hashing and signing crates. The tests check how the module behaves,
    not how fast: 119 CPU-s from cold on this 2-vCPU AMD EPYC against 193
    for `bindings` (Cargo.toml).

    Not `--profile dev` to reuse what `cargo test --workspace` built: maturin
    builds this one package, so Cargo resolves other features than for the
    whole workspace (serde, getrandom, digest, syn and a dozen more), and
    the client's whole dependency tree compiles again either way; in dev,
    with the workspace's opt-level 3 and full debug info for dependencies,
    that cost 154 s of CPU against 96 s for `bindings` from cold."""
    given = os.environ.get("GNOMON_PYTHON_WHEEL")
    if given:
        # A wheel built elsewhere, e.g. from a deliberately broken change,
        # to see a test fail against it.
        return Path(given)
    out = REPO / "target" / "wheels" / "pytest"
    shutil.rmtree(out, ignore_errors=True)
    maturin = Path(sys.executable).parent / "maturin"
    subprocess.run(
        # test-panic: a hook for test_a_rust_panic_is_an_exception_not_an_abort
        # (Cargo.toml); the package's own features come from pyproject.toml.
        [
            str(maturin), "build", "--quiet", "--locked", "--features", "test-panic",
            "--profile", "bindings-check", "-o", str(out),
        ],
        cwd=PACKAGE,
        check=True,
        timeout=1800,
    )
    (built,) = out.glob("gnomon-*.whl")
    return built


@pytest.fixture(scope="session")
def gnomon(wheel: Path):
    """The package as a user gets it: the wheel installed into this venv."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)],
        check=True,
        timeout=300,
    )
    for name in [m for m in sys.modules if m == "gnomon" or m.startswith("gnomon.")]:
        del sys.modules[name]
    import gnomon as module

    # The installed copy, not the source tree.
    assert "site-packages" in module.__file__, module.__file__
    return module


class Serve:
    """A running `gnomon serve`; stop() kills it and reaps it."""

    def __init__(self, extra: List[str], env: Optional[dict] = None) -> None:
        cmd = [
            str(gnomon_bin()),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--summary-interval",
            "0",
            "--workers",
            "1",
            # This machine's kernel clock may say it is unsynchronized.
            "--clock-unsynchronized",
            "answer-with-radius",
            *extra,
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # None of the caller's GNOMON_* variables: only what the test
            # means the server to see.
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("GNOMON_")},
                **(env or {}),
            },
        )
        self.log: List[str] = []
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def pump(stream, tag: str) -> None:
            for line in stream:
                lines.put(tag + line)
            lines.put(None)

        for stream, tag in ((self.proc.stdout, "out "), (self.proc.stderr, "err ")):
            threading.Thread(target=pump, args=(stream, tag), daemon=True).start()
        self.public_key = ""
        self.addr = ""
        deadline = time.monotonic() + START_TIMEOUT
        ended = 0
        try:
            while not (self.public_key and self.addr):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"gnomon serve not ready in {START_TIMEOUT} s: {self.log}")
                try:
                    line = lines.get(timeout=left)
                except queue.Empty:
                    continue
                if line is None:
                    ended += 1
                    if ended == 2:
                        raise RuntimeError(f"gnomon serve exited: {self.log}")
                    continue
                self.log.append(line)
                if line.startswith("out public key (base64): "):
                    self.public_key = line.split(": ", 1)[1].strip()
                if "listening on udp " in line:
                    self.addr = line.split("listening on udp ", 1)[1].split()[0]
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def serve(extra: Optional[List[str]] = None, env: Optional[dict] = None) -> Iterator[Serve]:
    s = Serve(extra or [], env)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[Serve]:
    """`gnomon serve` with an ephemeral key, every version, UDP and TCP."""
    yield from serve()


def faketime_env(offset: str) -> dict:
    """libfaketime moving the process's wall clock by `offset` seconds
    ("+3600"); the monotonic clock stays honest, as in
    crates/cli/tests/cli/hostile_clock.rs."""
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
