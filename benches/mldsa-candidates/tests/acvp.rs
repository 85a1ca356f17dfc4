//! Every candidate against the NIST ACVP ML-DSA-44 subset that gnomon keeps
//! in crates/protocol/tests/data/mldsa44-acvp/ (see the README there).
use mldsa_candidates::{keygen, keygen_sk, pk_of_sk, sign_with_sk, unhex, verify, CALLER_RND, NAMES};
use serde_json::Value;

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/../../crates/protocol/tests/data/mldsa44-acvp/{name}", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(doc["parameterSet"], "ML-DSA-44");
    doc["tests"].as_array().unwrap().clone()
}

fn hex(t: &Value, k: &str) -> Vec<u8> {
    unhex(t[k].as_str().unwrap_or_else(|| panic!("tcId {} has no {k}", t["tcId"])))
}

#[test]
fn keygen_vectors() {
    let tests = load("keygen.json");
    assert_eq!(tests.len(), 10);
    for t in &tests {
        let seed: [u8; 32] = hex(t, "seed").try_into().unwrap();
        for (i, name) in NAMES.iter().enumerate() {
            assert_eq!(keygen(i, &seed)[..], hex(t, "pk")[..], "{name} tcId {}", t["tcId"]);
            if t.get("sk").is_some() {
                assert_eq!(keygen_sk(i, &seed), hex(t, "sk"), "{name} sk tcId {}", t["tcId"]);
            }
        }
    }
}

fn siggen(file: &str, hedged: bool) {
    let tests = load(file);
    assert!(!tests.is_empty());
    for t in &tests {
        let (sk, msg, ctx, want) = (hex(t, "sk"), hex(t, "message"), hex(t, "context"), hex(t, "signature"));
        let rnd: Option<[u8; 32]> = hedged.then(|| hex(t, "rnd").try_into().unwrap());
        let pk = pk_of_sk(&sk);
        for (i, name) in NAMES.iter().enumerate() {
            let sig = sign_with_sk(i, &sk, &msg, &ctx, rnd.as_ref()).unwrap();
            if CALLER_RND[i] {
                assert_eq!(sig[..], want[..], "{name} tcId {}", t["tcId"]);
            }
            // aws-lc signs hedged with its own rnd: its signature must verify.
            assert!(verify(i, &pk, &msg, &ctx, &sig), "{name} own sig, tcId {}", t["tcId"]);
            assert!(verify(i, &pk, &msg, &ctx, &want), "{name} NIST sig, tcId {}", t["tcId"]);
        }
    }
}

#[test]
fn siggen_deterministic_vectors() {
    siggen("siggen-deterministic.json", false);
}

#[test]
fn siggen_hedged_vectors() {
    siggen("siggen-hedged.json", true);
}

#[test]
fn sigver_vectors() {
    let tests = load("sigver.json");
    assert!(tests.iter().any(|t| t["testPassed"] == true));
    assert!(tests.iter().any(|t| t["testPassed"] == false));
    for t in &tests {
        let expected = t["testPassed"].as_bool().unwrap();
        for (i, name) in NAMES.iter().enumerate() {
            let got = verify(i, &hex(t, "pk"), &hex(t, "message"), &hex(t, "context"), &hex(t, "signature"));
            assert_eq!(got, expected, "{name} tcId {}", t["tcId"]);
        }
    }
}
