use std::io::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gnomon_client::{Client, Config, Plan, Selection, Server, WallClock};
use gnomon_testkit::{Fixture, FixtureConfig};

use super::*;

/// The bytes of one sample, pinned for the layout chrony has on 64-bit
/// Linux (x86_64, aarch64: 64-bit time_t and suseconds_t, 8-aligned
/// double): tv_sec, tv_usec, offset, pulse, leap, _pad, magic.
#[cfg(all(
    target_os = "linux",
    target_pointer_width = "64",
    target_endian = "little"
))]
#[test]
fn encodes_chronys_struct_sock_sample_byte_for_byte() {
    let s = Sample {
        // 2026-10-05T00:00:00.123456Z
        at_us: 1_791_158_400_123_456,
        // The reference is 300.25 s ahead of the local clock.
        offset_us: 300_250_000,
        // Not in the datagram.
        radius_us: 1_500_000,
    };
    let b = s.encode().unwrap();
    let mut want = Vec::new();
    want.extend_from_slice(&1_791_158_400i64.to_le_bytes());
    want.extend_from_slice(&123_456i64.to_le_bytes());
    want.extend_from_slice(&300.25f64.to_le_bytes());
    want.extend_from_slice(&[0; 12]); // pulse, leap, _pad
    want.extend_from_slice(&[0x4b, 0x43, 0x4f, 0x53]); // 0x534f434b, little-endian
    assert_eq!(SAMPLE_LEN, 40);
    assert_eq!(b.as_slice(), want.as_slice());
}

#[test]
fn time_before_a_second_boundary_and_1970_keeps_usec_in_range() {
    let b = Sample {
        at_us: -1,
        offset_us: -1_500_000,
        radius_us: 0,
    }
    .encode()
    .unwrap();
    let tv = offset_of!(SockSample, tv);
    let sec = offset_of!(libc::timeval, tv_sec) + tv;
    let usec = offset_of!(libc::timeval, tv_usec) + tv;
    let w_sec = size_of::<libc::time_t>();
    let w_usec = size_of::<libc::suseconds_t>();
    let mut s = [0u8; 8];
    s[..w_sec].copy_from_slice(&b[sec..sec + w_sec]);
    let mut u = [0u8; 8];
    u[..w_usec].copy_from_slice(&b[usec..usec + w_usec]);
    if cfg!(target_endian = "little") {
        // Sign-extend what a narrower time_t left.
        let sec = i64::from_le_bytes(s) << (64 - 8 * w_sec) >> (64 - 8 * w_sec);
        assert_eq!((sec, i64::from_le_bytes(u)), (-1, 999_999));
    }
    let off = offset_of!(SockSample, offset);
    assert_eq!(
        f64::from_ne_bytes(b[off..off + 8].try_into().unwrap()),
        -1.5
    );
}

/// A wall clock `skew_us` away from the real one.
struct Skewed(i128);

impl WallClock for Skewed {
    fn now_us(&mut self) -> i128 {
        real_now_us() + self.0
    }
}

fn real_now_us() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i128
}

fn fast() -> Config {
    Config {
        backoff: gnomon_client::Backoff {
            initial: Duration::from_millis(300),
            factor: 1.5,
            max: Duration::from_secs(2),
            attempts: 3,
        },
        fallback_attempts: 1,
        ..Config::default()
    }
}

fn server(f: &Fixture) -> Server {
    Server::at(&f.addr().to_string(), f.public_key()).unwrap()
}

