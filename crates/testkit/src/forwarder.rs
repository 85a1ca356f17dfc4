//! A UDP forwarder on loopback: an on-path attacker who may drop what
//! passes. It listens on a port of its own, passes each client's datagrams
//! to one upstream server and the server's replies back to that client,
//! and can be told to drop every datagram in either direction, counting
//! what it passed and what it dropped. A server list that names the
//! forwarder's address instead of the server's puts the attacker between
//! them: silencing the forwarder silences that server, for whoever asks.
//!
//! UDP only: TCP is not forwarded, so a list pointing at a forwarder names
//! only its `udp` address (a `tcp` address there would meet a closed port,
//! which a client sees at once as refused, not as an answer).
//!
//! Each client address gets a socket of its own toward the server (so the
//! server's replies can be told apart) and a thread reading it; at most
//! [`MAX_PEERS`] at once, each retired after [`IDLE`] without a request.
//! Dropping the forwarder stops and joins every thread: the blocked reads
//! are woken by a datagram to themselves, and a read timeout backs that up.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Backstop for a lost wake-up; never used as synchronisation.
const POLL: Duration = Duration::from_millis(200);

/// A client address with no request for this long loses its socket and
/// thread (a Roughtime client uses one socket per request, retries
/// included, and gives up on it within seconds).
pub const IDLE: Duration = Duration::from_secs(10);

/// Client addresses served at once; a datagram from one more is dropped
/// and counted (in `dropped_requests` and `overflow`).
pub const MAX_PEERS: usize = 64;

/// What a forwarder did, by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Client datagrams passed to the server.
    pub requests: u64,
    /// Server datagrams passed back to the client.
    pub replies: u64,
    /// Client datagrams dropped (told to, or too many clients).
    pub dropped_requests: u64,
    /// Server datagrams dropped.
    pub dropped_replies: u64,
    /// Of `dropped_requests`, those from a client past [`MAX_PEERS`].
    pub overflow: u64,
    /// Client addresses whose socket and thread were retired, idle.
    pub retired: u64,
}

impl Counts {
    /// Datagrams passed, both directions.
    pub fn forwarded(&self) -> u64 {
        self.requests + self.replies
    }

    /// Datagrams dropped, both directions.
    pub fn dropped(&self) -> u64 {
        self.dropped_requests + self.dropped_replies
    }
}

struct Peer {
    socket: Arc<UdpSocket>,
    last_request: Instant,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    idle: Duration,
    stop: AtomicBool,
    drop_requests: AtomicBool,
    drop_replies: AtomicBool,
    counts: Mutex<Counts>,
    changed: Condvar,
    peers: Mutex<HashMap<SocketAddr, Peer>>,
    /// Threads of peers retired while idle, joined on drop.
    retired: Mutex<Vec<JoinHandle<()>>>,
}

/// A lock whose holder panicked is still the data: the counters and the
/// table stay consistent between statements.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn count(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut lock(&self.counts));
        self.changed.notify_all();
    }
}

/// A running forwarder; dropping it stops it.
pub struct Forwarder {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream)
            .field("counts", &self.counts())
            .finish()
    }
}

fn loopback_like(upstream: SocketAddr) -> &'static str {
    if upstream.is_ipv6() {
        "[::1]:0"
    } else {
        "127.0.0.1:0"
    }
}

impl Forwarder {
    /// A forwarder passing everything between its own loopback port (IPv4
    /// or IPv6 as `upstream` is) and `upstream`.
    pub fn start(upstream: SocketAddr) -> Forwarder {
        Forwarder::start_with(upstream, false)
    }

    /// A forwarder that drops everything from the start: no datagram
    /// reaches `upstream` until [`Forwarder::deliver`].
    pub fn silenced(upstream: SocketAddr) -> Forwarder {
        Forwarder::start_with(upstream, true)
    }

    fn start_with(upstream: SocketAddr, silenced: bool) -> Forwarder {
        Forwarder::start_idle(upstream, silenced, IDLE)
    }

