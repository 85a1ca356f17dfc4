#!/usr/bin/env python3
"""Counting for scripts/test-all.

Without arguments: read one step's output on stdin and print
"PASSED<TAB>FAILED" for the tests it ran, or "-<TAB>-" when it ran none
that this can read. Test runners recognised: cargo test ("test result:"
lines, summed), pytest (its closing "N passed, M failed in S s" line), and
the plain closing line "N passed, M failed" (interop, the package test).

With --table: read test-all's summary (name, exit code, passed, failed,
seconds; tab-separated) and print the table and the closing line
"N passed, N failed", where a step that failed without counting a failed
test of its own counts as one failure. Exit 1 when any step failed.
"""

import re
import sys

CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed")
PYTEST = re.compile(r"^=*\s*(.*\d+ (?:passed|failed).*) in [\d.]+s")
PLAIN = re.compile(r"^(?:\w+: )?(\d+) passed, (\d+) failed")


def count(lines):
    cargo = [CARGO.match(line) for line in lines]
    cargo = [m for m in cargo if m]
    if cargo:
        return sum(int(m[1]) for m in cargo), sum(int(m[2]) for m in cargo)
    for line in reversed(lines):
        m = PYTEST.match(line)
        if m:
            found = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|failed|error)", m[1]))
            return found.get("passed", 0), found.get("failed", 0) + found.get("error", 0)
        m = PLAIN.match(line)
        if m:
            return int(m[1]), int(m[2])
    return None


def table(rows):
    passed = failed = steps_failed = 0
    width = max(len(r[0]) for r in rows) if rows else 4
    width = min(width, 60)
    print(f"{'step':<{width}}  result  passed  failed  time")
    for name, rc, p, f, secs in rows:
        ok = rc == "0"
        if not ok:
            steps_failed += 1
        p_n = int(p) if p != "-" else 0
        f_n = int(f) if f != "-" else 0
        passed += p_n
        failed += f_n if (ok or f_n > 0) else 1
        print(f"{name[:width]:<{width}}  {'ok' if ok else 'FAILED':<6}  {p:>6}  {f:>6}  {secs:>4} s")
    print()
    print(f"{passed} passed, {failed} failed")
    return 1 if steps_failed else 0


def main():
    if sys.argv[1:] == ["--table"]:
        rows = [line.rstrip("\n").split("\t") for line in sys.stdin if line.strip()]
        sys.exit(table([(r[0], r[1], r[2], r[3], r[4]) for r in rows]))
    got = count([line.rstrip("\n") for line in sys.stdin])
    print("-\t-" if got is None else f"{got[0]}\t{got[1]}")


if __name__ == "__main__":
    main()
