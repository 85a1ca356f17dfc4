//! Test fixtures for gnomon's client and CLI tests: Roughtime servers on
//! loopback that speak any set of versions through gnomon-protocol's
//! `Acceptor` and `Responder`, honestly or not, and an HTTP sink that
//! records malfeasance reports, and a UDP forwarder that can drop what
//! passes between a client and a server (an on-path attacker).
//!
//! Every fixture binds `127.0.0.1:0`, serves from its own threads and stops
//! when dropped: a stop flag is set and the blocked `recv`/`accept` is woken
//! by a datagram or connection to itself, then the threads are joined. The
//! sockets also carry a short read timeout, so a lost wake-up costs a
//! fraction of a second, never a hang.
#![forbid(unsafe_code)]

mod child;
pub mod chrony;
pub mod forwarder;
mod http;
mod icmp;
pub mod liars;
pub mod postgres;
pub mod raw;
mod server;

pub use child::{cargo_first_on_path, command, runnable_by_anyone, Reaped};
pub use forwarder::Forwarder;
pub use http::{slowloris, PostedReport, ReportSink};
pub use server::{Fixture, FixtureConfig, Mode};

use gnomon_protocol::{ProfileSet, PROFILES};

/// The profiles named, by `Profile::by_name` names or version numbers.
/// Panics on an unknown name: fixtures are configured by tests.
pub fn profiles(names: &[&str]) -> ProfileSet {
    names.iter().fold(ProfileSet::empty(), |set, n| {
        let p =
            gnomon_protocol::Profile::by_name(n).unwrap_or_else(|| panic!("no profile named {n}"));
        set.with(p.id)
    })
}

/// Version 1 and every draft from 0x80000008 on: what a downgrade attack
/// silences to push a client to draft 07 or Google.
pub fn modern_profiles() -> ProfileSet {
    let floor = gnomon_protocol::Version::draft(8).preference();
    PROFILES
        .iter()
        .filter(|p| p.version.preference() >= floor)
        .fold(ProfileSet::empty(), |s, p| s.with(p.id))
}

/// Every profile, one set each, for tests that walk the whole table.
pub fn each_profile() -> impl Iterator<Item = &'static gnomon_protocol::Profile> {
    PROFILES.iter()
}

/// Base64 (standard alphabet, padded) of `bytes`, for keys on command lines
/// and in server lists.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A server list in the RFC 10049 form naming `servers` as (name, fixture,
/// listed version), each with its key's `publicKeyType` (ed25519, or
/// ml-dsa-44 for an ML-DSA-44 fixture), a UDP and a TCP address, and an optional
/// `reports` URL.
pub fn server_list(servers: &[(&str, &Fixture, u32)], reports: Option<&str>) -> String {
    let entries: Vec<String> = servers
        .iter()
        .map(|(name, f, version)| {
            format!(
                r#"{{"name":"{name}","version":{version},"publicKeyType":"{scheme}","publicKey":"{key}","addresses":[{{"protocol":"udp","address":"{addr}"}},{{"protocol":"tcp","address":"{addr}"}}]}}"#,
                scheme = f.long_term_key().scheme().name(),
                key = base64(f.long_term_key().bytes()),
                addr = f.addr(),
            )
        })
        .collect();
    let reports = reports
        .map(|r| format!(r#","reports":"{r}""#))
        .unwrap_or_default();
    format!(r#"{{"servers":[{}]{reports}}}"#, entries.join(","))
}

/// `len` deterministic pseudo-random bytes (splitmix64 from `seed`), so a
/// test feeding noise to a parser can be replayed exactly.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A 1024-byte request offering only `profile`, its nonce starting with
/// `seed` (little-endian) and zero after, so each `seed` makes a distinct
/// request a test can match to its answer.
pub fn request(profile: &'static gnomon_protocol::Profile, seed: u64) -> Vec<u8> {
    let mut nonce = vec![0u8; profile.nonce_len];
    let head = nonce.len().min(8);
    nonce[..head].copy_from_slice(&seed.to_le_bytes()[..head]);
    let mut req = vec![0u8; 1024];
    gnomon_protocol::Offer::single(profile)
        .build(&nonce, None, 1024, &mut req)
        .expect("every profile builds a 1024-byte request");
    req
}

/// Record that the calling test cannot run here and why, then return so the
/// test can end early. The reason goes to stderr and is appended to the file
/// named by `GNOMON_SKIP_LOG` (set by `scripts/test-all`, which prints the
/// file at the end of the run), so a skip is never silent even though
/// cargo's harness hides the output of passing tests.
pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIPPED {test}: {reason}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("GNOMON_SKIP_LOG") {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Whether this process runs as root (raw sockets, network namespaces).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_deterministic_and_sized() {
        assert_eq!(noise(7, 100), noise(7, 100));
        assert_ne!(noise(7, 100), noise(8, 100));
        assert_eq!(noise(1, 13).len(), 13);
        assert!(noise(0, 0).is_empty());
    }

    #[test]
    fn base64_matches_rfc4648_examples() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
