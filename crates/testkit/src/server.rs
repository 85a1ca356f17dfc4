//! A Roughtime server on loopback, UDP and TCP on the same port.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gnomon_protocol::cert::CertificateSet;
use gnomon_protocol::profile::{Framing, VerPlace};
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::wire::{self, Message, PACKET_HEADER};
use gnomon_protocol::{
    Acceptor, BatchContext, KeyPair, LongTermKey, MlDsa44KeyPair, ProfileSet, Responder,
    ResponderOptions, ResponseSink, Scheme, Sign, Version,
};

/// How the fixture answers a request it accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A correct, signed response.
    Honest,
    /// A correct response whose SREP signature has one bit flipped.
    BadSignature,
    /// 256 bytes that are not a Roughtime message.
    Garbage,
    /// The first half of a correct response.
    Truncated,
    /// Nothing.
    Silent,
    /// The first UDP request gets 256 bytes of garbage instead of its
    /// answer (a forgery that won the race while the real answer was lost);
    /// every later request a correct answer.
    GarbageFirst,
    /// The first UDP request gets a forged ICMP "port unreachable" instead
    /// of its answer (needs root for the raw socket); every later request
    /// a correct answer.
    RefusedFirst,
}

/// What a fixture serves.
#[derive(Clone, Debug)]
pub struct FixtureConfig {
    /// Versions answered (the `Acceptor`'s set).
    pub profiles: ProfileSet,
    /// Added to the real clock before signing: a liar when not zero.
    pub offset_us: i64,
    /// Radius in µs.
    pub radius_us: u32,
    /// Honest or which kind of broken answer.
    pub mode: Mode,
    /// UDP datagrams ignored before answering any (retry tests).
    pub drop_first_udp: usize,
    /// Answer over UDP at all (the socket is bound either way, so a client
    /// sees silence, not an ICMP error).
    pub udp: bool,
    /// Listen on TCP (same port).
    pub tcp: bool,
    /// Long-term key seed.
    pub seed: u8,
    /// Listen on `[::1]` instead of `127.0.0.1`.
    pub ipv6: bool,
    /// Requests the server would answer in one of these profiles get no
    /// answer: a server whose newer versions an on-path dropper silences
    /// while the older ones it also speaks get through.
    pub silent_on: ProfileSet,
    /// The signature scheme of its keys: Ed25519 (the default) answers
    /// the Ed25519 versions of `profiles`; ML-DSA-44 answers 0x90000001,
    /// over TCP only as that profile says, with keys from `seed`.
    pub scheme: Scheme,
}

