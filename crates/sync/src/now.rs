//! "Trusted now": what sync can prove about the time now, for local
//! programs that must not believe the wall clock (docs/NOW.md).
//!
//! ```text
//!  Service::round (consensus + quorum) ──Anchor, Floor──▶ Board ◀──answer── now socket
//!  state file (the floor, after a restart) ─────────────────▲   └─reads─▶ Clock (the kernel's,
//!                                                                          or a test's)
//! ```
//!
//! At the end of a round whose consensus exists and the quorum agrees on
//! (however wide: the width is in the answer), the proven interval for
//! true time is pinned to a [`Reading`] of the kernel's clocks: an
//! [`Anchor`]. It is extrapolated on two counts only, neither of which
//! NTP slews nor settimeofday moves:
//!
//! - `awake`: CLOCK_MONOTONIC_RAW since the anchor, the oscillator counted
//!   at its nominal rate. CLOCK_BOOTTIME and CLOCK_MONOTONIC are not used
//!   for this: they run at the disciplined rate, which chrony slews by up
//!   to 83,333 ppm and adjtimex's tick moves by ±10 %, so a bound of
//!   100 ppm on them would hold only while nobody corrects the clock
//!   (and an attacker who steers NTP chooses the correction).
//! - `asleep`: the time spent suspended since the anchor, CLOCK_BOOTTIME
//!   − CLOCK_MONOTONIC (both run at the same rate while awake, so the
//!   difference grows only when the kernel adds a suspend). The kernel
//!   measures a suspend with a clock source that keeps running, converted
//!   at its nominal rate (not the disciplined one), or else with the RTC
//!   in whole seconds: a crystal either way, bounded by ρ like the raw
//!   clock, plus [`SUSPEND_SLACK_US`] for the RTC's rounding.
//!
//! At a later reading, true time lies in
//!
//! ```text
//!   [earliest + (awake + asleep)(1 − ρ) − s, latest + (awake + asleep)(1 + ρ) + s]
//! ```
//!
//! where ρ is the drift bound (`now-drift-ppm`) and s is
//! [`SUSPEND_SLACK_US`] once the machine has been suspended since the
//! anchor (0 before). Within the round itself (a few seconds) the client
//! places answers by the monotonic clock, at the disciplined rate: the
//! error that adds, that rate's error × the round's length (0.4 s in a
//! 5-s round at chrony's fastest slew), is not covered by ρ; docs/NOW.md
//! says so.
//!
//! An anchor lives in memory only: after sync restarts (or the machine
//! reboots, which resets these clocks) only the persisted floor, a lower
//! bound, is known until the next good round; [`Known`] says which. A
//! round whose upper end lies below the floor contradicts it: the answer
//! says so ([`Kind::Contradiction`]) instead of narrowing the interval to
//! nothing.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// The drift bound unless told: 100 ppm, ten times the worst crystal a
/// PC or server board ships with (±20…50 ppm).
pub const DEFAULT_DRIFT_PPM: u32 = 100;

/// The protocol version of the answer's JSON (`"v"`).
pub const VERSION: u32 = 1;

/// Widens each end once the machine was suspended since the anchor: an
/// RTC-measured suspend is rounded to whole seconds, and the kernel keeps
/// repeated suspends from adding the rounding up (rtc_suspend's delta
/// compensation, which lets the difference drift by less than 2 s).
pub const SUSPEND_SLACK_US: i128 = 2_000_000;

/// How much faster than true the boot clock may run, ppm, over the moment
/// between a round's end and its anchor: the tick ±10 %, the frequency
/// ±500 ppm, and the raw oscillator itself within the largest ρ allowed
/// (10 %): 1.1005 × 1.1 < 1.25.
const PIN_SLACK_PPM: i128 = 250_000;

/// A suspend between the first and the last read of [`KernelClock::read`]
/// shows as the boot clock moving by more than this (4 vDSO reads take
/// well under a µs unpreempted); the reads are then made again. The
/// suspended time read is thus off by less than this, and a change
/// smaller than it is the reads' own timing, never a suspend (one takes
/// milliseconds at least).
pub const BRACKET_NS: i128 = 100_000;

/// One reading of the kernel's clocks, taken together, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// CLOCK_MONOTONIC_RAW: the oscillator at its nominal rate; stops in
    /// suspend.
    pub raw_ns: i128,
    /// CLOCK_MONOTONIC: the disciplined rate; stops in suspend.
    pub monotonic_ns: i128,
    /// CLOCK_BOOTTIME: CLOCK_MONOTONIC plus the time spent suspended.
    pub boottime_ns: i128,
}

