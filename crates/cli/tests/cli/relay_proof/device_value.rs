//! The device's value as the relay and the verifier meet it: too short
//! to be unpredictable is refused before any traffic, `--elapsed` is
//! required, and a bundle held for a while still holds the true now when
//! the hold is counted.

use super::*;

/// A list naming one "server" at `addr` (a socket of the test's that
/// never answers).
fn silent_list(dir: &Path, addr: std::net::SocketAddr) -> PathBuf {
    let list = dir.join("silent.json");
    std::fs::write(
        &list,
        format!(
            r#"{{"servers":[{{"name":"silent","version":1,"publicKeyType":"ed25519","publicKey":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","addresses":[{{"protocol":"udp","address":"{addr}"}}]}}]}}"#
        ),
    )
    .unwrap();
    list
}

/// Datagrams waiting on `socket`, without waiting for more: the relay has
/// exited, and loopback delivers before `send` returns.
fn waiting(socket: &std::net::UdpSocket) -> usize {
    socket.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    let mut n = 0;
    while socket.recv(&mut buf).is_ok() {
        n += 1;
    }
    n
}

/// A value the relay could guess lets it prepare bundles in advance: 15
/// bytes are refused before anything is sent; 16 are asked for.
#[test]
fn relay_refuses_a_device_value_under_16_bytes_before_any_traffic() {
    let dir = sync_support::tempdir("relay-short");
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let list = silent_list(&dir, socket.local_addr().unwrap());
    let out_path = dir.join("p.bin");
    let quick = ["--deadline", "200ms"];
    let out = relay(&list, &"a5".repeat(15), &out_path, "binary", &quick);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains("--device-nonce: 15 bytes")
            && msg.contains("at least 16 bytes (32 hex digits)")
            && msg.contains("cannot predict"),
        "{msg}"
    );
    assert_eq!(waiting(&socket), 0, "the relay sent before refusing");
    assert!(!out_path.exists());
    // 16 bytes: the relay asks (here a server that never answers).
    let out = relay(&list, &"a5".repeat(16), &out_path, "binary", &quick);
    assert_ne!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(waiting(&socket) > 0, "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--elapsed` has no default: without it, verify-proof says what to pass
/// and verifies nothing; a device value under 16 bytes is refused too.
#[test]
fn verify_proof_requires_elapsed_and_a_16_byte_value() {
    let dir = sync_support::tempdir("verify-proof-args");
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let list = silent_list(&dir, socket.local_addr().unwrap());
    let bundle = dir.join("p.bin");
    std::fs::write(&bundle, b"RTPF").unwrap();
    let device = device_value(7);
    let args = |device: &str, elapsed: Option<&str>, json: bool| {
        let mut a = vec![
            "verify-proof".to_owned(),
            bundle.to_str().unwrap().to_owned(),
            "--device-nonce".to_owned(),
            device.to_owned(),
            "--servers".to_owned(),
            list.to_str().unwrap().to_owned(),
        ];
        if let Some(e) = elapsed {
            a.extend(["--elapsed".to_owned(), e.to_owned()]);
        }
        if json {
            a.push("--json".to_owned());
        }
        a
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        gnomon(&a)
    };
    let out = run(args(&device, None, false));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains("--elapsed is required") && msg.contains("by its own clock"),
        "{msg}"
    );
    let out = run(args(&device, None, true));
    assert_eq!(out.status.code(), Some(64));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--elapsed is required"),
        "{v}"
    );
    // With it, the same command reads the bundle (which is cut short).
    let (code, v) = verify(&bundle, &device, &list, "1s");
    assert_eq!(
        (code, v["error"]["kind"].as_str()),
        (2, Some("truncated")),
        "{v}"
    );
    // The device's own value: 15 bytes refused, 16 read on.
    let out = run(args(&"a5".repeat(15), Some("1s"), false));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("at least 16 bytes (32 hex digits)"),
        "{}",
        stderr(&out)
    );
    let (code, v) = verify(&bundle, &"a5".repeat(16), &list, "1s");
    assert_eq!(
        (code, v["error"]["kind"].as_str()),
        (2, Some("truncated")),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bundle with a 15-byte device value, in either form, is refused as it
/// is read (kind `device_value_length`), whatever the device passes.
#[test]
fn a_bundle_whose_device_value_is_under_16_bytes_is_refused() {
    let servers = three("relay-short-bundle");
    let device = "a5".repeat(16);
    let path = file(&servers, "proof.bin");
    let out = relay(&servers.list, &device, &path, "binary", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (code, v) = verify(&path, &device, &servers.list, "10s");
    assert_eq!(code, 0, "16 bytes are enough: {v}");
    let whole = std::fs::read(&path).unwrap();
    assert_eq!(whole[6], 16);
    let mut short = whole[..6].to_vec();
    short.push(15);
    short.extend_from_slice(&whole[7..7 + 15]);
    short.extend_from_slice(&whole[7 + 16..]);
    let cut = file(&servers, "short.bin");
    std::fs::write(&cut, &short).unwrap();
    let (code, v) = verify(&cut, &device, &servers.list, "10s");
    assert_eq!(
        (code, v["error"]["kind"].as_str()),
        (2, Some("device_value_length")),
        "{v}"
    );
    let json_path = file(&servers, "proof.json");
    let out = relay(&servers.list, &device, &json_path, "json", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    doc["deviceNonce"] = Value::from(gnomon_testkit::base64(&[0xa5; 15]));
    std::fs::write(&json_path, doc.to_string()).unwrap();
    let (code, v) = verify(&json_path, &device, &servers.list, "10s");
    assert_eq!(
        (code, v["error"]["kind"].as_str()),
        (2, Some("device_value_length")),
        "{v}"
    );
}

/// The issue's case: a bundle 25 s old. Servers whose clocks run 25 s
/// behind sign what honest servers would have signed 25 s ago, so their
/// bundle is one a relay made then and held since; the device's own clock
/// has counted those 25 s. With them in `--elapsed` the interval holds the
/// true now; with the old default of 0 it ends seconds before it.
#[test]
fn a_held_bundle_with_a_truthful_elapsed_holds_the_true_now() {
    const TEST: &str = "relay_proof::a_held_bundle_with_a_truthful_elapsed_holds_the_true_now";
    const HELD_MS: u128 = 25_000;
    if !have_faketime(TEST) {
        return;
    }
    let servers = start_servers(
        "relay-held",
        &[("a", Some("-25")), ("b", Some("-25")), ("c", Some("-25"))],
        None,
    );
    let device = device_value(8);
    let made = Instant::now();
    let before = real_now_us();
    let path = file(&servers, "proof.bin");
    let out = relay(&servers.list, &device, &path, "binary", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let elapsed = format!("{}ms", HELD_MS + made.elapsed().as_millis() + 1000);
    let (code, v) = verify(&path, &device, &servers.list, &elapsed);
    let after = real_now_us();
    assert_eq!(code, 0, "{v}");
    assert!(
        holds(&v, before, after),
        "{v} before {before} after {after}"
    );
    // What the missing hold does: the interval ends before the time the
    // device verified at.
    let (code, v) = verify(&path, &device, &servers.list, "0s");
    assert_eq!(code, 0, "{v}");
    assert!(
        v["latest_unix_us"].as_i64().unwrap() < after,
        "{v} after {after}"
    );
}
