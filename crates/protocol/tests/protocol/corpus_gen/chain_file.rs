//! A nonce chain across versions, and a malfeasance report in which one
//! server lies.

use gnomon_protocol::report::Link;
use gnomon_protocol::{Measurement, Profile};
use serde::Serialize;

use super::profile_file::chain_rule_text;
use super::NOW_US;
use super::{derive_n, expect, fixed, key_json, request, Expect, Fixed, KeyJson, Server, SIZE};

/// The chain: every chaining rule at least once (the SHA-512 fallback for
/// 64-byte nonces, SHA-512/256, SHA-512[:32] unframed and framed, and
/// Google's double hash, over a framed response at the end).
const CHAIN: [&str; 7] = [
    "google",
    "draft-02",
    "draft-07",
    "draft-11",
    "draft-14",
    "rfc-10049",
    "google",
];

/// The report's servers (label, profile) in the order queried; entry 1 lies.
const REPORT: [(&str, &str); 4] = [
    ("report/server-a", "rfc-10049"),
    ("report/server-b", "rfc-10049"),
    ("report/server-c", "draft-14"),
    ("report/server-a", "rfc-10049"),
];
const LIAR: usize = 1;
/// How far ahead the liar's clock is: two hours.
const LIE_US: u64 = 7_200_000_000;
const SECOND_US: u64 = 1_000_000;

#[derive(Serialize)]
pub(crate) struct ChainFile {
    description: &'static str,
    fixed: Fixed,
    steps: Vec<Step>,
    contradictions: Vec<[usize; 2]>,
}

#[derive(Serialize)]
struct Step {
    index: usize,
    profile: &'static str,
    now_unix_us: String,
    long_term_key: KeyJson,
    online_key_label: String,
    rand_label: String,
    rand_hex: String,
    link: &'static str,
    nonce_hex: String,
    request_hex: String,
    response_hex: String,
    expect: Expect,
}

#[derive(Serialize)]
pub(crate) struct ReportExpected {
    description: &'static str,
    report_file: &'static str,
    rule: &'static str,
    fixed: Fixed,
    liar: usize,
    liar_ahead_us: String,
    entries: Vec<ReportEntry>,
    contradictions: Vec<[usize; 2]>,
    proof_of_malfeasance: bool,
}

#[derive(Serialize)]
struct ReportEntry {
    index: usize,
    profile: &'static str,
    server: String,
    public_key_hex: String,
    now_unix_us: String,
    rand_label: String,
    link: &'static str,
    expect: Expect,
}

/// One exchange of a measurement sequence, recorded in `m`.
struct Run {
    profile: &'static Profile,
    now_us: u64,
    public: [u8; 32],
    rand_label: String,
    rand: Vec<u8>,
    nonce: Vec<u8>,
    request: Vec<u8>,
    response: Vec<u8>,
}

fn run(
    m: &mut Measurement,
    server_label: &str,
    profile: &str,
    k: usize,
    now_us: u64,
    rand_label: String,
) -> Run {
    let profile = Profile::by_name(profile).expect("profile name");
    let server = Server::new(
        &format!("{server_label}/long-term"),
        &format!("{server_label}/online"),
        profile,
    );
    let public = server.long_term.public();
    let rand = derive_n(&rand_label, profile.nonce_len);
    let mut nonce = [0u8; 64];
    let n = m
        .next_nonce(profile, &rand, &mut nonce)
        .expect("rand has the nonce length");
    let request = request(profile, &nonce[..n], &public, SIZE);
    let (mut responses, _) = server.answer(profile, &[&request], now_us, false);
    let response = responses.remove(0);
    m.record(&request, &response, &rand, &public)
        .unwrap_or_else(|e| panic!("step {k} ({}): {e:?}", profile.name));
    Run {
        profile,
        now_us,
        public,
        rand_label,
        rand,
        nonce: nonce[..n].to_vec(),
        request,
        response,
    }
}

pub(crate) fn chain() -> ChainFile {
    let mut m = Measurement::new();
    let steps: Vec<Step> = CHAIN
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let label = format!("chain/server-{k}");
            let r = run(
                &mut m,
                &label,
                name,
                k,
                NOW_US + k as u64 * SECOND_US,
                format!("chain/rand/{k}"),
            );
            Step {
                index: k,
                profile: r.profile.name,
                now_unix_us: r.now_us.to_string(),
                long_term_key: key_json(&format!("{label}/long-term")),
                online_key_label: format!("{label}/online"),
                rand_hex: hex::encode(&r.rand),
                rand_label: r.rand_label,
                link: if k == 0 {
                    "first request: the nonce is rand itself"
                } else {
                    chain_rule_text(r.profile)
                },
                nonce_hex: hex::encode(&r.nonce),
                expect: expect(&r.request, &r.response, &r.public),
                request_hex: hex::encode(&r.request),
                response_hex: hex::encode(&r.response),
            }
        })
        .collect();
    assert!(m.contradictions().is_empty(), "the chain is honest");
    ChainFile {
        description: "A measurement sequence of seven requests across six versions, one server \
                      each, every response one second after the previous. Each request's nonce is derived \
                      from the previous response and a rand by the rule of the request being \
                      built (link). Every server is honest: no pair contradicts.",
        fixed: fixed(),
        steps,
        contradictions: Vec::new(),
    }
}

/// The report document as report.rs writes it, and what checking it gives.
pub(crate) fn report() -> (String, ReportExpected) {
    let mut m = Measurement::new();
    let runs: Vec<(Run, &str)> = REPORT
        .iter()
        .enumerate()
        .map(|(k, (server, profile))| {
            let now = if k == LIAR {
                NOW_US + LIE_US
            } else {
                NOW_US + k as u64 * SECOND_US
            };
            let run = run(&mut m, server, profile, k, now, format!("report/rand/{k}"));
            (run, *server)
        })
        .collect();
    let report = m.report();
    let check = report.verify();
    assert!(check.is_proof_of_malfeasance(), "{check:#?}");
    let contradictions: Vec<[usize; 2]> =
        check.contradictions.iter().map(|&(i, j)| [i, j]).collect();
    assert_eq!(contradictions, [[1, 2], [1, 3]]);
    let entries = runs
        .iter()
        .zip(&check.entries)
        .enumerate()
        .map(|(k, ((r, server), outcome))| ReportEntry {
            index: k,
            profile: r.profile.name,
            server: server.to_string(),
            public_key_hex: hex::encode(r.public),
            now_unix_us: r.now_us.to_string(),
            rand_label: r.rand_label.clone(),
            link: match outcome.link {
                Ok(Link::First) => "first",
                Ok(Link::Chained) => "chained",
                Err(e) => panic!("entry {k}: {e:?}"),
            },
            expect: expect(&r.request, &r.response, &r.public),
        })
        .collect();
    let mut json = report.to_json();
    json.push('\n');
    let expected = ReportExpected {
        description: "The malfeasance report in malfeasance-report.json (RFC 10049 JSON, written \
                      by gnomon's report.rs): four responses chained in the order received, \
                      from three servers; the server of entry 1 is two hours ahead. Every \
                      signature and link verifies; the listed pairs contradict.",
        report_file: "malfeasance-report.json",
        rule: "entries i < j contradict when MIDP_i - RADI_i > MIDP_j + RADI_j",
        fixed: fixed(),
        liar: LIAR,
        liar_ahead_us: LIE_US.to_string(),
        entries,
        contradictions,
        proof_of_malfeasance: true,
    };
    (json, expected)
}
