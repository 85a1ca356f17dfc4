//! Every version side by side (docs/COST.md, "Every version"): the
//! instructions of the worker's protocol work for one batch of 64
//! requests, parsing and `Responder::respond`, for each row of the profile
//! table, with the responder's default options (the server's policy) and,
//! for the versions whose tree orientation is disputed, batched as
//! `batch-disputed` would. Not part of the gate's baseline: a table for
//! the ledger, run with `gnomon-gate versions`.

use std::hint::black_box;

use gnomon_protocol::profile::{Batching, PROFILES};
use gnomon_protocol::{Acceptor, Profile, Request, Responder, ResponderOptions, Scheme};

use crate::fixture::{requests, Server, Sink};
use crate::stages::{check_responses, measured, BATCH};

/// One measured case: a profile, and whether disputed versions are batched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    /// The profile's name in the table.
    pub profile: &'static str,
    /// `batch-disputed` on.
    pub batched: bool,
}

impl Case {
    /// The name the child process is run with.
    pub fn arg(&self) -> String {
        format!(
            "version{}:{}",
            if self.batched { "-batched" } else { "" },
            self.profile
        )
    }

    /// The case an argument names, if it names one.
    pub fn from_arg(arg: &str) -> Option<Case> {
        let (kind, name) = arg.split_once(':')?;
        let batched = match kind {
            "version" => false,
            "version-batched" => true,
            _ => return None,
        };
        let p = PROFILES.iter().find(|p| p.name == name)?;
        Some(Case {
            profile: p.name,
            batched,
        })
    }
}

/// Every Ed25519 profile with the default options, then the disputed ones
/// batched. The fixture signs with Ed25519 and answers datagrams; the
/// ML-DSA-44 row (TCP only, another key) is not measured here.
pub fn cases() -> Vec<Case> {
    let ed25519 = || PROFILES.iter().filter(|p| p.scheme == Scheme::Ed25519);
    let plain = ed25519().map(|p| Case {
        profile: p.name,
        batched: false,
    });
    let batched = ed25519()
        .filter(|p| p.batching == Batching::OrientationDisputed)
        .map(|p| Case {
            profile: p.name,
            batched: true,
        });
    plain.chain(batched).collect()
}

fn options(batched: bool) -> ResponderOptions {
    ResponderOptions {
        batch_disputed: batched,
        ..ResponderOptions::default()
    }
}

/// Signatures a batch of 64 takes under the case's policy.
pub fn signatures(case: Case) -> usize {
    let p = Profile::by_name(case.profile).expect("a profile of the table");
    let per = Responder::new(BATCH, options(case.batched)).leaves_per_signature(p);
    BATCH.div_ceil(per)
}

/// The child: parse and answer 64 requests once unmeasured, once measured,
/// then check every response verifies and the signature count is the
/// policy's.
pub fn run(case: Case) -> Result<(), String> {
    let p = Profile::by_name(case.profile).ok_or("no such profile")?;
    let datagrams = requests(p, BATCH);
    let server = Server::new(p);
    let ctx = server.context(p);
    let acceptor = Acceptor::default();
    let mut responder = Box::new(Responder::new(BATCH, options(case.batched)));
    let mut sink = Sink::new(BATCH);
    let mut parsed: Vec<Request<'_>> = Vec::with_capacity(BATCH);
    let mut failed = 0;
    let mut stats = Default::default();
    let mut pass = || {
        parsed.clear();
        for d in &datagrams {
            match acceptor.parse(black_box(d.as_slice())) {
                Ok(r) => parsed.push(r),
                Err(_) => failed += 1,
            }
        }
        stats = responder.respond(black_box(&ctx), &parsed, &mut sink);
    };
    pass();
    measured(&mut pass);
    if failed > 0 {
        return Err(format!("{failed} requests rejected"));
    }
    let want = signatures(case);
    if stats.responses != BATCH || stats.signatures != want {
        return Err(format!("expected {want} signatures for {BATCH}: {stats:?}"));
    }
    check_responses(&server, &datagrams, &sink)
}

/// The table: instructions per request for each case, against version 1's.
pub fn table(counts: &[(Case, u64)]) -> String {
    use std::fmt::Write as _;
    let per = |c: u64| c as f64 / BATCH as f64;
    let v1 = counts
        .iter()
        .find(|(c, _)| !c.batched && c.profile == Profile::rfc().name)
        .map_or(f64::NAN, |(_, n)| per(*n));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| profile | VER | batching | signatures per 64 | instructions per request | × version 1 |"
    );
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|");
    for (case, n) in counts {
        let p = Profile::by_name(case.profile).expect("a profile of the table");
        let rule = match (p.batching, case.batched) {
            (Batching::Free, _) => "free",
            (Batching::Never, _) => "never (NONC in SREP)",
            (Batching::OrientationDisputed, false) => "disputed: one per signature (default)",
            (Batching::OrientationDisputed, true) => "disputed: batched (`batch-disputed`)",
        };
        let ver = if p.framing == gnomon_protocol::profile::Framing::Bare {
            "none".to_string()
        } else {
            format!("{:#x}", p.version.0)
        };
        let _ = writeln!(
            s,
            "| {} | {ver} | {rule} | {} | {:.0} | {:.2} |",
            p.name,
            signatures(*case),
            per(*n),
            per(*n) / v1
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_names_itself() {
        for c in cases() {
            assert_eq!(Case::from_arg(&c.arg()), Some(c));
        }
        assert_eq!(Case::from_arg("version:nothing"), None);
        assert_eq!(Case::from_arg("parse_v1_64"), None);
    }

    #[test]
    fn every_profile_answers_under_its_policy() {
        // The child's own checks: every response verifies, signatures as
        // the policy says (one per request where it forbids batching).
        for c in cases() {
            run(c).unwrap_or_else(|e| panic!("{}: {e}", c.arg()));
        }
        assert_eq!(
            signatures(Case {
                profile: "draft-01",
                batched: true
            }),
            BATCH
        );
        assert_eq!(
            signatures(Case {
                profile: "rfc-10049",
                batched: false
            }),
            1
        );
    }
}
