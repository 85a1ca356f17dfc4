//! One identity, many hosts: `gnomon delegate --hosts` makes one delegation
//! set per host from one offline key, each host's `gnomon serve
//! --offline-dir` serves its own, and behind one equal-cost multipath
//! address every host answers for the one long-term key.

use crate::fleet_support;
use crate::serve_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use fleet_support::{
    build, ip_in, queries_from_client, Namespaces, HELPER_ENV, HOSTS, PORT, SERVICE,
};
use gnomon_protocol::verify::verify_response;
use gnomon_protocol::Profile;
use serve_support::peer::PATIENCE;
use serve_support::{gnomon_ok, keygen, start_serve, start_serve_via, Started};

/// A directory removed when the test ends, passing or not.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("gnomon-fleet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server killed when the test ends, passing or not.
struct Server(Started);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `OUT/MANIFEST`: online public key (base64) → host.
fn manifest(out: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(out.join("MANIFEST")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 5, "{l}");
            (cols[4].to_owned(), cols[0].to_owned())
        })
        .collect()
}

/// `gnomon delegate` with `args`: exit code and stderr.
fn delegate(args: &[&str]) -> (i32, String) {
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .arg("delegate")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// What the offline machine does: `gnomon keygen`, then `gnomon delegate
/// --hosts` two windows each into DIR/out; the key file is then removed (it
/// never reaches a server). The directory, the public key and the manifest.
fn fleet_sets(name: &str, hosts: &str) -> (TempDir, [u8; 32], BTreeMap<String, String>) {
    let dir = TempDir::new(name);
    let (key, public) = keygen(&dir.0);
    let out = dir.join("out");
    gnomon_ok(&[
        "delegate",
        "--key-file",
        key.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
        "--hosts",
        hosts,
        "--count",
        "2",
    ]);
    std::fs::remove_file(&key).unwrap();
    let manifest = manifest(&out);
    (dir, public, manifest)
}

#[test]
fn delegate_hosts_makes_one_set_per_host_and_renews_where_each_ends() {
    let dir = TempDir::new("sets");
    let (key, public) = keygen(&dir.0);
    let out = dir.join("out");
    let (key, out_s) = (key.to_str().unwrap(), out.to_str().unwrap());
    let made = gnomon_ok(&[
        "delegate",
        "--key-file",
        key,
        "--out-dir",
        out_s,
        "--hosts",
        "b,a",
        "--host",
        "c",
        "--count",
        "2",
    ]);
    assert_eq!(made.lines().count(), 6, "{made}");
    let hosts = manifest(&out);
    assert_eq!(hosts.len(), 6, "every window has its own online key");
    for h in ["a", "b", "c"] {
        let names = files(&out.join(h));
        assert_eq!(names.len(), 2, "{h}: {names:?}");
        for n in &names {
            assert!(n.starts_with(&format!("{h}-")) && n.ends_with(".delegation"));
            let text = std::fs::read_to_string(out.join(h).join(n)).unwrap();
            assert!(text.contains(&format!("\nhost: {h}\n")), "{text}");
            assert!(text.contains(&b64(&public)));
        }
        assert_eq!(hosts.values().filter(|v| *v == h).count(), 2);
    }
    // `inspect` describes a host's file without its secret seed.
    let a_file = out.join("a").join(&files(&out.join("a"))[0]);
    let seen = gnomon_ok(&["inspect", a_file.to_str().unwrap()]);
    assert!(seen.contains("host              a"), "{seen}");
    let text = std::fs::read_to_string(&a_file).unwrap();
    let seed = text
        .lines()
        .find_map(|l| l.strip_prefix("online-seed: "))
        .unwrap();
    assert!(!seen.contains(seed), "{seen}");
    let online = seen
        .lines()
        .find_map(|l| l.strip_prefix("online key        "))
        .unwrap();
    assert_eq!(hosts[online], "a");

    // Renewal: the same command with --start continue adds the next
    // windows to each host, one step after its last, without clashing.
    let again =
        |more: &[&str]| delegate(&[&["--key-file", key, "--out-dir", out_s], more].concat());
    let (code, said) = again(&["--hosts", "a,b,c", "--count", "2", "--start", "continue"]);
    assert_eq!(code, 0, "{said}");
    assert_eq!(manifest(&out).len(), 12);
    let a = files(&out.join("a"));
    assert_eq!(a.len(), 4, "{a:?}");
    // File names carry the start: four starts one day apart.
    let days: BTreeSet<&str> = a.iter().map(|n| &n[2..10]).collect();
    assert_eq!(days.len(), 4, "{a:?}");

    // From a timer: --cover adds only what coverage lacks, so running it
    // again adds nothing, and a host new to the fleet gets its windows.
    for _ in 0..2 {
        let (code, said) = again(&[
            "--hosts", "a,b,c,d", "--start", "continue", "--cover", "60h", "--count", "30",
        ]);
        assert_eq!(code, 0, "{said}");
        assert_eq!(files(&out.join("a")).len(), 4, "{said}");
        assert_eq!(files(&out.join("d")).len(), 2, "{said}");
    }

    // Refused, nothing written: a name that is not a safe path component,
    // one host twice, and another host's files in a host's directory.
    for (hosts, why) in [
        ("a,..", "must start with a letter or a digit"),
        ("a,x/y", "only letters"),
        ("a,,b", "must not be empty"),
        ("a,b,a", "named twice"),
    ] {
        let (code, said) = again(&["--hosts", hosts]);
        assert_eq!(code, 64, "{hosts}: {said}");
        assert!(said.contains(why), "{hosts}: {said}");
    }
    let b_file = files(&out.join("b"))[0].clone();
    std::fs::copy(out.join("b").join(&b_file), out.join("a").join(&b_file)).unwrap();
    let (code, said) = again(&["--hosts", "a,c"]);
    assert_eq!(code, 65, "{said}");
    assert!(said.contains("made for host b"), "{said}");
    assert_eq!(files(&out.join("c")).len(), 4, "nothing written for c");
}

#[test]
fn a_host_serves_its_own_set_and_says_which_host_it_is() {
    let (dir, public, hosts) = fleet_sets("serve", "ams-1,fra-2");
    let out = dir.join("out");
    let server = Server(start_serve(
        &[
            "--offline-dir",
            out.join("fra-2").to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--clock-unsynchronized",
            "answer-with-radius",
        ],
        |_| {},
    ));
    assert_eq!(server.0.public, public);
    assert!(
        server
            .0
            .startup
            .iter()
            .any(|l| l.contains("made for host fra-2")),
        "{:?}",
        server.0.startup
    );
    let metrics = server.0.get("/metrics");
    let info = metrics
        .lines()
        .find(|l| l.starts_with("gnomon_online_key_info{"))
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(info.contains("host=\"fra-2\""), "{info}");
    assert!(info.contains(&format!("long_term_key=\"{}\"", b64(&public))));
    // The key it signs with is fra-2's, and so is the key in its answers.
    let online = info
        .split("online_key=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    assert_eq!(hosts[online], "fra-2");
    // What an operator checks with: `gnomon query` prints the online key
    // of the answer, to look up in the manifest.
    let said = gnomon_ok(&[
        "query",
        &server.0.addr.to_string(),
        "--key",
        &b64(&public),
        "--udp-only",
    ]);
    let shown = said
        .lines()
        .find_map(|l| l.strip_prefix("online   "))
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(shown, online, "{said}");
}

/// Send one request from `sock` (connected to `to`) and verify the answer:
/// its delegation's online key, or why there is none. A refused port (the
/// ICMP error a connected socket reports) ends it at once; silence after
/// `PATIENCE / 10` retries, three times in all.
fn ask(sock: &UdpSocket, to: SocketAddr, public: &[u8; 32], seed: u64) -> Result<[u8; 32], String> {
    sock.connect(to).unwrap();
    sock.set_read_timeout(Some(PATIENCE / 10)).unwrap();
    let request = gnomon_testkit::request(Profile::rfc(), seed);
    let mut buf = [0u8; 2048];
    for _ in 0..3 {
        sock.send(&request).map_err(|e| format!("send: {e}"))?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                return verify_response(&request, &buf[..n], public)
                    .map(|v| v.online_key)
                    .map_err(|e| format!("invalid: {e:?}"));
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err("refused".into()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("recv: {e}")),
        }
    }
    Err("timeout".into())
}

/// Which host each answer came from, by its online key; every answer must
/// have verified.
fn hosts_answering(
    outcomes: &[Result<String, String>],
    hosts: &BTreeMap<String, String>,
) -> BTreeMap<String, usize> {
    let mut by_host = BTreeMap::new();
    for o in outcomes {
        let key = o.as_ref().unwrap_or_else(|e| panic!("a query failed: {e}"));
        let host = hosts
            .get(key)
            .unwrap_or_else(|| panic!("online key {key} is no host's"));
        *by_host.entry(host.clone()).or_insert(0) += 1;
    }
    by_host
}

#[test]
fn three_hosts_behind_one_ecmp_address_answer_for_one_key_and_survive_losing_one() {
    let test =
        "fleet::three_hosts_behind_one_ecmp_address_answer_for_one_key_and_survive_losing_one";
    if !gnomon_testkit::is_root() {
        gnomon_testkit::skip(test, "network namespaces need root");
        return;
    }
    let roles = ["c", "r", HOSTS[0], HOSTS[1], HOSTS[2]];
    let Some(ns) = Namespaces::create(&roles) else {
        gnomon_testkit::skip(test, "`ip netns add` fails here");
        return;
    };
    if !build(&ns) {
        gnomon_testkit::skip(test, "cannot make a veth pair between namespaces");
        return;
    }

    // The offline machine: one long-term key, one set per host.
    let (dir, public, hosts) = fleet_sets("ecmp", &HOSTS.join(","));
    let out = dir.join("out");

    // Each host serves its own set on the shared address.
    let listen = format!("{SERVICE}:{PORT}");
    let mut servers: Vec<Option<Server>> = HOSTS
        .iter()
        .map(|h| {
            let netns = ns.name(h);
            let started = start_serve_via(
                &["ip", "netns", "exec", &netns],
                &listen,
                &[
                    "--offline-dir",
                    out.join(h).to_str().unwrap(),
                    "--workers",
                    "1",
                    "--clock-unsynchronized",
                    "answer-with-radius",
                    // The one client is a monitor: not rate-limited.
                    "--limit-allow",
                    "10.99.0.2/32",
                ],
                |_| {},
            );
            assert_eq!(started.public, public);
            assert!(
                started
                    .startup
                    .iter()
                    .any(|l| l.contains(&format!("made for host {h}"))),
                "{:?}",
                started.startup
            );
            Some(Server(started))
        })
        .collect();

    // 200 queries from 200 source ports: every answer verifies against the
    // one key, and the router spread them over every host.
    let first = queries_from_client(&ns, &b64(&public), 200, 0);
    let by_host = hosts_answering(&first, &hosts);
    assert_eq!(
        by_host.keys().map(String::as_str).collect::<Vec<_>>(),
        HOSTS.to_vec(),
        "every host answers some: {by_host:?}"
    );
    eprintln!("answers by host, all three up: {by_host:?}");

    // s1 fails. A static ECMP route keeps its nexthop while the link stays
    // up, so the flows hashed to it are refused: the dead host is still in
    // the path, and the ones that reach a live host verify.
    let dead = servers[1].take().unwrap();
    drop(dead);
    let meanwhile = queries_from_client(&ns, &b64(&public), 60, 1_000);
    let refused = meanwhile.iter().filter(|o| o.is_err()).count();
    assert!(refused > 0, "no query reached the dead host: {meanwhile:?}");
    for o in &meanwhile {
        match o {
            Ok(key) => assert_ne!(hosts[key], "s1"),
            Err(e) => assert_eq!(e, "refused", "only the dead host's flows fail"),
        }
    }

    // Its health check fails, so it is withdrawn (what a routing daemon
    // does when the host stops announcing the address): the route keeps
    // the live nexthops only, and every query verifies again.
    ip_in(
        &ns.name("r"),
        &format!("route replace {SERVICE}/32 nexthop via 10.99.1.2 nexthop via 10.99.3.2"),
    );
    let after = queries_from_client(&ns, &b64(&public), 200, 2_000);
    let by_host = hosts_answering(&after, &hosts);
    assert_eq!(
        by_host.keys().map(String::as_str).collect::<Vec<_>>(),
        ["s0", "s2"],
        "{by_host:?}"
    );
    eprintln!("with s1 down: {refused} of 60 refused before withdrawal; after: {by_host:?}");
    drop(servers);
    drop(ns);
}

/// Run by the namespace test inside the client namespace: queries from
/// distinct source ports (every socket stays open until the end, so the
/// kernel cannot reuse a port), one line per outcome.
#[test]
#[ignore = "run inside the client namespace by three_hosts_behind_one_ecmp_address_..."]
fn fleet_client() {
    let spec = std::env::var(HELPER_ENV).expect("started by the namespace test");
    let parts: Vec<&str> = spec.split(',').collect();
    let public: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(parts[0])
        .unwrap()
        .try_into()
        .unwrap();
    let count: u64 = parts[1].parse().unwrap();
    let seed: u64 = parts[2].parse().unwrap();
    let service: SocketAddr = format!("{SERVICE}:{PORT}").parse().unwrap();
    let mut sockets = Vec::new();
    let mut ports = BTreeSet::new();
    for i in 0..count {
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        assert!(ports.insert(sock.local_addr().unwrap().port()));
        match ask(&sock, service, &public, seed + i) {
            Ok(key) => println!("QUERY ok {}", b64(&key)),
            Err(e) => println!("QUERY {e}"),
        }
        sockets.push(sock);
    }
}

/// deploy/gnomon-delegate.service's command, run as written (paths moved
/// into a temporary directory), makes 14 days of windows for each host.
/// Where `systemd-analyze` exists, both units verify.
#[test]
fn the_renewal_unit_runs_as_written_and_verifies() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let unit = std::fs::read_to_string(deploy.join("gnomon-delegate.service")).unwrap();
    let dir = TempDir::new("unit");
    let (key, _) = keygen(&dir.0);
    let out = dir.join("fleet");
    let exe = env!("CARGO_BIN_EXE_gnomon");
    let moved = |text: &str| {
        text.replace("/usr/local/bin/gnomon", exe)
            .replace("/etc/gnomon-signer/root.key", key.to_str().unwrap())
            .replace("/var/lib/gnomon-signer/fleet", out.to_str().unwrap())
    };
    let exec_start = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let words: Vec<String> = moved(exec_start)
        .replace("$GNOMON_FLEET_HOSTS", "ams-1,fra-1")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let status = gnomon_testkit::command(&words[0])
        .args(&words[1..])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{words:?}");
    // 14 days of cover from windows of 2 days, one a day: 13 windows.
    // (That a second run adds nothing while covered is
    // delegate_hosts_makes_one_set_per_host_and_renews_where_each_ends.)
    assert_eq!(files(&out.join("ams-1")).len(), 13);
    assert_eq!(files(&out.join("fra-1")).len(), 13);
    let analyze = Command::new("systemd-analyze")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .status();
    if !analyze.is_ok_and(|s| s.success()) {
        gnomon_testkit::skip(
            "fleet::the_renewal_unit_runs_as_written_and_verifies",
            "no systemd-analyze: the units' syntax was not verified",
        );
        return;
    }
    let units = dir.join("units");
    std::fs::create_dir_all(&units).unwrap();
    for name in ["gnomon-delegate.service", "gnomon-delegate.timer"] {
        let text = std::fs::read_to_string(deploy.join(name)).unwrap();
        std::fs::write(units.join(name), moved(&text)).unwrap();
    }
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(units.join("gnomon-delegate.service"))
        .arg(units.join("gnomon-delegate.timer"))
        .output()
        .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}