impl Reading {
    /// Time spent suspended since boot.
    pub fn suspended_ns(&self) -> i128 {
        (self.boottime_ns - self.monotonic_ns).max(0)
    }
}

/// Where readings come from: the kernel, or a test that sets the rates.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The clocks now.
    fn read(&self) -> Reading;
}

/// The kernel's clocks, read by rustix (through the vDSO) without an
/// unsafe block of ours.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelClock;

impl Clock for KernelClock {
    fn read(&self) -> Reading {
        use rustix::time::ClockId;
        // The boot clock read first and last brackets the others: when it
        // moved by less than BRACKET_NS, no suspend fell between the reads
        // and the difference to CLOCK_MONOTONIC is the suspended time as
        // of the raw read (short by the ns between two reads).
        // Preempted every time (a machine at its limit): the tightest.
        let mut best = (i128::MAX, Reading::default());
        for _ in 0..8 {
            let boot = ns(ClockId::Boottime);
            let r = Reading {
                raw_ns: ns(ClockId::MonotonicRaw),
                monotonic_ns: ns(ClockId::Monotonic),
                boottime_ns: boot,
            };
            let spread = ns(ClockId::Boottime) - boot;
            if spread < best.0 {
                best = (spread, r);
            }
            if spread < BRACKET_NS {
                break;
            }
        }
        best.1
    }
}

fn ns(id: rustix::time::ClockId) -> i128 {
    let t = rustix::time::clock_gettime(id);
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

/// `ns` of a clock within `drift_ppm` of true, as the least and most true
/// µs it may stand for: rounded down and up, so integer arithmetic never
/// narrows an interval.
fn span_us(ns: i128, drift_ppm: u32) -> (i128, i128) {
    let rho = i128::from(drift_ppm);
    let slow = (ns * (1_000_000 - rho)).div_euclid(1_000_000_000);
    let fast = -(-(ns * (1_000_000 + rho))).div_euclid(1_000_000_000);
    (slow, fast)
}

/// Time suspended from `from` to `to`, ns: 0 for a change within the
/// reads' own timing ([`BRACKET_NS`]).
fn asleep_ns(from: &Reading, to: &Reading) -> i128 {
    let d = to.suspended_ns() - from.suspended_ns();
    if d < BRACKET_NS {
        0
    } else {
        d
    }
}

/// Awake plus suspended time from `from` to `to`, ns, as the clocks count
/// it (not widened): how old something is, never what is proven.
fn elapsed_ns(from: &Reading, to: &Reading) -> i128 {
    (to.raw_ns - from.raw_ns).max(0) + asleep_ns(from, to)
}

/// The proven interval of one round, pinned to the kernel's clocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor {
    /// The clocks when the interval below held.
    pub at: Reading,
    /// True time then was no earlier than this, Unix µs.
    pub earliest_us: i128,
    /// … and no later than this.
    pub latest_us: i128,
    /// The round that proved it (counted from 1 since sync started).
    pub round: u64,
    /// The servers whose answers agreed.
    pub servers: Vec<String>,
    /// The assumption the round's consensus rests on ("assumes at most 1
    /// of the 5 listed servers lies; 4 answered, 3 needed").
    pub assumption: String,
}

impl Anchor {
    /// The interval [`earliest_us`, `latest_us`] of a round that ended
    /// when CLOCK_BOOTTIME read `ended_boot_ns`, pinned to `now`, read a
    /// moment later: the lower end still holds (time only grows), the
    /// upper end grows by that moment at the disciplined clock's worst
    /// rate.
    pub fn pin(
        now: Reading,
        ended_boot_ns: i128,
        (earliest_us, latest_us): (i128, i128),
        round: u64,
        servers: Vec<String>,
        assumption: String,
    ) -> Anchor {
        let late = (now.boottime_ns - ended_boot_ns).max(0);
        let grown = -(-(late * (1_000_000 + PIN_SLACK_PPM))).div_euclid(1_000_000_000);
        Anchor {
            at: now,
            earliest_us,
            latest_us: latest_us + grown,
            round,
            servers,
            assumption,
        }
    }

