//! What to do with a consensus: step the clock or not (`--set-clock`),
//! is the clock good (`--check`), and what floor it proves. Pure
//! functions of numbers, so every refusal is tested without a clock.
//!
//! Offsets are server time minus local time, µs; the consensus interval
//! [low, high] holds the true offset when the agreeing servers are honest.
//! The local clock is inside it when low ≤ 0 ≤ high.

/// A consensus as the decisions see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// Smallest offset the agreeing servers allow, µs.
    pub low_us: i128,
    /// Largest, µs.
    pub high_us: i128,
    /// Servers that agree.
    pub agreeing: usize,
}

impl Evidence {
    /// Half the width, µs.
    pub fn radius_us(&self) -> i128 {
        (self.high_us - self.low_us) / 2
    }

    /// The middle, µs.
    pub fn midpoint_us(&self) -> i128 {
        self.low_us + (self.high_us - self.low_us) / 2
    }
}

/// What `--set-clock` may rely on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRules {
    /// Servers that must agree.
    pub quorum: usize,
    /// The widest consensus (radius, µs) the clock is set from.
    pub max_radius_us: i128,
    /// The last proven time, Unix µs: never step below it.
    pub floor_us: Option<i128>,
}

/// The outcome of `--set-clock`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepPlan {
    /// The local clock is inside the consensus interval: nothing to do.
    Inside,
    /// Set the clock from `from_us` (the local clock now) to `to_us`.
    Step {
        /// Local clock, Unix µs.
        from_us: i128,
        /// Consensus midpoint, Unix µs.
        to_us: i128,
    },
    /// Not safe to step.
    Refused(Refusal),
}

/// Why the clock is not stepped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No consensus at all (too few answers, no majority).
    NoConsensus,
    /// Fewer servers agree than the quorum.
    Quorum {
        /// How many agree.
        agreeing: usize,
        /// How many must.
        quorum: usize,
    },
    /// The consensus is wider than allowed.
    TooWide {
        /// Its radius, µs.
        radius_us: i128,
        /// The limit, µs.
        max_us: i128,
    },
    /// The step would land below the last proven time.
    BelowFloor {
        /// Where it would land, Unix µs.
        target_us: i128,
        /// The floor, Unix µs.
        floor_us: i128,
    },
}

/// Whether `evidence` may be trusted at all: quorum (and a consensus).
pub fn trusted(evidence: Option<&Evidence>, quorum: usize) -> Result<&Evidence, Refusal> {
    let e = evidence.ok_or(Refusal::NoConsensus)?;
    if e.agreeing < quorum {
        return Err(Refusal::Quorum {
            agreeing: e.agreeing,
            quorum,
        });
    }
    Ok(e)
}

/// The step `--set-clock` makes, with the local clock at `local_now_us`.
pub fn plan_step(evidence: Option<&Evidence>, rules: &StepRules, local_now_us: i128) -> StepPlan {
    let e = match trusted(evidence, rules.quorum) {
        Ok(e) => e,
        Err(r) => return StepPlan::Refused(r),
    };
    if e.radius_us() > rules.max_radius_us {
        return StepPlan::Refused(Refusal::TooWide {
            radius_us: e.radius_us(),
            max_us: rules.max_radius_us,
        });
    }
    if e.low_us <= 0 && 0 <= e.high_us {
        return StepPlan::Inside;
    }
    let to_us = local_now_us + e.midpoint_us();
    if let Some(floor_us) = rules.floor_us {
        if to_us < floor_us {
            return StepPlan::Refused(Refusal::BelowFloor {
                target_us: to_us,
                floor_us,
            });
        }
    }
    StepPlan::Step {
        from_us: local_now_us,
        to_us,
    }
}

/// `--check`: whether the local clock is inside the consensus interval
/// widened by `max_offset_us` on both sides.
pub fn clock_ok(e: &Evidence, max_offset_us: i128) -> bool {
    e.low_us - max_offset_us <= 0 && 0 <= e.high_us + max_offset_us
}

/// The floor a consensus proves, measured when the local clock read
/// `local_now_us`: the lower bound, local + low. The true time is at
/// least that if the agreeing servers are honest, and the true time only
/// grows, so it stays a lower bound forever. The midpoint or the upper
/// bound would not: a floor above the true time would later refuse a
/// correct step, and servers within the radius could push it there.
pub fn proven_floor(e: &Evidence, local_now_us: i128) -> i128 {
    local_now_us + e.low_us
}

/// The new floor: the larger of the old one and what `e` proves.
pub fn raise_floor(old: Option<i128>, e: &Evidence, local_now_us: i128) -> i128 {
    let new = proven_floor(e, local_now_us);
    old.map_or(new, |o| o.max(new))
}