    fn start_idle(upstream: SocketAddr, silenced: bool, idle: Duration) -> Forwarder {
        let listen = UdpSocket::bind(loopback_like(upstream)).expect("bind the forwarder");
        listen
            .set_read_timeout(Some(POLL))
            .expect("forwarder timeout");
        let addr = listen.local_addr().expect("forwarder address");
        let shared = Arc::new(Shared {
            upstream,
            idle,
            stop: AtomicBool::new(false),
            drop_requests: AtomicBool::new(silenced),
            drop_replies: AtomicBool::new(silenced),
            counts: Mutex::new(Counts::default()),
            changed: Condvar::new(),
            peers: Mutex::new(HashMap::new()),
            retired: Mutex::new(Vec::new()),
        });
        let listen = Arc::new(listen);
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("forwarder".into())
                .spawn(move || serve(&listen, &shared))
                .expect("spawn the forwarder")
        };
        Forwarder {
            addr,
            shared,
            thread: Some(thread),
        }
    }

    /// The address clients send to (put it in the server list).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server it forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// Drop every datagram, both directions, from now on.
    pub fn silence(&self) {
        self.set_dropping(true, true);
    }

    /// Pass every datagram, both directions, from now on.
    pub fn deliver(&self) {
        self.set_dropping(false, false);
    }

    /// Drop client datagrams (`requests`) and server datagrams (`replies`)
    /// as told, from now on.
    pub fn set_dropping(&self, requests: bool, replies: bool) {
        self.shared.drop_requests.store(requests, Ordering::SeqCst);
        self.shared.drop_replies.store(replies, Ordering::SeqCst);
    }

    /// What it did so far.
    pub fn counts(&self) -> Counts {
        *lock(&self.shared.counts)
    }

    /// Wait until the counts satisfy `done`, for at most `patience`: the
    /// counts then, or `None` when they did not get there in time.
    pub fn wait_until(&self, patience: Duration, done: impl Fn(&Counts) -> bool) -> Option<Counts> {
        let until = Instant::now() + patience;
        let mut counts = lock(&self.shared.counts);
        loop {
            if done(&counts) {
                return Some(*counts);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            counts = self
                .shared
                .changed
                .wait_timeout(counts, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Client addresses with a socket toward the server now.
    pub fn peers(&self) -> usize {
        lock(&self.shared.peers).len()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake every blocked read so its thread sees the flag now.
        if let Ok(s) = UdpSocket::bind(loopback_like(self.shared.upstream)) {
            let _ = s.send_to(&[0], self.addr);
            for p in lock(&self.shared.peers).values() {
                if let Ok(a) = p.socket.local_addr() {
                    let _ = s.send_to(&[0], a);
                }
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The listening thread is gone: no peer is added now.
        let threads: Vec<JoinHandle<()>> = lock(&self.shared.peers)
            .drain()
            .filter_map(|(_, mut p)| p.thread.take())
            .collect();
        for t in threads {
            let _ = t.join();
        }
        for t in lock(&self.shared.retired).drain(..) {
            let _ = t.join();
        }
    }
}

/// The listening side: each client datagram to the server, through that
/// client's own socket.
fn serve(listen: &Arc<UdpSocket>, shared: &Arc<Shared>) {
    let mut buf = vec![0u8; 65_536];
    while !shared.stop.load(Ordering::SeqCst) {
        let (len, from) = match listen.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        if shared.drop_requests.load(Ordering::SeqCst) {
            shared.count(|c| c.dropped_requests += 1);
            continue;
        }
        // Threads retired while idle have returned or are returning.
        lock(&shared.retired).retain(|t| !t.is_finished());
        let mut peers = lock(&shared.peers);
        let known = peers.get_mut(&from).map(|p| {
            p.last_request = Instant::now();
            p.socket.clone()
        });
        let socket = match known {
            Some(s) => s,
            None if peers.len() >= MAX_PEERS => {
                drop(peers);
                shared.count(|c| {
                    c.dropped_requests += 1;
                    c.overflow += 1;
                });
                continue;
            }
            None => {
                let Some(socket) = UdpSocket::bind(loopback_like(shared.upstream))
                    .and_then(|s| s.set_read_timeout(Some(POLL)).map(|()| s))
                    .ok()
                    .map(Arc::new)
                else {
                    drop(peers);
                    shared.count(|c| c.dropped_requests += 1);
                    continue;
                };
                let thread = {
                    let (listen, socket, shared) = (listen.clone(), socket.clone(), shared.clone());
                    std::thread::Builder::new()
                        .name("forwarder-peer".into())
                        .spawn(move || replies(&listen, &socket, from, &shared))
                        .ok()
                };
                if thread.is_none() {
                    drop(peers);
                    shared.count(|c| c.dropped_requests += 1);
                    continue;
                }
                peers.insert(
                    from,
                    Peer {
                        socket: socket.clone(),
                        last_request: Instant::now(),
                        thread,
                    },
                );
                socket
            }
        };
        // Counted before it goes, so a reply is never counted before its
        // request; sent under the lock, so an idle peer cannot retire
        // between its last request being recorded and that request going
        // out.
        shared.count(|c| c.requests += 1);
        let sent = socket.send_to(&buf[..len], shared.upstream).is_ok();
        drop(peers);
        if !sent {
            shared.count(|c| {
                c.requests -= 1;
                c.dropped_requests += 1;
            });
        }
    }
}

/// One client's side: the server's datagrams back to it, until stopped or
/// idle.
fn replies(listen: &UdpSocket, socket: &Arc<UdpSocket>, client: SocketAddr, shared: &Shared) {
    let mut buf = vec![0u8; 65_536];
    while !shared.stop.load(Ordering::SeqCst) {
        match socket.recv_from(&mut buf) {
            // Only the server's datagrams go back (the wake-up does not).
            Ok((len, src)) if src == shared.upstream => {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                if shared.drop_replies.load(Ordering::SeqCst) {
                    shared.count(|c| c.dropped_replies += 1);
                } else if listen.send_to(&buf[..len], client).is_ok() {
                    shared.count(|c| c.replies += 1);
                } else {
                    shared.count(|c| c.dropped_replies += 1);
                }
            }
            Ok(_) => {}
            Err(_) => {
                let mut peers = lock(&shared.peers);
                let idle = peers.get(&client).is_some_and(|p| {
                    Arc::ptr_eq(&p.socket, socket) && p.last_request.elapsed() >= shared.idle
                });
                if idle {
                    if let Some(t) = peers.remove(&client).and_then(|mut p| p.thread.take()) {
                        lock(&shared.retired).push(t);
                    }
                    drop(peers);
                    shared.count(|c| c.retired += 1);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENCE: Duration = Duration::from_secs(10);

    /// A plain UDP socket standing in for the server, and a client.
    fn pair() -> (UdpSocket, UdpSocket) {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server.set_read_timeout(Some(PATIENCE)).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        (server, client)
    }

    #[test]
    fn forwards_both_ways_when_open() {
        let (server, client) = pair();
        let f = Forwarder::start(server.local_addr().unwrap());
        client.send_to(b"ping", f.addr()).unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = server.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ping");
        // The server sees the forwarder's socket for this client, never
        // the client itself.
        assert_ne!(from, client.local_addr().unwrap());
        server.send_to(b"pong", from).unwrap();
        let (n, back) = client.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], back), (&b"pong"[..], f.addr()));
        let c = f.wait_until(PATIENCE, |c| c.replies == 1).unwrap();
        assert_eq!((c.forwarded(), c.dropped()), (2, 0), "{c:?}");
        assert_eq!(f.peers(), 1);
    }

    #[test]
    fn drops_and_counts_when_silenced_then_delivers_again() {
        let (server, client) = pair();
        let f = Forwarder::silenced(server.local_addr().unwrap());
        client.send_to(b"lost", f.addr()).unwrap();
        let c = f.wait_until(PATIENCE, |c| c.dropped_requests == 1).unwrap();
        assert_eq!(c.forwarded(), 0, "{c:?}");
        // Counted as dropped is final: nothing went to the server.
        server.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        assert!(
            server.recv_from(&mut buf).is_err(),
            "a dropped datagram arrived"
        );
        assert_eq!(f.peers(), 0);

        // Open again: the next request passes and its answer comes back.
        f.deliver();
        server.set_nonblocking(false).unwrap();
        client.send_to(b"ping", f.addr()).unwrap();
        let (n, from) = server.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ping");
        server.send_to(b"pong", from).unwrap();
        let (n, _) = client.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"pong");
        let c = f.wait_until(PATIENCE, |c| c.replies == 1).unwrap();
        assert_eq!((c.requests, c.replies, c.dropped()), (1, 1, 1), "{c:?}");
    }

    #[test]
    fn drops_replies_alone_when_told() {
        let (server, client) = pair();
        let f = Forwarder::start(server.local_addr().unwrap());
        f.set_dropping(false, true);
        client.send_to(b"ping", f.addr()).unwrap();
        let mut buf = [0u8; 64];
        let (_, from) = server.recv_from(&mut buf).unwrap();
        server.send_to(b"pong", from).unwrap();
        let c = f.wait_until(PATIENCE, |c| c.dropped_replies == 1).unwrap();
        assert_eq!((c.requests, c.replies), (1, 0), "{c:?}");
        client.set_nonblocking(true).unwrap();
        assert!(
            client.recv_from(&mut buf).is_err(),
            "a dropped reply arrived"
        );
    }

    #[test]
    fn each_client_gets_its_own_way_back_and_a_stranger_is_ignored() {
        let (server, a) = pair();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_read_timeout(Some(PATIENCE)).unwrap();
        let f = Forwarder::start(server.local_addr().unwrap());
        let mut buf = [0u8; 64];
        a.send_to(b"from a", f.addr()).unwrap();
        let (_, via_a) = server.recv_from(&mut buf).unwrap();
        b.send_to(b"from b", f.addr()).unwrap();
        let (_, via_b) = server.recv_from(&mut buf).unwrap();
        assert_ne!(via_a, via_b);
        // Someone other than the server writing to a client's socket is
        // not passed on.
        let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
        stranger.send_to(b"forged", via_a).unwrap();
        server.send_to(b"to b", via_b).unwrap();
        server.send_to(b"to a", via_a).unwrap();
        let (n, _) = b.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"to b");
        let (n, _) = a.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"to a");
        let c = f.wait_until(PATIENCE, |c| c.replies == 2).unwrap();
        assert_eq!((c.requests, c.dropped()), (2, 0), "{c:?}");
        assert_eq!(f.peers(), 2);
    }

    #[test]
    fn an_idle_client_is_retired_and_served_afresh() {
        let (server, client) = pair();
        let f = Forwarder::start_idle(server.local_addr().unwrap(), false, POLL);
        let mut buf = [0u8; 64];
        for round in 1..=2 {
            client.send_to(b"ping", f.addr()).unwrap();
            let (_, from) = server.recv_from(&mut buf).unwrap();
            server.send_to(b"pong", from).unwrap();
            let (n, _) = client.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"pong");
            let c = f.wait_until(PATIENCE, |c| c.retired == round).unwrap();
            assert_eq!((c.requests, c.replies), (round, round), "{c:?}");
            assert_eq!(f.peers(), 0);
        }
    }

    #[test]
    fn dropping_it_stops_every_thread_promptly() {
        let (server, client) = pair();
        let f = Forwarder::start(server.local_addr().unwrap());
        client.send_to(b"ping", f.addr()).unwrap();
        let mut buf = [0u8; 64];
        server.recv_from(&mut buf).unwrap();
        assert_eq!(f.peers(), 1);
        let shared = Arc::downgrade(&f.shared);
        let t = Instant::now();
        drop(f);
        // Woken, not timed out: well under the 200 ms backstop would be
        // usual, but a loaded machine may take longer.
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // Every thread held a reference; all are gone.
        assert!(shared.upgrade().is_none(), "a forwarder thread outlived it");
    }
}
