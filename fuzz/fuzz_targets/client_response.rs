//! The client's side of an exchange: a request it made (random version,
//! nonce, size, SRV), answered by the fixture in a batch of up to eight,
//! then edited, as an attacker on the path would, byte by byte or field by
//! field inside SREP with a fresh valid signature from the online key.
//! Decoding, the signature check and full verification never panic; a
//! response that verifies has its midpoint inside the delegation, carries
//! the fixture's online key and, unless SREP was rewritten, exactly the
//! time the fixture signed; the decoder agrees that its signatures hold.
#![no_main]

use arbitrary::Arbitrary;
use ed25519_dalek::{Signer, SigningKey};
use gnomon_client::decode::{check_signatures, decode, read_input, Kind};
use gnomon_fuzz::{
    answer, client_request, expected_midpoint, expected_radius, fixture, offer_of, ByteEdit,
    MAX_BATCH,
};
use gnomon_protocol::request::srv_for;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{verify_response, Acceptor, Profile, ResponderOptions, Tag};
use libfuzzer_sys::fuzz_target;

/// Seed of the fixture's online key (gnomon_fuzz::fixture).
const ONLINE_SEED: [u8; 32] = [0xa5; 32];

#[derive(Arbitrary, Debug)]
struct Input {
    profile: u8,
    also: Option<u8>,
    nonce: u64,
    /// Request size in 4-byte words above the smallest that builds.
    extra_words: u8,
    srv: bool,
    /// Requests in the batch (1 to MAX_BATCH) and which one is ours.
    batch: u8,
    ours: u8,
    batch_disputed: bool,
    google_nonce: bool,
    edits: Vec<Edit>,
}

#[derive(Arbitrary, Debug)]
enum Edit {
    Bytes(ByteEdit),
    /// Replace the value of SREP's tag number `index` and re-sign.
    SrepValue {
        index: u8,
        value: Vec<u8>,
    },
    /// Set a little-endian field of SREP (MIDP, RADI, ROOT, …) and re-sign.
    SrepNumber {
        index: u8,
        value: u64,
    },
    /// Drop SREP's tag number `index` and re-sign.
    SrepDrop {
        index: u8,
    },
    /// Move MIDP by whole days and set its low 40 bits (drafts 01–07 keep
    /// µs of the day there), then re-sign: times just outside the
    /// delegation, and days with more µs than a day has.
    SrepTime {
        days: i8,
        low: u64,
    },
}

impl Edit {
    fn rewrites_srep(&self) -> bool {
        matches!(
            self,
            Edit::SrepValue { .. }
                | Edit::SrepNumber { .. }
                | Edit::SrepDrop { .. }
                | Edit::SrepTime { .. }
        )
    }
}

/// Rebuild the response with SREP's entries changed by `change` (which
/// returns false to leave the response alone), signed by the online key.
fn resign(
    p: &Profile,
    resp: &[u8],
    change: impl FnOnce(&mut Vec<(Tag, Vec<u8>)>) -> bool,
) -> Option<Vec<u8>> {
    let framed = wire::has_magic(resp);
    let body = if framed {
        wire::unframe(resp).ok()?
    } else {
        resp
    };
    let msg = Message::parse(body).ok()?;
    let srep = msg.nested(Tag::SREP).ok()?;
    let mut entries: Vec<(Tag, Vec<u8>)> = srep.iter().map(|(t, v)| (t, v.to_vec())).collect();
    if !change(&mut entries) {
        return None;
    }
    for (_, v) in &mut entries {
        v.resize(v.len().next_multiple_of(4), 0);
    }
    let refs: Vec<(Tag, &[u8])> = entries.iter().map(|(t, v)| (*t, &v[..])).collect();
    let mut new_srep = vec![0u8; wire::message_len(refs.iter().map(|e| e.1.len()))];
    wire::write_message(&mut new_srep, &refs).ok()?;
    let signed = [p.contexts.srep, &new_srep].concat();
    let sig = SigningKey::from_bytes(&ONLINE_SEED)
        .sign(&signed)
        .to_bytes();
    let top: Vec<(Tag, &[u8])> = msg
        .iter()
        .map(|(t, v)| match t {
            Tag::SREP => (t, &new_srep[..]),
            Tag::SIG => (t, &sig[..]),
            _ => (t, v),
        })
        .collect();
    let len = wire::message_len(top.iter().map(|e| e.1.len()));
    let head = if framed { wire::PACKET_HEADER } else { 0 };
    let mut out = vec![0u8; head + len];
    wire::write_message(&mut out[head..], &top).ok()?;
    if framed {
        wire::write_frame_header(&mut out, len).ok()?;
    }
    Some(out)
}