    /// True time at `now` (not before the anchor: an earlier reading is
    /// taken as the anchor's own), widened by `drift_ppm`.
    pub fn at(&self, now: &Reading, drift_ppm: u32) -> (i128, i128) {
        let awake = (now.raw_ns - self.at.raw_ns).max(0);
        let asleep = asleep_ns(&self.at, now);
        let (awake_lo, awake_hi) = span_us(awake, drift_ppm);
        let (asleep_lo, asleep_hi) = span_us(asleep, drift_ppm);
        let slack = if asleep > 0 { SUSPEND_SLACK_US } else { 0 };
        (
            self.earliest_us + awake_lo + asleep_lo - slack,
            self.latest_us + awake_hi + asleep_hi + slack,
        )
    }
}

/// The proven floor (state.rs): time now is no earlier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Floor {
    /// The floor, Unix µs.
    pub us: i128,
    /// The local clock at the end of the round that proved it; `None`
    /// from a state file written before this was kept.
    pub proven_at_us: Option<i128>,
    /// The kernel's clocks then, when that round ran in this run of sync.
    pub proven_reading: Option<Reading>,
}

impl Floor {
    /// A floor with nothing known about its round.
    pub fn bare(us: i128) -> Floor {
        Floor {
            us,
            proven_at_us: None,
            proven_reading: None,
        }
    }

    /// Seconds since the round that proved it: by the kernel's clocks when
    /// it ran in this run of sync (no wall clock involved), else by the
    /// wall clock, the only clock that spans restarts (a hint: whoever
    /// sets the wall clock sets this age).
    pub fn age_s(&self, now: &Reading, wall_us: i128) -> Option<f64> {
        if let Some(r) = &self.proven_reading {
            return Some(elapsed_ns(r, now) as f64 / 1e9);
        }
        self.proven_at_us.map(|p| (wall_us - p) as f64 / 1e6)
    }
}

/// What sync knows: the last anchor (this run's) and the floor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// The last good round's anchor, when there was one since sync started.
    pub anchor: Option<Anchor>,
    /// The proven floor.
    pub floor: Option<Floor>,
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
    /// The last round's interval lies wholly below the floor: one of the
    /// two is wrong (a floor planted or proven by liars, liars in the
    /// round, or a clock outside ρ), and which cannot be told.
    Contradiction,
}

impl Kind {
    /// The wire word.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Interval => "interval",
            Kind::Floor => "floor",
            Kind::None => "none",
            Kind::Contradiction => "contradiction",
        }
    }
}

/// One answer, before it is JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// What is known.
    pub kind: Kind,
    /// Earliest possible time now, Unix µs: the floor when only a floor,
    /// the round's own lower end in a contradiction.
    pub earliest_us: Option<i128>,
    /// Latest possible time now (an interval or a contradiction).
    pub latest_us: Option<i128>,
    /// The round, its servers and its age, s (an interval or a
    /// contradiction).
    pub source: Option<(u64, Vec<String>, f64, String)>,
    /// The floor, Unix µs.
    pub floor_us: Option<i128>,
    /// The local clock when the floor was proven, Unix µs.
    pub floor_proven_us: Option<i128>,
    /// Seconds since then ([`Floor::age_s`]).
    pub floor_age_s: Option<f64>,
    /// The wall clock as read for this answer, Unix µs.
    pub wall_us: i128,
    /// Whether the wall clock lies inside what is known (`None`: nothing
    /// consistent is).
    pub wall_inside: Option<bool>,
    /// ρ.
    pub drift_ppm: u32,
    /// The time asked about (`at-least`) and whether it is proven that
    /// now is no earlier.
    pub at_least: Option<(i128, bool)>,
}

