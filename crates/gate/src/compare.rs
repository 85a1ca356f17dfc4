//! The baseline file and the verdict: a stage fails when its count rises
//! more than [`FAIL_ABOVE_PERCENT`] over the baseline, and earns a note
//! when it falls by more than that.

use std::fmt::Write as _;

use serde_json::Value;

/// A rise above this many percent fails the gate.
pub const FAIL_ABOVE_PERCENT: u64 = 2;

/// What the counts were taken with, besides the code: each of these moves
/// instruction counts on its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// `rustc -V` of the compiler that built the gate.
    pub rustc: String,
    /// `valgrind --version`.
    pub valgrind: String,
    /// CPU features the measured code saw under valgrind (its CPUID).
    pub cpu: String,
}

/// The committed counts: docs/gate-baseline.json.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Baseline {
    /// How the counts were taken.
    pub setup: Setup,
    /// Instructions per stage.
    pub stages: Vec<(String, u64)>,
}

impl Baseline {
    /// Read the JSON written by [`Baseline::to_json`].
    pub fn from_json(text: &str) -> Result<Baseline, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let field = |name: &str| -> Result<String, String> {
            v.get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("missing string field {name:?}"))
        };
        let setup = Setup {
            rustc: field("rustc")?,
            valgrind: field("valgrind")?,
            cpu: field("cpu")?,
        };
        let Some(Value::Object(map)) = v.get("instructions") else {
            return Err("missing object field \"instructions\"".to_string());
        };
        let mut stages = Vec::new();
        for (name, count) in map {
            let count = count
                .as_u64()
                .ok_or_else(|| format!("stage {name}: count is not an unsigned integer"))?;
            stages.push((name.clone(), count));
        }
        Ok(Baseline { setup, stages })
    }

    /// The file's text, one stage a line so a baseline change reads as a
    /// small diff.
    pub fn to_json(&self) -> String {
        let q = |s: &str| Value::String(s.to_string()).to_string();
        let mut out = String::from("{\n");
        let _ = writeln!(
            out,
            "  \"about\": {},",
            q(
                "callgrind instruction counts per gate stage; rewrite only with \
               scripts/gate --update, and add a line to docs/COST.md saying why"
            )
        );
        let _ = writeln!(out, "  \"rustc\": {},", q(&self.setup.rustc));
        let _ = writeln!(out, "  \"valgrind\": {},", q(&self.setup.valgrind));
        let _ = writeln!(out, "  \"cpu\": {},", q(&self.setup.cpu));
        out.push_str("  \"instructions\": {\n");
        for (i, (name, count)) in self.stages.iter().enumerate() {
            let comma = if i + 1 < self.stages.len() { "," } else { "" };
            let _ = writeln!(out, "    {}: {count}{comma}", q(name));
        }
        out.push_str("  }\n}\n");
        out
    }

    /// The count of `stage`, if the baseline has one.
    pub fn get(&self, stage: &str) -> Option<u64> {
        self.stages.iter().find(|(n, _)| n == stage).map(|s| s.1)
    }
}

/// How one stage compares with its baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within ±2 %.
    Pass,
    /// More than 2 % fewer instructions: passes, the baseline could follow.
    Faster,
    /// More than 2 % more instructions: fails.
    Slower,
    /// Measured, but not in the baseline: fails until the baseline has it.
    New,
    /// In the baseline, but not measured: fails, a stage went missing.
    Missing,
    /// Measured zero instructions: the measured function was not entered
    /// (renamed or inlined away), which would otherwise read as −100 %.
    Empty,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Stage name.
    pub stage: String,
    /// Baseline count.
    pub baseline: Option<u64>,
    /// Count measured now.
    pub now: Option<u64>,
    /// The verdict.
    pub verdict: Verdict,
}

impl Row {
    /// Change from the baseline in percent, when both counts exist.
    pub fn change_percent(&self) -> Option<f64> {
        match (self.baseline, self.now) {
            (Some(b), Some(n)) if b > 0 => Some((n as f64 - b as f64) * 100.0 / b as f64),
            _ => None,
        }
    }
}

/// The outcome of one gate run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One row per stage, measured stages first in the order given.
    pub rows: Vec<Row>,
    /// Why the gate fails, one line per failing stage. Empty: it passes.
    pub failures: Vec<String>,
    /// Things to look at that do not fail the gate.
    pub notes: Vec<String>,
}

