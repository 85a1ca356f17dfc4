//! Starting and stopping the workers, and the key/clock thread.
//!
//! The engine is the one place that wires the UDP workers, the AF_XDP
//! path, TCP, the key thread, reloads and the snapshots for `/metrics`
//! together; nothing it wires imports it. Here: the sockets, the threads
//! and their lifetimes; in `engine/keeper.rs` the key thread, in
//! `engine/clock.rs` the radius policy both apply, in
//! `engine/snapshot.rs` what `/metrics` and `/health` read.

mod clock;
mod keeper;
mod snapshot;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use gnomon_protocol::LongTermKey;
use socket2::Socket;

use clock::update_clock;
pub use clock::{radius_from_kernel, ClockReader};
use keeper::{horizon, Keeper, SKEW_US};

use crate::activation::Passed;
use crate::bind_error::BindError;
use crate::keys::{mint_epoch, KeySource, SharedKeys};
use crate::liveness::{Beat, Named};
use crate::reload::{Refusal, Reloads};
use crate::settings::{live, ClockState, LiveConfig, WorkerConfig};
use crate::sources::Broadcasts;
use crate::stats::WorkerStats;
use crate::sys;
use crate::tcp::{TcpConfig, TcpServer};
use crate::worker::Worker;

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Addresses to serve (UDP).
    pub listen: Vec<SocketAddr>,
    /// Workers per address.
    pub workers: usize,
    /// Kernel receive buffer per socket.
    pub recv_buffer: Option<usize>,
    /// Worker settings.
    pub worker: WorkerConfig,
    /// Online key validity.
    pub key_validity: Duration,
    /// How often a new online key is minted (before the old one expires).
    pub key_rotation: Duration,
    /// Rotation moves by up to ± this percentage of the period.
    pub key_rotation_jitter_percent: u8,
    /// Radius floor, µs (the kernel's estimate is used when larger).
    pub radius_floor_us: u64,
    /// Radius when the clock is unsynchronized (or its state cannot be
    /// read); `None` refuses to answer. The kernel's error estimate is
    /// used when larger.
    pub unsynchronized_radius_us: Option<u64>,
    /// TCP on the same addresses, when set and enabled.
    pub tcp: Option<TcpConfig>,
    /// The AF_XDP path in front of the UDP sockets, when set.
    pub xdp: Option<crate::xdp::XdpConfig>,
}

/// A running server.
pub struct Engine {
    /// The bound addresses (port 0 resolved).
    pub local: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<io::Result<()>>>,
    stats: Vec<Arc<Mutex<WorkerStats>>>,
    keys: SharedKeys,
    keeper: Option<JoinHandle<()>>,
    /// Clock state shared with workers.
    pub clock: Arc<ClockState>,
    tcp: Option<TcpServer>,
    worker_failed: Arc<AtomicBool>,
    /// Until when the identities can sign without outside help (Unix µs):
    /// the end of the last offline delegation, or `u64::MAX`. The key
    /// thread moves it on reloads and rescans.
    horizon_us: Arc<AtomicU64>,
    /// The workers' settings, swapped by [`Engine::reload`].
    live: LiveConfig,
    /// Reload requests to the key thread.
    reload_requests: mpsc::Sender<keeper::Request>,
    reloads: Arc<Reloads>,
    /// Every UDP worker's and the key thread's heartbeat (TCP's are in `tcp`).
    beats: Vec<Named>,
    /// The XDP program and its map: detached when dropped, after the
    /// workers (field order), and by the kernel if the process dies.
    xdp: Option<crate::xdp::Attached>,
}

