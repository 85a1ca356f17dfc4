//! A real chronyd from the system's package, for tests that feed it samples:
//! started in a private directory with clock control off, no network
//! sources, its command socket in that directory, and one `refclock SOCK`
//! whose socket a test sends to. Asked through `chronyc -c`, stopped (and
//! its directory removed) when dropped.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The refid the refclock is configured with.
pub const REFID: &str = "RTIM";

/// A running chronyd.
pub struct Chronyd {
    child: Child,
    dir: PathBuf,
    log: Arc<Mutex<String>>,
}

/// What `chronyc -c tracking` says about the clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Tracking {
    /// The source chrony follows (a refclock's refid), empty when none.
    pub reference: String,
    /// How far chrony believes the system clock is behind true time,
    /// seconds ("slow of NTP time" when positive). With -x chronyd never
    /// corrects the clock, so this is the whole offset of the source.
    pub behind: f64,
    /// `Normal`, or `Not synchronised`.
    pub leap: String,
}

/// One line of `chronyc -c sources`.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    /// `*` selected, `?` unusable (or `noselect`), `x` falseticker, …
    pub state: char,
    /// The refid for a refclock.
    pub name: String,
    /// The reachability register (the last 8 polls, one bit each).
    pub reach: u32,
    /// Seconds since the last sample; `None` before the first.
    pub last_rx: Option<u64>,
    /// The last sample's offset, seconds, in chrony's sign: the local clock
    /// minus the source (a source ahead of us is negative).
    pub adjusted_offset: f64,
    /// The same sample before chrony's later corrections.
    pub measured_offset: f64,
    /// chrony's error estimate of it (half the delay plus dispersion).
    pub error: f64,
}

