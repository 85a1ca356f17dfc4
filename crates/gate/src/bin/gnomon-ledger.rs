//! `gnomon-ledger`: times every stage of the request path per version
//! family and batch size (docs/COST.md, "The ledger"). Normally run by
//! scripts/ledger.
//!
//! ```text
//! gnomon-ledger [--write docs/COST.md] [--json FILE]
//! ```

use std::process::ExitCode;

use gnomon_gate::ledger;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut write, mut json) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let slot = match a.as_str() {
            "--write" => &mut write,
            "--json" => &mut json,
            other => {
                eprintln!("ledger: unknown argument {other}\nusage: gnomon-ledger [--write COST.md] [--json FILE]");
                return ExitCode::from(64);
            }
        };
        match it.next() {
            Some(v) => *slot = Some(v.clone()),
            None => {
                eprintln!("ledger: {a} needs a file");
                return ExitCode::from(64);
            }
        }
    }
    match run(write.as_deref(), json.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ledger: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(write: Option<&str>, json: Option<&str>) -> Result<(), String> {
    let families = ledger::measure_all(&mut |what| eprintln!("== {what}"))?;
    let md = ledger::markdown(&families);
    print!("{md}");
    if let Some(path) = write {
        let doc = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let new = ledger::splice(&doc, &md)?;
        std::fs::write(path, new).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("== wrote the tables into {path}");
    }
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&ledger::json(&families)).expect("JSON");
        std::fs::write(path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}
