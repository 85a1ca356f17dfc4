//! The blocking query and OS randomness: what needs `std`.
#![forbid(unsafe_code)]

extern crate std;

use std::string::ToString as _;
use std::time::Duration;

use gnomon_client::{Client, Config, Entropy, OsEntropy, QueryError, Rejection, Server};
use gnomon_protocol::scheme::PublicKey;
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::Verified;

use crate::error::{of_verify, GnomonError};
use crate::logic::{profile_for, REQUEST_SIZE};
use crate::message::{text, write_message, MESSAGE_LEN};

/// Longest timeout accepted: a day is long past any use.
pub const MAX_TIMEOUT_MS: u32 = 86_400_000;

/// Build a request with a nonce from `entropy`.
pub fn build_random(
    version: u32,
    key: Option<PublicKey<'_>>,
    out: &mut [u8],
    entropy: &mut dyn Entropy,
) -> Result<usize, GnomonError> {
    let profile = profile_for(version)?;
    if out.len() < REQUEST_SIZE {
        return Err(GnomonError::GnomonErrBufferTooSmall);
    }
    let mut nonce = [0u8; gnomon_protocol::chain::MAX_NONCE_LEN];
    let nonce = &mut nonce[..profile.nonce_len];
    entropy
        .fill(nonce)
        .map_err(|_| GnomonError::GnomonErrLocal)?;
    crate::logic::build(version, nonce, key, out)
}

/// [`build_random`] from the operating system.
pub fn build_os_random(
    version: u32,
    key: Option<PublicKey<'_>>,
    out: &mut [u8],
) -> Result<usize, GnomonError> {
    build_random(version, key, out, &mut OsEntropy)
}

/// Ask `address` (HOST:PORT) once, verified against `key` (of either
/// scheme: the client offers the versions of the key's scheme), in
/// `version` (0: the newest the server speaks), giving up after
/// `timeout_ms`.
pub fn query(
    address: &str,
    key: PublicKey<'_>,
    version: u32,
    timeout_ms: u32,
    entropy: impl Entropy + Send + 'static,
    message: &mut [u8; MESSAGE_LEN],
) -> Result<Verified, GnomonError> {
    let fail =
        |code: GnomonError, message: &mut [u8; MESSAGE_LEN], why: &dyn core::fmt::Display| {
            write_message(message, format_args!("{why}"));
            code
        };
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        let why = "the timeout must be 1 ms to 1 day";
        return Err(fail(GnomonError::GnomonErrArgument, message, &why));
    }
    let mut server =
        Server::at(address, key).map_err(|e| fail(GnomonError::GnomonErrAddress, message, &e))?;
    if version != 0 {
        server = server.with_version(profile_for(version)?);
    }
    let config = Config {
        deadline: Some(Duration::from_millis(u64::from(timeout_ms))),
        ..Config::default()
    };
    let mut client = Client::with_entropy(config, entropy);
    client
        .query(&server)
        .map(|answer| answer.verified)
        .map_err(|e| failure(&e, message))
}

/// The code of a failed query, with its sentence in `message`. Written
/// here rather than taken from the client's `Display`: that one advises
/// on options a C caller does not have (version fallback), and tells a
/// closed port from silence less sharply than the codes do.
pub fn failure(e: &QueryError, message: &mut [u8; MESSAGE_LEN]) -> GnomonError {
    match e {
        QueryError::Resolve { host, reason } => {
            write_message(message, format_args!("cannot resolve {host}: {reason}"));
            GnomonError::GnomonErrAddress
        }
        // Refused over UDP, and over TCP too where TCP was tried: nothing
        // listens. UDP silent and TCP refused is a server that serves UDP
        // only and dropped the request, which is silence.
        QueryError::NoAnswer {
            udp_refused: true,
            tcp_refused,
            tcp_tried,
            ..
        } if *tcp_refused || *tcp_tried == 0 => {
            let tcp = if *tcp_tried > 0 {
                ", TCP connection refused"
            } else {
                ""
            };
            write_message(
                message,
                format_args!(
                    "the port is closed (ICMP port unreachable{tcp}): nothing listens there"
                ),
            );
            GnomonError::GnomonErrRefused
        }
        QueryError::NoAnswer {
            udp_sent,
            tcp_tried,
            offered,
            elapsed,
            ..
        } => {
            write_message(
                message,
                format_args!(
                    "no answer in {:.1} s ({udp_sent} UDP request(s), {tcp_tried} TCP attempt(s); \
                     offered {}); servers drop requests for keys they do not hold",
                    elapsed.as_secs_f64(),
                    Joined(offered)
                ),
            );
            GnomonError::GnomonErrTimeout
        }
        QueryError::Invalid {
            rejection,
            transport,
            peer,
            offered,
        } => {
            let code = match rejection {
                Rejection::Verify(v) => of_verify(v),
                // A TCP stream cut inside a response, or a frame longer
                // than any response: malformed.
                _ => GnomonError::GnomonErrMalformed,
            };
            let over = match transport {
                Transport::Udp => "UDP",
                Transport::Tcp => "TCP",
            };
            write_message(
                message,
                format_args!(
                    "invalid answer from {peer} over {over}: {rejection} ({offered} request)"
                ),
            );
            code
        }
        QueryError::Local(why) => {
            write_message(message, format_args!("local failure: {why}"));
            GnomonError::GnomonErrLocal
        }
        other => {
            let why = other.to_string();
            let why = if why.is_empty() {
                text(GnomonError::GnomonErrLocal)
            } else {
                &why
            };
            write_message(message, format_args!("{why}"));
            GnomonError::GnomonErrLocal
        }
    }
}

/// Names separated by commas.
struct Joined<'a>(&'a [&'static str]);

impl core::fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// The default entropy of [`query`].
pub fn os_entropy() -> OsEntropy {
    OsEntropy
}
