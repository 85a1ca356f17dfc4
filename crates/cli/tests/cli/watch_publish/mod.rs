//! `gnomon watch --publish-key`: the list it publishes at /servers.json is
//! signed so that `ssh-keygen -Y verify` accepts it, parses as an RFC
//! list, leaves out the liar and the silent server with their reasons,
//! and its sequence grows across publications and across a restart with
//! a database; /metrics says the sequence, expiry and count; a database
//! that fails under the publisher stops publication, not the rounds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::ssh_support::{have_ssh_keygen, ssh_keygen_verify, SshKey};
use crate::sync_support::have_faketime;
use crate::watch_support::{self, Watch, HONEST, LIAR, SILENT};

mod monitors;

const PATIENCE: Duration = Duration::from_secs(90);

/// A fresh ed25519 key pair from ssh-keygen, or None (said) without it.
fn ssh_key(dir: &Path, test: &str) -> Option<(PathBuf, String)> {
    ssh_key_named(dir, "monitor", test)
}

/// [`ssh_key`] in the file `name` of `dir`.
fn ssh_key_named(dir: &Path, name: &str, test: &str) -> Option<(PathBuf, String)> {
    if !have_ssh_keygen(test) {
        return None;
    }
    let key = SshKey::make_commented(dir, name, "observatory.test");
    let line = key.line();
    Some((key.file, line))
}

