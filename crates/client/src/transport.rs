//! One request over UDP (with retransmissions) or over TCP.
//!
//! Timing is conservative: a retransmitted request is identical to the
//! first, so an answer cannot be matched to one transmission; the round
//! trip is measured from the first, which widens the uncertainty instead of
//! hiding it.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use gnomon_protocol::wire::{self, PACKET_HEADER};
use gnomon_protocol::{verify_response, PublicKey, Verified};

use crate::error::Rejection;

/// Largest response read. A UDP response is never larger than its request
/// (about 1 KiB); a TCP one may be: an ML-DSA-44 answer is 6408 bytes plus
/// 32 per Merkle path level, well inside this bound.
const MAX_RESPONSE: usize = 65_536;

/// A verified answer and when it came.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) response: Vec<u8>,
    pub(crate) verified: Verified,
    /// The first transmission, on the monotonic clock: the caller turns it
    /// into wall time from its one wall-clock reading.
    pub(crate) sent_at: Instant,
    /// From the first transmission to the answer.
    pub(crate) rtt: Duration,
    /// Transmissions of the request.
    pub(crate) sends: u32,
}

#[derive(Debug)]
pub(crate) enum Outcome {
    Answered(Received),
    /// A TCP answer failed verification (a TCP peer cannot be spoofed
    /// off-path, so its answer is the server's).
    Rejected(Rejection),
    /// No valid answer came back; `sends` transmissions were made, and
    /// `rejected` says why the last invalid datagram, if any, was refused.
    Silent {
        sends: u32,
        rejected: Option<Rejection>,
    },
    /// ICMP port unreachable after every UDP attempt (`sends` made), or
    /// connection refused (TCP).
    Refused {
        sends: u32,
    },
    /// A local socket error (no route, no socket).
    Failed(std::io::Error),
}

/// Send `request` to `peer` with one timeout per attempt, verifying every
/// datagram that comes back against `key`. An invalid datagram ends neither
/// the attempt nor the schedule: anyone who can guess the port can send one,
/// so it must not stop the real answer or the retransmission that gets it.
pub(crate) fn udp(
    peer: SocketAddr,
    request: &[u8],
    key: PublicKey<'_>,
    timeouts: &[Duration],
    deadline: Option<Instant>,
    before_send: &mut dyn FnMut(bool),
) -> Outcome {
    let local: SocketAddr = if peer.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = match UdpSocket::bind(local).and_then(|s| s.connect(peer).map(|()| s)) {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(e),
    };
    let mut buf = vec![0u8; MAX_RESPONSE];
    let mut first: Option<Instant> = None;
    let mut rejected = None;
    let mut sends = 0;
    // An ICMP "port unreachable" ends the attempt, not the schedule: the
    // next one goes out at once, so a closed port is still reported in
    // milliseconds, while one forged ICMP error (anyone who guesses the
    // port can send it) cannot keep the real answer from being read.
    let (mut attempts, mut refused) = (0, 0);
    for timeout in timeouts {
        let now = Instant::now();
        let mut until = now + *timeout;
        if let Some(d) = deadline {
            if now >= d {
                break;
            }
            until = until.min(d);
        }
        // Told whether every attempt so far was refused, so a caller that
        // reports progress says "refused" rather than "no answer yet".
        before_send(attempts > 0 && refused == attempts);
        attempts += 1;
        match socket.send(request) {
            Ok(_) => {}
            // A refusal still pending from the last attempt; it is cleared.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                refused += 1;
                continue;
            }
            Err(e) => return Outcome::Failed(e),
        }
        sends += 1;
        let t0 = *first.get_or_insert(now);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || socket.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match socket.recv(&mut buf) {
                Ok(len) => {
                    let rtt = t0.elapsed();
                    match verify_response(request, &buf[..len], key) {
                        Ok(verified) => {
                            return Outcome::Answered(Received {
                                response: buf[..len].to_vec(),
                                verified,
                                sent_at: t0,
                                rtt,
                                sends,
                            })
                        }
                        Err(e) => rejected = Some(Rejection::Verify(e)),
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    refused += 1;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Outcome::Failed(e),
            }
        }
    }
    if refused > 0 && refused == attempts {
        return Outcome::Refused { sends };
    }
    Outcome::Silent { sends, rejected }
}

/// One request over a fresh TCP connection, framed as the drafts define.
pub(crate) fn tcp(
    peer: SocketAddr,
    request: &[u8],
    key: PublicKey<'_>,
    timeout: Duration,
    deadline: Option<Instant>,
) -> Outcome {
    let start = Instant::now();
    let until = deadline.map_or(start + timeout, |d| d.min(start + timeout));
    let left = |now: Instant| until.saturating_duration_since(now);
    if left(start).is_zero() {
        return Outcome::Silent {
            sends: 0,
            rejected: None,
        };
    }
    let mut stream = match TcpStream::connect_timeout(&peer, left(start)) {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Outcome::Refused { sends: 0 },
        Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
            return Outcome::Silent {
                sends: 0,
                rejected: None,
            }
        }
        Err(e) => return Outcome::Failed(e),
    };
    let _ = stream.set_nodelay(true);
    let t0 = Instant::now();
    if stream
        .set_write_timeout(Some(left(t0).max(Duration::from_millis(1))))
        .is_err()
        || stream.write_all(request).is_err()
    {
        return Outcome::Silent {
            sends: 1,
            rejected: None,
        };
    }
    let mut frame = Vec::with_capacity(1024);
    let mut want = PACKET_HEADER;
    let mut chunk = [0u8; 4096];
    while frame.len() < want {
        let l = left(Instant::now());
        if l.is_zero() || stream.set_read_timeout(Some(l)).is_err() {
            return Outcome::Silent {
                sends: 1,
                rejected: None,
            };
        }
        let cap = (want - frame.len()).min(chunk.len());
        match stream.read(&mut chunk[..cap]) {
            Ok(0) if frame.is_empty() => {
                return Outcome::Silent {
                    sends: 1,
                    rejected: None,
                }
            }
            Ok(0) => {
                let announced = if want > PACKET_HEADER { want } else { 0 };
                return Outcome::Rejected(Rejection::TcpClosed {
                    got: frame.len(),
                    want: announced,
                });
            }
            Ok(n) => frame.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Outcome::Silent {
                    sends: 1,
                    rejected: None,
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset && !frame.is_empty() => {
                return Outcome::Rejected(Rejection::TcpClosed {
                    got: frame.len(),
                    want: if want > PACKET_HEADER { want } else { 0 },
                })
            }
            Err(e) => return Outcome::Failed(e),
        }
        if want == PACKET_HEADER && frame.len() == PACKET_HEADER {
            if !wire::has_magic(&frame) {
                return Outcome::Rejected(Rejection::Verify(
                    gnomon_protocol::VerifyError::Framing(gnomon_protocol::WireError::NoMagic),
                ));
            }
            let len = u32::from_le_bytes([frame[8], frame[9], frame[10], frame[11]]) as usize;
            if len > MAX_RESPONSE {
                return Outcome::Rejected(Rejection::TcpTooLong(len));
            }
            want = PACKET_HEADER + len;
        }
    }
    let rtt = t0.elapsed();
    match verify_response(request, &frame, key) {
        Ok(verified) => Outcome::Answered(Received {
            response: frame,
            verified,
            sent_at: t0,
            rtt,
            sends: 1,
        }),
        Err(e) => Outcome::Rejected(Rejection::Verify(e)),
    }
}
