"""Signed server lists (`gnomon.verify_server_list`): lists signed by
OpenSSH's own `ssh-keygen -Y sign`, as an observatory's are, checked
against pinned keys and merged k of n; each refusal with its label; and
the merged list measured against a real `gnomon serve`."""

from __future__ import annotations

import base64
import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from conftest import skip

NAMESPACE = "roughtime-server-list"
NOW = 1_796_220_000  # 2026-12-02T14:00:00Z
DAY = 86_400


def utc(t: int) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Monitor:
    """An observatory's key (made by ssh-keygen) and the lists it signs."""

    def __init__(self, tmp: Path, name: str) -> None:
        keygen = shutil.which("ssh-keygen")
        if keygen is None:
            skip(
                "test_signed_list.py::Monitor",
                "ssh-keygen is not installed (Debian: apt install openssh-client)",
            )
        self.keygen = str(keygen)
        self.name = name
        self.dir = tmp / name
        self.dir.mkdir()
        self.key = self.dir / "key"
        subprocess.run(
            [self.keygen, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(self.key)],
            check=True,
            timeout=60,
        )
        self.pub = self.key.with_suffix(".pub")
        self.line = self.pub.read_text().strip()

    def sign(self, document: bytes, namespace: str = NAMESPACE) -> bytes:
        path = self.dir / "servers.json"
        path.write_bytes(document)
        sig = path.with_suffix(".json.sig")
        sig.unlink(missing_ok=True)
        subprocess.run(
            [self.keygen, "-Y", "sign", "-n", namespace, "-f", str(self.key), str(path)],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return sig.read_bytes()

    def publish(
        self, servers: List[dict], sequence: int, *, expires: int = NOW + DAY, reports: Optional[str] = None
    ) -> Tuple[bytes, bytes]:
        doc = {
            "servers": servers,
            "observatory": {
                "monitor": self.name,
                "sequence": sequence,
                "published": utc(NOW - 60),
                "expires": utc(expires),
            },
        }
        if reports:
            doc["reports"] = reports
        document = json.dumps(doc).encode()
        return document, self.sign(document)


def entry(name: str, key: str, address: str, operator: Optional[str] = None) -> dict:
    e = {
        "name": name,
        "version": 1,
        "publicKeyType": "ed25519",
        "publicKey": key,
        "addresses": [{"protocol": "udp", "address": address}],
        "measured": {"by": "test"},
    }
    if operator:
        e["operator"] = operator
    return e


KEY_1 = base64.b64encode(bytes([1]) * 32).decode()
KEY_2 = base64.b64encode(bytes([2]) * 32).decode()


@pytest.fixture
def monitors(tmp_path: Path) -> List[Monitor]:
    return [Monitor(tmp_path, "monitor-a"), Monitor(tmp_path, "monitor-b"), Monitor(tmp_path, "monitor-c")]


def test_one_pinned_monitor_list_is_accepted_and_merged(gnomon, monitors):
    a = monitors[0]
    lst = a.publish([entry("s1", KEY_1, "192.0.2.1:2002", "op-1")], 57, reports="https://reports.example/")
    r = gnomon.verify_server_list([lst], [a.line], now=NOW)
    assert (r.servers, r.monitors) == (1, 1)
    assert r.expires == dt.datetime.fromtimestamp(NOW + DAY, dt.timezone.utc)
    (acc,) = r.accepted
    assert (acc.key, acc.monitor, acc.sequence, acc.comment) == (0, "monitor-a", 57, "monitor-a")
    fp = subprocess.run([a.keygen, "-l", "-f", str(a.pub)], capture_output=True, text=True, check=True).stdout
    assert acc.fingerprint in fp
    merged = json.loads(r.document)
    assert [s["name"] for s in merged["servers"]] == ["s1"]
    assert merged["servers"][0]["operator"] == "op-1"
    assert merged["reports"] == "https://reports.example/"
    assert r.refused == [] and r.left_out == []
    seen = json.loads(r.seen)
    assert seen["keys"][0]["sequence"] == 57
    # The key may be given as the path of its .pub file, and now as a datetime.
    again = gnomon.verify_server_list([lst], [a.pub], now=dt.datetime.fromtimestamp(NOW, dt.timezone.utc), seen=r.seen)
    assert again.document == r.document


def refusal(gnomon, lists, keys, **kw):
    with pytest.raises(gnomon.ServerListRefused) as e:
        gnomon.verify_server_list(lists, keys, **kw)
    return e.value


def test_each_refusal_has_its_label_and_says_what_to_do(gnomon, monitors):
    a, b = monitors[0], monitors[1]
    doc, sig = a.publish([entry("s1", KEY_1, "192.0.2.1:2002")], 57)

    e = refusal(gnomon, [(doc.replace(b"192.0.2.1", b"192.0.2.9"), sig)], [a.line], now=NOW)
    assert e.label == "signature" and "fetch both again" in str(e)
    assert e.refusals[0][:2] == (0, "signature")

    e = refusal(gnomon, [(doc, sig)], [b.line], now=NOW)
    assert e.label == "other_key" and "not one of the pinned keys" in str(e)

    e = refusal(gnomon, [(doc, a.sign(doc, "file"))], [a.line], now=NOW)
    assert e.label == "signature" and 'namespace "file"' in str(e)

    e = refusal(gnomon, [(doc, sig)], [a.line], now=NOW + DAY)
    assert e.label == "expired" and "the monitor has not published since" in str(e)

    newer = gnomon.verify_server_list([a.publish([], 58)], [a.line], now=NOW)
    e = refusal(gnomon, [(doc, sig)], [a.line], now=NOW, seen=newer.seen)
    assert e.label == "replayed" and "sequence 57 is older than 58" in str(e)

    e = refusal(gnomon, [a.publish([entry("s1", KEY_1, "192.0.2.1:2002")], 58)], [a.line], now=NOW, seen=newer.seen)
    assert e.label == "reused"

    bad = b'{"servers":[],"observatory":{"monitor":"m","sequence":"58"}}'
    e = refusal(gnomon, [(bad, a.sign(bad))], [a.line], now=NOW)
    assert e.label == "malformed" and "observatory.sequence" in str(e)


def test_two_of_two_use_only_what_both_list(gnomon, monitors):
    a, b = monitors[0], monitors[1]
    both = entry("both", KEY_1, "192.0.2.1:2002", "op-1")
    only_b = entry("only-b", KEY_2, "192.0.2.2:2002", "op-2")
    lists = [b.publish([both, only_b], 5), a.publish([both], 9)]
    r = gnomon.verify_server_list(lists, [a.line, b.line], threshold=2, now=NOW)
    assert [s["name"] for s in json.loads(r.document)["servers"]] == ["both"]
    assert r.left_out == [("only-b", 1, 2)]
    assert sorted(x.key for x in r.accepted) == [0, 1]
    # One of the two refused: fewer than the threshold, and the error says
    # which list and why.
    tampered = (lists[1][0].replace(b"op-1", b"op-9"), lists[1][1])
    e = refusal(gnomon, [lists[0], tampered], [a.line, b.line], threshold=2, now=NOW)
    assert e.label == "signature" and e.refusals[0][0] == 1
    assert "1 of the pinned keys have an accepted list and 2 are needed" in str(e)
    # Both lists from one key are one vote.
    e = refusal(gnomon, [lists[1], lists[1]], [a.line, b.line], threshold=2, now=NOW)
    assert e.label == "too_few"


def test_mistakes_in_the_call_are_value_errors(gnomon, monitors):
    a = monitors[0]
    lst = a.publish([], 1)
    with pytest.raises(ValueError, match="ssh-ed25519"):
        gnomon.verify_server_list([lst], ["ssh-rsa AAAA"], now=NOW)
    with pytest.raises(ValueError, match="--servers-threshold"):
        gnomon.verify_server_list([lst], [a.line], threshold=2, now=NOW)
    with pytest.raises(ValueError, match="pinned twice"):
        gnomon.verify_server_list([lst], [a.line, a.line], now=NOW)
    with pytest.raises(ValueError, match="seen"):
        gnomon.verify_server_list([lst], [a.line], now=NOW, seen="{}")
    with pytest.raises(ValueError, match="aware datetime"):
        gnomon.verify_server_list([lst], [a.line], now=dt.datetime(2026, 12, 2))


def test_the_merged_list_measures_a_real_server(gnomon, monitors, server):
    """What two monitors list, merged, is what `measure` asks: the real
    server answers; the one only monitor-b lists (nothing listens there)
    is not asked."""
    a, b = monitors[0], monitors[1]
    real = entry("real", server.public_key, server.addr)
    decoy = entry("decoy", KEY_2, "127.0.0.1:9", "op-2")
    lists = [a.publish([real], 1, expires=2**33), b.publish([real, decoy], 1, expires=2**33)]
    r = gnomon.verify_server_list(lists, [a.line, b.line], threshold=2)
    m = gnomon.measure(r.document, quorum=1, max_liars=0, timeout=10.0, tcp=False)
    assert [e.server for e in m.entries] == ["real", "real"]
    assert all(e.answer for e in m.entries)