#[test]
fn the_sample_is_the_consensus_midpoint_against_the_local_clock_at_its_moment() {
    const RADIUS_US: u32 = 20_000;
    // Three servers 300 s ahead of the real clock, a liar an hour ahead,
    // and a local clock 7 s behind: chrony must hear +307 s, at a moment
    // read from the local clock, not the real one.
    let ahead = |offset_us, seed| {
        Fixture::start(FixtureConfig {
            offset_us,
            radius_us: RADIUS_US,
            seed,
            ..FixtureConfig::default()
        })
    };
    let fixtures = [
        ahead(300_000_000, 1),
        ahead(300_000_000, 2),
        ahead(300_000_000, 3),
        ahead(3_600_000_000, 4),
    ];
    let servers: Vec<Server> = fixtures.iter().map(server).collect();
    let mut client = Client::new(fast()).with_clock(Skewed(-7_000_000));
    let before = real_now_us() - 7_000_000;
    let seq = client
        .measure(
            &servers,
            &Plan {
                selection: Selection::All,
                passes: 2,
                assumption: None,
            },
        )
        .unwrap();
    let after = real_now_us() - 7_000_000;
    let s = Sample::of_sequence(&seq).expect("three of four agree");
    // The true offset lies inside the consensus interval (RFC versions
    // send whole seconds, so it is that wide, whatever RADI says).
    let c = seq.agreement.consensus.as_ref().unwrap();
    assert!(c.low_us <= 307_000_000 && 307_000_000 <= c.high_us, "{c:?}");
    assert_eq!(s.offset_us, c.midpoint_us());
    // The radius covers both ends of the interval from the midpoint.
    assert!(s.offset_us - s.radius_us <= c.low_us && c.high_us <= s.offset_us + s.radius_us);
    assert!(s.radius_us - c.radius_us() <= 1, "{s:?} {c:?}");
    assert!(
        before <= s.at_us && s.at_us <= after,
        "{before} {s:?} {after}"
    );
    // The liar's answers are not the moment's source either: the moment is
    // one of an agreeing server's.
    let liar = 3;
    let latest_agreeing = seq
        .answers()
        .filter(|(e, _)| e.server != liar)
        .map(|(_, a)| a.local_midpoint_us)
        .max();
    assert_eq!(Some(s.at_us), latest_agreeing);
}

#[test]
fn no_consensus_no_sample() {
    let a = Fixture::start(FixtureConfig {
        seed: 5,
        ..FixtureConfig::default()
    });
    let b = Fixture::start(FixtureConfig {
        offset_us: 3_600_000_000,
        seed: 6,
        ..FixtureConfig::default()
    });
    let servers = [server(&a), server(&b)];
    let seq = Client::new(fast())
        .measure(
            &servers,
            &Plan {
                selection: Selection::All,
                passes: 1,
                assumption: None,
            },
        )
        .unwrap();
    assert!(seq.agreement.consensus.is_none());
    assert_eq!(Sample::of_sequence(&seq), None);
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-chrony-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SAMPLE: Sample = Sample {
    at_us: 1_791_158_400_000_000,
    offset_us: 12_345,
    radius_us: 2_999_999,
};

/// The bound chrony is told: SAMPLE is inside it.
const BOUND: Duration = Duration::from_secs(3);

#[test]
fn a_listening_socket_receives_the_encoded_datagram() {
    let dir = temp("deliver");
    let path = dir.join("refclock.sock");
    let chrony = UnixDatagram::bind(&path).unwrap();
    chrony
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sock = ChronySock::new(&path, BOUND, quiet());
    sock.send(&SAMPLE).unwrap();
    let mut buf = [0u8; 128];
    let n = chrony.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], SAMPLE.encode().unwrap().as_slice());
    let c = sock.counters();
    assert_eq!((c.sent(), c.failed()), (1, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log that keeps its lines.
fn recording() -> (Log, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let log: Log = Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string()));
    (log, lines)
}

fn quiet() -> Log {
    Arc::new(|_: &str| {})
}

