#!/usr/bin/env python3
"""Verified responses per second: gnomon.verify beside pyroughtime.

Not a test: it prints figures and asserts nothing. It needs the gnomon
package and, for the comparison, pyroughtime 1.0.1 (PyPI) in the same
Python:

    target/python-venv/bin/pip install ./bindings/python
    target/python-venv/bin/pip install --no-deps pyroughtime==1.0.1 ed25519==1.5 pycryptodome==4.4.0
    target/python-venv/bin/python bindings/python/bench/verify_rate.py

(pyroughtime's declared dependency pycrypto does not build on Python 3.11;
pycryptodome has the same hash API, as scripts/interop notes.)

Responses come from a real `gnomon serve` on loopback (started here, killed
at the end), one per version, each verified over and over for --seconds.
pyroughtime verifies only inside RoughtimeClient.query, so its network
call is replaced by one returning the recorded response, and its nonce's
random bytes are fixed so that response answers it; what is timed is its
request building, parsing and verification, all of query but the socket.
pyroughtime speaks only draft 07, so that is the version compared.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Tuple

import gnomon

REPO = Path(__file__).resolve().parents[3]


def start_server(exe: Path):
    proc = subprocess.Popen(
        [str(exe), "serve", "--listen", "127.0.0.1:0", "--summary-interval", "0", "--workers", "1",
         "--clock-unsynchronized", "answer-with-radius"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    key = proc.stdout.readline().split(": ", 1)[1].strip()
    for line in proc.stderr:
        if "listening on udp " in line:
            host, port = line.split("listening on udp ", 1)[1].split()[0].rsplit(":", 1)
            return proc, key, (host, int(port))
    proc.kill()
    sys.exit("gnomon serve did not start")


def exchange(addr, request: bytes) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(10)
        s.sendto(request, addr)
        return s.recvfrom(65_536)[0]


def rate(fn, seconds: float) -> Tuple[float, float]:
    """Calls per second of wall time, and per second of this process's CPU
    time: the second barely moves when other work shares the cores, the
    first drops with the load."""
    n = 0
    start, cpu = time.perf_counter(), time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(50):
            fn()
        n += 50
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start), n / (time.process_time() - cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gnomon", type=Path, default=REPO / "target" / "debug" / "gnomon",
                    help="the gnomon binary that serves the responses")
    ap.add_argument("--seconds", type=float, default=3.0, help="time per figure")
    args = ap.parse_args()
    proc, key, addr = start_server(args.gnomon)
    try:
        print(f"{'implementation':<28} {'version':<10} {'verified/s':>12} {'per CPU s':>12}")
        for version in ("rfc-10049", "draft-08", "draft-07", "google"):
            req = gnomon.build_request(version, public_key=key)
            resp = exchange(addr, req)
            gnomon.verify(req, resp, key)  # once, untimed: it must pass
            r, c = rate(lambda: gnomon.verify(req, resp, key), args.seconds)
            print(f"{'gnomon.verify':<28} {version:<10} {r:>12,.0f} {c:>12,.0f}")
        try:
            import pyroughtime.pyroughtime as prt
        except ImportError:
            print("pyroughtime not installed: no comparison (see this script's docstring)")
            return
        blind = bytes(range(32))
        nonce = hashlib.new("sha512_256", blind).digest() if "sha512_256" in hashlib.algorithms_available \
            else prt.SHA512.new(blind, truncate="256").digest()
        resp = exchange(addr, gnomon.build_request("draft-07", nonce))
        prt.os.urandom = lambda n: blind[:n]
        prt.RoughtimeClient._RoughtimeClient__udp_query = staticmethod(
            lambda address, port, packet, timeout: (prt.RoughtimePacket(packet=resp), 0.0, resp)
        )
        client = prt.RoughtimeClient()

        def pyrt() -> None:
            client.prev_replies = []
            client.query("127.0.0.1", 0, key)

        pyrt()  # once, untimed: it must pass
        r, c = rate(pyrt, args.seconds)
        print(f"{'pyroughtime 1.0.1 query':<28} {'draft-07':<10} {r:>12,.0f} {c:>12,.0f}")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
