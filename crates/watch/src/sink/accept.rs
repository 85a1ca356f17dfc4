//! From a body to a stored report: parse, verify (the code `gnomon
//! verify-report` uses), store once. Shared by the HTTP endpoint and by a
//! monitor handing in its own reports (`gnomon watch --sink`).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use gnomon_client::report_check::{accused_keys, parse_verifiable, Verdict};

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

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Checks `bytes` and stores it as sent from `prefix`. Counts what it
/// stored; a refusal is the caller's to count (with the reason returned).
pub(crate) async fn accept(
    shared: &Shared,
    bytes: Bytes,
    prefix: String,
) -> Result<Stored, (Reject, String)> {
    // Verifying is a few hundred signature checks at most: off the
    // runtime's threads.
    let checked = tokio::task::spawn_blocking(move || {
        let report = parse_verifiable(&bytes).map_err(|e| (e, ()))?;
        let check = report.verify();
        Ok::<_, (String, ())>((report, check, bytes))
    })
    .await;
    let (report, check, bytes) = match checked {
        Ok(Ok(x)) => x,
        Ok(Err((why, ()))) => {
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
    // The parser read it as JSON, so it is UTF-8.
    let Ok(body) = String::from_utf8(bytes.to_vec()) else {
        return Err((Reject::Malformed, "the report is not UTF-8".into()));
    };
    let id = report_id(&report);
    let new = NewReport {
        id: id.clone(),
        received_us: now_us(),
        sender_prefix: prefix,
        body,
        verdict: Verdict::Malfeasance.label().into(),
        entries: report.entries.len() as i64,
        contradictions: check.contradictions.len() as i64,
        accused: accused_keys(&report, &check),
    };
    match shared.store.insert_report(&new).await {
        Ok(inserted) => {
            match inserted {
                Inserted::New => shared.counters.accepted(),
                Inserted::Duplicate => shared.counters.duplicate(),
            }
            Ok(Stored { id, inserted })
        }
        Err(_) => Err((
            Reject::Store,
            "the database is unavailable; retry later".into(),
        )),
    }
}
