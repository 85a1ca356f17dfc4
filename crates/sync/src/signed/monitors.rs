//! What sync keeps of each pinned monitor: its last accepted list (used
//! until its own expiry, whatever later fetches bring), why the last
//! fetch gave nothing new, and the sequences seen. Pure: no clock, no
//! I/O; the service gives it the time and the fetches, and the store
//! (`store`) saves and restores it.
//!
//! The assumption, as a number (gnomon_protocol::signed_list's): fewer
//! than K of the pinned keys are held by an adversary, who also owns the
//! network. What this adds to the check of each list:
//!
//! - a monitor's list is replaced only by a list of that key accepted
//!   later, never by nothing: a fetch that fails or is refused keeps the
//!   last good one, which counts until its own expiry and no longer;
//! - expiry is judged at [`judged_now`]: the later of the local clock and
//!   the last proven lower bound on the true time (the floor, a
//!   consensus), so a clock far behind cannot keep a list alive;
//! - with fewer than K lists in force, the merge names no server: sync
//!   then has no time from the lists, rather than one monitor's.
//!
//! The property tests (`tests`) hold these against an adversary that
//! drops, tampers, replays old lists and signs with the keys it holds.
//!

use gnomon_protocol::signed_list::{format_utc, Accepted, Merged, Pins, Seen};

use super::fetch::{Fetch, NotAccepted};
use super::key_name;

/// A monitor's last accepted list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// The list, as checked.
    pub list: Accepted,
    /// The URL it came from.
    pub url: String,
    /// When it was fetched (the judged time then), Unix seconds.
    pub fetched_unix: i64,
}

/// One pinned key's place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    /// Its last accepted list.
    pub kept: Option<Kept>,
    /// Why the last fetch brought no list of this key, when it did not.
    pub failure: Option<String>,
}

/// Where a monitor's list stands at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// No list of this key was ever accepted (or kept across a restart).
    None,
    /// The last fetch brought it (or the list it has), and it is in force.
    Current,
    /// In force, though the last fetch failed or was refused.
    Kept,
    /// Its expiry has passed: it no longer counts.
    Expired,
}

impl Standing {
    /// The word status and metrics use.
    pub fn label(self) -> &'static str {
        match self {
            Standing::None => "none",
            Standing::Current => "current",
            Standing::Kept => "kept",
            Standing::Expired => "expired",
        }
    }
}

/// The time lists are judged at, Unix seconds: the later of the local
/// clock and `proven_unix`, a lower bound on the true time proven by a
/// consensus (or the floor), when there is one. A clock far behind
/// cannot keep an expired list in force once a round has had a
/// consensus; a clock far ahead expires lists early, which costs time
/// from them, never trust.
pub fn judged_now(local_unix: i64, proven_unix: Option<i64>) -> i64 {
    proven_unix.map_or(local_unix, |p| p.max(local_unix))
}

/// Every pinned monitor, in the order pinned.
#[derive(Clone, Debug)]
pub struct Monitors {
    pins: Pins,
    seen: Seen,
    slots: Vec<Slot>,
}

impl Monitors {
    /// Nothing kept yet, nothing seen.
    pub fn new(pins: Pins) -> Monitors {
        let slots = vec![Slot::default(); pins.keys().len()];
        Monitors {
            pins,
            seen: Seen::default(),
            slots,
        }
    }

    /// The pins.
    pub fn pins(&self) -> &Pins {
        &self.pins
    }

    /// The sequences seen, per key.
    pub fn seen(&self) -> &Seen {
        &self.seen
    }

    /// Each key's place, in pin order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Start from `seen` as saved (before any list is restored).
    pub fn restore_seen(&mut self, seen: Seen) {
        self.seen = seen;
    }

    /// Put back a list kept before a restart. `kept.list` must come from
    /// [`Pins::check`] against [`Monitors::seen`] (the store re-verifies
    /// what it reads); a list older than the one in its slot is ignored.
    pub fn restore(&mut self, kept: Kept) {
        self.keep(kept);
    }

    fn keep(&mut self, kept: Kept) -> bool {
        let Some(slot) = self.slots.get_mut(kept.list.key) else {
            return false;
        };
        if slot
            .kept
            .as_ref()
            .is_some_and(|k| k.list.header.sequence > kept.list.header.sequence)
        {
            return false;
        }
        self.seen.record(&self.pins, &kept.list);
        slot.kept = Some(kept);
        slot.failure = None;
        true
    }

