//! Why a query failed, in words a user can act on.

use core::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::VerifyError;

/// Why an answer was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The response failed verification (this includes garbage and
    /// truncated datagrams, which do not parse).
    Verify(VerifyError),
    /// The TCP stream ended inside a response.
    TcpClosed {
        /// Bytes received.
        got: usize,
        /// Bytes the frame announced (0 when the header itself was cut).
        want: usize,
    },
    /// A TCP frame announced more bytes than any response can have.
    TcpTooLong(usize),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Verify(e) => f.write_str(&describe_verify_error(e)),
            Rejection::TcpClosed { got, want: 0 } => {
                write!(
                    f,
                    "the TCP stream ended after {got} bytes, inside the frame header"
                )
            }
            Rejection::TcpClosed { got, want } => {
                write!(f, "the TCP stream ended after {got} of {want} bytes")
            }
            Rejection::TcpTooLong(n) => write!(f, "a TCP frame announced {n} bytes"),
        }
    }
}

/// Why a server that is there says nothing, for every message about
/// silence (`gnomon query`, `gnomon bench load`): RFC 10049 servers drop a
/// request whose SRV names a key they do not hold, so a wrong key and a
/// dead server look alike; and a server whose own clock is unsynchronized
/// drops every request rather than sign a time it cannot vouch for.
pub const SILENT_SERVER: &str = "a server that drops requests for another public key looks \
     like this: check the key; so does one whose clock is unsynchronized (gnomon serve stays \
     silent until its clock is synchronized, unless started with --clock-unsynchronized \
     answer-with-radius)";

/// Why [`crate::Client::query`] returned no time.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryError {
    /// The host name did not resolve.
    Resolve {
        /// The name.
        host: String,
        /// The resolver's words.
        reason: String,
    },
    /// Nothing answered in time.
    NoAnswer {
        /// An ICMP "port unreachable" came back for UDP, or TCP was refused.
        refused: bool,
        /// Of `refused`, the UDP part: every UDP attempt to some address
        /// met an ICMP "port unreachable". A server that drops requests
        /// (for a key it does not hold, say) while not serving TCP shows
        /// `refused` from TCP alone; these two tell it from a closed port.
        udp_refused: bool,
        /// Of `refused`, the TCP part: a connection was refused.
        tcp_refused: bool,
        /// Requests sent, per transport.
        udp_sent: u32,
        /// TCP connections tried.
        tcp_tried: u32,
        /// Families offered, by their primary profile.
        offered: Vec<&'static str>,
        /// Time spent.
        elapsed: Duration,
        /// Older version families were left untried because silence alone
        /// does not allow a fallback (`Config::version_fallback`).
        older_not_tried: bool,
    },
    /// Answers came back and none verified (the last reason, a TCP one
    /// first). Discovery stops at such a family: no older version is tried
    /// after an invalid answer.
    Invalid {
        /// What was wrong.
        rejection: Rejection,
        /// Over which transport.
        transport: Transport,
        /// From where.
        peer: SocketAddr,
        /// The profile whose format the request used.
        offered: &'static str,
    },
    /// A local failure: no socket, no random bytes.
    Local(String),
}

impl QueryError {
    /// True for [`QueryError::Invalid`].
    pub fn is_invalid(&self) -> bool {
        matches!(self, QueryError::Invalid { .. })
    }

    /// True for [`QueryError::Local`].
    pub fn is_local(&self) -> bool {
        matches!(self, QueryError::Local(_))
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Resolve { host, reason } => write!(f, "cannot resolve {host}: {reason}"),
            QueryError::NoAnswer {
                udp_refused,
                tcp_refused,
                udp_sent,
                tcp_tried,
                offered,
                elapsed,
                older_not_tried,
                ..
            } => {
                write!(
                    f,
                    "no answer after {:.1} s ({udp_sent} UDP request(s), {tcp_tried} TCP attempt(s); offered {})",
                    elapsed.as_secs_f64(),
                    offered.join(", ")
                )?;
                // A refusal is an answer of sorts: nothing listens there, so
                // neither the key nor an older version would change it. Only
                // when UDP was refused too: a UDP-only server refuses every
                // TCP connection and still ignores a request for another key.
                if *udp_refused && (*tcp_refused || *tcp_tried == 0) {
                    return f.write_str(
                        "; the port refused the request (ICMP port unreachable or TCP connection \
                         refused): nothing listens there",
                    );
                }
                write!(f, "; {SILENT_SERVER}")?;
                if *tcp_refused {
                    f.write_str("; TCP was refused, so the server may serve UDP only")?;
                }
                if *older_not_tried {
                    f.write_str(
                        "; older versions were not tried: silence may be a dropper's, \
                         so falling back on it must be asked for (--version-fallback)",
                    )?;
                }
                Ok(())
            }
            QueryError::Invalid {
                rejection,
                transport,
                peer,
                offered,
            } => write!(
                f,
                "invalid answer from {peer} over {}: {rejection} (request in {offered} format)",
                transport_name(*transport)
            ),
            QueryError::Local(e) => write!(f, "local failure: {e}"),
        }
    }
}

