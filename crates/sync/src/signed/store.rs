//! What sync keeps of the signed lists in its state directory, under
//! `sync-signed/`:
//!
//! - `KEY.json` and `KEY.json.sig` (KEY: the monitor key in hex): that
//!   monitor's last accepted document and signature, byte for byte, and
//!   `KEY.meta.json`: the URL it came from and when;
//! - `seen.json`: the last sequence and SHA-256 per key
//!   (gnomon_protocol::signed_list::Seen), so that a list older than one
//!   accepted before is refused after a restart too;
//! - `status.json`: what `--status` prints ([`Status`]), written after
//!   every fetch.
//!
//! Each list is written before `seen.json`: a crash between the two
//! leaves a list newer than the record, which the next start records. A
//! list read back is checked again (signature under its pinned key,
//! header, and against `seen.json`), so a file changed in the directory is
//! refused like one changed on the way. Nothing is read from a directory
//! that fails [`Store::trust`].

use std::io;

use gnomon_protocol::signed_list::Seen;
use serde::{Deserialize, Serialize};

use super::key_name;
use super::monitors::{Kept, Monitors, Standing};
// The status is plain data in counts, where the metrics read it too.
use crate::counts::SignedLists;
pub use crate::counts::{MonitorStatus, SignedStatus as Status};
use crate::state::Store;

/// The directory of the signed lists, in the state directory.
pub const SIGNED_DIR: &str = "sync-signed";
/// The sequences seen.
pub const SEEN_FILE: &str = "sync-signed/seen.json";
/// What `--status` reads.
pub const STATUS_FILE: &str = "sync-signed/status.json";

const STATUS_FORMAT: u32 = 1;

/// `sync-signed/KEY` for key `public`, without its extension.
fn base(public: &[u8; 32]) -> String {
    let hex: String = public.iter().map(|b| format!("{b:02x}")).collect();
    format!("{SIGNED_DIR}/{hex}")
}

#[derive(Serialize, Deserialize)]
struct Meta {
    url: String,
    fetched_unix: i64,
}

/// Save `kept`, a list of `monitors`, then the sequences seen.
pub fn save_list(store: &Store, monitors: &Monitors, kept: &Kept) -> io::Result<()> {
    let Some(key) = monitors.pins().keys().get(kept.list.key) else {
        return Ok(());
    };
    let b = base(key.public());
    let meta = serde_json::to_vec_pretty(&Meta {
        url: kept.url.clone(),
        fetched_unix: kept.fetched_unix,
    })
    .map_err(io::Error::other)?;
    store.write(&format!("{b}.json"), &kept.list.document)?;
    store.write(&format!("{b}.json.sig"), &kept.list.signature)?;
    store.write(&format!("{b}.meta.json"), &meta)?;
    save_seen(store, monitors.seen())
}

/// Save the sequences seen.
pub fn save_seen(store: &Store, seen: &Seen) -> io::Result<()> {
    let mut text = seen.to_json().into_bytes();
    text.push(b'\n');
    store.write(SEEN_FILE, &text).map(drop)
}

/// Put back into `monitors` what the state directory kept, when it is
/// `trusted`: the sequences seen, then each pinned key's list, checked
/// again. The notes say what was restored and what was not, and why.
pub fn restore(store: &Store, monitors: &mut Monitors, trusted: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let dir = store.path(SIGNED_DIR);
    if !trusted {
        if dir.exists() {
            notes.push(format!(
                "the signed lists kept in {} are not used: the state directory is not trusted \
                 (see the warning); every list is fetched again, and a replayed one is refused \
                 only once one is seen",
                dir.display()
            ));
        }
        return notes;
    }
    match store.read_trusted(SEEN_FILE) {
        Ok(bytes) => match Seen::from_json(&String::from_utf8_lossy(&bytes)) {
            Ok(seen) => monitors.restore_seen(seen),
            Err(e) => notes.push(format!(
                "{}: {e}; the sequences seen start again from the lists kept",
                store.path(SEEN_FILE).display()
            )),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => notes.push(format!(
            "{}: {e}; the sequences seen start again from the lists kept",
            store.path(SEEN_FILE).display()
        )),
    }
    let keys = monitors.pins().keys().to_vec();
    for key in &keys {
        let b = base(key.public());
        let doc = match store.read_trusted(&format!("{b}.json")) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                notes.push(format!("the list kept for {}: {e}", key_name(key)));
                continue;
            }
        };
        let sig = store.read_trusted(&format!("{b}.json.sig"));
        let meta = store
            .read_trusted(&format!("{b}.meta.json"))
            .ok()
            .and_then(|m| serde_json::from_slice::<Meta>(&m).ok());
        let checked = sig
            .map_err(|e| format!("its signature: {e}"))
            .and_then(|sig| {
                // Everything but the expiry (checked at the beginning of
                // time): whether it is still in force is judged whenever
                // the lists are merged, and an expired one shows as such.
                monitors
                    .pins()
                    .check(&doc, &sig, i64::MIN, monitors.seen())
                    .map_err(|r| r.to_string())
            });
        match checked {
            Ok(list) if monitors.pins().keys()[list.key] == *key => {
                notes.push(format!(
                    "the list kept for {} (sequence {}, expires {}) is used until a newer one is \
                     fetched",
                    key_name(key),
                    list.header.sequence,
                    gnomon_protocol::signed_list::format_utc(list.header.expires_unix)
                ));
                let (url, fetched_unix) =
                    meta.map_or((String::new(), 0), |m| (m.url, m.fetched_unix));
                monitors.restore(Kept {
                    list,
                    url,
                    fetched_unix,
                });
            }
            Ok(_) => notes.push(format!(
                "the list kept for {} is signed by another pinned key: not used",
                key_name(key)
            )),
            Err(why) => notes.push(format!(
                "the list kept for {} in {} is not used: {why}",
                key_name(key),
                store.path(&format!("{b}.json")).display()
            )),
        }
    }
    notes
}

