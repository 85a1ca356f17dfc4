//! Reloads while a load runs lose and corrupt no answer, and a storm of
//! SIGHUPs is survived.

use crate::serve_support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;

use serve_support::keygen_at as keygen;
use serve_support::peer::wait_metric;

use super::{tempdir, verifies, write_config, Server, B64, BASE, FAILURE, SUCCESS};

#[test]
fn ten_reloads_under_load_lose_and_corrupt_nothing() {
    let _heavy = crate::heavy();
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
            // Long enough for ten reloads on a busy machine; the run
            // ends by itself either way.
            "--duration",
            "20",
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
        .map(gnomon_testkit::Reaped)
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
fn a_storm_of_sighups_is_survived() {
    let _heavy = crate::heavy();
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
