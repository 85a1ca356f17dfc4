//! The server's whole datagram path as a worker runs it: a batch of
//! datagrams, built from real requests of random versions and then
//! mutated, from random sources, with random kernel receive times, is
//! checked, grouped and answered by `Worker::respond` (everything but the
//! syscalls), under random settings including per-source limits and the
//! signature budget. Every datagram ends as a reply or a counted drop, none
//! is answered twice, truncated or while the server must not answer, no
//! reply is longer than its request, and every reply that was not greased
//! verifies against the key the request asked for and the request's own
//! nonce. With an ML-DSA-44 identity beside the Ed25519 ones, no datagram
//! is ever answered in a version that must not go over UDP.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use arbitrary::Arbitrary;
use arc_swap::ArcSwap;
use gnomon_fuzz::{client_request, offer_of, ByteEdit};
use gnomon_protocol::profile::ProfileSet;
use gnomon_protocol::{
    verify_response, Acceptor, KeyPair, LongTermKey, MlDsa44KeyPair, ResponderOptions,
};
use gnomon_server::keys::{mint_epoch, Choice, KeySource, SharedKeys};
use gnomon_server::limit::LimitConfig;
use gnomon_server::sys::RecvMeta;
use gnomon_server::worker::{udp_acceptor, ClockState, Worker, WorkerConfig};
use libfuzzer_sys::fuzz_target;

/// Largest batch: enough for several groups, small enough to stay fast.
const MAX_BATCH: usize = 16;
/// Radius the clock state advertises.
const RADIUS_US: u64 = 3_000_000;

#[derive(Arbitrary, Debug)]
struct Input {
    two_identities: bool,
    /// An ML-DSA-44 identity after the Ed25519 ones.
    pq_identity: bool,
    /// 0: no grease; otherwise that many responses in 256 are greased.
    grease: u8,
    batch_disputed: bool,
    google_nonce: bool,
    /// Accept datagrams below 1024 bytes (as TCP and tests do).
    any_size: bool,
    /// Profiles the acceptor takes (a bit per profile, all when 0).
    profiles: u32,
    max_queue_delay_ms: u16,
    answering: bool,
    limits: Option<Limits>,
    datagrams: Vec<Datagram>,
}

/// Per-source limits and the signature budget (`LimitConfig`).
#[derive(Arbitrary, Debug)]
struct Limits {
    rate: u8,
    burst: u8,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
    /// A small table, so that prefixes collide.
    table_size: u8,
    signature_share_ppm: u32,
    allow_loopback: bool,
    deny_documentation: bool,
}

impl Limits {
    fn config(&self) -> LimitConfig {
        let nets = |on: bool, nets: &[&str]| -> Vec<_> {
            nets.iter()
                .filter(|_| on)
                .map(|n| n.parse().expect("a valid network"))
                .collect()
        };
        LimitConfig {
            rate: Some(u32::from(self.rate)),
            burst: u32::from(self.burst),
            ipv4_prefix: self.ipv4_prefix % 33,
            ipv6_prefix: self.ipv6_prefix % 129,
            table_size: usize::from(self.table_size),
            allow: nets(self.allow_loopback, &["127.0.0.0/8", "::1/128"]),
            deny: nets(self.deny_documentation, &["192.0.2.0/24", "2001:db8::/32"]),
            signature_share_ppm: self.signature_share_ppm % 1_000_001,
            signature_burst_us: 1_000,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Datagram {
    profile: u8,
    /// Also offer this profile, where the two share a format.
    also: Option<u8>,
    nonce: u64,
    /// Request size in 4-byte words above the smallest that builds.
    extra_words: u8,
    srv: Srv,
    edits: Vec<Edit>,
    from: Source,
    to: Dest,
    rx: Rx,
    truncated: bool,
}

#[derive(Arbitrary, Debug)]
enum Srv {
    None,
    /// SRV of the identity with this index (wrapping).
    Identity(u8),
    Other([u8; 32]),
}

#[derive(Arbitrary, Debug)]
enum Edit {
    Bytes(ByteEdit),
    /// Replace the datagram by another one's bytes as built so far.
    CopyOf(u8),
}

#[derive(Arbitrary, Debug)]
enum Source {
    Loopback {
        host: [u8; 3],
        port: u16,
    },
    V4 {
        ip: [u8; 4],
        port: u16,
    },
    V6 {
        ip: [u8; 16],
        port: u16,
    },
    /// Addresses no reply may go to, and their neighbours.
    Special {
        which: u8,
        port: u16,
    },
}

#[derive(Arbitrary, Debug)]
enum Dest {
    /// The kernel did not say (a socket bound to one address).
    Unknown,
    Loopback,
    Public,
    Loopback6,
    Public6,
}

#[derive(Arbitrary, Debug)]
enum Rx {
    None,
    /// Received this many µs before the worker reads its clock.
    Ago(u32),
    /// A timestamp from the future (the clock stepped back).
    Ahead(u32),
}

const SPECIAL: [IpAddr; 10] = [
    IpAddr::V4(Ipv4Addr::BROADCAST),
    IpAddr::V4(Ipv4Addr::new(127, 255, 255, 255)),
    IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    IpAddr::V4(Ipv4Addr::new(224, 0, 0, 1)),
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, 255)),
    IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    IpAddr::V6(Ipv6Addr::LOCALHOST),
    IpAddr::V6(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)),
    IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0x7fff, 0xffff)),
    IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0)),
];

