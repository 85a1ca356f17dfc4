//! Every refusal an operator meets says what is wrong, with its exit code.

use std::fs::Permissions;
use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::Path;
use std::process::Command;

use super::{refused, stderr, token, PIN};

#[test]
fn every_refusal_says_what_is_wrong() {
    const TEST: &str = "pkcs11_token::refusals::every_refusal_says_what_is_wrong";
    let Some((hsm, _turn)) = token(TEST, "errors") else {
        return;
    };
    hsm.keygen("errors", "root");
    let public_only = |module: &str, token: &str, key: &str| {
        gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(["keygen", "--public-only", "--pkcs11-module", module])
            .args(["--pkcs11-token", token, "--pkcs11-key", key])
            .output()
            .unwrap()
    };
    let missing = hsm.path("no-such-module.so");
    refused(
        &public_only(&missing, "errors", "root"),
        66,
        "no-such-module.so: no such file",
    );
    let text = hsm.path("pin");
    refused(
        &public_only(&text, "errors", "root"),
        65,
        "is not a PKCS#11 module",
    );
    // A real shared library that is not a PKCS#11 module.
    if let Some(libc) = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
    ]
    .iter()
    .find(|p| Path::new(p).exists())
    {
        refused(
            &public_only(libc, "errors", "root"),
            65,
            "C_GetFunctionList",
        );
    }
    refused(
        &public_only(hsm.module(), "no-such-token", "root"),
        66,
        "no token labelled \"no-such-token\"",
    );
    refused(
        &public_only(hsm.module(), "errors", "no-such-key"),
        66,
        "holds no key labelled \"no-such-key\"",
    );

    // Delegating: nothing may be left behind by any refusal.
    let out_dir = hsm.path("errors-out");
    let delegate = |key: &str, pin: &[&str]| {
        let mut args = vec!["delegate", "--out-dir", &out_dir, "--count", "2"];
        args.extend_from_slice(pin);
        hsm.gnomon(&args, "errors", key)
    };
    let wrong = hsm.path("wrong-pin");
    refused(
        &delegate("root", &["--pkcs11-pin-file", &wrong]),
        65,
        "wrong PIN for token \"errors\"",
    );
    refused(&delegate("root", &[]), 64, "GNOMON_PKCS11_PIN");
    let absent = hsm.path("absent-pin");
    refused(
        &delegate("root", &["--pkcs11-pin-file", &absent]),
        66,
        "absent-pin",
    );
    let pin = hsm.path("pin");
    refused(
        &delegate("no-such-key", &["--pkcs11-pin-file", &pin]),
        66,
        "holds no key labelled",
    );
    // The right PIN in a file group or others can read, or through a
    // symbolic link, is refused with the fix, by delegate and keygen alike.
    let loose = hsm.path("loose-pin");
    std::fs::write(&loose, format!("{PIN}\n")).unwrap();
    for mode in [0o644, 0o640] {
        std::fs::set_permissions(&loose, Permissions::from_mode(mode)).unwrap();
        let out = delegate("root", &["--pkcs11-pin-file", &loose]);
        refused(&out, 66, &format!("PIN file {loose} (owner uid "));
        refused(&out, 66, &format!("mode {mode:04o}) refused"));
        refused(&out, 66, &format!("run `chmod 600 {loose}`"));
    }
    let keygen = |args: &[&str]| {
        let mut all = vec!["keygen", "--pkcs11-pin-file", &loose];
        all.extend_from_slice(args);
        hsm.gnomon(&all, "errors", "loose")
    };
    refused(&keygen(&[]), 66, "chmod 600");
    refused(&keygen(&["--public-only"]), 66, "chmod 600");
    // keygen made no key under that label before refusing.
    refused(
        &public_only(hsm.module(), "errors", "loose"),
        66,
        "holds no key labelled \"loose\"",
    );
    let link = hsm.path("link-pin");
    symlink(&pin, &link).unwrap();
    refused(
        &delegate("root", &["--pkcs11-pin-file", &link]),
        66,
        "is a symbolic link, which is not followed",
    );
    assert!(!Path::new(&out_dir).exists(), "a refusal wrote {out_dir}");

    // The PIN never on the command line: there is no option for it.
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--pkcs11-pin", PIN],
        "errors",
        "root",
    );
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    // A key file and a token at once is a usage error.
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--key-file", &pin],
        "errors",
        "root",
    );
    refused(&out, 64, "cannot be used with");
}

