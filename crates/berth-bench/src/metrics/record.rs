//! One record per request attempt.

use serde::Serialize;
use serde_json::Value;

/// The exact headers and body sent (`--export-level raw`).
#[derive(Debug, Clone, Serialize)]
pub struct RawRequest {
    /// Header name/value pairs, in the order added (content type and host not included).
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
}

/// One request attempt as measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestRecord {
    /// Order in which requests were sent (0-based).
    pub seq: u64,
    /// The session's id.
    pub session_id: String,
    /// The parent session's id (children only).
    pub parent_id: Option<String>,
    /// The tree root's id.
    pub root_id: String,
    /// Depth in the agent tree (0 for roots).
    pub depth: u32,
    /// Zero-based turn index within the session.
    pub turn_index: u32,
    /// Zero on the first attempt, `k` on the `k`-th retry.
    pub retry: u32,
    /// Among the first `--warmup-requests` sent: excluded from every figure.
    pub warmup: bool,
    /// Send time, ms since the run started.
    pub start_ms: f64,
    /// Time to first token, ms (streamed requests that produced text).
    pub ttft_ms: Option<f64>,
    /// Mean inter-token latency of this request, ms.
    pub itl_ms: Option<f64>,
    /// End-to-end latency, ms.
    pub e2e_ms: f64,
    /// HTTP status, if a response arrived.
    pub status: Option<u16>,
    /// Whether the request succeeded.
    pub ok: bool,
    /// Error code (`x-smg-error-code`, the body's `error.code`, or `transport`).
    pub error_code: Option<String>,
    /// Error message.
    pub error_message: Option<String>,
    /// Prompt tokens as reported by the server.
    pub prompt_tokens: Option<u64>,
    /// Cached prompt tokens as reported by the server.
    pub cached_tokens: Option<u64>,
    /// Output tokens (reported, or the number of streamed text events).
    pub output_tokens: Option<u64>,
    /// `x-smg-routed-worker-id` of the response.
    pub routed_worker: Option<String>,
    /// `x-sim-worker-id` of the response.
    pub sim_worker: Option<String>,
    /// Prompt tokens as sent, counted as the simulated worker tokenizes (trace replay only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_prompt_tokens: Option<u64>,
    /// Of those, the tokens one unbounded prefix cache would have served (trace replay only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_cached_tokens: Option<u64>,
    /// What was sent, at `--export-level raw`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<RawRequest>,
}

impl RequestRecord {
    /// The worker that served the request: the gateway's routed id, or the worker's own id when
    /// the benchmark talks to a worker directly.
    pub fn worker(&self) -> Option<&str> {
        self.routed_worker.as_deref().or(self.sim_worker.as_deref())
    }

    /// When the request ended, ms since the run started.
    pub fn end_ms(&self) -> f64 {
        self.start_ms + self.e2e_ms
    }
}
