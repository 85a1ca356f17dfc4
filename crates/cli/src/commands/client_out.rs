//! Exit codes and small helpers shared by the client commands (`query`,
//! `verify-report`, `inspect`).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gnomon_client::QueryError;
use gnomon_protocol::Profile;

/// Exit codes of the client commands. They are distinct so scripts can
/// tell "the server is down" from "the server lied".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: an answer verified (query), the report is valid and shows no
    /// contradiction (verify-report), the input decoded (inspect).
    Ok = crate::exit::OK as isize,
    /// 1: no answer, or too few answers for a consensus.
    NoAnswer = crate::exit::NO_ANSWER as isize,
    /// 2: an answer, report or input that fails verification or parsing.
    Invalid = crate::exit::INVALID as isize,
    /// 3: malfeasance: a contradiction in the chain or a server outside the
    /// consensus (query); a report that proves one (verify-report).
    Malfeasance = crate::exit::MALFEASANCE as isize,
    /// 64: bad arguments or an unreadable input file (EX_USAGE).
    Usage = crate::exit::USAGE as isize,
    /// 70: a local failure: no socket, no random bytes (EX_SOFTWARE).
    Local = crate::exit::SOFTWARE as isize,
    /// 73: an output file cannot be written (EX_CANTCREAT).
    CantCreate = crate::exit::CANT_CREATE as isize,
}

impl Exit {
    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// The exit-code table, for `--help` of every client command.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0   success
  1   no answer (timeouts, unreachable or closed port, too few answers for a consensus)
  2   invalid answer (bad signature, malformed, truncated or garbage response; invalid report or input)
  3   malfeasance detected (contradicting answers, a server outside the consensus, a report that proves a lie)
  64  usage error (bad arguments, unreadable input file, no server list to use: none
      readable, or every signed one refused or not downloaded)
  70  local failure (no socket, no random bytes)
  73  an output file cannot be written (--save-request, --save-response, --report-out)

Every command's codes: the EXIT STATUS section of gnomon(1).";

/// The exit code for a failed query.
pub(crate) fn exit_for(e: &QueryError) -> Exit {
    match e {
        QueryError::Invalid { .. } => Exit::Invalid,
        QueryError::Local(_) => Exit::Local,
        _ => Exit::NoAnswer,
    }
}

/// A short machine name for a failed query.
pub(crate) fn error_kind(e: &QueryError) -> &'static str {
    match e {
        QueryError::Resolve { .. } => "resolve",
        QueryError::NoAnswer { .. } => "no_answer",
        QueryError::Invalid { .. } => "invalid",
        QueryError::Local(_) => "local",
        _ => "error",
    }
}

/// Set when `--json` is on the command line: usage errors then print
/// their JSON object too. A global because the parse that failed cannot
/// say whether it had seen the flag, and every command reports usage
/// errors through [`usage`].
static JSON_ERRORS: AtomicBool = AtomicBool::new(false);

/// Usage errors print a JSON object from now on.
pub(crate) fn json_errors() {
    JSON_ERRORS.store(true, Ordering::Relaxed);
}

/// Print a usage problem and return 64: on stderr for people, and as one
/// JSON object on stdout under `--json`, which promises one for every
/// outcome.
pub(crate) fn usage(command: &str, msg: impl std::fmt::Display) -> ExitCode {
    let msg = msg.to_string();
    eprintln!("gnomon {command}: {msg}");
    usage_json(&msg);
    Exit::Usage.into()
}

/// The JSON object of a usage error, when `--json` was given.
pub(crate) fn usage_json(msg: &str) {
    if JSON_ERRORS.load(Ordering::Relaxed) {
        print_json(&serde_json::json!({
            "error": { "kind": "usage", "message": msg.trim() },
            "exit_code": Exit::Usage.code(),
        }));
    }
}

