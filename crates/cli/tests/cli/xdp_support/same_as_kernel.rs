//! The AF_XDP path answers exactly the frames the socket path would
//! (issue 34): one class of frame per way a frame can be meant for
//! someone else, five frames each, sent as whole Ethernet frames from the
//! client's end, with the same expectations for a server on its sockets
//! alone and one serving through XDP, both listening on the wildcard
//! addresses. Every reply is heard on the link however it is addressed:
//! none may go to a group MAC, none may come from an address the server
//! does not have. On the XDP path, each frame the program leaves to the
//! kernel is counted under its reason.
//!
//! And the program's table of the host's addresses follows the host: an
//! address added (on the link, or on `lo` as an anycast address is) is
//! answered through XDP once the table has it, and one removed is not.

use std::net::{IpAddr, SocketAddr};

use super::{dropped, find_sample, sum_of, wait_attached, FRAMES_SENT, RESPONSES};
use crate::xdp_support::link::{self, client_mac, parse_mac, Link};
use crate::xdp_support::{
    b64, decode_key, server4, server6, xdp_on, How, Net, Server, CLIENT4, PORT, SERVER4,
};

/// Whose MAC a frame is sent to or from.
#[derive(Clone, Copy, Debug)]
enum Mac {
    Server,
    Client,
    /// Another host's unicast address.
    Other,
    Broadcast,
    /// IPv4 all-hosts (01:00:5e:00:00:01).
    AllHosts,
    /// IPv6 all-nodes (33:33:00:00:00:01).
    AllNodes,
}

/// One class: its frames' addresses, how many of its five are answered
/// (on either path), and the reason the XDP program passes them under.
struct Class {
    name: &'static str,
    dst_mac: Mac,
    src_mac: Mac,
    from: &'static str,
    to: &'static str,
    answered: usize,
    passed: &'static str,
}

const EACH: usize = 5;

const fn class(
    name: &'static str,
    (dst_mac, src_mac): (Mac, Mac),
    (from, to): (&'static str, &'static str),
    answered: usize,
    passed: &'static str,
) -> Class {
    Class {
        name,
        dst_mac,
        src_mac,
        from,
        to,
        answered,
        passed,
    }
}

/// The classes the review measured, and their relatives.
const CLASSES: &[Class] = &[
    class(
        "unknown-address",
        (Mac::Server, Mac::Client),
        ("10.77.1.2", "10.251.4.77"),
        0,
        "not_local",
    ),
    class(
        "unknown-address-in-broadcast",
        (Mac::Broadcast, Mac::Client),
        ("10.77.1.2", "10.251.4.77"),
        0,
        "group_destination",
    ),
    class(
        "unknown-address-in-all-hosts",
        (Mac::AllHosts, Mac::Client),
        ("10.77.1.2", "10.251.4.77"),
        0,
        "group_destination",
    ),
    class(
        "subnet-broadcast",
        (Mac::Broadcast, Mac::Client),
        ("10.77.1.2", "10.77.1.255"),
        0,
        "group_destination",
    ),
    class(
        "all-hosts",
        (Mac::AllHosts, Mac::Client),
        ("10.77.1.2", "224.0.0.1"),
        0,
        "group_destination",
    ),
    class(
        "other-hosts-mac",
        (Mac::Other, Mac::Client),
        ("10.77.1.2", "10.77.1.1"),
        0,
        "other_host",
    ),
    class(
        "loopback-from-the-wire",
        (Mac::Server, Mac::Client),
        ("127.0.0.1", "127.0.0.1"),
        0,
        "loopback",
    ),
    class(
        "loopback6-from-the-wire",
        (Mac::Server, Mac::Client),
        ("::1", "::1"),
        0,
        "loopback",
    ),
    class(
        "own-source",
        (Mac::Server, Mac::Client),
        ("10.77.1.1", "10.77.1.1"),
        0,
        "local_source",
    ),
    class(
        "unknown-address6",
        (Mac::Server, Mac::Client),
        ("fd77::2", "fd77::77"),
        0,
        "not_local",
    ),
    class(
        "all-nodes6",
        (Mac::AllNodes, Mac::Client),
        ("fd77::2", "ff02::1"),
        0,
        "group_destination",
    ),
    // Well addressed but from a broadcast MAC: answered as the kernel
    // answers it, through the neighbour table, never to the group.
    class(
        "broadcast-source-mac",
        (Mac::Server, Mac::Broadcast),
        ("10.77.1.2", "10.77.1.1"),
        EACH,
        "group_source",
    ),
    // For the_xdp_path_follows_the_hosts_addresses: removed by then.
    class(
        "removed-address",
        (Mac::Server, Mac::Client),
        ("10.77.1.2", "10.77.1.50"),
        0,
        "not_local",
    ),
];

