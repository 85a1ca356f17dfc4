//! The `[watch]` keys of publication (`publish-*`, the token's
//! `pkcs11-*`) and of signed input lists (`servers-url`, `servers-key`,
//! `servers-threshold`): parsed as the other keys are, from the file,
//! GNOMON_WATCH_* and flags, and checked together.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gnomon_sync::config::{duration_in, int_in, DurationText};

use super::{checked, quoted, WatchTable};

/// `publish-expiry`: a minute to 30 days.
pub(crate) fn parse_publish_expiry(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_secs(60),
        Duration::from_secs(30 * 86_400),
        "a duration in 1m..=30d",
    )
}

/// `publish-window`: a minute to 30 days.
pub(crate) fn parse_publish_window(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_secs(60),
        Duration::from_secs(30 * 86_400),
        "a duration in 1m..=30d",
    )
}

/// `publish-url`: where `/servers.json` is seen from outside.
pub(crate) fn parse_publish_url(s: &str) -> Result<String, String> {
    let ok = ["https://", "http://"].iter().any(|p| {
        s.len() > p.len()
            && s.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p))
            && !s.contains(char::is_whitespace)
    });
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not an http(s) URL (like https://observatory.example/servers.json)"
        ))
    }
}

/// `publish-name`: the monitor's identity, one line of text.
pub(crate) fn parse_publish_name(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.is_empty() || t.len() > 253 || t.chars().any(char::is_control) {
        return Err(format!(
            "`{s}` is not a monitor name (1 to 253 characters, no control characters; \
             like observatory.example)"
        ));
    }
    Ok(t.to_string())
}

/// `servers-threshold`: 1..=64.
pub(crate) fn parse_threshold(s: &str) -> Result<u16, String> {
    int_in(s, 1, 64, "an integer in 1..=64").map(|v| v as u16)
}

/// The publication and input keys, each present or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub(crate) struct PublishLayer {
    pub publish_key: Option<PathBuf>,
    pub publish_expiry: Option<Duration>,
    pub publish_name: Option<String>,
    pub publish_url: Option<String>,
    pub publish_window: Option<Duration>,
    pub pkcs11_module: Option<PathBuf>,
    pub pkcs11_token: Option<String>,
    pub pkcs11_key: Option<String>,
    pub pkcs11_pin_file: Option<PathBuf>,
    pub servers_url: Option<Vec<String>>,
    pub servers_key: Option<Vec<String>>,
    pub servers_threshold: Option<u16>,
}

/// The publishing key in a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TokenKey {
    pub module: PathBuf,
    pub token: String,
    pub key: String,
    pub pin_file: Option<PathBuf>,
}

/// Checked publication and input settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PublishSettings {
    /// The key file; None with a token key or without publication.
    pub key: Option<PathBuf>,
    pub token: Option<TokenKey>,
    pub expiry: Duration,
    /// None: the host name.
    pub name: Option<String>,
    pub url: Option<String>,
    pub window: Duration,
    pub servers_url: Vec<String>,
    pub servers_key: Vec<String>,
    pub servers_threshold: u16,
}

impl PublishSettings {
    /// Whether a list is published.
    pub(crate) fn on(&self) -> bool {
        self.key.is_some() || self.token.is_some()
    }
}

/// The file's keys of this part; relative paths are relative to the
/// file's directory.
pub(super) fn from_table(path: &Path, w: &WatchTable) -> Result<PublishLayer, String> {
    let base = path.parent().unwrap_or(Path::new(""));
    let wt = "watch";
    Ok(PublishLayer {
        publish_key: w.publish_key.as_ref().map(|p| base.join(p)),
        publish_expiry: checked(
            path,
            wt,
            "publish-expiry",
            w.publish_expiry.clone(),
            parse_publish_expiry,
        )?,
        publish_name: checked(
            path,
            wt,
            "publish-name",
            w.publish_name.clone(),
            parse_publish_name,
        )?,
        publish_url: checked(
            path,
            wt,
            "publish-url",
            w.publish_url.clone(),
            parse_publish_url,
        )?,
        publish_window: checked(
            path,
            wt,
            "publish-window",
            w.publish_window.clone(),
            parse_publish_window,
        )?,
        pkcs11_module: w.pkcs11_module.as_ref().map(PathBuf::from),
        pkcs11_token: w.pkcs11_token.clone(),
        pkcs11_key: w.pkcs11_key.clone(),
        pkcs11_pin_file: w.pkcs11_pin_file.as_ref().map(|p| base.join(p)),
        servers_url: w.servers_url.clone(),
        servers_key: w.servers_key.clone(),
        servers_threshold: checked(
            path,
            wt,
            "servers-threshold",
            w.servers_threshold,
            parse_threshold,
        )?,
    })
}

