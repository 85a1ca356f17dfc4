//! Every check of one server in one round, made with the client's own
//! discovery, transports and verification.

use std::time::{SystemTime, UNIX_EPOCH};

use gnomon_client::{Answer, Backoff, Client, Config, QueryError, Server, TcpMode, Versions};
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::ProfileSet;

use super::{burst, Settings};
use crate::state::{Family, Status};

/// Unix µs now.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

fn client(settings: &Settings, tcp: TcpMode, attempts: u32) -> Client {
    Client::new(Config {
        backoff: Backoff {
            initial: settings.timeout,
            factor: 1.5,
            max: settings.timeout * 4,
            attempts,
        },
        fallback_attempts: 1,
        tcp,
        deadline: Some(settings.timeout * 8),
        ..Config::default()
    })
}

/// The metric label and the words for a failed query.
pub(crate) fn failure(e: &QueryError) -> (&'static str, String) {
    let label = match e {
        QueryError::NoAnswer { refused: true, .. } => "refused",
        QueryError::NoAnswer { .. } => "silent",
        QueryError::Invalid { .. } => "invalid",
        QueryError::Resolve { .. } => "resolve",
        _ => "local",
    };
    (label, e.to_string())
}

/// Probe `server` once: the answer used for the consensus (if any) and
/// the status without the consensus fields.
pub(crate) fn probe(server: &Server, settings: &Settings) -> (Option<Answer>, Status) {
    let mut s = Status {
        name: server.name.clone(),
        address: server
            .describe_address(Transport::Udp)
            .or_else(|| server.describe_address(Transport::Tcp))
            .unwrap_or_default(),
        checked_at_us: now_us(),
        public_key: server.public_key.bytes().to_vec(),
        ..Status::default()
    };
    let main = client(settings, TcpMode::Fallback, 2).query(server);
    let answer = match main {
        Ok(a) => a,
        Err(e) => {
            let (label, words) = failure(&e);
            s.failure = Some(label.to_string());
            s.error = Some(words);
            s.udp = Some(false);
            if let QueryError::Invalid { transport, .. } = &e {
                // Something came back: the transport is reachable, the
                // answers are not valid.
                s.udp = Some(*transport == Transport::Udp);
            }
            s.families = families(server, settings, None);
            return (None, s);
        }
    };
    let v = &answer.verified;
    s.up = true;
    s.version = Some(v.profile.name.to_string());
    s.rtt_us = Some(answer.rtt.as_micros() as u64);
    s.radius_us = Some(v.radius_us);
    s.offset_local_us = Some(answer.offset_us as i64);
    s.cert_mint_us = Some(v.mint_us);
    s.cert_maxt_us = Some(v.maxt_us);
    s.days_to_expiry = (v.maxt_us != u64::MAX)
        .then(|| (v.maxt_us as f64 - answer.local_midpoint_us as f64) / 86_400e6);
    s.legacy_context = v.legacy_context;
    s.request_len = Some(answer.request.len());
    s.response_len = Some(answer.response.len());
    s.raw_request = Some(answer.request.clone());
    s.raw_response = Some(answer.response.clone());

    let pinned = Server {
        versions: Versions::Offer(answer.offer),
        ..server.clone()
    };
    let has_tcp = server
        .addresses
        .iter()
        .any(|a| a.transport == Transport::Tcp);
    match answer.transport {
        Transport::Udp => {
            s.udp = Some(true);
            if has_tcp && v.profile.tcp {
                s.tcp = Some(client(settings, TcpMode::Only, 1).query(&pinned).is_ok());
            }
        }
        Transport::Tcp => {
            s.tcp = Some(true);
            // A version that never goes over UDP (ML-DSA-44: its answer
            // is far larger than any request) was not asked there.
            s.udp = v.profile.udp.then_some(false);
        }
    }
    if s.udp == Some(true) {
        s.batch = burst::burst(
            answer.peer,
            server.public_key.as_public(),
            &answer.offer,
            answer.request.len(),
            settings.burst,
            settings.timeout * 2,
        )
        .ok();
    }
    s.families = families(server, settings, Some(&answer));
    let mut answered: Vec<String> = s
        .families
        .iter()
        .filter_map(|f| f.answered.clone())
        .collect();
    answered.push(v.profile.name.to_string());
    answered.sort();
    answered.dedup();
    s.versions_answered = answered;
    (Some(answer), s)
}

/// Each family the server may speak, offered alone over UDP (the one the
/// main query answered is taken from it).
fn families(server: &Server, settings: &Settings, main: Option<&Answer>) -> Vec<Family> {
    let set = match server.versions {
        Versions::Discover(set) => set,
        Versions::Offer(o) => o
            .versions()
            .iter()
            .filter_map(|v| gnomon_protocol::Profile::for_wire(*v, o.has_type()))
            .fold(ProfileSet::empty(), |s, p| s.with(p.id)),
    };
    let mut out = Vec::new();
    for offer in gnomon_client::discovery::families(set) {
        let offered = offer.primary().name.to_string();
        if let Some(a) = main.filter(|a| same_offer(&a.offer, &offer)) {
            out.push(Family {
                offered,
                answered: Some(a.verified.profile.name.to_string()),
                error: None,
            });
            continue;
        }
        let pinned = Server {
            versions: Versions::Offer(offer),
            ..server.clone()
        };
        let r = client(settings, TcpMode::Never, 1).query(&pinned);
        out.push(match r {
            Ok(a) => Family {
                offered,
                answered: Some(a.verified.profile.name.to_string()),
                error: None,
            },
            Err(e) => Family {
                offered,
                answered: None,
                error: Some(failure(&e).1),
            },
        });
    }
    out
}

fn same_offer(a: &gnomon_protocol::Offer, b: &gnomon_protocol::Offer) -> bool {
    a.primary().id == b.primary().id && a.has_type() == b.has_type() && a.versions() == b.versions()
}
