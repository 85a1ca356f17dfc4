//! Property tests for the JSON inputs: malfeasance reports and server
//! lists. Nothing panics, a parsed report survives its own JSON, and no
//! damaged report verifies a time the server did not sign.

use crate::common;
use crate::props;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use common::*;
use gnomon_protocol::report::Unverifiable;
use gnomon_protocol::serverlist::{parse_host_port, Host};
use gnomon_protocol::{
    parse_report, Measurement, Offer, ParsedReport, Profile, Report, ResponderOptions, ServerList,
};
use props::*;
use proptest::prelude::*;

const CASES: u32 = 512;

fn server_key() -> [u8; 32] {
    Server::new(3).long_term.public()
}

// ---------------------------------------------------------------------------
// Malfeasance reports.

/// A valid report: three chained RFC exchanges with the common server.
fn valid_report() -> &'static Report {
    static R: OnceLock<Report> = OnceLock::new();
    R.get_or_init(|| {
        let server = Server::new(3);
        let p = Profile::rfc();
        let mut m = Measurement::new();
        for k in 1..=3u8 {
            let rand = [k; 32];
            let mut nonce = [0u8; 64];
            let n = m.next_nonce(p, &rand, &mut nonce).unwrap();
            let mut req = vec![0u8; 1024];
            Offer::single(p)
                .build(&nonce[..n], None, 1024, &mut req)
                .unwrap();
            let sink = server.answer(p, &[req.clone()], ResponderOptions::default(), NOW_US);
            let resp = sink.response(0).unwrap().to_vec();
            m.record(&req, &resp, &rand, &server.long_term.public())
                .unwrap();
        }
        m.report()
    })
}

/// Parses `json`; a 12+ report must survive its own JSON, and only the
/// server's key can verify an entry, at the one instant it signed.
fn check_report(json: &[u8]) {
    let Ok(parsed) = parse_report(json) else {
        return;
    };
    let ParsedReport::Current(report) = &parsed else {
        assert_eq!(parsed.verify(), Err(Unverifiable::LegacyForm));
        return;
    };
    let again = parse_report(report.to_json().as_bytes()).expect("written report parses");
    assert_eq!(again, parsed);
    check_report_entries(report);
}

fn check_report_entries(report: &Report) {
    let check = report.verify();
    assert_eq!(check.entries.len(), report.entries.len());
    let first = valid_report().verify();
    let original = first.entries[0].response.as_ref().unwrap();
    for (entry, outcome) in report.entries.iter().zip(&check.entries) {
        if let Ok(v) = &outcome.response {
            assert_eq!(entry.public_key, server_key());
            assert_same_time(v, original);
        }
    }
    assert!(check.contradictions.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn report_parsing_never_panics_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        text in "\\{\"(responses|nonces)\":\\[(\"[A-Za-z0-9+/=]{0,12}\",?|\\{\\},?|null,?){0,3}\\]\\}",
    ) {
        check_report(&bytes);
        check_report(text.as_bytes());
    }

    #[test]
    fn damaged_report_json_never_verifies_another_time(edits in prop::collection::vec(edit(), 1..3)) {
        let mut json = valid_report().to_json().into_bytes();
        for e in &edits {
            json = apply(&json, e);
        }
        check_report(&json);
    }

    #[test]
    fn damaged_report_entries_never_verify_another_time(
        entry in 0usize..3,
        field in 0usize..4,
        e in edit(),
    ) {
        let mut report = valid_report().clone();
        assert!(report.verify().all_valid());
        let target = &mut report.entries[entry];
        let bytes = match field {
            0 => &mut target.request,
            1 => &mut target.response,
            2 => &mut target.public_key,
            _ => target.rand.get_or_insert_with(Vec::new),
        };
        *bytes = apply(bytes, &e);
        check_report_entries(&report);
        // A damaged request or response breaks its own entry or the next link.
        if field < 2 {
            let check = report.verify();
            assert!(!check.all_valid() || report.entries[entry] == valid_report().entries[entry]);
        }
    }
}

// ---------------------------------------------------------------------------
// Server lists.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn server_list_parsing_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        text in "\\{\"servers\":\\[(\\{(\"(name|version|publicKey|publicKeyType|addresses)\":(\"[ -~]{0,12}\"|[0-9]{1,11}|\\[\\{\"protocol\":\"(udp|tcp)\",\"address\":\"[\\[\\]0-9a-f:.%-]{0,20}\"\\}\\]),?){0,5}\\},?){0,2}\\](,\"(sources|reports)\":(\"https://x\"|\\[\"http://y\"\\]))?\\}",
    ) {
        let _ = ServerList::parse(&bytes);
        if let Ok(list) = ServerList::parse(text.as_bytes()) {
            let _ = list.usable().count();
        }
    }

    #[test]
    fn host_port_parsing_never_panics(s in "[\\[\\]0-9a-fA-F:.%a-z-]{0,48}", t in any::<String>()) {
        let _ = parse_host_port(&s);
        let _ = parse_host_port(&t);
    }

    #[test]
    fn host_port_reads_what_std_writes(v4 in any::<[u8; 4]>(), v6 in any::<[u8; 16]>(), port in any::<u16>()) {
        let text = format!("{}:{port}", Ipv4Addr::from(v4));
        assert_eq!(parse_host_port(&text), Ok((Host::Ipv4(v4), port)));
        let text = format!("[{}]:{port}", Ipv6Addr::from(v6));
        assert_eq!(parse_host_port(&text), Ok((Host::Ipv6(v6), port)));
    }
}
