"""The XDP-against-sockets table of docs/COST.md ("The AF_XDP path"); run
by scripts/bench-xdp, which builds gnomon and makes the namespaces first.

  bench_xdp.py SECONDS RATE[,RATE...] SERVER_NS CLIENT_NS SERVER_ADDR IFACE

Runs inside CLIENT_NS (the load generator's side of the veth pair). For
each path, a `gnomon serve` with one worker pinned to core 0 in SERVER_NS
(plus, for the XDP path, the queue's AF_XDP worker, on the same core);
`gnomon bench load` pinned to core 1 here, at `--max` and at each RATE.
Reported per response: the server process's CPU (user + system, from
/proc/PID/stat), split into protocol work (the workers' own stage clocks)
and the rest; core 0's busy time and the whole machine's (from
/proc/stat, softirq included), since on veth the kernel's receive work
runs where scripts/bench-xdp's RPS steering (or, without it, the sender)
puts it.
Standard library only (and scripts/benchlib.py).
"""

import json
import os
import re
import subprocess
import sys
import time

import benchlib

BIN = benchlib.BIN
PORT, METRICS = 2002, 25420
# BENCH_RT=1: server and generator under SCHED_FIFO, as in scripts/benchlib.py,
# so that builds sharing the machine do not decide the figures.
RT = ["chrt", "-f", "10"] if os.environ.get("BENCH_RT") else []


def busy(cpu=""):
    """Busy time, s, of every core (`cpu` "") or of core `cpu`, softirq and
    irq included, from /proc/stat."""
    with open("/proc/stat") as f:
        line = next(l for l in f if l.split()[0] == f"cpu{cpu}")
    v = [int(x) for x in line.split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, ns, addr, iface):
        xdp = ["--xdp", iface] if iface else []
        self.addr = addr
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, *RT, "taskset", "-c", "0", BIN, "serve", "--listen", f"{addr}:{PORT}",
             "--workers", "1", "--batch-size", "64", "--summary-interval", "0", "--tcp-enable=false",
             "--metrics", f"{addr}:{METRICS}",
             # The generator is exempt, as loopback is in scripts/bench-server.
             "--limit-allow", "10.78.0.0/24", *xdp],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.key = benchlib.started(self.proc, self.metrics)
        m = self.metrics()
        attached = [k for k in m if k.startswith("gnomon_xdp_attached")]
        if bool(iface) != bool(attached):
            raise SystemExit(f"xdp attached: {attached}, asked: {iface!r}")
        self.mode = attached[0] if attached else "sockets"

    def cpu_secs(self):
        return benchlib.cpu_secs(self.proc.pid)

    def metrics(self):
        return benchlib.scrape(f"http://{self.addr}:{METRICS}/metrics")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def load(server, pacing, window, secs):
    args = [*RT, "taskset", "-c", "1", BIN, "bench", "load", f"{server.addr}:{PORT}", "--allow-remote",
            "--key", server.key, "--protocol", "rfc-10049", *pacing, "--duration", str(secs), "--workers", "2",
            "--window", str(window), "--timeout", "0.2", "--verify-fraction", "0.01", "--json"]
    # Metrics after the server published (every 200 ms).
    before, cpu0, busy0, core0 = server.metrics(), server.cpu_secs(), busy(), busy(0)
    out = subprocess.run(args, capture_output=True, text=True, timeout=secs + 60)
    busy1, core1, cpu1 = busy(), busy(0), server.cpu_secs()
    time.sleep(0.5)
    after = server.metrics()
    if not out.stdout.strip():
        raise SystemExit(f"bench load failed: {out.stderr}")
    r = json.loads(out.stdout)
    if r.get("invalid"):
        raise SystemExit(f"{r['invalid']} invalid responses")
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    responses = max(benchlib.total(d, "gnomon_responses_total"), 1)
    return {
        "answered_per_sec": r["answered"] / r["elapsed_secs"],
        "loss_pct": r["loss_pct"],
        "verified": r["verified"],
        "server_us": (cpu1 - cpu0) * 1e6 / responses,
        "machine_us": (busy1 - busy0) * 1e6 / responses,
        "core_us": (core1 - core0) * 1e6 / responses,
        "generator_us": r["cpu_secs"] * 1e6 / max(r["answered"], 1),
        "xdp_sent": d.get("gnomon_xdp_frames_sent_total", 0),
        # The worker's own clock on parsing and answering; the rest of the
        # server's CPU is I/O: the rings or the socket calls, and copies.
        "protocol_us": (d.get('gnomon_stage_seconds_total{stage="parse"}', 0)
                        + d.get('gnomon_stage_seconds_total{stage="respond"}', 0)) * 1e6 / responses,
        "responses": responses,
        "mean_batch": d.get("gnomon_batch_size_sum", 0) / max(d.get("gnomon_batch_size_count", 0), 1),
        "p50": r["latency_us"]["p50"],
        "p99": r["latency_us"]["p99"],
    }


def main():
    secs, rates, server_ns, _client_ns, addr, iface = sys.argv[1:7]
    secs = float(secs)
    print(f"load average {os.getloadavg()[0]:.1f} at the start")
    print("| path | offered | answered/s | loss | server CPU µs/response | of which protocol | of which I/O "
          "| server core µs/response | machine CPU µs/response | generator CPU µs/answer | mean batch | p50 µs "
          "| p99 µs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    loads = [("--max", ["--max"], 32)] + [(f"{int(r):,}/s", ["--rate", r], 4096) for r in rates.split(",") if r]
    for label, pacing, window in loads:
        for name, use in (("sockets", None), ("AF_XDP", iface)):
            server = Server(server_ns, addr, use)
            try:
                r = load(server, pacing, window, secs)
            finally:
                server.stop()
            if use and r["xdp_sent"] < 0.99 * r["responses"]:
                raise SystemExit(f"only {r['xdp_sent']:.0f} of {r['responses']:.0f} answers went through AF_XDP")
            mode = " (" + re.search(r'mode="([a-z]+)"', server.mode).group(1) + ")" if use else ""
            print(f"| {name}{mode} | {label} | {r['answered_per_sec']:,.0f} | {r['loss_pct']:.2f} % | "
                  f"{r['server_us']:.2f} | {r['protocol_us']:.2f} | {r['server_us'] - r['protocol_us']:.2f} | "
                  f"{r['core_us']:.2f} | {r['machine_us']:.2f} | {r['generator_us']:.2f} | "
                  f"{r['mean_batch']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
