//! A message's header fields kept as the bytes of its head and where each name and value lies
//! (the spans httparse found): no header map is built for a head that is only read a little
//! and passed on. Both heads of a proxied request travel this way: the client's request head
//! (read by the routing core through `first`, written to the worker without its hop-by-hop
//! fields) and the worker's response head (the proxy reads `content-type`; the client side drops
//! its hop-by-hop fields as it writes the rest (one pass) beside the gateway's own
//! headers). The admin routes, which read requests through a header map, get one built from
//! the fields ([`Fields::to_map`]).

use std::cell::RefCell;

use bytes::Bytes;

pub(crate) mod plain;
mod target;

pub(crate) use target::Target;

/// Where a header's name and value lie in its head: name start and end, value start and end.
pub(crate) type Span = [usize; 4];

/// Span lists kept per thread for the next heads.
const SPARE_LISTS: usize = 64;

thread_local! {
    /// Emptied span lists, so that a head's parse allocates none (one per head in flight).
    static SPANS: RefCell<Vec<Vec<Span>>> = const { RefCell::new(Vec::new()) };
}

/// An empty span list (one this thread kept, if any; give it back with [`keep_spans`]).
pub(crate) fn take_spans() -> Vec<Span> {
    SPANS.with_borrow_mut(Vec::pop).unwrap_or_default()
}

/// Gives a span list back for the next head.
pub(crate) fn keep_spans(mut spans: Vec<Span>) {
    if spans.capacity() == 0 {
        return;
    }
    spans.clear();
    SPANS.with_borrow_mut(|spare| {
        if spare.len() < SPARE_LISTS {
            spare.push(spans);
        }
    });
}

/// The spans of `headers`, parsed out of `buf`.
pub(crate) fn header_spans<'a>(
    buf: &'a [u8],
    headers: &'a [httparse::Header<'a>],
) -> impl Iterator<Item = Span> + 'a {
    let base = buf.as_ptr() as usize;
    headers.iter().map(move |h| {
        let name = h.name.as_ptr() as usize - base;
        let value = h.value.as_ptr() as usize - base;
        [name, name + h.name.len(), value, value + h.value.len()]
    })
}

/// A head's header fields: its bytes and the spans of its names and values, in order. Names
/// are as the sender wrote them (any case), or lowercased when the head was read in its plain
/// form ([`plain`]); httparse or the plain reader validated both.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fields {
    head: Bytes,
    spans: Vec<Span>,
    /// Every name is lowercase already: the writers copy them as they are.
    lowered: bool,
}

impl Fields {
    /// The fields of `head` that lie at `spans`.
    pub(crate) fn new(head: Bytes, spans: Vec<Span>) -> Self {
        Self {
            head,
            spans,
            lowered: false,
        }
    }

    /// [`Self::new`] for a head whose names are all lowercase (the plain reader lowercased
    /// them).
    pub(crate) fn new_lowered(head: Bytes, spans: Vec<Span>) -> Self {
        Self {
            head,
            spans,
            lowered: true,
        }
    }

    /// The fields in order: name (as sent) and value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans
            .iter()
            .map(|&[ns, ne, vs, ve]| (&self.head[ns..ne], &self.head[vs..ve]))
    }

    /// The first value of the field `lowercase_name` (names compared without case).
    #[inline]
    pub(crate) fn first(&self, lowercase_name: &str) -> Option<&[u8]> {
        let len = lowercase_name.len();
        // lengths first: most names are passed over without touching their bytes
        self.spans
            .iter()
            .find(|&&[ns, ne, _, _]| {
                ne - ns == len
                    && self
                        .head
                        .get(ns..ne)
                        .is_some_and(|n| same_name(n, lowercase_name))
            })
            .and_then(|&[_, _, vs, ve]| self.head.get(vs..ve))
    }

    /// The fields as a header map (names lowercased), for a component that needs one
    /// (the admin routes).
    pub(crate) fn to_map(&self) -> http::HeaderMap {
        let mut map = http::HeaderMap::with_capacity(self.spans.len());
        for &[ns, ne, vs, ve] in &self.spans {
            // httparse accepted both, so both are valid
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(&self.head[ns..ne]),
                http::HeaderValue::from_maybe_shared(self.head.slice(vs..ve)),
            ) {
                map.append(name, value);
            }
        }
        map
    }

    /// `value` (a value of these fields) as shared bytes: no copy.
    pub(crate) fn shared(&self, value: &[u8]) -> Bytes {
        self.head.slice_ref(value)
    }

    /// Writes the fields `keep` accepts (name as sent, value) to `out` as header lines, names
    /// lowercased. Lines written plainly (`name: value` and CRLF, as most senders write them)
    /// that follow each other are copied at once.
    pub(crate) fn write_kept(&self, out: &mut Vec<u8>, mut keep: impl FnMut(&[u8], &[u8]) -> bool) {
        let head = &self.head[..];
        // the run of plain lines not written yet: its bytes and the indices of its spans
        let mut run: Option<(usize, usize, usize, usize)> = None;
        for (i, &[ns, ne, vs, ve]) in self.spans.iter().enumerate() {
            if !keep(&head[ns..ne], &head[vs..ve]) {
                continue;
            }
            let plain = head.get(ne..vs) == Some(b": ") && head.get(ve..ve + 2) == Some(b"\r\n");
            match run {
                Some((start, end, first, _)) if plain && end == ns => {
                    run = Some((start, ve + 2, first, i));
                }
                _ => {
                    if let Some(r) = run.take() {
                        self.put_run(out, r);
                    }
                    if plain {
                        run = Some((ns, ve + 2, i, i));
                    } else {
                        let at = out.len();
                        out.extend_from_slice(&head[ns..ne]);
                        if !self.lowered {
                            lowercase(&mut out[at..]);
                        }
                        out.extend_from_slice(b": ");
                        out.extend_from_slice(&head[vs..ve]);
                        out.extend_from_slice(b"\r\n");
                    }
                }
            }
        }
        if let Some(r) = run {
            self.put_run(out, r);
        }
    }

    /// Copies the plain lines `start..end` (spans `first..=last`), names lowercased.
    fn put_run(&self, out: &mut Vec<u8>, (start, end, first, last): (usize, usize, usize, usize)) {
        let base = out.len();
        out.extend_from_slice(&self.head[start..end]);
        if self.lowered {
            return;
        }
        for &[ns, ne, _, _] in &self.spans[first..=last] {
            lowercase(&mut out[base + ns - start..base + ne - start]);
        }
    }

    /// Removes the `i`-th field (none when there are fewer).
    pub(crate) fn remove(&mut self, i: usize) {
        if i < self.spans.len() {
            self.spans.remove(i);
        }
    }

    /// Keeps only the fields `keep` accepts (name as sent, value).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&[u8], &[u8]) -> bool) {
        let head = &self.head;
        self.spans
            .retain(|&[ns, ne, vs, ve]| keep(&head[ns..ne], &head[vs..ve]));
    }
}

