"""Latency at half the maximum rate, and batch-wait's trade-off (docs/COST.md,
"Latency and batch-wait"). Run by scripts/bench-latency, which builds gnomon
and provides matplotlib.

For each round: the server's capacity (`--max`, the default batch-wait),
then for each batch-wait an open-loop run at half that capacity, recording
the server's CPU per response, p50 and p99 end to end (the load generator's
send to its receive, on loopback) and the mean batch. The order of the
waits turns from round to round so that a drift in the machine's load does
not fall on one setting. Writes docs/plots/batch-wait.json and
docs/plots/batch-wait.png and prints the table for COST.md.

  bench_latency.py [--secs S] [--rounds R] [--waits 0,50,100,200]
                   [--version NAME] [--batch N] [--draw-only]
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import benchlib

OUT = os.path.join(benchlib.ROOT, "docs", "plots")
DATA = os.path.join(OUT, "batch-wait.json")


def machine():
    model = "unknown"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "sched_fifo": bool(benchlib.RT)}


def run(version, batch, wait_us, pacing, workers, window, secs):
    load_before = os.getloadavg()[0]
    s = benchlib.Gnomon(batch, ["--batch-wait", f"{wait_us}us"], batch_disputed=False)
    try:
        r = benchlib.load(s, version, pacing, workers, window, secs, timeout=0.25)
    finally:
        s.stop()
    return {
        "wait_us": wait_us,
        "offered_per_sec": r["send_rate"],
        "answered_per_sec": r["answer_rate"],
        "loss_pct": r["loss_pct"],
        "throttled": r["throttled"],
        "latency_us": r["latency_us"],
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        **r["server"],
    }


def floor(rate, secs):
    """The do-nothing responder at the same rate: what the loopback path,
    the load generator and the machine add to every latency figure."""
    s = benchlib.null_server()
    try:
        r = benchlib.load(s, "1", ["--rate", str(rate)], 4, 4096, secs, timeout=0.25, any_reply=True)
    finally:
        s.stop()
    return {"latency_us": r["latency_us"], "cpu_us_per_response": r["server"]["cpu_us_per_response"],
            "load_before": os.getloadavg()[0]}


def measure(a):
    rounds = []
    for k in range(a.rounds):
        cap = run(a.version, a.batch, 100, ["--max"], 4, 64, a.secs)
        rate = round(cap["responses_per_sec"] / 2)
        print(f"round {k + 1}: capacity {cap['responses_per_sec']:,.0f}/s (load {cap['load_before']:.1f}), "
              f"offering {rate:,}/s", flush=True)
        shift = k % len(a.waits)
        rows = []
        for w in a.waits[shift:] + a.waits[:shift]:
            r = run(a.version, a.batch, w, ["--rate", str(rate)], 4, 4096, a.secs)
            lat = r["latency_us"]
            print(f"  batch-wait {w:>4} µs: {r['cpu_us_per_response']:.2f} µs CPU/response, "
                  f"p50 {lat['p50']:.0f} µs, p99 {lat['p99']:.0f} µs, mean batch {r['mean_batch']:.1f}, "
                  f"loss {r['loss_pct']:.2f} %, load {r['load_before']:.1f}", flush=True)
            rows.append(r)
        rows.sort(key=lambda r: r["wait_us"])
        null = floor(rate, a.secs)
        print(f"  do-nothing responder: p50 {null['latency_us']['p50']:.0f} µs, "
              f"p99 {null['latency_us']['p99']:.0f} µs", flush=True)
        rounds.append({"capacity": cap, "rate": rate, "runs": rows, "null": null})
    return {
        "machine": machine(),
        "taken": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "version": a.version,
        "batch": a.batch,
        "secs": a.secs,
        "waits": a.waits,
        "rounds": rounds,
    }


def per_wait(data, key):
    """{wait: [value per round]} for one figure of the runs."""
    out = {w: [] for w in data["waits"]}
    for rnd in data["rounds"]:
        for r in rnd["runs"]:
            out[r["wait_us"]].append(key(r))
    return out


def span(values):
    return min(values), statistics.median(values), max(values)


def table(data):
    cpu = per_wait(data, lambda r: r["cpu_us_per_response"])
    p50 = per_wait(data, lambda r: r["latency_us"]["p50"])
    p99 = per_wait(data, lambda r: r["latency_us"]["p99"])
    batch = per_wait(data, lambda r: r["mean_batch"])
    loss = per_wait(data, lambda r: r["loss_pct"])
    rates = [r["rate"] for r in data["rounds"]]
    loads = [r["load_before"] for rnd in data["rounds"] for r in rnd["runs"]]
    lines = [
        f"{data['version']}, batch {data['batch']}, open loop at half the capacity "
        f"({min(rates):,}–{max(rates):,}/s), {len(data['rounds'])} rounds of {data['secs']:g} s; "
        f"{data['machine']['cpu']}, load average {min(loads):.1f}–{max(loads):.1f}"
        f"{', SCHED_FIFO (BENCH_RT=1)' if data['machine'].get('sched_fifo') else ''}; taken {data['taken']}",
        "",
        "| batch-wait | server CPU µs/response | p50 µs | p99 µs | mean batch | loss |",
        "|---|---|---|---|---|---|",
    ]
    nulls = [r["null"] for r in data["rounds"] if "null" in r]
    if nulls:
        n50 = span([n["latency_us"]["p50"] for n in nulls])
        n99 = span([n["latency_us"]["p99"] for n in nulls])
        lines.append(f"| do-nothing responder | – | {n50[1]:.0f} ({n50[0]:.0f}–{n50[2]:.0f}) | "
                     f"{n99[1]:.0f} ({n99[0]:.0f}–{n99[2]:.0f}) | – | – |")
    for w in data["waits"]:
        c, m50, m99, b, lo = span(cpu[w]), span(p50[w]), span(p99[w]), span(batch[w]), span(loss[w])
        lines.append(f"| {w} µs | {c[1]:.2f} ({c[0]:.2f}–{c[2]:.2f}) | {m50[1]:.0f} ({m50[0]:.0f}–{m50[2]:.0f}) | "
                     f"{m99[1]:.0f} ({m99[0]:.0f}–{m99[2]:.0f}) | {b[1]:.1f} | {lo[2]:.2f} % |")
    return "\n".join(lines)


def draw(data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    waits = data["waits"]
    cpu = per_wait(data, lambda r: r["cpu_us_per_response"])
    p50 = per_wait(data, lambda r: r["latency_us"]["p50"])
    p99 = per_wait(data, lambda r: r["latency_us"]["p99"])

    def bars(ax, series, label, marker):
        lo, mid, hi = zip(*(span(series[w]) for w in waits))
        ax.errorbar(waits, mid, yerr=[[m - a for m, a in zip(mid, lo)], [b - m for m, b in zip(mid, hi)]],
                    marker=marker, capsize=4, label=label)

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    bars(left, cpu, "server CPU per response", "o")
    benchlib.dress(left, "batch-wait (µs)", "µs of server CPU per response",
                   "CPU per response (median, min–max of rounds)", title_size=10)
    left.set_ylim(bottom=0)
    for w in waits:
        b = statistics.median(r["mean_batch"] for rnd in data["rounds"] for r in rnd["runs"] if r["wait_us"] == w)
        left.annotate(f"batch {b:.0f}", (w, statistics.median(cpu[w])), textcoords="offset points",
                      xytext=(4, 8), fontsize=8)
    bars(right, p50, "p50", "o")
    bars(right, p99, "p99", "s")
    nulls = [r["null"] for r in data["rounds"] if "null" in r]
    if nulls:
        right.axhline(statistics.median(n["latency_us"]["p50"] for n in nulls), color="C0", linestyle="--",
                      alpha=0.6, label="p50, do-nothing responder")
        right.axhline(statistics.median(n["latency_us"]["p99"] for n in nulls), color="C1", linestyle="--",
                      alpha=0.6, label="p99, do-nothing responder")
    right.axhline(200, color="grey", linestyle=":", label="p99 target (200 µs)")
    benchlib.dress(right, "batch-wait (µs)", "latency end to end (µs)",
                   "latency on loopback (median, min–max of rounds)", title_size=10, log_y=True,
                   legend={"fontsize": 8})
    rates = [r["rate"] for r in data["rounds"]]
    loads = [r["load_before"] for rnd in data["rounds"] for r in rnd["runs"]]
    fifo = ", SCHED_FIFO" if data["machine"].get("sched_fifo") else ""
    fig.suptitle(f"batch-wait at half the capacity ({min(rates) / 1000:.0f}–{max(rates) / 1000:.0f}k/s), "
                 f"{data['version']}, 1 worker on 1 core; {data['machine']['cpu']}, "
                 f"load average {min(loads):.0f}–{max(loads):.0f}{fifo}; {data['taken']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "batch-wait.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--waits", default="0,50,100,200")
    ap.add_argument("--version", default="rfc-10049")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--draw-only", action="store_true")
    a = ap.parse_args()
    a.waits = [int(w) for w in a.waits.split(",")]
    os.makedirs(OUT, exist_ok=True)
    if a.draw_only:
        data = json.load(open(DATA))
    else:
        data = measure(a)
        with open(DATA, "w") as f:
            json.dump(data, f, indent=1)
    print(table(data))
    draw(data)
    print(f"wrote {DATA} and {OUT}/batch-wait.png")


if __name__ == "__main__":
    main()
