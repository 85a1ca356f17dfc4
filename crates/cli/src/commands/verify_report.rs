//! `gnomon verify-report`: check a malfeasance report offline, every
//! signature and chained nonce, and name the answers that contradict.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine;
use gnomon_client::format_utc;
use gnomon_client::report_check::{check_json, link_status, parse_verifiable, response_status};
use gnomon_protocol::report::ReportCheck;
use gnomon_protocol::Report;
use serde_json::json;

use super::client_out::{usage, Exit};
use crate::words;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The report (RFC 10049 malfeasance-report JSON); `-` reads standard input.
    pub(crate) file: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let raw = if args.file.as_os_str() == "-" {
        let mut v = Vec::new();
        match std::io::stdin().read_to_end(&mut v) {
            Ok(_) => v,
            Err(e) => {
                return usage(
                    "verify-report",
                    format!(
                        "cannot read the report from standard input: {}",
                        words::io(&e)
                    ),
                )
            }
        }
    } else {
        match std::fs::read(&args.file) {
            Ok(v) => v,
            Err(e) => {
                return usage(
                    "verify-report",
                    format!(
                        "cannot read the report {}: {}",
                        args.file.display(),
                        words::io(&e)
                    ),
                )
            }
        }
    };
    let named = if args.file.as_os_str() == "-" {
        "standard input".to_owned()
    } else {
        args.file.display().to_string()
    };
    let fail = |msg: String| -> ExitCode {
        let msg = format!("{named}: {msg}");
        if args.json {
            words::print_outcome(
                json!({ "valid": false, "error": { "kind": "invalid", "message": msg } }),
                Exit::Invalid.code(),
            );
        } else {
            eprintln!("gnomon verify-report: {msg}");
        }
        Exit::Invalid.into()
    };
    let report = match parse_verifiable(&raw) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    // No response, no claim: "valid" would read as a verified report.
    if report.entries.is_empty() {
        return fail("the report has no responses, so it proves nothing".into());
    }
    let check = report.verify();
    let code = if check.is_proof_of_malfeasance() {
        Exit::Malfeasance
    } else if check.all_valid() {
        Exit::Ok
    } else {
        Exit::Invalid
    };
    if args.json {
        let mut v = check_json(&report, &check);
        // `index`, `earlier` and `later` count the responses from 1, as the
        // text does.
        v["numbered_from"] = json!(1);
        words::print_outcome(v, code.code());
    } else {
        print_report(&args.file.display().to_string(), &report, &check);
    }
    code.into()
}

fn key_label(key: &[u8]) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(key);
    let short = b.chars().take(12).collect::<String>() + "…";
    // Ed25519 keys, the usual case, go unlabelled.
    match gnomon_protocol::Scheme::by_public_len(key.len()) {
        Some(s) if s != gnomon_protocol::Scheme::Ed25519 => format!("{} {short}", s.name()),
        _ => short,
    }
}

fn print_report(file: &str, report: &Report, check: &ReportCheck) {
    println!("report  {file}: {} responses", report.entries.len());
    println!(
        "{:>2}  {:<14}  {:<10}  {:<27}  {:>10}  {:<10}  response",
        "#", "key", "version", "time (UTC)", "radius", "chain"
    );
    for (i, (e, o)) in report.entries.iter().zip(&check.entries).enumerate() {
        let (version, time, radius) = match &o.response {
            Ok(v) => (
                v.profile.name.to_string(),
                format_utc(v.midpoint_us),
                format!("±{:.3} s", v.radius_us as f64 / 1e6),
            ),
            Err(_) => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:>2}  {:<14}  {:<10}  {:<27}  {:>10}  {:<10}  {}",
            i + 1,
            key_label(&e.public_key),
            version,
            time,
            radius,
            link_status(&o.link),
            response_status(&o.response)
        );
    }
    for &(i, j) in &check.contradictions {
        let (Ok(a), Ok(b)) = (&check.entries[i].response, &check.entries[j].response) else {
            continue;
        };
        println!(
            "contradiction  {} (key {}) says at least {}; the later {} (key {}) says at most {}",
            i + 1,
            key_label(&report.entries[i].public_key),
            format_utc(a.earliest_us().max(0) as u64),
            j + 1,
            key_label(&report.entries[j].public_key),
            format_utc(b.latest_us().max(0) as u64),
        );
    }
    let verdict = if check.is_proof_of_malfeasance() {
        format!(
            "PROOF OF MALFEASANCE: every signature and chain link holds, and {} pair(s) contradict \
             (one signer of each pair lied; the report alone does not say which)",
            check.contradictions.len()
        )
    } else if check.all_valid() {
        "valid, and no pair contradicts: no malfeasance shown".into()
    } else {
        "INVALID: a signature or chain link fails, so the report proves nothing".into()
    };
    println!("verdict  {verdict}");
}
