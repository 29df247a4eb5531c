//! Request and response heads, and body decoding at every split.

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Method};

use crate::fields::Fields;

use super::super::H1Error;
use super::super::decode::{Decoder, Step};
use super::super::head::{
    BodyFraming, Parsed, ReqFraming, ReqHead, parse_response, write_request_head,
};

// ---- heads

pub(super) fn keep_all(_: &[u8]) -> bool {
    true
}

fn header_map(headers: &[(&str, &str)]) -> Fields {
    Fields::from_pairs(headers)
}

fn head(method: &Method, headers: &[(&str, &str)], exact: Option<u64>) -> (String, ReqFraming) {
    let map = header_map(headers);
    let head = ReqHead {
        method,
        prefix: "",
        path: b"/v1/chat?x=1",
        host: None,
        headers: &map,
        forward: keep_all,
        length: None,
    };
    let mut out = Vec::new();
    let framing = write_request_head(&mut out, &head, exact).unwrap();
    (String::from_utf8(out).unwrap(), framing)
}

#[test]
fn the_request_head_carries_the_framing() {
    let (h, f) = head(&Method::POST, &[("a", "1"), ("content-length", "12")], None);
    assert_eq!(
        h,
        "POST /v1/chat?x=1 HTTP/1.1\r\na: 1\r\ncontent-length: 12\r\n\r\n"
    );
    assert_eq!(f, ReqFraming::Length(12));
    let (h, f) = head(&Method::POST, &[("a", "1")], Some(1234));
    assert!(h.ends_with("a: 1\r\ncontent-length: 1234\r\n\r\n"), "{h}");
    assert_eq!(f, ReqFraming::Length(1234));
    // a client's transfer-encoding is not passed on; unknown length goes chunked
    let (h, f) = head(&Method::POST, &[("transfer-encoding", "chunked")], None);
    assert_eq!(
        h,
        "POST /v1/chat?x=1 HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    assert_eq!(f, ReqFraming::Chunked);
    let (h, f) = head(&Method::GET, &[], Some(0));
    assert_eq!(h, "GET /v1/chat?x=1 HTTP/1.1\r\n\r\n");
    assert_eq!(f, ReqFraming::Length(0));
    let (h, _) = head(&Method::POST, &[], Some(0));
    assert!(h.ends_with("content-length: 0\r\n\r\n"), "{h}");
    let map = header_map(&[("content-length", "1"), ("content-length", "2")]);
    let conflicting = ReqHead {
        method: &Method::POST,
        prefix: "",
        path: b"/",
        host: None,
        headers: &map,
        forward: keep_all,
        length: None,
    };
    let err = write_request_head(&mut Vec::new(), &conflicting, None);
    assert!(err.is_err(), "conflicting lengths are refused");
}

#[test]
fn the_request_head_is_the_workers() {
    let map = header_map(&[
        ("host", "gateway"),
        ("connection", "keep-alive, x-private"),
        ("x-private", "1"),
        ("x-dropped", "1"),
        ("content-length", "3"),
        ("authorization", "Bearer t"),
    ]);
    let host = HeaderValue::from_static("worker:8000");
    let head = ReqHead {
        method: &Method::POST,
        prefix: "/base",
        path: b"/v1/chat",
        host: Some(&host),
        headers: &map,
        forward: |n| n != b"x-dropped" && n != b"connection",
        // the body was rewritten (a data-parallel rank): its length replaces the client's
        length: Some(17),
    };
    let mut out = Vec::new();
    let framing = write_request_head(&mut out, &head, Some(17)).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "POST /base/v1/chat HTTP/1.1\r\nhost: worker:8000\r\nauthorization: Bearer t\r\ncontent-length: 17\r\n\r\n"
    );
    assert_eq!(framing, ReqFraming::Length(17));
}

fn parsed(raw: &str, method: &Method) -> Result<Parsed, H1Error> {
    parse_response(&mut BytesMut::from(raw.as_bytes()), method)
}

fn final_head(raw: &str, method: &Method) -> super::super::head::ResponseHead {
    let mut buf = BytesMut::from(raw.as_bytes());
    match parse_response(&mut buf, method).unwrap() {
        Parsed::Head(h) => {
            assert!(buf.is_empty(), "the head was taken off");
            h
        }
        other => panic!("not a final head: {other:?}"),
    }
}

#[test]
fn response_heads_give_their_framing_and_keep_alive() {
    let get = Method::GET;
    let h = final_head(
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b c\r\n\r\n",
        &get,
    );
    assert_eq!(h.status, 200);
    assert_eq!(h.framing, BodyFraming::Length(5));
    assert!(h.keep_alive);
    assert_eq!(h.fields.to_map()["x-a"], "b c");
    let h = final_head(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        &get,
    );
    assert_eq!(h.framing, BodyFraming::Chunked);
    assert!(h.keep_alive);
    let h = final_head(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        &get,
    );
    assert_eq!(h.framing, BodyFraming::Close);
    assert!(!h.keep_alive);
    let h = final_head("HTTP/1.1 200 OK\r\n\r\n", &get);
    assert_eq!(h.framing, BodyFraming::Close);
    assert!(!h.keep_alive);
    let h = final_head(
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n",
        &get,
    );
    assert!(!h.keep_alive);
    let h = final_head("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", &get);
    assert!(!h.keep_alive);
    let h = final_head(
        "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive\r\n\r\n",
        &get,
    );
    assert!(h.keep_alive);
    // a length and chunked together: chunked wins, the connection is not reused
    let h = final_head(
        "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n",
        &get,
    );
    assert_eq!(h.framing, BodyFraming::Chunked);
    assert!(!h.keep_alive);
}

