//! What the history says of each server over the publication window:
//! from the store when there is one (it survives restarts), else from the
//! in-memory ring of recent rounds.

use std::collections::VecDeque;

use crate::history::PROBE;
use crate::state::Point;
use crate::store::{Store, StoreError};

use super::document::Measured;

/// Round trips read per server at most: a day of 1 s rounds. The median
/// and p90 of the newest this many are the window's, near enough.
const MAX_RTTS: u32 = 86_400;
/// Proofs listed per server at most.
pub(super) const MAX_PROOFS: u32 = 16;

/// From the ring: the points at or after `since_us`. First seen is the
/// ring's oldest answer, all this process remembers.
pub(super) fn from_ring(points: Option<&VecDeque<Point>>, since_us: i64) -> Measured {
    let Some(points) = points else {
        return Measured::default();
    };
    let mut m = Measured::default();
    for p in points.iter().filter(|p| p.at_us >= since_us) {
        m.rounds += 1;
        if p.up {
            m.answered += 1;
            if let Some(r) = p.rtt_us {
                m.rtts_us.push(r as i64);
            }
        }
    }
    m.first_seen_us = points.iter().find(|p| p.up).map(|p| p.at_us);
    m.last_seen_us = points.iter().rev().find(|p| p.up).map(|p| p.at_us);
    m
}

/// From the store: `server`'s probe rows since `since_us`, and, when
/// `reports` (the base URL of this monitor's report sink) is given, the
/// reports in which this monitor judged `key` (base64) the liar.
pub(super) async fn from_store(
    store: &Store,
    server: &str,
    key: &str,
    since_us: i64,
    reports: Option<&str>,
) -> Result<Measured, StoreError> {
    let w = store
        .probe_window(server, PROBE, since_us, MAX_RTTS)
        .await?;
    let mut m = Measured {
        rounds: w.rounds,
        answered: w.answered,
        rtts_us: w.rtts_us,
        first_seen_us: w.first_seen_us,
        last_seen_us: w.last_seen_us,
        malfeasance: Vec::new(),
    };
    if let Some(base) = reports {
        for (id, at) in store.judged_reports(key, MAX_PROOFS).await? {
            m.malfeasance.push((
                at,
                Some(format!("{}/reports/{id}.json", base.trim_end_matches('/'))),
            ));
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at_us: i64, up: bool, rtt_us: Option<u64>) -> Point {
        Point {
            at_us,
            up,
            rtt_us,
            offset_us: None,
            radius_us: None,
        }
    }

    #[test]
    fn the_ring_counts_only_the_window_but_remembers_the_first_answer() {
        let ring: VecDeque<Point> = [
            point(10, true, Some(900)),
            point(20, false, None),
            point(30, true, Some(1_000)),
            point(40, false, None),
            point(50, true, Some(3_000)),
        ]
        .into();
        let m = from_ring(Some(&ring), 20);
        assert_eq!((m.rounds, m.answered), (4, 2));
        assert_eq!(m.rtts_us, [1_000, 3_000]);
        assert_eq!((m.first_seen_us, m.last_seen_us), (Some(10), Some(50)));
        assert_eq!(from_ring(None, 0), Measured::default());
    }
}
