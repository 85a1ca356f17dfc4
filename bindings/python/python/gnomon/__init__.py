"""Roughtime for Python, verified by gnomon's Rust protocol crate.

Every Roughtime version is spoken: Google's, the IETF drafts 01–19 and
RFC 10049 version 1. Verification (signatures, delegation window, Merkle
proof, nonce, version negotiation) happens in Rust; this module gives the
results as dataclasses with timezone-aware datetimes.

>>> import gnomon
>>> a = gnomon.query("127.0.0.1:2002", "Ixu7gqjJ9TU6IxsO8wxZxAFT5te6FcZZQq5vXFl35JE=")  # doctest: +SKIP
>>> a.midpoint, a.radius, a.version  # doctest: +SKIP
(datetime.datetime(2026, 11, 24, 7, 30, 1, 123456, tzinfo=datetime.timezone.utc), datetime.timedelta(seconds=1), 'rfc-10049')

For your own transport:

>>> req = gnomon.build_request("rfc-10049")
>>> len(req)
1024
>>> # send req, receive resp, then:
>>> # answer = gnomon.verify(req, resp, public_key)

The guarantees and what the caller must still do are in docs/PYTHON.md.
"""

from __future__ import annotations

import datetime as _dt
import os
import time as _time
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import GnomonError, InvalidAnswer, Malfeasance, NoAnswer, ProofError, ServerListRefused
from ._now import Now, NowError, now

__all__ = [
    "Answer",
    "Consensus",
    "Entry",
    "Exchange",
    "GnomonError",
    "InvalidAnswer",
    "Malfeasance",
    "Measurement",
    "NoAnswer",
    "Now",
    "NowError",
    "ProofError",
    "Proven",
    "ReportEntry",
    "ReportResult",
    "ServerListRefused",
    "SignedList",
    "SignedServerList",
    "build_request",
    "measure",
    "now",
    "query",
    "verify",
    "verify_proof",
    "verify_report",
    "verify_server_list",
    "versions",
]

PublicKey = Union[str, bytes]
"""A long-term public key: base64 (or hex) text, or raw bytes: 32 for Ed25519, 1312 for ML-DSA-44 (version 0x90000001, asked over TCP only)."""

Version = Union[str, int]
"""A version by name (``"rfc-10049"``, ``"draft-08"``, ``"google"``) or by
wire number (``1``, ``0x8000000b``)."""

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _utc(us: int) -> _dt.datetime:
    try:
        return _EPOCH + _dt.timedelta(microseconds=us)
    except OverflowError:
        # Signed, but past datetime's year 9999: no use to anyone.
        raise InvalidAnswer(f"MIDP {us} µs is past the year 9999", "time") from None


@dataclass(frozen=True)
class Answer:
    """A verified Roughtime answer.

    The server vouches that true time was within ``radius`` of ``midpoint``
    when it signed. From :func:`query` the network fields are set; from
    :func:`verify` they are ``None``.
    """

    midpoint: _dt.datetime
    """MIDP as an aware UTC datetime."""
    midpoint_us: int
    """MIDP, microseconds since the Unix epoch (exact; datetime has no leap seconds either)."""
    radius: _dt.timedelta
    """RADI."""
    radius_us: int
    """RADI in microseconds."""
    version: str
    """The version answered, by name (``"rfc-10049"``, ``"draft-08"``, ``"google"``)."""
    version_number: int
    """Its wire number: 0x80000000 + n for draft n, 1 for RFC 10049; Google's protocol sends none and shows 0xb2d98825 (3000600613), the number server lists give it."""
    online_key: bytes
    """The delegated online key that signed the time (for ML-DSA-44, whose keys are 1312 bytes, the first 32 bytes of SHA-512(0xff ‖ key))."""
    delegation_us: Tuple[int, int]
    """The delegation's validity window (MINT, MAXT), µs since the epoch."""
    rtt: Optional[float] = None
    """Round-trip time of the answered request, seconds."""
    server: Optional[str] = None
    """The address (``ip:port``) that answered."""
    transport: Optional[str] = None
    """``"udp"`` or ``"tcp"``."""
    offset_us: Optional[int] = None
    """The server's clock minus this machine's, µs (MIDP − local midpoint of the round trip)."""
    request: Optional[bytes] = field(default=None, repr=False)
    """The request as sent."""
    response: Optional[bytes] = field(default=None, repr=False)
    """The response as received."""

    @classmethod
    def _of(cls, d: Dict[str, Any]) -> "Answer":
        rtt = d.get("rtt_us")
        return cls(
            midpoint=_utc(d["midpoint_us"]),
            midpoint_us=d["midpoint_us"],
            radius=_dt.timedelta(microseconds=d["radius_us"]),
            radius_us=d["radius_us"],
            version=d["version"],
            version_number=d["version_number"],
            online_key=d["online_key"],
            delegation_us=tuple(d["delegation_us"]),
            rtt=None if rtt is None else rtt / 1e6,
            server=d.get("server"),
            transport=d.get("transport"),
            offset_us=d.get("offset_us"),
            request=d.get("request"),
            response=d.get("response"),
        )


