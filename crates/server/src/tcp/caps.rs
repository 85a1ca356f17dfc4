//! Who may hold a connection (tcp.rs, "Holding connections is
//! bounded"): a newcomer takes a slot of its source prefix, of its network
//! and of the total, where at the total cap the connection idle the longest
//! is evicted to make room; a handler that ends gives its slots back.

use std::collections::HashMap;
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{bump, conn, Close, ConnState, Handler, Place, Shared};
use crate::limit::source_prefix;

/// Handler stack: the responder's state lives on the heap; this is room for
/// the signing code with a wide margin.
const HANDLER_STACK: usize = 256 * 1024;
/// The network around a source, for `max_per_network`: an IPv4 /24 (the
/// smallest block routed on the Internet) or an IPv6 /48 (a site's usual
/// assignment).
const NETWORK_V4: u8 = 24;
/// See [`NETWORK_V4`].
const NETWORK_V6: u8 = 48;

/// Start a handler for `stream`, or close it at once when its source or
/// its network holds its share, or when the total cap is reached and no
/// connection is idle to be evicted.
pub(super) fn admit(stream: TcpStream, peer: IpAddr, shared: &Arc<Shared>) {
    let c = &shared.counters;
    let config = shared.config.load();
    let cap = config.max_connections.max(1);
    let source = source_prefix(peer, config.source_prefix_v4, config.source_prefix_v6);
    let network = source_prefix(
        peer,
        config.source_prefix_v4.min(NETWORK_V4),
        config.source_prefix_v6.min(NETWORK_V6),
    );
    if !take(&shared.per_source, source, config.max_per_source) {
        bump(&c.refused_per_source);
        return;
    }
    if !take(&shared.per_network, network, config.max_per_network) {
        release(&shared.per_source, source);
        bump(&c.refused_per_network);
        return;
    }
    let place = Place {
        id: shared.next_id.fetch_add(1, Ordering::Relaxed),
        source,
        network,
    };
    // Held across the count and the spawn: a handler that ends at once
    // must find its own entry when it removes it, or the entry (and a
    // descriptor) would leak.
    let mut handlers = shared.handlers.lock().unwrap_or_else(|p| p.into_inner());
    let open = shared.open.load(Ordering::Relaxed);
    let counted = open.saturating_sub(shared.evicting.load(Ordering::Relaxed));
    if counted >= cap && !evict_idle(&handlers, shared) {
        shared.release(place);
        bump(&c.refused);
        return;
    }
    shared.open.store(open + 1, Ordering::Relaxed);
    let state = Arc::new(ConnState {
        busy: AtomicBool::new(false),
        last: AtomicU64::new(shared.activity.fetch_add(1, Ordering::Relaxed)),
        evicted: AtomicBool::new(false),
    });
    let stream = Arc::new(stream);
    let waker = stream.clone();
    // Counted before the handler can answer anything.
    bump(&c.accepted);
    let s = shared.clone();
    let mine = state.clone();
    let spawned = std::thread::Builder::new()
        .name("gnomon-tcp-conn".into())
        .stack_size(HANDLER_STACK)
        .spawn(move || conn::serve(stream, place, mine, &s));
    match spawned {
        Ok(h) => {
            handlers.insert(place.id, (waker, h, state));
        }
        Err(_) => {
            c.accepted.fetch_sub(1, Ordering::Relaxed);
            shared.release(place);
            shared.open.fetch_sub(1, Ordering::Relaxed);
            bump(&c.refused);
        }
    }
}

/// Close the connection idle the longest (no frame started since its last
/// answer), to make room for a newcomer; false when every connection is
/// mid-request. Its handler sees the end of its stream and counts the
/// close as [`Close::Evicted`].
fn evict_idle(handlers: &HashMap<u64, Handler>, shared: &Shared) -> bool {
    let victim = handlers
        .values()
        .filter(|(_, _, st)| !st.busy.load(Ordering::Relaxed) && !st.was_evicted())
        .min_by_key(|(_, _, st)| st.last.load(Ordering::Relaxed));
    let Some((stream, _, state)) = victim else {
        return false;
    };
    state.evicted.store(true, Ordering::Relaxed);
    shared.evicting.fetch_add(1, Ordering::Relaxed);
    bump(&shared.counters.evicted);
    let _ = stream.shutdown(std::net::Shutdown::Both);
    true
}

/// Count one more connection under `key`, unless it holds `max`.
fn take(map: &Mutex<HashMap<IpAddr, usize>>, key: IpAddr, max: usize) -> bool {
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    let n = map.entry(key).or_insert(0);
    if *n >= max.max(1) {
        if *n == 0 {
            map.remove(&key);
        }
        return false;
    }
    *n += 1;
    true
}

fn release(map: &Mutex<HashMap<IpAddr, usize>>, key: IpAddr) {
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

impl Shared {
    /// A handler is done: count why, then let the caps admit another.
    pub(super) fn finished(&self, place: Place, state: &ConnState, why: Close) {
        bump(&self.counters.closed[why as usize]);
        {
            let mut handlers = self.handlers.lock().unwrap_or_else(|p| p.into_inner());
            handlers.remove(&place.id);
            self.open.fetch_sub(1, Ordering::Relaxed);
            if state.was_evicted() {
                self.evicting.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.release(place);
    }

    /// Give back the per-source and per-network counts of `place`.
    fn release(&self, place: Place) {
        release(&self.per_source, place.source);
        release(&self.per_network, place.network);
    }

    /// A tick of activity, to order connections by idleness.
    pub(crate) fn tick(&self) -> u64 {
        self.activity.fetch_add(1, Ordering::Relaxed)
    }
}
