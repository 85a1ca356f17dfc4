//! `gnomon sync --status` and `--clear-floor`: the state directory read
//! and the floor removed, without a round (sync.rs is long enough).

use std::collections::BTreeMap;
use std::process::ExitCode;

use gnomon_client::{format_duration_us, format_utc};
use gnomon_sync::config::Settings;
use gnomon_sync::signed::store::{read_status, Status};
use gnomon_sync::state::{Loaded, State, Store};
use serde_json::json;

use super::super::sync_exit::Exit;
use crate::words;

/// `--status`: the last state, changing nothing.
pub(super) fn status(settings: &Settings, as_json: bool) -> ExitCode {
    let store = Store::at(&settings.state_dir);
    let failed = |kind: &str, msg: String| -> ExitCode {
        let msg = words::strip_os_error(&msg);
        if as_json {
            words::print_error(kind, &msg, Exit::NoConsensus as u8);
        } else {
            eprintln!("gnomon sync: {msg}");
        }
        Exit::NoConsensus.into()
    };
    let state = match store.peek() {
        Loaded::Ok(s) => s,
        Loaded::Missing => {
            return failed(
                "no_state",
                format!(
                    "no state in {} yet: no round has run with this --state-dir \
                     (start gnomon sync, or run gnomon sync --once)",
                    settings.state_dir.display()
                ),
            )
        }
        Loaded::Warning(w) => return failed("unreadable_state", format!("warning: {w}")),
    };
    let signed = match signed_status(&store, &state) {
        Ok(s) => s,
        Err(e) => return failed("unreadable_state", format!("warning: {e}")),
    };
    if as_json {
        let mut out = status_json(settings, &state);
        out["signed_lists"] = signed.as_ref().map_or(serde_json::Value::Null, signed_json);
        words::print_outcome(out, Exit::Ok as u8);
        return Exit::Ok.into();
    }
    let utc = |us: i64| format_utc(us.max(0) as u64);
    println!("state        {}", settings.state_dir.display());
    match (state.floor_us, state.floor_proven_at_us) {
        (Some(f), Some(p)) => println!(
            "floor        {} (the last proven time; proven at {})",
            utc(f),
            utc(p)
        ),
        (Some(f), None) => println!("floor        {} (the last proven time)", utc(f)),
        (None, _) => println!("floor        none"),
    }
    if let Some(l) = &state.last {
        println!(
            "last round   {} ({})",
            utc(l.at_us),
            if l.ok { "consensus" } else { "NO consensus" }
        );
        if let (Some(lo), Some(hi)) = (l.offset_low_us, l.offset_high_us) {
            println!(
                "offset       [{}, {}]",
                format_duration_us(i128::from(lo)),
                format_duration_us(i128::from(hi))
            );
        }
        println!("agreeing     {}", list_or_none(&l.agreeing));
        println!(
            "outside      {}",
            list_or_none(&with_reasons(&l.outside, &l.outside_because))
        );
        println!(
            "unreachable  {}",
            list_or_none(&with_reasons(&l.unreachable, &l.unreachable_because))
        );
        if let Some(why) = &l.no_consensus {
            println!("why          {why}");
        }
        if let Some(a) = &l.assumption {
            println!("assumption   {a}");
        }
        if let Some(r) = &l.report {
            println!("report       {r}");
        }
    }
    for e in &state.excluded {
        println!(
            "excluded     {} ({}) since {}",
            e.name,
            e.public_key,
            utc(e.since_us)
        );
    }
    if let Some(s) = &signed {
        print_signed(s);
    }
    Exit::Ok.into()
}

/// The signed lists' status the service last wrote, each list judged
/// again now: by the later of the local clock and the proven floor, as
/// the service judges them.
fn signed_status(store: &Store, state: &State) -> Result<Option<Status>, String> {
    let local = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let floor = state.floor_us.map(|f| f.div_euclid(1_000_000));
    let now = gnomon_sync::signed::judged_now(local, floor);
    Ok(read_status(store)?.map(|s| s.at(now)))
}

