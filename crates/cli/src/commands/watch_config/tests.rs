//! The configuration's layering, printing back and refusals.

use super::*;
use gnomon_watch::sink::DEFAULT_MAX_BODY;

const FILE: &str = "/etc/gnomon/gnomon-watch.toml";

#[test]
fn layers_apply_in_order_and_print_back() {
    let file = FileLayers::from_toml(
        "[watch]\nservers = \"list.json\"\nlisten = \"127.0.0.1:9000\"\ninterval = \"2m\"\n\
         burst = 20\nwarn-radius = \"500ms\"\n[report-server]\nrate = 5\n",
        Path::new(FILE),
    )
    .unwrap();
    let over = WatchLayer {
        burst: Some(30),
        ..WatchLayer::default()
    };
    let w = WatchSettings::resolve(&file.watch, &over).unwrap();
    assert_eq!(
        w.servers.as_deref(),
        Some(Path::new("/etc/gnomon/list.json"))
    );
    assert_eq!(w.interval, Duration::from_secs(120));
    assert_eq!((w.burst, w.concurrency), (30, 8));
    assert_eq!(w.warn_radius, Duration::from_millis(500));
    let back = FileLayers::from_toml(&w.to_string(), Path::new(FILE)).unwrap();
    assert_eq!(
        WatchSettings::resolve(&back.watch, &WatchLayer::default()),
        Ok(w)
    );
    let s = SinkSettings::resolve(&file.sink, &SinkLayer::default());
    assert_eq!((s.rate, s.max_body), (5, DEFAULT_MAX_BODY as u64));
    let back = FileLayers::from_toml(&s.to_string(), Path::new(FILE)).unwrap();
    assert_eq!(SinkSettings::resolve(&back.sink, &SinkLayer::default()), s);
}

