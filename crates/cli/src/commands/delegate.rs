//! `gnomon delegate`: offline delegations, made where the long-term key
//! lives, for a server that never sees that key.
//!
//! With `--hosts a,b,c` it makes one set per host (`OUT/a/`, `OUT/b/`, …),
//! each with its own online keys, so that a host's stolen files sign only
//! as that host and only until its last window ends; `OUT/MANIFEST` says
//! which directory goes to which host and which online key each window
//! uses (a response's delegation names its online key, so the manifest
//! tells which host answered). `--start continue` renews a set where it
//! ends, so a fleet is renewed by running the same command again.
//!
//! The long-term key is a key file or, with `--pkcs11-*`, a key inside a
//! PKCS#11 token that signs every DELE there (crate::pkcs11).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::{LongTermKey, Sign};
use gnomon_server::config::parse_duration;
use gnomon_server::keyfile;
use gnomon_server::keys::random_seed;
use gnomon_server::keys::SecretKey;
use gnomon_server::offline::{
    check_host_name, format_utc, parse_utc, plan_windows, Delegation, OfflineError, OfflineStore,
    EXTENSION,
};
use serde_json::json;

use super::keygen::key_file_words;
use crate::pkcs11::{read_pin, Token, TokenArgs, TokenSigner};
use crate::words;

use crate::exit::{CANT_CREATE, DATA_ERR, IO_ERROR, NO_INPUT, OS_ERROR, USAGE};

mod windows;
use windows::{check_ended, continue_after, until_covered, windows_said};

/// Most windows one run may write.
const MAX_COUNT: u32 = 10_000;

/// Most hosts one run may make sets for.
const MAX_HOSTS: usize = 1_000;

/// The manifest a per-host run leaves in the output directory.
pub(crate) const MANIFEST: &str = "MANIFEST";

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The long-term key file (stays on this machine). Or the --pkcs11-*
    /// options: a key inside a PKCS#11 token, which signs there.
    #[arg(long, value_name = "FILE", conflicts_with = "pkcs11_module")]
    key_file: Option<PathBuf>,
    #[command(flatten)]
    token: TokenArgs,
    /// Directory to write `*.delegation` files into (created 0700 if missing).
    /// Copy it to the server and name it in `offline-dir`. With hosts, one
    /// subdirectory per host, and a MANIFEST saying what goes where.
    #[arg(long, value_name = "DIR")]
    out_dir: PathBuf,
    /// Make a separate set, with its own online keys, for each of these
    /// hosts (comma-separated): OUT-DIR/NAME/ for each. Names are letters,
    /// digits, `.`, `-` and `_`, starting with a letter or digit.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    hosts: Vec<String>,
    /// One host to make a set for (repeatable; adds to --hosts).
    #[arg(long, value_name = "NAME")]
    host: Vec<String>,
    /// Start of the first window: `now`, YYYY-MM-DDTHH:MM:SSZ, or
    /// `continue`: one --step after the latest window already in each
    /// directory (or now, if that is later or the directory is new), so that
    /// renewing is running the same command again.
    #[arg(long, default_value = "now", value_parser = parse_start)]
    start: Start,
    /// Length of each window, such as 2d or 36h.
    #[arg(long, default_value = "2d", value_parser = parse_duration_arg)]
    validity: Duration,
    /// Time between window starts; at most --validity, so windows overlap
    /// and the server switches before the old one expires.
    #[arg(long, default_value = "1d", value_parser = parse_duration_arg)]
    step: Duration,
    /// Number of windows (per host); with --cover, the most to add.
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_COUNT)))]
    count: u32,
    /// Add windows only until each directory covers this far beyond now
    /// (such as 14d), none if it already does: run from a timer as often
    /// as you like, coverage stays the same. Needs --start continue.
    #[arg(long, value_parser = parse_duration_arg)]
    cover: Option<Duration>,
    /// Write windows that have all ended already (a --start in the past),
    /// which a server never uses; without it they are refused.
    #[arg(long)]
    force: bool,
    /// Print one JSON object (every file written, each directory's
    /// coverage, warnings, exit_code) instead of the lines of text.
    #[arg(long)]
    json: bool,
}

/// Where the first window starts.
#[derive(Clone, Copy, Debug)]
enum Start {
    /// At this Unix µs.
    At(u64),
    /// After the latest window in the directory (renewal).
    Continue,
}

fn parse_start(text: &str) -> Result<Start, String> {
    match text {
        "now" => now_whole_seconds().map(Start::At),
        "continue" => Ok(Start::Continue),
        _ => parse_utc(text).map(Start::At).ok_or_else(|| {
            "expected `now`, `continue` or a UTC time like 2026-05-01T00:00:00Z".into()
        }),
    }
}

