//! Issue 26's "Done means" for the C verifier: tests/c/proof.c is the
//! device of a relayed proof (docs/PROOF.md), linked with the no_std
//! libgnomon and calling no libc time function, fed bundles `gnomon relay`
//! made against real `gnomon serve` processes on loopback.

use crate::c_support;

use c_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

/// libfaketime, for a server whose clock lies (package libfaketime).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Servers for a relay, their list (the format `gnomon sync` reads) and
/// their keys as the device pins them: 32 raw bytes each, back to back.
struct Relay {
    _servers: Vec<Serve>,
    dir: PathBuf,
    list: PathBuf,
    keys: Vec<u8>,
}

impl Relay {
    /// One `gnomon serve` per entry of `clocks`, each with its wall clock
    /// shifted by the offset given (libfaketime's "+70"), or real.
    fn start(test: &str, clocks: &[Option<&str>]) -> Relay {
        use base64::Engine as _;
        let dir = target_dir()
            .join("c-tests")
            .join(format!("{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let servers: Vec<Serve> = clocks
            .iter()
            .map(|offset| {
                Serve::start_with(|cmd| {
                    // A 3 s radius (or the kernel's estimate, when
                    // larger): a liar 70 s off is then outside it.
                    cmd.args(["--clock-unsynchronized-radius", "3s"])
                        .args(["--clock-radius-floor", "3s"]);
                    if let Some(o) = offset {
                        cmd.env("LD_PRELOAD", LIBFAKETIME)
                            .env("FAKETIME", o)
                            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
                    }
                })
            })
            .collect();
        let mut keys = Vec::new();
        let entries: Vec<String> = servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut key = [0u8; 32];
                let n = base64::engine::general_purpose::STANDARD
                    .decode_slice(&s.key_base64, &mut key)
                    .unwrap();
                assert_eq!(n, 32);
                keys.extend_from_slice(&key);
                format!(
                    r#"{{"name":"s{i}","version":1,"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{}"}}]}}"#,
                    s.key_base64, s.addr
                )
            })
            .collect();
        let list = dir.join("servers.json");
        std::fs::write(&list, format!(r#"{{"servers":[{}]}}"#, entries.join(","))).unwrap();
        Relay {
            _servers: servers,
            dir,
            list,
            keys,
        }
    }

    /// `gnomon relay` for the device value `device`: the bundle in
    /// `format` and the relay's exit code.
    fn bundle(&self, device: &[u8], format: &str, extra: &[&str]) -> (Vec<u8>, Option<i32>) {
        let hex: String = device.iter().map(|b| format!("{b:02x}")).collect();
        let out_path = self.dir.join(format!("relayed.{format}"));
        let out = run(gnomon_testkit::command(gnomon_bin())
            .args(["relay", "--servers"])
            .arg(&self.list)
            .args(["--device-nonce", &hex, "--out"])
            .arg(&out_path)
            .args(["--format", format, "--timeout", "500ms"])
            // These servers' radius is the kernel's own error estimate on
            // an unsynchronized clock (±16 s here): the default 10 s
            // limit would refuse every honest bundle.
            .args(["--max-radius", "5m"])
            .args(extra));
        assert!(
            out_path.exists(),
            "relay wrote nothing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (std::fs::read(&out_path).unwrap(), out.status.code())
    }
}

/// A device value: 32 bytes, different per tag and per run.
fn device_value(tag: u8) -> Vec<u8> {
    let mut v = gnomon_testkit::noise(u64::from(std::process::id()) << 8 | u64::from(tag), 32);
    v[0] = tag;
    v
}

/// What tests/c/proof.c printed.
struct Verdict {
    code: i64,
    has_interval: bool,
    earliest: i64,
    latest: i64,
    agreeing: i64,
    answering: i64,
    needed: i64,
    max_liars: i64,
    pinned: i64,
    entry: i64,
    stack: i64,
    line: String,
}

/// tests/c/proof.c linked with the no_std library, and checked to call
/// no libc time function: the device has no clock but its elapsed count.
/// The device program for a test whose liars run under libfaketime, or
/// `None` after saying (in the skip list) what is missing.
fn liar_device(name: &str) -> Option<PathBuf> {
    if !Path::new(LIBFAKETIME).exists() {
        gnomon_testkit::skip(
            name,
            &format!("{LIBFAKETIME} missing (package libfaketime)"),
        );
        return None;
    }
    let exe = device_program();
    if exe.is_none() {
        gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    }
    exe
}

fn device_program() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cc = cc()?;
            let source = repo().join("bindings/c/tests/c/proof.c");
            let exe = compile_with(
                cc,
                &source,
                "proof_no_std",
                Link::NoStd,
                no_std_dir(),
                TESTS_C,
            )
            .unwrap_or_else(|e| panic!("proof.c: {e}"));
            let nm = run(Command::new("nm").arg("--undefined-only").arg(&exe));
            assert!(nm.status.success(), "nm: {:?}", nm);
            let undefined = String::from_utf8_lossy(&nm.stdout);
            let time_calls: Vec<&str> = undefined
                .lines()
                .filter_map(|l| l.split_whitespace().last())
                .map(|sym| sym.split('@').next().unwrap())
                .filter(|sym| {
                    [
                        "time",
                        "clock",
                        "clock_gettime",
                        "gettimeofday",
                        "timespec_get",
                        "ftime",
                        "localtime",
                        "localtime_r",
                        "gmtime",
                        "gmtime_r",
                        "mktime",
                        "__clock_gettime64",
                    ]
                    .contains(sym)
                })
                .collect();
            // Seen to fail with a time(NULL) added to proof.c.
            assert!(
                time_calls.is_empty(),
                "the device program calls {time_calls:?}"
            );
            Some(exe)
        })
        .clone()
}

