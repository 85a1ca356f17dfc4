//! The TCP transport, for every version with a packet header (`Profile::tcp`:
//! drafts 01 and later, version 1 and the TCP-only 0x90000001; not Google's
//! bare message). The 12-byte ROUGHTIM header delimits each
//! request and each response in the stream, and a connection may carry
//! several requests. The handshake proves the source, so the datagram rules
//! against spoofed amplification do not apply: requests need no padding and
//! a response may be longer than its request.
//!
//! ```text
//!  listener (one thread per address) ──accept──▶ caps (per source
//!           prefix, per network, total: evict the longest-idle) ─▶ handler
//!           thread
//!  handler: read ▶ cut frames ▶ parse (TCP versions only) ▶ choose identity
//!           ▶ runs of consecutive same-(profile, identity) requests ▶ Responder
//!           ▶ responses, in request order, in one write
//! ```
//!
//! # One blocking thread per connection, with a hard cap
//!
//! UDP carries the load; TCP is the fallback a client tries when UDP gets
//! no answer (draft 16+), so connections are few and each carries a
//! handful of requests. Per request the cost is a signature (tens of µs),
//! beside which a thread wake-up is small. A blocking thread per connection
//! then buys simple, checkable code: each deadline (idle, unfinished frame,
//! peer not reading) is the socket's own `SO_RCVTIMEO`/`SO_SNDTIMEO` set
//! before the call, a stalled peer blocks only its own thread (never a UDP
//! worker or another connection), and nothing new is needed: no event-loop
//! dependency and no `unsafe` outside `sys`. The cap bounds the threads; each
//! has a small stack and two buffers of about one frame, so the default 1024
//! connections stay within a few tens of MiB actually touched. What this
//! gives up is batching across connections: the requests that arrive
//! together on one connection share a signature, those of different
//! connections do not. An event loop would be the next step if TCP ever had
//! to carry UDP-like rates.
//!
//! # Holding connections is bounded
//!
//! One host must not be able to hold every slot: besides the total cap,
//! each source prefix (/32 and /64 by default, `max_per_source`) holds at
//! most a few connections, and each network around it (the /24 or /48,
//! `max_per_network`) a few sources' worth, counted in small maps beside
//! the handlers; a newcomer over either is closed at once (its own source
//! or network holds the slots). Without the second tier, 64 addresses at
//! their share filled the default total of 1,024. At the total cap the
//! newcomer is not refused: the connection idle the longest (no frame
//! started, nothing being answered) is closed to make room, so many
//! networks holding idle connections cannot lock an honest client out; a
//! newcomer is refused only when every connection is mid-request. A
//! connection that holds its slot without being answered is ended by
//! deadlines that its peer cannot extend: the idle timer restarts only when
//! a request is answered (an empty or invalid frame does not count), a
//! started frame must complete within `read_timeout` of its first byte, a
//! batch of responses must be taken within `write_timeout` however slowly
//! the peer reads (the deadline covers the whole write, not each syscall),
//! and every connection ends at `max_lifetime` or after `max_requests`
//! frames, whichever comes first.
//!
//! # What closes a connection
//!
//! A bad header (wrong magic, or a length above the cap) leaves the stream
//! without a next boundary, so it closes the connection, decided from the
//! header alone. A well-delimited request that cannot be answered (bad tags,
//! unknown SRV, …) is dropped and counted like a UDP datagram, and the
//! connection carries on with the next frame. The deadlines above close it
//! too, each counted under its own reason.
//!
//! Every close is counted by reason before the socket is shut, so a client
//! that sees the end of the stream also sees the count.
//!
//! # Whom to sign for
//!
//! The `[limit]` lists hold over TCP as over UDP (a denied peer's requests
//! are dropped), and signing for peers off the allow list is held to
//! `signature-share` of one core across all connections (`budget.rs`),
//! shared fairly among the source prefixes of the caps above, so that one
//! source's connections cannot take another's share: without batching
//! across connections a lock-step client costs a signature per request,
//! which for ML-DSA-44 is over 100 µs.

mod budget;
mod caps;
mod conn;
mod frame;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use gnomon_protocol::{Acceptor, ProfileSet, PROFILES};
use socket2::{Domain, Protocol, Socket, Type};

use crate::keys::SharedKeys;
use crate::liveness::{Beat, Named};
use crate::settings::{ClockState, LiveConfig};
use crate::stats::Drop;
pub use crate::stats::{Close, TcpStats};

use caps::admit;

