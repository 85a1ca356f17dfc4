//! Examples: keys and SSHSIG, against a vector `ssh-keygen -Y sign` made.

use alloc::string::String;
use alloc::vec::Vec;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::sshsig::{self, SigError};
use super::testing::Monitor;
use super::{KeyError, MonitorKey, NAMESPACE};

/// `ssh-keygen -t ed25519 -C monitor-a`, its `-l` fingerprint, and
/// `ssh-keygen -Y sign -n roughtime-server-list` of [`VECTOR_MESSAGE`].
const VECTOR_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMf2zOegmB2XoCNGD/4dpX993WjEaZMcpLp20OgoYgCO monitor-a";
const VECTOR_FINGERPRINT: &str = "SHA256:MB8YDXwrd6Y7bosh1ROYsV1j8+WXCMl8el7sLQKX+Ew";
const VECTOR_MESSAGE: &[u8] = br#"{"servers":[]}"#;
const VECTOR_SIG: &str = "-----BEGIN SSH SIGNATURE-----
U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgx/bM56CYHZegI0YP/h2lf33daM
RpkxykunbQ6ChiAI4AAAAVcm91Z2h0aW1lLXNlcnZlci1saXN0AAAAAAAAAAZzaGE1MTIA
AABTAAAAC3NzaC1lZDI1NTE5AAAAQHi7BhlLf6R5ms4XQKepMBe6F268GFc4zVSkEMbNe0
K3KCYb1BFHwBqIIIrwZzxuey05CeGjbZAl+xxV1SW2oQE=
-----END SSH SIGNATURE-----
";

fn vector_key() -> MonitorKey {
    MonitorKey::parse(VECTOR_KEY).unwrap()
}

/// The blob inside an armored signature.
fn blob(armored: &str) -> Vec<u8> {
    let b64: String = armored
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    STANDARD.decode(b64).unwrap()
}

