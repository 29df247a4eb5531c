//! A tiny HTTP client for the integration tests: JSON requests and SSE parsing.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

pub(crate) type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub(crate) fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// SSE events as (event name, data) pairs.
    pub(crate) fn sse(&self) -> Vec<(Option<String>, String)> {
        parse_sse(&self.text())
    }
}

pub(crate) fn parse_sse(text: &str) -> Vec<(Option<String>, String)> {
    assert!(
        text.ends_with("\n\n"),
        "SSE stream must end with a blank line: {text:?}"
    );
    text.split("\n\n")
        .filter(|block| !block.is_empty())
        .map(|block| {
            let mut event = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    assert!(data.is_none(), "one data line per event");
                    data = Some(v.to_owned());
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            (event, data.expect("every event has data"))
        })
        .collect()
}

pub(crate) async fn request(
    client: &HttpClient,
    method: Method,
    url: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Result<Reply, String> {
    let mut builder = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let body = match body {
        Some(v) => {
            builder = builder.header("content-type", "application/json");
            Full::new(Bytes::from(serde_json::to_vec(v).unwrap()))
        }
        None => Full::new(Bytes::new()),
    };
    let resp = client
        .request(builder.body(body).unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

pub(crate) async fn post(client: &HttpClient, base: &str, path: &str, body: &Value) -> Reply {
    request(
        client,
        Method::POST,
        &format!("{base}{path}"),
        Some(body),
        &[],
    )
    .await
    .unwrap()
}

pub(crate) async fn get(client: &HttpClient, base: &str, path: &str) -> Reply {
    request(client, Method::GET, &format!("{base}{path}"), None, &[])
        .await
        .unwrap()
}
