//! `gnomon serve --xdp` for real: a server namespace and a client
//! namespace joined by a veth pair, the server's XDP program on its end
//! (`xs0`), every query sent from the client's end (`xc0`).
//!
//! Shown here: every version served over UDP is answered through the
//! AF_XDP path over IPv4 and IPv6 (the XDP frame counters rise by at
//! least the answers, and every response counted left as an XDP frame);
//! a burst from one socket is all answered, and bursts from many over a
//! link of two queues (a worker each); frames from a forged source (the
//! LAN's broadcast address), garbage and frames with a wrong UDP checksum
//! or length are dropped, counted under their reasons and never answered
//! (frames meant for someone else, loopback ones among them, are the
//! kernel's: `same_as_kernel`); TCP and ICMP (and ARP and neighbour
//! discovery, without which nothing would be answered) still reach the
//! kernel, and so do IPv4 with options, fragments and IPv6 with an
//! extension header, answered by the UDP sockets; the program leaves the
//! interface when the server exits, cleanly or killed, and a restart
//! attaches it again.
//!
//! Root and a kernel with AF_XDP and veth are needed, and ethtool; where
//! one is missing each test says SKIPPED and why. The client's end has its
//! transmit checksum offload turned off (`ethtool -K xc0 tx off`): over
//! veth a datagram otherwise crosses with its UDP checksum unfinished (the
//! kernel trusts it, an AF_XDP socket sees the bytes), where a frame from
//! a real wire carries a whole one.
//!
//! For work on the harness itself, `GNOMON_XDP_NETNS_WITHOUT_XDP=1` runs
//! the server without `--xdp` and skips (saying so) every XDP assertion.

use crate::serve_support;
use crate::xdp_support;

#[path = "xdp_support/same_as_kernel.rs"]
mod same_as_kernel;

use std::net::Ipv4Addr;
use std::process::Command;

use gnomon_protocol::PROFILES;
use xdp_support::inside::{
    bad_checksum, bad_length, burst, garbage, passed_to_kernel, ping, spoof,
};
use xdp_support::{
    b64, decode_key, have, run_bounded, server4, server6, xdp_on, Net, Server, HELPER_ENV,
    PATIENCE, SERVER4, SERVER6, SERVER_IF, WITHOUT_XDP_ENV,
};

// The series this test reads, in one place: the XDP ones are new.
const FRAMES_RECEIVED: &str = "gnomon_xdp_frames_received_total";
const FRAMES_SENT: &str = "gnomon_xdp_frames_sent_total";
/// `gnomon_xdp_attached{interface="xs0",mode="native"|"generic",...} 1`.
const ATTACHED: &str = "gnomon_xdp_attached";
const REQUESTS: &str = "gnomon_requests_received_total";
const RESPONSES: &str = "gnomon_responses_total{";
const DROPPED: &str = "gnomon_dropped_total";
const BAD_CHECKSUM: &str = "frame_bad_checksum";
const BAD_LENGTH: &str = "frame_bad_length";
const SOURCE_BROADCAST: &str = "source_broadcast";
/// The reasons a payload that is not a request may be dropped under
/// (crates/server/src/stats.rs).
const PARSE_REASONS: &[&str] = &[
    "too_short",
    "framing",
    "malformed",
    "no_version",
    "bad_version_list",
    "unsupported_version",
    "no_nonce",
    "bad_type",
];

/// The value of the sample line `series value` (name and labels exactly).
fn find_sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))?
        .trim()
        .parse::<f64>()
        .ok()
        .map(|v| v as u64)
}

fn dropped_series(reason: &str) -> String {
    format!("{DROPPED}{{reason=\"{reason}\"}}")
}

/// A drop counter; 0 when the reason has not been seen yet.
fn dropped(text: &str, reason: &str) -> u64 {
    find_sample(text, &dropped_series(reason)).unwrap_or(0)
}

