//! `serve --json`: the log on stderr is JSON, stdout stays empty while the
//! server runs, and when it ends stdout carries one object with
//! `exit_code`: what it served and counted after a signal, the error after
//! a failure at start (a port in use: 71; a key file or configuration
//! that does not load: 64), said without the system's errno.

use std::net::UdpSocket;

use gnomon_protocol::{verify_response, Profile};

use super::{gnomon, request, Running, B64};
use crate::serve_support::peer::PATIENCE;
use crate::serve_support::scratch;
use base64::Engine as _;

/// The one object a finished `serve --json` printed.
fn the_object(stdout: &str) -> serde_json::Value {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stdout: {stdout:?}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn a_stopped_server_prints_one_object_with_its_keys_and_counts() {
    let mut s = Running::start(&["--json"], &[]);
    let udp = s.addr_after("listening on udp ");
    let identity = s.wait_log("serving identity 1 of 1");
    let message = serde_json::from_str::<serde_json::Value>(&identity).unwrap()["fields"]
        ["message"]
        .as_str()
        .unwrap()
        .to_owned();
    let key_b64 = message
        .split_once("ed25519 public key ")
        .and_then(|(_, r)| r.split(' ').next())
        .unwrap_or_else(|| panic!("no key in {message}"))
        .to_owned();
    let key: [u8; 32] = B64.decode(&key_b64).unwrap().try_into().unwrap();

    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    let r = request(Profile::rfc(), 1);
    c.send_to(&r, udp).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = c.recv_from(&mut buf).unwrap();
    verify_response(&r, &buf[..n], &key).unwrap();

    let (code, stdout, log) = s.stop();
    assert_eq!(code, Some(0), "{log:#?}");
    for line in &log {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    let o = the_object(&stdout);
    assert_eq!(o["exit_code"], 0, "{o}");
    assert_eq!(o["stopped"], true, "{o}");
    assert_eq!(o["identities"][0]["scheme"], "ed25519", "{o}");
    assert_eq!(o["identities"][0]["public_key"], key_b64, "{o}");
    assert_eq!(o["totals"]["udp"]["received"], 1, "{o}");
    assert_eq!(o["totals"]["udp"]["answered"], 1, "{o}");
    assert_eq!(o["totals"]["tcp"]["received"], 0, "{o}");
    assert!(o.get("error").is_none(), "{o}");
}

/// What every failed start must hold to: its exit code, one object with
/// the same code and the error's kind, a JSON log that says the same
/// error, no errno anywhere. Its message.
fn failed(args: &[&str], code: i32, kind: &str) -> String {
    let out = gnomon(args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(code), "{stdout}\n{stderr}");
    let o = the_object(&stdout);
    assert_eq!(o["exit_code"], code, "{o}");
    assert_eq!(o["error"]["kind"], kind, "{o}");
    assert!(
        !stdout.contains("os error") && !stderr.contains("os error"),
        "{stdout}\n{stderr}"
    );
    let message = o["error"]["message"].as_str().unwrap().to_owned();
    // The log is JSON too, and its error is the object's.
    let logged: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        logged
            .iter()
            .any(|v| v["level"] == "ERROR" && v["fields"]["message"] == message.as_str()),
        "{stderr}"
    );
    message
}

#[test]
fn a_port_in_use_is_exit_71_with_the_address_and_the_fix() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let message = failed(&["serve", "--json", "--listen", &addr], 71, "listen");
    assert!(
        message.contains(&format!("cannot listen on udp {addr}"))
            && message.contains("already in use")
            && message.contains("--listen"),
        "{message}"
    );
    // Without --json: the same words on stderr, nothing on stdout.
    let out = gnomon(&["serve", "--listen", &addr]);
    assert_eq!(out.status.code(), Some(71));
    assert!(
        out.stdout.is_empty(),
        "a key announced by a server that never ran"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&message), "{err}");
    drop(taken);
}

#[test]
fn a_missing_key_file_and_a_bad_configuration_are_exit_64() {
    let dir = scratch("serve-output-json-fail");
    let missing = dir.join("nowhere.key");
    let message = failed(
        &["serve", "--json", "--key-file", missing.to_str().unwrap()],
        64,
        "keys",
    );
    assert!(
        message.contains(&format!("key file {}", missing.display()))
            && message.contains("does not exist")
            && message.contains("gnomon keygen"),
        "{message}"
    );
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "batch-size = 5000\n").unwrap();
    let message = failed(
        &["serve", "--json", "--config", bad.to_str().unwrap()],
        64,
        "config",
    );
    assert!(message.contains("batch-size"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}
