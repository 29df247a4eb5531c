use std::mem::MaybeUninit;

use proptest::prelude::*;

use super::*;
use crate::fields::header_spans;

const MAX: usize = 8;

/// A head as the plain readers and as httparse read it: (end, method, target, minor, spans).
type Read = (usize, Range<usize>, Range<usize>, u8, Vec<Span>);

fn plain_request(head: &[u8]) -> Option<Read> {
    let line = request_line(head)?;
    let mut spans = Vec::new();
    let mut read = head.to_vec();
    let end = fields(&mut read, line.end, MAX, &mut spans)?;
    assert_lowered(head, &read, &spans);
    Some((end, line.method, line.target, line.minor, spans))
}

/// `read` is `head` with the names at `spans` lowercased, every other byte as it was.
fn assert_lowered(head: &[u8], read: &[u8], spans: &[Span]) {
    let mut want = head.to_vec();
    for &[ns, ne, _, _] in spans {
        want[ns..ne].make_ascii_lowercase();
    }
    assert_eq!(
        read.escape_ascii().to_string(),
        want.escape_ascii().to_string()
    );
}

fn at(head: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - head.as_ptr() as usize;
    start..start + part.len()
}

/// httparse's answer: `Some` when the head is whole and valid.
fn httparse_request(head: &[u8]) -> Option<Read> {
    let mut slots = [const { MaybeUninit::uninit() }; MAX];
    let mut req = httparse::Request::new(&mut []);
    let httparse::Status::Complete(end) = req.parse_with_uninit_headers(head, &mut slots).ok()?
    else {
        return None;
    };
    let method = at(head, req.method?.as_bytes());
    let target = at(head, req.path?.as_bytes());
    let spans = header_spans(head, req.headers).collect();
    Some((end, method, target, req.version?, spans))
}

fn plain_response(head: &[u8]) -> Option<(usize, u8, u16, Vec<Span>)> {
    let (minor, code, start) = status_line(head)?;
    let mut spans = Vec::new();
    let mut read = head.to_vec();
    let end = fields(&mut read, start, MAX, &mut spans)?;
    assert_lowered(head, &read, &spans);
    Some((end, minor, code, spans))
}

fn httparse_response(head: &[u8]) -> Option<(usize, u8, u16, Vec<Span>)> {
    let mut slots = [const { MaybeUninit::uninit() }; MAX];
    let mut res = httparse::Response::new(&mut []);
    let httparse::Status::Complete(end) = httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut res, head, &mut slots)
        .ok()?
    else {
        return None;
    };
    let spans = header_spans(head, res.headers).collect();
    Some((end, res.version?, res.code?, spans))
}

