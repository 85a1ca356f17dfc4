"""`build_request`, `verify` and `verify_report` without a network: the
external vectors byte for byte, garbage, bad keys and wrong types."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from conftest import VECTORS

# Cloudflare's generator (tests/external-vectors/README.md): the seeds'
# public keys and the fixed times of every file.
CF_ROOT = bytes.fromhex("1ce90cc9d5476809f9088f52018d9a8e5b8449951e2468e13de00d0234d50d14")
CF_ONLINE = bytes.fromhex("81d19b7ff58d408302a83f24da533dde16b71f80f8c1b8ce2798ae1571de3779")
CF_FILES = {
    "google": "roughtime_google_{}.json",
    "draft-08": "roughtime_ietf_draft08_{}.json",
    "draft-11": "roughtime_ietf_draft11_{}.json",
}
APPENDIX_B = VECTORS / "ietf-draft-19" / "draft-ietf-ntp-roughtime-19-appendix-b-malfeasance-report.json"


def cloudflare(version: str, batch: str):
    doc = json.loads((VECTORS / "cloudflare-roughtime" / CF_FILES[version].format(batch)).read_text())
    return [bytes.fromhex(r) for r in doc["request"]], [bytes.fromhex(r) for r in doc["replies"]]


@pytest.mark.parametrize("batch", ["001", "010", "100"])
@pytest.mark.parametrize("version", sorted(CF_FILES))
def test_cloudflare_vectors_verify(gnomon, version, batch):
    requests, replies = cloudflare(version, batch)
    for i, (req, rep) in enumerate(zip(requests, replies)):
        for key in (CF_ROOT, CF_ROOT.hex(), __import__("base64").b64encode(CF_ROOT).decode()):
            a = gnomon.verify(req, rep, key)
            assert a.version == version, i
            assert a.midpoint_us == 50_000_000, i
            assert a.radius_us == 5_000_000, i
            assert a.delegation_us == (0, 100_000_000), i
            assert a.online_key == CF_ONLINE, i
            assert a.midpoint.isoformat() == "1970-01-01T00:00:50+00:00"
            assert a.rtt is None and a.server is None


def test_cloudflare_reply_to_another_request_is_rejected(gnomon):
    requests, replies = cloudflare("draft-08", "010")
    with pytest.raises(gnomon.InvalidAnswer) as e:
        gnomon.verify(requests[0], replies[1], CF_ROOT)
    assert e.value.reason in ("nonce_mismatch", "merkle_root")


def test_wrong_key_is_an_invalid_delegation(gnomon):
    requests, replies = cloudflare("draft-11", "001")
    with pytest.raises(gnomon.InvalidAnswer) as e:
        gnomon.verify(requests[0], replies[0], CF_ONLINE)
    assert e.value.reason == "delegation_signature"
    assert "long-term key" in str(e.value)


@pytest.mark.parametrize(
    "key, kind",
    [
        ("", ValueError),
        ("not base64!", ValueError),
        ("AAAA", ValueError),  # 3 bytes
        (bytes(31), ValueError),
        (bytes(33), ValueError),
        (b"", ValueError),
        (None, TypeError),
        (32, TypeError),
        ([0] * 32, TypeError),
        (bytearray(32), TypeError),
    ],
)
def test_malformed_keys_are_usage_errors(gnomon, key, kind):
    requests, replies = cloudflare("google", "001")
    with pytest.raises(kind):
        gnomon.verify(requests[0], replies[0], key)
    with pytest.raises(kind):
        gnomon.query("127.0.0.1:9", key, timeout=0.1)


@pytest.mark.parametrize("bad", ["text", 5, None, bytearray(b"x"), memoryview(b"x"), [1, 2]])
def test_wrong_types_are_type_errors(gnomon, bad):
    requests, replies = cloudflare("google", "001")
    with pytest.raises(TypeError):
        gnomon.verify(bad, replies[0], CF_ROOT)
    with pytest.raises(TypeError):
        gnomon.verify(requests[0], bad, CF_ROOT)


def test_garbage_responses_raise_invalid_answer(gnomon):
    rng = random.Random(14)
    for version in CF_FILES:
        requests, replies = cloudflare(version, "010")
        req, rep = requests[3], replies[3]
        garbage = [b"", b"\x00", rep[:12], rep + bytes(4), rep + rep, rep * 100, bytes(65_536)]
        garbage += [rep[:n] for n in range(0, len(rep))]  # every truncation
        garbage += [rng.randbytes(rng.randrange(1, 2048)) for _ in range(300)]
        garbage += [b"ROUGHTIM" + rng.randbytes(rng.randrange(4, 1200)) for _ in range(300)]
        for g in garbage:
            with pytest.raises(gnomon.InvalidAnswer) as e:
                gnomon.verify(req, g, CF_ROOT)
            assert e.value.reason and str(e.value)


def test_every_flipped_byte_is_rejected_or_harmless(gnomon):
    """A flipped bit anywhere either fails verification or leaves what is
    verified unchanged; nothing else (no other exception, no crash)."""
    for version in CF_FILES:
        requests, replies = cloudflare(version, "010")
        req, rep = requests[5], replies[5]
        good = gnomon.verify(req, rep, CF_ROOT)
        rejected = 0
        for i in range(len(rep)):
            bad = bytearray(rep)
            bad[i] ^= 0x01
            try:
                a = gnomon.verify(req, bytes(bad), CF_ROOT)
            except gnomon.InvalidAnswer:
                rejected += 1
                continue
            assert (a.midpoint_us, a.radius_us, a.online_key) == (good.midpoint_us, good.radius_us, good.online_key)
        assert rejected > len(rep) // 2, (version, rejected, len(rep))


def test_a_request_that_is_not_one_is_a_usage_error(gnomon):
    _, replies = cloudflare("draft-08", "001")
    with pytest.raises(ValueError, match="request"):
        gnomon.verify(b"nonsense", replies[0], CF_ROOT)


def test_build_request_every_version(gnomon):
    names = [n for n, _ in gnomon.versions()]
    assert names[0] == "google" and "rfc-10049" in names and "draft-08" in names
    for name, number in gnomon.versions():
        a = gnomon.build_request(name)
        b = gnomon.build_request(number if name != "draft-12" else name)
        assert len(a) == len(b) == 1024, name
        assert a != gnomon.build_request(name), f"{name}: nonces must be fresh"
        if name != "google":
            assert a.startswith(b"ROUGHTIM"), name


def test_build_request_with_a_nonce_is_deterministic(gnomon):
    nonce = bytes(range(32))
    a = gnomon.build_request("rfc-10049", nonce)
    assert a == gnomon.build_request(1, nonce)
    assert nonce in a
    with_srv = gnomon.build_request("rfc-10049", nonce, public_key=CF_ROOT)
    assert with_srv != a and len(with_srv) == 1024
    assert gnomon.build_request("google", bytes(64)).find(bytes(64)) >= 0


@pytest.mark.parametrize(
    "args, kind",
    [
        (("draft-99",), ValueError),
        (("rfc-10049", bytes(31)), ValueError),
        (("google", bytes(32)), ValueError),
        ((0x12345678,), ValueError),
        ((-1,), ValueError),
        ((2**70,), ValueError),
        ((None,), TypeError),
        ((1.5,), TypeError),
        (("rfc-10049", "nonce"), TypeError),
    ],
)
def test_build_request_usage_errors(gnomon, args, kind):
    with pytest.raises(kind):
        gnomon.build_request(*args)


def test_build_request_sizes(gnomon):
    assert len(gnomon.build_request("draft-08", size=1200)) == 1200
    for size in (1023, 8, 70_000, -4, 2**70):
        with pytest.raises(ValueError):
            gnomon.build_request("draft-08", size=size)


def test_draft19_appendix_b_report_is_proof(gnomon):
    r = gnomon.verify_report(APPENDIX_B.read_text())
    assert len(r.entries) == 3
    assert all(e.answer is not None and e.answer.version == "rfc-10049" for e in r.entries)
    assert [e.link_error for e in r.entries] == [None, None, None]
    assert r.contradictions == [(0, 1), (0, 2)]
    assert r.all_valid and r.proof_of_malfeasance


def test_tampered_report_is_no_proof(gnomon):
    doc = json.loads(APPENDIX_B.read_text())
    doc["responses"][1]["rand"] = doc["responses"][2]["rand"]
    r = gnomon.verify_report(json.dumps(doc).encode())
    assert r.entries[1].link_error == "mismatch"
    assert not r.all_valid and not r.proof_of_malfeasance
    doc = json.loads(APPENDIX_B.read_text())
    doc["responses"][0]["publicKey"] = "AAAA"
    r = gnomon.verify_report(json.dumps(doc))
    assert r.entries[0].error is not None and r.entries[0].error.reason == "public_key_length"
    assert not r.proof_of_malfeasance


@pytest.mark.parametrize("bad", ["", "{", "[1]", "null", '{"responses": 5}', '{"nonces": [], "responses": []}'])
def test_reports_that_are_not_reports_are_value_errors(gnomon, bad):
    with pytest.raises(ValueError):
        gnomon.verify_report(bad)


def test_report_of_wrong_type_is_a_type_error(gnomon):
    with pytest.raises(TypeError):
        gnomon.verify_report(5)


def test_a_rust_panic_is_an_exception_not_an_abort(gnomon, tmp_path):
    """A bug that panics in Rust must reach Python as PyO3's PanicException,
    not abort the interpreter (the `bindings` profile unwinds; the
    workspace's release profile would abort). The tests' wheel panics in
    `build_request` when GNOMON_TEST_PANIC is set (the `test-panic`
    feature); a separate interpreter takes the panic, so an abort shows as
    its exit status rather than ending this run."""
    code = (
        "import os, gnomon\n"
        "os.environ['GNOMON_TEST_PANIC'] = '1'\n"
        "try:\n"
        "    gnomon.build_request(1)\n"
        "except BaseException as e:\n"
        "    print(type(e).__name__)\n"
        "else:\n"
        "    print('returned: the wheel has no test-panic hook')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"the interpreter died (status {run.returncode}): {run.stderr}"
    assert run.stdout.strip() == "PanicException", run.stdout + run.stderr
    # Without the variable the same call answers: the hook is all it was.
    assert len(gnomon.build_request(1)) == 1024


def test_the_tannerryan_ml_dsa_44_capture_verifies(gnomon):
    """The post-quantum version: a 1312-byte key as bytes, hex or base64."""
    pq = VECTORS / "tannerryan-ml-dsa-44"
    req = (pq / "request.bin").read_bytes()
    resp = (pq / "response.bin").read_bytes()
    root = bytes.fromhex((pq / "root-public-key.hex").read_text().strip())
    assert len(root) == 1312
    for key in (root, root.hex(), __import__("base64").b64encode(root).decode()):
        a = gnomon.verify(req, resp, key)
        assert a.version == "ml-dsa-44"
        assert a.version_number == 0x90000001
        assert len(a.online_key) == 32
    # An Ed25519 key does not verify it; a key of no scheme's length is refused.
    with pytest.raises(gnomon.InvalidAnswer):
        gnomon.verify(req, resp, CF_ROOT)
    with pytest.raises(ValueError):
        gnomon.verify(req, resp, root[:-1])


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"version": "rfc-10049"}, ["rfc-10049", "ML-DSA-44", "1312"]),
        ({"version": 1}, ["rfc-10049", "Ed25519"]),
        ({"tcp": False}, ["tcp=False", "TCP only"]),
    ],
)
def test_an_ml_dsa_key_with_a_classical_version_or_udp_is_a_usage_error(gnomon, kwargs, words):
    """Refused before any packet: port 9 on loopback would only time out."""
    root = bytes.fromhex(
        (VECTORS / "tannerryan-ml-dsa-44" / "root-public-key.hex").read_text().strip()
    )
    with pytest.raises(ValueError) as e:
        gnomon.query("127.0.0.1:9", root, timeout=1.0, **kwargs)
    for w in words:
        assert w in str(e.value), str(e.value)
    # The same call with a matching version gets past the check (to the
    # network, where port 9 refuses or stays silent).
    with pytest.raises((gnomon.NoAnswer, OSError)):
        gnomon.query("127.0.0.1:9", root, version="ml-dsa-44", timeout=0.2)
