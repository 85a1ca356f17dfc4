//! SIGHUP and the delegation rescan on a real `gnomon serve`: each reload
//! is waited for on the server's own counters (bounded), never slept for.

use crate::serve_support;
use gnomon_testkit::Reaped;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::{verify_response, Offer, Profile};

use serve_support::peer::{metric, sigterm_and_wait, wait_metric, PATIENCE};
use serve_support::{gnomon_ok as gnomon, keygen_and_delegate, keygen_at as keygen};

const SUCCESS: &str = "gnomon_reloads_total{result=\"success\"}";
const FAILURE: &str = "gnomon_reloads_total{result=\"failure\"}";

/// A `gnomon serve --config FILE` child, killed when dropped; its log
/// lines arrive on a channel so that a test can wait for one with a bound.
struct Server {
    child: Reaped,
    addr: SocketAddr,
    metrics: SocketAddr,
    public: [u8; 32],
    log: mpsc::Receiver<String>,
    /// Every line received so far.
    seen: Vec<String>,
}

impl Server {
    fn start(config: &Path) -> Server {
        let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(["serve", "--summary-interval", "0", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let public = line
            .trim()
            .strip_prefix("public key (base64): ")
            .and_then(|k| B64.decode(k).ok())
            .and_then(|k| k.try_into().ok())
            .unwrap_or_else(|| panic!("no public key line: {line:?}"));
        let (tx, log) = mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Server {
            child: child.into(),
            addr: "0.0.0.0:0".parse().unwrap(),
            metrics: "0.0.0.0:0".parse().unwrap(),
            public,
            log,
            seen: Vec::new(),
        };
        let metrics = s.wait_log("metrics on http://");
        s.metrics = after(&metrics, "metrics on http://", '/');
        let listening = s.wait_log("listening on udp ");
        s.addr = after(&listening, "listening on udp ", ' ');
        s
    }

    /// The first line not yet waited for that contains `needle`, waiting
    /// at most `PATIENCE` for it.
    fn wait_log(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no log line with {needle:?} in {PATIENCE:?}: {:#?}",
                    self.seen
                ),
            }
        }
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([name, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGHUP, then wait (bounded) until `series` reaches `target`.
    fn reload(&self, series: &str, target: u64) {
        self.signal("-HUP");
        let got = wait_metric(self.metrics, series, |v| v >= target);
        assert_eq!(got, target, "{series} after a SIGHUP");
    }

    fn metric(&self, series: &str) -> u64 {
        metric(self.metrics, series)
    }

    /// SIGTERM, bounded; the exit must be clean.
    fn stop(mut self) {
        let (status, _) = sigterm_and_wait(&mut self.child, PATIENCE)
            .unwrap_or_else(|| panic!("the server did not stop within {PATIENCE:?}"));
        assert!(status.success(), "{status}");
    }
}

/// The address in `line` after `marker`, up to `end`.
fn after(line: &str, marker: &str, end: char) -> SocketAddr {
    let (_, rest) = line.split_once(marker).unwrap();
    rest.split(end).next().unwrap().trim().parse().unwrap()
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-reload-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Write the configuration file atomically (a reload never sees half).
fn write_config(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// What every configuration here starts with: loopback, any port, metrics,
/// answering whatever the kernel says of the clock.
const BASE: &str = "listen = [\"127.0.0.1:0\"]\nmetrics = \"127.0.0.1:0\"\n\
                    clock.unsynchronized = \"answer-with-radius\"\n";

/// One request of `profile`; the answer, if any within a second.
fn ask(addr: SocketAddr, profile: &'static Profile) -> Option<(Vec<u8>, Vec<u8>)> {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut req = vec![0u8; 1024];
    Offer::single(profile)
        .build(&[7u8; 64][..profile.nonce_len], None, 1024, &mut req)
        .unwrap();
    c.send_to(&req, addr).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = c.recv_from(&mut buf).ok()?;
    Some((req, buf[..n].to_vec()))
}

/// A version-1 answer, checked against `key`.
fn verifies(addr: SocketAddr, key: &[u8; 32]) -> bool {
    let (req, resp) = ask(addr, Profile::rfc()).expect("an answer");
    verify_response(&req, &resp, key).is_ok()
}

#[test]
fn ten_reloads_under_load_lose_and_corrupt_nothing() {
    let dir = tempdir("load");
    let public = keygen(&dir.join("k"));
    let config = dir.join("gnomon.toml");
    // The stale limit is far above anything a loaded test machine causes:
    // what is measured is the reloads, not the machine.
    let text = |batch_wait: &str, share: f64| {
        format!(
            "{BASE}key-file = \"k\"\nworkers = 2\nmax-queue-delay = \"60s\"\n\
             batch-wait = \"{batch_wait}\"\n[limit]\nsignature-share = {share}\n"
        )
    };
    write_config(&config, &text("100us", 0.25));
    let server = Server::start(&config);
    assert_eq!(server.public, public);
    let mut load = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args([
            "bench",
            "load",
            "--json",
            "--rate",
            "300",
            "--duration",
            "12",
        ])
        .args([
            "--workers",
            "2",
            "--timeout",
            "10",
            "--key",
            &B64.encode(public),
        ])
        .args(["--target", &server.addr.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The load is running before the first reload.
    let received = wait_metric(server.metrics, "gnomon_requests_received_total", |v| {
        v >= 100
    });
    assert!(received >= 100, "the load did not start");
    for i in 1..=10u64 {
        // Every other reload changes worker settings too.
        let (wait, share) = if i % 2 == 1 {
            ("1ms", 0.5)
        } else {
            ("100us", 0.25)
        };
        write_config(&config, &text(wait, share));
        server.reload(SUCCESS, i);
    }
    assert!(
        load.try_wait().unwrap().is_none(),
        "the load ended before the ten reloads: raise its duration"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while load.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "bench load did not finish");
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let out = load.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let n = |k: &str| {
        report[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {report}"))
    };
    assert!(n("sent") >= 1000, "{report}");
    assert_eq!(n("answered"), n("sent"), "{report}");
    assert_eq!(n("lost"), 0, "{report}");
    assert_eq!(n("invalid"), 0, "{report}");
    assert_eq!(n("valid"), n("sent"), "{report}");
    assert!(out.status.success(), "{report}");
    assert_eq!(server.metric(FAILURE), 0);
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

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
    assert!(line.contains("versions"), "{line}");
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

#[test]
fn a_storm_of_sighups_is_survived() {
    let dir = tempdir("storm");
    let config = dir.join("gnomon.toml");
    // No key file: the ephemeral key must survive the reloads too.
    write_config(&config, &format!("{BASE}workers = 1\n"));
    let server = Server::start(&config);
    // 200 signals from one `kill`, as fast as it can send them.
    let pid = server.child.id().to_string();
    let storm: Vec<&str> = std::iter::once("-HUP")
        .chain(std::iter::repeat_n(pid.as_str(), 200))
        .collect();
    assert!(Command::new("kill")
        .args(&storm)
        .status()
        .unwrap()
        .success());
    let reloads = wait_metric(server.metrics, SUCCESS, |v| v >= 1);
    assert!((1..=200).contains(&reloads), "{reloads}");
    assert!(verifies(server.addr, &server.public), "the same key");
    assert_eq!(server.metric(FAILURE), 0);
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

const NO_KEYS: &str = "gnomon_reload_refusals_total{reason=\"no_keys\"}";

/// Write the configuration file in place, as `>` or many editors do: the
/// file is empty from the truncation until the text is written.
fn write_in_place(path: &Path, text: &str) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

impl Server {
    /// All reloads counted so far, applied or refused.
    fn reloads(&self) -> u64 {
        self.metric(SUCCESS) + self.metric(FAILURE)
    }

    /// One SIGHUP, then wait (bounded) until one more reload is counted.
    fn reload_once(&self) {
        let before = self.reloads();
        self.signal("-HUP");
        let deadline = Instant::now() + PATIENCE;
        while self.reloads() <= before {
            assert!(Instant::now() < deadline, "no reload counted after SIGHUP");
            std::thread::park_timeout(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_configuration_without_keys_never_swaps_in_an_ephemeral_key() {
    let dir = tempdir("nokeys");
    let public = keygen(&dir.join("k"));
    let config = dir.join("gnomon.toml");
    let good = format!("{BASE}workers = 1\nkey-file = \"k\"\n");
    write_config(&config, &good);
    let mut server = Server::start(&config);
    assert_eq!(server.public, public);
    assert!(verifies(server.addr, &public));
    // Empty (valid TOML), then every setting but the key.
    for (i, text) in ["".to_string(), format!("{BASE}workers = 1\n")]
        .iter()
        .enumerate()
    {
        let n = i as u64 + 1;
        write_in_place(&config, text);
        server.reload(FAILURE, n);
        let line = server.wait_log("reload failed");
        assert!(line.contains("names no key"), "{line}");
        assert!(line.contains(&B64.encode(public)), "{line}");
        assert_eq!(server.metric(NO_KEYS), n);
        assert_eq!(server.metric("gnomon_reload_last_successful"), 0);
        assert!(verifies(server.addr, &public), "still the configured key");
    }
    assert_eq!(server.metric(SUCCESS), 0);
    assert_eq!(
        server.metric("gnomon_reload_refusals_total{reason=\"config\"}"),
        0
    );
    write_in_place(&config, &good);
    server.reload(SUCCESS, 1);
    assert_eq!(server.metric("gnomon_reload_last_successful"), 1);
    assert!(verifies(server.addr, &public));
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// In-place writes (truncate, then write) racing SIGHUPs under load: each
/// round reloads once on the empty file, once on a prefix without the key,
/// then storms while the text goes in a few bytes at a time. Not one
/// request may be lost or answered under another key.
#[test]
fn a_sighup_storm_over_in_place_writes_loses_nothing() {
    const ROUNDS: u64 = 10;
    let dir = tempdir("inplace");
    let public = keygen(&dir.join("k"));
    let config = dir.join("gnomon.toml");
    // The key last: every shorter prefix that parses names no key.
    let good = format!(
        "{BASE}workers = 2\nmax-queue-delay = \"60s\"\nbatch-wait = \"100us\"\nkey-file = \"k\"\n"
    );
    let keyless = good.split("key-file").next().unwrap().to_owned();
    write_config(&config, &good);
    let server = Server::start(&config);
    assert_eq!(server.public, public);
    let mut load = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["bench", "load", "--json", "--rate", "300"])
        .args(["--duration", "15", "--workers", "2", "--timeout", "10"])
        .args(["--key", &B64.encode(public)])
        .args(["--target", &server.addr.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let received = wait_metric(server.metrics, "gnomon_requests_received_total", |v| {
        v >= 100
    });
    assert!(received >= 100, "the load did not start");
    let pid = server.child.id().to_string();
    let storm: Vec<&str> = std::iter::once("-HUP")
        .chain(std::iter::repeat_n(pid.as_str(), 20))
        .collect();
    for _ in 0..ROUNDS {
        write_in_place(&config, "");
        server.reload_once();
        write_in_place(&config, &keyless);
        server.reload_once();
        {
            use std::io::Write as _;
            let mut f = std::fs::File::create(&config).unwrap();
            for chunk in good.as_bytes().chunks(24) {
                f.write_all(chunk).unwrap();
                assert!(Command::new("kill")
                    .args(&storm)
                    .status()
                    .unwrap()
                    .success());
            }
        }
        server.reload_once();
    }
    assert!(
        load.try_wait().unwrap().is_none(),
        "the load ended before the storm did: raise its duration"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while load.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "bench load did not finish");
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let out = load.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let n = |k: &str| {
        report[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {report}"))
    };
    eprintln!(
        "in-place storm: sent {}, lost {}, invalid {}, reloads applied {}, refused {} (no_keys {})",
        n("sent"),
        n("lost"),
        n("invalid"),
        server.metric(SUCCESS),
        server.metric(FAILURE),
        server.metric(NO_KEYS),
    );
    assert!(n("sent") >= 1000, "{report}");
    assert_eq!(n("lost"), 0, "{report}");
    assert_eq!(n("invalid"), 0, "{report}");
    assert_eq!(n("valid"), n("sent"), "{report}");
    assert!(out.status.success(), "{report}");
    assert!(
        server.metric(NO_KEYS) >= ROUNDS,
        "{}",
        server.metric(NO_KEYS)
    );
    assert!(server.metric(SUCCESS) >= ROUNDS);
    assert!(verifies(server.addr, &public), "the configured key");
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}
