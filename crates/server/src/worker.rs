//! One worker: a run-to-completion loop over its own `SO_REUSEPORT` socket.
//! No queues and no hand-off between threads: the kernel's receive buffer
//! is the only queue, and a batch is whatever it holds (up to the maximum),
//! so a lone request is answered at once and batches grow under load.
//!
//! Here: the loop and its system calls (receive, wait for company, send,
//! publish the counters); in `worker/respond.rs`, what happens to a batch
//! between receive and send (check, group, sign once per group).

mod respond;

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::Guard;
use gnomon_protocol::Responder;
use socket2::Socket;

use crate::budget::{FairBudget, SLOTS};
use crate::failure::{self, Failure};
use crate::grease::Greaser;
use crate::kernel_time::{process_now_ns, KernelTime, SystemClocks};
use crate::keys::SharedKeys;
use crate::limit::{process_hasher, SourceLimiter};
use crate::liveness::Beat;
pub use crate::settings::{live, udp_acceptor, ClockState, LiveConfig, VersLists, WorkerConfig};
use crate::sources::{Broadcasts, SourceFilter};
use crate::stats::{Drop, WorkerStats};
use crate::sys::Batch;

/// Largest batch a worker reads at once.
pub const MAX_BATCH: usize = 1024;

/// How late the kernel may end a worker's sleep, ns: `batch-wait` is a
/// latency the operator chose, so it is kept to within a microsecond
/// instead of the default 50 µs (`sys::set_timer_slack`).
pub const TIMER_SLACK_NS: u64 = 1_000;

/// Everything a worker thread needs.
pub struct Worker {
    /// The socket.
    pub socket: Socket,
    /// Settings. `max_batch` and `fail_after` are read once, at
    /// [`Worker::prepare`]; the rest is followed batch by batch.
    pub config: LiveConfig,
    /// Current keys.
    pub keys: SharedKeys,
    /// Current radius and answering policy.
    pub clock: Arc<ClockState>,
    /// Set to stop.
    pub stop: Arc<AtomicBool>,
    /// Where counters are published.
    pub published: Arc<Mutex<WorkerStats>>,
    /// The host's directed-broadcast addresses, refreshed by the engine.
    pub broadcasts: Arc<Broadcasts>,
    /// Ticked once per loop iteration, idle wake-ups included, for the
    /// watchdog (`liveness`).
    pub heartbeat: Arc<Beat>,
}

/// A worker's buffers, allocated once before serving.
pub struct WorkerState {
    /// The settings in force, and that the tables below were made for.
    config: Arc<WorkerConfig>,
    batch: Batch,
    responder: Responder,
    /// Counters since start.
    pub stats: WorkerStats,
    consecutive_errors: u32,
    greaser: Greaser,
    limiter: SourceLimiter,
    /// Its table made here, once: the loop allocates nothing for it.
    budget: FairBudget,
    /// Zero of the worker's monotonic clock for the limits.
    epoch: Instant,
    /// When a receive last found the queue empty (the start of that call):
    /// everything read since arrived later, so no request has waited longer
    /// than this, whatever the wall clocks say. `None` until it happens.
    queue_empty_at: Option<Instant>,
    /// The kernel's clock, which stamps the requests, from the process's.
    kernel_time: KernelTime,
    sources: SourceFilter,
}

/// How long a request stamped `rx_ns` by the kernel has waited: the
/// kernel's clock now minus its receive time, but never more than the
/// monotonic time since the queue was last empty. The kernel's clock is
/// the one that stamped it, so a process clock moved by a shim cannot make
/// it look old; the monotonic bound covers a step of the kernel's clock
/// itself between receive and now.
fn queued_ns(kernel_now_ns: u64, rx_ns: u64, bound_ns: u64) -> u64 {
    kernel_now_ns.saturating_sub(rx_ns).min(bound_ns)
}

impl Worker {
    /// Allocate the buffers this worker will reuse for its whole life.
    pub fn prepare(&self) -> WorkerState {
        let local = self.socket.local_addr().ok().and_then(|a| a.as_socket());
        // Only a passed socket can be dual-stack (ours are IPv6-only).
        let dual = local.is_some_and(|a| crate::activation::dual_stack(&self.socket, a));
        self.prepare_with(SourceFilter::for_socket(local, dual))
    }

