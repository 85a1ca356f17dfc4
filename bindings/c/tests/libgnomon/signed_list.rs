//! docs/C.md, "Signed server lists": tests/c/signed_list.c checks lists
//! an observatory published and OpenSSH's `ssh-keygen -Y sign` signed, and
//! gets each refusal's code and words, under ASan and UBSan and in the
//! no_std build, whose allocator refuses every request.

use crate::c_support;

use c_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory of the files the C program reads, removed on drop.
struct Published(PathBuf);

impl Drop for Published {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn keygen(args: &[&str]) {
    let out = run(Command::new("ssh-keygen").args(args));
    assert!(
        out.status.success(),
        "ssh-keygen {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn list(sequence: u64, header: bool) -> String {
    let observatory = if header {
        format!(
            r#"{{"monitor":"monitor \"a\"","sequence":{sequence},"published":"2026-12-02T13:59:00Z","expires":"2026-12-03T14:00:00Z"}}"#
        )
    } else {
        String::from(r#"{"monitor":"m","sequence":"57"}"#)
    };
    format!(
        r#"{{"servers":[{{"name":"s","version":1,"publicKeyType":"ed25519","publicKey":"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=","addresses":[{{"protocol":"udp","address":"192.0.2.1:2002"}}]}}],"observatory":{observatory}}}"#
    )
}

/// Sign `file` in `dir` with `key` in `namespace`; the signature's path.
fn sign(dir: &Path, key: &str, namespace: &str, file: &str) -> PathBuf {
    let f = dir.join(file);
    keygen(&[
        "-Y",
        "sign",
        "-n",
        namespace,
        "-f",
        dir.join(key).to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    dir.join(format!("{file}.sig"))
}

fn publish(name: &str) -> Published {
    let dir = target_dir()
        .join("c-tests")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = |f: &str| dir.join(f).to_str().unwrap().to_owned();
    for (file, comment) in [("monitor", "monitor-a"), ("another", "another")] {
        keygen(&[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            comment,
            "-f",
            &d(file),
        ]);
    }
    std::fs::write(dir.join("list.json"), list(57, true)).unwrap();
    std::fs::write(dir.join("newer.json"), list(58, true)).unwrap();
    std::fs::write(dir.join("malformed.json"), list(57, false)).unwrap();
    for (key, namespace, file, to) in [
        ("another", "roughtime-server-list", "list.json", "other.sig"),
        ("monitor", "git", "list.json", "git.sig"),
        ("monitor", "roughtime-server-list", "list.json", ""),
        ("monitor", "roughtime-server-list", "newer.json", ""),
        ("monitor", "roughtime-server-list", "malformed.json", ""),
    ] {
        let sig = sign(&dir, key, namespace, file);
        if !to.is_empty() {
            std::fs::rename(sig, dir.join(to)).unwrap();
        }
    }
    Published(dir)
}

fn signed_list_test(name: &str, link: Link, lib_dir: impl FnOnce() -> &'static Path) {
    let Some(cc) = cc() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    if Command::new("ssh-keygen").arg("-?").output().is_err() {
        return gnomon_testkit::skip(
            name,
            "ssh-keygen is not installed (Debian: apt install openssh-client); it signs the lists",
        );
    }
    let published = publish(name);
    run_c_check(
        cc,
        name,
        "signed_list.c",
        link,
        lib_dir(),
        std::slice::from_ref(&published.0),
    );
}

#[test]
fn signed_lists_checked_from_c_under_asan_and_ubsan() {
    signed_list_test("signed_list_sanitized", Link::Sanitized, c_lib_dir);
}

/// Linked against the no_std build with unused sections dropped: it links
/// only when nothing the check reaches allocates, and runs to the end only
/// when nothing allocates at run time.
#[test]
fn signed_lists_checked_from_c_in_the_no_std_build_with_no_heap() {
    signed_list_test("signed_list_no_std", Link::NoStd, no_std_dir);
}
