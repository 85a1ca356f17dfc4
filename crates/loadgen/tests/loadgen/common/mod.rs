//! A small in-test Roughtime responder on 127.0.0.1, built only from
//! gnomon-protocol (Acceptor + Responder), so the load generator is tested
//! against a real peer without the server crate. Shared with the CLI's
//! tests through `#[path]`.
#![allow(dead_code, unreachable_pub)]

use std::net::{SocketAddr, UdpSocket};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gnomon_protocol::responder::RespondError;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{
    Acceptor, BatchContext, CertificateSet, KeyPair, Request, Responder, ResponderOptions,
    ResponseSink, Tag, Version,
};

/// The datagram that tells a responder thread to exit.
const STOP: &[u8] = b"STOP";
/// A responder never outlives this, whatever the test does.
const LIFETIME: Duration = Duration::from_secs(60);
const BATCH: usize = 64;

/// What the responder sends back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Correct responses, batched as they arrive.
    Honest,
    /// Correct responses with one bit of the signature flipped.
    BadSignature,
    /// Fixed bytes that are not Roughtime.
    Garbage,
}

pub struct TestResponder {
    pub addr: SocketAddr,
    pub public_key: [u8; 32],
    thread: Option<JoinHandle<u64>>,
}

impl TestResponder {
    pub fn start(behaviour: Behaviour) -> TestResponder {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind responder");
        // Room for every request a test keeps in flight, even while this
        // thread waits for a CPU (the kernel caps it at rmem_max).
        let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(1 << 20);
        // Bounds each blocking receive so the lifetime cap is honoured.
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let addr = sock.local_addr().expect("addr");
        let long_term = KeyPair::from_seed(&[7; 32]);
        let public_key = long_term.public();
        let thread = std::thread::spawn(move || serve(sock, &long_term, behaviour));
        TestResponder {
            addr,
            public_key,
            thread: Some(thread),
        }
    }

    /// Stop the thread; returns how many datagrams it answered.
    pub fn stop(mut self) -> u64 {
        self.shutdown()
    }

    fn shutdown(&mut self) -> u64 {
        let Some(t) = self.thread.take() else {
            return 0;
        };
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.send_to(STOP, self.addr).expect("send stop");
        t.join().expect("responder thread")
    }
}

impl Drop for TestResponder {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as u64
}

struct Sink {
    bufs: Vec<Vec<u8>>,
    lens: Vec<Option<usize>>,
}

impl ResponseSink for Sink {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(&mut self, i: usize, result: Result<usize, RespondError>) {
        self.lens[i] = result.ok();
    }
}

fn serve(sock: UdpSocket, long_term: &KeyPair, behaviour: Behaviour) -> u64 {
    let online = KeyPair::from_seed(&[8; 32]);
    let now = now_us();
    let certs = CertificateSet::mint_all(
        long_term,
        &online.public(),
        now - 3_600_000_000,
        now + 3_600_000_000,
    );
    let vers = [Version::RFC, Version::DRAFT_12_TO_19];
    let acceptor = Acceptor::default();
    let mut responder = Responder::new(BATCH, ResponderOptions::default());
    let mut inbox = vec![vec![0u8; 2048]; BATCH];
    let mut meta: Vec<(usize, SocketAddr)> = Vec::with_capacity(BATCH);
    let mut sink = Sink {
        bufs: vec![vec![0u8; 2048]; BATCH],
        lens: vec![None; BATCH],
    };
    let mut answered = 0u64;
    let born = Instant::now();
    while born.elapsed() < LIFETIME {
        // Block for the first datagram, then take whatever else is queued.
        meta.clear();
        sock.set_nonblocking(false).expect("blocking");
        while meta.len() < BATCH {
            match sock.recv_from(&mut inbox[meta.len()]) {
                Ok((n, from)) => {
                    if &inbox[meta.len()][..n] == STOP {
                        return answered;
                    }
                    meta.push((n, from));
                    sock.set_nonblocking(true).expect("nonblocking");
                }
                Err(_) => break,
            }
        }
        if behaviour == Behaviour::Garbage {
            for &(_, from) in &meta {
                let _ = sock.send_to(&[0x5a; 200], from);
                answered += 1;
            }
            continue;
        }
        let reqs: Vec<(Request<'_>, SocketAddr)> = meta
            .iter()
            .zip(&inbox)
            .filter_map(|(&(n, from), buf)| Some((acceptor.parse(&buf[..n]).ok()?, from)))
            .collect();
        // One tree per profile, as a server groups its batch.
        let mut done = vec![false; reqs.len()];
        for first in 0..reqs.len() {
            if done[first] {
                continue;
            }
            let profile = reqs[first].0.profile;
            let group: Vec<usize> = (first..reqs.len())
                .filter(|&k| !done[k] && reqs[k].0.profile.id == profile.id)
                .collect();
            // Unanswered: a version this Ed25519 responder cannot sign.
            let Some(cert) = certs.for_profile(profile) else {
                group.iter().for_each(|&k| done[k] = true);
                continue;
            };
            let batch: Vec<Request<'_>> = group.iter().map(|&k| reqs[k].0).collect();
            let ctx = BatchContext {
                profile,
                now_us: now_us(),
                radius_us: 1_000_000,
                online: &online,
                cert,
                vers: &vers,
            };
            sink.lens.iter_mut().for_each(|l| *l = None);
            responder.respond(&ctx, &batch, &mut sink);
            for (i, &k) in group.iter().enumerate() {
                done[k] = true;
                let Some(len) = sink.lens[i] else { continue };
                let resp = &mut sink.bufs[i][..len];
                if behaviour == Behaviour::BadSignature {
                    flip_signature_bit(resp, profile.framing);
                }
                let _ = sock.send_to(resp, reqs[k].1);
                answered += 1;
            }
        }
    }
    answered
}

fn flip_signature_bit(resp: &mut [u8], framing: gnomon_protocol::profile::Framing) {
    let at = {
        let body = match framing {
            gnomon_protocol::profile::Framing::Packet => wire::unframe(resp).expect("framed"),
            gnomon_protocol::profile::Framing::Bare => &resp[..],
        };
        let msg = Message::parse(body).expect("own response parses");
        let sig = msg.get(Tag::SIG).expect("SIG");
        sig.as_ptr() as usize - resp.as_ptr() as usize
    };
    resp[at] ^= 1;
}
