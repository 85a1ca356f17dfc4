//! SSHSIG as others write and read it: the `ssh-key` crate (RustCrypto) and
//! OpenSSH's own `ssh-keygen -Y`, each way round against ours.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use ed25519_dalek::{Signer, SigningKey};
use gnomon_protocol::signed_list::{sshsig, MonitorKey, Pins, Seen, NAMESPACE};
use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

const LIST: &[u8] = br#"{"servers":[],"observatory":{"monitor":"m","sequence":7,"published":"2026-12-02T14:00:00Z","expires":"2026-12-03T14:00:00Z"}}"#;
const NOW: i64 = 1_796_220_000;

fn ssh_key_pair(seed: u8) -> PrivateKey {
    let pair = ssh_key::private::Ed25519Keypair::from_seed(&[seed; 32]);
    let mut key = PrivateKey::from(pair);
    key.set_comment("monitor-a");
    key
}

#[test]
fn ssh_key_signatures_verify_with_ours() {
    let private = ssh_key_pair(5);
    let line = private.public_key().to_openssh().unwrap();
    let ours = MonitorKey::parse(&line).unwrap();
    assert_eq!(ours.openssh(), line);
    assert_eq!(
        ours.fingerprint(),
        private
            .public_key()
            .fingerprint(HashAlg::Sha256)
            .to_string()
    );
    for hash in [HashAlg::Sha512, HashAlg::Sha256] {
        let sig = private.sign(NAMESPACE, hash, LIST).unwrap();
        let pem = sig.to_pem(LineEnding::LF).unwrap();
        sshsig::verify(pem.as_bytes(), LIST, NAMESPACE, ours.public()).unwrap();
        let pins = Pins::new(vec![ours.clone()], 1).unwrap();
        assert_eq!(
            pins.check(LIST, pem.as_bytes(), NOW, &Seen::default())
                .unwrap()
                .header
                .sequence,
            7
        );
        // ...and only over its own message and namespace.
        assert!(sshsig::verify(pem.as_bytes(), &LIST[1..], NAMESPACE, ours.public()).is_err());
        let git = private
            .sign("git", hash, LIST)
            .unwrap()
            .to_pem(LineEnding::LF)
            .unwrap();
        assert!(sshsig::verify(git.as_bytes(), LIST, NAMESPACE, ours.public()).is_err());
    }
}

#[test]
fn our_signatures_verify_with_ssh_key_and_are_its_bytes() {
    let signing = SigningKey::from_bytes(&[6; 32]);
    let public = signing.verifying_key().to_bytes();
    let sig = signing
        .sign(&sshsig::signed_data(NAMESPACE, LIST))
        .to_bytes();
    let armored = sshsig::armor(&public, NAMESPACE, &sig);
    let parsed = SshSig::from_pem(&armored).unwrap();
    let theirs = PublicKey::from_openssh(&MonitorKey::from_ed25519(public, "").openssh()).unwrap();
    theirs.verify(NAMESPACE, LIST, &parsed).unwrap();
    assert!(theirs.verify(NAMESPACE, b"{}", &parsed).is_err());
    assert!(theirs.verify("file", LIST, &parsed).is_err());
    // The same signature written by ssh-key is the same text.
    assert_eq!(parsed.to_pem(LineEnding::LF).unwrap(), armored);
    // What a PKCS#11 token is given to sign is what ssh-key signs.
    assert_eq!(
        SshSig::signed_data(NAMESPACE, HashAlg::Sha512, LIST).unwrap(),
        sshsig::signed_data(NAMESPACE, LIST)
    );
}

