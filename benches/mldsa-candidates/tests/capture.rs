//! Every candidate against a real deployment: the ML-DSA-44 Roughtime
//! exchange captured from tannerryan/roughtime v1.20.3 (vectors/README.md).
//! Both signatures must verify (DELE under the root key with the delegation
//! context, SREP under the online key with the response context) and fail
//! with a one-byte-flipped signature or with the context minus its NUL.
use mldsa_candidates::{rt_get, unhex, verify, CTX_DELEGATION, CTX_RESPONSE, NAMES};

struct Capture {
    root: Vec<u8>,
    dele: Vec<u8>,
    dele_sig: Vec<u8>,
    online: Vec<u8>,
    srep: Vec<u8>,
    srep_sig: Vec<u8>,
}

fn capture() -> Capture {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/vectors/");
    let root = unhex(&std::fs::read_to_string(format!("{dir}root-public-key.hex")).unwrap());
    let resp = std::fs::read(format!("{dir}response.bin")).unwrap();
    assert_eq!(&resp[..8], b"ROUGHTIM");
    let len = u32::from_le_bytes(resp[8..12].try_into().unwrap()) as usize;
    let msg = &resp[12..12 + len];
    let cert = rt_get(msg, b"CERT").unwrap();
    let dele = rt_get(cert, b"DELE").unwrap();
    let c = Capture {
        root,
        dele: dele.to_vec(),
        dele_sig: rt_get(cert, b"SIG\0").unwrap().to_vec(),
        online: rt_get(dele, b"PUBK").unwrap().to_vec(),
        srep: rt_get(msg, b"SREP").unwrap().to_vec(),
        srep_sig: rt_get(msg, b"SIG\0").unwrap().to_vec(),
    };
    assert_eq!((c.root.len(), c.online.len()), (1312, 1312));
    assert_eq!((c.dele_sig.len(), c.srep_sig.len()), (2420, 2420));
    c
}

#[test]
fn every_candidate_verifies_the_capture() {
    let c = capture();
    for (i, name) in NAMES.iter().enumerate() {
        assert!(verify(i, &c.root, &c.dele, CTX_DELEGATION, &c.dele_sig), "{name}: DELE");
        assert!(verify(i, &c.online, &c.srep, CTX_RESPONSE, &c.srep_sig), "{name}: SREP");
    }
}

#[test]
fn every_candidate_rejects_a_flipped_byte() {
    let c = capture();
    for (i, name) in NAMES.iter().enumerate() {
        for at in [0, 1000, 2419] {
            let mut d = c.dele_sig.clone();
            d[at] ^= 0x01;
            assert!(!verify(i, &c.root, &c.dele, CTX_DELEGATION, &d), "{name}: DELE flipped at {at}");
            let mut s = c.srep_sig.clone();
            s[at] ^= 0x01;
            assert!(!verify(i, &c.online, &c.srep, CTX_RESPONSE, &s), "{name}: SREP flipped at {at}");
        }
        // and a flipped message byte
        let mut srep = c.srep.clone();
        srep[10] ^= 0x80;
        assert!(!verify(i, &c.online, &srep, CTX_RESPONSE, &c.srep_sig), "{name}: SREP altered");
    }
}

#[test]
fn every_candidate_rejects_the_context_without_its_nul() {
    let c = capture();
    let dele_ctx = &CTX_DELEGATION[..CTX_DELEGATION.len() - 1];
    let resp_ctx = &CTX_RESPONSE[..CTX_RESPONSE.len() - 1];
    for (i, name) in NAMES.iter().enumerate() {
        assert!(!verify(i, &c.root, &c.dele, dele_ctx, &c.dele_sig), "{name}: DELE ctx w/o NUL");
        assert!(!verify(i, &c.online, &c.srep, resp_ctx, &c.srep_sig), "{name}: SREP ctx w/o NUL");
        // nor as an Ed25519-style prefix with an empty context
        let mut prefixed = CTX_RESPONSE.to_vec();
        prefixed.extend_from_slice(&c.srep);
        assert!(!verify(i, &c.online, &prefixed, b"", &c.srep_sig), "{name}: SREP prefixed");
    }
}
