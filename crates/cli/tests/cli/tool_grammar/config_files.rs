//! `gnomon config check` reads each of gnomon's configuration files with
//! the parser of the command that reads it, and a key in the wrong place
//! is told where it belongs, by config check and by the command itself.

use std::path::Path;

use super::{gnomon, plain, refusal, s, says, Scratch};

fn deploy(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(name)
}

/// Every file in deploy/ passes, each named as the file of the commands
/// that read it, and what is printed checks again as the same kind.
#[test]
fn every_gnomon_file_is_checked_by_its_own_parser() {
    let dir = Scratch::new("grammar-config-kinds");
    for (file, kind, reader) in [
        ("gnomon.toml", "serve", "gnomon serve"),
        ("gnomon-sync.toml", "sync", "gnomon sync"),
        ("gnomon-watch.toml", "watch", "gnomon report-server"),
        ("gnomon-signer.toml", "signer", "gnomon delegate"),
    ] {
        let path = deploy(file);
        let run = gnomon(&["config", "check", s(&path)]);
        assert_eq!(run.code, 0, "{file}: {}", run.stderr);
        says(&run.stderr, &format!("{}: OK, read by ", path.display()));
        says(&run.stderr, reader);
        assert!(!run.stderr.contains("unknown field"), "{}", run.stderr);
        let printed = dir.write(&format!("printed-{file}"), &run.stdout);
        let again = gnomon(&["config", "check", s(&printed), "--json"]);
        assert_eq!(
            again.code, 0,
            "{file}: the printed file: {}\n{}",
            again.stderr, run.stdout
        );
        let v = again.json();
        assert_eq!(
            (v["kind"].as_str(), v["exit_code"].as_u64()),
            (Some(kind), Some(0)),
            "{v}"
        );
        assert!(
            v["read_by"].as_array().unwrap().iter().any(|r| r == reader),
            "{v}"
        );
        // Printed twice, the same: the effective settings load back whole.
        assert_eq!(v["config"].as_str(), Some(run.stdout.as_str()), "{file}");
    }
}

#[test]
fn a_misplaced_key_is_told_its_table() {
    let dir = Scratch::new("grammar-config-misplaced");
    let cases = [
        (
            "serve.toml",
            "max-connections = 5\n[tcp]\nenable = true\n",
            "`max-connections` belongs in [tcp], not the top level",
        ),
        (
            "serve2.toml",
            "[tcp]\nworkers = 2\n",
            "`workers` belongs at the top level (above the first [table]), not [tcp]",
        ),
        (
            "sync.toml",
            "servers = \"l.json\"\n[sync]\ninterval = \"5m\"\n",
            "`servers` belongs in [sync], not the top level",
        ),
        (
            "watch.toml",
            "[watch]\nservers = \"l.json\"\nlisten = \"127.0.0.1:1\"\nmax-body = 2048\n",
            "`max-body` belongs in [report-server], not [watch]",
        ),
    ];
    for (name, text, hint) in cases {
        let file = dir.write(name, text);
        let run = gnomon(&["config", "check", s(&file)]);
        assert_eq!(run.code, 64, "{name}: {}", run.stderr);
        says(&run.stderr, hint);
        assert!(run.stdout.is_empty());
    }
    // The commands themselves say it too.
    for (command, file, hint) in [
        ("serve", "serve.toml", cases[0].2),
        ("watch", "watch.toml", cases[3].2),
        ("sync", "sync.toml", cases[2].2),
    ] {
        let path = dir.path(file);
        let mut args = vec![command, "--config", s(&path)];
        if command != "serve" {
            args.push("--print-config");
        }
        let run = gnomon(&args);
        assert_eq!(run.code, 64, "{command}: {}", run.stderr);
        says(&run.stderr, hint);
    }
}

#[test]
fn another_commands_file_is_named_and_mixed_files_refused() {
    let dir = Scratch::new("grammar-config-other");
    // serve given sync's file: which command reads it, and how to check it.
    let serve = gnomon(&["serve", "--config", s(&deploy("gnomon-sync.toml"))]);
    assert_eq!(serve.code, 64, "{}", serve.stderr);
    says(
        &serve.stderr,
        "this is the file of gnomon sync (deploy/gnomon-sync.toml), not serve's",
    );
    says(&serve.stderr, "gnomon config check");
    let mixed = dir.write("mixed.toml", "workers = 2\n[sync]\ninterval = \"5m\"\n");
    let run = gnomon(&["config", "check", s(&mixed)]);
    assert_eq!(run.code, 64);
    says(&run.stderr, "more than one file");
    says(&run.stderr, "[sync] is for the file of gnomon sync");
    // serve's flags do not apply to sync's file: refused, not ignored.
    let run = gnomon(&[
        "config",
        "check",
        "--workers",
        "2",
        s(&deploy("gnomon-sync.toml")),
    ]);
    assert_eq!(run.code, 64);
    says(&run.stderr, "--workers set gnomon serve's settings");
}

#[test]
fn json_and_unreadable_files() {
    let dir = Scratch::new("grammar-config-json");
    let missing = dir.path("none.toml");
    let run = gnomon(&["config", "check", s(&missing), "--json"]);
    assert_eq!(run.code, 64);
    let v = run.json();
    assert_eq!(refusal(&v), (Some("config"), Some(64)), "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert_eq!(
        msg,
        format!(
            "cannot read configuration file {}: it does not exist",
            missing.display()
        )
    );
    let serve = gnomon(&["serve", "--config", s(&missing)]);
    assert_eq!(serve.code, 64);
    says(
        &serve.stderr,
        &format!("{}: cannot read it: it does not exist", missing.display()),
    );
    plain(&serve.stderr);
    let watch = gnomon(&["report-server", "--config", s(&missing), "--print-config"]);
    assert_eq!(watch.code, 64);
    says(&watch.stderr, "it does not exist");
    plain(&watch.stderr);
    let sync = gnomon(&["sync", "--config", s(&missing), "--print-config"]);
    assert_eq!(sync.code, 64);
    says(&sync.stderr, "it does not exist");
    plain(&sync.stderr);
    let ok = dir.write("g.toml", "workers = 2\n");
    let v = gnomon(&["config", "check", s(&ok), "--json"]).json();
    assert_eq!(
        (v["kind"].as_str(), v["exit_code"].as_u64()),
        (Some("serve"), Some(0)),
        "{v}"
    );
    assert!(v["config"].as_str().unwrap().contains("workers = 2"), "{v}");
    assert!(v["notes"][0].as_str().unwrap().contains("ephemeral"), "{v}");
}
