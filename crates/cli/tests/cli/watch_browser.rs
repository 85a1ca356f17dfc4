//! `gnomon watch`'s pages in a real browser: headless Chromium (Debian's
//! package) renders `/`, a server's page and `/reports` from a watch (with
//! its sink) over the loopback lineup; the rendered text must name every
//! server with its state and how long ago it was checked, the page must
//! update itself in place, and screenshots at a desktop and a phone width
//! are saved under target/ for a developer to look at (docs/watch-*.png
//! are copies).

use crate::serve_support;
use crate::sync_support;
use crate::watch_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use watch_support::{Watch, EXPIRING, GARBAGE, HONEST, LIAR, SILENT};

/// Chromium's start, render and exit on a busy machine, bounded.
const BROWSER: Duration = Duration::from_secs(90);

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Run headless Chromium with `args` (a fresh profile each time); its
/// stdout, or None when it did not finish in time.
fn browse(bin: &Path, profile: &Path, args: &[String]) -> Option<String> {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let until = Instant::now() + BROWSER;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return reader.join().ok();
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The table row (as rendered) that links to `name`'s page.
fn row<'a>(dom: &'a str, name: &str) -> &'a str {
    let link = format!("href=\"/servers/{name}\"");
    dom.split("<tr")
        .find(|r| r.contains(&link))
        .unwrap_or_else(|| panic!("no row for {name} in the rendered page:\n{dom}"))
}

#[test]
fn the_pages_render_in_a_real_browser() {
    let _heavy = crate::heavy();
    let test = "the_pages_render_in_a_real_browser";
    let Some(bin) = chromium() else {
        gnomon_testkit::skip(test, "chromium is not installed (Debian package chromium)");
        return;
    };
    if !sync_support::have_faketime(test) {
        return;
    }
    let lineup = watch_support::start("watch-browser", true);
    let db = format!("sqlite:{}", lineup.dir.join("watch.db").display());
    let watch = Watch::start_with(&lineup.list, &["--database", &db, "--sink"]);
    watch.first_round(Duration::from_secs(90));
    // A few rounds, so the history plots have lines.
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        let (_, body) = watch.get("/api/servers");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if v["rounds"].as_u64().unwrap_or(0) >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // target/ is not there when CARGO_TARGET_DIR points elsewhere.
    let shots = serve_support::repo().join("target");
    std::fs::create_dir_all(&shots).unwrap();
    let url = format!("http://{}/", watch.addr);
    let profile = lineup.dir.join("chromium");

    let Some(dom) = browse(
        &bin,
        &profile.join("a"),
        &["--dump-dom".into(), url.clone()],
    ) else {
        panic!("chromium did not render {url} within {BROWSER:?}");
    };
    let expected = [
        (HONEST[0], "OK"),
        (HONEST[1], "OK"),
        (HONEST[2], "OK"),
        (SILENT, "DOWN"),
        (GARBAGE, "INVALID"),
        (EXPIRING, "WARNING"),
        (LIAR, "LYING"),
    ];
    for (name, state) in &expected {
        let r = row(&dom, name);
        assert!(r.contains(&format!(">{state}<")), "{name} not {state}: {r}");
    }
    // The words say it without colour: the liar's agreement cell, the
    // expiring certificate, the silent server.
    assert!(row(&dom, EXPIRING).contains("EXPIRES in"));
    assert!(row(&dom, SILENT).contains("no answer"));
    assert!(row(&dom, LIAR).contains("LIES:"));
    for (name, _) in &expected {
        assert!(row(&dom, name).contains("checked "), "{name}: no age");
    }
    assert!(dom.contains(r#"href="/reports""#), "no link to the reports");

    // With time to run, the script fetches the page again and swaps its
    // live parts in: the body counts the swaps, the note says when.
    let dom = browse(
        &bin,
        &profile.join("r"),
        &[
            "--virtual-time-budget=25000".into(),
            "--dump-dom".into(),
            url.clone(),
        ],
    )
    .unwrap_or_else(|| panic!("chromium did not render {url}"));
    assert!(dom.contains("data-refreshed=\""), "never refreshed: {dom}");
    assert!(dom.contains("last update"), "{dom}");
    row(&dom, LIAR);

    for (png, size) in [
        ("watch-status.png", "1600,900"),
        ("watch-status-narrow.png", "420,1400"),
    ] {
        screenshot(&bin, &profile.join(png), &shots.join(png), size, &url);
    }

    let page = format!("{url}servers/{LIAR}");
    let dom = browse(
        &bin,
        &profile.join("c"),
        &["--dump-dom".into(), page.clone()],
    )
    .unwrap_or_else(|| panic!("chromium did not render {page}"));
    assert!(dom.contains(&format!("<h1>{LIAR}</h1>")), "{dom}");
    assert!(dom.contains("Uptime: 100.0 % of"), "{dom}");
    assert!(dom.contains("<svg"), "{dom}");
    assert!(dom.contains("<polyline"), "no plotted line: {dom}");
    // The latest response decoded as `gnomon inspect` prints it.
    assert!(dom.contains("response (ROUGHTIM packet"), "{dom}");
    assert!(dom.contains("delegation (long-term key)  ok"), "{dom}");
    assert!(dom.contains("Malfeasance report"), "{dom}");
    assert!(dom.contains("ago)"), "no age: {dom}");
    // The radius is drawn as a band, with ticks in a unit.
    assert!(dom.contains("<polygon"), "no radius band: {dom}");
    assert!(dom.contains("shaded: radius"), "{dom}");
    for (png, size) in [
        ("watch-server.png", "1280,1400"),
        ("watch-server-narrow.png", "420,2400"),
    ] {
        screenshot(&bin, &profile.join(png), &shots.join(png), size, &page);
    }

    // An honest server's offset: a wiggle inside its radius band.
    let honest = format!("{url}servers/{}", HONEST[0]);
    let png = "watch-server-honest.png";
    screenshot(
        &bin,
        &profile.join(png),
        &shots.join(png),
        "1280,1400",
        &honest,
    );

    let reports = format!("{url}reports");
    let dom = browse(
        &bin,
        &profile.join("e"),
        &["--dump-dom".into(), reports.clone()],
    )
    .unwrap_or_else(|| panic!("chromium did not render {reports}"));
    assert!(dom.contains(">LYING<"), "{dom}");
    assert!(dom.contains(r#"<a href="/">"#), "{dom}");
    screenshot(
        &bin,
        &profile.join("f"),
        &shots.join("watch-reports.png"),
        "1280,700",
        &reports,
    );
}

/// A screenshot of `url` at `size` into `png`, which must then hold one.
fn screenshot(bin: &Path, profile: &Path, png: &Path, size: &str, url: &str) {
    let _ = std::fs::remove_file(png);
    browse(
        bin,
        profile,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={size}"),
            url.to_string(),
        ],
    )
    .expect("chromium took the screenshot in time");
    assert_png(png);
}

fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
    assert!(bytes.len() > 10_000, "{} is nearly empty", path.display());
}
