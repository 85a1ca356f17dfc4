//! Any frame a network card hands the AF_XDP path: the XDP program, run by
//! hand, reads nothing it did not bound first and steers only what the
//! worker's parser would also call UDP for a served address that the
//! kernel would deliver (to the host's MAC, no loopback address, a local
//! destination for a wildcard, a foreign source); the parser never
//! panics; and a reply written in place over what it accepted reads back
//! as the same exchange, endpoints swapped.
#![no_main]

use std::net::{IpAddr, SocketAddr};

use gnomon_server::xdp::frame::{parse, reply_in_place};
use gnomon_server::xdp::interpret::{interpret, Host};
use gnomon_server::xdp::program::assemble;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let served: [SocketAddr; 3] = [
        "10.77.0.1:2002".parse().unwrap(),
        "[::]:2002".parse().unwrap(),
        "0.0.0.0:5319".parse().unwrap(),
    ];
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    let local: [IpAddr; 2] = ["10.77.0.1".parse().unwrap(), "fd77::1".parse().unwrap()];
    let mut host = Host::new(MAC, local);
    let prog = assemble(&served, &host.maps);
    let steered = interpret(&prog, data, 3, &mut host);
    let parsed = parse(data);
    if let Ok(d) = &parsed {
        let exact = served
            .iter()
            .any(|a| a.port() == d.to.port() && a.ip() == d.to.ip());
        let wildcard = served.iter().any(|a| {
            a.port() == d.to.port() && a.is_ipv4() == d.to.is_ipv4() && a.ip().is_unspecified()
        });
        let kernel_would = data[..6] == MAC
            && !d.from.ip().is_loopback()
            && !d.to.ip().is_loopback()
            && !local.contains(&d.from.ip())
            && (exact || (wildcard && local.contains(&d.to.ip())));
        assert_eq!(
            steered.is_some(),
            kernel_would,
            "program and parser disagree"
        );
    }
    // A reply goes only where the program steered: to our MAC, from a
    // unicast one.
    if let (Ok(d), Some(_)) = (&parsed, steered) {
        // A reply of every length up to the request's, here the first half
        // of the request's own payload reversed.
        let mut frame = data.to_vec();
        let reply: Vec<u8> = data[d.payload.clone()].iter().rev().copied().collect();
        let reply = &reply[..reply.len() / 2];
        let len = reply_in_place(&mut frame, d, reply).expect("a shorter reply fits");
        let back = parse(&frame[..len]).expect("the reply parses");
        assert_eq!((back.from, back.to), (d.to, d.from));
        assert_eq!(&frame[back.payload], reply);
    }
    if let Some(q) = steered {
        assert_eq!(q, 3);
    }
});
