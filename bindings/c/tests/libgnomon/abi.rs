//! Every `gnomon_error` code, produced by some input through the exported
//! C functions (called from Rust as C would call them) and checked, against
//! in-process Roughtime servers (gnomon-testkit's fixtures) on loopback.

use std::collections::BTreeSet;
use std::ffi::{c_char, CStr, CString};
use std::net::UdpSocket;
use std::time::Duration;

use gnomon::error::ALL;
use gnomon::*;
use gnomon_protocol::ProfileSet;
use gnomon_testkit::{Fixture, FixtureConfig, Mode};

const RFC: u32 = GNOMON_VERSION_RFC;
const GOOGLE: u32 = GNOMON_VERSION_GOOGLE;

fn exchange(fixture: &Fixture, request: &[u8]) -> Vec<u8> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.send_to(request, fixture.addr()).unwrap();
    let mut buf = vec![0u8; 2048];
    let n = s.recv(&mut buf).expect("an answer within 10 s");
    buf.truncate(n);
    buf
}

fn build(version: u32, nonce: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; GNOMON_REQUEST_SIZE];
    let mut n = 0;
    // SAFETY: valid slices and a valid length pointer.
    let code = unsafe {
        gnomon_build_request(
            version,
            nonce.as_ptr(),
            nonce.len(),
            std::ptr::null(),
            out.as_mut_ptr(),
            out.len(),
            &mut n,
        )
    };
    assert_eq!(code, GnomonError::GnomonOk);
    out.truncate(n);
    out
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

fn verify(request: &[u8], response: &[u8], key: &[u8; 32]) -> (GnomonError, GnomonResult) {
    let mut r = zeroed_result();
    // SAFETY: valid slices, a 32-byte key and a result struct.
    let code = unsafe {
        gnomon_verify(
            request.as_ptr(),
            request.len(),
            response.as_ptr(),
            response.len(),
            key.as_ptr(),
            &mut r,
        )
    };
    assert_eq!(r.code, code, "the result carries the code returned");
    assert!(!message(&r.message).is_empty());
    (code, r)
}

fn query(address: &str, key: &[u8; 32], timeout_ms: u32) -> (GnomonError, GnomonResult) {
    let address = CString::new(address).unwrap();
    let mut r = zeroed_result();
    // SAFETY: a C string, a 32-byte key and a result struct.
    let code = unsafe { gnomon_query(address.as_ptr(), key.as_ptr(), 0, timeout_ms, &mut r) };
    assert_eq!(r.code, code);
    (code, r)
}

/// Request, response, rand (empty for the first) and key of one exchange.
type Recorded<'a> = (&'a [u8], &'a [u8], &'a [u8], [u8; 32]);

