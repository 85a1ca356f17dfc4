//! The measured scenarios. Each runs its setup and one warm-up pass outside
//! the measured region, then exactly one pass inside [`measured`], then
//! checks the result so a stage that silently stopped doing its work fails
//! instead of getting cheaper.
//!
//! Inputs are fixed ([`crate::fixture`]): keys from constant seeds, nonces derived from the
//! request index, one fixed `now`. Nothing read from the clock, the
//! environment or a random source reaches the measured code.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use gnomon_protocol::merkle::Tree;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{
    verify_response, Acceptor, KeyPair, Profile, Request, Responder, ResponderOptions, Sign, Tag,
};

use gnomon_server::limit::{LimitConfig, SourceLimiter, Verdict};
use gnomon_server::signer::Signer;
use gnomon_server::sources::{Broadcasts, SourceFilter};

use crate::fixture::{leaf_inputs, profile, requests, Server, Sink, NOW_US, ONLINE_SEED};

/// Requests per batch in every batched stage.
pub const BATCH: usize = 64;

/// The symbol callgrind is told to count inside (`--toggle-collect`).
pub const MEASURED_SYMBOL: &str = "gnomon_gate::stages::measured";

/// One gated scenario.
#[derive(Clone, Copy, Debug)]
pub struct Stage {
    /// Name in the baseline and in failure messages.
    pub name: &'static str,
    /// What the measured region does.
    pub what: &'static str,
    /// The function callgrind counts inside: [`MEASURED_SYMBOL`], or a
    /// production function when a stage cannot be cut out through the
    /// public API.
    pub symbol: &'static str,
    run: fn() -> Result<(), String>,
}

impl Stage {
    /// Set up, warm up, run the measured region once, check the result.
    pub fn run(&self) -> Result<(), String> {
        (self.run)()
    }
}

/// Every stage, in table order.
pub const STAGES: &[Stage] = &[
    Stage {
        name: "parse_v1_64",
        what: "Acceptor::parse of 64 version-1 requests (1024 B)",
        symbol: MEASURED_SYMBOL,
        run: || parse("rfc-10049"),
    },
    Stage {
        name: "parse_google_64",
        what: "Acceptor::parse of 64 Google requests (1024 B)",
        symbol: MEASURED_SYMBOL,
        run: || parse("google"),
    },
    Stage {
        name: "respond_v1_64",
        what: "Responder::respond, 64 version-1 requests: leaves, tree, signature, writes",
        symbol: MEASURED_SYMBOL,
        run: || respond("rfc-10049", true),
    },
    Stage {
        name: "respond_google_64",
        what: "Responder::respond, 64 Google requests: leaves, tree, signature, writes",
        symbol: MEASURED_SYMBOL,
        run: || respond("google", true),
    },
    Stage {
        name: "leaves_v1_64",
        what: "Tree::push_leaves of 64 whole version-1 requests",
        symbol: MEASURED_SYMBOL,
        run: || leaves("rfc-10049"),
    },
    Stage {
        name: "leaves_google_64",
        what: "Tree::push_leaves of 64 Google nonces",
        symbol: MEASURED_SYMBOL,
        run: || leaves("google"),
    },
    Stage {
        name: "tree_v1_64",
        what: "Tree::finish over 64 version-1 leaves",
        symbol: MEASURED_SYMBOL,
        run: || tree("rfc-10049"),
    },
    Stage {
        name: "tree_google_64",
        what: "Tree::finish over 64 Google leaves",
        symbol: MEASURED_SYMBOL,
        run: || tree("google"),
    },
    Stage {
        name: "sign_v1",
        what: "one Ed25519 signature over context ‖ SREP of a version-1 batch",
        symbol: MEASURED_SYMBOL,
        run: || sign("rfc-10049"),
    },
    Stage {
        name: "sign_google",
        what: "one Ed25519 signature over the SREP of a Google batch",
        symbol: MEASURED_SYMBOL,
        run: || sign("google"),
    },
    // Response writing has no public entry point of its own: count inside the
    // responder's per-response writer during one real batch. No warm-up
    // batch, or its writes would be counted too.
    Stage {
        name: "write_v1_64",
        what: "Responder::write_one for each of 64 version-1 responses",
        symbol: WRITE_SYMBOL,
        run: || respond("rfc-10049", false),
    },
    Stage {
        name: "write_google_64",
        what: "Responder::write_one for each of 64 Google responses",
        symbol: WRITE_SYMBOL,
        run: || respond("google", false),
    },
    Stage {
        name: "sources_64",
        what: "SourceFilter::sync, then SourceFilter::check of 64 ordinary sources (half IPv4, half IPv6)",
        symbol: MEASURED_SYMBOL,
        run: sources,
    },
    Stage {
        name: "limit_64",
        what: "SourceLimiter::check of 64 sources (half IPv4, half IPv6) against the default lists, rate and table",
        symbol: MEASURED_SYMBOL,
        run: limit,
    },
];

const WRITE_SYMBOL: &str = "gnomon_protocol::responder::Responder::write_one";

/// The stage called `name`.
pub fn find(name: &str) -> Option<&'static Stage> {
    STAGES.iter().find(|s| s.name == name)
}

