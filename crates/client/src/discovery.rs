//! Version discovery: which offers to try, in which order.
//!
//! One request can offer several versions only if they share its format
//! (framing, nonce length, TYPE: `Offer::new` refuses the rest) and, here,
//! its padding tag too, so an old server sees the padding it expects. The
//! profiles are grouped into such *families* from the table's fields alone,
//! newest first:
//!
//! ```text
//!  [1, 0x8000000c (TYPE), 0x8000000b … 0x80000008]   ZZZZ, 32-byte nonce, TYPE
//!  [0x8000000c (no TYPE), 0x8000000b … 0x80000008]   drafts 12–13 servers
//!  [0x80000007 … 0x80000005, 0x80000003]             PAD\0, 32-byte nonce
//!  [0x80000004 … 0x80000001]                         PAD\0, 64-byte nonce
//!  [Google]                                          bare message
//! ```
//!
//! The client asks the first family with the full retry schedule and each
//! later one only when the ones before got no answer at all, and by default
//! only while the family holds the newest version asked for or one from
//! 0x80000008 on (`Config::version_fallback` lifts that: silence can be an
//! attacker's doing). An answer
//! that fails verification stops discovery: falling back to an older version
//! after an invalid answer would let anyone on the path force a downgrade.

use gnomon_protocol::{Offer, Profile, ProfileSet};

/// The families of `set`, most preferred first. A profile joins every
/// family whose format it accepts, so a version may be offered twice (in
/// the TYPE and the TYPE-less request, say).
pub fn families(set: ProfileSet) -> Vec<Offer> {
    let mut profiles: Vec<&'static Profile> = set.iter().collect();
    // Preference first; between rows sharing a number, TYPE (what deployed
    // servers answer) first.
    profiles.sort_by_key(|p| core::cmp::Reverse((p.version.preference(), p.type_tag)));
    let mut groups: Vec<Vec<&'static Profile>> = Vec::new();
    for p in profiles {
        let mut joined = false;
        for g in groups.iter_mut() {
            // A request is signed for one scheme and sent over one set of
            // transports: rows differing in either never share one.
            if g[0].pad != p.pad || g[0].scheme != p.scheme || g[0].udp != p.udp {
                continue;
            }
            let mut candidate = g.clone();
            candidate.push(p);
            if Offer::new(&candidate).is_ok() {
                *g = candidate;
                joined = true;
            }
        }
        if !joined {
            groups.push(vec![p]);
        }
    }
    groups.iter().filter_map(|g| Offer::new(g).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnomon_protocol::{Scheme, Version};

    fn names(o: &Offer) -> Vec<String> {
        o.versions().iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn every_profile_is_reachable_and_families_are_ordered() {
        let f = families(ProfileSet::ALL.of_scheme(Scheme::Ed25519));
        let primaries: Vec<&str> = f.iter().map(|o| o.primary().name).collect();
        assert_eq!(
            primaries,
            ["rfc-10049", "draft-12", "draft-07", "draft-04", "google"]
        );
        assert_eq!(
            names(&f[0]),
            [
                "1",
                "0x80000008",
                "0x80000009",
                "0x8000000a",
                "0x8000000b",
                "0x8000000c"
            ]
        );
        assert!(f[0].has_type());
        assert!(!f[1].has_type());
        assert_eq!(
            names(&f[2]),
            ["0x80000003", "0x80000005", "0x80000006", "0x80000007"]
        );
        assert_eq!(
            names(&f[3]),
            ["0x80000001", "0x80000002", "0x80000003", "0x80000004"]
        );
        assert!(f[4].versions().is_empty());
        // Every Ed25519 row of the table is in some family, in its own format.
        for p in gnomon_protocol::PROFILES
            .iter()
            .filter(|p| p.scheme == Scheme::Ed25519)
        {
            let in_some = f.iter().any(|o| {
                o.versions().contains(&p.version) && (o.has_type() || !p.type_tag)
                    || (o.primary().id == p.id)
            });
            assert!(in_some, "{} unreachable", p.name);
        }
    }

    #[test]
    fn ml_dsa_is_a_family_of_its_own() {
        let pq = Profile::by_name("ml-dsa-44").unwrap();
        // Even from every profile at once, ML-DSA-44 never shares a request
        // with an Ed25519 version (nor its transport).
        let all = families(ProfileSet::ALL);
        let with_pq: Vec<&Offer> = all
            .iter()
            .filter(|o| o.versions().contains(&pq.version))
            .collect();
        assert_eq!(with_pq.len(), 1);
        assert_eq!(with_pq[0].versions(), [pq.version]);
        assert!(!with_pq[0].primary().udp);
        for o in &all {
            if o.primary().id != pq.id {
                assert!(!o.versions().contains(&pq.version));
                assert_eq!(o.primary().scheme, Scheme::Ed25519);
            }
        }
        let only = families(ProfileSet::ALL.of_scheme(Scheme::MlDsa44));
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].primary().id, pq.id);
    }

    #[test]
    fn a_listed_version_limits_the_families() {
        let set = ProfileSet::empty()
            .with(Profile::by_name("draft-11").unwrap().id)
            .with(Profile::by_name("draft-08").unwrap().id)
            .with(Profile::google().id);
        let f = families(set);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].versions(), [Version::draft(8), Version::draft(11)]);
        assert_eq!(f[1].primary().name, "google");
        let only_12 = families(ProfileSet::empty().with(Profile::by_name("draft-12").unwrap().id));
        assert_eq!(only_12.len(), 1);
        assert!(!only_12[0].has_type());
    }
}
