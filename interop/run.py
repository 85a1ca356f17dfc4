#!/usr/bin/env python3
"""gnomon against independent Roughtime implementations (see interop/README.md).

Started by scripts/interop, which builds gnomon and installs the peers. Every
server listens on 127.0.0.1 on a port the kernel picked (or one found free just
before), every wait has a deadline, and every child process is killed on the
way out, whatever happened.

Prints a matrix of client x server x version x transport x mode and exits 1 on
any unexpected failure, or on an expected failure that passed.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import wire  # noqa: E402

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"

# roughenough-server's key with --insecure-zero-seed (all-zero seed).
ROUGHENOUGH_ZERO_KEY = bytes.fromhex("3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29")

V1 = 0x00000001
D07 = 0x80000007
D08 = 0x80000008
D09 = 0x80000009
D10 = 0x8000000A
D11 = 0x8000000B
D12_19 = 0x8000000C
GOOGLE = 3000600613

START_TIMEOUT = 20.0  # a server's startup line or bound port
QUERY_TIMEOUT = 30.0  # one client command, whole
CLOCK_SLACK = 5.0  # seconds allowed between a peer's time and ours beyond the radius


def vname(v: int | None) -> str:
    if v is None:
        return "none"
    if v == GOOGLE:
        return "google"
    return f"{v:#010x}" if v & 0x80000000 else str(v)


class Failed(Exception):
    """A check did not pass; the message says why."""


# --------------------------------------------------------------------------
# Processes


def spawn(argv: list[str], stderr: int, env: dict | None) -> subprocess.Popen:
    """A child in its own process group (so it can be killed whole), stdin
    closed, stdout piped as text."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        errors="replace",
        start_new_session=True,
        env=env,
    )


class Child:
    """A long-running child in its own process group; its output goes to a log
    file and, line by line, to a queue that wait_for reads with a deadline."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict | None = None):
        self.name = name
        self.argv = argv
        self.log_path = log
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.proc = spawn(argv, subprocess.STDOUT, env)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match:
        rx = re.compile(pattern)
        for line in self.seen:
            if m := rx.search(line):
                return m
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed(f"{self.name}: no line matching {pattern!r} within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise Failed(f"{self.name} exited ({self.proc.wait()}) before printing {pattern!r}")
            self.seen.append(line)
            if m := rx.search(line):
                return m

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=3)


class Processes:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.children: list[Child] = []
        self.running: set[subprocess.Popen] = set()
        self.count = 0

    def start(self, name: str, argv: list[str], env: dict | None = None) -> Child:
        self.count += 1
        child = Child(name, argv, self.workdir / f"{self.count:02d}-{name}.log", env)
        self.children.append(child)
        return child

    def run(self, argv: list[str], timeout: float = QUERY_TIMEOUT, env: dict | None = None) -> tuple[int, str, str]:
        """Run a command to completion with a deadline; its whole process group is
        killed if the deadline passes."""
        proc = spawn(argv, subprocess.PIPE, env)
        self.running.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=5)
            raise Failed(f"{Path(argv[0]).name} did not finish within {timeout:.0f} s; stderr: {err.strip()[-300:]}")
        finally:
            self.running.discard(proc)
        self.count += 1
        with open(self.workdir / f"{self.count:02d}-cmd.log", "w", encoding="utf-8") as log:
            log.write(" ".join(argv) + f"\nexit {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}\n")
        return proc.returncode, out, err

    def stop_all(self) -> None:
        for proc in list(self.running):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for child in reversed(self.children):
            child.stop()


# --------------------------------------------------------------------------
# Ports


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 right now, for peers that
    cannot bind port 0 themselves (the start is retried if we lose a race)."""
    for _ in range(50):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        port = u.getsockname()[1]
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            t.close()
            u.close()
    raise Failed("no free port")


def udp_bound_by(port: int, pid: int) -> bool:
    """Whether process `pid` holds a UDP socket bound to `port`: the socket's
    inode from /proc/net/udp{,6} must be one of the process's descriptors (a
    port that someone else took does not count)."""
    inodes = set()
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except FileNotFoundError:
            continue
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False


