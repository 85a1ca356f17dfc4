use super::*;

#[test]
fn who_is_left_out_and_why() {
    assert_eq!(exclusion(None).unwrap().0, "unprobed");
    let up = Status {
        up: true,
        ..Status::default()
    };
    assert_eq!(exclusion(Some(&up)), None);
    let liar = Status {
        up: true,
        flagged: Some("its interval misses the consensus".into()),
        report: Some("{}".into()),
        ..Status::default()
    };
    let (reason, detail) = exclusion(Some(&liar)).unwrap();
    assert_eq!(reason, "lied");
    assert!(
        detail.contains("misses the consensus") && detail.contains("report"),
        "{detail}"
    );
    for (failure, reason) in [
        ("silent", "silent"),
        ("invalid", "invalid"),
        ("refused", "refused"),
        ("resolve", "unresolved"),
        ("local", "unprobed"),
    ] {
        let s = Status {
            failure: Some(failure.into()),
            ..Status::default()
        };
        assert_eq!(exclusion(Some(&s)).unwrap().0, reason);
        assert!(REASONS.contains(&reason));
        assert_eq!(reason_label(reason), reason);
    }
}

#[test]
fn versions_are_the_numbers_answered_and_the_newest_is_the_rfc() {
    let names = ["draft-08", "rfc-10049", "draft-08", "google"].map(String::from);
    let v = version_numbers(&names);
    assert_eq!(v, [1, 0x8000_0008, Version::GOOGLE.0]);
    assert_eq!(newest(&v), Some(1));
    assert_eq!(newest(&[0x8000_0005, 0x8000_0008]), Some(0x8000_0008));
    assert_eq!(newest(&[Version::GOOGLE.0]), Some(Version::GOOGLE.0));
    assert_eq!(newest(&[]), None);
}

#[test]
fn quantiles_are_by_nearest_rank() {
    let v: Vec<i64> = (1..=10).rev().collect();
    assert_eq!(quantile(&v, 0.5), Some(5));
    assert_eq!(quantile(&v, 0.9), Some(9));
    assert_eq!(quantile(&[7], 0.9), Some(7));
    assert_eq!(quantile(&[], 0.5), None);
}
