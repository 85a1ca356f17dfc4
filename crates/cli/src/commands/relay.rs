//! `gnomon relay`: run the measurement sequence for a device that cannot
//! reach a server, its first nonce bound to the device's value, and write
//! the proof bundle the device verifies offline (docs/PROOF.md).
//!
//! The relay is untrusted by design: it holds no key, and nothing it does
//! can make the device accept a wrong time. It checks the bundle itself,
//! with the list's keys and the device's default policy, only to tell its
//! operator whether the device will accept it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gnomon_client::{Assumption, Backoff, Client, Config, Electorate, Plan, Selection, Server};
use gnomon_protocol::proof::{verify_proof_grouped, ProofError, ProofWorkspace, MAX_PROOF_ENTRIES};
use gnomon_protocol::PublicKey;
use serde_json::json;

use super::client_out::{error_kind, parse_duration, usage, Exit};
use super::signed_servers::{Lists, SignedServers};
use super::verify_proof::{
    assumption_text, parse_device_value, pinned, pinned_voters, policy_json, proven_json, said,
    Policy, RELAY_EXIT_CODES,
};
use crate::words;

/// The bundle's form. clap_mangen renders a list of possible values as a
/// block that starts with an empty paragraph, which mandoc's lint refuses:
/// `--format` hides the list, and its help names both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// The compact binary form, for devices (docs/PROOF.md).
    Binary,
    /// The RFC's chained-report JSON with the device value added.
    Json,
}

/// Arguments.
#[derive(Debug, clap::Args)]
// `list`: a local file or monitors' signed lists, one of them.
#[command(after_help = RELAY_EXIT_CODES,
          group = clap::ArgGroup::new("list").args(["servers", "servers_url"]).required(true))]
pub(crate) struct Args {
    /// The servers to ask (RFC 10049 server-list JSON).
    #[arg(long, value_name = "LIST.json")]
    pub(crate) servers: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) signed: SignedServers,
    /// The device's value, hex, 16 to 64 bytes (32 to 128 hex digits): at
    /// least 128 bits the relay cannot predict, such as fresh random bytes
    /// or the hash of a new blob that includes them. The chain's first
    /// nonce is derived from it, so every answer is signed after it
    /// existed; a value the relay could guess (a counter, a clock reading)
    /// lets it prepare bundles in advance. Shorter ones are refused before
    /// any server is asked.
    #[arg(long, value_name = "HEX")]
    pub(crate) device_nonce: String,
    /// Where to write the bundle; `-` writes it to standard output.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// The bundle's form: binary (compact, for devices; docs/PROOF.md) or
    /// json (the RFC's chained report with the device value added, which
    /// `gnomon verify-report` also reads).
    #[arg(long, value_enum, default_value_t = Format::Binary, hide_possible_values = true)]
    pub(crate) format: Format,
    /// Ask every server in the list (at most 8: each is asked twice, and a
    /// bundle holds 16 answers), not three at random.
    #[arg(long, conflicts_with = "ask")]
    pub(crate) all: bool,
    /// How many servers to ask, at random (default: as many as a bundle
    /// holds, 8: the device needs 2f + 1 of the servers it pins).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=8))]
    pub(crate) ask: Option<u16>,
    /// First UDP wait; each retry waits 1.5 times longer.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    /// Give up on one server after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) deadline: Option<Duration>,
    #[command(flatten)]
    pub(crate) policy: Policy,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A relay that made no bundle, or could not write it: the sentence on
/// stderr, or the one JSON object under `--json`.
fn failed(json_out: bool, kind: &str, msg: &str, code: Exit) -> ExitCode {
    if json_out {
        words::print_outcome(
            json!({ "written": false, "error": { "kind": kind, "message": msg } }),
            code.code(),
        );
    } else {
        eprintln!("gnomon relay: {msg}");
    }
    code.into()
}

