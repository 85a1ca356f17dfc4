//! Each vector path against the portable one, by message class, where this
//! CPU has it; and [`pin`] really choosing the path `digest_many` takes. A
//! path this CPU lacks is skipped with its reason (printed at the end of
//! scripts/test-all), never passed silently. tests/agree.rs checks every
//! available backend against sha2 over many more lengths.

use crate::common;

use gnomon_sha512x4::{digest_many, digest_many_with, pin, Backend, Digest, Message, Variant};

use common::bytes;

const VARIANTS: [Variant; 2] = [Variant::Sha512, Variant::Sha512_256];

/// Batches of leaves (0x00 ‖ data) by class: empty, one block, lengths
/// either side of each place padding changes shape, 1 KiB requests (with
/// zero padding as in real ones, and without), lengths mixed in one batch,
/// and every count from 1 to 17 so groups run full, short and with
/// stragglers.
fn classes() -> Vec<(String, Vec<Vec<u8>>)> {
    let mut c = vec![("empty batch".to_string(), vec![])];
    for len in [
        0usize, 1, 64, 110, 111, 112, 127, 128, 129, 238, 239, 240, 256,
    ] {
        c.push((
            format!("16 × {len} bytes"),
            (0..16).map(|s| bytes(s, len)).collect(),
        ));
    }
    let padded: Vec<Vec<u8>> = (0..16)
        .map(|s| {
            let mut d = bytes(s, 1024);
            d[64..].fill(0);
            d
        })
        .collect();
    for n in 1..=16 {
        c.push((format!("{n} padded 1 KiB requests"), padded[..n].to_vec()));
    }
    // Padding the same in all lanes but one, in one block read in place
    // (bytes 512..640 of the leaf), for every lane position.
    for odd in 0..16 {
        let mut d = padded.clone();
        d[odd][600] ^= 1;
        c.push((format!("16 padded requests, lane {odd} off in block 4"), d));
    }
    let full: Vec<Vec<u8>> = (0..17).map(|s| bytes(100 + s, 1024)).collect();
    for n in 1..=17 {
        c.push((format!("{n} 1 KiB leaves"), full[..n].to_vec()));
    }
    let mixed = [
        1024usize, 1024, 64, 1024, 1024, 1024, 1024, 1024, 1024, 0, 129, 129, 129, 1023,
    ];
    c.push((
        "mixed lengths".to_string(),
        mixed
            .iter()
            .enumerate()
            .map(|(i, &n)| bytes(200 + i as u64, n))
            .collect(),
    ));
    c
}

fn digests(backend: Backend, variant: Variant, msgs: &[Message<'_>]) -> Vec<Digest> {
    let mut out = vec![[0xaau8; 64]; msgs.len()];
    digest_many_with(backend, variant, msgs, &mut out).expect("backend available");
    out
}

fn agrees_with_portable(test: &str, backend: Backend) {
    if !backend.available() {
        gnomon_testkit::skip(test, &format!("this CPU has no {backend:?} (CPUID/XCR0)"));
        return;
    }
    for (class, data) in classes() {
        let msgs: Vec<Message<'_>> = data.iter().map(|d| [&[0u8][..], &d[..], &[][..]]).collect();
        for variant in VARIANTS {
            let want = digests(Backend::Portable, variant, &msgs);
            assert_eq!(
                digests(backend, variant, &msgs),
                want,
                "{backend:?}, {variant:?}, {class}"
            );
        }
    }
}

#[test]
fn avx512x8_agrees_with_portable() {
    agrees_with_portable("avx512x8_agrees_with_portable", Backend::Avx512x8);
}

#[test]
fn avx512x16_agrees_with_portable() {
    agrees_with_portable("avx512x16_agrees_with_portable", Backend::Avx512x16);
}

#[test]
fn avx2x8_agrees_with_portable() {
    agrees_with_portable("avx2x8_agrees_with_portable", Backend::Avx2x8);
}

/// The default picks the widest path the CPU has, and `pin` makes
/// `digest_many` take each path in turn (the gate relies on it); digests
/// are the same whichever runs. One test, as the pin is process-wide.
#[test]
fn pinning_forces_each_path() {
    let want_best = if Backend::Avx512x16.available() {
        Backend::Avx512x16
    } else if Backend::Avx2x8.available() {
        Backend::Avx2x8
    } else {
        Backend::Portable
    };
    assert_eq!(Backend::best(), want_best);
    assert_eq!(Backend::chosen(), want_best, "nothing pinned yet");

    let data: Vec<Vec<u8>> = (0..16).map(|s| bytes(300 + s, 1024)).collect();
    let msgs: Vec<Message<'_>> = data.iter().map(|d| [&[0u8][..], &d[..], &[][..]]).collect();
    let want = digests(Backend::Portable, Variant::Sha512, &msgs);
    for backend in Backend::ALL {
        if !backend.available() {
            assert_eq!(pin(Some(backend)), Err(gnomon_sha512x4::Unsupported));
            gnomon_testkit::skip(
                "pinning_forces_each_path",
                &format!("this CPU has no {backend:?} (CPUID/XCR0); that path is not run"),
            );
            continue;
        }
        pin(Some(backend)).expect("available");
        assert_eq!(Backend::chosen(), backend);
        let mut out = vec![[0u8; 64]; msgs.len()];
        digest_many(Variant::Sha512, &msgs, &mut out);
        assert_eq!(out, want, "pinned {backend:?}");
    }
    pin(None).expect("unpinning cannot fail");
    assert_eq!(Backend::chosen(), want_best);
}