fn print_signed(s: &Status) {
    let utc = |t: i64| gnomon_protocol::signed_list::format_utc(t);
    println!(
        "signed lists {} of {} monitors' lists in force (servers-threshold {}), {} server(s) in \
         the merged list; expiry judged by {} at {}",
        s.in_force,
        s.monitors.len(),
        s.threshold,
        s.servers,
        s.judged_by,
        utc(s.written_unix)
    );
    for m in &s.monitors {
        let key = if m.comment.is_empty() {
            m.fingerprint.clone()
        } else {
            format!("{} ({})", m.fingerprint, m.comment)
        };
        let list = match (m.sequence, m.expires_unix) {
            (Some(seq), Some(exp)) => format!(
                "sequence {seq}{}, expires {}{}{}",
                m.monitor
                    .as_ref()
                    .map_or(String::new(), |n| format!(" from monitor {n}")),
                utc(exp),
                m.fetched_unix
                    .map_or(String::new(), |f| format!(", fetched {}", utc(f))),
                m.url
                    .as_ref()
                    .map_or(String::new(), |u| format!(" from {u}")),
            ),
            _ => "no list".to_string(),
        };
        let standing = match m.standing.as_str() {
            "current" => "current".to_string(),
            "kept" => "KEPT after a failed fetch".to_string(),
            "expired" => "EXPIRED (no longer counts)".to_string(),
            _ => "NONE accepted".to_string(),
        };
        println!("monitor      {key}: {standing}: {list}");
        if let Some(f) = &m.failure {
            println!("             last fetch: {f}");
        }
    }
    let counted = |v: &BTreeMap<String, u64>| {
        let n: Vec<String> = v
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(l, n)| format!("{l} {n}"))
            .collect();
        if n.is_empty() {
            "none".to_string()
        } else {
            n.join(", ")
        }
    };
    println!(
        "refused      {} (since the last start)",
        counted(&s.refusals)
    );
    println!("fetch failed {}", counted(&s.failures));
    if let Some(why) = &s.no_servers {
        println!("no servers   {why}");
    }
}

/// `--status --json`'s `signed_lists`.
pub(super) fn signed_json(s: &Status) -> serde_json::Value {
    let utc = |t: Option<i64>| t.map(gnomon_protocol::signed_list::format_utc);
    json!({
        "threshold": s.threshold,
        "in_force": s.in_force,
        "servers": s.servers,
        "judged_by": s.judged_by,
        "written_utc": utc(Some(s.written_unix)),
        "no_servers": s.no_servers,
        "monitors": s.monitors.iter().map(|m| json!({
            "fingerprint": m.fingerprint,
            "comment": m.comment,
            "state": m.standing,
            "sequence": m.sequence,
            "monitor": m.monitor,
            "published_utc": utc(m.published_unix),
            "expires_utc": utc(m.expires_unix),
            "expires_unix": m.expires_unix,
            "fetched_utc": utc(m.fetched_unix),
            "url": m.url,
            "failure": m.failure,
        })).collect::<Vec<_>>(),
        "refusals": s.refusals,
        "fetch_failures": s.failures,
    })
}