/// Now in whole seconds: file names carry seconds, and every encoding can
/// express the start exactly.
fn now_whole_seconds() -> Result<u64, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| "the system clock is before 1970".to_owned())?;
    Ok(now.as_secs() * 1_000_000)
}

fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| "expected a duration like 36h or 2d".into())
}

pub(crate) fn run(args: Args) -> ExitCode {
    match delegate(&args) {
        Ok(done) => {
            if args.json {
                words::print_outcome(done, crate::exit::OK);
            }
            ExitCode::SUCCESS
        }
        Err((code, msg)) => {
            eprintln!("gnomon delegate: {msg}");
            if args.json {
                let kind = match code {
                    USAGE => "usage",
                    NO_INPUT => "no_input",
                    DATA_ERR => "data",
                    CANT_CREATE => "cant_create",
                    IO_ERROR => "io",
                    OS_ERROR => "os",
                    _ => "token",
                };
                words::print_error(kind, &msg, code);
            }
            ExitCode::from(code)
        }
    }
}

type Failure = (u8, String);

/// A delegation directory's failure in words: the system's part without
/// its errno.
pub(crate) fn offline_words(e: &OfflineError) -> String {
    match e {
        OfflineError::File(k) => key_file_words(k),
        OfflineError::ReadDir { dir, error } => format!(
            "cannot list delegation directory {}: {}",
            dir.display(),
            words::io(error)
        ),
        other => other.to_string(),
    }
}

/// One directory's share of the run: the host it is for, if any.
struct Target {
    host: Option<String>,
    dir: PathBuf,
    made: Vec<Delegation>,
}

fn delegate(args: &Args) -> Result<serde_json::Value, Failure> {
    let usage = |m: &str| (USAGE, m.to_owned());
    let hosts = host_list(args)?;
    // Check the window arithmetic before touching anything.
    plan_windows(0, args.validity, args.step, args.count).map_err(usage)?;
    if args.cover.is_some() && !matches!(args.start, Start::Continue) {
        return Err(usage("--cover renews: it needs --start continue"));
    }
    let long_term = RootKey::open(args)?;
    let mut targets: Vec<Target> = if hosts.is_empty() {
        vec![Target {
            host: None,
            dir: args.out_dir.clone(),
            made: Vec::new(),
        }]
    } else {
        hosts
            .iter()
            .map(|h| Target {
                host: Some(h.clone()),
                dir: args.out_dir.join(h),
                made: Vec::new(),
            })
            .collect()
    };
    let now = now_whole_seconds().map_err(|e| (OS_ERROR, e))?;
    let goal = args
        .cover
        .map(|c| now.saturating_add(u64::try_from(c.as_micros()).unwrap_or(u64::MAX)));
    // Every directory's windows are planned before any is made, so that
    // windows all in the past are refused with nothing created.
    let mut planned = Vec::new();
    for t in &targets {
        let existing = if t.dir.is_dir() {
            existing_delegations(&t.dir, &long_term.public(), t.host.as_deref())?
        } else {
            None
        };
        let start = match args.start {
            Start::At(us) => us,
            Start::Continue => continue_after(existing.as_ref(), args.step, now),
        };
        let mut windows =
            plan_windows(start, args.validity, args.step, args.count).map_err(usage)?;
        if let Some(goal) = goal {
            let covered = existing.as_ref().map_or(0, OfflineStore::last_expiry_us);
            windows = until_covered(&windows, covered, goal);
        }
        planned.push(windows);
    }
    let mut warnings: Vec<String> = check_ended(&planned, now, args.force)?
        .into_iter()
        .collect();
    for (t, windows) in targets.iter_mut().zip(&planned) {
        create_private_dir(&t.dir)?;
        t.made = mint(&long_term, windows, t.host.as_deref())?;
        // A token that failed midway fails the run here, before any file.
        long_term.check()?;
    }
    // Every window of every host is minted before any is written, so that
    // a name clash leaves every directory as it was.
    for d in targets
        .iter()
        .flat_map(|t| t.made.iter().map(move |d| (t, d)))
    {
        let probe = d.1.write_target(&d.0.dir);
        if probe.exists() || probe.is_symlink() {
            return Err((
                CANT_CREATE,
                format!("{} already exists; nothing written", probe.display()),
            ));
        }
    }
    let mut written = Vec::new();
    for t in &targets {
        for d in &t.made {
            let path = d
                .write_into(&t.dir)
                .map_err(|e| (CANT_CREATE, offline_words(&e)))?;
            if args.json {
                written.push(json!({
                    "path": path.display().to_string(),
                    "host": t.host,
                    "start_utc": format_utc(d.mint_us),
                    "end_utc": format_utc(d.maxt_us),
                    "online_public_key": B64.encode(d.online.public()),
                }));
            } else {
                println!(
                    "{}\t{}\t{}\t{}",
                    path.display(),
                    format_utc(d.mint_us),
                    format_utc(d.maxt_us),
                    B64.encode(d.online.public())
                );
            }
        }
    }
    // Read every directory back as its server will.
    let mut stores = Vec::new();
    for t in &targets {
        let store = OfflineStore::load(&t.dir, Some(&long_term.public())).map_err(|e| {
            (
                DATA_ERR,
                format!(
                    "{} does not load as the server would: {}",
                    t.dir.display(),
                    offline_words(&e)
                ),
            )
        })?;
        stores.push(store);
    }
    if !hosts.is_empty() {
        write_manifest(&args.out_dir, &long_term.public(), &targets, &stores)?;
    }
    let mut dirs = Vec::new();
    for (t, store) in targets.iter().zip(&stores) {
        let whose = t
            .host
            .as_deref()
            .map_or_else(String::new, |h| format!("host {h}: "));
        eprintln!(
            "gnomon delegate: {whose}{}; {} now covers until {}",
            windows_said(t.made.len()),
            t.dir.display(),
            format_utc(store.last_expiry_us()),
        );
        dirs.push(json!({
            "dir": t.dir.display().to_string(),
            "host": t.host,
            "new_windows": t.made.len(),
            "covers_until_utc": format_utc(store.last_expiry_us()),
        }));
        if goal.is_some_and(|g| store.last_expiry_us() < g) {
            warnings.push(format!(
                "{} falls short of --cover; raise --count",
                t.dir.display()
            ));
        }
    }
    for w in &warnings {
        eprintln!("gnomon delegate: warning: {w}");
    }
    let stays = match &long_term {
        RootKey::File(_) => "the key file stays here",
        RootKey::Token(_) => "the key never left its token",
    };
    let ship = if hosts.is_empty() {
        format!("Ship {} to the server", args.out_dir.display())
    } else {
        format!(
            "Ship each {}/HOST/ to that host only ({} lists them)",
            args.out_dir.display(),
            args.out_dir.join(MANIFEST).display()
        )
    };
    eprintln!(
        "gnomon delegate: long-term key {}. {ship}; {stays}.",
        B64.encode(long_term.public()),
    );
    Ok(json!({
        "long_term_public_key": B64.encode(long_term.public()),
        "out_dir": args.out_dir.display().to_string(),
        "written": written,
        "directories": dirs,
        "warnings": warnings,
    }))
}

