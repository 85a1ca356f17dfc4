//! An HTTPS server on loopback for list downloads: a CA made in the test
//! (rcgen), a certificate for 127.0.0.1 signed by it, rustls, and one
//! path whose answer the test changes while the server runs.
#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// What the server answers.
#[derive(Clone, Debug)]
pub enum Answer {
    /// 200 with this body.
    Body(Vec<u8>),
    /// This status, empty body.
    Status(u16),
    /// 302 to this location.
    Redirect(String),
    /// 200 with a body of this many bytes, sent whole.
    Huge(usize),
    /// Headers announcing 1000 bytes, then one byte every 100 ms until
    /// the client leaves or the server stops (at most a minute).
    Trickle,
}

pub struct HttpsServer {
    pub addr: SocketAddr,
    /// PEM of the CA that signed the server's certificate.
    pub ca_pem: String,
    answer: Arc<Mutex<Answer>>,
    stop: Arc<AtomicBool>,
    /// Requests served (any answer).
    pub requests: Arc<AtomicUsize>,
    /// A message each time a `Trickle` answer starts and ends.
    trickles: Receiver<&'static str>,
}

impl HttpsServer {
    pub fn start(first: Answer) -> HttpsServer {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let cert = params
            .signed_by(&key, &Issuer::new(ca_params, ca_key))
            .unwrap();
        let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, der)
            .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let answer = Arc::new(Mutex::new(first));
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let (tx, trickles) = mpsc::channel();
        {
            let (answer, stop, requests) = (answer.clone(), stop.clone(), requests.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let (config, answer, stop, requests, tx) = (
                                config.clone(),
                                answer.clone(),
                                stop.clone(),
                                requests.clone(),
                                tx.clone(),
                            );
                            std::thread::spawn(move || {
                                serve(s, config, &answer, &stop, &requests, &tx)
                            });
                        }
                        Err(_) => std::thread::park_timeout(Duration::from_millis(20)),
                    }
                }
            });
        }
        HttpsServer {
            addr,
            ca_pem: ca_cert.pem(),
            answer,
            stop,
            requests,
            trickles,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    pub fn set(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    pub fn write_ca(&self, path: &Path) {
        std::fs::write(path, &self.ca_pem).unwrap();
    }

    /// Wait for a `Trickle` answer to start ("start") or end ("end").
    pub fn wait_trickle(&self, what: &str, patience: Duration) -> bool {
        let until = Instant::now() + patience;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.trickles.recv_timeout(left) {
                Ok(w) if w == what => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    answer: &Mutex<Answer>,
    stop: &AtomicBool,
    requests: &AtomicUsize,
    tx: &Sender<&'static str>,
) {
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = tcp.set_write_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    // The request head, bounded.
    let mut head = Vec::new();
    let mut b = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match tls.read(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&b[..n]),
        }
    }
    requests.fetch_add(1, Ordering::Relaxed);
    let a = answer.lock().unwrap().clone();
    let _ = match a {
        Answer::Body(body) => respond(&mut tls, "200 OK", &[], &body),
        Answer::Status(s) => respond(&mut tls, &format!("{s} Status"), &[], b""),
        Answer::Redirect(to) => respond(&mut tls, "302 Found", &[("Location", &to)], b""),
        Answer::Huge(n) => respond(&mut tls, "200 OK", &[], &vec![b' '; n]),
        Answer::Trickle => {
            let _ = tx.send("start");
            let mut r = tls
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n");
            let until = Instant::now() + Duration::from_secs(60);
            while r.is_ok() && !stop.load(Ordering::Relaxed) && Instant::now() < until {
                r = tls.write_all(b" ").and_then(|()| tls.flush());
                std::thread::park_timeout(Duration::from_millis(100));
            }
            let _ = tx.send("end");
            r
        }
    };
}

fn respond(
    tls: &mut impl Write,
    status: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    tls.write_all(head.as_bytes())?;
    tls.write_all(body)?;
    tls.flush()
}
