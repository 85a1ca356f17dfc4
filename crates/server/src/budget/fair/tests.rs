//! The fair budget against floods, newcomers, rotation and any mix of
//! prefixes: simulated time, fixed costs, a fixed hash key.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;

use super::*;

/// A fixed key, so that tables repeat from run to run.
type Fixed = BuildHasherDefault<DefaultHasher>;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

fn budget(share_ppm: u32, burst_us: u64) -> FairBudget<Fixed> {
    FairBudget::new(share_ppm, burst_us, SLOTS, Fixed::default())
}

/// `n` prefixes in `n` distinct slots of `b`'s table.
fn prefixes(b: &FairBudget<Fixed>, n: usize) -> Vec<IpAddr> {
    let mut slots = HashSet::new();
    (1u32..)
        .map(|x| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + x)))
        .filter(|ip| slots.insert(b.hasher.hash_one(ip) as usize & (b.slots() - 1)))
        .take(n)
        .collect()
}

/// Counts of one simulated run.
#[derive(Debug, Default)]
struct Tally {
    admitted: u64,
    refused: u64,
}

impl Tally {
    /// One request of `p` at `now` whose answer takes `cost`, answered at
    /// once when admitted.
    fn ask(&mut self, b: &mut FairBudget<Fixed>, p: IpAddr, now: u64, cost: u64) -> bool {
        match b.admit(p, now) {
            Some(t) => {
                b.settle(&[t], 1, cost);
                self.admitted += 1;
                true
            }
            None => {
                self.refused += 1;
                false
            }
        }
    }
}

#[test]
fn a_flood_from_one_prefix_leaves_another_its_share() {
    // A quarter of the time, a 100 ms burst; answers of 100 µs.
    let (share, cost) = (250_000, 100 * US);
    let mut b = budget(share, 100_000);
    let p = prefixes(&b, 2);
    let (mut flood, mut client) = (Tally::default(), Tally::default());
    let mut now = 0;
    // The flood asks every 10 µs (ten times what the whole budget pays
    // for); the client every 2 ms (5 % of the time, under its 12.5 %).
    while now < 5 * SEC {
        now += 10 * US;
        flood.ask(&mut b, p[0], now, cost);
        if now % (2 * MS) == 0 {
            client.ask(&mut b, p[1], now, cost);
        }
    }
    assert_eq!(client.refused, 0, "{client:?}");
    assert_eq!(client.admitted, 2_500);
    // The flood gets its half of the share (625 ms in 5 s), within a
    // burst (25 ms) either way, and no more: what the client leaves of
    // its own half is not handed to the flood.
    let flooded = flood.admitted * cost;
    assert!(
        (600 * MS..=650 * MS).contains(&flooded),
        "{flood:?}: {flooded} ns"
    );
    assert!(flood.refused > 50 * flood.admitted, "{flood:?}");
}

#[test]
fn a_prefix_alone_gets_the_whole_share() {
    let mut b = budget(250_000, 100_000);
    let p = prefixes(&b, 1)[0];
    let mut t = Tally::default();
    let mut now = 0;
    while now < 10 * SEC {
        now += 10 * US;
        t.ask(&mut b, p, now, 100 * US);
    }
    // 2.5 s of signing in 10 s, within a burst either way.
    let spent = t.admitted * 100 * US;
    assert!(
        (2_475 * MS..=2_525 * MS).contains(&spent),
        "{t:?}: {spent} ns"
    );
}

#[test]
fn a_newcomer_is_answered_at_once_during_floods() {
    for flooders in 1..=4 {
        let mut b = budget(250_000, 100_000);
        let p = prefixes(&b, flooders + 1);
        let mut flood = Tally::default();
        let mut now = 0;
        // The flooders arrive one after the other, each 100 ms after the
        // last, and flood for a second: the hardest case for the room
        // kept in the pool.
        while now < SEC + flooders as u64 * 100 * MS {
            now += 10 * US;
            for (i, &f) in p[..flooders].iter().enumerate() {
                if now >= i as u64 * 100 * MS {
                    flood.ask(&mut b, f, now, 100 * US);
                }
            }
        }
        assert!(flood.refused > 0);
        let mut newcomer = Tally::default();
        assert!(
            newcomer.ask(&mut b, p[flooders], now, 100 * US),
            "{flooders} flooders: the newcomer's first request was refused"
        );
    }
}

