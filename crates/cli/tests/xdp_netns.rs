//! `gnomon serve --xdp` for real: a server namespace and a client
//! namespace joined by a veth pair, the server's XDP program on its end
//! (`xs0`), every query sent from the client's end (`xc0`).
//!
//! Shown here: every version served over UDP is answered through the
//! AF_XDP path (the XDP frame counters rise by at least the answers) over
//! IPv4 and IPv6; a burst from one socket is all answered; forged,
//! garbage and badly checksummed frames are dropped, counted under their
//! reasons and never answered; TCP, ICMP (and ARP and neighbour discovery,
//! without which nothing would be answered) still reach the kernel, and so
//! do IPv4 with options and fragments, answered by the UDP sockets; the
//! program leaves the interface when the server exits, cleanly or killed,
//! and a restart attaches it again.
//!
//! Root and a kernel with AF_XDP and veth are needed; elsewhere each test
//! says SKIPPED and why. The client's end has its transmit checksum offload
//! turned off (`ethtool -K xc0 tx off`): over veth a datagram otherwise
//! crosses with its UDP checksum unfinished (the kernel trusts it, an
//! AF_XDP socket sees the bytes), where a frame from a real wire carries a
//! whole one.

mod fleet_support;
mod serve_support;

use std::collections::BTreeSet;
use std::io::{BufRead, ErrorKind};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use fleet_support::{ip_in, wait_bounded, Namespaces};
use gnomon_protocol::{verify_response, Profile, PROFILES};
use serve_support::peer::sigterm_and_wait;
use serve_support::{start_serve_via, Started};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

// The series this test reads, in one place: the XDP ones are new.
const FRAMES_RECEIVED: &str = "gnomon_xdp_frames_received_total";
const FRAMES_SENT: &str = "gnomon_xdp_frames_sent_total";
/// `gnomon_xdp_attached{interface="xs0",mode="native"|"generic",...} 1`.
const ATTACHED: &str = "gnomon_xdp_attached";
const REQUESTS: &str = "gnomon_requests_received_total";
const RESPONSES: &str = "gnomon_responses_total{";
const DROPPED: &str = "gnomon_dropped_total";
const BAD_CHECKSUM: &str = "frame_bad_checksum";
const SOURCE_LOOPBACK: &str = "source_loopback";
const SOURCE_BROADCAST: &str = "source_broadcast";
/// The reasons a payload that is not a request may be dropped under
/// (crates/server/src/stats.rs).
const PARSE_REASONS: &[&str] = &[
    "too_short",
    "framing",
    "malformed",
    "no_version",
    "bad_version_list",
    "unsupported_version",
    "no_nonce",
    "bad_type",
];

/// The server's end of the veth pair, and the client's.
const SERVER_IF: &str = "xs0";
const CLIENT_IF: &str = "xc0";
const SERVER4: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);
const CLIENT4: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
const SERVER6: &str = "fd77::1";
const CLIENT6: &str = "fd77::2";
/// The namespace is the test's own: a fixed port cannot clash.
const PORT: u16 = 2002;

/// Commands for this binary re-executed inside a namespace
/// (`xdp_netns_helper`).
const HELPER_ENV: &str = "GNOMON_XDP_NETNS_HELPER";
/// Development only: set, the server runs without `--xdp` (the socket
/// path) and every XDP-specific assertion is skipped and said so.
const WITHOUT_XDP_ENV: &str = "GNOMON_XDP_NETNS_WITHOUT_XDP";

/// Bounds every wait for something that should happen far sooner (the
/// machine is busy: the whole suite runs beside this).
const PATIENCE: Duration = Duration::from_secs(30);

fn server4() -> SocketAddr {
    (SERVER4, PORT).into()
}

