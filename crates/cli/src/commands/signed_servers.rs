//! `--servers-url URL --servers-key KEY [--servers-threshold K]`: the
//! server list of the commands that read one once (`query`, `relay`),
//! taken from monitors' signed lists (`gnomon watch --publish-key`)
//! instead of a local file.
//!
//! ```text
//!  --servers-key ──▶ Pins (k = --servers-threshold)
//!  --servers-url ──▶ gnomon_sync::signed::fetch (GET URL and URL.sig, Pins::check each)
//!                      ├─ refused or not downloaded: said, with its label
//!                      └─ accepted ──▶ Pins::merge ──▶ RFC list bytes, parsed as from a file
//! ```
//!
//! These commands keep no state, so the sequence check has nothing to
//! compare with: a list older than one seen before passes here as long as
//! its signature holds and it has not expired. `sync` and `watch` keep the
//! last sequence per key and refuse a replayed list.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gnomon_protocol::signed_list::{self, LeftOut, Pins, Seen};
use gnomon_sync::refresh::Fetcher;
use gnomon_sync::signed::{self, Fetch, Fetched, NotAccepted};
use serde_json::json;

use super::client_out::Exit;
use crate::words;

/// The flags, flattened into each command that reads a list once.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SignedServers {
    /// A monitor's signed server list (`gnomon watch --publish-key`), its
    /// signature at URL.sig, instead of a local --servers file; repeat it
    /// for each monitor. Plain http:// is allowed: the signature under
    /// --servers-key gives integrity and the expiry freshness. This
    /// command keeps no state, so it checks signature and expiry, not
    /// that the list is newer than one seen before (sync and watch keep
    /// the last sequence per key in their state and refuse a replay).
    #[arg(long, value_name = "URL", requires = "servers_key")]
    pub(crate) servers_url: Vec<String>,
    /// A monitor key whose lists are trusted: the text `ssh-ed25519
    /// AAAA… [comment]`, or a file holding that line (an OpenSSH .pub);
    /// repeat it for each monitor.
    #[arg(long, value_name = "KEY", requires = "servers_url")]
    pub(crate) servers_key: Vec<String>,
    /// How many of the --servers-key monitors must list a server, in a
    /// list that verifies and has not expired, for it to be used (at
    /// most the number of keys).
    #[arg(long, value_name = "K", default_value_t = 1, requires = "servers_url",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) servers_threshold: u16,
}

/// Each download, connect to last byte: a list server must not hold the
/// command longer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The merged list and what each URL gave.
pub(crate) struct Lists {
    /// An RFC server list, parsed by the command as a local file.
    pub(crate) document: Vec<u8>,
    pins: Pins,
    fetched: Vec<Fetched>,
    left_out: Vec<LeftOut>,
}

/// No list to use: the sentence and what each URL gave.
pub(crate) struct Failed {
    message: String,
    pins: Pins,
    fetched: Vec<Fetched>,
}

/// Why there is no list: a usage error (a key that cannot be read, a
/// threshold that cannot be met), or lists that give nothing to use.
pub(crate) enum NoList {
    Usage(String),
    Failed(Failed),
}

impl SignedServers {
    /// Whether the list comes from monitors.
    pub(crate) fn given(&self) -> bool {
        !self.servers_url.is_empty()
    }

    /// Download every list, check each against the pinned keys, and
    /// merge those accepted, k of n.
    pub(crate) fn load(&self) -> Result<Lists, NoList> {
        let pins = signed::pins(&self.servers_key, usize::from(self.servers_threshold))
            .map_err(|e| NoList::Usage(flagged(e)))?
            .ok_or_else(|| NoList::Usage("--servers-url needs --servers-key".into()))?;
        let fetcher = Fetcher::signed(None, FETCH_TIMEOUT).map_err(NoList::Usage)?;
        let fetch = fetch_all(&fetcher, &self.servers_url, &pins, now_unix());
        let threshold = pins.threshold();
        let merged = fetch.merged;
        if merged.monitors < threshold || merged.servers == 0 {
            let message = if merged.monitors < threshold {
                format!(
                    "{}; {} of the {} pinned monitor key(s) gave a list that verifies, and \
                     --servers-threshold is {threshold}",
                    problems(&fetch.lists),
                    merged.monitors,
                    pins.keys().len(),
                )
            } else if threshold > 1 {
                format!(
                    "no server is listed by {threshold} of the monitors (--servers-threshold \
                     {threshold}); lower the threshold, or pin monitors that measure the same \
                     servers"
                )
            } else {
                "the monitors' lists name no server; ask their operators why".to_owned()
            };
            return Err(NoList::Failed(Failed {
                message,
                pins,
                fetched: fetch.lists,
            }));
        }
        Ok(Lists {
            document: merged.document,
            pins,
            fetched: fetch.lists,
            left_out: merged.left_out,
        })
    }
}

