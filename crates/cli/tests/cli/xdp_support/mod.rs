//! The network of crates/cli/tests/cli/xdp_netns.rs: two namespaces joined
//! by a veth pair, a `gnomon serve --xdp` in one, and this test binary
//! re-executed in either to act there (`inside`).
#![allow(dead_code, unreachable_pub)]

use std::io::BufRead;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use socket2::{Domain, Socket, Type};

use crate::fleet_support::{self, ip_in, wait_bounded, Namespaces};
use crate::serve_support::peer::sigterm_and_wait;
use crate::serve_support::{self, Started};

pub mod inside;
pub mod link;

/// The server's end of the veth pair, and the client's.
pub const SERVER_IF: &str = "xs0";
pub const CLIENT_IF: &str = "xc0";
pub const SERVER4: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);
pub const CLIENT4: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
pub const SERVER6: &str = "fd77::1";
pub const CLIENT6: &str = "fd77::2";
/// The namespace is the test's own: a fixed port cannot clash.
pub const PORT: u16 = 2002;

/// Commands for this binary re-executed inside a namespace
/// (`xdp_netns_helper`).
pub const HELPER_ENV: &str = "GNOMON_XDP_NETNS_HELPER";
/// Development only: set, the server runs without `--xdp` (the socket
/// path) and every XDP-specific assertion is skipped and said so.
pub const WITHOUT_XDP_ENV: &str = "GNOMON_XDP_NETNS_WITHOUT_XDP";

/// Bounds every wait for something that should happen far sooner (the
/// machine is busy: the whole suite runs beside this).
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn server4() -> SocketAddr {
    (SERVER4, PORT).into()
}

