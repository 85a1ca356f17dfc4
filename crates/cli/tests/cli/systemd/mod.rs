//! `gnomon serve` under systemd's protocols, with real processes: the
//! notifications (READY=1, STATUS=, WATCHDOG=1, STOPPING=1) read from a
//! NOTIFY_SOCKET the test listens on, the watchdog going quiet when a
//! worker stalls, and socket activation through `systemd-socket-activate`.
//!
//! Here the reaped server and the queries that check it, shared; the tests
//! by what they try: `notify` (NOTIFY_SOCKET and the watchdog),
//! `activation` (sockets passed by a launcher, and those refused) and
//! `units` (deploy/'s units under `systemd-analyze verify`).

use crate::serve_support;

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, ChildStderr};

use gnomon_protocol::{verify_response, Offer, Profile};

use serve_support::peer::{read_frame, PATIENCE};
use serve_support::Started;

mod activation;
mod notify;
mod units;

/// Kills the process on drop, so a failing test leaks no server.
struct Reaper(Option<Child>);

impl Reaper {
    fn new(child: Child) -> Reaper {
        Reaper(Some(child))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// Read its startup (see `Started::read`), still reaped on drop.
    fn started(mut self, stderr: BufReader<ChildStderr>) -> Running {
        Running(Started::read(self.0.take().unwrap(), stderr))
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A started server, killed on drop.
struct Running(Started);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-systemd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn request(profile: &'static Profile, seed: u8) -> Vec<u8> {
    let mut req = vec![0u8; 1024];
    let n = Offer::single(profile)
        .build(&vec![seed; profile.nonce_len], None, 1024, &mut req)
        .unwrap();
    req.truncate(n);
    req
}

/// One UDP query to `to`, verified against `public`.
fn query_udp(to: SocketAddr, public: &[u8; 32]) {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    let req = request(Profile::rfc(), 1);
    c.send_to(&req, to).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = c.recv_from(&mut buf).expect("a UDP answer");
    verify_response(&req, &buf[..n], public).expect("a valid UDP answer");
}

/// One TCP query to `to`, verified against `public`.
fn query_tcp(to: SocketAddr, public: &[u8; 32]) {
    let mut c = TcpStream::connect_timeout(&to, PATIENCE).expect("TCP is served");
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    let req = request(Profile::rfc(), 2);
    c.write_all(&req).unwrap();
    let answer = read_frame(&mut c).expect("a TCP answer");
    verify_response(&req, &answer, public).expect("a valid TCP answer");
}
