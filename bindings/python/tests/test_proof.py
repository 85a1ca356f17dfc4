"""Relayed proofs (docs/PROOF.md) checked by `gnomon.verify_proof`, on
bundles `gnomon relay` made against real `gnomon serve` processes on
loopback: the true time in the interval, in both forms, and each tampered
bundle refused with its own kind; a minority liar under libfaketime."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from conftest import LIBFAKETIME, Serve, faketime_env, gnomon_bin, skip

# The servers answer with a 3 s radius, or the kernel's own error estimate
# on an unsynchronized clock when larger (±16 s here): the default 10 s
# limit would refuse every honest bundle (as in crates/cli/tests/cli/relay_proof.rs).
MAX_RADIUS = 300.0
RADIUS_ARGS = ["--clock-unsynchronized-radius", "3s", "--clock-radius-floor", "3s"]


class Relay:
    """Servers, their list, and the keys a device pins."""

    def __init__(self, tmp: Path, clocks: List[Optional[str]]) -> None:
        self.tmp = tmp
        self.servers: List[Serve] = []
        try:
            for offset in clocks:
                self.servers.append(Serve(RADIUS_ARGS, faketime_env(offset) if offset else None))
        except BaseException:
            self.stop()
            raise
        self.keys = [base64.b64decode(s.public_key) for s in self.servers]
        entries = [
            {
                "name": f"s{i}",
                "version": 1,
                "publicKeyType": "ed25519",
                "publicKey": s.public_key,
                "addresses": [{"protocol": "udp", "address": s.addr}],
            }
            for i, s in enumerate(self.servers)
        ]
        self.list = tmp / "servers.json"
        self.list.write_text(json.dumps({"servers": entries}))

    def bundle(self, device: bytes, form: str, *extra: str) -> "tuple[bytes, int]":
        out = self.tmp / f"relayed.{form}"
        run = subprocess.run(
            [
                str(gnomon_bin()),
                "relay",
                "--servers",
                str(self.list),
                "--device-nonce",
                device.hex(),
                "--out",
                str(out),
                "--format",
                form,
                "--timeout",
                "500ms",
                "--max-radius",
                "5m",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.exists(), run.stderr
        return out.read_bytes(), run.returncode

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    r = Relay(tmp_path_factory.mktemp("proof"), [None, None, None])
    try:
        yield r
    finally:
        r.stop()


def now_us() -> int:
    return time.time_ns() // 1000


@pytest.mark.parametrize("form", ["binary", "json"])
def test_a_relayed_bundle_proves_the_true_now(gnomon, relay, form):
    device = os.urandom(32)
    made = time.monotonic()
    before = now_us()
    bundle, code = relay.bundle(device, form)
    assert code == 0
    if form == "json":
        assert bundle.lstrip().startswith(b"{")
    elapsed = time.monotonic() - made + 1.0
    p = gnomon.verify_proof(bundle, device, relay.keys, elapsed, max_radius=MAX_RADIUS)
    after = now_us()
    assert isinstance(p, gnomon.Proven)
    assert p.agreeing_keys == 3 and p.answering_keys == 3
    # Fewer than half of the three pinned may lie: one, so all three must
    # be in the bundle.
    assert (p.max_liars, p.pinned, p.needed) == (1, 3, 3)
    assert p.assumption == "assumes at most 1 of the 3 pinned servers lies; 3 answered, 3 needed"
    assert p.earliest_us <= after and before <= p.latest_us, (p, before, after)
    assert p.earliest <= p.latest and p.radius >= 0
    # Keys as base64 text work the same.
    texts = [base64.b64encode(k).decode() for k in relay.keys]
    assert gnomon.verify_proof(bundle, device, texts, elapsed, max_radius=MAX_RADIUS) == p
    # The default 10 s limit refuses these servers' wide radius: too_wide,
    # not a wrong interval.
    with pytest.raises(gnomon.ProofError) as e:
        gnomon.verify_proof(bundle, device, relay.keys, elapsed)
    assert e.value.kind == "too_wide"


def signature_offset(resp: bytes) -> int:
    """Offset of the top-level SIG value in a framed response."""
    msg = resp[12:]
    n = int.from_bytes(msg[:4], "little")
    tags = 4 + 4 * (n - 1)
    values = tags + 4 * n
    for i in range(n):
        if msg[tags + 4 * i : tags + 4 * i + 4] == b"SIG\0":
            start = 0 if i == 0 else int.from_bytes(msg[4 + 4 * (i - 1) : 4 + 4 * i], "little")
            return 12 + values + start
    raise AssertionError("no SIG tag")


def test_each_tampered_bundle_is_refused_with_its_own_kind(gnomon, relay):
    device = os.urandom(32)
    raw, code = relay.bundle(device, "json")
    assert code == 0
    good = json.loads(raw)

    def refused(doc, kind: str, dev: bytes = device, keys=None, entry=None):
        bundle = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        with pytest.raises(gnomon.ProofError) as e:
            gnomon.verify_proof(bundle, dev, keys or relay.keys, 10.0, max_radius=MAX_RADIUS)
        assert e.value.kind == kind, str(e.value)
        assert not e.value.malfeasance and e.value.majority is None
        if entry is not None:
            assert e.value.entry == entry, str(e.value)
        return e.value

    # Another device's value: made for another, or replayed.
    refused(good, "wrong_nonce", dev=os.urandom(32))
    # A bundle made for another value, relabelled with this device's.
    other, _ = relay.bundle(os.urandom(32), "json")
    theirs = json.loads(other)
    theirs["deviceNonce"] = good["deviceNonce"]
    refused(theirs, "binding")
    # One server's two answers swapped (entries 1 and 4). Request 2 was
    # chained from the answer that was at 1, and every link is checked
    # before any answer, so the link breaks first (it was not_for_request
    # at 1 when answers came first, docs/PROOF.md).
    swapped = json.loads(raw)
    r = swapped["responses"]
    assert r[1]["publicKey"] == r[4]["publicKey"]
    r[1]["response"], r[4]["response"] = r[4]["response"], r[1]["response"]
    refused(swapped, "link", entry=2)
    # The last answer (no link after it) replaced by the same server's
    # earlier one, validly signed for another request.
    replaced = json.loads(raw)
    r = replaced["responses"]
    last = len(r) - 1
    assert r[last - 3]["publicKey"] == r[last]["publicKey"]
    r[last]["response"] = r[last - 3]["response"]
    refused(replaced, "not_for_request", entry=last)
    # A broken link: entries 1 and 2 in the other order.
    reordered = json.loads(raw)
    reordered["responses"][1], reordered["responses"][2] = reordered["responses"][2], reordered["responses"][1]
    refused(reordered, "link", entry=1)
    # A forged signature: one bit of the last response's SIG (no link after
    # it), and of the first's, where request 1 was chained from the bytes
    # before the edit: the link, checked before any signature, breaks first
    # (it was signature at 0 when signatures came first).
    last = len(good["responses"]) - 1
    for k, kind, entry in ((last, "signature", last), (0, "link", 1)):
        forged = json.loads(raw)
        resp = bytearray(base64.b64decode(forged["responses"][k]["response"]))
        resp[signature_offset(bytes(resp))] ^= 1
        forged["responses"][k]["response"] = base64.b64encode(bytes(resp)).decode()
        refused(forged, kind, entry=entry)
    # A key the device does not pin. The relay asks the servers in a random
    # order, so the first entry under the dropped key is read from the bundle.
    dropped = relay.keys[2]
    first = next(i for i, e in enumerate(good["responses"]) if base64.b64decode(e["publicKey"]) == dropped)
    refused(good, "unknown_key", keys=relay.keys[:2], entry=first)
    # Trimmed to two entries: too few servers, and the assumption says
    # why two are not enough.
    trimmed = json.loads(raw)
    trimmed["responses"] = trimmed["responses"][:2]
    e = refused(trimmed, "too_few_keys")
    assert e.assumption is not None and "of the 3 pinned servers" in e.assumption, e.assumption
    assert e.assumption in str(e)
    # The binary form, truncated, and not a bundle at all.
    binary, code = relay.bundle(device, "binary")
    assert code == 0 and binary.startswith(b"RTPF")
    assert gnomon.verify_proof(binary, device, relay.keys, 10.0, max_radius=MAX_RADIUS)
    refused(binary[:-7], "truncated")
    refused(b"RTPX" + binary[4:], "malformed")
    refused(b"{}", "malformed")


def test_argument_mistakes_are_value_errors(gnomon, relay):
    d = os.urandom(32)
    for kwargs in (
        {"quorum": 0},
        {"max_liars": -1},
        {"max_radius": -1.0},
        {"servers": ["a", "b"]},
    ):
        with pytest.raises(ValueError):
            gnomon.verify_proof(b"RTPF", d, relay.keys, 1.0, **kwargs)
    with pytest.raises(ValueError):
        gnomon.verify_proof(b"RTPF", d, relay.keys, -1.0)
    with pytest.raises(ValueError):
        gnomon.verify_proof(b"RTPF", d, [b"short"], 1.0)
    with pytest.raises(ValueError):
        gnomon.verify_proof(b"RTPF", d, [], 1.0)


def test_elapsed_is_required(gnomon, relay):
    device = os.urandom(32)
    bundle, code = relay.bundle(device, "binary")
    assert code == 0
    # No default: a bundle the relay held widens only through elapsed.
    with pytest.raises(TypeError, match="elapsed"):
        gnomon.verify_proof(bundle, device, relay.keys)
    with pytest.raises(TypeError, match="elapsed"):
        gnomon.verify_proof(bundle, device, relay.keys, max_radius=MAX_RADIUS)
    # Given, by position or by name, the same bundle verifies.
    p = gnomon.verify_proof(bundle, device, relay.keys, 10.0, max_radius=MAX_RADIUS)
    assert gnomon.verify_proof(bundle, device, relay.keys, elapsed=10.0, max_radius=MAX_RADIUS) == p


def test_a_device_value_shorter_than_16_bytes_is_refused(gnomon, relay):
    # 16 bytes, the shortest: the relay makes the bundle, the device takes it.
    device = os.urandom(16)
    binary, code = relay.bundle(device, "binary")
    assert code == 0
    assert gnomon.verify_proof(binary, device, relay.keys, 10.0, max_radius=MAX_RADIUS)
    # The device's own value, one byte short: refused before the bundle is read.
    with pytest.raises(ValueError, match="15 bytes"):
        gnomon.verify_proof(binary, device[:15], relay.keys, 10.0, max_radius=MAX_RADIUS)
    # The bundle's value cut to 15 bytes: refused as the bundle is parsed,
    # in both forms.
    short = binary[:6] + bytes([15]) + device[:15] + binary[7 + 16 :]
    with pytest.raises(gnomon.ProofError) as e:
        gnomon.verify_proof(short, device, relay.keys, 10.0, max_radius=MAX_RADIUS)
    assert e.value.kind == "device_value_length", str(e.value)
    doc = json.loads(relay.bundle(device, "json")[0])
    doc["deviceNonce"] = base64.b64encode(device[:15]).decode()
    with pytest.raises(gnomon.ProofError) as e:
        gnomon.verify_proof(json.dumps(doc), device, relay.keys, 10.0, max_radius=MAX_RADIUS)
    assert e.value.kind == "device_value_length", str(e.value)


def test_a_minority_liar_is_malfeasance_with_the_majoritys_interval(gnomon, tmp_path):
    if not LIBFAKETIME.exists():
        skip(
            "test_proof.py::test_a_minority_liar_is_malfeasance_with_the_majoritys_interval",
            f"{LIBFAKETIME} missing (package libfaketime)",
        )
    r = Relay(tmp_path, [None, None, "+70"])
    try:
        device = os.urandom(32)
        made = time.monotonic()
        before = now_us()
        bundle, code = r.bundle(device, "binary", "--all")
        assert code == 3, "the relay sees the lie too"
        elapsed = time.monotonic() - made + 1.0
        with pytest.raises(gnomon.ProofError) as e:
            gnomon.verify_proof(bundle, device, r.keys, elapsed, max_radius=MAX_RADIUS)
        after = now_us()
        assert e.value.kind in ("liar", "contradiction"), str(e.value)
        assert e.value.malfeasance
        m = e.value.majority
        assert isinstance(m, gnomon.Proven), m
        assert m.earliest_us <= after and before <= m.latest_us, (m, before, after)
    finally:
        r.stop()


def test_a_bundle_from_three_of_five_pinned_is_too_few_unless_fewer_liars_are_assumed(gnomon, relay):
    """The relay's drop attack: the device pins five servers and the
    bundle carries three (the relay left two out, or could not reach
    them). Fewer than half of five is two liars, and three may be two
    liars and one honest server: too_few_keys, whatever the three say.
    max_liars=1 makes three enough."""
    device = os.urandom(32)
    bundle, code = relay.bundle(device, "binary")
    assert code == 0
    five = relay.keys + [os.urandom(32), os.urandom(32)]
    with pytest.raises(gnomon.ProofError) as e:
        gnomon.verify_proof(bundle, device, five, 10.0, max_radius=MAX_RADIUS)
    assert e.value.kind == "too_few_keys" and e.value.majority is None, str(e.value)
    assert e.value.assumption == "assumes at most 2 of the 5 pinned servers lie; 3 answered, 5 needed"
    p = gnomon.verify_proof(bundle, device, five, 10.0, max_liars=1, max_radius=MAX_RADIUS)
    assert (p.max_liars, p.pinned, p.needed, p.answering_keys) == (1, 5, 3, 3)
    # Assuming none lies, one server's answers would do; two lying of
    # three pinned is past what the three can outvote.
    assert gnomon.verify_proof(bundle, device, relay.keys, 10.0, max_liars=0, max_radius=MAX_RADIUS).needed == 1
    with pytest.raises(gnomon.ProofError) as e:
        gnomon.verify_proof(bundle, device, relay.keys, 10.0, max_liars=2, max_radius=MAX_RADIUS)
    assert e.value.kind == "too_few_keys", str(e.value)


def test_keys_labelled_as_one_server_are_one_voter(gnomon, relay):
    """Two pinned keys with one ``servers`` label (one machine's two
    identities, say) count once: the three servers' bundle then carries
    two voters, too few for one liar assumed; unlabelled, each key is a
    server of its own."""
    device = os.urandom(32)
    bundle, code = relay.bundle(device, "binary")
    assert code == 0
    p = gnomon.verify_proof(bundle, device, relay.keys, 10.0, max_liars=1, max_radius=MAX_RADIUS)
    assert (p.pinned, p.answering_keys) == (3, 3)
    same = gnomon.verify_proof(bundle, device, relay.keys, 10.0, max_liars=1, max_radius=MAX_RADIUS, servers=["x", "y", "z"])
    assert same == p
    with pytest.raises(gnomon.ProofError) as e:
        gnomon.verify_proof(bundle, device, relay.keys, 10.0, max_liars=1, max_radius=MAX_RADIUS, servers=["a", "b", "b"])
    assert e.value.kind == "too_few_keys", str(e.value)
    assert e.value.assumption == "assumes at most 1 of the 2 pinned servers lies; 2 answered, 3 needed"
    # By default, fewer than half of two pinned servers is none: both must
    # agree, and do.
    two = gnomon.verify_proof(bundle, device, relay.keys, 10.0, max_radius=MAX_RADIUS, servers=[1, 2, 2])
    assert (two.pinned, two.max_liars, two.answering_keys, two.agreeing_keys) == (2, 0, 2, 2)
