//! Key epochs: the identities a server answers for, each with its current
//! online key and that key's delegation in every profile's encoding.
//!
//! Workers load the current epoch once per batch (`ArcSwap::load`, no
//! allocation, no lock); the key thread mints the next online key before the
//! current delegation expires and swaps the whole epoch in one store.

use std::sync::Arc;
use zeroize::Zeroizing;

use arc_swap::ArcSwap;
use gnomon_protocol::request::srv_for;
use gnomon_protocol::{BatchContext, CertificateSet, KeyPair, Profile, Version};

use crate::signer::Signer;

/// One long-term identity as seen by workers.
pub struct Identity {
    /// Long-term public key.
    pub public: [u8; 32],
    /// Its SRV value.
    pub srv: [u8; 32],
    /// The online key.
    pub online: KeyPair,
    /// The online key as workers sign with it (the fastest signer this CPU
    /// supports).
    pub signer: Signer,
    /// Delegations of `online` for every profile.
    pub certs: CertificateSet,
    /// The host an offline delegation set was made for (a label for
    /// `/metrics`; never read by workers).
    pub host: Option<String>,
}

impl Identity {
    /// An identity from its parts.
    pub fn new(public: [u8; 32], online: KeyPair, certs: CertificateSet) -> Identity {
        Identity {
            public,
            srv: srv_for(&public),
            signer: Signer::new(&online),
            online,
            certs,
            host: None,
        }
    }

    /// What the responder needs to answer a batch of `profile` as this
    /// identity, at `now_us` ± `radius_us`, advertising `vers`; None for a
    /// profile of another signature scheme ([`KeyEpoch::choose`] never
    /// picks such an identity).
    pub fn batch<'a>(
        &'a self,
        profile: &'static Profile,
        now_us: u64,
        radius_us: u32,
        vers: &'a [Version],
    ) -> Option<BatchContext<'a>> {
        Some(BatchContext {
            profile,
            now_us,
            radius_us,
            online: &self.signer,
            cert: self.certs.for_profile(profile)?,
            vers,
        })
    }
}

/// Everything workers need to sign, swapped as a whole.
pub struct KeyEpoch {
    /// Identities; the first answers versions without SRV.
    pub identities: Vec<Identity>,
}

/// Which identity answers a request (each version's request layout, SRV rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Identity at this index.
    Identity(usize),
    /// SRV names no key held here: drop.
    UnknownSrv,
    /// No SRV, several keys, and the version defines SRV: drop.
    SrvRequired,
    /// No key held here signs in the version's scheme: drop.
    NoKeyForScheme,
}

impl KeyEpoch {
    /// Pick the identity for a request of `profile` carrying `srv`.
    /// Only an identity of the version's signature scheme can answer it.
    pub fn choose(&self, profile: &Profile, srv: Option<&[u8; 32]>) -> Choice {
        let fits = |i: &&Identity| i.certs.scheme() == profile.scheme;
        match srv {
            Some(s) if profile.srv => {
                match self.identities.iter().position(|i| &i.srv == s && fits(&i)) {
                    Some(i) => Choice::Identity(i),
                    None => Choice::UnknownSrv,
                }
            }
            None if profile.srv && self.identities.iter().filter(fits).count() > 1 => {
                Choice::SrvRequired
            }
            // Versions before SRV cannot say which key they want: the first.
            _ => match self.identities.iter().position(|i| fits(&i)) {
                Some(i) => Choice::Identity(i),
                None => Choice::NoKeyForScheme,
            },
        }
    }

    /// Whether every identity's delegation, in every profile's encoding,
    /// covers `now_us`: whether the server can sign now.
    pub fn covers(&self, now_us: u64) -> bool {
        self.identities.iter().all(|i| i.certs.covers(now_us))
    }

    /// Earliest delegation expiry across identities, Unix µs.
    pub fn expires_us(&self) -> u64 {
        self.identities
            .iter()
            .flat_map(|i| i.certs.for_profile(Profile::rfc()).map(|c| c.maxt_us))
            .min()
            .unwrap_or(0)
    }
}

/// The shared, swappable epoch.
pub type SharedKeys = Arc<ArcSwap<KeyEpoch>>;

