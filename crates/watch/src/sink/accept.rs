//! From a body to a stored report: parse, verify (the code `gnomon
//! verify-report` uses), keep only what accuses a key the sink cares
//! about, within the quotas, as canonical JSON with its check; store once.
//! Shared by the HTTP endpoint and by a monitor handing in its own reports
//! (`gnomon watch --sink`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use gnomon_client::report_check::{accused_keys, check_json, parse_verifiable, Verdict};

use super::metrics::Reject;
use super::Shared;
use crate::store::{report_id, Inserted, NewReport};

/// A report kept (or already kept): its id and which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// [`crate::report_id`] of the report: `/reports/ID.json`.
    pub id: String,
    /// New, or a replay of one already stored.
    pub inserted: Inserted,
}

pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Checks `bytes` and stores it as sent from `prefix`. Counts what it
/// stored; a refusal is the caller's to count (with the reason returned).
pub(crate) async fn accept(
    shared: &Arc<Shared>,
    bytes: Bytes,
    prefix: String,
) -> Result<Stored, (Reject, String)> {
    let unwatched = || {
        (
            Reject::Unwatched,
            "the report accuses no server this sink keeps reports about".to_string(),
        )
    };
    // Verifying is a few hundred signature checks at most: off the
    // runtime's threads. A report naming no key of the set is refused
    // before any signature is checked.
    let keys = shared.config.keys.clone();
    let counted = shared.clone();
    let checked = tokio::task::spawn_blocking(move || {
        let report = parse_verifiable(&bytes).map_err(Refusal::Parse)?;
        if let Some(keys) = &keys {
            if !report.entries.iter().any(|e| keys.contains(&e.public_key)) {
                return Err(Refusal::Unwatched);
            }
        }
        let check = report.verify();
        counted.counters.verified(report.entries.len());
        Ok::<_, Refusal>((report, check))
    })
    .await;
    let (report, check) = match checked {
        Ok(Ok(x)) => x,
        Ok(Err(Refusal::Unwatched)) => return Err(unwatched()),
        Ok(Err(Refusal::Parse(why))) => {
            let reason = if why.starts_with("a pre-draft-12") {
                Reject::Unverifiable
            } else {
                Reject::Malformed
            };
            return Err((reason, why));
        }
        Err(_) => {
            return Err((Reject::Malformed, "the report could not be checked".into()));
        }
    };
    match Verdict::of(&check) {
        Verdict::Malfeasance => {}
        Verdict::Invalid => {
            return Err((
                Reject::Invalid,
                "a signature or chain link fails, so the report proves nothing".into(),
            ))
        }
        Verdict::NoContradiction => {
            return Err((
                Reject::NoContradiction,
                "every signature holds but no pair of answers contradicts: no malfeasance shown"
                    .into(),
            ))
        }
    }
    let accused = accused_keys(&report, &check);
    if let Some(keys) = &shared.config.keys {
        if !accused.iter().any(|k| keys.contains_b64(k)) {
            return Err(unwatched());
        }
    }
    let id = report_id(&report);
    // Kept as the parser read it, written back: no padding, no unknown
    // members, whatever was sent.
    let body = report.to_json();
    let new = NewReport {
        id: id.clone(),
        received_us: now_us(),
        sender_prefix: prefix,
        body,
        verdict: Verdict::Malfeasance.label().into(),
        entries: report.entries.len() as i64,
        contradictions: check.contradictions.len() as i64,
        accused,
        check_json: Some(check_json(&report, &check).to_string()),
    };
    let size = u64::try_from(new.stored_size()).unwrap_or(u64::MAX);
    let db_down = || {
        (
            Reject::Store,
            "the database is unavailable; retry later".to_string(),
        )
    };
    let _held = shared.storing.lock().await;
    match shared.store.has_report(&id).await {
        Ok(true) => {
            shared.counters.duplicate();
            return Ok(Stored {
                id,
                inserted: Inserted::Duplicate,
            });
        }
        Ok(false) => {}
        Err(_) => return Err(db_down()),
    }
    let usage = shared
        .store
        .report_usage(&new.sender_prefix)
        .await
        .map_err(|_| db_down())?;
    let used = |n: i64| u64::try_from(n).unwrap_or(0);
    if used(usage.source) + size > shared.config.quota_per_source {
        return Err((
            Reject::SourceQuota,
            format!(
                "reports from your network fill its quota ({} bytes); retry when older ones expire",
                shared.config.quota_per_source
            ),
        ));
    }
    if used(usage.total) + size > shared.config.quota_total {
        return Err((
            Reject::StorageFull,
            format!(
                "the sink's storage quota ({} bytes) is full; retry when older reports expire",
                shared.config.quota_total
            ),
        ));
    }
    match shared.store.insert_report(&new).await {
        Ok(inserted) => {
            match inserted {
                Inserted::New => shared.counters.accepted(),
                Inserted::Duplicate => shared.counters.duplicate(),
            }
            Ok(Stored { id, inserted })
        }
        Err(_) => Err(db_down()),
    }
}

/// Why a body was refused before it was stored.
enum Refusal {
    /// Not a verifiable report (the parser's words).
    Parse(String),
    /// It names no key of the set.
    Unwatched,
}