/// How long [`Engine::reload`] waits for the key thread, which answers
/// within one poll unless a delegation directory is very slow to read.
const RELOAD_PATIENCE: Duration = Duration::from_secs(30);

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl Engine {
    /// Bind every socket and start the workers and the key thread.
    /// Long-term keys of either scheme (`KeyPair`, `MlDsa44KeyPair`,
    /// `SecretKey`); the first of each scheme answers versions that cannot
    /// name a key.
    pub fn start<K: Into<KeySource>>(
        config: EngineConfig,
        long_terms: Vec<K>,
    ) -> io::Result<Engine> {
        Engine::start_with(config, long_terms.into_iter().map(Into::into).collect())
    }

    /// Start with identities from any mix of key sources; the first
    /// answers versions that cannot name a key.
    pub fn start_with(config: EngineConfig, sources: Vec<KeySource>) -> io::Result<Engine> {
        Engine::start_with_clock(config, sources, Arc::new(sys::kernel_clock))
    }

    /// As [`Engine::start_with`], reading the kernel's clock state through
    /// `reader` (a seam for tests of clocks that cannot be read).
    pub fn start_with_clock(
        config: EngineConfig,
        sources: Vec<KeySource>,
        reader: ClockReader,
    ) -> io::Result<Engine> {
        Engine::start_on(config, sources, reader, None)
    }

    /// As [`Engine::start_with_clock`], serving on the sockets a service
    /// manager passed when there are any (`config.listen` is then not
    /// bound, see `activation`). Each passed UDP socket is shared by
    /// `config.workers` workers: further sockets on its port could not
    /// join it, systemd having bound it as another user.
    pub fn start_on(
        config: EngineConfig,
        sources: Vec<KeySource>,
        reader: ClockReader,
        passed: Option<Passed>,
    ) -> io::Result<Engine> {
        if sources.is_empty() {
            return Err(io::Error::other("no identity to serve"));
        }
        let validity = config.key_validity.as_micros() as u64;
        let horizon_us = Arc::new(AtomicU64::new(horizon(&sources)));
        let reloads = Arc::new(Reloads::started(now_us() / 1_000_000));
        reloads.set_delegations(&sources);
        let epoch = mint_epoch(&sources, now_us(), validity, SKEW_US)?;
        let keys: SharedKeys = Arc::new(ArcSwap::from_pointee(epoch));
        let clock = Arc::new(ClockState::new(config.radius_floor_us));
        update_clock(&clock, &config, reader());
        let stop = Arc::new(AtomicBool::new(false));
        let broadcasts = Arc::new(Broadcasts::default());
        // Without the table, directed broadcasts are still refused by the
        // kernel and counted (send_refused); the filter only saves work.
        let _ = broadcasts.refresh();
        let worker_failed = Arc::new(AtomicBool::new(false));
        let live = live(config.worker.clone());
        let mut workers = Vec::new();
        let mut stats = Vec::new();
        let mut beats = Vec::new();
        let (udp, passed_tcp) = match passed {
            Some(p) => (share_passed(p.udp, &config)?, Some(p.tcp)),
            None => (bind_udp(&config)?, None),
        };
        let local: Vec<SocketAddr> = udp.iter().map(|(a, _)| *a).collect();
        // What each AF_XDP worker holds as its socket: never read there.
        let xdp_socket = match (&config.xdp, udp.first().and_then(|(_, s)| s.first())) {
            (Some(_), Some(s)) => Some(s.try_clone()?),
            _ => None,
        };
        // A worker's shared part, its counters and heartbeat registered.
        let mut worker_on = |socket: Socket, name: String| {
            let published = Arc::new(Mutex::new(WorkerStats::default()));
            stats.push(published.clone());
            let heartbeat = Beat::new();
            beats.push((name, heartbeat.clone()));
            Worker {
                heartbeat,
                socket,
                config: live.clone(),
                keys: keys.clone(),
                clock: clock.clone(),
                stop: stop.clone(),
                published,
                broadcasts: broadcasts.clone(),
            }
        };
        for (bound, sockets) in udp {
            for (k, socket) in sockets.into_iter().enumerate() {
                let w = worker_on(socket, format!("udp worker {bound} #{k}"));
                workers.push(spawn_worker(
                    format!("gnomon-udp-{bound}-{k}"),
                    move || w.run(),
                    &stop,
                    &worker_failed,
                )?);
            }
        }
        let xdp = match (&config.xdp, xdp_socket) {
            (Some(x), Some(socket)) => {
                let made = crate::xdp::start(x, &local, |q| {
                    worker_on(
                        // Only a duplicate descriptor: failing to make one
                        // is as unlikely as failing to open any file.
                        socket.try_clone().expect("a duplicate of a bound socket"),
                        format!("xdp worker {} queue {q}", x.interface),
                    )
                });
                let (attached, xdp_workers) = match made {
                    Ok(m) => m,
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                };
                for (q, w) in xdp_workers.into_iter().enumerate() {
                    workers.push(spawn_worker(
                        format!("gnomon-xdp-{q}"),
                        move || w.run(),
                        &stop,
                        &worker_failed,
                    )?);
                }
                Some(attached)
            }
            _ => None,
        };
        let tcp = match config.tcp.clone().filter(|t| t.enabled) {
            // Activated with no stream socket: no TCP.
            Some(_) if passed_tcp.as_ref().is_some_and(|p| p.is_empty()) => None,
            Some(t) => {
                let (worker, keys, clock, stopper) =
                    (live.clone(), keys.clone(), clock.clone(), stop.clone());
                let started = match passed_tcp {
                    Some(sockets) => TcpServer::start_on(sockets, t, worker, keys, clock, stopper),
                    None => {
                        // Same port as UDP; with port 0 configured any port will do.
                        let addrs: Vec<_> = local
                            .iter()
                            .zip(&config.listen)
                            .map(|(bound, asked)| (*bound, asked.port() == 0))
                            .collect();
                        TcpServer::start(&addrs, t, worker, keys, clock, stopper)
                    }
                };
                match started {
                    Ok(s) => Some(s),
                    Err(e) => {
                        // The UDP workers are running: stop them.
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        let (reload_requests, requests) = mpsc::channel();
        let keeper = {
            let k = Keeper {
                keys: keys.clone(),
                clock: clock.clone(),
                stop: stop.clone(),
                config: config.clone(),
                sources,
                reader,
                interfaces: crate::interfaces::Interfaces::new(
                    broadcasts,
                    xdp.as_ref().map(|x: &crate::xdp::Attached| x.gate.clone()),
                ),
                requests,
                reloads: reloads.clone(),
                horizon_us: horizon_us.clone(),
                beat: Beat::new(),
            };
            beats.push(("key thread".to_string(), k.beat.clone()));
            std::thread::Builder::new()
                .name("gnomon-keys".into())
                .spawn(move || k.run())?
        };
        Ok(Engine {
            beats,
            worker_failed,
            horizon_us,
            live,
            reload_requests,
            reloads,
            local,
            stop,
            workers,
            stats,
            keys,
            keeper: Some(keeper),
            clock,
            tcp,
            xdp,
        })
    }

    /// Until when the identities can sign without outside help (Unix µs):
    /// the end of the last offline delegation, or `u64::MAX`.
    pub fn key_horizon_us(&self) -> u64 {
        self.horizon_us.load(Ordering::Relaxed)
    }

    /// Apply a new configuration: identities (`None` keeps the running
    /// ones), key rotation, radius policy, and every worker and TCP setting
    /// that can change while running. Sockets, the worker count, the batch
    /// size (buffers) and whether TCP runs keep their values from the
    /// start. All or nothing: when the key thread cannot mint an epoch
    /// from the new identities, nothing changes. Counted either way.
    /// Returns the long-term public keys now served.
    pub fn reload(
        &self,
        config: EngineConfig,
        sources: Option<Vec<KeySource>>,
    ) -> io::Result<Vec<LongTermKey>> {
        let now_s = now_us() / 1_000_000;
        if sources.as_ref().is_some_and(Vec::is_empty) {
            self.reloads.record(Err(Refusal::NoKeys), now_s);
            return Err(io::Error::other(
                "no identity to serve; still serving the running keys",
            ));
        }
        let result = self.reload_inner(config, sources);
        let outcome = result.as_ref().map(|_| ()).map_err(|_| Refusal::Apply);
        self.reloads.record(outcome, now_s);
        result
    }

    /// Count a reload that was refused before it reached the engine, and
    /// why (the configuration or a key file did not load, or it would
    /// drop every configured key).
    pub fn reload_refused(&self, why: Refusal) {
        self.reloads.record(Err(why), now_us() / 1_000_000);
    }

    fn reload_inner(
        &self,
        config: EngineConfig,
        sources: Option<Vec<KeySource>>,
    ) -> io::Result<Vec<LongTermKey>> {
        let running = self.live.load_full();
        let worker = WorkerConfig {
            // Fixed at start: the buffers are sized by it.
            max_batch: running.max_batch,
            fail_after: running.fail_after,
            ..config.worker.clone()
        };
        let tcp = config.tcp.clone();
        let (reply, answer) = mpsc::sync_channel(1);
        let request = keeper::Request {
            config,
            sources,
            reply,
        };
        self.reload_requests
            .send(request)
            .map_err(|_| io::Error::other("the key thread has stopped"))?;
        if let Some(k) = &self.keeper {
            k.thread().unpark();
        }
        let publics = answer.recv_timeout(RELOAD_PATIENCE).map_err(|_| {
            // Busy past all reason (a hung delegation directory): the
            // request stays queued and applies when it gets to it, but
            // the settings below do not; a new SIGHUP then completes it.
            io::Error::other(
                "the key thread did not answer in time; its keys may still change, \
                     send SIGHUP again once it does",
            )
        })??;
        // Keys first, then settings: every pair a worker can see is one the
        // server could have been started with.
        if *running != worker {
            self.live.store(Arc::new(worker));
        }
        if let (Some(server), Some(tcp)) = (&self.tcp, tcp) {
            server.set_config(tcp);
        }
        Ok(publics)
    }

    /// Where TCP is served (empty when it is not).
    pub fn tcp_local(&self) -> &[SocketAddr] {
        self.tcp.as_ref().map_or(&[], |t| t.local())
    }

    /// Whether the current delegations cover the current time.
    pub fn can_sign(&self) -> bool {
        self.keys.load().covers(now_us())
    }

    /// Whether a worker died (not merely stopped on request).
    pub fn failed(&self) -> bool {
        self.worker_failed.load(Ordering::Relaxed)
    }

    /// Every long-lived thread's heartbeat: UDP workers, TCP listeners and
    /// the key thread, for the watchdog.
    pub fn heartbeats(&self) -> Vec<Named> {
        let tcp = self.tcp.as_ref().map_or(&[][..], |t| t.heartbeats());
        self.beats.iter().chain(tcp).cloned().collect()
    }

    /// The stop flag, for signal handlers.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stop receiving, answer what was read, join everything. Returns the
    /// first worker error, if any.
    pub fn shutdown(mut self) -> io::Result<WorkerStats> {
        self.stop.store(true, Ordering::Relaxed);
        let mut first_err = None;
        for w in self.workers.drain(..) {
            match w.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(io::Error::other("worker panicked"));
                }
            }
        }
        if let Some(k) = self.keeper.take() {
            // It parks between polls: wake it rather than wait out the park.
            k.thread().unpark();
            let _ = k.join();
        }
        if let Some(t) = self.tcp.take() {
            t.join();
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(self.stats()),
        }
    }
}

/// The UDP sockets for `config.listen`, `config.workers` per address,
/// each with its own `SO_REUSEPORT` socket so the kernel spreads flows.
fn bind_udp(config: &EngineConfig) -> io::Result<Vec<(SocketAddr, Vec<Socket>)>> {
    let timeout = Duration::from_millis(100);
    let mut out = Vec::new();
    for addr in &config.listen {
        // Port 0: the first socket picks the port, the rest share it.
        let first = sys::udp_socket(*addr, config.recv_buffer, timeout)
            .map_err(BindError::wrap("udp", *addr))?;
        let bound = first
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("not an IP socket"))?;
        let mut sockets = vec![first];
        for _ in 1..config.workers.max(1) {
            sockets.push(
                sys::udp_socket(bound, config.recv_buffer, timeout)
                    .map_err(BindError::wrap("udp", bound))?,
            );
        }
        out.push((bound, sockets));
    }
    Ok(out)
}

/// Passed UDP sockets, prepared like ours, each shared (duplicated
/// descriptors of one socket) by `config.workers` workers.
fn share_passed(
    passed: Vec<(Socket, SocketAddr)>,
    config: &EngineConfig,
) -> io::Result<Vec<(SocketAddr, Vec<Socket>)>> {
    let mut out = Vec::new();
    for (socket, addr) in passed {
        // The unit may have set a larger buffer than this process could
        // (ReceiveBuffer= forces past net.core.rmem_max): raise, never lower.
        let buffer = config
            .recv_buffer
            .filter(|&b| socket.recv_buffer_size().is_ok_and(|now| now < b));
        sys::prepare_udp(&socket, addr, buffer, Duration::from_millis(100))?;
        let mut sockets = Vec::new();
        for _ in 1..config.workers.max(1) {
            sockets.push(socket.try_clone()?);
        }
        sockets.push(socket);
        out.push((addr, sockets));
    }
    Ok(out)
}

/// Run a worker on a thread of its own. A worker that fails (or panics)
/// stops every other: a half-serving process must not stay up.
fn spawn_worker(
    name: String,
    run: impl FnOnce() -> io::Result<()> + Send + 'static,
    stop: &Arc<AtomicBool>,
    failed: &Arc<AtomicBool>,
) -> io::Result<JoinHandle<io::Result<()>>> {
    let (stop_all, failed) = (stop.clone(), failed.clone());
    std::thread::Builder::new().name(name).spawn(move || {
        // A panic counts as a failure too (the release profile aborts on
        // panic anyway).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
            .unwrap_or_else(|_| Err(io::Error::other("worker panicked")));
        if r.is_err() {
            failed.store(true, Ordering::Relaxed);
            stop_all.store(true, Ordering::Relaxed);
        }
        r
    })
}
