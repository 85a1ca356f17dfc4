//! The counts per transport, and every identity announced with the
//! transports it answers on: an ML-DSA-44-only server answers over TCP
//! alone, and says so, and its TCP answers are counted.

use std::io::Write;
use std::net::UdpSocket;

use base64::Engine as _;
use gnomon_protocol::{verify_response, Profile, PublicKey};

use super::{line_with, request, Running, B64};
use crate::serve_support::peer::{connect_from, read_frame, wait_metric, PATIENCE};
use crate::serve_support::{keygen, keygen_ml_dsa, ml_dsa_delegations, scratch};

fn ml_dsa() -> &'static Profile {
    Profile::by_name("ml-dsa-44").unwrap()
}

#[test]
fn an_ml_dsa_only_server_counts_its_tcp_answers_and_announces_no_udp() {
    let dir = scratch("serve-output-ml-dsa");
    let key = dir.join("pq.key");
    let public = keygen_ml_dsa(&key);
    let mut s = Running::start(
        &[
            "--key-file",
            key.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            // This machine's clock may be unsynchronized.
            "--clock-unsynchronized",
            "answer-with-radius",
        ],
        &[],
    );
    assert_eq!(
        s.public_keys(1),
        std::slice::from_ref(&public),
        "its 1312-byte key"
    );
    let metrics = s.addr_after("metrics on http://");
    let bound = s.wait_log("but answers nothing");
    let udp: std::net::SocketAddr = bound
        .split_once("udp ")
        .and_then(|(_, r)| r.split(' ').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {bound}"));
    assert!(
        bound.contains(&format!("udp {udp} is bound"))
            && bound.contains("ml-dsa-44 answers over TCP only"),
        "{bound}"
    );
    let tcp = s.addr_after("listening on tcp ");
    let identity = s.wait_log("identity 1 of 1");
    assert!(
        identity.contains("serving identity 1 of 1: ml-dsa-44 public key ml-dsa-44:")
            && identity.contains("over tcp only")
            && !identity.contains("udp"),
        "{identity}"
    );
    assert!(
        !s.log.seen.iter().any(|l| l.contains("listening on udp")),
        "UDP announced for a TCP-only identity: {:#?}",
        s.log.seen
    );

    // Three answers over one connection, and one datagram, dropped.
    let mut c = connect_from("127.0.0.1".parse().unwrap(), tcp);
    for i in 0..3 {
        let r = request(ml_dsa(), i);
        c.write_all(&r).unwrap();
        let answer = read_frame(&mut c).expect("an answer over TCP");
        verify_response(&r, &answer, PublicKey::from_bytes(&public).unwrap()).unwrap();
    }
    drop(c);
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.send_to(&request(ml_dsa(), 9), udp).unwrap();
    let received = wait_metric(metrics, "gnomon_requests_received_total", |n| n >= 1);
    assert_eq!(received, 1);

    let (code, stdout, log) = s.stop();
    assert_eq!(code, Some(0), "{log:#?}");
    assert!(stdout.is_empty(), "{stdout}");
    let last = line_with(&log, "stopped; ");
    assert!(
        last.contains("udp: received 1, answered 0, dropped 1")
            && last.contains("tcp: 1 connections (0 refused), received 3, answered 3, dropped 0")
            && last.contains("answered 3 in all"),
        "{last}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_identity_is_printed_with_the_transports_it_answers_on() {
    let dir = scratch("serve-output-both");
    let (ed_key, ed_public) = keygen(&dir);
    let (delegations, pq_public) = ml_dsa_delegations(&dir, 1);
    let mut s = Running::start(
        &[
            "--key-file",
            ed_key.to_str().unwrap(),
            "--offline-dir",
            delegations.to_str().unwrap(),
            "--clock-unsynchronized",
            "answer-with-radius",
        ],
        &[],
    );
    assert_eq!(
        s.public_keys(2),
        [ed_public.to_vec(), pq_public.clone()],
        "both keys, in the order served"
    );
    let udp = s.addr_after("listening on udp ");
    let tcp = s.addr_after("listening on tcp ");
    let ed = s.wait_log("identity 1 of 2");
    assert!(
        ed.contains(&format!("ed25519 public key {}", B64.encode(ed_public)))
            && ed.contains(&format!("key file {}", ed_key.display()))
            && ed.contains("over udp and")
            && ed.contains("over tcp"),
        "{ed}"
    );
    let pq = s.wait_log("identity 2 of 2");
    assert!(
        pq.contains("ml-dsa-44 public key ml-dsa-44:")
            && pq.contains(&format!("offline delegations in {}", delegations.display()))
            && pq.contains("answers ml-dsa-44 over tcp only")
            && !pq.contains("udp"),
        "{pq}"
    );

    // One answer each way: version 1 over UDP (Ed25519), ML-DSA-44 over TCP.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(PATIENCE)).unwrap();
    let r = request(Profile::rfc(), 1);
    u.send_to(&r, udp).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = u.recv_from(&mut buf).unwrap();
    verify_response(&r, &buf[..n], &ed_public).unwrap();
    let mut c = connect_from("127.0.0.1".parse().unwrap(), tcp);
    let r = request(ml_dsa(), 2);
    c.write_all(&r).unwrap();
    let answer = read_frame(&mut c).expect("an answer over TCP");
    verify_response(&r, &answer, PublicKey::from_bytes(&pq_public).unwrap()).unwrap();
    drop(c);

    let (code, _, log) = s.stop();
    assert_eq!(code, Some(0), "{log:#?}");
    let last = line_with(&log, "stopped; ");
    assert!(
        last.contains("udp: received 1, answered 1, dropped 0")
            && last.contains("tcp: 1 connections (0 refused), received 1, answered 1, dropped 0")
            && last.contains("answered 2 in all"),
        "{last}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
