//! The monitors' state: the last good list kept until its own expiry,
//! expiry judged by the later of the local clock and the proven time, the
//! sequence kept across a restart (a replayed older list refused after
//! it), and property tests against an adversary holding fewer than K of
//! the keys who owns the network.

use std::path::PathBuf;

use gnomon_protocol::signed_list::{Accepted, Merged, Pins, Seen};
use proptest::prelude::*;

use super::super::fetch::{Fetch, Fetched, NotAccepted};
use super::super::store;
use super::super::testing::{server_bytes, Monitor};
use super::*;
use crate::refresh::Failure;
use crate::state::Store;

const T0: i64 = 1_800_000_000;

/// A fetch whose URLs gave `outcomes` (checked by `pins` at `now`
/// against `seen`, as `fetch::fetch` does over the network).
fn fetch_of(pins: &Pins, seen: &Seen, now: i64, outcomes: Vec<(&str, Delivery)>) -> Fetch {
    let lists: Vec<Fetched> = outcomes
        .into_iter()
        .map(|(url, d)| Fetched {
            url: url.to_string(),
            outcome: match d {
                Delivery::Bytes(list, sig) => pins
                    .check(&list, &sig, now, seen)
                    .map_err(NotAccepted::Refused),
                Delivery::Dropped => Err(NotAccepted::Fetch {
                    url: url.to_string(),
                    failure: Failure::Timeout,
                }),
            },
        })
        .collect();
    let accepted: Vec<Accepted> = lists
        .iter()
        .filter_map(|l| l.outcome.as_ref().ok().cloned())
        .collect();
    let merged: Merged = pins.merge(&accepted, now);
    Fetch { lists, merged }
}

#[derive(Clone, Debug)]
enum Delivery {
    Bytes(Vec<u8>, Vec<u8>),
    Dropped,
}

fn signed(m: &Monitor, servers: &[u8], seq: u64, published: i64, expires: i64) -> Delivery {
    let l = m.list(servers, seq, published, expires);
    let s = m.sign(&l);
    Delivery::Bytes(l, s)
}