/// Run the device on `bundle` with its value and pinned keys.
fn device_verifies(
    exe: &Path,
    dir: &Path,
    name: &str,
    bundle: &[u8],
    device: &[u8],
    keys: &[u8],
    elapsed_us: u64,
) -> Verdict {
    device_verifies_with(exe, dir, name, bundle, device, keys, elapsed_us, &[])
}

/// [`device_verifies`] with proof.c's optional arguments: each key's
/// server id ("0,7,7", through `gnomon_verify_proof_any_key`) and the
/// policy's max_liars.
#[allow(clippy::too_many_arguments)]
fn device_verifies_with(
    exe: &Path,
    dir: &Path,
    name: &str,
    bundle: &[u8],
    device: &[u8],
    keys: &[u8],
    elapsed_us: u64,
    extra: &[&str],
) -> Verdict {
    let files = [("bundle", bundle), ("device", device), ("keys", keys)].map(|(f, bytes)| {
        let p = dir.join(format!("{name}.{f}"));
        std::fs::write(&p, bytes).unwrap();
        p
    });
    let mut args = files.to_vec();
    args.push(PathBuf::from(elapsed_us.to_string()));
    args.extend(extra.iter().map(PathBuf::from));
    let out = run_bounded(exe, &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let get = |f: &str| -> i64 {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(f)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name}: no {f}= in {stdout:?}"))
            .parse()
            .unwrap()
    };
    Verdict {
        code: get("code"),
        has_interval: get("has_interval") == 1,
        earliest: get("earliest"),
        latest: get("latest"),
        agreeing: get("agreeing"),
        answering: get("answering"),
        needed: get("needed"),
        max_liars: get("max_liars"),
        pinned: get("pinned"),
        entry: get("entry"),
        stack: get("stack"),
        line: stdout.trim().to_owned(),
    }
}

fn real_now_us() -> i64 {
    now_us() as i64
}

/// Offset of the first byte of the top-level SIG value in a framed
/// response: header (12) + message (tag count, offsets, tags, values).
fn signature_offset(resp: &[u8]) -> Option<usize> {
    let msg = resp.get(12..)?;
    let n = u32::from_le_bytes(msg.get(..4)?.try_into().ok()?) as usize;
    let tags = 4 + 4 * (n - 1);
    let values = tags + 4 * n;
    for i in 0..n {
        if msg.get(tags + 4 * i..tags + 4 * i + 4)? == b"SIG\0" {
            let start = if i == 0 {
                0
            } else {
                let at = 4 + 4 * (i - 1);
                u32::from_le_bytes(msg.get(at..at + 4)?.try_into().ok()?) as usize
            };
            return Some(12 + values + start);
        }
    }
    None
}

