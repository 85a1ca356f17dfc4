//! The do-nothing UDP responder: `recvmmsg` → the same fixed reply bytes to
//! every sender → `sendmmsg`. It does what any UDP server must do and no
//! protocol work, so the CPU a real server spends per response above it is
//! the cost of the protocol (docs/COST.md).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use crate::sys::{self, RecvBatch};

/// Largest reply: the largest UDP payload over IPv4.
pub const MAX_REPLY_SIZE: usize = 65_507;
/// Receive buffer per datagram; longer datagrams are still answered.
const RECV_SLOT: usize = 2048;
/// How often a blocked worker looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);
const SOCKET_BUFFER: usize = 4 << 20;

/// How to run the responder.
#[derive(Clone, Debug)]
pub struct NullConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Bytes in every reply.
    pub reply_size: usize,
    /// Worker threads, each with its own SO_REUSEPORT socket.
    pub workers: usize,
    /// Stop after this long, if given.
    pub duration: Option<Duration>,
}

/// What the responder did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NullStats {
    /// Datagrams received.
    pub received: u64,
    /// Replies the kernel accepted.
    pub replied: u64,
    /// Wall time, seconds.
    pub elapsed_secs: f64,
    /// CPU time of the worker threads, seconds.
    pub cpu_secs: f64,
}

impl NullStats {
    /// CPU µs per reply, the figure compared against a real server.
    pub fn cpu_us_per_reply(&self) -> Option<f64> {
        (self.replied > 0).then(|| self.cpu_secs * 1e6 / self.replied as f64)
    }
}

/// Bound sockets, ready to run.
#[derive(Debug)]
pub struct NullServer {
    sockets: Vec<UdpSocket>,
    reply: Vec<u8>,
    duration: Option<Duration>,
}

impl NullServer {
    /// Bind `workers` sockets to `listen` (port 0 picks one port for all).
    pub fn bind(cfg: &NullConfig) -> io::Result<NullServer> {
        if cfg.reply_size == 0 || cfg.reply_size > MAX_REPLY_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "bad --reply-size: {} is outside 1..={MAX_REPLY_SIZE}",
                    cfg.reply_size
                ),
            ));
        }
        if cfg.workers == 0 || cfg.workers > 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad --workers: {} is outside 1..=64", cfg.workers),
            ));
        }
        let mut addr = cfg.listen;
        let mut sockets = Vec::with_capacity(cfg.workers);
        for _ in 0..cfg.workers {
            let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
            s.set_reuse_port(true)?;
            // Best effort: a smaller buffer only means earlier drops.
            let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
            let _ = s.set_send_buffer_size(SOCKET_BUFFER);
            s.set_read_timeout(Some(STOP_POLL))?;
            s.bind(&addr.into())?;
            let sock: UdpSocket = s.into();
            addr = sock.local_addr()?;
            sockets.push(sock);
        }
        // The reply is recognisably not Roughtime, so nothing mistakes it for
        // a response.
        let reply = b"gnomon null reply "
            .iter()
            .copied()
            .cycle()
            .take(cfg.reply_size)
            .collect();
        Ok(NullServer {
            sockets,
            reply,
            duration: cfg.duration,
        })
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sockets[0].local_addr()
    }

    /// Answer until `stop` is set or the duration passes.
    pub fn run(self, stop: &AtomicBool) -> NullStats {
        let start = Instant::now();
        let end = self.duration.map(|d| start + d);
        let reply = &self.reply;
        let totals = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .sockets
                .iter()
                .map(|sock| s.spawn(move || serve(sock, reply, stop, end)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .fold((0, 0, Duration::ZERO), |a, b| {
                    (a.0 + b.0, a.1 + b.1, a.2 + b.2)
                })
        });
        NullStats {
            received: totals.0,
            replied: totals.1,
            elapsed_secs: start.elapsed().as_secs_f64(),
            cpu_secs: totals.2.as_secs_f64(),
        }
    }
}

fn serve(
    sock: &UdpSocket,
    reply: &[u8],
    stop: &AtomicBool,
    end: Option<Instant>,
) -> (u64, u64, Duration) {
    let cpu0 = sys::thread_cpu_time();
    let mut batch = RecvBatch::new(RECV_SLOT);
    let (mut received, mut replied) = (0u64, 0u64);
    // Checking the clock once per wake-up, not per datagram, keeps the
    // baseline honest: the loop costs only the two system calls.
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| Instant::now() < e) {
        let n = match sys::recv_batch(sock, &mut batch, true) {
            Ok(n) => n,
            // Receive errors on an unconnected UDP socket are transient; the
            // pause keeps a persistent one from spinning a core.
            Err(_) => {
                let _ = sys::wait(sock, Duration::from_millis(1));
                continue;
            }
        };
        received += n as u64;
        replied += sys::send_replies(sock, reply, &mut batch, n) as u64;
    }
    (
        received,
        replied,
        sys::thread_cpu_time().saturating_sub(cpu0),
    )
}
