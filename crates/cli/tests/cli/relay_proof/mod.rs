//! Relayed proofs as an operator and a device meet them: real `gnomon
//! serve` processes on loopback, `gnomon relay` bound to a device's value,
//! and `gnomon verify-proof` checking the bundle offline the way the device
//! does (docs/PROOF.md). The verifier's every refusal is tested in
//! crates/protocol/tests/protocol/proof/; here, that each reaches the command line
//! with its own exit code and kind, and that a good bundle's interval holds
//! the true time.

use crate::sync_support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use serde_json::Value;
use sync_support::{have_faketime, real_now_us, start_servers, Servers};

/// The servers here answer from an unsynchronized kernel clock, whose own
/// error estimate (±16 s on the machines we run on) is their radius: the
/// default 10 s limit would refuse every honest bundle.
const MAX_RADIUS: &str = "5m";

mod device_value;

fn gnomon(args: &[&str]) -> Output {
    gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A device value: 32 bytes, hex, different per call.
fn device_value(tag: u8) -> String {
    let mut v = gnomon_testkit::noise(u64::from(std::process::id()) << 8 | u64::from(tag), 32);
    v[0] = tag;
    v.iter().map(|b| format!("{b:02x}")).collect()
}

/// `gnomon relay` over `list` for `device`, writing `out` in `format`.
fn relay(list: &Path, device: &str, out: &Path, format: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "relay",
        "--servers",
        list.to_str().unwrap(),
        "--device-nonce",
        device,
        "--out",
        out.to_str().unwrap(),
        "--format",
        format,
        "--timeout",
        "500ms",
        "--max-radius",
        MAX_RADIUS,
    ];
    args.extend_from_slice(extra);
    gnomon(&args)
}

