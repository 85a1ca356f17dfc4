//! Socket activation: serving on sockets a service manager bound and
//! passed (a systemd .socket unit, `systemd-socket-activate`), instead of
//! binding the configured addresses.
//!
//! # Which socket is which
//!
//! Each passed socket is asked what it is (`SO_TYPE`, `SO_PROTOCOL`,
//! `SO_ACCEPTCONN`, its local address, its peer): an unconnected UDP
//! socket is served as UDP, a listening TCP socket as TCP, anything else
//! (a Unix socket, a connected UDP socket, which would hear only its peer,
//! a connected or unlistened stream, SCTP, …) is refused at start with a
//! message naming the descriptor.
//!
//! # Dual-stack sockets
//!
//! gnomon's own IPv6 sockets are IPv6-only, but a bare
//! `ListenDatagram=5319` (or `[::]:5319` without `BindIPv6Only=ipv6-only`)
//! is a dual-stack socket on default Linux settings: IPv4 clients arrive
//! on it as `::ffff:a.b.c.d`. Each passed socket is asked
//! (`IPV6_V6ONLY`); on a dual-stack one the mapped form is taken for the
//! IPv4 address it is, by the source filter (`sources`), the deny and
//! allow lists and rate limits (`limit`), and the reply goes back the way
//! the request came. The start-up log says which sockets are dual-stack. One .socket unit with `ListenDatagram=` and
//! `ListenStream=` lines therefore needs no names. A name is still
//! checked when given: `FileDescriptorName=udp` or `tcp` must match the
//! socket's kind, so a unit that says one thing and passes another is an
//! error rather than a guess. Other names are ignored.
//!
//! # All or nothing
//!
//! When any socket is passed, gnomon binds none of its own: the unit is
//! then the one place that lists addresses, and `listen` is not used. At
//! least one UDP socket must be among them. A TCP socket passed while TCP
//! is off (`tcp.enable = false`) is an error, not a socket left to queue
//! connections nobody accepts; TCP is not served when none is passed.

use std::fmt;
use std::net::SocketAddr;

use socket2::{Protocol, Socket, Type};

use crate::sys::passed::PassedFd;

/// The sockets to serve on, by transport.
#[derive(Debug, Default)]
pub struct Passed {
    /// UDP sockets, each with its local address.
    pub udp: Vec<(Socket, SocketAddr)>,
    /// Listening TCP sockets.
    pub tcp: Vec<Socket>,
}

/// Why the passed sockets cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationError(pub String);

impl fmt::Display for ActivationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "socket activation: {}", self.0)
    }
}

impl std::error::Error for ActivationError {}

/// What one passed socket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Udp(SocketAddr),
    Tcp,
}

const UDP: &str = "a UDP socket";
const TCP: &str = "a listening TCP socket";

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::Udp(_) => UDP,
            Kind::Tcp => TCP,
        }
    }
}

/// Describe a descriptor for a message: its number and its name.
fn which(p: &PassedFd) -> String {
    use std::os::fd::AsRawFd;
    let fd = p.socket.as_raw_fd();
    if p.name.is_empty() {
        format!("descriptor {fd}")
    } else {
        format!("descriptor {fd} (named {:?})", p.name)
    }
}

fn kind(p: &PassedFd) -> Result<Kind, ActivationError> {
    let s = &p.socket;
    let err = |what: String| ActivationError(format!("{} {what}", which(p)));
    let ty = s
        .r#type()
        .map_err(|e| err(format!("is not a socket ({e})")))?;
    let addr = s
        .local_addr()
        .map_err(|e| err(format!("has no local address ({e})")))?;
    let Some(addr) = addr.as_socket() else {
        return Err(err(
            "is not an IPv4 or IPv6 socket (a Unix socket?); ListenDatagram= and \
             ListenStream= must name an address and port"
                .into(),
        ));
    };
    let proto = s.protocol().ok().flatten();
    if ty == Type::DGRAM && proto == Some(Protocol::UDP) {
        // A connected UDP socket hears only from its peer: every other
        // client would be ignored without a trace.
        if let Some(peer) = s.peer_addr().ok().and_then(|a| a.as_socket()) {
            return Err(err(format!(
                "is a UDP socket on {addr} connected to {peer}: it would serve only that \
                 peer; pass an unconnected socket (ListenDatagram= with an address and port)"
            )));
        }
        return Ok(Kind::Udp(addr));
    }
    if ty == Type::STREAM && proto == Some(Protocol::TCP) {
        return match s.is_listener() {
            Ok(true) => Ok(Kind::Tcp),
            _ => Err(err(format!(
                "is a TCP socket on {addr} that is not listening"
            ))),
        };
    }
    Err(err(format!(
        "on {addr} is neither a UDP socket nor a listening TCP socket"
    )))
}

/// Whether `s`, bound to `addr`, is an IPv6 socket that carries IPv4 too.
pub fn dual_stack(s: &Socket, addr: SocketAddr) -> bool {
    addr.is_ipv6() && s.only_v6().is_ok_and(|only| !only)
}

