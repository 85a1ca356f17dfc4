//! Publication (`gnomon watch --publish-key`): after every round, the
//! servers that answered and agree with the consensus, as a signed,
//! expiring RFC server list at `/servers.json`, its SSHSIG signature
//! beside it at `/servers.json.sig` (namespace `roughtime-server-list`,
//! what `ssh-keygen -Y verify` checks).
//!
//! ```text
//!  round ─▶ Latest::apply ─▶ Publisher::after_round
//!     no consensus? ─▶ keep the last list (until its expiry), count, say why
//!     history (store or ring) ─▶ document::build ─▶ sequence::next
//!     ─▶ Signer::sign(sshsig::signed_data) ─▶ verify ─▶ store ─▶ serve
//! ```
//!
//! A failure here (the key gone from its token, the database, a signature
//! that does not verify) is counted, logged once per change and shown on
//! the page; it never stops the probes, and the last good list stays
//! served until its own expiry.

pub mod document;
mod measure;
pub mod sequence;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use base64::Engine as _;
use gnomon_client::Server;
use gnomon_protocol::signed_list::{self, sshsig, MonitorKey, NAMESPACE};

use crate::history::History;
use crate::state::{Shared, Status};
use crate::store::StoredPublication;
use document::{Entry, Excluded, Header};

/// The key that signs the lists: a key file's or a token's. Ed25519.
pub trait Signer: Send + Sync + fmt::Debug {
    /// The public half.
    fn public(&self) -> [u8; 32];
    /// An Ed25519 signature over `data`, or why the key cannot sign now
    /// (in words: which key, and what to do).
    fn sign(&self, data: &[u8]) -> Result<[u8; 64], String>;
}

/// What a publication says of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The monitor's identity (`--publish-name`).
    pub monitor: String,
    /// The key's comment in `observatory.key`.
    pub comment: String,
    /// How long a list is good for (`--publish-expiry`).
    pub expiry: Duration,
    /// What availability and round trips are computed over
    /// (`--publish-window`).
    pub window: Duration,
    /// The public URL of `/servers.json` (`--publish-url`): the list's
    /// `sources`.
    pub url: Option<String>,
    /// Where the reports this process's sink keeps are served (the base
    /// of `/reports/ID.json`), when the sink runs here.
    pub reports_base: Option<String>,
}

/// The outcomes of an attempt, as the `result` label of
/// `gnomon_watch_publications_total`.
pub const RESULTS: [&str; 6] = [
    "ok",
    "no_consensus",
    "key",
    "signing",
    "database",
    "sequence",
];

/// One publication: what is served, and what the page says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    /// The exact bytes of `/servers.json`.
    pub document: Vec<u8>,
    /// `/servers.json.sig`.
    pub signature: Vec<u8>,
    /// Its sequence.
    pub sequence: u64,
    /// Unix s.
    pub published_unix: i64,
    /// Unix s.
    pub expires_unix: i64,
    /// The servers listed.
    pub listed: Vec<String>,
    /// The servers left out, and why.
    pub excluded: Vec<Excluded>,
}

/// The publisher's state, as the page and `/metrics` read it.
#[derive(Clone, Debug, Default)]
pub struct Publishing {
    /// The last good publication (served until its expiry).
    pub latest: Option<Arc<Publication>>,
    /// Attempts by result ([`RESULTS`]).
    pub results: BTreeMap<&'static str, u64>,
    /// The last attempt's failure, when it failed: (result, words).
    pub failing: Option<(&'static str, String)>,
}

/// What the publisher remembers between rounds.
#[derive(Debug, Default)]
struct Memory {
    /// The highest sequence published (or found in the store).
    last_sequence: u64,
    /// Without a sink: when each server's proofs were first seen, by
    /// name (a proof is counted when a server becomes flagged with one).
    proofs: BTreeMap<String, Vec<i64>>,
    accused: Vec<String>,
    /// The failure last logged, so each change is said once.
    said: Option<(&'static str, String)>,
}

struct Inner {
    config: Config,
    signer: Box<dyn Signer>,
    key: MonitorKey,
    state: RwLock<Publishing>,
    memory: Mutex<Memory>,
}

/// Publishes after each round; cheap to clone, shared with the web side.
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<Inner>,
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Publisher({})", self.inner.key.fingerprint())
    }
}

