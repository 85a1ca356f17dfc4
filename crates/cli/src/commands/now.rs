//! `gnomon now`: ask the running `gnomon sync` what time it is proven to
//! be, over its now socket (docs/NOW.md), for a script or a person.
//!
//! Exit status: 0 when an interval is known (with `--at-least`: when it
//! is proven that now is no earlier than TIME, which a floor can prove
//! too); 1 when there is no proof of now (sync has only a floor or
//! nothing, or does not answer); 3 when the last round and the floor
//! contradict each other (whatever `--at-least` asks: nothing is proven
//! then); 4 when `--at-least` TIME is not proven.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use gnomon_client::format_utc;
use gnomon_sync::config::{DurationText, DEFAULT_NOW_SOCKET};
use serde_json::{json, Value};

use crate::exit;
use crate::words;

/// Longest answer read: the answer names a round's servers, a few KiB at
/// most.
const MAX_ANSWER: u64 = 64 * 1024;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The socket `gnomon sync --now-socket` answers on.
    #[arg(long, env = "GNOMON_NOW_SOCKET", value_name = "PATH", default_value = DEFAULT_NOW_SOCKET)]
    socket: PathBuf,
    /// Exit 0 only when it is proven that the time now is no earlier than
    /// TIME (Unix seconds, or YYYY-MM-DDTHH:MM:SSZ); 4 when it is not.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    at_least: Option<i64>,
    /// One JSON object: sync's answer and the exit code.
    #[arg(long)]
    json: bool,
    /// Give up on sync after this long.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_timeout)]
    timeout: Duration,
}

/// Unix seconds or `YYYY-MM-DDTHH:MM:SSZ`, as Unix µs.
fn parse_time(s: &str) -> Result<i64, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<i64>() {
        return secs
            .checked_mul(1_000_000)
            .ok_or_else(|| format!("`{s}` is out of range"));
    }
    gnomon_server::offline::parse_utc(t)
        .and_then(|us| i64::try_from(us).ok())
        .ok_or_else(|| format!("`{s}` is neither Unix seconds nor YYYY-MM-DDTHH:MM:SSZ"))
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = super::client_out::parse_duration(s)?;
    if d.is_zero() || d > Duration::from_secs(60) {
        return Err(format!("`{s}` is outside 1ms..=60s"));
    }
    Ok(d)
}

pub(crate) fn run(args: Args) -> ExitCode {
    let answer = match ask(&args) {
        Ok(a) => a,
        Err((kind, msg)) => {
            if args.json {
                words::print_error(kind, &msg, exit::NO_ANSWER);
            } else {
                eprintln!("gnomon now: {msg}");
            }
            return ExitCode::from(exit::NO_ANSWER);
        }
    };
    let known = answer["known"].as_str().unwrap_or("none");
    let code = match args.at_least {
        // Two proofs that disagree prove nothing, TIME included.
        _ if known == "contradiction" => exit::MALFEASANCE,
        Some(_) if answer["at_least_proven"] == true => exit::OK,
        Some(_) => exit::OUTSIDE,
        None if known == "interval" => exit::OK,
        None => exit::NO_ANSWER,
    };
    if args.json {
        let mut out = answer.clone();
        out["exit_code"] = json!(code);
        println!("{out}");
    } else {
        print!("{}", human(&answer, args.at_least));
    }
    ExitCode::from(code)
}