impl std::error::Error for QueryError {}

/// An I/O error as a user reads it: the system's sentence without the
/// ` (os error N)` only the kernel's headers explain, and without the
/// resolver's "failed to lookup address information: " before its reason.
pub(crate) fn io_words(e: &std::io::Error) -> String {
    plain(&e.to_string())
}

/// [`io_words`] for a library's sentence that embeds an I/O error's text.
pub(crate) fn plain(text: &str) -> String {
    let text = text
        .strip_prefix("failed to lookup address information: ")
        .unwrap_or(text);
    match text.find(" (os error ") {
        Some(i) => text[..i].to_owned(),
        None => text.to_owned(),
    }
}

/// `udp` or `tcp`.
pub(crate) fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Udp => "udp",
        Transport::Tcp => "tcp",
    }
}

/// A sentence for each verification failure.
pub fn describe_verify_error(e: &VerifyError) -> String {
    use VerifyError as V;
    match e {
        V::Request(w) => format!("our own request does not parse ({w})"),
        V::Framing(w) => format!("not a Roughtime packet ({w})"),
        V::Message(w) => format!("malformed response ({w})"),
        V::UnknownVersion(v) => {
            format!("the response names version {v:#010x}, which we do not know")
        }
        V::NotOffered(v) => format!("the server answered version {v}, which we did not offer"),
        V::LegacyVersionOne => {
            "the server speaks roughenough 1.x's pre-standard \"version 1\", not RFC 10049".into()
        }
        V::VersionPlacement => {
            "the version is not where this version of the protocol puts it".into()
        }
        V::Type => "TYPE is missing or is not 1".into(),
        V::Vers => "the signed VERS list is unsorted, too long or lacks the version".into(),
        V::Downgrade { answered, better } => {
            format!("downgrade: the server answered {answered} though both sides speak {better}")
        }
        V::DelegationSignature => {
            "the delegation (DELE) is not signed by the server's long-term key".into()
        }
        V::ResponseSignature => {
            "the response (SREP) signature does not verify with the delegated key".into()
        }
        V::NonceMismatch => "the response carries a different nonce than we sent".into(),
        V::NonceMissing => "the response lacks the NONC copy this version requires".into(),
        V::Path(p) => format!("the Merkle path is malformed ({p:?})"),
        V::Root => "the Merkle proof does not lead to the signed root".into(),
        V::Time => "a time value cannot be decoded".into(),
        V::OutsideDelegation => "MIDP lies outside the delegation's [MINT, MAXT]".into(),
        V::ZeroRadius => "RADI is 0, which this version forbids".into(),
        V::KeyScheme { key, answered } => format!(
            "the answer is signed with {answered}, but the key given is an {key} key \
             ({} bytes; {answered} keys are {})",
            key.public_len(),
            answered.public_len()
        ),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_answer(udp_refused: bool, tcp_refused: bool, tcp_tried: u32) -> String {
        QueryError::NoAnswer {
            refused: udp_refused || tcp_refused,
            udp_refused,
            tcp_refused,
            udp_sent: 3,
            tcp_tried,
            offered: vec!["rfc-10049"],
            elapsed: Duration::from_secs(9),
            older_not_tried: false,
        }
        .to_string()
    }

    /// "Nothing listens there" only when UDP itself was refused; a UDP-only
    /// server that ignores a request for another key refuses TCP alone,
    /// and then the key is what to check.
    #[test]
    fn only_a_refused_udp_port_is_called_closed() {
        for (udp, tcp, tried) in [(true, true, 1), (true, false, 0)] {
            let m = no_answer(udp, tcp, tried);
            assert!(m.contains("nothing listens there"), "{m}");
            assert!(!m.contains("check the key"), "{m}");
        }
        let m = no_answer(false, true, 1);
        assert!(!m.contains("nothing listens there"), "{m}");
        assert!(m.contains("check the key"), "{m}");
        assert!(m.contains("UDP only"), "{m}");
        let m = no_answer(false, false, 1);
        assert!(
            m.contains("check the key") && !m.contains("UDP only"),
            "{m}"
        );
    }
}
