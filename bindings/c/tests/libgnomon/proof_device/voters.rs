//! Who the device believes: a minority liar named, two liars and one
//! honest server of five pinned proving nothing, and two pinned keys of
//! one server counting once.

use std::time::Instant;

use super::{
    device_program, device_value, device_verifies, device_verifies_with, liar_device, real_now_us,
    Relay,
};

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
