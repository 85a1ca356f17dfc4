#!/usr/bin/env python3
"""Turn criterion stdout logs into markdown tables (median estimate, ns/op), one per log."""
import re, sys
UNIT = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
PAT = re.compile(r"^(\S+)\s+time:\s+\[(\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\]", re.M)
for path in sys.argv[1:]:
    rows, cols = {}, []
    for m in PAT.finditer(open(path, encoding="utf-8").read()):
        group, cand = m.group(1).split("/", 1)
        rows.setdefault(cand, {})[group] = float(m.group(4)) * UNIT[m.group(5)]
        if group not in cols:
            cols.append(group)
    print(f"\n{path} (ns/op, criterion median estimate)\n")
    print("| candidate | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for cand, d in rows.items():
        print(f"| {cand} | " + " | ".join(f"{d[g]:,.0f}" if g in d else "" for g in cols) + " |")
