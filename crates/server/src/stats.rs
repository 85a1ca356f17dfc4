//! Per-worker counters: plain integers owned by one thread (no shared cache
//! lines on the hot path), published as a snapshot now and then; and TCP's
//! snapshot (`stats/tcp.rs`). A leaf: the loops count into these, `/metrics`
//! renders them, and it imports nothing of the crate.

mod tcp;

use gnomon_protocol::request::RequestError;
use gnomon_protocol::PROFILES;

pub use tcp::{Close, TcpStats};

/// Why a datagram got no answer. Every reason is a counter; nothing is
/// logged per packet (an attacker would otherwise choose our log volume).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Drop {
    /// Shorter than the minimum request size.
    TooShort,
    /// Longer than the receive buffer.
    Oversized,
    /// ROUGHTIM header wrong.
    Framing,
    /// Malformed message.
    Message,
    /// No VER in a packet.
    NoVersion,
    /// VER list breaks the chosen version's rules.
    VerList,
    /// No offered version is served.
    UnknownVersion,
    /// No NONC.
    NoNonce,
    /// TYPE missing or not 0.
    Type,
    /// SRV of bad length.
    Srv,
    /// SRV names a key not held here.
    UnknownSrv,
    /// SRV required (several identities).
    SrvRequired,
    /// Waited in the socket longer than the limit.
    Stale,
    /// Clock unsynchronized and policy is to refuse.
    Unsynchronized,
    /// The delegation does not cover now.
    OutsideDelegation,
    /// Could not respond (request too small for any response).
    TooSmall,
    /// The kernel did not take the reply, for a reason not named below.
    SendFailed,
    /// The source is on the deny list.
    Denied,
    /// The source's prefix sent more than its rate and burst.
    RateLimited,
    /// A version answered one per signature, over its share of the worker.
    SignatureBudget,
    /// Source is a broadcast address (limited, or a local interface's
    /// directed broadcast): no reply may go there.
    SourceBroadcast,
    /// Source is a multicast address.
    SourceMulticast,
    /// Source is unspecified (0.0.0.0, `::`): the kernel would send the
    /// reply to this host.
    SourceUnspecified,
    /// Source port 0.
    SourcePortZero,
    /// Loopback source on a non-loopback local address: spoofed.
    SourceLoopback,
    /// An IPv4-mapped IPv6 source (`::ffff:a.b.c.d`): forged, as every
    /// IPv6 socket is IPv6-only, and no reply could leave it.
    SourceMapped,
    /// Sent to a broadcast address: every worker's socket gets a copy, and
    /// a reply cannot come from that address.
    DestinationBroadcast,
    /// Sent to a multicast group (e.g. all-hosts, which every host joins).
    DestinationMulticast,
    /// The kernel refused the reply (EACCES, EPERM: a broadcast
    /// destination the source filter did not know, or a firewall).
    SendRefused,
    /// The destination is unreachable (an ICMP error an attacker can
    /// provoke, or no route).
    SendUnreachable,
    /// No buffer space for the reply (EAGAIN, ENOBUFS, ENOMEM).
    SendBufferFull,
    /// A receive call failed (not a datagram: the call itself).
    ReceiveError,
    /// AF_XDP path: a frame shorter than its headers.
    FrameTruncated,
    /// AF_XDP path: a frame that is not IPv4 without options or IPv6
    /// with UDP next (the program passes those to the kernel; seen only if
    /// the program and the worker disagree).
    FrameNotIp,
    /// AF_XDP path: IP, not UDP.
    FrameNotUdp,
    /// AF_XDP path: an IPv4 fragment.
    FrameFragment,
    /// AF_XDP path: IP or UDP lengths that do not fit the frame.
    FrameBadLength,
    /// AF_XDP path: a wrong IPv4 header or UDP checksum.
    FrameBadChecksum,
    /// AF_XDP path: the send ring was full.
    XdpSendFull,
    /// AF_XDP path: a frame from a broadcast or multicast MAC address, to
    /// which no reply may go (the program passes those to the kernel; seen
    /// only if the program and the worker disagree).
    FrameGroupSource,
}

