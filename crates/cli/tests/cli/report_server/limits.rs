//! What one source may hold of the sink: its rate per /24 and the table
//! that counts it, its connections, and the time a body may take.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::client_support;

use client_support::temp;
use gnomon_protocol::report::MEDIA_TYPE;

use super::{field, post_from, rows, Sink};

#[test]
fn sink_limits_rate_per_prefix() {
    let path = temp("sink-rate.db");
    let sink = Sink::start(&format!("sqlite:{}", path.display()), &["--rate", "2"]);
    assert_eq!(sink.post("text/plain", b"x").0, 415);
    assert_eq!(sink.post("text/plain", b"x").0, 415);
    let (code, body) = sink.post(MEDIA_TYPE, b"{}");
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (429, "rate_limited"),
        "{body}"
    );
    // Another /24 has its own allowance.
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    other
        .bind(&"127.0.1.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    other.connect(&sink.addr.into()).unwrap();
    let mut s: TcpStream = other.into();
    s.write_all(b"POST /reports HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\r\nx")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 415"), "{out}");
    assert_eq!(
        sink.metric("gnomon_reports_rejected_total{reason=\"rate_limited\"}"),
        1
    );
    sink.stop();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn sink_evicts_idle_connections_for_a_request() {
    let path = temp("sink-conn.db");
    let sink = Sink::start(
        &format!("sqlite:{}", path.display()),
        &["--max-connections", "2"],
    );
    // Two connections that send nothing hold both slots...
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(sink.addr).unwrap())
        .collect();
    // ...and a request is still answered: the oldest of them, which has
    // not sent a request, is closed to make room.
    assert_eq!(sink.get("/metrics").0, 200);
    let mut buf = [0u8; 64];
    let mut oldest = &idle[0];
    oldest
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(
        oldest.read(&mut buf).unwrap_or(0),
        0,
        "closed without an answer"
    );
    assert!(
        sink.metric("gnomon_report_sink_connections_evicted_total{reason=\"per_source\"}") >= 1
    );
    assert_eq!(
        sink.metric("gnomon_report_sink_connections_refused_total"),
        0
    );

    sink.stop();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_trickled_body_is_cut_off_and_others_are_served_meanwhile() {
    let path = temp("sink-slow.db");
    let database = format!("sqlite:{}", path.display());
    let sink = Sink::start(&database, &[]);
    let mut slow = TcpStream::connect(sink.addr).unwrap();
    slow.write_all(
        format!(
            "POST /reports HTTP/1.1\r\nHost: x\r\nContent-Type: {MEDIA_TYPE}\r\nContent-Length: 1000\r\n\r\n{{"
        )
        .as_bytes(),
    )
    .unwrap();
    // The sink answers others while this body is pending.
    assert_eq!(sink.get("/metrics").0, 200);
    // One more byte now and then until the sink hangs up (bounded: the
    // sink's deadline is 10 s after accept).
    let started = Instant::now();
    slow.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 256];
    let cut = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a trickled body held its connection"
        );
        if slow.write_all(b" ").is_err() {
            break true;
        }
        match slow.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => break false,
            Err(_) => {}
        }
    };
    assert!(cut, "the sink answered a body it never got whole");
    assert_eq!(rows(&database), (0, 0));
    sink.stop();
    let _ = std::fs::remove_file(&path);
}

/// When the rate-limit table is full (`--rate-table`), a newcomer takes
/// the place of the prefix seen least recently (counted) instead of being
/// refused.
#[test]
fn a_full_rate_table_evicts_the_least_recently_seen() {
    let path = temp("sink-lru.db");
    let sink = Sink::start(
        &format!("sqlite:{}", path.display()),
        &["--rate", "1", "--rate-table", "2"],
    );
    let post = |from: &str| post_from(sink.addr, Some(from), "text/plain", b"x").0;
    let (a, b, c) = ("127.0.0.1", "127.0.1.1", "127.0.2.1");
    assert_eq!(post(a), 415, "a's one token");
    assert_eq!(post(b), 415, "b's one token");
    assert_eq!(post(a), 429, "a is out of tokens (and seen again)");
    assert_eq!(post(c), 415, "a newcomer to a full table is let in");
    assert_eq!(sink.metric("gnomon_report_rate_table_evictions_total"), 1);
    assert_eq!(post(a), 429, "a, seen recently, was kept");
    assert_eq!(post(b), 415, "b, seen least recently, was the one evicted");
    assert_eq!(sink.metric("gnomon_report_rate_table_evictions_total"), 2);
    sink.stop();
    let _ = std::fs::remove_file(&path);
}
