use std::path::Path;

use super::*;

#[test]
fn the_now_socket_keys_default_parse_and_print_back() {
    let p = Path::new("/etc/gnomon/sync.toml");
    let d = Settings::default();
    assert_eq!(d.now_socket.as_deref(), Some(Path::new(DEFAULT_NOW_SOCKET)));
    assert_eq!((d.now_socket_mode, d.now_drift_ppm), (0o660, 100));
    let l = Layer::from_toml(
        "[sync]\nnow-socket = \"off\"\nnow-socket-mode = \"0666\"\nnow-socket-group = \"gnomon-now\"\nnow-drift-ppm = 20\n",
        p,
    )
    .unwrap();
    let s = Settings::resolve(&l, &Layer::default());
    assert_eq!(s.now_socket, None);
    assert_eq!((s.now_socket_mode, s.now_drift_ppm), (0o666, 20));
    assert_eq!(s.now_socket_group.as_deref(), Some("gnomon-now"));
    let again = Layer::from_toml(&s.to_string(), p).unwrap();
    assert_eq!(Settings::resolve(&again, &Layer::default()), s);
    let l = Layer::from_toml("[sync]\nnow-socket = \"now.sock\"\n", p).unwrap();
    let s = Settings::resolve(&l, &Layer::default());
    assert_eq!(
        s.now_socket.as_deref(),
        Some(Path::new("/etc/gnomon/now.sock"))
    );
    for bad in [
        "now-socket-mode = \"0777\"",
        "now-drift-ppm = 0",
        "now-socket-group = \"a b\"",
        "now-socket = \"\"",
    ] {
        assert!(
            Layer::from_toml(&format!("[sync]\n{bad}\n"), p).is_err(),
            "{bad}"
        );
    }
    assert_eq!(group_id("0"), Ok(0));
    assert_eq!(group_id("root"), Ok(0));
    assert!(group_id("no-such-group-here").is_err());
}

#[test]
fn layers_apply_in_order_and_print_back() {
    let file = Layer::from_toml(
        "[sync]\nservers = \"list.json\"\ninterval = \"5m\"\nquorum = 3\n",
        Path::new("/etc/gnomon/sync.toml"),
    )
    .unwrap();
    let over = Layer {
        quorum: Some(4),
        ..Layer::default()
    };
    let s = Settings::resolve(&file, &over);
    assert_eq!(
        s.servers.as_deref(),
        Some(Path::new("/etc/gnomon/list.json"))
    );
    assert_eq!(s.interval, Duration::from_secs(300));
    assert_eq!(s.quorum, 4);
    assert_eq!(s.min_servers, 3);
    let again = Layer::from_toml(&s.to_string(), Path::new("/x.toml")).unwrap();
    assert_eq!(Settings::resolve(&again, &Layer::default()), s);
}

#[test]
fn out_of_range_values_and_unknown_keys_are_errors() {
    let p = Path::new("/s.toml");
    let e = Layer::from_toml("[sync]\ninterval = \"500ms\"\n", p).unwrap_err();
    assert!(e.0.contains("[sync] interval"), "{e}");
    assert!(Layer::from_toml("[sync]\nquorum = 0\n", p).is_err());
    assert!(Layer::from_toml("[sync]\nquorumm = 2\n", p).is_err());
    assert!(Layer::from_toml("[other]\n", p).is_err());
    assert!(Layer::from_toml("[sync]\nreport-url = \"http://x\"\n", p).is_err());
    assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
    assert!(parse_interval("0s").is_err());
    assert!(parse_interval("2d").is_err());
    // Plain HTTP loads, and is refused once the settings are whole unless
    // a key pins the list.
    let file =
        Layer::from_toml("[sync]\nservers-url = \"http://lists.example/l.json\"\n", p).unwrap();
    let e = Settings::resolve(&file, &Layer::default())
        .check(&file)
        .unwrap_err();
    assert!(
        e.contains("[sync] servers-url") && e.contains("plain HTTP"),
        "{e}"
    );
    assert!(Layer::from_toml("[sync]\nservers-url = \"ftp://x/l.json\"\n", p).is_err());
    assert!(parse_servers_url("https://lists.example/l.json").is_ok());
    assert!(parse_list_refresh("31d").is_err());
    assert!(parse_metrics("127.0.0.1:9102").is_ok());
    assert!(parse_metrics("localhost").is_err());
    // Off as serve's metrics and now-socket say it: in a flag and a file,
    // over a file's address, and printed back.
    assert_eq!(parse_metrics("off"), Ok(Metrics(None)));
    let file = Layer::from_toml("[sync]\nmetrics = \"127.0.0.1:9102\"\n", p).unwrap();
    let over = Layer {
        metrics: Some(parse_metrics("off").unwrap()),
        ..Layer::default()
    };
    let s = Settings::resolve(&file, &over);
    assert_eq!(s.metrics, None);
    assert!(s.to_string().contains("metrics = \"off\""), "{s}");
    let again = Layer::from_toml(&s.to_string(), p).unwrap();
    assert_eq!(Settings::resolve(&again, &Layer::default()), s);
}