    /// As [`Worker::prepare`], with the source filter given: the AF_XDP
    /// path reads each frame's destination itself, whatever socket this
    /// worker holds.
    pub fn prepare_with(&self, sources: SourceFilter) -> WorkerState {
        let config = self.config.load_full();
        let cap = config.max_batch.clamp(1, MAX_BATCH);
        WorkerState {
            batch: Batch::new(cap),
            responder: Responder::new(cap, config.options),
            stats: WorkerStats::default(),
            consecutive_errors: 0,
            greaser: Greaser::new(config.grease_per_million),
            limiter: SourceLimiter::new(&config.limit, process_hasher()),
            budget: FairBudget::new(
                config.limit.signature_share_ppm,
                config.limit.signature_burst_us,
                SLOTS,
                process_hasher(),
            ),
            config,
            epoch: Instant::now(),
            queue_empty_at: None,
            kernel_time: KernelTime::new(),
            sources,
        }
    }

    /// Run until `stop` is set. Returns an error only for a socket failure
    /// that will not go away (the caller then takes the process down).
    pub fn run(self) -> io::Result<()> {
        // Refused only under a seccomp filter: the waits are then longer
        // than configured, nothing worse.
        if let Err(e) = crate::sys::set_timer_slack(TIMER_SLACK_NS) {
            tracing::warn!(
                "cannot shorten the worker's timer slack (batch-wait runs up to 50 µs long): {e}"
            );
        }
        let mut state = self.prepare();
        let mut last_publish = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            self.heartbeat.tick();
            #[cfg(debug_assertions)]
            if failure::stall_due(state.stats.received) {
                self.stall();
            }
            self.serve_once(&mut state)?;
            if let Some(n) = state
                .config
                .fail_after
                .filter(|&n| state.stats.received >= n)
            {
                return Err(io::Error::other(format!(
                    "injected fault after {n} datagrams"
                )));
            }
            if last_publish.elapsed().as_millis() >= 200 {
                if let Ok(mut p) = self.published.try_lock() {
                    *p = state.stats;
                    last_publish = Instant::now();
                }
            }
        }
        if let Ok(mut p) = self.published.lock() {
            *p = state.stats;
        }
        Ok(())
    }

    /// Debug builds only, the stall fault (`failure::inject_stall_after`):
    /// stop serving and stop ticking the heartbeat, as a worker stuck in a
    /// system call or a livelock would, but still see the stop flag so the
    /// process can be ended cleanly.
    #[cfg(debug_assertions)]
    fn stall(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }

    /// Receive one batch (waiting at most the socket's read timeout) and
    /// answer it. Allocates nothing. Returns the datagrams received.
    pub fn serve_once(&self, state: &mut WorkerState) -> io::Result<usize> {
        let fd = self.socket.as_raw_fd();
        let t0 = Instant::now();
        let received = if failure::injected_receive_error() {
            Err(io::Error::from_raw_os_error(libc::ENOBUFS))
        } else {
            state.batch.recv(fd)
        };
        let n = match received {
            Ok(n) => {
                state.consecutive_errors = 0;
                n
            }
            Err(e) => {
                if failure::on_receive(e.raw_os_error()) == Failure::Fatal {
                    return Err(e);
                }
                state.stats.drop(Drop::ReceiveError);
                // A persistent error must not become a busy loop.
                state.consecutive_errors = state.consecutive_errors.saturating_add(1);
                if let Some(pause) = failure::backoff(state.consecutive_errors) {
                    state.stats.error_backoffs += 1;
                    std::thread::sleep(pause);
                }
                return Ok(0);
            }
        };
        state.stats.ns_syscalls += t0.elapsed().as_nanos() as u64;
        // Less than a full batch: the queue was empty during this call.
        // Kept aside until this batch is answered, whose requests may be
        // older than that.
        let mut emptied = (n < state.batch.capacity()).then_some(t0);
        let n = if n > 0 && state.config.batch_wait_us > 0 {
            let (more, t) = self.gather(state, n, fd);
            emptied = t.or(emptied);
            n + more
        } else {
            n
        };
        if n > 0 {
            self.answer(state, n, fd)?;
        }
        if emptied.is_some() {
            state.queue_empty_at = emptied;
        }
        Ok(n)
    }

    /// The longest any request in the current batch can have waited at
    /// `now`, by the monotonic clock.
    fn queue_bound_ns(state: &WorkerState, now: Instant) -> u64 {
        state.queue_empty_at.map_or(u64::MAX, |t| {
            now.saturating_duration_since(t).as_nanos() as u64
        })
    }

    /// Wait for company (`batch_wait_us`) and read what came meanwhile
    /// into the slots after the first `n`. A signature costs as much as
    /// fifteen leaves, so at moderate load a short wait is the cheapest
    /// request there is; under heavy load receives return full batches and
    /// this never sleeps. The sleep is the configured wait less what the
    /// oldest request already waited, so it never exceeds the configured
    /// wait whatever the clocks do. Returns how many more were read, and
    /// the start of the extra read if it emptied the queue.
    fn gather(&self, state: &mut WorkerState, n: usize, fd: i32) -> (usize, Option<Instant>) {
        let room = state.batch.capacity().saturating_sub(n);
        if room == 0 {
            return (0, None);
        }
        let wait_ns = state.config.batch_wait_us.saturating_mul(1_000);
        let waited = match state.batch.meta(0).rx_ns {
            Some(rx) => {
                let mono = Instant::now();
                let now = state
                    .kernel_time
                    .now_ns(process_now_ns(), mono, &SystemClocks);
                queued_ns(now, rx, Self::queue_bound_ns(state, mono))
            }
            None => 0,
        };
        if waited < wait_ns {
            let slept = Instant::now();
            std::thread::sleep(Duration::from_nanos(wait_ns - waited));
            state.stats.ns_batch_wait += slept.elapsed().as_nanos() as u64;
        }
        let t0 = Instant::now();
        // A failed extra read only leaves the batch as it was; it is
        // counted, and a socket that is gone shows at the next receive.
        let more = state.batch.recv_more(fd, n).unwrap_or_else(|_| {
            state.stats.drop(Drop::ReceiveError);
            0
        });
        state.stats.ns_syscalls += t0.elapsed().as_nanos() as u64;
        (more, (more < room).then_some(t0))
    }

    fn answer(&self, state: &mut WorkerState, n: usize, fd: i32) -> io::Result<()> {
        let count = self.respond(state, n);
        let t_send = Instant::now();
        state.batch.send(fd, count, &mut state.stats)?;
        state.stats.ns_syscalls += t_send.elapsed().as_nanos() as u64;
        Ok(())
    }
}