/// A directory for the files ssh-keygen reads and writes, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("gnomon-sshsig-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ssh_keygen() -> Option<PathBuf> {
    [
        "/usr/bin/ssh-keygen",
        "/bin/ssh-keygen",
        "/usr/local/bin/ssh-keygen",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

fn run(keygen: &Path, args: &[&std::ffi::OsStr], stdin: Option<&Path>) -> (bool, String) {
    let mut c = gnomon_testkit::command(keygen);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c.stdin(match stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
        None => Stdio::null(),
    });
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn ssh_keygen_signs_what_we_verify_and_verifies_what_we_sign() {
    const TEST: &str = "signed_list::ssh_keygen_signs_what_we_verify_and_verifies_what_we_sign";
    let Some(keygen) = ssh_keygen() else {
        gnomon_testkit::skip(
            TEST,
            "ssh-keygen is not installed (Debian: apt install openssh-client)",
        );
        return;
    };
    let dir = Scratch::new("keygen");
    let key = dir.path("monitor");
    let list = dir.path("servers.json");
    std::fs::write(&list, LIST).unwrap();
    let os = |s: &str| std::ffi::OsString::from(s);
    let (ok, out) = run(
        &keygen,
        &[
            &os("-q"),
            &os("-t"),
            &os("ed25519"),
            &os("-N"),
            &os(""),
            &os("-C"),
            &os("monitor-a"),
            &os("-f"),
            key.as_os_str(),
        ],
        None,
    );
    assert!(ok, "ssh-keygen -t ed25519: {out}");
    let line = std::fs::read_to_string(dir.path("monitor.pub")).unwrap();
    let ours = MonitorKey::parse(&line).unwrap();
    let (ok, out) = run(
        &keygen,
        &[&os("-l"), &os("-f"), dir.path("monitor.pub").as_os_str()],
        None,
    );
    assert!(
        ok && out.contains(&ours.fingerprint()),
        "ssh-keygen -l: {out} / {}",
        ours.fingerprint()
    );

    // Theirs, verified by ours: both hashes.
    for hash in ["sha512", "sha256"] {
        let (ok, out) = run(
            &keygen,
            &[
                &os("-Y"),
                &os("sign"),
                &os("-O"),
                &os(&format!("hashalg={hash}")),
                &os("-n"),
                &os(NAMESPACE),
                &os("-f"),
                key.as_os_str(),
                list.as_os_str(),
            ],
            None,
        );
        assert!(ok, "ssh-keygen -Y sign: {out}");
        let sig = std::fs::read(dir.path("servers.json.sig")).unwrap();
        let b64: String = String::from_utf8_lossy(&sig)
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let blob = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap();
        assert!(
            blob.windows(6).any(|w| w == hash.as_bytes()),
            "ssh-keygen did not sign with {hash}"
        );
        sshsig::verify(&sig, LIST, NAMESPACE, ours.public()).unwrap();
        let pins = Pins::new(vec![ours.clone()], 1).unwrap();
        pins.check(LIST, &sig, NOW, &Seen::default()).unwrap();
        assert!(sshsig::verify(&sig, &LIST[..LIST.len() - 1], NAMESPACE, ours.public()).is_err());
        std::fs::remove_file(dir.path("servers.json.sig")).unwrap();
    }

    // Ours, verified by theirs, with the allowed_signers line the docs give.
    let signing = SigningKey::from_bytes(&[8; 32]);
    let public = signing.verifying_key().to_bytes();
    let armored = sshsig::armor(
        &public,
        NAMESPACE,
        &signing
            .sign(&sshsig::signed_data(NAMESPACE, LIST))
            .to_bytes(),
    );
    std::fs::write(dir.path("ours.sig"), &armored).unwrap();
    let allowed = dir.path("allowed_signers");
    let pinned = MonitorKey::from_ed25519(public, "").openssh();
    std::fs::write(
        &allowed,
        format!("observatory.example namespaces=\"{NAMESPACE}\" {pinned}\n"),
    )
    .unwrap();
    let verify = |message: &Path, namespace: &str| {
        run(
            &keygen,
            &[
                &os("-Y"),
                &os("verify"),
                &os("-f"),
                allowed.as_os_str(),
                &os("-I"),
                &os("observatory.example"),
                &os("-n"),
                &os(namespace),
                &os("-s"),
                dir.path("ours.sig").as_os_str(),
            ],
            Some(message),
        )
    };
    let (ok, out) = verify(&list, NAMESPACE);
    assert!(ok, "ssh-keygen -Y verify refused our signature: {out}");
    assert!(
        out.contains("Good \"roughtime-server-list\" signature"),
        "{out}"
    );
    // Not vacuous: ssh-keygen refuses it over a changed list, or as git's.
    let changed = dir.path("changed.json");
    std::fs::write(&changed, &LIST[1..]).unwrap();
    assert!(!verify(&changed, NAMESPACE).0);
    assert!(!verify(&list, "git").0);
}

/// An armored signature around `blob`, wrapped as ssh-keygen wraps it.
fn armored(blob: &[u8]) -> Vec<u8> {
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, blob);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(70)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    format!(
        "-----BEGIN SSH SIGNATURE-----\n{}\n-----END SSH SIGNATURE-----\n",
        lines.join("\n")
    )
    .into_bytes()
}