/// The sum over every series starting `prefix` (a name and `{`).
fn sum_of(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The XDP attachment gauge for the server's end, if it reads 1: its
/// labels (`mode="native"`, ...).
fn attached_mode(text: &str) -> Option<String> {
    let interface = format!("interface=\"{SERVER_IF}\"");
    text.lines().find_map(|l| {
        let (labels, value) = l
            .strip_prefix(ATTACHED)?
            .strip_prefix('{')?
            .split_once("} ")?;
        let on = value.trim().parse::<f64>().ok()? == 1.0;
        (on && labels.split(',').any(|kv| kv == interface)).then(|| labels.to_owned())
    })
}

/// Wait until the server reports XDP attached (or, without XDP, until
/// it serves metrics); the page.
fn wait_attached(net: &Net, server: &mut Server) -> String {
    if !xdp_on() {
        return net.wait_metrics(server, "metrics", |m| m.contains(REQUESTS));
    }
    let page = net.wait_metrics(server, "XDP attached", |m| attached_mode(m).is_some());
    eprintln!("XDP attached: {}", attached_mode(&page).unwrap());
    page
}

/// `ping -c 1 -W 2 TO` in namespace `ns` answers, in one of three tries.
fn ping_from(ns: &str, to: &str) {
    let mut said = String::new();
    for _ in 0..3 {
        let out = run_bounded(
            Command::new("ip").args(["netns", "exec", ns, "ping", "-c", "1", "-W", "2", to]),
            PATIENCE,
        );
        if out.status.success() {
            return;
        }
        said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    panic!("no echo reply from {to} in three tries: {said}");
}

/// Skip (saying so) an XDP-specific assertion when developing without
/// XDP; true when it should run.
fn xdp_check(test: &str, what: &str) -> bool {
    if xdp_on() {
        return true;
    }
    gnomon_testkit::skip(
        &format!("xdp_netns::{test}"),
        &format!("{WITHOUT_XDP_ENV} set: not checked: {what}"),
    );
    false
}

#[test]
fn every_udp_version_is_answered_through_xdp_over_ipv4_and_ipv6() {
    let test = "every_udp_version_is_answered_through_xdp_over_ipv4_and_ipv6";
    let Some(net) = Net::build(test, "v") else {
        return;
    };
    let mut server = net.serve();
    let before = wait_attached(&net, &mut server);
    if xdp_check(test, "the program on the link") {
        net.wait_program(true);
    }
    let public = server.public;
    let mut answers = 0u64;
    // ML-DSA-44's version is TCP only (pq_serve.rs); the rest are asked
    // over UDP, one version at a time.
    for p in PROFILES.iter().filter(|p| p.udp) {
        for to in [server4(), server6()] {
            let j = net.query(to, &public, &["--protocol", p.name, "--udp-only"]);
            assert_eq!(j["version"]["name"], p.name, "{to}: {j}");
            assert_eq!(j["transport"], "udp", "{to}: {j}");
            answers += 1;
        }
    }
    assert!(answers >= 8, "{answers} versions over UDP");
    server.assert_alive();
    net.wait_metrics(&mut server, "every answer counted", |m| {
        sum_of(m, RESPONSES) >= sum_of(&before, RESPONSES) + answers
    });
    if xdp_check(test, "the answers went through AF_XDP") {
        let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
        let received = |m: &str| find_sample(m, FRAMES_RECEIVED).unwrap_or(0);
        let page = net.wait_metrics(&mut server, "the XDP frame counters", |m| {
            sent(m) >= sent(&before) + answers && received(m) >= received(&before) + answers
        });
        eprintln!(
            "{answers} answers; XDP frames received {}, sent {}",
            received(&page),
            sent(&page)
        );
        // And none by the sockets: every response counted went out as an
        // XDP frame (a retried query's too).
        let responses = |m: &str| sum_of(m, RESPONSES);
        net.wait_metrics(&mut server, "as many frames sent as responses", |m| {
            sent(m) - sent(&before) == responses(m) - responses(&before)
        });
    }
    server.terminate();
}

#[test]
fn a_burst_from_one_socket_is_all_answered_through_xdp() {
    let test = "a_burst_from_one_socket_is_all_answered_through_xdp";
    let Some(net) = Net::build(test, "b") else {
        return;
    };
    let mut server = net.serve();
    let before = wait_attached(&net, &mut server);
    let key = b64(&server.public);
    let burst = 64u64;
    for to in [server4(), server6()] {
        let said = net.helper(&net.client(), &format!("burst {to} 1 {burst} {key}"));
        assert!(
            said.contains(&format!("BURST answered {burst} of {burst}")),
            "{to}: {said}"
        );
    }
    if xdp_check(test, "the burst went through AF_XDP") {
        let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
        net.wait_metrics(&mut server, "the burst's frames sent", |m| {
            sent(m) >= sent(&before) + 2 * burst
        });
    }
    server.assert_alive();
}

#[test]
fn bursts_over_two_queues_are_all_answered_one_worker_a_queue() {
    let test = "bursts_over_two_queues_are_all_answered_one_worker_a_queue";
    let Some(net) = Net::build_with(test, "q", 2) else {
        return;
    };
    let mut server = net.serve();
    let before = wait_attached(&net, &mut server);
    if xdp_check(test, "a socket on each of the two queues") {
        let labels = attached_mode(&before).unwrap();
        assert!(labels.contains("queues=\"2\""), "{labels}");
    }
    // Sixteen flows (the client's send queue, and so the server's receive
    // queue, is chosen per flow), sixteen requests each.
    let key = b64(&server.public);
    let (flows, each) = (16u64, 16u64);
    let said = net.helper(
        &net.client(),
        &format!("burst {} {flows} {each} {key}", server4()),
    );
    let total = flows * each;
    assert!(
        said.contains(&format!("BURST answered {total} of {total}")),
        "{said}"
    );
    if xdp_check(test, "the bursts went through AF_XDP") {
        let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
        net.wait_metrics(&mut server, "the bursts' frames sent", |m| {
            sent(m) >= sent(&before) + total
        });
    }
    server.terminate();
}

/// What the client's helper sends in `hostile_frames_...`, the reason the
/// server must count it under, and whether that needs XDP (the kernel
/// drops it before any socket otherwise).
const HOSTILE: &[(&str, &[&str], bool)] = &[
    ("spoof-broadcast", &[SOURCE_BROADCAST], true),
    ("garbage", PARSE_REASONS, false),
    ("bad-checksum", &[BAD_CHECKSUM], true),
    ("bad-checksum6", &[BAD_CHECKSUM], true),
    ("bad-length", &[BAD_LENGTH], true),
];

#[test]
fn hostile_frames_are_dropped_counted_and_never_answered() {
    let test = "hostile_frames_are_dropped_counted_and_never_answered";
    let Some(net) = Net::build(test, "h") else {
        return;
    };
    let mut server = net.serve();
    wait_attached(&net, &mut server);
    // Ordinary queries first: the client learns the server's link
    // address (ARP, neighbour discovery) from them, so the forged frames
    // go out at once. (A first frame from ::1 leaves neighbour discovery
    // unanswered here, and the frame is never sent.) One attempt each,
    // waited for long: no late answer to a retry counts below.
    for to in [server4(), server6()] {
        net.query(to, &server.public, &["--udp-only", "--timeout", "20s"]);
    }
    net.wait_metrics(&mut server, "the first answers counted", |m| {
        sum_of(m, RESPONSES) >= 2
    });
    let key = b64(&server.public);
    for (kind, reasons, needs_xdp) in HOSTILE {
        let before = net.metrics(&server);
        let count = |m: &str| reasons.iter().map(|r| dropped(m, r)).sum::<u64>();
        // The helper sends the frame, then (where it can hear a reply) a
        // valid request behind it from the same flow, and fails on any
        // answer but the probe's.
        let said = net.helper(&net.client(), &format!("{kind} {key}"));
        assert!(said.contains("HOSTILE sent"), "{kind}: {said}");
        // Without XDP the kernel drops these before any socket: nothing
        // to count.
        if *needs_xdp && !xdp_check(test, &format!("{kind} counted")) {
            continue;
        }
        let page = net.wait_metrics(&mut server, &format!("{kind} counted"), |m| {
            count(m) > count(&before)
        });
        assert_eq!(count(&page), count(&before) + 1, "{kind}: {page}");
        // Answers: the probe's only, if the helper sent one.
        let probes = u64::from(said.contains("PROBE answered"));
        let page = net.wait_metrics(&mut server, "the probe counted", |m| {
            sum_of(m, RESPONSES) >= sum_of(&before, RESPONSES) + probes
        });
        assert_eq!(
            sum_of(&page, RESPONSES),
            sum_of(&before, RESPONSES) + probes,
            "{kind} was answered: {page}"
        );
        if xdp_on() {
            let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
            assert_eq!(sent(&page), sent(&before) + probes, "{kind}: {page}");
        }
        // Received = answered + dropped: the hostile datagram is received
        // once, whichever stage refused it.
        let received = |m: &str| find_sample(m, REQUESTS).unwrap_or(0);
        assert_eq!(
            received(&page),
            received(&before) + 1 + probes,
            "{kind}: {page}"
        );
        server.assert_alive();
    }
    // Still serving.
    for to in [server4(), server6()] {
        net.query(to, &server.public, &["--udp-only"]);
    }
}

#[test]
fn tcp_icmp_and_what_the_program_passes_still_reach_the_kernel() {
    let test = "tcp_icmp_and_what_the_program_passes_still_reach_the_kernel";
    let Some(net) = Net::build(test, "k") else {
        return;
    };
    let mut server = net.serve();
    let before = wait_attached(&net, &mut server);
    let public = server.public;
    for to in [server4(), server6()] {
        let j = net.query(to, &public, &["--tcp"]);
        assert_eq!(j["transport"], "tcp", "{to}: {j}");
    }
    // ICMP: `ping` where installed (IPv4 and IPv6), else an echo from a
    // raw socket (IPv4).
    if have("ping") {
        for to in [SERVER4.to_string(), SERVER6.to_string()] {
            ping_from(&net.client(), &to);
        }
    } else {
        let said = net.helper(&net.client(), &format!("ping {SERVER4}"));
        assert!(said.contains("PING reply"), "{said}");
    }
    // UDP the program leaves to the kernel: IPv4 with options, a request
    // in two fragments, IPv6 with an extension header. The server's UDP
    // sockets answer them.
    let key = b64(&public);
    for kind in ["ip-options", "fragments", "ipv6-extension"] {
        let said = net.helper(&net.client(), &format!("{kind} {key}"));
        assert!(said.contains(&format!("ANSWERED {kind}")), "{said}");
    }
    if xdp_check(test, "none of it went through AF_XDP") {
        let page = net.wait_metrics(&mut server, "the sockets' answers counted", |m| {
            sum_of(m, RESPONSES) >= sum_of(&before, RESPONSES) + 3
        });
        for series in [FRAMES_RECEIVED, FRAMES_SENT] {
            assert_eq!(
                find_sample(&page, series),
                find_sample(&before, series),
                "{series}: {page}"
            );
        }
    }
    server.terminate();
}

#[test]
fn the_program_leaves_with_the_server_on_sigterm_and_sigkill() {
    let test = "the_program_leaves_with_the_server_on_sigterm_and_sigkill";
    let Some(net) = Net::build(test, "l") else {
        return;
    };
    let checks = xdp_check(test, "the program on the link");
    let answered = |server: &mut Server| {
        wait_attached(&net, server);
        if checks {
            net.wait_program(true);
        }
        net.query(server4(), &server.public, &["--udp-only"]);
    };

    // SIGTERM: a clean exit, and the link has no program.
    let mut server = net.serve();
    answered(&mut server);
    server.terminate();
    if checks {
        net.wait_program(false);
    }
    drop(server);

    // SIGKILL: no chance to detach, yet the program goes with the last
    // descriptor of its link.
    let mut server = net.serve();
    answered(&mut server);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    if checks {
        net.wait_program(false);
    }
    drop(server);

    // And a restart attaches and answers again (XDP asked for through
    // the environment this time).
    let mut server = net.serve_with(true);
    answered(&mut server);
    server.terminate();
    if checks {
        net.wait_program(false);
    }
}

// ---------------------------------------------------------------------
// Inside a namespace.

/// Run inside a namespace by the tests above, told what to do by
/// `HELPER_ENV`: `metrics ADDR`, `burst ADDR SOCKETS N KEY`, `spoof-broadcast KEY`, `garbage KEY`, `bad-checksum KEY`,
/// `bad-checksum6 KEY`, `bad-length KEY`, `ping ADDR`, `ip-options KEY`, `fragments KEY`,
/// `ipv6-extension KEY`, `l2 CLASS SERVER_MAC KEY`.
#[test]
#[ignore = "run inside a network namespace by the xdp_netns tests"]
fn xdp_netns_helper() {
    let command = std::env::var(HELPER_ENV).expect("started by an xdp_netns test");
    let words: Vec<&str> = command.split_whitespace().collect();
    match words[..] {
        ["metrics", at] => {
            let page = serve_support::peer::get(at.parse().unwrap(), "/metrics");
            println!("METRICS-BEGIN\n{page}\nMETRICS-END");
        }
        ["burst", to, sockets, n, key] => burst(
            to.parse().unwrap(),
            sockets.parse().unwrap(),
            n.parse().unwrap(),
            &decode_key(key),
        ),
        ["spoof-broadcast", _] => spoof((Ipv4Addr::new(10, 77, 1, 255), 2000).into()),
        ["garbage", key] => garbage(&decode_key(key)),
        ["bad-checksum", key] => bad_checksum(server4(), &decode_key(key)),
        ["bad-checksum6", key] => bad_checksum(server6(), &decode_key(key)),
        ["bad-length", key] => bad_length(server4(), &decode_key(key)),
        ["ping", to] => ping(to.parse().unwrap()),
        [kind @ ("ip-options" | "fragments" | "ipv6-extension"), key] => {
            passed_to_kernel(kind, &decode_key(key))
        }
        ["l2", class, server_mac, key] => same_as_kernel::inside(class, server_mac, key),
        _ => panic!("unknown helper command {command:?}"),
    }
}
