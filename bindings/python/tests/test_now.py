"""gnomon.now(): the now socket of `gnomon sync` (docs/NOW.md), asked
from Python.

The helper is pure Python (gnomon/_now.py, re-exported as gnomon.now), so
these tests load it from the source tree and need no wheel: one against a
socket the test serves itself, speaking the documented protocol, and one
against a real `gnomon sync` measuring real `gnomon serve` processes.
"""


from __future__ import annotations

import errno
import importlib.util
import json
import os
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, gnomon_bin, serve

# Generous bounds against hangs, never expected times.
PATIENCE = 60.0


def load_now():
    path = REPO / "bindings" / "python" / "python" / "gnomon" / "_now.py"
    spec = importlib.util.spec_from_file_location("gnomon_now_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    # dataclasses looks the module up while it is being executed.
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def now_mod():
    return load_now()


@pytest.fixture
def short_dir():
    # A Unix socket path holds 107 bytes; pytest's tmp_path can be longer.
    d = Path(tempfile.mkdtemp(prefix="gn-now-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


class OneShot:
    """A socket answering each connection with `answer`, recording requests."""

    def __init__(self, path: Path, answer: dict) -> None:
        self.requests = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.sock.settimeout(PATIENCE)
        self.answer = answer
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(PATIENCE)
            buf = b""
            while b"\n" not in buf:
                chunk = conn.recv(1024)
                if not chunk:
                    break
                buf += chunk
            self.requests.append(json.loads(buf.split(b"\n")[0] or b"{}"))
            conn.sendall(json.dumps(self.answer).encode() + b"\n")

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=PATIENCE)


INTERVAL = {
    "v": 1,
    "known": "interval",
    "earliest_unix_us": 1_800_000_000_000_000,
    "latest_unix_us": 1_800_000_002_000_000,
    "source": {"round": 4, "servers": ["a", "b"], "age_s": 12.5,
               "assumption": "assumes at most 1 of the 4 listed servers lies; 4 answered, 3 needed"},
    "wall_clock_unix_us": 1_800_000_001_000_000,
    "wall_clock_inside": True,
    "drift_ppm": 100,
    "at_least_unix_us": 1_700_000_000_000_000,
    "at_least_proven": True,
}


def test_now_reads_every_documented_member(now_mod, short_dir):
    d = short_dir
    srv = OneShot(d / "now.sock", INTERVAL)
    try:
        import datetime as dt

        t = dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
        n = now_mod.now(socket=str(d / "now.sock"), at_least=t)
    finally:
        srv.close()
    assert srv.requests == [{"at-least": 1_700_000_000_000_000}]
    assert n.proven and n.known == "interval"
    assert (n.earliest_unix_us, n.latest_unix_us) == (1_800_000_000_000_000, 1_800_000_002_000_000)
    assert (n.round, n.servers, n.age_s) == (4, ["a", "b"], 12.5)
    assert n.wall_clock_inside is True and n.drift_ppm == 100
    assert n.at_least_proven is True
    assert n.assumption == "assumes at most 1 of the 4 listed servers lies; 4 answered, 3 needed"
    assert n.earliest.timestamp() == 1_800_000_000


class FullBacklog:
    """A socket whose connect fails as a Unix socket with a timeout does
    while the listener's backlog is full: EAGAIN, `busy` times, then it
    connects."""

    def __init__(self, busy):
        self.busy = busy
        self.calls = 0

    def connect(self, path):
        self.calls += 1
        if self.calls <= self.busy:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")


def test_a_full_backlog_is_waited_for_until_the_timeout(now_mod):
    import time

    s = FullBacklog(busy=3)
    now_mod._connect(s, "/x", time.monotonic() + 5.0)
    assert s.calls == 4
    # Past the deadline the EAGAIN is the answer; other errors at once.
    s = FullBacklog(busy=10**9)
    with pytest.raises(BlockingIOError):
        now_mod._connect(s, "/x", time.monotonic())
    assert s.calls == 1


def test_a_floor_an_error_and_no_socket(now_mod, short_dir):
    d = short_dir
    floor = {**INTERVAL, "known": "floor", "latest_unix_us": None, "source": None,
             "at_least_unix_us": None, "at_least_proven": None}
    srv = OneShot(d / "f.sock", floor)
    try:
        n = now_mod.now(socket=str(d / "f.sock"))
    finally:
        srv.close()
    assert not n.proven and n.latest is None and n.round is None and n.servers == []
    srv = OneShot(d / "e.sock", {"v": 1, "error": "busy"})
    try:
        with pytest.raises(now_mod.NowError, match="busy"):
            now_mod.now(socket=str(d / "e.sock"))
    finally:
        srv.close()
    with pytest.raises(now_mod.NowError, match="no answer"):
        now_mod.now(socket=str(d / "missing.sock"))
    with pytest.raises(ValueError):
        import datetime as dt

        now_mod.now(socket=str(d / "missing.sock"), at_least=dt.datetime(2020, 1, 1))


def test_now_from_a_real_sync_contains_the_true_time(now_mod, short_dir):
    gens = [serve() for _ in range(3)]
    servers = [next(g) for g in gens]
    d = short_dir
    sync = None
    try:
        lst = {
            "servers": [
                {
                    "name": n,
                    "version": 1,
                    "publicKeyType": "ed25519",
                    "publicKey": s.public_key,
                    "addresses": [{"protocol": "udp", "address": s.addr}],
                }
                for n, s in zip(["a", "b", "c"], servers)
            ]
        }
        (d / "list.json").write_text(json.dumps(lst))
        os.chmod(d, 0o755)
        sock = str(d / "now.sock")
        sync = subprocess.Popen(
            [str(gnomon_bin()), "sync", "--servers", str(d / "list.json"), "--state-dir",
             str(d / "state"), "--interval", "1h", "--now-socket", sock,
             "--timeout", "500ms"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + PATIENCE
        answer = None
        while time.monotonic() < deadline:
            before = time.time_ns() // 1000
            try:
                answer = now_mod.now(socket=sock)
            except now_mod.NowError:
                answer = None
            after = time.time_ns() // 1000
            if answer is not None and answer.proven:
                break
            time.sleep(0.1)
        assert answer is not None and answer.proven, answer
        # True time (this machine's clock is not stepped here) was between
        # `before` and `after` when sync answered.
        assert answer.earliest_unix_us <= after, (answer, after)
        assert before <= answer.latest_unix_us, (answer, before)
        assert sorted(answer.servers) == ["a", "b", "c"] and answer.round == 1
        assert answer.wall_clock_inside is True
    finally:
        if sync is not None:
            sync.kill()
            sync.wait(timeout=PATIENCE)
        for g in gens:
            g.close()