/// `--host` and `--hosts` together, each name checked, none twice.
fn host_list(args: &Args) -> Result<Vec<String>, Failure> {
    let mut seen = BTreeSet::new();
    let mut hosts = Vec::new();
    for h in args.host.iter().chain(&args.hosts) {
        check_host_name(h).map_err(|why| (USAGE, format!("host name {h:?}: {why}")))?;
        if !seen.insert(h.as_str()) {
            return Err((USAGE, format!("host {h} is named twice")));
        }
        hosts.push(h.clone());
    }
    // In name order, whatever the flags' order: the manifest reads the same.
    hosts.sort();
    if hosts.len() > MAX_HOSTS {
        return Err((USAGE, format!("at most {MAX_HOSTS} hosts per run")));
    }
    Ok(hosts)
}

fn create_private_dir(dir: &Path) -> Result<(), Failure> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            (
                CANT_CREATE,
                format!("cannot create {}: {}", dir.display(), words::io(&e)),
            )
        })
}

/// The long-term key: a key file's, or one held by a token.
enum RootKey {
    File(SecretKey),
    Token(TokenSigner),
}

impl RootKey {
    fn open(args: &Args) -> Result<RootKey, Failure> {
        let fail = |e: crate::pkcs11::TokenError| (e.exit_code(), e.to_string());
        let Some(key) = args.token.resolve().map_err(fail)? else {
            let path = args.key_file.as_deref().ok_or_else(|| {
                (
                    USAGE,
                    "give --key-file, or --pkcs11-module for a token key".to_owned(),
                )
            })?;
            return keyfile::load(path)
                .map(RootKey::File)
                .map_err(|e| (NO_INPUT, key_file_words(&e)));
        };
        if args.key_file.is_some() {
            return Err((
                USAGE,
                "--key-file names a key file and --config a token: which one?".to_owned(),
            ));
        }
        let pin = read_pin(key.pin_file.as_deref()).map_err(fail)?;
        let token = Token::open(&key.module, &key.token, false).map_err(fail)?;
        token.login(&pin).map_err(fail)?;
        token.signer(&key.key).map(RootKey::Token).map_err(fail)
    }