/// Issue 26's "Done means": a device simulated by tests/c/proof.c (the
/// no_std libgnomon linked into a small C program that calls no libc time
/// function) gets an interval holding the true time from a bundle `gnomon
/// relay` made against three real `gnomon serve` processes, and refuses
/// each tampered bundle with its own code.
#[test]
fn a_c_device_proves_the_true_now_from_a_relayed_bundle_and_refuses_each_tampered_one() {
    use gnomon::GnomonError as E;
    use gnomon_protocol::proof::{Proof, ProofView};
    use serde_json::Value;
    let name = "a_c_device_proves_the_true_now_from_a_relayed_bundle_and_refuses_each_tampered_one";
    let Some(exe) = device_program() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let relay = Relay::start("proof-device", &[None, None, None]);
    let dir = &relay.dir;
    let keys = &relay.keys;

    // The good bundle, in the binary form the relay writes for devices.
    let device = device_value(1);
    let made = Instant::now();
    let before = real_now_us();
    let (bundle, code) = relay.bundle(&device, "binary", &[]);
    assert_eq!(code, Some(0));
    // The device's elapsed count since it made its value, a second spare
    // for the program's own start.
    let elapsed = made.elapsed().as_micros() as u64 + 1_000_000;
    let v = device_verifies(&exe, dir, "good", &bundle, &device, keys, elapsed);
    let after = real_now_us();
    assert_eq!(v.code, E::GnomonOk as i64, "{}", v.line);
    assert!(v.has_interval && v.agreeing == 3, "{}", v.line);
    // Fewer than half of the three pinned may lie: one.
    assert_eq!((v.max_liars, v.pinned), (1, 3), "{}", v.line);
    assert!(
        v.earliest <= after && before <= v.latest,
        "{} before {before} after {after}",
        v.line
    );
    // docs/C.md budgets 24 KB of stack for an Ed25519 bundle (19 KB
    // measured): a verifier that grew past it fails here.
    assert!(v.stack > 0 && v.stack < 24 * 1024, "{}", v.line);
    eprintln!("device: {} ({} B bundle)", v.line, bundle.len());

    // Tampered copies, made from the JSON form and turned into the
    // binary one as a relay would write it.
    let (json, code) = relay.bundle(&device, "json", &[]);
    assert_eq!(code, Some(0));
    let good: Value = serde_json::from_slice(&json).unwrap();
    let binary = |doc: &Value| {
        Proof::from_json(doc.to_string().as_bytes())
            .unwrap()
            .to_binary()
    };
    let whole = binary(&good);
    let refused = |case: &str, bundle: &[u8], device: &[u8], keys: &[u8], want: E| {
        let v = device_verifies(&exe, dir, case, bundle, device, keys, 10_000_000);
        assert_eq!(v.code, want as i64, "{case}: {}", v.line);
        assert!(!v.has_interval, "{case}: {}", v.line);
        v
    };
    // Another device's value (a bundle made for another, or replayed).
    refused(
        "wrong_nonce",
        &whole,
        &device_value(2),
        keys,
        E::GnomonErrProofWrongNonce,
    );
    // A bundle made for another value, relabelled with this device's.
    let (theirs, _) = relay.bundle(&device_value(3), "json", &[]);
    let mut theirs: Value = serde_json::from_slice(&theirs).unwrap();
    theirs["deviceNonce"] = good["deviceNonce"].clone();
    refused(
        "replayed",
        &binary(&theirs),
        &device,
        keys,
        E::GnomonErrProofBinding,
    );
    // One server's two answers swapped (entries 1 and 4: the second pass
    // asks in the first's order). Request 2 was chained from the answer
    // that was at 1, and every link is checked before any answer, so the
    // link breaks first (it was not-for-request at 1 when answers came
    // first, docs/PROOF.md).
    let mut swapped = good.clone();
    let r = swapped["responses"].as_array_mut().unwrap();
    assert_eq!(r[1]["publicKey"], r[4]["publicKey"]);
    let (a, b) = (r[1]["response"].clone(), r[4]["response"].clone());
    r[1]["response"] = b;
    r[4]["response"] = a;
    let v = refused(
        "swapped",
        &binary(&swapped),
        &device,
        keys,
        E::GnomonErrProofLink,
    );
    assert_eq!(v.entry, 2, "{}", v.line);
    // The last answer (no link after it) replaced by the same server's
    // earlier one, validly signed for another request.
    let mut replaced = good.clone();
    let r = replaced["responses"].as_array_mut().unwrap();
    let last = r.len() - 1;
    assert_eq!(r[last - 3]["publicKey"], r[last]["publicKey"]);
    r[last]["response"] = r[last - 3]["response"].clone();
    let v = refused(
        "replaced",
        &binary(&replaced),
        &device,
        keys,
        E::GnomonErrProofNotForRequest,
    );
    assert_eq!(v.entry, last as i64, "{}", v.line);
    // A broken link: entries 1 and 2 in the other order.
    let mut reordered = good.clone();
    reordered["responses"].as_array_mut().unwrap().swap(1, 2);
    let v = refused(
        "link",
        &binary(&reordered),
        &device,
        keys,
        E::GnomonErrProofLink,
    );
    assert_eq!(v.entry, 1, "{}", v.line);
    // A forged signature: one bit of the last response's SIG (no link
    // after it), and of the first's, where request 1 was chained from the
    // bytes before the edit: the link, checked before any signature, breaks
    // first (it was signature at 0 when signatures came first).
    let view = ProofView::parse(&whole).unwrap();
    let last = view.entries().len() - 1;
    for (k, case, want, entry) in [
        (last, "forged", E::GnomonErrProofSignature, last),
        (0, "forged_first", E::GnomonErrProofLink, 1),
    ] {
        let resp = view.entries()[k].response;
        let at = whole
            .windows(resp.len())
            .position(|w| w == resp)
            .expect("the response in the bundle");
        let mut forged = whole.clone();
        forged[at + signature_offset(resp).expect("a SIG tag")] ^= 1;
        let v = refused(case, &forged, &device, keys, want);
        assert_eq!(v.entry, entry as i64, "{case}: {}", v.line);
    }
    // An answer from a key the device does not pin.
    refused(
        "unpinned",
        &whole,
        &device,
        &keys[..64],
        E::GnomonErrProofUnknownKey,
    );
    // Trimmed to one server's answers and part of another's.
    let mut trimmed = good.clone();
    let keep: Vec<Value> = trimmed["responses"].as_array().unwrap()[..2].to_vec();
    trimmed["responses"] = Value::Array(keep);
    let v = refused(
        "trimmed",
        &binary(&trimmed),
        &device,
        keys,
        E::GnomonErrProofTooFewKeys,
    );
    assert_eq!((v.answering, v.needed), (2, 3), "{}", v.line);
    // Truncated, and not a bundle at all.
    refused(
        "truncated",
        &whole[..whole.len() - 7],
        &device,
        keys,
        E::GnomonErrProofTruncated,
    );
    let mut magic = whole.clone();
    magic[0] ^= 0xff;
    refused(
        "malformed",
        &magic,
        &device,
        keys,
        E::GnomonErrProofMalformed,
    );

    // Fresh proofs only: 16 bytes are enough for a device value; 15 are
    // refused, the device's own as an argument, a bundle's as malformed.
    let d16 = &device_value(5)[..16];
    let (b16, code) = relay.bundle(d16, "binary", &[]);
    assert_eq!(code, Some(0));
    let v = device_verifies(&exe, dir, "d16", &b16, d16, keys, 10_000_000);
    assert_eq!(v.code, E::GnomonOk as i64, "{}", v.line);
    refused("d15", &b16, &d16[..15], keys, E::GnomonErrArgument);
    let mut short = b16[..6].to_vec();
    short.push(15);
    short.extend_from_slice(&b16[7..7 + 15]);
    short.extend_from_slice(&b16[7 + 16..]);
    refused("d15-bundle", &short, d16, keys, E::GnomonErrProofMalformed);
    let _ = std::fs::remove_dir_all(dir);
}

