//! Refreshing the server list from its own `sources` (RFC 10049's server list JSON)
//! or `servers-url`, on a jittered schedule, without holding up a round.
//!
//! ```text
//!  Service::round ──poll──▶ Refresher ──due──▶ thread: Fetcher::get (ureq, rustls)
//!        ▲                      │                 each URL in turn, first good list wins
//!        └── replace the list ◀─┘◀── channel ──── Attempt { tried: [(url, Result)] }
//! ```
//!
//! A download is HTTPS only, never follows a redirect, ends within
//! `timeout` however the bytes are paced, and stops reading at
//! [`MAX_LIST_BYTES`]. A list that fails any of that, does not parse, or
//! names fewer usable servers than the quorum keeps the old one: one log
//! line per refresh and one count per failure class ([`Counts`]). A good
//! list replaces the old one and is written to the state directory's list
//! cache, with a record of the URL it came from and the SHA-256 of the
//! operator's file it descends from ([`list::Record`]), so a restart uses
//! it for as long as the operator's own file is unchanged and still names
//! that URL (or `servers-url` does).
//! The fetch runs on a thread of its own: rounds go on meanwhile, and its
//! answer is taken at the next round.

use std::fmt;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::tls::{Certificate, RootCerts, TlsConfig};

use crate::jitter::{jittered, unit_random};
use crate::list::{self, Loaded};
// The counters live with the others in counts, the list cache with list;
// these moved there and keep their old paths here.
pub use crate::counts::{Refreshes as Counts, REFRESH_RESULTS as RESULTS};
pub use crate::list::{cache, SEED_FILE};

/// Larger lists are cut here and refused: the largest public list is a
/// few KiB, and a list server must not make sync allocate at will.
pub const MAX_LIST_BYTES: u64 = 1 << 20;

/// Why a refresh kept the old list. The label is the metrics' `result`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the timeout (connect, headers or body).
    Timeout,
    /// An HTTP status other than 200.
    Status(u16),
    /// A redirect (never followed: it could lead to plain HTTP).
    Redirect(u16, Option<String>),
    /// The body is larger than [`MAX_LIST_BYTES`].
    TooBig,
    /// The TLS handshake failed (untrusted certificate and the like).
    Tls(String),
    /// Anything else on the way (refused, reset, no such host).
    Network(String),
    /// Not a server list, or no usable server in it.
    Parse(String),
    /// Fewer usable servers than the quorum.
    TooFew {
        /// Usable servers in the list.
        usable: usize,
        /// The quorum.
        quorum: usize,
    },
}

impl Failure {
    /// The metrics label.
    pub fn label(&self) -> &'static str {
        match self {
            Failure::Timeout => "timeout",
            Failure::Status(_) => "status",
            Failure::Redirect(..) => "redirect",
            Failure::TooBig => "too_big",
            Failure::Tls(_) => "tls",
            Failure::Network(_) => "network",
            Failure::Parse(_) => "parse",
            Failure::TooFew { .. } => "too_few",
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout => write!(f, "timed out"),
            Failure::Status(s) => write!(f, "HTTP {s}"),
            Failure::Redirect(s, to) => write!(
                f,
                "redirected (HTTP {s}) to {}; redirects are not followed",
                to.as_deref().unwrap_or("an unnamed location")
            ),
            Failure::TooBig => write!(f, "larger than {MAX_LIST_BYTES} bytes"),
            Failure::Tls(e) => write!(f, "TLS: {e}"),
            Failure::Network(e) => write!(f, "{e}"),
            Failure::Parse(e) => write!(f, "{e}"),
            Failure::TooFew { usable, quorum } => write!(
                f,
                "{usable} usable server(s), fewer than the quorum ({quorum})"
            ),
        }
    }
}

/// Downloads of lists: HTTPS only, or plain HTTP too for signed lists.
#[derive(Clone)]
pub struct Fetcher {
    agent: ureq::Agent,
    plain_http: bool,
}

