//! `gnomon health`: ask a running server's `/health` endpoint whether it is
//! healthy, for a container's HEALTHCHECK or any supervisor that runs a
//! command. A scratch image has no curl; this is the same check in the one
//! binary the image holds.
//!
//! Exit status 0 when the endpoint answers 200, 1 otherwise (a 503 with the
//! server's reason, another status, a refused or timed-out connection), as
//! Docker's and Podman's HEALTHCHECK expect. The reason is one line on
//! stderr; whatever the endpoint sends is cut to that line and to printable
//! characters, since the URL may point anywhere.

use std::process::ExitCode;
use std::time::Duration;

use super::client_out::parse_duration;

/// The default metrics address of deploy/gnomon.toml.
pub(crate) const DEFAULT_URL: &str = "http://127.0.0.1:9319/health";

/// Longest reason printed, characters.
const MAX_REASON: usize = 200;
/// Most of the answer's body read.
const MAX_BODY: u64 = 4096;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The server's health endpoint (its `metrics` address and /health).
    #[arg(long, value_name = "URL", default_value = DEFAULT_URL)]
    url: String,
    /// Give up after this long, connecting and reading included.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_timeout)]
    timeout: Duration,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() || d > Duration::from_secs(60) {
        return Err(format!("`{s}` is outside 1ms..=60s"));
    }
    Ok(d)
}

pub(crate) fn run(args: Args) -> ExitCode {
    match check(&args) {
        Ok(()) => {
            println!("healthy");
            ExitCode::SUCCESS
        }
        Err(reason) => {
            eprintln!("gnomon health: {}: {reason}", args.url);
            ExitCode::from(crate::exit::NO_ANSWER)
        }
    }
}

fn check(args: &Args) -> Result<(), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(args.timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        // A container's HTTP_PROXY must not send the probe elsewhere.
        .proxy(None)
        .build()
        .into();
    let mut answer = agent
        .get(&args.url)
        .call()
        .map_err(|e| one_line(&e.to_string()))?;
    let status = answer.status().as_u16();
    if status == 200 {
        return Ok(());
    }
    let body = answer
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .unwrap_or_default();
    let body = one_line(&body);
    Err(if body.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {body}")
    })
}

/// The first line of `text`, printable characters only, at most
/// `MAX_REASON` of them.
fn one_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_REASON)
        .collect::<String>()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_one_printable_line() {
        assert_eq!(one_line("not answering\nsecond"), "not answering");
        assert_eq!(one_line("a\x1b[31mb\r"), "a[31mb");
        assert_eq!(one_line(&"x".repeat(1000)).len(), MAX_REASON);
        assert_eq!(one_line(""), "");
    }

    #[test]
    fn timeouts_are_bounded() {
        assert!(parse_timeout("0s").is_err());
        assert!(parse_timeout("2m").is_err());
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
    }
}
