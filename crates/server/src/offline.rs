//! Offline delegations: the long-term key stays off the server.
//!
//! `gnomon delegate`, run where the long-term key lives, writes one file per
//! validity window into a directory. Each file holds a fresh **online** key
//! seed and that key's delegation signed by the long-term key in every
//! distinct CERT encoding (the CERT and DELE layout), so it is everything a server
//! needs to answer every version during that window, and nothing that
//! could mint more windows. The operator ships the directory; the
//! long-term seed never leaves the signing machine.
//!
//! ```text
//! gnomon-delegation v1
//! # comments: the window in UTC
//! host: <name>                             (only in per-host sets)
//! long-term-public: <base64, 32 bytes (Ed25519) or 1312 (ML-DSA-44)>
//! online-seed: <base64, 32 bytes>          (secret: files are mode 0600)
//! mint-us: <Unix µs>
//! maxt-us: <Unix µs>
//! cert google: <base64 CERT value, 152 bytes>
//! cert draft-01 draft-02: <base64>          (profiles sharing an encoding)
//! …
//! ```
//!
//! The long-term key's length says its scheme (as clients tell keys
//! apart): the online key is of the same scheme, made from the same kind of
//! 32-byte seed, and the file carries a certificate for each profile of
//! that scheme only (for ML-DSA-44, one `cert ml-dsa-44:` line of 3788
//! bytes). Ed25519 files are read exactly as before.
//!
//! Files are named `YYYYMMDDTHHMMSSZ.delegation` after their start
//! (`HOST-YYYYMMDDTHHMMSSZ.delegation` in a per-host set, see [`check_host_name`]), so a
//! directory listing reads as a timeline. The host name is a label, not
//! signed: it tells the operator (and `/metrics`) which machine a set was
//! made for, and a directory mixing two hosts' files is refused as a
//! copying mistake. The loader ([`OfflineStore::load`])
//! reads every `*.delegation` file with the same checks as a key file (no
//! symlink, no group or other access), checks every certificate's signature
//! against the long-term public key for each profile it claims, checks that
//! it delegates to the file's online key within the file's window, and
//! requires a certificate for every profile. [`OfflineStore::current`] never
//! returns a delegation outside its [MINT, MAXT]; [`OfflineStore::last_expiry_us`]
//! says when the server runs out, so it can warn in time.

mod error;
mod host;
mod rescan;
mod utc;

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::cert::Sign;
use gnomon_protocol::verify::check_certificate;
use gnomon_protocol::{Certificate, CertificateSet, LongTermKey, PROFILES};

use zeroize::Zeroizing;

use crate::key::SecretKey;
use crate::keyfile::{
    format_error, parse_fields, read_private, write_private, KeyFileError, MAX_LEN,
};

pub use error::OfflineError;
pub use host::{check_host_name, MAX_HOST_LEN};
pub use rescan::Rescan;
pub use utc::{format_utc, parse_utc};

/// First line of every delegation file.
pub const HEADER: &str = "gnomon-delegation v1";

/// File name suffix the loader reads.
pub const EXTENSION: &str = "delegation";

/// One online key with its delegations for one window.
#[derive(Clone, Debug)]
pub struct Delegation {
    /// The long-term public key that signed the delegations.
    pub long_term_public: LongTermKey,
    /// The online key, of the long-term key's scheme.
    pub online: SecretKey,
    /// Its delegation in every profile's encoding.
    pub certs: CertificateSet,
    /// Start of the window in which every encoding is valid, Unix µs.
    pub mint_us: u64,
    /// End of that window, Unix µs.
    pub maxt_us: u64,
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    /// The host this delegation was made for, in a per-host set.
    pub host: Option<String>,
}

impl Delegation {
    /// Delegate to the key with `online_seed` for [mint_us, maxt_us]
    /// (what `gnomon delegate` does once per window).
    /// The online key is of `long_term`'s scheme (a `KeyPair` is an
    /// Ed25519 key).
    pub fn mint(
        long_term: &(impl Into<SecretKey> + Clone),
        online_seed: &[u8; 32],
        mint_us: u64,
        maxt_us: u64,
    ) -> Self {
        let long_term: SecretKey = long_term.clone().into();
        let public = long_term.public_key().clone();
        Self::mint_with(&long_term, public, online_seed, mint_us, maxt_us)
    }

    /// [`Self::mint`] with a signer that holds no seed here (a key inside
    /// a PKCS#11 token), whose public key is `long_term_public`.
    pub fn mint_with(
        long_term: &dyn Sign,
        long_term_public: LongTermKey,
        online_seed: &[u8; 32],
        mint_us: u64,
        maxt_us: u64,
    ) -> Self {
        let online = SecretKey::from_seed(long_term.scheme(), online_seed);
        let certs = CertificateSet::mint_all(long_term, &online.public(), mint_us, maxt_us);
        let (mint_us, maxt_us) = effective_window(&certs);
        Delegation {
            long_term_public,
            online,
            certs,
            mint_us,
            maxt_us,
            source: None,
            host: None,
        }
    }

