//! Property tests of the trust core against an adversary that lies and
//! owns the network.
//!
//! The assumption, as a number: of the N pinned monitor keys, the adversary
//! holds B < K (the threshold). With those keys it signs whatever it likes;
//! on the network it delivers any subset of the lists published, in any
//! order, drops and replays them, delivers them after expiry, flips bits,
//! swaps signatures between lists, and gets honest keys to sign its own
//! documents in other namespaces (a file or a git commit they were tricked
//! into signing). A client drives [`Seen`] and its current list per key
//! across deliveries, as sync does, restarting from the JSON record now and
//! then. After every delivery:
//! - a list from an honest key is accepted only when it is byte for byte one
//!   that monitor published in [`NAMESPACE`](super::NAMESPACE), unexpired, with a sequence not
//!   below the one recorded for the key (for any key: never below);
//! - such a list, delivered intact, unexpired and newer, is accepted (the
//!   checks are not vacuous);
//! - every server of the merged list, and each of its addresses, is listed
//!   with the same identity by an honest monitor in a list it published,
//!   unexpired, whose sequence is not below the one recorded for its key.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;
use serde_json::Value;

use super::testing::{document, Monitor, Server};
use super::{Accepted, Pins, Seen};
use crate::serverlist::ServerList;

const T0: i64 = 1_796_220_000;
const HONEST_SERVERS: u8 = 4;

/// One list an honest monitor publishes: steps from the previous one.
#[derive(Clone, Debug)]
struct Publication {
    sequence_step: u64,
    published_step: i64,
    lifetime: i64,
    /// Which honest servers it lists (bit n-1 for server n).
    servers: u8,
    /// Which of them it lists with a second address too.
    second_address: u8,
}

/// A list the adversary signs with one of its keys.
#[derive(Clone, Debug)]
struct Forgery {
    key: usize,
    sequence: u64,
    lifetime: i64,
    /// Honest servers it lists (bits 0..4), liars (bits 4..8).
    servers: u8,
    /// Lists the honest servers under another operator.
    steal_operator: bool,
    /// Gives the honest servers an address of its own.
    own_address: bool,
}

#[derive(Clone, Debug)]
enum Delivery {
    Intact {
        monitor: usize,
        list: usize,
    },
    Flipped {
        monitor: usize,
        list: usize,
        at: usize,
        bit: u8,
        in_signature: bool,
    },
    Swapped {
        monitor: usize,
        list: usize,
        other_monitor: usize,
        other_list: usize,
    },
    /// A forgery signed by an honest key in another namespace.
    OtherNamespace {
        monitor: usize,
        forgery: usize,
        namespace: &'static str,
    },
    /// A forgery signed by the key the adversary holds.
    Forged {
        forgery: usize,
    },
}

#[derive(Clone, Debug)]
struct Event {
    advance: i64,
    delivery: Delivery,
    restart: bool,
}

#[derive(Clone, Debug)]
struct Scenario {
    threshold: usize,
    /// True for keys the adversary holds: fewer than `threshold`.
    held: Vec<bool>,
    histories: Vec<Vec<Publication>>,
    forgeries: Vec<Forgery>,
    events: Vec<Event>,
}

fn publication() -> impl Strategy<Value = Publication> {
    (
        1u64..1000,
        0i64..6 * 3600,
        600i64..2 * 86_400,
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(
            |(sequence_step, published_step, lifetime, servers, second_address)| Publication {
                sequence_step,
                published_step,
                lifetime,
                servers: servers & 0x0f,
                second_address: second_address & 0x0f,
            },
        )
}

fn forgery() -> impl Strategy<Value = Forgery> {
    (
        any::<usize>(),
        prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0u64..5000],
        600i64..400 * 86_400,
        any::<u8>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(key, sequence, lifetime, servers, steal_operator, own_address)| Forgery {
                key,
                sequence,
                lifetime,
                servers,
                steal_operator,
                own_address,
            },
        )
}

fn delivery() -> impl Strategy<Value = Delivery> {
    let pick = any::<usize>();
    prop_oneof![
        4 => (pick, pick).prop_map(|(monitor, list)| Delivery::Intact { monitor, list }),
        2 => (pick, pick, pick, 1u8..=255, any::<bool>()).prop_map(|(monitor, list, at, bit, in_signature)| {
            Delivery::Flipped { monitor, list, at, bit, in_signature }
        }),
        1 => (pick, pick, pick, pick).prop_map(|(monitor, list, other_monitor, other_list)| Delivery::Swapped {
            monitor,
            list,
            other_monitor,
            other_list
        }),
        1 => (pick, pick, prop_oneof![Just("file"), Just("git"), Just("roughtime-server-lis")]).prop_map(
            |(monitor, forgery, namespace)| Delivery::OtherNamespace { monitor, forgery, namespace }
        ),
        2 => pick.prop_map(|forgery| Delivery::Forged { forgery }),
    ]
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (1usize..=4)
        .prop_flat_map(|n| (Just(n), 1..=n))
        .prop_flat_map(|(n, k)| {
            // B < K keys held, placed anywhere among the N.
            let held = (0..k).prop_flat_map(move |b| {
                Just((0..n).map(|i| i < b).collect::<Vec<bool>>()).prop_shuffle()
            });
            (
                Just(k),
                held,
                proptest::collection::vec(proptest::collection::vec(publication(), 1..5), n),
                proptest::collection::vec(forgery(), 1..4),
                proptest::collection::vec(
                    (0i64..8 * 3600, delivery(), proptest::bool::weighted(0.1)).prop_map(
                        |(advance, delivery, restart)| Event {
                            advance,
                            delivery,
                            restart,
                        },
                    ),
                    1..24,
                ),
            )
        })
        .prop_map(|(threshold, held, histories, forgeries, events)| Scenario {
            threshold,
            held,
            histories,
            forgeries,
            events,
        })
}

