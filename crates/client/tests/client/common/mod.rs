//! Shared by the client's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use gnomon_client::{Backoff, Client, Config, SeededEntropy, Server};
use gnomon_testkit::Fixture;

/// Short timeouts so tests finish fast; loopback answers in well under a
/// millisecond, so 150 ms still leaves room on a busy machine.
pub fn fast() -> Config {
    Config {
        backoff: Backoff {
            initial: Duration::from_millis(150),
            factor: 1.5,
            max: Duration::from_secs(2),
            attempts: 2,
        },
        fallback_attempts: 1,
        ..Config::default()
    }
}

pub fn client() -> Client {
    Client::new(fast())
}

pub fn seeded(seed: u8) -> Client {
    Client::with_entropy(fast(), SeededEntropy::new([seed; 32]))
}

pub fn server_for(f: &Fixture, name: &str) -> Server {
    let mut s =
        Server::at(&f.addr().to_string(), f.long_term_key().clone()).expect("fixture address");
    s.name = name.to_string();
    s
}

/// A fixture of `p`'s signature scheme answering `profiles`.
pub fn fixture_for(
    p: &gnomon_protocol::Profile,
    profiles: gnomon_protocol::ProfileSet,
    seed: u8,
) -> Fixture {
    Fixture::start(gnomon_testkit::FixtureConfig {
        profiles,
        seed,
        scheme: p.scheme,
        ..gnomon_testkit::FixtureConfig::default()
    })
}
