//! The static (musl) build and the container image made from it, tested
//! without a container engine: the binary has no loader and no libraries
//! and answers the normal build's queries; deploy/container/Containerfile
//! copies what scripts/build-static made, runs a health check that is a
//! real command, and agrees with deploy/gnomon.toml; and the image's files
//! alone, in a chroot as the image's user, serve and pass that health
//! check, which fails once the server stops.
//!
//! The first of them to ask runs `scripts/build-static --profile
//! static-check` (scripts/test-all builds the binary ahead, beside the
//! tests); where the musl toolchain cannot be had (the script's exit 77)
//! they skip and say why.

use crate::serve_support;

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gnomon_testkit::{is_root, skip};

use serve_support::{repo, run, start_serve_bin, Started};

const PATIENCE: Duration = Duration::from_secs(20);

/// scripts/build-static's output directory: the image's build context.
fn context() -> PathBuf {
    repo().join("target/container")
}

/// The context scripts/build-static makes, made once per test binary: `Err`
/// with the script's reason when it cannot build here (exit 77).
fn built() -> &'static Result<PathBuf, String> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(repo().join("scripts/build-static"));
        cmd.args(["--profile", "static-check"]).current_dir(repo());
        gnomon_testkit::cargo_first_on_path(&mut cmd);
        let out = run(&mut cmd);
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        match out.status.code() {
            Some(0) => Ok(context()),
            Some(77) => Err(stderr),
            _ => panic!("scripts/build-static: {:?}: {stderr}", out.status),
        }
    })
}

/// The static binary, or `None` after recording why the test is skipped.
fn static_bin(test: &str) -> Option<PathBuf> {
    match built() {
        Ok(dir) => Some(dir.join("gnomon")),
        Err(why) => {
            skip(test, why);
            None
        }
    }
}

/// The program headers and dynamic section as `readelf` prints them.
fn readelf(bin: &Path) -> Option<String> {
    let out = Command::new("readelf").arg("-ldW").arg(bin).output().ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn static_build_has_no_loader_and_no_libraries() {
    let Some(bin) = static_bin("static_build_has_no_loader_and_no_libraries") else {
        return;
    };
    let Some(elf) = readelf(&bin) else {
        skip(
            "static_build_has_no_loader_and_no_libraries",
            "readelf missing (package binutils)",
        );
        return;
    };
    assert!(!elf.contains("INTERP"), "a program interpreter:\n{elf}");
    assert!(!elf.contains("(NEEDED)"), "shared libraries needed:\n{elf}");
    // The same check sees the normal build's loader and libc, so it is not
    // blind.
    let normal = readelf(Path::new(env!("CARGO_BIN_EXE_gnomon"))).unwrap();
    assert!(normal.contains("INTERP") && normal.contains("(NEEDED)"));
}

/// Kills the server however the test ends.
struct Running(Started);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

#[test]
fn static_serve_answers_the_normal_builds_query_and_health_check() {
    let Some(bin) = static_bin("static_serve_answers_the_normal_builds_query_and_health_check")
    else {
        return;
    };
    let s = Running(start_serve_bin(
        &bin,
        &["--workers", "1", "--metrics", "127.0.0.1:0"],
        |_| {},
    ));
    let key = gnomon_testkit::base64(&s.0.public);
    let q = run(gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon")).args([
        "query",
        &s.0.addr.to_string(),
        "--key",
        &key,
        "--json",
    ]));
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let j: serde_json::Value = serde_json::from_slice(&q.stdout).unwrap();
    assert_eq!(j["version"]["name"], "rfc-10049", "{j}");
    let h = run(gnomon_testkit::command(&bin).args([
        "health",
        "--url",
        &format!("http://{}/health", s.0.metrics.unwrap()),
    ]));
    assert!(h.status.success(), "{}", String::from_utf8_lossy(&h.stderr));
}

