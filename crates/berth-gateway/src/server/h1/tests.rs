//! The client side's heads and response framing, pure (bytes in, bytes out). The connection's
//! rules over a real socket are in `tests/server_framing.rs`.

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Version};
use http_body_util::{Full, StreamBody};

use super::head::{Exchange, HeadError, Out, parse_request, write_response_head};
use super::write::{Sending, Writer};
use crate::upstream::h1::BodyFraming;

const HEAD: &str = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: gw\r\nX-Key: a b\r\nContent-Length: 12\r\n\r\n";

#[test]
fn a_head_split_at_every_point_parses_only_when_whole() {
    let wire = format!("{HEAD}hello world!");
    for at in 0..HEAD.len() {
        let mut buf = BytesMut::from(&wire.as_bytes()[..at]);
        assert!(parse_request(&mut buf).unwrap().is_none(), "at {at}");
        assert_eq!(buf.len(), at, "nothing taken before the head is whole");
    }
    let mut buf = BytesMut::from(wire.as_bytes());
    let head = parse_request(&mut buf).unwrap().unwrap();
    assert_eq!(head.method, Method::POST);
    assert_eq!(head.target.path(&head.fields), b"/v1/chat/completions");
    assert_eq!(head.target.query(&head.fields), Some(&b"x=1"[..]));
    assert!(
        matches!(head.target, crate::fields::Target::Plain { .. }),
        "the target is kept as the head's bytes, no Uri"
    );
    assert_eq!(head.version, Version::HTTP_11);
    assert_eq!(head.fields.to_map()["x-key"], "a b");
    assert_eq!(head.fields.to_map()["host"], "gw");
    assert_eq!(head.body, BodyFraming::Length(12));
    assert!(head.keep_alive && !head.expect_continue);
    assert_eq!(&buf[..], b"hello world!", "the body stays in the buffer");
}

#[test]
fn the_routing_key_name_is_the_one_from_bytes_makes() {
    for spelt in [
        "X-SMG-Routing-Key",
        "x-smg-routing-key",
        "X-Smg-Routing-KEY",
    ] {
        let head = parse(&format!("GET / HTTP/1.1\r\n{spelt}: k1\r\n\r\n")).unwrap();
        let map = head.fields.to_map();
        let (name, value) = map.iter().next().unwrap();
        assert_eq!(
            *name,
            http::HeaderName::from_bytes(spelt.as_bytes()).unwrap()
        );
        assert_eq!(name.as_str(), "x-smg-routing-key");
        assert_eq!(value, "k1");
    }
    // a longer or shorter name is its own
    let head =
        parse("GET / HTTP/1.1\r\nx-smg-routing-keys: a\r\nx-smg-routing-ke: b\r\n\r\n").unwrap();
    let map = head.fields.to_map();
    let names: Vec<&str> = map.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["x-smg-routing-keys", "x-smg-routing-ke"]);
}

#[test]
fn a_parsed_heads_names_are_written_lowercased_whether_read_plainly_or_by_httparse() {
    // the first is plain (its names lowercased as it is read), the tab makes the second httparse's
    for (raw, value) in [("X-Key: A", "A"), ("X-Key:\tA ", "A")] {
        let head = parse(&format!(
            "POST / HTTP/1.1\r\nHOST: gw\r\n{raw}\r\nContent-Length: 0\r\n\r\n"
        ))
        .unwrap();
        let mut out = Vec::new();
        head.fields.write_kept(&mut out, |_, _| true);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("host: gw\r\nx-key: {value}\r\ncontent-length: 0\r\n"),
            "{raw}"
        );
    }
}

fn parse(raw: &str) -> Result<super::head::Head, HeadError> {
    parse_request(&mut BytesMut::from(raw.as_bytes())).map(Option::unwrap)
}

