//! The `message` fields: every sentence libgnomon composes fits whole at
//! its longest, and one made too long by the caller's own text (a host
//! name) ends cleanly: after a whole word, in "…", NUL-terminated, valid
//! UTF-8.

use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6};
use std::time::Duration;

use gnomon::logic::{verify_failure, write_message, ELLIPSIS, MAX_CHAIN, MESSAGE_LEN};
use gnomon::query::failure;
use gnomon::GnomonError;
use gnomon_client::{discovery, QueryError, Rejection};
use gnomon_protocol::merkle::PathError;
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::{ProfileSet, Scheme, Tag, VerifyError, Version, WireError, PROFILES};

/// The text of a message buffer, checked to be a C string of UTF-8.
fn text(buf: &[u8; MESSAGE_LEN]) -> String {
    let nul = buf
        .iter()
        .position(|&b| b == 0)
        .expect("a NUL inside the buffer");
    assert!(buf[nul..].iter().all(|&b| b == 0), "bytes after the NUL");
    String::from_utf8(buf[..nul].to_vec()).expect("UTF-8")
}

/// What a message looks like once cut: shorter than `whole`, a prefix of
/// it ending in a whole word, then the ellipsis.
fn assert_ends_cleanly(message: &str, whole: &str) {
    let kept = message
        .strip_suffix(ELLIPSIS)
        .unwrap_or_else(|| panic!("no ellipsis at the end of {message:?}"));
    assert!(
        whole.starts_with(kept),
        "{kept:?} is not how {whole:?} starts"
    );
    assert!(kept.len() < whole.len());
    let next = whole[kept.len()..].chars().next().unwrap();
    assert!(
        !kept.ends_with(|c: char| c.is_alphanumeric()) || !next.is_alphanumeric(),
        "cut inside a word: {kept:?} | {:?}",
        &whole[kept.len()..]
    );
}

#[test]
fn a_sentence_too_long_is_cut_after_a_whole_word_with_an_ellipsis() {
    let whole = "the quick brown fox jumps over the lazy dog; ".repeat(10);
    let mut buf = [0xffu8; MESSAGE_LEN];
    write_message(&mut buf, format_args!("{whole}"));
    let message = text(&buf);
    assert_ends_cleanly(&message, &whole);
    // Not more than one word lost to the cut.
    assert!(message.len() > MESSAGE_LEN - 1 - 8, "{}", message.len());
}

#[test]
fn a_cut_never_splits_a_character() {
    // No spaces to cut at, and characters of 2, 3 and 4 bytes that cannot
    // all line up with the end of the buffer.
    for filler in ["é", "€", "𝄞", "a€"] {
        let whole = filler.repeat(MESSAGE_LEN);
        let mut buf = [0u8; MESSAGE_LEN];
        write_message(&mut buf, format_args!("{whole}"));
        let message = text(&buf);
        let kept = message.strip_suffix(ELLIPSIS).expect("the ellipsis");
        assert!(whole.starts_with(kept));
        // As much as fits: less than one character short of the room.
        assert!(kept.len() + filler.len() > MESSAGE_LEN - 1 - ELLIPSIS.len());
    }
}

#[test]
fn a_sentence_that_fits_exactly_is_not_cut() {
    let whole = "x".repeat(MESSAGE_LEN - 1);
    let mut buf = [0u8; MESSAGE_LEN];
    write_message(&mut buf, format_args!("{whole}"));
    assert_eq!(text(&buf), whole);
}

/// Every verification failure with the largest values its fields can
/// hold, for a single response and for the last exchange of the longest
/// chain.
fn every_verify_error() -> Vec<VerifyError> {
    let tag = Tag(u32::MAX);
    // Longer than any structure name the protocol crate reports.
    let what = "the longest structure name here";
    let wire = [
        WireError::Short(what),
        WireError::Unaligned,
        WireError::BadOffset,
        WireError::TagOrder,
        WireError::TooManyTags,
        WireError::FrameLength,
        WireError::NoMagic,
        WireError::Missing(tag),
        WireError::ValueLength(tag),
        WireError::NoRoom,
    ];
    let mut all = Vec::new();
    for w in wire {
        all.extend([
            VerifyError::Request(w),
            VerifyError::Framing(w),
            VerifyError::Message(w),
        ]);
    }
    let v = Version(u32::MAX);
    all.extend([
        VerifyError::UnknownVersion(u32::MAX),
        VerifyError::NotOffered(v),
        VerifyError::LegacyVersionOne,
        VerifyError::VersionPlacement,
        VerifyError::Type,
        VerifyError::Vers,
        VerifyError::Downgrade {
            answered: v,
            better: v,
        },
        VerifyError::DelegationSignature,
        VerifyError::ResponseSignature,
        VerifyError::NonceMismatch,
        VerifyError::NonceMissing,
        VerifyError::Path(PathError::Length),
        VerifyError::Path(PathError::IndexBits),
        VerifyError::Root,
        VerifyError::Time,
        VerifyError::OutsideDelegation,
        VerifyError::ZeroRadius,
        VerifyError::KeyScheme {
            key: Scheme::Ed25519,
            answered: Scheme::MlDsa44,
        },
    ]);
    all
}

