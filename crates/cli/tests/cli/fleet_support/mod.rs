//! The fleet test's network: namespaces for a client, a router and three
//! servers, built with `ip`, deleted however the test ends.
#![allow(dead_code, unreachable_pub)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The service address every host holds, and its port.
pub const SERVICE: &str = "10.99.100.1";
pub const PORT: u16 = 2002;
pub const HOSTS: [&str; 3] = ["s0", "s1", "s2"];
pub const HELPER_ENV: &str = "GNOMON_FLEET_CLIENT";

/// The test's namespaces, deleted (with their veths and routes) when it
/// ends, passing or not. Names are unique to this run.
pub struct Namespaces {
    prefix: String,
    made: Vec<String>,
}

impl Namespaces {
    pub fn name(&self, role: &str) -> String {
        format!("{}{role}", self.prefix)
    }

    /// The namespaces for `roles`, named uniquely for this run (namespaces
    /// are global to the machine); `None` if they cannot be made here.
    pub fn create(roles: &[&str]) -> Option<Namespaces> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .subsec_nanos();
        let mut ns = Namespaces {
            prefix: format!("gfl{}-{nanos:x}-", std::process::id()),
            made: Vec::new(),
        };
        roles.iter().all(|r| ns.add(r)).then_some(ns)
    }

    fn add(&mut self, role: &str) -> bool {
        let name = self.name(role);
        if !ip(&["netns", "add", &name]) {
            return false;
        }
        self.made.push(name);
        true
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.made {
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(Stdio::null())
                .status();
        }
    }
}

pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `ip` inside namespace `ns`; must succeed.
pub fn ip_in(ns: &str, args: &str) {
    let mut full = vec!["-n", ns];
    full.extend(args.split_whitespace());
    let out = Command::new("ip").args(&full).output().unwrap();
    assert!(
        out.status.success(),
        "ip {full:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Set `name=value` (a sysctl) in namespace `ns`, by writing its /proc/sys
/// file from inside (the file is the writer's namespace's): `sh` and
/// `echo`, not procps, which a minimal system may lack.
pub fn sysctl_in(ns: &str, setting: &str) {
    let (name, value) = setting.split_once('=').expect("name=value");
    let file = format!("/proc/sys/{}", name.replace('.', "/"));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "sh",
            "-c",
            "echo \"$1\" > \"$2\"",
            "sh",
        ])
        .args([value, &file])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sysctl {setting} in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Client 10.99.0.2 — router — server i at 10.99.(i+1).2, each holding
/// SERVICE on its loopback, with an equal-cost route to SERVICE through
/// all of them on the router.
/// `false` if this kernel cannot make a veth pair between namespaces (the
/// test is skipped then); any later failure is the test's.
pub fn build(ns: &Namespaces) -> bool {
    let (client, router) = (ns.name("c"), ns.name("r"));
    let veth = format!("-n {router} link add rc type veth peer name c0 netns {client}");
    if !ip(&veth.split_whitespace().collect::<Vec<_>>()) {
        return false;
    }
    // Hash on ports too (policy 1), or one client would reach one host;
    // forward; check no reverse path (the replies' source is the anycast
    // address, reachable through every server link).
    for s in [
        "net.ipv4.ip_forward=1",
        "net.ipv4.fib_multipath_hash_policy=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
    ] {
        sysctl_in(&router, s);
    }
    ip_in(&router, "link set lo up");
    ip_in(&client, "link set lo up");
    ip_in(&router, "addr add 10.99.0.1/24 dev rc");
    ip_in(&router, "link set rc up");
    ip_in(&client, "addr add 10.99.0.2/24 dev c0");
    ip_in(&client, "link set c0 up");
    ip_in(&client, "route add default via 10.99.0.1");
    let mut nexthops = String::new();
    for (i, h) in HOSTS.iter().enumerate() {
        let server = ns.name(h);
        let net = i + 1;
        // A closed port answers with an ICMP error at once, not after the
        // kernel's per-destination rate limit.
        sysctl_in(&server, "net.ipv4.icmp_ratelimit=0");
        ip_in(&server, "link set lo up");
        ip_in(&server, &format!("addr add {SERVICE}/32 dev lo"));
        ip_in(
            &router,
            &format!("link add r{i} type veth peer name e0 netns {server}"),
        );
        ip_in(&router, &format!("addr add 10.99.{net}.1/24 dev r{i}"));
        ip_in(&router, &format!("link set r{i} up"));
        ip_in(&server, &format!("addr add 10.99.{net}.2/24 dev e0"));
        ip_in(&server, "link set e0 up");
        ip_in(&server, &format!("route add default via 10.99.{net}.1"));
        nexthops += &format!(" nexthop via 10.99.{net}.2");
    }
    ip_in(&router, &format!("route add {SERVICE}/32{nexthops}"));
    true
}

/// Run `count` queries from the client namespace, each from its own
/// socket (so its own source port), by running this test binary's
/// `fleet_client` there. Every outcome: `Ok(online key)` or why not.
pub fn queries_from_client(
    ns: &Namespaces,
    public_b64: &str,
    count: u32,
    seed: u64,
) -> Vec<Result<String, String>> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name("c")])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fleet::fleet_client",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(HELPER_ENV, format!("{public_b64},{count},{seed}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .unwrap();
    let output = wait_bounded(&mut child, Duration::from_secs(120));
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && said.contains("test result: ok. 1 passed"),
        "the client in {} failed:\n{said}\n{}",
        ns.name("c"),
        String::from_utf8_lossy(&output.stderr)
    );
    let outcomes: Vec<Result<String, String>> = said
        .lines()
        // libtest's own "test fleet_client ... " may begin the first line.
        .filter_map(|l| l.split_once("QUERY ").map(|(_, r)| r))
        .map(|l| match l.split_once(' ') {
            Some(("ok", key)) => Ok(key.to_owned()),
            _ => Err(l.to_owned()),
        })
        .collect();
    assert_eq!(outcomes.len(), count as usize, "{said}");
    outcomes
}

/// Wait for `child` at most `limit`, killing it past that.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::Output {
    let deadline = Instant::now() + limit;
    // Drain the pipes on threads so a chatty child cannot block on them.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the client namespace's queries ran past {limit:?}");
        }
        std::thread::park_timeout(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}
