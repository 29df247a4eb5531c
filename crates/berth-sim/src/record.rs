//! What the worker received: a bounded log of inference requests, so tests can see exactly what
//! a gateway forwarded (headers, `rid`, model, body).
//!
//! Bounded so a long benchmark cannot grow memory: the oldest records go first. Capacity 0 turns
//! recording off.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Map, Value, json};

/// One inference request as received.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// Arrival order on this worker, from 1.
    pub seq: u64,
    /// HTTP method.
    pub method: String,
    /// Request path (without query).
    pub path: String,
    /// Every request header, as received.
    pub headers: HeaderMap,
    /// The body's `rid` (for rerank, the first of a list), if any.
    pub rid: Option<String>,
    /// The body's `model`, if any.
    pub model: Option<String>,
    /// The raw request body.
    pub body: Bytes,
}

impl RequestRecord {
    /// The value of a header, if present and valid UTF-8 (names match case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The record as served by `GET /sim/requests`.
    pub fn to_json(&self) -> Value {
        let mut headers = Map::new();
        for (name, value) in &self.headers {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            match headers.get_mut(name.as_str()) {
                Some(Value::String(prev)) => {
                    prev.push_str(", ");
                    prev.push_str(&value);
                }
                _ => {
                    headers.insert(name.as_str().to_owned(), Value::String(value));
                }
            }
        }
        json!({
            "seq": self.seq,
            "method": self.method,
            "path": self.path,
            "headers": headers,
            "rid": self.rid,
            "model": self.model,
            "body": self.json().unwrap_or_else(|| Value::String(String::from_utf8_lossy(&self.body).into_owned())),
        })
    }
}

/// The bounded log.
#[derive(Debug)]
pub(crate) struct Recorder {
    capacity: usize,
    records: Mutex<VecDeque<RequestRecord>>,
}

impl Recorder {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            records: Mutex::new(VecDeque::new()),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    pub(crate) fn push(&self, record: RequestRecord) {
        if self.capacity == 0 {
            return;
        }
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if records.len() == self.capacity {
            records.pop_front();
        }
        records.push_back(record);
    }

    pub(crate) fn snapshot(&self) -> Vec<RequestRecord> {
        let records = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        records.iter().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}
