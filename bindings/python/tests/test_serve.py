"""`query`, `measure` and own-transport `verify` against real `gnomon serve`
processes on loopback (one liar under libfaketime)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import threading
import time
import types

import pytest

from conftest import LIBFAKETIME, faketime_env, serve, skip

# Server clocks here answer with the unsynchronized radius (1 min by
# default); a liar an hour off is far outside it.
HOUR_US = 3_600_000_000


def close_to_now(a) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    assert abs((a.midpoint - now).total_seconds()) < 600, (a.midpoint, now)
    assert a.midpoint.tzinfo is not None
    assert a.midpoint_us == round((a.midpoint - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) / dt.timedelta(microseconds=1))


def test_query_every_version_over_udp(gnomon, server):
    seen = []
    # Every version an Ed25519 key is asked in: all but the post-quantum
    # one (0x90000001, ML-DSA-44 keys, TCP only; docs/PQ.md).
    ed25519 = [(n, v) for n, v in gnomon.versions() if v != 0x90000001]
    for name, number in ed25519:
        a = gnomon.query(server.addr, server.public_key, version=name, tcp=False)
        assert a.version == name, (name, a.version)
        assert a.version_number == number
        assert a.transport == "udp" and a.server == server.addr
        assert a.radius_us > 0 and a.radius == dt.timedelta(microseconds=a.radius_us)
        assert a.rtt is not None and 0 < a.rtt < 2.0
        close_to_now(a)
        # The exchange verifies again on its own.
        again = gnomon.verify(a.request, a.response, server.public_key)
        assert again.midpoint_us == a.midpoint_us
        seen.append(a.version)
    assert len(seen) == len(gnomon.versions()) - 1 >= 15


def test_query_over_tcp(gnomon, server):
    for name in ("rfc-10049", "draft-08", "draft-12", "draft-07"):
        a = gnomon.query(server.addr, server.public_key, version=name, tcp=True)
        assert (a.version, a.transport) == (name, "tcp")


def test_query_discovers_the_newest_version(gnomon, server):
    a = gnomon.query(server.addr, server.public_key)
    assert a.version == "rfc-10049"
    key_bytes = base64.b64decode(server.public_key)
    assert gnomon.query(server.addr, key_bytes, version=0x80000008).version == "draft-08"


def test_query_with_the_wrong_key_is_invalid(gnomon, server):
    # Draft 08 has no SRV, so the server answers a request for another key
    # and the answer fails verification.
    with pytest.raises(gnomon.InvalidAnswer) as e:
        gnomon.query(server.addr, bytes(32), version="draft-08", tcp=False)
    assert e.value.reason == "delegation_signature"
    # With SRV (RFC 10049) the server drops a request for a key it lacks.
    with pytest.raises(gnomon.NoAnswer):
        gnomon.query(server.addr, bytes(32), version="rfc-10049", tcp=False, timeout=0.5)


def test_own_transport_build_send_verify(gnomon, server):
    host, port = server.addr.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(10)
        for name in ("google", "draft-05", "draft-11", "rfc-10049"):
            req = gnomon.build_request(name, public_key=server.public_key)
            s.sendto(req, (host, int(port)))
            resp, _ = s.recvfrom(65_536)
            a = gnomon.verify(req, resp, server.public_key)
            assert a.version == name
            close_to_now(a)
            # The same response does not answer a different request.
            with pytest.raises(gnomon.InvalidAnswer):
                gnomon.verify(gnomon.build_request(name), resp, server.public_key)


def silent_socket():
    """A bound UDP socket nobody reads: a server that never answers."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def test_silence_is_no_answer_within_the_timeout(gnomon):
    with silent_socket() as s:
        addr = "127.0.0.1:%d" % s.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(gnomon.NoAnswer):
            gnomon.query(addr, bytes(32), version="rfc-10049", timeout=0.5, tcp=False)
        # Bound against a hang, far above the 0.5 s asked.
        assert time.monotonic() - start < 30


