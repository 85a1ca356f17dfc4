//! `gnomon verify-proof`: what a device does with a relay's bundle, on the
//! command line: check it offline against pinned keys and print the
//! interval it proves for now (docs/PROOF.md).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use gnomon_client::{describe_assumption, format_utc, Electorate, Server};
use gnomon_protocol::proof::{
    check_device_value, verify_proof_grouped, Proof, ProofError, ProofFormError, ProofPolicy,
    ProofWorkspace, Proven, MAX_DEVICE_VALUE, MIN_DEVICE_NONCE, PROOF_MAGIC,
};
use gnomon_protocol::PublicKey;
use serde_json::json;

use super::client_out::{parse_duration, print_json, usage, Exit};
use crate::words;

pub(crate) mod pinned;
pub(crate) mod said;

/// The exit codes of `verify-proof`, for its `--help`.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0   the bundle proves an interval for now
  1   not enough: too few keys in the bundle, too few agree, or the interval is too wide
  2   invalid bundle (wrong device value, broken chain, bad signature, unpinned key, truncated)
  3   malfeasance: the bundle proves that a server lied (the majority's interval, if any, is shown)
  64  usage error (bad arguments, unreadable input file)

Every command's codes: the EXIT STATUS section of gnomon(1).";

/// The exit codes of `relay`, for its `--help`.
pub(crate) const RELAY_EXIT_CODES: &str = "\
Exit codes:
  0   the bundle is written and proves an interval for now: the device will accept it
  1   not enough: no server answered, too few agree, or the interval is too wide
  3   malfeasance: the answers prove that a server lied (the bundle is written, as evidence)
  64  usage error (bad arguments, unreadable server list, every signed list refused or not
      downloaded)
  70  local failure (no socket, no random bytes)
  73  the bundle cannot be written

Every command's codes: the EXIT STATUS section of gnomon(1).";

/// The most `verify-proof` reads: the largest binary bundle (16 ML-DSA-44
/// answers, about 1.1 MB) as JSON, base64 and all, fits four times over.
const MAX_INPUT: u64 = 8 << 20;

/// What the device requires (`gnomon_protocol::proof::ProofPolicy`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Policy {
    /// How many of the pinned servers may lie (default: fewer than half,
    /// (n − 1)/2 of the n pinned; servers sharing a key, address or
    /// operator count once). The bundle must carry 2 × this + 1 of them,
    /// whatever the relay left out: with the default, every pinned server
    /// or all but one (docs/PROOF.md).
    #[arg(long, value_name = "F", value_parser = clap::value_parser!(u16).range(0..=16))]
    pub(crate) max_liars: Option<u16>,
    /// Distinct servers that must agree with the proven interval, beyond
    /// what --max-liars needs.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub(crate) quorum: u16,
    /// Widest interval accepted (half its width); the elapsed time widens
    /// it too. 0 accepts any width.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) max_radius: Duration,
}

impl Policy {
    pub(crate) fn to_policy(&self) -> ProofPolicy {
        ProofPolicy {
            max_liars: self.max_liars.map(usize::from),
            quorum: usize::from(self.quorum),
            max_radius_us: (!self.max_radius.is_zero())
                .then(|| u64::try_from(self.max_radius.as_micros()).unwrap_or(u64::MAX)),
        }
    }
}

