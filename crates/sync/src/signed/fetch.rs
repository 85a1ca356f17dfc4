//! Signed server lists fetched by URL and checked against pinned monitor
//! keys: the one fetch every command that takes `--servers-url` with
//! `--servers-key` uses (sync, query, relay, watch).
//!
//! ```text
//!  urls ──▶ fetch (one thread per URL) ──▶ GET url, GET url.sig (Fetcher: timeout, 1 MiB, no redirects)
//!                                              └─▶ Pins::check(list, sig, now, seen) ──▶ Accepted | Refusal
//!        Fetch { lists: per URL Accepted or why not, merged: Pins::merge (k of n) } ◀──┘
//! ```
//!
//! Plain `http://` is allowed here: the signature gives integrity, and the
//! expiry and the sequence (checked against `seen`) give freshness, so a
//! path that tampers, replays or withholds can at worst keep a list from
//! arriving, never make one believed. The download limits are the list
//! refresh's ([`Fetcher`]): a list server must not hold a command past its
//! timeout or make it allocate at will.
//!
//! A command that reads a list once (query, relay) uses it so; one that
//! keeps state (sync, watch) keeps `seen` and records into it:
//!
//! ```no_run
//! use std::time::Duration;
//! use gnomon_protocol::signed_list::Seen;
//! use gnomon_sync::refresh::Fetcher;
//! use gnomon_sync::signed::{self, NotAccepted};
//!
//! # fn main() -> Result<(), String> {
//! let keys = vec!["ssh-ed25519 AAAA… obs-a".to_string(), "/etc/gnomon/obs-b.pub".to_string()];
//! let pins = signed::pins(&keys, 2)?.expect("keys were given");
//! let fetcher = Fetcher::signed(None, Duration::from_secs(30))?;
//! let urls = vec!["http://obs-a.example/servers.json".to_string()];
//! let now = 1_800_000_000; // Unix seconds: the best lower bound on the true time
//! let mut seen = Seen::default(); // or as kept from an earlier run
//! let f = signed::fetch(&fetcher, &urls, &pins, &seen, now);
//! for l in &f.lists {
//!     if let Err(why) = &l.outcome {
//!         // `why.label()` for a counter; the words for the user.
//!         eprintln!("{}: {why} ({})", l.url, why.label());
//!     }
//! }
//! f.record(&pins, &mut seen);
//! // The k-of-n list, as ServerList::parse reads a file (no server when
//! // fewer than the threshold were accepted).
//! let list = gnomon_protocol::ServerList::parse(&f.merged.document).map_err(|e| format!("{e:?}"))?;
//! # let _ = list;
//! # let _: Option<&NotAccepted> = None;
//! # Ok(())
//! # }
//! ```

use std::fmt;

use gnomon_protocol::signed_list::{Accepted, Merged, Pins, Refusal, Seen};

use crate::refresh::{Failure, Fetcher};

/// Where the signature of the list at `url` is: beside it, with `.sig`.
pub fn signature_url(url: &str) -> String {
    format!("{url}.sig")
}

/// Why a URL gave no list that may be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotAccepted {
    /// The list or its signature could not be downloaded.
    Fetch {
        /// The URL that failed: the list's, or its signature's.
        url: String,
        /// How.
        failure: Failure,
    },
    /// Both downloaded, and the list refused (signature, other key,
    /// expired, replayed, reused, malformed).
    Refused(Refusal),
}

impl NotAccepted {
    /// The metrics' label: the refusal's (`signature`, `other_key`,
    /// `expired`, `replayed`, `reused`, `malformed`) or the download
    /// failure's class (`timeout`, `status`, `redirect`, `too_big`, `tls`,
    /// `network`).
    pub fn label(&self) -> &'static str {
        match self {
            NotAccepted::Fetch { failure, .. } => failure.label(),
            NotAccepted::Refused(r) => r.label(),
        }
    }

    /// The refusal, when the list was downloaded and refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            NotAccepted::Refused(r) => Some(r),
            NotAccepted::Fetch { .. } => None,
        }
    }
}

impl fmt::Display for NotAccepted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAccepted::Fetch { url, failure } => write!(f, "cannot download {url}: {failure}"),
            NotAccepted::Refused(r) => write!(f, "refused: {r}"),
        }
    }
}

/// One URL's answer.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The list's URL, as given.
    pub url: String,
    /// The list accepted (its `key` is the index of its signer in
    /// `pins.keys()`), or why not.
    pub outcome: Result<Accepted, NotAccepted>,
}

/// What [`fetch`] found.
#[derive(Clone, Debug)]
pub struct Fetch {
    /// Per URL, in the order given.
    pub lists: Vec<Fetched>,
    /// The k-of-n merge ([`Pins::merge`]) of the lists accepted now (for
    /// each key, the one with the highest sequence when several URLs gave
    /// one by the same key). `merged.servers == 0` and `merged.monitors <
    /// pins.threshold()` when too few were accepted: then no server may be
    /// used. A caller that keeps lists from earlier fetches (sync) merges
    /// those itself ([`newest_per_key`], [`Pins::merge`]).
    pub merged: Merged,
}