fn operator(n: u8) -> String {
    format!("op-{n}")
}

/// A list an honest monitor really published.
struct Published {
    document: Vec<u8>,
    signature: Vec<u8>,
    sequence: u64,
    expires: i64,
}

fn publish(m: &Monitor, history: &[Publication]) -> Vec<Published> {
    let (mut sequence, mut published) = (1_000u64, T0 - 3600);
    history
        .iter()
        .map(|p| {
            sequence += p.sequence_step;
            published += p.published_step;
            let servers: Vec<Server> = (1..=HONEST_SERVERS)
                .filter(|n| p.servers & (1 << (n - 1)) != 0)
                .map(|n| {
                    let mut s = Server::new(n, Some(&operator(n)));
                    if p.second_address & (1 << (n - 1)) != 0 {
                        s.addresses.push(format!("[2001:db8::{n}]:2002"));
                    }
                    s
                })
                .collect();
            let document = document(
                &m.name,
                sequence,
                published,
                published + p.lifetime,
                &servers,
            );
            Published {
                signature: m.sign(&document),
                document,
                sequence,
                expires: published + p.lifetime,
            }
        })
        .collect()
}

fn forge(f: &Forgery, now: i64) -> Vec<u8> {
    let servers: Vec<Server> = (0..8u8)
        .filter(|b| f.servers & (1 << b) != 0)
        .map(|b| {
            let n = if b < 4 { b + 1 } else { 100 + b };
            let op = if b < 4 && !f.steal_operator {
                operator(n)
            } else {
                "op-evil".to_string()
            };
            let mut s = Server::new(n, Some(&op));
            if f.own_address {
                s.addresses.push(format!("203.0.113.{n}:2002"));
            }
            s
        })
        .collect();
    document(
        "adversary",
        f.sequence,
        now - 60,
        now.saturating_add(f.lifetime),
        &servers,
    )
}

