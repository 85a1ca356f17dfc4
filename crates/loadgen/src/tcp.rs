//! Closed-loop load over TCP: the only transport of ML-DSA-44 (version
//! 0x90000001), whose 6.4 KB answers a datagram may not carry, and the
//! same path for Ed25519 to compare against.
//!
//! ```text
//!  worker: connect ─▶ build `window` requests ─▶ one write ─▶ read `window`
//!          framed responses, in order ─▶ match, latency, sampled verify ─▶ …
//!  server closed ─▶ the burst's unanswered requests are `closed` ─▶ reconnect
//!  stalled, broken or not Roughtime ─▶ they are lost ─▶ reconnect
//! ```
//!
//! A burst goes out in one write so that the server reads, and signs, it
//! together, as it does a pipelining client's; the next burst waits for
//! every answer, so the server's speed sets the rate and nothing queues
//! without bound. The server answers a connection's requests in order, so a
//! response is matched to its position and its nonce checked against it.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gnomon_protocol::verify_response;
use gnomon_protocol::wire::{self, PACKET_HEADER};

use crate::config::{LoadConfig, Mode};
use crate::histogram::Histogram;
use crate::report::{Report, RunInfo};
use crate::ring::{splitmix, Ring};
use crate::stats::WorkerStats;
use crate::sys;
use crate::worker::{sampled, Shared};

/// Longest response accepted: an ML-DSA-44 answer is about 6.4 KB; a header
/// announcing more means the stream is not Roughtime.
const MAX_RESPONSE: usize = 16 * 1024;
/// Pause after a failed connect, so a refused target cannot spin a core.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
/// Read buffer: a whole burst of ML-DSA answers in a few syscalls.
const READ_BUFFER: usize = 64 * 1024;

/// Run every worker over its own connection and merge what they saw.
pub(crate) fn run_all(cfg: &LoadConfig, target: SocketAddr, stop: &AtomicBool) -> Report {
    let shared = Shared {
        cfg,
        start: Instant::now(),
        stop,
        salt: crate::salt(),
    };
    let per = cfg
        .count
        .map(|c| (c / cfg.workers as u64, c % cfg.workers as u64));
    let mut total = WorkerStats::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.workers)
            .map(|id| {
                let quota = per.map(|(q, r)| q + u64::from((id as u64) < r));
                let shared = &shared;
                s.spawn(move || run(id, target, shared, quota))
            })
            .collect();
        for h in handles {
            let st = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            total.merge(&st);
        }
    });
    let info = RunInfo {
        target,
        transport: cfg.transport,
        version: cfg.profile.name,
        mode: Mode::Max,
        workers: cfg.workers,
        window: cfg.effective_window(),
        verify_fraction: cfg.verify_fraction,
        request_size: cfg.request_size,
        any_reply: false,
        elapsed_secs: shared.start.elapsed().as_secs_f64(),
        cpu_secs: total.cpu.as_secs_f64(),
    };
    Report::new(info, &total)
}

