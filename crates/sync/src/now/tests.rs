use proptest::prelude::*;

use super::*;

const S: i128 = 1_000_000;
const T0: i128 = 1_800_000_000 * S;
const NS: i128 = 1_000_000_000;

/// Clocks that read `raw` s of raw clock, `mono` s of monotonic clock and
/// `asleep` s suspended.
fn reading(raw: i128, mono: i128, asleep: i128) -> Reading {
    Reading {
        raw_ns: raw,
        monotonic_ns: mono,
        boottime_ns: mono + asleep,
    }
}

/// Awake only: every clock at `ns`.
fn awake(ns: i128) -> Reading {
    reading(ns, ns, 0)
}

fn anchor(at: Reading, lo: i128, hi: i128) -> Anchor {
    Anchor {
        at,
        earliest_us: lo,
        latest_us: hi,
        round: 3,
        servers: vec!["a".into(), "b".into()],
        assumption: "assumes at most 1 of the 4 listed servers lies; 3 answered, 3 needed".into(),
    }
}

fn floor(us: i128) -> Option<Floor> {
    Some(Floor::bare(us))
}

#[test]
fn the_interval_widens_by_the_drift_bound_and_no_more() {
    let a = anchor(awake(5 * NS), T0 - S, T0 + S);
    assert_eq!(a.at(&awake(5 * NS), 100), (T0 - S, T0 + S));
    // 1000 s later at 100 ppm: ±0.1 s more.
    let (lo, hi) = a.at(&awake(1005 * NS), 100);
    assert_eq!(lo, T0 - S + 1000 * S - 100_000);
    assert_eq!(hi, T0 + S + 1000 * S + 100_000);
    // A reading before the anchor's is the anchor's.
    assert_eq!(a.at(&awake(0), 100), (T0 - S, T0 + S));
    // Rounding never narrows: 1 ns later the upper end moves by 1 µs.
    assert_eq!(a.at(&awake(5 * NS + 1), 0), (T0 - S, T0 + S + 1));
    // Only the raw clock counts while awake: the disciplined ones may
    // say anything.
    let slewed = reading(1005 * NS, 2000 * NS, 0);
    assert_eq!(a.at(&slewed, 100), (lo, hi));
    // A suspend counts at ρ too, plus the RTC's rounding.
    let (lo, hi) = a.at(&reading(5 * NS, 5 * NS, 1000 * NS), 100);
    assert_eq!(lo, T0 - S + 1000 * S - 100_000 - SUSPEND_SLACK_US);
    assert_eq!(hi, T0 + S + 1000 * S + 100_000 + SUSPEND_SLACK_US);
}

#[test]
fn pinning_grows_the_upper_end_by_the_moment_since_the_rounds_end() {
    let now = reading(7 * NS, 7 * NS, 3 * NS);
    // The round ended 2 ms of boot clock before the reading.
    let a = Anchor::pin(
        now,
        10 * NS - 2_000_000,
        (T0, T0 + S),
        4,
        vec![],
        String::new(),
    );
    assert_eq!(a.at, now);
    assert_eq!((a.earliest_us, a.latest_us), (T0, T0 + S + 2_500));
    // A round stamped after the reading (another clock) adds nothing.
    let b = Anchor::pin(now, 11 * NS, (T0, T0 + S), 4, vec![], String::new());
    assert_eq!(b.latest_us, T0 + S);
}

#[test]
fn the_answer_says_what_is_known() {
    let none = Known::default().answer(&awake(1), T0, 100, Some(T0));
    assert_eq!(none.kind, Kind::None);
    assert_eq!((none.wall_inside, none.at_least), (None, Some((T0, false))));
    let k = Known {
        anchor: None,
        floor: floor(T0),
    };
    let f = k.answer(&awake(1), T0 - 1, 100, Some(T0));
    assert_eq!(
        (f.kind, f.earliest_us, f.latest_us, f.floor_us),
        (Kind::Floor, Some(T0), None, Some(T0))
    );
    assert_eq!((f.wall_inside, f.at_least), (Some(false), Some((T0, true))));
    let k = Known {
        anchor: Some(anchor(awake(0), T0 - S, T0 + S)),
        floor: floor(T0 - 5 * S),
    };
    let i = k.answer(&awake(2 * NS), T0 + 2 * S, 100, None);
    assert_eq!(i.kind, Kind::Interval);
    assert_eq!(i.earliest_us, Some(T0 + S - 200));
    assert_eq!(i.latest_us, Some(T0 + 3 * S + 200));
    assert_eq!(i.wall_inside, Some(true));
    assert_eq!(
        i.source,
        Some((
            3,
            vec!["a".into(), "b".into()],
            2.0,
            "assumes at most 1 of the 4 listed servers lies; 3 answered, 3 needed".into()
        ))
    );
    // A floor inside the interval lifts the lower end.
    let k = Known {
        floor: floor(T0 + S / 2),
        ..k
    };
    let i = k.answer(&awake(0), T0, 100, Some(T0 + S / 2));
    assert_eq!(i.kind, Kind::Interval);
    assert_eq!(
        (i.earliest_us, i.latest_us),
        (Some(T0 + S / 2), Some(T0 + S))
    );
    assert_eq!(i.at_least, Some((T0 + S / 2, true)));
}

