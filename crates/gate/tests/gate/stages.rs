//! Every stage's scenario runs and passes its own checks natively, so a
//! broken scenario is caught by the ordinary test run, not only under
//! valgrind.

use gnomon_gate::stages::{self, measured, MEASURED_SYMBOL, STAGES};

#[test]
fn every_stage_runs_and_checks_its_result() {
    for s in STAGES {
        s.run().unwrap_or_else(|e| panic!("stage {}: {e}", s.name));
    }
}

#[test]
fn stage_names_are_unique_and_found() {
    for (i, s) in STAGES.iter().enumerate() {
        assert!(STAGES[..i].iter().all(|t| t.name != s.name), "{}", s.name);
        assert_eq!(stages::find(s.name).map(|t| t.name), Some(s.name));
    }
    assert!(stages::find("nope").is_none());
}

#[test]
fn the_toggle_symbol_is_the_measured_function() {
    // callgrind matches demangled names; a rename must move the constant.
    assert_eq!(std::any::type_name_of_val(&measured), MEASURED_SYMBOL);
}
