//! Draft numbers and the names people read for the table's rows.
//!
//! Drafts 01 to 11 each put their own number on the wire; drafts 12 to 19
//! all send 0x8000000c, and only TYPE (from draft 14) tells two of them
//! apart. So `draft-17` is a fine thing to ask for (it is the row of
//! drafts 14–19), and a row or number that several drafts share is shown
//! with the range, so that "draft-14" never reads as "draft 14 only".

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Profile, PROFILES};
use crate::version::Version;

/// The last draft published before RFC 10049.
pub const LAST_DRAFT: u8 = 19;

impl Profile {
    /// The row whose wire format draft `n` describes, for every `n` from 1
    /// to [`LAST_DRAFT`]. Draft 00 put no number on the wire and cannot be
    /// told from Google, so it has none.
    pub fn of_draft(n: u32) -> Option<&'static Profile> {
        PROFILES.iter().find(|p| {
            p.drafts
                .is_some_and(|(first, last)| u32::from(first) <= n && n <= u32::from(last))
        })
    }

    /// `drafts 14–19` when several drafts share this row's format; `None`
    /// when one draft or none defines it.
    pub fn shared_drafts(&self) -> Option<String> {
        match self.drafts {
            Some((first, last)) if first < last => Some(format!("drafts {first:02}–{last:02}")),
            _ => None,
        }
    }

    /// The row's name as people read it: `draft-14 (drafts 14–19)`,
    /// `draft-07`, `rfc-10049`.
    pub fn label(&self) -> String {
        match self.shared_drafts() {
            Some(range) => format!("{} ({range})", self.name),
            None => self.name.into(),
        }
    }
}

/// A bare version number as people read it, where no TYPE tag picks the
/// row: `0x8000000c (drafts 12–19)`, `0x80000007 (draft-07)`,
/// `1 (rfc-10049)`, `0x8000000f (unknown)`.
pub fn wire_label(v: Version) -> String {
    let rows: Vec<&Profile> = PROFILES.iter().filter(|p| p.version == v).collect();
    let spans: Option<Vec<(u8, u8)>> = rows.iter().map(|p| p.drafts).collect();
    match (rows.as_slice(), spans) {
        ([], _) => format!("{v} (unknown)"),
        // Google's number prints as its name.
        ([one], _) if format!("{v}") == one.name => one.name.into(),
        ([one], _) => format!("{v} ({})", one.label()),
        (_, Some(spans)) => {
            let first = spans.iter().map(|s| s.0).min().unwrap_or_default();
            let last = spans.iter().map(|s| s.1).max().unwrap_or_default();
            format!("{v} (drafts {first:02}–{last:02})")
        }
        (several, None) => {
            let names: Vec<&str> = several.iter().map(|p| p.name).collect();
            format!("{v} ({})", names.join(" or "))
        }
    }
}

/// The draft number in `draft-17`, `draft17`, `draft 07` or
/// `draft-ietf-ntp-roughtime-17`, in any case.
pub(super) fn draft_number(name: &str) -> Option<u32> {
    let lower = name.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("draft-ietf-ntp-roughtime-")
        .or_else(|| lower.strip_prefix("draft"))?;
    let digits = rest.strip_prefix(['-', ' ', '_']).unwrap_or(rest);
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
