"""The end-to-end table of docs/COST.md ("Server end to end"); run by
scripts/bench-server, which builds gnomon and installs roughenough first.

  bench_server.py SECONDS [RATE] ROUGHENOUGH_BINARY

With BENCH_VERSIONS set (`all`, or profile names separated by commas), the
rows are gnomon answering each of those profiles under the server's own
policy (versions with a disputed tree orientation one per signature, as by
default), then the do-nothing responder: docs/COST.md, "Every version".
"""

import os

import sys

import benchlib


def main():
    secs, rate, rough = float(sys.argv[1]), sys.argv[2], sys.argv[3]
    pacing, window = (["--rate", rate], 4096) if rate else (["--max"], 32)
    print(f"load average {os.getloadavg()[0]:.1f} at the start")
    print("| server | responses/s | invalid of verified | loss | server CPU µs/response | mean batch "
          "| generator CPU µs/answer | p50 µs | p99 µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    chosen = os.environ.get("BENCH_VERSIONS")
    if chosen:
        names = benchlib.PROFILES if chosen == "all" else chosen.split(",")
        rows = [(f"gnomon {v} (default policy)", lambda: benchlib.Gnomon(batch_disputed=False), v, False)
                for v in names]
    else:
        rows = [(f"gnomon {v}", lambda: benchlib.Gnomon(), v, False)
                for v in ("google", "draft-11", "draft-14", "rfc-10049")]
        rows.append(("roughenough-server 2.2.0 (v1)", lambda: benchlib.roughenough(rough), "1", False))
    rows.append(("null-server (416-byte replies)", benchlib.null_server, "1", True))
    for name, start, version, any_reply in rows:
        server = start()
        try:
            r = benchlib.load(server, version, pacing, 2, window, secs, any_reply=any_reply)
        finally:
            server.stop()
        lat = r["latency_us"]
        print(f"| {name} | {r['answered'] / r['elapsed_secs']:,.0f} | {r['invalid']} of {r['verified']} | "
              f"{r['loss_pct']:.2f} % | {r['server']['cpu_us_per_response']:.2f} | "
              f"{r['server']['mean_batch']:.1f} | {r['generator_cpu_us_per_answer']:.2f} | {lat['p50']:.0f} | "
              f"{lat['p99']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
