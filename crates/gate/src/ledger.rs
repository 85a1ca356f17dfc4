//! The cost ledger's stage timings (docs/COST.md, "The ledger"): nanoseconds
//! per request for each stage of the request path, per version family and
//! batch size, with the SHA-512 and Ed25519 floor measured in the same run.
//!
//! Unlike the gate these are wall-clock times (median of several samples),
//! so they move with the machine; the gate's instruction counts are what CI
//! holds fixed. The socket stages go through the server's own `recvmmsg` and
//! `sendmmsg` code on loopback.

use std::fmt::Write as _;
use std::hint::black_box;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use gnomon_protocol::merkle::Tree;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{Acceptor, KeyPair, Request, Responder, ResponderOptions, Sign};
use gnomon_server::signer::Signer;
use gnomon_server::sys;

use crate::fixture::{leaf_inputs, profile, requests, Server, Sink, ONLINE_SEED};
use crate::stages::{check_responses, srep_of};

/// The version families the ledger reports, and the profile measured for each.
pub const FAMILIES: [(&str, &str); 3] = [
    ("Google", "google"),
    ("drafts 01–11 (measured: draft 11)", "draft-11"),
    (
        "drafts 12–19 and version 1 (measured: version 1)",
        "rfc-10049",
    ),
];

/// Batch sizes of every table.
pub const BATCHES: [usize; 5] = [1, 8, 64, 256, 1024];

/// One stage of the request path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// `recvmmsg` of the batch, per datagram.
    Recv,
    /// Framing and the tag table (`Message::parse`).
    Framing,
    /// The rest of `Acceptor::parse`: fields, VER list, version choice.
    Fields,
    /// The leaf hashes.
    Leaves,
    /// The nodes above the leaves.
    Tree,
    /// One Ed25519 signature, amortized over the batch.
    Signature,
    /// Everything else `Responder::respond` does: per-batch SREP and
    /// certificate layout, per-request NONC/PATH/INDX writes.
    Write,
    /// `sendmmsg` of the replies, per reply (includes loopback delivery).
    Send,
}

impl Stage {
    /// Every stage in request-path order.
    pub const ALL: [Stage; 8] = [
        Stage::Recv,
        Stage::Framing,
        Stage::Fields,
        Stage::Leaves,
        Stage::Tree,
        Stage::Signature,
        Stage::Write,
        Stage::Send,
    ];

    /// Row label.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Recv => "receive syscall (recvmmsg)",
            Stage::Framing => "parse: framing, tag table",
            Stage::Fields => "parse: fields, version choice",
            Stage::Leaves => "leaf hash",
            Stage::Tree => "tree",
            Stage::Signature => "signature (amortized)",
            Stage::Write => "response write",
            Stage::Send => "send syscall (sendmmsg)",
        }
    }

    /// Why the stage is built the way it is.
    pub fn why(self) -> &'static str {
        match self {
            Stage::Recv => "one syscall per batch; buffers and headers preallocated; kernel timestamp read here for the stale check",
            Stage::Framing => "validated once, then lookups are infallible; zero-copy",
            Stage::Fields => "one walk of the tag table for the four tags read; the version row from a table built at compile time; VER repeats found by sorting a stack copy (lists capped at 128)",
            Stage::Leaves => "over the datagram as received (12+/1) or the nonce; the protocol requires it",
            Stage::Tree => "preallocated node array reused per batch; N−1 nodes for N leaves",
            Stage::Signature => "one per batch over context ‖ SREP built in place; the only per-batch crypto",
            Stage::Write => "header and SREP laid out once per batch; per request only NONC, PATH, INDX copied, into a buffer cut to the request length",
            Stage::Send => "one syscall per batch, replies from the arrival address; the kernel's loopback delivery is counted here",
        }
    }

    /// Whether the stage is protocol work (between the two syscalls).
    pub fn is_protocol(self) -> bool {
        !matches!(self, Stage::Recv | Stage::Send)
    }
}

/// What one family at one batch size measured, ns per request.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Profile measured.
    pub profile: &'static str,
    /// Requests per batch.
    pub batch: usize,
    /// ns per request for each stage of [`Stage::ALL`].
    pub stages: [f64; 8],
    /// One signature, ns (per batch).
    pub signature_per_batch: f64,
    /// Both syscalls per request again, on a wildcard-bound socket, which
    /// reads and writes an `IP_PKTINFO` control message per datagram.
    pub syscalls_wildcard: (f64, f64),
    /// One leaf hashed alone (single-buffer SHA-512), ns.
    pub leaf_single: f64,
    /// The unavoidable crypto per request: the batch's N leaves and N−1
    /// nodes hashed bare (multi-buffer), plus 1/N of a signature.
    pub floor: f64,
}