/// What tests read (the request path needs none of it).
#[cfg(test)]
impl Fields {
    /// How many fields there are.
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The fields of a header map, in its order.
    pub(crate) fn from_map(map: &http::HeaderMap) -> Self {
        let pairs: Vec<(&str, &str)> = map
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_str().unwrap()))
            .collect();
        Self::from_pairs(&pairs)
    }

    /// Fields made of `name: value` pairs, as a head would carry them.
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        let mut head = Vec::new();
        let mut spans = Vec::new();
        for (name, value) in pairs {
            let ns = head.len();
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            let vs = head.len();
            head.extend_from_slice(value.as_bytes());
            spans.push([ns, ns + name.len(), vs, vs + value.len()]);
            head.extend_from_slice(b"\r\n");
        }
        Self::new(Bytes::from(head), spans)
    }
}

impl Drop for Fields {
    fn drop(&mut self) {
        keep_spans(std::mem::take(&mut self.spans));
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// Eight bytes of a header name (a token: each byte below 0x80), lowercased.
fn lower8(w: u64) -> u64 {
    // per byte: its top bit set when it is in b'A'..=b'Z' (no carry crosses a byte)
    let at_least_a = w.wrapping_add(ONES * (0x80 - u64::from(b'A')));
    let above_z = w.wrapping_add(ONES * (0x80 - u64::from(b'Z') - 1));
    w | ((at_least_a & !above_z & (ONES * 0x80)) >> 2)
}

fn word(bytes: &[u8]) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(w)
}

/// Lowercases a header name (a token: ASCII only) eight bytes at a time (the last eight
/// overlapping the ones before: lowercasing twice changes nothing), a name shorter than
/// eight byte by byte.
pub(crate) fn lowercase(name: &mut [u8]) {
    let len = name.len();
    if len < 8 {
        name.make_ascii_lowercase();
        return;
    }
    let mut at = 0;
    while at + 8 < len {
        let w = lower8(word(&name[at..]));
        name[at..at + 8].copy_from_slice(&w.to_le_bytes());
        at += 8;
    }
    let w = lower8(word(&name[len - 8..]));
    name[len - 8..].copy_from_slice(&w.to_le_bytes());
}

/// Whether `name` (a token as sent, any case) is `lowercase_name`: eight bytes at a time (the
/// last eight overlapping the ones before), a name shorter than eight byte by byte. Exact for
/// any bytes, not only a token's (a header value against `keep-alive`): each byte is compared
/// as itself or with its 0x20 bit set, which an uppercase letter alone among the bytes below
/// 0x80 turns into its `lowercase_name` byte without a carry from the byte before it, and only
/// a byte of 0x80 or more carries (a word holding one never matches: its top bit stays).
#[inline]
pub(crate) fn same_name(name: &[u8], lowercase_name: &str) -> bool {
    let want = lowercase_name.as_bytes();
    let len = name.len();
    if len != want.len() {
        return false;
    }
    if len < 8 {
        return name
            .iter()
            .zip(want)
            .all(|(n, w)| n.to_ascii_lowercase() == *w);
    }
    // a word as it is first (a plainly read head's names are lowercase already), lowercased
    // only when that differs
    let same = |at: usize| {
        let (n, w) = (word(&name[at..]), word(&want[at..]));
        n == w || lower8(n) == w
    };
    let mut at = 0;
    while at + 8 < len {
        if !same(at) {
            return false;
        }
        at += 8;
    }
    same(len - 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(raw: &'static [u8], headers: &[(usize, usize, usize, usize)]) -> Fields {
        let spans = headers.iter().map(|&(a, b, c, d)| [a, b, c, d]).collect();
        Fields::new(Bytes::from_static(raw), spans)
    }

    #[test]
    fn fields_are_read_without_case_kept_in_order_and_filtered() {
        let raw = b"Content-Type: text/plain\r\nX-A: 1\r\nx-a: 2\r\n";
        let mut f = fields(raw, &[(0, 12, 14, 24), (26, 29, 31, 32), (34, 37, 39, 40)]);
        assert_eq!(f.len(), 3);
        assert_eq!(f.first("content-type"), Some(&b"text/plain"[..]));
        assert_eq!(f.first("x-a"), Some(&b"1"[..]), "the first of two");
        assert_eq!(f.first("x-b"), None);
        assert_eq!(f.first("x"), None);
        let map = f.to_map();
        assert_eq!(map["content-type"], "text/plain");
        let both: Vec<_> = map.get_all("x-a").iter().collect();
        assert_eq!(both, ["1", "2"]);
        f.retain(|name, _| !same_name(name, "x-a"));
        let left: Vec<_> = f.iter().collect();
        assert_eq!(left, [(&b"Content-Type"[..], &b"text/plain"[..])]);
        assert!(!f.is_empty());
        assert!(Fields::default().is_empty());
    }

    /// The fields of a header section, as httparse finds them.
    fn parsed(raw: &'static [u8]) -> Fields {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let httparse::Status::Complete((_, found)) =
            httparse::parse_headers(raw, &mut headers).unwrap()
        else {
            panic!("partial");
        };
        let spans = header_spans(raw, found).collect();
        Fields::new(Bytes::from_static(raw), spans)
    }

    #[test]
    fn kept_fields_are_written_lowercased_whether_plain_or_not() {
        let f = parsed(b"A-B: 1\r\nSkip: x\r\nC:2\r\nD:  3 \r\nE: 4\r\nF-G: 5\r\nSkip: y\r\n\r\n");
        let mut out = b"HTTP/1.1 200 OK\r\n".to_vec();
        f.write_kept(&mut out, |name, _| !name.eq_ignore_ascii_case(b"skip"));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\na-b: 1\r\nc: 2\r\nd: 3\r\ne: 4\r\nf-g: 5\r\n"
        );
        let mut out = Vec::new();
        f.write_kept(&mut out, |_, _| false);
        assert!(out.is_empty());
    }

    #[test]
    fn names_are_lowercased_as_make_ascii_lowercase_does() {
        let tchars =
            b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz@[";
        for len in 0..tchars.len() {
            for start in 0..tchars.len() - len {
                let mut name = tchars[start..start + len].to_vec();
                let mut want = name.clone();
                want.make_ascii_lowercase();
                lowercase(&mut name);
                assert_eq!(name, want);
            }
        }
    }

    #[test]
    fn names_compare_as_eq_ignore_ascii_case_does() {
        let names = [
            "content-length",
            "Content-Length",
            "CONTENT-LENGTH",
            "content-lengtH",
            "content-lengti",
            "x-smg-routing-key",
            "X-SMG-Routing-Key",
            "x-smg-routing-kez",
            "x^y_z~w!#$%&'*+.|`",
            "X^Y_Z~W!#$%&'*+.|`",
            "x^y_z~w!#$%&'*+.|@",
            "te",
            "TE",
            "t",
            "",
        ];
        for name in names {
            for want in names.map(str::to_ascii_lowercase) {
                assert_eq!(
                    same_name(name.as_bytes(), &want),
                    name.eq_ignore_ascii_case(&want),
                    "{name} {want}"
                );
            }
        }
        // any bytes (a header value), against an ASCII want: every byte of 0x80 and up and
        // every control byte in each place of `keep-alive`, in either case
        for want in ["keep-alive", "close"] {
            for upper in [false, true] {
                let base: Vec<u8> = if upper {
                    want.to_ascii_uppercase().into_bytes()
                } else {
                    want.as_bytes().to_vec()
                };
                assert!(same_name(&base, want));
                for at in 0..base.len() {
                    for b in (0u8..0x20).chain(0x7f..=0xff) {
                        let mut v = base.clone();
                        v[at] = b;
                        assert_eq!(
                            same_name(&v, want),
                            v.eq_ignore_ascii_case(want.as_bytes()),
                            "{v:?} {want}"
                        );
                        // after it, the byte that a carry would reach
                        if at + 1 < v.len() {
                            v[at + 1] = v[at + 1].to_ascii_uppercase();
                            assert!(!same_name(&v, want), "{v:?} {want}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn span_lists_are_kept_for_the_next_head() {
        let mut spans = take_spans();
        spans.push([0; 4]);
        let at = spans.as_ptr();
        drop(Fields::new(Bytes::new(), spans));
        let again = take_spans();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), at, "the same list, emptied");
    }
}
