//! What a SIGHUP applies (a replaced key file, the log level), what it
//! refuses (a broken configuration, the running one kept) and what it
//! leaves for a restart; and new delegation files found without a signal.

use crate::serve_support;

use base64::Engine as _;
use gnomon_protocol::Profile;

use serve_support::peer::wait_metric;
use serve_support::{gnomon_ok as gnomon, keygen_and_delegate, keygen_at as keygen};

use super::{ask, tempdir, verifies, write_config, Server, B64, BASE, FAILURE, SUCCESS};

#[test]
fn a_replaced_key_file_is_served_after_sighup() {
    let dir = tempdir("key");
    let key = dir.join("k");
    let old = keygen(&key);
    let config = dir.join("gnomon.toml");
    write_config(&config, &format!("{BASE}key-file = \"k\"\nworkers = 1\n"));
    let mut server = Server::start(&config);
    assert!(verifies(server.addr, &old));
    // Replaced the way an operator would: a new file renamed over the old.
    let new = keygen(&dir.join("k.new"));
    std::fs::rename(dir.join("k.new"), &key).unwrap();
    server.reload(SUCCESS, 1);
    let line = server.wait_log("reloaded the configuration");
    assert!(line.contains(&B64.encode(new)), "{line}");
    assert!(verifies(server.addr, &new), "answers under the new key");
    assert!(!verifies(server.addr, &old), "no answer under the old key");
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_broken_configuration_keeps_the_running_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir("broken");
    let public = keygen(&dir.join("k"));
    let loose = dir.join("loose");
    keygen(&loose);
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Delegations that all start in 2030: they load, but no epoch can be
    // minted from them now, which the key thread finds.
    let signer = dir.join("signer");
    keygen(&signer);
    let future = dir.join("future");
    gnomon(
        &["delegate", "--key-file", signer.to_str().unwrap()]
            .into_iter()
            .chain(["--out-dir", future.to_str().unwrap(), "--count", "1"])
            .chain(["--start", "2030-01-01T00:00:00Z"])
            .collect::<Vec<_>>(),
    );
    let config = dir.join("gnomon.toml");
    let good = format!("{BASE}key-file = \"k\"\nworkers = 1\n");
    write_config(&config, &good);
    let mut server = Server::start(&config);
    let broken = [
        ("this is ]] not toml\n".to_string(), "TOML parse error"),
        (format!("{BASE}key-file = \"missing\"\n"), "missing"),
        (format!("{BASE}key-file = \"k\"\ngrease = 0.9\n"), "grease"),
        (format!("{BASE}key-file = \"loose\"\n"), "chmod 600"),
        (
            format!("{BASE}key-file = \"k\"\n[limit]\nrate = -1\n"),
            "limit.rate",
        ),
        (format!("{BASE}offline-dir = \"future\"\n"), "covers now"),
    ];
    for (i, (text, why)) in broken.iter().enumerate() {
        write_config(&config, text);
        server.reload(FAILURE, i as u64 + 1);
        let line = server.wait_log("reload failed");
        assert!(line.contains(why), "{why:?} not in {line}");
        assert_eq!(server.metric("gnomon_reload_last_successful"), 0);
        assert!(verifies(server.addr, &public), "still the old key");
    }
    assert_eq!(server.metric(SUCCESS), 0);
    write_config(&config, &good);
    server.reload(SUCCESS, 1);
    assert_eq!(server.metric("gnomon_reload_last_successful"), 1);
    assert!(verifies(server.addr, &public));
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn restart_only_settings_are_named_and_not_applied() {
    let dir = tempdir("restart");
    keygen(&dir.join("k"));
    let config = dir.join("gnomon.toml");
    write_config(&config, &format!("{BASE}key-file = \"k\"\nworkers = 1\n"));
    let mut server = Server::start(&config);
    assert!(ask(server.addr, Profile::rfc()).is_some());
    let (radius, expiry) = (
        "gnomon_radius_seconds",
        "gnomon_certificate_expiry_timestamp_seconds",
    );
    assert!(server.metric(radius) < 100);
    let expires = server.metric(expiry);
    // New addresses and worker count wait for a restart; the versions
    // answered, the radius (synchronized clock or not) and the online
    // key's validity change at once.
    write_config(
        &config,
        "listen = [\"127.0.0.1:9\"]\nmetrics = \"127.0.0.1:0\"\nworkers = 2\n\
         clock.unsynchronized = \"answer-with-radius\"\nkey-file = \"k\"\n\
         clock.radius-floor = \"100s\"\nclock.unsynchronized-radius = \"100s\"\n\
         online-key.validity = \"3d\"\nversions = [\"google\"]\n",
    );
    server.reload(SUCCESS, 1);
    for key in ["listen", "workers"] {
        let line = server.wait_log("restart to apply");
        assert!(line.contains(&format!("{key} changed")), "{line}");
    }
    let line = server.wait_log("reloaded the configuration");
    assert!(
        line.contains("applied ")
            && line.contains("versions")
            && line.contains("listen, workers changed and wait for a restart"),
        "{line}"
    );
    assert!(server.metric(radius) >= 100);
    assert!(
        server.metric(expiry) >= expires + 86_400,
        "a 3-day delegation"
    );
    let unsupported = "gnomon_dropped_total{reason=\"unsupported_version\"}";
    let before = server.metric(unsupported);
    assert!(
        ask(server.addr, Profile::google()).is_some(),
        "still on the old address"
    );
    assert!(
        ask(server.addr, Profile::rfc()).is_none(),
        "version 1 is off"
    );
    let dropped = wait_metric(server.metrics, unsupported, |v| v > before);
    assert_eq!(dropped, before + 1);
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_log_level_follows_a_reload() {
    let dir = tempdir("level");
    keygen(&dir.join("k"));
    let config = dir.join("gnomon.toml");
    let text = |level: &str, rate: u32, burst: u32| {
        format!(
            "{BASE}key-file = \"k\"\nworkers = 1\nlog.level = \"{level}\"\n\
             limit.rate = {rate}\nlimit.burst = {burst}\n"
        )
    };
    write_config(&config, &text("info", 10, 100));
    let mut server = Server::start(&config);
    // At "warn" the reload's own report (info) is not logged ...
    write_config(&config, &text("warn", 20, 100));
    server.reload(SUCCESS, 1);
    // ... and back at "info" it is: the first report is the second reload's.
    write_config(&config, &text("info", 20, 200));
    server.reload(SUCCESS, 2);
    let line = server.wait_log("reloaded the configuration");
    assert!(line.contains("limit.burst"), "{line}");
    assert!(
        !line.contains("limit.rate"),
        "the first reload reported: {line}"
    );
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn new_delegation_files_are_picked_up_without_a_signal() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempdir("offline");
    let (key, delegations, public) = keygen_and_delegate(&dir, 1);
    let config = dir.join("gnomon.toml");
    write_config(
        &config,
        &format!("{BASE}offline-dir = \"delegations\"\nworkers = 1\n"),
    );
    let server = Server::start(&config);
    assert!(verifies(server.addr, &public));
    assert_eq!(server.metric("gnomon_offline_delegations"), 1);
    let expiry = "gnomon_certificate_expiry_timestamp_seconds";
    let first = server.metric(expiry);
    // A longer delegation, made elsewhere and copied in: the server moves
    // to it (the one lasting longest) on its own.
    let later = dir.join("later");
    gnomon(&[
        "delegate",
        "--key-file",
        key.to_str().unwrap(),
        "--out-dir",
        later.to_str().unwrap(),
        "--validity",
        "5d",
        "--count",
        "1",
    ]);
    let made = std::fs::read_dir(&later)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::copy(&made, delegations.join("longer.delegation")).unwrap();
    let now = wait_metric(server.metrics, expiry, |v| v > first);
    assert!(now >= first + 2 * 86_400, "{first} -> {now}");
    assert_eq!(server.metric("gnomon_offline_delegations"), 2);
    assert_eq!(
        server.metric("gnomon_offline_files_total{result=\"loaded\"}"),
        1
    );
    assert!(verifies(server.addr, &public));
    // A corrupt file (as a half-finished copy would be) is skipped and
    // counted; the server carries on.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(delegations.join("torn.delegation"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"gnomon-delegation v1\nlong-term"))
        .unwrap();
    let rejected = "gnomon_offline_files_total{result=\"rejected\"}";
    assert_eq!(wait_metric(server.metrics, rejected, |v| v >= 1), 1);
    assert!(verifies(server.addr, &public));
    assert_eq!(server.metric("gnomon_offline_delegations"), 2);
    assert_eq!(
        server.metric(SUCCESS) + server.metric(FAILURE),
        0,
        "no signal"
    );
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A reload that finds only a restart-only key changed says that it waits,
/// in the line that sums the reload up too, and goes on saying so: never
/// "no setting changed" beside "batch-size changed; restart to apply".
#[test]
fn a_setting_that_waits_for_a_restart_is_not_reported_as_unchanged() {
    let dir = tempdir("batch-size");
    keygen(&dir.join("k"));
    let config = dir.join("gnomon.toml");
    let base = format!("{BASE}key-file = \"k\"\nworkers = 1\n");
    write_config(&config, &base);
    let mut server = Server::start(&config);
    write_config(&config, &format!("{base}batch-size = 32\n"));
    for reloads in 1..=2 {
        server.reload(SUCCESS, reloads);
        let warned = server.wait_log("restart to apply");
        assert!(warned.contains("batch-size changed"), "{warned}");
        let line = server.wait_log("reloaded the configuration");
        assert!(
            line.contains("applied no setting; batch-size changed and waits for a restart")
                && !line.contains("no setting changed"),
            "reload {reloads}: {line}"
        );
    }
    // Back to the value it runs with: nothing waits, nothing changed.
    write_config(&config, &base);
    server.reload(SUCCESS, 3);
    let line = server.wait_log("reloaded the configuration");
    assert!(line.contains("no setting changed"), "{line}");
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}