fn tempdir(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = std::env::temp_dir().join(format!("gnomon-monitors-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

#[test]
fn a_failed_or_refused_fetch_keeps_the_last_good_list_until_its_own_expiry() {
    let (a, b) = (Monitor::new(1, "a"), Monitor::new(2, "b"));
    let pins = Pins::new(vec![a.key(), b.key()], 1).unwrap();
    let mut m = Monitors::new(pins.clone());
    assert_eq!(m.standing(0, T0), Standing::None);
    assert!(m.shortfall(T0).unwrap().contains("no list fetched yet"));

    let f = fetch_of(
        &pins,
        m.seen(),
        T0,
        vec![
            ("http://a/l", signed(&a, &[1, 2], 5, T0 - 10, T0 + 100)),
            ("http://b/l", signed(&b, &[3], 7, T0 - 10, T0 + 50)),
        ],
    );
    assert_eq!(m.apply(&f, T0), [0, 1]);
    assert_eq!(m.standing(0, T0), Standing::Current);
    assert_eq!(server_bytes(&m.merged(T0).document), [1, 2, 3]);

    // a's URL drops, b's serves a tampered list: both keep theirs.
    let Delivery::Bytes(mut bad, sig) = signed(&b, &[9], 8, T0, T0 + 500) else {
        unreachable!()
    };
    let last = bad.len() - 2;
    bad[last] ^= 1;
    let f = fetch_of(
        &pins,
        m.seen(),
        T0 + 10,
        vec![
            ("http://a/l", Delivery::Dropped),
            ("http://b/l", Delivery::Bytes(bad, sig)),
        ],
    );
    assert!(m.apply(&f, T0 + 10).is_empty());
    assert_eq!(m.standing(0, T0 + 10), Standing::Kept);
    assert_eq!(m.standing(1, T0 + 10), Standing::Kept);
    assert!(
        m.slots()[0]
            .failure
            .as_deref()
            .unwrap()
            .contains("timed out"),
        "{:?}",
        m.slots()[0]
    );
    assert!(
        m.slots()[1]
            .failure
            .as_deref()
            .unwrap()
            .contains("refused: the list's signature does not verify"),
        "{:?}",
        m.slots()[1]
    );
    assert_eq!(server_bytes(&m.merged(T0 + 10).document), [1, 2, 3]);
    assert_eq!(m.slots()[0].kept.as_ref().unwrap().list.header.sequence, 5);

    // b's expires first: only a's servers; then none, and why.
    assert_eq!(m.standing(1, T0 + 50), Standing::Expired);
    assert_eq!(server_bytes(&m.merged(T0 + 50).document), [1, 2]);
    assert_eq!(m.shortfall(T0 + 50), None);
    assert_eq!(m.merged(T0 + 100).servers, 0);
    let why = m.shortfall(T0 + 100).unwrap();
    assert!(
        why.contains("0 of the 2 pinned monitors' lists in force")
            && why.contains("expired at")
            && why.contains(&a.key().fingerprint())
            && why.contains("the clock is not stepped"),
        "{why}"
    );

    // A newer list of a, and it counts again.
    let f = fetch_of(
        &pins,
        m.seen(),
        T0 + 200,
        vec![("http://a/l", signed(&a, &[4], 6, T0 + 150, T0 + 300))],
    );
    assert_eq!(m.apply(&f, T0 + 200), [0]);
    assert_eq!(m.standing(0, T0 + 200), Standing::Current);
    assert_eq!(server_bytes(&m.merged(T0 + 200).document), [4]);
}

#[test]
fn expiry_is_judged_by_the_later_of_the_local_clock_and_the_proven_time() {
    assert_eq!(judged_now(T0, None), T0);
    // A clock a day behind the proven time: the proven time judges.
    assert_eq!(judged_now(T0 - 86_400, Some(T0)), T0);
    // A clock ahead of it: the clock judges (lists expire early, never late).
    assert_eq!(judged_now(T0 + 60, Some(T0)), T0 + 60);

    let a = Monitor::new(1, "a");
    let pins = Pins::new(vec![a.key()], 1).unwrap();
    let mut m = Monitors::new(pins.clone());
    let behind = T0 - 86_400;
    let f = fetch_of(
        &pins,
        m.seen(),
        behind,
        vec![("u", signed(&a, &[1], 1, behind - 10, T0 - 3600))],
    );
    m.apply(&f, behind);
    assert_eq!(m.standing(0, behind), Standing::Current);
    // Once a consensus proved the time is T0, the list is expired.
    let judged = judged_now(behind, Some(T0));
    assert_eq!(m.standing(0, judged), Standing::Expired);
    assert_eq!(m.merged(judged).servers, 0);
    // And the same list offered again at the judged time is refused.
    let f = fetch_of(
        &pins,
        m.seen(),
        judged,
        vec![("u", signed(&a, &[1], 1, behind - 10, T0 - 3600))],
    );
    assert_eq!(f.lists[0].outcome.as_ref().unwrap_err().label(), "expired");
}

#[test]
fn the_sequence_survives_a_restart_and_an_older_list_is_then_refused() {
    let (a, b) = (Monitor::new(1, "a"), Monitor::new(2, "b"));
    let pins = Pins::new(vec![a.key(), b.key()], 2).unwrap();
    let dir = tempdir("restart");
    let st = Store::open(&dir).unwrap();
    let mut m = Monitors::new(pins.clone());
    let old_a = signed(&a, &[1, 2], 10, T0 - 100, T0 + 1000);
    let f = fetch_of(
        &pins,
        m.seen(),
        T0,
        vec![
            ("http://a/l", signed(&a, &[1, 2], 11, T0 - 10, T0 + 1000)),
            ("http://b/l", signed(&b, &[2], 3, T0 - 10, T0 + 1000)),
        ],
    );
    for i in m.apply(&f, T0) {
        store::save_list(&st, &m, m.slots()[i].kept.as_ref().unwrap()).unwrap();
    }

    // A restart: the lists kept are checked again and used.
    let mut again = Monitors::new(pins.clone());
    let notes = store::restore(&st, &mut again, true);
    assert!(
        notes.iter().all(|n| n.contains("is used until")),
        "{notes:?}"
    );
    assert_eq!(again.slots(), m.slots());
    assert_eq!(again.seen(), m.seen());
    assert_eq!(server_bytes(&again.merged(T0).document), [2]);
    let f = fetch_of(&pins, again.seen(), T0 + 5, vec![("http://a/l", old_a)]);
    assert_eq!(f.lists[0].outcome.as_ref().unwrap_err().label(), "replayed");
    again.apply(&f, T0 + 5);
    assert_eq!(again.standing(0, T0 + 5), Standing::Kept);
    assert_eq!(
        again.slots()[0].kept.as_ref().unwrap().list.header.sequence,
        11
    );

    // Without seen.json, the kept list itself carries the sequence.
    std::fs::remove_file(st.path(store::SEEN_FILE)).unwrap();
    let mut lost = Monitors::new(pins.clone());
    store::restore(&st, &mut lost, true);
    let f = fetch_of(
        &pins,
        lost.seen(),
        T0 + 5,
        vec![("u", signed(&a, &[1, 2], 10, T0 - 100, T0 + 1000))],
    );
    assert_eq!(f.lists[0].outcome.as_ref().unwrap_err().label(), "replayed");

    // A kept list changed in the directory is not restored; nor is
    // anything from a directory others may write.
    let file = st.path(&format!(
        "{}/{}.json",
        store::SIGNED_DIR,
        a.key()
            .public()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ));
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() - 2;
    bytes[at] ^= 1;
    st.write(
        &file.strip_prefix(&dir).unwrap().display().to_string(),
        &bytes,
    )
    .unwrap();
    let mut changed = Monitors::new(pins.clone());
    let notes = store::restore(&st, &mut changed, true);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("is not used") && n.contains("signature")),
        "{notes:?}"
    );
    assert_eq!(changed.slots()[0].kept, None);
    assert!(changed.slots()[1].kept.is_some());
    let mut untrusted = Monitors::new(pins);
    let notes = store::restore(&st, &mut untrusted, false);
    assert!(notes[0].contains("not trusted"), "{notes:?}");
    assert!(untrusted.slots().iter().all(|s| s.kept.is_none()));
    let _ = std::fs::remove_dir_all(&dir);
}

// The adversary: it holds the keys of the monitors `bad` (fewer than K)
// and owns the network. At each step every honest monitor publishes a
// new list (a random set of servers 1..=6, sequence growing, valid for
// a random time), and for each monitor's URL the adversary chooses what
// arrives: the newest list, an older one replayed, one with a byte
// changed, nothing, or (on any URL) a list it signs itself with any
// servers and sequence. Now and then the service restarts from its state
// directory. After every step, at the judged time:
// - every server used is listed by an honest monitor whose kept list is
//   one it really published and has not expired;
// - no kept list of a key goes back in sequence, restarts included;
// - an honest list kept is replaced only by a newer one of that key;
// - with fewer than K lists in force, no server is used.

#[derive(Clone, Debug)]
enum Move {
    Newest,
    Replay(usize),
    Tamper(usize),
    Drop,
    Forge { servers: Vec<u8>, sequence: u64 },
}

fn moves() -> impl Strategy<Value = Move> {
    prop_oneof![
        3 => Just(Move::Newest),
        1 => any::<usize>().prop_map(Move::Replay),
        1 => any::<usize>().prop_map(Move::Tamper),
        1 => Just(Move::Drop),
        1 => (proptest::collection::vec(1u8..=8, 0..6), 0u64..40)
            .prop_map(|(servers, sequence)| Move::Forge { servers, sequence }),
    ]
}

#[derive(Clone, Debug)]
struct Step {
    dt: i64,
    valid: i64,
    servers: Vec<Vec<u8>>,
    moves: Vec<Move>,
    restart: bool,
}

fn steps(n: usize) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (
            0i64..400,
            1i64..600,
            proptest::collection::vec(proptest::collection::vec(1u8..=6, 0..5), n),
            proptest::collection::vec(moves(), n),
            proptest::bool::weighted(0.15),
        )
            .prop_map(|(dt, valid, servers, moves, restart)| Step {
                dt,
                valid,
                servers,
                moves,
                restart,
            }),
        1..12,
    )
}

