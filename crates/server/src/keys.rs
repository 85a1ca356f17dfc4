//! Key epochs: the identities a server answers for, each with its current
//! online key and that key's delegation in every profile's encoding.
//!
//! Workers load the current epoch once per batch (`ArcSwap::load`, no
//! allocation, no lock); the key thread mints the next online key before the
//! current delegation expires and swaps the whole epoch in one store.

use std::sync::Arc;

use arc_swap::ArcSwap;
use gnomon_protocol::{
    BatchContext, CertificateSet, KeyPair, LongTermKey, MlDsa44KeyPair, Profile, ProfileSet,
    Version,
};

pub use crate::key::{random_seed, PublicBytes, Secret, SecretKey};
use crate::settings::VersLists;
use crate::signer::OnlineSigner;

/// One long-term identity as seen by workers.
pub struct Identity {
    /// Long-term public key; its scheme is the identity's.
    pub public: LongTermKey,
    /// Its SRV value.
    pub srv: [u8; 32],
    /// The online key, of the same scheme.
    pub online: SecretKey,
    /// The online key as workers sign with it (for Ed25519 the fastest
    /// signer this CPU supports).
    pub signer: OnlineSigner,
    /// Delegations of `online` for every profile.
    pub certs: CertificateSet,
    /// The host an offline delegation set was made for (a label for
    /// `/metrics`; never read by workers).
    pub host: Option<String>,
}

impl Identity {
    /// An identity from its parts.
    pub fn new(public: LongTermKey, online: SecretKey, certs: CertificateSet) -> Identity {
        Identity {
            srv: public.srv(),
            public,
            signer: OnlineSigner::new(&online),
            online,
            certs,
            host: None,
        }
    }

    /// What the responder needs to answer a batch of `profile` as this
    /// identity, at `now_us` ± `radius_us`, advertising the versions of
    /// `vers` in this identity's scheme; None for a profile of another
    /// signature scheme ([`KeyEpoch::choose`] never picks such an identity).
    pub fn batch<'a>(
        &'a self,
        profile: &'static Profile,
        now_us: u64,
        radius_us: u32,
        vers: &'a VersLists,
    ) -> Option<BatchContext<'a>> {
        let vers: &[Version] = vers.for_scheme(self.public.scheme());
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
    /// Identities; the first of each scheme answers versions without SRV.
    pub identities: Vec<Identity>,
    /// The profiles some identity can sign: what acceptors narrow to, so
    /// a request offering several versions is answered in one a key here
    /// signs.
    pub profiles: ProfileSet,
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

    /// An epoch of these identities.
    pub fn new(identities: Vec<Identity>) -> KeyEpoch {
        let profiles = identities.iter().fold(ProfileSet::empty(), |set, i| {
            ProfileSet(set.0 | ProfileSet::ALL.of_scheme(i.public.scheme()).0)
        });
        KeyEpoch {
            identities,
            profiles,
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
            .flat_map(|i| {
                // Version 1's delegation, or for an ML-DSA-44 identity its
                // scheme's first.
                i.certs
                    .for_profile(Profile::rfc())
                    .or_else(|| {
                        gnomon_protocol::PROFILES
                            .iter()
                            .find_map(|p| i.certs.for_profile(p))
                    })
                    .map(|c| c.maxt_us)
            })
            .min()
            .unwrap_or(0)
    }
}

/// The shared, swappable epoch.
pub type SharedKeys = Arc<ArcSwap<KeyEpoch>>;

/// Where an identity's online keys come from.
pub enum KeySource {
    /// The long-term key is here: mint and rotate online keys of its
    /// scheme.
    LongTerm(SecretKey),
    /// The long-term key stays offline: use delegations made beforehand.
    Offline(crate::offline::OfflineStore),
}

impl KeySource {
    /// The long-term public key.
    pub fn public(&self) -> &LongTermKey {
        match self {
            KeySource::LongTerm(k) => k.public_key(),
            KeySource::Offline(s) => &s.long_term_public,
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
    fn offline_key(&self, now_us: u64) -> Option<LongTermKey> {
        match self {
            KeySource::LongTerm(_) => None,
            KeySource::Offline(s) => s.current(now_us).map(|d| d.online.public_key().clone()),
        }
    }
}

impl From<KeyPair> for KeySource {
    fn from(k: KeyPair) -> KeySource {
        KeySource::LongTerm(k.into())
    }
}

impl From<MlDsa44KeyPair> for KeySource {
    fn from(k: MlDsa44KeyPair) -> KeySource {
        KeySource::LongTerm(k.into())
    }
}

impl From<SecretKey> for KeySource {
    fn from(k: SecretKey) -> KeySource {
        KeySource::LongTerm(k)
    }
}

/// The offline delegations in use at `now_us`, to notice when one ends.
pub fn offline_selection(sources: &[KeySource], now_us: u64) -> Vec<Option<LongTermKey>> {
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
                let online = SecretKey::from_seed(lt.scheme(), &*random_seed()?);
                let certs = CertificateSet::mint_all(
                    lt,
                    online.public_key().bytes(),
                    now_us.saturating_sub(skew_us),
                    now_us.saturating_add(validity_us),
                );
                identities.push(Identity::new(lt.public_key().clone(), online, certs));
            }
            KeySource::Offline(store) => {
                let d = store.current(now_us).ok_or_else(|| {
                    std::io::Error::other(format!(
                        "no offline delegation for key {} covers now",
                        hex_prefix(&store.long_term_public)
                    ))
                })?;
                let mut identity = Identity::new(
                    store.long_term_public.clone(),
                    d.online.clone(),
                    d.certs.clone(),
                );
                identity.host = d.host.clone();
                identities.push(identity);
            }
        }
    }
    Ok(KeyEpoch::new(identities))
}