impl Drop {
    /// Number of reasons.
    pub const COUNT: usize = 40;
    /// Every reason, in counter order.
    pub const ALL: [Drop; Drop::COUNT] = [
        Drop::TooShort,
        Drop::Oversized,
        Drop::Framing,
        Drop::Message,
        Drop::NoVersion,
        Drop::VerList,
        Drop::UnknownVersion,
        Drop::NoNonce,
        Drop::Type,
        Drop::Srv,
        Drop::UnknownSrv,
        Drop::SrvRequired,
        Drop::Stale,
        Drop::Unsynchronized,
        Drop::OutsideDelegation,
        Drop::TooSmall,
        Drop::SendFailed,
        Drop::Denied,
        Drop::RateLimited,
        Drop::SignatureBudget,
        Drop::SourceBroadcast,
        Drop::SourceMulticast,
        Drop::SourceUnspecified,
        Drop::SourcePortZero,
        Drop::SourceLoopback,
        Drop::SourceMapped,
        Drop::DestinationBroadcast,
        Drop::DestinationMulticast,
        Drop::SendRefused,
        Drop::SendUnreachable,
        Drop::SendBufferFull,
        Drop::ReceiveError,
        Drop::FrameTruncated,
        Drop::FrameNotIp,
        Drop::FrameNotUdp,
        Drop::FrameFragment,
        Drop::FrameBadLength,
        Drop::FrameBadChecksum,
        Drop::XdpSendFull,
        Drop::FrameGroupSource,
    ];

    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Drop::TooShort => "too_short",
            Drop::Oversized => "oversized",
            Drop::Framing => "framing",
            Drop::Message => "malformed",
            Drop::NoVersion => "no_version",
            Drop::VerList => "bad_version_list",
            Drop::UnknownVersion => "unsupported_version",
            Drop::NoNonce => "no_nonce",
            Drop::Type => "bad_type",
            Drop::Srv => "bad_srv",
            Drop::UnknownSrv => "unknown_srv",
            Drop::SrvRequired => "srv_required",
            Drop::Stale => "stale",
            Drop::Unsynchronized => "clock_unsynchronized",
            Drop::OutsideDelegation => "outside_delegation",
            Drop::TooSmall => "too_small",
            Drop::SendFailed => "send_failed",
            Drop::Denied => "denied",
            Drop::RateLimited => "rate_limited",
            Drop::SignatureBudget => "signature_budget",
            Drop::SourceBroadcast => "source_broadcast",
            Drop::SourceMulticast => "source_multicast",
            Drop::SourceUnspecified => "source_unspecified",
            Drop::SourcePortZero => "source_port_zero",
            Drop::SourceLoopback => "source_loopback",
            Drop::SourceMapped => "source_v4_mapped",
            Drop::DestinationBroadcast => "destination_broadcast",
            Drop::DestinationMulticast => "destination_multicast",
            Drop::SendRefused => "send_refused",
            Drop::SendUnreachable => "send_unreachable",
            Drop::SendBufferFull => "send_buffer_full",
            Drop::ReceiveError => "receive_error",
            Drop::FrameTruncated => "frame_truncated",
            Drop::FrameNotIp => "frame_not_ip",
            Drop::FrameNotUdp => "frame_not_udp",
            Drop::FrameFragment => "frame_fragment",
            Drop::FrameBadLength => "frame_bad_length",
            Drop::FrameBadChecksum => "frame_bad_checksum",
            Drop::XdpSendFull => "xdp_send_full",
            Drop::FrameGroupSource => "frame_group_source",
        }
    }
}

impl From<RequestError> for Drop {
    fn from(e: RequestError) -> Drop {
        match e {
            RequestError::TooShort => Drop::TooShort,
            RequestError::Framing(_) => Drop::Framing,
            RequestError::Message(_) => Drop::Message,
            RequestError::NoVersion => Drop::NoVersion,
            RequestError::VerList => Drop::VerList,
            RequestError::Unsupported => Drop::UnknownVersion,
            RequestError::NoNonce => Drop::NoNonce,
            RequestError::Type => Drop::Type,
            RequestError::Srv => Drop::Srv,
            _ => Drop::Message,
        }
    }
}

/// Batch-size histogram bucket upper bounds (powers of two).
pub const BATCH_BUCKETS: usize = 11;
/// Queue-delay histogram bucket upper bounds, µs.
pub const DELAY_BOUNDS_US: [u64; 8] = [
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    u64::MAX,
];

/// One worker's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerStats {
    /// Datagrams received.
    pub received: u64,
    /// Responses sent, per profile id.
    pub responses: [u64; PROFILES.len()],
    /// Drops per reason.
    pub drops: [u64; Drop::COUNT],
    /// Signatures made.
    pub signatures: u64,
    /// Responses deliberately sent with a broken signature (grease).
    pub greased: u64,
    /// recvmmsg calls that returned datagrams.
    pub batches: u64,
    /// Received-batch sizes: bucket k counts batches of ≤ 2^k datagrams.
    pub batch_sizes: [u64; BATCH_BUCKETS],
    /// Time spent waiting in the socket, per bucket of [`DELAY_BOUNDS_US`].
    pub queue_delay: [u64; DELAY_BOUNDS_US.len()],
    /// Sum of every counted queue delay, µs (the histogram's `_sum`).
    pub queue_delay_us_total: u64,
    /// Kernel receive-queue overflow drops (cumulative, from the kernel).
    pub kernel_overflow: u64,
    /// Nanoseconds spent parsing, responding, and in syscalls.
    pub ns_parse: u64,
    /// Nanoseconds in the responder (hashing, signing, writing).
    pub ns_respond: u64,
    /// Nanoseconds in recvmmsg + sendmmsg, including a receive's wait for
    /// the first datagram.
    pub ns_syscalls: u64,
    /// Nanoseconds slept for a fuller batch (`batch_wait_us`).
    pub ns_batch_wait: u64,
    /// Pauses after receive errors in a row (a persistent error must not
    /// become a busy loop).
    pub error_backoffs: u64,
    /// AF_XDP path: frames taken from the receive ring.
    pub xdp_received: u64,
    /// AF_XDP path: replies put on the send ring.
    pub xdp_sent: u64,
    /// AF_XDP path, from the kernel (cumulative per socket): frames
    /// dropped because the receive ring was full.
    pub xdp_ring_full: u64,
    /// AF_XDP path, from the kernel: frames dropped for other reasons.
    pub xdp_kernel_dropped: u64,
    /// AF_XDP path, from the kernel: times it found no frame to receive
    /// into.
    pub xdp_fill_empty: u64,
}