/// An armored signature around any blob, wrapped as ssh-keygen wraps it.
fn armored(blob: &[u8]) -> Vec<u8> {
    let b64 = STANDARD.encode(blob);
    let mut out = String::from("-----BEGIN SSH SIGNATURE-----\n");
    for line in b64.as_bytes().chunks(70) {
        out.push_str(core::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    out.push_str("-----END SSH SIGNATURE-----\n");
    out.into_bytes()
}

#[test]
fn a_key_reads_and_writes_as_openssh_does() {
    let k = vector_key();
    assert_eq!(k.comment(), "monitor-a");
    assert_eq!(k.fingerprint(), VECTOR_FINGERPRINT);
    assert_eq!(k.openssh(), VECTOR_KEY);
    let bare = MonitorKey::from_ed25519(*k.public(), "");
    assert_eq!(bare.openssh(), VECTOR_KEY.trim_end_matches(" monitor-a"));
    assert_eq!(MonitorKey::parse(&bare.openssh()).unwrap(), bare);
    // A .pub file ends with a newline; a comment may hold spaces.
    let spaced = MonitorKey::parse(&alloc::format!("{}  the  monitor\n", bare.openssh())).unwrap();
    assert_eq!(spaced.comment(), "the  monitor");
}

#[test]
fn keys_that_are_not_ed25519_lines_are_refused_with_why() {
    let b64 = VECTOR_KEY.split(' ').nth(1).unwrap();
    let rsa_blob = {
        let mut b = Vec::new();
        sshsig::put_string(&mut b, b"ssh-rsa");
        sshsig::put_string(&mut b, &[1; 32]);
        STANDARD.encode(b)
    };
    let long_blob = {
        let mut b = STANDARD.decode(b64).unwrap();
        b.push(0);
        STANDARD.encode(b)
    };
    let cases: [(String, KeyError); 6] = [
        (String::from(" \n"), KeyError::Empty),
        (
            alloc::format!("ssh-rsa {b64}"),
            KeyError::KeyType(String::from("ssh-rsa")),
        ),
        (String::from("ssh-ed25519"), KeyError::MissingKey),
        (String::from("ssh-ed25519 AAAA!"), KeyError::Base64),
        (
            alloc::format!("ssh-ed25519 {rsa_blob}"),
            KeyError::Blob("not an ssh-ed25519 key"),
        ),
        (
            alloc::format!("ssh-ed25519 {long_blob}"),
            KeyError::Blob("bytes after the key"),
        ),
    ];
    for (text, want) in cases {
        let got = MonitorKey::parse(&text).unwrap_err();
        assert_eq!(got, want, "{text:?}");
        let words = alloc::format!("{got}");
        assert!(
            words.contains("ssh-ed25519") || words.contains(".pub"),
            "{words}"
        );
    }
}

#[test]
fn ssh_keygen_signatures_verify_and_ours_are_byte_for_byte_the_same() {
    let k = vector_key();
    sshsig::verify(VECTOR_SIG.as_bytes(), VECTOR_MESSAGE, NAMESPACE, k.public()).unwrap();
    assert_eq!(
        sshsig::signer_of(VECTOR_SIG.as_bytes()).unwrap(),
        *k.public()
    );
    // Ed25519 is deterministic: the same signature, armored by us, is the
    // same text ssh-keygen wrote (70 columns, final newline).
    let b = blob(VECTOR_SIG);
    let sig: [u8; 64] = b[b.len() - 64..].try_into().unwrap();
    assert_eq!(sshsig::armor(k.public(), NAMESPACE, &sig), VECTOR_SIG);
    // CRLF line ends (a file copied through Windows) read the same.
    let crlf = VECTOR_SIG.replace('\n', "\r\n");
    sshsig::verify(crlf.as_bytes(), VECTOR_MESSAGE, NAMESPACE, k.public()).unwrap();
}

#[test]
fn a_changed_message_namespace_or_key_does_not_verify() {
    let k = vector_key();
    let sig = VECTOR_SIG.as_bytes();
    assert_eq!(
        sshsig::verify(sig, br#"{"servers":[ ]}"#, NAMESPACE, k.public()),
        Err(SigError::Invalid)
    );
    assert_eq!(
        sshsig::verify(sig, VECTOR_MESSAGE, "git", k.public()),
        Err(SigError::Namespace {
            found: String::from(NAMESPACE)
        })
    );
    assert_eq!(
        sshsig::verify(sig, VECTOR_MESSAGE, NAMESPACE, &[7; 32]),
        Err(SigError::OtherKey(*k.public()))
    );
    // Signed for git, offered as a list.
    let m = Monitor::new(3, "m");
    let git = m.sign_in("git", VECTOR_MESSAGE);
    assert!(matches!(
        sshsig::verify(&git, VECTOR_MESSAGE, NAMESPACE, m.key().public()),
        Err(SigError::Namespace { found }) if found == "git"
    ));
}

#[test]
fn sha256_signatures_verify_too() {
    // ssh-keygen -Y sign -O hashalg=sha256: the same layout, H = SHA-256.
    use ed25519_dalek::Signer;
    use sha2::{Digest, Sha256};
    let m = Monitor::new(9, "m");
    let mut data = Vec::from(&b"SSHSIG"[..]);
    for part in [
        NAMESPACE.as_bytes(),
        b"",
        b"sha256",
        &Sha256::digest(VECTOR_MESSAGE)[..],
    ] {
        sshsig::put_string(&mut data, part);
    }
    let sig = m.signing.sign(&data).to_bytes();
    let ours = sshsig::armor(m.key().public(), NAMESPACE, &sig);
    let mut b = blob(&ours);
    let at = b.windows(6).position(|w| w == b"sha512").unwrap();
    b[at..at + 6].copy_from_slice(b"sha256");
    let sha256 = armored(&b);
    sshsig::verify(&sha256, VECTOR_MESSAGE, NAMESPACE, m.key().public()).unwrap();
    // The same signature read as sha512 does not verify.
    assert_eq!(
        sshsig::verify(ours.as_bytes(), VECTOR_MESSAGE, NAMESPACE, m.key().public()),
        Err(SigError::Invalid)
    );
}

#[test]
fn every_truncation_and_every_flipped_byte_is_refused_without_panic() {
    let k = vector_key();
    let good = blob(VECTOR_SIG);
    for n in 0..good.len() {
        assert!(
            sshsig::verify(&armored(&good[..n]), VECTOR_MESSAGE, NAMESPACE, k.public()).is_err(),
            "{n}"
        );
        assert!(
            sshsig::signer_of(&armored(&good[..n])).is_err() || n >= 65,
            "{n}"
        );
    }
    for i in 0..good.len() {
        for bit in [0x01u8, 0x80] {
            let mut b = good.clone();
            b[i] ^= bit;
            assert!(
                sshsig::verify(&armored(&b), VECTOR_MESSAGE, NAMESPACE, k.public()).is_err(),
                "byte {i}"
            );
        }
    }
    let text = VECTOR_SIG.as_bytes();
    for i in 0..text.len() {
        let mut t = text.to_vec();
        t[i] ^= 0x20;
        assert!(
            sshsig::verify(&t, VECTOR_MESSAGE, NAMESPACE, k.public()).is_err(),
            "char {i}"
        );
    }
}

#[test]
fn malformed_blobs_say_what_is_wrong() {
    let good = blob(VECTOR_SIG);
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        edit(&mut b);
        sshsig::signer_of(&armored(&b)).unwrap_err()
    };
    assert_eq!(with(&|b| b[0] = b'X'), SigError::Magic);
    assert_eq!(with(&|b| b[9] = 2), SigError::Version(2));
    assert_eq!(
        with(&|b| b.push(0)),
        SigError::Structure("bytes after the signature")
    );
    // Key type "ssh-ed25519" at offset 18..29 becomes another 11-byte name.
    assert_eq!(
        with(&|b| b[18..29].copy_from_slice(b"ssh-ed448xx")),
        SigError::KeyType
    );
    let hash_at = good.windows(6).position(|w| w == b"sha512").unwrap();
    assert_eq!(
        with(&|b| b[hash_at..hash_at + 6].copy_from_slice(b"sha1xx")),
        SigError::HashAlgorithm(String::from("sha1xx"))
    );
    // A huge length field must not be trusted.
    assert_eq!(
        with(&|b| b[10..14].copy_from_slice(&u32::MAX.to_be_bytes())),
        SigError::Structure("truncated public key")
    );
    for bad in [
        &b""[..],
        b"-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n",
        b"-----BEGIN SSH SIGNATURE-----\nU1NI!!\n-----END SSH SIGNATURE-----\n",
        b"-----BEGIN SSH SIGNATURE-----U1NIU0lH\n-----END SSH SIGNATURE-----",
        b"-----BEGIN PGP SIGNATURE-----\nU1NIU0lH\n-----END PGP SIGNATURE-----\n",
        &[0xff, 0xfe],
    ] {
        assert_eq!(sshsig::signer_of(bad), Err(SigError::Armor), "{bad:?}");
    }
    let huge = alloc::vec![b'A'; 1 << 20];
    assert_eq!(sshsig::signer_of(&huge), Err(SigError::Armor));
}

#[test]
fn a_reserved_field_that_is_not_empty_is_refused() {
    let good = blob(VECTOR_SIG);
    // namespace string ends, then uint32 0 (reserved): make it "x".
    let ns_at = good
        .windows(NAMESPACE.len())
        .position(|w| w == NAMESPACE.as_bytes())
        .unwrap();
    let reserved_at = ns_at + NAMESPACE.len();
    let mut b = good[..reserved_at].to_vec();
    b.extend_from_slice(&[0, 0, 0, 1, b'x']);
    b.extend_from_slice(&good[reserved_at + 4..]);
    assert_eq!(
        sshsig::signer_of(&armored(&b)),
        Err(SigError::Structure("the reserved field is not empty"))
    );
}

#[test]
fn the_allocation_free_key_reader_reads_what_the_other_does() {
    use super::in_place::parse_key;
    let k = vector_key();
    assert_eq!(parse_key(VECTOR_KEY), Some(*k.public()));
    assert_eq!(
        parse_key(&alloc::format!("  {VECTOR_KEY}\n")),
        Some(*k.public())
    );
    let b64 = VECTOR_KEY.split(' ').nth(1).unwrap();
    for bad in [
        String::new(),
        String::from("ssh-ed25519"),
        alloc::format!("ssh-rsa {b64}"),
        alloc::format!("ssh-ed25519 {b64}AAAA"),
        alloc::format!("ssh-ed25519 {}", &b64[..b64.len() - 4]),
        String::from("ssh-ed25519 AAAA!"),
    ] {
        assert_eq!(parse_key(&bad), None, "{bad:?}");
        assert!(MonitorKey::parse(&bad).is_err(), "{bad:?}");
    }
}