/// A minority liar (a server whose clock runs 70 s ahead, under
/// libfaketime): the C device gets the malfeasance code, and the
/// majority's interval, which holds the true time.
#[test]
fn a_c_device_names_a_minority_liar_and_keeps_the_majoritys_interval() {
    use gnomon::GnomonError as E;
    let name = "a_c_device_names_a_minority_liar_and_keeps_the_majoritys_interval";
    let Some(exe) = liar_device(name) else {
        return;
    };
    let relay = Relay::start("proof-liar", &[None, None, Some("+70")]);
    let device = device_value(4);
    let made = Instant::now();
    let before = real_now_us();
    let (bundle, code) = relay.bundle(&device, "binary", &["--all"]);
    assert_eq!(code, Some(3), "the relay sees the lie too");
    let elapsed = made.elapsed().as_micros() as u64 + 1_000_000;
    let v = device_verifies(
        &exe,
        &relay.dir,
        "liar",
        &bundle,
        &device,
        &relay.keys,
        elapsed,
    );
    let after = real_now_us();
    assert!(
        v.code == E::GnomonErrProofLiar as i64 || v.code == E::GnomonErrProofContradiction as i64,
        "{}",
        v.line
    );
    assert!(v.has_interval, "{}", v.line);
    assert!(
        v.earliest <= after && before <= v.latest,
        "{} before {before} after {after}",
        v.line
    );
    let _ = std::fs::remove_dir_all(&relay.dir);
}

