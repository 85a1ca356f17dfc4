//! A received batch, answered into the reply slots without any system
//! call: each datagram checked (source, limits, size, age, parse, clock,
//! identity) and dropped with its reason or given a slot; the slots grouped
//! by (profile, identity); each group answered with one signature (a
//! version answered one request per signature passes the signature budget
//! first). Allocates nothing: the slots and groups live on the stack, the
//! replies in the buffers made at `Worker::prepare`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use arrayvec::ArrayVec;
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::{Request, ResponseSink};

use super::{queued_ns, udp_acceptor, Worker, WorkerState, MAX_BATCH};
use crate::budget::Ticket;
use crate::grease::Greaser;
use crate::kernel_time::{process_now_ns, SystemClocks};
use crate::keys::Choice;
use crate::limit::{source_prefix, Verdict};
use crate::stats::{Drop, WorkerStats};
use crate::sys::Replies;

/// Parsed request and where it goes, kept on the stack.
#[derive(Clone, Copy)]
struct Slot<'a> {
    /// (profile id, identity index): requests answered by one signature.
    group: (u8, usize),
    src: u16,
    /// Allow-listed: outside the signature budget.
    trusted: bool,
    request: Request<'a>,
}

struct Sink<'r, 'b> {
    replies: &'r mut Replies<'b>,
    next: usize,
    srcs: &'r [u16],
    stats: &'r mut WorkerStats,
    profile: &'static gnomon_protocol::Profile,
    greaser: &'r mut Greaser,
}

impl ResponseSink for Sink<'_, '_> {
    fn buffer(&mut self, _i: usize) -> &mut [u8] {
        self.replies.slot(self.next)
    }

    fn finish(&mut self, i: usize, result: Result<usize, RespondError>) {
        match result {
            Ok(len) => {
                let buf = &mut self.replies.slot(self.next)[..len];
                if self.greaser.apply(self.profile, buf) {
                    self.stats.greased += 1;
                }
                self.replies
                    .commit(self.next, usize::from(self.srcs[i]), len);
                self.next += 1;
            }
            Err(RespondError::OutsideDelegation) => self.stats.drop(Drop::OutsideDelegation),
            Err(_) => self.stats.drop(Drop::TooSmall),
        }
    }
}

