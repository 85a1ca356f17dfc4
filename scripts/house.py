#!/usr/bin/env python3
"""The house's shape, crate by crate (issue 35): circles among each
crate's top-level modules, and source files past 600 lines.

A top-level module is a file or directory directly under the crate's
`src/` (beside lib.rs or main.rs). Module M uses module N when any file of
M names `crate::N` (in a `use`, a path or a doc link) or, in M's own
top-level file, `super::N`. A circle is a strongly connected set of two
or more modules. Text is read, not types: a name in a comment counts too,
which errs towards finding circles, never towards hiding one. A name
reached through the crate root's re-exports (`crate::Tag`, capitalised)
is not followed to its module: write the module path.

A crate may also have a map of layers in docs/DESIGN.md: a fenced block
after a line `<!-- layers: NAME -->` (NAME as printed below), one row
per layer, `N │ module, module │ what they are`. A module may then use only
modules of lower layers; a use against the map, a module the map leaves
out and a module the map names that is not there are all broken rules.

    scripts/house.py            print every crate's circles and long files
    scripts/house.py --check    the same, and exit 1 when a rule is broken:
                                a circle in protocol or server, a circle of
                                more than 2 modules elsewhere, more than one
                                integration-test binary in a crate, a file
                                (of src/ or tests/) past 600 lines (generated files and data tables
                                are listed in EXEMPT below, with the reason),
                                a use against a crate's map of layers
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 600
NO_CIRCLES = {"protocol", "server"}
# Files allowed past the limit: generated code or data, not logic.
EXEMPT = {}

DESIGN = os.path.join(ROOT, "docs", "DESIGN.md")
MAP = re.compile(r"<!--\s*layers:\s*([A-Za-z0-9_-]+)\s*-->")
ROW = re.compile(r"^\s*(\d+)\s*│([^│]*)│")

USE = re.compile(r"\bcrate::(?:\{([^}]*)\}|([a-z_][a-z0-9_]*))")
SUPER = re.compile(r"\bsuper::(?:\{([^}]*)\}|([a-z_][a-z0-9_]*))")


def crates():
    for parent in ("crates", "bindings"):
        base = os.path.join(ROOT, parent)
        for name in sorted(os.listdir(base)):
            src = os.path.join(base, name, "src")
            if os.path.isdir(src):
                yield name, src


def rs_files(path):
    if os.path.isfile(path):
        yield path
        return
    for d, _, files in os.walk(path):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def modules(src):
    """Top-level module name -> its files."""
    out = {}
    for entry in sorted(os.listdir(src)):
        full = os.path.join(src, entry)
        if entry in ("lib.rs", "main.rs"):
            continue
        if entry.endswith(".rs"):
            out.setdefault(entry[:-3], []).append(full)
        elif os.path.isdir(full):
            out.setdefault(entry, []).extend(rs_files(full))
    return out


def names(match):
    group, single = match.groups()
    if single:
        return [single]
    return [n.strip().split("::")[0].split(" ")[0] for n in group.split(",") if n.strip()]


def graph(src):
    mods = modules(src)
    edges = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            text = open(f, encoding="utf-8").read()
            used = [n for x in USE.finditer(text) for n in names(x)]
            # `super::` from the module's own top file is the crate root.
            if os.path.dirname(f) == src or f.endswith(os.sep + m + os.sep + "mod.rs"):
                used += [n for x in SUPER.finditer(text) for n in names(x)]
            edges[m].update(n for n in used if n in mods and n != m)
    return edges


def circles(edges):
    """Tarjan's strongly connected components of two or more nodes."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layer_maps():
    """Crate name -> {module: layer}, from docs/DESIGN.md's maps."""
    maps, name, inside = {}, None, False
    if not os.path.exists(DESIGN):
        return maps
    for line in open(DESIGN, encoding="utf-8"):
        mark = MAP.search(line)
        if mark and not inside:
            name = mark.group(1)
            maps[name] = {}
        elif name and line.lstrip().startswith("```"):
            if inside:
                name, inside = None, False
            else:
                inside = True
        elif name and inside:
            row = ROW.match(line)
            if row:
                for m in row.group(2).split(","):
                    if m.strip():
                        maps[name][m.strip()] = int(row.group(1))
    return maps


def against_map(edges, layers):
    """Every use that does not go to a lower layer, and every module the
    map and the crate do not agree on."""
    out = []
    for m in sorted(edges):
        if m not in layers:
            out.append(f"{m} is in no layer")
            continue
        for n in sorted(edges[m]):
            if n in layers and layers[n] >= layers[m]:
                out.append(f"{m} (layer {layers[m]}) uses {n} (layer {layers[n]})")
    out += [f"{m} is mapped but not in the crate" for m in sorted(set(layers) - set(edges))]
    return out


def test_binaries(crate_dir):
    """The integration-test binaries Cargo makes for a crate: each
    tests/*.rs file and each tests/*/main.rs."""
    tests = os.path.join(crate_dir, "tests")
    if not os.path.isdir(tests):
        return []
    out = []
    for e in sorted(os.listdir(tests)):
        full = os.path.join(tests, e)
        if e.endswith(".rs") or os.path.isfile(os.path.join(full, "main.rs")):
            out.append(os.path.relpath(full, ROOT))
    return out


def long_files(src):
    # The crate's own code and its tests: both are read and kept.
    tests = os.path.join(os.path.dirname(src), "tests")
    for f in list(rs_files(src)) + (list(rs_files(tests)) if os.path.isdir(tests) else []):
        rel = os.path.relpath(f, ROOT)
        n = sum(1 for _ in open(f, encoding="utf-8"))
        if n > LIMIT:
            yield rel, n


def main():
    check = "--check" in sys.argv[1:]
    broken = []
    maps = layer_maps()
    for name, src in crates():
        edges = graph(src)
        found = circles(edges)
        longs = list(long_files(src))
        parts = []
        for c in found:
            bad = name in NO_CIRCLES or len(c) > 2
            parts.append(f"  circle of {len(c)}: {' ↔ '.join(c)}" + ("  (not allowed)" if bad else ""))
            if bad:
                broken.append(f"{name}: circle {c}")
        for rel, n in longs:
            exempt = EXEMPT.get(rel)
            parts.append(f"  {rel}: {n} lines" + (f"  (exempt: {exempt})" if exempt else "  (past 600)"))
            if not exempt:
                broken.append(f"{rel}: {n} lines")
        binaries = test_binaries(os.path.dirname(src))
        if len(binaries) > 1:
            parts.append(f"  {len(binaries)} integration-test binaries: {', '.join(binaries)}  (one per crate)")
            broken.append(f"{name}: {len(binaries)} test binaries")
        off = against_map(edges, maps[name]) if name in maps else []
        for o in off:
            parts.append(f"  against the map of layers (docs/DESIGN.md): {o}  (not allowed)")
            broken.append(f"{name}: {o}")
        mapped = " (layers as docs/DESIGN.md maps them)" if name in maps and not off else ""
        counts = f"{len(found)} circle(s), {len(longs)} long file(s)" + (f", {len(off)} against the map" if off else "")
        print(f"{name}: " + ("clean" if not parts else counts) + mapped)
        for p in parts:
            print(p)
    if check and broken:
        print(f"\n{len(broken)} rule(s) broken", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