/// `gnomon verify-proof --json`: the exit code and the object.
fn verify(proof: &Path, device: &str, keys: &Path, elapsed: &str) -> (i32, Value) {
    let out = gnomon(&[
        "verify-proof",
        proof.to_str().unwrap(),
        "--device-nonce",
        device,
        "--servers",
        keys.to_str().unwrap(),
        "--elapsed",
        elapsed,
        "--max-radius",
        MAX_RADIUS,
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?} {}", out.stdout, stderr(&out)));
    (out.status.code().unwrap(), v)
}

/// Whether the verdict's interval holds a real time read before and one
/// read after it.
fn holds(v: &Value, before_us: i64, after_us: i64) -> bool {
    let (lo, hi) = (
        v["earliest_unix_us"].as_i64().unwrap(),
        v["latest_unix_us"].as_i64().unwrap(),
    );
    lo <= after_us && before_us <= hi
}

fn three(test: &str) -> Servers {
    start_servers(test, &[("a", None), ("b", None), ("c", None)], None)
}

fn file(servers: &Servers, name: &str) -> PathBuf {
    servers.dir.join(name)
}

#[test]
fn a_relayed_bundle_proves_the_true_now_in_both_forms() {
    let servers = three("relay-both");
    let device = device_value(1);
    let made = Instant::now();
    let before = real_now_us();
    for (format, name) in [("binary", "proof.bin"), ("json", "proof.json")] {
        let path = file(&servers, name);
        let out = relay(&servers.list, &device, &path, format, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("the device will accept it"),
            "{}",
            stderr(&out)
        );
        // The device's elapsed time: what passed since it made its value,
        // with a second to spare for the verifier's own start.
        let elapsed = format!("{}ms", made.elapsed().as_millis() + 1000);
        let (code, v) = verify(&path, &device, &servers.list, &elapsed);
        let after = real_now_us();
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["valid"], true);
        assert_eq!(v["agreeing_keys"], 3, "{v}");
        assert!(
            holds(&v, before, after),
            "{v} before {before} after {after}"
        );
    }
    // The binary form is the compact one: the requests' zero padding is
    // not stored.
    let bin = std::fs::metadata(file(&servers, "proof.bin"))
        .unwrap()
        .len();
    let json = std::fs::metadata(file(&servers, "proof.json"))
        .unwrap()
        .len();
    assert!(bin * 2 < json, "binary {bin} B, JSON {json} B");
    // The JSON form is an RFC chained report: verify-report reads it.
    let out = gnomon(&[
        "verify-report",
        file(&servers, "proof.json").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn each_tampered_bundle_is_refused_with_its_own_kind_and_exit() {
    let servers = three("relay-tampered");
    let device = device_value(2);
    let path = file(&servers, "proof.json");
    let out = relay(&servers.list, &device, &path, "json", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let good: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let refused = |name: &str, doc: &Value, device: &str, keys: &Path, kind: &str, code: i32| {
        let p = file(&servers, name);
        std::fs::write(&p, doc.to_string()).unwrap();
        let (c, v) = verify(&p, device, keys, "10s");
        assert_eq!(
            (c, v["error"]["kind"].as_str()),
            (code, Some(kind)),
            "{name}: {v}"
        );
        assert_eq!(v["valid"], false);
    };
    // Another device's value: the bundle is not for this device, nor is
    // an older bundle replayed to it.
    refused(
        "other.json",
        &good,
        &device_value(3),
        &servers.list,
        "wrong_nonce",
        2,
    );
    // The bundle claims this device's value over a chain that starts
    // elsewhere.
    let mut claim = good.clone();
    let other = file(&servers, "other-device.json");
    let o = device_value(4);
    assert_eq!(
        relay(&servers.list, &o, &other, "json", &[]).status.code(),
        Some(0)
    );
    let mut theirs: Value = serde_json::from_slice(&std::fs::read(&other).unwrap()).unwrap();
    theirs["deviceNonce"] = claim["deviceNonce"].take();
    refused(
        "claimed.json",
        &theirs,
        &device,
        &servers.list,
        "binding",
        2,
    );
    // One server's two answers swapped between its two requests (the
    // second pass asks in the first's order: entries i and i + 3). Request
    // 2 was chained from the answer that was at 1, and every link is
    // checked before any answer, so the link breaks first (docs/PROOF.md).
    let mut swapped = good.clone();
    let r = swapped["responses"].as_array_mut().unwrap();
    assert_eq!(r[1]["publicKey"], r[4]["publicKey"]);
    let (a, b) = (r[1]["response"].clone(), r[4]["response"].clone());
    r[1]["response"] = b;
    r[4]["response"] = a;
    refused("swapped.json", &swapped, &device, &servers.list, "link", 2);
    // The last answer (no link after it) replaced by the same server's
    // earlier one: its signature holds, but it answers the other nonce.
    let mut replaced = good.clone();
    let r = replaced["responses"].as_array_mut().unwrap();
    let last = r.len() - 1;
    assert_eq!(r[last - 3]["publicKey"], r[last]["publicKey"]);
    r[last]["response"] = r[last - 3]["response"].clone();
    refused(
        "replaced.json",
        &replaced,
        &device,
        &servers.list,
        "not_for_request",
        2,
    );
    // A link broken: entries 1 and 2 in the other order.
    let mut reordered = good.clone();
    reordered["responses"].as_array_mut().unwrap().swap(1, 2);
    refused(
        "reordered.json",
        &reordered,
        &device,
        &servers.list,
        "link",
        2,
    );
    // A key the device does not pin.
    let two = servers.list_of("two.json", &[("a", 0), ("b", 1)]);
    refused("unpinned.json", &good, &device, &two, "unknown_key", 2);
    // A trimmed bundle (a relay dropping the last server's answers).
    let mut trimmed = good.clone();
    let keep: Vec<Value> = trimmed["responses"].as_array().unwrap()[..2].to_vec();
    trimmed["responses"] = Value::Array(keep);
    refused(
        "trimmed.json",
        &trimmed,
        &device,
        &servers.list,
        "too_few_keys",
        1,
    );
    // A truncated binary bundle.
    let bin = file(&servers, "proof.bin");
    assert_eq!(
        relay(&servers.list, &device, &bin, "binary", &[])
            .status
            .code(),
        Some(0)
    );
    let whole = std::fs::read(&bin).unwrap();
    let cut = file(&servers, "cut.bin");
    std::fs::write(&cut, &whole[..whole.len() - 7]).unwrap();
    let (c, v) = verify(&cut, &device, &servers.list, "10s");
    assert_eq!(
        (c, v["error"]["kind"].as_str()),
        (2, Some("truncated")),
        "{v}"
    );
    // A forged signature: one bit of a response's SIG value, found in the
    // binary form by the response's own bytes. The last response has no
    // link after it: signature. The first was chained from by request 1,
    // whose link (checked before any signature) breaks first.
    let view = gnomon_protocol::proof::ProofView::parse(&whole).unwrap();
    let last = view.entries().len() - 1;
    for (k, kind) in [(last, "signature"), (0, "link")] {
        let mut forged = whole.clone();
        let resp = view.entries()[k].response;
        let at = find(&forged, resp).expect("the response in the binary form");
        let sig = signature_offset(resp).expect("a SIG tag");
        forged[at + sig] ^= 0x01;
        let p = file(&servers, &format!("forged-{k}.bin"));
        std::fs::write(&p, &forged).unwrap();
        let (c, v) = verify(&p, &device, &servers.list, "10s");
        assert_eq!(
            (c, v["error"]["kind"].as_str()),
            (2, Some(kind)),
            "entry {k}: {v}"
        );
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Offset of the first byte of the top-level SIG value in a framed
/// response: header (12) + message (tag count, offsets, tags, values).
fn signature_offset(resp: &[u8]) -> Option<usize> {
    let msg = resp.get(12..)?;
    let n = u32::from_le_bytes(msg.get(..4)?.try_into().ok()?) as usize;
    let offsets = 4;
    let tags = offsets + 4 * (n - 1);
    let values = tags + 4 * n;
    for i in 0..n {
        let t = msg.get(tags + 4 * i..tags + 4 * i + 4)?;
        if t == b"SIG\0" {
            let start = if i == 0 {
                0
            } else {
                u32::from_le_bytes(
                    msg.get(offsets + 4 * (i - 1)..offsets + 4 * i)?
                        .try_into()
                        .ok()?,
                ) as usize
            };
            return Some(12 + values + start);
        }
    }
    None
}

#[test]
fn a_minority_liar_is_malfeasance_and_the_majority_still_proves_now() {
    const TEST: &str =
        "relay_proof::a_minority_liar_is_malfeasance_and_the_majority_still_proves_now";
    if !have_faketime(TEST) {
        return;
    }
    let servers = start_servers(
        "relay-liar",
        &[("a", None), ("b", None), ("liar", Some("+70"))],
        None,
    );
    let device = device_value(5);
    let made = Instant::now();
    let before = real_now_us();
    let path = file(&servers, "proof.bin");
    let out = relay(&servers.list, &device, &path, "binary", &["--all"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let elapsed = format!("{}ms", made.elapsed().as_millis() + 1000);
    let (code, v) = verify(&path, &device, &servers.list, &elapsed);
    let after = real_now_us();
    assert_eq!(code, 3, "{v}");
    assert!(
        matches!(v["error"]["kind"].as_str(), Some("liar" | "contradiction")),
        "{v}"
    );
    let majority = &v["majority"];
    assert!(
        majority.is_object() && holds(majority, before, after),
        "{v} before {before} after {after}"
    );
}

#[test]
fn relay_refuses_what_cannot_make_a_bundle() {
    let dir = sync_support::tempdir("relay-usage");
    let list = dir.join("none.json");
    std::fs::write(&list, r#"{"servers":[]}"#).unwrap();
    let out_path = dir.join("p.bin");
    for (device, why) in [
        ("xyz", "is not hex"),
        ("abc", "is not hex"),
        (&"00".repeat(65)[..], "at most 64"),
        ("00ff", "at least 16 bytes (32 hex digits)"),
    ] {
        let out = relay(&list, device, &out_path, "binary", &[]);
        assert_eq!(out.status.code(), Some(64), "{device}");
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
    }
    let out = relay(&list, &device_value(6), &out_path, "binary", &[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("the list has no servers"),
        "{}",
        stderr(&out)
    );
    assert!(!out_path.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// An input larger than any bundle is refused after reading just past the
/// limit: an endless stream (`/dev/zero`) ends as an invalid bundle, not
/// as memory filled.
#[test]
fn verify_proof_reads_no_further_than_any_bundle() {
    let dir = sync_support::tempdir("verify-proof-huge");
    let list = dir.join("keys.json");
    std::fs::write(
        &list,
        r#"{"servers":[{"name":"a","version":1,"publicKeyType":"ed25519","publicKey":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","addresses":[{"protocol":"udp","address":"127.0.0.1:9"}]}]}"#,
    )
    .unwrap();
    let (code, v) = verify(Path::new("/dev/zero"), &device_value(9), &list, "0s");
    assert_eq!(
        (code, v["error"]["kind"].as_str()),
        (2, Some("malformed")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than any bundle"),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
