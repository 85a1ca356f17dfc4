//! The words every command uses for the same things: a system error said
//! without its `(os error N)`, "off" and "on" accepted the same way by
//! every flag that takes them, and the one JSON object a command prints
//! under `--json`.
//!
//! A message a user reads says what happened, to what, and what to do; the
//! library's own text (an errno's number, a type's name) says none of that,
//! so it is translated here once rather than in each command.

use std::io;

/// What went wrong, in words, for an I/O error: the kind's plain name where
/// the kind is one a user can act on, else the system's sentence without
/// its `(os error N)`.
pub(crate) fn io(e: &io::Error) -> String {
    use io::ErrorKind as K;
    let plain = match e.kind() {
        K::NotFound => "it does not exist",
        K::PermissionDenied => "permission denied",
        K::ConnectionRefused => "the connection was refused (nothing listens there)",
        K::ConnectionReset => "the connection was reset by the peer",
        K::ConnectionAborted => "the connection was aborted",
        K::NotConnected => "not connected",
        K::AddrInUse => "the address is already in use",
        K::AddrNotAvailable => "the address is not one of this machine's",
        K::BrokenPipe => "the other end closed the connection",
        K::AlreadyExists => "it already exists",
        K::TimedOut => "timed out",
        K::Interrupted => "interrupted",
        K::UnexpectedEof => "it ended early",
        K::OutOfMemory => "out of memory",
        K::HostUnreachable => "no route to the host",
        K::NetworkUnreachable => "the network is unreachable",
        K::NotADirectory => "it is not a directory",
        K::IsADirectory => "it is a directory",
        K::DirectoryNotEmpty => "the directory is not empty",
        K::ReadOnlyFilesystem => "the file system is read-only",
        K::StorageFull => "no space left on the device",
        K::InvalidFilename => "the name is too long or not valid",
        _ => return strip_os_error(&e.to_string()),
    };
    plain.to_owned()
}

/// `text` without a trailing ` (os error N)`, the part of an error's text
/// that only the kernel's headers explain. Also useful on a library's
/// message that embeds an `io::Error`'s text.
pub(crate) fn strip_os_error(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find(" (os error ") {
        let Some(len) = out[start..].find(')') else {
            break;
        };
        out.replace_range(start..start + len + 1, "");
    }
    out
}

/// A switch as every flag that takes one reads it: `on`, `true`, `yes`,
/// `1` and `off`, `false`, `no`, `0`, in any case. For clap's
/// `value_parser`.
pub(crate) fn switch(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!(
            "`{s}` is neither on nor off (on, off, true, false)"
        )),
    }
}

/// Print the one JSON object of a command that ran under `--json`:
/// `fields` (an object) with `exit_code` added. Every command's object
/// carries `exit_code`, so a script reads the outcome from one place.
pub(crate) fn print_outcome(mut fields: serde_json::Value, exit_code: u8) {
    if let Some(map) = fields.as_object_mut() {
        map.insert("exit_code".into(), exit_code.into());
    }
    println!("{fields}");
}

/// The JSON object of a command that failed under `--json`: the error's
/// machine `kind`, its sentence, and the exit code.
pub(crate) fn print_error(kind: &str, message: &str, exit_code: u8) {
    print_outcome(
        serde_json::json!({ "error": { "kind": kind, "message": message.trim() } }),
        exit_code,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_errno_reaches_the_user() {
        let refused = io::Error::from_raw_os_error(111);
        assert_eq!(
            io(&refused),
            "the connection was refused (nothing listens there)"
        );
        // A kind without its own words keeps the system's sentence, less
        // the number.
        let e = io::Error::from_raw_os_error(71); // EPROTO
        let said = io(&e);
        assert!(!said.contains("os error"), "{said}");
        assert!(!said.is_empty());
        assert_eq!(
            strip_os_error("io: Connection refused (os error 111); again (os error 2)"),
            "io: Connection refused; again"
        );
    }

    #[test]
    fn every_switch_spelling() {
        for on in ["on", "ON", "true", "yes", "1"] {
            assert_eq!(switch(on), Ok(true), "{on}");
        }
        for off in ["off", "Off", "false", "no", "0"] {
            assert_eq!(switch(off), Ok(false), "{off}");
        }
        assert!(switch("maybe").is_err());
    }
}
