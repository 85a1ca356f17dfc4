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
};

#[test]
fn a_listening_socket_receives_the_encoded_datagram() {
    let dir = temp("deliver");
    let path = dir.join("refclock.sock");
    let chrony = UnixDatagram::bind(&path).unwrap();
    chrony
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sock = ChronySock::new(&path, quiet());
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
        let mut sock = ChronySock::new(&path, log);
        let t = Instant::now();
        for _ in 0..100 {
            let e = sock.send(&SAMPLE).unwrap_err();
            assert_eq!(e.kind(), kind, "{}", path.display());
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let c = sock.counters();
        assert_eq!((c.sent(), c.failed()), (0, 100));
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
        let mut sock = ChronySock::new(&path, log);
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
    let mut sock = ChronySock::new(&path, log);
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