/// Durations as `250ms`, `1.5s`, `2m` or a plain number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 0.001)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (try 500ms, 1.5s, 2m)"))?;
    if !v.is_finite() || v < 0.0 || v * scale > 86_400.0 {
        return Err(format!("`{s}` is out of range (0 to 24 h)"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// A protocol version by name or number, for clap: every `--protocol`
/// (query, bench load) reads it this way.
pub(crate) fn parse_profile(s: &str) -> Result<&'static Profile, String> {
    if let Some(p) = Profile::by_name(s) {
        return Ok(p);
    }
    let lower = s.trim().to_ascii_lowercase();
    if ["draft-00", "draft-0", "draft00", "draft0"].contains(&lower.as_str()) {
        return Err(format!(
            "`{s}`: draft 00 put no version number on the wire and cannot be told from \
             Google's protocol; use `google`"
        ));
    }
    let names: Vec<&str> = gnomon_protocol::PROFILES
        .iter()
        .filter(|p| p.drafts.is_none())
        .map(|p| p.name)
        .collect();
    Err(format!(
        "unknown version `{s}`; use a number (1, 0x8000000b, 3000600613), a draft \
         (draft-01 … draft-{:02}) or one of: {}",
        gnomon_protocol::profile::LAST_DRAFT,
        names.join(", ")
    ))
}

/// A profile as `query` prints it: `rfc-10049 (1)`, `draft-07
/// (0x80000007)`, and for a format several drafts share, the range too:
/// `draft-14 (drafts 14–19; 0x8000000c)`.
pub(crate) fn version_label(p: &Profile) -> String {
    match p.shared_drafts() {
        Some(range) => format!("{} ({range}; {})", p.name, p.version),
        None => format!("{} ({})", p.name, p.version),
    }
}

/// What `query` says when it is given neither a server nor a list.
pub(crate) const NO_SERVER_GIVEN: &str = "give a server (gnomon query HOST[:PORT] --key KEY) \
     or a server list (gnomon query --servers LIST.json, or a monitor's signed one: gnomon \
     query --servers-url URL --servers-key KEY)";

/// A switch every command spells the same way, `--report[=on|off]`: bare
/// it is on, and it takes the words of [`crate::words::switch`] (`off`,
/// `false`, `no`, `0`, …) as its value. In a clap derive:
///
/// ```text
/// #[arg(long, value_name = SWITCH_VALUES, num_args = 0..=1,
///       default_missing_value = SWITCH_ON, default_value = SWITCH_OFF,
///       value_parser = words::switch)]
/// report: bool,
/// ```
///
/// (or `Option<bool>` without `default_value`, where a config file or an
/// environment variable may decide when the flag is absent).
pub(crate) const SWITCH_VALUES: &str = "on|off";
/// The value a bare switch flag takes.
pub(crate) const SWITCH_ON: &str = "on";
/// The value of a switch flag that is not given.
pub(crate) const SWITCH_OFF: &str = "off";

/// Why an output file could not be written, naming it: `cannot write the
/// report to out/r.json: permission denied`. Every output flag exits
/// [`Exit::CantCreate`] (73) with it.
pub(crate) fn cannot_write(what: &str, path: &std::path::Path, e: &std::io::Error) -> String {
    format!(
        "cannot write {what} to {}: {}",
        path.display(),
        crate::words::io(e)
    )
}

/// Microseconds as milliseconds with three decimals.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Print one JSON object on stdout.
pub(crate) fn print_json(v: &serde_json::Value) {
    println!("{v}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("2d").is_err());
    }

    #[test]
    fn exit_codes_are_distinct_and_documented() {
        let all = [
            Exit::Ok,
            Exit::NoAnswer,
            Exit::Invalid,
            Exit::Malfeasance,
            Exit::Usage,
            Exit::Local,
            Exit::CantCreate,
        ];
        for (i, a) in all.iter().enumerate() {
            assert!(EXIT_CODES.contains(&format!("  {:<3} ", a.code())), "{a:?}");
            // gnomon(1) and docs/EXIT-CODES.md print the one table: each
            // code a client command returns has its row there, naming query.
            let row = crate::exit::status(a.code()).unwrap_or_else(|| panic!("{a:?}"));
            assert!(
                row.commands.starts_with("every command") || row.commands.contains("query"),
                "{a:?}: {row:?}"
            );
            for b in &all[i + 1..] {
                assert_ne!(a.code(), b.code());
            }
        }
    }
}
