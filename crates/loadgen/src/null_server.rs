//! The do-nothing UDP responder: `recvmmsg` → the same fixed reply bytes to
//! every sender → `sendmmsg`. It does what any UDP server must do and no
//! protocol work, so the CPU a real server spends per response above it is
//! the cost of the protocol (docs/COST.md). The io_uring backend does the
//! same with a multishot receive and one send per datagram (`sys::uring`).

use std::fmt;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use crate::sys::uring::Uring;
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
    /// How datagrams are received and answered.
    pub backend: Backend,
    /// `SO_BUSY_POLL` in µs (with `SO_PREFER_BUSY_POLL`), recvmmsg only.
    pub busy_poll: Option<u32>,
}

impl NullConfig {
    /// The `bench null-server` defaults: one worker, recvmmsg, no busy
    /// polling, 1024-byte replies, no time limit.
    pub fn new(listen: SocketAddr) -> NullConfig {
        NullConfig {
            listen,
            reply_size: 1024,
            workers: 1,
            duration: None,
            backend: Backend::Recvmmsg,
            busy_poll: None,
        }
    }
}

/// The system calls a responder uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// `recvmmsg` up to 64 datagrams, then one `sendmmsg` of the replies.
    #[default]
    Recvmmsg,
    /// io_uring: a multishot `RecvMsg` over a ring of provided buffers, one
    /// `SendMsg` per datagram, every queued reply submitted by the
    /// `io_uring_enter` that waits for the next completions.
    IoUring,
}

impl Backend {
    /// The name `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Recvmmsg => "recvmmsg",
            Backend::IoUring => "io-uring",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Backend, String> {
        match s {
            "recvmmsg" => Ok(Backend::Recvmmsg),
            "io-uring" | "io_uring" => Ok(Backend::IoUring),
            _ => Err(format!("{s:?} is not a backend: recvmmsg or io-uring")),
        }
    }
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
pub struct NullServer {
    workers: Vec<Worker>,
    reply: Vec<u8>,
    duration: Option<Duration>,
}

impl fmt::Debug for NullServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NullServer")
            .field("workers", &self.workers.len())
            .field("reply_size", &self.reply.len())
            .field("duration", &self.duration)
            .finish()
    }
}

/// One worker's socket, and its ring with the io_uring backend.
struct Worker {
    sock: UdpSocket,
    uring: Option<Uring>,
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
        if cfg.busy_poll.is_some() && cfg.backend != Backend::Recvmmsg {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bad --busy-poll: only the recvmmsg backend busy-polls its socket",
            ));
        }
        let mut addr = cfg.listen;
        let mut workers = Vec::with_capacity(cfg.workers);
        for _ in 0..cfg.workers {
            let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
            s.set_reuse_port(true)?;
            // Best effort: a smaller buffer only means earlier drops.
            let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
            let _ = s.set_send_buffer_size(SOCKET_BUFFER);
            s.set_read_timeout(Some(STOP_POLL))?;
            if let Some(us) = cfg.busy_poll {
                sys::set_busy_poll(&s, us).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot set SO_BUSY_POLL to {us} µs: {e}"))
                })?;
            }
            s.bind(&addr.into())?;
            let sock: UdpSocket = s.into();
            addr = sock.local_addr()?;
            let uring = match cfg.backend {
                Backend::Recvmmsg => None,
                Backend::IoUring => Some(Uring::new()?),
            };
            workers.push(Worker { sock, uring });
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
            workers,
            reply,
            duration: cfg.duration,
        })
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.workers[0].sock.local_addr()
    }

    /// Answer until `stop` is set or the duration passes.
    pub fn run(self, stop: &AtomicBool) -> NullStats {
        let start = Instant::now();
        let end = self.duration.map(|d| start + d);
        let reply = &self.reply;
        let totals = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .workers
                .into_iter()
                .map(|w| s.spawn(move || serve(w, reply, stop, end)))
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

fn serve(w: Worker, reply: &[u8], stop: &AtomicBool, end: Option<Instant>) -> (u64, u64, Duration) {
    let cpu0 = sys::thread_cpu_time();
    let (received, replied) = match w.uring {
        Some(uring) => uring.serve(w.sock.as_raw_fd(), reply, stop, end),
        None => serve_mmsg(&w.sock, reply, stop, end),
    };
    (
        received,
        replied,
        sys::thread_cpu_time().saturating_sub(cpu0),
    )
}

fn serve_mmsg(
    sock: &UdpSocket,
    reply: &[u8],
    stop: &AtomicBool,
    end: Option<Instant>,
) -> (u64, u64) {
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
    (received, replied)
}
