//! Prometheus text exposition and a health endpoint on their own listener,
//! out of band from the workers: workers publish counter snapshots; this
//! thread only reads them.
//!
//! Here is what is reported: a [`Snapshot`], plain data that the engine
//! gathers at each scrape; `metrics/text.rs` writes it as Prometheus text.
//! The HTTP side (`metrics/http.rs`) is deliberately small: GET only, one request
//! per connection, several connections at once, each with a deadline from
//! accept. It never touches the request path.

mod http;
mod text;

pub use http::spawn;
pub use text::render;

use gnomon_protocol::LongTermKey;

pub use crate::key::key_label;
use crate::stats::{TcpStats, WorkerStats};

/// Everything the endpoint reports, read at scrape time.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Summed worker counters.
    pub stats: WorkerStats,
    /// Earliest delegation expiry, Unix s.
    pub cert_expiry_s: u64,
    /// Current time, Unix s.
    pub now_s: u64,
    /// Whether the current delegations cover the current time. False for a
    /// while after a clock step, or when no offline delegation covers now.
    pub can_sign: bool,
    /// Advertised radius, µs.
    pub radius_us: u64,
    /// Whether the server answers (clock synchronized or policy allows).
    pub answering: bool,
    /// Whether the kernel says the clock is synchronized.
    pub clock_synchronized: bool,
    /// Whether the kernel's clock state could be read at all.
    pub clock_readable: bool,
    /// TCP counters, when TCP is served.
    pub tcp: Option<TcpStats>,
    /// The keys signing now, one per identity.
    pub keys: Vec<KeyInfo>,
    /// Configuration reloads and delegation rescans.
    pub reloads: crate::reload::ReloadCounts,
    /// The AF_XDP path, when it runs.
    pub xdp: Option<XdpInfo>,
}

/// Where the AF_XDP path runs.
#[derive(Clone)]
pub struct XdpInfo {
    /// The interface.
    pub interface: String,
    /// `native` or `generic`.
    pub mode: &'static str,
    /// Sockets bound zero-copy.
    pub zero_copy: bool,
    /// Receive queues served.
    pub queues: u32,
    /// What the program knows of the host and what it left to the kernel,
    /// read when the page is made.
    pub gate: std::sync::Arc<crate::xdp::Gate>,
}

impl std::fmt::Debug for XdpInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpInfo")
            .field("interface", &self.interface)
            .field("mode", &self.mode)
            .field("zero_copy", &self.zero_copy)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

/// Which online key answers for an identity, and for which host it was made:
/// in a fleet sharing one long-term key, the online key in a response's
/// delegation tells which host answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInfo {
    /// Long-term public key.
    pub long_term: LongTermKey,
    /// Online public key.
    pub online: LongTermKey,
    /// Host name of an offline delegation set, if it names one.
    pub host: Option<String>,
}

impl Snapshot {
    /// Healthy: answering, and able to sign the current time.
    pub fn healthy(&self) -> bool {
        self.answering && self.can_sign
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn serves_metrics_and_health() {
        let stop = Arc::new(AtomicBool::new(false));
        let healthy = Arc::new(AtomicBool::new(true));
        let h = healthy.clone();
        let (addr, handle) = spawn("127.0.0.1:0".parse().unwrap(), stop.clone(), move || {
            Snapshot {
                answering: h.load(Ordering::Relaxed),
                cert_expiry_s: 10,
                now_s: 5,
                can_sign: true,
                ..Default::default()
            }
        })
        .unwrap();
        assert!(get(addr, "/metrics").contains("gnomon_signatures_total 0"));
        assert!(get(addr, "/health").starts_with("HTTP/1.1 200"));
        healthy.store(false, Ordering::Relaxed);
        let down = get(addr, "/health");
        assert!(
            down.starts_with("HTTP/1.1 503") && down.contains("unsynchronized"),
            "{down}"
        );
        assert!(get(addr, "/nope").starts_with("HTTP/1.1 404"));
        stop.store(true, Ordering::Relaxed);
        handle.join().unwrap();
    }
}