#[test]
fn rotating_prefixes_get_no_more_than_the_pool() {
    // Every request from a prefix never seen before (a /64 each, say).
    let mut b = budget(250_000, 100_000);
    let mut t = Tally::default();
    let mut now = 0;
    let mut x = 0u32;
    while now < 4 * SEC {
        now += 10 * US;
        x += 1;
        t.ask(&mut b, IpAddr::V4(Ipv4Addr::from(x)), now, 100 * US);
    }
    let spent = t.admitted * 100 * US;
    assert!(spent <= 25 * MS + SEC, "{t:?}: {spent} ns");
    assert_eq!(b.slots(), SLOTS);
}

#[test]
fn a_burst_is_one_burst_whoever_holds_it() {
    // 90 % of the time, a 100 ms burst: 90 ms of credit at most.
    let mut b = budget(900_000, 100_000);
    let p = prefixes(&b, 24);
    let mut t = Tally::default();
    // Four prefixes ask once and take what the pool gives them...
    for &q in &p[..4] {
        t.ask(&mut b, q, 1, US);
    }
    // ...the pool fills again for 100 ms, and then the four and twenty
    // newcomers ask as much as they can at one instant: what the slots
    // held and what the pool held is one burst, not two.
    let now = 100 * MS;
    let before = t.admitted;
    for &q in &p {
        while t.ask(&mut b, q, now, 100 * US) {}
    }
    let burst = (t.admitted - before) * 100 * US;
    assert!(burst <= 90 * MS, "{burst} ns at one instant");
    assert!(burst >= 80 * MS, "{burst} ns: the burst was not there");
}

#[test]
fn answers_nobody_was_charged_for_come_from_the_pool() {
    // A 10 ms burst at 50 %: 5 ms of credit, 2.5 ms of it in the pool
    // once one prefix has its cap.
    let mut b = budget(500_000, 10_000);
    let p = prefixes(&b, 1)[0];
    let t = b.admit(p, 1).unwrap();
    // One charged answer and nine allow-listed ones took 10 ms together:
    // the prefix pays 1 ms, the pool 9 (down to its floor, -5 ms).
    b.settle(&[t], 10, 10 * MS);
    assert_eq!(b.pool.credit_ns, -5 * MS as i64);
    // A newcomer finds no room in the pool: nothing to give it yet.
    let q = prefixes(&b, 2)[1];
    assert!(b.admit(q, 2).is_none());
}

#[test]
fn a_reload_hands_out_no_fresh_burst() {
    let mut b = budget(250_000, 10_000);
    let p = prefixes(&b, 1)[0];
    let mut t = Tally::default();
    while t.ask(&mut b, p, 1, 100 * US) {}
    b.reconfigure(500_000, 20_000);
    assert!(b.admit(p, 1).is_none(), "a reload refilled the prefix");
    // Unlimited: everything, with tickets that settle nothing.
    b.reconfigure(1_000_000, 20_000);
    assert!(!b.limited());
    assert!((0..1000).all(|_| b.admit(p, 2) == Some(Ticket::FREE)));
}

/// One prefix's demand: `per_tick` requests every tick while on, on for
/// `on_ms` then off for `off_ms`, starting after `start_ms`.
#[derive(Clone, Debug)]
struct Demand {
    per_tick: u32,
    on_ms: u64,
    off_ms: u64,
    start_ms: u64,
}

impl Demand {
    fn asks(&self, now: u64) -> u32 {
        let ms = now / MS;
        if ms < self.start_ms {
            return 0;
        }
        let phase = (ms - self.start_ms) % (self.on_ms + self.off_ms);
        if phase < self.on_ms {
            self.per_tick
        } else {
            0
        }
    }
}

fn demand() -> impl Strategy<Value = Demand> {
    (0u32..=4, 1u64..=3000, 0u64..=3000, 0u64..=2000).prop_map(
        |(per_tick, on_ms, off_ms, start_ms)| Demand {
            per_tick,
            on_ms,
            off_ms,
            start_ms,
        },
    )
}

