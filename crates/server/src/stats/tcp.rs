//! TCP's counters as plain data: why a connection ended ([`Close`]) and a
//! snapshot of every TCP counter ([`TcpStats`]). The TCP side counts into
//! atomics of its own and reads them into this snapshot; `/metrics`
//! renders it. `tcp` re-exports both, so `tcp::TcpStats` and `tcp::Close`
//! keep their paths.

use gnomon_protocol::PROFILES;

use super::Drop;

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Close {
    /// The peer closed or reset it.
    Peer,
    /// No complete request for `idle_timeout`.
    Idle,
    /// A frame was started and not finished within `read_timeout`.
    ReadTimeout,
    /// A header announced a body longer than `max_frame`.
    FrameTooLarge,
    /// The stream does not start with the ROUGHTIM magic where a frame must.
    Framing,
    /// Writing the responses failed (the peer reset the connection).
    WriteFailed,
    /// The peer did not take its responses within `write_timeout`.
    WriteTimeout,
    /// The connection reached `max_lifetime`.
    Lifetime,
    /// The connection carried `max_requests` frames.
    RequestCap,
    /// The server is stopping.
    Shutdown,
    /// Idle the longest when a newcomer met the total cap.
    Evicted,
}

impl Close {
    /// Number of reasons.
    pub const COUNT: usize = 11;
    /// Every reason, in counter order.
    pub const ALL: [Close; Close::COUNT] = [
        Close::Peer,
        Close::Idle,
        Close::ReadTimeout,
        Close::FrameTooLarge,
        Close::Framing,
        Close::WriteFailed,
        Close::WriteTimeout,
        Close::Lifetime,
        Close::RequestCap,
        Close::Shutdown,
        Close::Evicted,
    ];

    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Close::Peer => "peer",
            Close::Idle => "idle_timeout",
            Close::ReadTimeout => "read_timeout",
            Close::FrameTooLarge => "frame_too_large",
            Close::Framing => "framing",
            Close::WriteFailed => "write_failed",
            Close::WriteTimeout => "write_timeout",
            Close::Lifetime => "max_lifetime",
            Close::RequestCap => "max_requests",
            Close::Shutdown => "shutdown",
            Close::Evicted => "evicted",
        }
    }
}

/// A snapshot of the TCP counters since start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpStats {
    /// Connections admitted.
    pub accepted: u64,
    /// Connections closed at once: at the total cap with every connection
    /// mid-request, or no thread to serve them.
    pub refused: u64,
    /// Connections closed at once: their source prefix held its share.
    pub refused_per_source: u64,
    /// Connections closed at once: their network held its share.
    pub refused_per_network: u64,
    /// Open connections closed to make room at the total cap (also in
    /// `closed`, under [`Close::Evicted`], once their handler ends).
    pub evicted: u64,
    /// `accept` failures other than timeouts (for example out of descriptors).
    pub accept_errors: u64,
    /// Connections open now.
    pub open: u64,
    /// Of those, connections with a frame started and not yet answered
    /// (the rest are idle: the first to go when the total cap is reached).
    pub busy: u64,
    /// Connections closed, per [`Close`] reason.
    pub closed: [u64; Close::COUNT],
    /// Complete frames received.
    pub requests: u64,
    /// Responses written, per profile id.
    pub responses: [u64; PROFILES.len()],
    /// Signatures made.
    pub signatures: u64,
    /// Requests dropped, per [`Drop`] reason (the UDP reasons).
    pub drops: [u64; Drop::COUNT],
    /// Requests dropped because their version is UDP-only (Google's bare
    /// message has no frame to arrive in, so this stays 0 unless the
    /// profile table changes).
    pub udp_only: u64,
    /// Responses deliberately sent with a broken signature (grease).
    pub greased: u64,
}

impl Default for TcpStats {
    /// Nothing counted: what a summary of the counts since start subtracts.
    fn default() -> Self {
        TcpStats {
            accepted: 0,
            refused: 0,
            refused_per_source: 0,
            refused_per_network: 0,
            evicted: 0,
            accept_errors: 0,
            open: 0,
            busy: 0,
            closed: [0; Close::COUNT],
            requests: 0,
            responses: [0; PROFILES.len()],
            signatures: 0,
            drops: [0; Drop::COUNT],
            udp_only: 0,
            greased: 0,
        }
    }
}

impl TcpStats {
    /// Total responses.
    pub fn total_responses(&self) -> u64 {
        self.responses.iter().sum()
    }

    /// Total requests dropped, for any reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum::<u64>() + self.udp_only
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_labels_are_distinct_and_ordered() {
        for (i, c) in Close::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        let mut labels: Vec<_> = Close::ALL.iter().map(|c| c.label()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), Close::COUNT);
    }
}