fn server6() -> SocketAddr {
    (SERVER6.parse::<IpAddr>().unwrap(), PORT).into()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode_key(s: &str) -> [u8; 32] {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap()
        .try_into()
        .unwrap()
}

fn xdp_on() -> bool {
    std::env::var_os(WITHOUT_XDP_ENV).is_none()
}

/// Whether this kernel makes AF_XDP sockets (address family 44).
fn af_xdp_available() -> bool {
    Socket::new(Domain::from(44), Type::RAW, None).is_ok()
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The two namespaces and the veth pair between them, deleted when the
/// test ends (the veth goes with its namespace).
struct Net {
    ns: Namespaces,
    tag: String,
}

impl Net {
    fn server(&self) -> String {
        self.ns.name(&format!("s{}", self.tag))
    }

    fn client(&self) -> String {
        self.ns.name(&format!("c{}", self.tag))
    }

    /// The network for test `test` (`tag` keeps its namespaces apart from
    /// the other tests' of this run), or `None` after saying SKIPPED and
    /// why.
    fn build(test: &str, tag: &str) -> Option<Net> {
        let test = format!("xdp_netns::{test}");
        if !gnomon_testkit::is_root() {
            gnomon_testkit::skip(&test, "network namespaces and XDP need root");
            return None;
        }
        if !af_xdp_available() {
            gnomon_testkit::skip(&test, "this kernel has no AF_XDP sockets");
            return None;
        }
        if !have("ethtool") {
            gnomon_testkit::skip(
                &test,
                "no ethtool: the client's veth end would send unfinished UDP checksums",
            );
            return None;
        }
        let roles = [format!("s{tag}"), format!("c{tag}")];
        let Some(ns) = Namespaces::create(&[&roles[0], &roles[1]]) else {
            gnomon_testkit::skip(&test, "`ip netns add` fails here");
            return None;
        };
        let net = Net {
            ns,
            tag: tag.to_owned(),
        };
        let (s, c) = (net.server(), net.client());
        if !fleet_support::ip(&[
            "-n", &s, "link", "add", SERVER_IF, "type", "veth", "peer", "name", CLIENT_IF, "netns",
            &c,
        ]) {
            gnomon_testkit::skip(&test, "cannot make a veth pair between namespaces");
            return None;
        }
        for (ns, dev, v4, v6) in [
            (&s, SERVER_IF, SERVER4, SERVER6),
            (&c, CLIENT_IF, CLIENT4, CLIENT6),
        ] {
            ip_in(ns, "link set lo up");
            ip_in(ns, &format!("addr add {v4}/24 dev {dev}"));
            // nodad: usable at once, not after duplicate detection.
            ip_in(ns, &format!("addr add {v6}/64 dev {dev} nodad"));
            ip_in(ns, &format!("link set {dev} up"));
        }
        // A forged source must not become the sender address of the
        // client's ARP request (127.0.0.1 is the client's own, and the
        // server ignores a request from it): ask from the link's address.
        fleet_support::sysctl_in(&c, "net.ipv4.conf.all.arp_announce=2");
        let out = run_bounded(
            Command::new("ip").args(["netns", "exec", &c, "ethtool", "-K", CLIENT_IF, "tx", "off"]),
            PATIENCE,
        );
        assert!(
            out.status.success(),
            "ethtool -K {CLIENT_IF} tx off: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(net)
    }

    /// `gnomon serve` in the server namespace on both addresses, with XDP
    /// on the server's end (unless developing without it), metrics on the
    /// namespace's loopback.
    fn serve(&self) -> Server {
        self.serve_with(false)
    }

    /// [`Net::serve`], XDP asked for by `--xdp` or (`by_env`) by
    /// `GNOMON_XDP`.
    fn serve_with(&self, by_env: bool) -> Server {
        let s = self.server();
        let six = format!("[{SERVER6}]:{PORT}");
        let mut extra = vec![
            "--listen",
            &six,
            "--metrics",
            "127.0.0.1:0",
            "--clock-unsynchronized",
            "answer-with-radius",
            // The one client sends bursts: no rate limit on it.
            "--limit-allow",
            "10.77.1.0/24",
            "--limit-allow",
            "fd77::/64",
        ];
        if xdp_on() && !by_env {
            extra.extend(["--xdp", SERVER_IF]);
        }
        let started = start_serve_via(
            &["ip", "netns", "exec", &s],
            &server4().to_string(),
            &extra,
            |cmd| {
                if xdp_on() && by_env {
                    cmd.env("GNOMON_XDP", SERVER_IF);
                }
            },
        );
        Server::new(started, s)
    }

    /// Run `gnomon` with `args` in the client namespace, bounded.
    fn gnomon_in_client(&self, args: &[&str]) -> Output {
        let c = self.client();
        let mut cmd = serve_support::gnomon_via(&["ip", "netns", "exec", &c]);
        cmd.args(args);
        run_bounded(&mut cmd, PATIENCE * 2)
    }

    /// `gnomon query ADDR --key K --json` plus `args`, from the client
    /// namespace: its JSON, the command having succeeded.
    fn query(&self, to: SocketAddr, public: &[u8; 32], args: &[&str]) -> serde_json::Value {
        let key = b64(public);
        let to = to.to_string();
        let mut all = vec!["query", &to, "--key", &key, "--json"];
        all.extend(args);
        let out = self.gnomon_in_client(&all);
        assert!(
            out.status.success(),
            "gnomon {all:?} in {}: {}\n{}",
            self.client(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// Run this test binary's `xdp_netns_helper` in namespace `ns` with
    /// `command`: what it printed, it having passed.
    fn helper(&self, ns: &str, command: &str) -> String {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns])
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "xdp_netns_helper",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(HELPER_ENV, command);
        let out = run_bounded(&mut cmd, PATIENCE * 2);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() && said.contains("test result: ok. 1 passed"),
            "the helper in {ns} ({command}) failed:\n{said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        said
    }

    /// `ip -n S link show xs0`.
    fn link_show(&self) -> String {
        let out = run_bounded(
            Command::new("ip").args(["-n", &self.server(), "link", "show", SERVER_IF]),
            PATIENCE,
        );
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait (bounded) until an XDP program is on the server's end, or
    /// (`on` false) until none is; panics past `PATIENCE`.
    fn wait_program(&self, on: bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let shown = self.link_show();
            // `prog/xdp` native, `prog/xdpgeneric` generic.
            if shown.contains("prog/xdp") == on {
                return shown;
            }
            assert!(
                Instant::now() < deadline,
                "after {PATIENCE:?} the XDP program is {}:\n{shown}",
                if on {
                    "still not attached"
                } else {
                    "still attached"
                }
            );
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }
}

/// Run `cmd` (output piped) for at most `limit`, killing it past that.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    wait_bounded(&mut child, limit)
}

/// A `gnomon serve` in the server namespace, killed when the test ends
/// (passing or not); its log drained on a thread, kept for messages.
struct Server {
    child: Child,
    public: [u8; 32],
    /// Its metrics endpoint, inside the namespace.
    metrics: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    ns: String,
}

impl Server {
    fn new(started: Started, ns: String) -> Server {
        let Started {
            child,
            public,
            metrics,
            stderr,
            startup,
            ..
        } = started;
        let log = Arc::new(Mutex::new(startup));
        // The rest of its stderr, read so it can never block on a full pipe.
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line + "\n");
            }
        });
        Server {
            child,
            public,
            metrics: metrics.expect("the server says where its metrics are"),
            log,
            ns,
        }
    }

    fn logged(&self) -> String {
        self.log.lock().unwrap().concat()
    }

    /// Panics (with its log) if the server has exited.
    fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the server exited ({status}):\n{}", self.logged());
        }
    }

    /// SIGTERM, and a clean exit within `PATIENCE`.
    fn terminate(&mut self) {
        self.assert_alive();
        let (status, _) = sigterm_and_wait(&mut self.child, PATIENCE)
            .unwrap_or_else(|| panic!("no exit within {PATIENCE:?} of SIGTERM"));
        assert!(status.success(), "{status}: {}", self.logged());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of the sample line `series value` (name and labels exactly).
fn find_sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))?
        .trim()
        .parse::<f64>()
        .ok()
        .map(|v| v as u64)
}