def versions() -> List[Tuple[str, int]]:
    """Every version gnomon speaks, as (name, wire number), oldest first."""
    return list(_native.versions())


def build_request(
    version: Version,
    nonce: Optional[bytes] = None,
    *,
    public_key: Optional[PublicKey] = None,
    size: int = 1024,
) -> bytes:
    """A request for ``version`` to send over your own transport.

    ``nonce`` defaults to fresh random bytes from the operating system (32
    bytes, or 64 for Google and drafts up to 04); pass your own to chain
    requests. With ``public_key``, versions that define SRV name that key.
    Keep the request: :func:`verify` needs it.

    >>> req = build_request("draft-08", bytes(32))
    >>> req[:8]
    b'ROUGHTIM'
    """
    return _native.build_request(version, nonce, public_key, size)


def verify(request: bytes, response: bytes, public_key: PublicKey) -> Answer:
    """Verify ``response`` to ``request`` (both as sent and received) against
    the server's long-term key.

    Raises :class:`InvalidAnswer` (with ``reason``) when the response fails
    any check, ``ValueError`` when ``request`` is not a Roughtime request or
    the key is malformed, ``TypeError`` for anything but bytes.
    """
    return Answer._of(_native.verify(request, response, public_key))


def query(
    address: str,
    public_key: PublicKey,
    *,
    version: Optional[Version] = None,
    timeout: float = 2.0,
    tcp: Optional[bool] = None,
) -> Answer:
    """Ask the server at ``address`` (``"host:port"``; port 5319 when left
    out) for the time, verify the answer, and return it.

    ``version=None`` finds the newest version the server speaks;
    ``timeout`` bounds the whole call in seconds; ``tcp=None`` uses UDP and
    falls back to TCP for versions that define it, ``True`` only TCP,
    ``False`` only UDP. The interpreter's lock is released while waiting.

    Raises :class:`NoAnswer` or :class:`InvalidAnswer`.
    """
    return Answer._of(
        _native.query(address, public_key, version=version, timeout=timeout, tcp=tcp)
    )


@dataclass(frozen=True)
class Consensus:
    """The offsets from this machine's clock that the servers prove by the
    quorum rule (the same as ``gnomon sync``'s): each answer vouches for
    MIDP − local ± (RADI + RTT/2), one server's answers are intersected
    (servers sharing a key, address or operator are one), and, assuming at
    most f of the n listed servers lie, the consensus is the hull of every
    offset held by m − f of the m that answered, given m ≥ 2f + 1. Under
    that assumption it holds the true offset whoever was silenced; liars
    can make it wide, never wrong (check :attr:`radius_us`, and
    :attr:`Measurement.disagreement`)."""

    offset_low_us: int
    offset_high_us: int
    agreeing: List[str]
    """Names of the servers whose interval meets it (every name of an agreeing server)."""
    answering: int
    """Distinct servers that voted: answered, and did not contradict themselves."""
    agreeing_voters: int
    """Distinct servers among :attr:`agreeing`: what the quorum counts."""

    @property
    def offset_us(self) -> int:
        """The middle of the agreed interval: add it to local time."""
        return self.offset_low_us + (self.offset_high_us - self.offset_low_us) // 2

    @property
    def radius_us(self) -> int:
        """Half the width of the agreed interval."""
        return (self.offset_high_us - self.offset_low_us) // 2

    def now(self) -> _dt.datetime:
        """The local clock corrected by the consensus offset."""
        local = _dt.datetime.now(_dt.timezone.utc)
        return local + _dt.timedelta(microseconds=self.offset_us)