/// Issue 33's relayed case: the bundle carries two liars (5 s ahead,
/// under libfaketime: close enough to the honest one that no two answers
/// contradict) and one honest server, and the device pins five. The relay
/// chose those three; of five pinned with fewer than half lying, two may
/// lie, and then three can be all the liars: 2 × 2 + 1 = 5 must answer.
/// The device gets no interval, and the numbers to say why.
#[test]
fn a_bundle_of_two_liars_and_one_honest_server_of_five_pinned_proves_nothing() {
    use gnomon::GnomonError as E;
    let name = "a_bundle_of_two_liars_and_one_honest_server_of_five_pinned_proves_nothing";
    let Some(exe) = liar_device(name) else {
        return;
    };
    let relay = Relay::start("proof-dropped", &[Some("+5"), None, Some("+5")]);
    let device = device_value(6);
    let made = Instant::now();
    let (bundle, _) = relay.bundle(&device, "binary", &["--all"]);
    let elapsed = made.elapsed().as_micros() as u64 + 1_000_000;
    // The two pinned servers the relay left out (their keys are all the
    // device knows of them).
    let mut five = relay.keys.clone();
    five.extend(gnomon_testkit::noise(0x5eed_0033, 64));
    let v = device_verifies(
        &exe, &relay.dir, "dropped", &bundle, &device, &five, elapsed,
    );
    assert_eq!(v.code, E::GnomonErrProofTooFewKeys as i64, "{}", v.line);
    assert!(!v.has_interval, "{}", v.line);
    assert_eq!(
        (v.answering, v.needed, v.max_liars, v.pinned),
        (3, 5, 2, 5),
        "{}",
        v.line
    );
    // Assuming at most one of the five lies, three answering are enough
    // (the assumption is the device's to make, and the result says which).
    let v = device_verifies_with(
        &exe,
        &relay.dir,
        "dropped-f1",
        &bundle,
        &device,
        &five,
        elapsed,
        &["-", "1"],
    );
    assert_ne!(v.code, E::GnomonErrProofTooFewKeys as i64, "{}", v.line);
    assert_eq!((v.max_liars, v.pinned), (1, 5), "{}", v.line);
    let _ = std::fs::remove_dir_all(&relay.dir);
}

/// Two pinned keys that are one server (one machine's identities, one
/// operator's servers: the same non-zero `server` in gnomon_pinned_key)
/// are one voter: a bundle from three servers then carries two voters,
/// too few for one liar assumed (three must answer), where each key its
/// own server carries three.
#[test]
fn two_pinned_keys_of_one_server_count_once() {
    use gnomon::GnomonError as E;
    let name = "two_pinned_keys_of_one_server_count_once";
    let Some(exe) = device_program() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let relay = Relay::start("proof-grouped", &[None, None, None]);
    let device = device_value(7);
    let (bundle, code) = relay.bundle(&device, "binary", &[]);
    assert_eq!(code, Some(0));
    let run = |case: &str, extra: &[&str]| {
        let keys = &relay.keys;
        device_verifies_with(
            &exe, &relay.dir, case, &bundle, &device, keys, 10_000_000, extra,
        )
    };
    // Each key its own server, through either entry point.
    for (case, servers) in [("ed25519", "-"), ("alone", "0,0,0"), ("distinct", "1,2,3")] {
        let v = run(case, &[servers, "1"]);
        assert_eq!(v.code, E::GnomonOk as i64, "{case}: {}", v.line);
        assert_eq!(
            (v.answering, v.agreeing, v.pinned),
            (3, 3, 3),
            "{case}: {}",
            v.line
        );
    }
    // The second and third keys one server: two voters answered, three
    // needed to outvote one liar.
    let v = run("grouped", &["0,7,7", "1"]);
    assert_eq!(v.code, E::GnomonErrProofTooFewKeys as i64, "{}", v.line);
    assert_eq!(
        (v.answering, v.needed, v.max_liars, v.pinned),
        (2, 3, 1, 2),
        "{}",
        v.line
    );
    // With the default assumption of two pinned voters (⌊(2 − 1)/2⌋ = 0
    // liars) the two carried are enough, and both agree.
    let v = run("grouped-default", &["0,7,7"]);
    assert_eq!(v.code, E::GnomonOk as i64, "{}", v.line);
    assert_eq!(
        (v.answering, v.agreeing, v.max_liars, v.pinned),
        (2, 2, 0, 2),
        "{}",
        v.line
    );
    let _ = std::fs::remove_dir_all(&relay.dir);
}