fn dropped_series(reason: &str) -> String {
    format!("{DROPPED}{{reason=\"{reason}\"}}")
}

/// A drop counter; 0 when the reason has not been seen yet.
fn dropped(text: &str, reason: &str) -> u64 {
    find_sample(text, &dropped_series(reason)).unwrap_or(0)
}

/// The sum over every series starting `prefix` (a name and `{`).
fn sum_of(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The XDP attachment gauge for the server's end, if it reads 1: its
/// labels (`mode="native"`, ...).
fn attached_mode(text: &str) -> Option<String> {
    let interface = format!("interface=\"{SERVER_IF}\"");
    text.lines().find_map(|l| {
        let (labels, value) = l
            .strip_prefix(ATTACHED)?
            .strip_prefix('{')?
            .split_once("} ")?;
        let on = value.trim().parse::<f64>().ok()? == 1.0;
        (on && labels.split(',').any(|kv| kv == interface)).then(|| labels.to_owned())
    })
}

impl Net {
    /// The server's metrics page now, read from inside its namespace.
    fn metrics(&self, server: &Server) -> String {
        let at = server.metrics;
        let said = self.helper(&server.ns, &format!("metrics {at}"));
        let (_, page) = said
            .split_once("METRICS-BEGIN\n")
            .unwrap_or_else(|| panic!("no page in:\n{said}"));
        let (page, _) = page.split_once("METRICS-END").unwrap();
        page.to_owned()
    }

    /// Poll the metrics (bounded) until `done` holds: the page.
    fn wait_metrics(&self, server: &mut Server, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            server.assert_alive();
            let page = self.metrics(server);
            if done(&page) {
                return page;
            }
            assert!(
                Instant::now() < deadline,
                "waiting {PATIENCE:?} for {what}:\n{page}\nserver log:\n{}",
                server.logged()
            );
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }

    /// Wait until the server reports XDP attached (or, without XDP, until
    /// it serves metrics); the page.
    fn wait_attached(&self, server: &mut Server) -> String {
        if !xdp_on() {
            return self.wait_metrics(server, "metrics", |m| m.contains(REQUESTS));
        }
        let page = self.wait_metrics(server, "XDP attached", |m| attached_mode(m).is_some());
        eprintln!("XDP attached: {}", attached_mode(&page).unwrap());
        page
    }
}

/// Skip (saying so) an XDP-specific assertion when developing without
/// XDP; true when it should run.
fn xdp_check(test: &str, what: &str) -> bool {
    if xdp_on() {
        return true;
    }
    gnomon_testkit::skip(
        &format!("xdp_netns::{test}"),
        &format!("{WITHOUT_XDP_ENV} set: not checked: {what}"),
    );
    false
}

#[test]
fn every_udp_version_is_answered_through_xdp_over_ipv4_and_ipv6() {
    let test = "every_udp_version_is_answered_through_xdp_over_ipv4_and_ipv6";
    let Some(net) = Net::build(test, "v") else {
        return;
    };
    let mut server = net.serve();
    let before = net.wait_attached(&mut server);
    if xdp_check(test, "the program on the link") {
        net.wait_program(true);
    }
    let public = server.public;
    let mut answers = 0u64;
    // ML-DSA-44's version is TCP only (pq_serve.rs); the rest are asked
    // over UDP, one version at a time.
    for p in PROFILES.iter().filter(|p| p.udp) {
        for to in [server4(), server6()] {
            let j = net.query(to, &public, &["--version", p.name, "--udp-only"]);
            assert_eq!(j["version"]["name"], p.name, "{to}: {j}");
            assert_eq!(j["transport"], "udp", "{to}: {j}");
            answers += 1;
        }
    }
    assert!(answers >= 8, "{answers} versions over UDP");
    server.assert_alive();
    let page = net.wait_metrics(&mut server, "every answer counted", |m| {
        sum_of(m, RESPONSES) >= sum_of(&before, RESPONSES) + answers
    });
    if xdp_check(test, "the answers went through AF_XDP") {
        let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
        let received = |m: &str| find_sample(m, FRAMES_RECEIVED).unwrap_or(0);
        let page = net.wait_metrics(&mut server, "the XDP frame counters", |m| {
            sent(m) >= sent(&before) + answers && received(m) >= received(&before) + answers
        });
        eprintln!(
            "{answers} answers; XDP frames received {}, sent {}",
            received(&page),
            sent(&page)
        );
        // And none by the sockets: every response counted went out as an
        // XDP frame (a retried query's too).
        let responses = |m: &str| sum_of(m, RESPONSES);
        net.wait_metrics(&mut server, "as many frames sent as responses", |m| {
            sent(m) - sent(&before) == responses(m) - responses(&before)
        });
    }
    drop(page);
    server.terminate();
}

#[test]
fn a_burst_from_one_socket_is_all_answered_through_xdp() {
    let test = "a_burst_from_one_socket_is_all_answered_through_xdp";
    let Some(net) = Net::build(test, "b") else {
        return;
    };
    let mut server = net.serve();
    let before = net.wait_attached(&mut server);
    let key = b64(&server.public);
    let burst = 64u64;
    for to in [server4(), server6()] {
        let said = net.helper(&net.client(), &format!("burst {to} {burst} {key}"));
        assert!(
            said.contains(&format!("BURST answered {burst} of {burst}")),
            "{to}: {said}"
        );
    }
    if xdp_check(test, "the burst went through AF_XDP") {
        let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
        net.wait_metrics(&mut server, "the burst's frames sent", |m| {
            sent(m) >= sent(&before) + 2 * burst
        });
    }
    server.assert_alive();
}

/// What the client's helper sends in `hostile_frames_...`, the reason the
/// server must count it under, and whether that needs XDP (the kernel
/// drops it before any socket otherwise).
const HOSTILE: &[(&str, &[&str], bool)] = &[
    ("spoof-loopback", &[SOURCE_LOOPBACK], true),
    ("spoof-broadcast", &[SOURCE_BROADCAST], true),
    ("garbage", PARSE_REASONS, false),
    ("bad-checksum", &[BAD_CHECKSUM], true),
    ("bad-checksum6", &[BAD_CHECKSUM], true),
];

#[test]
fn hostile_frames_are_dropped_counted_and_never_answered() {
    let test = "hostile_frames_are_dropped_counted_and_never_answered";
    let Some(net) = Net::build(test, "h") else {
        return;
    };
    let mut server = net.serve();
    net.wait_attached(&mut server);
    let key = b64(&server.public);
    for (kind, reasons, needs_xdp) in HOSTILE {
        let before = net.metrics(&server);
        let count = |m: &str| reasons.iter().map(|r| dropped(m, r)).sum::<u64>();
        // The helper sends the frame, then (where it can hear a reply) a
        // valid request behind it from the same flow, and fails on any
        // answer but the probe's.
        let said = net.helper(&net.client(), &format!("{kind} {key}"));
        assert!(said.contains("HOSTILE sent"), "{kind}: {said}");
        // Without XDP the kernel drops these before any socket: nothing
        // to count.
        if *needs_xdp && !xdp_check(test, &format!("{kind} counted")) {
            continue;
        }
        let page = net.wait_metrics(&mut server, &format!("{kind} counted"), |m| {
            count(m) > count(&before)
        });
        assert_eq!(count(&page), count(&before) + 1, "{kind}: {page}");
        // Answers: the probe's only, if the helper sent one.
        let probes = u64::from(said.contains("PROBE answered"));
        let page = net.wait_metrics(&mut server, "the probe counted", |m| {
            sum_of(m, RESPONSES) >= sum_of(&before, RESPONSES) + probes
        });
        assert_eq!(
            sum_of(&page, RESPONSES),
            sum_of(&before, RESPONSES) + probes,
            "{kind} was answered: {page}"
        );
        if xdp_on() {
            let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
            assert_eq!(sent(&page), sent(&before) + probes, "{kind}: {page}");
        }
        server.assert_alive();
    }
    // Still serving.
    net.query(server4(), &server.public, &["--udp-only"]);
}

#[test]
fn tcp_icmp_and_what_the_program_passes_still_reach_the_kernel() {
    let test = "tcp_icmp_and_what_the_program_passes_still_reach_the_kernel";
    let Some(net) = Net::build(test, "k") else {
        return;
    };
    let mut server = net.serve();
    let before = net.wait_attached(&mut server);
    let public = server.public;
    for to in [server4(), server6()] {
        let j = net.query(to, &public, &["--tcp"]);
        assert_eq!(j["transport"], "tcp", "{to}: {j}");
    }
    let said = net.helper(&net.client(), &format!("ping {SERVER4}"));
    assert!(said.contains("PING reply"), "{said}");
    // UDP the program leaves to the kernel: IPv4 with options, and a
    // request in two fragments. The server's UDP sockets answer them.
    let key = b64(&public);
    for kind in ["ip-options", "fragments"] {
        let said = net.helper(&net.client(), &format!("{kind} {key}"));
        assert!(said.contains(&format!("ANSWERED {kind}")), "{said}");
    }
    if xdp_check(test, "none of it went through AF_XDP") {
        let page = net.wait_metrics(&mut server, "the sockets' answers counted", |m| {
            sum_of(m, RESPONSES) >= sum_of(&before, RESPONSES) + 2
        });
        for series in [FRAMES_RECEIVED, FRAMES_SENT] {
            assert_eq!(
                find_sample(&page, series),
                find_sample(&before, series),
                "{series}: {page}"
            );
        }
    }
    server.terminate();
}

#[test]
fn the_program_leaves_with_the_server_on_sigterm_and_sigkill() {
    let test = "the_program_leaves_with_the_server_on_sigterm_and_sigkill";
    let Some(net) = Net::build(test, "l") else {
        return;
    };
    let checks = xdp_check(test, "the program on the link");
    let answered = |server: &mut Server| {
        net.wait_attached(server);
        if checks {
            net.wait_program(true);
        }
        net.query(server4(), &server.public, &["--udp-only"]);
    };

    // SIGTERM: a clean exit, and the link has no program.
    let mut server = net.serve();
    answered(&mut server);
    server.terminate();
    if checks {
        net.wait_program(false);
    }
    drop(server);

    // SIGKILL: no chance to detach, yet the program goes with the last
    // descriptor of its link.
    let mut server = net.serve();
    answered(&mut server);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    if checks {
        net.wait_program(false);
    }
    drop(server);

    // And a restart attaches and answers again (XDP asked for through
    // the environment this time).
    let mut server = net.serve_with(true);
    answered(&mut server);
    server.terminate();
    if checks {
        net.wait_program(false);
    }
}

// ---------------------------------------------------------------------
// Inside a namespace.

/// Run inside a namespace by the tests above, told what to do by
/// `HELPER_ENV`: `metrics ADDR`, `burst ADDR N KEY`, `spoof-loopback KEY`,
/// `spoof-broadcast KEY`, `garbage KEY`, `bad-checksum KEY`,
/// `bad-checksum6 KEY`, `ping ADDR`, `ip-options KEY`, `fragments KEY`.
#[test]
#[ignore = "run inside a network namespace by the xdp_netns tests"]
fn xdp_netns_helper() {
    let command = std::env::var(HELPER_ENV).expect("started by an xdp_netns test");
    let words: Vec<&str> = command.split_whitespace().collect();
    match words[..] {
        ["metrics", at] => {
            let page = serve_support::peer::get(at.parse().unwrap(), "/metrics");
            println!("METRICS-BEGIN\n{page}\nMETRICS-END");
        }
        ["burst", to, n, key] => burst(to.parse().unwrap(), n.parse().unwrap(), &decode_key(key)),
        ["spoof-loopback", _] => spoof((Ipv4Addr::LOCALHOST, 2000).into()),
        ["spoof-broadcast", _] => spoof((Ipv4Addr::new(10, 77, 1, 255), 2000).into()),
        ["spoof-from", from] => spoof(from.parse().unwrap()),
        ["garbage", key] => garbage(&decode_key(key)),
        ["bad-checksum", key] => bad_checksum(server4(), &decode_key(key)),
        ["bad-checksum6", key] => bad_checksum(server6(), &decode_key(key)),
        ["ping", to] => ping(to.parse().unwrap()),
        [kind @ ("ip-options" | "fragments"), key] => passed_to_kernel(kind, &decode_key(key)),
        _ => panic!("unknown helper command {command:?}"),
    }
}

/// A socket in the client namespace for talking to `to`.
fn client_socket(to: SocketAddr) -> UdpSocket {
    let bind: SocketAddr = match to {
        SocketAddr::V4(_) => (CLIENT4, 0).into(),
        SocketAddr::V6(_) => (CLIENT6.parse::<IpAddr>().unwrap(), 0).into(),
    };
    let sock = UdpSocket::bind(bind).unwrap();
    sock.connect(to).unwrap();
    sock
}

/// `n` requests sent back to back from one socket, then every answer
/// awaited (bounded): each must verify against its own request.
fn burst(to: SocketAddr, n: u64, public: &[u8; 32]) {
    let sock = client_socket(to);
    let requests: Vec<Vec<u8>> = (0..n)
        .map(|i| gnomon_testkit::request(Profile::rfc(), 0xb0_0000 + i))
        .collect();
    for r in &requests {
        sock.send(r).unwrap();
    }
    let deadline = Instant::now() + PATIENCE;
    let mut answered = BTreeSet::new();
    let mut buf = [0u8; 2048];
    while (answered.len() as u64) < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        sock.set_read_timeout(Some(left)).unwrap();
        match sock.recv(&mut buf) {
            Ok(len) => {
                let which = requests
                    .iter()
                    .position(|r| verify_response(r, &buf[..len], public).is_ok())
                    .unwrap_or_else(|| panic!("an answer ({len} bytes) to none of the burst"));
                assert!(answered.insert(which), "request {which} answered twice");
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("recv: {e}"),
        }
    }
    println!("BURST answered {} of {n}", answered.len());
}

/// The UDP checksum (RFC 768) of the datagram in an IPv4 or IPv6 packet
/// built by `gnomon_testkit::raw::packet`, written into it.
fn fill_udp_checksum(packet: &mut [u8]) {
    let (pseudo_head, udp_at) = if packet[0] >> 4 == 4 {
        (packet[12..20].to_vec(), 20)
    } else {
        (packet[8..40].to_vec(), 40)
    };
    let len = packet.len() - udp_at;
    packet[udp_at + 6..udp_at + 8].copy_from_slice(&[0, 0]);
    let mut pseudo = pseudo_head;
    pseudo.extend_from_slice(&(len as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&packet[udp_at..]);
    let mut sum: u32 = pseudo
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = match !(sum as u16) {
        0 => 0xffff,
        c => c,
    };
    packet[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
}

/// Send a whole IP packet (its own header) towards `to`.
fn send_raw(to: SocketAddr, packet: &[u8]) {
    let domain = if to.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    // IPPROTO_RAW: the packet carries its own IP header.
    let raw = Socket::new(domain, Type::RAW, Some(Protocol::from(255))).unwrap();
    raw.send_to(packet, &SockAddr::from(SocketAddr::new(to.ip(), 0)))
        .unwrap_or_else(|e| panic!("raw send to {to}: {e}"));
}

/// A valid request from a forged `from`, its checksums right. The answer
/// would go to `from`, not here: the metrics say whether there was one.
fn spoof(from: SocketAddr) {
    let mut packet =
        gnomon_testkit::raw::packet(from, server4(), &gnomon_testkit::request(Profile::rfc(), 7));
    fill_udp_checksum(&mut packet);
    send_raw(server4(), &packet);
    println!("HOSTILE sent");
}

/// After whatever `sock` caused, a valid request from it: the next
/// datagram must be its answer, and nothing else may follow.
fn probe(sock: &UdpSocket, public: &[u8; 32]) {
    let probe = gnomon_testkit::request(Profile::rfc(), 0x9e0be);
    sock.send(&probe).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 2048];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no answer to the probe: {e}"));
    verify_response(&probe, &buf[..n], public).unwrap_or_else(|e| {
        panic!("the first datagram back ({n} bytes) is not the probe's answer: {e:?}")
    });
    sock.set_nonblocking(true).unwrap();
    if let Ok(n) = sock.recv(&mut buf) {
        panic!("a {n}-byte datagram after the probe's answer");
    }
    println!("PROBE answered");
}

/// Noise for a payload, from an ordinary socket, then a probe.
fn garbage(public: &[u8; 32]) {
    let sock = client_socket(server4());
    sock.send(&gnomon_testkit::noise(0x6a7b, 1024)).unwrap();
    println!("HOSTILE sent");
    probe(&sock, public);
}

/// A valid request from this namespace's own socket's address and port,
/// its UDP checksum wrong, then a probe from that socket.
fn bad_checksum(to: SocketAddr, public: &[u8; 32]) {
    let sock = client_socket(to);
    let from = sock.local_addr().unwrap();
    let mut packet =
        gnomon_testkit::raw::packet(from, to, &gnomon_testkit::request(Profile::rfc(), 8));
    fill_udp_checksum(&mut packet);
    let at = if to.is_ipv4() { 20 + 6 } else { 40 + 6 };
    packet[at] ^= 0x5a;
    send_raw(to, &packet);
    println!("HOSTILE sent");
    probe(&sock, public);
}

/// A valid request from this namespace's own socket, sent raw as IPv4
/// with options (`ip-options`) or in two fragments (`fragments`): the
/// answer must come back to the socket.
fn passed_to_kernel(kind: &str, public: &[u8; 32]) {
    let to = server4();
    let sock = client_socket(to);
    let request = gnomon_testkit::request(Profile::rfc(), 0x0b7);
    let mut packet = gnomon_testkit::raw::packet(sock.local_addr().unwrap(), to, &request);
    fill_udp_checksum(&mut packet);
    let packets = match kind {
        "ip-options" => vec![with_options(&packet)],
        _ => fragments(&packet),
    };
    for p in &packets {
        send_raw(to, p);
    }
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 2048];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("{kind}: no answer: {e}"));
    verify_response(&request, &buf[..n], public)
        .unwrap_or_else(|e| panic!("{kind}: the answer does not verify: {e:?}"));
    println!("ANSWERED {kind}");
}