impl Cell {
    /// ns per request between the syscalls.
    pub fn protocol(&self) -> f64 {
        Stage::ALL
            .iter()
            .zip(self.stages)
            .filter(|(s, _)| s.is_protocol())
            .map(|(_, ns)| ns)
            .sum()
    }

    /// ns per request including the syscalls.
    pub fn total(&self) -> f64 {
        self.stages.iter().sum()
    }
}

/// How long each sample runs.
const SAMPLE: Duration = Duration::from_millis(10);
/// Samples per figure; the median is reported.
const SAMPLES: usize = 7;

/// Median ns per call of `f`, each sample long enough to swamp the clock.
fn time_ns(mut f: impl FnMut()) -> f64 {
    f();
    let mut iters = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed() >= SAMPLE || iters >= 1 << 24 {
            break;
        }
        iters *= 2;
    }
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(iters)
        })
        .collect();
    median(&mut samples)
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Measure one family at one batch size.
pub fn measure(profile_name: &str, n: usize) -> Result<Cell, String> {
    let p = profile(profile_name);
    let datagrams = requests(p, n);
    let acceptor = Acceptor::default();
    let parsed: Vec<Request<'_>> = datagrams
        .iter()
        .map(|d| acceptor.parse(d).map_err(|e| format!("{e:?}")))
        .collect::<Result<_, _>>()?;
    let server = Server::new(p);
    let ctx = server.context(p);
    // Disputed-orientation drafts are measured batched, as with
    // `--batch-disputed`; by default the server answers them one by one.
    let options = ResponderOptions {
        batch_disputed: true,
        ..ResponderOptions::default()
    };
    let mut responder = Box::new(Responder::new(n, options));
    let mut sink = Sink::new(n);
    let stats = responder.respond(&ctx, &parsed, &mut sink);
    if stats.responses != n || stats.signatures != 1 {
        return Err(format!("{profile_name} × {n}: not one tree: {stats:?}"));
    }
    check_responses(&server, &datagrams, &sink)?;
    let response_len = sink.lens[0].and_then(Result::ok).unwrap_or(0);
    let response = sink.bufs[0][..response_len].to_vec();

    let per = |ns: f64| ns / n as f64;
    let framing = per(time_ns(|| {
        for d in &datagrams {
            let body = if wire::has_magic(d) {
                wire::unframe(d).unwrap_or(d)
            } else {
                d
            };
            let _ = black_box(Message::parse(black_box(body)));
        }
    }));
    let parse = per(time_ns(|| {
        for d in &datagrams {
            let _ = black_box(acceptor.parse(black_box(d)));
        }
    }));
    let inputs = leaf_inputs(p, &datagrams);
    let mut tree = Box::new(Tree::with_capacity(n));
    let leaves = per(time_ns(|| {
        tree.reset(p.hash);
        // As the responder does: the leaves go in together (multi-buffer).
        black_box(tree.push_leaves(black_box(&inputs)));
    }));
    let nodes = per(time_ns(|| {
        black_box(tree.finish());
    }));
    let mut signed = p.contexts.srep.to_vec();
    signed.extend_from_slice(srep_of(&response)?);
    let key = Signer::new(&KeyPair::from_seed(&ONLINE_SEED));
    let mut sig = [0u8; 64];
    let signature_per_batch = time_ns(|| {
        key.sign_into(black_box(&signed), p.contexts.srep.len(), &mut sig);
        black_box(&sig);
    });
    let respond = per(time_ns(|| {
        black_box(responder.respond(black_box(&ctx), &parsed, &mut sink));
    }));
    let signature = signature_per_batch / n as f64;
    let write = respond - leaves - nodes - signature;
    let (recv, send) = syscalls(&datagrams, response_len, "127.0.0.1:0")?;
    let syscalls_wildcard = syscalls(&datagrams, response_len, "0.0.0.0:0")?;

    // The floor: the batch's hashes with no tree bookkeeping, multi-buffer
    // as the responder does them, and the signature; N leaves, N−1 nodes.
    let len = p.hash.len();
    let mut outs = vec![[0u8; 64]; n];
    let leaves_bare = time_ns(|| p.hash.leaves(black_box(&inputs), &mut outs));
    let halves = ([7u8; 64], [9u8; 64]);
    let nodes_bare = time_ns(|| {
        let pairs = (1..n).map(|_| (&halves.0[..len], &halves.1[..len]));
        p.hash.nodes(black_box(pairs), &mut outs[..n - 1]);
    });
    let floor = (leaves_bare + nodes_bare) / n as f64 + signature;
    // What multi-buffer hashing saves: the same leaves one at a time.
    let mut out = [0u8; 64];
    let leaf_single = time_ns(|| p.hash.leaf(black_box(inputs[0]), &mut out));

    Ok(Cell {
        profile: p.name,
        batch: n,
        stages: [
            recv,
            framing,
            parse - framing,
            leaves,
            nodes,
            signature,
            write,
            send,
        ],
        signature_per_batch,
        syscalls_wildcard,
        leaf_single,
        floor,
    })
}