@dataclass(frozen=True)
class Entry:
    """One query of the sequence: an answer, or why there was none."""

    server: str
    pass_: int
    """1 or 2."""
    answer: Optional[Answer]
    error: Optional[GnomonError]


@dataclass(frozen=True)
class Exchange:
    """One link of the chain: request, response, the rand that chained it
    (``None`` for the first) and the key it verified with."""

    request: bytes
    response: bytes
    rand: Optional[bytes]
    public_key: bytes


@dataclass(frozen=True)
class Measurement:
    """The measurement sequence of RFC 10049 (as ``gnomon query
    --servers`` runs it)."""

    entries: List[Entry]
    order: List[str]
    """The servers asked, in order."""
    chain: List[Exchange]
    """The verified exchanges, each nonce chained from the previous response."""
    consensus: Optional[Consensus]
    quorum: int
    """How many distinct servers had to agree (the ``quorum`` asked for)."""
    quorum_met: bool
    """A consensus exists and at least :attr:`quorum` distinct servers agree on it."""
    max_liars: int
    """The assumption: at most this many of the :attr:`listed` servers lie
    (the ``max_liars`` asked for, or the default max(1, ⌊(listed − 1)/3⌋))."""
    listed: int
    """Distinct servers on the list (its usable entries, those that are one
    server counted once), answered or not."""
    answered: int
    """Distinct servers that answered and did not contradict themselves."""
    needed: int
    """How many must answer for a consensus: 2 × :attr:`max_liars` + 1."""
    assumption: str
    """The assumption and who answered, in words: "assumes at most 1 of the
    5 listed servers lies; 3 answered, 3 needed"."""
    no_consensus: Optional[str]
    """Why there is no consensus, in words that name the fix (too few
    answered: the silent ones may have been silenced; or no offset held by
    enough of them); ``None`` when there is one."""
    disagreement: Optional[str]
    """Why the servers disagree, in words, when the offsets the rule accepts
    fall in more than one stretch (:attr:`regions`): the consensus spans
    them all and comes out wide; ``None`` when they do not."""
    regions: List[Tuple[int, int]]
    """The stretches of offsets (µs) held by m − f of the m servers that answered, in order."""
    grouped: List[List[str]]
    """Names that are one server (a shared key, address or ``operator``;
    each group two names or more): each group is one vote, answered or not."""
    grouped_because: List[str]
    """Why each group of :attr:`grouped` is one server: "shared key",
    "shared address and operator", …"""
    outside: List[Tuple[str, str]]
    """Servers the quorum rule flags: (name, ``"outside_consensus"`` or ``"self_contradiction"``)."""
    contradictions: List[Tuple[str, str]]
    """Pairs of server names (the earlier answer's first; each pair once)
    whose answers in the chain cannot both be true: one of the two lied, the
    pair alone does not say which."""
    contradicting_entries: List[Tuple[int, int]]
    """The same as indices into :attr:`entries` (earlier, later), one pair per
    pair of answers."""
    malfeasance: bool
    """A contradiction in the chain, or a server the quorum rule flags."""
    suspects: List[str]
    """The servers the quorum rule flags (the names in :attr:`outside`)."""
    report: Optional[str]
    """The malfeasance report (JSON) when the chain proves a contradiction."""
    skipped: List[str]
    """Servers of the list that could not be used, with why."""


def _entry_error(kind: str, message: str, reason: Optional[str]) -> GnomonError:
    if kind == "invalid":
        return InvalidAnswer(message, reason or "other")
    return NoAnswer(message)


