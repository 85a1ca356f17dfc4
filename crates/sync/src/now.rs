//! "Trusted now": what sync can prove about the time now, for local
//! programs that must not believe the wall clock (docs/NOW.md).
//!
//! ```text
//!  Service::round (a quorum consensus) ──Anchor──▶ Board ◀──answer── now socket (crate::now_socket)
//!  state file (the floor, after a restart) ──────────▲
//! ```
//!
//! At the end of a round whose consensus the quorum agrees on (however
//! wide: the width is in the answer), the proven interval
//! for true time is pinned to the boot clock (CLOCK_BOOTTIME: it counts
//! through suspend and nothing but the kernel moves it; settimeofday does
//! not): an [`Anchor`] (boot_ns, earliest, latest). At any later boot
//! time `b`, true time lies in
//!
//! ```text
//!   [earliest + (b − boot_ns)(1 − ρ), latest + (b − boot_ns)(1 + ρ)]
//! ```
//!
//! where ρ is the drift bound (`now-drift-ppm`): how far the boot clock's
//! rate may be from true. Stepping the wall clock changes nothing here.
//! Within the round itself (a few seconds) the client places answers by
//! the monotonic clock, whose rate is taken as true: the error that adds,
//! ρ × the round's length, is microseconds, below the servers' radius.
//!
//! An anchor lives in memory only: after sync restarts (or the machine
//! reboots, which resets the boot clock) only the persisted floor, a
//! lower bound, is known until the next good round; [`Known`] says which.
//!
//! Everything here but [`boot_ns`] is arithmetic, tested below.

use std::sync::Mutex;

use serde_json::{json, Value};

/// The drift bound unless told: 100 ppm, ten times the worst crystal a
/// PC or server board ships with (±20…50 ppm) and above what a machine
/// disciplined or not drifts between rounds.
pub const DEFAULT_DRIFT_PPM: u32 = 100;

/// The protocol version of the answer's JSON (`"v"`).
pub const VERSION: u32 = 1;

/// The proven interval of one round, pinned to the boot clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor {
    /// CLOCK_BOOTTIME when the round ended, ns.
    pub boot_ns: i128,
    /// True time then was no earlier than this, Unix µs.
    pub earliest_us: i128,
    /// … and no later than this.
    pub latest_us: i128,
    /// The round that proved it (counted from 1 since sync started).
    pub round: u64,
    /// The servers whose answers agreed.
    pub servers: Vec<String>,
}

impl Anchor {
    /// True time at boot time `boot_ns` (not before the anchor's: an
    /// earlier one is taken as the anchor's own), widened by `drift_ppm`.
    /// The lower end rounds down and the upper end up, so integer
    /// arithmetic never narrows the interval.
    pub fn at(&self, boot_ns: i128, drift_ppm: u32) -> (i128, i128) {
        let e = (boot_ns - self.boot_ns).max(0);
        let rho = i128::from(drift_ppm);
        // e ns × (1 ∓ ρ) in µs: e × (10^6 ∓ ppm) / 10^9.
        let slow = (e * (1_000_000 - rho)).div_euclid(1_000_000_000);
        let fast = -(-(e * (1_000_000 + rho))).div_euclid(1_000_000_000);
        (self.earliest_us + slow, self.latest_us + fast)
    }
}

/// What sync knows: the last anchor (this run's) and the floor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// The last good round's anchor, when there was one since sync started.
    pub anchor: Option<Anchor>,
    /// The proven floor (state.rs): time now is no earlier, Unix µs.
    pub floor_us: Option<i128>,
}

/// The kind of answer (`"known"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Both ends proven.
    Interval,
    /// A lower bound only: the floor (no round since sync started).
    Floor,
    /// Nothing proven.
    None,
}

impl Kind {
    /// The wire word.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Interval => "interval",
            Kind::Floor => "floor",
            Kind::None => "none",
        }
    }
}