/// The IPv4 header checksum of `packet`, written into it.
fn fill_ip_checksum(packet: &mut [u8]) {
    let ihl = usize::from(packet[0] & 0x0f) * 4;
    packet[10..12].copy_from_slice(&[0, 0]);
    let sum = internet_checksum(&packet[..ihl]);
    packet[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// `packet` (IPv4, no options) with four bytes of options: NOP, NOP, NOP,
/// end of list.
fn with_options(packet: &[u8]) -> Vec<u8> {
    let mut p = packet[..20].to_vec();
    p.extend_from_slice(&[1, 1, 1, 0]);
    p.extend_from_slice(&packet[20..]);
    p[0] = 0x46;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    fill_ip_checksum(&mut p);
    p
}

/// `packet` (IPv4, no options) as two fragments, the first of 512 bytes.
fn fragments(packet: &[u8]) -> Vec<Vec<u8>> {
    let (head, body) = packet.split_at(20);
    let cut = 512;
    [(0, &body[..cut], true), (cut, &body[cut..], false)]
        .iter()
        .map(|(offset, part, more)| {
            let mut p = head.to_vec();
            p[4..6].copy_from_slice(&0x4a4bu16.to_be_bytes());
            let flags = (offset / 8) as u16 | if *more { 0x2000 } else { 0 };
            p[6..8].copy_from_slice(&flags.to_be_bytes());
            p[2..4].copy_from_slice(&((20 + part.len()) as u16).to_be_bytes());
            p.extend_from_slice(part);
            fill_ip_checksum(&mut p);
            p
        })
        .collect()
}

/// ICMP echo to `to` from a raw socket, until a matching reply (bounded).
fn ping(to: Ipv4Addr) {
    let raw = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)).unwrap();
    // Any datagram socket's calls serve a raw one (recvfrom, sendto).
    let sock: UdpSocket = raw.into();
    let id = std::process::id() as u16;
    let deadline = Instant::now() + PATIENCE;
    let mut seq = 0u16;
    let mut buf = [0u8; 2048];
    while Instant::now() < deadline {
        seq += 1;
        let mut echo = vec![8, 0, 0, 0];
        echo.extend_from_slice(&id.to_be_bytes());
        echo.extend_from_slice(&seq.to_be_bytes());
        echo.extend_from_slice(b"gnomon xdp_netns");
        let sum = internet_checksum(&echo);
        echo[2..4].copy_from_slice(&sum.to_be_bytes());
        sock.send_to(&echo, (to, 0)).unwrap();
        // Two seconds per try, as `ping -W 2`.
        let try_until = Instant::now() + Duration::from_secs(2);
        while let Some(left) = try_until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        {
            sock.set_read_timeout(Some(left)).unwrap();
            let Ok((n, _)) = sock.recv_from(&mut buf) else {
                break;
            };
            // A raw ICMP socket gets the IP header too.
            let got = &buf[..n];
            let ihl = usize::from(got[0] & 0x0f) * 4;
            let icmp = &got[ihl..];
            if got[12..16] == to.octets()
                && icmp.len() >= 8
                && icmp[0] == 0
                && icmp[4..6] == id.to_be_bytes()
                && icmp[6..8] == seq.to_be_bytes()
            {
                println!("PING reply from {to}, seq {seq}");
                return;
            }
        }
    }
    panic!("no echo reply from {to} in {PATIENCE:?}");
}

fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