/// One connection's closed loop, until the run's time or this worker's
/// quota is used up, or `stop` is set.
fn run(id: usize, target: SocketAddr, shared: &Shared<'_>, quota: Option<u64>) -> WorkerStats {
    let cpu0 = sys::thread_cpu_time();
    let cfg = shared.cfg;
    let window = cfg.effective_window() as u64;
    let tag = splitmix(shared.salt ^ (id as u64 + 1));
    let mut ring = Ring::new(
        (window as usize).next_power_of_two(),
        cfg.request_size,
        cfg.profile,
        tag,
        &cfg.key,
    );
    let send_end_ns = cfg.duration.as_nanos() as u64;
    let quota = quota.unwrap_or(u64::MAX);
    let mut st = WorkerStats::new();
    let mut hist = Histogram::new();
    let mut conn: Option<BufReader<TcpStream>> = None;
    let mut burst = Vec::with_capacity(window as usize * cfg.request_size);
    let mut frame = Vec::with_capacity(MAX_RESPONSE);
    let mut next = 0u64;
    loop {
        let now = shared.now_ns();
        if now >= send_end_ns || next >= quota || shared.stop.load(Ordering::Relaxed) {
            st.send_phase_ns = now;
            break;
        }
        let stream = match conn {
            Some(ref mut s) => s,
            None => match connect(target, cfg.timeout) {
                Ok(s) => conn.insert(s),
                Err(e) => {
                    st.send_errors += 1;
                    st.refused += u64::from(e.kind() == ErrorKind::ConnectionRefused);
                    let left = Duration::from_nanos(send_end_ns - now);
                    std::thread::sleep(CONNECT_BACKOFF.min(left));
                    continue;
                }
            },
        };
        let n = window.min(quota - next);
        burst.clear();
        for seq in next..next + n {
            // The configuration check built this request size already.
            ring.build(seq);
            burst.extend_from_slice(ring.request(seq));
        }
        let sent_ns = shared.now_ns();
        if stream.get_mut().write_all(&burst).is_err() {
            st.send_errors += 1;
            conn = None;
            continue;
        }
        for seq in next..next + n {
            ring.sent(seq, sent_ns);
        }
        let first = next;
        next += n;
        st.sent += n;
        for seq in first..next {
            if let Err(e) = read_frame(stream, &mut frame) {
                // The rest of the burst has no answer on this connection.
                // A server that closes between answers does so by policy
                // (its request cap or lifetime: the reconnect is the cost
                // measured); a stall past the timeout, a cut frame or a
                // stream that is not Roughtime is a loss.
                match e {
                    FrameError::Closed => st.closed += next - seq,
                    FrameError::Broken => {
                        st.recv_errors += 1;
                        st.lost += next - seq;
                    }
                }
                conn = None;
                break;
            }
            let recv_ns = shared.now_ns();
            if ring.find(&frame, seq, seq + 1) != Some(seq) {
                st.unmatched += 1;
                st.lost += 1;
                continue;
            }
            st.answered += 1;
            hist.record(recv_ns.saturating_sub(sent_ns));
            if sampled(seq ^ tag, cfg.verify_fraction) {
                st.verified += 1;
                match verify_response(ring.request(seq), &frame, &cfg.key) {
                    Ok(_) => st.valid += 1,
                    Err(e) => st.invalid(e),
                }
            }
        }
    }
    st.hist = hist;
    st.cpu = sys::thread_cpu_time().saturating_sub(cpu0);
    st
}

fn connect(target: SocketAddr, timeout: Duration) -> std::io::Result<BufReader<TcpStream>> {
    let s = TcpStream::connect_timeout(&target, timeout)?;
    // Requests are written whole; Nagle would only hold the next burst.
    s.set_nodelay(true)?;
    // Bounds every read and write, so a stalled server ends the burst
    // rather than the run's time bound being exceeded.
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok(BufReader::with_capacity(READ_BUFFER, s))
}

/// Why no frame was read.
enum FrameError {
    /// The server ended the connection between frames (an end of stream
    /// or a reset before the next frame's first byte).
    Closed,
    /// A stall past the timeout, a frame cut short, or bytes that are not
    /// a Roughtime frame.
    Broken,
}

/// Read one ROUGHTIM-framed packet into `frame`.
fn read_frame(stream: &mut BufReader<TcpStream>, frame: &mut Vec<u8>) -> Result<(), FrameError> {
    match stream.fill_buf() {
        Ok([]) => return Err(FrameError::Closed),
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => return Err(FrameError::Closed),
        Err(_) => return Err(FrameError::Broken),
    }
    frame.resize(PACKET_HEADER, 0);
    stream.read_exact(frame).map_err(|_| FrameError::Broken)?;
    if !wire::has_magic(frame) {
        return Err(FrameError::Broken);
    }
    let len = u32::from_le_bytes([frame[8], frame[9], frame[10], frame[11]]) as usize;
    if len > MAX_RESPONSE - PACKET_HEADER {
        return Err(FrameError::Broken);
    }
    frame.resize(PACKET_HEADER + len, 0);
    stream
        .read_exact(&mut frame[PACKET_HEADER..])
        .map_err(|_| FrameError::Broken)
}
