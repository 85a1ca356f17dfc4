//! Monitors for the tests: keys from seeds, lists in the published form,
//! signatures as `gnomon watch --publish-key` makes them, and a plain
//! HTTP server on loopback that serves them.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::{Signer, SigningKey};
use gnomon_protocol::signed_list::{format_utc, sshsig, MonitorKey, NAMESPACE};
use serde_json::json;

/// A monitor's signing key, from a seed so runs repeat.
pub(crate) struct Monitor {
    signing: SigningKey,
    name: String,
}

impl Monitor {
    pub(crate) fn new(seed: u8, name: &str) -> Monitor {
        Monitor {
            signing: SigningKey::from_bytes(&[seed; 32]),
            name: name.to_string(),
        }
    }

    pub(crate) fn key(&self) -> MonitorKey {
        MonitorKey::from_ed25519(self.signing.verifying_key().to_bytes(), &self.name)
    }

    pub(crate) fn sign(&self, document: &[u8]) -> Vec<u8> {
        let sig = self.signing.sign(&sshsig::signed_data(NAMESPACE, document));
        sshsig::armor(
            &self.signing.verifying_key().to_bytes(),
            NAMESPACE,
            &sig.to_bytes(),
        )
        .into_bytes()
    }

    /// A list of servers numbered `servers` (key byte n, address
    /// 10.0.0.n:2002), with `sequence`, published at `published` and
    /// expiring at `expires` (Unix seconds).
    pub(crate) fn list(
        &self,
        servers: &[u8],
        sequence: u64,
        published: i64,
        expires: i64,
    ) -> Vec<u8> {
        let entries: Vec<serde_json::Value> = servers
            .iter()
            .map(|&n| {
                json!({
                    "name": format!("server-{n}"),
                    "version": 1,
                    "publicKeyType": "ed25519",
                    "publicKey": gnomon_b64(&[n; 32]),
                    "addresses": [{"protocol": "udp", "address": format!("10.0.0.{n}:2002")}],
                })
            })
            .collect();
        serde_json::to_vec(&json!({
            "servers": entries,
            "observatory": {
                "monitor": self.name,
                "sequence": sequence,
                "published": format_utc(published),
                "expires": format_utc(expires),
            }
        }))
        .unwrap()
    }
}

fn gnomon_b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The server key bytes a merged document names, sorted.
pub(crate) fn server_bytes(document: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let doc: serde_json::Value = serde_json::from_slice(document).unwrap();
    let mut out: Vec<u8> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let k = base64::engine::general_purpose::STANDARD
                .decode(s["publicKey"].as_str().unwrap())
                .unwrap();
            k[0]
        })
        .collect();
    out.sort_unstable();
    out
}

/// A plain HTTP server on loopback: each path answers the body set for
/// it, or 404. Stopped when dropped.
pub(crate) struct Http {
    pub(crate) addr: SocketAddr,
    bodies: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Http {
    pub(crate) fn start() -> Http {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (bodies.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((mut c, _)) = listener.accept() else {
                    std::thread::park_timeout(Duration::from_millis(10));
                    continue;
                };
                let _ = c.set_nonblocking(false);
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let path = text.split_whitespace().nth(1).unwrap_or("").to_string();
                let body = b.lock().unwrap().get(&path).cloned();
                let (status, body) = match body {
                    Some(body) => ("200 OK", body),
                    None => ("404 Not Found", Vec::new()),
                };
                let _ = write!(
                    c,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = c.write_all(&body);
            }
        });
        Http { addr, bodies, stop }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(crate) fn set(&self, path: &str, body: Option<Vec<u8>>) {
        let mut b = self.bodies.lock().unwrap();
        match body {
            Some(body) => b.insert(path.to_string(), body),
            None => b.remove(path),
        };
    }

    /// Serve `list` at `path` and `sig` at `path.sig`.
    pub(crate) fn serve(&self, path: &str, list: Vec<u8>, sig: Vec<u8>) {
        self.set(path, Some(list));
        self.set(&format!("{path}.sig"), Some(sig));
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