/// A fresh 32-byte seed from the OS, wiped from memory when dropped.
pub fn random_seed() -> std::io::Result<Zeroizing<[u8; 32]>> {
    let mut s = Zeroizing::new([0u8; 32]);
    getrandom::getrandom(&mut *s).map_err(std::io::Error::other)?;
    Ok(s)
}

/// Where an identity's online keys come from.
pub enum KeySource {
    /// The long-term key is here: mint and rotate online keys.
    LongTerm(KeyPair),
    /// The long-term key stays offline: use delegations made beforehand.
    Offline(crate::offline::OfflineStore),
}

impl KeySource {
    /// The long-term public key.
    pub fn public(&self) -> [u8; 32] {
        match self {
            KeySource::LongTerm(k) => k.public(),
            KeySource::Offline(s) => s.long_term_public,
        }
    }

    /// Until when this source can sign without outside help, Unix µs: the
    /// end of the last offline delegation, or forever for a key held here.
    pub fn horizon_us(&self) -> u64 {
        match self {
            KeySource::LongTerm(_) => u64::MAX,
            KeySource::Offline(s) => s.last_expiry_us(),
        }
    }

    /// The online key an offline source uses at `now_us`, if any.
    fn offline_key(&self, now_us: u64) -> Option<[u8; 32]> {
        match self {
            KeySource::LongTerm(_) => None,
            KeySource::Offline(s) => s.current(now_us).map(|d| d.online.public()),
        }
    }
}

/// The offline delegations in use at `now_us`, to notice when one ends.
pub fn offline_selection(sources: &[KeySource], now_us: u64) -> Vec<Option<[u8; 32]>> {
    sources.iter().map(|s| s.offline_key(now_us)).collect()
}

/// Mint an epoch: a new online key per long-term key, delegated for
/// [now − skew, now + validity] (the skew lets clients whose clocks run a
/// little behind accept a brand-new key), and the delegation covering now
/// for each offline source. Fails if an offline source has none: signing
/// outside [MINT, MAXT] is never an option.
pub fn mint_epoch(
    sources: &[KeySource],
    now_us: u64,
    validity_us: u64,
    skew_us: u64,
) -> std::io::Result<KeyEpoch> {
    let mut identities = Vec::with_capacity(sources.len());
    for source in sources {
        match source {
            KeySource::LongTerm(lt) => {
                let online = KeyPair::from_seed(&*random_seed()?);
                let certs = CertificateSet::mint_all(
                    lt,
                    &online.public(),
                    now_us.saturating_sub(skew_us),
                    now_us.saturating_add(validity_us),
                );
                identities.push(Identity::new(lt.public(), online, certs));
            }
            KeySource::Offline(store) => {
                let d = store.current(now_us).ok_or_else(|| {
                    std::io::Error::other(format!(
                        "no offline delegation for key {} covers now",
                        hex_prefix(&store.long_term_public)
                    ))
                })?;
                let mut identity =
                    Identity::new(store.long_term_public, d.online.clone(), d.certs.clone());
                identity.host = d.host.clone();
                identities.push(identity);
            }
        }
    }
    Ok(KeyEpoch { identities })
}

fn hex_prefix(k: &[u8; 32]) -> String {
    k[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srv_selects_the_identity() {
        let a = KeyPair::from_seed(&[1; 32]);
        let b = KeyPair::from_seed(&[2; 32]);
        let sources = [
            KeySource::LongTerm(a.clone()),
            KeySource::LongTerm(b.clone()),
        ];
        let e = mint_epoch(&sources, 1_000_000_000, 60_000_000, 0).unwrap();
        let rfc = Profile::rfc();
        assert_eq!(
            e.choose(rfc, Some(&srv_for(&b.public()))),
            Choice::Identity(1)
        );
        assert_eq!(e.choose(rfc, Some(&[0; 32])), Choice::UnknownSrv);
        assert_eq!(e.choose(rfc, None), Choice::SrvRequired);
        assert_eq!(e.choose(Profile::google(), None), Choice::Identity(0));
        let one = mint_epoch(&[KeySource::LongTerm(a)], 1_000_000_000, 60_000_000, 0).unwrap();
        assert_eq!(one.choose(rfc, None), Choice::Identity(0));
        assert_eq!(one.expires_us(), 1_060_000_000);
    }
}
