//! `gnomon serve` as a real process on loopback.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use gnomon_protocol::{verify_response, Offer, PROFILES};

struct Server {
    child: Child,
    addr: SocketAddr,
    public: [u8; 32],
    stderr: BufReader<std::process::ChildStderr>,
}

fn start(extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gnomon"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--summary-interval",
            "0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let b64 = line
        .trim()
        .strip_prefix("public key (base64): ")
        .expect("public key line")
        .to_string();
    let public: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
        .try_into()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let addr = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "server exited before listening"
        );
        if let Some(rest) = line.strip_prefix("gnomon serve: listening on udp ") {
            break rest.split_whitespace().next().unwrap().parse().unwrap();
        }
    };
    Server {
        child,
        addr,
        public,
        stderr,
    }
}

fn terminate(mut s: Server) -> (std::process::ExitStatus, Duration, String) {
    let t = Instant::now();
    let ok = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let status = s.child.wait().unwrap();
    let mut rest = String::new();
    s.stderr.read_to_string(&mut rest).unwrap();
    (status, t.elapsed(), rest)
}

#[test]
fn answers_every_version_and_stops_cleanly_on_sigterm() {
    let server = start(&[]);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 2048];
    for profile in PROFILES.iter() {
        let mut req = vec![0u8; 1024];
        Offer::single(profile)
            .build(&vec![7u8; profile.nonce_len], None, 1024, &mut req)
            .unwrap();
        c.send_to(&req, server.addr).unwrap();
        let (n, _) = c.recv_from(&mut buf).expect("an answer");
        let v = verify_response(&req, &buf[..n], &server.public)
            .unwrap_or_else(|e| panic!("{}: {e:?}", profile.name));
        assert_eq!(v.profile.id, profile.id);
        assert!(n <= req.len());
        assert!(v.radius_us >= 3_000_000, "radius floor");
    }
    let (status, took, rest) = terminate(server);
    assert!(status.success(), "exit status {status:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(
        rest.contains(&format!("answered {}", PROFILES.len())),
        "{rest}"
    );
}

#[test]
fn no_response_is_larger_than_its_request() {
    let server = start(&[]);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 2048];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut answered = 0;
    for i in 0..60u64 {
        // Sizes from 1024 to 1500, multiples of 4.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = 1024 + 4 * (state % 120) as usize;
        let profile = &PROFILES[(i as usize) % PROFILES.len()];
        let mut req = vec![0u8; size];
        Offer::single(profile)
            .build(&vec![i as u8; profile.nonce_len], None, size, &mut req)
            .unwrap();
        c.send_to(&req, server.addr).unwrap();
        let (n, _) = c.recv_from(&mut buf).unwrap();
        assert!(n <= size, "{}: {n} > {size}", profile.name);
        verify_response(&req, &buf[..n], &server.public).unwrap();
        answered += 1;
    }
    assert_eq!(answered, 60);
    let (status, _, _) = terminate(server);
    assert!(status.success());
}

#[test]
fn a_taken_port_is_a_clear_error() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_gnomon"))
        .args(["serve", "--listen", &addr])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot start") && err.contains(&addr), "{err}");
}
