//! The post-quantum version (0x90000001, ML-DSA-44) through the exported C
//! functions, called from Rust as C would call them: the exchange captured
//! from tannerryan/roughtime verifies with its 1312-byte key, and so does
//! one with a gnomon fixture (request built by libgnomon, SRV over the
//! whole key); a forged signature, a cut response and keys of the wrong
//! length are refused with their codes, never a crash.

use std::ffi::{c_char, CStr, CString};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use gnomon::*;
use gnomon_protocol::request::srv_for;
use gnomon_protocol::wire::{Message, PACKET_HEADER};
use gnomon_protocol::{Scheme, Tag};
use gnomon_testkit::{Fixture, FixtureConfig};

const PQ: u32 = GNOMON_VERSION_ML_DSA_44;

fn vector(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/external-vectors/tannerryan-ml-dsa-44")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn hex_decode(text: &str) -> Vec<u8> {
    let text = text.trim();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

struct Capture {
    key_hex: String,
    key: Vec<u8>,
    request: Vec<u8>,
    response: Vec<u8>,
}

fn capture() -> Capture {
    let key_hex = String::from_utf8(vector("root-public-key.hex")).unwrap();
    Capture {
        key: hex_decode(&key_hex),
        key_hex,
        request: vector("request.bin"),
        response: vector("response.bin"),
    }
}

fn zeroed_result() -> GnomonResult {
    GnomonResult {
        code: GnomonError::GnomonOk,
        version: 0,
        midpoint_us: 0,
        radius_us: 0,
        message: [0; GNOMON_MESSAGE_LEN],
    }
}

fn message(m: &[c_char; GNOMON_MESSAGE_LEN]) -> String {
    // SAFETY: libgnomon NUL-terminates every message.
    unsafe { CStr::from_ptr(m.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `gnomon_verify_any_key` with `key` as pointer and length (NULL for
/// `None`).
fn verify(request: &[u8], response: &[u8], key: Option<&[u8]>) -> (GnomonError, GnomonResult) {
    let mut r = zeroed_result();
    let (ptr, len) = key.map_or((std::ptr::null(), 1312), |k| (k.as_ptr(), k.len()));
    // SAFETY: valid slices, a key of `len` bytes (or NULL) and a result.
    let code = unsafe {
        gnomon_verify_any_key(
            request.as_ptr(),
            request.len(),
            response.as_ptr(),
            response.len(),
            ptr,
            len,
            &mut r,
        )
    };
    assert_eq!(r.code, code, "the result carries the code returned");
    if code != GnomonError::GnomonOk {
        assert_eq!((r.version, r.midpoint_us, r.radius_us), (0, 0, 0));
    }
    (code, r)
}

/// Where `tag`'s value lies in `response`, at the top level or in CERT.
fn value_at(response: &[u8], in_cert: bool, tag: Tag) -> std::ops::Range<usize> {
    let msg = Message::parse(&response[PACKET_HEADER..]).unwrap();
    let msg = if in_cert {
        msg.nested(Tag::CERT).unwrap()
    } else {
        msg
    };
    let value = msg.require(tag).unwrap();
    let start = value.as_ptr() as usize - response.as_ptr() as usize;
    start..start + value.len()
}

#[test]
fn the_captured_ml_dsa_answer_verifies_with_its_1312_byte_key() {
    let c = capture();
    assert_eq!(c.key.len(), GNOMON_ML_DSA_44_KEY_LEN);
    let (code, r) = verify(&c.request, &c.response, Some(&c.key));
    assert_eq!(code, GnomonError::GnomonOk, "{}", message(&r.message));
    assert_eq!(r.version, 0x9000_0001);
    // What tannerryan's client printed for this exchange.
    assert_eq!(r.midpoint_us, 1_795_763_307_000_000);
    assert_eq!(r.radius_us, 3_000_000);
    assert_eq!(message(&r.message), "success");
}

#[test]
fn a_forged_signature_is_refused() {
    let c = capture();
    // One byte of SREP's signature, then of the delegation's.
    let mut forged = c.response.clone();
    forged[value_at(&c.response, false, Tag::SIG).start + 100] ^= 1;
    let (code, r) = verify(&c.request, &forged, Some(&c.key));
    assert_eq!(
        code,
        GnomonError::GnomonErrResponseSignature,
        "{}",
        message(&r.message)
    );
    let mut forged = c.response.clone();
    forged[value_at(&c.response, true, Tag::SIG).end - 1] ^= 0x80;
    let (code, _) = verify(&c.request, &forged, Some(&c.key));
    assert_eq!(code, GnomonError::GnomonErrDelegationSignature);
    // Another ML-DSA-44 key (one byte of the key changed) signed nothing.
    let mut other = c.key.clone();
    other[500] ^= 1;
    let (code, _) = verify(&c.request, &c.response, Some(&other));
    assert_eq!(code, GnomonError::GnomonErrDelegationSignature);
}

#[test]
fn a_truncated_answer_is_malformed() {
    let c = capture();
    for keep in [c.response.len() - 1, c.response.len() / 2, 13] {
        let (code, r) = verify(&c.request, &c.response[..keep], Some(&c.key));
        assert_eq!(
            code,
            GnomonError::GnomonErrMalformed,
            "{keep} bytes: {}",
            message(&r.message)
        );
    }
}

#[test]
fn a_key_of_no_schemes_length_is_the_key_error() {
    let c = capture();
    let long = [c.key.clone(), vec![0]].concat();
    for key in [&c.key[..1311], &long[..], &c.key[..33], &c.key[..31], &[]] {
        let (code, r) = verify(&c.request, &c.response, Some(key));
        assert_eq!(code, GnomonError::GnomonErrKey, "{} bytes", key.len());
        assert!(
            message(&r.message).contains("1312"),
            "{}",
            message(&r.message)
        );
    }
    let (code, _) = verify(&c.request, &c.response, None);
    assert_eq!(code, GnomonError::GnomonErrNull);
    // An Ed25519-sized key is a key, of the wrong scheme for this answer:
    // to the caller a wrong key, and the message says which schemes.
    let (code, r) = verify(&c.request, &c.response, Some(&c.key[..32]));
    assert_eq!(code, GnomonError::GnomonErrDelegationSignature);
    assert!(
        message(&r.message).contains("KeyScheme { key: Ed25519, answered: MlDsa44 }"),
        "{}",
        message(&r.message)
    );
    // The 32-byte functions read 32 bytes and never more.
    let mut r = zeroed_result();
    // SAFETY: valid slices; the key has at least 32 bytes.
    let code = unsafe {
        gnomon_verify(
            c.request.as_ptr(),
            c.request.len(),
            c.response.as_ptr(),
            c.response.len(),
            c.key.as_ptr(),
            &mut r,
        )
    };
    assert_eq!(code, GnomonError::GnomonErrDelegationSignature);
}

fn parse_any(text: &str, out: &mut [u8]) -> (GnomonError, usize) {
    let text = CString::new(text).unwrap();
    let mut n = 0;
    // SAFETY: a C string, a buffer of its length and a length pointer.
    let code =
        unsafe { gnomon_parse_public_key_any(text.as_ptr(), out.as_mut_ptr(), out.len(), &mut n) };
    (code, n)
}

#[test]
fn keys_of_both_schemes_parse_from_hex_and_base64() {
    use base64::Engine as _;
    let c = capture();
    let mut out = [0u8; GNOMON_MAX_KEY_LEN];
    assert_eq!(
        parse_any(&c.key_hex, &mut out),
        (GnomonError::GnomonOk, 1312)
    );
    assert_eq!(out[..], c.key[..]);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&c.key);
    out.fill(0);
    assert_eq!(parse_any(&b64, &mut out), (GnomonError::GnomonOk, 1312));
    assert_eq!(out[..], c.key[..]);
    let ed = base64::engine::general_purpose::STANDARD.encode(&c.key[..32]);
    assert_eq!(parse_any(&ed, &mut out), (GnomonError::GnomonOk, 32));
    assert_eq!(out[..32], c.key[..32]);
    // Too small a buffer for the key; a length of no scheme's key.
    assert_eq!(
        parse_any(&c.key_hex, &mut out[..1311]).0,
        GnomonError::GnomonErrBufferTooSmall
    );
    let short = base64::engine::general_purpose::STANDARD.encode(&c.key[..1311]);
    assert_eq!(parse_any(&short, &mut out).0, GnomonError::GnomonErrKey);
    assert_eq!(
        parse_any(&c.key_hex[..2622], &mut out).0,
        GnomonError::GnomonErrKey
    );
    // The 32-byte parser refuses it (too long for it) rather than cut it.
    let text = CString::new(b64).unwrap();
    // SAFETY: a C string and 32 writable bytes.
    let code = unsafe { gnomon_parse_public_key(text.as_ptr(), out.as_mut_ptr()) };
    assert_eq!(code, GnomonError::GnomonErrTooLong);
}

fn ml_dsa_fixture() -> Fixture {
    Fixture::start(FixtureConfig {
        scheme: Scheme::MlDsa44,
        seed: 7,
        ..FixtureConfig::default()
    })
}

/// One request over TCP (the version's only transport): the framed
/// response.
fn over_tcp(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut response = vec![0u8; PACKET_HEADER];
    s.read_exact(&mut response).expect("an answer within 10 s");
    let len = u32::from_le_bytes(response[8..12].try_into().unwrap()) as usize;
    response.resize(PACKET_HEADER + len, 0);
    s.read_exact(&mut response[PACKET_HEADER..]).unwrap();
    response
}

fn build(nonce: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; GNOMON_REQUEST_SIZE];
    let mut n = 0;
    // SAFETY: valid slices and a valid length pointer.
    let code = unsafe {
        gnomon_build_request_any_key(
            PQ,
            nonce.as_ptr(),
            nonce.len(),
            key.as_ptr(),
            key.len(),
            out.as_mut_ptr(),
            out.len(),
            &mut n,
        )
    };
    assert_eq!(code, GnomonError::GnomonOk);
    out.truncate(n);
    out
}

#[test]
fn a_request_built_here_names_the_ml_dsa_key_and_its_answer_verifies() {
    let fixture = ml_dsa_fixture();
    let key = fixture.long_term_key().bytes().to_vec();
    assert_eq!(key.len(), 1312);
    let request = build(&[7; 32], &key);
    let msg = Message::parse(&request[PACKET_HEADER..]).unwrap();
    assert_eq!(msg.require(Tag::SRV).unwrap(), srv_for(&key));
    assert_eq!(msg.require(Tag::VER).unwrap(), PQ.to_le_bytes());
    let response = over_tcp(fixture.addr(), &request);
    assert!(response.len() > 6000, "{} bytes", response.len());
    let (code, r) = verify(&request, &response, Some(&key));
    assert_eq!(code, GnomonError::GnomonOk, "{}", message(&r.message));
    assert_eq!(r.version, PQ);

    // The same request with a key of the wrong length is not built.
    let mut out = vec![0u8; GNOMON_REQUEST_SIZE];
    let mut n = 0;
    // SAFETY: valid slices; the key pointer has 1312 bytes behind it.
    let code = unsafe {
        gnomon_build_request_any_key(
            PQ,
            [7u8; 32].as_ptr(),
            32,
            key.as_ptr(),
            1000,
            out.as_mut_ptr(),
            out.len(),
            &mut n,
        )
    };
    assert_eq!(code, GnomonError::GnomonErrKey);

    // And the blocking query asks it over TCP by itself.
    let address = CString::new(fixture.addr().to_string()).unwrap();
    let mut r = zeroed_result();
    // SAFETY: a C string, a 1312-byte key and a result struct.
    let code = unsafe {
        gnomon_query_any_key(address.as_ptr(), key.as_ptr(), key.len(), 0, 10_000, &mut r)
    };
    assert_eq!(code, GnomonError::GnomonOk, "{}", message(&r.message));
    assert_eq!(r.version, PQ);
}

#[test]
fn a_chain_and_a_consensus_take_ml_dsa_keys() {
    let fixture = ml_dsa_fixture();
    let key = fixture.long_term_key().bytes().to_vec();
    let first = build(&[1; 32], &key);
    let first_response = over_tcp(fixture.addr(), &first);
    let rand = [9u8; 32];
    let mut nonce = [0u8; 64];
    let mut n = 0;
    // SAFETY: valid slices and a length pointer.
    let code = unsafe {
        gnomon_chain_nonce(
            PQ,
            first_response.as_ptr(),
            first_response.len(),
            rand.as_ptr(),
            rand.len(),
            nonce.as_mut_ptr(),
            nonce.len(),
            &mut n,
        )
    };
    assert_eq!(code, GnomonError::GnomonOk);
    let second = build(&nonce[..n], &key);
    let second_response = over_tcp(fixture.addr(), &second);
    let exchange = |req: &[u8], resp: &[u8], rand: &[u8], key_len: usize| GnomonExchangeAnyKey {
        request: req.as_ptr(),
        request_len: req.len(),
        response: resp.as_ptr(),
        response_len: resp.len(),
        rand: if rand.is_empty() {
            std::ptr::null()
        } else {
            rand.as_ptr()
        },
        rand_len: rand.len(),
        public_key: key.as_ptr(),
        public_key_len: key_len,
    };
    let check = |exchanges: &[GnomonExchangeAnyKey]| {
        let mut r = GnomonChainResult {
            code: GnomonError::GnomonOk,
            index: 9,
            other: 9,
            message: [0; GNOMON_MESSAGE_LEN],
        };
        // SAFETY: an array of exchanges whose pointers are valid.
        let code =
            unsafe { gnomon_check_chain_any_key(exchanges.as_ptr(), exchanges.len(), &mut r) };
        (code, r.index)
    };
    let good = [
        exchange(&first, &first_response, &[], 1312),
        exchange(&second, &second_response, &rand, 1312),
    ];
    assert_eq!(check(&good), (GnomonError::GnomonOk, 0));
    let wrong_len = [
        exchange(&first, &first_response, &[], 1312),
        exchange(&second, &second_response, &rand, 1313),
    ];
    assert_eq!(check(&wrong_len), (GnomonError::GnomonErrKey, 1));

    // One vote per key: the ML-DSA key twice, and an Ed25519 key that is
    // its first 32 bytes, which is another key.
    let vouch = |len: usize, low_us: i64, high_us: i64| GnomonVouchAnyKey {
        public_key: key.as_ptr(),
        public_key_len: len,
        low_us,
        high_us,
    };
    let answers = [vouch(1312, -10, 10), vouch(1312, -5, 20), vouch(32, 0, 30)];
    let mut c = GnomonConsensusResult {
        code: GnomonError::GnomonOk,
        has_consensus: false,
        quorum_met: false,
        low_us: 0,
        high_us: 0,
        midpoint_us: 0,
        radius_us: 0,
        voting_keys: 0,
        agreeing_keys: 0,
        outside_keys: 0,
        contradicting_keys: 0,
        regions: 0,
        listed: 0,
        max_liars: 0,
        needed: 0,
        message: [0; GNOMON_MESSAGE_LEN],
    };
    let mut verdicts = [GnomonVerdict::GnomonVerdictNoConsensus; 3];
    let v = verdicts.as_mut_ptr();
    // Two keys: a list of one is refused.
    // SAFETY: arrays of 3 answers and 3 verdicts, and a result struct.
    let code = unsafe { gnomon_consensus_any_key(answers.as_ptr(), 3, 1, 0, 2, v, &mut c) };
    assert_eq!(
        code,
        GnomonError::GnomonErrArgument,
        "{}",
        message(&c.message)
    );
    // Two listed, neither assumed to lie: both must hold the consensus.
    // SAFETY: as above.
    let code = unsafe { gnomon_consensus_any_key(answers.as_ptr(), 3, 2, 0, 2, v, &mut c) };
    assert_eq!(code, GnomonError::GnomonOk, "{}", message(&c.message));
    assert_eq!(
        (c.voting_keys, c.listed, c.max_liars, c.needed),
        (2, 2, 0, 1)
    );
    assert!(c.quorum_met);
    assert_eq!((c.low_us, c.high_us), (0, 10));
    let bad = [vouch(1312, -10, 10), vouch(64, 0, 1)];
    // SAFETY: as above, with 2 answers and no verdicts.
    let code = unsafe {
        gnomon_consensus_any_key(
            bad.as_ptr(),
            2,
            2,
            GNOMON_MAX_LIARS_AUTO,
            1,
            std::ptr::null_mut(),
            &mut c,
        )
    };
    assert_eq!(code, GnomonError::GnomonErrKey);
    assert!(
        message(&c.message).starts_with("answer 1:"),
        "{}",
        message(&c.message)
    );
}