#[test]
fn framing_keep_alive_and_expect_follow_the_head() {
    let h = parse("GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!((h.body, h.keep_alive), (BodyFraming::Length(0), true));
    let h = parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").unwrap();
    assert_eq!(h.body, BodyFraming::Chunked);
    let h = parse("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n").unwrap();
    assert!(!h.keep_alive);
    let h = parse("GET / HTTP/1.0\r\n\r\n").unwrap();
    assert!(!h.keep_alive);
    let h = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap();
    assert!(h.keep_alive);
    let h = parse("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n").unwrap();
    assert!(h.expect_continue);
    let h = parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").unwrap();
    assert!(!h.expect_continue, "HTTP/1.0 has no 100");
    // the same length twice is one length
    let h = parse("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n").unwrap();
    assert_eq!(h.body, BodyFraming::Length(3));
}

#[test]
fn uncertain_framing_and_bad_heads_are_refused() {
    for raw in [
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "G@T / HTTP/1.1\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
    ] {
        assert!(
            matches!(parse(raw), Err(HeadError::Bad(_))),
            "{raw:?}: {:?}",
            parse(raw)
        );
    }
    let many: String = (0..101).map(|i| format!("h{i}: v\r\n")).collect();
    assert!(matches!(
        parse(&format!("GET / HTTP/1.1\r\n{many}\r\n")),
        Err(HeadError::TooLarge(_))
    ));
    let long = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(70_000));
    assert!(matches!(parse(&long), Err(HeadError::TooLarge(_))));
}

const EX: Exchange = Exchange {
    head_request: false,
    version: Version::HTTP_11,
    keep_alive: true,
};

fn head(
    status: u16,
    headers: &[(&str, &str)],
    exact: Option<u64>,
    ex: Exchange,
) -> (String, Out, bool) {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let mut out = Vec::new();
    let (framing, keep) = write_response_head(
        &mut out,
        StatusCode::from_u16(status).unwrap(),
        &map,
        None,
        &[],
        exact,
        ex,
    );
    (String::from_utf8(out).unwrap(), framing, keep)
}

#[test]
fn a_workers_fields_go_out_lowercased_beside_the_gateways_own() {
    let worker = crate::fields::Fields::from_pairs(&[
        ("Content-Type", "text/event-stream"),
        ("X-Request-Id", "the-workers"),
        ("Date", "Tue, 01 Dec 2026 10:00:00 GMT"),
        ("Content-Length", "12"),
        ("Transfer-Encoding", "chunked"),
        ("X-Many", "1"),
        ("x-many", "2"),
        ("X-Smg-Routed-Worker-Id", "the-workers-own"),
    ]);
    let mut map = HeaderMap::new();
    map.insert("x-request-id", HeaderValue::from_static("the-gateways"));
    // the gateway's own header of a worker's response, beside the map
    let own: [(&str, &[u8]); 1] = [("x-smg-routed-worker-id", b"w")];
    let mut out = Vec::new();
    let (framing, keep) = write_response_head(
        &mut out,
        StatusCode::OK,
        &map,
        Some(&worker),
        &own,
        None,
        EX,
    );
    let h = String::from_utf8(out).unwrap();
    assert_eq!(
        h,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
         date: Tue, 01 Dec 2026 10:00:00 GMT\r\ncontent-length: 12\r\nx-many: 1\r\n\
         x-many: 2\r\nx-request-id: the-gateways\r\nx-smg-routed-worker-id: w\r\n\r\n"
    );
    assert_eq!((framing, keep), (Out::Length(12), true));
}

/// A worker's hop-by-hop fields are dropped as its head is written (no pass of their own):
/// its `Connection` is its own connection's (a `close` there keeps the client's open), and
/// the fields a `Connection` names go too.
#[test]
fn a_workers_hop_by_hop_fields_are_dropped_as_its_head_is_written() {
    let write = |pairs: &[(&str, &str)]| {
        let worker = crate::fields::Fields::from_pairs(pairs);
        let mut out = Vec::new();
        let (framing, keep) = write_response_head(
            &mut out,
            StatusCode::OK,
            &HeaderMap::new(),
            Some(&worker),
            &[("x-smg-routed-worker-id", b"w")],
            None,
            EX,
        );
        (String::from_utf8(out).unwrap(), framing, keep)
    };
    let (h, framing, keep) = write(&[
        ("Server", "nginx"),
        ("Date", "Tue, 01 Dec 2026 10:00:00 GMT"),
        ("Connection", "close"),
        ("Content-Type", "application/json"),
        ("Keep-Alive", "timeout=5"),
        ("TE", "trailers"),
        ("Trailer", "x-a"),
        ("Upgrade", "h2c"),
        ("Proxy-Connection", "keep-alive"),
        ("Proxy-Authenticate", "Basic"),
        ("Proxy-Authorization", "Basic"),
        ("Transfer-Encoding", "chunked"),
        ("Content-Length", "2"),
        ("X-End", "1"),
    ]);
    assert_eq!(
        h,
        "HTTP/1.1 200 OK\r\nserver: nginx\r\ndate: Tue, 01 Dec 2026 10:00:00 GMT\r\n\
         content-type: application/json\r\ncontent-length: 2\r\nx-end: 1\r\n\
         x-smg-routed-worker-id: w\r\n\r\n"
    );
    assert_eq!((framing, keep), (Out::Length(2), true));
    // a `Connection` naming fields, after them: the head is written again without them, its
    // length read once
    let (h, framing, keep) = write(&[
        ("X-Private", "1"),
        ("Content-Length", "3"),
        ("x-kept", "2"),
        ("Connection", "X-Private, close"),
    ]);
    assert!(
        h.starts_with(
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nx-kept: 2\r\n\
             x-smg-routed-worker-id: w\r\ndate: "
        ),
        "{h}"
    );
    assert!(!h.contains("x-private") && !h.contains("connection"), "{h}");
    assert_eq!((framing, keep), (Out::Length(3), true));
}

