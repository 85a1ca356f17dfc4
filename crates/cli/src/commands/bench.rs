//! `gnomon bench`: the load generator and the do-nothing UDP responder. The
//! engines live in gnomon-loadgen; this module is their command line.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use gnomon_loadgen::{
    Backend, LoadConfig, LoadError, Mode, NullConfig, NullServer, Report, Transport,
};
use gnomon_protocol::{LongTermKey, Profile};

use super::client_out::{parse_duration, parse_profile};
use crate::words;

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
    /// The exit status is the one `gnomon query` would give: 0 when every
    /// verified response was valid, 1 when nothing was answered, 2 when
    /// any was invalid.
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
pub(crate) struct LoadArgs {
    /// The server, HOST:PORT, as `gnomon query` takes it.
    #[arg(value_name = "ADDR", required_unless_present = "target")]
    addr: Option<String>,
    /// The server (the old spelling of ADDR).
    #[arg(long, value_name = "ADDR", hide = true, conflicts_with = "addr")]
    target: Option<String>,
    /// Allow a target outside 127.0.0.0/8 and ::1. Load tests send real
    /// traffic: use this only against servers you run.
    #[arg(long)]
    allow_remote: bool,
    /// The server's long-term public key, base64 or hex: Ed25519 (32 bytes)
    /// or ML-DSA-44 (1312 bytes), as the version requested is signed.
    #[arg(long, value_name = "B64", required_unless_present = "any_reply")]
    key: Option<String>,
    /// Protocol version to request, as `gnomon query --protocol` takes it:
    /// a number (1, 0x8000000c), a draft (draft-01 … draft-19) or a name
    /// (google, rfc-10049, ml-dsa-44).
    #[arg(long, value_name = "V", default_value = "1", value_parser = parse_profile)]
    protocol: &'static Profile,
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
    /// Print the report as one JSON object, with `exit_code`.
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
    /// Print the summary as one JSON object, with `exit_code`.
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

/// Say why the command stops: on stderr, and as its one JSON object under
/// --json.
fn fail(code: u8, json: bool, kind: &str, msg: impl std::fmt::Display) -> ExitCode {
    if code == EXIT_USAGE {
        // Prints the JSON object itself when --json is on the command line.
        return super::client_out::usage("bench", msg);
    }
    let msg = msg.to_string();
    eprintln!("gnomon bench: {msg}");
    if json {
        words::print_error(kind, &msg, code);
    }
    ExitCode::from(code)
}

fn load(a: LoadArgs) -> ExitCode {
    let Some(target) = a.addr.clone().or_else(|| a.target.clone()) else {
        return fail(
            EXIT_USAGE,
            a.json,
            "usage",
            "give the server's address, HOST:PORT",
        );
    };
    // The key is read as `gnomon query --key` reads it.
    let key = match a.key.as_deref().map(gnomon_client::parse_public_key) {
        None => LongTermKey::from([0; 32]),
        Some(Ok(k)) => k,
        Some(Err(e)) => return fail(EXIT_USAGE, a.json, "usage", format!("--key: {e}")),
    };
    let mut cfg = LoadConfig::new(target.clone(), key, a.protocol);
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
        Err(LoadError::Socket(e)) => {
            return fail(
                EXIT_LOCAL,
                a.json,
                "local",
                format!("cannot open a socket to {target}: {}", words::io(&e)),
            )
        }
        Err(e) => return fail(EXIT_USAGE, a.json, "usage", e),
    };
    let code = if report.invalid > 0 {
        EXIT_INVALID
    } else if report.answered == 0 {
        EXIT_NO_ANSWER
    } else {
        0
    };
    if a.json {
        words::print_outcome(report.to_json(), code);
    } else {
        print!("{}", report.to_text());
    }
    if report.answered == 0 && report.sent + report.refused > 0 {
        eprintln!("gnomon bench: {}", silence(&target, &report));
    }
    ExitCode::from(code)
}

/// Why nothing answered, with what `gnomon query` says of the same
/// silence: a refused port is nothing listening, and a server that is
/// there and silent has the reasons of [`gnomon_client::SILENT_SERVER`],
/// plus a version it may not serve.
fn silence(target: &str, r: &Report) -> String {
    let refused = match r.transport {
        Transport::Udp => r.recv_errors > 0,
        Transport::Tcp => r.refused > 0 && r.sent == 0,
    };
    if refused {
        return format!(
            "no answer from {target}: the port refused the requests (ICMP port unreachable \
             or TCP connection refused): nothing listens there"
        );
    }
    format!(
        "no answer from {target} to {} request(s): {}; or the server does not serve {} \
         (pick another with --protocol)",
        r.sent,
        gnomon_client::SILENT_SERVER,
        r.version
    )
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
        Err(e) => {
            // The responder's own words for a bad setting or a missing
            // kernel feature; the system's, with the address, otherwise.
            let (code, kind) = match e.kind() {
                std::io::ErrorKind::InvalidInput => (EXIT_USAGE, "usage"),
                std::io::ErrorKind::Unsupported => (EXIT_LOCAL, "unsupported"),
                _ => (EXIT_OS, "listen"),
            };
            let msg = match code {
                EXIT_OS => format!("cannot listen on {}: {}", a.listen, words::io(&e)),
                _ => words::strip_os_error(&e.to_string()),
            };
            return fail(code, a.json, kind, msg);
        }
    };
    let addr = server.local_addr().map_or(a.listen, |x| x);
    // The first line names the bound port, for scripts that pass port 0;
    // under --json stdout holds only the summary object, so it goes to
    // stderr.
    if a.json {
        eprintln!("listening on {addr}");
    } else {
        println!("listening on {addr}");
    }
    let st = server.run(gnomon_loadgen::stop_on_signals());
    let per = st.cpu_us_per_reply();
    if a.json {
        let v = serde_json::json!({
            "backend": a.backend.name(),
            "listen": addr.to_string(),
            "received": st.received,
            "replied": st.replied,
            "elapsed_secs": st.elapsed_secs,
            "cpu_secs": st.cpu_secs,
            "cpu_us_per_reply": per,
        });
        words::print_outcome(v, 0);
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