/// Simulated run: `others` ask as they like, a modest prefix asks one
/// request every `every` ns; every answer takes `cost`. Returns the
/// modest prefix's tally, everyone's, and the time simulated.
fn run(
    share_ppm: u32,
    burst_us: u64,
    cost: u64,
    others: &[Demand],
    every: u64,
) -> (Tally, Tally, u64) {
    const TICK: u64 = 100 * US;
    const LENGTH: u64 = 4 * SEC;
    let mut b = budget(share_ppm, burst_us);
    let p = prefixes(&b, others.len() + 1);
    let (mut modest, mut all) = (Tally::default(), Tally::default());
    let mut next = every;
    let mut now = 0;
    while now < LENGTH {
        now += TICK;
        // Who asks first within a tick changes from tick to tick.
        let turn = (now / TICK) as usize;
        for j in 0..others.len() {
            let i = (j + turn) % others.len();
            for _ in 0..others[i].asks(now) {
                all.ask(&mut b, p[i + 1], now, cost);
            }
        }
        while next <= now {
            let ok = modest.ask(&mut b, p[0], now, cost);
            all.admitted += u64::from(ok);
            all.refused += u64::from(!ok);
            next += every;
        }
        assert_eq!(b.slots(), SLOTS, "the table grew");
    }
    (modest, all, LENGTH)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// With k prefixes asking (each flooding, pausing or quiet as it
    /// likes), one that asks at most its share (share / k, here with 10 %
    /// to spare) is never refused, and nobody gets more than the pool:
    /// one burst and the share of the time.
    #[test]
    fn a_prefix_within_its_share_is_never_refused(
        others in proptest::collection::vec(demand(), 0..8),
        share_ppm in 50_000u32..=900_000,
        cost_us in 20u64..=400,
    ) {
        let k = others.len() as u64 + 1;
        let cost = cost_us * US;
        // A burst of at least (k + 2) answers at twice their cost: room for
        // each prefix's cap and a newcomer's, whatever the first estimate.
        let burst_us = (2 * (k + 2) * cost * 1_000_000 / u64::from(share_ppm)).div_ceil(1_000).max(1_000);
        let every = cost * k * 1_000_000 / u64::from(share_ppm) * 11 / 10;
        let (modest, all, length) = run(share_ppm, burst_us, cost, &others, every);
        prop_assert_eq!(modest.refused, 0, "{:?}", modest);
        let bound = (burst_us * 1_000 + length) * u64::from(share_ppm) / 1_000_000;
        prop_assert!(all.admitted * cost <= bound + cost, "{} ns spent, bound {}", all.admitted * cost, bound);
    }

    /// Whoever asks, from however many prefixes and however bunched,
    /// signing in any interval never takes more than one burst and the
    /// share of the interval (and what is still owed: answers that took
    /// longer than their estimate, each admitted while its slot held the
    /// estimate), and the table stays as it was made.
    #[test]
    fn the_total_never_passes_the_pool(
        asks in proptest::collection::vec((prop_oneof![0u32..16, 0u32..50_000], prop_oneof![Just(0u64), 0u64..=2_000, 0u64..=200_000], 1u64..=300), 1..3000),
        share_ppm in 10_000u32..=900_000,
        burst_ms in 1u64..=200,
    ) {
        let mut b = budget(share_ppm, burst_ms * 1_000);
        let share = i128::from(share_ppm);
        let cap = i128::from(burst_ms * MS) * share / 1_000_000;
        let mut now = 0;
        let mut spent = 0i128;
        // Spent minus the share of the time so far, and its least value
        // before each request: their difference is the most any interval
        // ending now has taken beyond its share.
        let mut least = 0i128;
        for (who, gap_us, cost_us) in asks {
            now += gap_us * US;
            let earned = i128::from(now) * share / 1_000_000;
            least = least.min(spent - earned);
            // At most half a burst each: no debt past the floor to forgive.
            let cost = (i128::from(cost_us * US)).min(cap / 2).max(1);
            if let Some(t) = b.admit(IpAddr::V4(Ipv4Addr::from(who)), now) {
                b.settle(&[t], 1, cost as u64);
                spent += cost;
            }
            let owed: i128 = b.slots.iter().map(|s| i128::from((-s.credit_ns).max(0))).sum();
            prop_assert!(
                spent - earned - least <= cap + owed + 1,
                "{} ns beyond the share in one interval, burst {}, owed {}",
                spent - earned - least,
                cap,
                owed
            );
            prop_assert_eq!(b.slots(), SLOTS);
        }
    }
}
