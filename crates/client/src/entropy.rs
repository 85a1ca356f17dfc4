//! Where random bytes come from: the operating system, or an injected source.

use core::fmt;

use gnomon_protocol::profile::HashAlg;

/// A source of random bytes for nonces, chain `rand` values and the choice
/// of servers.
pub trait Entropy {
    /// Fill `out` with random bytes.
    fn fill(&mut self, out: &mut [u8]) -> Result<(), EntropyError>;
}

/// The operating system's random source failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntropyError;

impl fmt::Display for EntropyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the operating system's random source failed")
    }
}

impl std::error::Error for EntropyError {}

/// The operating system's random source (`getrandom`).
#[derive(Clone, Copy, Debug, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), EntropyError> {
        getrandom::getrandom(out).map_err(|_| EntropyError)
    }
}

/// A deterministic stream, SHA-512(seed ‖ counter), for tests and
/// simulations that must repeat. Never use it for real queries: nonces must
/// be unpredictable.
#[derive(Clone, Debug)]
pub struct SeededEntropy {
    seed: [u8; 32],
    counter: u64,
}

impl SeededEntropy {
    /// A stream from `seed`.
    pub fn new(seed: [u8; 32]) -> SeededEntropy {
        SeededEntropy { seed, counter: 0 }
    }
}

impl Entropy for SeededEntropy {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), EntropyError> {
        for chunk in out.chunks_mut(64) {
            let mut block = [0u8; 64];
            HashAlg::Sha512.digest(
                &[&self.seed[..], &self.counter.to_le_bytes()[..]],
                &mut block,
            );
            self.counter += 1;
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
        Ok(())
    }
}

/// A uniform index below `n` (n > 0), by rejection so there is no bias.
pub(crate) fn below(entropy: &mut dyn Entropy, n: usize) -> Result<usize, EntropyError> {
    let n = n as u64;
    let zone = u64::MAX - u64::MAX % n;
    loop {
        let mut b = [0u8; 8];
        entropy.fill(&mut b)?;
        let v = u64::from_le_bytes(b);
        if v < zone {
            return Ok((v % n) as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_streams_repeat_and_differ_by_seed() {
        let (mut a, mut b, mut c) = (
            SeededEntropy::new([1; 32]),
            SeededEntropy::new([1; 32]),
            SeededEntropy::new([2; 32]),
        );
        let (mut x, mut y, mut z) = ([0u8; 100], [0u8; 100], [0u8; 100]);
        a.fill(&mut x).unwrap();
        b.fill(&mut y).unwrap();
        c.fill(&mut z).unwrap();
        assert_eq!(x, y);
        assert_ne!(x, z);
        a.fill(&mut y).unwrap();
        assert_ne!(x, y, "a stream moves on");
    }

    #[test]
    fn os_entropy_is_not_constant() {
        let (mut x, mut y) = ([0u8; 32], [0u8; 32]);
        OsEntropy.fill(&mut x).unwrap();
        OsEntropy.fill(&mut y).unwrap();
        assert_ne!(x, y);
    }

    #[test]
    fn below_stays_in_range_and_reaches_every_value() {
        let mut e = SeededEntropy::new([3; 32]);
        let mut seen = [false; 5];
        for _ in 0..200 {
            let v = below(&mut e, 5).unwrap();
            seen[v] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
