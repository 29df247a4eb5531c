//! A head in its plain form, read without httparse: the form nearly every client and worker
//! sends (`NAME: value` lines of token names, printable values, one or more spaces after the
//! colon, CRLF line ends; a request line `METHOD target HTTP/1.x` or a status line
//! `HTTP/1.x nnn reason`). Each reader returns `None` for anything else (a partial head too),
//! and the caller then parses the head with httparse, which stays the judge of every head:
//! what these readers accept httparse accepts with the same spans (a test compares the two on
//! generated heads). Values are scanned eight bytes at a time.

use std::ops::Range;

use super::Span;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = ONES * 0x80;
const LOW7: u64 = ONES * 0x7f;

/// A header name's and a method's bytes (RFC 9110 `tchar`, httparse's token set).
static TOKEN: [bool; 256] = {
    let mut map = [false; 256];
    let mut i = 0;
    while i < 256 {
        map[i] = berth_routing::key::is_tchar(i as u8);
        i += 1;
    }
    map
};

/// A plain request line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequestLine {
    pub(crate) method: Range<usize>,
    pub(crate) target: Range<usize>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub(crate) minor: u8,
    /// Where the header fields start.
    pub(crate) end: usize,
}

/// The request line at the start of `buf` in its plain form: a token method, one space, a
/// target of visible ASCII (0x21-0x7e), one space, `HTTP/1.1` or `HTTP/1.0`, CRLF.
pub(crate) fn request_line(buf: &[u8]) -> Option<RequestLine> {
    let mut at = token_end(buf, 0)?;
    if at == 0 || buf[at] != b' ' {
        return None;
    }
    let method = 0..at;
    at += 1;
    let start = at;
    at = scan(buf, at, target_stops, |b| !(0x21..=0x7e).contains(&b));
    if at == start || *buf.get(at)? != b' ' {
        return None;
    }
    let minor = version(buf.get(at + 1..at + 9)?)?;
    if buf.get(at + 9..at + 11)? != b"\r\n" {
        return None;
    }
    Some(RequestLine {
        method,
        target: start..at,
        minor,
        end: at + 11,
    })
}

/// The status line at the start of `buf` in its plain form: `HTTP/1.1` or `HTTP/1.0`, one
/// space, three digits, one space, a reason of printable ASCII (0x20-0x7e, may be empty),
/// CRLF. Returns the minor version, the code and where the header fields start.
pub(crate) fn status_line(buf: &[u8]) -> Option<(u8, u16, usize)> {
    let minor = version(buf.get(..8)?)?;
    let &[b' ', h, t, o, b' '] = buf.get(8..13)? else {
        return None;
    };
    if !(h.is_ascii_digit() && t.is_ascii_digit() && o.is_ascii_digit()) {
        return None;
    }
    let code = u16::from(h - b'0') * 100 + u16::from(t - b'0') * 10 + u16::from(o - b'0');
    let at = scan(
        buf,
        13,
        |w| value_stops(w) | (w & HIGH),
        |b| !(0x20..=0x7e).contains(&b),
    );
    (buf.get(at..at + 2)? == b"\r\n").then_some((minor, code, at + 2))
}

/// The header fields from `at` up to and with the empty line that ends the head, in their
/// plain form: a token name, a colon, spaces, a value that starts with neither a space nor a
/// control byte and holds no control byte (tab included) nor 0x7f, CRLF. Lowercases each name
/// in place, pushes each field's span (the value without its trailing spaces, as httparse) to
/// `spans` and returns where the head ends; `None` when a line is not plain, the head is not
/// whole, or `spans` would grow past `max` (httparse then refuses it; the names read up to
/// there stay lowercased, which no reader of names tells apart).
pub(crate) fn fields(
    buf: &mut [u8],
    mut at: usize,
    max: usize,
    spans: &mut Vec<Span>,
) -> Option<usize> {
    loop {
        let ns = at;
        at = name_end_lowered(buf, at)?;
        if at == ns {
            // the empty line ends the head
            return (buf.get(at..at + 2)? == b"\r\n").then_some(at + 2);
        }
        if buf[at] != b':' {
            return None;
        }
        let ne = at;
        at += 1;
        while *buf.get(at)? == b' ' {
            at += 1;
        }
        let vs = at;
        at = scan(buf, at, value_stops, |b| b < 0x20 || b == 0x7f);
        if at == vs || buf.get(at..at + 2)? != b"\r\n" || spans.len() >= max {
            return None;
        }
        // the value's first byte is not a space: the trim stops after it
        let mut ve = at;
        while buf[ve - 1] == b' ' {
            ve -= 1;
        }
        spans.push([ns, ne, vs, ve]);
        at += 2;
    }
}

