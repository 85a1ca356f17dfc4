//! Message schedules of blocks that are the same in every lane, shared by
//! the vector backends.

use crate::consts::K;

/// Schedules (W[16..80], §6.4.2 step 1) of blocks that were the same in
/// every lane, kept for the groups of one call. In a batch of version-1
/// requests, 8 of each request's 9 blocks are zero padding or the length
/// block, the same in every request: their schedules are computed once per
/// call instead of once per group and block.
/// `PLUS_K`: keep W[t] + K[t] instead of W[t], as the AVX-512 rounds add
/// them (the AVX2 rounds add K themselves).
pub(crate) struct Shared<const PLUS_K: bool> {
    keys: [[u64; 16]; 2],
    schedules: [[u64; 80]; 2],
    filled: usize,
}

impl<const PLUS_K: bool> Shared<PLUS_K> {
    pub(crate) fn new() -> Self {
        Shared {
            keys: [[0; 16]; 2],
            schedules: [[0; 80]; 2],
            filled: 0,
        }
    }

    /// W[0..80] (or W + K) of the block whose first sixteen words are `words`.
    pub(crate) fn schedule(&mut self, words: &[u64; 16]) -> &[u64; 80] {
        let n = self.filled.min(2);
        let i = match self.keys[..n].iter().position(|k| k == words) {
            Some(i) => i,
            None => {
                // Fill both slots, then replace them in turn.
                let i = self.filled % 2;
                self.filled += 1;
                self.keys[i] = *words;
                self.schedules[i] = expand(words);
                if PLUS_K {
                    for (w, k) in self.schedules[i].iter_mut().zip(K) {
                        *w = w.wrapping_add(k);
                    }
                }
                i
            }
        };
        &self.schedules[i]
    }
}

/// One message's schedule, scalar.
fn expand(words: &[u64; 16]) -> [u64; 80] {
    let mut w = [0u64; 80];
    w[..16].copy_from_slice(words);
    for t in 16..80 {
        let x = w[t - 15];
        let s0 = x.rotate_right(1) ^ x.rotate_right(8) ^ (x >> 7);
        let y = w[t - 2];
        let s1 = y.rotate_right(19) ^ y.rotate_right(61) ^ (y >> 6);
        w[t] = s1
            .wrapping_add(w[t - 7])
            .wrapping_add(s0)
            .wrapping_add(w[t - 16]);
    }
    w
}