impl Default for FixtureConfig {
    fn default() -> Self {
        FixtureConfig {
            profiles: ProfileSet::ALL,
            offset_us: 0,
            radius_us: 1_000_000,
            mode: Mode::Honest,
            drop_first_udp: 0,
            udp: true,
            tcp: true,
            seed: 1,
            ipv6: false,
            silent_on: ProfileSet::empty(),
            scheme: Scheme::Ed25519,
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    udp: AtomicUsize,
    tcp: AtomicUsize,
    answered: AtomicUsize,
}

/// A running fixture. Dropping it stops the server.
#[derive(Debug)]
pub struct Fixture {
    addr: SocketAddr,
    public_key: LongTermKey,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    threads: Vec<JoinHandle<()>>,
    tcp: bool,
}

/// Backstop for a lost wake-up; never used as synchronisation.
const POLL: Duration = Duration::from_millis(200);

impl Fixture {
    /// Start a fixture.
    pub fn start(config: FixtureConfig) -> Fixture {
        let (udp, tcp) = bind_pair(config.tcp, config.ipv6);
        let addr = udp.local_addr().expect("udp local addr");
        udp.set_read_timeout(Some(POLL)).expect("udp timeout");
        let (responder, public_key) = match config.scheme {
            Scheme::Ed25519 => {
                let long_term = KeyPair::from_seed(&[config.seed; 32]);
                let online = KeyPair::from_seed(&[config.seed.wrapping_add(100); 32]);
                let public = online.public();
                let key = LongTermKey::from(long_term.public());
                (
                    Answerer::new(&config, &long_term, Box::new(online), &public),
                    key,
                )
            }
            Scheme::MlDsa44 => {
                let long_term = MlDsa44KeyPair::from_seed(&[config.seed; 32]);
                let online = MlDsa44KeyPair::from_seed(&[config.seed.wrapping_add(100); 32]);
                let public = online.public().to_vec();
                let key = LongTermKey::from_bytes(long_term.public()).expect("an ML-DSA-44 key");
                (
                    Answerer::new(&config, &long_term, Box::new(online), &public),
                    key,
                )
            }
        };
        let responder = Arc::new(responder);
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let mut threads = Vec::new();
        {
            let (stop, counters, answerer) = (stop.clone(), counters.clone(), responder.clone());
            let cfg = config.clone();
            threads.push(std::thread::spawn(move || {
                serve_udp(&udp, &cfg, &answerer, &stop, &counters)
            }));
        }
        if let Some(listener) = tcp {
            let (stop, counters, answerer) = (stop.clone(), counters.clone(), responder);
            threads.push(std::thread::spawn(move || {
                serve_tcp(&listener, &answerer, &stop, &counters)
            }));
        }
        Fixture {
            addr,
            public_key,
            stop,
            counters,
            threads,
            tcp: config.tcp,
        }
    }

    /// Start an honest fixture answering `profiles`.
    pub fn honest(profiles: ProfileSet, seed: u8) -> Fixture {
        Fixture::start(FixtureConfig {
            profiles,
            seed,
            ..FixtureConfig::default()
        })
    }

    /// UDP (and TCP) address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The long-term public key of an Ed25519 fixture (the default).
    pub fn public_key(&self) -> [u8; 32] {
        self.public_key
            .ed25519()
            .expect("an Ed25519 fixture: use long_term_key() for ML-DSA-44")
    }

    /// The long-term public key, of either scheme.
    pub fn long_term_key(&self) -> &LongTermKey {
        &self.public_key
    }

    /// UDP datagrams received, answered or not.
    pub fn udp_received(&self) -> usize {
        self.counters.udp.load(Ordering::SeqCst)
    }

    /// TCP requests received.
    pub fn tcp_received(&self) -> usize {
        self.counters.tcp.load(Ordering::SeqCst)
    }

    /// Responses sent, over either transport.
    pub fn answered(&self) -> usize {
        self.counters.answered.load(Ordering::SeqCst)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked recv and accept so the threads see the flag now.
        let any = if self.addr.is_ipv6() {
            "[::1]:0"
        } else {
            "127.0.0.1:0"
        };
        if let Ok(s) = UdpSocket::bind(any) {
            let _ = s.send_to(&[0], self.addr);
        }
        if self.tcp {
            let _ = TcpStream::connect_timeout(&self.addr, POLL);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// UDP and TCP on one port; retried because the TCP port may be taken.
fn bind_pair(tcp: bool, ipv6: bool) -> (UdpSocket, Option<TcpListener>) {
    let any = if ipv6 { "[::1]:0" } else { "127.0.0.1:0" };
    for _ in 0..50 {
        let udp = UdpSocket::bind(any).expect("bind udp");
        if !tcp {
            return (udp, None);
        }
        let addr = udp.local_addr().expect("udp addr");
        if let Ok(l) = TcpListener::bind(addr) {
            return (udp, Some(l));
        }
    }
    panic!("no port free for both UDP and TCP on {any}");
}

/// Everything needed to answer one request.
struct Answerer {
    acceptor: Acceptor,
    online: Box<dyn Sign + Send + Sync>,
    certs: CertificateSet,
    vers: Vec<Version>,
    offset_us: i64,
    radius_us: u32,
    mode: Mode,
    silent_on: ProfileSet,
    garbage_sent: AtomicBool,
}

impl Answerer {
    fn new(
        config: &FixtureConfig,
        long_term: &dyn Sign,
        online: Box<dyn Sign + Send + Sync>,
        online_public: &[u8],
    ) -> Answerer {
        let now = shifted_now(config.offset_us);
        let day = 86_400_000_000;
        let certs = CertificateSet::mint_all(long_term, online_public, now - day, now + 2 * day);
        // Each identity answers (and lists in VERS) its own scheme's versions.
        let profiles = config.profiles.of_scheme(config.scheme);
        // VERS lists what this server speaks in the 12+ formats, ascending.
        let mut vers: Vec<Version> = profiles
            .iter()
            .filter(|p| p.ver_place == VerPlace::Srep)
            .map(|p| p.version)
            .collect();
        vers.sort_unstable();
        vers.dedup();
        Answerer {
            acceptor: Acceptor {
                profiles,
                ..Acceptor::default()
            },
            online,
            certs,
            vers,
            offset_us: config.offset_us,
            radius_us: config.radius_us,
            mode: config.mode,
            silent_on: config.silent_on,
            garbage_sent: AtomicBool::new(false),
        }
    }

    /// The bytes to send back for `packet`, if any.
    fn answer(&self, packet: &[u8], tcp: bool) -> Option<Vec<u8>> {
        let request = self.acceptor.parse(packet).ok()?;
        let profile = request.profile;
        if self.silent_on.contains(profile.id) {
            return None;
        }
        if tcp && (!profile.tcp || profile.framing != Framing::Packet) {
            return None;
        }
        if !tcp && !profile.udp {
            return None;
        }
        let ctx = BatchContext {
            profile,
            now_us: shifted_now(self.offset_us),
            radius_us: self.radius_us,
            online: &*self.online,
            cert: self.certs.for_profile(profile)?,
            vers: &self.vers,
        };
        // A datagram's answer is bounded by its request; a stream's is not
        // (an ML-DSA-44 answer is 6.4 KB).
        let (mut responder, room) = if tcp {
            let r = Responder::for_stream(1, ResponderOptions::default());
            (r, packet.len().max(16_384))
        } else {
            (Responder::new(1, ResponderOptions::default()), packet.len())
        };
        let mut sink = OneSink {
            buf: vec![0; room],
            result: None,
        };
        responder.respond(&ctx, &[request], &mut sink);
        let len = sink.result?.ok()?;
        let mut response = sink.buf;
        response.truncate(len);
        match self.mode {
            Mode::Honest => Some(response),
            Mode::BadSignature => {
                flip_signature(&mut response, profile.framing);
                Some(response)
            }
            Mode::Garbage => Some(garbage()),
            Mode::GarbageFirst if !tcp && !self.garbage_sent.swap(true, Ordering::SeqCst) => {
                Some(garbage())
            }
            Mode::GarbageFirst | Mode::RefusedFirst => Some(response),
            Mode::Truncated => {
                response.truncate(response.len() / 2);
                Some(response)
            }
            Mode::Silent => None,
        }
    }
}

fn garbage() -> Vec<u8> {
    (0..256u32).map(|i| (i * 37 + 11) as u8).collect()
}

fn shifted_now(offset_us: i64) -> u64 {
    let real = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as i128;
    (real + i128::from(offset_us)) as u64
}

/// Flip one bit of the top-level SIG, which signs SREP.
fn flip_signature(response: &mut [u8], framing: Framing) {
    let start = if framing == Framing::Packet {
        PACKET_HEADER
    } else {
        0
    };
    let Ok(msg) = Message::parse(&response[start..]) else {
        return;
    };
    // SIG sorts first among response tags, so its value opens the value area.
    let at = start + 8 * msg.len();
    response[at] ^= 1;
}

struct OneSink {
    buf: Vec<u8>,
    result: Option<Result<usize, RespondError>>,
}

impl ResponseSink for OneSink {
    fn buffer(&mut self, _: usize) -> &mut [u8] {
        &mut self.buf
    }
    fn finish(&mut self, _: usize, result: Result<usize, RespondError>) {
        self.result = Some(result);
    }
}

fn serve_udp(
    socket: &UdpSocket,
    config: &FixtureConfig,
    answerer: &Answerer,
    stop: &AtomicBool,
    counters: &Counters,
) {
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::SeqCst) {
        let (len, from) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let seen = counters.udp.fetch_add(1, Ordering::SeqCst);
        if !config.udp || seen < config.drop_first_udp {
            continue;
        }
        if config.mode == Mode::RefusedFirst && seen == config.drop_first_udp {
            let server = socket.local_addr().expect("udp local addr");
            crate::icmp::forge_port_unreachable(from, server).expect("forge ICMP (root?)");
            continue;
        }
        if let Some(response) = answerer.answer(&buf[..len], false) {
            if socket.send_to(&response, from).is_ok() {
                counters.answered.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

fn serve_tcp(listener: &TcpListener, answerer: &Answerer, stop: &AtomicBool, counters: &Counters) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(mut stream) = conn else { continue };
        let _ = stream.set_read_timeout(Some(POLL));
        // One connection at a time is enough for tests; it may carry
        // several requests.
        while !stop.load(Ordering::SeqCst) {
            let mut header = [0u8; PACKET_HEADER];
            match stream.read_exact(&mut header) {
                Ok(()) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    continue
                }
                Err(_) => break,
            }
            if !wire::has_magic(&header) {
                break;
            }
            let len = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
            if len > 65_536 {
                break;
            }
            let mut packet = header.to_vec();
            packet.resize(PACKET_HEADER + len, 0);
            if stream.read_exact(&mut packet[PACKET_HEADER..]).is_err() {
                break;
            }
            counters.tcp.fetch_add(1, Ordering::SeqCst);
            if let Some(response) = answerer.answer(&packet, true) {
                if stream.write_all(&response).is_err() {
                    break;
                }
                counters.answered.fetch_add(1, Ordering::SeqCst);
                if answerer.mode == Mode::Truncated {
                    // A truncated answer is only truncated if the stream ends.
                    break;
                }
            }
        }
    }
}
