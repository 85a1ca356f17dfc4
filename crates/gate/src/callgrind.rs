//! Running one stage under callgrind and reading its count back.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gnomon_sha512x4::Backend;

/// What one callgrind run of a stage gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measurement {
    /// Instructions executed inside the stage's measured function.
    pub instructions: u64,
    /// CPU features the stage saw (valgrind's CPUID, not the host's).
    pub cpu: String,
}

/// [`measure`] for every `(stage argument, counted symbol)` in `jobs`, one
/// process per core at a time: runs are independent processes, so running
/// them side by side keeps CI time down and cannot change a count. The
/// results are in the order of `jobs`.
pub fn measure_all(
    exe: &Path,
    jobs: &[(String, &str)],
    scratch: &Path,
) -> Vec<Result<Measurement, String>> {
    let results: Mutex<Vec<Option<Result<Measurement, String>>>> =
        Mutex::new(vec![None; jobs.len()]);
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers.min(jobs.len()) {
            scope.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some((arg, symbol)) = jobs.get(j) else {
                    break;
                };
                let m = measure(exe, arg, symbol, scratch);
                results.lock().expect("no worker panics")[j] = Some(m);
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panics")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// `valgrind --version`, or why it cannot be run.
pub fn valgrind_version() -> Result<String, String> {
    let out = Command::new("valgrind")
        .arg("--version")
        .output()
        .map_err(|e| format!("valgrind not runnable: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Run `exe run <stage>` under callgrind, counting only inside `symbol`.
///
/// The child gets an empty environment and a fixed working directory so
/// nothing about the caller's shell reaches it; counts were also checked
/// not to move with the environment's size or the binary's path.
pub fn measure(
    exe: &Path,
    stage: &str,
    symbol: &str,
    scratch: &Path,
) -> Result<Measurement, String> {
    // Unique per call: runs of one stage may overlap (`--repeat`).
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let out_file = scratch.join(format!(
        "gnomon-gate.{}.{run}.{stage}.callgrind",
        std::process::id()
    ));
    let valgrind = which("valgrind").ok_or("valgrind not found on PATH")?;
    let out = Command::new(valgrind)
        .env_clear()
        .current_dir(scratch)
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg(format!("--toggle-collect={symbol}"))
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg("--dump-line=no")
        .arg("--dump-instr=no")
        .arg(exe)
        .arg("run")
        .arg(stage)
        .output()
        .map_err(|e| format!("stage {stage}: valgrind did not start: {e}"))?;
    let profile = std::fs::read_to_string(&out_file);
    let _ = std::fs::remove_file(&out_file);
    if !out.status.success() {
        return Err(format!(
            "stage {stage}: run failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let profile = profile.map_err(|e| format!("stage {stage}: no callgrind output: {e}"))?;
    let instructions = total(&profile)
        .ok_or_else(|| format!("stage {stage}: no totals line in the callgrind output"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let cpu = stdout
        .lines()
        .find_map(|l| l.strip_prefix("cpu: "))
        .unwrap_or("unknown")
        .to_string();
    Ok(Measurement { instructions, cpu })
}

/// The event total of a callgrind profile (its only event is Ir).
pub fn total(profile: &str) -> Option<u64> {
    profile.lines().find_map(|l| {
        l.strip_prefix("totals:")
            .or_else(|| l.strip_prefix("summary:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    })
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// CPU features that pick code paths in the measured code (sha2's and
/// glibc's dispatch), as the stage sees them.
pub fn cpu_features() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let mut seen = Vec::new();
        macro_rules! probe {
            ($($f:tt),*) => {$(
                if std::arch::is_x86_feature_detected!($f) {
                    seen.push($f);
                }
            )*};
        }
        probe!(
            "sse4.1",
            "avx",
            "avx2",
            "bmi2",
            "adx",
            "sha",
            "avx512f",
            "avx512ifma"
        );
        seen.join(" ")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH.to_string()
    }
}

/// Pin the multi-buffer hash to AVX2 ×8 where the CPU (valgrind's, under
/// the gate) has AVX2, and return the backend the stage will use. Valgrind
/// executes no AVX-512 and hides it from CPUID, so unpinned it would pick
/// AVX2 today; pinning keeps the counts the same on a host with or without
/// AVX-512 and under a future valgrind that runs it (docs/COST.md, "The
/// gate").
pub fn pin_hash() -> Backend {
    if gnomon_sha512x4::pin(Some(Backend::Avx2x8)).is_ok() {
        Backend::Avx2x8
    } else {
        Backend::best()
    }
}
