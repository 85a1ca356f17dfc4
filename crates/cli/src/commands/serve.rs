//! `gnomon serve`: run the server until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine as _;
use gnomon_protocol::profile::{Framing, PROFILES};
use gnomon_protocol::{Acceptor, KeyPair, ResponderOptions, Version};
use gnomon_server::keys::random_seed;
use gnomon_server::stats::{Drop, WorkerStats};
use gnomon_server::tcp::TcpConfig;
use gnomon_server::worker::WorkerConfig;
use gnomon_server::{Engine, EngineConfig};

/// `println!` that ignores a closed stdout: a server must not die because
/// whoever started it stopped reading.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `eprintln!` that ignores a closed stderr.
macro_rules! err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address to serve on (UDP); repeatable, IPv4 or IPv6.
    #[arg(
        long,
        env = "GNOMON_LISTEN",
        value_delimiter = ',',
        default_value = "127.0.0.1:5319"
    )]
    listen: Vec<SocketAddr>,
    /// Worker threads per address (default: available cores).
    #[arg(long, env = "GNOMON_WORKERS", value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: Option<u16>,
    /// Largest batch read and signed at once.
    #[arg(long, env = "GNOMON_BATCH_SIZE", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    batch_size: u16,
    /// Drop requests that waited in the socket longer than this (ms).
    #[arg(long, env = "GNOMON_MAX_QUEUE_DELAY_MS", default_value_t = 500)]
    max_queue_delay_ms: u64,
    /// Smallest radius advertised, seconds (the kernel's estimate is used when larger).
    #[arg(long, env = "GNOMON_RADIUS_FLOOR", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=86_400))]
    radius_floor: u32,
    /// Batch the versions whose tree orientation implementations dispute
    /// (drafts 05–11, TYPE-less 0x8000000c); off answers them one by one.
    #[arg(long, env = "GNOMON_BATCH_DISPUTED")]
    batch_disputed: bool,
    /// Also serve TCP on the same addresses, for the versions that define it
    /// (drafts 08 and later, and 1).
    #[arg(long, env = "GNOMON_TCP")]
    tcp: bool,
    /// Seconds between summary log lines (0: none).
    #[arg(long, env = "GNOMON_SUMMARY_INTERVAL", default_value_t = 60)]
    summary_interval: u64,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let long_term = match random_seed() {
        Ok(seed) => KeyPair::from_seed(&seed),
        Err(e) => {
            err!("gnomon serve: cannot read random bytes from the OS: {e}");
            return ExitCode::from(71);
        }
    };
    let public = long_term.public();
    err!("gnomon serve: WARNING: ephemeral long-term key, made for this run only; not for production");
    out!(
        "public key (base64): {}",
        base64::engine::general_purpose::STANDARD.encode(public)
    );
    out!("public key (hex):    {}", hex::encode(public));
    let workers = args.workers.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let mut vers: Vec<Version> = PROFILES
        .iter()
        .filter(|p| p.framing == Framing::Packet)
        .map(|p| p.version)
        .collect();
    vers.sort();
    vers.dedup();
    let config = EngineConfig {
        listen: args.listen.clone(),
        workers,
        recv_buffer: Some(8 << 20),
        worker: WorkerConfig {
            max_batch: usize::from(args.batch_size),
            max_queue_delay_us: args.max_queue_delay_ms * 1_000,
            acceptor: Acceptor::default(),
            options: ResponderOptions {
                batch_disputed: args.batch_disputed,
                google_nonce: false,
            },
            vers,
            grease_per_million: 0,
        },
        key_validity: Duration::from_secs(24 * 3600),
        key_rotation: Duration::from_secs(12 * 3600),
        radius_floor_us: u64::from(args.radius_floor) * 1_000_000,
        unsynchronized_radius_us: Some(60_000_000),
        tcp: args.tcp.then(TcpConfig::default),
    };
    let engine = match Engine::start(config, vec![long_term]) {
        Ok(e) => e,
        Err(e) => {
            err!("gnomon serve: cannot start on {:?}: {e}", args.listen);
            return ExitCode::from(71);
        }
    };
    let stop = engine.stop_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            err!("gnomon serve: cannot handle signal {sig}: {e}");
            return ExitCode::from(71);
        }
    }
    if !engine.clock.synchronized.load(Ordering::Relaxed) {
        err!(
            "gnomon serve: WARNING: the kernel says the system clock is not synchronized; \
             answering with a radius of {} s",
            engine.clock.radius_us.load(Ordering::Relaxed) / 1_000_000
        );
    }
    for addr in &engine.local {
        err!("gnomon serve: listening on udp {addr} with {workers} workers");
    }
    for addr in engine.tcp_local() {
        err!("gnomon serve: listening on tcp {addr}");
    }
    let mut last_summary = Instant::now();
    let mut previous = WorkerStats::default();
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(50));
        if args.summary_interval > 0 && last_summary.elapsed().as_secs() >= args.summary_interval {
            let now = engine.stats();
            err!("{}", summary(&previous, &now, last_summary.elapsed()));
            previous = now;
            last_summary = Instant::now();
        }
    }
    let failed = engine.failed();
    match engine.shutdown() {
        Ok(total) => {
            err!(
                "gnomon serve: stopped; {}",
                summary(&WorkerStats::default(), &total, Duration::ZERO)
            );
            if failed {
                ExitCode::from(70)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            err!("gnomon serve: a worker failed: {e}");
            ExitCode::from(70)
        }
    }
}

/// One line: what happened since the last summary.
fn summary(before: &WorkerStats, now: &WorkerStats, over: Duration) -> String {
    let responses = now.total_responses() - before.total_responses();
    let received = now.received - before.received;
    let drops: u64 = now.drops.iter().sum::<u64>() - before.drops.iter().sum::<u64>();
    let mut line = format!("received {received}, answered {responses}, dropped {drops}");
    if !over.is_zero() {
        line += &format!(" ({:.0}/s)", responses as f64 / over.as_secs_f64());
    }
    for d in Drop::ALL {
        let n = now.drops[d as usize] - before.drops[d as usize];
        if n > 0 {
            line += &format!(", {} {n}", d.label());
        }
    }
    line + &format!(", signatures {}", now.signatures - before.signatures)
}