#[test]
fn chrony_sock_is_a_path_that_fits_a_unix_socket_address() {
    let p = Path::new("/etc/gnomon/sync.toml");
    let l = Layer::from_toml("[sync]\nchrony-sock = \"/run/chrony.gnomon.sock\"\n", p).unwrap();
    let s = Settings::resolve(&l, &Layer::default());
    assert_eq!(
        s.chrony_sock.as_deref(),
        Some(Path::new("/run/chrony.gnomon.sock"))
    );
    assert!(s
        .to_string()
        .contains("chrony-sock = \"/run/chrony.gnomon.sock\""));
    assert_eq!(Settings::default().chrony_sock, None);
    let long = format!("[sync]\nchrony-sock = \"/{}\"\n", "x".repeat(107));
    let e = Layer::from_toml(&long, p).unwrap_err();
    assert!(e.0.contains("[sync] chrony-sock"), "{e}");
    assert!(parse_chrony_sock("").is_err());
    assert!(parse_chrony_sock(&format!("/{}", "x".repeat(106))).is_ok());
}

#[test]
fn chrony_max_radius_defaults_to_the_documented_5_s_and_is_range_checked() {
    let p = Path::new("/etc/gnomon/sync.toml");
    let d = Settings::default();
    assert_eq!(d.chrony_max_radius, Duration::from_secs(5));
    assert!(d.to_string().contains("chrony-max-radius = \"5s\""));
    let l = Layer::from_toml("[sync]\nchrony-max-radius = \"1500ms\"\n", p).unwrap();
    let s = Settings::resolve(&l, &Layer::default());
    assert_eq!(s.chrony_max_radius, Duration::from_millis(1500));
    let again = Layer::from_toml(&s.to_string(), p).unwrap();
    assert_eq!(Settings::resolve(&again, &Layer::default()), s);
    for bad in ["0s", "2h", "x"] {
        let e =
            Layer::from_toml(&format!("[sync]\nchrony-max-radius = \"{bad}\"\n"), p).unwrap_err();
        assert!(e.0.contains("[sync] chrony-max-radius"), "{e}");
    }
    assert_eq!(parse_chrony_max_radius("1ms"), Ok(Duration::from_millis(1)));
    assert_eq!(parse_chrony_max_radius("1h"), Ok(Duration::from_secs(3600)));
}

#[test]
fn signed_list_keys_take_one_or_many_and_print_back() {
    let p = Path::new("/etc/gnomon/sync.toml");
    let key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGLmG2Ljn2Z2xLC+EeomKTgnkwSMiAw0KjC2SPqzeJoo obs-a";
    let one = Layer::from_toml("[sync]\nservers-url = \"https://a.example/l.json\"\n", p).unwrap();
    assert_eq!(
        one.servers_url.as_deref(),
        Some(&["https://a.example/l.json".to_string()][..])
    );
    let many = Layer::from_toml(
        &format!(
            "[sync]\nservers-url = [\"http://a.example/l.json\", \"https://b.example/l.json\"]\n\
             servers-key = [\"{key}\", \"keys/b.pub\"]\nservers-threshold = 2\n"
        ),
        p,
    )
    .unwrap();
    let s = Settings::resolve(&many, &Layer::default());
    assert_eq!(s.servers_url.len(), 2);
    // A key line is kept as written; a file is relative to the file's
    // directory.
    assert_eq!(
        s.servers_key,
        [key.to_string(), "/etc/gnomon/keys/b.pub".to_string()]
    );
    assert_eq!(s.servers_threshold, 2);
    let printed = s.to_string();
    assert!(
        printed
            .contains("servers-url = [\"http://a.example/l.json\", \"https://b.example/l.json\"]")
            && printed.contains("servers-threshold = 2"),
        "{printed}"
    );
    let again = Layer::from_toml(&printed, Path::new("/x.toml")).unwrap();
    assert_eq!(Settings::resolve(&again, &Layer::default()), s);
    // The file's own check: the key file does not exist here.
    let e = s.check(&many).unwrap_err();
    assert!(e.contains("/etc/gnomon/keys/b.pub"), "{e}");
    for bad in [
        "servers-threshold = 0",
        "servers-key = \"ssh-ed25519 AAAAnope x\"",
        "servers-key = \"\"",
        "servers-url = [\"ftp://x/l\"]",
    ] {
        let e = Layer::from_toml(&format!("[sync]\n{bad}\n"), p).unwrap_err();
        assert!(e.0.contains("[sync] servers-"), "{bad}: {e}");
    }
    assert_eq!(Settings::default().servers_threshold, 1);
    assert!(Settings::default().check(&Layer::default()).is_ok());
}
