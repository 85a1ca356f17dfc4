//! `gnomon health`: a URL that cannot be asked is a usage error (64) that
//! names it and says what is wrong; one where nothing answers is
//! unhealthy (1) and says so in words; --json gives one object either way.

use super::{gnomon, plain, refusal, says};
use crate::serve_support::start_serve;

#[test]
fn a_bad_url_is_64_and_says_what_is_wrong() {
    for (url, why) in [
        (
            "127.0.0.1:9319/health",
            "it has no scheme; write http://127.0.0.1:9319/health",
        ),
        ("https://127.0.0.1:9319/health", "plain HTTP"),
        ("ftp://127.0.0.1/health", "is not HTTP"),
        ("http:///health", "names no host"),
    ] {
        let run = gnomon(&["health", "--url", url]);
        assert_eq!(run.code, 64, "{url}: {}", run.stderr);
        says(&run.stderr, &format!("--url {url}: "));
        assert!(run.stderr.contains(why), "{url}: {}", run.stderr);
        plain(&run.stderr);
        let v = gnomon(&["health", "--url", url, "--json"]).json();
        assert_eq!(v["exit_code"], 64, "{v}");
        assert_eq!(v["error"]["kind"], "usage", "{v}");
        assert_eq!(v["healthy"], false, "{v}");
    }
}

#[test]
fn nothing_listening_is_unhealthy_in_words() {
    // A port that was just ours and is closed now: the connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/health");
    let run = gnomon(&["health", "--url", &url]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr.trim(),
        format!(
            "gnomon health: {url}: unreachable: the connection was refused (nothing listens there)"
        )
    );
    plain(&run.stderr);
    let v = gnomon(&["health", "--url", &url, "--json"]).json();
    assert_eq!(refusal(&v), (Some("unreachable"), Some(1)), "{v}");
}

#[test]
fn json_gives_the_status_of_a_real_server() {
    let s = start_serve(&["--metrics", "127.0.0.1:0"], |_| {});
    let base = format!("http://{}", s.metrics.expect("metrics address"));
    let run = gnomon(&["health", "--url", &format!("{base}/health"), "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    let seen = |v: serde_json::Value| {
        (
            v["healthy"].as_bool(),
            v["status"].as_u64(),
            v["exit_code"].as_u64(),
        )
    };
    assert_eq!(seen(run.json()), (Some(true), Some(200), Some(0)));
    let v = gnomon(&["health", "--url", &format!("{base}/nowhere"), "--json"]).json();
    assert_eq!(seen(v), (Some(false), Some(404), Some(1)));
}
