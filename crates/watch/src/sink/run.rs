//! The sink as a program (`gnomon report-server`): the port first, then
//! the database (named at once, given up on within a bound, and abandoned
//! on a signal), then serving until SIGTERM or SIGINT. Everything it says
//! goes through `tracing`, so the command's one logging setup decides the
//! form (text or JSON).

use std::io;
use std::net::SocketAddr;

use tokio::signal::unix::{signal, Signal, SignalKind};

use super::{serve, SinkConfig, Summary};
use crate::store::{describe, opening, Store, StoreError};

/// Why [`run`] ended with an error. A port that cannot be bound is told
/// apart because the system refused it, and the database because it is a
/// service the sink depends on (the command exits with other statuses).
#[derive(Debug)]
pub enum RunError {
    /// The listening address cannot be bound (in use, not ours).
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        error: io::Error,
    },
    /// The database cannot be reached, opened or migrated.
    Store(StoreError),
    /// Anything else: the runtime, the signals, serving.
    Other(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Listen { addr, error } => write!(f, "cannot listen on {addr}: {error}"),
            RunError::Store(e) => e.fmt(f),
            RunError::Other(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for RunError {}

/// How [`run`] ended when it was stopped (by SIGTERM or SIGINT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Before the database was open: nothing was served.
    Connecting {
        /// `SIGTERM` or `SIGINT`.
        signal: &'static str,
    },
    /// After serving.
    Served {
        /// `SIGTERM` or `SIGINT`.
        signal: &'static str,
        /// The address it served on.
        listen: SocketAddr,
        /// What it did.
        summary: Summary,
    },
}

/// SIGTERM and SIGINT, for as long as the process runs: a signal that
/// comes while the database is being opened stops the start as surely as
/// one that comes while serving.
struct Stop {
    term: Signal,
    int: Signal,
}

impl Stop {
    fn new() -> io::Result<Stop> {
        Ok(Stop {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next of them to arrive, by name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Runs the sink as a program: binds `listen`, opens (and migrates) the
/// store, serves until SIGTERM or SIGINT. Says which database it opens
/// before it waits for it, and where it listens once it serves (the line
/// tests and operators wait for).
pub fn run(listen: SocketAddr, database: &str, config: SinkConfig) -> Result<Ended, RunError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("gnomon-sink")
        .enable_all()
        .build()
        .map_err(|e| RunError::Other(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        let mut stop = Stop::new()
            .map_err(|e| RunError::Other(format!("cannot handle SIGTERM and SIGINT: {e}")))?;
        // The first line is logged once signals are handled: a SIGTERM sent
        // on seeing it stops the sink cleanly rather than killing it.
        match &config.keys {
            Some(k) => tracing::info!("keeping reports that accuse one of {} keys", k.len()),
            None => tracing::info!("keeping reports about any server (--accept-keys limits them)"),
        }
        // The port first: a sink that cannot listen must not create or
        // migrate a database on its way out.
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| RunError::Listen {
                addr: listen,
                error,
            })?;
        let local = listener.local_addr().unwrap_or(listen);
        let what = describe(database);
        tracing::info!("{}", opening(database));
        let store = tokio::select! {
            opened = Store::open(database) => opened.map_err(RunError::Store)?,
            signal = stop.next() => {
                tracing::info!("stopped by {signal} before {what} was open");
                return Ok(Ended::Connecting { signal });
            }
        };
        tracing::info!("listening on {local}; reports kept in {what}");
        let mut signal = "a signal";
        let summary = serve(listener, store.clone(), config, async {
            signal = stop.next().await;
        })
        .await
        .map_err(|e| RunError::Other(format!("serving on {local} failed: {e}")))?;
        store.close().await;
        tracing::info!(
            "stopped by {signal}: {} report(s) accepted, {} already known, {} refused",
            summary.accepted,
            summary.duplicate,
            summary.refused
        );
        Ok(Ended::Served {
            signal,
            listen: local,
            summary,
        })
    })
}