    fn public(&self) -> Vec<u8> {
        match self {
            RootKey::File(k) => k.public().to_vec(),
            RootKey::Token(t) => t.public().to_vec(),
        }
    }

    /// The first signing failure, if any.
    fn check(&self) -> Result<(), Failure> {
        match self {
            RootKey::File(_) => Ok(()),
            RootKey::Token(t) => t.check().map_err(|e| (e.exit_code(), e.to_string())),
        }
    }
}

/// Fresh online keys for every window.
fn mint(
    long_term: &RootKey,
    windows: &[(u64, u64)],
    host: Option<&str>,
) -> Result<Vec<Delegation>, Failure> {
    windows
        .iter()
        .map(|&(mint, maxt)| {
            let seed = random_seed().map_err(|e| {
                (
                    OS_ERROR,
                    format!("no random bytes from the OS: {}", words::io(&e)),
                )
            })?;
            let d = match long_term {
                RootKey::File(k) => Delegation::mint(k, &seed, mint, maxt),
                RootKey::Token(t) => Delegation::mint_with(
                    t as &dyn Sign,
                    LongTermKey::from(t.public()),
                    &seed,
                    mint,
                    maxt,
                ),
            };
            Ok(match host {
                Some(h) => d.for_host(h),
                None => d,
            })
        })
        .collect()
}

/// The delegations already in `dir`. A directory already holding
/// delegations must hold valid ones from this key, made for this host (or
/// for none): the server refuses a mixed directory, so refuse before adding
/// to it.
fn existing_delegations(
    dir: &Path,
    public: &[u8],
    host: Option<&str>,
) -> Result<Option<OfflineStore>, Failure> {
    let listing = std::fs::read_dir(dir).map_err(|e| {
        (
            IO_ERROR,
            format!("cannot read {}: {}", dir.display(), words::io(&e)),
        )
    })?;
    let has_any = listing
        .filter_map(Result::ok)
        .any(|e| e.path().extension().is_some_and(|x| x == EXTENSION));
    if !has_any {
        return Ok(None);
    }
    let store = OfflineStore::load(dir, Some(public)).map_err(|e| {
        (
            DATA_ERR,
            format!(
                "{} already holds delegations that do not fit: {}; nothing written",
                dir.display(),
                offline_words(&e)
            ),
        )
    })?;
    if let (Some(want), Some(found)) = (host, store.host()) {
        if want != found {
            return Err((
                DATA_ERR,
                format!(
                    "{} already holds delegations for host {found}, not {want}; nothing written",
                    dir.display()
                ),
            ));
        }
    }
    Ok(Some(store))
}

/// `OUT/MANIFEST`: every delegation now in every host's directory, one
/// tab-separated line each, so an operator sees what goes where and a
/// response's online key can be traced to its host. Holds no secret;
/// replaced whole (written beside, then renamed) on every run.
fn write_manifest(
    out: &Path,
    public: &[u8],
    targets: &[Target],
    stores: &[OfflineStore],
) -> Result<(), Failure> {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# gnomon delegate: one delegation set per host, all for long-term key\n\
         # {}\n\
         # Copy each directory to its host only and name it in that host's offline-dir;\n\
         # renew with the same command and --start continue. Holds no secret.\n\
         # host\tfile\tstart (UTC)\tend (UTC)\tonline public key",
        B64.encode(public)
    );
    for (t, store) in targets.iter().zip(stores) {
        let host = t.host.as_deref().unwrap_or("");
        for d in store.delegations() {
            let file = d
                .source
                .as_deref()
                .and_then(Path::file_name)
                .map(|n| Path::new(host).join(n))
                .unwrap_or_default();
            let _ = writeln!(
                text,
                "{host}\t{}\t{}\t{}\t{}",
                file.display(),
                format_utc(d.mint_us),
                format_utc(d.maxt_us),
                B64.encode(d.online.public())
            );
        }
    }
    let path = out.join(MANIFEST);
    let temp = out.join(format!(".{MANIFEST}.tmp"));
    std::fs::write(&temp, text)
        .and_then(|()| std::fs::rename(&temp, &path))
        .map_err(|e| {
            (
                CANT_CREATE,
                format!("cannot write {}: {}", path.display(), words::io(&e)),
            )
        })
}