/// Whether `e`, measured when the local clock read `local_now_us`, lies
/// wholly below `floor`: its upper end, local + high, is earlier than a
/// time this machine proved had passed. Then the round or the floor is
/// wrong, and which cannot be told from here: a floor planted in the
/// state or proven by liars, liars in this round, or a clock outside its
/// drift bound. The floor is not lowered (the round may be the liar);
/// the operator is told, and the now socket answers a contradiction.
pub fn below_floor(floor: Option<i128>, e: &Evidence, local_now_us: i128) -> bool {
    floor.is_some_and(|f| local_now_us + e.high_us < f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000;
    const NOW: i128 = 1_800_000_000 * S;

    fn ev(low: i128, high: i128, agreeing: usize) -> Evidence {
        Evidence {
            low_us: low,
            high_us: high,
            agreeing,
        }
    }

    fn rules(floor: Option<i128>) -> StepRules {
        StepRules {
            quorum: 2,
            max_radius_us: 10 * S,
            floor_us: floor,
        }
    }

    #[test]
    fn steps_forward_backward_or_not_at_all() {
        // Local clock 100 s behind: the servers are 99..101 s ahead.
        let behind = ev(99 * S, 101 * S, 3);
        assert_eq!(
            plan_step(Some(&behind), &rules(None), NOW),
            StepPlan::Step {
                from_us: NOW,
                to_us: NOW + 100 * S
            }
        );
        let ahead = ev(-101 * S, -99 * S, 3);
        assert_eq!(
            plan_step(Some(&ahead), &rules(None), NOW),
            StepPlan::Step {
                from_us: NOW,
                to_us: NOW - 100 * S
            }
        );
        let inside = ev(-S, 2 * S, 3);
        assert_eq!(
            plan_step(Some(&inside), &rules(None), NOW),
            StepPlan::Inside
        );
    }

    #[test]
    fn refuses_without_quorum_when_wide_or_below_the_floor() {
        assert_eq!(
            plan_step(None, &rules(None), NOW),
            StepPlan::Refused(Refusal::NoConsensus)
        );
        assert_eq!(
            plan_step(Some(&ev(99 * S, 101 * S, 1)), &rules(None), NOW),
            StepPlan::Refused(Refusal::Quorum {
                agreeing: 1,
                quorum: 2
            })
        );
        assert_eq!(
            plan_step(Some(&ev(80 * S, 120 * S, 3)), &rules(None), NOW),
            StepPlan::Refused(Refusal::TooWide {
                radius_us: 20 * S,
                max_us: 10 * S
            })
        );
        // Back 100 s, but this machine proved NOW − 50 s before.
        let floor = NOW - 50 * S;
        assert_eq!(
            plan_step(Some(&ev(-101 * S, -99 * S, 3)), &rules(Some(floor)), NOW),
            StepPlan::Refused(Refusal::BelowFloor {
                target_us: NOW - 100 * S,
                floor_us: floor
            })
        );
        // Forward past an old floor is fine.
        assert!(matches!(
            plan_step(Some(&ev(99 * S, 101 * S, 3)), &rules(Some(floor)), NOW),
            StepPlan::Step { .. }
        ));
    }

    #[test]
    fn the_floor_is_the_lower_bound_and_never_falls() {
        let e = ev(-2 * S, 4 * S, 3);
        // True time is at least local − 2 s: the floor may not be the
        // midpoint (+1 s) or the upper bound (+4 s), which honest servers
        // do not prove.
        assert_eq!(proven_floor(&e, NOW), NOW - 2 * S);
        assert_eq!(raise_floor(None, &e, NOW), NOW - 2 * S);
        assert_eq!(raise_floor(Some(NOW), &e, NOW), NOW);
        assert_eq!(raise_floor(Some(NOW - 10 * S), &e, NOW), NOW - 2 * S);
    }

    #[test]
    fn a_consensus_wholly_below_the_floor_contradicts_it() {
        let e = ev(-2 * S, 4 * S, 3);
        assert!(!below_floor(None, &e, NOW));
        // The upper end reaches the floor: the floor may be the truth.
        assert!(!below_floor(Some(NOW + 4 * S), &e, NOW));
        assert!(below_floor(Some(NOW + 4 * S + 1), &e, NOW));
        // A floor an hour ahead, then honest servers: contradicted, and
        // the floor is not lowered by the round.
        let hour = NOW + 3600 * S;
        assert!(below_floor(Some(hour), &e, NOW));
        assert_eq!(raise_floor(Some(hour), &e, NOW), hour);
    }

    #[test]
    fn check_widens_by_the_offset() {
        let e = ev(S, 3 * S, 3);
        assert!(!clock_ok(&e, 0));
        assert!(!clock_ok(&e, S / 2));
        assert!(clock_ok(&e, S));
        assert!(clock_ok(&ev(-S, S, 3), 0));
    }
}
