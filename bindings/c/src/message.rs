//! The sentence every result carries: a fixed buffer of `MESSAGE_LEN`
//! bytes, NUL-terminated, cut after a whole word (and marked with
//! [`ELLIPSIS`]) when what is written does not fit. No allocation, no
//! `std`: the `no_std` build writes its messages here too.
#![forbid(unsafe_code)]

use core::fmt::{self, Write as _};

use crate::error::GnomonError;

/// Bytes of the message field, NUL included: room for the longest
/// sentence libgnomon writes (tests/messages.rs holds each to it); only
/// text the caller supplied, such as a host name, can make one longer.
pub const MESSAGE_LEN: usize = 256;

/// What ends a message that had to be cut.
pub const ELLIPSIS: &str = "\u{2026}";

/// The code's sentence without its NUL.
pub fn text(code: GnomonError) -> &'static str {
    code.text().trim_end_matches('\0')
}

/// Write `args` into `out` as a NUL-terminated string. One too long for
/// the buffer ends in [`ELLIPSIS`], after a whole word where one ends
/// close enough to the cut, and never inside a character.
pub fn write_message(out: &mut [u8; MESSAGE_LEN], args: fmt::Arguments<'_>) {
    struct Cut<'b> {
        buf: &'b mut [u8; MESSAGE_LEN],
        len: usize,
        cut: bool,
    }
    impl fmt::Write for Cut<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            for c in s.chars() {
                let mut utf8 = [0u8; 4];
                let bytes = c.encode_utf8(&mut utf8).as_bytes();
                // Keep one byte for the NUL.
                if self.len + bytes.len() >= MESSAGE_LEN {
                    self.cut = true;
                    return Err(fmt::Error);
                }
                self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
                self.len += bytes.len();
            }
            Ok(())
        }
    }
    out.fill(0);
    let mut cut = Cut {
        buf: out,
        len: 0,
        cut: false,
    };
    // A cut message is still a message.
    let _ = cut.write_fmt(args);
    if cut.cut {
        let len = cut.len;
        end_with_ellipsis(out, len);
    }
}

/// Further back than this, a word boundary would lose more of the message
/// than a word cut in two does.
const LONGEST_WORD: usize = 32;

/// Shorten the `len` bytes of text in `buf` to make room for the ellipsis
/// and the NUL, and append the ellipsis.
fn end_with_ellipsis(buf: &mut [u8; MESSAGE_LEN], len: usize) {
    let room = MESSAGE_LEN - 1 - ELLIPSIS.len();
    let mut end = len.min(room);
    // buf[end] starts a character (or is past the text): no UTF-8
    // sequence is split.
    while end > 0 && buf[end] & 0xc0 == 0x80 {
        end -= 1;
    }
    // Unless the cut already falls between two words, go back to the last
    // space: half a word can read as another word.
    if end < len && buf[end] != b' ' {
        if let Some(space) = buf[..end].iter().rposition(|&b| b == b' ') {
            if end - space <= LONGEST_WORD {
                end = space;
            }
        }
    }
    while end > 0 && matches!(buf[end - 1], b' ' | b',' | b';' | b':' | b'(') {
        end -= 1;
    }
    buf[end..end + ELLIPSIS.len()].copy_from_slice(ELLIPSIS.as_bytes());
    buf[end + ELLIPSIS.len()..].fill(0);
}
