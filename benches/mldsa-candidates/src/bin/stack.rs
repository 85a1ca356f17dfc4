//! Peak stack use of keygen / sign / verify per candidate, by painting: a
//! thread with a large stack fills PAINT bytes below the current frame with
//! a pattern, runs the operation, then finds the deepest byte it changed.
//! Approximate (±1 KiB: the probe's own frames), x86-64 Linux only, and it
//! reads and writes below the stack pointer on purpose: a measuring tool,
//! not library code.
use mldsa_candidates::{keygen, message, verify, Keys, CTX_RESPONSE, NAMES, SEED};
use std::hint::black_box;

const PAINT: usize = 1 << 20;
const SKIP: usize = 4096; // leave the probe's own frames alone
const PATTERN: u8 = 0xa5;

#[inline(never)]
fn here() -> usize {
    let x = 0u8;
    black_box(&x) as *const u8 as usize
}

#[inline(never)]
fn paint(top: usize) {
    for i in SKIP..PAINT {
        // SAFETY (tool): the thread's stack is 8 MiB, so top - PAINT is mapped
        // and below every live frame; nothing lives there yet.
        unsafe { ((top - i) as *mut u8).write_volatile(PATTERN) }
    }
}

#[inline(never)]
fn deepest(top: usize) -> usize {
    for i in (SKIP..PAINT).rev() {
        // SAFETY (tool): as in `paint`.
        if unsafe { ((top - i) as *const u8).read_volatile() } != PATTERN {
            return i;
        }
    }
    0
}

fn probe(f: impl FnOnce() + Send + 'static) -> usize {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let top = here();
            paint(top);
            f();
            deepest(top)
        })
        .unwrap()
        .join()
        .unwrap()
}

fn main() {
    let msg = message(92);
    let pk = keygen(0, &SEED);
    let sig = Keys::new(&SEED).sign(0, &msg, CTX_RESPONSE, None).unwrap();
    println!("| candidate | stack KiB keygen | stack KiB sign 92 B | stack KiB verify 92 B |");
    println!("|---|---:|---:|---:|");
    for (i, name) in NAMES.iter().enumerate() {
        let k = probe(move || {
            black_box(keygen(i, &SEED));
        });
        // keys built outside the probe, as a server would hold them
        let keys = std::sync::Arc::new(Keys::new(&SEED));
        let (kk, m) = (keys.clone(), msg.clone());
        let s = probe(move || {
            black_box(kk.sign(i, &m, CTX_RESPONSE, None));
        });
        let m = msg.clone();
        let v = probe(move || {
            assert!(verify(i, &pk, &m, CTX_RESPONSE, &sig));
        });
        println!("| {name} | {:.0} | {:.0} | {:.0} |", k as f64 / 1024.0, s as f64 / 1024.0, v as f64 / 1024.0);
    }
}
