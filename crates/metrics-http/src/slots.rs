//! Who holds the connection slots of an HTTP listener, shared by every
//! HTTP listener gnomon has (this crate's endpoint for `serve` and `sync`,
//! and `watch`'s page and report sink through gnomon-watch's `http`).
//!
//! ```text
//!  accept(peer) ─▶ ConnTable::admit ─▶ Slot (held by the connection's task)
//!     source at its share?  evict that source's oldest incomplete slot
//!     table full?           evict the oldest incomplete slot of anyone
//!     nothing evictable?    refuse the newcomer
//! ```
//!
//! A slot is *incomplete* until its whole request is in
//! ([`Marker::complete`]): a client that connects and sends nothing, or
//! trickles its head, holds a slot it has not earned yet, so a newcomer
//! takes it. A connection whose request is complete is being answered and
//! ends soon by itself (no keep-alive), so it is never evicted. Oldest
//! first: a holder's connections are older than the honest client's that
//! just arrived, and an honest request is complete within a round trip.
//!
//! A *source* is an IPv4 address or an IPv6 /64 (one host usually holds a
//! whole /64); an IPv4-mapped IPv6 address is its IPv4 address.
//!
//! Every eviction and refusal is counted by [`Reason`].

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::Notify;

/// Which cap a newcomer met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its source held its share (`per_source`).
    PerSource,
    /// The listener held `total` connections.
    Total,
}

impl Reason {
    /// Both reasons, in counter order.
    pub const ALL: [Reason; 2] = [Reason::PerSource, Reason::Total];

    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Reason::PerSource => "per_source",
            Reason::Total => "total",
        }
    }
}

/// The source a peer counts under: its IPv4 address, or its IPv6 /64.
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(a) & !u128::from(u64::MAX))),
        },
    }
}

struct Entry {
    source: IpAddr,
    complete: bool,
    evict: Arc<Notify>,
}

/// The open connections of one listener, in accept order.
pub struct ConnTable {
    total: usize,
    per_source: usize,
    /// By id; ids grow, so the first entry is the oldest.
    entries: Mutex<(u64, BTreeMap<u64, Entry>)>,
    evicted: [AtomicU64; 2],
    refused: [AtomicU64; 2],
}

impl std::fmt::Debug for ConnTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnTable")
            .field("total", &self.total)
            .field("per_source", &self.per_source)
            .field("open", &self.open())
            .finish()
    }
}

impl ConnTable {
    /// A table for at most `total` connections, `per_source` of them from
    /// one source (both at least 1). One source never holds every slot of
    /// a table of three or more: a share as large as the table is one
    /// less, so that a holder whose requests are all complete (never
    /// evicted) still leaves another source a slot. A table of two keeps
    /// both for one source: with one, a client's next request would race
    /// the release of its last.
    pub fn new(total: usize, per_source: usize) -> Arc<ConnTable> {
        let total = total.max(1);
        let most = if total > 2 { total - 1 } else { total };
        Arc::new(ConnTable {
            total,
            per_source: per_source.clamp(1, most),
            entries: Mutex::new((0, BTreeMap::new())),
            evicted: Default::default(),
            refused: Default::default(),
        })
    }

    /// The caps: (total, per source).
    pub fn caps(&self) -> (usize, usize) {
        (self.total, self.per_source)
    }

    /// A slot for a connection from `peer`, evicting the oldest incomplete
    /// connection when a cap is reached; `None` (counted) when nothing can
    /// be evicted: every holder has sent its whole request.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        let source = source_of(peer);
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (next, entries) = &mut *guard;
        let held = entries.values().filter(|e| e.source == source).count();
        if held >= self.per_source && !self.evict_oldest(entries, Some(source), Reason::PerSource) {
            self.refused[0].fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if entries.len() >= self.total && !self.evict_oldest(entries, None, Reason::Total) {
            self.refused[1].fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let id = *next;
        *next += 1;
        let evict = Arc::new(Notify::new());
        entries.insert(
            id,
            Entry {
                source,
                complete: false,
                evict: evict.clone(),
            },
        );
        Some(Slot {
            marker: Marker {
                table: self.clone(),
                id,
            },
            evict,
        })
    }

    /// Close the oldest incomplete connection (of `source`, if given).
    fn evict_oldest(
        &self,
        entries: &mut BTreeMap<u64, Entry>,
        source: Option<IpAddr>,
        why: Reason,
    ) -> bool {
        let victim = entries
            .iter()
            .find(|(_, e)| !e.complete && source.is_none_or(|s| s == e.source))
            .map(|(id, _)| *id);
        let Some(id) = victim.and_then(|id| entries.remove(&id)) else {
            return false;
        };
        // A stored permit: the task sees it even if it is not waiting yet.
        id.evict.notify_one();
        self.evicted[why as usize].fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Connections evicted to make room, for this reason, since start.
    pub fn evicted(&self, why: Reason) -> u64 {
        self.evicted[why as usize].load(Ordering::Relaxed)
    }

    /// Connections refused (nothing evictable), for this reason.
    pub fn refused(&self, why: Reason) -> u64 {
        self.refused[why as usize].load(Ordering::Relaxed)
    }

    /// Connections holding a slot now.
    pub fn open(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .len()
    }

    fn set_complete(&self, id: u64) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = guard.1.get_mut(&id) {
            e.complete = true;
        }
    }

    fn release(&self, id: u64) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .remove(&id);
    }
}

