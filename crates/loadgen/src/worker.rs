//! One sender socket: a single thread that sends, receives, matches and
//! verifies, so its ring of sent requests needs no locking.
//!
//! ```text
//!  pacing (token bucket | in-flight window) ─▶ build into ring slot ─▶ sendmmsg
//!  recvmmsg ─▶ match (nonce seq | Merkle proof) ─▶ latency ─▶ sampled verify
//!  nothing to do ─▶ ppoll until readable, next token, next expiry or the end
//! ```
//!
//! Nonces are sequence numbers plus a run tag, not random: that is what
//! makes matching O(1), and a load test needs no unpredictability.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gnomon_protocol::verify_response;

use crate::config::{LoadConfig, Mode};
use crate::histogram::Histogram;
use crate::ring::{splitmix, Ring, State};
use crate::stats::WorkerStats;
use crate::sys::{self, RecvBatch, BATCH};

pub(crate) use crate::ring::NONCE_TAG_LEN;

/// Receive buffer per datagram: larger than any request we send, so a
/// response that does not fit is flagged truncated, not cut silently.
const RECV_SLOT: usize = 4096;
/// Longest single wait, so a stop request is noticed promptly.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Pause after a send error, so a persistent one cannot spin a core.
const SEND_ERROR_BACKOFF_NS: u64 = 1_000_000;
/// Pause when the socket's send buffer is full.
const SEND_FULL_BACKOFF_NS: u64 = 50_000;

/// What all workers share.
pub(crate) struct Shared<'a> {
    pub(crate) cfg: &'a LoadConfig,
    pub(crate) start: Instant,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) salt: u64,
}

impl Shared<'_> {
    pub(crate) fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// Pacing for rate mode: credit accrues at `rate`, at most `burst` of it
/// kept; credit beyond that is counted as throttled (the window was full or
/// the generator fell behind), so the report shows the shortfall.
struct Bucket {
    ns_per: f64,
    taken: u64,
    burst: u64,
    dropped: u64,
}

impl Bucket {
    fn new(rate: f64) -> Bucket {
        Bucket {
            ns_per: 1e9 / rate,
            taken: 0,
            // 20 ms of credit absorbs scheduling jitter and the pause of
            // verifying a received batch (64 × ~90 µs) without becoming a
            // burst large enough to skew the server's latency.
            burst: ((rate * 0.02).ceil() as u64).clamp(1, 4096),
            dropped: 0,
        }
    }

    /// Sends due at `now_ns`; the first is due at 0.
    fn due(&mut self, now_ns: u64) -> u64 {
        let earned = (now_ns as f64 / self.ns_per) as u64 + 1;
        let avail = earned.saturating_sub(self.taken);
        if avail > self.burst {
            self.dropped += avail - self.burst;
            self.taken += avail - self.burst;
            return self.burst;
        }
        avail
    }

    fn take(&mut self, n: u64) {
        self.taken += n;
    }

    /// When the next send becomes due.
    fn next_due_ns(&self) -> u64 {
        (self.taken as f64 * self.ns_per).ceil() as u64
    }
}