/// The only code callgrind counts. Kept out of line so its symbol exists
/// for `--toggle-collect`; everything `f` calls is counted with it.
#[inline(never)]
pub fn measured(f: &mut dyn FnMut()) {
    f()
}

fn parse(name: &str) -> Result<(), String> {
    let p = profile(name);
    let datagrams = requests(p, BATCH);
    let acceptor = Acceptor::default();
    let mut parsed = Vec::with_capacity(BATCH);
    let pass = |parsed: &mut Vec<_>| {
        parsed.clear();
        for d in &datagrams {
            parsed.push(acceptor.parse(black_box(d.as_slice())));
        }
    };
    pass(&mut parsed);
    measured(&mut || pass(&mut parsed));
    for r in &parsed {
        let r = r.as_ref().map_err(|e| format!("request rejected: {e:?}"))?;
        if r.profile.id != p.id {
            return Err(format!("parsed as {} not {}", r.profile.name, p.name));
        }
    }
    Ok(())
}

/// Answer the batch once outside any measurement and return one response,
/// checked, for the stages that take their inputs from it.
fn answer(p: &'static Profile, datagrams: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    let server = Server::new(p);
    let acceptor = Acceptor::default();
    let parsed: Vec<Request<'_>> = datagrams
        .iter()
        .map(|d| acceptor.parse(d).map_err(|e| format!("{e:?}")))
        .collect::<Result<_, _>>()?;
    let mut responder = Responder::new(BATCH, ResponderOptions::default());
    let mut sink = Sink::new(BATCH);
    responder.respond(&server.context(p), &parsed, &mut sink);
    check_responses(&server, datagrams, &sink)?;
    let len = sink.lens[0].and_then(Result::ok).unwrap_or(0);
    Ok(sink.bufs[0][..len].to_vec())
}

pub(crate) fn check_responses(
    server: &Server,
    datagrams: &[Vec<u8>],
    sink: &Sink,
) -> Result<(), String> {
    let public = server.long_term.public();
    for (i, d) in datagrams.iter().enumerate() {
        let len = match sink.lens[i] {
            Some(Ok(len)) => len,
            other => return Err(format!("request {i} not answered: {other:?}")),
        };
        let v = verify_response(d, &sink.bufs[i][..len], &public)
            .map_err(|e| format!("response {i} does not verify: {e:?}"))?;
        if v.midpoint_us.abs_diff(NOW_US) > 1_000_000 {
            return Err(format!("response {i} has midpoint {}", v.midpoint_us));
        }
    }
    Ok(())
}

/// The worker's per-datagram source filter (issue 10, finding 1): once per
/// batch a look at the broadcast table's generation, then a few integer
/// comparisons per datagram. Sources are ordinary clients, which pass every
/// comparison, the longest way through.
fn sources() -> Result<(), String> {
    let shared = Broadcasts::default();
    shared.set([
        Ipv4Addr::new(127, 255, 255, 255),
        Ipv4Addr::new(192, 0, 2, 255),
        Ipv4Addr::new(198, 51, 100, 127),
    ]);
    let mut filter = SourceFilter::new(Some(SocketAddr::from(([0, 0, 0, 0], 2002))));
    let inputs: Vec<(SocketAddr, Option<IpAddr>)> = (0..BATCH as u16)
        .map(|i| {
            let [hi, lo] = i.to_be_bytes();
            if i % 2 == 0 {
                let from = SocketAddr::from(([203, 0, hi, lo], 40_000 + i));
                (from, Some(IpAddr::from([192, 0, 2, 2])))
            } else {
                let from = SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 7, i], 40_000 + i));
                (from, Some(IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, 2])))
            }
        })
        .collect();
    let mut verdicts = Vec::with_capacity(BATCH);
    let pass = |filter: &mut SourceFilter, verdicts: &mut Vec<_>| {
        verdicts.clear();
        filter.sync(&shared);
        for (from, to) in &inputs {
            verdicts.push(filter.check(black_box(from), *to));
        }
    };
    pass(&mut filter, &mut verdicts);
    measured(&mut || pass(&mut filter, &mut verdicts));
    match verdicts.iter().position(Option::is_some) {
        Some(i) => Err(format!("source {} dropped: {:?}", inputs[i].0, verdicts[i])),
        None if verdicts.len() != BATCH => Err(format!("{} verdicts", verdicts.len())),
        None => Ok(()),
    }
}