/// How often the listener looks at the stop flag while no one connects.
const ACCEPT_WAKE: Duration = Duration::from_millis(100);
/// Pause after an accept error that does not go away by itself (out of
/// file descriptors): the pending connection stays queued, so retrying at
/// once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// TCP settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// Serve TCP at all.
    pub enabled: bool,
    /// Open connections at most; at the cap a newcomer closes the
    /// connection idle the longest (refused only if none is idle).
    pub max_connections: usize,
    /// A connection with no complete request for this long is closed.
    pub idle_timeout: Duration,
    /// Once a frame has started, the rest must arrive within this.
    pub read_timeout: Duration,
    /// The responses to one read must all be taken within this, however
    /// the peer paces its reads.
    pub write_timeout: Duration,
    /// Longest frame body (the header's length field) accepted, bytes.
    pub max_frame: usize,
    /// Every connection is closed this long after it was accepted.
    pub max_lifetime: Duration,
    /// A connection is closed after this many frames.
    pub max_requests: u32,
    /// Open connections at most from one source prefix.
    pub max_per_source: usize,
    /// Open connections at most from one network: the /24 (IPv4) or /48
    /// (IPv6) around the source, or its source prefix if that is shorter.
    pub max_per_network: usize,
    /// Prefix length that makes an IPv4 source, bits (32: each address).
    pub source_prefix_v4: u8,
    /// Prefix length that makes an IPv6 source, bits (64: each subnet).
    pub source_prefix_v6: u8,
}

impl Default for TcpConfig {
    /// The same defaults as the configuration file's `[tcp]` table.
    fn default() -> Self {
        TcpConfig {
            enabled: true,
            max_connections: 1024,
            idle_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            max_frame: 4096,
            max_lifetime: Duration::from_secs(300),
            max_requests: 1000,
            max_per_source: 16,
            max_per_network: 64,
            source_prefix_v4: 32,
            source_prefix_v6: 64,
        }
    }
}

/// The live counters. Handlers are many and short-lived threads, so they
/// count straight into shared atomics rather than publishing snapshots as
/// the UDP workers do; one relaxed add per request is noise beside the
/// signature it pays for.
#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    refused_per_source: AtomicU64,
    refused_per_network: AtomicU64,
    evicted: AtomicU64,
    accept_errors: AtomicU64,
    closed: [AtomicU64; Close::COUNT],
    requests: AtomicU64,
    responses: [AtomicU64; PROFILES.len()],
    signatures: AtomicU64,
    drops: DropCounters,
    udp_only: AtomicU64,
    greased: AtomicU64,
}

/// One counter per drop reason: more than the 32 elements an array
/// derives `Default` for.
struct DropCounters([AtomicU64; Drop::COUNT]);

