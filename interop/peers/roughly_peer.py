"""Drive roughly 0.3.0 (Python >= 3.12) for the interop suite.

Run with the interpreter of the virtual environment that holds roughly.

    roughly_peer.py serve [--host 127.0.0.1]
        Prints "port N" and "public key (base64): K", then serves until killed.
    roughly_peer.py query HOST PORT KEY --version V [--timeout S]
        Prints one JSON object; exit 0 verified, 1 no answer, 2 rejected.
    roughly_peer.py verify-report FILE
        Checks an RFC 10049 report ({"responses": [...]}, or roughly's bare
        list) with roughly's own checks; exit 3 when it proves inconsistent
        answers, 0 when consistent, 2 when the report is invalid.
"""

import argparse
import asyncio
import base64
import json
import signal
import sys

import roughly.client
import roughly.ecosystem
import roughly.errors
import roughly.server


async def serve(args: argparse.Namespace) -> int:
    config = roughly.server.Server.create(None, grease=False)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: roughly.server.UDPHandler(config), local_addr=(args.host, 0)
    )
    key = roughly.server.public_key_bytes(config.long_term_key)
    print(f"port {transport.get_extra_info('sockname')[1]}", flush=True)
    print(f"public key (base64): {base64.b64encode(key).decode()}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    transport.close()
    return 0


async def query(args: argparse.Namespace) -> int:
    key = base64.b64decode(args.key)
    try:
        async with asyncio.timeout(args.timeout):
            resp = await roughly.client.send_request(
                args.host, args.port, key, versions=(args.version,)
            )
    except TimeoutError:
        print(json.dumps({"ok": False, "error": "timeout"}))
        return 1
    except (roughly.errors.RoughtimeError, ValueError) as err:
        print(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"}))
        return 2
    srep = resp.signed_response
    print(
        json.dumps(
            {
                "ok": True,
                "midp_unix": srep.midpoint,
                "radius_s": srep.radius,
                "path_nodes": len(resp.path),
                "index": resp.index,
                "version": resp.version,
            }
        )
    )
    return 0


def verify_report(args: argparse.Namespace) -> int:
    with open(args.file, encoding="utf-8") as f:
        report = json.load(f)
    entries = report["responses"] if isinstance(report, dict) else report
    try:
        inconsistent = roughly.ecosystem.confirm_malfeasance(entries)
    except (roughly.errors.RoughtimeError, ValueError, KeyError) as err:
        print(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"}))
        return 2
    print(json.dumps({"ok": True, "entries": len(entries), "malfeasance": inconsistent}))
    return 3 if inconsistent else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--host", default="127.0.0.1")
    q = sub.add_parser("query")
    q.add_argument("host")
    q.add_argument("port", type=int)
    q.add_argument("key")
    q.add_argument("--version", type=lambda v: int(v, 0), required=True)
    q.add_argument("--timeout", type=float, default=10.0)
    r = sub.add_parser("verify-report")
    r.add_argument("file")
    args = parser.parse_args()
    if args.cmd == "serve":
        return asyncio.run(serve(args))
    if args.cmd == "query":
        return asyncio.run(query(args))
    return verify_report(args)


if __name__ == "__main__":
    sys.exit(main())