/// One answer, before it is JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// What is known.
    pub kind: Kind,
    /// Earliest possible time now, Unix µs (the floor when only a floor).
    pub earliest_us: Option<i128>,
    /// Latest possible time now (an interval only).
    pub latest_us: Option<i128>,
    /// The round, its servers and its age, s (an interval only).
    pub source: Option<(u64, Vec<String>, f64)>,
    /// The wall clock as read for this answer, Unix µs.
    pub wall_us: i128,
    /// Whether the wall clock lies inside what is known (`None`: nothing
    /// is).
    pub wall_inside: Option<bool>,
    /// ρ.
    pub drift_ppm: u32,
    /// The time asked about (`at-least`) and whether it is proven that
    /// now is no earlier.
    pub at_least: Option<(i128, bool)>,
}

impl Known {
    /// The answer at boot time `boot_ns` and wall clock `wall_us`.
    pub fn answer(
        &self,
        boot_ns: i128,
        wall_us: i128,
        drift_ppm: u32,
        at_least: Option<i128>,
    ) -> Answer {
        let (kind, earliest, latest, source) = match (&self.anchor, self.floor_us) {
            (Some(a), floor) => {
                let (lo, hi) = a.at(boot_ns, drift_ppm);
                // The floor is a proof too (a later round may have raised
                // it without an anchor: a consensus too wide to use); it
                // never lifts the lower end past the upper.
                let lo = floor.map_or(lo, |f| lo.max(f.min(hi)));
                let age = (boot_ns - a.boot_ns).max(0) as f64 / 1e9;
                (
                    Kind::Interval,
                    Some(lo),
                    Some(hi),
                    Some((a.round, a.servers.clone(), age)),
                )
            }
            (None, Some(f)) => (Kind::Floor, Some(f), None, None),
            (None, None) => (Kind::None, None, None, None),
        };
        let wall_inside = earliest.map(|lo| lo <= wall_us && latest.is_none_or(|hi| wall_us <= hi));
        Answer {
            kind,
            earliest_us: earliest,
            latest_us: latest,
            source,
            wall_us,
            wall_inside,
            drift_ppm,
            at_least: at_least.map(|t| (t, earliest.is_some_and(|lo| lo >= t))),
        }
    }
}

impl Answer {
    /// The JSON object, every member always present (null when unknown);
    /// docs/NOW.md describes each.
    pub fn to_json(&self) -> Value {
        let int = |v: Option<i128>| v.map(|v| v as i64);
        json!({
            "v": VERSION,
            "known": self.kind.word(),
            "earliest_unix_us": int(self.earliest_us),
            "latest_unix_us": int(self.latest_us),
            "source": self.source.as_ref().map(|(round, servers, age)| json!({
                "round": round,
                "servers": servers,
                "age_s": (age * 1000.0).round() / 1000.0,
            })),
            "wall_clock_unix_us": self.wall_us as i64,
            "wall_clock_inside": self.wall_inside,
            "drift_ppm": self.drift_ppm,
            "at_least_unix_us": int(self.at_least.map(|a| a.0)),
            "at_least_proven": self.at_least.map(|a| a.1),
        })
    }
}

/// What a request asks: nothing, or whether now is at least a time.
/// `Err` names what is wrong with it.
pub fn parse_request(line: &[u8]) -> Result<Option<i128>, String> {
    let text = std::str::from_utf8(line).map_err(|_| "the request is not UTF-8".to_string())?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(m) = v else {
        return Err("the request is not a JSON object".into());
    };
    let mut at_least = None;
    for (k, v) in m {
        match (k.as_str(), v) {
            ("at-least", Value::Number(n)) => match n.as_i64() {
                Some(t) => at_least = Some(i128::from(t)),
                None => return Err("at-least is not an integer (Unix µs)".into()),
            },
            ("at-least", Value::Null) => {}
            ("at-least", _) => return Err("at-least is not an integer (Unix µs)".into()),
            (other, _) => return Err(format!("unknown member `{other}`")),
        }
    }
    Ok(at_least)
}

/// The error answer to a request that does not parse.
pub fn error_json(why: &str) -> Value {
    json!({ "v": VERSION, "error": why })
}

