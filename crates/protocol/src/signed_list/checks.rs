//! Examples: each refusal with its label and words, the record of lists
//! seen, and k-of-n merging.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::testing::{document, Monitor, Server};
use super::{header, Accepted, MonitorKey, Pins, Refusal, Seen};
use crate::serverlist::ServerList;

const NOW: i64 = 1_796_220_000; // 2026-12-02T14:00:00Z
const DAY: i64 = 86_400;

fn monitors() -> [Monitor; 3] {
    [
        Monitor::new(1, "monitor-a"),
        Monitor::new(2, "monitor-b"),
        Monitor::new(3, "monitor-c"),
    ]
}

fn pins(ms: &[Monitor], k: usize) -> Pins {
    Pins::new(ms.iter().map(Monitor::key).collect(), k).unwrap()
}

fn list(m: &Monitor, sequence: u64, servers: &[Server]) -> (Vec<u8>, Vec<u8>) {
    let d = document(&m.name, sequence, NOW - 60, NOW + DAY, servers);
    let s = m.sign(&d);
    (d, s)
}

fn accept(p: &Pins, m: &Monitor, sequence: u64, servers: &[Server]) -> Accepted {
    let (d, s) = list(m, sequence, servers);
    p.check(&d, &s, NOW, &Seen::default()).unwrap()
}

#[test]
fn a_good_list_is_accepted_with_its_header() {
    let ms = monitors();
    let p = pins(&ms, 1);
    let (d, s) = list(&ms[1], 57, &[Server::new(1, None)]);
    let a = p.check(&d, &s, NOW, &Seen::default()).unwrap();
    assert_eq!(a.key, 1);
    assert_eq!(a.header.sequence, 57);
    assert_eq!(a.header.monitor, "monitor-b");
    assert_eq!(a.header.expires_unix, NOW + DAY);
    assert_eq!(a.header, header(&d).unwrap());
}

#[test]
fn each_refusal_has_its_label_and_says_what_to_do() {
    let ms = monitors();
    let p = pins(&ms[..2], 1);
    let (d, s) = list(&ms[0], 57, &[Server::new(1, None)]);
    let none = Seen::default();
    let fp = ms[0].key().fingerprint();

    let mut changed = d.clone();
    let at = changed.iter().position(|&b| b == b'1').unwrap();
    changed[at] = b'2';
    let r = p.check(&changed, &s, NOW, &none).unwrap_err();
    assert_eq!(r.label(), "signature");
    let words = r.to_string();
    assert!(
        words.contains(&fp) && words.contains("(monitor-a)") && words.contains("fetch both again"),
        "{words}"
    );

    let (d3, s3) = list(&ms[2], 57, &[]);
    let r = p.check(&d3, &s3, NOW, &none).unwrap_err();
    assert_eq!(
        r,
        Refusal::OtherKey {
            fingerprint: ms[2].key().fingerprint()
        }
    );
    assert_eq!(r.label(), "other_key");
    assert!(
        r.to_string()
            .contains("not one of the pinned keys (--servers-key)"),
        "{r}"
    );

    let r = p.check(&d, &s, NOW + DAY, &none).unwrap_err();
    assert_eq!(
        r,
        Refusal::Expired {
            expires_unix: NOW + DAY,
            now_unix: NOW + DAY
        }
    );
    assert_eq!(r.label(), "expired");
    assert!(r.to_string().starts_with("the list expired at 2026-12-03T14:00:00Z (now 2026-12-03T14:00:00Z): the monitor has not published since"), "{r}");

    let mut seen = Seen::default();
    seen.record(&p, &accept(&p, &ms[0], 58, &[]));
    let r = p.check(&d, &s, NOW, &seen).unwrap_err();
    assert_eq!(
        r,
        Refusal::Replayed {
            sequence: 57,
            seen: 58
        }
    );
    assert_eq!(r.label(), "replayed");
    assert!(
        r.to_string()
            .starts_with("sequence 57 is older than 58 already seen"),
        "{r}"
    );

    let (d58, s58) = list(&ms[0], 58, &[Server::new(1, None)]);
    let r = p.check(&d58, &s58, NOW, &seen).unwrap_err();
    assert_eq!(r, Refusal::Reused { sequence: 58 });
    assert_eq!(r.label(), "reused");
    assert!(
        r.to_string()
            .contains("two different lists with one sequence"),
        "{r}"
    );

    let not_a_list = br#"{"servers":[],"observatory":{"monitor":"m","sequence":"1"}}"#;
    let r = p
        .check(not_a_list, &ms[0].sign(not_a_list), NOW, &none)
        .unwrap_err();
    assert_eq!(r.label(), "malformed");
    assert!(r.to_string().contains("\"observatory.sequence\""), "{r}");

    let git = ms[0].sign_in("git", &d);
    let r = p.check(&d, &git, NOW, &none).unwrap_err();
    assert_eq!(r.label(), "signature");
    assert!(r.to_string().contains("namespace \"git\""), "{r}");

    let r = p.check(&d, b"not a signature", NOW, &none).unwrap_err();
    assert_eq!(r.label(), "signature");
    assert!(r.to_string().contains("damaged"), "{r}");
}

