//! Whole Ethernet frames, sent and heard on the client's end of the veth
//! pair (an `AF_PACKET` socket): how the tests of what the XDP path takes
//! choose the MAC addresses a kernel socket never would, and see every
//! reply however it is addressed.

use std::io::ErrorKind;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Instant;

use gnomon_protocol::{verify_response, Profile};
use socket2::{Domain, Protocol, Socket, Type};

use super::inside::fill_udp_checksum;
use super::{CLIENT_IF, PATIENCE, PORT};

/// `ETH_P_ALL`: every protocol.
const ETH_P_ALL: u16 = 0x0003;

/// A packet socket bound to one interface.
pub struct Link(Socket);

impl Link {
    /// A socket on the client's end that sends frames as written and
    /// hears every frame on the link.
    pub fn open() -> Link {
        let sock = Socket::new(
            Domain::PACKET,
            Type::RAW,
            Some(Protocol::from(i32::from(ETH_P_ALL.to_be()))),
        )
        .unwrap();
        let name = std::ffi::CString::new(CLIENT_IF).unwrap();
        // SAFETY: a NUL-terminated name that lives through the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(ifindex != 0, "no interface {CLIENT_IF} here");
        // SAFETY: all zeroes is a valid sockaddr_ll.
        let mut at: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        at.sll_family = libc::AF_PACKET as u16;
        at.sll_protocol = ETH_P_ALL.to_be();
        at.sll_ifindex = ifindex as i32;
        // SAFETY: `at` is a live sockaddr_ll of the size passed; the socket
        // is ours.
        let r = unsafe {
            libc::bind(
                sock.as_raw_fd(),
                (&raw const at).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(
            r,
            0,
            "bind to {CLIENT_IF}: {}",
            std::io::Error::last_os_error()
        );
        Link(sock)
    }

    pub fn send(&self, frame: &[u8]) {
        let n = self.0.send(frame).unwrap();
        assert_eq!(n, frame.len());
    }

    /// The next frame on the link within `PATIENCE` of `since`, or `None`.
    fn next(&self, since: Instant, buf: &mut Vec<u8>) -> Option<()> {
        let left = (since + PATIENCE).saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        self.0.set_read_timeout(Some(left)).unwrap();
        buf.resize(2048, 0);
        let mut reader: &Socket = &self.0;
        match std::io::Read::read(&mut reader, buf) {
            Ok(n) => {
                buf.truncate(n);
                Some(())
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
            Err(e) => panic!("recv on {CLIENT_IF}: {e}"),
        }
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> [u8; 6] {
    let b: Vec<u8> = s
        .trim()
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect();
    b.try_into().unwrap()
}

/// This namespace's MAC address of the client's end.
pub fn client_mac() -> [u8; 6] {
    parse_mac(&std::fs::read_to_string(format!("/sys/class/net/{CLIENT_IF}/address")).unwrap())
}

/// An Ethernet frame carrying a UDP datagram, checksums right.
pub fn frame(
    dst: [u8; 6],
    src: [u8; 6],
    from: SocketAddr,
    to: SocketAddr,
    payload: &[u8],
) -> Vec<u8> {
    let mut packet = gnomon_testkit::raw::packet(from, to, payload);
    fill_udp_checksum(&mut packet);
    let ethertype: u16 = if to.is_ipv4() { 0x0800 } else { 0x86dd };
    [&dst[..], &src[..], &ethertype.to_be_bytes(), &packet].concat()
}

/// A UDP reply heard on the link: from the server's port to `sport`.
#[derive(Debug)]
pub struct Heard {
    pub dst_mac: [u8; 6],
    pub from: IpAddr,
    pub payload: Vec<u8>,
}

/// Parse `f` as a reply from port `PORT` to `sport`.
fn reply_in(f: &[u8], sport: u16) -> Option<Heard> {
    let ethertype = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let (from, udp): (IpAddr, usize) = match ethertype {
        0x0800 if f.get(14)? & 0x0f == 5 && *f.get(23)? == 17 => {
            let b: [u8; 4] = f.get(26..30)?.try_into().ok()?;
            (IpAddr::from(b), 34)
        }
        0x86dd if *f.get(20)? == 17 => {
            let b: [u8; 16] = f.get(22..38)?.try_into().ok()?;
            (IpAddr::from(b), 54)
        }
        _ => return None,
    };
    let port = |at: usize| Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]));
    if port(udp)? != PORT || port(udp + 2)? != sport {
        return None;
    }
    Some(Heard {
        dst_mac: f.get(..6)?.try_into().ok()?,
        from,
        payload: f.get(udp + 8..)?.to_vec(),
    })
}

/// What one class of frames got back.
pub struct Outcome {
    /// Replies to the class's frames (the probe's not counted).
    pub answered: usize,
    /// Of every reply, those sent to a broadcast or multicast MAC.
    pub to_group: usize,
    /// The addresses replies came from.
    pub from: Vec<IpAddr>,
}

/// Send each of `frames` (requests from port `sport`) and then, if given,
/// the `probe` request in a valid frame from that port, and listen on the
/// link: until the probe is answered, or (with no probe) until
/// `expected` replies arrived; bounded by `PATIENCE` either way.
pub fn exchange(
    link: &Link,
    frames: &[Vec<u8>],
    sport: u16,
    probe: Option<(Vec<u8>, &[u8], &[u8; 32])>,
    expected: usize,
) -> Outcome {
    for f in frames {
        link.send(f);
    }
    if let Some((frame, _, _)) = &probe {
        link.send(frame);
    }
    let mut out = Outcome {
        answered: 0,
        to_group: 0,
        from: Vec::new(),
    };
    let since = Instant::now();
    let mut buf = Vec::new();
    let mut probed = false;
    while !(probed || (probe.is_none() && out.answered >= expected)) {
        if link.next(since, &mut buf).is_none() {
            break;
        }
        let Some(heard) = reply_in(&buf, sport) else {
            continue;
        };
        out.to_group += usize::from(heard.dst_mac[0] & 1 == 1);
        out.from.push(heard.from);
        match &probe {
            Some((_, request, public))
                if verify_response(request, &heard.payload, *public).is_ok() =>
            {
                probed = true;
            }
            _ => out.answered += 1,
        }
    }
    if probe.is_some() {
        assert!(probed, "the probe got no answer within {PATIENCE:?}");
    }
    out
}

/// A request of the RFC's version, nonce from `seed`.
pub fn request(seed: u64) -> Vec<u8> {
    gnomon_testkit::request(Profile::rfc(), seed)
}
