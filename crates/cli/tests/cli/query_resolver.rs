//! `gnomon query` against a resolver that never answers: the query's
//! deadline bounds name resolution too. The resolver is an address routed
//! to the loopback device of a network namespace this test creates but
//! owned by no one there, so the DNS packets go nowhere and leave nothing
//! behind.

use std::process::Command;
use std::time::{Duration, Instant};

/// A network namespace with its own resolv.conf; removed on drop.
struct Namespace {
    name: String,
}

impl Namespace {
    fn create(name: &str) -> Option<Namespace> {
        let ns = Namespace {
            name: name.to_string(),
        };
        let ok = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["netns", "add", name]) {
            return None;
        }
        // A /32 on lo and a route for the rest of the /24 through lo: a
        // packet to 10.253.0.2 loops back, is for no local address and is
        // dropped (no forwarding), with no ICMP error to end the wait.
        let steps: [&[&str]; 3] = [
            &["-n", name, "link", "set", "lo", "up"],
            &["-n", name, "addr", "add", "10.253.0.1/32", "dev", "lo"],
            &[
                "-n",
                name,
                "route",
                "add",
                "10.253.0.0/24",
                "dev",
                "lo",
                "src",
                "10.253.0.1",
            ],
        ];
        if !steps.iter().all(|s| ok(s)) {
            return None;
        }
        // `ip netns exec` mounts /etc/netns/NAME/* over /etc: each lookup
        // would wait the full 30 s timeout.
        std::fs::create_dir_all(ns.etc()).ok()?;
        std::fs::write(
            ns.etc().join("resolv.conf"),
            "nameserver 10.253.0.2\noptions timeout:30 attempts:1\n",
        )
        .ok()?;
        Some(ns)
    }

    fn etc(&self) -> std::path::PathBuf {
        std::path::Path::new("/etc/netns").join(&self.name)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(self.etc());
    }
}

#[test]
fn a_silent_resolver_is_bounded_by_the_deadline() {
    const TEST: &str = "query_resolver::a_silent_resolver_is_bounded_by_the_deadline";
    if !gnomon_testkit::is_root() {
        return gnomon_testkit::skip(TEST, "needs root for ip netns");
    }
    let Some(ns) = Namespace::create(&format!("gnc-dns-{}", std::process::id())) else {
        return gnomon_testkit::skip(TEST, "cannot create a network namespace (ip netns)");
    };
    let start = Instant::now();
    let out = gnomon_testkit::command("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_gnomon")])
        .args(["query", "time.invalid-gnomon-test.example:5319", "--key"])
        .arg("A".repeat(43))
        .args(["--deadline", "1s"])
        .output()
        .expect("run gnomon in the namespace");
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("resolver"), "{stderr}");
    // The resolver alone would take 30 s; the deadline is 1 s.
    assert!(took < Duration::from_secs(15), "{took:?}: {stderr}");
}