/// For the datagram-path fuzzer (fuzz/fuzz_targets/server_batch.rs): a
/// worker whose batches are loaded by hand and answered with
/// [`Worker::respond`], never sent.
impl Worker {
    /// A worker on an unbound socket that it never reads or writes.
    #[doc(hidden)]
    pub fn detached(
        config: WorkerConfig,
        keys: SharedKeys,
        clock: Arc<ClockState>,
    ) -> io::Result<Worker> {
        Ok(Worker {
            socket: Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?,
            config: live(config),
            keys,
            clock,
            stop: Arc::new(AtomicBool::new(false)),
            published: Arc::new(Mutex::new(WorkerStats::default())),
            broadcasts: Arc::new(Broadcasts::default()),
            heartbeat: Beat::new(),
        })
    }
}

impl WorkerState {
    /// Follow a reload: when the live settings are not the ones in force,
    /// take them and adjust only the tables whose settings changed. The
    /// common case, nothing reloaded, is one load and one comparison.
    fn follow(&mut self, live: &LiveConfig) {
        let current = live.load();
        if Arc::ptr_eq(&current, &self.config) {
            return;
        }
        let next = Guard::into_inner(current);
        let (old, new) = (&self.config.limit, &next.limit);
        if old != new {
            self.limiter.reconfigure(new);
            if (old.signature_share_ppm, old.signature_burst_us)
                != (new.signature_share_ppm, new.signature_burst_us)
            {
                self.budget
                    .reconfigure(new.signature_share_ppm, new.signature_burst_us);
            }
        }
        self.responder.set_options(next.options);
        self.greaser.set_per_million(next.grease_per_million);
        self.config = next;
    }

    /// The receive and reply buffers: filled by hand by the AF_XDP path
    /// and the datagram-path fuzzer.
    pub fn batch(&mut self) -> &mut Batch {
        &mut self.batch
    }

    /// Most datagrams one batch holds.
    pub fn batch_capacity(&self) -> usize {
        self.batch.capacity()
    }

    /// The settings in force.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::queued_ns;

    #[test]
    fn queue_delay_is_the_kernel_clock_gap_bounded_by_the_monotonic_one() {
        // Waited 2 ms, the queue was last empty 5 ms ago.
        assert_eq!(
            queued_ns(10_002_000_000, 10_000_000_000, 5_000_000),
            2_000_000
        );
        // The kernel's clock stepped an hour forward after the receive:
        // it cannot have waited longer than the queue was non-empty.
        let hour = 3_600_000_000_000;
        assert_eq!(
            queued_ns(10_000_000_000 + hour, 10_000_000_000, 5_000_000),
            5_000_000
        );
        // Stepped back: no negative waits.
        assert_eq!(
            queued_ns(10_000_000_000, 10_000_000_000 + hour, 5_000_000),
            0
        );
        // Queue never seen empty: the kernel's clock alone.
        assert_eq!(
            queued_ns(10_002_000_000, 10_000_000_000, u64::MAX),
            2_000_000
        );
    }
}
