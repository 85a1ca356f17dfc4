//! Batched-path correctness: requests with distinct nonces sent together
//! from one socket, so that a batching server answers them from one Merkle
//! tree and each response carries a real PATH. Every response is checked
//! by the protocol crate's `verify_response`, which proves the path and
//! says which orientation it verified in.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use gnomon_protocol::chain::MAX_NONCE_LEN;
use gnomon_protocol::merkle::Orientation;
use gnomon_protocol::request::srv_for;
use gnomon_protocol::{verify_response, Offer, VerifyError};

use crate::state::Batch;

/// Largest datagram read (a response is never larger than its request).
const MAX_DATAGRAM: usize = 65_536;

/// Send `count` requests in `offer`'s format to `peer` at once and verify
/// what comes back within `wait`.
pub(crate) fn burst(
    peer: SocketAddr,
    key: gnomon_protocol::PublicKey<'_>,
    offer: &Offer,
    request_size: usize,
    count: usize,
    wait: Duration,
) -> std::io::Result<Batch> {
    let local: SocketAddr = if peer.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let socket = UdpSocket::bind(local)?;
    socket.connect(peer)?;
    let srv = srv_for(key.bytes());
    let p = offer.primary();
    let mut pending: Vec<Vec<u8>> = Vec::with_capacity(count);
    for _ in 0..count {
        let mut nonce = [0u8; MAX_NONCE_LEN];
        getrandom::getrandom(&mut nonce[..p.nonce_len])
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut request = vec![0u8; request_size];
        let len = offer
            .build(
                &nonce[..p.nonce_len],
                Some(&srv),
                request_size,
                &mut request,
            )
            .map_err(|e| std::io::Error::other(format!("cannot build a request: {e:?}")))?;
        request.truncate(len);
        pending.push(request);
    }
    // All sent before any is read: the server's socket holds them together.
    for r in &pending {
        socket.send(r)?;
    }
    let mut batch = Batch {
        sent: count,
        answered: 0,
        verified: 0,
        max_depth: 0,
        orientations: Vec::new(),
        error: None,
    };
    let until = Instant::now() + wait;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !pending.is_empty() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        socket.set_read_timeout(Some(left))?;
        let n = match socket.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            // An ICMP error for one datagram: keep reading the others.
            Err(_) => continue,
        };
        batch.answered += 1;
        let response = &buf[..n];
        // The request this answers is the one whose nonce it echoes (or,
        // for versions that do not echo it, whose leaf the path proves):
        // every other request fails on the nonce or the root.
        let mut mismatch = None;
        let mut matched = None;
        for (i, request) in pending.iter().enumerate() {
            match verify_response(request, response, key) {
                Ok(v) => {
                    matched = Some((i, v));
                    break;
                }
                Err(VerifyError::NonceMismatch | VerifyError::Root) => {}
                Err(e) => mismatch = mismatch.or(Some(e)),
            }
        }
        match matched {
            Some((i, v)) => {
                pending.swap_remove(i);
                batch.verified += 1;
                batch.max_depth = batch.max_depth.max(v.path_depth);
                let o = orientation_name(v.orientation);
                if !batch.orientations.iter().any(|x| x == o) {
                    batch.orientations.push(o.to_string());
                }
            }
            None if batch.error.is_none() => {
                let e = mismatch.unwrap_or(VerifyError::Root);
                batch.error = Some(gnomon_client::describe_verify_error(&e));
            }
            None => {}
        }
    }
    if batch.error.is_none() && batch.verified < batch.sent {
        batch.error = Some(format!(
            "{} of {} requests sent together got no valid answer",
            batch.sent - batch.verified,
            batch.sent
        ));
    }
    Ok(batch)
}

fn orientation_name(o: Orientation) -> &'static str {
    match o {
        Orientation::HashFirst => "hash-first",
        Orientation::NodeFirst => "node-first",
    }
}
