"""``gnomon.now()``: the time now as ``gnomon sync`` proves it, asked over
its now socket (docs/NOW.md). Pure Python and the standard library only:
the socket speaks JSON lines, and nothing here needs the Rust extension.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import socket as _socket
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

DEFAULT_SOCKET = "/run/gnomon/now.sock"
"""Where ``gnomon sync`` answers unless its ``now-socket`` says otherwise."""

_MAX_ANSWER = 64 * 1024


class NowError(Exception):
    """``gnomon sync`` did not answer on the socket, or not in the protocol."""


def _utc(us: Optional[int]) -> Optional[_dt.datetime]:
    if us is None:
        return None
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=us)


@dataclass(frozen=True)
class Now:
    """What ``gnomon sync`` can prove about the time now.

    ``known`` is ``"interval"`` (both ends proven), ``"floor"`` (a lower
    bound only: sync restarted and has had no good round since),
    ``"contradiction"`` (the last round lies wholly below the floor: nothing
    is proven) or ``"none"``. Times are Unix microseconds; :attr:`earliest`
    and :attr:`latest` give them as aware datetimes. ``assumption`` is what
    the proving round's consensus rests on ("assumes at most 1 of the 5
    listed servers lies; …").
    """

    known: str
    earliest_unix_us: Optional[int]
    latest_unix_us: Optional[int]
    round: Optional[int]
    servers: List[str] = field(default_factory=list)
    age_s: Optional[float] = None
    wall_clock_unix_us: int = 0
    wall_clock_inside: Optional[bool] = None
    drift_ppm: int = 0
    at_least_unix_us: Optional[int] = None
    at_least_proven: Optional[bool] = None
    assumption: Optional[str] = None

    @property
    def proven(self) -> bool:
        """Whether both ends of the time now are proven."""
        return self.known == "interval"

    @property
    def earliest(self) -> Optional[_dt.datetime]:
        return _utc(self.earliest_unix_us)

    @property
    def latest(self) -> Optional[_dt.datetime]:
        return _utc(self.latest_unix_us)


def _at_least_us(t: Union[_dt.datetime, int]) -> int:
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            raise ValueError("at_least: a naive datetime; give one with a timezone")
        d = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(t, bool) or not isinstance(t, int):
        raise TypeError("at_least: a datetime, or Unix microseconds as an int")
    return t


def _connect(s: _socket.socket, path: str, deadline: float) -> None:
    """Connect, waiting for room in sync's backlog until ``deadline``.

    A Unix socket with a timeout fails a connect at once (EAGAIN) while the
    listener's backlog is full, which another user's churn can keep it;
    ``gnomon now`` and C's ``gnomon_now()`` connect blocking and wait for
    room, and so does this, up to the timeout.
    """
    while True:
        try:
            s.connect(path)
            return
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK) or time.monotonic() >= deadline:
                raise
        time.sleep(0.002)


def now(
    socket: str = DEFAULT_SOCKET,
    at_least: Union[_dt.datetime, int, None] = None,
    timeout: float = 2.0,
) -> Now:
    """Ask ``gnomon sync`` (``--now-socket``) what time it is proven to be.

    ``at_least`` (an aware datetime or Unix µs) also asks whether it is
    proven that now is no earlier: :attr:`Now.at_least_proven`. Raises
    :class:`NowError` when sync does not answer within ``timeout`` seconds
    or answers with an error; a sync that has proven nothing yet is an
    answer (``known == "none"``), not an error.
    """
    request: Dict[str, int] = {} if at_least is None else {"at-least": _at_least_us(at_least)}
    try:
        with _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            _connect(s, socket, time.monotonic() + timeout)
            s.sendall(json.dumps(request).encode() + b"\n")
            buf = b""
            while b"\n" not in buf and len(buf) < _MAX_ANSWER:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
    except OSError as e:
        raise NowError(f"no answer from gnomon sync on {socket}: {e}") from e
    try:
        a: Any = json.loads(buf.split(b"\n", 1)[0])
    except ValueError as e:
        raise NowError(f"not a JSON answer from {socket}: {e}") from e
    if not isinstance(a, dict):
        raise NowError(f"not a JSON object from {socket}")
    if "error" in a:
        raise NowError(f"gnomon sync says: {a['error']}")
    if a.get("v") != 1:
        raise NowError(f"protocol version {a.get('v')!r}, not 1")
    src = a.get("source") or {}
    return Now(
        known=a["known"],
        earliest_unix_us=a.get("earliest_unix_us"),
        latest_unix_us=a.get("latest_unix_us"),
        round=src.get("round"),
        servers=list(src.get("servers") or []),
        age_s=src.get("age_s"),
        wall_clock_unix_us=a["wall_clock_unix_us"],
        wall_clock_inside=a.get("wall_clock_inside"),
        drift_ppm=a["drift_ppm"],
        at_least_unix_us=a.get("at_least_unix_us"),
        at_least_proven=a.get("at_least_proven"),
        assumption=src.get("assumption"),
    )
