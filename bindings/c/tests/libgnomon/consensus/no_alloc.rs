//! No allocation at all: a counting allocator for the whole binary, and
//! `gnomon_consensus` seen to make none.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gnomon::*;

use super::{empty_result, key, vouches, AUTO, S};

use GnomonVerdict::*;

// Every allocation made on this thread is counted: the library must make
// none. (The test harness allocates on its own threads.)
thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; the
// count is a thread-local Cell with a const initialiser and no destructor,
// so touching it never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The no_std build's allocator refuses everything (src/lib.rs, NoHeap):
/// `gnomon_consensus` must not ask, at the most answers it takes and in
/// every outcome. Seen to fail with a `Vec` made inside gnomon_consensus.
#[test]
fn consensus_allocates_nothing() {
    use GnomonError::*;
    let keys: Vec<[u8; 32]> = (0..=255).map(key).collect();
    // The most answers, every one its own key, spread over a few offsets.
    let most: Vec<GnomonVouch> = (0..GNOMON_MAX_ANSWERS)
        .map(|i| GnomonVouch {
            public_key: keys[i].as_ptr(),
            low_us: (i as i64 % 7) * S,
            high_us: (i as i64 % 7) * S + 7 * S,
        })
        .collect();
    // Each with (listed, max_liars).
    let cases = [
        (most, (GNOMON_MAX_ANSWERS, AUTO)),
        // Issue 21 and a key contradicting itself, of five listed with two
        // liars assumed.
        (
            vouches(&[
                (&keys[1], -16 * S, 16 * S),
                (&keys[2], -60 * S, 60 * S),
                (&keys[3], -86 * S, -54 * S),
                (&keys[4], 0, 1),
                (&keys[4], 5, 6),
            ]),
            (5, 2),
        ),
        // No consensus; a failure.
        (vouches(&[(&keys[1], 0, 1), (&keys[2], 5, 6)]), (2, 0)),
        (vouches(&[(&keys[1], 1, 0)]), (1, AUTO)),
    ];
    let mut results = vec![empty_result(); cases.len()];
    let mut verdicts = vec![GnomonVerdictNoConsensus; GNOMON_MAX_ANSWERS];
    let before = ALLOCATIONS.with(Cell::get);
    let mut codes = [GnomonOk; 4];
    for (((case, (listed, liars)), result), code) in cases.iter().zip(&mut results).zip(&mut codes)
    {
        let (n, answers) = (case.len(), case.as_ptr());
        let v = verdicts.as_mut_ptr();
        // SAFETY: valid vouches, verdicts at least as long, a result.
        *code = unsafe { gnomon_consensus(answers, n, *listed, *liars, 2, v, result) };
    }
    let made = ALLOCATIONS.with(Cell::get) - before;
    assert_eq!(made, 0, "gnomon_consensus allocated {made} time(s)");
    assert_eq!(codes, [GnomonOk, GnomonOk, GnomonOk, GnomonErrArgument]);
    assert!(results[0].has_consensus && results[1].regions == 2 && !results[2].has_consensus);
    // The counter counts: this allocation is seen.
    let v = std::hint::black_box(vec![1u8; 10]);
    assert_eq!(ALLOCATIONS.with(Cell::get) - before, 1, "{v:?}");
}