/// Every list at `urls`, checked (a pair fetched across a publication is
/// fetched once more by `signed::fetch`).
fn fetch_all(fetcher: &Fetcher, urls: &[String], pins: &Pins, now: i64) -> Fetch {
    // No state: nothing seen before (see the module's comment).
    signed::fetch(fetcher, urls, pins, &Seen::default(), now)
}

/// gnomon-sync's words name its keys (`servers-key …`); here they are
/// flags.
fn flagged(e: String) -> String {
    let e = words::strip_os_error(&e);
    if e.starts_with("servers-") {
        format!("--{e}")
    } else {
        e
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Why the list at `url` is not used, with its label: `URL: refused: …
/// (signature)`, or `cannot download URL: … (status)` (which names the
/// URL that failed, the list's or its signature's).
fn why_not(url: &str, why: &NotAccepted) -> String {
    let words = words::strip_os_error(&why.to_string());
    match why {
        NotAccepted::Fetch { .. } => format!("{words} ({})", why.label()),
        NotAccepted::Refused(_) => format!("{url}: {words} ({})", why.label()),
    }
}

/// Each list that is not used, joined.
fn problems(fetched: &[Fetched]) -> String {
    let said: Vec<String> = fetched
        .iter()
        .filter_map(|f| Some(why_not(&f.url, f.outcome.as_ref().err()?)))
        .collect();
    said.join("; ")
}

/// One object per URL, for `--json`.
fn fetched_json(pins: &Pins, fetched: &[Fetched]) -> serde_json::Value {
    fetched
        .iter()
        .map(|f| match &f.outcome {
            Ok(a) => json!({
                "url": f.url,
                "accepted": true,
                "key": pins.keys().get(a.key).map(signed::key_name),
                "monitor": a.header.monitor,
                "sequence": a.header.sequence,
                "published": signed_list::format_utc(a.header.published_unix),
                "expires": signed_list::format_utc(a.header.expires_unix),
            }),
            Err(why) => json!({
                "url": f.url,
                "accepted": false,
                "reason": why.label(),
                "message": words::strip_os_error(&why.to_string()),
            }),
        })
        .collect()
}

impl Lists {
    /// The `server_lists` member of a command's JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        json!({
            "lists": fetched_json(&self.pins, &self.fetched),
            "threshold": self.pins.threshold(),
            "left_out": self.left_out.iter().map(|l| json!({
                "name": l.name, "listed_by": l.listed_by, "needed": l.needed,
            })).collect::<Vec<_>>(),
        })
    }

    /// One line per list and per server left out, for stderr.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .fetched
            .iter()
            .map(|f| match &f.outcome {
                Ok(a) => format!(
                    "the server list at {}: {}",
                    f.url,
                    signed::fetch::describe_accepted(&self.pins, a)
                ),
                Err(why) => format!("not used: {}; the other lists are", why_not(&f.url, why)),
            })
            .collect();
        for l in &self.left_out {
            out.push(format!(
                "{} is not used: {} of the monitors list it, --servers-threshold is {}",
                l.name, l.listed_by, l.needed
            ));
        }
        out
    }
}

impl NoList {
    /// Say it, on stderr and as the one JSON object under `--json`, and
    /// exit 64, as for a local list that cannot be used: each list's
    /// `reason` in the JSON tells a refusal from a failed download.
    pub(crate) fn report(&self, command: &str, json_out: bool) -> std::process::ExitCode {
        let (message, lists) = match self {
            NoList::Usage(m) => (m.clone(), None),
            NoList::Failed(f) => (
                format!("no server list to use: {}", f.message),
                Some(fetched_json(&f.pins, &f.fetched)),
            ),
        };
        let code = Exit::Usage;
        if json_out {
            let mut out = json!({ "error": { "kind": "usage", "message": message } });
            if let Some(lists) = lists {
                out["error"]["kind"] = json!("server_list");
                out["server_lists"] = json!({ "lists": lists });
            }
            words::print_outcome(out, code.code());
        }
        eprintln!("gnomon {command}: {message}");
        code.into()
    }
}
