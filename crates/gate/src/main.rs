//! `gnomon-gate`: the instruction-count gate. Normally run by scripts/gate.
//!
//! ```text
//! gnomon-gate [--update] [--baseline FILE] [--repeat N] [STAGE...]
//! gnomon-gate list
//! gnomon-gate run STAGE     # one stage, what callgrind runs
//! gnomon-gate versions      # every profile's protocol work (docs/COST.md, "Every version")
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use gnomon_gate::callgrind;
use gnomon_gate::compare::{self, Baseline, Setup};
use gnomon_gate::stages::{self, Stage, MEASURED_SYMBOL, STAGES};
use gnomon_gate::versions;

struct Options {
    update: bool,
    baseline: PathBuf,
    repeat: usize,
    stages: Vec<&'static Stage>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run_child(&args[1..]),
        Some("versions") => versions(),
        Some("list") => {
            for s in STAGES {
                println!("{:<20} {}", s.name, s.what);
            }
            Ok(true)
        }
        _ => parse_options(&args).and_then(|o| gate(&o)),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gate: {e}");
            ExitCode::from(2)
        }
    }
}

/// The child under callgrind: one stage, nothing else.
fn run_child(args: &[String]) -> Result<bool, String> {
    let [name] = args else {
        return Err("usage: gnomon-gate run STAGE".to_string());
    };
    let hash = callgrind::pin_hash();
    if let Some(case) = versions::Case::from_arg(name) {
        versions::run(case).map_err(|e| format!("{name}: {e}"))?;
    } else {
        let stage = stages::find(name).ok_or_else(|| format!("no stage {name}"))?;
        stage.run().map_err(|e| format!("stage {name}: {e}"))?;
    }
    println!("cpu: {}; sha512x4 {hash:?}", callgrind::cpu_features());
    Ok(true)
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        update: false,
        baseline: PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/gate-baseline.json"
        )),
        repeat: 1,
        stages: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--update" => o.update = true,
            "--baseline" => {
                o.baseline = it.next().ok_or("--baseline needs a file")?.into();
            }
            "--repeat" => {
                o.repeat = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n >= 1)
                    .ok_or("--repeat needs a count of at least 1")?;
            }
            name if !name.starts_with('-') => o
                .stages
                .push(stages::find(name).ok_or_else(|| format!("no stage {name}"))?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.stages.is_empty() {
        o.stages = STAGES.iter().collect();
    }
    Ok(o)
}

fn gate(o: &Options) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let scratch = std::env::temp_dir();
    let setup = Setup {
        rustc: env!("GATE_RUSTC_VERSION").to_string(),
        valgrind: callgrind::valgrind_version()?,
        cpu: String::new(),
    };
    let old = match std::fs::read_to_string(&o.baseline) {
        Ok(text) => {
            Baseline::from_json(&text).map_err(|e| format!("{}: {e}", o.baseline.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && o.update => Baseline::default(),
        Err(e) => return Err(format!("{}: {e}", o.baseline.display())),
    };

    let jobs: Vec<(String, &str)> = o
        .stages
        .iter()
        .flat_map(|s| (0..o.repeat).map(move |_| (s.name.to_string(), s.symbol)))
        .collect();
    let results = callgrind::measure_all(&exe, &jobs, &scratch);

    let mut now: Vec<(String, u64)> = Vec::new();
    let mut cpu = String::new();
    let mut unrepeatable = Vec::new();
    for (k, stage) in o.stages.iter().enumerate() {
        let runs = &results[k * o.repeat..(k + 1) * o.repeat];
        let mut counts = Vec::new();
        for r in runs {
            let m = r.clone()?;
            cpu = m.cpu;
            counts.push(m.instructions);
        }
        if counts.iter().any(|&c| c != counts[0]) {
            unrepeatable.push(format!(
                "stage {} is not repeatable: {counts:?} instructions in {} runs",
                stage.name, o.repeat
            ));
        }
        now.push((stage.name.to_string(), counts[0]));
    }
    let setup = Setup { cpu, ..setup };

    if o.update {
        if let Some((s, _)) = now.iter().find(|(_, n)| *n == 0) {
            return Err(format!(
                "stage {s} counted no instructions (its function was not entered); \
                 baseline not written"
            ));
        }
        let mut new = compare::updated(&old, &setup, &now);
        new.stages.sort_by_key(|(s, _)| {
            STAGES
                .iter()
                .position(|t| t.name == s)
                .unwrap_or(usize::MAX)
        });
        std::fs::write(&o.baseline, new.to_json())
            .map_err(|e| format!("{}: {e}", o.baseline.display()))?;
        print!("{}", compare::compare(&old, &setup, &now).table());
        println!(
            "wrote {}; commit it with a line in docs/COST.md (\"The gate\") saying why",
            o.baseline.display()
        );
        for u in &unrepeatable {
            println!("FAIL: {u}");
        }
        return Ok(unrepeatable.is_empty());
    }

    // A partial run is compared only with the stages it measured.
    let mut scoped = old.clone();
    scoped
        .stages
        .retain(|(s, _)| now.iter().any(|(m, _)| m == s) || o.stages.len() == STAGES.len());
    let mut report = compare::compare(&scoped, &setup, &now);
    report.failures.extend(unrepeatable);
    print!("{}", report.render());
    if report.passed() {
        println!("gate: pass ({} stages)", now.len());
    }
    Ok(report.passed())
}

/// Every profile's parse and respond of 64 requests under callgrind, two
/// at a time; prints the table of docs/COST.md, "Every version".
fn versions() -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let scratch = std::env::temp_dir();
    let cases = versions::cases();
    let jobs: Vec<(String, &str)> = cases.iter().map(|c| (c.arg(), MEASURED_SYMBOL)).collect();
    let results = callgrind::measure_all(&exe, &jobs, &scratch);
    let mut counts = Vec::new();
    let mut cpu = String::new();
    for (case, r) in cases.iter().zip(results) {
        let m = r?;
        cpu = m.cpu;
        counts.push((*case, m.instructions));
    }
    print!("{}", versions::table(&counts));
    println!(
        "rustc {}, {}, CPU features seen: {cpu}",
        env!("GATE_RUSTC_VERSION"),
        callgrind::valgrind_version()?
    );
    Ok(true)
}