def wait_udp_bound(child: Child, port: int, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not udp_bound_by(port, child.proc.pid):
        if child.proc.poll() is not None:
            raise Failed(f"{child.name} exited ({child.proc.returncode}) before binding udp {port}")
        if time.monotonic() > deadline:
            raise Failed(f"{child.name} did not bind udp {port} within {timeout:.0f} s")
        time.sleep(0.02)  # polling with a deadline, not synchronisation


# --------------------------------------------------------------------------
# Servers


@dataclass
class Server:
    name: str
    port: int
    key: bytes
    child: Child

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def key_b64(self) -> str:
        return base64.b64encode(self.key).decode()


class Peers:
    def __init__(self, args: argparse.Namespace, procs: Processes):
        self.gnomon = args.gnomon
        self.tools = Path(args.tools)
        self.procs = procs

    @property
    def roughenough_server(self) -> str:
        return str(self.tools / "bin" / "roughenough_server")

    @property
    def roughenough_client(self) -> str:
        return str(self.tools / "bin" / "roughenough_client")

    @property
    def pyroughtime_python(self) -> str:
        return str(self.tools / "pyroughtime-venv" / "bin" / "python")

    @property
    def roughly_python(self) -> str:
        return str(self.tools / "roughly-venv" / "bin" / "python")

    @property
    def roughly_cli(self) -> str:
        return str(self.tools / "roughly-venv" / "bin" / "roughly")

    def start_gnomon(self, name: str, *extra: str) -> Server:
        child = self.procs.start(
            name,
            [self.gnomon, "serve", "--listen", "127.0.0.1:0", "--summary-interval", "0", *extra],
        )
        key = child.wait_for(r"^public key \(base64\): (\S+)").group(1)
        port = int(child.wait_for(r"listening on udp 127\.0\.0\.1:(\d+)").group(1))
        child.wait_for(rf"listening on tcp 127\.0\.0\.1:{port}\b")
        return Server(name, port, base64.b64decode(key), child)

    def start_roughenough(self, name: str, offset: int = 0) -> Server:
        last: Exception | None = None
        for _ in range(3):
            port = free_port()
            argv = [self.roughenough_server, "-i", "127.0.0.1", "-p", str(port), "-j", "1",
                    "--insecure-zero-seed", "--fixed-offset", str(offset), "-q"]
            child = self.procs.start(name, argv)
            try:
                wait_udp_bound(child, port)
                return Server(name, port, ROUGHENOUGH_ZERO_KEY, child)
            except Failed as err:  # lost the port race: try another
                last = err
                child.stop()
        raise Failed(str(last))

    def start_wrapped(self, name: str, python: str, script: str) -> Server:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        child = self.procs.start(name, [python, str(PEERS / script), "serve", "--host", "127.0.0.1"], env)
        port = int(child.wait_for(r"^port (\d+)").group(1))
        key = child.wait_for(r"^public key \(base64\): (\S+)").group(1)
        return Server(name, port, base64.b64decode(key), child)


# --------------------------------------------------------------------------
# The relay that makes gnomon batch a peer's request


class Relay:
    """Receives one request from a peer client on UDP and passes it to gnomon.

    In batch mode the request goes out in a burst of copies of itself with fresh
    nonces (extra requests of the same version, sent from another socket), so
    that gnomon's worker reads them in one recvmmsg call and signs them as one
    Merkle tree. The answer to the peer's own request is passed back only when
    its PATH is not empty; otherwise the burst is repeated (a retransmission of
    the same request, which a server must answer again), a bounded number of
    times. The peer therefore only ever sees one answer: gnomon's, unchanged.
    """

    def __init__(self, target: Server, batch: bool, tcp: bool = False,
                 attempts: int = 25, extras: int = 15, position: int = 5):
        self.target = ("127.0.0.1", target.port)
        self.batch = batch
        self.tcp = tcp
        self.attempts = attempts
        self.extras = extras
        self.position = position
        self.down = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.down.bind(("127.0.0.1", 0))
        self.port = self.down.getsockname()[1]
        self.summary: dict | None = None
        self.error: str | None = None
        self.tries = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._relay()
        except Exception as err:  # reported by result()
            self.error = f"relay: {type(err).__name__}: {err}"
        finally:
            self.down.close()

    def _relay(self) -> None:
        ready, _, _ = select.select([self.down], [], [], QUERY_TIMEOUT)
        if not ready:
            self.error = "the peer sent no request"
            return
        request, peer = self.down.recvfrom(65535)
        if self.tcp:
            answer = self._over_tcp(request)
            self.summary = wire.response_summary(answer)
            self.down.sendto(answer, peer)
            return
        up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        side = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        up.connect(self.target)
        side.connect(self.target)
        try:
            for attempt in range(1, self.attempts + 1):
                self.tries = attempt
                if self.batch:
                    burst = [wire.with_fresh_nonce(request) for _ in range(self.extras)]
                    for extra in burst[: self.position]:
                        side.send(extra)
                    up.send(request)
                    for extra in burst[self.position :]:
                        side.send(extra)
                else:
                    up.send(request)
                deadline = time.monotonic() + 1.0
                while (left := deadline - time.monotonic()) > 0:
                    ready, _, _ = select.select([up], [], [], left)
                    if not ready:
                        break
                    answer = up.recv(65535)
                    summary = wire.response_summary(answer)
                    if self.batch and summary["path_bytes"] == 0:
                        continue  # answered alone: try another burst
                    self.summary = summary
                    self.down.sendto(answer, peer)
                    return
                while select.select([side], [], [], 0)[0]:
                    side.recv(65535)
            self.error = (
                f"no batched answer (non-empty PATH) in {self.attempts} bursts"
                if self.batch
                else f"gnomon did not answer in {self.attempts} attempts"
            )
        finally:
            up.close()
            side.close()

    def _over_tcp(self, request: bytes) -> bytes:
        """Ask gnomon over TCP with the peer's request, unchanged: a TCP request
        is the same ROUGHTIM packet as a UDP one."""
        self.tries = 1
        with socket.create_connection(self.target, timeout=5) as conn:
            conn.sendall(request)
            buf = b""
            deadline = time.monotonic() + 5
            while len(buf) < 12 or len(buf) < 12 + int.from_bytes(buf[8:12], "little"):
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    chunk = conn.recv(65535)
                except socket.timeout:
                    raise Failed(f"gnomon sent {len(buf)} bytes over TCP, then nothing for 5 s") from None
                if not chunk:
                    raise Failed(f"gnomon closed the TCP connection after {len(buf)} bytes")
                buf += chunk
            if buf[:8] != wire.MAGIC:
                raise Failed("TCP answer without ROUGHTIM header")
            return buf[: 12 + int.from_bytes(buf[8:12], "little")]

    def result(self) -> dict:
        self.thread.join(QUERY_TIMEOUT)
        if self.error:
            raise Failed(self.error)
        if self.summary is None:
            raise Failed("relay: no answer passed to the peer")
        return self.summary


# --------------------------------------------------------------------------
# Checks


@dataclass
class Check:
    client: str
    server: str
    version: str
    transport: str
    mode: str
    run: Callable[[], str]
    xfail: str | None = None
    skip: str | None = None
    result: str = ""
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Suite:
    checks: list[Check] = field(default_factory=list)

    # Rows that need a peer this machine cannot install are listed as
    # SKIPPED with the reason, never dropped from the matrix.
    missing: dict[str, str] = field(default_factory=dict)

    def add(self, client, server, version, transport, mode, run, xfail=None) -> None:
        skip = next((f"{peer} not installed: {why}" for peer, why in self.missing.items()
                     if peer in client or peer in server), None)
        self.checks.append(Check(client, server, version, transport, mode, run, xfail, skip))

    def run_all(self, verbose: bool) -> None:
        for c in self.checks:
            if c.skip is not None:
                c.result, c.detail = "SKIPPED", c.skip
                if verbose:
                    print(f"  SKIPPED       {c.client} -> {c.server} {c.version} {c.transport} {c.mode}: "
                          f"{c.detail}", flush=True)
                continue
            t0 = time.monotonic()
            try:
                detail = c.run()
                ok = True
            except Failed as err:
                detail, ok = str(err), False
            except Exception as err:  # a bug in a check is a failure too
                detail, ok = f"{type(err).__name__}: {err}", False
            c.seconds = time.monotonic() - t0
            if c.xfail is None:
                c.result = "pass" if ok else "FAIL"
                c.detail = detail
            elif ok:
                c.result = "XPASS"
                c.detail = f"expected to fail ({c.xfail}) but passed: {detail}"
            else:
                c.result = "expected-fail"
                c.detail = f"{c.xfail} [seen: {detail}]"
            if verbose:
                print(f"  {c.result:13} {c.client} -> {c.server} {c.version} {c.transport} {c.mode}: "
                      f"{c.detail} ({c.seconds:.1f} s)", flush=True)

    def print_matrix(self) -> None:
        cols = ["client", "server", "version", "transport", "mode", "result"]
        rows = [[c.client, c.server, c.version, c.transport, c.mode, c.result] for c in self.checks]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(cols)]
        line = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
        print()
        print(line(cols))
        print(line(["-" * w for w in widths]))
        for c, r in zip(self.checks, rows):
            print(line(r))
        # Skipped rows share one reason, printed once after the counts.
        notes = [c for c in self.checks if c.result not in ("pass", "SKIPPED")]
        if notes:
            print()
            for c in notes:
                print(f"{c.result}: {c.client} -> {c.server} {c.version} {c.transport} {c.mode}: {c.detail}")

    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.result in ("FAIL", "XPASS")]


