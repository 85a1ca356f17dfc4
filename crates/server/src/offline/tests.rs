use std::os::unix::fs::PermissionsExt;

use gnomon_protocol::verify::check_certificate;
use gnomon_protocol::{KeyPair, Profile, Scheme};

use super::*;

const HOUR: u64 = 3_600_000_000;
/// 2026-01-01T00:00:00Z.
const T0: u64 = 1_767_225_600_000_000;

fn long_term() -> KeyPair {
    KeyPair::from_seed(&[0x11; 32])
}

/// Three windows of 48 h, one starting every 24 h, written into a new dir.
fn three_windows() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let windows = plan_windows(
        T0,
        Duration::from_secs(48 * 3600),
        Duration::from_secs(24 * 3600),
        3,
    )
    .unwrap();
    let paths = windows
        .iter()
        .enumerate()
        .map(|(i, &(mint, maxt))| {
            let d = Delegation::mint(&long_term(), &[i as u8 + 1; 32], mint, maxt);
            d.write_into(dir.path()).unwrap()
        })
        .collect();
    (dir, paths)
}

#[test]
fn file_round_trips_every_profile_and_holds_no_long_term_seed() {
    let lt = long_term();
    let d = Delegation::mint(&lt, &[0x22; 32], T0, T0 + 24 * HOUR);
    let text = d.encode().to_string();
    assert!(
        !text.contains(&B64.encode(lt.seed())),
        "long-term seed leaked"
    );
    assert!(
        text.contains("2026-01-01T00:00:00Z to 2026-01-02T00:00:00Z"),
        "{text}"
    );
    let cert_lines = text.lines().filter(|l| l.starts_with("cert ")).count();
    assert_eq!(cert_lines, d.certs.distinct());
    let back = Delegation::decode(&text, Path::new("x.delegation")).unwrap();
    assert_eq!(*back.online.seed(), [0x22; 32]);
    assert_eq!(back.long_term_public.bytes(), lt.public());
    assert_eq!((back.mint_us, back.maxt_us), (d.mint_us, d.maxt_us));
    assert_eq!(back.certs.distinct(), d.certs.distinct());
    for p in PROFILES.iter().filter(|p| p.scheme == Scheme::Ed25519) {
        let cert = back.certs.for_profile(p).unwrap();
        assert_eq!(Some(cert), d.certs.for_profile(p), "{}", p.name);
        assert!(check_certificate(cert.bytes(), p, &lt.public()).is_ok());
        assert_eq!(cert.online_public, back.online.public());
    }
}

#[test]
fn window_is_narrowed_to_what_every_encoding_covers() {
    // Seconds-encoded versions cannot start at .5 s: the window starts later.
    let d = Delegation::mint(&long_term(), &[1; 32], T0 + 500_000, T0 + HOUR + 500_000);
    assert_eq!(d.mint_us, T0 + 1_000_000);
    assert_eq!(d.maxt_us, T0 + HOUR);
    assert!(!d.covers(T0 + 500_000));
    assert!(d.covers(T0 + 1_000_000) && d.covers(T0 + HOUR));
    assert!(!d.covers(T0 + HOUR + 1));
}

#[test]
fn loader_picks_the_window_valid_now() {
    let (dir, paths) = three_windows();
    let store = OfflineStore::load(dir.path(), Some(&long_term().public()[..])).unwrap();
    assert_eq!(store.delegations().len(), 3);
    assert_eq!(store.long_term_public.bytes(), long_term().public());
    let seed_at = |now| store.current(now).map(|d| d.online.seed()[0]);
    assert_eq!(seed_at(T0 - 1), None, "before the first MINT");
    assert_eq!(seed_at(T0), Some(1));
    assert_eq!(seed_at(T0 + 23 * HOUR), Some(1));
    // Two windows cover 24 h..48 h: the one lasting longer is used.
    assert_eq!(seed_at(T0 + 24 * HOUR), Some(2));
    assert_eq!(seed_at(T0 + 50 * HOUR), Some(3));
    assert_eq!(seed_at(T0 + 96 * HOUR), Some(3), "MAXT itself is inside");
    assert_eq!(seed_at(T0 + 96 * HOUR + 1), None, "after the last MAXT");
    assert_eq!(store.last_expiry_us(), T0 + 96 * HOUR);
    assert_eq!(store.next_start_us(T0), Some(T0 + 24 * HOUR));
    assert_eq!(store.next_start_us(T0 + 48 * HOUR), None);
    let current = store.current(T0 + 30 * HOUR).unwrap();
    assert_eq!(current.source.as_deref(), Some(paths[1].as_path()));
    assert!(
        paths[0].ends_with("20260101T000000Z.delegation"),
        "{paths:?}"
    );
}

