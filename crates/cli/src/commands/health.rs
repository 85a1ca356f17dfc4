//! `gnomon health`: ask a running server's `/health` endpoint whether it is
//! healthy, for a container's HEALTHCHECK or any supervisor that runs a
//! command. A scratch image has no curl; this is the same check in the one
//! binary the image holds.
//!
//! Exit status 0 when the endpoint answers 200, 1 otherwise (a 503 with the
//! server's reason, another status, a refused or timed-out connection), as
//! Docker's and Podman's HEALTHCHECK expect; 64 for a URL that cannot be
//! asked at all (no scheme, not HTTP), which no waiting would make healthy. The reason is one line on
//! stderr; whatever the endpoint sends is cut to that line and to printable
//! characters, since the URL may point anywhere.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use super::client_out::parse_duration;
use crate::exit::{NO_ANSWER, OK, USAGE};
use crate::words;

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
    /// Print one JSON object (healthy or not, the HTTP status, the reason,
    /// exit_code) instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() || d > Duration::from_secs(60) {
        return Err(format!("`{s}` is outside 1ms..=60s"));
    }
    Ok(d)
}

/// Why the check did not say healthy.
#[derive(Debug, PartialEq, Eq)]
enum Unhealthy {
    /// The URL cannot be asked at all: a usage error.
    BadUrl(String),
    /// Nothing answered at the URL (refused, timed out, not HTTP).
    Unreachable(String),
    /// An answer other than 200: its status and the server's reason.
    Status(u16, String),
}

pub(crate) fn run(args: Args) -> ExitCode {
    let outcome = check_url(&args.url).and_then(|()| check(&args));
    let code = match &outcome {
        Ok(()) => OK,
        Err(Unhealthy::BadUrl(_)) => USAGE,
        Err(_) => NO_ANSWER,
    };
    if args.json {
        let mut v = json!({ "url": args.url, "healthy": outcome.is_ok() });
        match &outcome {
            Ok(()) => v["status"] = json!(200),
            Err(Unhealthy::BadUrl(why)) => {
                v["error"] = json!({ "kind": "usage", "message": why });
            }
            Err(Unhealthy::Unreachable(why)) => {
                v["error"] = json!({ "kind": "unreachable", "message": why });
            }
            Err(Unhealthy::Status(status, reason)) => {
                v["status"] = json!(status);
                v["reason"] = json!(reason);
            }
        }
        words::print_outcome(v, code);
    } else {
        match &outcome {
            Ok(()) => println!("healthy"),
            Err(Unhealthy::BadUrl(why) | Unhealthy::Unreachable(why)) => {
                eprintln!("gnomon health: {why}");
            }
            Err(Unhealthy::Status(status, reason)) if reason.is_empty() => {
                eprintln!("gnomon health: {}: HTTP {status}", args.url);
            }
            Err(Unhealthy::Status(status, reason)) => {
                eprintln!("gnomon health: {}: HTTP {status}: {reason}", args.url);
            }
        }
    }
    ExitCode::from(code)
}

/// Whether `url` is one this check can ask: `http://HOST[:PORT]/PATH`
/// (the metrics endpoint speaks plain HTTP).
fn check_url(url: &str) -> Result<(), Unhealthy> {
    let bad = |why: String| Err(Unhealthy::BadUrl(format!("--url {url}: {why}")));
    let Some((scheme, rest)) = url.split_once("://") else {
        return bad(format!(
            "not a URL: it has no scheme; write http://{}",
            url.trim_start_matches('/')
        ));
    };
    if scheme.eq_ignore_ascii_case("https") {
        return bad(
            "the health endpoint speaks plain HTTP (the metrics address has no TLS): \
             write http://"
                .into(),
        );
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return bad(format!(
            "`{scheme}://` is not HTTP; write http://HOST:PORT/health"
        ));
    }
    if rest.is_empty() || rest.starts_with('/') {
        return bad("it names no host; write http://HOST:PORT/health".into());
    }
    if url.parse::<ureq::http::Uri>().is_err() {
        return bad(format!(
            "not a valid URL (a space or another character a URL cannot hold?); \
             write it like {DEFAULT_URL}"
        ));
    }
    Ok(())
}

fn check(args: &Args) -> Result<(), Unhealthy> {
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
        .map_err(|e| Unhealthy::Unreachable(unreachable(&args.url, args.timeout, &e)))?;
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
    Err(Unhealthy::Status(status, one_line(&body)))
}

/// Why nothing healthy came back from `url`, in words: the HTTP
/// library's own text names neither the URL nor what to do.
fn unreachable(url: &str, timeout: Duration, e: &ureq::Error) -> String {
    let why = match e {
        ureq::Error::Io(io) => words::io(io),
        ureq::Error::Timeout(_) => {
            format!("no answer within {} s (--timeout)", timeout.as_secs_f64())
        }
        ureq::Error::HostNotFound => "the host name does not resolve".into(),
        ureq::Error::ConnectionFailed => "the connection could not be made".into(),
        ureq::Error::Protocol(_) => "what answered is not an HTTP server".into(),
        ureq::Error::BadUri(_) | ureq::Error::Http(_) => "not a URL that can be asked".into(),
        ureq::Error::LargeResponseHeader(..) => "the answer's headers are too large".into(),
        other => words::strip_os_error(&one_line(&other.to_string())),
    };
    format!("{url}: unreachable: {why}")
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
