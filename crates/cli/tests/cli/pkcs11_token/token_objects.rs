//! The key objects inside the token: a private key that does not come
//! out, keys of the wrong kind refused, and a token that fails to sign
//! leaving no files.

use std::path::{Path, PathBuf};

use super::{refused, stderr, token, Hsm, PIN};

/// The module loaded here, logged in to the token labelled `label`.
fn open_in_process(
    hsm: &Hsm,
    label: &str,
) -> (cryptoki::context::Pkcs11, cryptoki::session::Session) {
    use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
    use cryptoki::session::UserType;
    use cryptoki::types::AuthPin;
    let pkcs11 = Pkcs11::new(&hsm.module).unwrap();
    pkcs11
        .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        .unwrap();
    let slot = pkcs11
        .get_slots_with_token()
        .unwrap()
        .into_iter()
        .find(|s| pkcs11.get_token_info(*s).unwrap().label().trim_end() == label)
        .unwrap();
    let session = pkcs11.open_rw_session(slot).unwrap();
    session
        .login(UserType::User, Some(&AuthPin::from(PIN.to_owned())))
        .unwrap();
    (pkcs11, session)
}

/// An Ed25519 pair made here, its halves labelled apart; `sign` is the
/// private key's CKA_SIGN.
fn ed25519_pair(session: &cryptoki::session::Session, public: &str, private: &str, sign: bool) {
    use cryptoki::mechanism::Mechanism;
    use cryptoki::object::Attribute;
    session
        .generate_key_pair(
            &Mechanism::EccEdwardsKeyPairGen,
            &[
                Attribute::Token(true),
                Attribute::Label(public.as_bytes().to_vec()),
                Attribute::EcParams(vec![0x06, 0x03, 0x2b, 0x65, 0x70]),
            ],
            &[
                Attribute::Token(true),
                Attribute::Sensitive(true),
                Attribute::Sign(sign),
                Attribute::Label(private.as_bytes().to_vec()),
            ],
        )
        .unwrap();
}

/// The `*.delegation` files and MANIFESTs under `dir`, at any depth.
fn written(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.map(Result::unwrap) {
        let p = e.path();
        if p.is_dir() {
            found.extend(written(&p));
        } else {
            found.push(p);
        }
    }
    found
}

/// A token that will not sign, or whose private key under the label is
/// not the public key's other half, fails the run at its first signature,
/// before any file is written, for every host.
#[test]
fn a_token_that_fails_to_sign_leaves_no_files() {
    const TEST: &str = "pkcs11_token::token_objects::a_token_that_fails_to_sign_leaves_no_files";
    let Some((hsm, _turn)) = token(TEST, "faulty") else {
        return;
    };
    {
        let (_pkcs11, session) = open_in_process(hsm, "faulty");
        ed25519_pair(&session, "nosign", "nosign", false);
        ed25519_pair(&session, "mixed", "spare-private", true);
        ed25519_pair(&session, "spare-public", "mixed", true);
    }
    let pin = hsm.path("pin");
    for (key, code, says) in [
        ("nosign", 70, "C_Sign"),
        (
            "mixed",
            70,
            "does not check against its public key; nothing written",
        ),
    ] {
        let out_dir = hsm.path(&format!("faulty-{key}"));
        let out = hsm.gnomon(
            &[
                "delegate",
                "--out-dir",
                &out_dir,
                "--hosts",
                "a,b",
                "--pkcs11-pin-file",
                &pin,
            ],
            "faulty",
            key,
        );
        refused(&out, code, says);
        assert_eq!(written(Path::new(&out_dir)), Vec::<PathBuf>::new(), "{key}");
    }
}

/// The key made by `gnomon keygen` is sensitive and not extractable:
/// C_GetAttributeValue on its CKA_VALUE is refused (CKR_ATTRIBUTE_SENSITIVE).
/// And a key of another type under the label is refused by name.
#[test]
fn the_private_key_does_not_come_out_and_other_keys_are_refused() {
    use cryptoki::mechanism::Mechanism;
    use cryptoki::object::{Attribute, AttributeInfo, AttributeType, ObjectClass};

    const TEST: &str =
        "pkcs11_token::token_objects::the_private_key_does_not_come_out_and_other_keys_are_refused";
    let Some((hsm, _turn)) = token(TEST, "sealed") else {
        return;
    };
    hsm.keygen("sealed", "root");

    let (pkcs11, session) = open_in_process(hsm, "sealed");
    let private = session
        .find_objects(&[
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::Label(b"root".to_vec()),
        ])
        .unwrap();
    assert_eq!(private.len(), 1);
    let info = session
        .get_attribute_info(private[0], &[AttributeType::Value])
        .unwrap();
    assert!(
        matches!(info[..], [AttributeInfo::Sensitive]),
        "CKA_VALUE must be refused as sensitive, got {info:?}"
    );
    let flags = session
        .get_attributes(
            private[0],
            &[
                AttributeType::Sensitive,
                AttributeType::Extractable,
                AttributeType::AlwaysSensitive,
                AttributeType::NeverExtractable,
                AttributeType::Token,
                AttributeType::Value,
            ],
        )
        .unwrap();
    for a in &flags {
        match a {
            Attribute::Sensitive(v) | Attribute::AlwaysSensitive(v) => assert!(v, "{a:?}"),
            Attribute::NeverExtractable(v) | Attribute::Token(v) => assert!(v, "{a:?}"),
            Attribute::Extractable(v) => assert!(!v, "{a:?}"),
            Attribute::Value(_) => panic!("the token gave out CKA_VALUE"),
            _ => {}
        }
    }
    assert_eq!(flags.len(), 5, "{flags:?}");

    // An RSA key pair under another label: gnomon must refuse it by type.
    session
        .generate_key_pair(
            &Mechanism::RsaPkcsKeyPairGen,
            &[
                Attribute::Token(true),
                Attribute::ModulusBits(2048.into()),
                Attribute::Label(b"rsa".to_vec()),
            ],
            &[Attribute::Token(true), Attribute::Label(b"rsa".to_vec())],
        )
        .unwrap();
    drop(session);
    drop(pkcs11);
    let pin = hsm.path("pin");
    let out_dir = hsm.path("sealed-out");
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--pkcs11-pin-file", &pin],
        "sealed",
        "rsa",
    );
    refused(&out, 65, "not an Ed25519 key pair");
    assert!(stderr(&out).contains("CKK_RSA"), "{}", stderr(&out));
    let out = hsm.gnomon(&["keygen", "--public-only"], "sealed", "rsa");
    refused(&out, 65, "not an Ed25519 key pair");
    assert!(!Path::new(&out_dir).exists());
}
