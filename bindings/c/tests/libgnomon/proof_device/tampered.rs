//! A good bundle proves the true now on the device, and each tampered copy
//! of it is refused with its own code.

use std::time::Instant;

use super::{device_program, device_value, device_verifies, real_now_us, Relay};

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
