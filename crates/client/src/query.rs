//! Asking one server: discovery, retries, TCP fallback, verification.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use gnomon_protocol::chain::MAX_NONCE_LEN;
use gnomon_protocol::request::srv_for;
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::{Measurement, Offer, Verified, Version};

use crate::clock::{Anchor, SystemClock, WallClock};
use crate::discovery;
use crate::entropy::{Entropy, OsEntropy};
use crate::error::{io_words, QueryError};
use crate::progress::{Hook, Pacer, Retry};
use crate::server::{resolve, Server, Versions};
use crate::transport::{self, Outcome};

/// Exponential backoff: attempt n waits `initial × factor^(n−1)`, capped at
/// `max`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The first wait.
    pub initial: Duration,
    /// Growth per attempt.
    pub factor: f64,
    /// Longest single wait.
    pub max: Duration,
    /// Number of attempts.
    pub attempts: u32,
}

impl Backoff {
    /// RFC 10049 §5 for requests: 1 s, × 1.5, at most 24 h; three attempts
    /// (1 s + 1.5 s + 2.25 s).
    pub const QUERY: Backoff = Backoff {
        initial: Duration::from_secs(1),
        factor: 1.5,
        max: Duration::from_secs(86_400),
        attempts: 3,
    };

    /// The wait of attempt `n` (1-based).
    pub fn delay(&self, n: u32) -> Duration {
        let f = self.factor.powi(n.saturating_sub(1).min(1000) as i32);
        let secs = (self.initial.as_secs_f64() * f).min(self.max.as_secs_f64());
        Duration::from_secs_f64(secs.max(0.0))
    }

    /// The waits of the first `n` attempts.
    pub fn schedule(&self, n: u32) -> Vec<Duration> {
        (1..=n).map(|i| self.delay(i)).collect()
    }
}

/// Which transports to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpMode {
    /// UDP, then TCP when UDP gets no answer (versions that define TCP);
    /// TCP alone for versions not served over UDP.
    Fallback,
    /// TCP only (versions that define TCP).
    Only,
    /// UDP only (versions not served over UDP are then not asked).
    Never,
}

/// Client policy.
#[derive(Clone, Debug)]
pub struct Config {
    /// UDP retransmission schedule for the first family offered (and for a
    /// known version).
    pub backoff: Backoff,
    /// UDP attempts for each later family during discovery.
    pub fallback_attempts: u32,
    /// Transports.
    pub tcp: TcpMode,
    /// Request size in bytes (the whole packet).
    pub request_size: usize,
    /// An upper bound on one query, whatever the schedule says (host-name
    /// resolution included).
    pub deadline: Option<Duration>,
    /// Fall back to older version families when the newer ones get no
    /// answer at all. Off by default: silence is what anyone on the path
    /// can produce, so without this discovery never leaves the families
    /// that hold the newest version asked for (the version a server list
    /// names) or any version from 0x80000008 on (see [`discovery`]).
    pub version_fallback: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            backoff: Backoff::QUERY,
            fallback_attempts: 1,
            tcp: TcpMode::Fallback,
            request_size: gnomon_protocol::request::DEFAULT_REQUEST_SIZE,
            deadline: None,
            version_fallback: false,
        }
    }
}

impl Config {
    /// The longest a query can take: every family's UDP schedule plus a
    /// TCP attempt per family, before any deadline is applied.
    pub fn worst_case(&self, families: usize) -> Duration {
        let first: Duration = self.backoff.schedule(self.backoff.attempts).iter().sum();
        let later: Duration = self.backoff.schedule(self.fallback_attempts).iter().sum();
        let tcp = self.backoff.delay(self.backoff.attempts.max(1));
        let total = first + later * families.saturating_sub(1) as u32 + tcp * families as u32;
        self.deadline.map_or(total, |d| d.min(total))
    }
}

/// A verified answer.
#[derive(Clone, Debug)]
pub struct Answer {
    /// What the response says, verified.
    pub verified: Verified,
    /// The request as sent.
    pub request: Vec<u8>,
    /// The response as received.
    pub response: Vec<u8>,
    /// The random bytes the request's nonce came from (the nonce itself, or
    /// the chain's `rand`).
    pub rand: Vec<u8>,
    /// The offer that was answered: ask this again to skip discovery.
    pub offer: Offer,
    /// Over which transport.
    pub transport: Transport,
    /// From where.
    pub peer: SocketAddr,
    /// Transmissions of the answered request.
    pub sends: u32,
    /// First transmission to answer.
    pub rtt: Duration,
    /// Local wall clock at the middle of the round trip, Unix µs.
    pub local_midpoint_us: i128,
    /// The server's clock minus ours: MIDP − local midpoint, µs.
    pub offset_us: i128,
}

