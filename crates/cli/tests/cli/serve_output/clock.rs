//! A keyed server on a clock the kernel does not vouch for refuses by
//! default; what it says must name the setting that would make it answer,
//! as an operator types it: the flag with its value, and the variable.

use std::net::UdpSocket;

use gnomon_protocol::Profile;

use super::{line_with, request, Running};
use crate::serve_support::keygen;
use crate::serve_support::peer::{get, wait_metric};
use crate::serve_support::scratch;

const FLAG: &str = "--clock-unsynchronized answer-with-radius";
const VARIABLE: &str = "GNOMON_CLOCK_UNSYNCHRONIZED=answer-with-radius";

#[test]
fn a_refusing_server_names_the_flag_and_variable_that_make_it_answer() {
    let dir = scratch("serve-output-clock");
    let (key, _) = keygen(&dir);
    // The debug build's stand-in for systemd's ProtectClock=yes: adjtimex
    // fails, so the clock counts as unsynchronized whatever this machine's is.
    let mut s = Running::start(
        &[
            "--key-file",
            key.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ],
        &[("GNOMON_TEST_CLOCK_UNREADABLE", "1")],
    );
    s.public_keys(1);
    let metrics = s.addr_after("metrics on http://");
    let udp = s.addr_after("listening on udp ");
    let said = line_with(&s.log.seen, "cannot read the kernel's clock state").to_owned();
    assert!(
        said.contains("not answering until it is")
            && said.contains("clients get no answer")
            && said.contains(FLAG)
            && said.contains(VARIABLE),
        "{said}"
    );
    let health = get(metrics, "/health");
    assert!(
        health.starts_with("HTTP/1.1 503")
            && health.contains("--clock-unsynchronized answer-with-radius")
            && health.contains("GNOMON_CLOCK_UNSYNCHRONIZED"),
        "{health}"
    );

    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.send_to(&request(Profile::rfc(), 1), udp).unwrap();
    let series = "gnomon_dropped_total{reason=\"clock_unsynchronized\"}";
    assert_eq!(wait_metric(metrics, series, |n| n >= 1), 1);

    let (code, _, log) = s.stop();
    assert_eq!(code, Some(0), "{log:#?}");
    let last = line_with(&log, "stopped; ");
    assert!(
        last.contains("clock_unsynchronized 1")
            && last.contains("1 dropped because the clock is unsynchronized")
            && last.contains(FLAG),
        "{last}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