impl Fetcher {
    /// HTTPS only, trusting Mozilla's roots, or only the PEM certificates
    /// in `ca`.
    pub fn new(ca: Option<&Path>, timeout: Duration) -> Result<Fetcher, String> {
        Fetcher::build(ca, timeout, false)
    }

    /// As [`Fetcher::new`], and plain `http://` URLs too: for lists whose
    /// signature is checked against a pinned key (the signed lists), where
    /// TLS adds nothing the signature, expiry and sequence do not give.
    /// The limits stay: the timeout, [`MAX_LIST_BYTES`], no redirects.
    pub fn signed(ca: Option<&Path>, timeout: Duration) -> Result<Fetcher, String> {
        Fetcher::build(ca, timeout, true)
    }

    fn build(ca: Option<&Path>, timeout: Duration, plain_http: bool) -> Result<Fetcher, String> {
        let roots = match ca {
            None => RootCerts::WebPki,
            Some(p) => {
                let pem = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
                let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
                    .filter_map(|item| match item {
                        Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                        Ok(_) => None,
                        Err(e) => Some(Err(e)),
                    })
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("{}: {e}", p.display()))?;
                if certs.is_empty() {
                    return Err(format!("{}: no PEM certificate in it", p.display()));
                }
                RootCerts::new_with_certs(&certs)
            }
        };
        let agent = ureq::Agent::config_builder()
            .https_only(!plain_http)
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .tls_config(TlsConfig::builder().root_certs(roots).build())
            .build()
            .into();
        Ok(Fetcher { agent, plain_http })
    }

    /// The body at `url`, whole and at most [`MAX_LIST_BYTES`].
    pub fn get(&self, url: &str) -> Result<Vec<u8>, Failure> {
        let scheme = |s: &str| {
            url.get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s))
        };
        if !(scheme("https://") || self.plain_http && scheme("http://")) {
            let allowed = if self.plain_http {
                "an http:// or https://"
            } else {
                "an https://"
            };
            return Err(Failure::Network(format!("{url} is not {allowed} URL")));
        }
        let mut resp = self
            .agent
            .get(url)
            .header("Accept", gnomon_protocol::serverlist::MEDIA_TYPE)
            .call()
            .map_err(classify)?;
        let status = resp.status().as_u16();
        if (300..400).contains(&status) {
            let to = resp
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            return Err(Failure::Redirect(status, to));
        }
        if status != 200 {
            return Err(Failure::Status(status));
        }
        resp.body_mut()
            .with_config()
            .limit(MAX_LIST_BYTES)
            .read_to_vec()
            .map_err(classify)
    }
}

fn classify(e: ureq::Error) -> Failure {
    use std::error::Error as _;
    match e {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::BodyExceedsLimit(_) => Failure::TooBig,
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::Pem(_) => {
            Failure::Tls(e.to_string())
        }
        ureq::Error::Io(io) => {
            // rustls reports a handshake failure as an I/O error with
            // its own error inside.
            let tls = io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls_error::Inner>());
            if tls {
                Failure::Tls(io.to_string())
            } else if io.kind() == std::io::ErrorKind::TimedOut {
                Failure::Timeout
            } else {
                Failure::Network(crate::config::unreadable(&io))
            }
        }
        other => {
            let text = other.to_string();
            match other.source() {
                Some(s) if s.is::<rustls_error::Inner>() => Failure::Tls(text),
                _ => Failure::Network(text),
            }
        }
    }
}

/// The TLS error type, named through ureq's own dependency.
mod rustls_error {
    pub(super) type Inner = rustls::Error;
}

/// Check a downloaded list: it parses and names at least `quorum` usable
/// servers.
pub fn check(raw: Vec<u8>, url: &str, quorum: usize) -> Result<Loaded, Failure> {
    let l = list::parse(raw, url).map_err(Failure::Parse)?;
    if l.servers.len() < quorum {
        return Err(Failure::TooFew {
            usable: l.servers.len(),
            quorum,
        });
    }
    Ok(l)
}

