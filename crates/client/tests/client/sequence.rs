//! The measurement sequence: chains across versions, a liar caught and
//! proved, a broken server rejected and never reported, reports posted.

use crate::common;

use std::time::Duration;

use common::{client, server_for};
use gnomon_client::consensus::Flag;
use gnomon_client::{
    post_report, Backoff, Plan, PostError, PostPolicy, QueryError, Rejection, Selection,
};
use gnomon_protocol::report::MEDIA_TYPE;
use gnomon_protocol::{parse_report, Profile, ProfileSet, VerifyError};
use gnomon_testkit::{profiles, Fixture, FixtureConfig, Mode, ReportSink};

const HOUR_US: i64 = 3_600_000_000;

/// A server for each fixture, named s0, s1, …
fn numbered(fixtures: &[Fixture]) -> Vec<gnomon_client::Server> {
    fixtures
        .iter()
        .enumerate()
        .map(|(i, f)| server_for(f, &format!("s{i}")))
        .collect()
}

fn all_twice() -> Plan {
    Plan {
        selection: Selection::All,
        passes: 2,
        assumption: None,
    }
}

#[test]
fn a_chain_across_google_draft_11_and_version_1_verifies_end_to_end() {
    let g = Fixture::honest(profiles(&["google"]), 21);
    let d11 = Fixture::honest(profiles(&["0x8000000b"]), 22);
    let v1 = Fixture::honest(profiles(&["1"]), 23);
    let servers = vec![
        // Discovery never falls back to Google on silence: name it.
        server_for(&g, "google").with_version(Profile::google()),
        server_for(&d11, "draft-11"),
        server_for(&v1, "rfc"),
    ];
    let seq = client().measure(&servers, &all_twice()).unwrap();
    assert_eq!(seq.entries.len(), 6);
    assert_eq!(seq.chain.exchanges().len(), 6);
    // Same order in both passes, every server once per pass.
    let first: Vec<usize> = seq.entries[..3].iter().map(|e| e.server).collect();
    let second: Vec<usize> = seq.entries[3..].iter().map(|e| e.server).collect();
    assert_eq!(first, second);
    assert_eq!(
        first
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3
    );
    let want = ["google", "draft-11", "rfc-10049"];
    for e in &seq.entries {
        let a = e.result.as_ref().unwrap();
        assert_eq!(a.verified.profile.name, want[e.server]);
    }
    // The second pass asked the remembered version straight away: the
    // Google server got exactly one request in it.
    let g_pass2 = seq.entries[3..].iter().find(|e| e.server == 0).unwrap();
    assert!(g_pass2.result.as_ref().unwrap().offer.versions().is_empty());
    assert_eq!(g_pass2.result.as_ref().unwrap().sends, 1);
    assert!(seq.contradictions.is_empty());
    assert!(!seq.malfeasance());
    assert!(seq.report().is_none());
    let c = seq.agreement.consensus.as_ref().unwrap();
    assert_eq!(c.agreeing.len(), 3);
    assert!(c.low_us <= c.high_us);
    // The chain, written out as a report, verifies link by link.
    let check = seq.chain.report().verify();
    assert!(check.all_valid(), "{check:?}");
    assert!(!check.is_proof_of_malfeasance());
}

fn liar_setup() -> (Vec<Fixture>, Vec<gnomon_client::Server>) {
    let fixtures = vec![
        Fixture::honest(profiles(&["1"]), 31),
        Fixture::honest(profiles(&["google"]), 32),
        Fixture::start(FixtureConfig {
            profiles: profiles(&["1", "draft-14"]),
            offset_us: HOUR_US,
            seed: 33,
            ..FixtureConfig::default()
        }),
        Fixture::honest(profiles(&["draft-08"]), 34),
    ];
    let names = ["honest-v1", "honest-google", "liar", "honest-08"];
    let servers = fixtures
        .iter()
        .zip(names)
        .map(|(f, n)| match n {
            "honest-google" => server_for(f, n).with_version(Profile::google()),
            _ => server_for(f, n),
        })
        .collect();
    (fixtures, servers)
}

