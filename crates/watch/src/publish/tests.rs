//! The publisher over a fixed state: what it signs verifies as SSHSIG,
//! the sequence grows, and a round without a consensus or a key that
//! fails keeps the last list and says why.

use std::sync::{Arc, RwLock};

use gnomon_protocol::signed_list::{sshsig, NAMESPACE};
use gnomon_protocol::KeyPair;

use super::*;
use crate::state::{Latest, Verdict};

#[derive(Debug)]
struct Key {
    pair: KeyPair,
    broken: std::sync::atomic::AtomicBool,
}

impl Signer for Key {
    fn public(&self) -> [u8; 32] {
        self.pair.public()
    }
    fn sign(&self, data: &[u8]) -> Result<[u8; 64], String> {
        use gnomon_protocol::cert::Sign;
        if self.broken.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("the token is gone".into());
        }
        let mut out = [0u8; 64];
        self.pair.sign_into(data, 0, &mut out);
        Ok(out)
    }
}

fn publisher() -> (Publisher, [u8; 32]) {
    let key = Key {
        pair: KeyPair::from_seed(&[5; 32]),
        broken: false.into(),
    };
    let public = key.public();
    let config = Config {
        monitor: "observatory.test".into(),
        comment: "test".into(),
        expiry: Duration::from_secs(86_400),
        window: Duration::from_secs(86_400),
        url: Some("https://observatory.test/servers.json".into()),
        reports_base: None,
    };
    (Publisher::new(config, Box::new(key)), public)
}

fn server(name: &str, seed: u8) -> Server {
    let key = KeyPair::from_seed(&[seed; 32]).public();
    let mut s = Server::at("192.0.2.1:2002", key).unwrap();
    s.name = name.into();
    s
}

fn answered(name: &str, at_us: i64) -> Status {
    Status {
        name: name.into(),
        checked_at_us: at_us,
        up: true,
        version: Some("rfc-10049".into()),
        versions_answered: vec!["rfc-10049".into()],
        udp: Some(true),
        rtt_us: Some(1_500),
        radius_us: Some(1_000_000),
        ..Status::default()
    }
}

const T0: i64 = 1_790_000_000_000_000;

fn state(statuses: Vec<Status>, consensus: bool) -> Shared {
    let mut latest = Latest::default();
    let verdict = Verdict {
        consensus: consensus.then_some((-1_000, 1_000)),
        why_none: (!consensus).then(|| "2 answered, 3 needed".to_string()),
        ..Verdict::default()
    };
    latest.apply(statuses, verdict, T0);
    Arc::new(RwLock::new(latest))
}

/// A round in which "a" answered, with a consensus, at T0.
fn good_round(p: &Publisher, servers: &[Server]) {
    p.after_round(
        servers,
        None,
        &state(vec![answered("a", T0)], true),
        None,
        T0,
    );
}

#[test]
fn a_publication_verifies_and_lists_only_who_answered_and_agreed() {
    let (p, public) = publisher();
    let servers = [server("a", 1), server("liar", 2), server("quiet", 3)];
    let mut liar = answered("liar", T0);
    liar.flagged = Some("its interval misses the consensus".into());
    liar.report = Some("{}".into());
    let quiet = Status {
        name: "quiet".into(),
        failure: Some("silent".into()),
        error: Some("no answer within 1.5 s".into()),
        ..Status::default()
    };
    let latest = state(vec![answered("a", T0), liar, quiet], true);
    p.after_round(
        &servers,
        Some("https://sink.test/reports"),
        &latest,
        None,
        T0,
    );
    let published = p.current(T0 / 1_000_000).expect("published");
    sshsig::verify(
        &published.signature,
        &published.document,
        NAMESPACE,
        &public,
    )
    .unwrap();
    assert_eq!(published.listed, ["a"]);
    let why: Vec<(&str, &str)> = published
        .excluded
        .iter()
        .map(|e| (e.name.as_str(), e.reason))
        .collect();
    assert_eq!(why, [("liar", "lied"), ("quiet", "silent")]);
    let list = gnomon_protocol::serverlist::ServerList::parse(&published.document).unwrap();
    assert_eq!(list.usable().count(), 1);
    let doc: serde_json::Value = serde_json::from_slice(&published.document).unwrap();
    assert_eq!(doc["reports"], "https://sink.test/reports");
    assert_eq!(doc["sources"][0], "https://observatory.test/servers.json");
    assert_eq!(doc["servers"][0]["version"], 1);
    assert_eq!(doc["servers"][0]["measured"]["transports"][0], "udp");
    assert_eq!(doc["servers"][0]["measured"]["radiusMs"], 1000.0);
    let header = signed_list::header(&published.document).unwrap();
    assert_eq!(header.monitor, "observatory.test");
    assert_eq!(header.expires_unix - header.published_unix, 86_400);
    assert_eq!(p.status().results.get("ok"), Some(&1));
}

#[test]
fn the_sequence_grows_even_when_the_clock_does_not() {
    let (p, _) = publisher();
    let servers = [server("a", 1)];
    let latest = state(vec![answered("a", T0)], true);
    let mut last = 0;
    for _ in 0..3 {
        p.after_round(&servers, None, &latest, None, T0);
        let s = p.current(T0 / 1_000_000).unwrap().sequence;
        assert!(s > last, "{s} after {last}");
        last = s;
    }
}

#[test]
fn no_consensus_or_a_failing_key_keeps_the_last_list_and_says_why() {
    let (p, _) = publisher();
    let servers = [server("a", 1)];
    good_round(&p, &servers);
    let first = p.current(T0 / 1_000_000).unwrap();
    p.after_round(
        &servers,
        None,
        &state(vec![answered("a", T0)], false),
        None,
        T0 + 1,
    );
    let s = p.status();
    assert_eq!(s.latest.as_deref(), Some(&*first));
    let (label, why) = s.failing.unwrap();
    assert_eq!(label, "no_consensus");
    assert!(why.contains("2 answered, 3 needed"), "{why}");
    assert_eq!(s.results.get("no_consensus"), Some(&1));
    // The key fails: counted as `key`, the list stays.
    let broken = Publisher::new(
        p.config().clone(),
        Box::new(Key {
            pair: KeyPair::from_seed(&[5; 32]),
            broken: true.into(),
        }),
    );
    good_round(&broken, &servers);
    let s = broken.status();
    assert!(s.latest.is_none());
    assert_eq!(s.failing.as_ref().map(|f| f.0), Some("key"));
    assert!(s.failing.unwrap().1.contains("the token is gone"));
}

#[test]
fn an_expired_publication_is_not_served() {
    let (p, _) = publisher();
    let servers = [server("a", 1)];
    good_round(&p, &servers);
    let t = T0 / 1_000_000;
    assert!(p.current(t + 86_399).is_some());
    assert!(p.current(t + 86_400).is_none());
}