    /// Take a fetch made at `fetched_unix`: each key's newest accepted
    /// list replaces the one kept; a key none of the URLs gave a list of
    /// keeps its list and is told why. The keys whose list was replaced.
    pub fn apply(&mut self, fetch: &Fetch, fetched_unix: i64) -> Vec<usize> {
        let mut replaced = Vec::new();
        for a in fetch.accepted() {
            let url = fetch
                .lists
                .iter()
                .find(|l| l.outcome.as_ref().is_ok_and(|o| o.sha256 == a.sha256))
                .map_or_else(String::new, |l| l.url.clone());
            let key = a.key;
            let kept = Kept {
                list: a,
                url,
                fetched_unix,
            };
            if self.keep(kept) {
                replaced.push(key);
            }
        }
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if replaced.contains(&i) {
                continue;
            }
            slot.failure = Some(why_nothing(fetch, slot.kept.as_ref()));
        }
        replaced
    }

    /// The lists in force at `now_unix` (not expired), in pin order.
    pub fn in_force(&self, now_unix: i64) -> Vec<Accepted> {
        self.slots
            .iter()
            .filter_map(|s| s.kept.as_ref())
            .filter(|k| now_unix < k.list.header.expires_unix)
            .map(|k| k.list.clone())
            .collect()
    }

    /// The k-of-n merge of the lists in force at `now_unix`.
    pub fn merged(&self, now_unix: i64) -> Merged {
        self.pins.merge(&self.in_force(now_unix), now_unix)
    }

    /// Where key `i`'s list stands at `now_unix`.
    pub fn standing(&self, i: usize, now_unix: i64) -> Standing {
        let Some(slot) = self.slots.get(i) else {
            return Standing::None;
        };
        match &slot.kept {
            None => Standing::None,
            Some(k) if now_unix >= k.list.header.expires_unix => Standing::Expired,
            Some(_) if slot.failure.is_some() => Standing::Kept,
            Some(_) => Standing::Current,
        }
    }

    /// Why the lists give no server at `now_unix`, when fewer than K are
    /// in force: which monitors' lists are missing or expired, and what
    /// to do. `None` when K or more are in force.
    pub fn shortfall(&self, now_unix: i64) -> Option<String> {
        let k = self.pins.threshold();
        let in_force = self.in_force(now_unix).len();
        if in_force >= k {
            return None;
        }
        let missing: Vec<String> = self
            .pins
            .keys()
            .iter()
            .enumerate()
            .filter_map(|(i, key)| {
                let why = match (self.standing(i, now_unix), &self.slots[i]) {
                    (Standing::Expired, s) => format!(
                        "its list (sequence {}) expired at {}{}",
                        s.kept.as_ref().map_or(0, |k| k.list.header.sequence),
                        format_utc(s.kept.as_ref().map_or(0, |k| k.list.header.expires_unix)),
                        s.failure.as_ref().map_or(String::new(), |f| format!(
                            " and the last fetch failed: {f}"
                        ))
                    ),
                    (Standing::None, s) => match &s.failure {
                        Some(f) => format!("no list accepted yet: {f}"),
                        None => "no list fetched yet".to_string(),
                    },
                    _ => return None,
                };
                Some(format!("{}: {why}", key_name(key)))
            })
            .collect();
        Some(format!(
            "no servers from the signed lists: {in_force} of the {n} pinned monitors' lists in \
             force, fewer than servers-threshold {k} ({}); the clock is not stepped from them \
             until enough monitors publish again (check that they run and that servers-url \
             reaches them)",
            missing.join("; "),
            n = self.pins.keys().len(),
        ))
    }
}

/// Why `fetch` brought no new list of a key whose kept list is `kept`:
/// the failure of the URL it came from, or else every URL's.
fn why_nothing(fetch: &Fetch, kept: Option<&Kept>) -> String {
    let failure_of = |l: &super::Fetched| l.outcome.as_ref().err().map(NotAccepted::to_string);
    if let Some(k) = kept {
        if let Some(l) = fetch.lists.iter().find(|l| l.url == k.url) {
            if let Some(why) = failure_of(l) {
                return format!("{}: {why}", l.url);
            }
        }
    }
    let all: Vec<String> = fetch
        .lists
        .iter()
        .filter_map(|l| failure_of(l).map(|why| format!("{}: {why}", l.url)))
        .collect();
    if all.is_empty() {
        "none of the servers-url gave a list signed by this key".to_string()
    } else {
        all.join("; ")
    }
}

#[cfg(test)]
mod tests;
