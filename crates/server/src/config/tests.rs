use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gnomon_protocol::Profile;

use super::*;

fn file(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, Path::new("/etc/gnomon/test.toml"), &Overrides::new())
}

/// The message `text` is refused with (the error tests in error.rs use it
/// too).
pub(super) fn err(text: &str) -> String {
    match file(text) {
        Ok(c) => panic!("accepted {text:?} as {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn empty_file_is_the_defaults() {
    assert_eq!(file("").unwrap(), Config::default());
    let c = Config::default();
    assert_eq!(
        c.listen.addrs(),
        &["127.0.0.1:5319".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(c.batch_size.get(), 64);
    assert_eq!(c.max_queue_delay.get(), Duration::from_millis(500));
    assert_eq!(c.min_request_size.get(), 1024);
    assert_eq!(c.clock.radius_floor.get(), Duration::from_secs(3));
    assert!(c.versions.is_all());
    assert!(c.ephemeral_key());
    assert!(!c.batch_disputed && !c.google_nonce);
    assert_eq!(c.grease.get(), 0.0);
    assert!(c.tcp.enable);
    assert_eq!(c.metrics, None);
}

#[test]
fn printed_config_loads_back_unchanged() {
    let c = file(
        r#"
        listen = ["0.0.0.0:2002", "[::1]:5319"]
        workers = 3
        batch-size = 1024
        recv-buffer = 65536
        max-queue-delay = "2s"
        versions = ["google", "draft-07", "0x8000000b", "1"]
        batch-disputed = true
        google-nonce = true
        min-request-size = 844
        key-file = ["a.key", "/abs/b.key"]
        offline-dir = "deleg"
        metrics = "[::1]:9319"
        grease = 0.25
        [clock]
        radius-floor = "5s"
        unsynchronized = "refuse"
        [online-key]
        validity = "2d"
        rotate-every = "1d"
        jitter = 0
        [tcp]
        enable = false
        max-connections = 7
        idle-timeout = "1h"
        read-timeout = "100ms"
        max-frame = 65536
        [log]
        format = "json"
        level = "trace"
        "#,
    )
    .unwrap();
    let printed = c.to_string();
    let again = file(&printed).unwrap();
    assert_eq!(again, c, "{printed}");
    assert_eq!(
        c.identities,
        vec![
            IdentitySource::KeyFile(PathBuf::from("/etc/gnomon/a.key")),
            IdentitySource::KeyFile(PathBuf::from("/abs/b.key")),
            IdentitySource::OfflineDir(PathBuf::from("/etc/gnomon/deleg"), None),
        ]
    );
    assert_eq!(c.clock.unsynchronized, UnsyncPolicy::Refuse);
    let names: Vec<&str> = c.versions.profiles().iter().map(|p| p.name).collect();
    assert_eq!(names, ["google", "draft-07", "draft-11", "rfc-10049"]);
    assert_eq!(c.online_key.validity(), Duration::from_secs(2 * 86_400));
    assert_eq!(c.log.level, LogLevel::Trace);
    assert_eq!(
        file(&Config::default().to_string()).unwrap(),
        Config::default()
    );
}

#[test]
fn every_key_is_printed_where_the_file_expects_it() {
    let printed = Config::default().to_string();
    let table: toml::Table = printed.parse().unwrap();
    for spec in KEYS {
        let mut node = &table;
        let mut parts: Vec<&str> = spec.key.split('.').collect();
        let last = parts.pop().unwrap();
        for p in parts {
            node = node[p].as_table().unwrap();
        }
        assert!(
            node.contains_key(last),
            "{} missing from:\n{printed}",
            spec.key
        );
    }
    // And nothing else: every printed key is in the table.
    let mut count = 0;
    for (k, v) in &table {
        match v.as_table() {
            Some(t) => {
                count += t
                    .keys()
                    .filter(|sub| lookup(&format!("{k}.{sub}")).is_some())
                    .count()
            }
            None => count += usize::from(lookup(k).is_some()),
        }
    }
    assert_eq!(count, KEYS.len());
}

#[test]
fn key_table_names_follow_one_rule() {
    for spec in KEYS {
        assert_eq!(spec.flag, spec.key.replace('.', "-"), "{}", spec.key);
        let env = format!("GNOMON_{}", spec.flag.replace('-', "_").to_uppercase());
        assert_eq!(spec.env, env);
        assert_eq!(lookup(spec.env), Some(spec));
        assert_eq!(lookup(spec.flag), Some(spec));
    }
    assert_eq!(lookup("no-such-key"), None);
}

#[test]
fn key_table_ranges_match_the_types() {
    let has = |key: &str, range: String| {
        let spec = lookup(key).unwrap();
        assert!(
            spec.expected.contains(&range),
            "{key}: {} lacks {range}",
            spec.expected
        );
    };
    has("workers", format!("{}..={}", Workers::MIN, Workers::MAX));
    has(
        "batch-size",
        format!("{}..={}", BatchSize::MIN, BatchSize::MAX),
    );
    has(
        "recv-buffer",
        format!("{}..={}", RecvBuffer::MIN, RecvBuffer::MAX),
    );
    has(
        "min-request-size",
        format!("{}..={}", MinRequestSize::MIN, MinRequestSize::MAX),
    );
    has(
        "online-key.jitter",
        format!("{}..={}", Jitter::MIN, Jitter::MAX),
    );
    has(
        "tcp.max-connections",
        format!("{}..={}", MaxConnections::MIN, MaxConnections::MAX),
    );
    has(
        "tcp.max-frame",
        format!("{}..={}", MaxFrame::MIN, MaxFrame::MAX),
    );
    has(
        "tcp.max-requests",
        format!("{}..={}", MaxRequests::MIN, MaxRequests::MAX),
    );
    has(
        "tcp.max-per-source",
        format!("{}..={}", MaxPerSource::MIN, MaxPerSource::MAX),
    );
    has(
        "tcp.max-per-network",
        format!("{}..={}", MaxPerNetwork::MIN, MaxPerNetwork::MAX),
    );
    has(
        "tcp.source-prefix-v4",
        format!("{}..={}", SourcePrefixV4::MIN, SourcePrefixV4::MAX),
    );
    has(
        "tcp.source-prefix-v6",
        format!("{}..={}", SourcePrefixV6::MIN, SourcePrefixV6::MAX),
    );
    let d = |key: &str, min: Duration, max: Duration| {
        has(
            key,
            format!("{}..={}", DurationText(min), DurationText(max)),
        )
    };
    d("max-queue-delay", QueueDelay::MIN, QueueDelay::MAX);
    d("batch-wait", BatchWait::MIN, BatchWait::MAX);
    d("clock.radius-floor", Radius::MIN, Radius::MAX);
    d("clock.unsynchronized-radius", Radius::MIN, Radius::MAX);
    d("online-key.validity", KeyValidity::MIN, KeyValidity::MAX);
    d(
        "online-key.rotate-every",
        RotateEvery::MIN,
        RotateEvery::MAX,
    );
    d("tcp.idle-timeout", IdleTimeout::MIN, IdleTimeout::MAX);
    d("tcp.read-timeout", ReadTimeout::MIN, ReadTimeout::MAX);
    d("tcp.write-timeout", WriteTimeout::MIN, WriteTimeout::MAX);
    d("tcp.max-lifetime", MaxLifetime::MIN, MaxLifetime::MAX);
    has("grease", format!("0.0..={:?}", Grease::MAX));
}

#[test]
fn key_table_defaults_are_the_printed_defaults() {
    let printed = Config::default().to_string();
    for spec in KEYS {
        if ["workers", "key-file", "clock.unsynchronized"].contains(&spec.key) {
            continue; // described in words
        }
        let leaf = spec.key.rsplit('.').next().unwrap();
        let line = format!("{leaf} = {}", spec.default);
        assert!(printed.contains(&line), "{line:?} not in:\n{printed}");
    }
}

#[test]
fn flags_beat_environment_beat_file() {
    let text = "batch-size = 8\nworkers = 2\ngrease = 0.1\n";
    let mut o = Overrides::new();
    o.env("GNOMON_BATCH_SIZE", "16".into()).unwrap();
    o.env("GNOMON_WORKERS", "3".into()).unwrap();
    o.flag("workers", vec!["4".into()]).unwrap();
    let c = Config::from_toml(text, Path::new("x.toml"), &o).unwrap();
    assert_eq!(c.batch_size.get(), 16);
    assert_eq!(c.workers.get(), 4);
    assert_eq!(c.grease.get(), 0.1);
}

#[test]
fn override_lists_replace_file_lists_and_text_values_parse() {
    let text = "listen = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\nkey-file = \"k1\"";
    let mut o = Overrides::new();
    o.flag("listen", vec!["[::1]:5319".into()]).unwrap();
    o.flag("key-file", vec!["rel/k2".into()]).unwrap();
    o.flag("tcp-enable", vec!["false".into()]).unwrap();
    o.flag("versions", vec!["google".into(), "rfc-10049".into()])
        .unwrap();
    o.env("GNOMON_CLOCK_RADIUS_FLOOR", "10s".into()).unwrap();
    o.env("GNOMON_GREASE", "0.5".into()).unwrap();
    o.env("GNOMON_METRICS", "off".into()).unwrap();
    let c = Config::from_toml(text, Path::new("/srv/g.toml"), &o).unwrap();
    assert_eq!(
        c.listen.addrs(),
        &["[::1]:5319".parse::<SocketAddr>().unwrap()]
    );
    // Paths from flags are relative to the working directory, not the file.
    assert_eq!(c.identities, vec![IdentitySource::KeyFile("rel/k2".into())]);
    assert!(!c.tcp.enable);
    assert_eq!(c.clock.radius_floor.get(), Duration::from_secs(10));
    assert_eq!(c.grease.get(), 0.5);
    assert!(c.versions.profiles().contains(Profile::google().id));
    assert!(c.versions.profiles().contains(Profile::rfc().id));
    assert!(!c.versions.is_all());
}

#[test]
fn rotation_must_fit_in_validity_with_its_jitter() {
    let ok = "[online-key]\nvalidity = \"10h\"\nrotate-every = \"9h\"\njitter = 10";
    assert!(file(ok).is_ok());
    let e = err("[online-key]\nvalidity = \"10h\"\nrotate-every = \"10h\"\njitter = 0");
    assert!(
        e.contains("`online-key.validity`") && e.contains("`online-key.rotate-every`"),
        "{e}"
    );
    assert!(
        e.contains("test.toml:2") && e.contains("test.toml:3"),
        "{e}"
    );
    // 9.5 h × 1.1 = 10.45 h > 10 h.
    let e = err("[online-key]\nvalidity = \"10h\"\nrotate-every = \"570m\"\njitter = 10");
    assert!(e.contains("jitter"), "{e}");
    // A long rotation against the default validity: the default is named.
    let e = err("[online-key]\nrotate-every = \"2d\"");
    assert!(e.contains("`online-key.validity` (default)"), "{e}");
}

#[test]
fn unsynchronized_policy_and_radius() {
    let c =
        file("[clock]\nunsynchronized = \"answer-with-radius\"\nunsynchronized-radius = \"30s\"")
            .unwrap();
    assert_eq!(c.clock.unsynchronized.radius_us(), Some(30_000_000));
    assert_eq!(
        file("").unwrap().clock.unsynchronized.radius_us(),
        Some(60_000_000)
    );
    let c = file("[clock]\nunsynchronized = \"refuse\"").unwrap();
    assert_eq!(c.clock.unsynchronized.radius_us(), None);
    let e = err("[clock]\nunsynchronized = \"refuse\"\nunsynchronized-radius = \"30s\"");
    assert!(
        e.contains("`clock.unsynchronized-radius`") && e.contains("only used"),
        "{e}"
    );
    let e = err("[clock]\nradius-floor = \"2m\"");
    assert!(e.contains("`clock.unsynchronized-radius` (default)"), "{e}");
    assert!(e.contains("at least the floor"), "{e}");
}

#[test]
fn a_configured_key_refuses_an_unsynchronized_clock_by_default() {
    // The ephemeral quick-start answers; a configured key refuses.
    assert_eq!(
        file("").unwrap().clock.unsynchronized.radius_us(),
        Some(60_000_000)
    );
    let c = file("key-file = \"a.key\"").unwrap();
    assert_eq!(c.clock.unsynchronized, UnsyncPolicy::Refuse);
    let c = file("offline-dir = \"deleg\"").unwrap();
    assert_eq!(c.clock.unsynchronized, UnsyncPolicy::Refuse);
    // Saying so still answers.
    let c = file("key-file = \"a.key\"\n[clock]\nunsynchronized = \"answer-with-radius\"").unwrap();
    assert_eq!(c.clock.unsynchronized.radius_us(), Some(60_000_000));
    // A radius alone does not silently change the policy, nor is it ignored.
    let e = err("key-file = \"a.key\"\n[clock]\nunsynchronized-radius = \"30s\"");
    assert!(e.contains("defaults to \"refuse\""), "{e}");
}

#[test]
fn durations_parse_in_every_unit_and_refuse_the_rest() {
    assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_duration("250us"), Some(Duration::from_micros(250)));
    assert_eq!(parse_duration("0ms"), Some(Duration::ZERO));
    assert_eq!(parse_duration("3s"), Some(Duration::from_secs(3)));
    assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
    assert_eq!(parse_duration("12h"), Some(Duration::from_secs(43_200)));
    assert_eq!(parse_duration("7d"), Some(Duration::from_secs(604_800)));
    for bad in [
        "",
        "s",
        "3",
        "3 s",
        "-3s",
        "1.5h",
        "3S",
        "3sec",
        "99999999999999999999d",
        "1h30m",
    ] {
        assert_eq!(parse_duration(bad), None, "{bad:?}");
    }
    assert_eq!(parse_duration("18446744073709551615d"), None);
    for d in [
        1, 999, 1000, 60_000, 90_000, 3_600_000, 86_400_000, 86_400_001,
    ] {
        let d = Duration::from_millis(d);
        assert_eq!(parse_duration(&DurationText(d).to_string()), Some(d));
    }
    for us in [0, 1, 100, 1_500, 2_000] {
        let d = Duration::from_micros(us);
        assert_eq!(parse_duration(&DurationText(d).to_string()), Some(d));
    }
}

#[test]
fn newtypes_refuse_out_of_range_values() {
    assert!(BatchSize::new(0).is_none() && BatchSize::new(1025).is_none());
    assert_eq!(BatchSize::new(1).map(BatchSize::get), Some(1));
    assert!(Workers::new(0).is_none() && Workers::new(257).is_none());
    let w = Workers::available().get();
    assert!((1..=256).contains(&w));
    assert!(Radius::new(Duration::from_millis(999)).is_none());
    assert_eq!(
        Radius::MAX.as_micros(),
        u128::from(Radius::new(Radius::MAX).unwrap().micros())
    );
    assert!(Grease::new(f64::NAN).is_none() && Grease::new(0.5).is_some());
    assert!(Listen::new(vec![]).is_none());
    assert!(Versions::new(ProfileSet::empty()).is_none());
}

#[test]
fn load_reads_a_file_and_reports_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.toml");
    std::fs::write(&path, "batch-size = 9\nkey-file = \"k\"\n").unwrap();
    let c = Config::load(Some(&path), &Overrides::new()).unwrap();
    assert_eq!(c.batch_size.get(), 9);
    assert_eq!(
        c.identities,
        vec![IdentitySource::KeyFile(dir.path().join("k"))]
    );
    let missing = dir.path().join("missing.toml");
    let e = Config::load(Some(&missing), &Overrides::new()).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    assert!(e.to_string().contains("missing.toml"), "{e}");
}

#[test]
fn limit_lists_take_networks_and_addresses() {
    let c =
        file("[limit]\nallow = [\"10.1.2.3/8\", \"2001:db8::1\"]\ndeny = []\nrate = 0").unwrap();
    let shown: Vec<String> = c.limit.allow.nets().iter().map(|n| n.to_string()).collect();
    assert_eq!(shown, ["10.0.0.0/8", "2001:db8::1/128"]);
    assert!(c.limit.deny.nets().is_empty());
    assert_eq!(c.limit.worker().rate, None);
    // Loopback is allow-listed unless the list is given.
    let d = file("").unwrap();
    assert_eq!(d.limit.worker().allow.len(), 2);
    assert_eq!(d.limit.worker().signature_share_ppm, 250_000);
    let many = (0..=MAX_LIST).map(|i| format!("\"10.0.{}.{}\"", i / 256, i % 256));
    let text = format!("[limit]\ndeny = [{}]", many.collect::<Vec<_>>().join(","));
    assert!(err(&text).contains("1025 networks"));
}
