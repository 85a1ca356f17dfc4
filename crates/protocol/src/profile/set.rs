//! Sets of rows of the version table, as bit masks.

use super::{Framing, Profile, ProfileId, PROFILES};
use crate::scheme::Scheme;
use crate::version::Version;

/// A set of profiles, as a bit mask over [`ProfileId`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileSet(pub u32);

impl ProfileSet {
    /// Every profile.
    pub const ALL: ProfileSet = ProfileSet((1 << PROFILES.len()) - 1);

    /// The empty set.
    pub const fn empty() -> ProfileSet {
        ProfileSet(0)
    }

    /// Add a profile.
    pub const fn with(self, id: ProfileId) -> ProfileSet {
        ProfileSet(self.0 | 1 << id.0)
    }

    /// Remove a profile.
    pub const fn without(self, id: ProfileId) -> ProfileSet {
        ProfileSet(self.0 & !(1 << id.0))
    }

    /// Membership.
    pub const fn contains(self, id: ProfileId) -> bool {
        self.0 & (1 << id.0) != 0
    }

    /// The profiles of this set that sign with `scheme`: what one
    /// identity answers, and what its VERS lists (scoped per scheme, so
    /// a signed VERS never names a version the key cannot sign).
    pub fn of_scheme(self, scheme: Scheme) -> ProfileSet {
        PROFILES
            .iter()
            .filter(|p| p.scheme == scheme && self.contains(p.id))
            .fold(ProfileSet::empty(), |set, p| set.with(p.id))
    }

    /// The profiles of this set served over UDP.
    pub fn over_udp(self) -> ProfileSet {
        PROFILES
            .iter()
            .filter(|p| p.udp && self.contains(p.id))
            .fold(ProfileSet::empty(), |set, p| set.with(p.id))
    }

    /// The profiles in the set, lowest id first.
    pub fn iter(self) -> impl Iterator<Item = &'static Profile> {
        PROFILES.iter().filter(move |p| self.contains(p.id))
    }

    /// The version numbers a server answering this set lists in VERS:
    /// every numbered version (Google has none on the wire), ascending,
    /// each once.
    pub fn versions(self) -> alloc::vec::Vec<Version> {
        let mut v: alloc::vec::Vec<Version> = self
            .iter()
            .filter(|p| p.framing == Framing::Packet)
            .map(|p| p.version)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}