#[test]
fn key_files_read_base64_lines_and_name_a_bad_line() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let dir = std::env::temp_dir().join(format!("gnomon-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("keys.txt");
    let (a, b) = ([1u8; 32], [2u8; 32]);
    let text = format!(
        "# ours\n{}\n\n  {}  # theirs\n",
        b64.encode(a),
        b64.encode(b)
    );
    std::fs::write(&file, text).unwrap();
    let keys = load_keys(&file).unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys.contains(&a) && keys.contains(&b) && !keys.contains(&[3u8; 32]));
    std::fs::write(&file, format!("{}\nAAAA\n", b64.encode(a))).unwrap();
    let e = load_keys(&file).unwrap_err();
    assert!(
        e.ends_with(
            "keys.txt:2: `AAAA` is not a public key (base64 of 32 bytes, Ed25519, or 1312, ML-DSA-44)"
        ),
        "{e}"
    );
    std::fs::write(&file, "# none\n").unwrap();
    assert!(load_keys(&file).unwrap_err().contains("no public keys"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_values_unknown_keys_and_missing_requirements_are_errors() {
    for (text, needle) in [
        (
            "[watch]\ninterval = \"0s\"",
            "[watch] interval: `0s` is not a duration in 1s..=1d",
        ),
        (
            "[watch]\nconcurrency = 0",
            "[watch] concurrency: `0` is not an integer in 1..=256",
        ),
        ("[watch]\nburst = 65", "[watch] burst"),
        ("[watch]\ntimeout = \"20s\"", "[watch] timeout"),
        (
            "[watch]\nwarn-radius = \"0s\"",
            "[watch] warn-radius: `0s` is not a duration in 1ms..=1d",
        ),
        ("[watch]\nwarn-radius = \"2d\"", "[watch] warn-radius"),
        ("[watch]\nlisten = \"nowhere\"", "[watch] listen"),
        ("[watch]\ndatabase = \"mysql://x\"", "[watch] database"),
        ("[watch]\nintervall = \"5m\"", "unknown field `intervall`"),
        ("[report-server]\nmax-body = 10", "[report-server] max-body"),
        ("[report-server]\nrate = 0", "[report-server] rate"),
        ("[report-server]\nquota = 10", "[report-server] quota"),
        (
            "[report-server]\nquota-per-source = -1",
            "[report-server] quota-per-source",
        ),
        (
            "[report-server]\nretention = \"0s\"",
            "[report-server] retention",
        ),
        (
            "[report-server]\nrate-table = 0",
            "[report-server] rate-table",
        ),
        ("[monitor]\n", "unknown field `monitor`"),
    ] {
        let e = FileLayers::from_toml(text, Path::new(FILE)).unwrap_err();
        assert!(e.contains(needle), "{text}: {e}");
        assert!(e.starts_with(FILE), "{e}");
    }
    let e = WatchSettings::resolve(&WatchLayer::default(), &WatchLayer::default());
    assert!(e.unwrap_err().contains("`servers` is required"));
    let sink_only = WatchLayer {
        servers: Some("l.json".into()),
        listen: Some(parse_listen("127.0.0.1:1").unwrap()),
        sink: Some(true),
        ..WatchLayer::default()
    };
    let e = WatchSettings::resolve(&sink_only, &WatchLayer::default()).unwrap_err();
    assert!(e.contains("give `database`"), "{e}");
}

#[test]
fn a_source_quota_as_large_as_the_total_is_refused() {
    // Issue 34: no shared budget may be one source's. Below the total, one
    // sender at its quota leaves the rest to others (the report sink's
    // `padded_flood_stops_at_the_quotas` tests show it end to end).
    let layer = |per_source, total| SinkLayer {
        quota_per_source: Some(per_source),
        quota: Some(total),
        ..SinkLayer::default()
    };
    let settings = |l| SinkSettings::resolve(&l, &SinkLayer::default());
    for (per_source, total) in [(1 << 20, 1 << 20), (2 << 20, 1 << 20)] {
        let e = settings(layer(per_source, total))
            .sink_config(None)
            .unwrap_err();
        assert!(
            e.contains("quota-per-source") && e.contains("must be below quota"),
            "{e}"
        );
    }
    let c = settings(layer((1 << 20) - 1, 1 << 20))
        .sink_config(None)
        .unwrap();
    assert_eq!(
        (c.quota_per_source, c.quota_total),
        ((1 << 20) - 1, 1 << 20)
    );
    assert!(
        SinkSettings::resolve(&SinkLayer::default(), &SinkLayer::default())
            .sink_config(None)
            .is_ok()
    );
}

/// The publication's keys load from the file, print back, and the ones
/// that only make sense together are refused apart, saying what to add.
#[test]
fn publication_and_signed_input_keys_are_checked_together() {
    let load = |text: &str| {
        FileLayers::from_toml(
            &format!("[watch]\nlisten = \"127.0.0.1:9000\"\n{text}"),
            Path::new(FILE),
        )
        .and_then(|f| WatchSettings::resolve(&f.watch, &WatchLayer::default()))
    };
    let w = load(
        "servers = \"list.json\"\npublish-key = \"key\"\npublish-expiry = \"2h\"\n\
         publish-name = \"observatory.example\"\npublish-url = \"https://o.example/servers.json\"\n",
    )
    .unwrap();
    assert_eq!(w.publish.key.as_deref(), Some(Path::new("/etc/gnomon/key")));
    assert_eq!(w.publish.expiry, Duration::from_secs(7200));
    assert_eq!(w.publish.window, Duration::from_secs(86_400));
    let back = FileLayers::from_toml(&w.to_string(), Path::new(FILE)).unwrap();
    assert_eq!(
        WatchSettings::resolve(&back.watch, &WatchLayer::default()),
        Ok(w)
    );
    let signed = load(
        "servers-url = [\"http://a.example/servers.json\", \"http://b.example/servers.json\"]\n\
         servers-key = [\"a.pub\", \"b.pub\"]\nservers-threshold = 2\n",
    )
    .unwrap();
    assert_eq!(
        (signed.servers.clone(), signed.publish.servers_threshold),
        (None, 2)
    );
    let back = FileLayers::from_toml(&signed.to_string(), Path::new(FILE)).unwrap();
    assert_eq!(
        WatchSettings::resolve(&back.watch, &WatchLayer::default()),
        Ok(signed)
    );
    for (text, words) in [
        ("", "servers-url"),
        ("servers = \"l\"\nservers-url = [\"http://a/s.json\"]\nservers-key = [\"k\"]\n", "one of them"),
        ("servers-url = [\"http://a/s.json\"]\n", "servers-key"),
        ("servers-url = [\"http://a/s.json\"]\nservers-key = [\"k\"]\nservers-threshold = 2\n", "at least"),
        ("servers = \"l\"\npublish-key = \"k\"\npkcs11-module = \"m\"\npkcs11-token = \"t\"\npkcs11-key = \"k\"\n", "give one"),
        ("servers = \"l\"\npkcs11-module = \"m\"\n", "pkcs11-token"),
        ("servers = \"l\"\npkcs11-key = \"k\"\n", "pkcs11-module"),
        ("servers = \"l\"\npublish-url = \"https://o/servers.json\"\n", "publish-key"),
        ("servers = \"l\"\npublish-key = \"k\"\npublish-expiry = \"1m\"\ninterval = \"5m\"\n", "longer than interval"),
        ("servers = \"l\"\npublish-expiry = \"31d\"\n", "1m..=30d"),
        ("servers = \"l\"\npublish-url = \"ftp://o\"\n", "http(s) URL"),
    ] {
        let e = load(text).unwrap_err();
        assert!(e.contains(words), "{text:?}: {e}");
    }
}