/// One request, one answer line; `Err` is the error's kind and sentence.
fn ask(args: &Args) -> Result<Value, (&'static str, String)> {
    let path = args.socket.display();
    let mut s = UnixStream::connect(&args.socket).map_err(|e| not_connected(args, &e))?;
    let no_answer = |e: std::io::Error| {
        (
            "no_answer",
            format!(
                "no answer from gnomon sync on {path}: {} (the limit is --timeout {})",
                words::io(&e),
                DurationText(args.timeout)
            ),
        )
    };
    s.set_read_timeout(Some(args.timeout))
        .and_then(|()| s.set_write_timeout(Some(args.timeout)))
        .map_err(no_answer)?;
    let request = match args.at_least {
        Some(t) => json!({ "at-least": t }),
        None => json!({}),
    };
    s.write_all(format!("{request}\n").as_bytes())
        .map_err(no_answer)?;
    let mut line = String::new();
    BufReader::new(s.take(MAX_ANSWER))
        .read_line(&mut line)
        .map_err(no_answer)?;
    let bad = |why: String| {
        (
            "bad_answer",
            format!("gnomon sync on {path} answered {why}"),
        )
    };
    let v: Value = serde_json::from_str(line.trim()).map_err(|_| {
        bad(if line.trim().is_empty() {
            "nothing (it closed the connection)".into()
        } else {
            "something that is not a JSON object: is another program listening there?".into()
        })
    })?;
    if let Some(e) = v.get("error") {
        return Err(bad(format!(
            "with an error: {}",
            e.as_str().unwrap_or("(no words)")
        )));
    }
    Ok(v)
}

/// Why nothing could be asked on the socket, and what to do: a missing
/// socket or one nobody listens on is a sync that is not running (it
/// removes its socket when it stops; a killed one leaves it behind).
fn not_connected(args: &Args, e: &std::io::Error) -> (&'static str, String) {
    use std::io::ErrorKind as K;
    let path = args.socket.display();
    let start = format!(
        "start it (systemctl start gnomon-sync, or gnomon sync --servers LIST.json \
         --now-socket {path}); if it runs with another --now-socket, give that path \
         with --socket or GNOMON_NOW_SOCKET"
    );
    match e.kind() {
        K::NotFound => (
            "not_running",
            format!("gnomon sync is not running: there is no socket at {path}; {start}"),
        ),
        K::ConnectionRefused => (
            "not_running",
            format!(
                "gnomon sync is not running: nothing answers on the socket {path} (left \
                 behind by a sync that did not stop cleanly); {start}"
            ),
        ),
        K::PermissionDenied => (
            "permission",
            format!(
                "permission denied on the socket {path}: ask as a member of its group \
                 (now-socket-group) or as sync's own user, or widen now-socket-mode"
            ),
        ),
        _ => (
            "no_answer",
            format!("cannot connect to gnomon sync on {path}: {}", words::io(e)),
        ),
    }
}

fn utc(v: &Value) -> String {
    match v.as_i64() {
        Some(us) if us >= 0 => format_utc(us as u64),
        Some(us) => format!("{us} µs"),
        None => "-".into(),
    }
}

fn human(a: &Value, at_least: Option<i64>) -> String {
    let mut o = String::new();
    let (lo, hi) = (&a["earliest_unix_us"], &a["latest_unix_us"]);
    match a["known"].as_str() {
        Some("interval") => {
            let w = hi.as_i64().unwrap_or(0) - lo.as_i64().unwrap_or(0);
            o.push_str(&format!(
                "now          between {} and {} (width {:.6} s)\n",
                utc(lo),
                utc(hi),
                w as f64 / 1e6
            ));
            let s = &a["source"];
            o.push_str(&format!(
                "proven by    round {} of gnomon sync ({}), {:.1} s ago, drift bound {} ppm\n",
                s["round"],
                servers(s).join(", "),
                s["age_s"].as_f64().unwrap_or(0.0),
                a["drift_ppm"]
            ));
            if let Some(why) = s["assumption"].as_str() {
                o.push_str(&format!("assumption   {why}\n"));
            }
        }
        Some("floor") => o.push_str(&format!(
            "now          no earlier than {} (the floor; no proof of the time now since sync \
             started: no upper bound until its next good round)\n",
            utc(lo)
        )),
        Some("contradiction") => {
            let s = &a["source"];
            o.push_str(&format!(
                "now          CONTRADICTION: round {} of gnomon sync ({}) puts the time between \
                 {} and {}, wholly before the floor {}\n",
                s["round"],
                servers(s).join(", "),
                utc(lo),
                utc(hi),
                utc(&a["floor_unix_us"])
            ));
            o.push_str(
                "             one of the two is wrong (a floor planted or proven by liars, liars \
                 in the round, or a clock off by more than its drift bound): nothing is proven; \
                 if the floor is wrong, gnomon sync --clear-floor removes it (docs/NOW.md)\n",
            );
        }
        _ => o.push_str("now          no proof: gnomon sync has not proven the time yet\n"),
    }
    if let Some(line) = floor_line(a) {
        o.push_str(&line);
    }
    let inside = match a["wall_clock_inside"].as_bool() {
        Some(true) => "inside",
        Some(false) => "OUTSIDE",
        None => "nothing to compare with",
    };
    o.push_str(&format!(
        "wall clock   {} ({inside})\n",
        utc(&a["wall_clock_unix_us"])
    ));
    if let Some(t) = at_least {
        let proven = a["at_least_proven"] == true;
        o.push_str(&format!(
            "at least     {}: {}\n",
            format_utc(t.max(0) as u64),
            if proven { "proven" } else { "NOT proven" }
        ));
    }
    o
}

