//! The `observatory` header read without allocating, so that libgnomon's
//! `no_std` build reads it the same way the Rust clients do: one reader
//! for both ([`super::header`] is this plus the words).
//!
//! It walks the whole document and refuses anything that is not JSON
//! (RFC 8259: UTF-8, the number and string grammars, nothing after the
//! value), keeping only the header's fields. Nesting is followed with a
//! fixed bit stack, not recursion, and bounded at [`MAX_DEPTH`]: no input
//! exhausts the stack or panics. A key given twice where it matters
//! (`observatory`, `servers`, a header field) is refused rather than
//! resolved, since two readers could resolve it two ways.

/// Deepest nesting read (serde_json's default limit too).
pub(crate) const MAX_DEPTH: usize = 128;

/// What a header holds, borrowed from the document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawHeader<'a> {
    /// The JSON string's contents, escapes not yet decoded (see [`unescape`]).
    pub(crate) monitor: &'a [u8],
    pub(crate) sequence: u64,
    pub(crate) published: i64,
    pub(crate) expires: i64,
}

/// Why a document has no header we can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanFault {
    /// Not JSON: the byte offset where it stops being JSON.
    NotJson(usize),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    NotAnObject,
    /// A top-level key of the wrong JSON type: `servers`, `sources`, `reports`, `observatory`.
    WrongType(&'static str),
    Missing(&'static str),
    /// A key given twice.
    Twice(&'static str),
    /// A header field that is present but not what it must be.
    Field(&'static str),
    /// Expiry at or before publication.
    ExpiresFirst {
        published: i64,
        expires: i64,
    },
}

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
}

type Scan<T> = Result<T, ScanFault>;

impl<'a> Lexer<'a> {
    fn fail<T>(&self) -> Scan<T> {
        Err(ScanFault::NotJson(self.i))
    }

    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Scan<()> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.fail()
        }
    }

    /// A string; its contents between the quotes, escapes checked.
    fn string(&mut self) -> Scan<&'a [u8]> {
        self.ws();
        if self.peek() != Some(b'"') {
            return self.fail();
        }
        self.i += 1;
        let start = self.i;
        loop {
            match self.peek() {
                Some(b'"') => {
                    let s = &self.b[start..self.i];
                    self.i += 1;
                    return Ok(s);
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                        Some(b'u') => {
                            let hex = self.b.get(self.i + 1..self.i + 5);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return self.fail();
                            }
                            self.i += 5;
                        }
                        _ => return self.fail(),
                    }
                }
                Some(0x00..=0x1f) | None => return self.fail(),
                Some(_) => self.i += 1,
            }
        }
    }

    /// A number; its text.
    fn number(&mut self) -> Scan<&'a [u8]> {
        self.ws();
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return self.fail(),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                return self.fail();
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                return self.fail();
            }
            self.digits();
        }
        Ok(&self.b[start..self.i])
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Scan<()> {
        if self.b.get(self.i..self.i + word.len()) == Some(word) {
            self.i += word.len();
            Ok(())
        } else {
            self.fail()
        }
    }

    /// Skip one value of any kind, nested `depth` levels down already.
    fn skip(&mut self, depth: usize) -> Scan<()> {
        // Bit n: level n is an object (else an array).
        let mut objects = [0u64; MAX_DEPTH / 64];
        let mut level = 0usize;
        loop {
            // A value is expected here.
            self.ws();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if depth + level >= MAX_DEPTH {
                        return Err(ScanFault::TooDeep);
                    }
                    self.i += 1;
                    let object = open == b'{';
                    let (word, bit) = (level / 64, 1u64 << (level % 64));
                    if object {
                        objects[word] |= bit;
                    } else {
                        objects[word] &= !bit;
                    }
                    level += 1;
                    self.ws();
                    let close = if object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.i += 1;
                        level -= 1;
                    } else {
                        if object {
                            self.string()?;
                            self.eat(b':')?;
                        }
                        continue;
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                _ => return self.fail(),
            }
            // A value ended: close what it ends, or go on to the next.
            loop {
                if level == 0 {
                    return Ok(());
                }
                let top = level - 1;
                let object = objects[top / 64] & (1u64 << (top % 64)) != 0;
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.i += 1;
                        if object {
                            self.string()?;
                            self.eat(b':')?;
                        }
                        break;
                    }
                    Some(b'}') if object => {
                        self.i += 1;
                        level -= 1;
                    }
                    Some(b']') if !object => {
                        self.i += 1;
                        level -= 1;
                    }
                    _ => return self.fail(),
                }
            }
        }
    }

    /// Walk an object's members, calling `member` with each key (the
    /// lexer then at its value, which `member` must consume).
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Scan<()>) -> Scan<()> {
        self.eat(b'{')?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            member(self, key)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.fail(),
            }
        }
    }
}

/// Whether a key's contents (escapes undecoded) spell `name`.
fn key_is(raw: &[u8], name: &str) -> bool {
    let mut want = name.chars();
    let mut ok = true;
    let complete = unescape(raw, |c| ok &= want.next() == Some(c)).is_some();
    complete && ok && want.next().is_none()
}

/// Decode a string's contents (as [`Lexer::string`] checked them), each
/// character to `out`; `None` for a lone surrogate, or bytes that are
/// not UTF-8.
pub(crate) fn unescape(raw: &[u8], mut out: impl FnMut(char)) -> Option<()> {
    let text = core::str::from_utf8(raw).ok()?;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out(c);
            continue;
        }
        let decoded = match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let hi = hex4(&mut chars)?;
                if (0xd800..0xdc00).contains(&hi) {
                    if chars.next()? != '\\' || chars.next()? != 'u' {
                        return None;
                    }
                    let lo = hex4(&mut chars)?;
                    if !(0xdc00..0xe000).contains(&lo) {
                        return None;
                    }
                    char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))?
                } else {
                    char::from_u32(hi)?
                }
            }
            _ => return None,
        };
        out(decoded);
    }
    Some(())
}

