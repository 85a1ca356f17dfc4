//! Damage and invariants shared by the property tests: byte-level edits
//! of valid inputs, and the checks every parsed value must pass.
#![allow(dead_code, unreachable_pub)]

use gnomon_protocol::profile::Framing;
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{Acceptor, Profile, Request, Tag, Verified};
use proptest::prelude::*;
use proptest::sample::Index;

/// One damage to a byte string.
#[derive(Clone, Debug)]
pub enum Edit {
    /// XOR one byte with a non-zero mask.
    Flip(Index, u8),
    /// Cut the end off.
    Truncate(Index),
    /// Append bytes.
    Extend(Vec<u8>),
    /// Insert bytes in the middle.
    Insert(Index, Vec<u8>),
    /// Remove a range.
    Remove(Index, usize),
    /// Add a delta to an aligned 32-bit word: offsets, tags and counts in
    /// any header, nested ones included, as well as lengths and values.
    Word(Index, u32),
    /// Set an aligned word to a chosen value.
    SetWord(Index, u32),
}

pub fn edit() -> impl Strategy<Value = Edit> {
    let delta = prop_oneof![
        Just(1u32),
        Just(4),
        Just(8),
        Just(u32::MAX),
        Just(u32::MAX - 3),
        Just(u32::MAX - 7),
        any::<u32>(),
    ];
    let word = prop_oneof![
        Just(0u32),
        Just(u32::MAX),
        Just(0x8000_0000),
        any::<u32>(),
        prop::sample::select(vec![
            Tag::SIG.0,
            Tag::VER.0,
            Tag::NONC.0,
            Tag::TYPE.0,
            Tag::PATH.0,
            Tag::SREP.0,
            Tag::CERT.0,
            Tag::INDX.0,
            Tag::ROOT.0,
            Tag::MIDP.0,
            Tag::RADI.0,
            Tag::VERS.0,
            Tag::DELE.0,
            Tag::PUBK.0,
            Tag::MINT.0,
            Tag::MAXT.0,
            Tag::ZZZZ.0,
        ]),
    ];
    prop_oneof![
        4 => (any::<Index>(), 1u8..).prop_map(|(i, m)| Edit::Flip(i, m)),
        1 => any::<Index>().prop_map(Edit::Truncate),
        1 => prop::collection::vec(any::<u8>(), 1..16).prop_map(Edit::Extend),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(i, b)| Edit::Insert(i, b)),
        1 => (any::<Index>(), 1usize..9).prop_map(|(i, n)| Edit::Remove(i, n)),
        3 => (any::<Index>(), delta).prop_map(|(i, d)| Edit::Word(i, d)),
        2 => (any::<Index>(), word).prop_map(|(i, w)| Edit::SetWord(i, w)),
    ]
}

pub fn apply(bytes: &[u8], e: &Edit) -> Vec<u8> {
    let mut b = bytes.to_vec();
    if b.is_empty() {
        if let Edit::Extend(x) | Edit::Insert(_, x) = e {
            b.extend_from_slice(x);
        }
        return b;
    }
    match e {
        Edit::Flip(i, m) => b[i.index(bytes.len())] ^= m,
        Edit::Truncate(i) => b.truncate(i.index(bytes.len())),
        Edit::Extend(x) => b.extend_from_slice(x),
        Edit::Insert(i, x) => {
            let at = i.index(bytes.len() + 1);
            b.splice(at..at, x.iter().copied());
        }
        Edit::Remove(i, n) => {
            let at = i.index(bytes.len());
            b.drain(at..(at + n).min(bytes.len()));
        }
        Edit::Word(i, _) | Edit::SetWord(i, _) if bytes.len() >= 4 => {
            let at = 4 * i.index(bytes.len() / 4);
            let old = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            let new = match e {
                Edit::Word(_, d) => old.wrapping_add(*d),
                Edit::SetWord(_, w) => *w,
                _ => unreachable!(),
            };
            b[at..at + 4].copy_from_slice(&new.to_le_bytes());
        }
        Edit::Word(..) | Edit::SetWord(..) => b[0] ^= 1,
    }
    b
}

// ---------------------------------------------------------------------------
// Checks shared by several properties.