impl Known {
    /// The answer with the clocks at `now` and the wall clock at `wall_us`.
    pub fn answer(
        &self,
        now: &Reading,
        wall_us: i128,
        drift_ppm: u32,
        at_least: Option<i128>,
    ) -> Answer {
        let floor = self.floor.as_ref().map(|f| f.us);
        let (kind, earliest, latest, source) = match (&self.anchor, floor) {
            (Some(a), floor) => {
                let (lo, hi) = a.at(now, drift_ppm);
                let age = elapsed_ns(&a.at, now) as f64 / 1e9;
                let source = Some((a.round, a.servers.clone(), age, a.assumption.clone()));
                match floor {
                    // Clamping the floor into [lo, hi] would answer a
                    // zero-width interval that the evidence does not
                    // support: the two proofs disagree, and that is the
                    // answer.
                    Some(f) if f > hi => (Kind::Contradiction, Some(lo), Some(hi), source),
                    // The floor is a proof too (raised in a round whose
                    // anchor is older): it lifts the lower end.
                    f => (
                        Kind::Interval,
                        Some(f.map_or(lo, |f| lo.max(f))),
                        Some(hi),
                        source,
                    ),
                }
            }
            (None, Some(f)) => (Kind::Floor, Some(f), None, None),
            (None, None) => (Kind::None, None, None, None),
        };
        let consistent = kind != Kind::Contradiction;
        let wall_inside = earliest
            .filter(|_| consistent)
            .map(|lo| lo <= wall_us && latest.is_none_or(|hi| wall_us <= hi));
        Answer {
            kind,
            earliest_us: earliest,
            latest_us: latest,
            source,
            floor_us: floor,
            floor_proven_us: self.floor.as_ref().and_then(|f| f.proven_at_us),
            floor_age_s: self.floor.as_ref().and_then(|f| f.age_s(now, wall_us)),
            wall_us,
            wall_inside,
            drift_ppm,
            at_least: at_least.map(|t| (t, consistent && earliest.is_some_and(|lo| lo >= t))),
        }
    }
}

impl Answer {
    /// The JSON object, every member always present (null when unknown);
    /// docs/NOW.md describes each.
    pub fn to_json(&self) -> Value {
        let int = |v: Option<i128>| v.map(|v| v as i64);
        let ms = |s: f64| (s * 1000.0).round() / 1000.0;
        json!({
            "v": VERSION,
            "known": self.kind.word(),
            "earliest_unix_us": int(self.earliest_us),
            "latest_unix_us": int(self.latest_us),
            "source": self.source.as_ref().map(|(round, servers, age, assumption)| json!({
                "round": round,
                "servers": servers,
                "age_s": ms(*age),
                "assumption": assumption,
            })),
            "floor_unix_us": int(self.floor_us),
            "floor_proven_unix_us": int(self.floor_proven_us),
            "floor_age_s": self.floor_age_s.map(ms),
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

/// What the service knows, shared with the socket's threads, and the
/// clock it is read against. The service writes; clients only read a
/// copy.
#[derive(Debug)]
pub struct Board {
    known: Mutex<Known>,
    clock: Arc<dyn Clock>,
}

impl Default for Board {
    fn default() -> Board {
        Board::new(None, Arc::new(KernelClock))
    }
}

impl Board {
    /// A board that knows `floor` (from the state file), read against
    /// `clock`.
    pub fn new(floor: Option<Floor>, clock: Arc<dyn Clock>) -> Board {
        Board {
            known: Mutex::new(Known {
                anchor: None,
                floor,
            }),
            clock,
        }
    }

    /// A board on the kernel's clocks that knows a bare floor.
    pub fn with_floor(floor_us: Option<i128>) -> Board {
        Board::new(floor_us.map(Floor::bare), Arc::new(KernelClock))
    }

    /// The clocks now.
    pub fn read(&self) -> Reading {
        self.clock.read()
    }

    /// A copy of what is known.
    pub fn known(&self) -> Known {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The answer now.
    pub fn answer(&self, drift_ppm: u32, at_least: Option<i128>) -> Answer {
        let now = self.read();
        self.known().answer(&now, wall_us(), drift_ppm, at_least)
    }

    /// After a round: the floor, and the anchor when the round proved one.
    /// A floor without a reading that is the one already known keeps the
    /// reading of the round that proved it.
    pub fn update(&self, anchor: Option<Anchor>, floor: Option<Floor>) {
        let mut k = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if anchor.is_some() {
            k.anchor = anchor;
        }
        let old = k.floor.take();
        k.floor = floor.map(|mut f| {
            if let Some(o) = old.filter(|o| f.proven_reading.is_none() && o.us == f.us) {
                f.proven_reading = o.proven_reading;
            }
            f
        });
    }
}

/// CLOCK_BOOTTIME, ns: what a round's end is stamped with
/// (`Round::ended_boot_ns`), from which [`Anchor::pin`] measures the
/// moment until the anchor. It cannot fail for this clock on Linux ≥
/// 2.6.39.
pub fn boot_ns() -> i128 {
    ns(rustix::time::ClockId::Boottime)
}

/// The wall clock (CLOCK_REALTIME), Unix µs.
pub fn wall_us() -> i128 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i128,
        Err(e) => -(e.duration().as_micros() as i128),
    }
}

#[cfg(test)]
mod tests;
