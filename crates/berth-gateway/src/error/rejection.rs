//! Admission control's refusal (re-exported by `admission`): defined with the error enum so the
//! one mapping to HTTP needs nothing above it.

/// Why a request was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectionKind {
    /// No permit free and the queue full (or `--queue-size 0`).
    QueueFull,
    /// Waited `--queue-timeout-secs` without a permit.
    QueueTimeout,
}

impl RejectionKind {
    /// The `reason` label and the error code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::QueueFull => "queue_full",
            Self::QueueTimeout => "queue_timeout",
        }
    }
}

/// A 429 from admission control, with what the message and `Retry-After` need.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    /// Full or timed out.
    pub kind: RejectionKind,
    /// Seconds after which a retry may be admitted (at least 1).
    pub retry_after_secs: u64,
    pub(crate) max_concurrent: Option<u32>,
    pub(crate) queue_size: usize,
    pub(crate) queue_timeout: std::time::Duration,
    pub(crate) rate: Option<f64>,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let limits = match (self.max_concurrent, self.rate) {
            (Some(max), Some(rate)) => format!(
                "{max} requests in progress (--max-concurrent-requests) or {rate}/s admitted \
                 (--rate-limit-tokens-per-second)"
            ),
            (Some(max), None) => format!("{max} requests in progress (--max-concurrent-requests)"),
            (None, Some(rate)) => format!("{rate}/s admitted (--rate-limit-tokens-per-second)"),
            (None, None) => "its limits".to_owned(),
        };
        match self.kind {
            RejectionKind::QueueFull => write!(
                f,
                "the gateway is at {limits} and its queue is full ({} waiting, --queue-size); \
                 retry after {} s",
                self.queue_size, self.retry_after_secs
            ),
            RejectionKind::QueueTimeout => write!(
                f,
                "the gateway is at {limits} and the request waited {} s in its queue \
                 (--queue-timeout-secs); retry after {} s",
                self.queue_timeout.as_secs(),
                self.retry_after_secs
            ),
        }
    }
}
