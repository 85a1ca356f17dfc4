//! Any bytes as a malfeasance report: parsing and verification never panic,
//! a parsed report writes back to JSON that parses to the same report, and
//! nothing verifies but what the fixture signed. The fixture signs a single
//! time, so no verified pair can ever contradict another.
#![no_main]

use gnomon_fuzz::{expected_midpoint, fixture};
use gnomon_protocol::report::Unverifiable;
use gnomon_protocol::{parse_report, ParsedReport};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(parsed) = parse_report(data) else {
        return;
    };
    let report = match &parsed {
        ParsedReport::Legacy(_) => {
            assert_eq!(parsed.verify(), Err(Unverifiable::LegacyForm));
            return;
        }
        ParsedReport::Current(r) => r,
    };
    let again = parse_report(report.to_json().as_bytes()).expect("a written report parses");
    assert_eq!(again, parsed, "report changed through its JSON");

    let check = report.verify();
    assert_eq!(check.entries.len(), report.entries.len());
    for (entry, outcome) in report.entries.iter().zip(&check.entries) {
        if let Ok(v) = &outcome.response {
            assert_eq!(
                entry.public_key,
                fixture().key(v.profile).bytes(),
                "verified with a foreign key"
            );
            assert_eq!(Some(v.midpoint_us), expected_midpoint(v.profile));
        }
    }
    assert!(
        check.contradictions.is_empty(),
        "contradiction among responses of one instant: {:?}",
        check.contradictions
    );
});