#[test]
fn a_server_an_hour_ahead_is_detected_named_and_proved() {
    let (_fixtures, servers) = liar_setup();
    let seq = client().measure(&servers, &all_twice()).unwrap();
    assert!(seq.entries.iter().all(|e| e.result.is_ok()));
    assert!(seq.malfeasance());
    assert!(!seq.contradictions.is_empty());
    // Every contradiction involves the liar, and it is the only suspect.
    for &(i, j) in &seq.contradictions {
        assert!(seq.entries[i].server == 2 || seq.entries[j].server == 2);
    }
    assert_eq!(seq.suspects(), [2]);
    assert_eq!(seq.agreement.flagged, [(2, Flag::OutsideConsensus)]);
    let c = seq.agreement.consensus.as_ref().unwrap();
    assert_eq!(c.agreeing.len(), 3);
    assert!(
        c.high_us < HOUR_US as i128 / 2,
        "consensus follows the honest majority"
    );

    let report = seq.report().expect("a contradiction makes a report");
    let json = report.to_json();
    let parsed = parse_report(json.as_bytes()).unwrap();
    let check = parsed.verify().unwrap();
    assert!(check.is_proof_of_malfeasance(), "{check:?}");
    assert_eq!(check.contradictions, seq.chain.contradictions());
}

#[test]
fn reports_are_posted_with_backoff() {
    let (_fixtures, servers) = liar_setup();
    let seq = client().measure(&servers, &all_twice()).unwrap();
    let json = seq.report().unwrap().to_json();
    let sink = ReportSink::start(1);
    let policy = PostPolicy {
        backoff: Backoff {
            initial: Duration::from_millis(20),
            factor: 1.5,
            max: Duration::from_secs(1),
            attempts: 3,
        },
        timeout: Duration::from_secs(5),
        allow_loopback_http: true,
    };
    let posted = post_report(&sink.url(), &json, &policy).unwrap();
    assert_eq!(posted.attempts, 2);
    assert_eq!(posted.status, 204);
    let got = sink.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].method, "POST");
    assert_eq!(got[1].path, "/reports");
    assert_eq!(got[1].content_type.as_deref(), Some(MEDIA_TYPE));
    assert_eq!(got[1].body, json.as_bytes());

    // Plain HTTP is refused unless the loopback test hook is on.
    let strict = PostPolicy {
        allow_loopback_http: false,
        ..policy
    };
    assert!(matches!(
        post_report(&sink.url(), &json, &strict),
        Err(PostError::Url(_))
    ));
    // A sink that keeps failing is given up on after the attempts.
    let failing = ReportSink::start(10);
    let err = post_report(&failing.url(), &json, &policy).unwrap_err();
    assert!(
        matches!(err, PostError::GaveUp { attempts: 3, .. }),
        "{err}"
    );
    assert_eq!(failing.received().len(), 3);
}

