//! Arbitrary bytes as a message: every accessor of a parsed message is
//! panic-free, and a valid message re-emits to the same bytes.
#![no_main]

use gnomon_protocol::tag::Tag;
use gnomon_protocol::wire::{self, Message};
use libfuzzer_sys::fuzz_target;

fn exercise(m: &Message<'_>, depth: u8) {
    let mut prev: Option<Tag> = None;
    for (i, (tag, value)) in m.iter().enumerate() {
        assert_eq!(m.tag(i), tag);
        assert_eq!(m.value(i), value);
        assert!(prev.is_none_or(|p| p < tag), "tags sorted");
        prev = Some(tag);
        assert_eq!(value.len() % 4, 0);
        assert_eq!(m.get(tag), Some(value));
        assert_eq!(m.require(tag), Ok(value));
        assert_eq!(m.fixed::<4>(tag).is_ok(), value.len() == 4);
        assert_eq!(m.u32(tag).is_ok(), value.len() == 4);
        assert_eq!(m.u64(tag).is_ok(), value.len() == 8);
        assert_eq!(m.fixed::<32>(tag).is_ok(), value.len() == 32);
        assert_eq!(m.fixed::<64>(tag).is_ok(), value.len() == 64);
        if let Ok(inner) = m.nested(tag) {
            if depth < 3 {
                exercise(&inner, depth + 1);
            }
        }
        // Neighbouring tag numbers that are not present must miss.
        for probe in [tag.0.wrapping_sub(1), tag.0.wrapping_add(1)] {
            let present = m.iter().any(|(t, _)| t.0 == probe);
            assert_eq!(m.get(Tag(probe)).is_some(), present);
        }
    }
    assert_eq!(m.iter().count(), m.len());
    assert_eq!(m.is_empty(), m.iter().next().is_none());
}

fuzz_target!(|data: &[u8]| {
    let framed = wire::unframe(data);
    if let Ok(body) = framed {
        assert_eq!(body.len() + wire::PACKET_HEADER, data.len());
        let _ = Message::parse(body).map(|m| exercise(&m, 0));
    }
    let Ok(m) = Message::parse(data) else {
        return;
    };
    assert_eq!(m.bytes(), data);
    exercise(&m, 0);

    let entries: Vec<(Tag, &[u8])> = m.iter().collect();
    let size = wire::message_len(entries.iter().map(|e| e.1.len()));
    let mut out = vec![0u8; size];
    match wire::write_message(&mut out, &entries) {
        Ok(n) => {
            assert_eq!(n, size);
            if m.is_empty() {
                // A tag count of zero ignores anything after it.
                assert_eq!(out, [0u8; 4]);
            } else {
                assert_eq!(out, data, "re-emitted bytes differ");
            }
            let again = Message::parse(&out).expect("re-emitted message parses");
            assert!(again.iter().eq(m.iter()));
        }
        Err(e) => assert!(entries.len() > 16, "write failed: {e:?}"),
    }
});
