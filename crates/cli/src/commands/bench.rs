//! `gnomon bench`: the load generator and the do-nothing UDP responder. The
//! engines live in gnomon-loadgen; this module is their command line.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use base64::Engine as _;
use gnomon_loadgen::{Backend, LoadConfig, LoadError, Mode, NullConfig, NullServer, Transport};
use gnomon_protocol::{LongTermKey, Profile};

use super::client_out::parse_duration;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Send real Roughtime requests at a server, verify the responses, and
    /// report throughput, loss and latency.
    ///
    /// Each socket (one thread) keeps its sent requests in a ring, matches
    /// each response to the request it answers and verifies it fully
    /// (signatures, Merkle proof, nonce, version, delegation window). Only
    /// loopback targets are allowed unless --allow-remote is given. With
    /// --tcp each socket is a connection loaded closed-loop instead.
    ///
    /// Exit status (as for `gnomon query`): 0 when every verified response
    /// was valid, 1 when nothing was answered, 2 when any response was
    /// invalid, 64 for bad arguments or a refused target, 70 when the
    /// sockets could not be set up.
    Load(LoadArgs),
    /// Answer every UDP datagram with the same fixed bytes: the baseline a
    /// server's cost per response is measured against.
    ///
    /// recvmmsg → fixed reply → sendmmsg (or the same over io_uring with
    /// --backend io-uring), and nothing else. Prints the bound address first,
    /// and datagrams answered and CPU per reply on exit (SIGINT, SIGTERM or
    /// --duration).
    NullServer(NullArgs),
}

/// Arguments of `bench load`.
#[derive(Debug, clap::Args)]
#[command(disable_version_flag = true)]
pub(crate) struct LoadArgs {
    /// Server address, HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    target: String,
    /// Allow a target outside 127.0.0.0/8 and ::1. Load tests send real
    /// traffic: use this only against servers you run.
    #[arg(long)]
    allow_remote: bool,
    /// The server's long-term public key, base64 or hex: Ed25519 (32 bytes)
    /// or ML-DSA-44 (1312 bytes), as the version requested is signed.
    #[arg(long, value_name = "B64", required_unless_present = "any_reply")]
    key: Option<String>,
    /// Version to request: a name (google, draft-07, rfc-10049) or number
    /// (1, 0x8000000c).
    #[arg(long = "version", value_name = "V", default_value = "1")]
    version: String,
    /// Send at this total rate, requests per second, spread over the sockets.
    #[arg(
        long,
        value_name = "R",
        conflicts_with = "max",
        required_unless_present = "max"
    )]
    rate: Option<f64>,
    /// Send as fast as responses come back, with at most --window requests
    /// in flight per socket.
    #[arg(long)]
    max: bool,
    /// Load over TCP (needs --max; the only transport of ml-dsa-44): one
    /// connection per worker, each writing --window requests at once and
    /// waiting for all their answers before the next burst.
    #[arg(long, requires = "max", conflicts_with = "any_reply")]
    tcp: bool,
    /// How long to send (at most 5m): 30s, 1.5m, 500ms; a bare number is
    /// seconds. The run then waits up to --timeout for the last responses.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Stop sending after this many requests in total.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Sender sockets, one thread each.
    #[arg(long, value_name = "N", default_value_t = 4)]
    workers: usize,
    /// Requests in flight per socket [default: 64 with --max, 4096 with --rate].
    #[arg(long, value_name = "N")]
    window: Option<usize>,
    /// How long a request may wait for its response before it counts as
    /// lost: 1s, 250ms; a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    timeout: Duration,
    /// Request size in bytes (a multiple of 4; servers answer from 1024).
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    request_size: usize,
    /// Fraction of responses to verify, 0 to 1. Verifying costs two Ed25519
    /// checks (≈90 µs) per response, which limits each socket to about
    /// 10,000 responses per second; to measure a fast server, verify a
    /// sample (e.g. 0.01) and add sockets. Unverified responses still count
    /// as answered.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    verify_fraction: f64,
    /// Count any datagram as the answer to its socket's oldest outstanding
    /// request, and verify nothing: for baselines against `gnomon bench
    /// null-server`.
    #[arg(long)]
    any_reply: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `bench null-server`.
#[derive(Debug, clap::Args)]
pub(crate) struct NullArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5320")]
    listen: SocketAddr,
    /// Bytes in every reply.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    reply_size: usize,
    /// Worker threads, each with its own SO_REUSEPORT socket.
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// Stop after this long: 30s, 2m; a bare number is seconds.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// How datagrams are received and answered: recvmmsg (batches of 64,
    /// one sendmmsg of the replies) or io-uring (multishot receive into
    /// provided buffers, one SendMsg per datagram, submitted in batches).
    #[arg(long, value_name = "NAME", default_value_t = Backend::Recvmmsg)]
    backend: Backend,
    /// Busy-poll the socket for up to this many µs before a receive sleeps
    /// (SO_BUSY_POLL with SO_PREFER_BUSY_POLL; recvmmsg backend only). Only
    /// traffic through a NAPI device queue is affected, not loopback.
    #[arg(long, value_name = "US")]
    busy_poll: Option<u32>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> ExitCode {
    match args.command {
        BenchCommand::Load(a) => load(a),
        BenchCommand::NullServer(a) => null_server(a),
    }
}