def _measurement(d: Dict[str, Any]) -> Measurement:
    entries = []
    for e in d["entries"]:
        err = e.get("error")
        entries.append(
            Entry(
                server=e["name"],
                pass_=e["pass"],
                answer=None if err else Answer._of(e),
                error=_entry_error(*err) if err else None,
            )
        )
    c = d["consensus"]
    return Measurement(
        entries=entries,
        order=list(d["order"]),
        chain=[Exchange(*x) for x in d["chain"]],
        consensus=None
        if c is None
        else Consensus(
            offset_low_us=c["low_us"],
            offset_high_us=c["high_us"],
            agreeing=list(c["agreeing"]),
            answering=c["answering"],
            agreeing_voters=c["agreeing_voters"],
        ),
        quorum=d["quorum"],
        quorum_met=d["quorum_met"],
        max_liars=d["max_liars"],
        listed=d["listed"],
        answered=d["answered"],
        needed=d["needed"],
        assumption=d["assumption"],
        no_consensus=d["no_consensus"],
        disagreement=d["disagreement"],
        regions=[tuple(x) for x in d["regions"]],
        grouped=[list(g) for g in d["grouped"]],
        grouped_because=list(d["grouped_because"]),
        outside=[tuple(x) for x in d["outside"]],
        contradictions=[tuple(x) for x in d["contradictions"]],
        contradicting_entries=[tuple(x) for x in d["contradicting_entries"]],
        malfeasance=d["malfeasance"],
        suspects=list(d["suspects"]),
        report=d["report"],
        skipped=list(d["skipped"]),
    )


def measure(
    server_list: Union[str, bytes, "os.PathLike[str]"],
    *,
    ask: Optional[int] = None,
    quorum: int = 2,
    max_liars: Optional[int] = None,
    timeout: float = 2.0,
    tcp: Optional[bool] = None,
) -> Measurement:
    """Run the measurement sequence over a server list (RFC 10049's
    server-list JSON, given as text, bytes or a path) and decide
    whom to believe, as ``gnomon sync`` does.

    Whom to believe rests on an assumption about the list, never about
    who answered (an attacker on the path decides that): at most
    ``max_liars`` of its n servers lie (``None``, the default:
    max(1, ⌊(n − 1)/3⌋); servers sharing a key, address or ``operator``
    are one). With m of them answering there is a consensus only when
    m ≥ 2 × max_liars + 1, and it is the hull of the offsets held by
    m − max_liars of them: under the assumption it holds the true offset
    whoever was silenced. ``max_liars=0`` trusts every server.

    ``ask`` servers are chosen at random (``None``, the default: enough to
    outvote the liars with as many more silenced, 3 × max_liars + 1 and at
    least 3, or all of them when some are one server) and asked twice in
    the same order, each nonce chained from the previous response.
    ``quorum`` is how many distinct servers must agree on the consensus,
    as ``gnomon sync``'s ``quorum``. ``timeout`` bounds each query.

    Changed in 0.2.0: ``quorum`` used to be how many servers to ask; that
    is ``ask`` now, and ``quorum=None`` is a TypeError saying so.

    Returns the :class:`Measurement` when at least ``quorum`` distinct
    servers agree and nobody lied; read :attr:`Measurement.disagreement`
    and the consensus's radius before trusting it to be narrow, and
    :attr:`Measurement.assumption` for what it rests on. Raises
    :class:`Malfeasance` when a server lied (a contradiction in the chain,
    or a server outside the consensus); :class:`InvalidAnswer` when no
    consensus the quorum accepts formed and some answer failed
    verification; :class:`NoAnswer` otherwise (too few answered among
    them: :attr:`Measurement.no_consensus` says why). Each carries
    ``.measurement``. ``ValueError`` when the call can never succeed: a
    quorum above the list's distinct servers or above ``ask``, or an
    ``ask`` below the 2 × max_liars + 1 that must answer.
    """
    if isinstance(server_list, str):
        raw = server_list.encode()
    elif isinstance(server_list, bytes):
        raw = server_list
    elif isinstance(server_list, os.PathLike):
        with open(server_list, "rb") as f:
            raw = f.read()
    else:
        raise TypeError("server_list: JSON text, bytes, or a path")
    m = _measurement(
        _native.measure(raw, ask=ask, quorum=quorum, max_liars=max_liars, timeout=timeout, tcp=tcp)
    )
    err: Optional[GnomonError] = None
    if m.malfeasance:
        if m.suspects:
            why = ", ".join(m.suspects) + " signed a time that cannot be true"
        else:
            pairs = "; ".join(f"{a} and {b}" for a, b in m.contradictions)
            why = f"the answers of {pairs} cannot both be true (one of each pair lied)"
        err = Malfeasance("malfeasance: " + why)
    elif not m.quorum_met:
        if m.consensus is None:
            why = m.no_consensus or "no consensus"
        else:
            why = (
                f"no consensus the quorum accepts: {m.consensus.agreeing_voters} distinct "
                f"server(s) agree, fewer than the quorum of {m.quorum}"
            )
        why += f" ({m.assumption})"
        failed = [e.error for e in m.entries if e.error is not None]
        invalid = [e for e in failed if isinstance(e, InvalidAnswer)]
        if invalid:
            err = InvalidAnswer(why + "; " + str(invalid[-1]), invalid[-1].reason)
        else:
            err = NoAnswer(why)
    if err is not None:
        err.measurement = m
        raise err
    return m