impl Fetch {
    /// The accepted lists, one per key (the newest).
    pub fn accepted(&self) -> Vec<Accepted> {
        newest_per_key(self.lists.iter().filter_map(|l| l.outcome.as_ref().ok()))
    }

    /// Record every list accepted in `seen`, so that a later fetch refuses
    /// an older one (sync keeps `seen` in its state directory; a one-shot
    /// command may drop it).
    pub fn record(&self, pins: &Pins, seen: &mut Seen) {
        for a in self.accepted() {
            seen.record(pins, &a);
        }
    }

    /// One line per URL, for a log or a command's output: "URL: N
    /// server(s), sequence S from KEY, expires T" or "URL: why not".
    pub fn lines(&self, pins: &Pins) -> Vec<String> {
        self.lists
            .iter()
            .map(|l| match &l.outcome {
                Ok(a) => format!("{}: {}", l.url, describe_accepted(pins, a)),
                Err(why) => format!("{}: {why}", l.url),
            })
            .collect()
    }
}

/// "sequence S signed by FINGERPRINT (COMMENT), expires T".
pub fn describe_accepted(pins: &Pins, a: &Accepted) -> String {
    let key = pins
        .keys()
        .get(a.key)
        .map_or_else(|| format!("key #{}", a.key + 1), super::key_name);
    format!(
        "sequence {} signed by {key}, published {}, expires {}",
        a.header.sequence,
        gnomon_protocol::signed_list::format_utc(a.header.published_unix),
        gnomon_protocol::signed_list::format_utc(a.header.expires_unix),
    )
}

/// Of `lists`, the one with the highest sequence for each key (the first
/// of equals), in key order.
pub fn newest_per_key<'a>(lists: impl IntoIterator<Item = &'a Accepted>) -> Vec<Accepted> {
    let mut best: Vec<&Accepted> = Vec::new();
    for a in lists {
        match best.iter_mut().find(|b| b.key == a.key) {
            Some(b) if a.header.sequence > b.header.sequence => *b = a,
            Some(_) => {}
            None => best.push(a),
        }
    }
    best.sort_by_key(|a| a.key);
    best.into_iter().cloned().collect()
}

/// Download each of `urls` and its signature (URL + `.sig`) and check them
/// against `pins` at `now_unix` (Unix seconds: the caller's best lower
/// bound on the true time; sync gives the later of its clock and its last
/// consensus), refusing a list older than `seen` has. The URLs are fetched
/// at once, one thread each, so the whole takes one `fetcher` timeout per
/// URL's two downloads, not the sum. `fetcher` should come from
/// [`Fetcher::signed`] (plain HTTP allowed); one from [`Fetcher::new`]
/// refuses `http://` URLs. Nothing is recorded: see [`Fetch::record`].
pub fn fetch(fetcher: &Fetcher, urls: &[String], pins: &Pins, seen: &Seen, now_unix: i64) -> Fetch {
    let lists: Vec<Fetched> = std::thread::scope(|scope| {
        let handles: Vec<_> = urls
            .iter()
            .map(|url| scope.spawn(move || one(fetcher, url, pins, seen, now_unix)))
            .collect();
        handles
            .into_iter()
            .zip(urls)
            .map(|(h, url)| {
                h.join().unwrap_or_else(|_| Fetched {
                    url: url.clone(),
                    outcome: Err(NotAccepted::Fetch {
                        url: url.clone(),
                        failure: Failure::Network("the download thread failed".into()),
                    }),
                })
            })
            .collect()
    });
    let accepted = newest_per_key(lists.iter().filter_map(|l| l.outcome.as_ref().ok()));
    let merged = pins.merge(&accepted, now_unix);
    Fetch { lists, merged }
}

/// The list at `url` and its signature, checked. A monitor publishes
/// after every round, and a list and its signature are two requests, so a
/// pair fetched across a publication is the old list with the new
/// signature: when the signature fails, both are fetched once more. An
/// adversary gains nothing by it, since each pair is checked whole.
fn one(fetcher: &Fetcher, url: &str, pins: &Pins, seen: &Seen, now_unix: i64) -> Fetched {
    let mut outcome = pair(fetcher, url, pins, seen, now_unix);
    if matches!(outcome, Err(NotAccepted::Refused(Refusal::Signature(_)))) {
        outcome = pair(fetcher, url, pins, seen, now_unix);
    }
    Fetched {
        url: url.to_owned(),
        outcome,
    }
}

fn pair(
    fetcher: &Fetcher,
    url: &str,
    pins: &Pins,
    seen: &Seen,
    now_unix: i64,
) -> Result<Accepted, NotAccepted> {
    let failed = |url: String, failure| NotAccepted::Fetch { url, failure };
    let sig_url = signature_url(url);
    let list = fetcher.get(url).map_err(|f| failed(url.to_owned(), f))?;
    let sig = fetcher.get(&sig_url).map_err(|f| failed(sig_url, f))?;
    pins.check(&list, &sig, now_unix, seen)
        .map_err(NotAccepted::Refused)
}
