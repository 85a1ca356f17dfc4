//! A fixed-size log-linear latency histogram: 64 sub-buckets per power of
//! two, so any recorded value is reported within 1/64 (≈1.6 %) of itself,
//! with no allocation after creation and O(1) recording.

/// Sub-buckets per power of two, as a shift.
const SUB_BITS: u32 = 6;
const SUB: usize = 1 << SUB_BITS;
/// Values below `SUB` are exact; each higher power of two gets `SUB` buckets.
const BUCKETS: usize = SUB * (64 - SUB_BITS as usize + 1);

/// Latencies in nanoseconds.
#[derive(Clone)]
pub(crate) struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max: u64,
}

impl Histogram {
    pub(crate) fn new() -> Histogram {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            max: 0,
        }
    }

    pub(crate) fn record(&mut self, ns: u64) {
        self.counts[index(ns)] += 1;
        self.total += 1;
        self.max = self.max.max(ns);
    }

    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.total
    }

    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1): the upper edge of the bucket that
    /// holds it, never more than the largest value recorded. `None` when
    /// empty.
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(upper_edge(i).min(self.max));
            }
        }
        Some(self.max)
    }
}

fn index(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // ≥ SUB_BITS
    let sub = (v >> (exp - SUB_BITS)) as usize & (SUB - 1);
    (exp - SUB_BITS + 1) as usize * SUB + sub
}

fn upper_edge(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let exp = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = (i % SUB) as u64;
    let width = 1u64 << (exp - SUB_BITS);
    // (SUB + sub) * width is the bucket's lowest value.
    ((SUB as u64 + sub) * width).saturating_add(width - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_within_their_precision() {
        for v in [
            0u64,
            1,
            63,
            64,
            65,
            127,
            128,
            1000,
            123_456,
            1 << 40,
            u64::MAX,
        ] {
            let i = index(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            let hi = upper_edge(i);
            assert!(hi >= v, "{v}: edge {hi}");
            assert!(hi - v <= v / SUB as u64, "{v}: edge {hi} too coarse");
        }
    }

    #[test]
    fn quantiles_of_a_uniform_run() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!(
            (5_000_000..=5_000_000 + 5_000_000 / 64).contains(&p50),
            "{p50}"
        );
        let p99 = h.quantile(0.99).unwrap();
        assert!(
            (9_900_000..=9_900_000 + 9_900_000 / 64).contains(&p99),
            "{p99}"
        );
        assert_eq!(h.quantile(1.0), Some(10_000_000));
        assert_eq!(h.max(), 10_000_000);
        let mut other = Histogram::new();
        other.record(20_000_000);
        h.merge(&other);
        assert_eq!(h.count(), 10_001);
        assert_eq!(h.quantile(1.0), Some(20_000_000));
        assert_eq!(Histogram::new().quantile(0.5), None);
    }
}