/// ns per datagram of the server's `recvmmsg` for a batch of `datagrams`,
/// and of its `sendmmsg` of as many replies of `reply_len` bytes.
fn syscalls(datagrams: &[Vec<u8>], reply_len: usize, bind: &str) -> Result<(f64, f64), String> {
    let io = |e: std::io::Error| format!("loopback socket: {e}");
    let n = datagrams.len();
    let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let bind: SocketAddr = bind.parse().map_err(|e| format!("{bind}: {e}"))?;
    let buffer = Some(16 << 20);
    let server = sys::udp_socket(bind, buffer, Duration::from_secs(1)).map_err(io)?;
    let client = sys::udp_socket(any, buffer, Duration::from_secs(1)).map_err(io)?;
    let port = server
        .local_addr()
        .map_err(io)?
        .as_socket()
        .map_or(0, |a| a.port());
    let server_addr: SocketAddr = SocketAddr::from(([127, 0, 0, 1], port));
    let (fd, mut batch) = (server.as_raw_fd(), sys::Batch::new(n));
    let mut drain = sys::Batch::new(n);
    let (mut recv_ns, mut send_ns, mut rounds) = (Vec::new(), Vec::new(), 0);
    let started = Instant::now();
    while rounds < 5 || (started.elapsed() < SAMPLE * SAMPLES as u32 && rounds < 200) {
        for d in datagrams {
            client.send_to(d, &server_addr.into()).map_err(io)?;
        }
        let t = Instant::now();
        let mut got = 0;
        while got < n {
            got += batch.recv(fd).map_err(io)?;
        }
        recv_ns.push(t.elapsed().as_nanos() as f64 / n as f64);
        {
            let (_, mut replies) = batch.split();
            for k in 0..n {
                replies.commit(k, k, reply_len);
            }
        }
        let t = Instant::now();
        let mut dropped = gnomon_server::stats::WorkerStats::default();
        let sent = batch.send(fd, n, &mut dropped).map_err(io)?;
        send_ns.push(t.elapsed().as_nanos() as f64 / n as f64);
        if sent != n {
            return Err(format!("sendmmsg took {sent} of {n}"));
        }
        let mut back = 0;
        while back < n {
            back += drain.recv(client.as_raw_fd()).map_err(io)?;
        }
        rounds += 1;
    }
    Ok((median(&mut recv_ns), median(&mut send_ns)))
}