/// Where the token starting at `at` ends (`at` itself when there is none); `None` when the
/// buffer ends first.
#[inline]
fn token_end(buf: &[u8], mut at: usize) -> Option<usize> {
    while TOKEN[usize::from(*buf.get(at)?)] {
        at += 1;
    }
    Some(at)
}

/// [`token_end`] for a header name, which it lowercases in place (as the heads' writers would):
/// letters, digits and `-` (most names' bytes) eight at a time, where setting each byte's 0x20
/// bit is the lowercasing (a digit's and `-`'s is set already).
#[inline]
fn name_end_lowered(buf: &mut [u8], mut at: usize) -> Option<usize> {
    while let Some(bytes) = buf.get_mut(at..at + 8) {
        let mut w = [0; 8];
        w.copy_from_slice(bytes);
        let w = u64::from_le_bytes(w);
        let found = name_stops(w);
        if found != 0 {
            // the bytes before the first stop
            let before = (found.trailing_zeros() / 8) as usize;
            let mask = (1u64 << (8 * before)) - 1;
            bytes.copy_from_slice(&(w | ((ONES * 0x20) & mask)).to_le_bytes());
            at += before;
            break;
        }
        bytes.copy_from_slice(&(w | (ONES * 0x20)).to_le_bytes());
        at += 8;
    }
    loop {
        let b = buf.get_mut(at)?;
        if !TOKEN[usize::from(*b)] {
            return Some(at);
        }
        b.make_ascii_lowercase();
        at += 1;
    }
}

fn version(v: &[u8]) -> Option<u8> {
    match v {
        b"HTTP/1.1" => Some(1),
        b"HTTP/1.0" => Some(0),
        _ => None,
    }
}

/// The first byte from `at` that `stops` flags (eight at a time: the top bit of each byte of
/// its answer, exact per byte) or, in the last bytes, `stop` accepts; the buffer's length when
/// none does.
#[inline]
fn scan(buf: &[u8], mut at: usize, stops: impl Fn(u64) -> u64, stop: impl Fn(u8) -> bool) -> usize {
    while let Some(bytes) = buf.get(at..at + 8) {
        let mut w = [0; 8];
        w.copy_from_slice(bytes);
        let found = stops(u64::from_le_bytes(w));
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < buf.len() && !stop(buf[at]) {
        at += 1;
    }
    at
}

/// Per byte of `w`, the top bit set when it cannot be in a plain header value: below 0x20 (tab
/// included) or 0x7f. No sum carries out of its byte (at most 0x7f + 0x60).
#[inline]
fn value_stops(w: u64) -> u64 {
    let low = w & LOW7;
    (!(low + ONES * 0x60) | (low + ONES)) & !w & HIGH
}

/// Per byte of `w`, the top bit set when it is not an ASCII letter, digit or `-`. No sum
/// carries out of its byte (at most 0x7f + 0x7f).
#[inline]
fn name_stops(w: u64) -> u64 {
    let low = w & LOW7;
    // per byte: top bit set when at least `lo` / at most `hi` (of bytes below 0x80)
    let at_least = |x: u64, lo: u8| x + ONES * u64::from(0x80 - lo);
    let at_most = |x: u64, hi: u8| !(x + ONES * u64::from(0x7f - hi));
    let lower = low | (ONES * 0x20);
    let letter = at_least(lower, b'a') & at_most(lower, b'z');
    let digit = at_least(low, b'0') & at_most(low, b'9');
    let dash = !((low ^ (ONES * u64::from(b'-'))) + LOW7);
    !((letter | digit | dash) & !w) & HIGH
}

/// Per byte of `w`, the top bit set when it cannot be in a plain target: not in 0x21-0x7e.
#[inline]
fn target_stops(w: u64) -> u64 {
    let low = w & LOW7;
    (!(low + ONES * 0x5f) | (low + ONES) | w) & HIGH
}

#[cfg(test)]
mod tests;