/// The reported attack: a floor poisoned to an hour ahead, then honest
/// rounds. Clamping it into their interval answered [hi, hi], exit 0;
/// the answer is a contradiction, with both proofs in it, and nothing
/// is proven past.
#[test]
fn a_round_wholly_below_the_floor_is_a_contradiction() {
    let k = Known {
        anchor: Some(anchor(awake(0), T0 - S, T0 + S)),
        floor: floor(T0 + 3600 * S),
    };
    let c = k.answer(&awake(NS), T0 + S, 100, Some(T0 - 3600 * S));
    assert_eq!(c.kind, Kind::Contradiction);
    assert_eq!(
        (c.earliest_us, c.latest_us, c.floor_us),
        (Some(T0 - 100), Some(T0 + 2 * S + 100), Some(T0 + 3600 * S))
    );
    assert_eq!(c.at_least, Some((T0 - 3600 * S, false)));
    assert_eq!(c.wall_inside, None);
    assert_eq!(c.source.as_ref().map(|s| s.0), Some(3));
    assert_eq!(c.to_json()["known"], "contradiction");
    // The upper end at the floor is no contradiction: the floor may be
    // the true time.
    let k = Known {
        floor: floor(T0 + 2 * S + 100),
        ..k
    };
    let i = k.answer(&awake(NS), T0 + S, 100, None);
    assert_eq!(i.kind, Kind::Interval);
    assert_eq!(i.earliest_us, i.latest_us);
}

#[test]
fn the_floors_age_is_by_the_clocks_in_this_run_else_by_the_wall_clock() {
    let mut f = Floor {
        us: T0,
        proven_at_us: Some(T0 + S),
        proven_reading: None,
    };
    assert_eq!(f.age_s(&awake(0), T0 + 61 * S), Some(60.0));
    // Proven in this run: the wall clock does not enter.
    f.proven_reading = Some(reading(10 * NS, 10 * NS, 0));
    assert_eq!(f.age_s(&reading(40 * NS, 99 * NS, 60 * NS), 0), Some(90.0));
    assert_eq!(Floor::bare(T0).age_s(&awake(0), T0), None);
    // A board keeps the reading of the round that proved the floor
    // while later rounds leave it where it is.
    let b = Board::new(None, Arc::new(KernelClock));
    b.update(None, Some(f.clone()));
    let again = Floor {
        proven_reading: None,
        ..f.clone()
    };
    b.update(None, Some(again));
    assert_eq!(b.known().floor, Some(f));
    b.update(None, Some(Floor::bare(T0 + 1)));
    assert_eq!(b.known().floor, Some(Floor::bare(T0 + 1)));
}

