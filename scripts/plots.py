"""Measure and draw the figures of docs/COST.md ("Plots").

Run by scripts/plots, which builds gnomon and provides matplotlib. Each
sweep starts `gnomon serve` with one worker pinned to core 0 and drives it
with `gnomon bench load` pinned to core 1, on loopback, every run bounded by
its --duration. Server-side counts come from the server's own /metrics.

  throughput.png   responses/s against the largest batch, per version
  latency.png      p50 and p99 latency against offered load (version 1)
  overload.png     answered/s against offered load up to 3x capacity
  ledger.png       where one request's time goes, per stage (docs/ledger.json)
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import benchlib  # noqa: E402

OUT = os.path.join(benchlib.ROOT, "docs", "plots")
VERSIONS = ["google", "draft-11", "draft-14", "rfc-10049"]
LABELS = {"google": "Google", "draft-11": "0x8000000b", "draft-14": "0x8000000c", "rfc-10049": "1"}
BATCHES = [1, 8, 64, 256, 1024]
SECS = float(os.environ.get("PLOT_SECS", "3"))


def load(server, version, pacing, workers, window):
    return benchlib.load(server, version, pacing, workers, window, SECS, timeout=0.25)


def throughput():
    rows = []
    for v in VERSIONS:
        for b in BATCHES:
            s = benchlib.Gnomon(b)
            try:
                # Enough in flight that batches of 1024 can form.
                r = load(s, v, ["--max"], 4, max(64, b // 2))
            finally:
                s.stop()
            rows.append({"version": v, "batch": b, "answered_per_sec": r["answer_rate"], **r["server"]})
            print(f"throughput {v} batch {b}: {r['answer_rate']:.0f}/s, mean batch {r['server']['mean_batch']:.1f}", flush=True)
    return rows


def sweep(name, version, batch, fractions, extra=(), capacity_window=64):
    s = benchlib.Gnomon(batch, extra)
    try:
        cap = load(s, version, ["--max"], 4, capacity_window)["server"]["responses_per_sec"]
        rows = []
        for f in fractions:
            # Open loop: the window never limits what is offered.
            r = load(s, version, ["--rate", str(round(cap * f))], 4, 4096)
            rows.append({"fraction": f, "capacity": cap, "offered_per_sec": r["send_rate"],
                         "answered_per_sec": r["answer_rate"], "latency_us": r["latency_us"],
                         "throttled": r["throttled"], **r["server"]})
            print(f"{name} {f:.2f}x of {cap:.0f}/s: offered {r['send_rate']:.0f}/s, server answered "
                  f"{r['server']['responses_per_sec']:.0f}/s, stale {r['server']['stale_per_sec']:.0f}/s, "
                  f"p50 {r['latency_us']['p50']} µs", flush=True)
    finally:
        s.stop()
    return rows


def draw(data):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for v in VERSIONS:
        pts = [r for r in data["throughput"] if r["version"] == v]
        ax.plot([r["batch"] for r in pts], [r["responses_per_sec"] / 1000 for r in pts], marker="o", label=LABELS[v])
    ax.set_xscale("log", base=2)
    ax.set_xticks(BATCHES, [str(b) for b in BATCHES])
    benchlib.dress(ax, "largest batch (--batch-size)", "responses/s (thousands)",
                   "gnomon serve, 1 worker on 1 core, 1024-byte requests", legend={"title": "version"})
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "throughput.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = data["latency"]
    x = [r["offered_per_sec"] / 1000 for r in pts]
    ax.plot(x, [r["latency_us"]["p50"] / 1000 for r in pts], marker="o", label="p50")
    ax.plot(x, [r["latency_us"]["p99"] / 1000 for r in pts], marker="s", label="p99")
    ax.axvline(pts[0]["capacity"] / 1000, color="grey", linestyle=":", label="capacity (--max)")
    benchlib.dress(ax, "offered load (thousand requests/s)", "latency (ms)",
                   "version 1, batch 64: latency against offered load", log_y=True, legend={})
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "latency.png"), dpi=110)

    fig, (ax, lat) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, label, style in (("overload", "500 ms limit (default)", "-"),
                              ("overload_stale", "20 ms limit", "--")):
        pts = data.get(key) or []
        if not pts:
            continue
        x = [r["offered_per_sec"] / 1000 for r in pts]
        ax.plot(x, [r["responses_per_sec"] / 1000 for r in pts], style, marker="o", label=f"answered, {label}")
        ax.plot(x, [r["stale_per_sec"] / 1000 for r in pts], style, marker="x", label=f"dropped stale, {label}")
        ax.plot(x, [r["overflow_per_sec"] / 1000 for r in pts], style, marker="^",
                label=f"kernel buffer overflow, {label}")
        lat.plot(x, [r["latency_us"]["p50"] / 1000 for r in pts], style, marker="o", label=f"p50, {label}")
        lat.plot(x, [r["latency_us"]["p99"] / 1000 for r in pts], style, marker="s", label=f"p99, {label}")
    ax.axhline(data["overload"][0]["capacity"] / 1000, color="grey", linestyle=":", label="capacity (--max)")
    benchlib.dress(ax, "offered load (thousand requests/s)", "thousand per second",
                   "overload: version 1, one signature per request", title_size=10, legend={"fontsize": 7})
    benchlib.dress(lat, "offered load (thousand requests/s)", "latency of answered requests (ms)",
                   "how old the answered requests were", title_size=10, log_y=True, legend={"fontsize": 7})
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "overload.png"), dpi=110)


def draw_ledger():
    path = os.path.join(benchlib.ROOT, "docs", "ledger.json")
    if not os.path.exists(path):
        return
    ledger = json.load(open(path))
    fams = ledger["families"]
    fig, axes = plt.subplots(1, len(fams), figsize=(12, 4.5), sharey=True)
    for ax, fam in zip(axes, fams):
        cells = fam["cells"]
        labels = [str(c["batch"]) for c in cells]
        bottom = [0.0] * len(cells)
        for i, stage in enumerate(ledger["stages"]):
            vals = [max(c["stages"][i], 0) / 1000 for c in cells]
            ax.bar(labels, vals, bottom=bottom, label=stage)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(fam["family"].split(" (")[0], fontsize=10)
        ax.set_xlabel("batch size")
        ax.set_yscale("log")
    axes[0].set_ylabel("µs per request (stacked)")
    axes[-1].legend(fontsize=7, loc="upper right")
    fig.suptitle("where one request's time goes (scripts/ledger)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "ledger.png"), dpi=110)


def main():
    os.makedirs(OUT, exist_ok=True)
    data_path = os.path.join(OUT, "data.json")
    if "--draw-only" in sys.argv:
        data = json.load(open(data_path))
    else:
        data = {
            "throughput": throughput(),
            "latency": sweep("latency", "rfc-10049", 64, [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25]),
            "overload": sweep("overload", "rfc-10049", 1, [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]),
            # The same with a short stale limit: old requests are dropped
            # before any work instead of queueing in the socket buffer.
            "overload_stale": sweep("overload, 20 ms limit", "rfc-10049", 1, [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
                                    ["--max-queue-delay", "20ms"]),
        }
        with open(data_path, "w") as f:
            json.dump(data, f, indent=1)
    draw(data)
    draw_ledger()
    print(f"wrote {OUT}/*.png")


if __name__ == "__main__":
    main()
