//! The version table's own tests: ids, the compile-time lookup, names,
//! VERS lists and the rows that must differ only where they say so.

use super::*;

/// The walk `for_wire` did before its table: the table must agree with
/// it for every number near the ones in use, with and without TYPE.
fn for_wire_by_walking(version: Version, has_type: bool) -> Option<&'static Profile> {
    let mut found = None;
    for p in PROFILES.iter() {
        if p.framing != Framing::Packet || p.version != version || (p.type_tag && !has_type) {
            continue;
        }
        if found.is_none() || p.type_tag == has_type {
            found = Some(p);
        }
    }
    found
}

#[test]
fn for_wire_table_agrees_with_walking_the_profiles() {
    let near = |base: u32| (0..40).map(move |k| base.wrapping_add(k).wrapping_sub(8));
    let numbers = near(0)
        .chain(near(0x8000_0000))
        .chain(near(Version::GOOGLE.0))
        .chain(near(Version::ML_DSA_44.0))
        .chain([u32::MAX, 0xc000_0000]);
    let mut answered = 0;
    for n in numbers {
        for has_type in [false, true] {
            let v = Version(n);
            let want = for_wire_by_walking(v, has_type).map(|p| p.id);
            assert_eq!(
                Profile::for_wire(v, has_type).map(|p| p.id),
                want,
                "{v} TYPE {has_type}"
            );
            answered += usize::from(want.is_some());
        }
    }
    // Version 1 and drafts 01–12 with TYPE, and all but the TYPE-only
    // rows without it: the comparison covered real answers.
    assert!(answered >= 20, "only {answered} answered");
}

#[test]
fn ids_match_positions() {
    for (i, p) in PROFILES.iter().enumerate() {
        assert_eq!(usize::from(p.id.0), i, "{}", p.name);
    }
}

#[test]
fn type_tag_splits_0x8000000c() {
    assert_eq!(
        Profile::for_wire(Version::DRAFT_12_TO_19, false)
            .unwrap()
            .name,
        "draft-12"
    );
    assert_eq!(
        Profile::for_wire(Version::DRAFT_12_TO_19, true)
            .unwrap()
            .name,
        "draft-14"
    );
    assert_eq!(
        Profile::for_wire(Version::draft(11), true).unwrap().name,
        "draft-11"
    );
    assert_eq!(
        Profile::for_wire(Version::RFC, true).unwrap().name,
        "rfc-10049"
    );
    assert!(Profile::for_wire(Version(0x8000_000d), true).is_none());
    assert!(Profile::for_wire(Version(0), true).is_none());
    // Version 1 requires TYPE; roughenough 1.x's TYPE-less "1" is not it.
    assert!(Profile::for_wire(Version::RFC, false).is_none());
    assert!(homonym(Version::RFC, true, false, false).is_some());
    assert!(homonym(Version::RFC, false, true, true).is_none());
    assert!(homonym(Version::draft(11), true, false, false).is_none());
}

#[test]
fn names_and_numbers_resolve() {
    assert_eq!(Profile::by_name("1").unwrap().name, "rfc-10049");
    assert_eq!(Profile::by_name("0x8000000b").unwrap().name, "draft-11");
    assert_eq!(Profile::by_name("Google").unwrap().name, "google");
    assert_eq!(Profile::by_name("3000600613").unwrap().name, "google");
    // Draft 13 shares draft 12's wire format, so it names that row.
    assert_eq!(Profile::by_name("draft-13").unwrap().name, "draft-12");
    assert_eq!(Profile::by_name("Draft-19").unwrap().name, "draft-14");
}

/// Every draft from 01 to 19 names the row of the format it puts on the
/// wire (as each draft's text gives its VER value): its own number up to draft
/// 11, 0x8000000c from 12 on, TYPE from 14 on; and the nonce, padding and
/// time encoding that draft's text gives.
#[test]
fn every_draft_names_the_row_of_its_wire_format() {
    for n in 1..=u32::from(LAST_DRAFT) {
        let p = Profile::of_draft(n).unwrap_or_else(|| panic!("draft {n}"));
        let wire = if n <= 11 {
            0x8000_0000 + n
        } else {
            0x8000_000c
        };
        assert_eq!(p.version, Version(wire), "draft {n}");
        assert_eq!(p.type_tag, n >= 14, "draft {n}: TYPE");
        assert_eq!(p.nonce_len, if n <= 4 { 64 } else { 32 }, "draft {n}");
        let pad = if n <= 7 { Tag::PAD_DRAFT } else { Tag::ZZZZ };
        assert_eq!(p.pad, pad, "draft {n}");
        let time = if n <= 7 { MJD } else { SECS };
        assert_eq!(p.time, time, "draft {n}");
        assert_eq!(p.srv, n >= 10, "draft {n}: SRV");
        let (first, last) = p.drafts.unwrap();
        assert!(u32::from(first) <= n && n <= u32::from(last), "draft {n}");
        for spelling in [
            alloc::format!("draft-{n:02}"),
            alloc::format!("draft-{n}"),
            alloc::format!("DRAFT{n}"),
            alloc::format!("draft-ietf-ntp-roughtime-{n:02}"),
        ] {
            assert_eq!(Profile::by_name(&spelling), Some(p), "{spelling}");
        }
    }
    // Draft 00 put no number on the wire; there is no draft 20.
    for none in ["draft-00", "draft-20", "draft-", "draft-123", "draft-1x"] {
        assert_eq!(Profile::by_name(none), None, "{none}");
    }
}

