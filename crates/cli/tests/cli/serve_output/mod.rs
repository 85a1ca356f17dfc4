//! What `gnomon serve` says (issue 36), against real servers: its counts
//! per transport and every identity's public key with the transports it
//! answers on (`transports`), the setting that makes a refusing server
//! answer while the clock is unsynchronized (`clock`), and `--json`: JSON
//! logs on stderr and one object on stdout when the server ends, a
//! failure at start included (`json`).
//!
//! Here the running server, read the way these tests need: stdout apart
//! (an ML-DSA-44 key is 1312 bytes, and under `--json` stdout stays empty
//! until the end) and the log on a channel, waited for with a bound.

use crate::serve_support;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{ChildStdout, Command};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_testkit::Reaped;

use serve_support::peer::{sigterm_and_wait, PATIENCE};
use serve_support::LogLines;

mod clock;
mod json;
mod transports;

/// A `gnomon serve` child (127.0.0.1, any port, one worker, no summary
/// lines), killed when dropped.
struct Running {
    child: Reaped,
    stdout: BufReader<ChildStdout>,
    log: LogLines,
}

impl Running {
    fn start(extra: &[&str], env: &[(&str, &str)]) -> Running {
        let args: Vec<&str> = ["--workers", "1"].iter().chain(extra).copied().collect();
        let mut cmd =
            serve_support::serve_command(serve_support::gnomon_via(&[]), "127.0.0.1:0", &args);
        cmd.envs(env.iter().copied());
        let mut child = Reaped::spawn(&mut cmd);
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let log = LogLines::read(child.stderr.take().unwrap());
        Running { child, stdout, log }
    }

    /// The first log line not yet waited for that contains `needle`.
    fn wait_log(&mut self, needle: &str) -> String {
        self.log.wait(needle)
    }

    /// The address logged after `marker` in the line that has it.
    fn addr_after(&mut self, marker: &str) -> SocketAddr {
        let line = self.wait_log(marker);
        let (_, rest) = line.split_once(marker).unwrap();
        rest.split(|c: char| c.is_whitespace() || c == '"' || c == '/')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// The `n` public keys printed first on stdout, each as a base64 line
    /// and a hex line that say the same key.
    fn public_keys(&mut self, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|_| {
                let mut b64 = String::new();
                let mut hex_line = String::new();
                self.stdout.read_line(&mut b64).unwrap();
                self.stdout.read_line(&mut hex_line).unwrap();
                let key = b64
                    .trim_end()
                    .strip_prefix("public key (base64): ")
                    .and_then(|k| B64.decode(k).ok())
                    .unwrap_or_else(|| panic!("a base64 key line, not {b64:?}"));
                let hexed = hex_line
                    .trim_end()
                    .strip_prefix("public key (hex):    ")
                    .unwrap_or_else(|| panic!("a hex key line, not {hex_line:?}"));
                assert_eq!(hex::decode(hexed).unwrap(), key, "{hex_line}");
                key
            })
            .collect()
    }

    /// SIGTERM, bounded: the exit code, the rest of stdout, and every log
    /// line (those waited for included).
    fn stop(mut self) -> (Option<i32>, String, Vec<String>) {
        let (status, _) = sigterm_and_wait(&mut self.child, PATIENCE)
            .unwrap_or_else(|| panic!("the server did not stop within {PATIENCE:?}"));
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        (status.code(), rest, self.log.all())
    }
}

/// `gnomon ARGS` to its end, with no GNOMON_* variables of the caller's.
fn gnomon(args: &[&str]) -> std::process::Output {
    let mut cmd: Command = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"));
    cmd.args(args).output().unwrap()
}

/// One request for `profile`, 1024 bytes, nonce bytes `i`.
fn request(profile: &'static gnomon_protocol::Profile, i: u8) -> Vec<u8> {
    let mut out = vec![0u8; 1024];
    let offer = gnomon_protocol::Offer::single(profile);
    let n = offer
        .build(&vec![i; offer.primary().nonce_len], None, 1024, &mut out)
        .unwrap();
    out.truncate(n);
    out
}

/// The line of `log` that has `needle`, or a panic listing the log.
fn line_with<'a>(log: &'a [String], needle: &str) -> &'a str {
    log.iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in {log:#?}"))
}