pub fn server6() -> SocketAddr {
    (SERVER6.parse::<IpAddr>().unwrap(), PORT).into()
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn decode_key(s: &str) -> [u8; 32] {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap()
        .try_into()
        .unwrap()
}

pub fn xdp_on() -> bool {
    std::env::var_os(WITHOUT_XDP_ENV).is_none()
}

/// Whether this kernel makes AF_XDP sockets (address family 44).
pub fn af_xdp_available() -> bool {
    Socket::new(Domain::from(44), Type::RAW, None).is_ok()
}

pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// How [`Net::serve_how`] starts the server.
#[derive(Clone, Copy, Debug)]
pub struct How {
    /// Serve through AF_XDP (else the sockets alone).
    pub xdp: bool,
    /// Ask for XDP through `GNOMON_XDP` rather than `--xdp`.
    pub by_env: bool,
    /// Listen on 0.0.0.0 and [::] rather than the server's two addresses.
    pub wildcard: bool,
}

/// The two namespaces and the veth pair between them, deleted when the
/// test ends (the veth goes with its namespace).
pub struct Net {
    ns: Namespaces,
    tag: String,
}

impl Net {
    pub fn server(&self) -> String {
        self.ns.name(&format!("s{}", self.tag))
    }

    pub fn client(&self) -> String {
        self.ns.name(&format!("c{}", self.tag))
    }

    /// The network for test `test` (`tag` keeps its namespaces apart from
    /// the other tests' of this run), or `None` after saying SKIPPED and
    /// why.
    pub fn build(test: &str, tag: &str) -> Option<Net> {
        Net::build_with(test, tag, 1)
    }

    /// [`Net::build`] with `queues` receive and send queues on each end.
    pub fn build_with(test: &str, tag: &str, queues: u32) -> Option<Net> {
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
        let q = queues.to_string();
        let queues = ["numtxqueues", &q, "numrxqueues", &q];
        let veth = [
            &["-n", &s, "link", "add", SERVER_IF][..],
            &queues,
            &["type", "veth", "peer", "name", CLIENT_IF],
            &queues,
            &["netns", &c],
        ]
        .concat();
        if !fleet_support::ip(&veth) {
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
    pub fn serve(&self) -> Server {
        self.serve_with(false)
    }

    /// [`Net::serve`], XDP asked for by `--xdp` or (`by_env`) by
    /// `GNOMON_XDP`.
    pub fn serve_with(&self, by_env: bool) -> Server {
        self.serve_how(How {
            xdp: xdp_on(),
            by_env,
            wildcard: false,
        })
    }

    /// `gnomon serve` in the server namespace as `how` says.
    pub fn serve_how(&self, how: How) -> Server {
        let How {
            xdp,
            by_env,
            wildcard,
        } = how;
        let s = self.server();
        let (four, six) = if wildcard {
            (format!("0.0.0.0:{PORT}"), format!("[::]:{PORT}"))
        } else {
            (server4().to_string(), format!("[{SERVER6}]:{PORT}"))
        };
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
        if xdp && !by_env {
            extra.extend(["--xdp", SERVER_IF]);
        }
        let mut cmd = serve_support::serve_command(
            serve_support::gnomon_via(&["ip", "netns", "exec", &s]),
            &four,
            &extra,
        );
        if xdp && by_env {
            cmd.env("GNOMON_XDP", SERVER_IF);
        }
        let mut child = gnomon_testkit::Reaped::spawn(&mut cmd);
        // Reading up to "listening" blocks: a server that hangs before it
        // is killed after `PATIENCE`, ending the read. Not reaped until
        // the read ends, so the pid is still this child's.
        let (disarm, armed) = std::sync::mpsc::channel::<()>();
        let pid = child.id().to_string();
        let watchdog = std::thread::spawn(move || {
            if armed.recv_timeout(PATIENCE).is_err() {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
                return true;
            }
            false
        });
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let started = Started::read(child, stderr);
        let _ = disarm.send(());
        assert!(
            !watchdog.join().unwrap(),
            "the server took over {PATIENCE:?} to listen: {:?}",
            started.startup
        );
        Server::new(started, s)
    }

    /// Run `gnomon` with `args` in the client namespace, bounded.
    pub fn gnomon_in_client(&self, args: &[&str]) -> Output {
        let c = self.client();
        let mut cmd = serve_support::gnomon_via(&["ip", "netns", "exec", &c]);
        cmd.args(args);
        run_bounded(&mut cmd, PATIENCE * 2)
    }

    /// `gnomon query ADDR --key K --json` plus `args`, from the client
    /// namespace: its JSON, the command having succeeded.
    pub fn query(&self, to: SocketAddr, public: &[u8; 32], args: &[&str]) -> serde_json::Value {
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
    pub fn helper(&self, ns: &str, command: &str) -> String {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns])
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "xdp_netns::xdp_netns_helper",
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

    /// The MAC address of the server's end.
    pub fn server_mac(&self) -> String {
        let out = run_bounded(
            Command::new("ip").args([
                "netns",
                "exec",
                &self.server(),
                "cat",
                &format!("/sys/class/net/{SERVER_IF}/address"),
            ]),
            PATIENCE,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `ip -n S link show xs0`.
    pub fn link_show(&self) -> String {
        let out = run_bounded(
            Command::new("ip").args(["-n", &self.server(), "link", "show", SERVER_IF]),
            PATIENCE,
        );
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait (bounded) until an XDP program is on the server's end, or
    /// (`on` false) until none is; panics past `PATIENCE`.
    pub fn wait_program(&self, on: bool) -> String {
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
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    wait_bounded(&mut child, limit)
}

/// A `gnomon serve` in the server namespace, killed when the test ends
/// (passing or not); its log drained on a thread, kept for messages.
pub struct Server {
    pub child: gnomon_testkit::Reaped,
    pub public: [u8; 32],
    /// Its metrics endpoint, inside the namespace.
    metrics: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    ns: String,
}

impl Server {
    pub fn new(started: Started, ns: String) -> Server {
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

    pub fn logged(&self) -> String {
        self.log.lock().unwrap().concat()
    }

    /// Panics (with its log) if the server has exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the server exited ({status}):\n{}", self.logged());
        }
    }

    /// SIGTERM, and a clean exit within `PATIENCE`.
    pub fn terminate(&mut self) {
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

impl Net {
    /// The server's metrics page now, read from inside its namespace.
    pub fn metrics(&self, server: &Server) -> String {
        let at = server.metrics;
        let said = self.helper(&server.ns, &format!("metrics {at}"));
        let (_, page) = said
            .split_once("METRICS-BEGIN\n")
            .unwrap_or_else(|| panic!("no page in:\n{said}"));
        let (page, _) = page.split_once("METRICS-END").unwrap();
        page.to_owned()
    }

    /// Poll the metrics (bounded) until `done` holds: the page.
    pub fn wait_metrics(
        &self,
        server: &mut Server,
        what: &str,
        done: impl Fn(&str) -> bool,
    ) -> String {
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
}