fn limit() -> Result<(), String> {
    // The defaults (loopback allowed, 50/s, burst 100, 65,536 prefixes)
    // and a deny list of one, hashed with a fixed key so counts repeat.
    let config = LimitConfig {
        deny: vec!["192.0.2.0/24".parse().map_err(|e| format!("{e}"))?],
        ..LimitConfig::default()
    };
    let fixed =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    let mut limiter = SourceLimiter::new(&config, fixed);
    let sources: Vec<IpAddr> = (0..BATCH as u16)
        .map(|i| {
            let [hi, lo] = i.to_be_bytes();
            if i % 2 == 0 {
                IpAddr::from([203, 0, hi, lo])
            } else {
                IpAddr::from([0x2001, 0xdb8, 0, i, 0, 0, 0, 7])
            }
        })
        .collect();
    let mut verdicts = Vec::with_capacity(BATCH);
    let mut pass = |now: u64, verdicts: &mut Vec<Verdict>| {
        verdicts.clear();
        for ip in &sources {
            verdicts.push(limiter.check(black_box(*ip), now));
        }
    };
    // The warm-up enters every prefix; the measured pass finds them.
    pass(1_000_000_000, &mut verdicts);
    measured(&mut || pass(1_001_000_000, &mut verdicts));
    match verdicts.iter().position(|v| *v != Verdict::Pass) {
        Some(i) => Err(format!("source {} judged {:?}", sources[i], verdicts[i])),
        None if verdicts.len() != BATCH => Err(format!("{} verdicts", verdicts.len())),
        None => Ok(()),
    }
}

fn respond(name: &str, warm_up: bool) -> Result<(), String> {
    let p = profile(name);
    let datagrams = requests(p, BATCH);
    let server = Server::new(p);
    let ctx = server.context(p);
    let acceptor = Acceptor::default();
    let parsed: Vec<Request<'_>> = datagrams
        .iter()
        .map(|d| acceptor.parse(d).map_err(|e| format!("{e:?}")))
        .collect::<Result<_, _>>()?;
    // Boxed so the responder's buffers sit on the heap at the same offset
    // in every run, whatever the stack layout.
    let mut responder = Box::new(Responder::new(BATCH, ResponderOptions::default()));
    let mut sink = Sink::new(BATCH);
    let mut stats = Default::default();
    if warm_up {
        stats = responder.respond(&ctx, &parsed, &mut sink);
    }
    measured(&mut || stats = responder.respond(black_box(&ctx), &parsed, &mut sink));
    if stats.responses != BATCH || stats.signatures != 1 {
        return Err(format!("expected one tree of {BATCH}: {stats:?}"));
    }
    check_responses(&server, &datagrams, &sink)
}

/// The root a real batch got, read back from its first response.
fn root_of(response: &[u8]) -> Result<Vec<u8>, String> {
    let srep = srep_of(response)?;
    let srep = Message::parse(srep).map_err(|e| format!("SREP: {e:?}"))?;
    srep.get(Tag::ROOT)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| "SREP without ROOT".to_string())
}

/// The top-level message of a response, framed (12+) or not.
fn body_of(response: &[u8]) -> Result<Message<'_>, String> {
    let body = if wire::has_magic(response) {
        wire::unframe(response).map_err(|e| format!("framing: {e:?}"))?
    } else {
        response
    };
    Message::parse(body).map_err(|e| format!("response: {e:?}"))
}

pub(crate) fn srep_of(response: &[u8]) -> Result<&[u8], String> {
    body_of(response)?
        .get(Tag::SREP)
        .ok_or_else(|| "response without SREP".to_string())
}

fn leaves(name: &str) -> Result<(), String> {
    let p = profile(name);
    let datagrams = requests(p, BATCH);
    let inputs = leaf_inputs(p, &datagrams);
    let mut tree = Box::new(Tree::with_capacity(BATCH));
    // As the responder does: the leaves go in together (multi-buffer).
    let pass = |tree: &mut Tree| {
        tree.reset(p.hash);
        black_box(tree.push_leaves(black_box(&inputs)));
    };
    pass(&mut tree);
    measured(&mut || pass(&mut tree));
    // The leaves are right if the tree over them has the batch's root.
    let want = root_of(&answer(p, &datagrams)?)?;
    if tree.finish() != want.as_slice() {
        return Err("leaves do not give the responder's root".to_string());
    }
    Ok(())
}

fn tree(name: &str) -> Result<(), String> {
    let p = profile(name);
    let datagrams = requests(p, BATCH);
    let inputs = leaf_inputs(p, &datagrams);
    let mut tree = Box::new(Tree::with_capacity(BATCH));
    tree.reset(p.hash);
    tree.push_leaves(&inputs);
    // `finish` only reads the leaves, so it can run twice over them.
    tree.finish();
    measured(&mut || {
        black_box(tree.finish());
    });
    let want = root_of(&answer(p, &datagrams)?)?;
    if tree.root() != want.as_slice() {
        return Err("tree root differs from the responder's".to_string());
    }
    Ok(())
}

fn sign(name: &str) -> Result<(), String> {
    let p = profile(name);
    let datagrams = requests(p, BATCH);
    let response = answer(p, &datagrams)?;
    let mut signed = p.contexts.srep.to_vec();
    signed.extend_from_slice(srep_of(&response)?);
    // The online key the responder signs with, as the server's workers do.
    let key = Signer::new(&KeyPair::from_seed(&ONLINE_SEED));
    let ctx_len = p.contexts.srep.len();
    let mut sig = [0u8; 64];
    measured(&mut || key.sign_into(black_box(&signed), ctx_len, &mut sig));
    if body_of(&response)?.get(Tag::SIG) != Some(&sig[..]) {
        return Err("signature differs from the responder's".to_string());
    }
    Ok(())
}