/// (publicKey, operator, address) of every server and address of a list.
fn entries(document: &[u8]) -> Vec<(String, Option<String>, String)> {
    let v: Value = serde_json::from_slice(document).unwrap();
    let mut out = Vec::new();
    for s in v["servers"].as_array().unwrap() {
        let key = s["publicKey"].as_str().unwrap().to_string();
        let op = s
            .get("operator")
            .and_then(Value::as_str)
            .map(str::to_string);
        for a in s["addresses"].as_array().unwrap() {
            out.push((
                key.clone(),
                op.clone(),
                a["address"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

fn run(sc: &Scenario) -> Result<(), TestCaseError> {
    let n = sc.held.len();
    let monitors: Vec<Monitor> = (0..n)
        .map(|i| Monitor::new(10 + i as u8, &format!("monitor-{i}")))
        .collect();
    let pins = Pins::new(monitors.iter().map(Monitor::key).collect(), sc.threshold).unwrap();
    let honest: Vec<usize> = (0..n).filter(|&i| !sc.held[i]).collect();
    let held: Vec<usize> = (0..n).filter(|&i| sc.held[i]).collect();
    prop_assert!(held.len() < sc.threshold);
    // Every key publishes a history; held keys' histories are the
    // adversary's to replay like any other.
    let published: Vec<Vec<Published>> = monitors
        .iter()
        .zip(&sc.histories)
        .map(|(m, h)| publish(m, h))
        .collect();

    let mut now = T0;
    let mut seen = Seen::default();
    let mut current: Vec<Option<Accepted>> = vec![None; n];
    for ev in &sc.events {
        now += ev.advance;
        if ev.restart {
            seen = Seen::from_json(&seen.to_json()).unwrap();
        }
        let list = |m: usize, l: usize| {
            let m = m % n;
            &published[m][l % published[m].len()]
        };
        let (document, signature, intact) = match &ev.delivery {
            Delivery::Intact { monitor, list: l } => {
                let p = list(*monitor, *l);
                (
                    p.document.clone(),
                    p.signature.clone(),
                    Some((*monitor % n, p)),
                )
            }
            Delivery::Flipped {
                monitor,
                list: l,
                at,
                bit,
                in_signature,
            } => {
                let p = list(*monitor, *l);
                let (mut d, mut s) = (p.document.clone(), p.signature.clone());
                let target = if *in_signature { &mut s } else { &mut d };
                let len = target.len();
                target[at % len] ^= bit;
                (d, s, None)
            }
            Delivery::Swapped {
                monitor,
                list: l,
                other_monitor,
                other_list,
            } => {
                let (p, q) = (list(*monitor, *l), list(*other_monitor, *other_list));
                let same = p.document == q.document;
                (
                    p.document.clone(),
                    q.signature.clone(),
                    same.then_some((*monitor % n, p)),
                )
            }
            Delivery::OtherNamespace {
                monitor,
                forgery,
                namespace,
            } => {
                let d = forge(&sc.forgeries[forgery % sc.forgeries.len()], now);
                let s = monitors[monitor % n].sign_in(namespace, &d);
                (d, s, None)
            }
            Delivery::Forged { forgery } => {
                let f = &sc.forgeries[forgery % sc.forgeries.len()];
                let d = forge(f, now);
                match held.get(f.key % held.len().max(1)) {
                    Some(&k) => {
                        let s = monitors[k].sign(&d);
                        (d, s, None)
                    }
                    // No key held: the adversary signs with one nobody pinned.
                    None => {
                        let s = Monitor::new(99, "stranger").sign(&d);
                        (d, s, None)
                    }
                }
            }
        };

        let before = seen.clone();
        match pins.check(&document, &signature, now, &seen) {
            Ok(a) => {
                let key = pins.keys()[a.key].public();
                if let Some((last, _)) = before.get(key) {
                    prop_assert!(
                        a.header.sequence >= last,
                        "accepted {} below {}",
                        a.header.sequence,
                        last
                    );
                }
                prop_assert!(now < a.header.expires_unix);
                if !sc.held[a.key] {
                    prop_assert!(
                        published[a.key]
                            .iter()
                            .any(|p| p.document == document && p.signature == signature),
                        "an honest key's list was accepted that it never published: {:?}",
                        ev.delivery
                    );
                }
                seen.record(&pins, &a);
                let key = a.key;
                current[key] = Some(a);
            }
            Err(r) => {
                if let Some((m, p)) = intact {
                    let fresh = before
                        .get(monitors[m].key().public())
                        .is_none_or(|(last, _)| p.sequence >= last);
                    prop_assert!(
                        !(fresh && now < p.expires),
                        "an intact, current, newer list was refused: {r}"
                    );
                }
            }
        }

        // The record only moves forward, key by key.
        for m in &monitors {
            let k = m.key();
            if let Some((was, _)) = before.get(k.public()) {
                prop_assert!(seen.get(k.public()).is_some_and(|(now, _)| now >= was));
            }
        }

        let lists: Vec<Accepted> = current.iter().flatten().cloned().collect();
        let merged = pins.merge(&lists, now);
        prop_assert!(ServerList::parse(&merged.document).is_ok());
        prop_assert_eq!(
            merged.servers,
            ServerList::parse(&merged.document).unwrap().servers.len()
        );
        for entry in entries(&merged.document) {
            let vouched = honest.iter().any(|&m| {
                let last = seen.get(monitors[m].key().public()).map_or(0, |(s, _)| s);
                published[m].iter().any(|p| {
                    now < p.expires && p.sequence >= last && entries(&p.document).contains(&entry)
                })
            });
            prop_assert!(
                vouched,
                "{entry:?} is used but no honest monitor's current list gives it"
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn fewer_than_k_held_keys_and_the_network_cannot_make_a_server_used(sc in scenario()) {
        run(&sc)?;
    }

    /// Without an adversary, each key's latest list delivered: exactly the
    /// servers K of them list are used (the merge is not vacuous).
    #[test]
    fn honest_latest_lists_give_the_servers_k_of_them_list(
        (threshold, histories) in (1usize..=4).prop_flat_map(|n| (1..=n, proptest::collection::vec(proptest::collection::vec(publication(), 1..3), n)))
    ) {
        let n = histories.len();
        let monitors: Vec<Monitor> = (0..n).map(|i| Monitor::new(10 + i as u8, &format!("monitor-{i}"))).collect();
        let pins = Pins::new(monitors.iter().map(Monitor::key).collect(), threshold).unwrap();
        let mut seen = Seen::default();
        let mut lists = Vec::new();
        for (m, h) in monitors.iter().zip(&histories) {
            let p = publish(m, h);
            let last = p.last().unwrap();
            let now = last.expires - 1;
            let a = pins.check(&last.document, &last.signature, now.min(T0), &seen).unwrap();
            seen.record(&pins, &a);
            lists.push(a);
        }
        let merged = pins.merge(&lists, T0);
        let current: Vec<&Accepted> = lists.iter().filter(|a| a.header.expires_unix > T0).collect();
        let mut want = Vec::new();
        for s in 1..=HONEST_SERVERS {
            let key = base64::Engine::encode(&crate::report::B64, [s; 32]);
            let by = current.iter().filter(|a| entries(&a.document).iter().any(|e| e.0 == key)).count();
            if by >= threshold {
                want.push(key);
            }
        }
        let mut got: Vec<String> = entries(&merged.document).into_iter().map(|e| e.0).collect();
        got.sort();
        got.dedup();
        want.sort();
        prop_assert_eq!(got, want);
        prop_assert_eq!(merged.monitors, current.len());
    }
}
