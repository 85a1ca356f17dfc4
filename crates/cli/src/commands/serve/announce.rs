//! What `serve` says it serves: each identity's public key on stdout (the
//! line to publish), and on the log which scheme each identity signs with,
//! where it came from, and over which transports it answers. An identity
//! of a scheme whose responses never fit a datagram (ML-DSA-44, TCP only)
//! is not announced on UDP, and a UDP socket no identity answers on says so.

use std::net::SocketAddr;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::{LongTermKey, ProfileSet};
use gnomon_server::config::{Config, IdentitySource};
use gnomon_server::key::key_label;
use gnomon_server::Engine;
use serde_json::json;

/// One identity as the operator should know it.
struct Shown {
    public: LongTermKey,
    /// Where it came from: "key file PATH", "offline delegations in DIR".
    from: String,
    /// The configured versions of its scheme.
    profiles: ProfileSet,
}

/// Every identity served, and what each answers.
pub(super) struct Served {
    identities: Vec<Shown>,
    /// Whether TCP runs (configured, and not left without a passed socket).
    tcp: bool,
}

/// `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn addrs(list: &[SocketAddr]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A few versions by name, many by their number.
fn describe(set: ProfileSet) -> String {
    let names: Vec<String> = set.iter().map(|p| p.name.to_owned()).collect();
    match names.len() {
        0 => "no version".to_owned(),
        1..=3 => and_list(&names),
        n => format!("{n} versions"),
    }
}

fn over_tcp(set: ProfileSet) -> ProfileSet {
    set.iter()
        .filter(|p| p.tcp)
        .fold(ProfileSet::empty(), |s, p| s.with(p.id))
}

impl Served {
    /// The identities of `config` whose public keys are `publics`, in the
    /// order the engine serves them; `tcp`: whether TCP runs.
    pub(super) fn new(config: &Config, publics: &[LongTermKey], tcp: bool) -> Served {
        let configured = config.profiles();
        let from = |k: usize| match config.identities.get(k) {
            Some(IdentitySource::KeyFile(path)) => format!("key file {}", path.display()),
            Some(IdentitySource::OfflineDir(dir, _)) => {
                format!("offline delegations in {}", dir.display())
            }
            None => "ephemeral, made for this run".to_owned(),
        };
        let identities = publics
            .iter()
            .enumerate()
            .map(|(k, public)| Shown {
                public: public.clone(),
                from: from(k),
                profiles: configured.of_scheme(public.scheme()),
            })
            .collect();
        Served { identities, tcp }
    }

    /// The versions some identity answers over UDP.
    fn udp(&self) -> ProfileSet {
        self.identities.iter().fold(ProfileSet::empty(), |s, i| {
            ProfileSet(s.0 | i.profiles.over_udp().0)
        })
    }

    /// The versions some identity answers over TCP (none when it is off).
    fn tcp(&self) -> ProfileSet {
        if !self.tcp {
            return ProfileSet::empty();
        }
        self.identities.iter().fold(ProfileSet::empty(), |s, i| {
            ProfileSet(s.0 | over_tcp(i.profiles).0)
        })
    }

    /// Each identity's public key, the lines an operator publishes, in
    /// the order of the log's identity lines.
    pub(super) fn print_public_keys(&self) {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        for i in &self.identities {
            // A closed stdout must not stop a server.
            let _ = writeln!(out, "public key (base64): {}", B64.encode(i.public.bytes()));
            let _ = writeln!(
                out,
                "public key (hex):    {}",
                hex::encode(i.public.bytes())
            );
        }
    }