/// Exit codes shared with the client commands (docs/CLIENT.md).
use crate::exit::{
    INVALID as EXIT_INVALID, NO_ANSWER as EXIT_NO_ANSWER, OS_ERROR as EXIT_OS,
    SOFTWARE as EXIT_LOCAL, USAGE as EXIT_USAGE,
};

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    if code == EXIT_USAGE {
        return super::client_out::usage("bench", msg);
    }
    eprintln!("gnomon bench: {msg}");
    ExitCode::from(code)
}

fn parse_key(s: &str) -> Result<LongTermKey, String> {
    let s = s.trim();
    let hex_len = |n: usize| s.len() == 2 * n;
    let bytes = if (hex_len(32) || hex_len(gnomon_protocol::Scheme::MlDsa44.public_len()))
        && s.bytes().all(|b| b.is_ascii_hexdigit())
    {
        hex::decode(s).map_err(|e| e.to_string())?
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("bad --key: not base64 or hex ({e})"))?
    };
    LongTermKey::from_bytes(&bytes).ok_or_else(|| {
        format!(
            "bad --key: {} bytes, an Ed25519 key has 32 and an ML-DSA-44 key 1312",
            bytes.len()
        )
    })
}

fn load(a: LoadArgs) -> ExitCode {
    let Some(profile) = Profile::by_name(&a.version) else {
        let names: Vec<&str> = gnomon_protocol::PROFILES.iter().map(|p| p.name).collect();
        return fail(
            EXIT_USAGE,
            format!(
                "bad --version: {:?}; one of {} or a version number",
                a.version,
                names.join(", ")
            ),
        );
    };
    let key = match a.key.as_deref().map(parse_key).transpose() {
        Ok(k) => k.unwrap_or_else(|| LongTermKey::from([0; 32])),
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let mut cfg = LoadConfig::new(a.target, key, profile);
    cfg.allow_remote = a.allow_remote;
    cfg.mode = match a.rate {
        Some(r) => Mode::Rate(r),
        None => Mode::Max,
    };
    if a.tcp {
        cfg.transport = Transport::Tcp;
    }
    cfg.duration = a.duration;
    cfg.timeout = a.timeout;
    cfg.count = a.count;
    cfg.workers = a.workers;
    cfg.window = a.window;
    cfg.request_size = a.request_size;
    cfg.verify_fraction = a.verify_fraction;
    cfg.any_reply = a.any_reply;
    let report = match gnomon_loadgen::run(&cfg, gnomon_loadgen::stop_on_signals()) {
        Ok(r) => r,
        Err(e @ LoadError::Socket(_)) => return fail(EXIT_LOCAL, e),
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if a.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if report.invalid > 0 {
        ExitCode::from(EXIT_INVALID)
    } else if report.answered == 0 {
        ExitCode::from(EXIT_NO_ANSWER)
    } else {
        ExitCode::SUCCESS
    }
}

fn null_server(a: NullArgs) -> ExitCode {
    let cfg = NullConfig {
        listen: a.listen,
        reply_size: a.reply_size,
        workers: a.workers,
        duration: a.duration,
        backend: a.backend,
        busy_poll: a.busy_poll,
    };
    let server = match NullServer::bind(&cfg) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return fail(EXIT_USAGE, e),
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => return fail(EXIT_LOCAL, e),
        Err(e) => return fail(EXIT_OS, format!("cannot listen on {}: {e}", a.listen)),
    };
    let addr = server.local_addr().map_or(a.listen, |x| x);
    // The first line names the bound port, for scripts that pass port 0.
    println!("listening on {addr}");
    let st = server.run(gnomon_loadgen::stop_on_signals());
    let per = st.cpu_us_per_reply();
    if a.json {
        let v = serde_json::json!({
            "backend": a.backend.name(),
            "received": st.received,
            "replied": st.replied,
            "elapsed_secs": st.elapsed_secs,
            "cpu_secs": st.cpu_secs,
            "cpu_us_per_reply": per,
        });
        println!("{v}");
    } else {
        println!(
            "received {}, replied {} in {:.2} s; CPU {:.2} s ({} µs per reply)",
            st.received,
            st.replied,
            st.elapsed_secs,
            st.cpu_secs,
            per.map_or("-".to_owned(), |u| format!("{u:.2}")),
        );
    }
    ExitCode::SUCCESS
}