#[test]
fn files_are_private_and_loose_ones_are_refused() {
    let (dir, paths) = three_windows();
    let mode = std::fs::metadata(&paths[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::set_permissions(&paths[1], std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = OfflineStore::load(dir.path(), None).unwrap_err();
    assert!(
        matches!(e, OfflineError::File(KeyFileError::Permissions { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("chmod 600"), "{e}");
}

#[test]
fn a_certificate_signed_by_another_key_is_rejected() {
    let lt = long_term();
    let d = Delegation::mint(&lt, &[5; 32], T0, T0 + 24 * HOUR);
    // The same online key delegated by an impostor, in the RFC encoding.
    let forged = Delegation::mint(
        &KeyPair::from_seed(&[0x66; 32]),
        &[5; 32],
        T0,
        T0 + 24 * HOUR,
    );
    let rfc = Profile::rfc();
    let good_line = B64.encode(d.certs.for_profile(rfc).unwrap().bytes());
    let bad_line = B64.encode(forged.certs.for_profile(rfc).unwrap().bytes());
    let text = d.encode().replace(&good_line, &bad_line);
    assert_ne!(text, *d.encode());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forged.delegation");
    write_private(&path, text.as_bytes()).unwrap();
    let e = OfflineStore::load(dir.path(), None).unwrap_err();
    match &e {
        OfflineError::BadSignature { profile, .. } => assert_eq!(*profile, rfc.name),
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("forged.delegation"), "{e}");
}

#[test]
fn a_directory_signed_by_another_long_term_key_is_rejected() {
    let (dir, _) = three_windows();
    // Consistent in itself, but not the configured identity.
    let other = KeyPair::from_seed(&[0x77; 32]);
    let e = OfflineStore::load(dir.path(), Some(&other.public()[..])).unwrap_err();
    assert!(matches!(e, OfflineError::WrongLongTermKey { .. }), "{e}");
    // Nor may one directory mix two long-term keys.
    Delegation::mint(&other, &[9; 32], T0 + 200 * HOUR, T0 + 201 * HOUR)
        .write_into(dir.path())
        .unwrap();
    let e = OfflineStore::load(dir.path(), None).unwrap_err();
    assert!(matches!(e, OfflineError::WrongLongTermKey { .. }), "{e}");
}

#[test]
fn inconsistent_files_are_rejected_with_a_reason() {
    let lt = long_term();
    let d = Delegation::mint(&lt, &[5; 32], T0, T0 + 24 * HOUR);
    let text = d.encode().to_string();
    let p = Path::new("f.delegation");
    let reason = |t: &str| Delegation::decode(t, p).unwrap_err().to_string();

    // A window claiming more than the certificates were signed for.
    let wider = text.replace(&format!("mint-us: {T0}"), &format!("mint-us: {}", T0 + 1));
    assert!(reason(&wider).contains("outside"), "{}", reason(&wider));
    // An online seed that the certificates do not delegate to.
    let other_seed = text.replace(&B64.encode([5u8; 32]), &B64.encode([6u8; 32]));
    assert!(reason(&other_seed).contains("another online key"));
    // A profile left out.
    let google_line = text.lines().find(|l| l.starts_with("cert google")).unwrap();
    let without = text.replace(&format!("{google_line}\n"), "");
    assert!(reason(&without).contains("no certificate for profile google"));
    // A profile twice.
    let twice = format!("{text}{google_line}\n");
    assert!(reason(&twice).contains("second certificate for google"));
    // A profile this version does not know.
    let unknown = text.replacen("cert google:", "cert google draft-99:", 1);
    assert!(reason(&unknown).contains("unknown profile \"draft-99\""));
    // Not a delegation file at all.
    assert!(reason(&crate::keyfile::encode(&[1; 32])).contains("first line"));
    assert!(reason(&text.replace("online-seed", "online-key")).contains("unknown field"));
}

#[test]
fn empty_or_unrelated_directories_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README"), "not a delegation").unwrap();
    std::fs::write(dir.path().join(".x.delegation"), "hidden temp file").unwrap();
    let e = OfflineStore::load(dir.path(), None).unwrap_err();
    assert!(matches!(e, OfflineError::Empty { .. }), "{e}");
    assert!(e.to_string().contains("gnomon delegate"), "{e}");
    let e = OfflineStore::load(&dir.path().join("missing"), None).unwrap_err();
    assert!(matches!(e, OfflineError::ReadDir { .. }), "{e}");
}

#[test]
fn writing_never_overwrites_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let d = Delegation::mint(&long_term(), &[1; 32], T0, T0 + HOUR);
    d.write_into(dir.path()).unwrap();
    let again = Delegation::mint(&long_term(), &[2; 32], T0, T0 + HOUR);
    let e = again.write_into(dir.path()).unwrap_err();
    assert!(
        matches!(e, OfflineError::File(KeyFileError::Exists { .. })),
        "{e}"
    );
    let store = OfflineStore::load(dir.path(), None).unwrap();
    assert_eq!(*store.delegations()[0].online.seed(), [1; 32]);
}

#[test]
fn windows_are_planned_without_gaps() {
    let day = Duration::from_secs(86_400);
    let w = plan_windows(T0, 2 * day, day, 4).unwrap();
    assert_eq!(w.len(), 4);
    for (i, &(mint, maxt)) in w.iter().enumerate() {
        assert_eq!(mint, T0 + i as u64 * 24 * HOUR);
        assert_eq!(maxt, mint + 48 * HOUR);
    }
    assert_eq!(plan_windows(T0, day, day, 2).unwrap()[1].0, T0 + 24 * HOUR);
    assert!(plan_windows(T0, day, 2 * day, 2)
        .unwrap_err()
        .contains("gaps"));
    assert!(plan_windows(T0, day, day, 0).is_err());
    assert!(plan_windows(T0, Duration::ZERO, Duration::ZERO, 1).is_err());
    assert!(plan_windows(u64::MAX - 10, day, day, 1).is_err());
}

#[test]
fn a_host_set_names_its_host_and_refuses_another_hosts_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = Delegation::mint(&long_term(), &[1; 32], T0, T0 + 48 * HOUR).for_host("ams-1");
    let path = a.write_into(dir.path()).unwrap();
    assert_eq!(
        path.file_name().unwrap(),
        "ams-1-20260101T000000Z.delegation"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\nhost: ams-1\n"), "{text}");
    // A file made before per-host sets may sit beside a host's own.
    Delegation::mint(&long_term(), &[2; 32], T0 + 24 * HOUR, T0 + 72 * HOUR)
        .write_into(dir.path())
        .unwrap();
    let store = OfflineStore::load(dir.path(), None).unwrap();
    assert_eq!(store.host(), Some("ams-1"));
    assert_eq!(store.delegations()[0].host.as_deref(), Some("ams-1"));
    // Another host's file is a copying mistake: refused, naming both.
    Delegation::mint(&long_term(), &[3; 32], T0 + 48 * HOUR, T0 + 96 * HOUR)
        .for_host("fra-2")
        .write_into(dir.path())
        .unwrap();
    let e = OfflineStore::load(dir.path(), None).unwrap_err();
    assert!(matches!(e, OfflineError::MixedHosts { .. }), "{e}");
    assert!(
        e.to_string().contains("fra-2") && e.to_string().contains("ams-1"),
        "{e}"
    );
}

#[test]
fn a_hostile_host_field_is_refused() {
    let d = Delegation::mint(&long_term(), &[5; 32], T0, T0 + HOUR).for_host("a");
    let text = d.encode().to_string();
    let p = Path::new("f.delegation");
    for bad in ["../etc", "a\"} 1", "", "-x"] {
        let t = text.replace("\nhost: a\n", &format!("\nhost: {bad}\n"));
        let e = Delegation::decode(&t, p).unwrap_err().to_string();
        assert!(e.contains("`host`"), "{bad:?}: {e}");
    }
    let twice = text.replace("\nhost: a\n", "\nhost: a\nhost: b\n");
    let e = Delegation::decode(&twice, p).unwrap_err().to_string();
    assert!(e.contains("twice"), "{e}");
}

#[test]
fn a_rescan_takes_new_and_changed_files_and_skips_bad_ones_once() {
    let (dir, paths) = three_windows();
    // Start from the first window only.
    for p in &paths[1..] {
        std::fs::remove_file(p).unwrap();
    }
    let mut store = OfflineStore::load(dir.path(), None).unwrap();
    assert_eq!(store.delegations().len(), 1);
    let nothing = store.rescan();
    assert!(nothing.taken.is_empty() && nothing.rejected.is_empty());
    // A new window is taken; a torn file and another key's file are
    // refused, each once, and retried only when they change.
    let later = Delegation::mint(&long_term(), &[9; 32], T0 + 24 * HOUR, T0 + 96 * HOUR);
    let later_path = later.write_into(dir.path()).unwrap();
    let torn = dir.path().join("torn.delegation");
    write_private(&torn, &later.encode().as_bytes()[..100]).unwrap();
    let stranger = Delegation::mint(&KeyPair::from_seed(&[0x77; 32]), &[3; 32], T0, T0 + HOUR);
    write_private(
        &dir.path().join("z.delegation"),
        stranger.encode().as_bytes(),
    )
    .unwrap();
    let scan = store.rescan();
    assert_eq!(scan.taken, std::slice::from_ref(&later_path));
    assert_eq!(scan.rejected.len(), 2, "{:?}", scan.rejected);
    assert!(scan
        .rejected
        .iter()
        .any(|e| matches!(e, OfflineError::WrongLongTermKey { .. })));
    assert_eq!(store.delegations().len(), 2);
    assert_eq!(
        store.current(T0 + 30 * HOUR).unwrap().maxt_us,
        T0 + 96 * HOUR
    );
    let again = store.rescan();
    assert!(
        again.taken.is_empty() && again.rejected.is_empty(),
        "{again:?}"
    );
    // The torn file completed: taken. Replaced under the same name, the
    // first window's file takes the new content's place.
    std::fs::remove_file(&torn).unwrap();
    let whole = Delegation::mint(&long_term(), &[4; 32], T0, T0 + 72 * HOUR);
    write_private(&torn, whole.encode().as_bytes()).unwrap();
    assert_eq!(store.rescan().taken, std::slice::from_ref(&torn));
    assert_eq!(store.delegations().len(), 3);
    std::fs::remove_file(&torn).unwrap();
    let shorter = Delegation::mint(&long_term(), &[5; 32], T0, T0 + 60 * HOUR);
    write_private(&torn, shorter.encode().as_bytes()).unwrap();
    assert_eq!(store.rescan().taken, std::slice::from_ref(&torn));
    assert_eq!(store.delegations().len(), 3, "replaced, not added");
    // A file that disappears keeps its delegation until a full load.
    std::fs::remove_file(&later_path).unwrap();
    assert!(store.rescan().taken.is_empty());
    assert_eq!(store.delegations().len(), 3);
    // An unreadable directory is reported, and nothing is lost.
    let gone = dir.path().to_owned();
    drop(dir);
    let scan = store.rescan();
    assert!(scan.unreadable.is_some(), "{gone:?}");
    assert_eq!(store.delegations().len(), 3);
}

#[test]
fn a_rescan_refuses_another_hosts_file() {
    let dir = tempfile::tempdir().unwrap();
    Delegation::mint(&long_term(), &[1; 32], T0, T0 + 48 * HOUR)
        .for_host("ams-1")
        .write_into(dir.path())
        .unwrap();
    let mut store = OfflineStore::load(dir.path(), None).unwrap();
    // fra-2's next window, copied to the wrong host: refused, not served.
    Delegation::mint(&long_term(), &[2; 32], T0 + 24 * HOUR, T0 + 72 * HOUR)
        .for_host("fra-2")
        .write_into(dir.path())
        .unwrap();
    let own = Delegation::mint(&long_term(), &[3; 32], T0 + 24 * HOUR, T0 + 72 * HOUR)
        .for_host("ams-1")
        .write_into(dir.path())
        .unwrap();
    let scan = store.rescan();
    assert_eq!(scan.taken, std::slice::from_ref(&own));
    assert!(
        matches!(scan.rejected[..], [OfflineError::MixedHosts { .. }]),
        "{:?}",
        scan.rejected
    );
    assert_eq!(store.delegations().len(), 2);
    assert!(store
        .delegations()
        .iter()
        .all(|d| d.host.as_deref() == Some("ams-1")));
}

/// A delegation file for an ML-DSA-44 root: the online key is ML-DSA-44,
/// the file carries the ml-dsa-44 certificate only, checked against the
/// root; it loads into a store, and one with a forged certificate or an
/// Ed25519 profile's certificate is refused.
#[test]
fn ml_dsa_root_delegations_round_trip_and_are_checked() {
    use gnomon_protocol::MlDsa44KeyPair;
    let root = MlDsa44KeyPair::from_seed(&[0x31; 32]);
    let d = Delegation::mint(&root, &[0x32; 32], T0, T0 + 24 * HOUR);
    assert_eq!(d.online.scheme(), Scheme::MlDsa44);
    assert_eq!(d.long_term_public.bytes(), root.public());
    let p = PROFILES
        .iter()
        .find(|p| p.scheme == Scheme::MlDsa44)
        .unwrap();
    assert_eq!(d.certs.distinct(), 1);
    assert!(d.certs.for_profile(Profile::rfc()).is_none());
    let text = d.encode();
    assert!(text.contains("cert ml-dsa-44: "), "{}", *text);
    let back = Delegation::decode(&text, Path::new("x.delegation")).unwrap();
    assert_eq!(back.online.public(), d.online.public());
    assert_eq!(*back.online.seed(), [0x32; 32]);
    let cert = back.certs.for_profile(p).unwrap();
    assert_eq!(cert.bytes().len(), Scheme::MlDsa44.cert_len());
    assert!(check_certificate(cert.bytes(), p, root.public()).is_ok());
    let dir = tempfile::tempdir().unwrap();
    d.write_into(dir.path()).unwrap();
    let store = OfflineStore::load(dir.path(), Some(&root.public()[..])).unwrap();
    assert_eq!(store.long_term_public.bytes(), root.public());
    assert!(store.current(T0 + HOUR).is_some());

    // A certificate signed by another ML-DSA root, under this root's name.
    let other = Delegation::mint(
        &MlDsa44KeyPair::from_seed(&[0x33; 32]),
        &[0x32; 32],
        T0,
        T0 + 24 * HOUR,
    );
    let theirs = other.encode();
    let cert_line = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("cert "))
            .unwrap()
            .to_owned()
    };
    let forged = text.replace(&cert_line(&text), &cert_line(&theirs));
    let e = Delegation::decode(&forged, Path::new("x")).unwrap_err();
    assert!(matches!(e, OfflineError::BadSignature { .. }), "{e}");
    // An Ed25519 profile's certificate in an ML-DSA file.
    let ed = Delegation::mint(&long_term(), &[1; 32], T0, T0 + HOUR).encode();
    let mixed = format!("{}{}\n", *text, cert_line(&ed));
    let msg = Delegation::decode(&mixed, Path::new("x"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("not signed with a ML-DSA-44 key"), "{msg}");
    // Without its certificate the file is incomplete.
    let bare = text.replace(&format!("{}\n", cert_line(&text)), "");
    let msg = Delegation::decode(&bare, Path::new("x"))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("no certificate for profile ml-dsa-44"),
        "{msg}"
    );
}