/// Arguments. `--elapsed` is checked by `run`, not clap, so that its
/// absence gets a message saying what to pass; the usage line still shows
/// it required.
#[derive(Debug, clap::Args)]
#[command(
    after_help = EXIT_CODES,
    override_usage = "gnomon verify-proof [OPTIONS] --device-nonce <HEX> --servers <LIST.json> \
                      --elapsed <DURATION> <PROOF>"
)]
pub(crate) struct Args {
    /// The bundle, binary or JSON (either form `gnomon relay` writes); `-`
    /// reads standard input.
    pub(crate) proof: PathBuf,
    /// The device's own value, hex: the one it handed to the relay (16 to
    /// 64 bytes, 32 to 128 hex digits).
    #[arg(long, value_name = "HEX")]
    pub(crate) device_nonce: String,
    /// The pinned servers: a server list (RFC 10049 JSON) whose every
    /// usable entry's key is trusted; the list `relay --servers` asked.
    /// (`--keys` is the old name.)
    #[arg(long, alias = "keys", value_name = "LIST.json")]
    pub(crate) servers: PathBuf,
    /// Required: how long ago the device made its value, at most, by its
    /// own clock with its worst drift added (such as 2.5s). The interval's
    /// upper end moves up by this much, and only by this: a bundle the
    /// relay held for a while proves an interval that ends too early
    /// unless the hold is counted here. There is no default, since any
    /// default would be too short for some hold.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) elapsed: Option<Duration>,
    #[command(flatten)]
    pub(crate) policy: Policy,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// What `verify-proof` says when `--elapsed` is missing.
const ELAPSED_REQUIRED: &str = "--elapsed is required: how long ago the device made \
     its value, at most, by its own clock with its worst drift added (such as --elapsed 2.5s). \
     A bundle the relay held widens the interval only through this time; a value too small \
     gives an interval that ends before now";

/// The device value from hex: 16 to 64 bytes (the protocol's
/// `check_device_value`).
pub(crate) fn parse_device_value(hex: &str) -> Result<Vec<u8>, String> {
    let hex = hex.trim();
    if hex.is_empty() || !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(format!(
            "--device-nonce: {hex:?} is not hex (an even number of 0-9a-f digits)"
        ));
    }
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or_default())
        .collect();
    if check_device_value(&bytes).is_err() {
        return Err(if bytes.len() > MAX_DEVICE_VALUE {
            format!(
                "--device-nonce: {} bytes; at most {MAX_DEVICE_VALUE}",
                bytes.len()
            )
        } else {
            format!(
                "--device-nonce: {} bytes; at least {MIN_DEVICE_NONCE} bytes ({} hex digits) \
                 of a value the relay cannot predict (fresh random bytes: a counter or a \
                 clock reading lets a relay prepare bundles in advance)",
                bytes.len(),
                2 * MIN_DEVICE_NONCE
            )
        });
    }
    Ok(bytes)
}

pub(crate) fn policy_json(p: &ProofPolicy) -> serde_json::Value {
    json!({ "max_liars": p.max_liars, "quorum": p.quorum, "max_radius_us": p.max_radius_us })
}

/// The voter of each pinned server: servers sharing a key, address or
/// operator are one ([`Electorate`]).
pub(crate) fn pinned_voters(servers: &[Server]) -> Vec<usize> {
    let e = Electorate::of(servers);
    (0..servers.len())
        .map(|i| e.voter_of(i).unwrap_or(i))
        .collect()
}

/// The assumption a policy makes of `servers`, in words.
pub(crate) fn assumption_text(policy: &ProofPolicy, servers: &[Server], answered: usize) -> String {
    let a = policy.assumption(Electorate::of(servers).voters());
    describe_assumption(a, answered).replace("listed", "pinned")
}

pub(crate) fn proven_json(p: &Proven) -> serde_json::Value {
    json!({
        "earliest_unix_us": i64::try_from(p.earliest_us).ok(),
        "latest_unix_us": i64::try_from(p.latest_us).ok(),
        "earliest": utc(p.earliest_us),
        "latest": utc(p.latest_us),
        "radius_us": i64::try_from(p.radius_us()).ok(),
        "agreeing_keys": p.agreeing_keys,
        "answering_keys": p.answering_keys,
        "max_liars": p.assumption.liars,
        "pinned": p.assumption.voters,
    })
}

fn utc(us: i128) -> String {
    u64::try_from(us).map_or_else(|_| format!("{us} µs"), format_utc)
}

/// A short machine name for each refusal (the JSON's `kind`).
pub(crate) fn kind(e: &ProofError) -> &'static str {
    match e {
        ProofError::Truncated => "truncated",
        ProofError::Malformed(_) | ProofError::UnknownFormat(_) => "malformed",
        ProofError::DeviceValueLength(_) => "device_value_length",
        ProofError::WrongNonce => "wrong_nonce",
        ProofError::Binding => "binding",
        ProofError::UnknownKey(_) => "unknown_key",
        ProofError::Signature(_) => "signature",
        ProofError::NotForRequest(_) => "not_for_request",
        ProofError::Response(..) => "response",
        ProofError::Link(_) => "link",
        ProofError::Contradiction { .. } => "contradiction",
        ProofError::Liar { .. } => "liar",
        ProofError::TooFewKeys { .. } => "too_few_keys",
        ProofError::NoQuorum { .. } => "no_quorum",
        ProofError::TooWide { .. } => "too_wide",
        _ => "other",
    }
}

