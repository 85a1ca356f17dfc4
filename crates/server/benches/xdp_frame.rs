//! The AF_XDP path's own per-request work, which the socket path leaves to
//! the kernel: reading a 1024-byte request's Ethernet, IP and UDP headers
//! with its checksums checked, and writing the reply's over it with new
//! checksums. `cargo bench -p gnomon-server --bench xdp_frame`; figures go
//! to docs/COST.md ("The AF_XDP path").

use std::net::SocketAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gnomon_server::xdp::frame::{parse, reply_in_place, Datagram};

/// A frame from `from` to `to` with `payload`, checksums right (made by
/// writing the reverse frame and turning it around with `reply_in_place`).
fn frame(from: SocketAddr, to: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let udp_len = (8 + payload.len()) as u16;
    match (to, from) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(&(20 + udp_len).to_be_bytes());
            f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
            f.extend_from_slice(&s.ip().octets());
            f.extend_from_slice(&d.ip().octets());
        }
        (SocketAddr::V6(s), SocketAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&udp_len.to_be_bytes());
            f.extend_from_slice(&[17, 64]);
            f.extend_from_slice(&s.ip().octets());
            f.extend_from_slice(&d.ip().octets());
        }
        _ => unreachable!(),
    }
    f.extend_from_slice(&to.port().to_be_bytes());
    f.extend_from_slice(&from.port().to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    let start = f.len();
    f.extend_from_slice(payload);
    let d = Datagram {
        from: to,
        to: from,
        payload: start..f.len(),
    };
    let len = reply_in_place(&mut f, &d, payload).unwrap();
    f.truncate(len);
    f
}

fn bench(c: &mut Criterion) {
    let request = vec![0x5a; 1024];
    let reply = vec![0xa5; 1024 - 400];
    let mut g = c.benchmark_group("xdp-frame");
    g.throughput(Throughput::Elements(1));
    for (name, from, to) in [
        ("ipv4", "10.77.0.2:40000", "10.77.0.1:2002"),
        ("ipv6", "[fd77::2]:40000", "[fd77::1]:2002"),
    ] {
        let f = frame(from.parse().unwrap(), to.parse().unwrap(), &request);
        g.bench_function(format!("parse/{name}"), |b| {
            b.iter(|| parse(std::hint::black_box(&f)).unwrap())
        });
        let d = parse(&f).unwrap();
        let mut work = f.clone();
        g.bench_function(format!("reply-in-place/{name}"), |b| {
            b.iter(|| {
                work.copy_from_slice(&f);
                reply_in_place(&mut work, &d, std::hint::black_box(&reply)).unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
