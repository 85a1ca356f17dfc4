//! deploy/kubernetes/: valid Kubernetes objects by the schema checker
//! (kubernetes-validate, installed from PyPI by scripts/test-all, its
//! schemas bundled, so nothing is fetched now), and consistent with what a
//! schema cannot see: the image's user and command, the configuration's
//! ports, paths and metrics address, the probes. The init container's copy
//! of the Secret is run on a directory laid out as the kubelet lays out a
//! Secret volume, and gnomon must accept the result (and refuse the
//! Secret as delivered).

use crate::serve_support;

use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gnomon_testkit::{is_root, skip};
use serde_json::Value;

use serve_support::{keygen_and_delegate, repo, run};

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("deploy/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
}

/// The checker scripts/test-all installed, or one on PATH.
fn checker(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("GNOMON_KUBERNETES_VALIDATE")
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .or_else(|| {
            let found = Command::new("kubernetes-validate")
                .arg("--version")
                .output()
                .ok()?;
            found
                .status
                .success()
                .then(|| PathBuf::from("kubernetes-validate"))
        });
    if path.is_none() {
        skip(
            test,
            "kubernetes-validate not installed (scripts/test-all installs it from PyPI)",
        );
    }
    path
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn manifests_pass_the_schema_checker_which_refuses_a_misspelling() {
    let Some(kv) = checker("manifests_pass_the_schema_checker_which_refuses_a_misspelling") else {
        return;
    };
    let o = run(Command::new(&kv).arg("--strict").args(manifests()));
    assert!(o.status.success(), "{}", text(&o));
    // The same check on one wrong field name fails, so it is not blind.
    let dir = std::env::temp_dir().join(format!("gnomon-k8s-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(repo().join("deploy/kubernetes/daemonset.yaml")).unwrap();
    let bad = dir.join("daemonset.yaml");
    std::fs::write(&bad, good.replace("hostNetwork:", "hostNetwrok:")).unwrap();
    let o = run(Command::new(&kv).arg("--strict").arg(&bad));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("hostNetwrok"), "{}", text(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every object of every manifest, as JSON, read by the checker's own
/// Python and YAML parser (installed with it).
fn objects(kv: &Path) -> Vec<Value> {
    let python = match kv.parent() {
        Some(bin) if bin.join("python3").exists() => bin.join("python3"),
        _ => PathBuf::from("python3"),
    };
    let o = run(Command::new(python)
        .arg("-c")
        .arg(
            "import json, sys, yaml\n\
             json.dump([d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d], sys.stdout)",
        )
        .args(manifests()));
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice::<Vec<Value>>(&o.stdout).unwrap()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

/// Where `container` mounts `volume`: (path, read-only).
fn mount(container: &Value, volume: &str) -> Option<(String, bool)> {
    let m = container["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == volume)?;
    Some((
        m["mountPath"].as_str().unwrap().to_string(),
        m["readOnly"] == true,
    ))
}

/// The Containerfile's `KEY` instruction, its argument.
fn containerfile(key: &str) -> String {
    let text = std::fs::read_to_string(repo().join("deploy/container/Containerfile")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {key} in the Containerfile"))
        .trim()
        .to_string()
}

/// The ConfigMap's gnomon.toml.
fn configmap_toml(objects: &[Value]) -> String {
    find(objects, "ConfigMap")["data"]["gnomon.toml"]
        .as_str()
        .expect("the ConfigMap holds gnomon.toml")
        .to_string()
}

#[test]
fn the_daemonset_agrees_with_the_image_and_the_configuration() {
    let Some(kv) = checker("the_daemonset_agrees_with_the_image_and_the_configuration") else {
        return;
    };
    let objects = objects(&kv);
    let ds = find(&objects, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let gnomon = named(&pod["containers"], "gnomon");
    let init = named(&pod["initContainers"], "copy-delegations");

    // The image's user runs everything, with nothing to spare.
    let user = containerfile("USER");
    let (uid, gid) = user.split_once(':').unwrap();
    let (uid, gid): (u64, u64) = (uid.parse().unwrap(), gid.parse().unwrap());
    assert_eq!(pod["securityContext"]["fsGroup"], gid);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    for c in [gnomon, init] {
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsUser"], uid, "{}", c["name"]);
        assert_eq!(sc["runAsGroup"], gid, "{}", c["name"]);
        assert_eq!(sc["runAsNonRoot"], true);
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["capabilities"], serde_json::json!({"drop": ["ALL"]}));
        for k in ["requests", "limits"] {
            let r = &c["resources"][k];
            assert!(r["cpu"].is_string() && r["memory"].is_string(), "{k}: {r}");
        }
    }

    // The image's own command reads the ConfigMap: it is mounted where the
    // command's --config points, under the file name it names.
    assert!(gnomon.get("command").is_none() && gnomon.get("args").is_none());
    let cmd: Vec<String> = serde_json::from_str(&containerfile("CMD")).unwrap();
    let config_path = Path::new(&cmd[cmd.iter().position(|a| a == "--config").unwrap() + 1]);
    let (config_dir, ro) = mount(gnomon, "config").unwrap();
    assert!(ro);
    assert_eq!(Path::new(&config_dir), config_path.parent().unwrap());
    let toml_text = configmap_toml(&objects);
    assert_eq!(config_path.file_name().unwrap(), "gnomon.toml");
    let toml: toml::Table = toml_text.parse().unwrap();
    let volume = named(&pod["volumes"], "config");
    assert_eq!(
        volume["configMap"]["name"],
        find(&objects, "ConfigMap")["metadata"]["name"]
    );

    // Ports: the configuration's listen ports, UDP and TCP, are the
    // container's and the image's.
    let mut listen: Vec<String> = toml["listen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .port()
        })
        .flat_map(|p| [format!("{p}/udp"), format!("{p}/tcp")])
        .collect();
    listen.sort();
    listen.dedup();
    let mut declared: Vec<String> = gnomon["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p["containerPort"],
                p["protocol"].as_str().unwrap().to_lowercase()
            )
        })
        .collect();
    declared.sort();
    assert_eq!(declared, listen);
    let mut exposed: Vec<String> = containerfile("EXPOSE")
        .split_whitespace()
        .map(String::from)
        .collect();
    exposed.sort();
    assert_eq!(exposed, listen);

    // Probes: on the metrics address the configuration binds, which is
    // also the image's (so its HEALTHCHECK works in the pod too).
    let metrics: std::net::SocketAddr = toml["metrics"].as_str().unwrap().parse().unwrap();
    let shipped: toml::Table = std::fs::read_to_string(repo().join("deploy/gnomon.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(toml["metrics"], shipped["metrics"]);
    for (probe, path) in [("readinessProbe", "/health"), ("livenessProbe", "/metrics")] {
        let get = &gnomon[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["port"], metrics.port(), "{probe}");
        assert_eq!(get["host"], metrics.ip().to_string(), "{probe}");
    }

    // The identity: the Secret goes to the init container only, read-only;
    // its copy is where offline-dir points, read-only to the server.
    let secret = named(&pod["volumes"], "secret");
    assert_eq!(secret["secret"]["secretName"], "gnomon-delegations");
    assert!(
        mount(gnomon, "secret").is_none(),
        "the server never sees the Secret itself"
    );
    let (secret_at, ro) = mount(init, "secret").unwrap();
    assert!(ro);
    let (copy_at, _) = mount(init, "delegations").unwrap();
    let (served_from, ro) = mount(gnomon, "delegations").unwrap();
    assert!(ro);
    assert_eq!(copy_at, served_from);
    assert_eq!(toml["offline-dir"][0].as_str().unwrap(), served_from);
    assert_eq!(
        named(&pod["volumes"], "delegations")["emptyDir"]["medium"],
        "Memory"
    );
    let init_cmd: Vec<&str> = init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(init_cmd[..2], ["sh", "-c"]);
    assert_eq!(init_cmd[3..], [secret_at.as_str(), copy_at.as_str()]);

    // And gnomon reads the configuration.
    let dir = std::env::temp_dir().join(format!("gnomon-k8s-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gnomon.toml");
    std::fs::write(&file, &toml_text).unwrap();
    let o = run(gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon")).args([
        "config",
        "check",
        file.to_str().unwrap(),
    ]));
    assert!(o.status.success(), "{}", text(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `dir` laid out as the kubelet writes a Secret volume with fsGroup
/// `gid`: the files in a timestamped directory, owned by root and group
/// `gid`, mode 0440; `..data` a symlink to it; each name a symlink
/// through `..data`.
fn kubelet_secret_volume(dir: &Path, files: &Path, gid: u32) {
    let stamp = dir.join("..2026_01_01_00_00_00.000000000");
    std::fs::create_dir_all(&stamp).unwrap();
    for e in std::fs::read_dir(files).unwrap() {
        let from = e.unwrap().path();
        let name = from.file_name().unwrap();
        let to = stamp.join(name);
        std::fs::copy(&from, &to).unwrap();
        std::os::unix::fs::chown(&to, Some(0), Some(gid)).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o440)).unwrap();
        symlink(Path::new("..data").join(name), dir.join(name)).unwrap();
    }
    symlink(stamp.file_name().unwrap(), dir.join("..data")).unwrap();
}

#[test]
fn the_init_containers_copy_of_a_secret_volume_is_what_gnomon_accepts() {
    const TEST: &str = "the_init_containers_copy_of_a_secret_volume_is_what_gnomon_accepts";
    let Some(kv) = checker(TEST) else {
        return;
    };
    if !is_root() {
        skip(TEST, "needs root (files owned by another uid, run as it)");
        return;
    }
    let objects = objects(&kv);
    let pod = &find(&objects, "DaemonSet")["spec"]["template"]["spec"];
    let init = named(&pod["initContainers"], "copy-delegations");
    let uid = init["securityContext"]["runAsUser"].as_u64().unwrap() as u32;
    let gid = pod["securityContext"]["fsGroup"].as_u64().unwrap() as u32;

    let dir = std::env::temp_dir().join(format!("gnomon-k8s-secret-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_, made, public) = keygen_and_delegate(&dir, 2);
    let secret = dir.join("secret");
    kubelet_secret_volume(&secret, &made, gid);
    // An emptyDir: world-writable, as the kubelet makes it.
    let copy = dir.join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o777)).unwrap();

    let config = dir.join("gnomon.toml");
    std::fs::write(&config, configmap_toml(&objects)).unwrap();
    let public = gnomon_testkit::base64(&public);
    let gnomon = serve_support::gnomon_for_anyone();
    let as_user = |argv: &[&str]| {
        run(gnomon_testkit::command("chroot")
            .arg(format!("--userspec={uid}:{gid}"))
            .arg("/")
            .args(argv))
    };
    let check = |offline_dir: &Path| {
        as_user(&[
            gnomon.to_str().unwrap(),
            "config",
            "check",
            "--load-keys",
            "--offline-dir",
            offline_dir.to_str().unwrap(),
            "--offline-public-key",
            &public,
            config.to_str().unwrap(),
        ])
    };
    // As the kubelet delivers it, gnomon refuses it.
    let o = check(&secret);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));

    // The init container's own command, with the two paths it is given
    // pointing here instead, run as its user (the host's sh and cp stand
    // in for busybox's: the same POSIX options). Twice: a restarted pod
    // runs it again over the copy left in its emptyDir.
    let mut argv: Vec<&str> = init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    argv[3] = secret.to_str().unwrap();
    argv[4] = copy.to_str().unwrap();
    for _ in 0..2 {
        let o = as_user(&argv);
        assert!(o.status.success(), "{}", text(&o));
    }
    let mut copied = 0;
    for e in std::fs::read_dir(&copy).unwrap() {
        let meta = std::fs::symlink_metadata(e.unwrap().path()).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.mode() & 0o777, 0o400);
        assert_eq!(meta.uid(), uid);
        copied += 1;
    }
    assert_eq!(copied, std::fs::read_dir(&made).unwrap().count());
    let o = check(&copy);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}