fn exit_for(e: &ProofError) -> Exit {
    match e {
        _ if e.is_malfeasance() => Exit::Malfeasance,
        ProofError::TooFewKeys { .. }
        | ProofError::NoQuorum { .. }
        | ProofError::TooWide { .. } => Exit::NoAnswer,
        _ => Exit::Invalid,
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let Some(elapsed) = args.elapsed else {
        return usage("verify-proof", ELAPSED_REQUIRED);
    };
    let device = match parse_device_value(&args.device_nonce) {
        Ok(d) => d,
        Err(e) => return usage("verify-proof", e),
    };
    // A bundle is at most about 1 MB in binary and a few times that in
    // JSON: read no further, so `verify-proof /dev/zero` (or an endless
    // stdin) is refused instead of filling memory.
    let opened: std::io::Result<Box<dyn Read>> = if args.proof.as_os_str() == "-" {
        Ok(Box::new(std::io::stdin()))
    } else {
        std::fs::File::open(&args.proof).map(|f| Box::new(f) as Box<dyn Read>)
    };
    let mut raw = Vec::new();
    if let Err(e) = opened.and_then(|r| r.take(MAX_INPUT + 1).read_to_end(&mut raw)) {
        let what = if args.proof.as_os_str() == "-" {
            "standard input".to_owned()
        } else {
            args.proof.display().to_string()
        };
        return usage(
            "verify-proof",
            format!("cannot read the bundle {what}: {}", words::io(&e)),
        );
    }
    if raw.len() as u64 > MAX_INPUT {
        let msg = format!(
            "{}: larger than any bundle (over {MAX_INPUT} bytes)",
            args.proof.display()
        );
        if args.json {
            print_json(&json!({ "valid": false,
                "error": { "kind": "malformed", "message": msg },
                "exit_code": Exit::Invalid.code() }));
        } else {
            eprintln!("gnomon verify-proof: {msg}");
        }
        return Exit::Invalid.into();
    }
    let servers = match pinned::load(&args.servers) {
        Ok(s) => s,
        Err(e) => return usage("verify-proof", e),
    };
    let keys: Vec<PublicKey<'_>> = servers.iter().map(|s| s.public_key.as_public()).collect();
    let policy = args.policy.to_policy();
    let elapsed = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    // The JSON form is read into the binary one, which the device's
    // verifier takes; anything not starting with the magic is tried as JSON.
    let binary = if raw.starts_with(&PROOF_MAGIC) {
        Ok(raw)
    } else {
        Proof::from_json(&raw).map(|p| p.to_binary())
    };
    let voters = pinned_voters(&servers);
    let verdict = match binary {
        Ok(b) => {
            let mut ws = ProofWorkspace::new();
            Ok(verify_proof_grouped(
                &b, &device, &keys, &voters, elapsed, &policy, &mut ws,
            ))
        }
        // The JSON form's D out of bounds: the binary form's refusal.
        Err(ProofFormError::DeviceLength(n)) => Ok(Err(ProofError::DeviceValueLength(n))),
        Err(e) => Err(format!(
            "{}: not a proof bundle (neither the binary form nor JSON): {}",
            args.proof.display(),
            said::describe_form(&e)
        )),
    };
    let answered = match &verdict {
        Ok(Ok(p)) => p.answering_keys,
        Ok(Err(ProofError::TooFewKeys { present, .. })) => *present,
        _ => 0,
    };
    let assumption = assumption_text(&policy, &servers, answered);
    let (code, out) = match &verdict {
        Err(msg) => (
            Exit::Invalid,
            json!({ "valid": false, "error": { "kind": "malformed", "message": msg } }),
        ),
        Ok(Ok(p)) => {
            let mut out = proven_json(p);
            out["valid"] = json!(true);
            (Exit::Ok, out)
        }
        Ok(Err(e)) => {
            let mut out = json!({ "valid": false, "error": said::error_json(kind(e), e, &policy) });
            if let ProofError::Liar { majority, .. } | ProofError::Contradiction { majority, .. } =
                e
            {
                out["majority"] = majority.as_ref().map_or(json!(null), proven_json);
            }
            (exit_for(e), out)
        }
    };
    if args.json {
        let mut out = out;
        out["policy"] = policy_json(&policy);
        out["assumption"] = json!(assumption);
        out["elapsed_us"] = json!(elapsed);
        words::print_outcome(out, code.code());
    } else {
        match &verdict {
            Ok(Ok(p)) => println!(
                "now is between {} and {} (±{:.3} s); {} of {} servers agree; {assumption}",
                utc(p.earliest_us),
                utc(p.latest_us),
                p.radius_us() as f64 / 1e6,
                p.agreeing_keys,
                p.answering_keys
            ),
            Ok(Err(e)) => {
                eprintln!(
                    "gnomon verify-proof: {} ({assumption})",
                    said::describe(e, &policy)
                );
                if let ProofError::Liar {
                    majority: Some(p), ..
                }
                | ProofError::Contradiction {
                    majority: Some(p), ..
                } = e
                {
                    eprintln!(
                        "gnomon verify-proof: the other servers still prove {} .. {}",
                        utc(p.earliest_us),
                        utc(p.latest_us)
                    );
                }
            }
            Err(msg) => eprintln!("gnomon verify-proof: {msg}"),
        }
    }
    code.into()
}
