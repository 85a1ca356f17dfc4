//! Requests: building for every version, and the server's parse and version
//! choice.

use crate::common;

use common::*;
use gnomon_protocol::request::{srv_for, BuildError};
use gnomon_protocol::wire::{unframe, Message};
use gnomon_protocol::{Acceptor, Offer, Profile, ProfileSet, RequestError, Tag, Version, PROFILES};

fn p(name: &str) -> &'static Profile {
    Profile::by_name(name).unwrap()
}

fn build(offer: &Offer, srv: Option<&[u8; 32]>, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; size];
    let nonce = vec![0x5a; offer.primary().nonce_len];
    let n = offer.build(&nonce, srv, size, &mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn each_profile_builds_its_own_layout() {
    for profile in PROFILES.iter() {
        let req = request(profile, 1, 1024);
        assert_eq!(req.len(), 1024, "{}", profile.name);
        let body = if profile.name == "google" {
            &req[..]
        } else {
            unframe(&req).unwrap()
        };
        let msg = Message::parse(body).unwrap();
        assert_eq!(msg.require(Tag::NONC).unwrap().len(), profile.nonce_len);
        assert!(
            msg.get(profile.pad).is_some(),
            "{} pads with {}",
            profile.name,
            profile.pad
        );
        assert_eq!(
            msg.get(Tag::TYPE).is_some(),
            profile.type_tag,
            "{}",
            profile.name
        );
        let parsed = Acceptor::default().parse(&req).unwrap();
        assert_eq!(parsed.profile.id, profile.id, "{}", profile.name);
    }
}

#[test]
fn known_sizes() {
    // drafts 08–09 header 24 + VER 4 + NONC 32 + ZZZZ 952 = 1012.
    let req = request(p("draft-08"), 0, 1024);
    let msg = Message::parse(unframe(&req).unwrap()).unwrap();
    assert_eq!(msg.get(Tag::ZZZZ).unwrap().len(), 952);
    // v1 without SRV: ZZZZ 940; with SRV: 900.
    let req = request(Profile::rfc(), 0, 1024);
    let msg = Message::parse(unframe(&req).unwrap()).unwrap();
    assert_eq!(msg.get(Tag::ZZZZ).unwrap().len(), 940);
    let req = build(&Offer::single(Profile::rfc()), Some(&[1; 32]), 1024);
    let msg = Message::parse(unframe(&req).unwrap()).unwrap();
    assert_eq!(msg.get(Tag::ZZZZ).unwrap().len(), 900);
    assert_eq!(msg.get(Tag::SRV).unwrap(), &[1; 32]);
    // Google: 16-byte header + 64 + 944.
    let req = request(Profile::google(), 0, 1024);
    assert_eq!(
        Message::parse(&req)
            .unwrap()
            .get(Tag::PAD_GOOGLE)
            .unwrap()
            .len(),
        944
    );
}

#[test]
fn srv_only_where_defined() {
    let req = build(&Offer::single(p("draft-08")), Some(&[1; 32]), 1024);
    let msg = Message::parse(unframe(&req).unwrap()).unwrap();
    assert!(msg.get(Tag::SRV).is_none());
    // SRV of a key: SHA-512(0xff ‖ key)[:32]; the draft-11 Cloudflare
    // vectors check the value itself (tests/vectors_*).
    assert_ne!(srv_for(&[0; 32]), srv_for(&[1; 32]));
}

#[test]
fn multi_version_offer_is_sorted_and_picks_the_best() {
    let offer = Offer::new(&[p("draft-11"), Profile::rfc(), p("draft-14"), p("draft-08")]).unwrap();
    assert_eq!(
        offer.versions(),
        &[
            Version::RFC,
            Version::draft(8),
            Version::draft(11),
            Version::DRAFT_12_TO_19
        ]
    );
    assert!(offer.has_type());
    let req = build(&offer, None, 1024);
    assert_eq!(
        Acceptor::default().parse(&req).unwrap().profile.name,
        "rfc-10049"
    );
    // A server without version 1 picks the highest draft.
    let no_v1 = Acceptor {
        profiles: ProfileSet::ALL.without(Profile::rfc().id),
        ..Acceptor::default()
    };
    assert_eq!(no_v1.parse(&req).unwrap().profile.name, "draft-14");
    let only_old = Acceptor {
        profiles: ProfileSet::empty()
            .with(p("draft-08").id)
            .with(p("draft-11").id),
        ..Acceptor::default()
    };
    assert_eq!(only_old.parse(&req).unwrap().profile.name, "draft-11");
}

#[test]
fn offers_that_cannot_share_a_format_are_refused() {
    // 64-byte nonce drafts cannot share a request with 32-byte ones.
    assert_eq!(
        Offer::new(&[p("draft-04"), p("draft-05")]).unwrap_err(),
        BuildError::Incompatible("draft-05", "draft-04")
    );
    // Google has no VER and cannot be offered with the drafts.
    assert!(Offer::new(&[Profile::google(), p("draft-08")]).is_err());
    // TYPE-less 0x8000000c cannot be offered beside a TYPE version.
    assert!(Offer::new(&[p("draft-12"), Profile::rfc()]).is_err());
    assert_eq!(Offer::new(&[]).unwrap_err(), BuildError::Empty);
    let mut out = [0u8; 1024];
    let offer = Offer::single(Profile::rfc());
    assert_eq!(
        offer.build(&[0; 31], None, 1024, &mut out),
        Err(BuildError::NonceLength)
    );
    assert_eq!(
        offer.build(&[0; 32], None, 1022, &mut out),
        Err(BuildError::Size)
    );
    assert_eq!(
        offer.build(&[0; 32], None, 40, &mut out),
        Err(BuildError::Size)
    );
    assert_eq!(
        offer.build(&[0; 32], None, 2048, &mut out),
        Err(BuildError::NoRoom)
    );
}

/// A packet with these tags, padded with ZZZZ to 1024 bytes.
fn packet(ver: &[u32], nonce_len: usize, type_value: Option<u32>) -> Vec<u8> {
    let ver: Vec<u8> = ver.iter().flat_map(|v| v.to_le_bytes()).collect();
    let nonce = vec![1u8; nonce_len];
    let ty = type_value.map(|t| t.to_le_bytes());
    let mut fields: Vec<(Tag, &[u8])> = vec![(Tag::VER, &ver), (Tag::NONC, &nonce)];
    if let Some(t) = &ty {
        fields.push((Tag::TYPE, t));
    }
    let used = gnomon_protocol::wire::message_len(fields.iter().map(|f| f.1.len()).chain([0]));
    let pad = vec![0u8; 1012 - used];
    fields.push((Tag::ZZZZ, &pad));
    let mut out = vec![0u8; 1024];
    gnomon_protocol::wire::write_frame_header(&mut out, 1012).unwrap();
    gnomon_protocol::wire::write_message(&mut out[12..], &fields).unwrap();
    out
}

#[test]
fn version_choice_follows_section_6_1() {
    let a = Acceptor::default();
    // Private-use and unknown values are dropped, the rest ranked.
    let name = |d: Vec<u8>| a.parse(&d).map(|r| r.profile.name);
    assert_eq!(
        name(packet(&[1, 0x8000_000c, 0xc000_0001], 32, Some(0))),
        Ok("rfc-10049")
    );
    assert_eq!(
        a.parse(&packet(&[0xc000_0001], 32, Some(0))).unwrap_err(),
        RequestError::Unsupported
    );
    assert_eq!(
        a.parse(&packet(&[0x8000_000d], 32, Some(0))).unwrap_err(),
        RequestError::Unsupported
    );
    // TYPE-less 0x8000000c is draft 12; with TYPE it is draft 14+.
    assert_eq!(
        a.parse(&packet(&[0x8000_000c], 32, None))
            .unwrap()
            .profile
            .name,
        "draft-12"
    );
    assert_eq!(
        a.parse(&packet(&[0x8000_000c], 32, Some(0)))
            .unwrap()
            .profile
            .name,
        "draft-14"
    );
    // Version 1 without TYPE is not answered (TYPE is required from 14 on).
    assert_eq!(
        a.parse(&packet(&[1], 32, None)).unwrap_err(),
        RequestError::Unsupported
    );
    // TYPE other than 0 is dropped.
    assert_eq!(
        a.parse(&packet(&[1], 32, Some(1))).unwrap_err(),
        RequestError::Type
    );
    // The nonce length must fit: a 64-byte nonce rules out 32-byte drafts.
    assert_eq!(
        name(packet(&[0x8000_0004, 0x8000_0008], 64, None)),
        Ok("draft-04")
    );
    // Deployed 0x80000003 with a 32-byte nonce is accepted.
    assert_eq!(
        a.parse(&packet(&[0x8000_0003], 32, None))
            .unwrap()
            .profile
            .name,
        "draft-03"
    );
}

#[test]
fn ver_list_rules_are_those_of_the_chosen_version() {
    let a = Acceptor::default();
    // 12+: ascending, no repeats.
    assert_eq!(
        a.parse(&packet(&[0x8000_000c, 1], 32, Some(0)))
            .unwrap_err(),
        RequestError::VerList
    );
    assert_eq!(
        a.parse(&packet(&[1, 1], 32, Some(0))).unwrap_err(),
        RequestError::VerList
    );
    // 10–11: no repeats, any order (Cloudflare sends descending lists).
    assert_eq!(
        a.parse(&packet(&[0x8000_000b, 0x8000_0008], 32, None))
            .unwrap()
            .profile
            .name,
        "draft-11"
    );
    assert_eq!(
        a.parse(&packet(&[0x8000_000b, 0x8000_000b], 32, None))
            .unwrap_err(),
        RequestError::VerList
    );
    // 01–09: anything goes.
    assert_eq!(
        a.parse(&packet(&[0x8000_0008, 0x8000_0008], 32, None))
            .unwrap()
            .profile
            .name,
        "draft-08"
    );
    // More than 32 sorted values is too many for 12+.
    let many: Vec<u32> = (0..33)
        .map(|i| 0x8000_0000 + i)
        .chain([0x8000_00ff])
        .collect();
    let mut sorted = vec![1];
    sorted.extend(&many[..32]);
    assert_eq!(
        a.parse(&packet(&sorted, 32, Some(0))).unwrap_err(),
        RequestError::VerList
    );
}

#[test]
fn malformed_requests_have_distinct_errors() {
    let a = Acceptor::default();
    let good = request(Profile::rfc(), 0, 1024);
    assert_eq!(a.parse(&good[..1020]).unwrap_err(), RequestError::TooShort);
    let mut long = good.clone();
    long.extend([0u8; 4]);
    assert!(matches!(
        a.parse(&long).unwrap_err(),
        RequestError::Framing(_)
    ));
    let mut bad = good.clone();
    bad[12] = 0xff; // tag count
    assert!(matches!(
        a.parse(&bad).unwrap_err(),
        RequestError::Message(_)
    ));
    assert_eq!(
        a.parse(&packet(&[], 32, Some(0))).unwrap_err(),
        RequestError::NoVersion
    );
    // A Google request with a short nonce is not Google.
    let mut g = vec![0u8; 1024];
    gnomon_protocol::wire::write_message(
        &mut g,
        &[
            (Tag::NONC, &[0; 32]),
            (Tag::PAD_GOOGLE, &[0; 1024 - 16 - 32]),
        ],
    )
    .unwrap();
    assert_eq!(a.parse(&g).unwrap_err(), RequestError::Unsupported);
    // A smaller minimum admits shorter requests.
    let small = Acceptor {
        min_size: 512,
        ..Acceptor::default()
    };
    assert!(small.parse(&request(Profile::rfc(), 0, 512)).is_ok());
}

#[test]
fn long_version_lists_are_bounded() {
    use gnomon_protocol::request::MAX_VER_ENTRIES;
    let a = Acceptor::default();
    // 128 distinct values offering draft 11: fine. 129: refused for any
    // version, before any per-entry work.
    let mut list: Vec<u32> = (0..MAX_VER_ENTRIES as u32 - 1)
        .map(|i| 0xc000_0000 + i)
        .collect();
    list.push(0x8000_000b);
    assert_eq!(
        a.parse(&packet(&list, 32, None)).map(|r| r.profile.name),
        Ok("draft-11")
    );
    list.insert(0, 0xc100_0000);
    assert_eq!(
        a.parse(&packet(&list, 32, None)).unwrap_err(),
        RequestError::VerList
    );
    // A repeat far apart in a long list is still found (drafts 10–11).
    let mut long: Vec<u32> = (0..100).map(|i| 0xc000_0000 + i).collect();
    long.push(0x8000_000b);
    long.push(0xc000_0000);
    assert_eq!(
        a.parse(&packet(&long, 32, None)).unwrap_err(),
        RequestError::VerList
    );
}

/// The request's four tags are found by one walk of the tag table that
/// stops at TYPE, the highest of them: unknown tags before, between and
/// after them neither hide a field nor change the answer.
#[test]
fn unknown_tags_around_the_read_ones_are_walked_past() {
    let a = Acceptor::default();
    let ver = 1u32.to_le_bytes();
    let nonce = [7u8; 32];
    let ty = 0u32.to_le_bytes();
    let mut fields: Vec<(Tag, &[u8])> = Vec::new();
    // 60 tags below VER (0x00524556), SRV, 20 between SRV and NONC, 10 between
    // NONC and TYPE, 5 after TYPE but before ZZZZ.
    fields.extend((1..=60u32).map(|t| (Tag(t), &[][..])));
    fields.push((Tag::VER, &ver));
    let srv = [9u8; 32];
    fields.push((Tag::SRV, &srv));
    fields.extend((0..20u32).map(|t| (Tag(0x0100_0000 + t), &[][..])));
    fields.push((Tag::NONC, &nonce));
    fields.extend((0..10u32).map(|t| (Tag(0x4400_0000 + t), &[][..])));
    fields.push((Tag::TYPE, &ty));
    let odd = [0xffu8; 4];
    fields.extend((0..5u32).map(|t| (Tag(0x4600_0000 + t), &odd[..])));
    let used = gnomon_protocol::wire::message_len(fields.iter().map(|f| f.1.len()).chain([0]));
    let pad = vec![0u8; 1012 - used];
    fields.push((Tag::ZZZZ, &pad));
    // wire::write_message takes 16 tags at most; this one has 100.
    let mut body = (fields.len() as u32).to_le_bytes().to_vec();
    let mut offset = 0u32;
    for (_, v) in &fields[..fields.len() - 1] {
        offset += v.len() as u32;
        body.extend(offset.to_le_bytes());
    }
    body.extend(fields.iter().flat_map(|(t, _)| t.0.to_le_bytes()));
    body.extend(fields.iter().flat_map(|(_, v)| v.iter().copied()));
    assert_eq!(body.len(), 1012);
    let mut out = vec![0u8; 12];
    gnomon_protocol::wire::write_frame_header(&mut out, 1012).unwrap();
    out.extend(body);
    assert_eq!(Message::parse(unframe(&out).unwrap()).unwrap().len(), 100);

    let r = a.parse(&out).expect("every field is found");
    assert_eq!(
        r.profile.name, "rfc-10049",
        "TYPE was found: version 1, not draft 12"
    );
    assert_eq!(r.nonce, &nonce[..]);
    assert_eq!(r.srv, Some(&srv));
}
