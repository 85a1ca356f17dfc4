//! Taking the sockets a service manager passed at start (socket
//! activation, sd_listen_fds(3)): the one place a descriptor number
//! becomes an owned socket. What each socket is for is decided in
//! `activation`, in safe code.

use std::io;
use std::os::fd::FromRawFd;

use socket2::Socket;

/// One passed descriptor.
#[derive(Debug)]
pub struct PassedFd {
    /// The descriptor, owned from now on.
    pub socket: Socket,
    /// Its name (`FileDescriptorName=` in the .socket unit); empty when the
    /// manager gave none.
    pub name: String,
}

const VARS: [&str; 3] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"];

/// The sockets passed to this process, if `LISTEN_PID` names it, with
/// their `LISTEN_FDNAMES`. The three variables are removed from the
/// environment whatever the outcome, so nothing can take the descriptors
/// twice and nothing started later inherits them.
///
/// Call before any other thread starts: changing the environment races
/// with threads that read it.
pub fn take_passed() -> io::Result<Vec<PassedFd>> {
    // sd-notify checks LISTEN_PID, and that each descriptor is open
    // (fcntl F_GETFD) as it sets close-on-exec on it.
    let fds = sd_notify::listen_fds();
    let names = std::env::var("LISTEN_FDNAMES").ok();
    for v in VARS {
        std::env::remove_var(v);
    }
    let fds: Vec<_> = fds?.collect();
    let names: Vec<String> = match names {
        // systemd-socket-activate sets it empty when no --fdname is given.
        Some(n) if !n.is_empty() && !fds.is_empty() => n.split(':').map(str::to_owned).collect(),
        _ => vec![String::new(); fds.len()],
    };
    if names.len() != fds.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "LISTEN_FDNAMES names {} sockets but LISTEN_FDS passes {}",
                names.len(),
                fds.len()
            ),
        ));
    }
    Ok(fds
        .into_iter()
        .zip(names)
        .map(|(fd, name)| PassedFd {
            // SAFETY: the descriptor is open (checked by listen_fds) and
            // was handed to this process (LISTEN_PID) for it to own; no
            // other code in the process holds it, and the variables that
            // name it are gone, so it is taken once.
            socket: unsafe { Socket::from_raw_fd(fd) },
            name,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_are_cleared_once_read() {
        // No descriptor, so nothing of the test process is taken over; no
        // other test in this crate reads these variables.
        std::env::set_var("LISTEN_PID", std::process::id().to_string());
        std::env::set_var("LISTEN_FDS", "0");
        std::env::set_var("LISTEN_FDNAMES", "");
        assert!(take_passed().unwrap().is_empty());
        for v in VARS {
            assert!(std::env::var_os(v).is_none(), "{v} is still set");
        }
        // Another process's sockets are not ours, and their variables are
        // not passed on either.
        std::env::set_var("LISTEN_PID", "1");
        std::env::set_var("LISTEN_FDS", "2");
        assert!(take_passed().unwrap().is_empty());
        for v in VARS {
            assert!(std::env::var_os(v).is_none(), "{v} is still set");
        }
    }
}