#[test]
fn a_bad_signature_is_rejected_and_never_reported() {
    let fixtures = [
        Fixture::honest(profiles(&["1"]), 41),
        Fixture::start(FixtureConfig {
            mode: Mode::BadSignature,
            // A wrong time too: the signature must fail before anything
            // looks at the time, so nothing is reported.
            offset_us: -HOUR_US,
            seed: 42,
            ..FixtureConfig::default()
        }),
        Fixture::honest(profiles(&["draft-11"]), 43),
    ];
    let servers = numbered(&fixtures);
    let seq = client().measure(&servers, &all_twice()).unwrap();
    let bad: Vec<_> = seq.entries.iter().filter(|e| e.server == 1).collect();
    assert_eq!(bad.len(), 2);
    for e in bad {
        match &e.result {
            Err(QueryError::Invalid {
                rejection: Rejection::Verify(VerifyError::ResponseSignature),
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(e.exchange, None);
    }
    assert_eq!(seq.chain.exchanges().len(), 4);
    assert!(seq.contradictions.is_empty());
    assert!(seq.report().is_none());
    assert!(seq.agreement.flagged.is_empty());
    // Each pass made its two UDP attempts (an invalid datagram ends
    // nothing) and stopped there: no older family was tried.
    assert_eq!(fixtures[1].udp_received(), 4);
}

#[test]
fn random_selection_takes_three_distinct_servers() {
    let fixtures: Vec<Fixture> = (0..5)
        .map(|i| Fixture::honest(ProfileSet::ALL, 50 + i))
        .collect();
    let servers: Vec<_> = fixtures
        .iter()
        .enumerate()
        .map(|(i, f)| server_for(f, &format!("s{i}")).with_version(Profile::rfc()))
        .collect();
    let mut orders = std::collections::BTreeSet::new();
    for seed in 0..6 {
        let seq = common::seeded(seed)
            .measure(&servers, &Plan::default())
            .unwrap();
        assert_eq!(seq.order.len(), 3);
        let mut o = seq.order.clone();
        o.sort_unstable();
        o.dedup();
        assert_eq!(o.len(), 3);
        assert_eq!(seq.entries.len(), 6);
        orders.insert(seq.order.clone());
    }
    assert!(orders.len() > 1, "the choice is random");
}

#[test]
fn a_report_endpoint_that_redirects_is_not_followed() {
    // The list's endpoint redirects to another listener; the report must
    // reach neither that one nor be retried.
    let elsewhere = ReportSink::start(0);
    let redirecting = ReportSink::redirecting(&elsewhere.url());
    let policy = PostPolicy {
        backoff: Backoff {
            initial: Duration::from_millis(10),
            factor: 1.5,
            max: Duration::from_millis(50),
            attempts: 3,
        },
        timeout: Duration::from_secs(10),
        allow_loopback_http: true,
    };
    let err = post_report(&redirecting.url(), "{}", &policy).unwrap_err();
    assert_eq!(
        err,
        PostError::Redirected {
            status: 307,
            location: Some(elsewhere.url()),
        }
    );
    assert_eq!(redirecting.received().len(), 1);
    assert!(elsewhere.received().is_empty());
    assert!(err.to_string().contains("not followed"), "{err}");
}

/// A local clock that steps an hour forward at every reading after the
/// first, as a clock being set during a measurement would look to a client
/// that read it more than once.
struct SteppingClock(i128);

impl gnomon_client::WallClock for SteppingClock {
    fn now_us(&mut self) -> i128 {
        let real = gnomon_client::SystemClock.now_us();
        let stepped = real + self.0 * i128::from(HOUR_US);
        self.0 += 1;
        stepped
    }
}

#[test]
fn a_local_clock_step_during_a_measurement_flags_no_honest_server() {
    let fixtures = [
        Fixture::honest(profiles(&["1"]), 51),
        Fixture::honest(profiles(&["draft-11"]), 52),
        Fixture::honest(profiles(&["draft-08"]), 53),
    ];
    let servers = numbered(&fixtures);
    let mut c = client().with_clock(SteppingClock(0));
    let seq = c.measure(&servers, &all_twice()).unwrap();
    assert_eq!(seq.answers().count(), 6);
    assert!(seq.agreement.flagged.is_empty(), "{:?}", seq.agreement);
    assert!(!seq.malfeasance());
    let consensus = seq.agreement.consensus.as_ref().unwrap();
    assert_eq!(consensus.agreeing.len(), 3);
    // Every offset is placed from the one reading: the honest servers agree
    // with it to well within an hour.
    for (_, a) in seq.answers() {
        assert!(
            a.offset_us.abs() < i128::from(HOUR_US) / 2,
            "{}",
            a.offset_us
        );
    }
}

#[test]
fn a_sequence_bound_to_a_device_value_makes_a_proof_the_device_accepts() {
    use gnomon_protocol::{verify_proof, Proof, ProofError, ProofPolicy, ProofWorkspace};
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    let fixtures: Vec<Fixture> = (0..3)
        .map(|i| Fixture::honest(profiles(&["1"]), 61 + i))
        .collect();
    let servers = numbered(&fixtures);
    let device = [0x5au8; 32];
    let wall = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as i128
    };
    let made = Instant::now();
    let before = wall();
    let seq = client()
        .measure_bound(&servers, &all_twice(), &device)
        .unwrap();
    assert!(!seq.malfeasance());
    assert_eq!(seq.chain.device(), Some(&device[..]));
    let proof = seq.chain.proof().expect("bound").expect("fits");
    // What the relay writes and the device reads back.
    let bundle = Proof::from_json(proof.to_json().as_bytes())
        .unwrap()
        .to_binary();
    let keys: Vec<_> = servers.iter().map(|s| s.public_key.as_public()).collect();
    let mut ws = ProofWorkspace::new();
    let elapsed = made.elapsed().as_micros() as u64 + 1;
    let p = verify_proof(
        &bundle,
        &device,
        &keys,
        elapsed,
        &ProofPolicy::default(),
        &mut ws,
    )
    .unwrap();
    let after = wall();
    assert!(p.earliest_us <= after && before <= p.latest_us, "{p:?}");
    assert_eq!(p.agreeing_keys, 3);
    // Another device's value is refused.
    assert_eq!(
        verify_proof(
            &bundle,
            &[0; 32],
            &keys,
            elapsed,
            &ProofPolicy::default(),
            &mut ws
        ),
        Err(ProofError::WrongNonce)
    );
    // An unbound sequence has no proof; a bad device value is refused.
    assert!(client()
        .measure(&servers, &all_twice())
        .unwrap()
        .chain
        .proof()
        .is_none());
    assert!(matches!(
        client().measure_bound(&servers, &all_twice(), &[]),
        Err(QueryError::Local(_))
    ));
}