#[test]
fn heads_without_a_body() {
    let h = final_head(
        "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n",
        &Method::HEAD,
    );
    assert_eq!(h.framing, BodyFraming::Empty);
    assert_eq!(
        h.fields.to_map()["content-length"],
        "50",
        "kept for the client"
    );
    for status in ["204 No Content", "304 Not Modified"] {
        let raw = format!("HTTP/1.1 {status}\r\nContent-Length: 7\r\n\r\n");
        assert_eq!(final_head(&raw, &Method::GET).framing, BodyFraming::Empty);
    }
}

#[test]
fn partial_informational_and_refused_heads() {
    let get = Method::GET;
    assert!(matches!(
        parsed("HTTP/1.1 200 OK\r\nContent-Le", &get),
        Ok(Parsed::Partial)
    ));
    let mut buf = BytesMut::from(&b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"[..]);
    let p = parse_response(&mut buf, &get).unwrap();
    assert!(matches!(p, Parsed::Informational), "{p:?}");
    assert_eq!(buf, b"HTTP/1.1 200 OK\r\n"[..], "skipped");
    assert!(parsed("HTTP/1.1 101 Switching Protocols\r\n\r\n", &get).is_err());
    assert!(
        parsed(
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            &get
        )
        .is_err()
    );
    assert!(parsed("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", &get).is_err());
    assert!(
        parsed(
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            &get
        )
        .is_ok()
    );
    assert!(parsed("SMTP ready\r\n\r\n", &get).is_err());
}

// ---- bodies

/// Decodes `wire` fed `step` bytes at a time; the data and whether the body ended.
fn decode_in_steps(
    framing: BodyFraming,
    wire: &[u8],
    step: usize,
) -> Result<(Vec<u8>, bool), H1Error> {
    let mut d = Decoder::new(framing);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in wire.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match d.decode(&mut buf)? {
                Step::Data(b) => out.extend_from_slice(&b),
                Step::More => break,
                Step::End => return Ok((out, true)),
            }
        }
    }
    Ok((out, d.is_done()))
}

pub(super) const CHUNKED: &[u8] =
    b"5;ext=1\r\nhello\r\n19\r\n, a chunk of 25 bytes....\r\n0\r\nx-trailer: 1\r\n\r\n";

#[test]
fn chunked_bodies_decode_at_every_split() {
    for step in 1..=CHUNKED.len() {
        let (data, ended) = decode_in_steps(BodyFraming::Chunked, CHUNKED, step).unwrap();
        assert_eq!(data, b"hello, a chunk of 25 bytes....", "step {step}");
        assert!(ended, "step {step}");
    }
}

#[test]
fn length_and_close_delimited_bodies() {
    for step in 1..=11 {
        let (data, ended) = decode_in_steps(BodyFraming::Length(11), b"hello world", step).unwrap();
        assert_eq!(data, b"hello world");
        assert!(ended);
    }
    let (data, ended) = decode_in_steps(BodyFraming::Length(5), b"hel", 2).unwrap();
    assert_eq!((data.as_slice(), ended), (&b"hel"[..], false));
    let mut d = Decoder::new(BodyFraming::Length(5));
    assert!(d.at_eof().is_err(), "closed mid-body");
    let mut d = Decoder::new(BodyFraming::Close);
    let mut buf = BytesMut::from(&b"all of it"[..]);
    assert_eq!(
        d.decode(&mut buf).unwrap(),
        Step::Data(Bytes::from_static(b"all of it"))
    );
    assert_eq!(d.decode(&mut buf).unwrap(), Step::More);
    assert_eq!(d.at_eof().unwrap(), Step::End);
    assert!(Decoder::new(BodyFraming::Empty).is_done());
    assert!(Decoder::new(BodyFraming::Length(0)).is_done());
}

#[test]
fn bad_chunked_bodies_are_errors() {
    for wire in [
        &b"zz\r\nhello\r\n0\r\n\r\n"[..],
        b"5\r\nhelloXX0\r\n\r\n",
        b"5\r\nhello\n0\r\n\r\n",
        b"fffffffffffffffff\r\n",
        b"\r\n",
    ] {
        assert!(
            decode_in_steps(BodyFraming::Chunked, wire, 64).is_err(),
            "{}",
            String::from_utf8_lossy(wire)
        );
    }
    let long = vec![b'1'; 5000];
    assert!(
        decode_in_steps(BodyFraming::Chunked, &long, 64).is_err(),
        "size line bounded"
    );
    let mut d = Decoder::new(BodyFraming::Chunked);
    assert!(d.at_eof().is_err(), "closed mid-body");
}