/// Defaults, then `file`, then `over`, key by key; then the keys that
/// only make sense together are checked together.
pub(super) fn resolve(
    file: &PublishLayer,
    over: &PublishLayer,
    interval: Duration,
) -> Result<PublishSettings, String> {
    macro_rules! pick {
        ($f:ident) => {
            over.$f.clone().or_else(|| file.$f.clone())
        };
    }
    let module = pick!(pkcs11_module);
    let (token, key, pin_file) = (
        pick!(pkcs11_token),
        pick!(pkcs11_key),
        pick!(pkcs11_pin_file),
    );
    let token = match (module, token, key) {
        (Some(module), Some(token), Some(key)) => Some(TokenKey {
            module,
            token,
            key,
            pin_file,
        }),
        (None, None, None) if pin_file.is_none() => None,
        (None, ..) => {
            return Err(
                "pkcs11-token, pkcs11-key and pkcs11-pin-file need pkcs11-module \
                        (--pkcs11-module, GNOMON_WATCH_PKCS11_MODULE or [watch] pkcs11-module)"
                    .into(),
            )
        }
        (Some(_), token, _) => {
            let missing = if token.is_none() {
                "pkcs11-token"
            } else {
                "pkcs11-key"
            };
            return Err(format!(
                "a publishing key in a token needs {missing} too (--{missing} or [watch] {missing})"
            ));
        }
    };
    let s = PublishSettings {
        key: pick!(publish_key),
        token,
        expiry: pick!(publish_expiry).unwrap_or(Duration::from_secs(86_400)),
        name: pick!(publish_name),
        url: pick!(publish_url),
        window: pick!(publish_window).unwrap_or(Duration::from_secs(86_400)),
        servers_url: pick!(servers_url).unwrap_or_default(),
        servers_key: pick!(servers_key).unwrap_or_default(),
        servers_threshold: pick!(servers_threshold).unwrap_or(1),
    };
    if s.key.is_some() && s.token.is_some() {
        return Err(
            "publish-key names a key file and pkcs11-module a token: give one of them".into(),
        );
    }
    if !s.on() && (s.name.is_some() || s.url.is_some()) {
        return Err(
            "publish-name and publish-url describe a published list: give publish-key \
                    (an OpenSSH ed25519 key file) or pkcs11-module to publish one"
                .into(),
        );
    }
    if s.on() && s.expiry <= interval {
        return Err(format!(
            "publish-expiry ({}) must be longer than interval ({}): each list would expire \
             before the next round publishes one",
            DurationText(s.expiry),
            DurationText(interval)
        ));
    }
    if s.servers_url.is_empty() != s.servers_key.is_empty() {
        return Err(if s.servers_url.is_empty() {
            "servers-key pins monitors whose lists come from servers-url: give servers-url too"
        } else {
            "servers-url takes signed lists, believed only under servers-key: give the \
             monitors' keys (servers-key, each `ssh-ed25519 AAAA…` or a .pub file)"
        }
        .into());
    }
    if usize::from(s.servers_threshold) > s.servers_key.len().max(1) {
        return Err(format!(
            "servers-threshold {} needs at least that many servers-key (there are {})",
            s.servers_threshold,
            s.servers_key.len()
        ));
    }
    Ok(s)
}

/// This part of the effective `[watch]` table.
pub(super) fn write(s: &PublishSettings, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let path = |p: &Path| quoted(&p.display().to_string());
    let list = |v: &[String]| {
        let items: Vec<String> = v.iter().map(|s| quoted(s)).collect();
        format!("[{}]", items.join(", "))
    };
    if !s.servers_url.is_empty() {
        writeln!(f, "servers-url = {}", list(&s.servers_url))?;
        writeln!(f, "servers-key = {}", list(&s.servers_key))?;
    }
    writeln!(f, "servers-threshold = {}", s.servers_threshold)?;
    if let Some(k) = &s.key {
        writeln!(f, "publish-key = {}", path(k))?;
    }
    if let Some(t) = &s.token {
        writeln!(f, "pkcs11-module = {}", path(&t.module))?;
        writeln!(f, "pkcs11-token = {}", quoted(&t.token))?;
        writeln!(f, "pkcs11-key = {}", quoted(&t.key))?;
        if let Some(p) = &t.pin_file {
            writeln!(f, "pkcs11-pin-file = {}", path(p))?;
        }
    }
    writeln!(f, "publish-expiry = \"{}\"", DurationText(s.expiry))?;
    if let Some(n) = &s.name {
        writeln!(f, "publish-name = {}", quoted(n))?;
    }
    if let Some(u) = &s.url {
        writeln!(f, "publish-url = {}", quoted(u))?;
    }
    writeln!(f, "publish-window = \"{}\"", DurationText(s.window))
}
