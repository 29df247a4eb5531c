//! A request's target kept as where it lies in the head's bytes (held by the request's
//! [`Fields`]): its path and query read from them, no `http::Uri` built per request (the admin
//! routes get one made from it).
//!
//! An origin-form target (`/path?query`) made only of the bytes `http`'s parser takes as they
//! are is split here in one pass over a table; anything else (a fragment, bytes above ASCII,
//! an absolute or authority form, `*`, a byte `http` refuses) goes through `http::Uri`, so
//! what is accepted, refused (with the same message) and read as path and query is the same
//! as when every target was parsed by `http`.

use std::ops::Range;

use bytes::Bytes;
use http::Uri;

use super::Fields;

/// A request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A plain origin-form target in the head's bytes at `start..end`: the path (up to
    /// `path_end`), then `?` and the query when there is one (ASCII).
    Plain {
        start: u32,
        /// Where the path ends (`end`: no query).
        path_end: u32,
        end: u32,
    },
    /// Any other target `http` accepts, as it parsed it.
    Parsed(Box<Uri>),
}

/// Bytes a path takes as they are (`http`'s path map without `?`, `#` and bytes above ASCII).
const PATH: u8 = 1;
/// Bytes a query takes as they are (`http`'s query map without `#` and bytes above ASCII).
const QUERY: u8 = 2;

const CLASSES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        if matches!(b, 0x21 | 0x22 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7E) {
            t[i] |= PATH;
        }
        if matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x7E) {
            t[i] |= QUERY;
        }
        i += 1;
    }
    t
};

impl Target {
    /// The target at `at` in `head` (the head's bytes, kept by its [`Fields`]); `Err`:
    /// `http`'s refusal.
    pub(crate) fn parse(head: &Bytes, at: Range<usize>) -> Result<Self, http::uri::InvalidUri> {
        let span = |n: usize| u32::try_from(n).ok();
        let plain = plain_split(&head[at.clone()]).and_then(|path| {
            Some(Self::Plain {
                start: span(at.start)?,
                path_end: span(at.start + path)?,
                end: span(at.end)?,
            })
        });
        match plain {
            Some(plain) => Ok(plain),
            None => Uri::from_maybe_shared(head.slice(at)).map(|uri| Self::Parsed(Box::new(uri))),
        }
    }

    /// The path (as `Uri::path`), as the head's bytes (no UTF-8 check per read: a plain
    /// target is ASCII, checked when it was made); `fields`: the head's.
    pub(crate) fn path<'a>(&'a self, fields: &'a Fields) -> &'a [u8] {
        match self {
            Self::Plain {
                start, path_end, ..
            } => at(fields, *start, *path_end),
            Self::Parsed(uri) => uri.path().as_bytes(),
        }
    }

    /// The query (as `Uri::query`; the admin routes read it from [`Self::to_uri`]).
    #[cfg(test)]
    pub(crate) fn query<'a>(&'a self, fields: &'a Fields) -> Option<&'a [u8]> {
        match self {
            Self::Plain { path_end, end, .. } => {
                (path_end < end).then(|| at(fields, path_end + 1, *end))
            }
            Self::Parsed(uri) => uri.query().map(str::as_bytes),
        }
    }

    /// The path and query as a worker receives them (`/` when the target has none).
    pub(crate) fn path_and_query<'a>(&'a self, fields: &'a Fields) -> &'a [u8] {
        match self {
            Self::Plain { start, end, .. } => at(fields, *start, *end),
            Self::Parsed(uri) => uri
                .path_and_query()
                .map_or("/", |pq| pq.as_str())
                .as_bytes(),
        }
    }

    /// The target as a `Uri` (the admin routes read their requests through one).
    pub(crate) fn to_uri(&self, fields: &Fields) -> Uri {
        match self {
            // (a plain target is one `http` accepts)
            Self::Plain { start, end, .. } => {
                Uri::from_maybe_shared(fields.head.slice(*start as usize..*end as usize))
                    .unwrap_or_else(|_| Uri::from_static("/"))
            }
            Self::Parsed(uri) => (**uri).clone(),
        }
    }
}

/// The head's bytes at `start..end` (empty if the fields are not the target's head's).
fn at(fields: &Fields, start: u32, end: u32) -> &[u8] {
    fields
        .head
        .get(start as usize..end as usize)
        .unwrap_or_default()
}

