//! `gnomon sync --once`, `--check` and `--set-clock`: one round, its
//! verdict on the local clock or the step it makes, in text or JSON.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use gnomon_client::{describe_assumption, format_duration_us, format_utc};
use gnomon_sync::config::Settings;
use gnomon_sync::decision::{clock_ok, plan_step, trusted};
use gnomon_sync::{Outcome, Refusal, Service, StepPlan, StepRules};
use serde_json::json;

use super::super::sync_exit::Exit;
use super::Args;
use crate::words;

/// `--once`, `--check`, `--set-clock`.
pub(super) fn once(service: &mut Service, args: &Args) -> ExitCode {
    let outcome = match service.round() {
        Ok(o) => o,
        Err(e) => {
            let msg = format!(
                "the round could not run: {}",
                words::strip_os_error(&e.to_string())
            );
            eprintln!("gnomon sync: {msg}");
            if args.json {
                words::print_error("local", &msg, Exit::Local as u8);
            }
            return Exit::Local.into();
        }
    };
    // The POST retries 10 s, then 15 s: a report gets its first two
    // attempts before a one-shot run (at boot, from cron) exits.
    service.wait_for_reports(Duration::from_secs(30));
    let settings = service.settings().clone();
    let round = &outcome.round;
    let evidence = round.evidence();
    let servers = service.servers();
    let name = |i: usize| servers[i].name.clone();
    let mut out = json!({
        "consensus": round.consensus.as_ref().map(|c| json!({
            "offset_low_us": c.low_us as i64,
            "offset_high_us": c.high_us as i64,
            "offset_us": c.midpoint_us() as i64,
            "radius_us": c.radius_us() as i64,
            "time_utc": format_utc((round.local_end_us + c.midpoint_us()).max(0) as u64),
            "agreeing": c.agreeing.iter().map(|&i| name(i)).collect::<Vec<_>>(),
            "agreeing_voters": c.agreeing_voters,
            "answering": c.answering,
        })),
        "max_liars": round.assumption.liars,
        "listed": round.assumption.voters,
        "answered": round.answered,
        "needed": round.assumption.needed(),
        "assumption": describe_assumption(round.assumption, round.answered),
        "no_consensus": round.why_none,
        "quorum": settings.quorum,
        "quorum_met": round.quorum_met,
        "too_wide": round.wide,
        "disagreement": round.disagreement,
        "grouped": round.grouped.iter()
            .map(|g| g.iter().map(|&i| name(i)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "grouped_because": round.grouped_because,
        "contradictions": round.sequence.contradicting_servers().iter()
            .map(|&(a, b)| [name(round.asked[a]), name(round.asked[b])]).collect::<Vec<_>>(),
        "local_time_utc": format_utc(round.local_end_us.max(0) as u64),
        "outside": round.outside.iter().map(|&(i, _)| name(i))
            .chain(round.still_out.iter().map(|&i| name(i))).collect::<Vec<_>>(),
        "unreachable": round.unreachable.iter().map(|u| name(u.0)).collect::<Vec<_>>(),
        "report_file": outcome.report_file.as_ref().map(|p| p.display().to_string()),
        "floor_utc": service.state().floor_us.map(|f| format_utc(f.max(0) as u64)),
    });
    let mut text: Vec<String> = Vec::new();
    if let Some(why) = &round.disagreement {
        text.push(format!("servers      {why}"));
    }
    let code = if args.check {
        check(&settings, evidence.as_ref(), &mut out, &mut text)
    } else if args.set_clock {
        set_clock(&settings, &outcome, args.dry_run, &mut out, &mut text)
    } else if trusted(evidence.as_ref(), settings.quorum).is_ok() {
        // A measurement: whether it may steer the clock is `too_wide`.
        Exit::Ok
    } else {
        Exit::NoConsensus
    };
    if let Some(s) = service.signed_status() {
        out["signed_lists"] = super::state_dir::signed_json(&s);
    }
    out["exit_code"] = json!(code as u8);
    if args.json {
        println!("{out}");
    } else {
        println!("{}", outcome.line);
        for t in text {
            println!("{t}");
        }
    }
    code.into()
}

fn check(
    settings: &Settings,
    evidence: Option<&gnomon_sync::Evidence>,
    out: &mut serde_json::Value,
    text: &mut Vec<String>,
) -> Exit {
    let max = settings.max_offset.as_micros() as i128;
    out["max_offset_us"] = json!(max as i64);
    let e = match trusted(evidence, settings.quorum) {
        Ok(e) => e,
        Err(r) => {
            out["inside"] = json!(null);
            text.push(format!("check        no verdict: {}", refusal_words(&r)));
            return Exit::NoConsensus;
        }
    };
    let inside = clock_ok(e, max);
    // Outside a wide consensus is still outside; inside one proves
    // nothing about the clock.
    let max_radius = settings.max_radius.as_micros() as i128;
    if inside && e.radius_us() > max_radius {
        let r = Refusal::TooWide {
            radius_us: e.radius_us(),
            max_us: max_radius,
        };
        out["inside"] = json!(null);
        text.push(format!("check        no verdict: {}", refusal_words(&r)));
        return Exit::NoConsensus;
    }
    out["inside"] = json!(inside);
    // How far the local clock is from the interval (0 inside it).
    let off = if e.low_us > 0 {
        e.low_us
    } else if e.high_us < 0 {
        e.high_us
    } else {
        0
    };
    out["outside_by_us"] = json!(off as i64);
    text.push(format!(
        "check        local clock {} the consensus interval [{}, {}] ± {}",
        if inside { "inside" } else { "OUTSIDE" },
        format_duration_us(e.low_us),
        format_duration_us(e.high_us),
        format_duration_us(max).trim_start_matches('+'),
    ));
    if inside {
        Exit::Ok
    } else {
        Exit::Outside
    }
}

fn set_clock(
    settings: &Settings,
    outcome: &Outcome,
    dry_run: bool,
    out: &mut serde_json::Value,
    text: &mut Vec<String>,
) -> Exit {
    let round = &outcome.round;
    let rules = StepRules {
        quorum: settings.quorum,
        max_radius_us: settings.max_radius.as_micros() as i128,
        floor_us: outcome.floor_before_us,
    };
    let evidence = round.evidence();
    let plan = plan_step(evidence.as_ref(), &rules, round.local_at(Instant::now()));
    let (code, step) = match plan {
        StepPlan::Inside => {
            text.push("set-clock    the local clock is inside the consensus: no step".into());
            (Exit::Ok, json!({ "action": "none" }))
        }
        StepPlan::Refused(r) => {
            text.push(format!("set-clock    REFUSED: {}", refusal_words(&r)));
            let code = match r {
                Refusal::NoConsensus | Refusal::Quorum { .. } => Exit::NoConsensus,
                _ => Exit::Refused,
            };
            (
                code,
                json!({ "action": "refused", "reason": refusal_key(&r), "message": refusal_words(&r) }),
            )
        }
        StepPlan::Step { from_us, to_us } => {
            let delta = to_us - from_us;
            let mut step = json!({
                "action": "step",
                "from_utc": format_utc(from_us.max(0) as u64),
                "to_utc": format_utc(to_us.max(0) as u64),
                "delta_us": delta as i64,
                "dry_run": dry_run,
            });
            if dry_run {
                text.push(format!(
                    "set-clock    would step the clock by {} from {} to {} (dry run: not stepped)",
                    format_duration_us(delta),
                    format_utc(from_us.max(0) as u64),
                    format_utc(to_us.max(0) as u64)
                ));
                (Exit::Ok, step)
            } else {
                // The target again at the moment of the call: the plan
                // was made a moment ago.
                let now = round.local_at(Instant::now());
                let delta_now = evidence.map_or(delta, |e| e.midpoint_us());
                match gnomon_sync::clock::set_realtime(now + delta_now) {
                    Ok(()) => {
                        text.push(format!(
                            "set-clock    stepped the clock by {} to {}",
                            format_duration_us(delta_now),
                            format_utc((now + delta_now).max(0) as u64)
                        ));
                        step["done"] = json!(true);
                        (Exit::Ok, step)
                    }
                    Err(e) => {
                        let why = match e.kind() {
                            std::io::ErrorKind::PermissionDenied => "permission denied: setting \
                                 the clock needs CAP_SYS_TIME (run it as root, or from \
                                 gnomon-bootstrap.service, which grants it)"
                                .to_owned(),
                            _ => words::io(&e),
                        };
                        text.push(format!("set-clock    FAILED to set the clock: {why}"));
                        step["done"] = json!(false);
                        step["error"] = json!(why);
                        (Exit::ClockNotSet, step)
                    }
                }
            }
        }
    };
    out["step"] = step;
    code
}

fn refusal_key(r: &Refusal) -> &'static str {
    match r {
        Refusal::NoConsensus => "no_consensus",
        Refusal::Quorum { .. } => "quorum",
        Refusal::TooWide { .. } => "too_wide",
        Refusal::BelowFloor { .. } => "below_floor",
    }
}

fn refusal_words(r: &Refusal) -> String {
    match r {
        Refusal::NoConsensus => "no consensus (too few servers answered for the assumption, \
             or no offset is vouched for by enough of them: the round's line and `no_consensus` \
             say which)"
            .into(),
        Refusal::Quorum { agreeing, quorum } => {
            format!("{agreeing} distinct server(s) agree, fewer than the quorum of {quorum}")
        }
        Refusal::TooWide { radius_us, max_us } => format!(
            "the consensus radius {} is wider than --max-radius {} (the servers disagree \
             or answer with wide radii)",
            format_duration_us(*radius_us).trim_start_matches('+'),
            format_duration_us(*max_us).trim_start_matches('+')
        ),
        Refusal::BelowFloor {
            target_us,
            floor_us,
        } => format!(
            "the step would set the clock to {}, before {}, which this machine proved has passed",
            format_utc((*target_us).max(0) as u64),
            format_utc((*floor_us).max(0) as u64)
        ),
    }
}