/// One refresh: every URL tried, in order, until one gives a good list.
#[derive(Debug)]
pub struct Attempt {
    /// The failures, in order.
    pub failed: Vec<(String, Failure)>,
    /// The good list and its URL.
    pub fresh: Option<(String, Loaded)>,
}

/// Download from `urls` in turn (blocking; the [`Refresher`] runs it on a
/// thread).
pub fn attempt(fetcher: &Fetcher, urls: &[String], quorum: usize) -> Attempt {
    let mut failed = Vec::new();
    for url in urls {
        match fetcher.get(url).and_then(|raw| check(raw, url, quorum)) {
            Ok(l) => {
                return Attempt {
                    failed,
                    fresh: Some((url.clone(), l)),
                }
            }
            Err(f) => failed.push((url.clone(), f)),
        }
    }
    Attempt {
        failed,
        fresh: None,
    }
}

/// The schedule and the fetch in flight.
pub struct Refresher {
    fetcher: Fetcher,
    urls: Vec<String>,
    every: Duration,
    jitter: u8,
    next: Instant,
    pending: Option<Receiver<Attempt>>,
    /// Refreshes by result.
    pub counts: Arc<Counts>,
}

impl Refresher {
    /// Refreshes from `urls` in turn, or the list's `sources` when there
    /// are none, every `every` ± `jitter` percent, the first one after the
    /// first wait.
    pub fn new(
        fetcher: Fetcher,
        counts: Arc<Counts>,
        urls: Vec<String>,
        every: Duration,
        jitter: u8,
    ) -> Refresher {
        Refresher {
            fetcher,
            urls,
            every,
            jitter,
            next: Instant::now() + jittered(every, jitter, unit_random()),
            pending: None,
            counts,
        }
    }

    /// The finished attempt, if any; starts the next one when it is due
    /// (with `sources` from the current list). Never blocks.
    pub fn poll(&mut self, sources: &[String], quorum: usize) -> Option<Attempt> {
        if let Some(rx) = &self.pending {
            match rx.try_recv() {
                Ok(a) => {
                    self.pending = None;
                    return Some(a);
                }
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => self.pending = None,
            }
        }
        if Instant::now() < self.next {
            return None;
        }
        self.next = Instant::now() + jittered(self.every, self.jitter, unit_random());
        let urls: Vec<String> = if self.urls.is_empty() {
            sources.to_vec()
        } else {
            self.urls.clone()
        };
        if urls.is_empty() {
            return None;
        }
        let (tx, rx) = mpsc::channel();
        let fetcher = self.fetcher.clone();
        let spawned = std::thread::Builder::new()
            .name("gnomon-list".into())
            .spawn(move || {
                let _ = tx.send(attempt(&fetcher, &urls, quorum));
            });
        if spawned.is_ok() {
            self.pending = Some(rx);
        }
        None
    }

    /// Start the next refresh at the next poll (SIGHUP without a file).
    pub fn due_now(&mut self) {
        self.next = Instant::now();
    }

    /// Count `a` and say in one line what it did. The good list, if any,
    /// is the caller's to install.
    pub fn account(&self, a: &Attempt) -> String {
        for (_, f) in &a.failed {
            self.counts.bump(f.label());
        }
        let failures: Vec<String> = a.failed.iter().map(|(u, f)| format!("{u}: {f}")).collect();
        match &a.fresh {
            Some((url, l)) => {
                self.counts.bump("ok");
                let mut line = format!(
                    "list refresh: {} usable server(s) from {url}",
                    l.servers.len()
                );
                if !failures.is_empty() {
                    line.push_str(&format!(" (before it: {})", failures.join("; ")));
                }
                line
            }
            None => format!(
                "list refresh failed ({}); keeping the old list",
                failures.join("; ")
            ),
        }
    }
}
