//! What the XDP program costs per frame, as the kernel runs it
//! (`BPF_PROG_TEST_RUN`, a million runs per sample, the kernel's own mean):
//! a request that passes every check on its way to the socket, one that
//! the checks leave to the kernel, a datagram for a port not served (the
//! matching alone) and a TCP segment (the first branches alone). Needs
//! root (or CAP_BPF); says so and exits otherwise.
//! `cargo bench -p gnomon-server --bench xdp_program`; figures go to
//! docs/COST.md ("The AF_XDP path").

use std::net::{IpAddr, SocketAddr};

use gnomon_server::xdp::gate::key;
use gnomon_server::xdp::program::{assemble, Maps, Passed};
use gnomon_server::xdp::sys::{AddressSet, Array, Program, SocketMap};

const OURS: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const CLIENT: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

/// An Ethernet frame with an IP packet of protocol `proto` carrying a
/// UDP-shaped header and a 1,024-byte payload (checksums are not read by
/// the program).
fn frame(dst_mac: [u8; 6], from: SocketAddr, to: SocketAddr, proto: u8) -> Vec<u8> {
    let mut f = [dst_mac, CLIENT].concat();
    let udp_len = 8 + 1024u16;
    match (from.ip(), to.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(&(20 + udp_len).to_be_bytes());
            f.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&udp_len.to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => unreachable!("one family"),
    }
    f.extend_from_slice(&from.port().to_be_bytes());
    f.extend_from_slice(&to.port().to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(f.len() + 1024, 0x5a);
    f
}

fn main() {
    if let Some(e) = gnomon_server::xdp::unavailable() {
        eprintln!("SKIPPED xdp_program: no AF_XDP here ({e})");
        return;
    }
    let made = (|| -> std::io::Result<_> {
        let xsks = SocketMap::new(1)?;
        let settings = Array::new(1, b"b_settings")?;
        let local = AddressSet::new(64)?;
        let passed = Array::new(Passed::ALL.len() as u32, b"b_passed")?;
        let mut mac = [0u8; 8];
        mac[..6].copy_from_slice(&OURS);
        settings.set(0, mac)?;
        // A host with a few dozen addresses.
        for n in 0..40u8 {
            local.insert(&key(IpAddr::from([10, 77, 0, n + 1])))?;
        }
        local.insert(&key("fd77::1".parse().unwrap()))?;
        Ok((xsks, settings, local, passed))
    })();
    let (xsks, settings, local, passed) = match made {
        Ok(m) => m,
        Err(e) => {
            eprintln!("SKIPPED xdp_program: no BPF map here ({e})");
            return;
        }
    };
    let maps = Maps {
        xsks: xsks.raw(),
        settings: settings.raw(),
        local: local.raw(),
        passed: passed.raw(),
    };
    let served: Vec<SocketAddr> = vec![
        "0.0.0.0:2002".parse().unwrap(),
        "[::]:2002".parse().unwrap(),
    ];
    let insns = assemble(&served, &maps);
    let prog = Program::load(&insns).expect("the verifier accepts the program");
    let c4: SocketAddr = "10.9.0.2:40000".parse().unwrap();
    let s4: SocketAddr = "10.77.0.1:2002".parse().unwrap();
    let c6: SocketAddr = "[fd09::2]:40000".parse().unwrap();
    let s6: SocketAddr = "[fd77::1]:2002".parse().unwrap();
    let cases = [
        ("IPv4 request, every check passed", frame(OURS, c4, s4, 17)),
        ("IPv6 request, every check passed", frame(OURS, c6, s6, 17)),
        (
            "IPv4 request to a foreign address (not_local)",
            frame(OURS, c4, "10.251.4.77:2002".parse().unwrap(), 17),
        ),
        (
            "IPv4 request in a broadcast frame",
            frame([0xff; 6], c4, s4, 17),
        ),
        (
            "IPv4 datagram to a port not served",
            frame(OURS, c4, "10.77.0.1:53".parse().unwrap(), 17),
        ),
        ("IPv4 TCP segment", frame(OURS, c4, s4, 6)),
    ];
    println!(
        "{} instructions; mean ns per run as the kernel timed it (5 samples of 1,000,000 runs):",
        insns.len()
    );
    for (what, f) in &cases {
        let mut ns: Vec<u32> = (0..5)
            .map(|_| prog.test_runs(f, 1_000_000).expect("BPF_PROG_TEST_RUN").1)
            .collect();
        ns.sort_unstable();
        println!(
            "  {what:<48} min {:>3}  median {:>3}  max {:>3}",
            ns[0], ns[2], ns[4]
        );
    }
}