fn scenario() -> impl Strategy<Value = (usize, usize, Vec<bool>, Vec<Step>)> {
    (2usize..=4).prop_flat_map(|n| {
        (1..=n).prop_flat_map(move |k| {
            // Fewer than K keys held by the adversary.
            proptest::collection::vec(any::<bool>(), n)
                .prop_filter("fewer than K bad", move |bad| {
                    bad.iter().filter(|b| **b).count() < k
                })
                .prop_flat_map(move |bad| (Just(n), Just(k), Just(bad), steps(n)))
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn an_adversary_with_fewer_than_k_keys_never_gets_a_server_used(
        (n, k, bad, plan) in scenario(),
    ) {
        let monitors: Vec<Monitor> = (0..n).map(|i| Monitor::new(i as u8 + 1, "m")).collect();
        let pins = Pins::new(monitors.iter().map(Monitor::key).collect(), k).unwrap();
        let dir = tempdir(&format!("prop-{n}-{k}"));
        let st = Store::open(&dir).unwrap();
        let mut m = Monitors::new(pins.clone());
        // What each honest monitor really published: (bytes, signature).
        let mut published: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); n];
        let mut highest: Vec<Option<u64>> = vec![None; n];
        let mut now = T0;
        for (t, step) in plan.iter().enumerate() {
            now += step.dt;
            if step.restart {
                let mut again = Monitors::new(pins.clone());
                store::restore(&st, &mut again, true);
                prop_assert_eq!(again.seen(), m.seen());
                m = again;
            }
            let mut deliveries = Vec::new();
            for i in 0..n {
                let doc = monitors[i].list(&step.servers[i], t as u64 + 1, now, now + step.valid);
                let sig = monitors[i].sign(&doc);
                published[i].push((doc, sig));
                let pick = |j: usize| published[i][j % published[i].len()].clone();
                let d = match &step.moves[i] {
                    Move::Newest => Delivery::Bytes(pick(published[i].len() - 1).0, pick(published[i].len() - 1).1),
                    Move::Replay(j) => Delivery::Bytes(pick(*j).0, pick(*j).1),
                    Move::Tamper(j) => {
                        let (mut d, s) = pick(*j);
                        let at = *j % d.len();
                        d[at] ^= 0x20;
                        Delivery::Bytes(d, s)
                    }
                    Move::Drop => Delivery::Dropped,
                    Move::Forge { servers, sequence } => {
                        // Signed by a key it holds, or by no pinned key.
                        let signer = bad.iter().position(|b| *b).map_or(Monitor::new(99, "x"), |b| Monitor::new(b as u8 + 1, "m"));
                        signed(&signer, servers, *sequence, now - 1, now + 10_000)
                    }
                };
                deliveries.push(d);
            }
            let urls: Vec<String> = (0..n).map(|i| format!("http://m{i}/l")).collect();
            let before: Vec<Option<Kept>> = m.slots().iter().map(|s| s.kept.clone()).collect();
            let f = fetch_of(&pins, m.seen(), now, urls.iter().map(String::as_str).zip(deliveries).collect());
            for i in m.apply(&f, now) {
                store::save_list(&st, &m, m.slots()[i].kept.as_ref().unwrap()).unwrap();
            }

            let merged = m.merged(now);
            for (i, slot) in m.slots().iter().enumerate() {
                let Some(kept) = &slot.kept else { continue };
                let seq = kept.list.header.sequence;
                prop_assert!(highest[i].is_none_or(|h| seq >= h), "key {} went back", i);
                highest[i] = Some(seq);
                if !bad[i] {
                    prop_assert!(
                        published[i].iter().any(|(d, _)| *d == kept.list.document),
                        "an honest key's kept list is not one it published"
                    );
                    if let Some(b) = &before[i] {
                        prop_assert!(seq >= b.list.header.sequence);
                    }
                }
            }
            let in_force = m.in_force(now);
            prop_assert!(in_force.iter().all(|a| now < a.header.expires_unix));
            if in_force.len() < k {
                prop_assert_eq!(merged.servers, 0);
                prop_assert!(m.shortfall(now).is_some());
            }
            for s in server_bytes(&merged.document) {
                let honest = in_force.iter().any(|a| {
                    !bad[a.key]
                        && published[a.key].iter().any(|(d, _)| *d == a.document)
                        && server_bytes(&a.document).contains(&s)
                });
                prop_assert!(honest, "server {} is used without an honest monitor listing it", s);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