pub(crate) fn run(args: Args) -> ExitCode {
    if args.json && args.out.as_os_str() == "-" {
        return usage(
            "relay",
            "--json and --out - would both write to standard output",
        );
    }
    let device = match parse_device_value(&args.device_nonce) {
        Ok(d) => d,
        Err(e) => return usage("relay", e),
    };
    let (servers, signed) = match read_list(&args) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(lists) = &signed {
        if !args.json {
            for line in lists.lines() {
                eprintln!("gnomon relay: {line}");
            }
        }
    }
    let passes = 2;
    if args.all && servers.len() * passes > MAX_PROOF_ENTRIES {
        return usage(
            "relay",
            format!(
                "--all: the list has {} servers; a bundle holds {MAX_PROOF_ENTRIES} answers, \
                 each server asked twice: use --ask N (N at most {})",
                servers.len(),
                MAX_PROOF_ENTRIES / passes
            ),
        );
    }
    // The device needs 2f + 1 of its pinned servers in the bundle (f =
    // fewer than half by default): ask as many as a bundle holds.
    let electorate = Electorate::of(&servers);
    let assumption = match args.policy.max_liars {
        Some(f) => Assumption::new(electorate.voters(), usize::from(f)),
        None => Assumption::for_proof(electorate.voters()),
    };
    let fits = MAX_PROOF_ENTRIES / passes;
    let plan = Plan {
        selection: if args.all {
            Selection::All
        } else {
            Selection::Random(args.ask.map_or(fits, usize::from))
        },
        passes,
        assumption: Some(assumption),
    };
    let mut client = Client::new(Config {
        backoff: Backoff {
            initial: args.timeout,
            ..Backoff::QUERY
        },
        deadline: args.deadline,
        ..Config::default()
    });
    let started = Instant::now();
    let seq = match client.measure_bound(&servers, &plan, &device) {
        Ok(s) => s,
        Err(e) => {
            let msg = words::strip_os_error(&e.to_string());
            return failed(args.json, error_kind(&e), &msg, Exit::Local);
        }
    };
    let proof = match seq.chain.proof() {
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            let msg = format!("cannot make the bundle: {}", said::describe_form(&e));
            return failed(args.json, "local", &msg, Exit::Local);
        }
        None => {
            let msg = "the measurement was not bound to the device value";
            return failed(args.json, "local", msg, Exit::Local);
        }
    };
    let answered = proof.report().entries.len();
    if answered == 0 {
        let msg = format!("no server answered ({} asked)", seq.order.len());
        return failed(args.json, "no_answer", &msg, Exit::NoAnswer);
    }
    let binary = proof.to_binary();
    let bytes = match args.format {
        Format::Binary => binary.clone(),
        Format::Json => proof.to_json().into_bytes(),
    };
    if let Err(e) = write_out(&args.out, &bytes) {
        let msg = format!(
            "cannot write the bundle to {}: {}",
            args.out.display(),
            words::io(&e)
        );
        return failed(args.json, "cant_create", &msg, Exit::CantCreate);
    }
    // The device's own check, with this relay's measuring time as the
    // elapsed time: the device's is longer (the hand-over), and widens
    // the interval by as much.
    let keys: Vec<PublicKey<'_>> = servers.iter().map(|s| s.public_key.as_public()).collect();
    let elapsed = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut ws = ProofWorkspace::new();
    let policy = args.policy.to_policy();
    let voters = pinned_voters(&servers);
    let verdict = verify_proof_grouped(&binary, &device, &keys, &voters, elapsed, &policy, &mut ws);
    let answered = match &verdict {
        Ok(p) => p.answering_keys,
        Err(ProofError::TooFewKeys { present, .. }) => *present,
        Err(_) => electorate.voters().min(seq.order.len()),
    };
    let assumption = assumption_text(&policy, &servers, answered);
    let code = match &verdict {
        Ok(_) => Exit::Ok,
        Err(e) if e.is_malfeasance() => Exit::Malfeasance,
        Err(_) => Exit::NoAnswer,
    };
    if args.json {
        let mut out = json!({
            "written": true,
            "out": args.out.display().to_string(),
            "format": match args.format { Format::Binary => "binary", Format::Json => "json" },
            "bytes": bytes.len(),
            "answers": answered,
            "asked": seq.order.len(),
            "policy": policy_json(&policy),
            "assumption": assumption,
        });
        if let Some(lists) = &signed {
            out["server_lists"] = lists.json();
        }
        match &verdict {
            Ok(p) => out["device_would_accept"] = proven_json(p),
            Err(e) => {
                out["device_would_accept"] = json!(false);
                out["error"] = said::error_json(super::verify_proof::kind(e), e, &policy);
            }
        }
        words::print_outcome(out, code.code());
    } else {
        let to = if args.out.as_os_str() == "-" {
            "standard output".to_owned()
        } else {
            args.out.display().to_string()
        };
        eprintln!(
            "gnomon relay: {answered} answers from {} servers, {} bytes written to {to}",
            seq.order.len(),
            bytes.len()
        );
        match &verdict {
            Ok(p) => eprintln!(
                "gnomon relay: the device will accept it ({} of {} servers agree; {assumption})",
                p.agreeing_keys, p.answering_keys
            ),
            Err(e) => eprintln!(
                "gnomon relay: the device will refuse it: {} ({assumption})",
                said::describe(e, &policy)
            ),
        }
    }
    code.into()
}

/// The servers to ask, from --servers or the monitors' signed lists
/// (with what each gave); or the exit code of a list that cannot be had,
/// said.
fn read_list(args: &Args) -> Result<(Vec<Server>, Option<Lists>), ExitCode> {
    if let Some(path) = &args.servers {
        return pinned::load(path)
            .map(|s| (s, None))
            .map_err(|e| usage("relay", e));
    }
    match args.signed.load() {
        Ok(lists) => match pinned::usable(&lists.document, "the monitors' signed lists") {
            Ok(s) => Ok((s, Some(lists))),
            Err(e) => Err(usage("relay", e)),
        },
        Err(no) => Err(no.report("relay", args.json)),
    }
}

/// Writes the whole bundle or nothing: a temporary file beside the target,
/// then a rename.
fn write_out(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        return out.flush();
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
