//! `gnomon query`: ask one server, or run the measurement sequence over a
//! server list (see `query_sequence`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use gnomon_client::decode::online_key_label;
use gnomon_client::{
    format_duration_us, format_utc, parse_public_key, Answer, Backoff, Client, Config, Server,
    TcpMode,
};
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::Profile;
use serde_json::json;

use super::client_out::{
    cannot_write, error_kind, exit_for, ms, parse_duration, parse_profile, print_json, usage,
    version_label, Exit, EXIT_CODES, NO_SERVER_GIVEN, SWITCH_OFF, SWITCH_ON, SWITCH_VALUES,
};
use super::query_sequence;
use super::signed_servers::SignedServers;
use crate::words;

/// Arguments.
#[derive(Debug, clap::Args)]
// `list`: a local file or monitors' signed lists, one or the other.
#[command(after_help = EXIT_CODES,
          group = clap::ArgGroup::new("list").args(["servers", "servers_url"]))]
pub(crate) struct Args {
    // Not required by clap: without it or --servers, `run` says both ways
    // to call the command, which clap's "required argument" cannot.
    #[arg(
        conflicts_with = "list",
        help = "The server: host, host:port, [IPv6]:port (port 5319 when omitted)"
    )]
    pub(crate) addr: Option<String>,
    /// The server's long-term public key, base64 or hex: 32 bytes for
    /// Ed25519, 1312 bytes for ML-DSA-44 (post-quantum version 0x90000001,
    /// asked over TCP only). The length chooses the versions offered.
    #[arg(long, requires = "addr")]
    pub(crate) key: Option<String>,
    /// Run the measurement sequence of RFC 10049 over this server list.
    #[arg(long, value_name = "LIST.json")]
    pub(crate) servers: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) signed: SignedServers,
    /// With a list (--servers or --servers-url): query every server in
    /// it, not a random few.
    #[arg(long, requires = "list", conflicts_with = "ask")]
    pub(crate) all: bool,
    /// With a list: how many servers to ask, at random (default: enough
    /// to outvote --max-liars liars with as many silenced, 3f + 1, and at
    /// least 3, the RFC's minimum).
    #[arg(long, value_name = "N", requires = "list", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) ask: Option<u16>,
    /// With a list: how many distinct keys must agree with the
    /// consensus (as sync's `quorum`); fewer exits 1.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "list", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) quorum: u16,
    /// With a list: how many of the listed servers may lie (default:
    /// max(1, (n − 1)/3) of the n listed, servers sharing a key, address
    /// or operator counted once). A consensus needs 2 × this + 1 of them
    /// answering; 0 trusts every server that answers.
    #[arg(long, value_name = "N", requires = "list", value_parser = clap::value_parser!(u16).range(0..=1024))]
    pub(crate) max_liars: Option<u16>,
    /// Offer only this protocol version: a number (1, 0x8000000b,
    /// 3000600613 for Google), a draft (draft-01 … draft-19; drafts 12–19
    /// all send 0x8000000c, 14–19 with TYPE) or a name (google, rfc-10049,
    /// ml-dsa-44). The same flag as `bench load --protocol`.
    #[arg(long, value_name = "V", value_parser = parse_profile, requires = "addr")]
    pub(crate) protocol: Option<&'static Profile>,
    /// Use TCP only (versions that define TCP).
    #[arg(long, conflicts_with = "udp_only")]
    pub(crate) tcp: bool,
    /// Never fall back to TCP (refused for an ML-DSA-44 key: its version
    /// is served over TCP only).
    #[arg(long)]
    pub(crate) udp_only: bool,
    /// First UDP wait; each retry waits 1.5 times longer (RFC 10049).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    /// UDP attempts for the first version family (later families get one).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub(crate) retries: u32,
    /// When the newest versions get no answer at all, go on to older ones
    /// (draft 07 and before, Google). Off by default: anyone on the path
    /// can drop packets, so silence alone must not pick a weaker version.
    #[arg(long)]
    pub(crate) version_fallback: bool,
    /// Give up on one server after this long, whatever the schedule
    /// (host-name resolution included).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) deadline: Option<Duration>,
    /// Write the malfeasance report (RFC 10049 malfeasance-report JSON) here when the
    /// sequence proves a contradiction.
    #[arg(long, value_name = "FILE", requires = "list")]
    pub(crate) report_out: Option<PathBuf>,
    /// POST the report to the list's `reports` URL (HTTPS), retrying with
    /// the RFC's backoff (10 s × 1.5^(n−1)). `--report` alone is on;
    /// `--report=off` (or off, false, no, 0) is off, as for sync and watch.
    #[arg(long, requires = "list", value_name = SWITCH_VALUES, num_args = 0..=1,
          default_missing_value = SWITCH_ON, default_value = SWITCH_OFF,
          value_parser = words::switch)]
    pub(crate) report: bool,
    /// Attempts to POST a report.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub(crate) report_attempts: u32,
    /// First wait between report attempts (testing: the RFC says 10 s).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, hide = true)]
    pub(crate) report_backoff: Duration,
    /// Testing only: accept a plain-HTTP `reports` URL on 127.0.0.1, ::1 or
    /// localhost. Real lists must use HTTPS.
    #[arg(long, hide = true)]
    pub(crate) allow_loopback_http_reports: bool,
    /// Write the request that got the verified answer to FILE (raw bytes,
    /// for `gnomon inspect`).
    #[arg(long, value_name = "FILE", requires = "addr")]
    pub(crate) save_request: Option<PathBuf>,
    /// Write the verified response to FILE (raw bytes): `gnomon inspect
    /// FILE --key K --request REQUEST` checks it again offline.
    #[arg(long, value_name = "FILE", requires = "addr")]
    pub(crate) save_response: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Args {
    pub(crate) fn client_config(&self) -> Config {
        Config {
            backoff: Backoff {
                initial: self.timeout,
                attempts: self.retries,
                ..Backoff::QUERY
            },
            tcp: if self.tcp {
                TcpMode::Only
            } else if self.udp_only {
                TcpMode::Never
            } else {
                TcpMode::Fallback
            },
            deadline: self.deadline,
            version_fallback: self.version_fallback,
            ..Config::default()
        }
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    if args.servers.is_some() || args.signed.given() {
        return query_sequence::run(&args);
    }
    let Some(addr) = args.addr.as_deref() else {
        return usage("query", NO_SERVER_GIVEN);
    };
    let Some(key) = args.key.as_deref() else {
        return usage("query", "--key is required with a server address");
    };
    let key = match parse_public_key(key) {
        Ok(k) => k,
        Err(e) => return usage("query", format!("--key: {e}")),
    };
    if let Some(p) = args.protocol {
        if p.scheme != key.scheme() {
            return usage(
                "query",
                format!(
                    "--protocol {} is signed with {}, but --key is an {} key ({} bytes)",
                    p.name,
                    p.scheme,
                    key.scheme(),
                    key.bytes().len()
                ),
            );
        }
    }
    if args.udp_only
        && gnomon_protocol::ProfileSet::ALL
            .of_scheme(key.scheme())
            .over_udp()
            .iter()
            .next()
            .is_none()
    {
        return usage(
            "query",
            format!(
                "--udp-only: {} versions are served over TCP only",
                key.scheme()
            ),
        );
    }
    let mut server = match Server::at(addr, key) {
        Ok(s) => s,
        Err(e) => return usage("query", format!("{addr}: {e}")),
    };
    if let Some(p) = args.protocol {
        server = server.with_version(p);
    }
    let said = addr.to_owned();
    let mut client = Client::new(args.client_config()).on_progress(move |r| {
        eprintln!("gnomon query: {}", retry_line(&said, r));
    });
    match client.query(&server) {
        Ok(a) => {
            if let Err(e) = save(&args, &a) {
                eprintln!("gnomon query: {e}");
                if args.json {
                    print_json(&json!({
                        "server": addr,
                        "error": { "kind": "save", "message": e },
                        "exit_code": Exit::CantCreate.code(),
                    }));
                }
                return Exit::CantCreate.into();
            }
            if args.json {
                let mut v = answer_json(&a);
                v["server"] = json!(addr);
                v["exit_code"] = json!(0);
                print_json(&v);
            } else {
                print_answer(addr, &a);
            }
            Exit::Ok.into()
        }
        Err(e) => {
            let code = exit_for(&e);
            if args.json {
                print_json(&json!({
                    "server": addr,
                    "error": { "kind": error_kind(&e), "message": e.to_string() },
                    "exit_code": code.code(),
                }));
            } else {
                eprintln!("gnomon query: {addr}: {e}");
            }
            code.into()
        }
    }
}

/// Writes the exchange where --save-request and --save-response say.
fn save(args: &Args, a: &Answer) -> Result<(), String> {
    for (what, path, bytes) in [
        ("the request", &args.save_request, &a.request),
        ("the response", &args.save_response, &a.response),
    ] {
        if let Some(p) = path {
            std::fs::write(p, bytes).map_err(|e| cannot_write(what, p, &e))?;
        }
    }
    Ok(())
}

/// What a query waiting on a silent server is doing: `no answer from
/// time.example (192.0.2.7:5319) yet after 1.0 s; retrying, 2 of 6 (UDP)`.
fn retry_line(addr: &str, r: &gnomon_client::Retry) -> String {
    let peer = r.peer.to_string();
    let whom = if peer == addr {
        peer
    } else {
        format!("{addr} ({peer})")
    };
    let how = match r.transport {
        Transport::Udp => "UDP",
        Transport::Tcp => "TCP",
    };
    let so_far = if r.refused {
        format!("{whom} refused the request (ICMP port unreachable)")
    } else {
        format!("no answer from {whom} yet")
    };
    format!(
        "{so_far} after {:.1} s; retrying, {} of {} ({how})",
        r.elapsed.as_secs_f64(),
        r.attempt,
        r.planned
    )
}

pub(crate) fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Udp => "udp",
        Transport::Tcp => "tcp",
    }
}

