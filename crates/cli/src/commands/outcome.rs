//! How `watch` and `report-server` end: the log line, the exit status and,
//! under `--json`, the one object on stdout (the error, or what they did
//! before a signal stopped them).

use std::net::SocketAddr;
use std::process::ExitCode;

use gnomon_watch::{OpenCause, StoreError};

use crate::exit;
use crate::words;

/// The ending of one service run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outcome {
    /// `--json`: the object on stdout too.
    pub(crate) json: bool,
}

impl Outcome {
    /// Failed: the error logged, its object printed, `code` returned.
    pub(crate) fn failed(self, kind: &str, message: &str, code: u8) -> ExitCode {
        tracing::error!("{message}");
        if self.json {
            words::print_error(kind, message, code);
        }
        ExitCode::from(code)
    }

    /// Stopped by a signal: `fields` (what it did) as the object, 0.
    pub(crate) fn stopped(self, fields: serde_json::Value) -> ExitCode {
        if self.json {
            words::print_outcome(fields, exit::OK);
        }
        ExitCode::SUCCESS
    }

    /// The port cannot be bound: the system refused it (EX_OSERR).
    pub(crate) fn listen_failed(self, addr: SocketAddr, e: &std::io::Error) -> ExitCode {
        let message = format!(
            "cannot listen on {addr}: {}; choose another address (--listen)",
            words::io(e)
        );
        self.failed("listen", &message, exit::OS_ERROR)
    }

    /// The database cannot be used: a service we depend on (EX_UNAVAILABLE),
    /// the SQLite file (EX_CANTCREAT), or anything else (EX_SOFTWARE).
    pub(crate) fn store_failed(self, e: &StoreError) -> ExitCode {
        let (kind, code) = match e {
            StoreError::Open(o) if o.cause == OpenCause::Unavailable => {
                ("database_unavailable", exit::UNAVAILABLE)
            }
            StoreError::Open(o) if o.cause == OpenCause::File => {
                ("database_file", exit::CANT_CREATE)
            }
            StoreError::Url(_) => ("usage", exit::USAGE),
            _ => ("database", exit::SOFTWARE),
        };
        self.failed(kind, &e.to_string(), code)
    }
}

/// The name of signal `n` (SIGTERM or SIGINT, the two that stop a service).
pub(crate) fn signal_name(n: usize) -> &'static str {
    if n == signal_hook::consts::SIGINT as usize {
        "SIGINT"
    } else {
        "SIGTERM"
    }
}
