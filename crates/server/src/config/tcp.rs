//! The `[tcp]` table: the TCP transport's connection caps, deadlines,
//! frame limits and source prefixes (docs/OPERATIONS.md, "TCP").

use std::fmt;
use std::time::Duration;

use super::values::fmt_duration;

bounded_int!(
    /// Open TCP connections at most; at the cap a newcomer closes the
    /// connection idle the longest.
    MaxConnections(u32), 1, 1_000_000, 1024
);

bounded_int!(
    /// Longest ROUGHTIM frame body accepted over TCP, bytes.
    MaxFrame(u32), 1024, 65_536, 4096
);

bounded_int!(
    /// Frames one TCP connection may carry before it is closed.
    MaxRequests(u32), 1, 1_000_000, 1000
);

bounded_int!(
    /// Open TCP connections at most from one source prefix.
    MaxPerSource(u32), 1, 1_000_000, 16
);

bounded_int!(
    /// Open TCP connections at most from one network: the /24 (IPv4) or
    /// /48 (IPv6) around the source, or the source prefix when that is
    /// shorter. 64 is four sources at their share, 1/16 of the default
    /// total: filling the total takes 16 networks, not 64 addresses.
    MaxPerNetwork(u32), 1, 1_000_000, 64
);

bounded_int!(
    /// Bits of an IPv4 source address that name its source for the
    /// per-source cap (32: each address on its own).
    SourcePrefixV4(u8), 8, 32, 32
);

bounded_int!(
    /// Bits of an IPv6 source address that name its source for the
    /// per-source cap (64: a subnet, which one host usually holds whole).
    SourcePrefixV6(u8), 16, 128, 64
);

bounded_duration!(
    /// A TCP connection with no complete request for this long is closed.
    IdleTimeout,
    Duration::from_secs(1),
    Duration::from_secs(3600),
    Duration::from_secs(30)
);

bounded_duration!(
    /// Once a frame has started, the rest must arrive within this.
    ReadTimeout,
    Duration::from_millis(100),
    Duration::from_secs(60),
    Duration::from_secs(5)
);

bounded_duration!(
    /// The responses to one read must all be taken within this.
    WriteTimeout,
    Duration::from_millis(100),
    Duration::from_secs(60),
    Duration::from_secs(5)
);

bounded_duration!(
    /// Every TCP connection is closed this long after it was accepted.
    MaxLifetime,
    Duration::from_secs(1),
    Duration::from_secs(86_400),
    Duration::from_secs(300)
);

/// The TCP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// Serve TCP on the listen addresses (versions that define TCP only).
    pub enable: bool,
    /// Connection cap.
    pub max_connections: MaxConnections,
    /// Idle timeout.
    pub idle_timeout: IdleTimeout,
    /// Timeout for the rest of a started frame.
    pub read_timeout: ReadTimeout,
    /// Deadline for taking one read's responses.
    pub write_timeout: WriteTimeout,
    /// Frame body size cap.
    pub max_frame: MaxFrame,
    /// Connection lifetime.
    pub max_lifetime: MaxLifetime,
    /// Frames per connection.
    pub max_requests: MaxRequests,
    /// Connections per source prefix.
    pub max_per_source: MaxPerSource,
    /// Connections per network (/24, /48).
    pub max_per_network: MaxPerNetwork,
    /// IPv4 source prefix length.
    pub source_prefix_v4: SourcePrefixV4,
    /// IPv6 source prefix length.
    pub source_prefix_v6: SourcePrefixV6,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            enable: true,
            max_connections: MaxConnections::DEFAULT,
            idle_timeout: IdleTimeout::DEFAULT,
            read_timeout: ReadTimeout::DEFAULT,
            write_timeout: WriteTimeout::DEFAULT,
            max_frame: MaxFrame::DEFAULT,
            max_lifetime: MaxLifetime::DEFAULT,
            max_requests: MaxRequests::DEFAULT,
            max_per_source: MaxPerSource::DEFAULT,
            max_per_network: MaxPerNetwork::DEFAULT,
            source_prefix_v4: SourcePrefixV4::DEFAULT,
            source_prefix_v6: SourcePrefixV6::DEFAULT,
        }
    }
}
