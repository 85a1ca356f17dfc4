//! Signed server lists: the trust core every client of a monitor's list uses.
//!
//! A monitor (`gnomon watch --publish-key`) publishes an RFC server list with
//! an `observatory` header (sequence, publication, expiry) and beside it an
//! OpenSSH signature ([`sshsig`]) in namespace [`NAMESPACE`]. A client pins
//! one or more monitor keys and a threshold K ([`Pins`]), checks each list
//! ([`Pins::check`]) against what it already saw ([`Seen`]), and merges the
//! accepted ones ([`Pins::merge`]) into an RFC list that
//! [`ServerList::parse`](crate::ServerList::parse) reads. The decision for
//! one list and one key is made without allocating ([`in_place`]), so that
//! libgnomon's `no_std` build makes the same one.
//!
//! The assumption, as a number: **fewer than K of the pinned keys are held
//! by an adversary**, who also owns the network (drops, delays, replays and
//! changes anything in transit). Under it, every server of a merged list is
//! listed by at least one honest monitor in a list that monitor really
//! published, that has not expired, and whose sequence is not below one
//! already seen from that monitor. The property tests (`props`) check this
//! against such an adversary.

use alloc::format;
use alloc::string::String;
use core::fmt;

pub mod in_place;
mod key;
mod merge;
mod pins;
mod scan;
mod seen;
pub mod sshsig;
mod time;

#[cfg(test)]
mod checks;
#[cfg(test)]
mod props;
#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

pub use in_place::RefusalKind;
pub use key::{KeyError, MonitorKey};
pub use merge::{LeftOut, Merged};
pub use pins::{Accepted, Pins};
pub use seen::Seen;
pub use time::{format_utc, parse_utc};

use scan::ScanFault;

/// The SSHSIG namespace of a server list: a signature made for anything
/// else (a git commit, a file) does not pass as one.
pub const NAMESPACE: &str = "roughtime-server-list";

/// The signed facts of a list, from its `observatory` object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The monitor's name for itself (`--publish-name`).
    pub monitor: String,
    /// Grows with every publication of that monitor.
    pub sequence: u64,
    /// When it was published, Unix seconds.
    pub published_unix: i64,
    /// When it stops counting, Unix seconds.
    pub expires_unix: i64,
}

/// Read the `observatory` header of a list (its signature not checked).
/// The whole document must be JSON with a `servers` array.
pub fn header(document: &[u8]) -> Result<Header, Refusal> {
    let raw = scan::scan(document).map_err(|f| Refusal::Malformed(scan_words(f)))?;
    let mut monitor = String::new();
    // The scan checked that it decodes.
    let _ = scan::unescape(raw.monitor, |c| monitor.push(c));
    Ok(Header {
        monitor,
        sequence: raw.sequence,
        published_unix: raw.published,
        expires_unix: raw.expires,
    })
}

fn scan_words(f: ScanFault) -> String {
    match f {
        ScanFault::NotJson(at) => format!("it is not JSON (from byte {at})"),
        ScanFault::TooDeep => format!("it nests deeper than {} levels", scan::MAX_DEPTH),
        ScanFault::NotAnObject => String::from("its top level is not a JSON object"),
        ScanFault::WrongType(what) => format!("\"{what}\" has the wrong JSON type"),
        ScanFault::Missing("observatory") => {
            String::from("it has no \"observatory\" object (it is not a monitor's list)")
        }
        ScanFault::Missing(what) => format!("it has no \"{what}\""),
        ScanFault::Twice(what) => format!("it gives \"{what}\" twice"),
        ScanFault::Field("observatory.sequence") => {
            String::from("\"observatory.sequence\" is not a whole number from 0 to 2^64-1")
        }
        ScanFault::Field("observatory.monitor") => {
            String::from("\"observatory.monitor\" is not a non-empty string")
        }
        ScanFault::Field(what) => {
            format!("\"{what}\" is not a UTC time such as \"2026-12-02T14:00:00Z\"")
        }
        ScanFault::ExpiresFirst { published, expires } => format!(
            "the list expires ({}) no later than it was published ({})",
            format_utc(expires),
            format_utc(published)
        ),
    }
}

/// Why a list was not accepted: one reason, with its own label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The signature is damaged or does not verify under the pinned key
    /// (the words name the key and what failed).
    Signature(String),
    /// A valid signature by a key that is not pinned.
    OtherKey {
        /// `SHA256:…` of the key that signed.
        fingerprint: String,
    },
    /// `now` is at or past the list's expiry.
    Expired {
        /// When it expired.
        expires_unix: i64,
        /// The time it was checked at.
        now_unix: i64,
    },
    /// A lower sequence than one already seen from that key.
    Replayed {
        /// The list's sequence.
        sequence: u64,
        /// The last sequence seen from that key.
        seen: u64,
    },
    /// The sequence already seen from that key, over other bytes.
    Reused {
        /// The sequence both lists carry.
        sequence: u64,
    },
    /// Not a server list with a valid `observatory` header.
    Malformed(String),
}

impl Refusal {
    /// A short fixed name for metrics, JSON output and tests.
    pub fn label(&self) -> &'static str {
        self.kind().label()
    }

    /// The reason without its words.
    pub fn kind(&self) -> RefusalKind {
        match self {
            Refusal::Signature(_) => RefusalKind::Signature,
            Refusal::OtherKey { .. } => RefusalKind::OtherKey,
            Refusal::Expired { .. } => RefusalKind::Expired,
            Refusal::Replayed { .. } => RefusalKind::Replayed,
            Refusal::Reused { .. } => RefusalKind::Reused,
            Refusal::Malformed(_) => RefusalKind::Malformed,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Signature(words) => f.write_str(words),
            Refusal::OtherKey { fingerprint } => write!(
                f,
                "the list is signed by {fingerprint}, which is not one of the pinned keys (--servers-key): \
                 if the monitor has a new key, check it with its operator and pin it; otherwise the list is not \
                 from the monitor you pinned"
            ),
            Refusal::Expired { expires_unix, now_unix } => write!(
                f,
                "the list expired at {} (now {}): the monitor has not published since; check that it runs, \
                 or that this machine's clock is right",
                format_utc(*expires_unix),
                format_utc(*now_unix)
            ),
            Refusal::Replayed { sequence, seen } => write!(
                f,
                "sequence {sequence} is older than {seen} already seen from this key (a replayed list): \
                 something between here and the monitor serves an old list; fetch again, from the monitor itself"
            ),
            Refusal::Reused { sequence } => write!(
                f,
                "sequence {sequence} was already seen from this key with other contents (a sequence reused): \
                 the monitor signed two different lists with one sequence; tell its operator"
            ),
            Refusal::Malformed(words) => write!(
                f,
                "the signed document is not a monitor's server list: {words}; tell the monitor's operator"
            ),
        }
    }
}
