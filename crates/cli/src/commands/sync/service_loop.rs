//! `gnomon sync` as a service: its metrics endpoint and now socket, the
//! rounds until SIGTERM or SIGINT, SIGHUP's reload, and what it leaves
//! when it stops (no now socket; under `--json`, one object).

use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use gnomon_client::Electorate;
use gnomon_sync::config as cfg;
use gnomon_sync::now_socket::Bound;
use gnomon_sync::{Control, Log, Service};
use serde_json::json;

use super::super::sync_exit::Exit;
use crate::words;

/// How long a stop waits for the round in progress.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The service, from its endpoints to its stop.
pub(super) fn serve(service: Service, log: &Log, as_json: bool) -> ExitCode {
    // Signals are taken first: before the socket is made (a SIGTERM between
    // the two would otherwise end the process by default and leave the
    // socket), and before the metrics line, so that a SIGTERM sent on
    // seeing it stops the service cleanly.
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            log(&format!("cannot handle signals: {}", words::io(&e)));
            return Exit::Local.into();
        }
    };
    // The endpoint lives as long as the process: it stops with it.
    if let Some(addr) = service.settings().metrics {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        match gnomon_sync::metrics::serve(addr, service.metrics(), stop) {
            Ok((bound, _)) => log(&format!("metrics on http://{bound}/metrics")),
            Err(e) => {
                let msg = format!(
                    "cannot listen on --metrics {addr}: {}; choose another address, or \
                     --metrics off",
                    words::io(&e)
                );
                log(&format!("error: {msg}"));
                if as_json {
                    words::print_error("listen", &msg, crate::exit::OS_ERROR);
                }
                return ExitCode::from(crate::exit::OS_ERROR);
            }
        }
    }
    let socket = start_now_socket(&service, log).map(Arc::new);
    let code = serve_loop(service, log, signals, socket.clone(), as_json);
    if let Some(s) = socket {
        s.remove();
    }
    code
}

/// The now socket, when one is configured. Sync's job is the clock: a
/// socket that cannot be made is said once and the rounds go on (at the
/// default path it is a note: /run/gnomon exists where the unit made it).
fn start_now_socket(service: &Service, log: &Log) -> Option<Bound> {
    let s = service.settings();
    let path = s.now_socket.clone()?;
    let what = if path.as_os_str() == cfg::DEFAULT_NOW_SOCKET {
        "note"
    } else {
        "warning"
    };
    let gid = match s.now_socket_group.as_deref().map(cfg::group_id).transpose() {
        Ok(g) => g,
        Err(e) => {
            log(&format!(
                "{what}: now socket {}: {e}; `gnomon now` gets no answer",
                path.display()
            ));
            return None;
        }
    };
    let access = gnomon_sync::now_socket::Access {
        gid,
        mode: s.now_socket_mode,
    };
    let started = gnomon_sync::now_socket::spawn(
        &path,
        &access,
        service.board(),
        s.now_drift_ppm,
        service.metrics().now.clone(),
        log.clone(),
    );
    match started {
        Ok(bound) => {
            log(&format!(
                "now socket on {} (mode {:04o}, drift bound {} ppm)",
                path.display(),
                s.now_socket_mode,
                s.now_drift_ppm
            ));
            Some(bound)
        }
        Err(e) => {
            log(&format!(
                "{what}: now socket {}: {}; `gnomon now` gets no answer",
                path.display(),
                words::io(&e)
            ));
            None
        }
    }
}

/// What a service that stopped prints under `--json`.
fn stopped(how: &str, rounds: Option<u64>) {
    words::print_outcome(json!({ "stopped": how, "rounds": rounds }), Exit::Ok as u8);
}

/// Rounds until SIGTERM or SIGINT; SIGHUP re-reads the list.
fn serve_loop(
    mut service: Service,
    log: &Log,
    mut signals: signal_hook::iterator::Signals,
    socket: Option<Arc<Bound>>,
    as_json: bool,
) -> ExitCode {
    let (tx, rx) = mpsc::channel();
    use signal_hook::consts::SIGHUP;
    let watch = log.clone();
    let spawned = std::thread::Builder::new()
        .name("gnomon-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGHUP {
                    let _ = tx.send(Control::Reload);
                    continue;
                }
                let _ = tx.send(Control::Stop);
                // A round in progress may wait seconds on silent servers;
                // everything it saves is written atomically, so stopping
                // in the middle loses that round and nothing else.
                std::thread::sleep(STOP_GRACE);
                watch("stopped in the middle of a round");
                // The exit skips every destructor: the socket goes here.
                if let Some(s) = &socket {
                    s.remove();
                }
                if as_json {
                    stopped("in the middle of a round", None);
                }
                std::process::exit(0);
            }
        });
    if let Err(e) = spawned {
        log(&format!(
            "cannot start the signal thread: {}",
            words::io(&e)
        ));
        return Exit::Local.into();
    }
    let s = service.settings();
    let assumption = Electorate::of(service.servers()).assume(s.max_liars);
    log(&format!(
        "started: {} server(s), every {} ± {}%, quorum {}, state in {}",
        service.servers().len(),
        humanize(s.interval),
        s.jitter,
        s.quorum,
        s.state_dir.display()
    ));
    // Said once, at the start: a list too short for its assumption gives
    // no consensus in any round, and the operator should hear why now.
    log(&format!(
        "assumes at most {} of the {} listed servers {}: {} must answer{}",
        assumption.liars,
        assumption.voters,
        if assumption.liars == 1 { "lies" } else { "lie" },
        assumption.needed(),
        if assumption.satisfiable() {
            String::new()
        } else {
            " (more than the list has: no round can reach a consensus; list more servers or \
             lower max-liars)"
                .to_string()
        }
    ));
    service.run(&rx);
    log("stopped");
    if as_json {
        stopped("on a signal", Some(service.rounds()));
    }
    Exit::Ok.into()
}

fn humanize(d: Duration) -> String {
    format!("{:.0} s", d.as_secs_f64())
}
