//! A careful loop for a shared machine: the candidates interleaved, each
//! sample the mean of BATCH signatures, ROUNDS samples per candidate.
//! Reports the minimum (the uncontended cost) and the median per candidate,
//! with the load average before and after. `minloop [ROUNDS]`.
use sign_candidates::{message, Candidates, NAMES};
use std::hint::black_box;
use std::time::Instant;

const BATCH: u32 = 50;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(400);
    let keys = Candidates::new();
    let msg = message();
    let first = keys.sign(0, &msg);
    for (i, name) in NAMES.iter().enumerate() {
        assert_eq!(keys.sign(i, &msg), first, "{name} disagrees");
    }
    println!("load before: {}", load());
    let mut samples = vec![Vec::with_capacity(rounds); NAMES.len()];
    for _ in 0..rounds {
        for (i, s) in samples.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..BATCH {
                black_box(keys.sign(black_box(i), black_box(&msg)));
            }
            s.push(t.elapsed().as_nanos() as f64 / f64::from(BATCH));
        }
    }
    println!("load after: {}", load());
    println!("| candidate | min ns | median ns |");
    println!("|---|---:|---:|");
    for (name, s) in NAMES.iter().zip(&mut samples) {
        s.sort_by(f64::total_cmp);
        println!("| {name} | {:.0} | {:.0} |", s[0], s[s.len() / 2]);
    }
}
