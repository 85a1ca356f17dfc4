//! What a load run is asked to do, checked before any socket is opened.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use gnomon_protocol::{LongTermKey, Profile};

/// Longest run allowed: the tool measures, it does not soak.
pub const MAX_DURATION: Duration = Duration::from_secs(300);
/// Longest wait for a response before it counts as lost.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(10);
/// Most sender sockets (one thread each).
pub const MAX_WORKERS: usize = 64;
/// Most requests in flight per socket. An open-loop run against an
/// overloaded server needs rate × timeout in flight, or the window, not the
/// rate, sets what is offered.
pub const MAX_WINDOW: usize = 16_384;
/// The window of `--rate` runs unless one is given: 4096 per socket keeps
/// each socket's ring at 8 MiB.
pub const DEFAULT_RATE_WINDOW: usize = 4096;
/// Largest request: what fits an Ethernet frame without IP fragmentation.
pub const MAX_REQUEST_SIZE: usize = 1472;
/// Highest total rate accepted in rate mode, per second.
pub const MAX_RATE: f64 = 10_000_000.0;

/// How requests reach the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Datagrams, paced by `Mode`.
    Udp,
    /// One connection per worker, closed loop: `window` requests written
    /// together, the next burst when all are answered (`Mode::Max` only).
    /// The only transport of versions not served over UDP (ML-DSA-44).
    Tcp,
}

impl Transport {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// How sends are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// A fixed total rate in requests per second, spread over the sockets.
    Rate(f64),
    /// As fast as responses come back, with at most `window` requests in
    /// flight per socket.
    Max,
}

/// One load run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The server, as `host:port`; resolved, and refused if not loopback
    /// unless `allow_remote`.
    pub target: String,
    /// Whether a target outside 127.0.0.0/8 and ::1 is allowed.
    pub allow_remote: bool,
    /// The server's long-term public key, of the profile's scheme.
    pub key: LongTermKey,
    /// The version to request.
    pub profile: &'static Profile,
    /// Pacing.
    pub mode: Mode,
    /// Datagrams or connections.
    pub transport: Transport,
    /// How long to send.
    pub duration: Duration,
    /// Stop sending after this many requests in total, if sooner.
    pub count: Option<u64>,
    /// Sender sockets, one thread each.
    pub workers: usize,
    /// Requests in flight per socket; `None` picks 64 for `Max` and
    /// [`DEFAULT_RATE_WINDOW`] for `Rate`.
    pub window: Option<usize>,
    /// How long a request may wait for its response before it is lost; also
    /// how long the run waits for stragglers after the last send.
    pub timeout: Duration,
    /// Request size in bytes (whole packet, or bare message for Google).
    pub request_size: usize,
    /// Fraction of responses fully verified (0..=1). Verification costs two
    /// Ed25519 checks (≈90 µs) per response, so at 1.0 a few sockets cannot
    /// keep up with a fast server; responses not verified still count as
    /// answered.
    pub verify_fraction: f64,
    /// Take any datagram as the answer to the oldest outstanding request of
    /// its socket, verifying nothing: for baselines against the do-nothing
    /// responder, whose replies are not Roughtime.
    pub any_reply: bool,
}

impl LoadConfig {
    /// A run against `target` with the defaults of `gnomon bench load`.
    pub fn new(
        target: impl Into<String>,
        key: impl Into<LongTermKey>,
        profile: &'static Profile,
    ) -> Self {
        LoadConfig {
            target: target.into(),
            allow_remote: false,
            key: key.into(),
            profile,
            mode: Mode::Max,
            transport: Transport::Udp,
            duration: Duration::from_secs(10),
            count: None,
            workers: 4,
            window: None,
            timeout: Duration::from_secs(1),
            request_size: gnomon_protocol::request::DEFAULT_REQUEST_SIZE,
            verify_fraction: 1.0,
            any_reply: false,
        }
    }

    /// The in-flight bound per socket this run uses.
    pub fn effective_window(&self) -> usize {
        self.window.unwrap_or(match self.mode {
            Mode::Max => 64,
            Mode::Rate(_) => DEFAULT_RATE_WINDOW,
        })
    }