/// A failed attempt: its result label and words.
type Failure = (&'static str, String);

impl Publisher {
    /// A publisher signing with `signer`.
    pub fn new(config: Config, signer: Box<dyn Signer>) -> Publisher {
        let key = MonitorKey::from_ed25519(signer.public(), &config.comment);
        Publisher {
            inner: Arc::new(Inner {
                config,
                signer,
                key,
                state: RwLock::new(Publishing::default()),
                memory: Mutex::new(Memory::default()),
            }),
        }
    }

    /// The monitor key.
    pub fn key(&self) -> &MonitorKey {
        &self.inner.key
    }

    /// What it says of itself.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The state now (the publication is shared, not copied).
    pub fn status(&self) -> Publishing {
        self.inner
            .state
            .read()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// The last publication, while it has not expired at `now_unix`.
    pub fn current(&self, now_unix: i64) -> Option<Arc<Publication>> {
        self.status().latest.filter(|p| p.expires_unix > now_unix)
    }

    fn key_b64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.inner.key.public())
    }

    /// Takes up the last publication under this key from the store: its
    /// sequence is where the next one counts from, and it is served until
    /// its expiry (or the next publication). A store that cannot be read
    /// is counted and said; the sequence then starts from the clock.
    pub fn restore(&self, history: Option<&History>, now_us: i64) {
        let Some(h) = history else { return };
        let key = self.key_b64();
        let found = h.block_on(h.store().last_publication(&key));
        match found {
            Ok(None) => {}
            Ok(Some(p)) => {
                if let Ok(mut m) = self.inner.memory.lock() {
                    m.last_sequence = m.last_sequence.max(p.sequence);
                }
                if p.expires_us > now_us {
                    let publication = restored(&p);
                    tracing::info!(
                        "serving the last list published under {} (sequence {}, expires {}) \
                         until the next round",
                        self.inner.key.fingerprint(),
                        p.sequence,
                        signed_list::format_utc(publication.expires_unix)
                    );
                    if let Ok(mut s) = self.inner.state.write() {
                        s.latest = Some(Arc::new(publication));
                    }
                }
            }
            Err(e) => self.outcome(Err((
                "database",
                format!(
                    "cannot read the last publication's sequence from the database ({e}); \
                     the next counts from the clock"
                ),
            ))),
        }
    }

    /// Publish after a round over `servers` (the input list), whose
    /// results are in `latest`; `reports` is the input list's `reports`
    /// URL.
    pub fn after_round(
        &self,
        servers: &[Server],
        reports: Option<&str>,
        latest: &Shared,
        history: Option<&History>,
        now_us: i64,
    ) {
        let r = self.attempt(servers, reports, latest, history, now_us);
        self.outcome(r.map(|p| {
            if let Ok(mut s) = self.inner.state.write() {
                s.latest = Some(Arc::new(p));
            }
        }));
    }

    fn attempt(
        &self,
        servers: &[Server],
        reports: Option<&str>,
        latest: &Shared,
        history: Option<&History>,
        now_us: i64,
    ) -> Result<Publication, Failure> {
        let config = &self.inner.config;
        let since_us = now_us - i64::try_from(config.window.as_micros()).unwrap_or(i64::MAX);
        let (statuses, rings, consensus, why_none) = {
            let l = latest
                .read()
                .map_err(|_| ("database", "the monitor's state is unreadable".to_string()))?;
            let rings: BTreeMap<String, _> = if history.is_none() {
                l.history
                    .iter()
                    .map(|(k, v)| (k.clone(), measure::from_ring(Some(v), since_us)))
                    .collect()
            } else {
                BTreeMap::new()
            };
            (l.servers.clone(), rings, l.consensus, l.why_none.clone())
        };
        let proofs = self.remember_proofs(&statuses);
        if consensus.is_none() {
            return Err((
                "no_consensus",
                format!(
                    "no consensus in the latest round ({}): nothing new is published, and the \
                     last list stays served until its expiry",
                    why_none.as_deref().unwrap_or("the servers do not agree")
                ),
            ));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut entries = Vec::with_capacity(servers.len());
        for server in servers {
            let status: Option<&Status> = statuses.iter().find(|s| s.name == server.name);
            let mut measured = match history {
                Some(h) => h
                    .block_on(measure::from_store(
                        h.store(),
                        &server.name,
                        &b64.encode(server.public_key.bytes()),
                        since_us,
                        config.reports_base.as_deref(),
                    ))
                    .map_err(|e| {
                        (
                            "database",
                            format!("cannot read {:?}'s history: {e}", server.name),
                        )
                    })?,
                None => rings.get(&server.name).cloned().unwrap_or_default(),
            };
            if config.reports_base.is_none() {
                if let Some(times) = proofs.get(&server.name) {
                    measured.malfeasance = times.iter().map(|&t| (t, None)).collect();
                }
            }
            entries.push(Entry {
                server,
                status,
                measured,
            });
        }
        let last = self.inner.memory.lock().map_or(0, |m| m.last_sequence);
        let sequence = sequence::next(sequence::ms_of_us(now_us), last);
        let published_unix = now_us.div_euclid(1_000_000);
        let header = Header {
            monitor: config.monitor.clone(),
            key: self.inner.key.openssh(),
            sequence,
            published_unix,
            expires_unix: published_unix
                + i64::try_from(config.expiry.as_secs()).unwrap_or(i64::MAX / 2),
            window_from_unix: since_us.div_euclid(1_000_000),
        };
        let sources: Vec<String> = config.url.iter().cloned().collect();
        let built = document::build(&entries, reports, &sources, &header);
        let signature = self.sign(&built.document)?;
        let publication = Publication {
            document: built.document,
            signature: signature.into_bytes(),
            sequence,
            published_unix,
            expires_unix: header.expires_unix,
            listed: built.listed,
            excluded: built.excluded,
        };
        if let Some(h) = history {
            self.save(h, &publication)?;
        }
        if let Ok(mut m) = self.inner.memory.lock() {
            m.last_sequence = m.last_sequence.max(sequence);
        }
        Ok(publication)
    }

    /// The armored signature over `document`, checked before it is
    /// served: a token that signs with another key than it says would
    /// publish a list no client accepts.
    fn sign(&self, document: &[u8]) -> Result<String, Failure> {
        let public = *self.inner.key.public();
        let data = sshsig::signed_data(NAMESPACE, document);
        let sig = self.inner.signer.sign(&data).map_err(|e| ("key", e))?;
        let armored = sshsig::armor(&public, NAMESPACE, &sig);
        sshsig::verify(armored.as_bytes(), document, NAMESPACE, &public).map_err(|e| {
            (
                "signing",
                format!(
                    "the signature made by {} does not verify ({e:?}): the key signs with \
                     another private key than its public half says; nothing was published",
                    self.inner.key.fingerprint()
                ),
            )
        })?;
        Ok(armored)
    }

    fn save(&self, h: &History, p: &Publication) -> Result<(), Failure> {
        let row = StoredPublication {
            monitor_key: self.key_b64(),
            sequence: p.sequence,
            published_us: p.published_unix.saturating_mul(1_000_000),
            expires_us: p.expires_unix.saturating_mul(1_000_000),
            document: String::from_utf8_lossy(&p.document).into_owned(),
            signature: String::from_utf8_lossy(&p.signature).into_owned(),
        };
        match h.block_on(h.store().save_publication(&row)) {
            Ok(true) => Ok(()),
            Ok(false) => Err((
                "sequence",
                format!(
                    "the database already holds a publication under {} with a sequence as high \
                     as {}: another monitor publishes with the same key; give each monitor its own",
                    self.inner.key.fingerprint(),
                    p.sequence
                ),
            )),
            Err(e) => Err((
                "database",
                format!("cannot keep the publication's sequence in the database ({e}); nothing new was published"),
            )),
        }
    }

    /// Counts servers' proofs as they become flagged with one.
    fn remember_proofs(&self, statuses: &[Status]) -> BTreeMap<String, Vec<i64>> {
        let Ok(mut m) = self.inner.memory.lock() else {
            return BTreeMap::new();
        };
        for s in statuses {
            if s.report.is_some() && !m.accused.contains(&s.name) {
                let times = m.proofs.entry(s.name.clone()).or_default();
                times.push(s.checked_at_us);
                let over = times.len().saturating_sub(measure::MAX_PROOFS as usize);
                times.drain(..over);
            }
        }
        m.accused = statuses
            .iter()
            .filter(|s| s.flagged.is_some())
            .map(|s| s.name.clone())
            .collect();
        m.proofs.clone()
    }

    /// Counts an attempt and says a change of outcome once.
    fn outcome(&self, r: Result<(), Failure>) {
        let label = match &r {
            Ok(()) => "ok",
            Err((l, _)) => l,
        };
        if let Ok(mut s) = self.inner.state.write() {
            *s.results.entry(label).or_default() += 1;
            s.failing = r.as_ref().err().cloned();
        }
        let Ok(mut m) = self.inner.memory.lock() else {
            return;
        };
        let now = r.err();
        if now == m.said {
            return;
        }
        match &now {
            Some((_, why)) => tracing::warn!("publication: {why}"),
            None => tracing::info!(
                "published the server list under {} (sequence {})",
                self.inner.key.fingerprint(),
                m.last_sequence
            ),
        }
        m.said = now;
    }
}

/// A stored publication as served: what it lists and excludes read back
/// from its own document.
fn restored(p: &StoredPublication) -> Publication {
    let doc: serde_json::Value = serde_json::from_str(&p.document).unwrap_or_default();
    let listed = doc["servers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let excluded = doc["observatory"]["excluded"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| {
                    Some(Excluded {
                        name: e["name"].as_str()?.to_string(),
                        public_key: e["publicKey"].as_str().unwrap_or("").to_string(),
                        reason: document::reason_label(e["reason"].as_str()?),
                        detail: e["detail"].as_str().unwrap_or("").to_string(),
                        report: e["report"].as_str().map(str::to_string),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Publication {
        document: p.document.clone().into_bytes(),
        signature: p.signature.clone().into_bytes(),
        sequence: p.sequence,
        published_unix: p.published_us.div_euclid(1_000_000),
        expires_unix: p.expires_us.div_euclid(1_000_000),
        listed,
        excluded,
    }
}

#[cfg(test)]
mod tests;