@dataclass(frozen=True)
class ReportEntry:
    """One response of a report, checked."""

    answer: Optional[Answer]
    error: Optional[InvalidAnswer]
    link_error: Optional[str]
    """Why this request's nonce is not chained from the previous response
    (``"missing_rand"``, ``"mismatch"``, …), ``None`` when it is."""


@dataclass(frozen=True)
class ReportResult:
    """A malfeasance report, verified offline."""

    entries: List[ReportEntry]
    contradictions: List[Tuple[int, int]]
    all_valid: bool
    """Every response and every chain link verified."""
    proof_of_malfeasance: bool
    """All valid and at least one pair contradicts: some server signed a wrong time."""


def verify_report(report_json: Union[str, bytes]) -> ReportResult:
    """Check a malfeasance report (RFC 10049 / draft 12+ JSON): every
    response against its request and key, every chain link, and which
    answers contradict. ``ValueError`` when it is not a report, or is the
    pre-12 form that holds nothing to verify."""
    if isinstance(report_json, str):
        report_json = report_json.encode()
    d = _native.verify_report(report_json)
    entries = [
        ReportEntry(
            answer=Answer._of(e["answer"]) if "answer" in e else None,
            error=InvalidAnswer(*e["error"]) if "error" in e else None,
            link_error=e["link_error"],
        )
        for e in d["entries"]
    ]
    return ReportResult(
        entries=entries,
        contradictions=[tuple(x) for x in d["contradictions"]],
        all_valid=d["all_valid"],
        proof_of_malfeasance=d["proof_of_malfeasance"],
    )


@dataclass(frozen=True)
class Proven:
    """What a relayed proof proves of the device's present (docs/PROOF.md):
    now lies between ``earliest`` and ``latest``."""

    earliest_us: int
    """Unix µs."""
    latest_us: int
    """Unix µs."""
    agreeing_keys: int
    """Distinct pinned servers whose intervals meet the proven interval."""
    answering_keys: int
    """Distinct pinned servers that answered (one contradicting itself excluded)."""
    max_liars: int
    """The assumption it was proven under: at most this many of the
    :attr:`pinned` servers lie."""
    pinned: int
    """Distinct pinned servers (keys of one server counted once)."""
    needed: int
    """How many the bundle had to carry: 2 × :attr:`max_liars` + 1."""
    assumption: str
    """The same in words: "assumes at most 1 of the 3 pinned servers lies;
    3 answered, 3 needed"."""

    @property
    def earliest(self) -> _dt.datetime:
        return _utc(self.earliest_us)

    @property
    def latest(self) -> _dt.datetime:
        return _utc(self.latest_us)

    @property
    def radius(self) -> float:
        """Half the width, seconds."""
        return (self.latest_us - self.earliest_us) / 2e6

    @classmethod
    def _of(cls, d: Dict[str, Any]) -> "Proven":
        return cls(
            d["earliest_us"],
            d["latest_us"],
            d["agreeing_keys"],
            d["answering_keys"],
            d["max_liars"],
            d["pinned"],
            d["needed"],
            d["assumption"],
        )


