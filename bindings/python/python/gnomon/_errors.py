"""The exceptions gnomon raises. Mistakes in the call itself (a key that is
not base64 or hex, or not 32 or 1312 bytes; an unknown version; a wrong
type) raise the built-in ValueError and TypeError instead."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

if TYPE_CHECKING:
    from . import Measurement


class GnomonError(Exception):
    """Base class: no verified time came of the call.

    ``measurement`` is set when the error ends a :func:`gnomon.measure`
    call: what was asked and answered is still there to read.
    """

    measurement: Optional["Measurement"] = None


class NoAnswer(GnomonError):
    """Nothing answered before the timeout (or the name did not resolve,
    or the port is closed); from :func:`gnomon.measure`, also too few
    distinct servers answered and agree (no consensus, or fewer than the
    quorum). Silence proves nothing: anyone on the path can drop packets,
    which is why fewer than 2 × max_liars + 1 answering is no consensus,
    whatever they say."""


class InvalidAnswer(GnomonError):
    """An answer came and failed verification.

    ``reason`` names what was wrong, for programs: ``"delegation_signature"``
    (not signed by this key), ``"response_signature"``, ``"merkle_root"``,
    ``"nonce_mismatch"``, ``"malformed"``, ``"framing"``, ``"downgrade"``,
    ``"version_not_offered"``, ``"outside_delegation"``, ``"tcp_closed"``, …
    The message says the same in words.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class Malfeasance(GnomonError):
    """A server signed a time that cannot be true: two answers of the chain
    contradict each other (one of the two lied: ``measurement.contradictions``
    names the pairs), or a server's interval misses the consensus, which
    under the assumption (``measurement.assumption``) holds the true time
    (``measurement.suspects``).
    ``measurement.report`` holds the proof as JSON (when the chain itself
    contradicts), to send to the list's ``reports`` URL."""


class ProofError(GnomonError):
    """A relayed proof (:func:`gnomon.verify_proof`) proves nothing, or
    proves that a server lied.

    ``kind`` names the failure as ``gnomon verify-proof --json`` does:
    ``"wrong_nonce"``, ``"binding"``, ``"unknown_key"``, ``"signature"``,
    ``"not_for_request"``, ``"response"``, ``"link"``, ``"contradiction"``,
    ``"liar"``, ``"too_few_keys"``, ``"no_quorum"``, ``"too_wide"``,
    ``"truncated"``, ``"malformed"``, ``"device_value_length"`` (the
    bundle's device value is shorter than 16 bytes or longer than 64).
    ``entry`` is the index of the entry the
    failure names (the earlier of two contradicting ones), or ``None``.
    For ``"contradiction"`` and ``"liar"`` (``malfeasance`` is true),
    ``majority`` is the proven :class:`gnomon.Proven` interval when there
    is one and it still meets the policy: the device may use it.
    ``assumption`` is what the bundle was judged under, in words ("assumes
    at most 2 of the 5 pinned servers lie; 3 answered, 5 needed"), or
    ``None`` when it was refused before that (a malformed bundle).
    """

    def __init__(
        self,
        message: str,
        kind: str,
        entry: Optional[int],
        majority: Any,
        assumption: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.entry = entry
        self.majority = majority
        self.assumption = assumption

    @property
    def malfeasance(self) -> bool:
        """The bundle proves that a server lied."""
        return self.kind in ("contradiction", "liar")


class ServerListRefused(GnomonError):
    """Too few of the pinned monitors' signed lists were accepted
    (:func:`gnomon.verify_server_list`): fewer keys than the threshold have
    a list that verifies, is current and is not older than one seen.

    ``label`` names why, for programs: the first refusal's (``"signature"``,
    ``"other_key"``, ``"expired"``, ``"replayed"``, ``"reused"``,
    ``"malformed"``), or ``"too_few"`` when every list given was accepted
    but they come from fewer keys than the threshold. ``refusals`` is each
    refused list as ``(index, label, words)``; ``seen`` the record with the
    lists that were accepted, to keep as on success.
    """

    def __init__(self, message: str, label: str, refusals: List[Tuple[int, str, str]], seen: str) -> None:
        super().__init__(message)
        self.label = label
        self.refusals = [(int(i), str(lbl), str(words)) for i, lbl, words in refusals]
        self.seen = seen
