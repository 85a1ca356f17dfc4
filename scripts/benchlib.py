"""What scripts/bench-server and scripts/plots share: a server under test
pinned to core 0, `gnomon bench load` pinned to core 1 on loopback, and the
server's CPU time read from /proc. Standard library only."""

import json
import os
import re
import subprocess
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GNOMON_BIN") or os.path.join(ROOT, "target", "release", "gnomon")
# The server under test, when it is another build than the load generator's
# (the static one: docs/OPERATIONS.md, "Static binary, container and
# Kubernetes").
SERVER_BIN = os.environ.get("GNOMON_SERVER_BIN") or BIN
PORT, METRICS = 25419, 25420
# BENCH_RT=1 runs the server and the load generator under SCHED_FIFO
# (priority 10, needs root): on a machine shared with builds they then run
# whenever they are ready, instead of waiting behind a dozen compilers,
# which otherwise decide every latency figure. The kernel still keeps 5 %
# of each core for everything else (sched_rt_runtime_us).
RT = ["chrt", "-f", "10"] if os.environ.get("BENCH_RT") else []
# Every row of the profile table (crates/protocol/src/profile.rs), by name.
PROFILES = ["google", "draft-01", "draft-02", "draft-03", "draft-04", "draft-05", "draft-06", "draft-07",
            "draft-08", "draft-09", "draft-10", "draft-11", "draft-12", "draft-14", "rfc-10049"]
ZERO_SEED_KEY = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"


class Process:
    """A server pinned to core 0; `key` is its public key, when it has one."""

    def __init__(self, argv, key=None, ready=None):
        self.proc = subprocess.Popen([*RT, "taskset", "-c", "0", *argv], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.key = key
        if ready:
            ready(self)

    def cpu_secs(self):
        return cpu_secs(self.proc.pid)

    def metrics(self):
        return {}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def cpu_secs(pid):
    """A process's user + system time, s, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(url):
    """A Prometheus endpoint's samples: series (name and labels) to value."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    values = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            values[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return values


def wait_for_port(port, deadline_s=10):
    """Until something answers UDP on loopback `port` is not knowable without
    speaking its protocol; a bound port is: wait for /proc/net/udp to list it."""
    hexport = f":{port:04X}"
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with open("/proc/net/udp") as f:
            if any(hexport in line.split()[1] for line in f.readlines()[1:]):
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing bound UDP port {port}")


def started(proc, metrics):
    """The public key a starting `gnomon serve` prints first, once its
    metrics endpoint answers (within 10 s); the endpoint's first reading
    is discarded."""
    line = proc.stdout.readline()
    if not line.startswith("public key (base64): "):
        raise SystemExit(f"serve did not start: {line!r}")
    end = time.monotonic() + 10
    while True:
        try:
            metrics()
            return line.split(": ", 1)[1].strip()
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


class Gnomon(Process):
    """gnomon serve, one worker, with metrics. `batch_disputed` batches the
    versions whose tree orientation is disputed (off by default in gnomon,
    on here unless asked: the ledger measures them batched)."""

    def __init__(self, batch=64, extra=(), batch_disputed=True):
        disputed = ["--batch-disputed"] if batch_disputed else []
        super().__init__([SERVER_BIN, "serve", "--listen", f"127.0.0.1:{PORT}", "--workers", "1",
                          "--batch-size", str(batch), *disputed, "--summary-interval", "0",
                          "--tcp-enable=false", "--metrics", f"127.0.0.1:{METRICS}", *extra])
        self.key = started(self.proc, self.metrics)

    def metrics(self):
        return scrape(f"http://127.0.0.1:{METRICS}/metrics")


def roughenough(binary):
    """roughenough-server with its all-zero test seed (fixed public key)."""
    p = Process([binary, "-i", "127.0.0.1", "-p", str(PORT), "-j", "1", "--insecure-zero-seed", "-q"],
                key=ZERO_SEED_KEY)
    wait_for_port(PORT)
    return p


def null_server(reply_size=416):
    """The do-nothing responder; its replies are not Roughtime."""
    p = Process([SERVER_BIN, "bench", "null-server", "--listen", f"127.0.0.1:{PORT}",
                 "--reply-size", str(reply_size)])
    wait_for_port(PORT)
    return p


def total(values, name):
    return sum(v for k, v in values.items() if k == name or k.startswith(name + "{"))


def load(server, version, pacing, workers, window, secs, timeout=0.2, any_reply=False):
    """Run `gnomon bench load` against `server`; its JSON report, plus the
    server's CPU per response and, for gnomon, its own counters."""
    args = [*RT, "taskset", "-c", "1", BIN, "bench", "load", f"127.0.0.1:{PORT}",
            "--protocol", version, *pacing, "--duration", str(secs), "--workers", str(workers),
            "--window", str(window), "--timeout", str(timeout), "--verify-fraction", "0.01", "--json"]
    args += ["--any-reply"] if any_reply else ["--key", server.key]
    before, cpu0 = server.metrics(), server.cpu_secs()
    out = subprocess.run(args, capture_output=True, text=True, timeout=secs + 60)
    after, cpu1 = server.metrics(), server.cpu_secs()
    if not out.stdout.strip():
        raise SystemExit(f"bench load failed: {out.stderr}")
    r = json.loads(out.stdout)
    if r.get("invalid"):
        raise SystemExit(f"{version}: {r['invalid']} invalid responses")
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    responses = total(d, "gnomon_responses_total") if d else r["answered"]
    r["server"] = {
        "responses_per_sec": responses / r["send_secs"],
        "received_per_sec": total(d, "gnomon_requests_received_total") / r["send_secs"],
        "stale_per_sec": d.get('gnomon_dropped_total{reason="stale"}', 0) / r["send_secs"],
        "overflow_per_sec": d.get("gnomon_kernel_receive_overflow_total", 0) / r["send_secs"],
        "mean_batch": d.get("gnomon_batch_size_sum", 0) / max(d.get("gnomon_batch_size_count", 0), 1),
        "cpu_us_per_response": (cpu1 - cpu0) * 1e6 / max(responses, 1),
    }
    # The load generator's own CPU per answer: when it nears one core's
    # worth, the generator, not the server, limits a --max run.
    r["generator_cpu_us_per_answer"] = r["cpu_secs"] * 1e6 / max(r["answered"], 1)
    return r


def dress(ax, xlabel, ylabel, title, *, title_size=None, log_y=False, legend=None):
    """The labels, title, grid and legend every plot of scripts/plots and
    scripts/bench-latency sets the same way; `legend` is the legend's
    keyword arguments, or None for no legend."""
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, **({"fontsize": title_size} if title_size else {}))
    ax.grid(alpha=0.3)
    if legend is not None:
        ax.legend(**legend)
