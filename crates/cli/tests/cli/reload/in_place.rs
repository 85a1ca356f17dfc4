//! Configurations written in place (truncated, then written), as `>` and
//! many editors do: a reload of the empty or keyless file never swaps in an
//! ephemeral key, and SIGHUPs racing the writes under load lose nothing.

use crate::serve_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;

use serve_support::keygen_at as keygen;
use serve_support::peer::{wait_metric, PATIENCE};

use super::{tempdir, verifies, write_config, Server, B64, BASE, FAILURE, SUCCESS};

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
    let _heavy = crate::heavy();
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
        .map(gnomon_testkit::Reaped)
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
