//! Every refusal, with a frame that earns it.

use etherparse::{PacketBuilder, VlanId};
use gnomon_server::xdp::frame::{parse, Refused};

use super::{client4, client6, server4, server6, v4, v6, CLIENT_MAC, ETH, SERVER_MAC};

/// RFC 1071 word by word, independent of the module's fast sum.
fn ones_sum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for pair in data.chunks(2) {
        s += u32::from(pair[0]) << 8 | u32::from(*pair.get(1).unwrap_or(&0));
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Recomputes the IPv4 header checksum after a test edits the header, so
/// the edit is what gets refused.
fn fix_ipv4_header(frame: &mut [u8]) {
    frame[ETH + 10..ETH + 12].fill(0);
    let c = !ones_sum(&frame[ETH..ETH + 20]);
    frame[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
}

fn refused(frame: &[u8]) -> Refused {
    parse(frame).unwrap_err()
}

#[test]
fn truncated() {
    let f4 = v4(client4(), server4(), &[]);
    let f6 = v6(client6(), server6(), &[]);
    assert_eq!(refused(&[]), Refused::Truncated);
    assert_eq!(refused(&f4[..13]), Refused::Truncated);
    assert_eq!(refused(&f4[..ETH + 19]), Refused::Truncated);
    assert_eq!(refused(&f4[..ETH + 27]), Refused::Truncated);
    assert_eq!(refused(&f6[..ETH + 39]), Refused::Truncated);
    assert_eq!(refused(&f6[..ETH + 47]), Refused::Truncated);
}

#[test]
fn not_ip() {
    let f4 = v4(client4(), server4(), &[1; 8]);
    let f6 = v6(client6(), server6(), &[1; 8]);
    let mut arp = f4.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(refused(&arp), Refused::NotIp);

    let b = PacketBuilder::ethernet2(CLIENT_MAC, SERVER_MAC)
        .single_vlan(VlanId::try_new(5).unwrap())
        .ipv4([192, 0, 2, 1], [198, 51, 100, 2], 64)
        .udp(1, 2);
    let mut vlan = Vec::new();
    b.write(&mut vlan, &[1; 8]).unwrap();
    assert_eq!(refused(&vlan), Refused::NotIp);

    let mut options = f4.clone();
    options[ETH] = 0x46;
    fix_ipv4_header(&mut options);
    assert_eq!(refused(&options), Refused::NotIp);

    let mut version = f4.clone();
    version[ETH] = 0x65;
    fix_ipv4_header(&mut version);
    assert_eq!(refused(&version), Refused::NotIp);

    let mut version = f6.clone();
    version[ETH] = 0x40;
    assert_eq!(refused(&version), Refused::NotIp);

    // Hop-by-hop, routing, fragment, destination options.
    for next in [0, 43, 44, 60] {
        let mut ext = f6.clone();
        ext[ETH + 6] = next;
        assert_eq!(refused(&ext), Refused::NotIp, "next header {next}");
    }
}

#[test]
fn not_udp() {
    let mut tcp = v4(client4(), server4(), &[1; 20]);
    tcp[ETH + 9] = 6;
    fix_ipv4_header(&mut tcp);
    assert_eq!(refused(&tcp), Refused::NotUdp);
    for next in [6, 58] {
        let mut f = v6(client6(), server6(), &[1; 20]);
        f[ETH + 6] = next;
        assert_eq!(refused(&f), Refused::NotUdp);
    }
}

#[test]
fn fragment() {
    for flags in [0x2000u16, 0x0001, 0x6000, 0x1fff] {
        let mut f = v4(client4(), server4(), &[1; 20]);
        f[ETH + 6..ETH + 8].copy_from_slice(&flags.to_be_bytes());
        fix_ipv4_header(&mut f);
        assert_eq!(refused(&f), Refused::Fragment, "{flags:#x}");
    }
    // DF alone is no fragment.
    let mut f = v4(client4(), server4(), &[1; 20]);
    f[ETH + 6..ETH + 8].copy_from_slice(&0x4000u16.to_be_bytes());
    fix_ipv4_header(&mut f);
    assert!(parse(&f).is_ok());
}

#[test]
fn bad_length() {
    let f4 = v4(client4(), server4(), &[1; 20]);
    let f6 = v6(client6(), server6(), &[1; 20]);
    let set = |f: &[u8], at: usize, v: u16| {
        let mut f = f.to_vec();
        f[at..at + 2].copy_from_slice(&v.to_be_bytes());
        f
    };
    // IPv4 total length: under 28, beyond the frame.
    for total in [0, 20, 27, 49] {
        let mut f = set(&f4, ETH + 2, total);
        fix_ipv4_header(&mut f);
        assert_eq!(refused(&f), Refused::BadLength, "total {total}");
    }
    // IPv6 payload length beyond the frame, or too short for UDP.
    for len in [0, 7, 29] {
        assert_eq!(refused(&set(&f6, ETH + 4, len)), Refused::BadLength);
    }
    // UDP length under 8, or beyond the IP payload.
    for (f, udp) in [(&f4, ETH + 20), (&f6, ETH + 40)] {
        for len in [0, 7, 29, 0xffff] {
            assert_eq!(refused(&set(f, udp + 4, len)), Refused::BadLength);
        }
    }
}

#[test]
fn bad_checksum() {
    let f4 = v4(client4(), server4(), &[1; 20]);
    let f6 = v6(client6(), server6(), &[1; 20]);
    let mut ip = f4.clone();
    ip[ETH + 8] ^= 1; // TTL, covered by the header checksum only
    assert_eq!(refused(&ip), Refused::BadChecksum);
    for (f, udp) in [(&f4, ETH + 20), (&f6, ETH + 40)] {
        let mut payload = f.clone();
        *payload.last_mut().unwrap() ^= 0x80;
        assert_eq!(refused(&payload), Refused::BadChecksum);
        let mut field = f.clone();
        field[udp + 7] ^= 1;
        assert_eq!(refused(&field), Refused::BadChecksum);
    }
    let mut zero = f6.clone();
    zero[ETH + 46..ETH + 48].fill(0);
    assert_eq!(refused(&zero), Refused::BadChecksum);
}