impl Source {
    fn addr(&self) -> SocketAddr {
        match *self {
            Source::Loopback { host, port } => {
                SocketAddr::from(([127, host[0], host[1], host[2]], port))
            }
            Source::V4 { ip, port } => SocketAddr::from((ip, port)),
            Source::V6 { ip, port } => SocketAddr::from((ip, port)),
            Source::Special { which, port } => {
                SocketAddr::new(SPECIAL[usize::from(which) % SPECIAL.len()], port)
            }
        }
    }
}

impl Dest {
    fn addr(&self) -> Option<IpAddr> {
        match self {
            Dest::Unknown => None,
            Dest::Loopback => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Dest::Public => Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))),
            Dest::Loopback6 => Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            Dest::Public6 => Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1))),
        }
    }
}

struct Server {
    keys: SharedKeys,
    public: Vec<LongTermKey>,
    worker: Worker,
}

/// One server per set of identities, built once: minting is far slower
/// than answering a batch. Indexed by `two_identities + 2 * pq_identity`.
fn servers() -> &'static [Mutex<Server>; 4] {
    static S: OnceLock<[Mutex<Server>; 4]> = OnceLock::new();
    S.get_or_init(|| {
        [
            server(1, false),
            server(2, false),
            server(1, true),
            server(2, true),
        ]
        .map(Mutex::new)
    })
}

fn server(identities: u8, pq: bool) -> Server {
    let long_terms: Vec<KeyPair> = (0..identities)
        .map(|i| KeyPair::from_seed(&[0x40 + i; 32]))
        .collect();
    let mut public: Vec<LongTermKey> = long_terms.iter().map(|k| k.public().into()).collect();
    let mut sources: Vec<KeySource> = long_terms.into_iter().map(KeySource::from).collect();
    if pq {
        let k = MlDsa44KeyPair::from_seed(&[0x4f; 32]);
        public.push(LongTermKey::from_bytes(k.public()).expect("an ML-DSA-44 key"));
        sources.push(k.into());
    }
    // Valid for longer than any fuzzing run.
    let epoch = mint_epoch(&sources, now_us(), 30 * 86_400_000_000, 60_000_000)
        .expect("long-term keys always mint");
    let keys: SharedKeys = Arc::new(ArcSwap::from_pointee(epoch));
    let worker = Worker::detached(
        config(&dummy()),
        keys.clone(),
        Arc::new(ClockState::new(RADIUS_US)),
    )
    .expect("a UDP socket");
    Server {
        keys,
        public,
        worker,
    }
}

fn dummy() -> Input {
    Input {
        two_identities: false,
        pq_identity: false,
        grease: 0,
        batch_disputed: false,
        google_nonce: false,
        any_size: false,
        profiles: 0,
        max_queue_delay_ms: 0,
        answering: true,
        limits: None,
        datagrams: Vec::new(),
    }
}

