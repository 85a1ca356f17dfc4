//! Grease (RFC 10049 §7): send a configured fraction of responses with a
//! broken signature, so clients that skip verification are found out. Only
//! the signature is touched (see `grease_signature`): a greased response
//! never carries a wrong time under a valid signature.

use gnomon_protocol::responder::grease_signature;
use gnomon_protocol::Profile;

/// Decides which responses to break; one per worker or connection.
#[derive(Clone, Debug)]
pub struct Greaser {
    per_million: u32,
    /// xorshift64 state: cheap, unpredictable-enough choices, not secrets.
    state: u64,
}

impl Greaser {
    /// Break `per_million` responses in a million, seeded from the OS.
    pub fn new(per_million: u32) -> Greaser {
        let seed = crate::key::random_seed()
            .map(|s| u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        // xorshift must never hold zero.
        Greaser {
            per_million,
            state: seed | 1,
        }
    }

    /// Change the share of broken responses (a configuration reload).
    pub fn set_per_million(&mut self, per_million: u32) {
        self.per_million = per_million;
    }

    fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// Maybe break this written response; true if it was broken.
    pub fn apply(&mut self, profile: &Profile, response: &mut [u8]) -> bool {
        if self.per_million == 0 {
            return false;
        }
        let roll = self.next();
        roll % 1_000_000 < u64::from(self.per_million)
            && grease_signature(profile, response, (roll >> 32) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_never_touches_and_always_breaks_when_asked() {
        let mut off = Greaser::new(0);
        let mut always = Greaser::new(1_000_000);
        let mut junk = [0u8; 8];
        assert!(!off.apply(Profile::rfc(), &mut junk));
        // Not a response: nothing to break, even at 100 %.
        assert!(!always.apply(Profile::rfc(), &mut junk));
    }
}