const REQUEST: &[u8] = b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\
Content-Type: application/json\r\nX-SMG-Routing-Key: session-12\r\nContent-Length: 84\r\n\r\n{}";
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\n\
Date: Thu, 03 Dec 2026 11:35:00 GMT\r\nContent-Type: application/json\r\n\
Content-Length: 129\r\nConnection: keep-alive\r\n\r\n{\"id\"";

#[test]
fn the_common_heads_are_read_plainly_as_httparse_reads_them() {
    let read = plain_request(REQUEST).expect("plain");
    assert_eq!(Some(&read), httparse_request(REQUEST).as_ref());
    assert_eq!(&REQUEST[read.1.clone()], b"POST");
    assert_eq!(&REQUEST[read.2.clone()], b"/v1/chat/completions?x=1");
    assert_eq!(read.4.len(), 4);
    assert_eq!(&REQUEST[read.0..], b"{}");
    let read = plain_response(RESPONSE).expect("plain");
    assert_eq!(Some(&read), httparse_response(RESPONSE).as_ref());
    assert_eq!((read.1, read.2, read.3.len()), (1, 200, 5));
    // spaces after the colon and after the value, a value with obs-text, no reason, HTTP/1.0
    let odd = b"GET / HTTP/1.0\r\nA:b\r\nC:   d e  \r\nE: \xff\x80x\r\n\r\n";
    assert!(plain_request(odd).is_some());
    assert_eq!(plain_request(odd), httparse_request(odd));
    let odd = b"HTTP/1.0 404 \r\nA:b\r\n\r\n";
    assert!(plain_response(odd).is_some());
    assert_eq!(plain_response(odd), httparse_response(odd));
}

#[test]
fn what_is_not_plain_is_left_to_httparse() {
    for head in [
        &b"GET / HTTP/1.1\r\nA:\tb\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nA: b\tc\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: \r\n\r\n",
        b"GET / HTTP/1.1\nA: b\n\n",
        b"GET / HTTP/1.1\r\nA : b\r\n\r\n",
        b"\r\nGET / HTTP/1.1\r\n\r\n",
        b"GET /\xc3\xa9 HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: b\r\n",
        b"GET / HTTP/1.1\r\nA: b\r\n\r",
    ] {
        assert_eq!(plain_request(head), None, "{}", head.escape_ascii());
    }
    // one field more than the caller's bound: httparse refuses the head
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for _ in 0..=MAX {
        many.extend_from_slice(b"A: b\r\n");
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(plain_request(&many), None);
    assert_eq!(httparse_request(&many), None);
    for head in [
        &b"HTTP/1.1 200\r\n\r\n"[..],
        b"HTTP/1.1 200 O\tK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/2.0 200 OK\r\n\r\n",
    ] {
        assert_eq!(plain_response(head), None, "{}", head.escape_ascii());
    }
}

#[test]
fn stops_are_exact_per_byte() {
    for b in 0..=255u8 {
        for place in 0..8 {
            let mut w = [b'a'; 8];
            w[place] = b;
            let w = u64::from_le_bytes(w);
            let name = !(b.is_ascii_alphanumeric() || b == b'-');
            assert_eq!(name_stops(w) != 0, name, "{b:#x}");
            if name {
                assert_eq!(name_stops(w).trailing_zeros() / 8, place as u32);
            }
            let value = b < 0x20 || b == 0x7f;
            let target = !(0x21..=0x7e).contains(&b);
            assert_eq!(value_stops(w) != 0, value, "{b:#x}");
            assert_eq!(target_stops(w) != 0, target, "{b:#x}");
            if value {
                assert_eq!(value_stops(w).trailing_zeros() / 8, place as u32);
            }
            if target {
                assert_eq!(target_stops(w).trailing_zeros() / 8, place as u32);
            }
        }
    }
}

#[test]
fn the_first_stop_is_exact_whatever_follows() {
    let first = |w: [u8; 8], stop: fn(u8) -> bool| w.iter().position(|&b| stop(b));
    let found = |m: u64| (m != 0).then_some((m.trailing_zeros() / 8) as usize);
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            let mut w = [b'a'; 8];
            w[3] = a;
            w[4] = b;
            let word = u64::from_le_bytes(w);
            assert_eq!(
                found(name_stops(word)),
                first(w, |b| !(b.is_ascii_alphanumeric() || b == b'-'))
            );
            assert_eq!(
                found(value_stops(word)),
                first(w, |b| b < 0x20 || b == 0x7f)
            );
            assert_eq!(
                found(target_stops(word)),
                first(w, |b| !(0x21..=0x7e).contains(&b))
            );
        }
    }
}

/// Bytes a head's pieces are drawn from: the ones the readers and httparse treat apart.
fn piece(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            8 => proptest::sample::select(b"aZ09-_.~/?=%".to_vec()),
            1 => proptest::sample::select(
                b" \t:\r\n\x00\x1f\x7f\x80\xc3\xa9\xff\"(@;,".to_vec()
            ),
        ],
        0..max,
    )
}

