//! A message's header fields kept as the bytes of its head and where each name and value lies
//! (the spans httparse found): no header map is built for a head that is only read a little
//! and passed on. A worker's response head goes back to the client this way: the proxy drops
//! the hop-by-hop fields (`retain`), reads `content-type` (`first`), and the client side writes
//! what is left beside the gateway's own headers. Tests that need a map build one
//! (`Fields::to_map`).

use std::cell::RefCell;

use bytes::Bytes;

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
/// are as the sender wrote them (any case); httparse validated both.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    head: Bytes,
    spans: Vec<Span>,
}

impl Fields {
    /// The fields of `head` that lie at `spans`.
    pub(crate) fn new(head: Bytes, spans: Vec<Span>) -> Self {
        Self { head, spans }
    }

    /// The fields in order: name (as sent) and value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans
            .iter()
            .map(|&[ns, ne, vs, ve]| (&self.head[ns..ne], &self.head[vs..ve]))
    }

    /// The first value of the field `lowercase_name` (names compared without case).
    pub(crate) fn first(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(name, _)| same_name(name, lowercase_name))
            .map(|(_, value)| value)
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

    /// The fields as a header map (names lowercased), for a component that needs one.
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

/// Whether `name` (any case) is `lowercase_name`.
pub(crate) fn same_name(name: &[u8], lowercase_name: &str) -> bool {
    name.len() == lowercase_name.len() && name.eq_ignore_ascii_case(lowercase_name.as_bytes())
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