def near_now(midp_unix: float, radius_s: float, what: str) -> str:
    off = midp_unix - time.time()
    if abs(off) > radius_s + CLOCK_SLACK:
        raise Failed(f"{what}: time {midp_unix:.0f} is {off:+.1f} s from ours (radius {radius_s} s)")
    return f"offset {off:+.1f} s"


def json_line(out: str) -> dict:
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise Failed(f"no JSON in output: {out.strip()[-300:]!r}")


# --------------------------------------------------------------------------
# Clients


class Clients:
    def __init__(self, peers: Peers, procs: Processes, workdir: Path):
        self.p = peers
        self.procs = procs
        self.workdir = workdir

    # -- peers' clients; each returns a detail string or raises Failed

    def roughenough(self, port: int, key: bytes, protocol: str) -> str:
        rc, out, err = self.procs.run(
            [self.p.roughenough_client, "127.0.0.1", str(port), "-k", base64.b64encode(key).decode(),
             "-P", protocol, "--epoch", "-t", "20"]
        )
        text = re.sub(r"\x1b\[[0-9;]*m", "", out + err)
        if rc != 0:
            raise Failed(f"roughenough-client exit {rc}: {text.strip()[-300:]}")
        times = [int(t) for t in re.findall(r"\b(1\d{9})\b", text)]
        if not times:
            raise Failed(f"roughenough-client printed no time: {text.strip()[-300:]}")
        # It prints no radius; gnomon's is at most 60 s while the clock is unsynchronized.
        return "roughenough-client accepted, " + near_now(times[-1], 61, "roughenough-client")

    def _wrapped(self, python: str, script: str, argv: list[str], label: str) -> dict:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        rc, out, err = self.procs.run([python, str(PEERS / script), *argv], env=env)
        try:
            res = json_line(out)
        except Failed:
            raise Failed(f"{label} exit {rc}: {(out + err).strip()[-400:]}") from None
        if rc != 0 or not res.get("ok"):
            raise Failed(f"{label} exit {rc}: {res.get('error', res)}")
        return res

    def pyroughtime(self, port: int, key: bytes, tcp: bool = False, oldver: bool = False, timeout: int = 20) -> str:
        argv = ["query", "127.0.0.1", str(port), base64.b64encode(key).decode(), "--timeout", str(timeout)]
        argv += ["--tcp"] if tcp else []
        argv += ["--oldver"] if oldver else []
        res = self._wrapped(self.p.pyroughtime_python, "pyroughtime_peer.py", argv, "pyroughtime")
        return (f"pyroughtime accepted {res.get('version') or 'a Google answer'}, PATH {res['path_nodes']} nodes, "
                + near_now(res["midp_unix"], res["radius_s"], "pyroughtime"))

    def roughly(self, port: int, key: bytes, version: int) -> str:
        argv = ["query", "127.0.0.1", str(port), base64.b64encode(key).decode(),
                "--version", hex(version), "--timeout", "20"]
        res = self._wrapped(self.p.roughly_python, "roughly_peer.py", argv, "roughly")
        if res["version"] != version:
            raise Failed(f"roughly says the answer is {vname(res['version'])}, not {vname(version)}")
        return (f"roughly accepted {vname(res['version'])}, PATH {res['path_nodes']} nodes, "
                + near_now(res["midp_unix"], res["radius_s"], "roughly"))

    # -- gnomon's client

    def gnomon(self, server: Server, version: str | None, expect: int, *flags: str) -> str:
        argv = [self.p.gnomon, "query", server.addr, "--key", server.key_b64, "--json",
                "--timeout", "300ms", "--deadline", "15s", *flags]
        if version is not None:
            argv += ["--protocol", version]
        rc, out, err = self.procs.run(argv)
        res = json_line(out)
        if rc != 0:
            raise Failed(f"gnomon query exit {rc}: {res.get('error', res)}")
        got = res["version"]["number"]
        if got != expect:
            raise Failed(f"answered in {res['version']['name']} ({vname(got)}), expected {vname(expect)}")
        return (f"verified {res['version']['name']} over {res['transport']}, "
                + near_now(res["midpoint_us"] / 1e6, res["radius_us"] / 1e6, "gnomon query"))


