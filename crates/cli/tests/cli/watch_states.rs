//! `gnomon watch` says each change of a server's state, once, as chrony
//! and ntpd-rs log a source that changes (issue 36): a server that goes
//! ok → down → ok, then lies and comes back, is told in one line per
//! change, naming it, the state before and after, and why.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gnomon_testkit::{base64, Fixture, FixtureConfig};

use crate::service_logs::is_text_line;
use crate::sync_support::{list_entry, tempdir, write_list};
use crate::watch_support::Watch;

/// How the changing server's lines begin.
const CHANGER: &str = "server \"changer\": ";

/// Generous: a round takes a few seconds when a server is silent.
const PATIENCE: Duration = Duration::from_secs(120);

/// A UDP relay in front of one server address at a time, or none (then
/// it drops every request): one listed server whose answers the test
/// turns honest, silent or lying at will, always under the same key.
struct Switch {
    addr: SocketAddr,
    to: Arc<Mutex<Option<SocketAddr>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Switch {
    fn start(to: SocketAddr) -> Switch {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        // A backstop for the stop flag, not a synchronisation.
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let to = Arc::new(Mutex::new(Some(to)));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (to, stop) = (to.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65_536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, client)) = socket.recv_from(&mut buf) else {
                        continue;
                    };
                    let Some(server) = *to.lock().unwrap() else {
                        continue;
                    };
                    let request = buf[..n].to_vec();
                    let back = socket.try_clone().unwrap();
                    // Each request on a socket of its own, so that the
                    // answer is told apart from others in flight.
                    std::thread::spawn(move || {
                        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                        let mut answer = [0u8; 65_536];
                        if s.send_to(&request, server).is_ok() {
                            if let Ok(n) = s.recv(&mut answer) {
                                let _ = back.send_to(&answer[..n], client);
                            }
                        }
                    });
                }
            })
        };
        Switch {
            addr,
            to,
            stop,
            thread: Some(thread),
        }
    }

    fn set(&self, to: Option<SocketAddr>) {
        *self.to.lock().unwrap() = to;
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The first log line of `watch` from `from` on about the changer that
/// contains `needle`, within [`PATIENCE`]: its index.
fn line_after(watch: &Watch, from: usize, needle: &str) -> usize {
    let until = Instant::now() + PATIENCE;
    loop {
        let log = watch.log();
        let found = log
            .iter()
            .skip(from)
            .position(|l| l.contains(CHANGER) && l.contains(needle));
        if let Some(i) = found {
            return from + i;
        }
        assert!(
            Instant::now() < until,
            "no {needle:?} within {PATIENCE:?}: {log:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn watch_says_each_change_of_a_servers_state_once() {
    let profiles = gnomon_testkit::modern_profiles();
    let honest: Vec<Fixture> = (61..64).map(|s| Fixture::honest(profiles, s)).collect();
    // One key, two faces: the truth and an hour ahead.
    let truthful = Fixture::honest(profiles, 64);
    let lying = Fixture::start(FixtureConfig {
        profiles,
        seed: 64,
        offset_us: 3_600_000_000,
        ..FixtureConfig::default()
    });
    let switch = Switch::start(truthful.addr());
    let dir = tempdir("watch-states");
    let list = dir.join("servers.json");
    let key = base64(truthful.long_term_key().bytes());
    let mut entries: Vec<String> = honest
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let addr = f.addr().to_string();
            list_entry(
                &format!("honest-{i}"),
                "ed25519",
                &base64(f.long_term_key().bytes()),
                1,
                Some(addr.as_str()),
                Some(addr.as_str()),
            )
        })
        .collect();
    let at = switch.addr.to_string();
    entries.push(list_entry(
        "changer",
        "ed25519",
        &key,
        1,
        Some(at.as_str()),
        None,
    ));
    write_list(&list, &entries);

    let mut watch = Watch::start(&list);
    // A round under way when the switch turns may see the server half
    // one way and half the other (a `warning` between two states): each
    // wait is for the state, whatever it came from.
    let first = line_after(&watch, 0, "ok: answers in ");
    switch.set(None);
    let down = line_after(&watch, first, " → down: ");
    switch.set(Some(truthful.addr()));
    let up = line_after(&watch, down, " → ok: ");
    switch.set(Some(lying.addr()));
    let lie = line_after(&watch, up, " → lying: its interval misses the consensus");
    switch.set(Some(truthful.addr()));
    line_after(&watch, lie, " → ok: ");
    let status = watch.terminate(PATIENCE);
    assert!(status.success(), "{status}");

    let log = watch.log();
    assert!(log[down].contains("no answer"), "{}", log[down]);
    // The liar's offset from the consensus: an hour.
    assert!(log[lie].contains("offset +3600"), "{}", log[lie]);
    // One line per change, however many rounds each state lasted: each
    // line starts from the state the one before ended in, and changes it.
    let changes: Vec<(Option<String>, String, &String)> = log
        .iter()
        .filter_map(|l| {
            let (_, rest) = l.split_once(CHANGER)?;
            let (states, _) = rest.split_once(": ")?;
            Some(match states.split_once(" → ") {
                Some((from, to)) => (Some(from.to_string()), to.to_string(), l),
                None => (None, states.to_string(), l),
            })
        })
        .collect();
    assert_eq!(changes[0].0, None, "{changes:#?}");
    for pair in changes.windows(2) {
        assert_eq!(pair[1].0.as_ref(), Some(&pair[0].1), "{changes:#?}");
        assert_ne!(pair[1].1, pair[0].1, "{changes:#?}");
    }
    let mut wanted = ["ok", "down", "ok", "lying", "ok"].into_iter().peekable();
    for (_, to, line) in &changes {
        wanted.next_if(|w| w == to);
        assert!(is_text_line(line), "{line}");
        let level = if to == "ok" { " INFO " } else { " WARN " };
        assert!(line.contains(level), "{line}");
    }
    assert_eq!(wanted.next(), None, "{changes:#?}");
    let _ = std::fs::remove_dir_all(dir);
}