    /// The same delegation, made for `host` (a name [`check_host_name`]
    /// accepts; `gnomon delegate` checks it before minting anything).
    pub fn for_host(mut self, host: &str) -> Self {
        self.host = Some(host.to_owned());
        self
    }

    /// Whether a response made at `now_us` is inside every encoding's
    /// [MINT, MAXT].
    pub fn covers(&self, now_us: u64) -> bool {
        self.mint_us <= now_us && now_us <= self.maxt_us
    }

    /// The file's text. It holds the online seed: every buffer that does is
    /// wiped when dropped, and the text is sized up front (a file is at most
    /// `MAX_LEN`) so that no growth leaves a copy in freed memory.
    pub fn encode(&self) -> Zeroizing<String> {
        use std::fmt::Write as _;
        let mut seed_b64 = Zeroizing::new(String::with_capacity(64));
        let seed = self.online.seed();
        B64.encode_string(seed.as_slice(), &mut seed_b64);
        let mut out = Zeroizing::new(String::with_capacity(MAX_LEN as usize));
        let _ = write!(
            out,
            "{HEADER}\n\
             # Online key and its delegations for {} to {} (UTC).\n\
             # Secret (the online seed): keep mode 0600. Holds no long-term key.\n",
            format_utc(self.mint_us),
            format_utc(self.maxt_us),
        );
        if let Some(host) = &self.host {
            let _ = write!(
                out,
                "# For host {host} only: its online public key is {}.\n\
                 host: {host}\n",
                B64.encode(self.online.public())
            );
        }
        let _ = write!(
            out,
            "long-term-public: {}\n\
             online-seed: {}\n\
             mint-us: {}\n\
             maxt-us: {}\n",
            B64.encode(self.long_term_public.bytes()),
            *seed_b64,
            self.mint_us,
            self.maxt_us,
        );
        let mut done: Vec<&Certificate> = Vec::new();
        for p in PROFILES.iter() {
            let Some(cert) = self.certs.for_profile(p) else {
                continue;
            };
            if done.contains(&cert) {
                continue;
            }
            done.push(cert);
            let names: Vec<&str> = PROFILES
                .iter()
                .filter(|q| self.certs.for_profile(q) == Some(cert))
                .map(|q| q.name)
                .collect();
            out.push_str(&format!(
                "cert {}: {}\n",
                names.join(" "),
                B64.encode(cert.bytes())
            ));
        }
        out
    }

