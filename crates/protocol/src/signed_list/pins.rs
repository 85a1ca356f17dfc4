//! The pinned keys and threshold, and the check of one list against them.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::in_place::{self, RefusalKind};
use super::key::{fingerprint, MonitorKey};
use super::seen::Seen;
use super::sshsig::{self, SigError};
use super::{header, Header, Refusal, NAMESPACE};
use crate::serverlist::{ListError, ServerList};

/// The monitor keys a client trusts, in the order given, and how many of
/// them must list a server (K) before it is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pins {
    keys: Vec<MonitorKey>,
    threshold: usize,
}

/// A list that passed [`Pins::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// Index of the key that signed it, in [`Pins::keys`].
    pub key: usize,
    /// Its signed header.
    pub header: Header,
    /// The document, as signed.
    pub document: Vec<u8>,
    /// The armored signature.
    pub signature: Vec<u8>,
    /// SHA-256 of the document: the same sequence with the same digest is
    /// the same list fetched again.
    pub sha256: [u8; 32],
}

impl Pins {
    /// Pin `keys` (at least one, all different) with threshold
    /// `1 ≤ threshold ≤ keys.len()`.
    pub fn new(keys: Vec<MonitorKey>, threshold: usize) -> Result<Pins, String> {
        if keys.is_empty() {
            return Err(String::from(
                "no monitor key is pinned: give one --servers-key per monitor whose list you trust",
            ));
        }
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].iter().any(|o| o.public() == k.public()) {
                return Err(format!(
                    "key {} is pinned twice: each --servers-key must be a different monitor, \
                     or the threshold counts one monitor twice",
                    k.named()
                ));
            }
        }
        if threshold == 0 || threshold > keys.len() {
            return Err(format!(
                "a threshold of {threshold} cannot be met with {} pinned key{}: give --servers-threshold \
                 from 1 to the number of --servers-key",
                keys.len(),
                if keys.len() == 1 { "" } else { "s" }
            ));
        }
        Ok(Pins { keys, threshold })
    }

    /// The pinned keys, in the order given.
    pub fn keys(&self) -> &[MonitorKey] {
        &self.keys
    }

    /// K: how many pinned keys must list a server.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Accept `document` with its armored `signature` at `now_unix`, or say
    /// why not. Nothing is recorded: the caller records an accepted list in
    /// `seen` ([`Seen::record`]) once it keeps it.
    pub fn check(
        &self,
        document: &[u8],
        signature: &[u8],
        now_unix: i64,
        seen: &Seen,
    ) -> Result<Accepted, Refusal> {
        let signer = sshsig::signer_of(signature).map_err(|e| {
            Refusal::Signature(format!(
                "the list's signature is damaged: {e}; fetch the list and its .sig again"
            ))
        })?;
        let Some(index) = self.keys.iter().position(|k| k.public() == &signer) else {
            if sshsig::verifies_under_own_key(signature, document) {
                return Err(Refusal::OtherKey {
                    fingerprint: fingerprint(&signer),
                });
            }
            return Err(Refusal::Signature(format!(
                "the list's signature claims key {}, which is not pinned, and does not verify over the list: \
                 the list was changed after it was signed, or the signature is not its own; fetch both again",
                fingerprint(&signer)
            )));
        };
        let key = &self.keys[index];
        let last = seen.get(key.public());
        // The decision is the allocation-free one libgnomon makes; what
        // follows only finds the words.
        let checked = in_place::check(document, signature, key.public(), now_unix, last)
            .map_err(|kind| self.words(kind, key, document, signature, now_unix, last))?;
        let header = header(document)?;
        ServerList::parse(document).map_err(|e| Refusal::Malformed(list_error(e)))?;
        Ok(Accepted {
            key: index,
            header,
            document: document.to_vec(),
            signature: signature.to_vec(),
            sha256: checked.sha256,
        })
    }

    fn words(
        &self,
        kind: RefusalKind,
        key: &MonitorKey,
        document: &[u8],
        signature: &[u8],
        now_unix: i64,
        last: Option<(u64, [u8; 32])>,
    ) -> Refusal {
        let expected = || header(document);
        match kind {
            RefusalKind::Signature | RefusalKind::OtherKey => {
                match sshsig::verify(signature, document, NAMESPACE, key.public()) {
                    Err(SigError::Namespace { found }) => Refusal::Signature(format!(
                        "the signature by key {} was made for namespace {found:?}, not {NAMESPACE:?}: it signs \
                         something else than a server list; fetch the list's own .sig",
                        key.named()
                    )),
                    Err(e) => Refusal::Signature(format!(
                        "the list's signature does not verify under key {} ({e}): the list was changed after it \
                         was signed, or the signature is not its own; fetch both again",
                        key.named()
                    )),
                    Ok(()) => Refusal::Signature(String::from("the list's signature does not verify")),
                }
            }
            RefusalKind::Malformed => match expected() {
                Err(r) => r,
                Ok(_) => Refusal::Malformed(String::from("it is not a server list")),
            },
            RefusalKind::Expired => Refusal::Expired {
                expires_unix: expected().map_or(now_unix, |h| h.expires_unix),
                now_unix,
            },
            RefusalKind::Replayed => Refusal::Replayed {
                sequence: expected().map_or(0, |h| h.sequence),
                seen: last.map_or(0, |l| l.0),
            },
            RefusalKind::Reused => Refusal::Reused {
                sequence: last.map_or(0, |l| l.0),
            },
        }
    }
}

fn list_error(e: ListError) -> String {
    match e {
        ListError::Json { line, column } => {
            format!("it is not JSON (line {line}, column {column})")
        }
        ListError::NotAnObject => String::from("its top level is not a JSON object"),
        ListError::NoServers => String::from("it has no \"servers\""),
        ListError::WrongType(what) => format!("\"{what}\" has the wrong JSON type"),
    }
}
