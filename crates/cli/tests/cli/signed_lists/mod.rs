//! Signed server lists as `gnomon query` and `gnomon relay` take them
//! (`--servers-url URL --servers-key KEY [--servers-threshold K]`): real
//! `gnomon serve` processes, lists made and signed here (SSHSIG over an
//! Ed25519 key, gnomon_protocol's own signer) and served over plain HTTP
//! by a small server in the test. A good list is used; a tampered, an
//! expired and a foreign one are each refused with their reason; with two
//! monitors and a threshold of 2, a server only one lists is not used.
//!
//! Here the list server, the monitors and the documents, shared with the
//! end-to-end test (crate::observatory); the tests in `query`.
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gnomon_protocol::signed_list::{format_utc, sshsig, MonitorKey, NAMESPACE};
use gnomon_protocol::{KeyPair, Sign};
use serde_json::{json, Value};

mod query;

/// What each path answers: the first of these, which is then dropped
/// unless it is the last.
type Paths = Arc<Mutex<HashMap<String, VecDeque<Vec<u8>>>>>;

/// A plain-HTTP server on loopback: each path answers the bytes the test
/// last set for it, or 404.
pub struct ListServer {
    pub addr: SocketAddr,
    paths: Paths,
    stop: Arc<AtomicBool>,
}

impl ListServer {
    pub fn start() -> ListServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let paths: Paths = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (paths.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let p = p.clone();
                        std::thread::spawn(move || answer(conn, &p));
                    }
                    Err(_) => std::thread::park_timeout(Duration::from_millis(20)),
                }
            }
        });
        ListServer { addr, paths, stop }
    }

    /// `path` answers `body` from now on.
    pub fn set(&self, path: &str, body: &[u8]) {
        self.set_then(path, &[body]);
    }

    /// `path` answers each of `bodies` once, in turn, and then the last
    /// of them from then on.
    pub fn set_then(&self, path: &str, bodies: &[&[u8]]) {
        let queue = bodies.iter().map(|b| b.to_vec()).collect();
        self.paths.lock().unwrap().insert(path.to_owned(), queue);
    }

    /// A list at `path` and its signature at `path.sig`.
    pub fn publish(&self, path: &str, list: &[u8], sig: &[u8]) {
        self.set(path, list);
        self.set(&format!("{path}.sig"), sig);
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for ListServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn answer(conn: TcpStream, paths: &Mutex<HashMap<String, VecDeque<Vec<u8>>>>) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut lines = BufReader::new(&conn).lines().map_while(Result::ok);
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1).map(str::to_owned))
        .unwrap_or_default();
    // The headers, up to the empty line (at most a hundred).
    for _ in lines.take(100).take_while(|l| !l.is_empty()) {}
    let found = paths.lock().unwrap().get_mut(&path).and_then(|q| {
        if q.len() > 1 {
            q.pop_front()
        } else {
            q.front().cloned()
        }
    });
    let (status, body) = match found {
        Some(b) => ("200 OK", b),
        None => ("404 Not Found", Vec::new()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut out = &conn;
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(&body);
}

/// A monitor's key, made here: it signs lists as `gnomon watch
/// --publish-key` does (an armored SSHSIG in the lists' namespace).
pub struct Monitor {
    pair: KeyPair,
    pub name: String,
}

impl Monitor {
    /// A key from `seed`, its comment `name`.
    pub fn new(seed: u8, name: &str) -> Monitor {
        Monitor {
            pair: KeyPair::from_seed(&[seed; 32]),
            name: name.to_owned(),
        }
    }

    /// `ssh-ed25519 AAAA… name`, as --servers-key takes it.
    pub fn key_line(&self) -> String {
        MonitorKey::from_ed25519(self.pair.public(), &self.name).openssh()
    }

    /// The armored signature of `document`.
    pub fn sign(&self, document: &[u8]) -> Vec<u8> {
        let signed = sshsig::signed_data(NAMESPACE, document);
        let mut sig = [0u8; 64];
        self.pair.sign_into(&signed, 0, &mut sig);
        sshsig::armor(&self.pair.public(), NAMESPACE, &sig).into_bytes()
    }
}

/// A monitor's list of `servers` (RFC list entries), sequence `sequence`,
/// published `age` seconds ago and valid for `valid` seconds from then.
pub fn document(
    monitor: &Monitor,
    servers: &[Value],
    sequence: u64,
    age: i64,
    valid: i64,
) -> Vec<u8> {
    let now = now_unix();
    serde_json::to_vec_pretty(&json!({
        "servers": servers,
        "observatory": {
            "monitor": monitor.name,
            "key": monitor.key_line(),
            "sequence": sequence,
            "published": format_utc(now - age),
            "expires": format_utc(now - age + valid),
        },
    }))
    .unwrap()
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The entries of a list file (the `servers` of sync_support's lists).
pub fn entries(list: &std::path::Path) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(list).unwrap()).unwrap();
    v["servers"].as_array().unwrap().clone()
}

/// `document` with one byte changed, inside a server's key: still JSON,
/// still a list, no longer what was signed.
pub fn tampered(document: &[u8]) -> Vec<u8> {
    let mut t = document.to_vec();
    let name = find(&t, b"\"publicKey\"").expect("a publicKey") + 11;
    // The value's opening quote, then its second character.
    let at = name + find(&t[name..], b"\"").unwrap() + 2;
    t[at] = if t[at] == b'A' { b'B' } else { b'A' };
    t
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