impl Answer {
    /// The offsets from our clock the server vouches for:
    /// offset ± (RADI + RTT/2), since the server read its clock somewhere
    /// inside the round trip.
    pub fn offset_interval_us(&self) -> (i128, i128) {
        let slack = i128::from(self.verified.radius_us) + (self.rtt.as_micros() as i128) / 2;
        (self.offset_us - slack, self.offset_us + slack)
    }
}

/// A Roughtime client.
pub struct Client {
    config: Config,
    entropy: Box<dyn Entropy + Send>,
    clock: Box<dyn WallClock + Send>,
    progress: Option<Hook>,
}

impl core::fmt::Debug for Client {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client drawing randomness from the operating system.
    pub fn new(config: Config) -> Client {
        Client::with_entropy(config, OsEntropy)
    }

    /// A client drawing randomness from `entropy`.
    pub fn with_entropy(config: Config, entropy: impl Entropy + Send + 'static) -> Client {
        Client {
            config,
            entropy: Box::new(entropy),
            clock: Box::new(SystemClock),
            progress: None,
        }
    }

    /// Call `hook` before every attempt of a query after the first: each
    /// one means the earlier ones got no answer yet, which a caller
    /// waiting on a silent server can say while it waits.
    pub fn on_progress(mut self, hook: impl FnMut(&Retry) + Send + 'static) -> Client {
        self.progress = Some(Box::new(hook));
        self
    }