#[test]
fn hostile_paths_are_counted_failures_that_never_block_and_are_logged_once() {
    let dir = temp("hostile");
    let file = dir.join("file");
    std::fs::File::create(&file)
        .unwrap()
        .write_all(b"not a socket")
        .unwrap();
    let cases = [
        (dir.join("missing.sock"), io::ErrorKind::NotFound),
        (file, io::ErrorKind::ConnectionRefused),
        (dir.clone(), io::ErrorKind::ConnectionRefused),
        // Longer than sun_path holds.
        (dir.join("x".repeat(200)), io::ErrorKind::InvalidInput),
    ];
    for (path, kind) in cases {
        let (log, lines) = recording();
        let mut sock = ChronySock::new(&path, BOUND, log);
        let t = Instant::now();
        for _ in 0..100 {
            let Err(NotSent::Io(e)) = sock.send(&SAMPLE) else {
                panic!("{} took a sample", path.display());
            };
            assert_eq!(e.kind(), kind, "{}", path.display());
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let c = sock.counters();
        assert_eq!((c.sent(), c.failed(), c.too_wide()), (0, 100, 0));
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 1, "{}: {lines:?}", path.display());
        assert!(lines[0].starts_with("warning: chrony:"), "{lines:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_socket_nobody_reads_fills_and_then_fails_at_once() {
    let dir = temp("unread");
    let path = dir.join("stuck.sock");
    let stuck = UnixDatagram::bind(&path).unwrap();
    // The receive queue holds a few hundred datagrams at most
    // (net.unix.max_dgram_qlen and the socket buffer); every send past
    // that must fail without waiting. In a thread, so a send that blocks
    // fails the test instead of hanging it.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (log, lines) = recording();
        let mut sock = ChronySock::new(&path, BOUND, log);
        for _ in 0..5_000 {
            let _ = sock.send(&SAMPLE);
        }
        let c = sock.counters();
        let lines = lines.lock().unwrap().clone();
        let _ = done.send((c.sent(), c.failed(), lines));
    });
    let (sent, failed, lines) = finished
        .recv_timeout(Duration::from_secs(30))
        .expect("5000 sends to a stuck socket did not return within 30 s");
    assert!(sent > 0);
    assert!(failed > 0, "{sent} sent");
    assert_eq!(sent + failed, 5_000);
    // Delivered, then stuck: two lines, not one per sample.
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[1].contains("not reading"), "{lines:?}");
    drop(stuck);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recovery_is_logged_once_when_chrony_appears() {
    let dir = temp("recover");
    let path = dir.join("later.sock");
    let (log, lines) = recording();
    let mut sock = ChronySock::new(&path, BOUND, log);
    assert!(sock.send(&SAMPLE).is_err());
    assert!(sock.send(&SAMPLE).is_err());
    let chrony = UnixDatagram::bind(&path).unwrap();
    sock.send(&SAMPLE).unwrap();
    sock.send(&SAMPLE).unwrap();
    let mut buf = [0u8; 64];
    chrony.set_nonblocking(true).unwrap();
    assert_eq!(chrony.recv(&mut buf).unwrap(), SAMPLE_LEN);
    let c = sock.counters();
    assert_eq!((c.sent(), c.failed()), (2, 2));
    let lines = lines.lock().unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("warning:"), "{lines:?}");
    assert!(lines[1].starts_with("chrony: sending"), "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sample_wider_than_the_bound_is_never_sent_and_is_counted_and_logged_once() {
    let dir = temp("wide");
    let path = dir.join("refclock.sock");
    let chrony = UnixDatagram::bind(&path).unwrap();
    chrony.set_nonblocking(true).unwrap();
    let (log, lines) = recording();
    let mut sock = ChronySock::new(&path, BOUND, log);
    // One µs over the bound, again and again: nothing reaches the socket.
    let wide = Sample {
        radius_us: 3_000_001,
        ..SAMPLE
    };
    for _ in 0..5 {
        match sock.send(&wide) {
            Err(NotSent::TooWide { radius_us, max_us }) => {
                assert_eq!((radius_us, max_us), (3_000_001, 3_000_000));
            }
            other => panic!("{other:?}"),
        }
    }
    let mut buf = [0u8; 64];
    let nothing = chrony.recv(&mut buf).unwrap_err();
    assert_eq!(nothing.kind(), io::ErrorKind::WouldBlock);
    let c = sock.counters();
    assert_eq!((c.sent(), c.failed(), c.too_wide()), (0, 0, 5));
    {
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("warning: chrony: not sending: the consensus radius ±3.000 s")
                && lines[0].contains(
                    "chrony-max-radius (3 s, the error the refclock's `delay 6` declares)"
                )
                && lines[0].contains("counted (1 so far)"),
            "{lines:?}"
        );
    }
    // Exactly the bound is sent, and said once; too wide again, said again.
    let edge = Sample {
        radius_us: 3_000_000,
        ..SAMPLE
    };
    sock.send(&edge).unwrap();
    sock.send(&edge).unwrap();
    assert!(sock.send(&wide).is_err());
    assert_eq!(chrony.recv(&mut buf).unwrap(), SAMPLE_LEN);
    assert_eq!(chrony.recv(&mut buf).unwrap(), SAMPLE_LEN);
    assert!(chrony.recv(&mut buf).is_err());
    assert_eq!((c.sent(), c.too_wide()), (2, 6));
    let lines = lines.lock().unwrap();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[1].starts_with("chrony: sending"), "{lines:?}");
    assert!(lines[2].contains("counted (6 so far)"), "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn settings(sock: &str, interval_s: u64, jitter: u8, max_radius_ms: u64) -> Settings {
    Settings {
        chrony_sock: Some(sock.into()),
        interval: Duration::from_secs(interval_s),
        jitter,
        chrony_max_radius: Duration::from_millis(max_radius_ms),
        ..Settings::default()
    }
}