fn hex_prefix(k: &LongTermKey) -> String {
    k.bytes()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        + "…"
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnomon_protocol::request::srv_for;
    use gnomon_protocol::{ProfileId, Scheme, Sign};

    fn ml_dsa() -> &'static Profile {
        gnomon_protocol::PROFILES
            .iter()
            .find(|p| p.scheme == Scheme::MlDsa44)
            .unwrap()
    }

    /// One Ed25519 and one ML-DSA-44 identity on one port: without SRV,
    /// each version goes to the identity of its scheme (neither is
    /// "several keys" for the other); with SRV, only the named key of the
    /// version's scheme answers. Online keys are of the identity's scheme.
    #[test]
    fn the_versions_scheme_chooses_between_an_ed25519_and_an_ml_dsa_identity() {
        let ed = KeyPair::from_seed(&[1; 32]);
        let pq = MlDsa44KeyPair::from_seed(&[2; 32]);
        let sources = [KeySource::from(ed.clone()), KeySource::from(pq.clone())];
        let e = mint_epoch(&sources, 1_000_000_000, 60_000_000, 0).unwrap();
        assert_eq!(e.identities[1].online.scheme(), Scheme::MlDsa44);
        assert_eq!(e.identities[1].online.public().len(), 1312);
        assert_eq!(e.identities[1].signer.scheme(), Scheme::MlDsa44);
        assert_eq!(e.identities[0].online.scheme(), Scheme::Ed25519);
        assert!(e.identities[1].certs.for_profile(ml_dsa()).is_some());
        let rfc = Profile::rfc();
        assert_eq!(e.choose(rfc, None), Choice::Identity(0));
        assert_eq!(e.choose(ml_dsa(), None), Choice::Identity(1));
        let pq_srv = srv_for(pq.public());
        assert_eq!(e.choose(ml_dsa(), Some(&pq_srv)), Choice::Identity(1));
        // The ML-DSA key's SRV in an Ed25519 version names no Ed25519 key.
        assert_eq!(e.choose(rfc, Some(&pq_srv)), Choice::UnknownSrv);
        assert_eq!(
            e.choose(ml_dsa(), Some(&srv_for(&ed.public()))),
            Choice::UnknownSrv
        );
        assert!(e.profiles.contains(ml_dsa().id) && e.profiles.contains(rfc.id));
        assert_eq!(e.expires_us(), 1_060_000_000);
        let only_ed = mint_epoch(&[KeySource::from(ed)], 1_000_000_000, 60_000_000, 0).unwrap();
        assert_eq!(only_ed.choose(ml_dsa(), None), Choice::NoKeyForScheme);
        assert!(!only_ed.profiles.contains(ml_dsa().id));
        let only_pq = mint_epoch(&[KeySource::from(pq)], 1_000_000_000, 60_000_000, 0).unwrap();
        assert_eq!(only_pq.choose(rfc, None), Choice::NoKeyForScheme);
        // The certificate expiry metric reads an ML-DSA-only epoch too.
        assert_eq!(only_pq.expires_us(), 1_060_000_000);
        assert_eq!(
            only_pq
                .profiles
                .iter()
                .map(|p| p.id)
                .collect::<Vec<ProfileId>>(),
            vec![ml_dsa().id]
        );
    }

    #[test]
    fn srv_selects_the_identity() {
        let a = KeyPair::from_seed(&[1; 32]);
        let b = KeyPair::from_seed(&[2; 32]);
        let sources = [KeySource::from(a.clone()), KeySource::from(b.clone())];
        let e = mint_epoch(&sources, 1_000_000_000, 60_000_000, 0).unwrap();
        let rfc = Profile::rfc();
        assert_eq!(
            e.choose(rfc, Some(&srv_for(&b.public()))),
            Choice::Identity(1)
        );
        assert_eq!(e.choose(rfc, Some(&[0; 32])), Choice::UnknownSrv);
        assert_eq!(e.choose(rfc, None), Choice::SrvRequired);
        assert_eq!(e.choose(Profile::google(), None), Choice::Identity(0));
        let one = mint_epoch(&[KeySource::from(a)], 1_000_000_000, 60_000_000, 0).unwrap();
        assert_eq!(one.choose(rfc, None), Choice::Identity(0));
        assert_eq!(one.expires_us(), 1_060_000_000);
    }
}