/// One Containerfile instruction: its keyword and the rest of its line
/// (continuations joined).
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                let (k, rest) = current.split_once(char::is_whitespace).unwrap();
                out.push((k.to_ascii_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

/// The image as the Containerfile defines it.
struct Image {
    /// (source in the context, destination in the image).
    copies: Vec<(String, String)>,
    user: String,
    exposed: Vec<String>,
    healthcheck: Vec<String>,
    /// The engine's own limit on one check (`HEALTHCHECK --timeout=`).
    healthcheck_timeout: Option<String>,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
}

fn exec_form(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not an exec-form array: {s}: {e}"))
}

fn image() -> Image {
    let text = std::fs::read_to_string(repo().join("deploy/container/Containerfile")).unwrap();
    let mut image = Image {
        copies: Vec::new(),
        user: String::new(),
        exposed: Vec::new(),
        healthcheck: Vec::new(),
        healthcheck_timeout: None,
        entrypoint: Vec::new(),
        cmd: Vec::new(),
    };
    for (k, rest) in instructions(&text) {
        match k.as_str() {
            "FROM" => assert_eq!(rest, "scratch", "nothing but our files in the image"),
            "COPY" => {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                assert!(
                    parts.len() == 2 && !parts[0].starts_with("--"),
                    "COPY SRC DST only: {rest}"
                );
                image.copies.push((parts[0].into(), parts[1].into()));
            }
            "USER" => image.user = rest,
            "EXPOSE" => image.exposed = rest.split_whitespace().map(String::from).collect(),
            "HEALTHCHECK" => {
                let (options, cmd) = rest.split_once(" CMD ").expect("HEALTHCHECK … CMD [...]");
                image.healthcheck = exec_form(cmd.trim());
                image.healthcheck_timeout = options
                    .split_whitespace()
                    .find_map(|o| o.strip_prefix("--timeout="))
                    .map(String::from);
            }
            "ENTRYPOINT" => image.entrypoint = exec_form(&rest),
            "CMD" => image.cmd = exec_form(&rest),
            "LABEL" | "STOPSIGNAL" => {}
            other => panic!("instruction {other} not expected; teach this test about it"),
        }
    }
    image
}

impl Image {
    fn destination_of(&self, source: &str) -> &str {
        &self
            .copies
            .iter()
            .find(|(s, _)| s == source)
            .unwrap_or_else(|| panic!("the image does not copy {source}"))
            .1
    }
}

/// deploy/gnomon.toml, the configuration the image carries.
fn shipped_config() -> toml::Table {
    std::fs::read_to_string(repo().join("deploy/gnomon.toml"))
        .unwrap()
        .parse()
        .unwrap()
}

fn port_of(addr: &str) -> u16 {
    addr.parse::<SocketAddr>().unwrap().port()
}

#[test]
fn containerfile_agrees_with_the_build_and_the_configuration() {
    let image = image();
    let bin = image.destination_of("gnomon").to_string();
    let config = image.destination_of("gnomon.toml").to_string();
    assert_eq!(image.entrypoint, [bin.as_str()]);
    assert_eq!(image.cmd, ["serve", "--config", &config]);
    assert_eq!(image.healthcheck[0], bin);

    // Not root: a numeric uid:gid (no /etc/passwd in the image), not 0.
    let (uid, gid) = image.user.split_once(':').expect("USER uid:gid");
    assert!(uid.parse::<u32>().unwrap() > 0 && gid.parse::<u32>().unwrap() > 0);

    // The ports: every listen port of the configuration, UDP and TCP.
    let toml = shipped_config();
    let mut ports: Vec<String> = toml["listen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| port_of(a.as_str().unwrap()))
        .flat_map(|p| [format!("{p}/udp"), format!("{p}/tcp")])
        .collect();
    ports.sort();
    ports.dedup();
    let mut exposed = image.exposed.clone();
    exposed.sort();
    assert_eq!(exposed, ports);

    // The health check asks the metrics address the configuration binds.
    let url = image
        .healthcheck
        .windows(2)
        .find(|w| w[0] == "--url")
        .map(|w| w[1].clone())
        .expect("the health check names its --url");
    assert_eq!(
        url,
        format!("http://{}/health", toml["metrics"].as_str().unwrap())
    );

    // The engine gives the check more time than the check gives the
    // server, so an unhealthy verdict comes with gnomon's reason rather
    // than the engine's kill.
    let seconds = |s: &str| -> u64 { s.strip_suffix('s').unwrap().parse().unwrap() };
    let ours = image
        .healthcheck
        .windows(2)
        .find(|w| w[0] == "--timeout")
        .map(|w| seconds(&w[1]))
        .expect("the health check names its --timeout");
    let engines = seconds(
        image
            .healthcheck_timeout
            .as_deref()
            .expect("HEALTHCHECK --timeout="),
    );
    assert!(
        engines > ours,
        "HEALTHCHECK --timeout={engines}s, gnomon health --timeout {ours}s"
    );

    // The health check's arguments parse: against a port where nothing
    // listens it reports unhealthy (1), never a usage error (64).
    let mut args = image.healthcheck[1..].to_vec();
    let at = args.iter().position(|a| a == "--url").unwrap() + 1;
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    args[at] = format!("http://{}/health", free.local_addr().unwrap());
    drop(free);
    let o = run(gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon")).args(&args));
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Every COPY source is what scripts/build-static put in the context.
    let Some(_) = static_bin("containerfile_agrees_with_the_build_and_the_configuration") else {
        return;
    };
    for (source, _) in &image.copies {
        assert!(
            context().join(source).is_file(),
            "{source} not in the context"
        );
    }
    let shipped = std::fs::read(repo().join("deploy/gnomon.toml")).unwrap();
    assert!(
        std::fs::read(context().join("gnomon.toml")).unwrap() == shipped,
        "target/container/gnomon.toml is not deploy/gnomon.toml: a stale context? \
         (scripts/build-static makes it again)"
    );
}

/// A network namespace of our own (loopback only), deleted on drop, so the
/// image's configuration can bind its real ports without meeting anyone.
struct Netns(String);

impl Netns {
    fn new() -> Option<Netns> {
        let name = format!("gnomon-image-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .ok()?;
        if !ok.success() {
            return None;
        }
        let ns = Netns(name);
        let up = run(Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"]));
        assert!(up.status.success());
        Some(ns)
    }

    /// `argv` in the namespace, chrooted to `root`, as `user` (uid:gid).
    fn in_image(&self, root: &Path, user: &str, argv: &[String]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, "chroot"])
            .arg(format!("--userspec={user}"))
            .arg(root)
            .args(argv);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Kills the chrooted server however the test ends.
struct Chrooted(Child);

impl Drop for Chrooted {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status_field(pid: u32, field: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
}

#[test]
fn image_files_alone_serve_as_the_image_user_and_the_healthcheck_follows() {
    const TEST: &str = "image_files_alone_serve_as_the_image_user_and_the_healthcheck_follows";
    let Some(_) = static_bin(TEST) else {
        return;
    };
    if !is_root() {
        skip(
            TEST,
            "needs root (chroot, a network namespace, another uid)",
        );
        return;
    }
    let Some(ns) = Netns::new() else {
        skip(TEST, "cannot create a network namespace (`ip netns add`)");
        return;
    };
    let image = image();
    let (uid, gid) = image.user.split_once(':').unwrap();
    let (uid, gid): (u32, u32) = (uid.parse().unwrap(), gid.parse().unwrap());

    // The image's root: exactly its COPY lines, nothing else…
    let root = std::env::temp_dir().join(format!("gnomon-image-root-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (source, dest) in &image.copies {
        let to = root.join(dest.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(context().join(source), &to).unwrap();
    }
    // …plus what an operator mounts: the key the configuration names,
    // owned by the image's user, mode 0600 (as `gnomon keygen` writes it).
    let toml = shipped_config();
    let key_path = toml["key-file"][0].as_str().unwrap();
    let key = root.join(key_path.trim_start_matches('/'));
    let made = run(gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon")).args([
        "keygen",
        "--out",
        key.to_str().unwrap(),
    ]));
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    std::os::unix::fs::chown(&key, Some(uid), Some(gid)).unwrap();

    let healthcheck = || run(&mut ns.in_image(&root, &image.user, &image.healthcheck));
    // Before the server runs the health check fails.
    assert_eq!(healthcheck().status.code(), Some(1));

    let log = root.with_extension("log");
    let argv: Vec<String> = image.entrypoint.iter().chain(&image.cmd).cloned().collect();
    let mut serve = ns.in_image(&root, &image.user, &argv);
    // The one departure from the image: this machine's clock may not be
    // synchronized, and the shipped configuration then refuses to answer.
    serve
        .env("GNOMON_CLOCK_UNSYNCHRONIZED", "answer-with-radius")
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap());
    let mut server = Chrooted(serve.spawn().unwrap());
    let pid = server.0.id();
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();

    let started = Instant::now();
    let last = loop {
        let h = healthcheck();
        if h.status.success() {
            break h;
        }
        if let Some(status) = server.0.try_wait().unwrap() {
            panic!(
                "serve exited ({status}) in the image's root:\n{}",
                read_log()
            );
        }
        assert!(
            started.elapsed() < PATIENCE,
            "not healthy within {PATIENCE:?}: {}\n{}",
            String::from_utf8_lossy(&h.stderr),
            read_log()
        );
        std::thread::park_timeout(Duration::from_millis(100));
    };
    assert_eq!(String::from_utf8_lossy(&last.stdout).trim(), "healthy");

    // It is the image's user that serves, from the image's root.
    let ids = format!("{uid}\t{uid}\t{uid}\t{uid}");
    assert_eq!(status_field(pid, "Uid:").as_deref(), Some(ids.as_str()));
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/root")).unwrap(),
        root
    );
    assert_eq!(
        status_field(pid, "CapEff:").as_deref(),
        Some("0000000000000000")
    );

    // Stopped, the health check fails, with its reason on one line.
    let (status, _) = serve_support::peer::sigterm_and_wait(&mut server.0, PATIENCE)
        .expect("serve stops on SIGTERM");
    assert!(status.success(), "{status}: {}", read_log());
    let h = healthcheck();
    assert_eq!(h.status.code(), Some(1));
    let reason = String::from_utf8_lossy(&h.stderr);
    assert!(reason.starts_with("gnomon health: ") && reason.trim().lines().count() == 1);

    drop(server);
    std::fs::remove_dir_all(&root).unwrap();
    let _ = std::fs::remove_file(&log);
}