class Relay:
    """A UDP relay written in Python, on a thread of this interpreter:
    each datagram from the client goes to `upstream`, and its answer back.
    Forwarding runs Python code after each recvfrom returns, so it makes
    progress only while no other thread holds the interpreter's lock."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        # Short waits, so that the loop sees `stop` (and ends by itself
        # within its deadline in any case).
        self.sock.settimeout(0.2)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.forwarded = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        deadline = time.monotonic() + 120
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as up:
            up.settimeout(30)
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    data, client = self.sock.recvfrom(65_536)
                except socket.timeout:
                    continue
                up.sendto(data, self.upstream)
                answer, _ = up.recvfrom(65_536)
                self.forwarded += 1
                self.sock.sendto(answer, client)

    def __enter__(self) -> "Relay":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(60)
        self.sock.close()


@pytest.mark.parametrize("call", ["query", "measure"])
def test_a_call_in_flight_releases_the_interpreter(gnomon, server, call):
    """The only way to the server is a relay written in Python, running in
    another thread of this interpreter: the call can only succeed if that
    thread runs while the call waits for its answer. Were the lock held
    (seen with `py.detach` removed from query and measure in src/blocking.rs),
    the relay would stall until the call gave up with NoAnswer."""
    with Relay(server.addr) as relay:
        if call == "query":
            # One attempt (the first UDP wait is 1 s), well inside the timeout.
            a = gnomon.query(relay.addr, server.public_key, version="rfc-10049", timeout=10.0, tcp=False)
            assert a.server == relay.addr
            close_to_now(a)
            want = 1
        else:
            relayed = types.SimpleNamespace(addr=relay.addr, public_key=server.public_key)
            # One server, trusted (a list of one cannot outvote a liar).
            lst = server_list([relayed], ["relayed"])
            m = gnomon.measure(lst, quorum=1, max_liars=0, timeout=10.0, tcp=False)
            assert len(m.entries) == 2 and all(e.answer for e in m.entries)
            want = 2
    assert relay.forwarded >= want


def server_list(servers, names) -> str:
    return json.dumps(
        {
            "servers": [
                {
                    "name": n,
                    "version": 1,
                    "publicKeyType": "ed25519",
                    "publicKey": s.public_key,
                    "addresses": [{"protocol": "udp", "address": s.addr}],
                }
                for n, s in zip(names, servers)
            ]
        }
    )


@pytest.fixture(scope="module")
def honest():
    gens = [serve() for _ in range(3)]
    servers = [next(g) for g in gens]
    yield servers
    for g in gens:
        g.close()


def test_measure_honest_servers_agree(gnomon, honest, tmp_path):
    text = server_list(honest, ["a", "b", "c"])
    m = gnomon.measure(text)
    assert len(m.entries) == 6 and all(e.answer for e in m.entries)
    assert sorted(m.order) == ["a", "b", "c"]
    assert len(m.chain) == 6 and m.chain[0].rand is None and all(x.rand for x in m.chain[1:])
    assert m.consensus is not None and sorted(m.consensus.agreeing) == ["a", "b", "c"]
    assert (m.consensus.answering, m.consensus.agreeing_voters) == (3, 3)
    assert m.quorum == 2 and m.quorum_met
    assert abs(m.consensus.offset_us) < HOUR_US // 10
    assert not m.malfeasance and m.report is None and m.outside == []
    assert m.contradictions == [] and m.contradicting_entries == []
    assert m.disagreement is None and len(m.regions) == 1 and m.grouped == []
    lo, hi = m.regions[0]
    assert m.consensus.offset_low_us == lo and m.consensus.offset_high_us == hi
    # The assumption: at most 1 of the 3 lies, so all three must answer.
    assert (m.max_liars, m.listed, m.answered, m.needed) == (1, 3, 3, 3)
    assert m.assumption == "assumes at most 1 of the 3 listed servers lies; 3 answered, 3 needed"
    assert m.no_consensus is None
    # All three must agree, and do.
    assert gnomon.measure(text, quorum=3).quorum_met
    # Two asked of three can never outvote the liar assumed: refused
    # before asking; trusting every server, two are enough.
    with pytest.raises(ValueError, match="ask=2: 3 distinct servers must answer"):
        gnomon.measure(text, ask=2)
    # The same list as bytes and as a path.
    p = tmp_path / "list.json"
    p.write_text(text)
    assert gnomon.measure(p, ask=2, max_liars=0).consensus is not None
    m = gnomon.measure(text.encode(), ask=2, max_liars=0)
    assert len(m.entries) == 4 and len(set(m.order)) == 2 and m.quorum_met
    assert (m.max_liars, m.listed, m.answered, m.needed) == (0, 3, 2, 1)


def test_measure_catches_a_liar_under_libfaketime(gnomon, honest):
    if not LIBFAKETIME.exists():
        skip("test_serve.py::test_measure_catches_a_liar_under_libfaketime", f"{LIBFAKETIME} missing (package libfaketime)")
    g = serve(env=faketime_env("+3600"))
    liar = next(g)
    try:
        lone = gnomon.query(liar.addr, liar.public_key)
        assert lone.offset_us > HOUR_US // 2, "libfaketime did not move the liar's clock"
        with pytest.raises(gnomon.Malfeasance) as e:
            gnomon.measure(server_list([*honest, liar], ["a", "b", "c", "liar"]))
    finally:
        g.close()
    m = e.value.measurement
    assert m is not None and m.malfeasance
    assert m.suspects == ["liar"] and "liar signed a time" in str(e.value)
    assert ("liar", "outside_consensus") in m.outside
    assert m.consensus is not None and sorted(m.consensus.agreeing) == ["a", "b", "c"]
    assert m.consensus.agreeing_voters == 3 and m.quorum_met
    assert m.assumption == "assumes at most 1 of the 4 listed servers lies; 4 answered, 3 needed"
    assert m.contradictions and m.report
    # Every contradiction pairs the liar with an honest server, by name,
    # and is the pair of servers of its two entries.
    assert all("liar" in pair and len(set(pair)) == 2 for pair in m.contradictions), m.contradictions
    named = {(m.entries[i].server, m.entries[j].server) for i, j in m.contradicting_entries}
    assert named == set(m.contradictions)
    proof = gnomon.verify_report(m.report)
    assert proof.all_valid and proof.proof_of_malfeasance
    assert len(proof.entries) == len(m.chain) == 8


def test_measure_without_answers_is_no_answer(gnomon):
    with silent_socket() as s1, silent_socket() as s2, silent_socket() as s3:
        # Three keys: three servers a quorum could count.
        silent = [
            types.SimpleNamespace(addr="127.0.0.1:%d" % s.getsockname()[1], public_key=base64.b64encode(bytes([i]) * 32).decode())
            for i, s in enumerate((s1, s2, s3))
        ]
        with pytest.raises(gnomon.NoAnswer) as e:
            gnomon.measure(server_list(silent, ["x", "y", "z"]), timeout=0.3)
    m = e.value.measurement
    assert m.consensus is None and not m.quorum_met and len(m.entries) == 6
    assert all(isinstance(x.error, gnomon.NoAnswer) for x in m.entries)
    assert (m.answered, m.needed) == (0, 3)
    assert m.no_consensus is not None and "silenced" in m.no_consensus, m.no_consensus
    assert m.no_consensus in str(e.value) and m.assumption in str(e.value)


def hour_ahead_liars(test: str, n: int):
    """`n` servers an hour ahead under libfaketime, agreeing with each
    other; the test is skipped (and says so) without libfaketime."""
    if not LIBFAKETIME.exists():
        skip(f"test_serve.py::{test}", f"{LIBFAKETIME} missing (package libfaketime)")
    gens = [serve(env=faketime_env("+3600")) for _ in range(n)]
    return gens, [next(g) for g in gens]


def test_measure_the_drop_attack_leaves_no_consensus(gnomon):
    """Issue 33's attack: five listed, the three honest ones silenced on
    the path, and two liars an hour ahead, agreeing with each other, all
    that answers. Counted as the electorate, two agreeing of two were a
    consensus with the quorum of 2 met: the liars' hour. Under "at most 1
    of the 5 lies", 3 must answer: no consensus, and NoAnswer says the
    silent ones may have been silenced."""
    gens, liars = hour_ahead_liars("test_measure_the_drop_attack_leaves_no_consensus", 2)
    try:
        with silent_socket() as s1, silent_socket() as s2, silent_socket() as s3:
            silenced = [
                types.SimpleNamespace(addr="127.0.0.1:%d" % s.getsockname()[1], public_key=base64.b64encode(bytes([i + 1]) * 32).decode())
                for i, s in enumerate((s1, s2, s3))
            ]
            text = server_list([*silenced, *liars], ["h1", "h2", "h3", "liar1", "liar2"])
            with pytest.raises(gnomon.NoAnswer) as e:
                gnomon.measure(text, ask=5, timeout=0.5, tcp=False)
    finally:
        for g in gens:
            g.close()
    m = e.value.measurement
    liar_answers = [x.answer for x in m.entries if x.answer]
    assert len(liar_answers) == 4 and all(a.offset_us > HOUR_US // 2 for a in liar_answers)
    assert m.consensus is None and not m.quorum_met and not m.malfeasance
    assert (m.max_liars, m.listed, m.answered, m.needed) == (1, 5, 2, 3)
    assert m.no_consensus is not None
    assert "2 distinct server(s) answered, 3 needed" in m.no_consensus, m.no_consensus
    assert "silenced" in str(e.value) and m.assumption in str(e.value)


def test_measure_max_liars_sets_how_many_must_answer(gnomon, honest):
    """Three honest servers answer of five listed (two silent): enough
    for the default (1 of 5, 3 needed) and for trusting all, not for two
    liars assumed (5 needed)."""
    with silent_socket() as s1, silent_socket() as s2:
        silent = [
            types.SimpleNamespace(addr="127.0.0.1:%d" % s.getsockname()[1], public_key=base64.b64encode(bytes([i + 7]) * 32).decode())
            for i, s in enumerate((s1, s2))
        ]
        text = server_list([*honest, *silent], ["a", "b", "c", "x", "y"])
        m = gnomon.measure(text, ask=5, timeout=0.5, tcp=False)
        assert m.quorum_met and (m.max_liars, m.answered, m.needed) == (1, 3, 3)
        assert m.assumption == "assumes at most 1 of the 5 listed servers lies; 3 answered, 3 needed"
        trusting = gnomon.measure(text, ask=5, max_liars=0, timeout=0.5, tcp=False)
        assert trusting.quorum_met and (trusting.max_liars, trusting.needed) == (0, 1)
        with pytest.raises(gnomon.NoAnswer) as e:
            gnomon.measure(text, ask=5, max_liars=2, timeout=0.5, tcp=False)
        m = e.value.measurement
        assert m.consensus is None and (m.max_liars, m.answered, m.needed) == (2, 3, 5)
        assert "3 distinct server(s) answered, 5 needed" in (m.no_consensus or ""), m.no_consensus
        # More liars than a list of five can outvote: no consensus can
        # form, and the reason names the fix.
        with pytest.raises(ValueError, match="ask=5"):
            gnomon.measure(text, ask=5, max_liars=3)
        with pytest.raises(gnomon.NoAnswer) as e:
            gnomon.measure(text, max_liars=3, timeout=0.5, tcp=False)
        why = e.value.measurement.no_consensus or ""
        assert "cannot outvote 3 liar(s)" in why and "max_liars=" in why, why


@pytest.mark.parametrize("bad", ["", "{}", '{"servers": []}', "[", b"\xff\xfe"])
def test_measure_rejects_lists_that_are_not(gnomon, bad):
    with pytest.raises(ValueError):
        gnomon.measure(bad)


def test_measure_usage_errors(gnomon, honest):
    text = server_list(honest, ["a", "b", "c"])
    for n in (0, -1, 2**70):
        with pytest.raises(ValueError):
            gnomon.measure(text, quorum=n)
        with pytest.raises(ValueError):
            gnomon.measure(text, ask=n)
    for n in ("2", 2.0):
        with pytest.raises(TypeError):
            gnomon.measure(text, quorum=n)
    # quorum=None asked every server before 0.2.0: now a TypeError that
    # says where that went, never a quorum read some other way.
    with pytest.raises(TypeError, match="ask=None"):
        gnomon.measure(text, quorum=None)
    for n in (-1, 2**70):
        with pytest.raises(ValueError):
            gnomon.measure(text, max_liars=n)
    for n in ("1", 1.0):
        with pytest.raises(TypeError):
            gnomon.measure(text, max_liars=n)
    # Quorums that can never be met, refused before asking anyone.
    with pytest.raises(ValueError, match="3 distinct server"):
        gnomon.measure(text, quorum=4)
    with pytest.raises(ValueError, match="ask=2"):
        gnomon.measure(text, ask=2, quorum=3)
    with pytest.raises(TypeError):
        gnomon.measure(5)
    with pytest.raises(ValueError):
        gnomon.measure(text, timeout=-1)
    with pytest.raises(ValueError):
        gnomon.query("127.0.0.1:notaport", bytes(32))
    with pytest.raises(ValueError):
        gnomon.query("127.0.0.1:1", bytes(32), timeout=float("nan"))


def test_measure_one_key_under_two_names_is_one_vote(gnomon, honest):
    """The same server listed twice (same key, same address) is one vote:
    three names, two servers, listed as two (so, trusted, both must
    agree)."""
    a, b, _ = honest
    text = server_list([a, b, b], ["a", "b", "b-again"])
    m = gnomon.measure(text, max_liars=0)
    assert len(m.entries) == 6 and all(e.answer for e in m.entries)
    assert m.grouped == [["b", "b-again"]] and m.grouped_because == ["shared key"]
    assert m.consensus is not None and sorted(m.consensus.agreeing) == ["a", "b", "b-again"]
    assert (m.consensus.answering, m.consensus.agreeing_voters) == (2, 2)
    assert (m.listed, m.answered) == (2, 2)
    assert m.quorum_met and not m.malfeasance
    # Three names cannot make a quorum of three servers.
    with pytest.raises(ValueError, match="2 distinct server"):
        gnomon.measure(text, quorum=3)
    # Two servers cannot outvote the one liar assumed by default: however
    # many names answered, no consensus.
    with pytest.raises(gnomon.NoAnswer) as e:
        gnomon.measure(text)
    why = e.value.measurement.no_consensus or ""
    assert "a list of 2 server(s) cannot outvote 1 liar(s)" in why, why


def test_measure_a_liar_under_three_names_is_one_vote_and_outside(gnomon, honest):
    """A liar an hour ahead listed under three names beside two honest
    servers: counted per name it would be three of five, the majority;
    counted per key it is one of three, and alone."""
    if not LIBFAKETIME.exists():
        skip("test_serve.py::test_measure_a_liar_under_three_names_is_one_vote_and_outside", f"{LIBFAKETIME} missing (package libfaketime)")
    g = serve(env=faketime_env("+3600"))
    liar = next(g)
    try:
        names = ["a", "b", "liar1", "liar2", "liar3"]
        with pytest.raises(gnomon.Malfeasance) as e:
            gnomon.measure(server_list([*honest[:2], liar, liar, liar], names))
    finally:
        g.close()
    m = e.value.measurement
    assert m.grouped == [["liar1", "liar2", "liar3"]]
    assert m.consensus is not None and sorted(m.consensus.agreeing) == ["a", "b"]
    assert (m.consensus.answering, m.consensus.agreeing_voters) == (3, 2)
    assert (m.listed, m.max_liars, m.needed) == (3, 1, 3)
    assert abs(m.consensus.offset_us) < HOUR_US // 10
    assert sorted(m.suspects) == ["liar1", "liar2", "liar3"]
    assert m.quorum_met


def test_measure_quorum_not_met_is_no_answer_with_the_consensus(gnomon, honest):
    """One honest server answers, another never does, and neither is
    assumed to lie: a consensus of one server, below the default quorum of
    2. NoAnswer, and the measurement shows the consensus and why it was
    not enough; with quorum=1 the same answers are accepted."""
    with silent_socket() as s:
        quiet = types.SimpleNamespace(addr="127.0.0.1:%d" % s.getsockname()[1], public_key="A" * 43 + "=")
        text = server_list([honest[0], quiet], ["a", "quiet"])
        with pytest.raises(gnomon.NoAnswer) as e:
            gnomon.measure(text, max_liars=0, timeout=0.5)
        m = e.value.measurement
        assert m is not None and not m.quorum_met and m.quorum == 2
        assert m.consensus is not None and m.consensus.agreeing == ["a"]
        assert (m.consensus.answering, m.consensus.agreeing_voters) == (1, 1)
        assert "fewer than the quorum of 2" in str(e.value)
        assert "assumes at most 0 of the 2 listed servers lie" in str(e.value)
        ok = gnomon.measure(text, quorum=1, max_liars=0, timeout=0.5)
        assert ok.quorum_met and ok.consensus is not None and ok.consensus.agreeing == ["a"]


def interrupted_after(delay: float, call):
    """Run `call` with a SIGINT sent to this process after `delay` s: the
    seconds until KeyboardInterrupt arrived (it must).

    Python turns SIGINT into KeyboardInterrupt only if SIGINT was not
    ignored when it started, and a suite started in the background
    (`nohup`, `cmd &` without job control) inherits it ignored: the
    handler a terminal's Ctrl-C meets is installed here for the call."""
    import os
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
    return time.monotonic() - start


