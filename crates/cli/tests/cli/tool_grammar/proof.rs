//! relay, verify-proof and verify-report: one name for the list, entries
//! counted from 1, a width refusal in seconds with its limit and flag, an
//! empty list said in words, unreadable files named without an errno.

use serde_json::Value;

use super::{gnomon, plain, refusal, s, says, Run, Scratch};
use crate::sync_support::{start_servers, Servers};

fn three(test: &str) -> Servers {
    start_servers(test, &[("a", None), ("b", None), ("c", None)], None)
}

/// 32 bytes of device value, hex.
fn device(tag: u8) -> String {
    gnomon_testkit::noise(u64::from(std::process::id()) << 8 | u64::from(tag), 32)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn relay(list: &str, dev: &str, out: &str, extra: &[&str]) -> Run {
    let mut a = vec![
        "relay",
        "--servers",
        list,
        "--device-nonce",
        dev,
        "--out",
        out,
        "--format",
        "json",
        "--timeout",
        "500ms",
    ];
    a.extend_from_slice(extra);
    gnomon(&a)
}

fn verify(proof: &str, dev: &str, flag: &str, list: &str, extra: &[&str]) -> Run {
    let mut a = vec![
        "verify-proof",
        proof,
        "--device-nonce",
        dev,
        flag,
        list,
        "--elapsed",
        "10s",
    ];
    a.extend_from_slice(extra);
    gnomon(&a)
}

/// `--servers` names the pinned list in verify-proof as in relay, `--keys`
/// still works, and an entry a refusal names is counted from 1: the
/// unpinned server's first answer at position k of the bundle is "entry
/// k + 1" in the text and in the JSON (which says it counts from 1).
#[test]
fn verify_proof_takes_servers_and_counts_entries_from_one() {
    let servers = three("grammar-numbering");
    let dev = device(1);
    let bundle = servers.dir.join("proof.json");
    let r = relay(s(&servers.list), &dev, s(&bundle), &["--max-radius", "5m"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for flag in ["--servers", "--keys"] {
        let v = verify(
            s(&bundle),
            &dev,
            flag,
            s(&servers.list),
            &["--max-radius", "5m", "--json"],
        );
        assert_eq!(v.code, 0, "{flag}: {}{}", v.stdout, v.stderr);
        assert_eq!(v.json()["exit_code"], 0);
    }
    let help = gnomon(&["verify-proof", "--help"]).stdout;
    assert!(help.contains("--servers <LIST.json>"), "{help}");
    assert!(
        !help.lines().any(|l| l.trim_start().starts_with("--keys")),
        "the old name is no option of its own: {help}"
    );

    let doc: Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let k = doc["responses"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["publicKey"] == servers.keys[2].as_str())
        .expect("c answered");
    let two = servers.list_of("two.json", &[("a", 0), ("b", 1)]);
    let text = verify(
        s(&bundle),
        &dev,
        "--servers",
        s(&two),
        &["--max-radius", "5m"],
    );
    assert_eq!(text.code, 2, "{}", text.stderr);
    assert!(
        text.stderr.contains(&format!(
            "entry {}: its key is not one of the pinned servers'",
            k + 1
        )),
        "position {k}: {}",
        text.stderr
    );
    let v = verify(
        s(&bundle),
        &dev,
        "--servers",
        s(&two),
        &["--max-radius", "5m", "--json"],
    )
    .json();
    assert_eq!(v["error"]["kind"], "unknown_key", "{v}");
    assert_eq!(v["error"]["entries"], serde_json::json!([k + 1]), "{v}");
    assert_eq!(v["error"]["entries_numbered_from"], 1, "{v}");
    assert_eq!(v["exit_code"], 2);
    // verify-report, reading the same bundle as a chained report, numbers
    // its rows from 1 too and says so in its JSON.
    let mut cut = doc.clone();
    cut["responses"][1]
        .as_object_mut()
        .unwrap()
        .remove("request");
    let cut_path = servers.dir.join("cut.json");
    std::fs::write(&cut_path, cut.to_string()).unwrap();
    let run = gnomon(&["verify-report", s(&cut_path)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    says(
        &run.stderr,
        "`request` is missing in entry 2 of `responses`",
    );
    let rep = gnomon(&["verify-report", s(&bundle), "--json"]).json();
    assert_eq!(
        (
            rep["entries"][0]["index"].as_u64(),
            rep["numbered_from"].as_u64()
        ),
        (Some(1), Some(1)),
        "{rep}"
    );
}

/// Honest servers on an unsynchronized kernel clock answer with a radius
/// of several seconds: a 1 s limit refuses them, in seconds, naming the
/// limit and the flag, in the text and the JSON, for relay and for
/// verify-proof.
#[test]
fn too_wide_gives_the_width_the_limit_and_the_flag_in_seconds() {
    let servers = three("grammar-wide");
    let dev = device(2);
    let bundle = servers.dir.join("proof.json");
    let said = |text: &str| {
        assert!(text.contains("the interval is ±"), "{text}");
        assert!(
            text.contains(" s wide; the limit is ±1 s (--max-radius"),
            "{text}"
        );
        assert!(!text.contains("µs"), "{text}");
    };
    let r = relay(s(&servers.list), &dev, s(&bundle), &["--max-radius", "1s"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    said(&r.stderr);
    let v = verify(
        s(&bundle),
        &dev,
        "--servers",
        s(&servers.list),
        &["--max-radius", "1s", "--json"],
    );
    assert_eq!(v.code, 1, "{}", v.stdout);
    let v = v.json();
    assert_eq!(v["error"]["kind"], "too_wide", "{v}");
    said(v["error"]["message"].as_str().unwrap());
    assert_eq!(v["error"]["max_radius_us"], 1_000_000, "{v}");
    assert_eq!(v["exit_code"], 1);
}

/// An empty list is said to be empty; a list of unusable entries says why
/// each is unusable; neither prints an empty "()". A report with no
/// responses proves nothing and is not called valid.
#[test]
fn an_empty_list_or_report_says_so() {
    let dir = Scratch::new("grammar-empty");
    let empty = dir.write("empty.json", r#"{"servers":[]}"#);
    let unusable = dir.write(
        "unusable.json",
        r#"{"servers":[{"name":"x","version":1,"publicKeyType":"ed25519","publicKey":"AAAA","addresses":[]}]}"#,
    );
    let dev = device(3);
    let out = dir.path("p.json");
    let bundle = dir.write("b.bin", "RTPF");
    for run in [
        relay(s(&empty), &dev, s(&out), &[]),
        verify(s(&bundle), &dev, "--servers", s(&empty), &[]),
    ] {
        assert_eq!(run.code, 64, "{}", run.stderr);
        says(&run.stderr, "the list has no servers");
        assert!(!run.stderr.contains("()"), "{}", run.stderr);
    }
    let v = verify(s(&bundle), &dev, "--servers", s(&empty), &["--json"]).json();
    assert_eq!(refusal(&v), (Some("usage"), Some(64)), "{v}");
    let run = relay(s(&unusable), &dev, s(&out), &[]);
    assert_eq!(run.code, 64);
    says(&run.stderr, "none of the list's 1 servers is usable (x: ");
    assert!(!out.exists());

    let report = dir.write("r.json", r#"{"responses":[]}"#);
    let run = gnomon(&["verify-report", s(&report)]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    says(&run.stderr, "the report has no responses");
    let v = gnomon(&["verify-report", s(&report), "--json"]).json();
    assert_eq!(refusal(&v), (Some("invalid"), Some(2)), "{v}");
}

/// Files that cannot be read are named, with what is wrong in words.
#[test]
fn unreadable_inputs_are_named_in_words() {
    let dir = Scratch::new("grammar-unreadable");
    let missing = dir.path("missing.json");
    let dev = device(4);
    let run = relay(s(&missing), &dev, s(&dir.path("p.json")), &[]);
    assert_eq!(run.code, 64);
    says(
        &run.stderr,
        &format!(
            "cannot read the server list {}: it does not exist",
            missing.display()
        ),
    );
    plain(&run.stderr);
    let run = verify(s(&missing), &dev, "--servers", s(&missing), &["--json"]);
    assert_eq!(run.code, 64);
    let v = run.json();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "cannot read the bundle {}: it does not exist",
            missing.display()
        )),
        "{v}"
    );
    plain(msg);
    // A directory where a report should be.
    let run = gnomon(&["verify-report", s(&dir.0)]);
    assert_eq!(run.code, 64);
    says(&run.stderr, "it is a directory");
    plain(&run.stderr);
    let run = gnomon(&["inspect", s(&dir.path("nothing.bin"))]);
    assert_eq!(run.code, 64);
    plain(&run.stderr);
}

/// A bundle that cannot be written is refused with the path and why, and
/// under --json as one object with exit_code 73.
#[test]
fn relay_names_the_bundle_it_cannot_write() {
    let servers = three("grammar-write");
    let out = servers.dir.join("no-such-dir").join("p.json");
    let run = relay(
        s(&servers.list),
        &device(5),
        s(&out),
        &["--max-radius", "5m", "--json"],
    );
    assert_eq!(run.code, 73, "{}", run.stderr);
    let v = run.json();
    assert_eq!(v["written"], false, "{v}");
    assert_eq!(v["error"]["kind"], "cant_create", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "cannot write the bundle to {}: it does not exist",
            out.display()
        )),
        "{msg}"
    );
    plain(msg);
}