fn servers(source: &Value) -> Vec<&str> {
    source["servers"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The floor and how old it is: a floor proves only that the time is past
/// the moment it was proven, which may be long ago.
fn floor_line(a: &Value) -> Option<String> {
    let f = &a["floor_unix_us"];
    f.as_i64()?;
    let p = &a["floor_proven_unix_us"];
    let when = match (p.is_i64(), a["floor_age_s"].as_f64()) {
        (true, Some(age)) => format!(", proven at {} ({} ago)", utc(p), ago(age)),
        (false, Some(age)) => format!(", proven {} ago", ago(age)),
        (true, None) => format!(", proven at {}", utc(p)),
        (false, None) => ", proven at a time not recorded (an older state file)".into(),
    };
    Some(format!("floor        {}{when}\n", utc(f)))
}

/// Seconds in the largest unit that keeps a number of them readable.
fn ago(s: f64) -> String {
    let a = s.abs();
    let (v, unit) = if a < 120.0 {
        (s, "s")
    } else if a < 7200.0 {
        (s / 60.0, "min")
    } else if a < 172_800.0 {
        (s / 3600.0, "h")
    } else {
        (s / 86_400.0, "d")
    };
    format!("{v:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_seconds_or_utc() {
        assert_eq!(parse_time("1800000000"), Ok(1_800_000_000_000_000));
        assert_eq!(parse_time("1970-01-01T00:01:00Z"), Ok(60_000_000));
        assert!(parse_time("yesterday").is_err());
    }

    /// The attack of issue 33: an honest round below a poisoned floor.
    /// It reads as a contradiction, naming both, with the floor's age.
    #[test]
    fn a_contradiction_names_the_round_and_the_floor() {
        let a = json!({
            "known": "contradiction",
            "earliest_unix_us": 1_800_000_000_000_000i64,
            "latest_unix_us": 1_800_000_002_000_000i64,
            "source": {"round": 4, "servers": ["a", "b"], "age_s": 1.0},
            "floor_unix_us": 1_800_003_600_000_000i64,
            "floor_proven_unix_us": 1_800_003_600_000_000i64,
            "floor_age_s": 90_000.0,
            "wall_clock_unix_us": 1_800_000_001_000_000i64,
        });
        let text = human(&a, None);
        assert!(
            text.contains("CONTRADICTION: round 4 of gnomon sync (a, b)"),
            "{text}"
        );
        assert!(
            text.contains("wholly before the floor 2027-01-15T09:00:00"),
            "{text}"
        );
        assert!(text.contains("--clear-floor"), "{text}");
        assert!(text.contains("floor        2027-01-15T09:00:00"), "{text}");
        assert!(text.contains("(25.0 h ago)"), "{text}");
        assert_eq!(ago(42.0), "42.0 s");
        assert_eq!(ago(3600.0), "60.0 min");
        assert_eq!(ago(200_000.0), "2.3 d");
    }
}