impl Report {
    /// The gate passes.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The table, then notes, then failures.
    pub fn render(&self) -> String {
        let mut out = self.table();
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        for f in &self.failures {
            let _ = writeln!(out, "FAIL: {f}");
        }
        out
    }

    /// Stage, baseline, now, change; failing rows flagged.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<20} {:>14} {:>14} {:>9}",
            "stage", "baseline", "now", "change"
        );
        for r in &self.rows {
            let num = |v: Option<u64>| v.map_or_else(|| "-".to_string(), group_thousands);
            let change = r
                .change_percent()
                .map_or_else(|| "-".to_string(), |c| format!("{c:+.2}%"));
            let flag = match r.verdict {
                Verdict::Pass => "",
                Verdict::Faster => "  (faster)",
                Verdict::Slower => "  FAIL",
                Verdict::New => "  (new)",
                Verdict::Missing | Verdict::Empty => "  FAIL",
            };
            let _ = writeln!(
                out,
                "{:<20} {:>14} {:>14} {:>9}{flag}",
                r.stage,
                num(r.baseline),
                num(r.now),
                change
            );
        }
        out
    }
}

fn group_thousands(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Compare counts measured now (stage, instructions; in table order) and
/// the setup they were taken with against the baseline.
pub fn compare(baseline: &Baseline, setup: &Setup, now: &[(String, u64)]) -> Report {
    let mut report = Report::default();
    let pct = FAIL_ABOVE_PERCENT;
    for (stage, n) in now {
        let b = baseline.get(stage);
        let verdict = match b {
            _ if *n == 0 => Verdict::Empty,
            None => Verdict::New,
            // Integer arithmetic: exactly +2 % passes, one instruction more fails.
            Some(b) if u128::from(*n) * 100 > u128::from(b) * u128::from(100 + pct) => {
                Verdict::Slower
            }
            Some(b) if u128::from(*n) * 100 < u128::from(b) * u128::from(100 - pct) => {
                Verdict::Faster
            }
            Some(_) => Verdict::Pass,
        };
        let row = Row {
            stage: stage.clone(),
            baseline: b,
            now: Some(*n),
            verdict,
        };
        let change = row.change_percent().unwrap_or(0.0);
        match verdict {
            Verdict::Slower => report.failures.push(format!(
                "stage {stage}: {change:+.2}% instructions ({} -> {n}), more than +{pct}% over \
                 the baseline",
                b.unwrap_or(0)
            )),
            Verdict::Faster => report.notes.push(format!(
                "stage {stage} is {change:+.2}% below the baseline; if that is the new normal, \
                 run scripts/gate --update and say why in docs/COST.md"
            )),
            Verdict::New => report.failures.push(format!(
                "stage {stage} has no baseline; run scripts/gate --update and say why in \
                 docs/COST.md"
            )),
            Verdict::Empty => report.failures.push(format!(
                "stage {stage} counted no instructions: the measured function was not entered"
            )),
            Verdict::Pass | Verdict::Missing => {}
        }
        report.rows.push(row);
    }
    for (stage, b) in &baseline.stages {
        if now.iter().all(|(s, _)| s != stage) {
            report.rows.push(Row {
                stage: stage.clone(),
                baseline: Some(*b),
                now: None,
                verdict: Verdict::Missing,
            });
            report.failures.push(format!(
                "stage {stage} is in the baseline but was not measured"
            ));
        }
    }
    for (what, then, now) in [
        ("compiler", &baseline.setup.rustc, &setup.rustc),
        ("valgrind", &baseline.setup.valgrind, &setup.valgrind),
        ("CPU features", &baseline.setup.cpu, &setup.cpu),
    ] {
        if then != now {
            report.notes.push(format!(
                "{what} differs from the baseline's ({then:?} then, {now:?} now): counts move \
                 with it, so a failure may be the {what} and not the code"
            ));
        }
    }
    report
}

/// The baseline after `--update`: `now` replaces the counts it measured;
/// stages not measured this time keep their old counts.
pub fn updated(old: &Baseline, setup: &Setup, now: &[(String, u64)]) -> Baseline {
    let mut stages: Vec<(String, u64)> = now.to_vec();
    stages.extend(
        old.stages
            .iter()
            .filter(|(s, _)| now.iter().all(|(m, _)| m != s))
            .cloned(),
    );
    Baseline {
        setup: setup.clone(),
        stages,
    }
}
