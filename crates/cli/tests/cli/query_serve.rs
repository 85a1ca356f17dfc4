//! `gnomon query` against `gnomon serve`, both as real processes on
//! loopback: every version over UDP, TCP where the version defines it, and
//! a measurement sequence chained across servers of different versions.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use gnomon_protocol::PROFILES;

struct Served {
    child: gnomon_testkit::Reaped,
    addr: String,
    key: String,
    // Held open: a closed pipe would make the server's next write fail.
    _out: BufReader<std::process::ChildStdout>,
    _err: BufReader<std::process::ChildStderr>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// A server whose TCP listener shares its UDP port. The UDP side is bound
/// to port 0, and TCP takes the same port when it is free, any port
/// otherwise (crates/server/src/tcp.rs): with other tests' connections
/// about, the port is sometimes taken for TCP, so a few servers are tried.
fn serve() -> Served {
    for _ in 0..5 {
        if let Some(served) = serve_once() {
            return served;
        }
    }
    panic!("five servers in a row did not share their UDP port with TCP");
}

fn serve_once() -> Option<Served> {
    let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--summary-interval",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    let key = line.trim().rsplit(' ').next().unwrap().to_string();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let (mut udp, mut tcp) = (None, None);
    while udp.is_none() || tcp.is_none() {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "server exited");
        if let Some(r) = line.split_once("listening on udp ").map(|(_, r)| r) {
            udp = Some(r.split_whitespace().next().unwrap().to_string());
        }
        if let Some(r) = line.split_once("listening on tcp ").map(|(_, r)| r) {
            tcp = Some(r.trim().to_string());
        }
    }
    if udp != tcp {
        return None;
    }
    Some(Served {
        child,
        addr: udp.unwrap(),
        key,
        _out: out,
        _err: err,
    })
}

fn query(args: &[&str]) -> (Output, serde_json::Value) {
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .arg("query")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out, json)
}

#[test]
fn every_version_over_udp_and_tcp_where_defined() {
    let s = serve();
    // The versions an Ed25519 key is asked in (ML-DSA-44 has its own test:
    // pq_serve.rs).
    for p in PROFILES.iter().filter(|p| p.udp) {
        let (out, j) = query(&[&s.addr, "--key", &s.key, "--protocol", p.name, "--udp-only"]);
        assert!(out.status.success(), "{} udp: {j}", p.name);
        assert_eq!(j["version"]["name"], p.name);
        assert_eq!(j["transport"], "udp");
        let (out, j) = query(&[&s.addr, "--key", &s.key, "--protocol", p.name, "--tcp"]);
        if p.tcp {
            assert!(out.status.success(), "{} tcp: {j}", p.name);
            assert_eq!(j["transport"], "tcp");
        } else {
            assert!(
                !out.status.success(),
                "{} has no TCP and must not be asked over it",
                p.name
            );
        }
    }
    // Without --version the newest common version wins.
    let (out, j) = query(&[&s.addr, "--key", &s.key]);
    assert!(out.status.success());
    assert_eq!(j["version"]["name"], "rfc-10049");
}

#[test]
fn a_chain_across_real_servers_of_different_versions_verifies() {
    let servers = [serve(), serve(), serve()];
    // Each list entry names the highest version the client may use with it.
    let versions = [3_000_600_613u64, 0x8000_000b, 1];
    let entries: Vec<String> = servers
        .iter()
        .zip(versions)
        .enumerate()
        .map(|(i, (s, v))| {
            format!(
                r#"{{"name":"s{i}","version":{v},"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{}"}}]}}"#,
                s.key, s.addr
            )
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("gnomon-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("list.json");
    std::fs::write(&list, format!(r#"{{"servers":[{}]}}"#, entries.join(","))).unwrap();
    let (out, j) = query(&["--servers", list.to_str().unwrap(), "--all"]);
    assert!(out.status.success(), "{j}");
    let text = j.to_string();
    for name in ["google", "draft-11", "rfc-10049"] {
        assert!(text.contains(name), "{name} missing from {text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A real server drops requests made for another key (their SRV names a
/// key it does not hold), so a wrong --key looks like a dead server: the
/// message must say so.
#[test]
fn a_wrong_key_is_silence_and_the_message_says_to_check_the_key() {
    let s = serve();
    let other = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
    assert_ne!(s.key, other);
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["query", &s.addr, "--key", other])
        .args(["--timeout", "100ms", "--retries", "1", "--udp-only"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no answer"), "{err}");
    assert!(
        err.contains("drops requests for another public key") && err.contains("check the key"),
        "{err}"
    );
    assert!(!err.contains("refused"), "{err}");
}

/// `--save-request` and `--save-response` keep the exchange with a real
/// server; `gnomon inspect` then verifies it offline, and a response that
/// is not the one saved fails there.
#[test]
fn a_saved_exchange_verifies_again_with_inspect() {
    let s = serve();
    let dir = std::env::temp_dir().join(format!("gnomon-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (req, resp) = (dir.join("request.bin"), dir.join("response.bin"));
    let (out, j) = query(&[
        &s.addr,
        "--key",
        &s.key,
        "--save-request",
        req.to_str().unwrap(),
        "--save-response",
        resp.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{j}");
    let inspect = |response: &std::path::Path| {
        gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .arg("inspect")
            .arg(response)
            .args(["--key", &s.key, "--request"])
            .arg(&req)
            .arg("--json")
            .output()
            .unwrap()
    };
    let checked = inspect(&resp);
    assert!(checked.status.success(), "{checked:?}");
    let v: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    let full = &v["signatures"]["full_check"];
    assert_eq!(full["ok"], true, "{v}");
    assert_eq!(full["midpoint_utc"], j["midpoint_utc"], "{v}");

    // One flipped byte near the end (inside the signed part): the saved
    // bytes are what is checked, not something inspect makes up.
    let mut bytes = std::fs::read(&resp).unwrap();
    let n = bytes.len();
    bytes[n - 40] ^= 1;
    let bad = dir.join("bad.bin");
    std::fs::write(&bad, bytes).unwrap();
    assert_eq!(inspect(&bad).status.code(), Some(2));

    // An unwritable target is its own exit status, before any output.
    let (out, j) = query(&[
        &s.addr,
        "--key",
        &s.key,
        "--save-response",
        dir.join("no/such/dir/r.bin").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(73), "{j}");
    assert_eq!(j["error"]["kind"], "save");
    std::fs::remove_dir_all(&dir).unwrap();
}