/// Every family at every batch size.
pub fn measure_all(
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(&'static str, Vec<Cell>)>, String> {
    FAMILIES
        .iter()
        .map(|(family, name)| {
            let cells = BATCHES
                .iter()
                .map(|&n| {
                    progress(&format!("{name} × {n}"));
                    measure(name, n)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((*family, cells))
        })
        .collect()
}

fn fmt_ns(ns: f64) -> String {
    let r = ns.round() as i64;
    let s = r.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if r < 0 {
        format!("−{out}")
    } else {
        out
    }
}

/// The ledger tables in Markdown: why each stage is built as it is, then
/// one table of figures per family.
pub fn markdown(families: &[(&'static str, Vec<Cell>)]) -> String {
    let mut md = String::from("| stage | why it is built this way |\n|---|---|\n");
    for s in Stage::ALL {
        let _ = writeln!(md, "| {} | {} |", s.label(), s.why());
    }
    md.push('\n');
    let head: String = BATCHES.iter().map(|n| format!(" {n} |")).collect();
    let rule: String = BATCHES.iter().map(|_| "---:|").collect();
    for (family, cells) in families {
        let _ = writeln!(md, "#### {family}: ns per request, by batch size\n");
        let _ = writeln!(md, "| stage |{head}");
        let _ = writeln!(md, "|---|{rule}");
        let row = |md: &mut String, label: &str, f: &dyn Fn(&Cell) -> String| {
            let vals: String = cells.iter().map(|c| format!(" {} |", f(c))).collect();
            let _ = writeln!(md, "| {label} |{vals}");
        };
        for (i, s) in Stage::ALL.iter().enumerate() {
            row(&mut md, s.label(), &|c| fmt_ns(c.stages[i]));
            if *s == Stage::Signature {
                row(&mut md, "(one signature, per batch)", &|c| {
                    fmt_ns(c.signature_per_batch)
                });
            }
        }
        row(&mut md, "**protocol work** (parse to write)", &|c| {
            format!("**{}**", fmt_ns(c.protocol()))
        });
        row(&mut md, "floor: bare SHA-512 and Ed25519", &|c| {
            fmt_ns(c.floor)
        });
        row(&mut md, "(leaf hash, one at a time)", &|c| {
            fmt_ns(c.leaf_single)
        });
        row(&mut md, "protocol work above the floor", &|c| {
            format!("{:+.0} %", (c.protocol() / c.floor - 1.0) * 100.0)
        });
        row(&mut md, "total with both syscalls", &|c| fmt_ns(c.total()));
        row(&mut md, "(receive, wildcard bind: IP_PKTINFO)", &|c| {
            fmt_ns(c.syscalls_wildcard.0)
        });
        row(&mut md, "(send, wildcard bind: IP_PKTINFO)", &|c| {
            fmt_ns(c.syscalls_wildcard.1)
        });
        md.push('\n');
    }
    md
}

/// The tables as JSON, for plots and comparisons.
pub fn json(families: &[(&'static str, Vec<Cell>)]) -> serde_json::Value {
    let stage_names: Vec<&str> = Stage::ALL.iter().map(|s| s.label()).collect();
    serde_json::json!({
        "unit": "ns per request",
        "stages": stage_names,
        "families": families.iter().map(|(family, cells)| serde_json::json!({
            "family": family,
            "cells": cells.iter().map(|c| serde_json::json!({
                "profile": c.profile,
                "batch": c.batch,
                "stages": c.stages.to_vec(),
                "signature_per_batch": c.signature_per_batch,
                "syscalls_wildcard": [c.syscalls_wildcard.0, c.syscalls_wildcard.1],
                "leaf_single": c.leaf_single,
                "floor": c.floor,
                "protocol": c.protocol(),
                "total": c.total(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// Markers around the generated part of docs/COST.md.
pub const BEGIN: &str = "<!-- ledger:begin (generated by scripts/ledger; do not edit by hand) -->";
/// See [`BEGIN`].
pub const END: &str = "<!-- ledger:end -->";

/// `doc` with the text between the markers replaced by `generated`.
pub fn splice(doc: &str, generated: &str) -> Result<String, String> {
    let start = doc.find(BEGIN).ok_or("no ledger:begin marker")? + BEGIN.len();
    let end = doc.find(END).ok_or("no ledger:end marker")?;
    if end < start {
        return Err("ledger markers out of order".to_string());
    }
    Ok(format!("{}\n{}{}", &doc[..start], generated, &doc[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_between_the_markers() {
        let doc = format!("before\n{BEGIN}\nold table\n{END}\nafter\n");
        let new = splice(&doc, "new table\n").unwrap();
        assert_eq!(new, format!("before\n{BEGIN}\nnew table\n{END}\nafter\n"));
        assert!(splice("no markers", "x").is_err());
    }

    #[test]
    fn every_family_measures_a_verified_batch() {
        // The figures themselves are not asserted (timings never are); what
        // is checked is that each stage ran and the batch verified.
        for (_, name) in FAMILIES {
            let cell = measure(name, 8).unwrap();
            for (s, ns) in Stage::ALL.iter().zip(cell.stages) {
                if *s != Stage::Write && *s != Stage::Fields {
                    assert!(ns.is_finite() && ns > 0.0, "{name} {s:?}: {ns}");
                }
            }
            assert!(cell.floor > 0.0 && cell.signature_per_batch > 0.0);
        }
        let md = markdown(&[("Google", vec![measure("google", 1).unwrap()])]);
        assert!(md.contains("| leaf hash |"), "{md}");
    }
}