    /// Read and check a delegation file's text: every certificate must be
    /// signed by the file's long-term key for each profile it names, delegate
    /// to the file's online key, and lie within the file's window; every
    /// profile must have one.
    pub fn decode(text: &str, path: &Path) -> Result<Delegation, OfflineError> {
        let fields = parse_fields(text, HEADER, path)?;
        let mut long_term = None;
        let mut seed = None;
        let mut mint = None;
        let mut maxt = None;
        let mut host = None;
        let mut certs: Vec<Option<Certificate>> = vec![None; PROFILES.len()];
        let mut cert_lines = Vec::new();
        for f in &fields {
            match f.name {
                "long-term-public" => once(&mut long_term, long_term_key(f, path)?, f, path)?,
                "online-seed" => once(&mut seed, f.bytes32(path)?, f, path)?,
                "mint-us" => once(&mut mint, micros(f, path)?, f, path)?,
                "maxt-us" => once(&mut maxt, micros(f, path)?, f, path)?,
                "host" => {
                    check_host_name(f.value).map_err(|why| f.error(path, why))?;
                    once(&mut host, f.value.to_owned(), f, path)?;
                }
                name if name.starts_with("cert ") => cert_lines.push(f),
                _ => return Err(f.error(path, "unknown field").into()),
            }
        }
        let missing = |what| format_error(path, 0, &format!("no `{what}:` line"));
        let long_term = long_term.ok_or_else(|| missing("long-term-public"))?;
        let scheme = long_term.scheme();
        let online = SecretKey::from_seed(scheme, &*seed.ok_or_else(|| missing("online-seed"))?);
        let mint = mint.ok_or_else(|| missing("mint-us"))?;
        let maxt = maxt.ok_or_else(|| missing("maxt-us"))?;
        if mint > maxt {
            return Err(format_error(path, 0, "mint-us is after maxt-us").into());
        }
        for f in cert_lines {
            let bytes = B64
                .decode(f.value)
                .map_err(|_| f.error(path, "not valid base64"))?;
            for name in f.name["cert ".len()..].split_whitespace() {
                let p = PROFILES
                    .iter()
                    .find(|p| p.name == name)
                    .ok_or_else(|| f.error(path, &format!("unknown profile {name:?}")))?;
                if p.scheme != scheme {
                    let why = format!("profile {name} is not signed with a {scheme} key");
                    return Err(f.error(path, &why).into());
                }
                let slot = &mut certs[usize::from(p.id.0)];
                if slot.is_some() {
                    return Err(f
                        .error(path, &format!("second certificate for {name}"))
                        .into());
                }
                let cert = Certificate::from_bytes(&bytes, p)
                    .map_err(|e| f.error(path, &format!("not a certificate for {name}: {e:?}")))?;
                if check_certificate(&bytes, p, &long_term).is_err() {
                    return Err(OfflineError::BadSignature {
                        path: path.to_owned(),
                        line: f.line,
                        profile: p.name,
                    });
                }
                if *cert.online_public != *online.public() {
                    let why = format!("the {name} certificate delegates to another online key");
                    return Err(f.error(path, &why).into());
                }
                if cert.mint_us < mint || cert.maxt_us > maxt {
                    let why = format!("the {name} certificate reaches outside mint-us..maxt-us");
                    return Err(f.error(path, &why).into());
                }
                *slot = Some(cert);
            }
        }
        if let Some(p) = PROFILES
            .iter()
            .find(|p| p.scheme == scheme && certs[usize::from(p.id.0)].is_none())
        {
            let why = format!(
                "no certificate for profile {}; make the file again with this \
                 version's `gnomon delegate`",
                p.name
            );
            return Err(format_error(path, 0, &why).into());
        }
        // Every profile of the scheme has its certificate (checked above).
        let certs = CertificateSet::from_fn(scheme, |p| {
            certs[usize::from(p.id.0)]
                .clone()
                .unwrap_or_else(|| unreachable!("checked above"))
        });
        let (mint_us, maxt_us) = effective_window(&certs);
        if mint_us > maxt_us {
            return Err(format_error(path, 0, "the encodings' windows do not overlap").into());
        }
        Ok(Delegation {
            long_term_public: long_term,
            online,
            certs,
            mint_us,
            maxt_us,
            source: Some(path.to_owned()),
            host,
        })
    }

    /// The file [`Self::write_into`] would create in `dir`, named after the
    /// host, if any, and the window's start.
    pub fn write_target(&self, dir: &Path) -> PathBuf {
        let start = utc::compact_utc(self.mint_us);
        dir.join(match &self.host {
            Some(host) => format!("{host}-{start}.{EXTENSION}"),
            None => format!("{start}.{EXTENSION}"),
        })
    }

    /// Write this delegation into `dir` as a new mode-0600 file
    /// ([`Self::write_target`]). Never overwrites.
    pub fn write_into(&self, dir: &Path) -> Result<PathBuf, OfflineError> {
        let path = self.write_target(dir);
        write_private(&path, self.encode().as_bytes())?;
        Ok(path)
    }
}

/// The window every encoding covers: seconds-encoded versions narrow it.
fn effective_window(certs: &CertificateSet) -> (u64, u64) {
    PROFILES
        .iter()
        .filter_map(|p| certs.for_profile(p))
        .fold((0, u64::MAX), |(lo, hi), c| {
            (lo.max(c.mint_us), hi.min(c.maxt_us))
        })
}

fn once<T>(
    slot: &mut Option<T>,
    v: T,
    f: &crate::keyfile::Field<'_>,
    path: &Path,
) -> Result<(), KeyFileError> {
    if slot.is_some() {
        return Err(f.error(path, "field given twice"));
    }
    *slot = Some(v);
    Ok(())
}

/// A long-term public key of either scheme, told apart by its length.
fn long_term_key(f: &crate::keyfile::Field<'_>, path: &Path) -> Result<LongTermKey, KeyFileError> {
    let bytes = B64
        .decode(f.value)
        .map_err(|_| f.error(path, "not valid base64"))?;
    LongTermKey::from_bytes(&bytes).ok_or_else(|| {
        f.error(
            path,
            "expected 32 bytes (Ed25519) or 1312 bytes (ML-DSA-44)",
        )
    })
}

fn micros(f: &crate::keyfile::Field<'_>, path: &Path) -> Result<u64, KeyFileError> {
    f.value
        .parse()
        .map_err(|_| f.error(path, "expected an integer (Unix µs)"))
}