fn find(name: &str) -> &'static Class {
    CLASSES
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no class {name}"))
}

/// Inside the client namespace: send class `name`'s five frames (then a
/// probe, unless they are to be answered) and say what came back.
pub(crate) fn inside(name: &str, server_mac: &str, key: &str) {
    let c = find(name);
    let public = decode_key(key);
    let index = CLASSES.iter().position(|x| x.name == name).unwrap() as u16;
    let sport = 41_000 + index;
    let (server, client) = (parse_mac(server_mac), client_mac());
    let mac = |m: Mac| match m {
        Mac::Server => server,
        Mac::Client => client,
        Mac::Other => [0x02, 0, 0, 0, 0, 0x99],
        Mac::Broadcast => [0xff; 6],
        Mac::AllHosts => [0x01, 0x00, 0x5e, 0, 0, 1],
        Mac::AllNodes => [0x33, 0x33, 0, 0, 0, 1],
    };
    let from = SocketAddr::new(c.from.parse().unwrap(), sport);
    let to = SocketAddr::new(c.to.parse().unwrap(), PORT);
    let frames: Vec<Vec<u8>> = (0..EACH as u64)
        .map(|i| {
            let request = link::request(0x5a_0000 + u64::from(index) * 16 + i);
            link::frame(mac(c.dst_mac), mac(c.src_mac), from, to, &request)
        })
        .collect();
    let link = Link::open();
    let probe_request = link::request(0x5b_0000 + u64::from(index));
    let probe = (c.answered == 0).then(|| {
        let (me, server_at) = if to.is_ipv4() {
            (SocketAddr::from((CLIENT4, sport)), server4())
        } else {
            (
                SocketAddr::new(crate::xdp_support::CLIENT6.parse().unwrap(), sport),
                server6(),
            )
        };
        (
            link::frame(server, client, me, server_at, &probe_request),
            &probe_request[..],
            &public,
        )
    });
    let out = link::exchange(&link, &frames, sport, probe, c.answered);
    let from: Vec<String> = out.from.iter().map(IpAddr::to_string).collect();
    println!(
        "CLASS {name} answered {} to_group {} from [{}]",
        out.answered,
        out.to_group,
        from.join(",")
    );
}