/// Where the path of a plain origin-form target ends; `None`: not plain.
fn plain_split(raw: &[u8]) -> Option<usize> {
    if raw.first() != Some(&b'/') {
        return None;
    }
    let i = path_len(raw);
    if i == raw.len() {
        return Some(i);
    }
    if raw[i] != b'?' {
        return None;
    }
    raw[i + 1..]
        .iter()
        .all(|&b| CLASSES[b as usize] & QUERY != 0)
        .then_some(i)
}

/// How many of `raw`'s first bytes a path takes as they are: eight bytes at a time while all
/// eight are path bytes (one test of their classes' AND, not a test and a branch per byte),
/// then byte by byte.
fn path_len(raw: &[u8]) -> usize {
    let mut i = 0;
    for chunk in raw.chunks_exact(8) {
        if chunk.iter().fold(PATH, |c, &b| c & CLASSES[usize::from(b)]) == 0 {
            break;
        }
        i += 8;
    }
    while let Some(&b) = raw.get(i)
        && CLASSES[usize::from(b)] & PATH != 0
    {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Path, query and forwarded path and query as `http::Uri` gives them.
    fn by_uri(raw: &[u8]) -> Option<(String, Option<String>, String)> {
        let uri = Uri::from_maybe_shared(Bytes::copy_from_slice(raw)).ok()?;
        Some((
            uri.path().to_owned(),
            uri.query().map(str::to_owned),
            uri.path_and_query()
                .map_or("/", |pq| pq.as_str())
                .to_owned(),
        ))
    }

    fn by_target(raw: &[u8]) -> Option<(String, Option<String>, String)> {
        // the target inside a head, as the request line has it
        let head = Bytes::from([b"GET ", raw, b" HTTP/1.1\r\n"].concat());
        let t = Target::parse(&head, 4..4 + raw.len()).ok()?;
        let f = Fields::new(head, Vec::new());
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        Some((
            text(t.path(&f)),
            t.query(&f).map(text),
            text(t.path_and_query(&f)),
        ))
    }

    #[test]
    fn a_target_reads_as_http_reads_it() {
        for raw in [
            &b"/v1/chat/completions"[..],
            b"/",
            b"/v1/chat/completions?x=1&y=%20",
            b"/a?",
            b"/a?b?c",
            b"/a#frag",
            b"/a?b#frag",
            b"/{\"json\"}",
            b"/a?\"q\"",
            b"/a<b",
            b"/a?<",
            b"/a`b",
            b"/a b",
            b"/caf\xc3\xa9?\xc3\xa9",
            b"/bad\xff",
            b"*",
            b"http://h:1/p?q",
            b"http://h",
            b"h:443",
            b"",
            b"?x",
        ] {
            assert_eq!(
                by_target(raw),
                by_uri(raw),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn every_byte_in_path_and_query_splits_as_http_splits() {
        for b in 0..=255u8 {
            for raw in [
                vec![b'/', b],
                vec![b'/', b'?', b],
                vec![b'/', b, b'?', b'x'],
            ] {
                assert_eq!(by_target(&raw), by_uri(&raw), "{raw:?}");
            }
        }
    }

    #[test]
    fn a_byte_anywhere_in_a_long_path_splits_as_http_splits() {
        // (the path is read eight bytes at a time: every place in and after the first eights)
        let path = b"/v1/chat/completions/abcdefgh";
        for at in 1..path.len() {
            for b in [b'?', b'#', b' ', b'<', b'`', 0x7f, 0x80, 0xff, b'a', b'%'] {
                let mut raw = path.to_vec();
                raw[at] = b;
                assert_eq!(by_target(&raw), by_uri(&raw), "{raw:?}");
                raw.truncate(at + 1);
                assert_eq!(by_target(&raw), by_uri(&raw), "{raw:?}");
            }
        }
    }

    #[test]
    fn a_plain_target_keeps_the_heads_bytes_and_the_admin_routes_get_its_uri() {
        let head = Bytes::from_static(b"GET /workers/3?x=1 HTTP/1.1\r\n");
        let t = Target::parse(&head, 4..18).unwrap();
        assert!(matches!(t, Target::Plain { .. }), "{t:?}");
        let f = Fields::new(head.clone(), Vec::new());
        assert_eq!(t.path(&f).as_ptr(), head[4..].as_ptr(), "no copy");
        assert_eq!(t.to_uri(&f), "/workers/3?x=1");
        let head = Bytes::from_static(b"CONNECT h:443 HTTP/1.1\r\n");
        let authority = Target::parse(&head, 8..13).unwrap();
        assert!(matches!(authority, Target::Parsed(_)));
        let f = Fields::new(head, Vec::new());
        assert_eq!(authority.path(&f), b"");
        assert_eq!(authority.to_uri(&f), "h:443");
    }
}
