//! A careful loop for a shared machine: the candidates interleaved, each
//! sample the mean of BATCH operations, ROUNDS samples per candidate and
//! operation. Reports the minimum (the uncontended cost) and the median,
//! with the load average before and after. `minloop [ROUNDS]`.
//!
//! Operations: keygen from the seed (to public-key bytes); deterministic
//! sign of one 92-byte message with the response context (aws-lc: hedged,
//! it has no deterministic mode); the same over 16 different 92-byte
//! messages, the sample being their mean, since the number of FIPS 204
//! rejection-sampling rounds depends on the message (one fixed message may
//! be a lucky or an unlucky one; the 16 give every deterministic crate the
//! same, more typical, mix); verify of the first signature with the public
//! key parsed from bytes each time; and sign of 1352 bytes.
use mldsa_candidates::{keygen, message, verify, Keys, CTX_RESPONSE, NAMES, SEED};
use std::hint::black_box;
use std::time::Instant;

const BATCH: u32 = 10;
const MIXED: usize = 16;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let keys = Keys::new(&SEED);
    let short = message(92);
    let long = message(1352);
    let pk = keygen(0, &SEED);
    let sig = keys.sign(0, &short, CTX_RESPONSE, None).unwrap();
    for i in 0..NAMES.len() {
        assert_eq!(keygen(i, &SEED), pk, "{} public key differs", NAMES[i]);
        assert!(verify(i, &pk, &short, CTX_RESPONSE, &sig), "{} rejects", NAMES[i]);
    }
    let mixed: Vec<Vec<u8>> = (0..MIXED as u32)
        .map(|k| {
            let mut m = message(92);
            m[..4].copy_from_slice(&k.to_le_bytes());
            m
        })
        .collect();
    let ops: [&str; 5] = ["keygen", "sign 92 B", "sign 92 B ×16 msgs", "verify 92 B", "sign 1352 B"];
    println!("load before: {}", load());
    let mut samples = vec![vec![Vec::with_capacity(rounds); NAMES.len()]; ops.len()];
    for _ in 0..rounds {
        for (op, per_op) in samples.iter_mut().enumerate() {
            for (i, s) in per_op.iter_mut().enumerate() {
                let t = Instant::now();
                if op == 2 {
                    for m in &mixed {
                        black_box(keys.sign(black_box(i), black_box(m), CTX_RESPONSE, None));
                    }
                    s.push(t.elapsed().as_nanos() as f64 / MIXED as f64 / 1000.0);
                    continue;
                }
                for _ in 0..BATCH {
                    match op {
                        0 => {
                            black_box(keygen(black_box(i), black_box(&SEED)));
                        }
                        1 => {
                            black_box(keys.sign(black_box(i), black_box(&short), CTX_RESPONSE, None));
                        }
                        3 => {
                            assert!(verify(black_box(i), black_box(&pk), black_box(&short), CTX_RESPONSE, black_box(&sig)));
                        }
                        _ => {
                            black_box(keys.sign(black_box(i), black_box(&long), CTX_RESPONSE, None));
                        }
                    }
                }
                s.push(t.elapsed().as_nanos() as f64 / f64::from(BATCH) / 1000.0);
            }
        }
    }
    println!("load after: {}", load());
    println!("rounds {rounds}, batch {BATCH}; µs per operation, min / median");
    print!("| candidate |");
    for o in ops {
        print!(" {o} min | {o} median |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(2 * ops.len()));
    for (i, name) in NAMES.iter().enumerate() {
        print!("| {name} |");
        for per_op in samples.iter_mut() {
            let s = &mut per_op[i];
            s.sort_by(f64::total_cmp);
            print!(" {:.1} | {:.1} |", s[0], s[s.len() / 2]);
        }
        println!();
    }
}