#[test]
fn every_verification_failure_fits_whole() {
    for e in every_verify_error() {
        for exchange in [None, Some(MAX_CHAIN - 1)] {
            let mut buf = [0u8; MESSAGE_LEN];
            let code = verify_failure(&e, exchange, &mut buf);
            let message = text(&buf);
            assert!(!message.ends_with(ELLIPSIS), "cut: {message:?}");
            assert!(message.contains(&format!("{e:?}")), "{message:?}");
            assert!(message.starts_with(&match exchange {
                Some(i) => format!("exchange {i}: {}", code.text().trim_end_matches('\0')),
                None => code.text().trim_end_matches('\0').to_owned(),
            }));
        }
    }
}

/// The longest address a peer can have: IPv6, every group four digits,
/// a zone, the largest port.
fn longest_peer() -> SocketAddr {
    let ip = Ipv6Addr::new(
        0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff,
    );
    SocketAddr::V6(SocketAddrV6::new(ip, u16::MAX, 0, u32::MAX))
}

fn query_message(e: &QueryError) -> (GnomonError, String) {
    let mut buf = [0u8; MESSAGE_LEN];
    let code = failure(e, &mut buf);
    (code, text(&buf))
}

#[test]
fn every_query_failure_fits_whole() {
    let longest_name = PROFILES.iter().map(|p| p.name).max_by_key(|n| n.len());
    let longest_name = longest_name.unwrap();
    // Every family discovery can offer, by the name the error gives it.
    let families: Vec<&'static str> = discovery::families(ProfileSet::ALL)
        .iter()
        .map(|o| o.primary().name)
        .collect();
    let mut cases = vec![
        // Silence after a day, having offered every family, with the
        // largest counts.
        QueryError::NoAnswer {
            refused: true,
            udp_refused: false,
            tcp_refused: true,
            udp_sent: u32::MAX,
            tcp_tried: u32::MAX,
            offered: families.clone(),
            elapsed: Duration::from_secs(86_400),
            older_not_tried: true,
        },
        // A closed port.
        QueryError::NoAnswer {
            refused: true,
            udp_refused: true,
            tcp_refused: true,
            udp_sent: u32::MAX,
            tcp_tried: u32::MAX,
            offered: families.clone(),
            elapsed: Duration::from_secs(86_400),
            older_not_tried: true,
        },
        QueryError::Local(format!(
            "{}: Address family not supported by protocol (os error 97)",
            longest_peer()
        )),
    ];
    let mut rejections: Vec<Rejection> = every_verify_error()
        .into_iter()
        .map(Rejection::Verify)
        .collect();
    rejections.extend([
        Rejection::TcpClosed {
            got: usize::MAX,
            want: usize::MAX,
        },
        Rejection::TcpClosed {
            got: usize::MAX,
            want: 0,
        },
        Rejection::TcpTooLong(usize::MAX),
    ]);
    for rejection in rejections {
        for transport in [Transport::Udp, Transport::Tcp] {
            cases.push(QueryError::Invalid {
                rejection,
                transport,
                peer: longest_peer(),
                offered: longest_name,
            });
        }
    }
    for e in &cases {
        let (_, message) = query_message(e);
        assert!(!message.ends_with(ELLIPSIS), "cut: {message:?}");
    }
}

#[test]
fn a_closed_port_and_silence_get_their_own_codes_and_sentences() {
    let no_answer = |udp_refused, tcp_refused, tcp_tried| QueryError::NoAnswer {
        refused: udp_refused || tcp_refused,
        udp_refused,
        tcp_refused,
        udp_sent: 3,
        tcp_tried,
        offered: vec!["rfc-10049"],
        elapsed: Duration::from_millis(4700),
        older_not_tried: false,
    };
    let refused = GnomonError::GnomonErrRefused;
    let timeout = GnomonError::GnomonErrTimeout;
    for (e, want) in [
        (no_answer(true, false, 0), refused),
        (no_answer(true, true, 1), refused),
        // UDP silent, TCP refused: a server that serves UDP only and
        // dropped the request (a wrong key, say). Silence, not a closed port.
        (no_answer(false, true, 1), timeout),
        // UDP refused, TCP connected and then silent: something listens.
        (no_answer(true, false, 1), timeout),
        (no_answer(false, false, 1), timeout),
    ] {
        let (code, message) = query_message(&e);
        assert_eq!(code, want, "{e:?}: {message}");
        if want == refused {
            assert!(message.contains("port is closed"), "{message}");
            assert!(!message.contains("key"), "{message}");
        } else {
            assert!(message.starts_with("no answer in 4.7 s"), "{message}");
            assert!(message.contains("keys they do not hold"), "{message}");
        }
    }
}

#[test]
fn a_host_name_too_long_for_the_buffer_ends_cleanly() {
    // A valid name as long as DNS allows (253), labels of 63.
    let label = "a".repeat(63);
    let host = [label.as_str(); 4].join(".")[..253].to_owned();
    let e = QueryError::Resolve {
        host: host.clone(),
        reason: "Name or service not known".into(),
    };
    let (code, message) = query_message(&e);
    assert_eq!(code, GnomonError::GnomonErrAddress);
    // The name is one word longer than the buffer: cut inside it, as late
    // as the ellipsis allows.
    let kept = message.strip_suffix(ELLIPSIS).expect("the ellipsis");
    assert!(kept.starts_with("cannot resolve aaa"), "{message}");
    assert!(host.starts_with(kept.strip_prefix("cannot resolve ").unwrap()));
    assert_eq!(kept.len(), MESSAGE_LEN - 1 - ELLIPSIS.len());
}