    /// Read wall-clock time from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: impl WallClock + Send + 'static) -> Client {
        self.clock = Box::new(clock);
        self
    }

    /// One reading of the wall clock, for a query or a whole measurement.
    pub(crate) fn anchor(&mut self) -> Anchor {
        Anchor::read(&mut *self.clock)
    }

    /// The policy.
    pub fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn entropy(&mut self) -> &mut dyn Entropy {
        &mut *self.entropy
    }

    /// Ask `server` once, with a fresh random nonce.
    pub fn query(&mut self, server: &Server) -> Result<Answer, QueryError> {
        let anchor = self.anchor();
        self.ask(server, None, anchor)
    }

    /// Ask `server` with a nonce chained from the last response recorded in
    /// `chain`, and record the answer there.
    pub fn query_chained(
        &mut self,
        server: &Server,
        chain: &mut Measurement,
    ) -> Result<Answer, QueryError> {
        let anchor = self.anchor();
        self.chained(server, chain, anchor)
    }

    /// [`Client::query_chained`] placing local times by `anchor`.
    pub(crate) fn chained(
        &mut self,
        server: &Server,
        chain: &mut Measurement,
        anchor: Anchor,
    ) -> Result<Answer, QueryError> {
        let answer = self.ask(server, Some(chain), anchor)?;
        chain
            .record(
                &answer.request,
                &answer.response,
                &answer.rand,
                &server.public_key,
            )
            .map_err(|e| {
                QueryError::Local(format!("the chain refused a verified answer: {e:?}"))
            })?;
        Ok(answer)
    }

    fn ask(
        &mut self,
        server: &Server,
        chain: Option<&Measurement>,
        anchor: Anchor,
    ) -> Result<Answer, QueryError> {
        let start = Instant::now();
        let deadline = self.config.deadline.map(|d| start + d);
        let mut families = match server.versions {
            Versions::Offer(o) => vec![o],
            Versions::Discover(set) => discovery::families(set),
        };
        let discovered = families.len();
        if !self.config.version_fallback {
            families.truncate(guarded(&families));
        }
        let older_not_tried = families.len() < discovered;
        // Name resolution counts against the deadline; without one, against
        // the longest the schedule could take.
        let resolve_by = start + self.config.worst_case(families.len());
        let udp_peers = peers(server, Transport::Udp, resolve_by)?;
        let tcp_peers = peers(server, Transport::Tcp, resolve_by)?;
        let srv = srv_for(server.public_key.bytes());
        let mut state = Tally::default();
        let tcp_known = !tcp_peers.is_empty();
        let planned = families
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let (udp, tcp) = self.config.transports(o, tcp_known);
                u32::from(udp) * self.config.attempts(i) + u32::from(tcp)
            })
            .sum();
        let mut pacer = Pacer::new(self.progress.as_mut(), planned, start);
        for (i, offer) in families.iter().enumerate() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let p = offer.primary();
            let (udp, tcp) = self.config.transports(offer, tcp_known);
            let use_udp = udp && !state.udp_refused;
            let use_tcp = tcp && !state.tcp_refused;
            if !use_udp && !use_tcp {
                continue;
            }
            state.offered.push(p.name);
            let mut rand = [0u8; MAX_NONCE_LEN];
            let rand = &mut rand[..p.nonce_len];
            self.entropy
                .fill(rand)
                .map_err(|e| QueryError::Local(e.to_string()))?;
            let mut nonce = [0u8; MAX_NONCE_LEN];
            let nonce = match chain {
                Some(c) => {
                    let n = c
                        .next_nonce(p, rand, &mut nonce)
                        .map_err(|e| QueryError::Local(format!("chain: {e:?}")))?;
                    &nonce[..n]
                }
                None => rand as &[u8],
            };
            let mut request = vec![0u8; self.config.request_size];
            let len = offer
                .build(nonce, Some(&srv), self.config.request_size, &mut request)
                .map_err(|e| QueryError::Local(format!("cannot build the request: {e:?}")))?;
            request.truncate(len);
            let attempts = self.config.attempts(i);
            let finish = |peer, transport, r: transport::Received| Answer {
                offset_us: i128::from(r.verified.midpoint_us)
                    - (anchor.wall_at(r.sent_at) + r.rtt.as_micros() as i128 / 2),
                local_midpoint_us: anchor.wall_at(r.sent_at) + r.rtt.as_micros() as i128 / 2,
                verified: r.verified,
                request: request.clone(),
                response: r.response,
                rand: rand.to_vec(),
                offer: *offer,
                transport,
                peer,
                sends: r.sends,
                rtt: r.rtt,
            };
            if use_udp {
                let timeouts = self.config.backoff.schedule(attempts);
                for &peer in &udp_peers {
                    let outcome = transport::udp(
                        peer,
                        &request,
                        server.public_key.as_public(),
                        &timeouts,
                        deadline,
                        &mut |refused| pacer.attempt(peer, Transport::Udp, refused),
                    );
                    match state.absorb(outcome, peer, Transport::Udp, p.name)? {
                        Some(r) => return Ok(finish(peer, Transport::Udp, r)),
                        None if state.try_next_peer => continue,
                        None => break,
                    }
                }
            }
            if use_tcp {
                let timeout = self.config.backoff.delay(attempts.max(1));
                for &peer in &tcp_peers {
                    state.tcp_tried += 1;
                    pacer.attempt(peer, Transport::Tcp, state.udp_refused);
                    let outcome = transport::tcp(
                        peer,
                        &request,
                        server.public_key.as_public(),
                        timeout,
                        deadline,
                    );
                    match state.absorb(outcome, peer, Transport::Tcp, p.name)? {
                        Some(r) => return Ok(finish(peer, Transport::Tcp, r)),
                        None if state.try_next_peer => continue,
                        None => break,
                    }
                }
            }
            // An invalid answer is not silence: an older version is never
            // tried after one, whatever the policy.
            if state.invalid.is_some() {
                break;
            }
        }
        if let Some(e) = state.invalid {
            return Err(e);
        }
        if let Some(e) = state.local {
            if state.udp_sent == 0 && state.tcp_tried == 0 {
                return Err(QueryError::Local(e));
            }
        }
        Err(QueryError::NoAnswer {
            refused: state.udp_refused || state.tcp_refused,
            udp_refused: state.udp_refused,
            tcp_refused: state.tcp_refused,
            udp_sent: state.udp_sent,
            tcp_tried: state.tcp_tried,
            offered: state.offered,
            elapsed: start.elapsed(),
            older_not_tried,
        })
    }
}

impl Config {
    /// Which transports carry `offer` under this policy, `tcp_known` when
    /// the server has a TCP address. The profile decides first: one not
    /// served over UDP (ML-DSA-44's 6 KB answers) is asked over TCP only,
    /// whatever the mode.
    fn transports(&self, offer: &Offer, tcp_known: bool) -> (bool, bool) {
        let p = offer.primary();
        (
            self.tcp != TcpMode::Only && p.udp,
            self.tcp != TcpMode::Never && p.tcp && tcp_known,
        )
    }

    /// UDP attempts of the `i`th family asked: the full schedule for the
    /// first, a single try for each later one.
    fn attempts(&self, i: usize) -> u32 {
        if i == 0 {
            self.backoff.attempts
        } else {
            self.fallback_attempts
        }
    }
}