    /// One log line per socket and per identity.
    pub(super) fn log(&self, engine: &Engine, workers: usize, how: &str) {
        let (udp, tcp) = (self.udp(), self.tcp());
        let tcp_only: Vec<String> = self
            .identities
            .iter()
            .filter(|i| i.profiles.over_udp().0 == 0 && i.profiles.0 != 0)
            .map(|i| i.public.scheme().name().to_owned())
            .collect();
        let why_not_udp = if tcp_only.is_empty() {
            String::new()
        } else {
            format!(" ({} answers over TCP only)", and_list(&tcp_only))
        };
        for addr in &engine.local {
            if udp.0 != 0 {
                let plural = if workers == 1 { "worker" } else { "workers" };
                tracing::info!("listening on udp {addr} with {workers} {plural}{how}");
            } else {
                tracing::warn!(
                    "udp {addr} is bound{how} but answers nothing: no identity served here \
                     answers over UDP{why_not_udp}; datagrams sent there are counted and \
                     dropped"
                );
            }
        }
        for addr in engine.tcp_local() {
            if tcp.0 != 0 {
                tracing::info!("listening on tcp {addr}{how}");
            } else {
                tracing::warn!(
                    "tcp {addr} is bound{how} but answers nothing: no version configured for \
                     the identities served here is defined over TCP"
                );
            }
        }
        let n = self.identities.len();
        for (k, i) in self.identities.iter().enumerate() {
            let scheme = i.public.scheme().name();
            let (u, t) = (
                i.profiles.over_udp(),
                if self.tcp {
                    over_tcp(i.profiles)
                } else {
                    ProfileSet::empty()
                },
            );
            let answers = match (u.0 != 0, t.0 != 0) {
                (true, true) if u == t => format!("answers {} over udp and tcp", describe(u)),
                (true, true) => format!(
                    "answers {} over udp and {} over tcp",
                    describe(u),
                    describe(t)
                ),
                (true, false) => format!("answers {} over udp only", describe(u)),
                (false, true) => format!(
                    "answers {} over tcp only (its responses are far larger than any \
                     request, and a UDP answer may never be)",
                    describe(t)
                ),
                (false, false) => String::new(),
            };
            let which = format!(
                "identity {} of {n}: {scheme} public key {} ({})",
                k + 1,
                key_label(&i.public),
                i.from
            );
            if !answers.is_empty() {
                tracing::info!("serving {which}; {answers}");
            } else if over_tcp(i.profiles).0 != 0 {
                tracing::warn!(
                    "{which} answers nothing: its versions are served over TCP only, and TCP \
                     is off; run with --tcp-enable=true (tcp.enable = true)"
                );
            } else {
                tracing::warn!(
                    "{which} answers nothing: `versions` names no {scheme} version; add one \
                     (gnomon serve --help lists them)"
                );
            }
        }
    }

    /// "15 versions on udp A and 14 on tcp B": for the service manager's
    /// status line.
    pub(super) fn status(&self, engine: &Engine) -> String {
        let (u, t) = (self.udp().iter().count(), self.tcp().iter().count());
        let udp = (u > 0 && !engine.local.is_empty()).then(|| addrs(&engine.local));
        let tcp = (t > 0 && !engine.tcp_local().is_empty()).then(|| addrs(engine.tcp_local()));
        let plural = |n: usize| if n == 1 { "version" } else { "versions" };
        match (udp, tcp) {
            (Some(a), Some(b)) if u == t => format!("{u} {} on udp {a} and tcp {b}", plural(u)),
            (Some(a), Some(b)) => format!("{u} {} on udp {a} and {t} on tcp {b}", plural(u)),
            (Some(a), None) => format!("{u} {} on udp {a}", plural(u)),
            (None, Some(b)) => format!("{t} {} on tcp {b}", plural(t)),
            (None, None) => "no version on any socket".to_owned(),
        }
    }

    /// The public keys as `--json` reports them.
    pub(super) fn json(&self) -> serde_json::Value {
        let keys: Vec<serde_json::Value> = self
            .identities
            .iter()
            .map(|i| {
                let names = |s: ProfileSet| s.iter().map(|p| p.name).collect::<Vec<_>>();
                json!({
                    "scheme": i.public.scheme().name(),
                    "public_key": B64.encode(i.public.bytes()),
                    "from": i.from,
                    "udp": names(i.profiles.over_udp()),
                    "tcp": names(if self.tcp { over_tcp(i.profiles) } else { ProfileSet::empty() }),
                })
            })
            .collect();
        serde_json::Value::Array(keys)
    }
}