/// Drive one socket until its share of the run is sent and answered (or
/// given up on).
pub(crate) fn run(
    id: usize,
    sock: &UdpSocket,
    shared: &Shared<'_>,
    quota: Option<u64>,
) -> WorkerStats {
    let cpu0 = sys::thread_cpu_time();
    let cfg = shared.cfg;
    let workers = cfg.workers as f64;
    let window = cfg.effective_window() as u64;
    let tag = splitmix(shared.salt ^ (id as u64 + 1));
    let mut ring = Ring::new(
        (window as usize).next_power_of_two() * 2,
        cfg.request_size,
        cfg.profile,
        tag,
        &cfg.key,
    );
    let mut bucket = match cfg.mode {
        Mode::Rate(r) => Some(Bucket::new(r / workers)),
        Mode::Max => None,
    };
    let verify_below = cfg.verify_fraction;
    let timeout_ns = cfg.timeout.as_nanos() as u64;
    let send_end_ns = cfg.duration.as_nanos() as u64;
    let quota = quota.unwrap_or(u64::MAX);

    let mut st = WorkerStats::new();
    let mut hist = Histogram::new();
    let mut recv = RecvBatch::new(RECV_SLOT);
    let (mut next, mut oldest, mut in_flight) = (0u64, 0u64, 0u64);
    let mut stopped_at: Option<u64> = None;
    let mut send_retry_ns = 0u64;
    // In any-reply mode: the oldest request that may still be outstanding.
    let mut fifo = 0u64;

    loop {
        let now = shared.now_ns();
        if stopped_at.is_none()
            && (now >= send_end_ns || next >= quota || shared.stop.load(Ordering::Relaxed))
        {
            stopped_at = Some(now);
        }

        // Retire the oldest requests: answered ones, and those past the timeout.
        while oldest < next {
            match ring.get(oldest) {
                Some((State::Outstanding, sent)) if now.saturating_sub(sent) < timeout_ns => break,
                Some((State::Outstanding, _)) => {
                    ring.set_state(oldest, State::Expired);
                    in_flight -= 1;
                    st.lost += 1;
                }
                _ => {}
            }
            oldest += 1;
        }
        if let Some(t) = stopped_at {
            let interrupted = shared.stop.load(Ordering::Relaxed) && now >= t + timeout_ns / 4;
            if in_flight == 0 || now >= t + timeout_ns || interrupted {
                st.send_phase_ns = t;
                break;
            }
        }

        // Send what the pacing and the window allow, one batch at a time.
        let mut n_sent = 0u64;
        let room = (window - in_flight)
            .min(ring.len() - (next - oldest))
            .min(quota.saturating_sub(next))
            .min(BATCH as u64);
        if stopped_at.is_none() && now >= send_retry_ns {
            let want = match bucket.as_mut() {
                Some(b) => b.due(now).min(room),
                None => room,
            };
            if want > 0 {
                let mut built = 0;
                while built < want && ring.build(next + built) {
                    built += 1;
                }
                let mut views: [&[u8]; BATCH] = [&[]; BATCH];
                for (k, v) in views.iter_mut().enumerate().take(built as usize) {
                    *v = ring.request(next + k as u64);
                }
                let stamp = shared.now_ns();
                match sys::send_connected(sock, &views[..built as usize]) {
                    Ok(k) => {
                        for s in next..next + k as u64 {
                            ring.sent(s, stamp);
                        }
                        n_sent = k as u64;
                        if k == 0 {
                            // The send buffer is full: give the kernel a moment.
                            send_retry_ns = stamp + SEND_FULL_BACKOFF_NS;
                        }
                    }
                    Err(_) => {
                        // ECONNREFUSED after an ICMP port-unreachable, or the
                        // network is down: count it and back off.
                        st.send_errors += 1;
                        send_retry_ns = stamp + SEND_ERROR_BACKOFF_NS;
                    }
                }
                next += n_sent;
                in_flight += n_sent;
                st.sent += n_sent;
                if let Some(b) = bucket.as_mut() {
                    b.take(n_sent);
                }
            }
        }

        // Receive what has arrived, without blocking.
        let got = match sys::recv_batch(sock, &mut recv, false) {
            Ok(n) => n,
            Err(_) => {
                // Only ICMP-derived errors reach here on a connected UDP
                // socket; they are counted, never fatal.
                st.recv_errors += 1;
                0
            }
        };
        let recv_ns = shared.now_ns();
        for i in 0..got {
            let Some(d) = recv.datagram(i) else {
                st.unmatched += 1;
                continue;
            };
            let found = if cfg.any_reply {
                fifo = fifo.max(oldest);
                while fifo < next && !matches!(ring.get(fifo), Some((State::Outstanding, _))) {
                    fifo += 1;
                }
                (fifo < next).then_some(fifo)
            } else {
                ring.find(d, oldest, next)
            };
            let Some(seq) = found else {
                st.unmatched += 1;
                continue;
            };
            match ring.get(seq) {
                Some((State::Outstanding, sent)) => {
                    ring.set_state(seq, State::Answered);
                    in_flight -= 1;
                    st.answered += 1;
                    hist.record(recv_ns.saturating_sub(sent));
                    if !cfg.any_reply && sampled(seq ^ tag, verify_below) {
                        st.verified += 1;
                        match verify_response(ring.request(seq), d, &cfg.key) {
                            Ok(_) => st.valid += 1,
                            Err(e) => st.invalid(e),
                        }
                    }
                }
                Some((State::Expired, _)) => st.late += 1,
                Some((State::Answered, _)) => st.duplicate += 1,
                Some((State::Free, _)) | None => st.unmatched += 1,
            }
        }

        if n_sent == 0 && got == 0 {
            // Nothing moved: sleep until something can.
            let mut deadline = now + MAX_WAIT.as_nanos() as u64;
            if let Some((State::Outstanding, sent)) = ring.get(oldest) {
                deadline = deadline.min(sent + timeout_ns);
            }
            match stopped_at {
                Some(t) => deadline = deadline.min(t + timeout_ns),
                None => {
                    deadline = deadline.min(send_end_ns);
                    if send_retry_ns > now {
                        deadline = deadline.min(send_retry_ns);
                    }
                    // With the window full only a response or an expiry
                    // makes room, so the next token is no reason to wake.
                    if let (Some(b), true) = (&bucket, room > 0) {
                        deadline = deadline.min(b.next_due_ns());
                    }
                }
            }
            let wait = Duration::from_nanos(deadline.saturating_sub(shared.now_ns()));
            if !wait.is_zero() {
                // A failed wait only shortens the sleep.
                let _ = sys::wait(sock, wait);
            }
        }
    }

    st.lost += in_flight;
    st.throttled = bucket.map_or(0, |b| b.dropped);
    st.hist = hist;
    st.cpu = sys::thread_cpu_time().saturating_sub(cpu0);
    st
}

/// Whether the response to the request tagged `x` is verified, for a
/// fraction `f` of requests spread evenly over the run.
pub(crate) fn sampled(x: u64, f: f64) -> bool {
    ((splitmix(x) >> 11) as f64 / (1u64 << 53) as f64) < f
}
