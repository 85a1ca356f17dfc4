//! `gnomon health` against real `gnomon serve` processes: exit 0 while
//! /health says healthy, 1 with the server's one-line reason when it says
//! 503, 1 when nothing answers, 64 on a usage error. This is the command a
//! container's HEALTHCHECK runs (deploy/container/Containerfile).

use crate::serve_support;

use std::path::Path;
use std::process::Output;

use serve_support::{start_serve, Started};

/// Kills the server however the test ends.
struct Running(Started);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

fn health(args: &[&str]) -> Output {
    gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .arg("health")
        .args(args)
        .output()
        .unwrap()
}

fn url(s: &Running, path: &str) -> String {
    format!(
        "http://{}{path}",
        s.0.metrics.expect("metrics address logged")
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn healthy_server_exits_zero_and_stopped_one_exits_one() {
    let s = Running(start_serve(&["--metrics", "127.0.0.1:0"], |_| {}));
    let u = url(&s, "/health");
    let o = health(&["--url", &u]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "healthy");

    // Any other path answers 404: not healthy, and says what it got.
    let o = health(&["--url", &url(&s, "/metrics-not")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("HTTP 404"), "{}", stderr(&o));

    drop(s);
    let o = health(&["--url", &u, "--timeout", "2s"]);
    assert_eq!(o.status.code(), Some(1), "nothing listens any more");
    let e = stderr(&o);
    assert!(
        e.starts_with("gnomon health: ") && e.trim().lines().count() == 1,
        "{e}"
    );
}

#[test]
fn a_server_that_cannot_answer_is_unhealthy_with_its_reason() {
    // A configured key and an unreadable clock: the default policy refuses
    // to answer and /health says 503 (GNOMON_TEST_CLOCK_UNREADABLE works in
    // debug builds, which tests run).
    let dir = std::env::temp_dir().join(format!("gnomon-health-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("k.key");
    let made = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["keygen", "--out", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(made.status.success());
    let s = Running(start_serve(
        &[
            "--metrics",
            "127.0.0.1:0",
            "--key-file",
            key.to_str().unwrap(),
        ],
        |c| {
            c.env("GNOMON_TEST_CLOCK_UNREADABLE", "1");
        },
    ));
    let o = health(&["--url", &url(&s, "/health")]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("HTTP 503: not answering: clock unsynchronized"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_errors_are_64_not_unhealthy() {
    for bad in [
        &["--timeout", "0s"][..],
        &["--timeout", "10m"],
        &["--no-such-flag"],
    ] {
        let o = health(bad);
        assert_eq!(o.status.code(), Some(64), "{bad:?}: {}", stderr(&o));
    }
    // The default URL is the one deploy/gnomon.toml's metrics address gives.
    let toml = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/gnomon.toml"),
    )
    .unwrap();
    let help = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["health", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(toml.contains("\nmetrics = \"127.0.0.1:9319\"\n"));
    assert!(help.contains("http://127.0.0.1:9319/health"), "{help}");
}

/// A listener on loopback that answers its first connection with
/// `answer` (or, with `None`, reads the request and holds the connection
/// open without a word) until the test drops the returned listener thread.
fn endpoint(answer: Option<&'static str>) -> (String, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/health", listener.local_addr().unwrap());
    let t = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 1024];
        let _ = c.read(&mut buf);
        match answer {
            Some(a) => {
                let _ = c.write_all(a.as_bytes());
            }
            // Held until the client gives up and closes (read returns 0),
            // bounded by the read timeout.
            None => while matches!(c.read(&mut buf), Ok(n) if n > 0) {},
        }
    });
    (url, t)
}

#[test]
fn a_hostile_endpoint_can_neither_hold_nor_mislead_the_check() {
    // Silent: the timeout ends it, unhealthy.
    let (u, t) = endpoint(None);
    let started = std::time::Instant::now();
    let o = health(&["--url", &u, "--timeout", "500ms"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the timeout bounds the check"
    );
    t.join().unwrap();

    // A redirect is not followed (it could lead anywhere): unhealthy.
    let (u, t) = endpoint(Some(
        "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/health\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ));
    let o = health(&["--url", &u]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("HTTP 302"), "{}", stderr(&o));
    t.join().unwrap();

    // A reason full of lines and terminal escapes is cut to one clean line.
    let (u, t) = endpoint(Some(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 31\r\nConnection: close\r\n\r\nbad \x1b[2Jthing\nsecond line\nthird",
    ));
    let o = health(&["--url", &u]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("HTTP 503: bad [2Jthing"), "{e}");
    assert!(!e.contains('\x1b') && !e.contains("second") && e.trim().lines().count() == 1);
    t.join().unwrap();
}
