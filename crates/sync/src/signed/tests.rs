//! The fetch over a real loopback HTTP server, and the keys as given.

use std::time::Duration;

use gnomon_protocol::signed_list::{Pins, Seen};

use super::testing::{server_bytes, Http, Monitor};
use super::*;
use crate::refresh::{Failure, Fetcher};

const NOW: i64 = 1_800_000_000;

fn fetcher() -> Fetcher {
    Fetcher::signed(None, Duration::from_secs(10)).unwrap()
}

#[test]
fn each_url_is_accepted_or_refused_with_its_reason_and_k_of_n_merges() {
    let (a, b, stranger) = (
        Monitor::new(1, "a@obs"),
        Monitor::new(2, "b@obs"),
        Monitor::new(9, "x"),
    );
    let pins = Pins::new(vec![a.key(), b.key()], 2).unwrap();
    let http = Http::start();
    let la = a.list(&[1, 2, 3], 10, NOW - 60, NOW + 3600);
    let lb = b.list(&[2, 3, 4], 20, NOW - 60, NOW + 3600);
    http.serve("/a.json", la.clone(), a.sign(&la));
    http.serve("/b.json", lb.clone(), b.sign(&lb));
    let mut tampered = la.clone();
    let at = tampered.len() - 3;
    tampered[at] ^= 1;
    http.serve("/tampered.json", tampered, a.sign(&la));
    let ls = stranger.list(&[1], 1, NOW - 60, NOW + 3600);
    http.serve("/stranger.json", ls.clone(), stranger.sign(&ls));
    let expired = a.list(&[1], 30, NOW - 7200, NOW - 1);
    http.serve("/expired.json", expired.clone(), a.sign(&expired));
    http.set("/nosig.json", Some(la.clone()));

    let urls: Vec<String> = [
        "/a.json",
        "/b.json",
        "/tampered.json",
        "/stranger.json",
        "/expired.json",
        "/nosig.json",
        "/missing.json",
    ]
    .iter()
    .map(|p| http.url(p))
    .collect();
    let f = fetch(&fetcher(), &urls, &pins, &Seen::default(), NOW);
    let labels: Vec<&str> = f
        .lists
        .iter()
        .map(|l| l.outcome.as_ref().map_or_else(NotAccepted::label, |_| "ok"))
        .collect();
    assert_eq!(
        labels,
        [
            "ok",
            "ok",
            "signature",
            "other_key",
            "expired",
            "status",
            "status"
        ],
        "{:?}",
        f.lines(&pins)
    );
    assert_eq!(f.lists[0].outcome.as_ref().unwrap().key, 0);
    assert_eq!(f.lists[1].outcome.as_ref().unwrap().key, 1);
    // The signature's URL is named when it is the one missing.
    match &f.lists[5].outcome {
        Err(NotAccepted::Fetch { url, failure }) => {
            assert!(url.ends_with("/nosig.json.sig"), "{url}");
            assert_eq!(*failure, Failure::Status(404));
        }
        other => panic!("{other:?}"),
    }
    // 2 of 2: only what both list.
    assert_eq!(f.merged.monitors, 2);
    assert_eq!(server_bytes(&f.merged.document), [2, 3]);
    assert_eq!(f.merged.servers, 2);

    // Recorded, an older list of a key is refused as replayed.
    let mut seen = Seen::default();
    f.record(&pins, &mut seen);
    let older = a.list(&[1, 2, 3], 9, NOW - 60, NOW + 3600);
    http.serve("/a.json", older.clone(), a.sign(&older));
    let again = fetch(&fetcher(), &urls[..1], &pins, &seen, NOW);
    assert_eq!(
        again.lists[0].outcome.as_ref().unwrap_err().label(),
        "replayed"
    );
    assert_eq!(again.merged.servers, 0);
}

#[test]
fn plain_http_needs_the_signed_fetcher() {
    let https_only = Fetcher::new(None, Duration::from_secs(5)).unwrap();
    let e = https_only.get("http://127.0.0.1:9/l.json").unwrap_err();
    assert!(e.to_string().contains("not an https:// URL"), "{e}");
    let e = fetcher().get("ftp://127.0.0.1:9/l.json").unwrap_err();
    assert!(e.to_string().contains("http:// or https://"), "{e}");
}