def through_relay(target: Server, batch: bool, expect: int, peer: Callable[[int], str], tcp: bool = False) -> str:
    """Run a peer client against gnomon through a Relay; check the version gnomon
    answered in and, in batch mode, that the answer came from a batch."""
    relay = Relay(target, batch, tcp=tcp)
    try:
        detail = peer(relay.port)
    except Failed as err:
        relay.thread.join(QUERY_TIMEOUT)
        raise Failed(relay.error or str(err)) from None
    s = relay.result()
    if s["version"] != expect:
        raise Failed(f"gnomon answered {vname(s['version'])}, expected {vname(expect)}")
    nodes = s["path_bytes"] // (64 if expect == GOOGLE else 32)
    if batch:
        if s["path_bytes"] == 0:
            raise Failed("answer not batched (empty PATH)")
        return f"{detail}; batched: PATH {nodes} nodes, INDX {s['indx']}, burst {relay.tries}"
    return f"{detail}; PATH {nodes} nodes"


# --------------------------------------------------------------------------
# The suite


def server_list(path: Path, entries: list[tuple[Server, int]]) -> Path:
    servers = [
        {
            "name": s.name,
            "version": v,
            "publicKeyType": "ed25519",
            "publicKey": s.key_b64,
            "addresses": [{"protocol": "udp", "address": s.addr}],
        }
        for s, v in entries
    ]
    path.write_text(json.dumps({"servers": servers}, indent=1))
    return path