impl Chronyd {
    /// Start chronyd for `test` with `refclock SOCK DIR/gnomon.sock refid
    /// RTIM` followed by `options` (such as `poll 0 noselect`), and the
    /// lines `conf` (such as `maxdistance 16`). `None`, after recording
    /// why, where chronyd is not installed or cannot run as this user.
    pub fn start(test: &str, options: &str, conf: &str) -> Option<Chronyd> {
        let Some(chronyd) = find(&["/usr/sbin/chronyd", "/usr/bin/chronyd", "/sbin/chronyd"])
        else {
            crate::skip(
                test,
                "chronyd is not installed (Debian package chrony; scripts/test-all installs it as root)",
            );
            return None;
        };
        if find(&["/usr/bin/chronyc", "/bin/chronyc"]).is_none() {
            crate::skip(test, "chronyc is not installed (Debian package chrony)");
            return None;
        }
        let dir =
            std::env::temp_dir().join(format!("gnomon-chronyd-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The refclock socket in a directory others may enter (a test may
        // send as another user); chronyd refuses a command socket in one,
        // so that goes one level down.
        std::fs::create_dir_all(dir.join("cmd")).expect("temporary directory");
        set_mode(&dir, 0o755);
        set_mode(&dir.join("cmd"), 0o700);
        let d = dir.display();
        let conf = format!(
            "refclock SOCK {d}/gnomon.sock refid {REFID} {options}\n\
             bindcmdaddress {d}/cmd/chronyd.sock\n\
             cmdport 0\n\
             port 0\n\
             pidfile {d}/chronyd.pid\n\
             driftfile {d}/drift\n\
             logdir {d}/log\n\
             {conf}\n"
        );
        std::fs::write(dir.join("chronyd.conf"), conf).expect("chronyd.conf");
        let root = crate::is_root();
        let mut cmd = Command::new(chronyd);
        // -x: never touch the clock; -d: foreground, log to stderr.
        cmd.args(["-x", "-d", "-f"]).arg(dir.join("chronyd.conf"));
        // Keep root (the directory is root's); without it, -U skips the
        // check for root privileges, which -x does not need.
        if root {
            cmd.args(["-u", "root"]);
        } else {
            cmd.arg("-U");
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chronyd runs");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let mut stderr = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut chronyd = Chronyd { child, dir, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if chronyd.sock().exists() && chronyd.dir.join("cmd/chronyd.sock").exists() {
                return Some(chronyd);
            }
            let exited = !matches!(chronyd.child.try_wait(), Ok(None));
            if exited || Instant::now() > deadline {
                let log = chronyd.log();
                assert!(
                    !root,
                    "chronyd did not start (exited: {exited}); its log:\n{log}"
                );
                crate::skip(
                    test,
                    &format!("chronyd cannot run without root here: {}", log.trim()),
                );
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The refclock's socket: where samples go.
    pub fn sock(&self) -> PathBuf {
        self.dir.join("gnomon.sock")
    }

    /// What chronyd has logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The refclock's line of `chronyc -c sources`, if chronyc answers.
    pub fn source(&self) -> Option<Source> {
        let out = self.chronyc(&["-c", "sources"])?;
        out.lines().find_map(parse_source)
    }

    /// The refclock's sample count in `chronyc -c sourcestats`.
    pub fn samples(&self) -> Option<u32> {
        let out = self.chronyc(&["-c", "sourcestats"])?;
        out.lines().find_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.first() == Some(&REFID)).then(|| f.get(1)?.parse().ok())?
        })
    }

    /// `chronyc -c tracking`, if chronyc answers.
    pub fn tracking(&self) -> Option<Tracking> {
        let out = self.chronyc(&["-c", "tracking"])?;
        parse_tracking(out.lines().next()?)
    }

    /// Ask chronyc until `done` holds for the refclock's line and its
    /// sample count, for at most `limit`; the last line seen. Panics with
    /// chronyd's log and the last line when the limit passes.
    pub fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&Source, u32) -> bool,
    ) -> Source {
        let deadline = Instant::now() + limit;
        let mut last = None;
        loop {
            if let (Some(s), Some(n)) = (self.source(), self.samples()) {
                if done(&s, n) {
                    return s;
                }
                last = Some((s, n));
            }
            assert!(
                Instant::now() < deadline,
                "chrony never showed {what} within {limit:?}; last: {last:?}; chronyd's log:\n{}",
                self.log()
            );
            // chronyc is a process per question: ask a few times a second.
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// chronyc through the command socket; its stdout when it succeeds.
    pub fn chronyc(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("chronyc")
            .arg("-h")
            .arg(self.dir.join("cmd/chronyd.sock"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Chronyd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `#,?,RTIM,0,0,77,1,-300.000000000,-300.000000000,0.000000020`: mode,
/// state, name, stratum, poll, reach (octal), last rx (2^32 − 1: never),
/// adjusted offset, measured offset, error.
fn parse_source(line: &str) -> Option<Source> {
    let f: Vec<&str> = line.split(',').collect();
    if f.len() < 10 || f[2] != REFID {
        return None;
    }
    let last_rx: u64 = f[6].parse().ok()?;
    Some(Source {
        state: f[1].chars().next()?,
        name: f[2].to_string(),
        reach: u32::from_str_radix(f[5], 8).ok()?,
        last_rx: (last_rx != u64::from(u32::MAX)).then_some(last_rx),
        adjusted_offset: f[7].parse().ok()?,
        measured_offset: f[8].parse().ok()?,
        error: f[9].parse().ok()?,
    })
}

/// `5254494D,RTIM,1,1795503071.93,300.000000000,…,Normal`: refid (hex),
/// name, stratum, reference time, system time (positive: slow), …, leap
/// status last.
fn parse_tracking(line: &str) -> Option<Tracking> {
    let f: Vec<&str> = line.split(',').collect();
    if f.len() < 14 {
        return None;
    }
    Some(Tracking {
        reference: f[1].to_string(),
        behind: f[4].parse().ok()?,
        leap: f.last()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chronyc_csv_lines() {
        let s = parse_source("#,?,RTIM,0,0,77,1,-300.000000000,-299.5,0.000000020").unwrap();
        assert_eq!(s.state, '?');
        assert_eq!(s.reach, 0o77);
        assert_eq!(s.last_rx, Some(1));
        assert_eq!((s.adjusted_offset, s.measured_offset), (-300.0, -299.5));
        let never = parse_source("#,?,RTIM,0,0,0,4294967295,0.0,0.0,0.0").unwrap();
        assert_eq!(never.last_rx, None);
        assert!(parse_source("^,*,ntp.example,2,6,377,12,0.1,0.1,0.01").is_none());
        let t = parse_tracking("5254494D,RTIM,1,1795503071.933168969,300.000000000,0.000000000,0.000000000,-0.000,0.000,0.000,6.000000000,0.000001594,1.0,Normal").unwrap();
        assert_eq!(
            (t.reference.as_str(), t.behind, t.leap.as_str()),
            ("RTIM", 300.0, "Normal")
        );
        let none = parse_tracking("00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,1.000000000,1.000000000,0.0,Not synchronised").unwrap();
        assert_eq!(
            (none.reference.as_str(), none.leap.as_str()),
            ("", "Not synchronised")
        );
    }
}