/// A header line's name, colon (and spaces), value and line end.
type Field = (Vec<u8>, &'static [u8], Vec<u8>, &'static [u8]);

fn head_of(line: &[u8], fields: &[Field], end: &[u8], cut: usize) -> Vec<u8> {
    let mut head = line.to_vec();
    for (name, colon, value, eol) in fields {
        head.extend_from_slice(name);
        head.extend_from_slice(colon);
        head.extend_from_slice(value);
        head.extend_from_slice(eol);
    }
    head.extend_from_slice(end);
    head.extend_from_slice(b"body");
    let keep = head.len() - cut.min(head.len());
    head.truncate(keep);
    head
}

fn field() -> impl Strategy<Value = Field> {
    (
        piece(12),
        proptest::sample::select(vec![&b": "[..], b":", b":  ", b":\t", b" :", b": \t"]),
        piece(20),
        proptest::sample::select(vec![&b"\r\n"[..], b"\r\n", b"\n", b"\r", b" \r\n"]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Whatever the head, a plain read is httparse's read: same end, method, target, version
    /// and spans (heads httparse refuses or finds partial are never read plainly).
    #[test]
    fn a_plain_request_is_read_as_httparse_reads_it(
        method in prop_oneof![Just(b"POST".to_vec()), Just(b"GET".to_vec()), piece(6)],
        target in prop_oneof![Just(b"/v1/chat/completions".to_vec()), piece(30)],
        version in proptest::sample::select(vec![&b" HTTP/1.1\r\n"[..], b" HTTP/1.0\r\n",
            b" HTTP/1.1\n", b" HTTP/2.0\r\n", b"  HTTP/1.1\r\n", b" HTTP/1.1 \r\n"]),
        fields in proptest::collection::vec(field(), 0..MAX + 2),
        end in proptest::sample::select(vec![&b"\r\n"[..], b"\n", b"\r", b""]),
        cut in prop_oneof![3 => Just(0usize), 1 => 0usize..40],
    ) {
        let mut line = method;
        line.push(b' ');
        line.extend_from_slice(&target);
        line.extend_from_slice(version);
        let head = head_of(&line, &fields, end, cut);
        if let Some(read) = plain_request(&head) {
            prop_assert_eq!(Some(read), httparse_request(&head));
        }
    }

    /// The same for a response head.
    #[test]
    fn a_plain_response_is_read_as_httparse_reads_it(
        version in proptest::sample::select(vec![&b"HTTP/1.1 "[..], b"HTTP/1.0 ", b"HTTP/1.1  "]),
        code in prop_oneof![Just(b"200".to_vec()), piece(4)],
        reason in prop_oneof![Just(b" OK\r\n".to_vec()), piece(10)],
        fields in proptest::collection::vec(field(), 0..MAX + 2),
        end in proptest::sample::select(vec![&b"\r\n"[..], b"\n", b""]),
        cut in prop_oneof![3 => Just(0usize), 1 => 0usize..40],
    ) {
        let mut line = version.to_vec();
        line.extend_from_slice(&code);
        line.extend_from_slice(&reason);
        let head = head_of(&line, &fields, end, cut);
        if let Some(read) = plain_response(&head) {
            prop_assert_eq!(Some(read), httparse_response(&head));
        }
    }

    /// A valid head with one byte changed: still read as httparse reads it, or left to it.
    #[test]
    fn a_changed_byte_never_makes_a_plain_read_differ(
        response in any::<bool>(),
        place in 0usize..300,
        byte in any::<u8>(),
    ) {
        let mut head = if response { RESPONSE.to_vec() } else { REQUEST.to_vec() };
        let place = place % head.len();
        head[place] = byte;
        if response {
            if let Some(read) = plain_response(&head) {
                prop_assert_eq!(Some(read), httparse_response(&head));
            }
        } else if let Some(read) = plain_request(&head) {
            prop_assert_eq!(Some(read), httparse_request(&head));
        }
    }
}