/// A row or a number that several drafts share is shown with the range.
#[test]
fn shared_formats_are_shown_with_their_drafts() {
    let d12 = Profile::by_name("draft-12").unwrap();
    let d14 = Profile::by_name("draft-14").unwrap();
    assert_eq!(d12.label(), "draft-12 (drafts 12–13)");
    assert_eq!(d14.label(), "draft-14 (drafts 14–19)");
    assert_eq!(Profile::by_name("draft-07").unwrap().label(), "draft-07");
    assert_eq!(Profile::rfc().label(), "rfc-10049");
    assert_eq!(
        wire_label(Version::DRAFT_12_TO_19),
        "0x8000000c (drafts 12–19)"
    );
    assert_eq!(wire_label(Version::draft(7)), "0x80000007 (draft-07)");
    assert_eq!(wire_label(Version::RFC), "1 (rfc-10049)");
    assert_eq!(wire_label(Version::GOOGLE), "google");
    assert_eq!(wire_label(Version(0x8000_000f)), "0x8000000f (unknown)");
}

#[test]
fn vers_lists_every_numbered_version_once() {
    let all = ProfileSet::ALL.of_scheme(Scheme::Ed25519).versions();
    assert_eq!(all.first(), Some(&Version::RFC));
    assert_eq!(all.last(), Some(&Version::DRAFT_12_TO_19));
    assert_eq!(all.len(), 13, "1, 0x80000001..=0x8000000c");
    let pq = ProfileSet::ALL.of_scheme(Scheme::MlDsa44).versions();
    assert_eq!(pq, [Version::ML_DSA_44]);
    let google_only = ProfileSet::empty().with(Profile::google().id);
    assert!(google_only.versions().is_empty());
}

#[test]
fn every_framed_version_is_served_over_tcp() {
    // The stream is delimited by the packet header; only Google's bare
    // message has none.
    for p in PROFILES.iter() {
        assert_eq!(p.tcp, p.framing == Framing::Packet, "{}", p.name);
    }
    assert!(!Profile::google().tcp);
}

#[test]
fn five_cert_variants() {
    // Google, 01–06, 07, 08–11, 12+ (v1 differs again by context case).
    let mut reps: alloc::vec::Vec<&Profile> = alloc::vec::Vec::new();
    for p in PROFILES.iter() {
        if !reps.iter().any(|r| r.same_cert(p)) {
            reps.push(p);
        }
    }
    let names: alloc::vec::Vec<_> = reps.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "google",
            "draft-01",
            "draft-07",
            "draft-08",
            "draft-12",
            "rfc-10049",
            "ml-dsa-44"
        ]
    );
}

#[test]
fn the_post_quantum_row_is_version_1_with_other_keys() {
    let pq = Profile::for_wire(Version::ML_DSA_44, true).unwrap();
    assert_eq!(pq.name, "ml-dsa-44");
    assert_eq!(Profile::by_name("0x90000001"), Some(pq));
    assert_eq!(pq.scheme, Scheme::MlDsa44);
    assert!(pq.tcp && !pq.udp);
    // Without TYPE there is no such version.
    assert!(Profile::for_wire(Version::ML_DSA_44, false).is_none());
    let rfc = Profile::rfc();
    let same = Profile {
        id: rfc.id,
        name: rfc.name,
        version: rfc.version,
        contexts: rfc.contexts,
        legacy_contexts: rfc.legacy_contexts,
        homonym: rfc.homonym,
        scheme: rfc.scheme,
        udp: rfc.udp,
        ..*pq
    };
    assert_eq!(&same, rfc, "only the listed fields differ from version 1");
    assert_eq!(pq.contexts, CTX_PLAIN);
    // Every other row signs with Ed25519 and is served over UDP.
    for p in PROFILES.iter().filter(|p| p.id != pq.id) {
        assert_eq!((p.scheme, p.udp), (Scheme::Ed25519, true), "{}", p.name);
    }
}