fn config(input: &Input) -> WorkerConfig {
    let profiles = match ProfileSet(input.profiles & ProfileSet::ALL.0) {
        ProfileSet(0) => ProfileSet::ALL,
        set => set,
    };
    WorkerConfig {
        max_batch: MAX_BATCH,
        max_queue_delay_us: u64::from(input.max_queue_delay_ms) * 1_000,
        acceptor: Acceptor {
            profiles,
            min_size: if input.any_size { 0 } else { 1024 },
        },
        options: ResponderOptions {
            batch_disputed: input.batch_disputed,
            google_nonce: input.google_nonce,
        },
        // As `gnomon serve` does: VERS lists what the acceptor takes.
        vers: profiles.versions().into(),
        grease_per_million: u32::from(input.grease) * (1_000_000 / 256),
        fail_after: None,
        batch_wait_us: 0,
        limit: input
            .limits
            .as_ref()
            .map_or_else(LimitConfig::unlimited, Limits::config),
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// A real request as a client of that version sends it, then edited.
fn datagram(d: &Datagram, public: &[LongTermKey], built: &[Vec<u8>]) -> Vec<u8> {
    let srv = match &d.srv {
        Srv::None => None,
        Srv::Identity(i) => Some(public[usize::from(*i) % public.len()].srv()),
        Srv::Other(s) => Some(*s),
    };
    let offer = offer_of(d.profile, d.also);
    let mut bytes = client_request(&offer, d.nonce, d.extra_words, srv.as_ref());
    for e in d.edits.iter().take(8) {
        match e {
            Edit::Bytes(b) => b.apply(&mut bytes),
            Edit::CopyOf(i) => {
                if let Some(other) = built.get(usize::from(*i)) {
                    bytes.clone_from(other);
                }
            }
        }
    }
    bytes
}

fuzz_target!(|input: Input| {
    let which = usize::from(input.two_identities) + 2 * usize::from(input.pq_identity);
    let mut guard = servers()[which].lock().unwrap_or_else(|e| e.into_inner());
    let server = &mut *guard;
    server.worker.config.store(Arc::new(config(&input)));
    server
        .worker
        .clock
        .answering
        .store(input.answering, Ordering::Relaxed);
    let mut state = server.worker.prepare();

    let now_ns = now_us() * 1_000;
    let mut sent: Vec<Vec<u8>> = Vec::new();
    let mut cut_short = [false; MAX_BATCH];
    for d in input.datagrams.iter().take(MAX_BATCH) {
        let bytes = datagram(d, &server.public, &sent);
        let rx_ns = match d.rx {
            Rx::None => None,
            Rx::Ago(us) => Some(now_ns.saturating_sub(u64::from(us) * 1_000)),
            Rx::Ahead(us) => Some(now_ns + u64::from(us) * 1_000),
        };
        let meta = RecvMeta {
            len: 0,
            truncated: d.truncated,
            from: d.from.addr(),
            to: d.to.addr(),
            rx_ns,
        };
        state.batch().load(sent.len(), &bytes, meta);
        cut_short[sent.len()] = d.truncated;
        sent.push(bytes);
    }
    let n = sent.len();
    let before = now_us();
    let count = server.worker.respond(&mut state, n);
    let after = now_us();

    let stats = state.stats;
    assert_eq!(stats.received, n as u64);
    assert_eq!(stats.total_responses(), count as u64, "replies are counted");
    let dropped: u64 = stats.drops.iter().sum();
    assert_eq!(
        stats.total_responses() + dropped,
        n as u64,
        "every datagram is answered or a counted drop"
    );

    let epoch = server.keys.load();
    // What the worker accepts: the configured versions that go over UDP
    // and that an identity can sign.
    let acceptor = udp_acceptor(&server.worker.config.load().acceptor, epoch.profiles);
    let mut answered = [false; MAX_BATCH];
    let mut broken = 0u64;
    for k in 0..count {
        let (reply, src) = state.batch().reply(k);
        let request = &sent[src];
        assert!(!answered[src], "datagram {src} answered twice");
        assert!(input.answering, "answered while not answering");
        assert!(!cut_short[src], "datagram {src} arrived truncated");
        answered[src] = true;
        assert!(
            reply.len() <= request.len(),
            "amplification: {} bytes for {}",
            reply.len(),
            request.len()
        );
        let parsed = acceptor
            .parse(request)
            .expect("only accepted requests are answered");

        let key = match epoch.choose(parsed.profile, parsed.srv) {
            Choice::Identity(i) => &server.public[i],
            other => panic!("datagram {src} answered although {other:?}"),
        };
        match verify_response(request, reply, key) {
            Ok(v) => {
                assert_eq!(
                    v.profile.id, parsed.profile.id,
                    "answered in another version"
                );
                assert!(
                    v.profile.udp,
                    "datagram {src} answered over UDP in {}",
                    v.profile.name
                );
                // Coarsest encoding: whole seconds.
                assert!(
                    v.midpoint_us + 2_000_000 >= before && v.midpoint_us <= after + 2_000_000,
                    "midpoint {} outside [{before}, {after}]",
                    v.midpoint_us
                );
            }
            Err(e) if stats.greased > broken => {
                let _ = e;
                broken += 1;
            }
            Err(e) => panic!(
                "reply to datagram {src} ({}) does not verify: {e:?}",
                parsed.profile.name
            ),
        }
    }
});