/// The lines chrony.conf gets, without comments.
fn conf_lines(s: &Settings) -> Vec<String> {
    conf(s)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_chrony_conf_lines_declare_the_bound_and_poll_no_faster_than_the_rounds() {
    // The defaults: docs/SYNC.md's line.
    let d = Settings {
        chrony_sock: Some("/run/chrony.gnomon.sock".into()),
        ..Settings::default()
    };
    assert_eq!(
        conf_lines(&d),
        [
            "refclock SOCK /run/chrony.gnomon.sock refid RTIM poll 10 filter 1 delay 10",
            "maxdistance 10"
        ]
    );
    let poll_delay_max = |s: &Settings| {
        let l = conf_lines(s);
        let w: Vec<&str> = l[0].split_whitespace().collect();
        (w[6].to_string(), w[10].to_string(), l[1].clone())
    };
    // 1 s without jitter: every second; 64 s ± 10 % is up to 70.4 s: 128.
    // The longest interval with the most jitter, 1.5 d: 2^17 s.
    for (interval, jitter, poll) in [
        (1, 0, "0"),
        (1, 10, "1"),
        (64, 0, "6"),
        (64, 10, "7"),
        (86_400, 50, "17"),
    ] {
        let s = settings("/s", interval, jitter, 3000);
        assert_eq!(poll_delay_max(&s).0, poll, "{interval} s ± {jitter} %");
    }
    // delay is twice the bound; maxdistance twice too, never under 3 s.
    for (ms, delay, max) in [
        (1, "0.002", "maxdistance 3"),
        (1250, "2.5", "maxdistance 3"),
        (1500, "3", "maxdistance 3"),
        (20_000, "40", "maxdistance 40"),
        (3_600_000, "7200", "maxdistance 7200"),
    ] {
        let (_, d, m) = poll_delay_max(&settings("/s", 600, 10, ms));
        assert_eq!((d.as_str(), m.as_str()), (delay, max), "{ms} ms");
    }
    // No socket, or one chrony.conf cannot name: an error, no lines.
    assert!(conf(&Settings::default())
        .unwrap_err()
        .contains("no chrony-sock"));
    for bad in ["/run/two words.sock", "/run/a:b.sock", "/run/tab\t.sock"] {
        let e = conf(&settings(bad, 600, 10, 3000)).unwrap_err();
        assert!(e.contains("cannot be written in chrony.conf"), "{bad}: {e}");
    }
}
