use super::*;
use std::os::unix::fs::{symlink, PermissionsExt};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-sync-state-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn saves_loads_and_survives_corruption() {
    let d = dir("roundtrip");
    let store = Store::open(&d).unwrap();
    assert!(matches!(store.load(), Loaded::Missing));
    let s = State {
        floor_us: Some(1_800_000_000_000_000),
        ..State::default()
    };
    store.save(&s).unwrap();
    match store.load() {
        Loaded::Ok(l) => assert_eq!(l.floor_us, s.floor_us),
        other => panic!("{other:?}"),
    }
    fs::write(store.path(STATE_FILE), b"{\"floor_us\": tru").unwrap();
    match store.load() {
        Loaded::Warning(w) => assert!(w.contains("corrupt"), "{w}"),
        other => panic!("{other:?}"),
    }
    assert!(store.path("sync-state.json.corrupt").exists());
    // No temporary file is left behind.
    let names = names(&d);
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
    let _ = fs::remove_dir_all(&d);
}

/// Symbolic links planted where the state, the chain and the old
/// predictable temporary name (`.NAME.tmp-PID`) go: nothing is read
/// through them, nothing is written through them, and the files
/// written replace the links.
#[test]
fn planted_symlinks_are_never_followed() {
    let d = dir("symlinks");
    let store = Store::open(&d).unwrap();
    let outside = dir("symlinks-outside");
    fs::create_dir_all(&outside).unwrap();
    // A state someone wants believed, and files someone wants hit.
    let forged = outside.join("forged-state.json");
    let forged_text = b"{\"format\":1,\"floor_us\":4102444800000000}".to_vec();
    fs::write(&forged, &forged_text).unwrap();
    let chain_target = outside.join("shadow");
    fs::write(&chain_target, b"root:x:0\n").unwrap();
    let tmp_target = outside.join("passwd");
    fs::write(&tmp_target, b"root:x:0:0\n").unwrap();
    symlink(&forged, store.path(STATE_FILE)).unwrap();
    symlink(&chain_target, store.path(CHAIN_FILE)).unwrap();
    let old_tmp = format!(".{STATE_FILE}.tmp-{}", std::process::id());
    symlink(&tmp_target, store.path(&old_tmp)).unwrap();

    match store.load() {
        Loaded::Warning(w) => assert!(w.contains("symbolic link; not followed"), "{w}"),
        other => panic!("the link was followed: {other:?}"),
    }
    match store.peek() {
        Loaded::Warning(w) => assert!(w.contains("symbolic link"), "{w}"),
        other => panic!("the link was followed: {other:?}"),
    }
    let err = store.read(CHAIN_FILE).unwrap_err();
    assert!(err.to_string().contains("not followed"), "{err}");

    let s = State {
        floor_us: Some(1_800_000_000_000_000),
        ..State::default()
    };
    store.save(&s).unwrap();
    store.write(CHAIN_FILE, b"{\"responses\":[]}").unwrap();
    assert_eq!(fs::read(&forged).unwrap(), forged_text);
    assert_eq!(fs::read(&chain_target).unwrap(), b"root:x:0\n");
    assert_eq!(fs::read(&tmp_target).unwrap(), b"root:x:0:0\n");
    for f in [STATE_FILE, CHAIN_FILE] {
        let m = fs::symlink_metadata(store.path(f)).unwrap();
        assert!(m.file_type().is_file(), "{f} is still a link");
        assert_eq!(m.mode() & 0o777, FILE_MODE, "{f}");
    }
    match store.load() {
        Loaded::Ok(l) => assert_eq!(l.floor_us, s.floor_us),
        other => panic!("{other:?}"),
    }
    // The planted link is left as it was; no temporary file remains.
    assert!(fs::symlink_metadata(store.path(&old_tmp))
        .unwrap()
        .file_type()
        .is_symlink());
    let left: Vec<String> = names(&d)
        .into_iter()
        .filter(|n| n.contains(".tmp-") && *n != old_tmp)
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = fs::remove_dir_all(&d);
    let _ = fs::remove_dir_all(&outside);
}

/// Whatever is planted under the temporary name picked (a link, a
/// file) is passed over, untouched, for the next name.
#[test]
fn a_taken_temporary_name_is_passed_over() {
    let d = dir("taken");
    fs::create_dir_all(&d).unwrap();
    let target = d.join("target");
    fs::write(&target, b"keep").unwrap();
    symlink(&target, d.join(".f.tmp-one")).unwrap();
    symlink(d.join("dangling"), d.join(".f.tmp-two")).unwrap();
    fs::write(d.join(".f.tmp-three"), b"planted").unwrap();
    let mut next = ["one", "two", "three", "four"].into_iter();
    let mut suffix = || Ok(next.next().unwrap_or("five").to_string());
    write_atomic_named(&d.join("f"), b"new", &mut suffix).unwrap();
    assert_eq!(fs::read(d.join("f")).unwrap(), b"new");
    assert_eq!(fs::read(&target).unwrap(), b"keep");
    assert!(!d.join("dangling").exists());
    assert_eq!(fs::read(d.join(".f.tmp-three")).unwrap(), b"planted");
    assert!(!d.join(".f.tmp-four").exists());
    // Every name taken: an error saying so, nothing written.
    let mut same = || Ok("one".to_string());
    let e = write_atomic_named(&d.join("f"), b"x", &mut same).unwrap_err();
    assert!(e.to_string().contains("were all taken"), "{e}");
    assert_eq!(fs::read(d.join("f")).unwrap(), b"new");
    assert_eq!(fs::read(&target).unwrap(), b"keep");
    let _ = fs::remove_dir_all(&d);
}

