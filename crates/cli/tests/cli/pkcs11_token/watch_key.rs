//! `gnomon watch` publishing with its key inside the token: the list's
//! signature is the token's (our verifier and `ssh-keygen -Y verify` take
//! it under the token's public key), and when the token goes away mid-run
//! publication fails, is counted as `key`, and the rounds go on.

use std::process::Command;
use std::time::{Duration, Instant};

use gnomon_protocol::signed_list::{sshsig, MonitorKey, NAMESPACE};

use super::token;
use crate::watch_support::{self, Watch};

const PATIENCE: Duration = Duration::from_secs(90);

fn counted(watch: &Watch, result: &str) -> u64 {
    let (_, m) = watch.get("/metrics");
    let line = format!("gnomon_watch_publications_total{{result=\"{result}\"}} ");
    m.lines()
        .find_map(|l| l.strip_prefix(&line)?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_token_signs_the_list_and_its_loss_stops_publication_not_the_rounds() {
    const TEST: &str = "pkcs11_token::watch_key::the_token_signs_the_list";
    let Some((hsm, _turn)) = token(TEST, "observatory") else {
        return;
    };
    let public = hsm.keygen("observatory", "list");
    let lineup = watch_support::start("watch-token", false);
    let pin = hsm.path("pin");
    let list = lineup.list.to_str().unwrap();
    let watch = Watch::start_args(&[
        "--servers",
        list,
        "--pkcs11-module",
        hsm.module(),
        "--pkcs11-token",
        "observatory",
        "--pkcs11-key",
        "list",
        "--pkcs11-pin-file",
        &pin,
        "--publish-name",
        "observatory.test",
    ]);
    let until = Instant::now() + PATIENCE;
    let (document, signature) = loop {
        let (status, document) = watch.get("/servers.json");
        let (_, signature) = watch.get("/servers.json.sig");
        if status == 200
            && sshsig::verify(
                signature.as_bytes(),
                document.as_bytes(),
                NAMESPACE,
                &public,
            )
            .is_ok()
        {
            break (document, signature);
        }
        assert!(
            Instant::now() < until,
            "nothing published within {PATIENCE:?}: {document}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // The packaged tool agrees, where it is installed.
    if crate::ssh_support::have_ssh_keygen(TEST) {
        let key = MonitorKey::from_ed25519(public, "list");
        let (ok, said) = crate::ssh_support::ssh_keygen_verify(
            &lineup.dir,
            "token",
            "observatory.test",
            &key.openssh(),
            document.as_bytes(),
            signature.as_bytes(),
        );
        assert!(ok, "{said}");
    }

    // The token goes.
    let deleted = Command::new("softhsm2-util")
        .args(["--delete-token", "--token", "observatory"])
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{deleted:?}");
    let rounds = watch.first_round(PATIENCE)["rounds"].as_u64().unwrap();
    let until = Instant::now() + PATIENCE;
    while counted(&watch, "key") < 2 {
        assert!(
            Instant::now() < until,
            "no failure of the key counted: {}",
            watch.get("/metrics").1
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let later = watch.round_where(PATIENCE, |v| v["rounds"].as_u64().unwrap() > rounds + 1);
    assert!(later["rounds"].as_u64().unwrap() > rounds + 1);
    let (_, page) = watch.get("/");
    assert!(
        page.contains("publication-failing") && page.contains("token"),
        "{page}"
    );
    // The last good list stays served (until its expiry, a day away).
    assert_eq!(watch.get("/servers.json").0, 200);
}
