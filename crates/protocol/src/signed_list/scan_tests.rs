//! The header scanner against serde_json: the same documents are JSON to
//! both, and no input makes it panic.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::scan::{scan, ScanFault, MAX_DEPTH};

fn good() -> Value {
    json!({
        "servers": [{"name": "a", "addresses": [{"protocol": "udp", "address": "h:1"}], "x": [1.5e3, -0.0, true, null]}],
        "sources": [],
        "reports": "https://r/",
        "observatory": {
            "monitor": "m \"1\"",
            "sequence": 1_733_148_000_123u64,
            "published": "2026-12-02T14:00:00Z",
            "expires": "2026-12-03T14:00:00Z",
            "window": {"from": "2026-12-01T14:00:00Z", "to": "2026-12-02T14:00:00Z"},
            "excluded": [{"name": "b", "reason": "lied"}]
        }
    })
}

#[test]
fn a_monitors_list_reads_compact_or_pretty() {
    for text in [
        serde_json::to_vec(&good()).unwrap(),
        serde_json::to_vec_pretty(&good()).unwrap(),
    ] {
        let h = scan(&text).unwrap();
        assert_eq!(h.sequence, 1_733_148_000_123);
        assert_eq!(h.monitor, br#"m \"1\""#);
        assert_eq!((h.published, h.expires), (1_796_220_000, 1_796_306_400));
    }
}

#[test]
fn nesting_is_bounded_without_recursion() {
    let deep = |n: usize| {
        format!(
            r#"{{"servers":[],"x":{}{},"observatory":{{}}}}"#,
            "[".repeat(n),
            "]".repeat(n)
        )
    };
    assert!(!matches!(
        scan(deep(MAX_DEPTH - 1).as_bytes()),
        Err(ScanFault::TooDeep)
    ));
    assert_eq!(scan(deep(MAX_DEPTH).as_bytes()), Err(ScanFault::TooDeep));
    // Far past any stack a recursive reader would have.
    assert_eq!(scan(deep(1_000_000).as_bytes()), Err(ScanFault::TooDeep));
}

#[test]
fn what_is_not_json_is_refused_where_it_stops() {
    for bad in [
        &br#"{"servers":[],}"#[..],
        br#"{"servers":[1,]}"#,
        br#"{"servers":[01]}"#,
        br#"{"servers":[1.]}"#,
        br#"{"servers":["\x"]}"#,
        br#"{"servers":["\u12"]}"#,
        b"{\"servers\":[\"\x01\"]}",
        br#"{"servers":[tru]}"#,
        br#"{"servers":[]} x"#,
        br#"{"servers":[}"#,
        br#"{"servers":{]}"#,
        b"{\"servers\":[\"\xff\"]}",
    ] {
        assert!(
            matches!(scan(bad), Err(ScanFault::NotJson(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
        assert!(serde_json::from_slice::<Value>(bad).is_err());
    }
}

/// Any JSON value, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Whatever serde_json writes, the scanner reads as JSON; with the
    /// header in it, the header comes out.
    #[test]
    fn serde_json_output_is_json_to_the_scanner(extra in value(), monitor in ".{1,12}", sequence in any::<u64>()) {
        let mut doc = good();
        doc["extra"] = extra.clone();
        doc["observatory"]["more"] = extra;
        doc["observatory"]["monitor"] = json!(monitor);
        doc["observatory"]["sequence"] = json!(sequence);
        let text = serde_json::to_vec(&doc).unwrap();
        let h = scan(&text).unwrap();
        prop_assert_eq!(h.sequence, sequence);
        let mut decoded = String::new();
        super::scan::unescape(h.monitor, |c| decoded.push(c)).unwrap();
        prop_assert_eq!(decoded, monitor);
    }

    /// Changed bytes: never a panic, and JSON to the scanner exactly when
    /// JSON to serde_json.
    #[test]
    fn changed_bytes_never_panic_and_agree_on_json(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut text: Vec<u8> = serde_json::to_vec(&good()).unwrap();
        for (at, b) in edits {
            let len = text.len();
            text[at % len] = b;
        }
        let json_to_scan = !matches!(scan(&text), Err(ScanFault::NotJson(_)));
        let json_to_serde = serde_json::from_slice::<Value>(&text).is_ok();
        prop_assert_eq!(json_to_scan, json_to_serde, "{}", String::from_utf8_lossy(&text));
    }

    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = scan(&bytes);
    }
}