fn edit(p: &Profile, resp: &mut Vec<u8>, e: &Edit) {
    let pick = |entries: &[(Tag, Vec<u8>)], index: u8| {
        (!entries.is_empty()).then(|| usize::from(index) % entries.len())
    };
    let rewritten = match e {
        Edit::Bytes(b) => {
            b.apply(resp);
            None
        }
        Edit::SrepValue { index, value } => resign(p, resp, |entries| {
            let Some(i) = pick(entries, *index) else {
                return false;
            };
            entries[i].1.clone_from(value);
            true
        }),
        Edit::SrepNumber { index, value } => resign(p, resp, |entries| {
            let Some(i) = pick(entries, *index) else {
                return false;
            };
            let field = &mut entries[i].1;
            let bytes = value.to_le_bytes();
            let n = field.len().min(8);
            field[..n].copy_from_slice(&bytes[..n]);
            true
        }),
        Edit::SrepDrop { index } => resign(p, resp, |entries| {
            let Some(i) = pick(entries, *index) else {
                return false;
            };
            entries.remove(i);
            true
        }),
        Edit::SrepTime { days, low } => resign(p, resp, |entries| {
            let Some((_, midp)) = entries
                .iter_mut()
                .find(|(t, v)| *t == Tag::MIDP && v.len() == 8)
            else {
                return false;
            };
            let raw = u64::from_le_bytes(midp[..8].try_into().expect("8 bytes"));
            let day = (raw >> 40).wrapping_add_signed(i64::from(*days));
            let moved = day << 40 | low & ((1 << 40) - 1);
            midp.copy_from_slice(&moved.to_le_bytes());
            true
        }),
    };
    if let Some(r) = rewritten {
        *resp = r;
    }
}

fuzz_target!(|input: Input| {
    let f = fixture();
    let offer = offer_of(input.profile, input.also);
    let srv = input.srv.then(|| srv_for(f.key(offer.primary()).bytes()));
    let batch = usize::from(input.batch) % MAX_BATCH + 1;
    let ours = usize::from(input.ours) % batch;
    let requests: Vec<Vec<u8>> = (0..batch)
        .map(|k| {
            let seed = input.nonce.wrapping_add(k as u64);
            client_request(&offer, seed, input.extra_words, srv.as_ref())
        })
        .collect();
    let acceptor = Acceptor {
        min_size: 0,
        ..Acceptor::default()
    };
    let parsed: Vec<_> = requests
        .iter()
        .map(|r| acceptor.parse(r).expect("the client's own requests parse"))
        .collect();
    let answered_in = parsed[0].profile;
    let options = ResponderOptions {
        batch_disputed: input.batch_disputed,
        google_nonce: input.google_nonce,
    };
    let answers = answer(answered_in, &parsed, options);
    // Too small a request for its version gets no answer: nothing to attack.
    let Some(response) = answers.response(ours) else {
        return;
    };
    let request = &requests[ours];
    let mut resp = response.to_vec();
    for e in input.edits.iter().take(8) {
        edit(answered_in, &mut resp, e);
    }
    let srep_rewritten = input.edits.iter().take(8).any(Edit::rewrites_srep);

    let _ = decode(request);
    let _ = read_input(&resp);
    let decoded = decode(&resp);
    let sigs = decoded
        .as_ref()
        .ok()
        .and_then(|d| check_signatures(&resp, d, f.key(answered_in), Some(request)));
    let Ok(v) = verify_response(request, &resp, f.key(answered_in)) else {
        return;
    };
    assert!(
        v.mint_us <= v.midpoint_us && v.midpoint_us <= v.maxt_us,
        "{}: midpoint {} outside the delegation [{}, {}]",
        v.profile.name,
        v.midpoint_us,
        v.mint_us,
        v.maxt_us
    );
    assert_eq!(v.online_key, f.online_id(answered_in.scheme));
    if !srep_rewritten {
        assert_eq!(Some(v.midpoint_us), expected_midpoint(v.profile));
        assert_eq!(v.radius_us, expected_radius(v.profile));
    }
    let decoded = decoded.expect("a response that verifies decodes");
    assert_eq!(decoded.kind, Kind::Response);
    if let Some(s) = sigs {
        assert!(
            s.delegation && s.response,
            "{}: verifies but the decoder says its signatures fail: {s:?}",
            v.profile.name
        );
        assert_eq!(s.full, Some(Ok(v)));
    }
});