fn chain(links: &[Recorded<'_>]) -> (GnomonError, GnomonChainResult) {
    let exchanges: Vec<GnomonExchange> = links
        .iter()
        .map(|(req, resp, rand, key)| GnomonExchange {
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
        })
        .collect();
    let mut r = GnomonChainResult {
        code: GnomonError::GnomonOk,
        index: 0,
        other: 0,
        message: [0; GNOMON_MESSAGE_LEN],
    };
    // SAFETY: `exchanges` holds valid pointers into `links`.
    let code = unsafe { gnomon_check_chain(exchanges.as_ptr(), exchanges.len(), &mut r) };
    assert_eq!(r.code, code);
    (code, r)
}

/// The nonce chained from `previous` with `rand`, in `version`'s format.
fn chained(version: u32, previous: &[u8], rand: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; GNOMON_MAX_NONCE];
    let mut n = 0;
    // SAFETY: valid slices and a length pointer.
    let code = unsafe {
        gnomon_chain_nonce(
            version,
            previous.as_ptr(),
            previous.len(),
            rand.as_ptr(),
            rand.len(),
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
fn every_error_code_is_produced() {
    use GnomonError::*;
    let mut seen = BTreeSet::new();
    let mut saw = |code: GnomonError, want: GnomonError, what: &str| {
        assert_eq!(code, want, "{what}");
        seen.insert(want as i32);
    };

    let honest = Fixture::honest(ProfileSet::ALL, 1);
    let key = honest.public_key();
    let mut wrong = key;
    wrong[0] ^= 1;
    let req = build(RFC, &[7; 32]);
    let resp = exchange(&honest, &req);

    let (code, r) = verify(&req, &resp, &key);
    saw(code, GnomonOk, "an honest answer");
    assert_eq!((r.version, message(&r.message).as_str()), (1, "success"));
    assert!(r.midpoint_us > 1_700_000_000_000_000 && r.radius_us > 0);

    // SAFETY (every call below): pointers are valid or deliberately NULL.
    let mut r = zeroed_result();
    let code = unsafe {
        gnomon_verify(
            req.as_ptr(),
            req.len(),
            resp.as_ptr(),
            resp.len(),
            std::ptr::null(),
            &mut r,
        )
    };
    saw(code, GnomonErrNull, "no key");
    saw(verify(&req, &[], &key).0, GnomonErrEmpty, "empty response");
    let huge = vec![0u8; GNOMON_MAX_INPUT + 1];
    saw(
        verify(&req, &huge, &key).0,
        GnomonErrTooLong,
        "oversize response",
    );
    let (mut out, mut n) = (vec![0u8; GNOMON_REQUEST_SIZE], 0);
    let code = unsafe {
        gnomon_build_request(
            RFC,
            [1u8; 32].as_ptr(),
            32,
            std::ptr::null(),
            out.as_mut_ptr(),
            1023,
            &mut n,
        )
    };
    saw(code, GnomonErrBufferTooSmall, "1023-byte buffer");
    let code = unsafe {
        gnomon_build_request(
            0x7777,
            [1u8; 32].as_ptr(),
            32,
            std::ptr::null(),
            out.as_mut_ptr(),
            1024,
            &mut n,
        )
    };
    saw(code, GnomonErrUnknownVersion, "version 0x7777");
    let code = unsafe {
        gnomon_build_request(
            RFC,
            [1u8; 64].as_ptr(),
            64,
            std::ptr::null(),
            out.as_mut_ptr(),
            1024,
            &mut n,
        )
    };
    saw(code, GnomonErrNonceLength, "a 64-byte nonce for version 1");
    let text = CString::new("c2hvcnQ=").unwrap();
    let code = unsafe { gnomon_parse_public_key(text.as_ptr(), out.as_mut_ptr()) };
    saw(code, GnomonErrKey, "a 5-byte key");
    saw(
        verify(b"not a request", &resp, &key).0,
        GnomonErrRequest,
        "garbage request",
    );

    let garbage = Fixture::start(FixtureConfig {
        mode: Mode::Garbage,
        seed: 1,
        ..FixtureConfig::default()
    });
    saw(
        verify(&req, &exchange(&garbage, &req), &key).0,
        GnomonErrMalformed,
        "garbage answer",
    );

    // The answer to a draft-08 request checked against a version-1 request.
    let d8 = build(0x8000_0008, &[7; 32]);
    saw(
        verify(&req, &exchange(&honest, &d8), &key).0,
        GnomonErrVersion,
        "a version not offered",
    );

    // A downgrade needs a server whose signed VERS lists a better version
    // than it answers; the fixtures list only what they answer, so the
    // detection is crates/protocol/tests/protocol/verify_errors.rs::
    // downgrade_is_detected_through_signed_vers, and here its code.
    let downgrade = gnomon_protocol::VerifyError::Downgrade {
        answered: gnomon_protocol::Version::DRAFT_12_TO_19,
        better: gnomon_protocol::Version::RFC,
    };
    saw(
        error::of_verify(&downgrade),
        GnomonErrDowngrade,
        "a downgrade",
    );

    let (code, r) = verify(&req, &resp, &wrong);
    saw(code, GnomonErrDelegationSignature, "the wrong key");
    assert_eq!(
        (r.midpoint_us, r.radius_us, r.version),
        (0, 0, 0),
        "a failure carries no time"
    );

    let forged = Fixture::start(FixtureConfig {
        mode: Mode::BadSignature,
        seed: 1,
        ..FixtureConfig::default()
    });
    saw(
        verify(&req, &exchange(&forged, &req), &key).0,
        GnomonErrResponseSignature,
        "a bit flipped in SIG",
    );

    // An answer to another nonce: version 1 carries the nonce (NONC) ...
    saw(
        verify(&build(RFC, &[8; 32]), &resp, &key).0,
        GnomonErrNonce,
        "another request's answer",
    );
    // ... Google's only proves it through the Merkle path.
    let g = build(GOOGLE, &[7; 64]);
    let g_resp = exchange(&honest, &g);
    saw(
        verify(&build(GOOGLE, &[8; 64]), &g_resp, &key).0,
        GnomonErrMerkle,
        "another Google request",
    );

    // A midpoint outside the delegation needs a forged response signed by
    // a real online key (the fixtures delegate around whatever clock they
    // sign with): the detection is crates/protocol/tests/protocol/verify_errors.rs::
    // times, and here its code.
    let outside = gnomon_protocol::VerifyError::OutsideDelegation;
    saw(
        error::of_verify(&outside),
        GnomonErrTime,
        "outside the delegation",
    );

    // A chain: honest, then a server an hour behind (radius 1 s each).
    let behind = Fixture::start(FixtureConfig {
        offset_us: -3_600_000_000,
        seed: 2,
        ..FixtureConfig::default()
    });
    let rand = [5u8; 32];
    let req2 = build(RFC, &chained(RFC, &resp, &rand));
    let resp2 = exchange(&behind, &req2);
    let (code, r) = chain(&[
        (&req, &resp, &[], key),
        (&req2, &resp2, &rand, behind.public_key()),
    ]);
    saw(code, GnomonErrCausality, &message(&r.message));
    assert_eq!((r.index, r.other), (1, 0));
    let (code, r) = chain(&[
        (&req, &resp, &[], key),
        (&req2, &resp2, &[6u8; 32], behind.public_key()),
    ]);
    saw(code, GnomonErrChainNonce, &message(&r.message));
    assert_eq!((r.index, r.other), (1, 1));
    let req3 = build(RFC, &chained(RFC, &resp, &rand));
    let resp3 = exchange(&honest, &req3);
    let (code, _) = chain(&[(&req, &resp, &[], key), (&req3, &resp3, &rand, key)]);
    assert_eq!(code, GnomonOk, "an honest chain");

    saw(
        query("no port here", &key, 1000).0,
        GnomonErrAddress,
        "no port",
    );
    let silent = Fixture::start(FixtureConfig {
        mode: Mode::Silent,
        tcp: false,
        seed: 1,
        ..FixtureConfig::default()
    });
    let (code, r) = query(&silent.addr().to_string(), &key, 300);
    saw(code, GnomonErrTimeout, &message(&r.message));
    // A loopback port nothing listens on (the kernel gave it out and took
    // it back): ICMP "port unreachable", not the timeout, however long the
    // timeout is.
    let closed = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (code, r) = query(&closed.to_string(), &key, 60_000);
    saw(code, GnomonErrRefused, &message(&r.message));
    assert!(
        message(&r.message).starts_with("the port is closed"),
        "{}",
        message(&r.message)
    );
    saw(
        query(&honest.addr().to_string(), &key, 0).0,
        GnomonErrArgument,
        "a timeout of 0",
    );
    let (code, r) = query(&honest.addr().to_string(), &key, 5000);
    assert_eq!((code, r.version), (GnomonOk, 1), "{}", message(&r.message));

    // No random bytes: the query fails locally (injected through the safe
    // layer the C function calls; the OS source cannot be made to fail).
    let mut m = [0u8; GNOMON_MESSAGE_LEN];
    let code = query::query(
        &honest.addr().to_string(),
        (&key).into(),
        0,
        5000,
        NoEntropy,
        &mut m,
    )
    .unwrap_err();
    saw(code, GnomonErrLocal, "the random source failed");
    // A panic inside an entry point's body: the guard every entry point
    // runs its body in turns it into a code.
    saw(guard(|| panic!("a bug")), GnomonErrInternal, "a panic");
    // Each way a relayed proof fails has its own code (the bundles behind
    // them: tests/libgnomon/proof_device/, a relay against real servers).
    {
        use gnomon_protocol::proof::{EntrySet, ProofError as P};
        for (e, want) in [
            (P::Truncated, GnomonErrProofTruncated),
            (P::Malformed("magic"), GnomonErrProofMalformed),
            (P::UnknownFormat(2), GnomonErrProofMalformed),
            (P::DeviceValueLength(15), GnomonErrProofMalformed),
            (P::WrongNonce, GnomonErrProofWrongNonce),
            (P::Binding, GnomonErrProofBinding),
            (P::UnknownKey(1), GnomonErrProofUnknownKey),
            (P::Signature(1), GnomonErrProofSignature),
            (P::NotForRequest(1), GnomonErrProofNotForRequest),
            (
                P::Response(1, gnomon_protocol::VerifyError::Time),
                GnomonErrProofResponse,
            ),
            (P::Link(1), GnomonErrProofLink),
            (
                P::Contradiction {
                    earlier: 0,
                    later: 1,
                    majority: None,
                },
                GnomonErrProofContradiction,
            ),
            (
                P::Liar {
                    liars: EntrySet(0b10),
                    majority: None,
                },
                GnomonErrProofLiar,
            ),
            (
                P::TooFewKeys {
                    present: 2,
                    needed: 3,
                    assumption: gnomon_protocol::quorum::Assumption::new(5, 1),
                },
                GnomonErrProofTooFewKeys,
            ),
            (
                P::NoQuorum {
                    agreeing: 1,
                    needed: 2,
                },
                GnomonErrProofNoQuorum,
            ),
            (P::TooWide { radius_us: 1 }, GnomonErrProofTooWide),
        ] {
            let r = proven(&Err(e));
            assert_eq!(r.code, want, "{e:?}");
            assert!(!r.has_interval, "{e:?}");
            saw(of_proof(&e), want, &format!("{e:?}"));
            // Too few servers in the bundle: how many it carries, how many
            // it had to, and the assumption, for the device to say.
            if want == GnomonErrProofTooFewKeys {
                let got = (r.answering_keys, r.needed_keys, r.max_liars, r.pinned);
                assert_eq!(got, (2, 3, 1, 5), "{e:?}");
            }
        }
    }

    // Each refusal of a signed server list has its own code (the lists
    // behind them, signed by ssh-keygen: tests/c/signed_list.c, from
    // tests/libgnomon/signed_list.rs).
    {
        use gnomon_protocol::signed_list::RefusalKind as K;
        for (kind, want) in [
            (K::Signature, GnomonErrListSignature),
            (K::OtherKey, GnomonErrListOtherKey),
            (K::Expired, GnomonErrListExpired),
            (K::Replayed, GnomonErrListReplayed),
            (K::Reused, GnomonErrListReused),
            (K::Malformed, GnomonErrListMalformed),
        ] {
            saw(of_refusal(kind), want, kind.label());
        }
    }

    let all: BTreeSet<i32> = ALL.iter().map(|c| *c as i32).collect();
    assert_eq!(
        seen,
        all,
        "codes never produced: {:?}",
        all.difference(&seen).collect::<Vec<_>>()
    );
    // And the numbers are the documented, dense, fixed ones.
    assert_eq!(all, (0..ALL.len() as i32).collect());
}

struct NoEntropy;

impl gnomon_client::Entropy for NoEntropy {
    fn fill(&mut self, _: &mut [u8]) -> Result<(), gnomon_client::EntropyError> {
        Err(gnomon_client::EntropyError)
    }
}

#[test]
fn error_strings_are_static_distinct_and_cover_unknown_values() {
    let mut texts = BTreeSet::new();
    for code in ALL {
        // SAFETY: gnomon_error_string never returns NULL.
        let s = unsafe { CStr::from_ptr(gnomon_error_string(code as i32)) };
        assert!(
            texts.insert(s.to_str().unwrap().to_owned()),
            "{code:?} repeats a sentence"
        );
    }
    for bad in [-1, ALL.len() as i32, i32::MAX, i32::MIN] {
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(gnomon_error_string(bad)) };
        assert_eq!(s.to_str().unwrap(), "unknown error code");
    }
}

#[test]
fn a_panic_becomes_an_error_code() {
    assert_eq!(guard(|| panic!("a bug")), GnomonError::GnomonErrInternal);
    assert_eq!(guard(|| GnomonError::GnomonOk), GnomonError::GnomonOk);
}