/// The wire format, pinned: docs/NOW.md documents these members.
#[test]
fn the_json_has_every_documented_member() {
    let k = Known {
        anchor: Some(anchor(awake(0), T0 - S, T0 + S)),
        floor: Some(Floor {
            us: T0 - 9 * S,
            proven_at_us: Some(T0 - 8 * S),
            proven_reading: Some(awake(0)),
        }),
    };
    let j = k
        .answer(&awake(1_500_000_000), T0 + S, 100, Some(T0 - 9 * S))
        .to_json();
    assert_eq!(
        j,
        json!({
            "v": 1,
            "known": "interval",
            "earliest_unix_us": (T0 + S / 2 - 150) as i64,
            "latest_unix_us": (T0 + S + 3 * S / 2 + 150) as i64,
            "source": {"round": 3, "servers": ["a", "b"], "age_s": 1.5,
                "assumption": "assumes at most 1 of the 4 listed servers lies; 3 answered, 3 needed"},
            "floor_unix_us": (T0 - 9 * S) as i64,
            "floor_proven_unix_us": (T0 - 8 * S) as i64,
            "floor_age_s": 1.5,
            "wall_clock_unix_us": (T0 + S) as i64,
            "wall_clock_inside": true,
            "drift_ppm": 100,
            "at_least_unix_us": (T0 - 9 * S) as i64,
            "at_least_proven": true,
        })
    );
    let j = Known::default().answer(&awake(0), T0, 100, None).to_json();
    assert_eq!(
        j,
        json!({
            "v": 1, "known": "none", "earliest_unix_us": null, "latest_unix_us": null,
            "source": null, "floor_unix_us": null, "floor_proven_unix_us": null,
            "floor_age_s": null, "wall_clock_unix_us": T0 as i64, "wall_clock_inside": null,
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
fn the_kernels_clocks_read_together_and_move_forward() {
    let a = KernelClock.read();
    let b = KernelClock.read();
    assert!(a.raw_ns > 0 && b.raw_ns >= a.raw_ns, "{a:?} {b:?}");
    // The boot clock is read before the monotonic one.
    assert!(a.boottime_ns + BRACKET_NS >= a.monotonic_ns, "{a:?}");
    assert!(b.suspended_ns() >= a.suspended_ns(), "{a:?} {b:?}");
    let boot = boot_ns();
    assert!(boot >= b.boottime_ns, "{boot} {b:?}");
}

/// A clock whose rates the test sets: true time advances, the raw clock
/// runs within ρ of it, the disciplined clocks (monotonic, boot) run at
/// whatever rate NTP or an attacker steering it makes them.
#[derive(Debug, Default)]
struct Steered {
    now: Mutex<Reading>,
}

impl Clock for Steered {
    fn read(&self) -> Reading {
        *self.now.lock().unwrap()
    }
}

impl Steered {
    /// `true_ns` of true time awake, the raw clock off by `raw_ppm`, the
    /// disciplined ones by `slew_ppm`.
    fn run(&self, true_ns: i128, raw_ppm: i128, slew_ppm: i128) {
        let mut r = self.now.lock().unwrap();
        r.raw_ns += true_ns * (1_000_000 + raw_ppm) / 1_000_000;
        let mono = true_ns * (1_000_000 + slew_ppm) / 1_000_000;
        r.monotonic_ns += mono;
        r.boottime_ns += mono;
    }

    /// Suspended for `true_ns`, which the kernel measured as `measured_ns`.
    fn suspend(&self, measured_ns: i128) {
        self.now.lock().unwrap().boottime_ns += measured_ns;
    }
}

/// What the anchor arithmetic gave before it read the raw clock: the boot
/// clock since the anchor, widened by ρ.
fn on_the_boot_clock(a: &Anchor, now: &Reading, drift_ppm: u32) -> (i128, i128) {
    let (slow, fast) = span_us((now.boottime_ns - a.at.boottime_ns).max(0), drift_ppm);
    (a.earliest_us + slow, a.latest_us + fast)
}

/// chrony slewing at its largest rate (83,333 ppm), adjtimex's tick at
/// ±10 %, either way, for the 10 minutes between two rounds, with the raw
/// oscillator true or off by ρ: the answer holds the true time; the same
/// arithmetic on the boot clock misses it every time.
#[test]
fn a_slewed_boot_clock_leaves_the_interval_on_the_true_time() {
    for slew in [83_333, -83_333, 100_000, -100_000] {
        for raw in [0, 100, -100] {
            let clock = Arc::new(Steered::default());
            clock.run(1000 * NS, 0, 0);
            let board = Board::new(None, clock.clone());
            // True time T0, proven to ±1 s.
            let ended = board.read().boottime_ns;
            board.update(
                Some(Anchor::pin(
                    board.read(),
                    ended,
                    (T0 - S, T0 + S),
                    1,
                    vec![],
                    String::new(),
                )),
                None,
            );
            clock.run(600 * NS, raw, slew);
            let truth = T0 + 600 * S;
            let a = board.answer(100, None);
            let (lo, hi) = (a.earliest_us.unwrap(), a.latest_us.unwrap());
            assert!(
                lo <= truth && truth <= hi,
                "slew {slew} raw {raw}: [{lo}, {hi}]"
            );
            let (old_lo, old_hi) =
                on_the_boot_clock(board.known().anchor.as_ref().unwrap(), &board.read(), 100);
            assert!(
                truth < old_lo || old_hi < truth,
                "slew {slew}: the boot clock's [{old_lo}, {old_hi}] held {truth} too"
            );
        }
    }
}

/// An hour's suspend that the RTC measured a whole second short, between
/// slewed awake stretches: the interval holds the true time.
#[test]
fn a_suspend_counts_as_the_kernel_measured_it_plus_the_rtcs_rounding() {
    let clock = Arc::new(Steered::default());
    let board = Board::new(None, clock.clone());
    board.update(
        Some(Anchor::pin(
            board.read(),
            0,
            (T0, T0),
            1,
            vec![],
            String::new(),
        )),
        None,
    );
    clock.run(100 * NS, 100, 83_333);
    clock.suspend(3599 * NS);
    clock.run(100 * NS, -100, -100_000);
    let truth = T0 + 3800 * S;
    let a = board.answer(100, None);
    let (lo, hi) = (a.earliest_us.unwrap(), a.latest_us.unwrap());
    assert!(lo <= truth && truth <= hi, "[{lo}, {hi}] misses {truth}");
    // Without the RTC's second the upper end would have missed it.
    assert!(hi - SUSPEND_SLACK_US < truth, "[{lo}, {hi}]");
}

proptest! {
    /// For any anchor and any later reading: a true time that was inside
    /// the anchor and advanced, while awake, at a rate within ρ of the raw
    /// clock's and, while suspended, within ρ of the kernel's measure of
    /// the suspend give or take a second (the RTC's rounding), and the
    /// suspended time read off by the reads' timing (less than
    /// BRACKET_NS, suspended or not), stays
    /// inside the answer. The rates are (10^6 + k) / 10^6 with |k| ≤ ρ
    /// ppm, and the comparison is exact (in units of 10^-9 µs). The
    /// disciplined clocks' rate is anything: the answer must not depend
    /// on it.
    #[test]
    fn true_time_stays_inside(
        raw0 in 0i128..1_000_000_000_000_000,
        mono0 in 0i128..1_000_000_000_000_000,
        asleep0 in 0i128..1_000_000_000_000_000,
        lo in -4_000_000_000_000_000i128..4_000_000_000_000_000,
        width in 0i128..10_000_000_000,
        at in 0u32..=1_000_000,
        elapsed in 0i128..100_000_000_000_000_000,
        mono_elapsed in 0i128..200_000_000_000_000_000,
        asleep in prop_oneof![Just(0i128), 2 * BRACKET_NS..10_000_000_000_000_000],
        rtc in -1_000_000_000i128..=1_000_000_000,
        jitter in -BRACKET_NS + 1..BRACKET_NS,
        ppm in 0u32..=10_000,
        k_frac in 0u32..=1_000_000,
        j_frac in 0u32..=1_000_000,
    ) {
        let a = anchor(reading(raw0, mono0, asleep0), lo, lo + width);
        // The true time at the anchor, somewhere in it.
        let t0 = lo + width * i128::from(at) / 1_000_000;
        let rho = i128::from(ppm);
        // k, j in [-ρ, ρ].
        let k = -rho + (2 * rho * i128::from(k_frac)) / 1_000_000;
        let j = -rho + (2 * rho * i128::from(j_frac)) / 1_000_000;
        // The suspended time as read: off by the reads' timing.
        let now = reading(raw0 + elapsed, mono0 + mono_elapsed, asleep0 + asleep + jitter);
        let (e, l) = a.at(&now, ppm);
        // An uncounted suspend is the kernel's to miss, not ours: the
        // rounding only applies to one it counted.
        let rounding = if asleep > 0 { rtc } else { 0 };
        // True time then, × 10^9.
        let t = t0 * 1_000_000_000
            + elapsed * (1_000_000 + k)
            + asleep * (1_000_000 + j)
            + rounding * 1_000_000;
        prop_assert!(e * 1_000_000_000 <= t, "earliest {e} above true {t}");
        prop_assert!(t <= l * 1_000_000_000, "latest {l} below true {t}");
    }
}
