//! OpenSSH's own tool beside gnomon's signed lists: keys made by
//! `ssh-keygen -t ed25519`, lists signed by `ssh-keygen -Y sign`, and
//! `ssh-keygen -Y verify` checking what a monitor publishes, as anyone
//! without gnomon would.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gnomon_protocol::signed_list::{MonitorKey, NAMESPACE};

/// Whether ssh-keygen is here; records the skip when not.
pub fn have_ssh_keygen(test: &str) -> bool {
    let found = Command::new("ssh-keygen").arg("-?").output().is_ok();
    if !found {
        gnomon_testkit::skip(test, "ssh-keygen missing (package openssh-client)");
    }
    found
}

/// An Ed25519 key made by ssh-keygen, unencrypted: FILE and FILE.pub.
pub struct SshKey {
    pub file: PathBuf,
    pub public: PathBuf,
    pub comment: String,
}

impl SshKey {
    /// The key `name` in `dir`, its comment `name`.
    pub fn make(dir: &Path, name: &str) -> SshKey {
        SshKey::make_commented(dir, name, name)
    }

    /// The key `name` in `dir`, with `comment`.
    pub fn make_commented(dir: &Path, name: &str, comment: &str) -> SshKey {
        let file = dir.join(name);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "ssh-keygen: {out:?}");
        let mut public = file.clone().into_os_string();
        public.push(".pub");
        SshKey {
            file,
            public: public.into(),
            comment: comment.to_owned(),
        }
    }

    /// The `.pub` line: `ssh-ed25519 AAAA… comment`.
    pub fn line(&self) -> String {
        std::fs::read_to_string(&self.public)
            .unwrap()
            .trim()
            .to_owned()
    }

    /// The public key, parsed as clients pin it.
    pub fn key(&self) -> MonitorKey {
        MonitorKey::parse(&self.line()).unwrap()
    }

    /// `ssh-keygen -Y sign`: the armored signature of `document`.
    pub fn sign(&self, dir: &Path, document: &[u8]) -> Vec<u8> {
        let at = dir.join(format!("to-sign-{}", self.comment));
        std::fs::write(&at, document).unwrap();
        let sig = dir.join(format!("to-sign-{}.sig", self.comment));
        let _ = std::fs::remove_file(&sig);
        let out = Command::new("ssh-keygen")
            .args(["-Y", "sign", "-n", NAMESPACE, "-f"])
            .arg(&self.file)
            .arg(&at)
            .output()
            .unwrap();
        assert!(out.status.success(), "ssh-keygen -Y sign: {out:?}");
        std::fs::read(&sig).unwrap()
    }

    /// [`ssh_keygen_verify`] with this key as `identity`.
    pub fn verify(
        &self,
        dir: &Path,
        identity: &str,
        document: &[u8],
        sig: &[u8],
    ) -> (bool, String) {
        ssh_keygen_verify(dir, &self.comment, identity, &self.line(), document, sig)
    }
}

/// `ssh-keygen -Y verify` of `document` and `sig` against an
/// allowed_signers file naming `public` (a key line) as `identity` in the
/// list namespace: whether it accepted, and what it said. Its files are
/// written in `dir`, named after `tag`.
pub fn ssh_keygen_verify(
    dir: &Path,
    tag: &str,
    identity: &str,
    public: &str,
    document: &[u8],
    sig: &[u8],
) -> (bool, String) {
    let allowed = dir.join(format!("allowed_signers-{tag}"));
    std::fs::write(
        &allowed,
        format!("{identity} namespaces=\"{NAMESPACE}\" {public}\n"),
    )
    .unwrap();
    let sig_file = dir.join(format!("verify-{tag}.sig"));
    std::fs::write(&sig_file, sig).unwrap();
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(&allowed)
        .args(["-I", identity, "-n", NAMESPACE, "-s"])
        .arg(&sig_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(document).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}
