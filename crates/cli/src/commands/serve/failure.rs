//! Why `serve` could not start, or stopped, in words: which file, socket
//! or address, what the system said (without its errno), and what to do.
//! Each failure has a machine `kind` for `--json` and its exit code.

use std::io;
use std::net::SocketAddr;

use gnomon_server::bind_error::BindError;
use gnomon_server::config::ConfigError;
use gnomon_server::keyfile::KeyFileError;
use gnomon_server::offline::OfflineError;

use crate::exit::{OS_ERROR, USAGE};
use crate::words;

/// A failure: the `--json` object's error kind, its sentence, the exit code.
pub(super) struct Failure {
    pub(super) kind: &'static str,
    pub(super) message: String,
    pub(super) code: u8,
}

impl Failure {
    pub(super) fn new(kind: &'static str, message: impl Into<String>, code: u8) -> Failure {
        Failure {
            kind,
            message: message.into(),
            code,
        }
    }
}

/// An error of the engine's in words: one that carries its own sentence
/// (which socket, which interface, what was being done) keeps it, less
/// the errno; a bare system error becomes its kind's words.
pub(super) fn said(e: &io::Error) -> String {
    if e.get_ref().is_some() {
        words::strip_os_error(&e.to_string())
    } else {
        words::io(e)
    }
}

/// What to do about a file that could not be read, by why.
fn file_fix(kind: io::ErrorKind, what: &str) -> &'static str {
    match kind {
        io::ErrorKind::NotFound => match what {
            "key file" => "; make one with `gnomon keygen --out FILE`, or correct key-file",
            _ => "; make them with `gnomon delegate --out-dir DIR`, or correct offline-dir",
        },
        io::ErrorKind::PermissionDenied => {
            "; the user gnomon runs as must be able to read it (it must stay mode 0600)"
        }
        _ => "",
    }
}

/// A key file that did not load.
pub(super) fn key_file(e: &KeyFileError) -> String {
    match e {
        KeyFileError::Io {
            path,
            action,
            error,
        } => format!(
            "{action} key file {}: {}{}",
            path.display(),
            words::io(error),
            file_fix(error.kind(), "key file")
        ),
        // The other reasons name the file and the fix already.
        other => words::strip_os_error(&other.to_string()),
    }
}

/// A delegation directory that did not load.
pub(super) fn offline_dir(e: &OfflineError) -> String {
    match e {
        OfflineError::File(f) => key_file(f),
        OfflineError::ReadDir { dir, error } => format!(
            "cannot list delegation directory {}: {}{}",
            dir.display(),
            words::io(error),
            file_fix(error.kind(), "delegations")
        ),
        other => words::strip_os_error(&other.to_string()),
    }
}

/// What to do about an address that could not be bound, by why.
fn bind_fix(kind: io::ErrorKind, transport: &str, addr: SocketAddr) -> String {
    let port = addr.port();
    match kind {
        io::ErrorKind::AddrInUse => {
            let ss = if transport == "tcp" { "-ltnp" } else { "-lunp" };
            let tcp_off = if transport == "tcp" {
                ", or serve UDP only with --tcp-enable=false"
            } else {
                ""
            };
            format!(
                "another process holds it (`ss {ss} 'sport = :{port}'` shows which): stop \
                 it, or choose another address with --listen (listen in the file){tcp_off}"
            )
        }
        io::ErrorKind::PermissionDenied if port < 1024 => format!(
            "port {port} is below 1024, which needs CAP_NET_BIND_SERVICE (the systemd unit \
             in deploy/ grants it) or root; or choose a port from 1024 up with --listen"
        ),
        io::ErrorKind::AddrNotAvailable => "choose an address this machine has (`ip address` \
             lists them), or the wildcard 0.0.0.0 or [::], with --listen"
            .to_owned(),
        _ => "check --listen (listen in the file)".to_owned(),
    }
}

/// The engine did not start.
pub(super) fn start(e: &io::Error, listen: &[SocketAddr], activated: bool) -> Failure {
    if let Some(b) = BindError::of(e) {
        return Failure::new(
            "listen",
            format!(
                "cannot listen on {} {}: {}; {}",
                b.transport,
                b.addr,
                words::io(&b.error),
                bind_fix(b.error.kind(), b.transport, b.addr)
            ),
            OS_ERROR,
        );
    }
    let on = if activated {
        "the sockets passed by the service manager".to_owned()
    } else {
        listen
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    Failure::new(
        "start",
        format!("cannot start on {on}: {}", said(e)),
        OS_ERROR,
    )
}

/// The metrics endpoint could not be bound.
pub(super) fn metrics(addr: SocketAddr, e: &io::Error) -> Failure {
    let fix = match e.kind() {
        io::ErrorKind::AddrInUse => "; choose another address with --metrics, or --metrics off",
        io::ErrorKind::AddrNotAvailable => {
            "; choose an address this machine has with --metrics, or --metrics off"
        }
        _ => "",
    };
    Failure::new(
        "metrics",
        format!(
            "cannot serve metrics on http://{addr}: {}{fix}",
            words::io(e)
        ),
        OS_ERROR,
    )
}

/// A configuration that did not load (at start: the exit status).
pub(super) fn config(e: &ConfigError) -> Failure {
    let message = match e {
        ConfigError::Read { path, error } => format!(
            "cannot read configuration file {}: {}{}",
            path.display(),
            words::io(error),
            match error.kind() {
                io::ErrorKind::NotFound =>
                    "; correct --config (GNOMON_CONFIG), or leave it out \
                                            to run on flags and variables alone",
                io::ErrorKind::PermissionDenied => {
                    "; the user gnomon runs as must be able to read it"
                }
                _ => "",
            }
        ),
        // The others point at the key and its line, and list what fits.
        other => words::strip_os_error(&other.to_string()),
    };
    Failure::new("config", message, USAGE)
}