def verify_proof(
    bundle: Union[str, bytes],
    device: bytes,
    keys: List[PublicKey],
    elapsed: float,
    *,
    quorum: int = 1,
    max_liars: Optional[int] = None,
    max_radius: Optional[float] = 10.0,
    servers: Optional[Sequence[Hashable]] = None,
) -> Proven:
    """Check a relayed proof as the device does, offline (docs/PROOF.md):
    ``bundle`` in the binary form or the JSON one (``gnomon relay``
    writes both), made for the device's value ``device`` (16 to 64 bytes,
    at least 128 bits of them unpredictable to the relay), against its
    pinned ``keys``, ``elapsed`` seconds after the device made ``device``
    (an upper bound from its own monotonic clock, drift included).
    ``elapsed`` is required: a bundle the relay held widens the interval
    only through it, so a value too small gives an interval that ends
    before now. ``max_radius`` (seconds, ``None``: no limit) bounds half
    the proven interval's width.

    The assumption is about the pinned servers, not the answers the
    bundle carries (the relay picks those): at most ``max_liars`` of them
    lie (``None``, the default: fewer than half, ⌊(n − 1)/2⌋ of n). The
    bundle must carry 2 × max_liars + 1 of them, and the interval is the
    hull of the times held by all of them but ``max_liars``. ``servers``,
    when given, labels each key with its server (any hashable: a name):
    keys with one label, one machine's Ed25519 and ML-DSA-44 identities
    say, are one voter; without it each distinct key is a server of its
    own. ``quorum`` is how many distinct servers must agree beyond that.

    Raises :class:`ProofError` with the failure's ``kind`` (and the
    assumption, in words, as ``assumption``); ``ValueError`` for a bad key
    or argument (a device value of another length among them)."""
    if isinstance(bundle, str):
        bundle = bundle.encode()
    if elapsed < 0:
        raise ValueError("elapsed: a time that has passed, not negative")
    if max_radius is not None and max_radius < 0:
        raise ValueError("max_radius: not negative")
    if max_liars is not None and max_liars < 0:
        raise ValueError("max_liars: not negative")
    keys = list(keys)
    voter_of: Optional[List[int]] = None
    if servers is not None:
        labels = list(servers)
        if len(labels) != len(keys):
            raise ValueError(f"servers: {len(labels)} label(s) for {len(keys)} key(s); one per key")
        ids: Dict[Hashable, int] = {}
        voter_of = [ids.setdefault(label, len(ids)) for label in labels]
    try:
        d = _native.verify_proof(
            bundle,
            device,
            keys,
            round(elapsed * 1e6),
            quorum,
            max_liars,
            None if max_radius is None else round(max_radius * 1e6),
            voter_of,
        )
    except ProofError as e:
        if isinstance(e.majority, dict):
            e.majority = Proven._of(e.majority)
        raise
    return Proven._of(d)


@dataclass(frozen=True)
class SignedList:
    """One monitor's list, accepted: its signed header."""

    key: int
    """Index of the key that signed it, in the ``keys`` given."""
    fingerprint: str
    """That key as ``ssh-keygen -l`` names it (``SHA256:…``)."""
    comment: str
    """The comment of its OpenSSH line."""
    monitor: str
    """The name the monitor gives itself (``observatory.monitor``)."""
    sequence: int
    """Grows with each publication; an older one is refused as replayed."""
    published: _dt.datetime
    expires: _dt.datetime