/// Calls every accessor of a parsed message and checks they agree.
pub fn exercise(m: &Message<'_>, depth: u8) {
    let mut prev: Option<Tag> = None;
    for (i, (tag, value)) in m.iter().enumerate() {
        assert_eq!(m.tag(i), tag);
        assert_eq!(m.value(i), value);
        assert!(prev.is_none_or(|p| p < tag), "tags sorted");
        prev = Some(tag);
        assert_eq!(value.len() % 4, 0);
        assert_eq!(m.get(tag), Some(value));
        assert_eq!(m.require(tag), Ok(value));
        assert_eq!(m.u32(tag).is_ok(), value.len() == 4);
        assert_eq!(m.u64(tag).is_ok(), value.len() == 8);
        assert_eq!(m.fixed::<32>(tag).is_ok(), value.len() == 32);
        assert_eq!(m.fixed::<64>(tag).is_ok(), value.len() == 64);
        if let (Ok(inner), true) = (m.nested(tag), depth < 3) {
            exercise(&inner, depth + 1);
        }
        for probe in [tag.0.wrapping_sub(1), tag.0.wrapping_add(1)] {
            let present = m.iter().any(|(t, _)| t.0 == probe);
            assert_eq!(m.get(Tag(probe)).is_some(), present);
        }
    }
    assert_eq!(m.iter().count(), m.len());
    assert_eq!(m.is_empty(), m.iter().next().is_none());
    assert_eq!(
        m.require(Tag(0x0102_0304)).is_err(),
        m.get(Tag(0x0102_0304)).is_none()
    );
}

/// Parses `bytes` as a message; if valid, exercises it and checks that it
/// re-emits to the same bytes.
pub fn check_message(bytes: &[u8]) {
    let Ok(m) = Message::parse(bytes) else {
        return;
    };
    assert_eq!(m.bytes(), bytes);
    exercise(&m, 0);
    let entries: Vec<(Tag, &[u8])> = m.iter().collect();
    let size = wire::message_len(entries.iter().map(|e| e.1.len()));
    let mut out = vec![0u8; size];
    match wire::write_message(&mut out, &entries) {
        Ok(n) => {
            assert_eq!(n, size);
            if m.is_empty() {
                // The parser ignores anything after a zero tag count.
                assert_eq!(out, [0u8; 4]);
            } else {
                assert_eq!(out, bytes);
            }
            let again = Message::parse(&out).expect("re-emitted message parses");
            assert!(again.iter().eq(m.iter()));
        }
        Err(e) => assert!(entries.len() > 16, "write failed: {e:?}"),
    }
}

/// What an accepted request must satisfy.
pub fn check_accepted(req: &Request<'_>, datagram: &[u8]) {
    assert_eq!(req.packet, datagram);
    assert!(req.profile.accepted_nonce_lens.contains(&req.nonce.len()));
    let sent = SentRequest::parse(datagram).expect("accepted request reads back");
    assert_eq!(sent.nonce, req.nonce);
    assert_eq!(sent.framed, req.profile.framing == Framing::Packet);
    assert!(sent.primary().is_some());
    if sent.framed {
        assert!(sent.offered().any(|v| v == req.profile.version));
    } else {
        assert_eq!(req.profile.id, Profile::google().id);
    }
}

pub fn check_parse_request(datagram: &[u8]) {
    let lax = Acceptor {
        min_size: 0,
        ..Acceptor::default()
    };
    let strict = Acceptor::default().parse(datagram);
    match lax.parse(datagram) {
        Ok(req) => {
            check_accepted(&req, datagram);
            if let Ok(s) = strict {
                assert_eq!(s.profile.id, req.profile.id);
            }
        }
        Err(_) => assert!(strict.is_err()),
    }
    let _ = SentRequest::parse(datagram).map(|s| (s.primary(), s.offered().count()));
}

/// A response that verifies after damage must still say what was signed.
pub fn assert_same_time(v: &Verified, original: &Verified) {
    assert_eq!(v.profile.id, original.profile.id);
    assert_eq!(v.midpoint_us, original.midpoint_us);
    assert_eq!(v.radius_us, original.radius_us);
    assert_eq!(v.online_key, original.online_key);
}

/// A well-formed message of up to 16 tags, as `write_message` lays it out.
pub fn valid_message() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::btree_map(
        any::<u32>(),
        prop::collection::vec(any::<u8>(), 0..6).prop_map(|v| {
            let mut w = Vec::with_capacity(v.len() * 4);
            for b in v {
                w.extend_from_slice(&[b, b ^ 0x55, 0, b]);
            }
            w
        }),
        0..17,
    )
    .prop_map(|m| {
        let entries: Vec<(Tag, &[u8])> = m.iter().map(|(t, v)| (Tag(*t), &v[..])).collect();
        let mut out = vec![0u8; wire::message_len(entries.iter().map(|e| e.1.len()))];
        let n = wire::write_message(&mut out, &entries).expect("writes");
        out.truncate(n);
        out
    })
}