/// Says of one connection that its request is complete.
#[derive(Clone)]
pub struct Marker {
    table: Arc<ConnTable>,
    id: u64,
}

impl Marker {
    /// The whole request is in: this connection is no longer evicted.
    pub fn complete(&self) {
        self.table.set_complete(self.id);
    }
}

/// One connection's place in its table, released when dropped.
pub struct Slot {
    marker: Marker,
    evict: Arc<Notify>,
}

impl Slot {
    /// A handle for the request handler to call [`Marker::complete`].
    pub fn marker(&self) -> Marker {
        self.marker.clone()
    }

    /// Run `connection` until it ends (`Some`) or this slot is evicted
    /// (`None`, and `connection` is dropped, which closes it).
    pub async fn run<F: std::future::Future>(&self, connection: F) -> Option<F::Output> {
        tokio::select! {
            out = connection => Some(out),
            () = self.evict.notified() => None,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.marker.table.release(self.marker.id);
    }
}

/// A request body that marks its connection complete once it has been
/// read to its end (at once if it is empty).
pub struct CompleteAtEnd<B> {
    inner: B,
    marker: Option<Marker>,
}

impl<B: Body + Unpin> CompleteAtEnd<B> {
    /// Wrap `inner`.
    pub fn new(inner: B, marker: Marker) -> Self {
        let mut body = CompleteAtEnd {
            inner,
            marker: Some(marker),
        };
        body.check_end();
        body
    }

    fn check_end(&mut self) {
        if self.inner.is_end_stream() {
            if let Some(m) = self.marker.take() {
                m.complete();
            }
        }
    }
}

impl<B: Body + Unpin> Body for CompleteAtEnd<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            if let Some(m) = this.marker.take() {
                m.complete();
            }
        } else {
            this.check_end();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn sources_are_addresses_and_v6_subnets() {
        assert_eq!(source_of(ip("10.1.2.3")), ip("10.1.2.3"));
        assert_eq!(source_of(ip("::ffff:10.1.2.3")), ip("10.1.2.3"));
        assert_eq!(source_of(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
    }

    #[test]
    fn a_source_at_its_share_evicts_its_own_oldest() {
        let t = ConnTable::new(8, 2);
        let a1 = t.admit(ip("10.0.0.1")).unwrap();
        let b = t.admit(ip("10.0.0.2")).unwrap();
        let a2 = t.admit(ip("10.0.0.1")).unwrap();
        let a3 = t.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(t.evicted(Reason::PerSource), 1);
        assert_eq!(t.open(), 3);
        // a1 was the one evicted: releasing it changes nothing.
        drop(a1);
        assert_eq!(t.open(), 3);
        // With both of its slots complete, the source is refused.
        a2.marker().complete();
        a3.marker().complete();
        assert!(t.admit(ip("10.0.0.1")).is_none());
        assert_eq!(t.refused(Reason::PerSource), 1);
        drop(b);
        assert_eq!(t.open(), 2);
    }

    /// Issue 34's question of every shared budget: one source at its
    /// maximum, its requests all complete (nothing of it evictable), leaves
    /// room for another, which is admitted without evicting anyone.
    #[test]
    fn one_source_at_its_share_leaves_room_for_another() {
        for (total, per_source, held) in [(16, 4, 4), (64, 8, 8), (4, 8, 3), (3, 3, 2)] {
            let t = ConnTable::new(total, per_source);
            assert_eq!(t.caps(), (total, held));
            let hog: Vec<Slot> = (0..held)
                .map(|_| t.admit(ip("10.0.0.1")).expect("within its share"))
                .collect();
            for s in &hog {
                s.marker().complete();
            }
            assert!(
                t.admit(ip("10.0.0.1")).is_none(),
                "{total}/{per_source}: past its share"
            );
            assert!(
                t.admit(ip("10.0.0.2")).is_some(),
                "{total}/{per_source}: no room for another"
            );
            assert_eq!(t.evicted(Reason::PerSource) + t.evicted(Reason::Total), 0);
        }
    }

    #[test]
    fn a_full_table_evicts_the_oldest_incomplete_of_anyone() {
        let t = ConnTable::new(3, 3);
        let a = t.admit(ip("10.0.0.1")).unwrap();
        a.marker().complete();
        let _b = t.admit(ip("10.0.0.2")).unwrap();
        let _c = t.admit(ip("10.0.0.3")).unwrap();
        let _d = t.admit(ip("10.0.0.4")).unwrap();
        assert_eq!(t.evicted(Reason::Total), 1);
        assert_eq!(t.open(), 3);
        // a (complete) and d are left, and c, the oldest incomplete, goes.
        let _e = t.admit(ip("10.0.0.5")).unwrap();
        assert_eq!(t.evicted(Reason::Total), 2);
        _d.marker().complete();
        _e.marker().complete();
        assert!(t.admit(ip("10.0.0.6")).is_none());
        assert_eq!(t.refused(Reason::Total), 1);
    }

    #[test]
    fn an_evicted_slot_ends_its_connection() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let t = ConnTable::new(1, 1);
            let old = t.admit(ip("10.0.0.1")).unwrap();
            let _new = t.admit(ip("10.0.0.2")).unwrap();
            let ran = old.run(std::future::pending::<()>()).await;
            assert!(ran.is_none());
        });
    }
}