/// A token whose user PIN is locked is named as such, not as a wrong PIN.
/// SoftHSM2 never locks a PIN itself, however often it is wrong, so the
/// token's flags are set in its file as a locking token would set them:
/// CKF_USER_PIN_LOCKED in the CKA_OS_TOKENFLAGS entry of token.object.
#[test]
fn a_locked_pin_is_named() {
    const TEST: &str = "pkcs11_token::refusals::a_locked_pin_is_named";
    let Some((hsm, _turn)) = token(TEST, "locked") else {
        return;
    };
    hsm.keygen("locked", "root");
    let mut label = b"locked".to_vec();
    label.resize(32, b' ');
    let object = std::fs::read_dir(hsm.dir.join("tokens"))
        .unwrap()
        .map(|e| e.unwrap().path().join("token.object"))
        .find(|p| {
            std::fs::read(p).is_ok_and(|b| b.windows(label.len()).any(|w| w == label.as_slice()))
        })
        .expect("the token's file");
    let mut bytes = std::fs::read(&object).unwrap();
    // Attribute CKA_OS_TOKENFLAGS (0x8000534b), stored as an unsigned long
    // (type 2), then its 8-byte big-endian value.
    let entry: [u8; 16] = [0, 0, 0, 0, 0x80, 0, 0x53, 0x4b, 0, 0, 0, 0, 0, 0, 0, 2];
    let at = bytes
        .windows(entry.len())
        .position(|w| w == entry)
        .expect("CKA_OS_TOKENFLAGS in token.object (SoftHSM2's file format changed?)")
        + entry.len();
    let flags = u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
    bytes[at..at + 8].copy_from_slice(&(flags | 0x0004_0000).to_be_bytes());
    std::fs::write(&object, bytes).unwrap();

    let pin = hsm.path("pin");
    let out_dir = hsm.path("locked-out");
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--pkcs11-pin-file", &pin],
        "locked",
        "root",
    );
    refused(&out, 65, "is locked");
    assert!(
        stderr(&out).contains("security officer"),
        "{}",
        stderr(&out)
    );
    assert!(!Path::new(&out_dir).exists());
}

/// A module that wraps SoftHSM2 and leaves Ed25519 out of the mechanism
/// list: a real PKCS#11 module, as a token without EdDSA would answer.
const NO_EDDSA_SHIM: &str = r#"
#include <dlfcn.h>
typedef unsigned long ulong;
/* CK_FUNCTION_LIST of PKCS#11 2.40: a CK_VERSION, then 68 functions in the
   standard's order; C_GetMechanismList is the eighth. */
struct list { unsigned char major, minor; void *fn[68]; };
typedef ulong (*mechanisms_t)(ulong, ulong *, ulong *);
static struct list copy;
static mechanisms_t real_mechanisms;
static ulong without_eddsa(ulong slot, ulong *list, ulong *count) {
    ulong rv = real_mechanisms(slot, list, count), kept = 0;
    if (rv != 0 || list == 0) return rv;
    for (ulong i = 0; i < *count; i++)
        /* CKM_EC_EDWARDS_KEY_PAIR_GEN, CKM_EDDSA */
        if (list[i] != 0x1055 && list[i] != 0x1057) list[kept++] = list[i];
    *count = kept;
    return rv;
}
ulong C_GetFunctionList(struct list **out) {
    void *real = dlopen(REAL, RTLD_NOW | RTLD_LOCAL);
    if (real == 0) return 5; /* CKR_GENERAL_ERROR */
    ulong (*get)(struct list **) = (ulong (*)(struct list **))dlsym(real, "C_GetFunctionList");
    struct list *list;
    ulong rv = get(&list);
    if (rv != 0) return rv;
    copy = *list;
    real_mechanisms = (mechanisms_t)copy.fn[7];
    copy.fn[7] = (void *)without_eddsa;
    *out = &copy;
    return 0;
}
"#;

#[test]
fn a_token_without_eddsa_is_refused_by_name() {
    const TEST: &str = "pkcs11_token::refusals::a_token_without_eddsa_is_refused_by_name";
    let Some((hsm, _turn)) = token(TEST, "no-eddsa") else {
        return;
    };
    let source = hsm.dir.join("no-eddsa.c");
    let shim = hsm.dir.join("no-eddsa.so");
    std::fs::write(&source, NO_EDDSA_SHIM).unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(&source)
        .arg(format!("-DREAL=\"{}\"", hsm.module()))
        .arg("-ldl")
        .output();
    match built {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("cc: {}", stderr(&out)),
        Err(e) => {
            gnomon_testkit::skip(TEST, &format!("no C compiler (cc: {e}) to build the shim"));
            return;
        }
    }
    let pin = hsm.path("pin");
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["keygen", "--pkcs11-module", shim.to_str().unwrap()])
        .args(["--pkcs11-token", "no-eddsa", "--pkcs11-key", "root"])
        .args(["--pkcs11-pin-file", &pin])
        .output()
        .unwrap();
    refused(&out, 65, "does not offer CKM_EC_EDWARDS_KEY_PAIR_GEN");
    // The same token through SoftHSM2 itself holds no key: nothing was made.
    let out = hsm.gnomon(&["keygen", "--public-only"], "no-eddsa", "root");
    refused(&out, 66, "holds no key labelled \"root\"");
}
