//! `gnomon delegate`: offline delegations, made where the long-term key
//! lives, for a server that never sees that key.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_server::config::parse_duration;
use gnomon_server::keyfile;
use gnomon_server::keys::random_seed;
use gnomon_server::offline::{
    format_utc, parse_utc, plan_windows, Delegation, OfflineStore, EXTENSION,
};

/// Most windows one run may write.
const MAX_COUNT: u32 = 10_000;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The long-term key file (stays on this machine).
    #[arg(long, value_name = "FILE")]
    key_file: PathBuf,
    /// Directory to write `*.delegation` files into (created 0700 if missing).
    /// Copy it to the server and name it in `offline-dir`.
    #[arg(long, value_name = "DIR")]
    out_dir: PathBuf,
    /// Start of the first window: `now` or YYYY-MM-DDTHH:MM:SSZ.
    #[arg(long, default_value = "now", value_parser = parse_start)]
    start: u64,
    /// Length of each window, such as 2d or 36h.
    #[arg(long, default_value = "2d", value_parser = parse_duration_arg)]
    validity: Duration,
    /// Time between window starts; at most --validity, so windows overlap
    /// and the server switches before the old one expires.
    #[arg(long, default_value = "1d", value_parser = parse_duration_arg)]
    step: Duration,
    /// Number of windows.
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_COUNT)))]
    count: u32,
}

fn parse_start(text: &str) -> Result<u64, String> {
    if text == "now" {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| "the system clock is before 1970".to_owned())?;
        // Whole seconds: file names carry seconds, and every encoding can
        // express the start exactly.
        return Ok(now.as_secs() * 1_000_000);
    }
    parse_utc(text).ok_or_else(|| "expected `now` or a UTC time like 2026-05-01T00:00:00Z".into())
}

fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| "expected a duration like 36h or 2d".into())
}

pub(crate) fn run(args: Args) -> ExitCode {
    match delegate(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("gnomon delegate: {msg}");
            ExitCode::from(code)
        }
    }
}

fn delegate(args: &Args) -> Result<(), (u8, String)> {
    let usage = |m: &str| (64, m.to_owned());
    let windows = plan_windows(args.start, args.validity, args.step, args.count).map_err(usage)?;
    let long_term = keyfile::load(&args.key_file).map_err(|e| (66, e.to_string()))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&args.out_dir)
        .map_err(|e| (73, format!("cannot create {}: {e}", args.out_dir.display())))?;
    refuse_foreign_delegations(&args.out_dir, &long_term.public())?;
    // Mint every window before writing any, so that a name clash leaves the
    // directory as it was.
    let mut made = Vec::new();
    for &(mint, maxt) in &windows {
        let seed = random_seed().map_err(|e| (71, format!("no random bytes from the OS: {e}")))?;
        made.push(Delegation::mint(&long_term, &seed, mint, maxt));
    }
    for d in &made {
        let probe = d.write_target(&args.out_dir);
        if probe.exists() || probe.is_symlink() {
            return Err((
                73,
                format!("{} already exists; nothing written", probe.display()),
            ));
        }
    }
    for d in &made {
        let path = d
            .write_into(&args.out_dir)
            .map_err(|e| (73, e.to_string()))?;
        println!(
            "{}\t{}\t{}",
            path.display(),
            format_utc(d.mint_us),
            format_utc(d.maxt_us)
        );
    }
    // Read the directory back as the server will.
    let store = OfflineStore::load(&args.out_dir, Some(&long_term.public())).map_err(|e| {
        (
            65,
            format!("the directory does not load as the server would: {e}"),
        )
    })?;
    eprintln!(
        "gnomon delegate: {} windows for long-term key {}; the directory now covers until {}. \
         Ship {} to the server; the key file stays here.",
        made.len(),
        B64.encode(long_term.public()),
        format_utc(store.last_expiry_us()),
        args.out_dir.display()
    );
    Ok(())
}

/// A directory already holding delegations must hold valid ones from this
/// key: the server refuses a mixed directory, so refuse before adding to it.
fn refuse_foreign_delegations(dir: &Path, public: &[u8; 32]) -> Result<(), (u8, String)> {
    let listing = std::fs::read_dir(dir).map_err(|e| (74, format!("{}: {e}", dir.display())))?;
    let has_any = listing
        .filter_map(Result::ok)
        .any(|e| e.path().extension().is_some_and(|x| x == EXTENSION));
    if has_any {
        OfflineStore::load(dir, Some(public)).map_err(|e| {
            (
                65,
                format!(
                    "{} already holds delegations that do not fit: {e}; nothing written",
                    dir.display()
                ),
            )
        })?;
    }
    Ok(())
}