/// What the attempts so far came to.
#[derive(Default)]
struct Tally {
    udp_sent: u32,
    tcp_tried: u32,
    udp_refused: bool,
    tcp_refused: bool,
    /// The last outcome says another address may do better (refused, no
    /// route) rather than "the server is silent".
    try_next_peer: bool,
    /// The last invalid answer, reported when no valid one came.
    invalid: Option<QueryError>,
    local: Option<String>,
    offered: Vec<&'static str>,
}

impl Tally {
    fn absorb(
        &mut self,
        outcome: Outcome,
        peer: SocketAddr,
        transport: Transport,
        offered: &'static str,
    ) -> Result<Option<transport::Received>, QueryError> {
        self.try_next_peer = false;
        let invalid = |rejection| QueryError::Invalid {
            rejection,
            transport,
            peer,
            offered,
        };
        match outcome {
            Outcome::Answered(r) => {
                if transport == Transport::Udp {
                    self.udp_sent += r.sends;
                }
                Ok(Some(r))
            }
            // Over TCP the answer is the server's own; it says more than
            // any datagram, which anyone could have sent, so a UDP reason
            // never replaces a TCP one.
            Outcome::Rejected(rejection) => {
                self.invalid = Some(invalid(rejection));
                Ok(None)
            }
            Outcome::Silent { sends, rejected } => {
                if transport == Transport::Udp {
                    self.udp_sent += sends;
                }
                let tcp_said = matches!(
                    self.invalid,
                    Some(QueryError::Invalid {
                        transport: Transport::Tcp,
                        ..
                    })
                );
                if let (Some(rejection), false) = (rejected, tcp_said) {
                    self.invalid = Some(invalid(rejection));
                }
                Ok(None)
            }
            Outcome::Refused { sends } => {
                match transport {
                    Transport::Udp => {
                        self.udp_sent += sends;
                        self.udp_refused = true;
                    }
                    Transport::Tcp => self.tcp_refused = true,
                }
                self.try_next_peer = true;
                Ok(None)
            }
            Outcome::Failed(e) => {
                self.local = Some(format!("{peer}: {}", io_words(&e)));
                self.try_next_peer = true;
                Ok(None)
            }
        }
    }
}

/// How many of `families` (newest first) discovery may try on silence
/// alone: those holding the newest version asked for (for a listed server,
/// the version the list names) or any version from 0x80000008 on, whose
/// signed VERS lets a client see a downgrade. Past them, falling back would
/// let anyone who drops packets pick draft 07 or Google for us.
fn guarded(families: &[Offer]) -> usize {
    let floor = Version::draft(8).preference();
    let versions = |o: &Offer| {
        let primary = o.primary().version;
        o.versions().to_vec().into_iter().chain([primary])
    };
    let Some(newest) = families.first().map(|o| o.primary().version) else {
        return 0;
    };
    families
        .iter()
        .take_while(|o| versions(o).any(|v| v == newest || v.preference() >= floor))
        .count()
        .max(1)
}

fn peers(
    server: &Server,
    transport: Transport,
    by: Instant,
) -> Result<Vec<SocketAddr>, QueryError> {
    let mut out = Vec::new();
    let mut last_err = None;
    for a in server.addresses.iter().filter(|a| a.transport == transport) {
        match resolve(&a.host, a.port, by) {
            Ok(list) => out.extend(list),
            Err(e) => last_err = Some((crate::server::format_address(&a.host, a.port), e)),
        }
    }
    match (out.is_empty(), last_err) {
        (true, Some((host, e))) => Err(QueryError::Resolve {
            host,
            reason: io_words(&e),
        }),
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_backoff_schedule() {
        let b = Backoff::QUERY;
        assert_eq!(b.delay(1), Duration::from_secs(1));
        assert_eq!(b.delay(2), Duration::from_millis(1500));
        assert_eq!(b.delay(3), Duration::from_millis(2250));
        // Capped at 24 h however far it goes.
        assert_eq!(b.delay(200), Duration::from_secs(86_400));
        assert_eq!(
            b.schedule(3).iter().sum::<Duration>(),
            Duration::from_millis(4750)
        );
    }

    #[test]
    fn worst_case_is_bounded_by_the_deadline() {
        let mut c = Config::default();
        // 4.75 s + 4 × 1 s of later families + 5 TCP attempts of 2.25 s.
        assert_eq!(
            c.worst_case(5),
            Duration::from_millis(4750 + 4000 + 5 * 2250)
        );
        c.deadline = Some(Duration::from_secs(3));
        assert_eq!(c.worst_case(5), Duration::from_secs(3));
    }
}