impl Default for DropCounters {
    fn default() -> DropCounters {
        DropCounters(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl std::ops::Index<usize> for DropCounters {
    type Output = AtomicU64;
    fn index(&self, i: usize) -> &AtomicU64 {
        &self.0[i]
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn read_all<const N: usize>(a: &[AtomicU64; N]) -> [u64; N] {
    std::array::from_fn(|i| a[i].load(Ordering::Relaxed))
}

/// What the listeners and every handler share.
struct Shared {
    /// Swapped by a reload: the caps apply to the next accept; an open
    /// connection keeps the timeouts and frame limit it was accepted with.
    config: ArcSwap<TcpConfig>,
    /// The UDP workers' settings, followed at each read (versions, VERS,
    /// options, grease).
    worker: LiveConfig,
    keys: SharedKeys,
    clock: Arc<ClockState>,
    stop: Arc<AtomicBool>,
    counters: Counters,
    /// Connections with a handler; changed with `handlers` locked.
    open: AtomicUsize,
    /// Of those, evicted ones whose handler has not ended yet: they no
    /// longer count against the total. Changed with `handlers` locked.
    evicting: AtomicUsize,
    /// Ticks at each answered read, to order connections by idleness.
    activity: AtomicU64,
    /// Connection ids, unique across listeners.
    next_id: AtomicU64,
    /// Live handlers: the stream (shared, not duplicated, so a connection
    /// costs one descriptor), to wake the handler at shutdown, and its thread.
    handlers: Mutex<HashMap<u64, Handler>>,
    /// Open connections per source prefix. An entry exists only while its
    /// count is above zero, so the map holds at most `max_connections`.
    per_source: Mutex<HashMap<IpAddr, usize>>,
    /// Open connections per network (/24, /48), likewise.
    per_network: Mutex<HashMap<IpAddr, usize>>,
    /// Signing time for peers off the allow list, across connections.
    budget: budget::TcpBudget,
}

/// A live connection's stream (to wake or evict it), its thread, and what
/// the listener needs to pick one to evict.
type Handler = (Arc<TcpStream>, JoinHandle<()>, Arc<ConnState>);

/// What a handler tells the listener about its connection.
pub(crate) struct ConnState {
    /// A frame has started and is not yet answered: not idle.
    busy: AtomicBool,
    /// `Shared::activity` when it was last answered (or accepted): the
    /// smallest is the connection idle the longest.
    last: AtomicU64,
    /// Closed by the listener to make room.
    evicted: AtomicBool,
}

impl ConnState {
    /// A frame has arrived in part or whole.
    pub(crate) fn busy(&self) {
        self.busy.store(true, Ordering::Relaxed);
    }

    /// Nothing is left to answer: idle, and recent as of `tick` when a
    /// request was answered.
    pub(crate) fn idle(&self, tick: Option<u64>) {
        if let Some(t) = tick {
            self.last.store(t, Ordering::Relaxed);
        }
        self.busy.store(false, Ordering::Relaxed);
    }

    /// Whether the listener closed it to make room.
    pub(crate) fn was_evicted(&self) -> bool {
        self.evicted.load(Ordering::Relaxed)
    }
}

/// Where a connection counts: its handler's id, source prefix and network.
#[derive(Clone, Copy)]
pub(crate) struct Place {
    id: u64,
    source: IpAddr,
    network: IpAddr,
}

/// The running TCP side of the engine.
pub struct TcpServer {
    local: Vec<SocketAddr>,
    shared: Arc<Shared>,
    listeners: Vec<JoinHandle<()>>,
    /// One per listener, ticked per accept or accept timeout.
    beats: Vec<Named>,
}

/// Narrow `acceptor` to the profiles carried over TCP, and lift the
/// minimum size: that rule keeps a spoofed datagram from drawing a larger
/// response, and a TCP peer has proved its address (pyroughtime's client
/// sends unpadded requests over TCP).
pub(crate) fn tcp_acceptor(acceptor: &Acceptor) -> Acceptor {
    let tcp = PROFILES
        .iter()
        .filter(|p| p.tcp)
        .fold(ProfileSet::empty(), |s, p| s.with(p.id));
    Acceptor {
        profiles: ProfileSet(acceptor.profiles.0 & tcp.0),
        min_size: 0,
    }
}

/// A listening socket on `addr`. When `any_port` is set and the port is
/// taken, any free port will do (the UDP side was configured with port 0).
fn listener(addr: SocketAddr, any_port: bool) -> io::Result<Socket> {
    let bind = |addr: SocketAddr| -> io::Result<Socket> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        // A restart must not wait for the last run's TIME_WAIT connections.
        s.set_reuse_address(true)?;
        if addr.is_ipv6() {
            s.set_only_v6(true)?;
        }
        s.bind(&addr.into())?;
        s.listen(1024)?;
        Ok(s)
    };
    match bind(addr) {
        Err(e) if any_port && e.kind() == io::ErrorKind::AddrInUse => {
            let mut any = addr;
            any.set_port(0);
            bind(any)
        }
        r => r,
    }
}

impl TcpServer {
    /// Listen on each `(address, any_port)` and start accepting. The
    /// listeners stop, and close every connection, once `stop` is set.
    pub fn start(
        addrs: &[(SocketAddr, bool)],
        config: TcpConfig,
        worker: LiveConfig,
        keys: SharedKeys,
        clock: Arc<ClockState>,
        stop: Arc<AtomicBool>,
    ) -> io::Result<TcpServer> {
        let sockets = addrs
            .iter()
            .map(|&(addr, any_port)| {
                listener(addr, any_port).map_err(crate::bind_error::BindError::wrap("tcp", addr))
            })
            .collect::<io::Result<Vec<_>>>()?;
        TcpServer::start_on(sockets, config, worker, keys, clock, stop)
    }

    /// Start accepting on listening sockets, bound here or passed by the
    /// service manager.
    pub fn start_on(
        sockets: Vec<Socket>,
        config: TcpConfig,
        worker: LiveConfig,
        keys: SharedKeys,
        clock: Arc<ClockState>,
        stop: Arc<AtomicBool>,
    ) -> io::Result<TcpServer> {
        let mut local = Vec::new();
        for s in &sockets {
            // Linux applies SO_RCVTIMEO to a blocking accept: the listener
            // wakes to see the stop flag without a second thread or a
            // self-connection. A passed socket may come non-blocking
            // (NonBlocking=yes), and then every accept would return at once.
            s.set_nonblocking(false)?;
            s.set_read_timeout(Some(ACCEPT_WAKE))?;
            local.push(
                s.local_addr()?
                    .as_socket()
                    .ok_or_else(|| io::Error::other("not an IP socket"))?,
            );
        }
        let budget = budget::TcpBudget::new(&worker.load().limit);
        let shared = Arc::new(Shared {
            config: ArcSwap::from_pointee(config),
            worker,
            keys,
            clock,
            stop,
            counters: Counters::default(),
            open: AtomicUsize::new(0),
            evicting: AtomicUsize::new(0),
            activity: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            handlers: Mutex::new(HashMap::new()),
            per_source: Mutex::new(HashMap::new()),
            per_network: Mutex::new(HashMap::new()),
            budget,
        });
        let mut listeners = Vec::new();
        let mut beats = Vec::new();
        for (s, addr) in sockets.into_iter().zip(&local) {
            let mine = shared.clone();
            let beat = Beat::new();
            beats.push((format!("tcp listener {addr}"), beat.clone()));
            let spawned = std::thread::Builder::new()
                .name(format!("gnomon-tcp-{addr}"))
                .spawn(move || accept_loop(s, &mine, &beat));
            match spawned {
                Ok(h) => listeners.push(h),
                Err(e) => {
                    // Let the listeners already running wind down.
                    shared.stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(TcpServer {
            local,
            shared,
            listeners,
            beats,
        })
    }

    /// The bound addresses (port 0 resolved).
    pub fn local(&self) -> &[SocketAddr] {
        &self.local
    }

    /// New settings (a configuration reload): caps at the next accept,
    /// timeouts and frame limit for connections accepted from now on.
    /// `enabled` is fixed at start.
    pub fn set_config(&self, config: TcpConfig) {
        self.shared.config.store(Arc::new(config));
    }

    /// The listeners' heartbeats.
    pub fn heartbeats(&self) -> &[Named] {
        &self.beats
    }

    /// The counters now.
    pub fn stats(&self) -> TcpStats {
        self.shared.snapshot()
    }

    /// A closure reading the counters, for the metrics thread.
    pub fn stats_source(&self) -> impl Fn() -> TcpStats + Send + 'static {
        let shared = self.shared.clone();
        move || shared.snapshot()
    }

    /// Wait for the listeners (and through them every handler) to finish;
    /// they do once the stop flag is set.
    pub fn join(self) -> TcpStats {
        for l in self.listeners {
            let _ = l.join();
        }
        self.shared.snapshot()
    }
}

impl Shared {
    fn snapshot(&self) -> TcpStats {
        let c = &self.counters;
        TcpStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            refused_per_source: c.refused_per_source.load(Ordering::Relaxed),
            refused_per_network: c.refused_per_network.load(Ordering::Relaxed),
            evicted: c.evicted.load(Ordering::Relaxed),
            accept_errors: c.accept_errors.load(Ordering::Relaxed),
            open: self.open.load(Ordering::Relaxed) as u64,
            busy: self
                .handlers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .filter(|(_, _, st)| st.busy.load(Ordering::Relaxed) && !st.was_evicted())
                .count() as u64,
            closed: read_all(&c.closed),
            requests: c.requests.load(Ordering::Relaxed),
            responses: read_all(&c.responses),
            signatures: c.signatures.load(Ordering::Relaxed),
            drops: read_all(&c.drops.0),
            udp_only: c.udp_only.load(Ordering::Relaxed),
            greased: c.greased.load(Ordering::Relaxed),
        }
    }
}

fn accept_loop(listener: Socket, shared: &Arc<Shared>, beat: &Beat) {
    while !shared.stop.load(Ordering::Relaxed) {
        beat.tick();
        match listener.accept() {
            Ok((socket, peer)) => {
                let source = peer
                    .as_socket()
                    .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
                admit(socket.into(), source, shared)
            }
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted
                | io::ErrorKind::ConnectionAborted => {}
                _ => {
                    bump(&shared.counters.accept_errors);
                    std::thread::park_timeout(ACCEPT_BACKOFF);
                }
            },
        }
    }
    close_all(shared);
}

/// At shutdown: wake every handler by shutting its socket, then wait for it.
fn close_all(shared: &Shared) {
    let handlers = std::mem::take(&mut *shared.handlers.lock().unwrap_or_else(|p| p.into_inner()));
    for (waker, _, _) in handlers.values() {
        let _ = waker.shutdown(std::net::Shutdown::Both);
    }
    for (_, (_, h, _)) in handlers {
        let _ = h.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnomon_protocol::Profile;

    #[test]
    fn the_tcp_acceptor_keeps_only_tcp_versions() {
        let a = tcp_acceptor(&Acceptor::default());
        for p in PROFILES.iter() {
            assert_eq!(a.profiles.contains(p.id), p.tcp, "{}", p.name);
        }
        assert!(!a.profiles.contains(Profile::google().id));
        assert!(a.profiles.contains(Profile::rfc().id));
        let narrowed = Acceptor {
            profiles: ProfileSet::empty().with(Profile::google().id),
            min_size: 1000,
        };
        let a = tcp_acceptor(&narrowed);
        assert_eq!(a.profiles, ProfileSet::empty());
        // The datagram size floor does not apply to a stream.
        assert_eq!(a.min_size, 0);
    }
}