/// The fields of an answer, shared with the sequence output.
pub(crate) fn answer_json(a: &Answer) -> serde_json::Value {
    let v = &a.verified;
    json!({
        "version": {
            "name": v.profile.name,
            "number": v.profile.version.0,
            "drafts": v.profile.drafts.map(|(first, last)| [first, last]),
        },
        "scheme": v.profile.scheme.name(),
        "transport": transport_name(a.transport),
        "peer": a.peer.to_string(),
        "midpoint_us": v.midpoint_us,
        "midpoint_utc": format_utc(v.midpoint_us),
        "radius_us": v.radius_us,
        "rtt_us": a.rtt.as_micros() as u64,
        "offset_us": a.offset_us as i64,
        "sends": a.sends,
        "legacy_context": v.legacy_context,
        "merkle_orientation": format!("{:?}", v.orientation),
        "online_key": online_key_label(v.profile.scheme, &v.online_key),
    })
}

fn print_answer(addr: &str, a: &Answer) {
    let v = &a.verified;
    println!(
        "server   {addr} ({} {})",
        transport_name(a.transport),
        a.peer
    );
    println!("version  {}", version_label(v.profile));
    if v.profile.scheme != gnomon_protocol::Scheme::Ed25519 {
        println!("scheme   {}", v.profile.scheme.name());
    }
    println!("time     {}", format_utc(v.midpoint_us));
    println!(
        "radius   ±{}",
        format_duration_us(i128::from(v.radius_us)).trim_start_matches('+')
    );
    println!("rtt      {}", ms(a.rtt));
    println!(
        "offset   {} (server − local clock)",
        format_duration_us(a.offset_us)
    );
    // Of a fleet sharing one long-term key, the online key tells which host
    // answered (`gnomon delegate --hosts` writes which key is whose). An
    // ML-DSA-44 online key (1312 bytes) is shown as its SHA-512 digest,
    // labelled `sha512:`.
    println!(
        "online   {}",
        online_key_label(v.profile.scheme, &v.online_key)
    );
    if a.sends > 1 {
        println!("note     answered after {} transmissions", a.sends);
    }
    if v.legacy_context {
        println!("note     signed with the draft-19 context strings, not RFC 10049's");
    }
}
