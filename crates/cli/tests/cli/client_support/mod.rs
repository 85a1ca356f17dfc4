//! Running the built binary against loopback fixtures.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gnomon_testkit::{base64, Fixture};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {}", self.stdout))
    }
}

pub fn gnomon(args: &[&str]) -> Run {
    let start = Instant::now();
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(args)
        .output()
        .expect("run gnomon");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: start.elapsed(),
    }
}

/// Short timeouts for loopback.
pub const FAST: [&str; 4] = ["--timeout", "150ms", "--retries", "2"];

pub fn key(f: &Fixture) -> String {
    base64(&f.public_key())
}

/// A fresh path in the temp directory.
pub fn temp(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    std::env::temp_dir().join(format!("gnomon-cli-{}-{n}-{name}", std::process::id()))
}

pub fn write(name: &str, contents: &[u8]) -> PathBuf {
    let p = temp(name);
    std::fs::write(&p, contents).expect("write temp file");
    p
}

/// Three honest servers (alpha: rfc, bravo: google, charlie: draft-08) and
/// a liar an hour ahead (rfc), seeded `seed`…`seed + 3`, and their list
/// (written to a temp file) with `reports` as its report URL. Keep the
/// lineup alive while the servers are needed.
pub struct LiarLineup {
    pub servers: Vec<Fixture>,
    pub list: PathBuf,
    /// The liar's public key, base64.
    pub liar_key: String,
}

pub fn liar_lineup(seed: u8, reports: Option<&str>) -> LiarLineup {
    use gnomon_testkit::{profiles, server_list, FixtureConfig};
    let a = Fixture::honest(profiles(&["1"]), seed);
    let b = Fixture::honest(profiles(&["google"]), seed + 1);
    let c = Fixture::honest(profiles(&["draft-08"]), seed + 2);
    let liar = Fixture::start(FixtureConfig {
        profiles: profiles(&["1"]),
        offset_us: 3_600_000_000,
        seed: seed + 3,
        ..FixtureConfig::default()
    });
    let json = server_list(
        &[
            ("alpha", &a, 1),
            ("bravo", &b, 3_000_600_613),
            ("charlie", &c, 0x8000_0008),
            ("liar", &liar, 1),
        ],
        reports,
    );
    LiarLineup {
        list: write("liar.json", json.as_bytes()),
        liar_key: base64(&liar.public_key()),
        servers: vec![a, b, c, liar],
    }
}
