//! A worker that is healthy at start-up but whose `/v1/models` failed then is asked again
//! after its next good probe, so model-scoped requests can reach it.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use common::*;
use http::Response;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// `/health` always 200; `/v1/models` 500 for the first `fail_first` calls, then one model.
async fn late_models_worker(fail_first: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let calls = calls.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let calls = calls.clone();
                    async move {
                        let resp = match req.uri().path() {
                            "/v1/models" if calls.fetch_add(1, Ordering::SeqCst) < fail_first => {
                                Response::builder()
                                    .status(500)
                                    .body(Full::new(Bytes::from("{}")))
                                    .unwrap()
                            }
                            "/v1/models" => Response::new(Full::new(Bytes::from(
                                r#"{"object":"list","data":[{"id":"late-model"}]}"#,
                            ))),
                            _ => Response::new(Full::new(Bytes::from("ok"))),
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
    url
}

#[tokio::test]
async fn a_model_list_that_failed_at_start_up_is_fetched_again() {
    let url = late_models_worker(2).await;
    let mut c = berth_gateway::GatewayConfig::new(vec![url]);
    c.worker_startup_timeout = std::time::Duration::from_secs(5);
    c.health.interval = std::time::Duration::from_millis(50);
    c.health.failure_threshold = 1;
    c.health.success_threshold = 1;
    let g = start(c).await;
    eventually("the worker's model is learned after start-up", || async {
        let r = g.client.get("/v1/models", &[]).await;
        r.body.windows(10).any(|w| w == b"late-model")
    })
    .await;
    g.gw.shutdown().await;
}