/// What the service knows, shared with the socket's threads. The service
/// writes; clients only read a copy.
#[derive(Debug, Default)]
pub struct Board {
    known: Mutex<Known>,
}

impl Board {
    /// A board that knows `floor_us` (from the state file).
    pub fn with_floor(floor_us: Option<i128>) -> Board {
        Board {
            known: Mutex::new(Known {
                anchor: None,
                floor_us,
            }),
        }
    }

    /// A copy of what is known.
    pub fn known(&self) -> Known {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// After a round: the floor, and the anchor when the round's consensus
    /// is used.
    pub fn update(&self, anchor: Option<Anchor>, floor_us: Option<i128>) {
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if anchor.is_some() {
            k.anchor = anchor;
        }
        k.floor_us = floor_us;
    }
}

/// CLOCK_BOOTTIME, ns. rustix reads it (through the vDSO) without an
/// unsafe block of ours; it cannot fail for this clock on Linux ≥ 2.6.39.
pub fn boot_ns() -> i128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

/// The wall clock (CLOCK_REALTIME), Unix µs.
pub fn wall_us() -> i128 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i128,
        Err(e) => -(e.duration().as_micros() as i128),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const S: i128 = 1_000_000;
    const T0: i128 = 1_800_000_000 * S;

    fn anchor(boot_ns: i128, lo: i128, hi: i128) -> Anchor {
        Anchor {
            boot_ns,
            earliest_us: lo,
            latest_us: hi,
            round: 3,
            servers: vec!["a".into(), "b".into()],
        }
    }

    #[test]
    fn the_interval_widens_by_the_drift_bound_and_no_more() {
        let a = anchor(5_000_000_000, T0 - S, T0 + S);
        assert_eq!(a.at(5_000_000_000, 100), (T0 - S, T0 + S));
        // 1000 s later at 100 ppm: ±0.1 s more.
        let (lo, hi) = a.at(1_005_000_000_000, 100);
        assert_eq!(lo, T0 - S + 1000 * S - 100_000);
        assert_eq!(hi, T0 + S + 1000 * S + 100_000);
        // A boot time before the anchor's is the anchor's.
        assert_eq!(a.at(0, 100), (T0 - S, T0 + S));
        // Rounding never narrows: 1 ns later the upper end moves by 1 µs.
        assert_eq!(a.at(5_000_000_001, 0), (T0 - S, T0 + S + 1));
    }

    #[test]
    fn the_answer_says_what_is_known() {
        let none = Known::default().answer(1, T0, 100, Some(T0));
        assert_eq!(none.kind, Kind::None);
        assert_eq!((none.wall_inside, none.at_least), (None, Some((T0, false))));
        let floor = Known {
            anchor: None,
            floor_us: Some(T0),
        };
        let f = floor.answer(1, T0 - 1, 100, Some(T0));
        assert_eq!(
            (f.kind, f.earliest_us, f.latest_us),
            (Kind::Floor, Some(T0), None)
        );
        assert_eq!((f.wall_inside, f.at_least), (Some(false), Some((T0, true))));
        let k = Known {
            anchor: Some(anchor(0, T0 - S, T0 + S)),
            floor_us: Some(T0 - 5 * S),
        };
        let i = k.answer(2_000_000_000, T0 + 2 * S, 100, None);
        assert_eq!(i.kind, Kind::Interval);
        assert_eq!(i.earliest_us, Some(T0 + S - 200));
        assert_eq!(i.latest_us, Some(T0 + 3 * S + 200));
        assert_eq!(i.wall_inside, Some(true));
        assert_eq!(i.source, Some((3, vec!["a".into(), "b".into()], 2.0)));
        // A floor above the anchor's lower end lifts it, never past the
        // upper.
        let k = Known {
            floor_us: Some(T0 + 10 * S),
            ..k
        };
        let i = k.answer(0, T0, 100, Some(T0 + S));
        assert_eq!((i.earliest_us, i.latest_us), (Some(T0 + S), Some(T0 + S)));
        assert_eq!(i.at_least, Some((T0 + S, true)));
    }