#[test]
fn the_same_list_again_is_fine_and_a_newer_one_is_accepted() {
    let ms = monitors();
    let p = pins(&ms[..1], 1);
    let (d, s) = list(&ms[0], 57, &[]);
    let mut seen = Seen::default();
    seen.record(&p, &p.check(&d, &s, NOW, &seen).unwrap());
    assert_eq!(p.check(&d, &s, NOW, &seen).unwrap().header.sequence, 57);
    let (d2, s2) = list(&ms[0], 60, &[]);
    seen.record(&p, &p.check(&d2, &s2, NOW, &seen).unwrap());
    assert_eq!(seen.get(ms[0].key().public()).unwrap().0, 60);
    // Recording an older accepted list does not move the record back.
    seen.record(&p, &p.check(&d, &s, NOW, &Seen::default()).unwrap());
    assert_eq!(seen.get(ms[0].key().public()).unwrap().0, 60);
}

#[test]
fn headers_that_are_wrong_are_malformed() {
    let h = |obs: &str| format!(r#"{{"servers":[],"observatory":{obs}}}"#);
    let times = r#""published":"2026-12-02T14:00:00Z","expires":"2026-12-03T14:00:00Z""#;
    for (doc, says) in [
        (
            String::from(r#"["servers"]"#),
            "top level is not a JSON object",
        ),
        (String::from("{"), "not JSON"),
        (String::from(r#"{"servers":[]}"#), "no \"observatory\""),
        (
            h(&format!(r#"{{"sequence":1,{times}}}"#)),
            "observatory.monitor",
        ),
        (
            h(&format!(r#"{{"monitor":"","sequence":1,{times}}}"#)),
            "observatory.monitor",
        ),
        (
            h(&format!(r#"{{"monitor":"m","sequence":-1,{times}}}"#)),
            "observatory.sequence",
        ),
        (
            h(&format!(r#"{{"monitor":"m","sequence":1.0,{times}}}"#)),
            "observatory.sequence",
        ),
        (
            h(&format!(
                r#"{{"monitor":"m","sequence":18446744073709551616,{times}}}"#
            )),
            "observatory.sequence",
        ),
        (
            h(&format!(
                r#"{{"monitor":"m","sequence":1,"sequence":2,{times}}}"#
            )),
            "twice",
        ),
        (
            h(
                r#"{"monitor":"m","sequence":1,"published":"2026-12-02T14:00:00Z","expires":"2026-12-02 14:00:00"}"#,
            ),
            "observatory.expires",
        ),
        (
            h(
                r#"{"monitor":"m","sequence":1,"published":"2026-12-02T14:00:00Z","expires":"2026-12-02T14:00:00Z"}"#,
            ),
            "no later than it was published",
        ),
    ] {
        let r = header(doc.as_bytes()).unwrap_err();
        assert_eq!(r.label(), "malformed");
        assert!(r.to_string().contains(says), "{r} / {says}");
    }
    // Escapes in the monitor's name are decoded.
    let doc = h(&format!(
        r#"{{"monitor":"a\"b\u00e9\ud83d\ude00","sequence":0,{times}}}"#
    ));
    assert_eq!(
        header(doc.as_bytes()).unwrap().monitor,
        "a\"b\u{e9}\u{1f600}"
    );
    // A valid header on a list whose entries' container is of the wrong type.
    let ms = monitors();
    let p = pins(&ms[..1], 1);
    let d = format!(
        r#"{{"servers":[],"reports":1,"observatory":{{"monitor":"m","sequence":1,{times}}}}}"#
    );
    let r = p
        .check(
            d.as_bytes(),
            &ms[0].sign(d.as_bytes()),
            NOW,
            &Seen::default(),
        )
        .unwrap_err();
    assert!(
        r.to_string()
            .contains("\"reports\" has the wrong JSON type"),
        "{r}"
    );
}

#[test]
fn pins_refuse_duplicate_keys_and_impossible_thresholds() {
    let ms = monitors();
    let a = ms[0].key();
    // The same key under another comment is still the same key.
    let renamed = MonitorKey::from_ed25519(*a.public(), "another name");
    let err = Pins::new(vec![a.clone(), renamed], 1).unwrap_err();
    assert!(
        err.contains("pinned twice") && err.contains(&a.fingerprint()),
        "{err}"
    );
    assert!(Pins::new(vec![], 1).unwrap_err().contains("--servers-key"));
    assert!(Pins::new(vec![a.clone()], 0)
        .unwrap_err()
        .contains("--servers-threshold"));
    assert!(Pins::new(vec![a.clone()], 2)
        .unwrap_err()
        .contains("1 pinned key:"));
    let p = pins(&ms, 3);
    assert_eq!(p.threshold(), 3);
    assert_eq!(p.keys()[2], ms[2].key());
}

#[test]
fn the_record_of_lists_seen_survives_json() {
    let ms = monitors();
    let p = pins(&ms, 1);
    let mut seen = Seen::default();
    seen.record(&p, &accept(&p, &ms[0], u64::MAX, &[]));
    seen.record(&p, &accept(&p, &ms[2], 3, &[]));
    let json = seen.to_json();
    assert!(json.contains(&ms[2].key().fingerprint()), "{json}");
    let back = Seen::from_json(&json).unwrap();
    assert_eq!(back, seen);
    assert_eq!(back.get(ms[0].key().public()).unwrap().0, u64::MAX);
    assert_eq!(back.get(ms[1].key().public()), None);
    for bad in [
        "",
        "{}",
        r#"{"version":2,"keys":[]}"#,
        r#"{"version":1,"keys":[{"fingerprint":"x","publicKey":"AAAA","sequence":1,"sha256":"00"}]}"#,
    ] {
        assert!(
            Seen::from_json(bad)
                .unwrap_err()
                .contains("record of lists seen"),
            "{bad}"
        );
    }
    let twice = json.replacen(
        "\"keys\": [",
        &format!("\"keys\": [{},", entry_of(&json)),
        1,
    );
    assert!(Seen::from_json(&twice).unwrap_err().contains("twice"));
}

/// The first entry object of the record, as text.
fn entry_of(json: &str) -> String {
    let from = json.find("    {").unwrap();
    let to = from + json[from..].find('}').unwrap() + 1;
    json[from..to].to_string()
}

#[test]
fn two_of_three_use_what_two_list_with_the_first_pinned_keys_fields() {
    let ms = monitors();
    let p = pins(&ms, 2);
    let shared = Server::new(1, Some("op-1"));
    let mut moved = shared.clone();
    moved.addresses = vec!["10.0.0.1:2002".to_string(), "10.9.9.9:2002".to_string()];
    let only_a = Server::new(2, None);
    let mut other_operator = Server::new(3, Some("op-3"));
    let a = accept(
        &p,
        &ms[0],
        1,
        &[moved.clone(), only_a.clone(), other_operator.clone()],
    );
    other_operator.operator = Some("op-x".to_string());
    let b = accept(&p, &ms[1], 1, &[shared.clone(), other_operator.clone()]);
    let c = accept(&p, &ms[2], 1, &[moved]);
    // Given in another order than the pins: fields still come from monitor-a.
    let m = p.merge(&[c, b, a], NOW);
    assert_eq!(
        (m.servers, m.monitors, m.expires_unix),
        (1, 3, Some(NOW + DAY))
    );
    let list = ServerList::parse(&m.document).unwrap();
    assert_eq!(list.servers.len(), 1);
    assert_eq!(list.servers[0].operator.as_deref(), Some("op-1"));
    assert_eq!(list.reports.as_deref(), Some("https://reports.example/"));
    let usable = list.servers[0].status.as_ref().unwrap();
    // 10.9.9.9 is given by a and c: two of three.
    assert_eq!(usable.addresses.len(), 2);
    let v: serde_json::Value = serde_json::from_slice(&m.document).unwrap();
    assert_eq!(v["servers"][0]["measured"]["note"], "monitor-a");
    assert!(v.get("observatory").is_none() && v.get("sources").is_none());
    let mut left: Vec<_> = m
        .left_out
        .iter()
        .map(|l| (l.name.as_str(), l.listed_by, l.needed))
        .collect();
    left.sort();
    assert_eq!(
        left,
        [("server-2", 1, 2), ("server-3", 1, 2), ("server-3", 1, 2)]
    );
}

#[test]
fn addresses_given_by_fewer_than_k_leave_the_server_out() {
    let ms = monitors();
    let p = pins(&ms[..2], 2);
    let s = Server::new(1, None);
    let mut elsewhere = s.clone();
    elsewhere.addresses = vec!["192.0.2.1:2002".to_string()];
    let m = p.merge(
        &[
            accept(&p, &ms[0], 1, &[s]),
            accept(&p, &ms[1], 1, &[elsewhere]),
        ],
        NOW,
    );
    assert_eq!(m.servers, 0);
    assert_eq!(m.left_out.len(), 1);
    assert_eq!(m.left_out[0].listed_by, 1);
}

#[test]
fn expired_lists_and_older_lists_of_a_key_do_not_count() {
    let ms = monitors();
    let p = pins(&ms[..2], 2);
    let s = Server::new(1, None);
    let a = accept(&p, &ms[0], 5, core::slice::from_ref(&s));
    let a_newer = accept(&p, &ms[0], 6, &[]);
    let b = accept(&p, &ms[1], 1, core::slice::from_ref(&s));
    assert_eq!(p.merge(&[a.clone(), b.clone()], NOW).servers, 1);
    // The newer list of monitor-a no longer lists it.
    assert_eq!(p.merge(&[a.clone(), b.clone(), a_newer], NOW).servers, 0);
    let at_expiry = p.merge(&[a, b], NOW + DAY);
    assert_eq!(
        (
            at_expiry.servers,
            at_expiry.monitors,
            at_expiry.expires_unix
        ),
        (0, 0, None)
    );
    assert!(ServerList::parse(&at_expiry.document)
        .unwrap()
        .servers
        .is_empty());
}

#[test]
fn reports_are_kept_only_when_k_lists_agree_and_none_differs() {
    let ms = monitors();
    let p = pins(&ms[..2], 1);
    let a = accept(&p, &ms[0], 1, &[]);
    let mut b = accept(&p, &ms[1], 1, &[]);
    b.document = String::from_utf8(b.document)
        .unwrap()
        .replace("reports.example", "elsewhere.example")
        .into_bytes();
    assert!(ServerList::parse(&p.merge(&[a.clone(), b], NOW).document)
        .unwrap()
        .reports
        .is_none());
    assert!(ServerList::parse(&p.merge(&[a], NOW).document)
        .unwrap()
        .reports
        .is_some());
}