/// The published document and signature once `ready` holds for the
/// document (polled, at most PATIENCE).
fn published_where(
    watch: &Watch,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> (String, String, serde_json::Value) {
    let until = Instant::now() + PATIENCE;
    loop {
        let (status, body) = watch.get("/servers.json");
        if status == 200 {
            let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
            if ready(&doc) {
                let (s, sig) = watch.get("/servers.json.sig");
                assert_eq!(s, 200, "{sig}");
                // The pair must be one publication: taken again if a round
                // published between the two GETs.
                if watch.get("/servers.json").1 == body {
                    return (body, sig, doc);
                }
            }
        }
        assert!(
            Instant::now() < until,
            "no publication as awaited within {PATIENCE:?}; the last: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn excluded(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["observatory"]["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The report URL of the liar's exclusion, once there is one.
fn liar_report(doc: &serde_json::Value) -> Option<String> {
    doc["observatory"]["excluded"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == LIAR)?["report"]
        .as_str()
        .map(str::to_string)
}

fn names(doc: &serde_json::Value) -> Vec<String> {
    doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

fn sequence(doc: &serde_json::Value) -> u64 {
    doc["observatory"]["sequence"].as_u64().unwrap()
}

/// `ssh-keygen -Y verify` over the document with an allowed_signers line.
fn ssh_verifies(dir: &Path, public: &str, document: &str, signature: &str) -> bool {
    let (ok, _) = ssh_keygen_verify(
        dir,
        "monitor",
        "observatory.test",
        public,
        document.as_bytes(),
        signature.as_bytes(),
    );
    ok
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn the_published_list_verifies_with_ssh_keygen_and_leaves_out_the_liar_and_the_silent() {
    let test = "watch_publish::the_published_list_verifies";
    if !have_faketime(test) {
        return;
    }
    let lineup = watch_support::start("watch-publish", true);
    let Some((key, public)) = ssh_key(&lineup.dir, test) else {
        return;
    };
    let db = format!("sqlite:{}", lineup.dir.join("watch.db").display());
    let key_arg = key.to_str().unwrap();
    let args = [
        "--publish-key",
        key_arg,
        "--publish-name",
        "observatory.test",
        "--publish-url",
        "https://observatory.test/servers.json",
        "--database",
        &db,
        "--sink",
    ];
    let mut watch = Watch::start_with(&lineup.list, &args);
    let (body, sig, doc) = published_where(&watch, |d| {
        let out = excluded(d);
        liar_report(d).is_some()
            && out.iter().any(|(n, r)| n == LIAR && r == "lied")
            && out.iter().any(|(n, r)| n == SILENT && r == "silent")
            && HONEST.iter().all(|h| names(d).iter().any(|n| n == h))
    });
    assert!(ssh_verifies(&lineup.dir, &public, &body, &sig), "{sig}");
    // One byte changed, and ssh-keygen refuses it.
    let tampered = body.replacen("observatory.test", "observatorY.test", 1);
    assert!(!ssh_verifies(&lineup.dir, &public, &tampered, &sig));
    let list = gnomon_protocol::serverlist::ServerList::parse(body.as_bytes()).unwrap();
    assert_eq!(list.usable().count(), names(&doc).len());
    assert!(!names(&doc).iter().any(|n| n == LIAR || n == SILENT));
    assert_eq!(doc["observatory"]["monitor"], "observatory.test");
    assert_eq!(doc["sources"][0], "https://observatory.test/servers.json");
    let rfc = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == HONEST[0])
        .unwrap();
    assert_eq!(rfc["version"], 1, "{rfc}");
    assert!(rfc["measured"]["answered"].as_u64().unwrap() >= 1, "{rfc}");
    // The proof is where the list says, in this monitor's sink.
    let report = liar_report(&doc).unwrap();
    let path = report
        .strip_prefix("https://observatory.test")
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        path.starts_with("/reports/") && path.ends_with(".json"),
        "{report}"
    );
    let (status, proof) = watch.get(path);
    assert_eq!(status, 200, "{proof}");
    // The page says who is left out and why.
    let (_, page) = watch.get("/");
    assert!(page.contains("Published server list"), "{page}");
    assert!(page.contains(LIAR) && page.contains("lied"), "{page}");
    // The metrics say what is served.
    let first = sequence(&doc);
    let (_, _, later) = published_where(&watch, |d| sequence(d) > first);
    let (_, m) = watch.get("/metrics");
    assert!(metric(&m, "gnomon_watch_published_sequence").unwrap() >= sequence(&later) as f64);
    assert!(metric(&m, "gnomon_watch_published_servers").unwrap() >= HONEST.len() as f64);
    let expiry = metric(&m, "gnomon_watch_published_expiry_timestamp_seconds").unwrap();
    let expires =
        gnomon_protocol::signed_list::header(serde_json::to_string(&later).unwrap().as_bytes())
            .map(|h| h.expires_unix as f64);
    assert!(expires.is_ok_and(|e| e <= expiry), "{m}");
    assert!(
        m.contains("gnomon_watch_publications_total{result=\"ok\"}"),
        "{m}"
    );
    let before_restart = sequence(&later);
    assert!(watch.terminate(Duration::from_secs(30)).success());

    // Restarted on the same database: the last list is served at once,
    // and the next sequence is above it.
    let watch = Watch::start_with(&lineup.list, &args);
    let (_, _, again) = published_where(&watch, |d| sequence(d) > before_restart);
    assert!(sequence(&again) > before_restart);

    // The table the sequence is kept in goes: publication fails and is
    // counted, the rounds go on, the last list stays served.
    let file = lineup.dir.join("watch.db");
    let dropped = Command::new("sqlite3")
        .arg(&file)
        .arg("DROP TABLE publications;")
        .status();
    if !dropped.is_ok_and(|s| s.success()) {
        gnomon_testkit::skip(
            test,
            "sqlite3 cannot change the database (the database part)",
        );
        return;
    }
    let rounds = watch.first_round(PATIENCE)["rounds"].as_u64().unwrap();
    let until = Instant::now() + PATIENCE;
    loop {
        let (_, m) = watch.get("/metrics");
        let failed = m
            .lines()
            .find(|l| l.starts_with("gnomon_watch_publications_total{result=\"database\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        if failed >= 2 {
            break;
        }
        assert!(Instant::now() < until, "no database failure counted: {m}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = watch.round_where(PATIENCE, |v| v["rounds"].as_u64().unwrap() > rounds + 1);
    assert!(after["rounds"].as_u64().unwrap() > rounds + 1);
    let (status, _) = watch.get("/servers.json");
    assert_eq!(status, 200, "the last list stays served");
    let (_, page) = watch.get("/");
    assert!(page.contains("publication-failing"), "{page}");
}

#[test]
fn a_key_that_cannot_sign_is_refused_at_start_with_what_to_do() {
    let test = "watch_publish::a_key_that_cannot_sign";
    let dir = crate::sync_support::tempdir("watch-publish-keys");
    let list = dir.join("servers.json");
    std::fs::write(
        &list,
        format!(
            r#"{{"servers":[{{"name":"a","version":1,"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"127.0.0.1:9"}}]}}]}}"#,
            gnomon_testkit::base64(&[7; 32])
        ),
    )
    .unwrap();
    let run = |key: &Path| {
        gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(["watch", "--listen", "127.0.0.1:0", "--servers"])
            .arg(&list)
            .arg("--publish-key")
            .arg(key)
            .output()
            .unwrap()
    };
    let missing = run(&dir.join("nothing-here"));
    assert_eq!(missing.status.code(), Some(66));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("nothing-here") && err.contains("ssh-keygen -t ed25519"),
        "{err}"
    );
    let Some(_) = ssh_key(&dir, test) else {
        return;
    };
    let encrypted = dir.join("encrypted");
    let rsa = dir.join("rsa");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "a passphrase", "-f"])
        .arg(&encrypted)
        .status()
        .unwrap()
        .success()
        && Command::new("ssh-keygen")
            .args(["-q", "-t", "ecdsa", "-N", "", "-f"])
            .arg(&rsa)
            .status()
            .unwrap()
            .success();
    assert!(made);
    for (key, words) in [
        (&encrypted, "passphrase"),
        (&rsa, "Ed25519"),
        (&dir.join("monitor.pub"), "not the .pub"),
    ] {
        let out = run(key);
        assert_eq!(out.status.code(), Some(65), "{key:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(words) && err.contains(&key.display().to_string()),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
