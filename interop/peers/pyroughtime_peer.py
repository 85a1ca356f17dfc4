"""Drive pyroughtime 1.0.1 (draft-07) for the interop suite.

Run with the interpreter of the virtual environment that holds pyroughtime.

    pyroughtime_peer.py serve [--host 127.0.0.1]
        Prints "port N" and "public key (base64): K", then serves until killed.
    pyroughtime_peer.py query HOST PORT KEY [--tcp] [--oldver] [--timeout S]
        Prints one JSON object; exit 0 verified, 1 no answer, 2 rejected.
"""

import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time

# pyroughtime stamps its answers with the local wall clock (datetime.now()),
# so the process must run in UTC for its MJD times to be right.
os.environ["TZ"] = "UTC"
time.tzset()

from pyroughtime.pyroughtime import (  # noqa: E402
    RoughtimeClient,
    RoughtimeError,
    RoughtimeServer,
)


def serve(args: argparse.Namespace) -> int:
    priv, publ = RoughtimeServer.create_key()
    cert, dpriv = RoughtimeServer.create_delegate_key(priv)
    server = RoughtimeServer(cert, dpriv)
    # start() binds, runs the receive thread and joins it: run it beside us
    # so that we can report the port the kernel chose.
    threading.Thread(target=server.start, args=(args.host, 0), daemon=True).start()
    deadline = time.monotonic() + 10
    while getattr(server, "sock", None) is None or not getattr(server, "run", False):
        if time.monotonic() > deadline:
            print("pyroughtime server did not bind", file=sys.stderr)
            return 70
        time.sleep(0.01)
    print(f"port {server.sock.getsockname()[1]}", flush=True)
    print(f"public key (base64): {publ.decode()}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    return 0


def query(args: argparse.Namespace) -> int:
    client = RoughtimeClient()
    try:
        reply = client.query(
            args.host,
            args.port,
            args.key,
            timeout=args.timeout,
            newver=not args.oldver,
            protocol="tcp" if args.tcp else "udp",
        )
    except RoughtimeError as err:
        no_answer = "Timeout" in str(err)
        print(json.dumps({"ok": False, "error": str(err)}))
        return 1 if no_answer else 2
    except Exception as err:  # a parse failure inside pyroughtime
        print(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"}))
        return 2
    midp = reply["datetime"].replace(tzinfo=datetime.timezone.utc).timestamp()
    print(
        json.dumps(
            {
                "ok": True,
                "midp_unix": midp,
                "radius_s": reply["radi"] / 1e6,
                "path_nodes": reply["pathlen"],
                "version": reply.get("ver"),
            }
        )
    )
    return 0


def main() -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--host", default="127.0.0.1")
    q = sub.add_parser("query")
    q.add_argument("host")
    q.add_argument("port", type=int)
    q.add_argument("key")
    q.add_argument("--tcp", action="store_true")
    q.add_argument("--oldver", action="store_true")
    q.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    if args.cmd == "serve":
        return serve(args)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    return query(args)


if __name__ == "__main__":
    sys.exit(main())