fn blob_of(armored: &[u8]) -> Vec<u8> {
    let b64: String = String::from_utf8_lossy(armored)
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap()
}

/// libgnomon's `no_std` build refuses every allocation: the one-key check
/// must make none, for an accepted list and for every refusal (the
/// refusals that quote the signature, a namespace or a hash name, among
/// them).
#[test]
fn the_one_key_check_allocates_nothing() {
    use gnomon_protocol::signed_list::{in_place, RefusalKind};
    let signing = SigningKey::from_bytes(&[9; 32]);
    let public = signing.verifying_key().to_bytes();
    let sign = |key: &SigningKey, ns: &str, doc: &[u8]| {
        let public = key.verifying_key().to_bytes();
        sshsig::armor(
            &public,
            ns,
            &key.sign(&sshsig::signed_data(ns, doc)).to_bytes(),
        )
        .into_bytes()
    };
    let good = sign(&signing, NAMESPACE, LIST);
    let by_other = sign(&SigningKey::from_bytes(&[10; 32]), NAMESPACE, LIST);
    let git = sign(&signing, "git", LIST);
    let mut blob = blob_of(&good);
    let at = blob.windows(6).position(|w| w == b"sha512").unwrap();
    blob[at..at + 6].copy_from_slice(b"md5xxx");
    let bad_hash = armored(&blob);
    let malformed: &[u8] = br#"{"servers":[],"observatory":{"monitor":"m","sequence":"7"}}"#;
    let sig_malformed = sign(&signing, NAMESPACE, malformed);
    let digest = in_place::check(LIST, &good, &public, NOW, None)
        .unwrap()
        .sha256;
    let short: &[u8] = b"-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n";
    type Case<'a> = (
        &'a [u8],
        &'a [u8],
        i64,
        Option<(u64, [u8; 32])>,
        Result<(), RefusalKind>,
    );
    let cases: [Case<'_>; 11] = [
        (LIST, &good, NOW, None, Ok(())),
        (LIST, &good, NOW, Some((7, digest)), Ok(())),
        (&LIST[1..], &good, NOW, None, Err(RefusalKind::Signature)),
        (LIST, &git, NOW, None, Err(RefusalKind::Signature)),
        (LIST, short, NOW, None, Err(RefusalKind::Signature)),
        (LIST, &bad_hash, NOW, None, Err(RefusalKind::Signature)),
        (LIST, &by_other, NOW, None, Err(RefusalKind::OtherKey)),
        (LIST, &good, NOW + 86_400, None, Err(RefusalKind::Expired)),
        (
            LIST,
            &good,
            NOW,
            Some((8, digest)),
            Err(RefusalKind::Replayed),
        ),
        (
            LIST,
            &good,
            NOW,
            Some((7, [0; 32])),
            Err(RefusalKind::Reused),
        ),
        (
            malformed,
            &sig_malformed,
            NOW,
            None,
            Err(RefusalKind::Malformed),
        ),
    ];
    // ed25519-dalek with `std` (which these tests' dev-dependencies turn
    // on) boxes the source of a failed check; without it, as in
    // libgnomon's no_std build (tests/libgnomon/no_std.rs runs that),
    // nothing. What dalek alone allocates there is the allowance.
    let dalek = allocation_counter::measure(|| {
        let key = ed25519_dalek::VerifyingKey::from_bytes(&public).unwrap();
        let _ = key.verify_strict(b"x", &ed25519_dalek::Signature::from_bytes(&[0; 64]));
    })
    .count_total;
    for (i, (doc, sig, now, last, want)) in cases.into_iter().enumerate() {
        let mut got = None;
        let info = allocation_counter::measure(|| {
            got = Some(in_place::check(doc, sig, &public, now, last).map(|_| ()));
        });
        assert_eq!(got.unwrap(), want);
        let allowed = if i == 2 { dalek } else { 0 };
        assert_eq!(info.count_total, allowed, "case {i}, {want:?}, allocated");
    }
    let mut fp = [0u8; in_place::FINGERPRINT_LEN];
    let info = allocation_counter::measure(|| {
        assert_eq!(
            in_place::signer(&by_other),
            Some(SigningKey::from_bytes(&[10; 32]).verifying_key().to_bytes())
        );
        in_place::fingerprint(&public, &mut fp);
    });
    assert_eq!(info.count_total, 0);
    assert_eq!(
        std::str::from_utf8(&fp).unwrap(),
        MonitorKey::from_ed25519(public, "").fingerprint()
    );
}