@dataclass(frozen=True)
class SignedServerList:
    """What :func:`verify_server_list` accepted and merged."""

    document: bytes
    """An RFC server list of the servers ``threshold`` pinned monitors
    list, for :func:`measure`."""
    servers: int
    """Servers in :attr:`document`."""
    monitors: int
    """Current lists merged (one a key)."""
    expires: Optional[_dt.datetime]
    """When the first of those lists expires: check again before then."""
    accepted: List[SignedList]
    refused: List[Tuple[int, str, str]]
    """Each list refused, as (index in ``lists``, label, words)."""
    left_out: List[Tuple[str, int, int]]
    """Servers some monitor lists but fewer than ``threshold`` do, as
    (name, listed by, needed)."""
    seen: str
    """The updated record of lists seen (JSON): keep it, and pass it as
    ``seen`` next time, so that an older list is refused."""


def _seconds(t: Union[None, float, int, _dt.datetime]) -> int:
    if t is None:
        return int(_time.time())
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            raise ValueError("now: an aware datetime (tzinfo set), or Unix seconds")
        return int(t.timestamp())
    return int(t)


def _key_line(k: Union[str, "os.PathLike[str]"]) -> str:
    if isinstance(k, str) and k.lstrip().startswith("ssh-"):
        return k
    with open(k, encoding="utf-8") as f:
        return f.read()


def verify_server_list(
    lists: Sequence[Tuple[bytes, bytes]],
    keys: Sequence[Union[str, "os.PathLike[str]"]],
    *,
    threshold: int = 1,
    now: Union[None, float, int, _dt.datetime] = None,
    seen: Optional[str] = None,
) -> SignedServerList:
    """Check monitors' signed server lists and merge them, k of n, as
    ``gnomon sync --servers-url … --servers-key …`` does.

    ``lists`` holds one ``(document, signature)`` pair per monitor: the
    bytes of its ``/servers.json`` and of ``/servers.json.sig`` (an
    OpenSSH signature in namespace ``roughtime-server-list``). ``keys`` are
    the pinned monitor keys, each an OpenSSH public key line
    (``"ssh-ed25519 AAAA… comment"``) or the path of a ``.pub`` file
    holding one. A list is accepted when its signature verifies under a
    pinned key, it has not expired at ``now`` (default: this machine's
    clock), and its sequence is not below the last one ``seen`` recorded
    for that key. A server is used when at least ``threshold`` distinct
    keys' accepted lists give it with the same key and operator, at the
    addresses that many give.

    The assumption, as a number: fewer than ``threshold`` of the pinned
    keys are held by an adversary (who may also replay, drop or change
    anything on the network). Then every server in the result was listed
    by an honest monitor in a current list it really published.

    Keep :attr:`SignedServerList.seen` and pass it next time. Raises
    :class:`ServerListRefused` (with ``label``) when fewer than
    ``threshold`` keys have an accepted list; ``ValueError`` for a key
    that is not an ``ssh-ed25519`` line, a threshold out of 1..len(keys),
    keys given twice, or a ``seen`` that is not a record.
    """
    pairs = [(bytes(d), bytes(s)) for d, s in lists]
    lines = [_key_line(k) for k in keys]
    d = _native.verify_server_list(pairs, lines, threshold, _seconds(now), seen)
    expires = d["expires_unix"]
    return SignedServerList(
        document=d["document"],
        servers=d["servers"],
        monitors=d["monitors"],
        expires=None if expires is None else _EPOCH + _dt.timedelta(seconds=expires),
        accepted=[
            SignedList(
                key=a["key"],
                fingerprint=a["fingerprint"],
                comment=a["comment"],
                monitor=a["monitor"],
                sequence=a["sequence"],
                published=_EPOCH + _dt.timedelta(seconds=a["published_unix"]),
                expires=_EPOCH + _dt.timedelta(seconds=a["expires_unix"]),
            )
            for a in d["accepted"]
        ],
        refused=[(int(i), str(label), str(words)) for i, label, words in d["refused"]],
        left_out=[(str(name), int(by), int(needed)) for name, by, needed in d["left_out"]],
        seen=d["seen"],
    )