/// What the helper said about a class: answered, to a group MAC, and the
/// addresses replies came from.
fn heard(said: &str, name: &str) -> (usize, usize, Vec<IpAddr>) {
    // The helper's line may follow the harness's "test … " on one line.
    let tag = format!("CLASS {name} ");
    let line = said
        .lines()
        .find_map(|l| l.find(&tag).map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("{name}: nothing said:\n{said}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let from = words[7]
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (words[3].parse().unwrap(), words[5].parse().unwrap(), from)
}

fn passed(page: &str, reason: &str) -> u64 {
    find_sample(
        page,
        &format!("gnomon_xdp_passed_total{{reason=\"{reason}\"}}"),
    )
    .unwrap_or(0)
}

/// Run class `name` against `server`; the datapath's name for messages.
fn run_class(net: &Net, server: &mut Server, path: &str, name: &str) {
    let c = find(name);
    let before = net.metrics(server);
    let said = net.helper(
        &net.client(),
        &format!("l2 {name} {} {}", net.server_mac(), b64(&server.public)),
    );
    let (answered, to_group, from) = heard(&said, name);
    eprintln!("{path}: {name}: {answered} of {EACH} answered, {to_group} to a group MAC");
    assert_eq!(answered, c.answered, "{path}: {name}: {said}");
    assert_eq!(
        to_group, 0,
        "{path}: {name}: a reply to a group MAC: {said}"
    );
    let own: [IpAddr; 2] = [IpAddr::V4(SERVER4), server6().ip()];
    assert!(
        from.iter().all(|a| own.contains(a)),
        "{path}: {name}: a reply from an address the server does not have: {from:?}"
    );
    // Every response the server counted is one heard here (the probe's
    // among them): none went elsewhere.
    let probes = u64::from(c.answered == 0);
    let expected = c.answered as u64 + probes;
    let page = net.wait_metrics(server, &format!("{name}'s answers counted"), |m| {
        sum_of(m, RESPONSES) >= sum_of(&before, RESPONSES) + expected
    });
    assert_eq!(
        sum_of(&page, RESPONSES),
        sum_of(&before, RESPONSES) + expected,
        "{path}: {name}: {page}"
    );
    if path == "xdp" {
        let page = net.wait_metrics(server, &format!("{name} passed to the kernel"), |m| {
            passed(m, c.passed) >= passed(&before, c.passed) + EACH as u64
        });
        assert_eq!(
            passed(&page, c.passed),
            passed(&before, c.passed) + EACH as u64,
            "{name}: {page}"
        );
        // None of it reached the AF_XDP workers: nothing counted as a
        // group-source frame there.
        assert_eq!(dropped(&page, "frame_group_source"), 0, "{page}");
    }
}

/// Learn each other's link addresses with one ordinary query, so the
/// frames and the socket path's replies go out at once.
/// Waits until the server has counted both answers, so no count read
/// after this moves for them.
fn first_contact(net: &Net, server: &mut Server) {
    for to in [server4(), server6()] {
        net.query(to, &server.public, &["--udp-only", "--timeout", "20s"]);
    }
    net.wait_metrics(server, "the first answers counted", |m| {
        sum_of(m, RESPONSES) >= 2
    });
}

#[test]
fn frames_the_kernel_would_drop_are_dropped_on_both_datapaths() {
    let test = "frames_the_kernel_would_drop_are_dropped_on_both_datapaths";
    let Some(net) = Net::build(test, "d") else {
        return;
    };
    let paths: &[(&str, bool)] = if xdp_on() {
        &[("sockets", false), ("xdp", true)]
    } else {
        gnomon_testkit::skip(
            &format!("xdp_netns::{test}"),
            "GNOMON_XDP_NETNS_WITHOUT_XDP set: the XDP half not run",
        );
        &[("sockets", false)]
    };
    for &(path, xdp) in paths {
        let mut server = net.serve_how(How {
            xdp,
            by_env: false,
            wildcard: true,
        });
        wait_attached_or_serving(&net, &mut server, xdp);
        first_contact(&net, &mut server);
        for c in CLASSES.iter().filter(|c| c.name != "removed-address") {
            run_class(&net, &mut server, path, c.name);
            server.assert_alive();
        }
        server.terminate();
    }
}

fn wait_attached_or_serving(net: &Net, server: &mut Server, xdp: bool) {
    if xdp {
        wait_attached(net, server);
    } else {
        net.wait_metrics(server, "metrics", |m| {
            m.contains(RESPONSES) || m.contains("gnomon_")
        });
    }
}

fn local_addresses(page: &str) -> u64 {
    find_sample(page, "gnomon_xdp_local_addresses").unwrap_or_else(|| panic!("no gauge: {page}"))
}

/// `gnomon query ADDR` answered, and through XDP: as many frames sent as
/// responses counted meanwhile.
fn answered_through_xdp(net: &Net, server: &mut Server, to: SocketAddr) {
    let before = net.metrics(server);
    net.query(to, &server.public, &["--udp-only"]);
    let sent = |m: &str| find_sample(m, FRAMES_SENT).unwrap_or(0);
    let page = net.wait_metrics(server, "the answer counted", |m| {
        sum_of(m, RESPONSES) > sum_of(&before, RESPONSES)
    });
    assert_eq!(
        sent(&page) - sent(&before),
        sum_of(&page, RESPONSES) - sum_of(&before, RESPONSES),
        "{to}: answered by the sockets, not XDP: {page}"
    );
}

#[test]
fn the_xdp_path_follows_the_hosts_addresses() {
    let test = "the_xdp_path_follows_the_hosts_addresses";
    let Some(net) = Net::build(test, "a") else {
        return;
    };
    if !xdp_on() {
        return gnomon_testkit::skip(
            &format!("xdp_netns::{test}"),
            "GNOMON_XDP_NETNS_WITHOUT_XDP set: nothing to follow",
        );
    }
    let mut server = net.serve_how(How {
        xdp: true,
        by_env: false,
        wildcard: true,
    });
    let start = local_addresses(&wait_attached(&net, &mut server));
    first_contact(&net, &mut server);
    let (s, c) = (net.server(), net.client());
    let wait_count = |server: &mut Server, n: u64| {
        net.wait_metrics(server, &format!("{n} local addresses"), |m| {
            local_addresses(m) == n
        });
    };
    // A new address on the link.
    crate::fleet_support::ip_in(&s, "addr add 10.77.1.50/24 dev xs0");
    wait_count(&mut server, start + 1);
    answered_through_xdp(&net, &mut server, SocketAddr::from(([10, 77, 1, 50], PORT)));
    // An anycast-style address on lo, routed to the server.
    crate::fleet_support::ip_in(&s, "addr add 10.99.0.1/32 dev lo");
    crate::fleet_support::ip_in(&c, "route add 10.99.0.1/32 via 10.77.1.1");
    wait_count(&mut server, start + 2);
    answered_through_xdp(&net, &mut server, SocketAddr::from(([10, 99, 0, 1], PORT)));
    // Removed: the kernel would drop frames to it, and so does XDP.
    crate::fleet_support::ip_in(&s, "addr del 10.77.1.50/24 dev xs0");
    wait_count(&mut server, start + 1);
    run_class(&net, &mut server, "xdp", "removed-address");
    server.terminate();
}