#[test]
fn the_response_head_frames_the_body_as_known() {
    let (h, f, k) = head(200, &[("x-a", "1")], Some(5), EX);
    assert!(h.starts_with("HTTP/1.1 200 OK\r\nx-a: 1\r\ndate: "), "{h}");
    assert!(h.ends_with("content-length: 5\r\n\r\n"), "{h}");
    assert_eq!((f, k), (Out::Length(5), true));
    // the handler's own length wins (once); transfer-encoding is the writer's
    let (h, f, _) = head(
        200,
        &[("content-length", "7"), ("transfer-encoding", "chunked")],
        None,
        EX,
    );
    assert_eq!(h.matches("content-length").count(), 1, "{h}");
    assert!(!h.contains("transfer-encoding"), "{h}");
    assert_eq!(f, Out::Length(7));
    let (h, f, k) = head(200, &[], None, EX);
    assert!(h.contains("transfer-encoding: chunked\r\n"), "{h}");
    assert_eq!((f, k), (Out::Chunked, true));
    // HTTP/1.0: no chunked, so the close ends the body
    let ten = Exchange {
        version: Version::HTTP_10,
        ..EX
    };
    let (h, f, k) = head(200, &[], None, ten);
    assert!(
        h.contains("connection: close\r\n") && !h.contains("chunked"),
        "{h}"
    );
    assert_eq!((f, k), (Out::Close, false));
    let (h, _, k) = head(200, &[], Some(1), ten);
    assert!(h.contains("connection: keep-alive\r\n"), "{h}");
    assert!(k);
    // no body: HEAD (its length still announced), 204, 304
    let (h, f, _) = head(
        200,
        &[],
        Some(9),
        Exchange {
            head_request: true,
            ..EX
        },
    );
    assert!(h.contains("content-length: 9"), "{h}");
    assert_eq!(f, Out::Empty);
    for s in [204, 304] {
        let (h, f, _) = head(s, &[], Some(0), EX);
        assert!(!h.contains("content-length"), "{h}");
        assert_eq!(f, Out::Empty);
    }
    // the handler's `Connection: close` ends the connection
    let (h, _, k) = head(200, &[("connection", "close")], Some(0), EX);
    assert_eq!(h.matches("connection").count(), 1, "{h}");
    assert!(!k);
}

async fn send<B>(framing: Out, mut body: B) -> Result<String, super::write::SendError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    let mut w = Writer::new(Vec::new());
    let mut sending = Sending::new(framing);
    std::future::poll_fn(|cx| sending.poll_send(&mut w, &mut body, cx)).await?;
    Ok(String::from_utf8(w.into_inner()).unwrap())
}

fn frames(
    parts: &[&'static str],
) -> impl http_body::Body<Data = Bytes, Error = std::io::Error> + Unpin {
    StreamBody::new(futures_util::stream::iter(
        parts
            .iter()
            .map(|p| Ok(http_body::Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect::<Vec<_>>(),
    ))
}

#[tokio::test]
async fn bodies_go_out_in_their_framing() {
    assert_eq!(
        send(Out::Chunked, frames(&["hello", "", "world!"]))
            .await
            .unwrap(),
        "5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n"
    );
    assert_eq!(
        send(Out::Length(5), Full::new(Bytes::from_static(b"hello")))
            .await
            .unwrap(),
        "hello"
    );
    assert_eq!(send(Out::Empty, frames(&["not sent"])).await.unwrap(), "");
    // a body that disagrees with its length breaks the transfer
    assert!(send(Out::Length(3), frames(&["toolong"])).await.is_err());
    assert!(send(Out::Length(9), frames(&["short"])).await.is_err());
}