impl Worker {
    /// Check, group and answer the first `n` received datagrams into the
    /// reply slots, without sending; returns the replies written. Kept
    /// apart from the syscalls so the whole datagram path can be fuzzed.
    pub fn respond(&self, state: &mut WorkerState, n: usize) -> usize {
        state.follow(&self.config);
        let t_parse = Instant::now();
        let queue_bound_ns = Self::queue_bound_ns(state, t_parse);
        let WorkerState {
            batch,
            responder,
            stats,
            greaser,
            limiter,
            budget,
            epoch,
            sources,
            kernel_time,
            config,
            ..
        } = state;
        // The limits run on the monotonic clock: a wall-clock step must
        // neither free nor silence every source. Never 0: an untouched
        // table entry holds 0.
        let mono_ns = t_parse.saturating_duration_since(*epoch).as_nanos() as u64 + 1;
        stats.received += n as u64;
        stats.batch(n);
        stats.kernel_overflow = u64::from(batch.overflow);
        // One clock read per batch.
        let now_ns = process_now_ns();
        let now_us = now_ns / 1_000;
        // Queue delay is measured on the clock that stamped the requests,
        // estimated from the process's (no system call per batch).
        let kernel_now_ns = kernel_time.now_ns(now_ns, t_parse, &SystemClocks);
        let keys = self.keys.load();
        let acceptor = udp_acceptor(&config.acceptor, keys.profiles);
        let answering = self.clock.answering.load(Ordering::Relaxed);
        let radius_us = self
            .clock
            .radius_us
            .load(Ordering::Relaxed)
            .min(u64::from(u32::MAX)) as u32;
        let max_delay_ns = config.max_queue_delay_us.saturating_mul(1_000);
        sources.sync(&self.broadcasts);
        {
            let (received, mut replies) = batch.split();
            replies.clear();
            let mut slots: ArrayVec<Slot<'_>, MAX_BATCH> = ArrayVec::new();
            for i in 0..n {
                let meta = received.meta(i);
                // Before anything else: no work for a reply that must not
                // (or cannot) be sent.
                if let Some(why) = sources.check(&meta.from, meta.to) {
                    stats.drop(why);
                    continue;
                }
                // Before any other work: a flood from one prefix costs a
                // hash and one cache line per datagram.
                let trusted = match limiter.check(meta.from.ip(), mono_ns) {
                    Verdict::Pass => false,
                    Verdict::Trusted => true,
                    Verdict::Denied => {
                        stats.drop(Drop::Denied);
                        continue;
                    }
                    Verdict::Limited => {
                        stats.drop(Drop::RateLimited);
                        continue;
                    }
                };
                if meta.truncated {
                    stats.drop(Drop::Oversized);
                    continue;
                }
                if let Some(rx) = meta.rx_ns {
                    let waited = queued_ns(kernel_now_ns, rx, queue_bound_ns);
                    stats.delay(waited / 1_000);
                    // Dropped before any hashing or signing is spent on it.
                    if waited > max_delay_ns {
                        stats.drop(Drop::Stale);
                        continue;
                    }
                }
                let request = match acceptor.parse(received.datagram(i)) {
                    Ok(r) => r,
                    Err(e) => {
                        stats.drop(e.into());
                        continue;
                    }
                };
                if !answering {
                    stats.drop(Drop::Unsynchronized);
                    continue;
                }
                let identity = match keys.choose(request.profile, request.srv) {
                    Choice::Identity(k) => k,
                    Choice::UnknownSrv => {
                        stats.drop(Drop::UnknownSrv);
                        continue;
                    }
                    Choice::SrvRequired => {
                        stats.drop(Drop::SrvRequired);
                        continue;
                    }
                    // No key here signs that version: as if it were not served.
                    Choice::NoKeyForScheme => {
                        stats.drop(Drop::UnknownVersion);
                        continue;
                    }
                };
                let group = (request.profile.id.0, identity);
                slots.push(Slot {
                    group,
                    src: i as u16,
                    trusted,
                    request,
                });
            }
            stats.ns_parse += t_parse.elapsed().as_nanos() as u64;
            let t_respond = Instant::now();
            slots.sort_unstable_by_key(|s| s.group);
            let mut next = 0;
            let mut start = 0;
            while start < slots.len() {
                let group = slots[start].group;
                let end = start
                    + slots[start..]
                        .iter()
                        .take_while(|s| s.group == group)
                        .count();
                let run = &slots[start..end];
                let profile = run[0].request.profile;
                let identity = &keys.identities[group.1];
                // One signature per request: the budget decides who gets one,
                // by the share of each source's prefix.
                let budgeted = budget.limited() && responder.leaves_per_signature(profile) == 1;
                let mut reqs: ArrayVec<Request<'_>, MAX_BATCH> = ArrayVec::new();
                let mut srcs: ArrayVec<u16, MAX_BATCH> = ArrayVec::new();
                let mut tickets: ArrayVec<Ticket, MAX_BATCH> = ArrayVec::new();
                for s in run {
                    if budgeted && !s.trusted {
                        let from = received.meta(usize::from(s.src)).from.ip();
                        let (v4, v6) = (config.limit.ipv4_prefix, config.limit.ipv6_prefix);
                        match budget.admit(source_prefix(from, v4, v6), mono_ns) {
                            Some(t) => tickets.push(t),
                            None => {
                                stats.drop(Drop::SignatureBudget);
                                continue;
                            }
                        }
                    }
                    reqs.push(s.request);
                    srcs.push(s.src);
                }
                if reqs.is_empty() {
                    start = end;
                    continue;
                }
                let t_group = budgeted.then(Instant::now);
                // `choose` picked an identity of the profile's scheme.
                let Some(ctx) = identity.batch(profile, now_us, radius_us, &config.vers) else {
                    for _ in &reqs {
                        stats.drop(Drop::UnknownVersion);
                    }
                    start = end;
                    continue;
                };
                let mut sink = Sink {
                    replies: &mut replies,
                    next,
                    srcs: &srcs,
                    stats: &mut *stats,
                    profile,
                    greaser: &mut *greaser,
                };
                let done = responder.respond(&ctx, &reqs, &mut sink);
                next = sink.next;
                if let Some(t) = t_group {
                    // Trusted requests are charged too: they used the time.
                    budget.settle(&tickets, reqs.len(), t.elapsed().as_nanos() as u64);
                }
                stats.signatures += done.signatures as u64;
                stats.responses[usize::from(profile.id.0)] += done.responses as u64;
                start = end;
            }
            stats.ns_respond += t_respond.elapsed().as_nanos() as u64;
            replies.count()
        }
    }
}
