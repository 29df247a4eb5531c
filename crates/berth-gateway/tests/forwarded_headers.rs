//! What crosses the gateway in each direction, seen by a worker that records requests
//! and answers with hop-by-hop headers of its own.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};

use berth_gateway::routing::PolicyKind;
use bytes::Bytes;
use common::*;
use http::{HeaderMap, Response};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// A worker: `/health`, `/v1/models`, 404 for the load monitor's `/v1/loads`, and for anything else a 500 (when asked with
/// `x-fail`) or 200 with `Connection: x-hop` and `x-hop`, `keep-alive`, `x-end` headers.
async fn recording_worker() -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let record = record.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let record = record.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        let (parts, body) = req.into_parts();
                        let _ = body.collect().await;
                        let resp = match path.as_str() {
                            "/health" => Response::new(Full::new(Bytes::from("ok"))),
                            "/v1/models" => Response::new(Full::new(Bytes::from(
                                r#"{"data":[{"id":"sim-model"}]}"#,
                            ))),
                            // the gateway's load monitor polls these; not the requests under test
                            "/v1/loads" | "/get_load" => Response::builder()
                                .status(404)
                                .body(Full::new(Bytes::new()))
                                .unwrap(),
                            _ => {
                                let fail = parts.headers.contains_key("x-fail");
                                let own_code = parts.headers.contains_key("x-own-code");
                                record.lock().unwrap().push(parts.headers);
                                let mut b = Response::builder();
                                if own_code {
                                    // a gateway in front of the engines, refusing on its own
                                    b = b.status(429).header("x-smg-error-code", "queue_full");
                                }
                                b.status(if own_code {
                                    429
                                } else if fail {
                                    500
                                } else {
                                    200
                                })
                                .header("connection", "x-hop")
                                .header("x-hop", "secret")
                                .header("keep-alive", "timeout=5")
                                .header("x-end", "1")
                                .body(Full::new(Bytes::from("{}")))
                                .unwrap()
                            }
                        };
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (url, seen)
}

#[tokio::test]
async fn hop_by_hop_headers_stop_at_the_gateway_both_ways() {
    let (url, seen) = recording_worker().await;
    let mut c = berth_gateway::GatewayConfig::new(vec![url.clone()]);
    c.router.policy = PolicyKind::RoundRobin;
    c.retry_max_retries = 0;
    let g = start(c).await;
    let r = g
        .client
        .chat(
            &[
                ("connection", b"x-private"),
                ("x-private", b"1"),
                ("x-smg-routing-tokens", b"1,2,3"),
                ("x-smg-routing-key", b"k"),
                ("te", b"trailers"),
            ],
            chat_body(None),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.worker().as_deref(), Some(url.as_str()));
    assert!(!r.headers.contains_key("x-hop"), "{:?}", r.headers);
    assert!(!r.headers.contains_key("keep-alive"), "{:?}", r.headers);
    assert_eq!(r.headers["x-end"], "1");
    {
        let seen = seen.lock().unwrap();
        let h = seen.last().unwrap();
        assert_eq!(h["host"], url.trim_start_matches("http://"));
        assert_eq!(h["x-smg-routing-key"], "k");
        for gone in ["x-private", "x-smg-routing-tokens", "te"] {
            assert!(!h.contains_key(gone), "{gone} forwarded: {h:?}");
        }
    }
    // A worker's own error passes through with the worker named, and no gateway error code.
    let r = g.client.chat(&[("x-fail", b"1")], chat_body(None)).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.worker().as_deref(), Some(url.as_str()));
    assert!(r.error_code().is_none());
    assert!(!r.headers.contains_key("x-hop"));
    // A worker's own `x-smg-error-code` passes through, but is not counted as this gateway's.
    let r = g
        .client
        .chat(&[("x-own-code", b"1")], chat_body(None))
        .await;
    assert_eq!(r.status, 429);
    assert_eq!(r.error_code().as_deref(), Some("queue_full"));
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_http_responses_total{status_code="429",error_code="none"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            r#"smg_http_responses_total{status_code="429",error_code="queue_full"}"#
        ),
        None,
        "{m}"
    );
    g.gw.shutdown().await;
}