impl Default for WorkerStats {
    fn default() -> Self {
        WorkerStats {
            received: 0,
            responses: [0; PROFILES.len()],
            drops: [0; Drop::COUNT],
            signatures: 0,
            greased: 0,
            batches: 0,
            batch_sizes: [0; BATCH_BUCKETS],
            queue_delay: [0; DELAY_BOUNDS_US.len()],
            queue_delay_us_total: 0,
            kernel_overflow: 0,
            ns_parse: 0,
            ns_respond: 0,
            ns_syscalls: 0,
            ns_batch_wait: 0,
            error_backoffs: 0,
            xdp_received: 0,
            xdp_sent: 0,
            xdp_ring_full: 0,
            xdp_kernel_dropped: 0,
            xdp_fill_empty: 0,
        }
    }
}

impl WorkerStats {
    /// Count a drop.
    pub fn drop(&mut self, why: Drop) {
        self.drops[why as usize] += 1;
    }

    /// Count a received batch of `n`.
    pub fn batch(&mut self, n: usize) {
        self.batches += 1;
        let k = (usize::BITS - n.max(1).next_power_of_two().leading_zeros() - 1) as usize;
        self.batch_sizes[k.min(BATCH_BUCKETS - 1)] += 1;
    }

    /// Count one request's time in the socket.
    pub fn delay(&mut self, us: u64) {
        let k = DELAY_BOUNDS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(DELAY_BOUNDS_US.len() - 1);
        self.queue_delay[k] += 1;
        self.queue_delay_us_total += us;
    }

    /// Total responses.
    pub fn total_responses(&self) -> u64 {
        self.responses.iter().sum()
    }

    /// Add another worker's counters.
    pub fn add(&mut self, o: &WorkerStats) {
        self.received += o.received;
        self.signatures += o.signatures;
        self.greased += o.greased;
        self.batches += o.batches;
        self.kernel_overflow += o.kernel_overflow;
        self.queue_delay_us_total += o.queue_delay_us_total;
        self.ns_parse += o.ns_parse;
        self.ns_respond += o.ns_respond;
        self.ns_syscalls += o.ns_syscalls;
        self.ns_batch_wait += o.ns_batch_wait;
        self.error_backoffs += o.error_backoffs;
        self.xdp_received += o.xdp_received;
        self.xdp_sent += o.xdp_sent;
        self.xdp_ring_full += o.xdp_ring_full;
        self.xdp_kernel_dropped += o.xdp_kernel_dropped;
        self.xdp_fill_empty += o.xdp_fill_empty;
        for (a, b) in self.responses.iter_mut().zip(o.responses) {
            *a += b;
        }
        for (a, b) in self.drops.iter_mut().zip(o.drops) {
            *a += b;
        }
        for (a, b) in self.batch_sizes.iter_mut().zip(o.batch_sizes) {
            *a += b;
        }
        for (a, b) in self.queue_delay.iter_mut().zip(o.queue_delay) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_distinct_and_ordered() {
        for (i, d) in Drop::ALL.iter().enumerate() {
            assert_eq!(*d as usize, i);
        }
        let mut labels: Vec<_> = Drop::ALL.iter().map(|d| d.label()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), Drop::COUNT);
    }

    #[test]
    fn histograms() {
        let mut s = WorkerStats::default();
        s.batch(1);
        s.batch(3);
        s.batch(64);
        s.batch(5000);
        assert_eq!(s.batch_sizes[0], 1);
        assert_eq!(s.batch_sizes[2], 1);
        assert_eq!(s.batch_sizes[6], 1);
        assert_eq!(s.batch_sizes[BATCH_BUCKETS - 1], 1);
        s.delay(5);
        s.delay(50_000);
        assert_eq!(s.queue_delay[0], 1);
        assert_eq!(s.queue_delay[4], 1);
    }
}