/// `--clear-floor`: the floor out of the state, under the lock a running
/// service takes before it saves (gnomon_sync::state::floor), so the
/// service drops its copy instead of writing it back.
pub(super) fn clear_floor(settings: &Settings, as_json: bool) -> ExitCode {
    let dir = &settings.state_dir;
    let file = dir.join(gnomon_sync::state::STATE_FILE);
    let say_error = |code: Exit, msg: String| -> ExitCode {
        let msg = words::strip_os_error(&msg);
        if as_json {
            words::print_error("clear_floor", &msg, code as u8);
        } else {
            eprintln!("gnomon sync: {msg}");
        }
        code.into()
    };
    if !dir.is_dir() {
        return say_error(
            Exit::NoConsensus,
            format!("no state directory {}: no floor to clear", dir.display()),
        );
    }
    let cleared = match Store::at(dir).clear_floor() {
        Ok(Some(c)) => c,
        Ok(None) => {
            return say_error(
                Exit::NoConsensus,
                format!("no state in {} yet: no floor to clear", dir.display()),
            )
        }
        Err(e) => {
            let code = if e.starts_with("cannot") {
                Exit::Local
            } else {
                Exit::NoConsensus
            };
            return say_error(code, format!("--clear-floor: {e}"));
        }
    };
    let utc = |us: Option<i64>| us.map(|us| format_utc(us.max(0) as u64));
    let after = "a running gnomon sync drops it at its next round, or at once on SIGHUP \
                 (systemctl reload gnomon-sync)";
    if as_json {
        println!(
            "{}",
            json!({
                "state_file": file.display().to_string(),
                "removed_floor_unix_us": cleared.floor_us,
                "removed_floor_utc": utc(cleared.floor_us),
                "removed_floor_proven_utc": utc(cleared.proven_at_us),
                "floor_clears": cleared.clears,
                "exit_code": Exit::Ok as u8,
            })
        );
        return Exit::Ok.into();
    }
    match utc(cleared.floor_us) {
        Some(f) => {
            let proven =
                utc(cleared.proven_at_us).map_or(String::new(), |p| format!(" (proven at {p})"));
            println!("cleared      the floor {f}{proven} from {}", file.display());
            println!("             {after}");
        }
        None => println!(
            "cleared      nothing: {} holds no floor (recorded as a clear all the same: {after})",
            file.display()
        ),
    }
    Exit::Ok.into()
}

/// `--status --json`: the state with its times named as `--check --json`
/// names them (`*_utc` text, `*_unix_us` integers, offsets in `*_us`),
/// and the lists holding names only, their reasons beside them.
fn status_json(settings: &Settings, state: &State) -> serde_json::Value {
    let utc = |us: Option<i64>| us.map(|us| format_utc(us.max(0) as u64));
    let last = state.last.as_ref().map(|l| {
        let consensus = match (l.offset_low_us, l.offset_high_us) {
            (Some(lo), Some(hi)) => json!({
                "offset_low_us": lo,
                "offset_high_us": hi,
                "offset_us": lo + (hi - lo) / 2,
                "radius_us": (hi - lo) / 2,
                "time_utc": utc(Some(l.at_us + lo + (hi - lo) / 2)),
                "agreeing": l.agreeing,
            }),
            _ => serde_json::Value::Null,
        };
        json!({
            "local_time_utc": utc(Some(l.at_us)),
            "local_time_unix_us": l.at_us,
            "quorum_met": l.ok,
            "consensus": consensus,
            "outside": l.outside,
            "outside_because": l.outside_because,
            "unreachable": l.unreachable,
            "unreachable_because": l.unreachable_because,
            "no_consensus": l.no_consensus,
            "assumption": l.assumption,
            "report_file": l.report,
        })
    });
    json!({
        "state_dir": settings.state_dir.display().to_string(),
        "floor_utc": utc(state.floor_us),
        "floor_unix_us": state.floor_us,
        "floor_proven_utc": utc(state.floor_proven_at_us),
        "floor_proven_unix_us": state.floor_proven_at_us,
        "floor_clears": state.floor_clears,
        "last_round": last,
        "excluded": state.excluded.iter().map(|e| json!({
            "name": e.name,
            "public_key": e.public_key,
            "since_utc": utc(Some(e.since_us)),
            "since_unix_us": e.since_us,
        })).collect::<Vec<_>>(),
    })
}

/// Each name, with its reason in parentheses when there is one.
fn with_reasons(names: &[String], because: &BTreeMap<String, String>) -> Vec<String> {
    names
        .iter()
        .map(|n| match because.get(n) {
            Some(why) => format!("{n} ({why})"),
            None => n.clone(),
        })
        .collect()
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}
