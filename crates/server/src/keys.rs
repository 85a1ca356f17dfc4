//! Key epochs: the identities a server answers for, each with its current
//! online key and that key's delegation in every profile's encoding.
//!
//! Workers load the current epoch once per batch (`ArcSwap::load`, no
//! allocation, no lock); the key thread mints the next online key before the
//! current delegation expires and swaps the whole epoch in one store.

use std::sync::Arc;

use arc_swap::ArcSwap;
use gnomon_protocol::request::srv_for;
use gnomon_protocol::{CertificateSet, KeyPair, Profile};

/// One long-term identity as seen by workers.
pub struct Identity {
    /// Long-term public key.
    pub public: [u8; 32],
    /// Its SRV value.
    pub srv: [u8; 32],
    /// The online key.
    pub online: KeyPair,
    /// Delegations of `online` for every profile.
    pub certs: CertificateSet,
}

impl Identity {
    /// An identity from its parts.
    pub fn new(public: [u8; 32], online: KeyPair, certs: CertificateSet) -> Identity {
        Identity {
            public,
            srv: srv_for(&public),
            online,
            certs,
        }
    }
}

/// Everything workers need to sign, swapped as a whole.
pub struct KeyEpoch {
    /// Identities; the first answers versions without SRV.
    pub identities: Vec<Identity>,
}

/// Which identity answers a request (VERSIONS.md §3, SRV rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Identity at this index.
    Identity(usize),
    /// SRV names no key held here: drop.
    UnknownSrv,
    /// No SRV, several keys, and the version defines SRV: drop.
    SrvRequired,
}

impl KeyEpoch {
    /// Pick the identity for a request of `profile` carrying `srv`.
    pub fn choose(&self, profile: &Profile, srv: Option<&[u8; 32]>) -> Choice {
        match srv {
            Some(s) if profile.srv => match self.identities.iter().position(|i| &i.srv == s) {
                Some(i) => Choice::Identity(i),
                None => Choice::UnknownSrv,
            },
            None if profile.srv && self.identities.len() > 1 => Choice::SrvRequired,
            // Versions before SRV cannot say which key they want.
            _ => Choice::Identity(0),
        }
    }

    /// Earliest delegation expiry across identities, Unix µs.
    pub fn expires_us(&self) -> u64 {
        self.identities
            .iter()
            .map(|i| i.certs.for_profile(Profile::rfc()).maxt_us)
            .min()
            .unwrap_or(0)
    }
}

/// The shared, swappable epoch.
pub type SharedKeys = Arc<ArcSwap<KeyEpoch>>;

/// A fresh 32-byte seed from the OS.
pub fn random_seed() -> std::io::Result<[u8; 32]> {
    let mut s = [0u8; 32];
    getrandom::getrandom(&mut s).map_err(std::io::Error::other)?;
    Ok(s)
}

/// Mint an epoch: a new online key per long-term key, delegated for
/// [now − skew, now + validity]. The skew lets clients whose clocks run a
/// little behind accept responses from a brand-new key.
pub fn mint_epoch(
    long_terms: &[KeyPair],
    now_us: u64,
    validity_us: u64,
    skew_us: u64,
) -> std::io::Result<KeyEpoch> {
    let mut identities = Vec::with_capacity(long_terms.len());
    for lt in long_terms {
        let online = KeyPair::from_seed(&random_seed()?);
        let certs = CertificateSet::mint_all(
            lt,
            &online.public(),
            now_us.saturating_sub(skew_us),
            now_us.saturating_add(validity_us),
        );
        identities.push(Identity::new(lt.public(), online, certs));
    }
    Ok(KeyEpoch { identities })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srv_selects_the_identity() {
        let a = KeyPair::from_seed(&[1; 32]);
        let b = KeyPair::from_seed(&[2; 32]);
        let e = mint_epoch(&[a.clone(), b.clone()], 1_000_000_000, 60_000_000, 0).unwrap();
        let rfc = Profile::rfc();
        assert_eq!(
            e.choose(rfc, Some(&srv_for(&b.public()))),
            Choice::Identity(1)
        );
        assert_eq!(e.choose(rfc, Some(&[0; 32])), Choice::UnknownSrv);
        assert_eq!(e.choose(rfc, None), Choice::SrvRequired);
        assert_eq!(e.choose(Profile::google(), None), Choice::Identity(0));
        let one = mint_epoch(&[a], 1_000_000_000, 60_000_000, 0).unwrap();
        assert_eq!(one.choose(rfc, None), Choice::Identity(0));
        assert_eq!(one.expires_us(), 1_060_000_000);
    }
}
