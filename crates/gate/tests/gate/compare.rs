//! The verdict logic of the gate, without valgrind: what fails, what passes,
//! what only earns a note, and the baseline file's round trip.

use gnomon_gate::callgrind::total;
use gnomon_gate::compare::{compare, updated, Baseline, Setup, Verdict};

fn setup() -> Setup {
    Setup {
        rustc: "rustc 1.95.0".to_string(),
        valgrind: "valgrind-3.19.0".to_string(),
        cpu: "avx2".to_string(),
    }
}

fn baseline() -> Baseline {
    Baseline {
        setup: setup(),
        stages: vec![
            ("parse_v1_64".to_string(), 100_000),
            ("respond_v1_64".to_string(), 3_000_000),
        ],
    }
}

fn now(parse: u64, respond: u64) -> Vec<(String, u64)> {
    vec![
        ("parse_v1_64".to_string(), parse),
        ("respond_v1_64".to_string(), respond),
    ]
}

#[test]
fn three_percent_more_fails_and_names_the_stage() {
    let r = compare(&baseline(), &setup(), &now(100_000, 3_090_000));
    assert!(!r.passed());
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    assert!(r.failures[0].contains("respond_v1_64"), "{}", r.failures[0]);
    assert!(r.failures[0].contains("+3.00%"), "{}", r.failures[0]);
    assert_eq!(r.rows[1].verdict, Verdict::Slower);
    let text = r.render();
    assert!(text.contains("FAIL: stage respond_v1_64"), "{text}");
}

#[test]
fn one_percent_more_passes_without_notes() {
    let r = compare(&baseline(), &setup(), &now(101_000, 3_030_000));
    assert!(r.passed(), "{:?}", r.failures);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert!(r.rows.iter().all(|row| row.verdict == Verdict::Pass));
}

#[test]
fn five_percent_less_passes_with_a_note_naming_the_stage() {
    let r = compare(&baseline(), &setup(), &now(95_000, 3_000_000));
    assert!(r.passed(), "{:?}", r.failures);
    assert_eq!(r.rows[0].verdict, Verdict::Faster);
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(r.notes[0].contains("parse_v1_64"), "{}", r.notes[0]);
    assert!(r.notes[0].contains("--update"), "{}", r.notes[0]);
}

#[test]
fn the_threshold_is_exactly_two_percent() {
    let at = compare(&baseline(), &setup(), &now(102_000, 3_000_000));
    assert!(at.passed(), "{:?}", at.failures);
    let over = compare(&baseline(), &setup(), &now(102_001, 3_000_000));
    assert!(!over.passed());
    assert!(over.failures[0].contains("parse_v1_64"));
    let down = compare(&baseline(), &setup(), &now(98_000, 3_000_000));
    assert!(down.notes.is_empty(), "{:?}", down.notes);
}

#[test]
fn a_missing_new_or_empty_stage_fails() {
    let missing = compare(&baseline(), &setup(), &now(100_000, 3_000_000)[..1]);
    assert!(!missing.passed());
    assert!(missing.failures[0].contains("respond_v1_64"));

    let mut extra = now(100_000, 3_000_000);
    extra.push(("write_v1_64".to_string(), 30_000));
    let new = compare(&baseline(), &setup(), &extra);
    assert!(!new.passed());
    assert!(new.failures[0].contains("write_v1_64"));

    // Zero would otherwise be a −100 % "improvement".
    let empty = compare(&baseline(), &setup(), &now(0, 3_000_000));
    assert!(!empty.passed());
    assert_eq!(empty.rows[0].verdict, Verdict::Empty);
    assert!(empty.failures[0].contains("parse_v1_64"));
}

#[test]
fn a_different_toolchain_is_noted_not_failed() {
    let other = Setup {
        rustc: "rustc 1.96.0".to_string(),
        ..setup()
    };
    let r = compare(&baseline(), &other, &now(100_000, 3_000_000));
    assert!(r.passed());
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(r.notes[0].contains("rustc 1.96.0"), "{}", r.notes[0]);
}

#[test]
fn the_baseline_file_round_trips_and_update_keeps_unmeasured_stages() {
    let mut b = baseline();
    b.stages.reverse();
    let mut back = Baseline::from_json(&b.to_json()).unwrap();
    assert_eq!(back.setup, b.setup);
    back.stages.sort();
    b.stages.sort();
    assert_eq!(back.stages, b.stages);

    let partial = vec![("respond_v1_64".to_string(), 2_000_000)];
    let u = updated(&b, &setup(), &partial);
    assert_eq!(u.get("respond_v1_64"), Some(2_000_000));
    assert_eq!(u.get("parse_v1_64"), Some(100_000));
    assert_eq!(u.stages.len(), 2);
}

#[test]
fn a_malformed_baseline_is_an_error() {
    assert!(Baseline::from_json("{").is_err());
    let no_counts = r#"{"rustc":"r","valgrind":"v","cpu":"c"}"#;
    assert!(Baseline::from_json(no_counts).is_err());
    let negative = r#"{"rustc":"r","valgrind":"v","cpu":"c","instructions":{"a":-1}}"#;
    assert!(Baseline::from_json(negative)
        .unwrap_err()
        .contains("stage a"));
}

#[test]
fn callgrind_totals_are_read_from_the_profile() {
    let profile = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfl=(1)\n\
                   summary: 82783\n\ntotals: 82783\n";
    assert_eq!(total(profile), Some(82_783));
    assert_eq!(total("events: Ir\n"), None);
}