    /// The wire format, pinned: docs/NOW.md documents these members.
    #[test]
    fn the_json_has_every_documented_member() {
        let k = Known {
            anchor: Some(anchor(0, T0 - S, T0 + S)),
            floor_us: None,
        };
        let j = k
            .answer(1_500_000_000, T0 + S, 100, Some(T0 - 9 * S))
            .to_json();
        assert_eq!(
            j,
            json!({
                "v": 1,
                "known": "interval",
                "earliest_unix_us": (T0 + S / 2 - 150) as i64,
                "latest_unix_us": (T0 + S + 3 * S / 2 + 150) as i64,
                "source": {"round": 3, "servers": ["a", "b"], "age_s": 1.5},
                "wall_clock_unix_us": (T0 + S) as i64,
                "wall_clock_inside": true,
                "drift_ppm": 100,
                "at_least_unix_us": (T0 - 9 * S) as i64,
                "at_least_proven": true,
            })
        );
        let j = Known::default().answer(0, T0, 100, None).to_json();
        assert_eq!(
            j,
            json!({
                "v": 1, "known": "none", "earliest_unix_us": null, "latest_unix_us": null,
                "source": null, "wall_clock_unix_us": T0 as i64, "wall_clock_inside": null,
                "drift_ppm": 100, "at_least_unix_us": null, "at_least_proven": null,
            })
        );
    }

    #[test]
    fn requests_parse_or_say_why_not() {
        assert_eq!(parse_request(b""), Ok(None));
        assert_eq!(parse_request(b"  \r"), Ok(None));
        assert_eq!(parse_request(b"{}"), Ok(None));
        assert_eq!(parse_request(b"{\"at-least\": 17}"), Ok(Some(17)));
        assert_eq!(parse_request(b"{\"at-least\": null}"), Ok(None));
        assert!(parse_request(b"{\"at-least\": 1.5}").is_err());
        assert!(parse_request(b"{\"at-least\": \"x\"}").is_err());
        assert!(parse_request(b"{\"set\": 1}")
            .unwrap_err()
            .contains("unknown"));
        assert!(parse_request(b"[1]").is_err());
        assert!(parse_request(b"\xff").is_err());
    }

    #[test]
    fn the_boot_clock_moves_forward() {
        let a = boot_ns();
        let b = boot_ns();
        assert!(a > 0 && b >= a);
    }

    proptest! {
        /// For any anchor and any later boot time: a true time that was
        /// inside the anchor and advanced at a rate within ρ of the boot
        /// clock's stays inside the answer. The rate is (10^6 + k) / 10^6
        /// with |k| ≤ ρ ppm, and the comparison is exact (in units of
        /// 10^-9 µs).
        #[test]
        fn true_time_stays_inside(
            boot in 0i128..1_000_000_000_000_000,
            lo in -4_000_000_000_000_000i128..4_000_000_000_000_000,
            width in 0i128..10_000_000_000,
            at in 0u32..=1_000_000,
            elapsed in 0i128..100_000_000_000_000_000,
            ppm in 0u32..=10_000,
            k_frac in 0u32..=1_000_000,
        ) {
            let a = anchor(boot, lo, lo + width);
            // The true time at the anchor, somewhere in it.
            let t0 = lo + width * i128::from(at) / 1_000_000;
            let rho = i128::from(ppm);
            // k in [-ρ, ρ].
            let k = -rho + (2 * rho * i128::from(k_frac)) / 1_000_000;
            let (e, l) = a.at(boot + elapsed, ppm);
            // True time then, × 10^9: t0 × 10^9 + elapsed ns × (10^6 + k) / 10^6 × 10^3.
            let t = t0 * 1_000_000_000 + elapsed * (1_000_000 + k);
            prop_assert!(e * 1_000_000_000 <= t, "earliest {e} above true {t}");
            prop_assert!(t <= l * 1_000_000_000, "latest {l} below true {t}");
        }
    }
}