ROUGHLY_RAND = (
    "roughly 0.3.0 reads 'rand' from every report entry; RFC 10049 lets the first entry leave "
    "it out, and gnomon does"
)


def build(suite: Suite, peers: Peers, procs: Processes, workdir: Path) -> None:
    c = Clients(peers, procs, workdir)
    g = peers.start_gnomon("gnomon")
    # One worker, so that a burst lands in one socket queue; --batch-disputed so
    # that drafts 05-11 are batched too (by default they are answered one by one).
    gb = peers.start_gnomon("gnomon-batch", "--workers", "1", "--batch-disputed")
    re_srv = peers.start_roughenough("roughenough")
    liar = peers.start_roughenough("roughenough-liar", offset=7200)
    py = peers.start_wrapped("pyroughtime", peers.pyroughtime_python, "pyroughtime_peer.py")
    ry = None if "roughly" in suite.missing else peers.start_wrapped(
        "roughly", peers.roughly_python, "roughly_peer.py")
    # The chains want three independent servers; without roughly a second
    # gnomon takes its place, so the chain rows still run (under that name).
    third = ry or gb

    # ---- peers' clients against gnomon's server
    for proto, label, expect in (("1", "1", V1), ("19", vname(D12_19), D12_19), ("both", "1+0x8000000c", V1)):
        for batch in (False, True) if proto != "both" else (False,):
            target = gb if batch else g
            suite.add(
                "roughenough-client", "gnomon", label, "udp", "batched" if batch else "single",
                lambda t=target, b=batch, p=proto, e=expect: through_relay(
                    t, b, e, lambda port: c.roughenough(port, t.key, p)),
            )
    for v in (V1, D12_19, D11, D10, D09, D08, D07):
        for batch in (False, True):
            target = gb if batch else g
            suite.add(
                "roughly", "gnomon", vname(v), "udp", "batched" if batch else "single",
                lambda t=target, b=batch, v=v: through_relay(t, b, v, lambda port: c.roughly(port, t.key, v)),
            )
    # Neither client speaks TCP for these versions, so the relay carries their
    # UDP request to gnomon's TCP listener unchanged and brings the answer back.
    for proto, label, expect in (("1", "1", V1), ("19", vname(D12_19), D12_19)):
        suite.add(
            "roughenough-client", "gnomon", label, "tcp (bridged)", "single",
            lambda p=proto, e=expect: through_relay(g, False, e, lambda port: c.roughenough(port, g.key, p), tcp=True),
        )
    for v in (V1, D12_19, D11, D10, D09, D08, D07):
        suite.add(
            "roughly", "gnomon", vname(v), "tcp (bridged)", "single",
            lambda v=v: through_relay(g, False, v, lambda port: c.roughly(port, g.key, v), tcp=True),
        )
    for batch in (False, True):
        target = gb if batch else g
        suite.add(
            "pyroughtime", "gnomon", vname(D07), "udp", "batched" if batch else "single",
            lambda t=target, b=batch: through_relay(t, b, D07, lambda port: c.pyroughtime(port, t.key)),
        )
    # pyroughtime's pre-IETF mode (--oldver) is Google's protocol: a bare message
    # with a 64-byte nonce, SHA-512 tree and the old context (it adds VER and PAD\0,
    # which a Google server ignores).
    for batch in (False, True):
        target = gb if batch else g
        suite.add(
            "pyroughtime --oldver", "gnomon", "google", "udp", "batched" if batch else "single",
            lambda t=target, b=batch: through_relay(
                t, b, GOOGLE, lambda port: c.pyroughtime(port, t.key, oldver=True)),
        )
    # Draft 07 defines no TCP, but a stream cannot be spoofed, so gnomon
    # serves every framed version over TCP, unpadded requests included.
    suite.add("pyroughtime", "gnomon", vname(D07), "tcp", "single",
              lambda: c.pyroughtime(g.port, g.key, tcp=True, timeout=3))

    # ---- gnomon's client against the peers' servers
    suite.add("gnomon", "roughenough", "1", "udp", "single", lambda: c.gnomon(re_srv, "1", V1))
    suite.add("gnomon", "roughenough", "auto", "udp", "single", lambda: c.gnomon(re_srv, None, V1))
    for name, v in (("1", V1), ("draft-14", D12_19), ("draft-12", D12_19), ("draft-11", D11),
                    ("draft-10", D10), ("google", GOOGLE)):
        label = name if name in ("1", "google") else f"{vname(v)} ({name})"
        suite.add("gnomon", "roughly", label, "udp", "single", lambda n=name, v=v: c.gnomon(ry, n, v))
    suite.add("gnomon", "roughly", "auto", "udp", "single", lambda: c.gnomon(ry, None, V1))
    suite.add("gnomon", "pyroughtime", vname(D07), "udp", "single",
              lambda: c.gnomon(py, "draft-07", D07))

    # ---- chains
    def gnomon_chain() -> str:
        lst = server_list(workdir / "chain.json", [(g, V1), (re_srv, V1), (third, V1), (py, D07)])
        rc, out, _ = procs.run([peers.gnomon, "query", "--servers", str(lst), "--all", "--json",
                                "--timeout", "300ms", "--deadline", "10s"])
        res = json_line(out)
        if rc != 0 or res.get("malfeasance"):
            raise Failed(f"gnomon query --servers exit {rc}: {json.dumps(res)[:400]}")
        ok = {e["server"] for e in res["entries"] if "error" not in e}
        bad = {e["server"]: e["error"]["message"] for e in res["entries"] if "error" in e}
        want = {"gnomon", "roughenough", third.name, "pyroughtime"}
        if bad or ok != want or len(res["entries"]) != 8:
            raise Failed(f"verified in the chain: {sorted(ok)}; failed: {bad}")
        if set(res["consensus"]["agreeing"]) != want:
            raise Failed(f"consensus: {res['consensus']}")
        return (f"8 chained answers (2 passes) from gnomon, roughenough, {third.name} (version 1) and "
                "pyroughtime (draft 07, answered unframed) verified, consensus of 4")

    suite.add("gnomon", f"gnomon+roughenough+{third.name}+pyroughtime", "1+0x80000007", "udp", "chain",
              gnomon_chain)

    def gnomon_chain_py() -> str:
        lst = server_list(workdir / "chain-py.json", [(g, D07), (py, D07)])
        # Two servers outvote no liar: both are trusted here, so that the
        # exit code speaks of the chain alone.
        rc, out, _ = procs.run([peers.gnomon, "query", "--servers", str(lst), "--all", "--json",
                                "--timeout", "300ms", "--deadline", "10s", "--max-liars", "0"])
        res = json_line(out)
        bad = {e["server"]: e["error"]["message"] for e in res["entries"] if "error" in e}
        if rc != 0 or bad:
            raise Failed(f"exit {rc}, failed: {bad}")
        return "chain verified"

    suite.add("gnomon", "gnomon+pyroughtime", vname(D07), "udp", "chain", gnomon_chain_py)

    def roughenough_chain(entries: list[tuple[Server, int]], name: str, expect_violation: bool) -> str:
        lst = server_list(workdir / name, entries)
        rc, out, err = procs.run([peers.roughenough_client, "-l", str(lst), "-u", str(len(entries)),
                                  "-r", "2", "-t", "5"])
        text = re.sub(r"\x1b\[[0-9;]*m", "", out + err)
        if rc != 0:
            raise Failed(f"roughenough-client exit {rc}: {text.strip()[-300:]}")
        violation = "Causality violation" in text
        if violation != expect_violation:
            raise Failed(f"roughenough-client {'saw' if violation else 'did not see'} a causality violation: "
                         f"{text.strip()[-400:]}")
        return (f"roughenough-client chained 2 rounds over gnomon, roughenough and {entries[-1][0].name}"
                + (" and flagged the liar's causality violation" if violation else ", no violation"))

    honest = [(g, V1), (re_srv, V1), (third, V1)]
    suite.add("roughenough-client", f"gnomon+roughenough+{third.name}", "1", "udp", "chain",
              lambda: roughenough_chain(honest, "re-chain.json", False))
    suite.add("roughenough-client", f"gnomon+liar+{third.name}", "1", "udp", "chain",
              lambda: roughenough_chain([(g, V1), (liar, V1), (third, V1)], "re-liar.json", True))

    # ---- malfeasance reports
    report = workdir / "gnomon-report.json"

    def gnomon_report() -> str:
        lst = server_list(workdir / "liar.json", [(g, V1), (liar, V1), (third, V1)])
        rc, out, _ = procs.run([peers.gnomon, "query", "--servers", str(lst), "--all", "--json",
                                "--timeout", "300ms", "--deadline", "10s", "--report-out", str(report)])
        res = json_line(out)
        if rc != 3 or not res.get("malfeasance") or not report.exists():
            raise Failed(f"gnomon query exit {rc}, report written: {report.exists()}: {json.dumps(res)[:300]}")
        n = len(json.loads(report.read_text())["responses"])
        rc, out, _ = procs.run([peers.gnomon, "verify-report", str(report), "--json"])
        if rc != 3:
            raise Failed(f"gnomon verify-report of its own report: exit {rc}: {out.strip()[:300]}")
        return f"liar flagged; report of {n} exchanges; gnomon verify-report: proof of malfeasance"

    suite.add("gnomon", f"gnomon+liar+{third.name}", "1", "udp", "report", gnomon_report)

    def roughly_verifies(path: Path, fill_first_rand: bool) -> str:
        if not report.exists():
            raise Failed("no report from gnomon (see the row above)")
        if fill_first_rand:
            doc = json.loads(report.read_text())
            first = doc["responses"][0]
            if "rand" in first:
                raise Failed("gnomon's first entry has a rand: the adapted row is not needed")
            first["rand"] = base64.b64encode(bytes(32)).decode()
            path.write_text(json.dumps(doc))
        res_path = path if fill_first_rand else report
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        rc, out, err = procs.run([peers.roughly_python, str(PEERS / "roughly_peer.py"), "verify-report",
                                  str(res_path)], env=env)
        if rc != 3:
            raise Failed(f"roughly verify-report exit {rc}: {(out + err).strip()[-300:]}")
        return f"roughly: {out.strip()}"

    suite.add("roughly", "report by gnomon", "1", "-", "verify-report",
              lambda: roughly_verifies(report, False), xfail=ROUGHLY_RAND)
    suite.add("roughly", "report by gnomon, first rand added", "1", "-", "verify-report",
              lambda: roughly_verifies(workdir / "gnomon-report-rand.json", True))

    roughly_report = workdir / "roughly-report.json"

    def roughly_produces() -> str:
        # The liar first: its time is ahead, so the later honest answers prove it lied.
        eco = server_list(workdir / "roughly-eco.json", [(liar, V1), (g, V1), (ry, V1)])
        rc, out, err = procs.run([peers.roughly_cli, "ecosystem", "malfeasance", "--ecosystem-path", str(eco),
                                  "--report-location", str(roughly_report)],
                                 env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        if rc != 0 or "Malfeasance detected" not in out or not roughly_report.exists():
            raise Failed(f"roughly ecosystem malfeasance exit {rc}: {(out + err).strip()[-300:]}")
        return f"roughly wrote a report of {len(json.loads(roughly_report.read_text()))} exchanges"

    suite.add("roughly", "liar+gnomon+roughly", "1", "udp", "report", roughly_produces)

    def gnomon_verifies(wrap: bool) -> str:
        if not roughly_report.exists():
            raise Failed("no report from roughly (see the row above)")
        path = roughly_report
        if wrap:
            path = workdir / "roughly-report-rfc.json"
            path.write_text(json.dumps({"responses": json.loads(roughly_report.read_text())}))
        rc, out, _ = procs.run([peers.gnomon, "verify-report", str(path), "--json"])
        res = json_line(out)
        if rc != 3:
            raise Failed(f"gnomon verify-report exit {rc}: {json.dumps(res)[:300]}")
        return f"proof of malfeasance: {len(res.get('contradictions', []))} contradicting pairs"

    suite.add("gnomon verify-report", "report by roughly", "1", "-", "verify-report",
              lambda: gnomon_verifies(False))
    suite.add("gnomon verify-report", "report by roughly, in RFC object", "1", "-", "verify-report",
              lambda: gnomon_verifies(True))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gnomon", required=True, help="the gnomon binary")
    ap.add_argument("--tools", required=True, help="where the peers are installed (target/tools)")
    ap.add_argument("--workdir", help="keep logs and reports here (default: a temporary directory)")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only the matrix")
    ap.add_argument("--without", nargs=2, action="append", default=[], metavar=("PEER", "REASON"),
                    help="a peer that could not be installed: its rows are listed as SKIPPED with the reason")
    args = ap.parse_args()

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)

    tmp = None
    if args.workdir:
        workdir = Path(args.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="gnomon-interop-")
        workdir = Path(tmp.name)
    procs = Processes(workdir)
    suite = Suite(missing=dict(args.without))
    t0 = time.monotonic()
    try:
        try:
            build(suite, Peers(args, procs), procs, workdir)
        except Failed as err:
            print(f"interop: could not start the servers: {err}", file=sys.stderr)
            for log in sorted(workdir.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text()[-2000:]}", file=sys.stderr)
            return 1
        suite.run_all(verbose=not args.quiet)
    finally:
        procs.stop_all()
    suite.print_matrix()
    counts = {r: sum(1 for c in suite.checks if c.result == r)
              for r in ("pass", "expected-fail", "FAIL", "XPASS", "SKIPPED")}
    print(f"\n{counts['expected-fail']} expected failures, {counts['XPASS']} unexpected passes, "
          f"{time.monotonic() - t0:.1f} s")
    print(f"interop: {counts['pass'] + counts['expected-fail']} passed, {len(suite.failed())} failed")
    skip_log = os.environ.get("GNOMON_SKIP_LOG")
    for peer, why in suite.missing.items():
        line = f"SKIPPED interop rows with {peer} ({counts['SKIPPED']} rows): {why}"
        print(line)
        if skip_log:
            with open(skip_log, "a") as f:
                f.write(line + "\n")
    if suite.failed():
        print("interop: FAILED" + (f" (logs in {workdir})" if args.workdir else " (rerun with --workdir DIR to keep logs)"))
    if tmp is not None:
        tmp.cleanup()
    return 1 if suite.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
