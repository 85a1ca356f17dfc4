//! Which socket the engine could not bind. The error is carried inside the
//! `io::Error` the engine returns, its kind kept, so that the command that
//! started it can name the transport and the address and say what to do:
//! the system's own text ("Address already in use") names neither.

use std::fmt;
use std::io;
use std::net::SocketAddr;

/// A socket that could not be bound or made to listen.
#[derive(Debug)]
pub struct BindError {
    /// `udp` or `tcp`.
    pub transport: &'static str,
    /// The address asked for.
    pub addr: SocketAddr,
    /// What the system said.
    pub error: io::Error,
}

impl BindError {
    /// For `map_err`: the error, of the same kind, now saying which socket.
    pub fn wrap(transport: &'static str, addr: SocketAddr) -> impl FnOnce(io::Error) -> io::Error {
        move |error| {
            io::Error::new(
                error.kind(),
                BindError {
                    transport,
                    addr,
                    error,
                },
            )
        }
    }

    /// The socket `e` is about, when it is a bind failure.
    pub fn of(e: &io::Error) -> Option<&BindError> {
        e.get_ref()?.downcast_ref()
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot bind {} {}: {}",
            self.transport, self.addr, self.error
        )
    }
}

impl std::error::Error for BindError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_survives_the_trip_through_io_error() {
        let addr: SocketAddr = "127.0.0.1:5319".parse().unwrap();
        let e = BindError::wrap("udp", addr)(io::Error::from(io::ErrorKind::AddrInUse));
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let b = BindError::of(&e).expect("a bind error");
        assert_eq!((b.transport, b.addr), ("udp", addr));
        assert!(BindError::of(&io::Error::other("no")).is_none());
    }
}