#[test]
fn keys_are_lines_or_files_distinct_and_the_threshold_fits() {
    let (a, b) = (Monitor::new(1, "a@obs"), Monitor::new(2, "b@obs"));
    let dir = std::env::temp_dir().join(format!("gnomon-signed-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pub_file = dir.join("b.pub");
    std::fs::write(&pub_file, format!("# monitor b\n{}\n", b.key().openssh())).unwrap();
    let keys = vec![a.key().openssh(), pub_file.display().to_string()];
    let p = pins(&keys, 2).unwrap().unwrap();
    assert_eq!(p.keys(), [a.key(), b.key()]);
    assert_eq!(pins(&[], 1).unwrap(), None);

    let e = pins(&[], 2).unwrap_err();
    assert!(e.contains("servers-threshold 2 needs"), "{e}");
    let e = pins(&keys, 3).unwrap_err();
    assert!(e.contains("servers-threshold 3 is not in 1..=2"), "{e}");
    let e = pins(&[a.key().openssh(), a.key().openssh()], 1).unwrap_err();
    assert!(
        e.contains("given twice") && e.contains(&a.key().fingerprint()),
        "{e}"
    );
    let e = pins(&["ssh-ed25519 AAAAnotakey x".to_string()], 1).unwrap_err();
    assert!(
        e.starts_with("servers-key \"ssh-ed25519 AAAAnotakey x\": "),
        "{e}"
    );
    let e = pins(&["ssh-rsa AAAAB3NzaC1yc2E x".to_string()], 1).unwrap_err();
    assert!(e.contains("ssh-ed25519 keys only"), "{e}");
    let missing = dir.join("missing.pub").display().to_string();
    let e = pins(std::slice::from_ref(&missing), 1).unwrap_err();
    assert!(
        e.contains(&missing) && e.contains("the path of its .pub file"),
        "{e}"
    );
    std::fs::write(dir.join("bad.pub"), "hello\n").unwrap();
    let e = pins(&[dir.join("bad.pub").display().to_string()], 1).unwrap_err();
    assert!(e.contains("bad.pub"), "{e}");
    assert_eq!(
        key_name(&a.key()),
        format!("{} (a@obs)", a.key().fingerprint())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_status_read_later_says_which_lists_expired_since() {
    use crate::counts::SignedLists;
    let (a, b) = (Monitor::new(1, "a@obs"), Monitor::new(2, "b@obs"));
    let pins = Pins::new(vec![a.key(), b.key()], 2).unwrap();
    let mut m = Monitors::new(pins.clone());
    let http = Http::start();
    let la = a.list(&[1, 2], 1, NOW - 60, NOW + 100);
    let lb = b.list(&[1, 2], 1, NOW - 60, NOW + 1000);
    http.serve("/a", la.clone(), a.sign(&la));
    http.serve("/b", lb.clone(), b.sign(&lb));
    let f = fetch(
        &fetcher(),
        &[http.url("/a"), http.url("/b")],
        &pins,
        m.seen(),
        NOW,
    );
    m.apply(&f, NOW);
    let s = store::Status::of(&m, NOW, "the local clock", &SignedLists::default());
    assert_eq!(
        (s.in_force, s.servers, s.no_servers.is_none()),
        (2, 2, true)
    );
    assert_eq!(s.monitors[0].standing, "current");
    // Read back after a's list expired: 1 of 2 in force, no servers.
    let later = s.clone().at(NOW + 100);
    assert_eq!(later.monitors[0].standing, "expired");
    assert_eq!(later.monitors[1].standing, "current");
    assert_eq!((later.in_force, later.servers), (1, 0));
    let why = later.no_servers.unwrap();
    assert!(
        why.contains(&a.key().fingerprint()) && why.contains("fewer than servers-threshold 2"),
        "{why}"
    );
    assert_eq!(s.at(NOW + 99).servers, 2);
}