/// The windows `gnomon delegate` makes: `count` windows of `validity`, the
/// i-th starting at `start_us + i × step`. `step` must not exceed
/// `validity`, so that consecutive windows touch or overlap and the server
/// is never without a delegation.
pub fn plan_windows(
    start_us: u64,
    validity: Duration,
    step: Duration,
    count: u32,
) -> Result<Vec<(u64, u64)>, &'static str> {
    let validity_us = u64::try_from(validity.as_micros()).map_err(|_| "validity is too long")?;
    let step_us = u64::try_from(step.as_micros()).map_err(|_| "step is too long")?;
    if validity_us == 0 || step_us == 0 {
        return Err("validity and step must be positive");
    }
    if step_us > validity_us {
        return Err("step must not exceed validity, or the windows would leave gaps");
    }
    if count == 0 {
        return Err("count must be at least 1");
    }
    (0..u64::from(count))
        .map(|i| {
            let mint = step_us
                .checked_mul(i)
                .and_then(|o| start_us.checked_add(o))
                .ok_or("the windows run past the end of time")?;
            let maxt = mint
                .checked_add(validity_us)
                .filter(|&t| t != u64::MAX)
                .ok_or("the windows run past the end of time")?;
            Ok((mint, maxt))
        })
        .collect()
}

/// Every delegation in a directory, checked.
#[derive(Clone, Debug)]
pub struct OfflineStore {
    /// The long-term key all of them are signed by.
    pub long_term_public: LongTermKey,
    /// Sorted by start.
    delegations: Vec<Delegation>,
    /// The directory, for [`Self::rescan`].
    dir: PathBuf,
    /// What each file looked like when it was last read, valid or not, so
    /// a rescan reads only new and changed files.
    seen: rescan::Seen,
}

impl OfflineStore {
    /// Read every `*.delegation` file in `dir` (others, and names starting
    /// with a dot, are ignored). All must be valid and signed by one
    /// long-term key: `expected` if given, else whichever the files name.
    /// Expired files are kept (they are harmless and show the history);
    /// [`Self::current`] skips them.
    pub fn load(dir: &Path, expected: Option<&[u8]>) -> Result<OfflineStore, OfflineError> {
        let read_dir = |error| OfflineError::ReadDir {
            dir: dir.to_owned(),
            error,
        };
        let paths = rescan::listing(dir).map_err(read_dir)?;
        let mut delegations: Vec<Delegation> = Vec::new();
        let mut key: Option<Vec<u8>> = expected.map(<[u8]>::to_vec);
        let mut seen = rescan::Seen::default();
        for path in paths {
            seen.insert(path.clone(), rescan::stamp(&path));
            let d = Delegation::decode(&read_private(&path)?, &path)?;
            // Files without a host (made before per-host sets) may sit beside
            // one host's; two hosts' files in one directory are a copying
            // mistake that would put one host's keys on another.
            if let (Some(found), Some(other)) =
                (&d.host, delegations.iter().find_map(|o| o.host.as_ref()))
            {
                if found != other {
                    return Err(OfflineError::MixedHosts {
                        path,
                        expected: other.clone(),
                        found: found.clone(),
                    });
                }
            }
            match key {
                Some(k) if k != d.long_term_public.bytes() => {
                    return Err(OfflineError::WrongLongTermKey {
                        path,
                        expected: k,
                        found: d.long_term_public.bytes().to_vec(),
                    })
                }
                _ => key = Some(d.long_term_public.bytes().to_vec()),
            }
            delegations.push(d);
        }
        let long_term_public = delegations
            .first()
            .map(|d| d.long_term_public.clone())
            .ok_or_else(|| OfflineError::Empty {
                dir: dir.to_owned(),
            })?;
        delegations.sort_by_key(|d| (d.mint_us, d.maxt_us));
        Ok(OfflineStore {
            long_term_public,
            delegations,
            dir: dir.to_owned(),
            seen,
        })
    }

    /// The host the directory's files were made for, if they name one.
    pub fn host(&self) -> Option<&str> {
        self.delegations.iter().find_map(|d| d.host.as_deref())
    }

    /// All delegations, earliest start first.
    pub fn delegations(&self) -> &[Delegation] {
        &self.delegations
    }

    /// The delegation to sign with at `now_us`: of those whose window
    /// contains `now_us`, the one that lasts longest (fewest switches).
    /// `None` if none does: the server must not answer for this identity.
    pub fn current(&self, now_us: u64) -> Option<&Delegation> {
        self.delegations
            .iter()
            .filter(|d| d.covers(now_us))
            .max_by_key(|d| (d.maxt_us, d.mint_us))
    }

    /// When the last delegation expires, Unix µs: after this the server
    /// cannot answer for this identity. Warn well before.
    pub fn last_expiry_us(&self) -> u64 {
        self.delegations
            .iter()
            .map(|d| d.maxt_us)
            .max()
            .unwrap_or(0)
    }

    /// The earliest start after `now_us`, if any: the next time
    /// [`Self::current`] may change other than by expiry.
    pub fn next_start_us(&self, now_us: u64) -> Option<u64> {
        self.delegations
            .iter()
            .map(|d| d.mint_us)
            .filter(|&m| m > now_us)
            .min()
    }
}

#[cfg(test)]
mod tests;