impl Status {
    /// The status of `monitors` at `now_unix`, judged by `judged_by`, with
    /// the service's `counts`.
    pub fn of(monitors: &Monitors, now_unix: i64, judged_by: &str, counts: &SignedLists) -> Status {
        let merged = monitors.merged(now_unix);
        let list = monitors
            .pins()
            .keys()
            .iter()
            .zip(monitors.slots())
            .enumerate()
            .map(|(i, (key, slot))| {
                let k = slot.kept.as_ref();
                MonitorStatus {
                    fingerprint: key.fingerprint(),
                    comment: key.comment().to_string(),
                    standing: monitors.standing(i, now_unix).label().to_string(),
                    sequence: k.map(|k| k.list.header.sequence),
                    monitor: k.map(|k| k.list.header.monitor.clone()),
                    published_unix: k.map(|k| k.list.header.published_unix),
                    expires_unix: k.map(|k| k.list.header.expires_unix),
                    fetched_unix: k.map(|k| k.fetched_unix).filter(|&t| t > 0),
                    url: k.map(|k| k.url.clone()).filter(|u| !u.is_empty()),
                    failure: slot.failure.clone(),
                }
            })
            .collect();
        Status {
            format: STATUS_FORMAT,
            written_unix: now_unix,
            judged_by: judged_by.to_string(),
            threshold: monitors.pins().threshold(),
            in_force: merged.monitors,
            servers: merged.servers,
            no_servers: monitors.shortfall(now_unix),
            monitors: list,
            refusals: counts
                .refusals()
                .into_iter()
                .map(|(l, n)| (l.to_string(), n))
                .collect(),
            failures: counts
                .failures()
                .into_iter()
                .map(|(l, n)| (l.to_string(), n))
                .collect(),
        }
    }

    /// Each monitor's standing again at `now_unix` (a list in force when
    /// the status was written may have expired since), and with it the
    /// lists in force and whether they still give servers.
    pub fn at(mut self, now_unix: i64) -> Status {
        let mut expired = Vec::new();
        for m in &mut self.monitors {
            let was = m.standing != Standing::Expired.label() && m.standing != "none";
            if m.expires_unix.is_some_and(|e| now_unix >= e) {
                m.standing = Standing::Expired.label().to_string();
                if was {
                    expired.push(format!("{} ({})", m.fingerprint, m.comment));
                }
            }
        }
        if !expired.is_empty() {
            self.in_force = self.in_force.saturating_sub(expired.len());
            if self.in_force < self.threshold && self.servers > 0 {
                self.servers = 0;
                self.no_servers = Some(format!(
                    "no servers from the signed lists: since the service wrote this, the list of \
                     {} expired, leaving {} in force, fewer than servers-threshold {}",
                    expired.join(", "),
                    self.in_force,
                    self.threshold
                ));
            }
        }
        self
    }
}

/// Write `status`.
pub fn write_status(store: &Store, status: &Status) -> io::Result<()> {
    let mut text = serde_json::to_vec_pretty(status).map_err(io::Error::other)?;
    text.push(b'\n');
    store.write(STATUS_FILE, &text).map(drop)
}

/// The status last written; `Ok(None)` when there is none.
pub fn read_status(store: &Store) -> Result<Option<Status>, String> {
    let path = store.path(STATUS_FILE);
    match store.read(STATUS_FILE) {
        Ok(bytes) => serde_json::from_slice::<Status>(&bytes)
            .map(Some)
            .map_err(|e| format!("{} is not a status gnomon sync wrote: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}