    /// Check every value and resolve the target; the error names the value
    /// and the accepted range.
    pub(crate) fn check(&self) -> Result<SocketAddr, LoadError> {
        let bad = |what: &'static str, detail: String| Err(LoadError::Invalid { what, detail });
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return bad(
                "duration",
                format!(
                    "{:?} is outside (0, {} s]",
                    self.duration,
                    MAX_DURATION.as_secs()
                ),
            );
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return bad(
                "timeout",
                format!(
                    "{:?} is outside (0, {} s]",
                    self.timeout,
                    MAX_TIMEOUT.as_secs()
                ),
            );
        }
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return bad(
                "workers",
                format!("{} is outside 1..={MAX_WORKERS}", self.workers),
            );
        }
        let window = self.effective_window();
        if window == 0 || window > MAX_WINDOW {
            return bad("window", format!("{window} is outside 1..={MAX_WINDOW}"));
        }
        if let Mode::Rate(r) = self.mode {
            if !(r > 0.0 && r <= MAX_RATE) {
                return bad("rate", format!("{r} is outside (0, {MAX_RATE}]"));
            }
        }
        if self.count == Some(0) {
            return bad("count", "must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.verify_fraction) {
            return bad(
                "verify-fraction",
                format!("{} is outside [0, 1]", self.verify_fraction),
            );
        }
        if self.request_size > MAX_REQUEST_SIZE || !self.request_size.is_multiple_of(4) {
            return bad(
                "request-size",
                format!(
                    "{} must be a multiple of 4 and at most {MAX_REQUEST_SIZE}",
                    self.request_size
                ),
            );
        }
        let mut buf = [0u8; MAX_REQUEST_SIZE];
        let nonce = [0u8; 64];
        let offer = gnomon_protocol::Offer::single(self.profile);
        if offer
            .build(
                &nonce[..self.profile.nonce_len],
                None,
                self.request_size,
                &mut buf,
            )
            .is_err()
        {
            return bad(
                "request-size",
                format!(
                    "{} cannot hold a {} request",
                    self.request_size, self.profile.name
                ),
            );
        }
        match self.transport {
            Transport::Udp if !self.profile.udp => {
                return bad(
                    "version",
                    format!("{} is served over TCP only: pass --tcp", self.profile.name),
                );
            }
            Transport::Tcp if !self.profile.tcp => {
                return bad(
                    "version",
                    format!("{} is not served over TCP", self.profile.name),
                );
            }
            // Closed loop: the server's speed sets the rate, as with --max.
            Transport::Tcp if self.mode != Mode::Max => {
                return bad("rate", "TCP load is closed-loop: use --max".into());
            }
            // Replies on a stream are matched by their order and framing.
            Transport::Tcp if self.any_reply => {
                return bad("any-reply", "is for UDP baselines only".into());
            }
            _ => {}
        }
        // A key of the wrong scheme would fail every verification, which
        // reads as a broken server rather than a mistyped command.
        if !self.any_reply && self.key.scheme() != self.profile.scheme {
            return bad(
                "key",
                format!(
                    "is an {} key; {} is signed with {}",
                    self.key.scheme(),
                    self.profile.name,
                    self.profile.scheme
                ),
            );
        }
        if self.profile.nonce_len < crate::worker::NONCE_TAG_LEN {
            return bad(
                "version",
                format!("{} nonces are too short to tag", self.profile.name),
            );
        }
        self.resolve()
    }

    fn resolve(&self) -> Result<SocketAddr, LoadError> {
        let addrs: Vec<SocketAddr> = self
            .target
            .to_socket_addrs()
            .map_err(|e| LoadError::Invalid {
                what: "target",
                detail: format!("{:?}: {e}", self.target),
            })?
            .collect();
        let first = *addrs.first().ok_or_else(|| LoadError::Invalid {
            what: "target",
            detail: format!("{:?} resolves to no address", self.target),
        })?;
        if !self.allow_remote {
            if let Some(remote) = addrs.iter().find(|a| !a.ip().is_loopback()) {
                return Err(LoadError::RemoteTarget(*remote));
            }
        }
        Ok(first)
    }
}

/// Why a run did not start or failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// A configuration value is out of range.
    Invalid {
        /// The option.
        what: &'static str,
        /// What is wrong and what is accepted.
        detail: String,
    },
    /// The target is not on this machine and `allow_remote` was not given.
    RemoteTarget(SocketAddr),
    /// A socket could not be set up.
    Socket(std::io::Error),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Invalid { what, detail } => write!(f, "bad --{what}: {detail}"),
            LoadError::RemoteTarget(a) => write!(
                f,
                "refusing to load {a}: it is not a loopback address. Load tests send real \
                 traffic; point this only at servers you run, and pass --allow-remote to confirm"
            ),
            LoadError::Socket(e) => write!(f, "socket setup failed: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}
