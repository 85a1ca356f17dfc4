"""Just enough of the Roughtime wire format for the interop runner.

The runner does not verify anything itself (the peers and gnomon do that); it
only needs to read a few tags out of a response and give a copied request a
fresh nonce.
"""

import os
import struct

MAGIC = b"ROUGHTIM"
# Google answers are bare messages without VER; the suite calls them 3000600613
# ("Google Roughtime" as a version number, as gnomon does).
GOOGLE_VER = 3000600613


def unframe(packet: bytes) -> tuple[bool, bytes, int]:
    """(framed, message, offset of the message in packet)."""
    if packet[:8] == MAGIC:
        if len(packet) < 12:
            raise ValueError("short ROUGHTIM header")
        (length,) = struct.unpack_from("<I", packet, 8)
        if 12 + length != len(packet):
            raise ValueError("ROUGHTIM length does not match the datagram")
        return True, packet[12:], 12
    return False, packet, 0


def tags(message: bytes) -> dict[bytes, tuple[int, int]]:
    """Tag -> (start, end) of its value inside message."""
    if len(message) < 4:
        raise ValueError("short message")
    (n,) = struct.unpack_from("<I", message, 0)
    if n == 0 or n > 1024 or 8 * n > len(message):
        raise ValueError(f"bad tag count {n}")
    header = 8 * n  # count, n - 1 offsets, n tags
    offsets = [0] + list(struct.unpack_from(f"<{n - 1}I", message, 4))
    names = [message[4 * n + 4 * i : 4 * n + 4 * i + 4] for i in range(n)]
    body = len(message) - header
    out = {}
    for i, name in enumerate(names):
        start = offsets[i]
        end = offsets[i + 1] if i + 1 < n else body
        if not start <= end <= body:
            raise ValueError("bad offsets")
        out[name] = (header + start, header + end)
    return out


def value(message: bytes, tag: bytes) -> bytes | None:
    span = tags(message).get(tag)
    return None if span is None else message[span[0] : span[1]]


def response_summary(packet: bytes) -> dict:
    """PATH length, INDX and the version a response claims (signed VER first;
    GOOGLE_VER for a bare message)."""
    framed, msg, _ = unframe(packet)
    path = value(msg, b"PATH") or b""
    indx = value(msg, b"INDX")
    srep = value(msg, b"SREP")
    ver = None
    if srep is not None:
        ver = value(srep, b"VER\x00")
    if ver is None:
        ver = value(msg, b"VER\x00")
    version = struct.unpack("<I", ver)[0] if ver and len(ver) == 4 else None
    if not framed:
        version = GOOGLE_VER
    return {
        "path_bytes": len(path),
        "indx": struct.unpack("<I", indx)[0] if indx and len(indx) == 4 else None,
        "version": version,
        "nonce": value(msg, b"NONC"),
    }


def request_nonce(packet: bytes) -> bytes | None:
    _, msg, _ = unframe(packet)
    return value(msg, b"NONC")


def with_fresh_nonce(packet: bytes) -> bytes:
    """The same request with NONC replaced by random bytes of the same length."""
    _, msg, base = unframe(packet)
    span = tags(msg).get(b"NONC")
    if span is None:
        raise ValueError("request has no NONC")
    start, end = base + span[0], base + span[1]
    return packet[:start] + os.urandom(end - start) + packet[end:]