fn hex4(chars: &mut core::str::Chars<'_>) -> Option<u32> {
    (0..4).try_fold(0u32, |n, _| Some(n * 16 + chars.next()?.to_digit(16)?))
}

/// The header of `doc`, the whole of it checked to be JSON.
pub(crate) fn scan(doc: &[u8]) -> Scan<RawHeader<'_>> {
    if let Err(e) = core::str::from_utf8(doc) {
        return Err(ScanFault::NotJson(e.valid_up_to()));
    }
    // First the whole of it as JSON, so that what is not JSON is called
    // that whatever else is wrong with it; then the header.
    let mut whole_doc = Lexer { b: doc, i: 0 };
    whole_doc.skip(0)?;
    whole_doc.ws();
    if whole_doc.i != doc.len() {
        return whole_doc.fail();
    }
    let mut lx = Lexer { b: doc, i: 0 };
    lx.ws();
    if lx.peek() != Some(b'{') {
        return Err(ScanFault::NotAnObject);
    }
    let mut header: Option<RawHeader<'_>> = None;
    let (mut servers, mut sources, mut reports) = (false, false, false);
    lx.object(|lx, key| {
        lx.ws();
        let first = lx.peek();
        let once = |seen: &mut bool, name: &'static str, want: u8| {
            if core::mem::replace(seen, true) {
                Err(ScanFault::Twice(name))
            } else if first != Some(want) {
                Err(ScanFault::WrongType(name))
            } else {
                Ok(())
            }
        };
        if key_is(key, "observatory") {
            if header.is_some() {
                return Err(ScanFault::Twice("observatory"));
            }
            if first != Some(b'{') {
                return Err(ScanFault::WrongType("observatory"));
            }
            header = Some(observatory(lx)?);
            return Ok(());
        }
        if key_is(key, "servers") {
            once(&mut servers, "servers", b'[')?;
        } else if key_is(key, "sources") {
            once(&mut sources, "sources", b'[')?;
        } else if key_is(key, "reports") {
            once(&mut reports, "reports", b'"')?;
        }
        lx.skip(1)
    })?;
    if !servers {
        return Err(ScanFault::Missing("servers"));
    }
    header.ok_or(ScanFault::Missing("observatory"))
}

fn observatory<'a>(lx: &mut Lexer<'a>) -> Scan<RawHeader<'a>> {
    let mut monitor: Option<&'a [u8]> = None;
    let mut sequence: Option<u64> = None;
    let (mut published, mut expires): (Option<i64>, Option<i64>) = (None, None);
    lx.object(|lx, key| {
        fn twice<T>(slot: &Option<T>, name: &'static str) -> Scan<()> {
            match slot {
                Some(_) => Err(ScanFault::Twice(name)),
                None => Ok(()),
            }
        }
        lx.ws();
        let first = lx.peek();
        if key_is(key, "monitor") {
            twice(&monitor, "observatory.monitor")?;
            if first != Some(b'"') {
                return Err(ScanFault::Field("observatory.monitor"));
            }
            let raw = lx.string()?;
            let mut chars = 0usize;
            if raw.is_empty() || unescape(raw, |_| chars += 1).is_none() {
                return Err(ScanFault::Field("observatory.monitor"));
            }
            monitor = Some(raw);
        } else if key_is(key, "sequence") {
            twice(&sequence, "observatory.sequence")?;
            if !matches!(first, Some(b'-' | b'0'..=b'9')) {
                return Err(ScanFault::Field("observatory.sequence"));
            }
            let text = lx.number()?;
            sequence = Some(whole(text).ok_or(ScanFault::Field("observatory.sequence"))?);
        } else if key_is(key, "published") {
            twice(&published, "observatory.published")?;
            published = Some(time(lx, first, "observatory.published")?);
        } else if key_is(key, "expires") {
            twice(&expires, "observatory.expires")?;
            expires = Some(time(lx, first, "observatory.expires")?);
        } else {
            lx.skip(2)?;
        }
        Ok(())
    })?;
    let monitor = monitor.ok_or(ScanFault::Field("observatory.monitor"))?;
    let sequence = sequence.ok_or(ScanFault::Field("observatory.sequence"))?;
    let published = published.ok_or(ScanFault::Field("observatory.published"))?;
    let expires = expires.ok_or(ScanFault::Field("observatory.expires"))?;
    if expires <= published {
        return Err(ScanFault::ExpiresFirst { published, expires });
    }
    Ok(RawHeader {
        monitor,
        sequence,
        published,
        expires,
    })
}

/// A JSON number that is a whole number from 0 to 2^64 − 1, written
/// without fraction or exponent.
fn whole(text: &[u8]) -> Option<u64> {
    text.iter().try_fold(0u64, |n, &c| {
        if c.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(c - b'0'))
        } else {
            None
        }
    })
}

fn time(lx: &mut Lexer<'_>, first: Option<u8>, name: &'static str) -> Scan<i64> {
    if first != Some(b'"') {
        return Err(ScanFault::Field(name));
    }
    let raw = lx.string()?;
    core::str::from_utf8(raw)
        .ok()
        .and_then(super::parse_utc)
        .ok_or(ScanFault::Field(name))
}