/// Sort the passed sockets into UDP and TCP, refusing anything else (see
/// the module documentation). `Ok(None)` when nothing was passed: bind as
/// configured.
pub fn classify(
    passed: Vec<PassedFd>,
    tcp_enabled: bool,
) -> Result<Option<Passed>, ActivationError> {
    if passed.is_empty() {
        return Ok(None);
    }
    let mut out = Passed::default();
    for p in passed {
        let k = kind(&p)?;
        let said = match p.name.as_str() {
            "udp" => Some(UDP),
            "tcp" => Some(TCP),
            _ => None,
        };
        if let Some(said) = said.filter(|&s| s != k.what()) {
            return Err(ActivationError(format!(
                "{} is {}, but its name says {said}",
                which(&p),
                k.what()
            )));
        }
        match k {
            Kind::Udp(addr) => {
                if dual_stack(&p.socket, addr) {
                    tracing::info!(
                        "{} on udp {addr} is dual-stack (IPV6_V6ONLY off): IPv4 clients \
                         arrive as ::ffff:a.b.c.d and are served as their IPv4 addresses",
                        which(&p)
                    );
                }
                out.udp.push((p.socket, addr))
            }
            Kind::Tcp if !tcp_enabled => {
                return Err(ActivationError(format!(
                    "{} is a listening TCP socket, but TCP is off (tcp.enable = false): \
                     remove its ListenStream= or turn TCP on",
                    which(&p)
                )))
            }
            Kind::Tcp => out.tcp.push(p.socket),
        }
    }
    if out.udp.is_empty() {
        return Err(ActivationError(
            "no UDP socket was passed; Roughtime is served over UDP first, so the .socket \
             unit needs a ListenDatagram= line"
                .into(),
        ));
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::Domain;

    fn passed(socket: Socket, name: &str) -> PassedFd {
        PassedFd {
            socket,
            name: name.into(),
        }
    }

    fn udp() -> Socket {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        s
    }

    fn tcp(listen: bool) -> Socket {
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        if listen {
            s.listen(8).unwrap();
        }
        s
    }

    fn error(r: Result<Option<Passed>, ActivationError>) -> String {
        r.expect_err("should be refused").to_string()
    }

    #[test]
    fn nothing_passed_means_bind_as_configured() {
        assert!(classify(Vec::new(), true).unwrap().is_none());
    }

    #[test]
    fn sockets_are_sorted_by_what_they_are() {
        let p = classify(
            vec![
                passed(tcp(true), "gnomon.socket"),
                passed(udp(), ""),
                passed(udp(), "udp"),
                passed(tcp(true), "tcp"),
            ],
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.udp.len(), 2);
        assert_eq!(p.tcp.len(), 2);
        assert!(p.udp.iter().all(|(_, a)| a.ip().is_loopback()));
    }

    #[test]
    fn a_name_that_contradicts_the_socket_is_refused() {
        let e = error(classify(vec![passed(udp(), "tcp")], true));
        assert!(
            e.contains("is a UDP socket, but its name says a listening TCP socket"),
            "{e}"
        );
        let e = error(classify(
            vec![passed(udp(), ""), passed(tcp(true), "udp")],
            true,
        ));
        assert!(e.contains("its name says a UDP socket"), "{e}");
    }

    #[test]
    fn other_sockets_are_refused() {
        let unix = Socket::new(Domain::UNIX, Type::DGRAM, None).unwrap();
        let e = error(classify(vec![passed(unix, "")], true));
        assert!(e.contains("not an IPv4 or IPv6 socket"), "{e}");
        let e = error(classify(
            vec![passed(udp(), ""), passed(tcp(false), "")],
            true,
        ));
        assert!(e.contains("not listening"), "{e}");
    }

    #[test]
    fn a_connected_udp_socket_is_refused() {
        let s = udp();
        s.connect(&"127.0.0.1:9".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let e = error(classify(vec![passed(s, "")], true));
        assert!(e.contains("connected to 127.0.0.1:9"), "{e}");
        assert!(e.contains("descriptor "), "{e}");
    }

    #[test]
    fn dual_stack_is_asked_of_each_socket() {
        let six = |only: bool| {
            let s = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)).unwrap();
            s.set_only_v6(only).unwrap();
            let any: SocketAddr = "[::]:0".parse().unwrap();
            s.bind(&any.into()).unwrap();
            let addr = s.local_addr().unwrap().as_socket().unwrap();
            (s, addr)
        };
        let Ok(probe) = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)) else {
            return; // no IPv6 in this kernel
        };
        drop(probe);
        let (s, a) = six(false);
        assert!(dual_stack(&s, a));
        let (s, a) = six(true);
        assert!(!dual_stack(&s, a));
        let s = udp();
        let a = s.local_addr().unwrap().as_socket().unwrap();
        assert!(!dual_stack(&s, a));
        // A dual-stack socket is served.
        let (s, _) = six(false);
        let p = classify(vec![passed(s, "")], true).unwrap().unwrap();
        assert_eq!(p.udp.len(), 1);
    }

    #[test]
    fn udp_is_required_and_tcp_only_when_on() {
        let e = error(classify(vec![passed(tcp(true), "")], true));
        assert!(e.contains("no UDP socket"), "{e}");
        let e = error(classify(
            vec![passed(udp(), ""), passed(tcp(true), "")],
            false,
        ));
        assert!(e.contains("TCP is off"), "{e}");
    }
}