# Ctrl-C during a blocking call: the call would wait 60 s for a silent
# server; the interrupt must arrive long before that (a bound on a hang,
# 6x the time it takes on a loaded machine, not a performance claim).
SILENT_FOR = 60.0
INTERRUPT_WITHIN = 10.0


def test_ctrl_c_interrupts_a_blocking_query(gnomon):
    with silent_socket() as s:
        addr = "127.0.0.1:%d" % s.getsockname()[1]
        key = base64.b64encode(b"\x01" * 32).decode()
        took = interrupted_after(0.3, lambda: gnomon.query(addr, key, timeout=SILENT_FOR, tcp=False))
    assert took < INTERRUPT_WITHIN, took
    # The module still works afterwards.
    assert len(gnomon.versions()) >= 15


def test_ctrl_c_interrupts_a_blocking_measure(gnomon):
    with silent_socket() as s1, silent_socket() as s2, silent_socket() as s3:
        silent = [
            types.SimpleNamespace(addr="127.0.0.1:%d" % s.getsockname()[1], public_key=base64.b64encode(bytes([i + 1]) * 32).decode())
            for i, s in enumerate((s1, s2, s3))
        ]
        lst = server_list(silent, ["x", "y", "z"])
        took = interrupted_after(0.3, lambda: gnomon.measure(lst, timeout=SILENT_FOR, tcp=False))
    assert took < INTERRUPT_WITHIN, took
