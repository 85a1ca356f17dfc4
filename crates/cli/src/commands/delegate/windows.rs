//! The windows a run adds: where a renewal starts, how many it takes to
//! reach --cover, and the refusal of windows already over, which a
//! server would never use.

use std::time::Duration;

use gnomon_server::offline::{format_utc, OfflineStore};

use super::Failure;
use crate::exit::USAGE;

/// `n window(s)`.
pub(super) fn windows_said(n: usize) -> String {
    if n == 1 {
        "1 new window".to_owned()
    } else {
        format!("{n} new windows")
    }
}

/// Windows that have wholly ended by `now` are never used by a server:
/// all of them ended is a mistake (a --start in the past) refused without
/// --force; some of them is worth a warning naming the last one's end.
pub(super) fn check_ended(
    planned: &[Vec<(u64, u64)>],
    now: u64,
    force: bool,
) -> Result<Option<String>, Failure> {
    let all: Vec<u64> = planned
        .iter()
        .flat_map(|w| w.iter().map(|&(_, maxt)| maxt))
        .collect();
    let ended: Vec<u64> = all.iter().copied().filter(|&maxt| maxt <= now).collect();
    let Some(&last_ended) = ended.iter().max() else {
        return Ok(None);
    };
    if ended.len() == all.len() && !force {
        return Err((
            USAGE,
            format!(
                "every new window would have ended already (the last at {}, before now, {}): \
                 a server never uses an expired window, so nothing is written. Check --start \
                 (`now`, `continue` or a time to come), or pass --force to write them anyway",
                format_utc(last_ended),
                format_utc(now)
            ),
        ));
    }
    Ok(Some(format!(
        "{} of the {} new windows ended before now (the last of them at {}); a server skips them",
        ended.len(),
        all.len(),
        format_utc(last_ended)
    )))
}

/// Where a renewal starts: one step after the latest window's start, so the
/// windows overlap as if made in one run, but never in the past.
pub(super) fn continue_after(existing: Option<&OfflineStore>, step: Duration, now_us: u64) -> u64 {
    let step_us = u64::try_from(step.as_micros()).unwrap_or(u64::MAX);
    existing
        .and_then(|s| s.delegations().last())
        .map_or(now_us, |d| d.mint_us.saturating_add(step_us).max(now_us))
}

/// The first of `windows` (in order) that it takes for coverage, now until
/// `covered`, to reach `goal`.
pub(super) fn until_covered(
    windows: &[(u64, u64)],
    mut covered: u64,
    goal: u64,
) -> Vec<(u64, u64)> {
    let mut needed = Vec::new();
    for &(mint, maxt) in windows {
        if covered >= goal {
            break;
        }
        needed.push((mint, maxt));
        covered = covered.max(maxt);
    }
    needed
}