/// The reports directory planted as a link (or a file) is refused,
/// not followed; names that climb out are refused.
#[test]
fn a_planted_reports_dir_is_not_followed() {
    let d = dir("reports");
    let store = Store::open(&d).unwrap();
    let elsewhere = dir("reports-elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, store.path(REPORTS_DIR)).unwrap();
    let e = store
        .write(&format!("{REPORTS_DIR}/report-1.json"), b"{}")
        .unwrap_err();
    assert!(e.to_string().contains("symbolic link; not followed"), "{e}");
    assert!(names(&elsewhere).is_empty(), "{:?}", names(&elsewhere));
    fs::remove_file(store.path(REPORTS_DIR)).unwrap();
    fs::write(store.path(REPORTS_DIR), b"").unwrap();
    let e = store
        .write(&format!("{REPORTS_DIR}/report-1.json"), b"{}")
        .unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    fs::remove_file(store.path(REPORTS_DIR)).unwrap();
    let p = store
        .write(&format!("{REPORTS_DIR}/report-1.json"), b"{}")
        .unwrap();
    assert_eq!(fs::read(p).unwrap(), b"{}");
    let m = fs::symlink_metadata(store.path(REPORTS_DIR)).unwrap();
    assert!(m.is_dir());
    assert_eq!(m.mode() & 0o022, 0);
    for bad in ["../x.json", "/tmp/x.json", "a/../../x", ""] {
        assert!(store.write(bad, b"{}").is_err(), "{bad}");
    }
    let _ = fs::remove_dir_all(&d);
    let _ = fs::remove_dir_all(&elsewhere);
}

/// A FIFO planted as the state does not hang the start.
#[test]
fn a_planted_fifo_is_not_waited_on() {
    let d = dir("fifo");
    let store = Store::open(&d).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(store.path(STATE_FILE))
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("no mkfifo: skipped");
        return;
    }
    match store.load() {
        Loaded::Warning(w) => assert!(w.contains("not a regular file"), "{w}"),
        other => panic!("{other:?}"),
    }
    let _ = fs::remove_dir_all(&d);
}

/// Trust: owned by us (or root), writable by nobody else; the same
/// for the files read with `read_trusted`.
#[test]
fn only_a_private_directory_is_trusted() {
    let d = dir("trust");
    let store = Store::open(&d).unwrap();
    let mode = |m: u32| fs::set_permissions(&d, fs::Permissions::from_mode(m)).unwrap();
    mode(0o700);
    store.trust().unwrap();
    mode(0o750);
    store.trust().unwrap();
    mode(0o770);
    let e = store.trust().unwrap_err();
    assert!(e.contains("writable by its group (mode 0770)"), "{e}");
    mode(0o1777);
    let e = store.trust().unwrap_err();
    assert!(e.contains("writable by everyone (mode 1777)"), "{e}");
    mode(0o700);

    // Through a symbolic link the operator made: the target counts.
    let link = dir("trust-link");
    symlink(&d, &link).unwrap();
    Store::at(&link).trust().unwrap();

    store.write("f", b"x").unwrap();
    assert_eq!(store.read_trusted("f").unwrap(), b"x");
    fs::set_permissions(store.path("f"), fs::Permissions::from_mode(0o666)).unwrap();
    let e = store.read_trusted("f").unwrap_err();
    assert!(e.to_string().contains("writable by everyone"), "{e}");
    assert_eq!(store.read("f").unwrap(), b"x");

    // Owned by somebody else (only root can make that).
    if me() == 0 {
        std::os::unix::fs::chown(&d, Some(65534), None).unwrap();
        let e = store.trust().unwrap_err();
        assert!(e.contains("owned by uid 65534"), "{e}");
        std::os::unix::fs::chown(&d, Some(0), None).unwrap();
        std::os::unix::fs::chown(store.path("f"), Some(65534), None).unwrap();
        fs::set_permissions(store.path("f"), fs::Permissions::from_mode(0o600)).unwrap();
        let e = store.read_trusted("f").unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
    }
    let missing = Store::at(&d.join("missing"));
    assert!(missing.trust().is_err());
    let _ = fs::remove_file(&link);
    let _ = fs::remove_dir_all(&d);
}
