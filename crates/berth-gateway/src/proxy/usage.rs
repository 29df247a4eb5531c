//! Answers read for the cached tokens their worker reports (`--cache-feedback`): the last
//! bytes of the body are kept as they pass (`usage_scan.rs`: frame handles, no copy, no byte
//! held back), and when the body ends cleanly the report goes to the router with the ticket
//! the request's lease carried (what the prefix index predicted for that worker, and the
//! pinned session), and to the metrics (`metrics/feedback.rs`).
//!
//! Only a router that reads reports (`cache_aware`, `ttft_aware`, feedback not `off`) issues
//! tickets; every other response carries no watch and pays nothing. Streams report usage only
//! when the engine sends it: the OpenAI chunk that `stream_options.include_usage` asks for
//! (llama.cpp's server and berth's sim always send it; vLLM and SGLang when the client asks),
//! or SGLang's and llama.cpp's native final events. The gateway does not add
//! `include_usage` to a client's request: that would mean rewriting the request body and
//! removing an event from what the client receives (docs/gateway.md, "Cached-token feedback").

use std::sync::Arc;

use bytes::Bytes;

use crate::routing::policy::{Report, Ticket};
use crate::state::AppState;
use crate::usage_scan::UsageScan;

/// The watch a proxied answer's guard carries.
pub(crate) struct UsageWatch {
    scan: UsageScan,
    ticket: Ticket,
    state: Arc<AppState>,
    worker: Arc<str>,
}

impl std::fmt::Debug for UsageWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageWatch")
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl UsageWatch {
    pub(crate) fn new(state: &Arc<AppState>, ticket: Ticket, worker: Arc<str>) -> Self {
        Self {
            scan: UsageScan::default(),
            ticket,
            state: Arc::clone(state),
            worker,
        }
    }

    /// A frame on its way to the client.
    pub(crate) fn on_data(&mut self, data: &Bytes) {
        self.scan.feed(data);
    }

    /// The body ended cleanly: compare and learn.
    pub(crate) fn finish(self) {
        let metrics = &self.state.metrics.feedback;
        let Some(usage) = self.scan.finish() else {
            metrics.answer(&self.worker, None);
            return;
        };
        let report = Report {
            cached_tokens: usage.cached_tokens,
            prompt_tokens: usage.prompt_tokens,
        };
        let view = self.state.registry.view();
        let obs = self
            .state
            .router
            .observe_reported(self.ticket, report, &view.snapshot);
        if let Some(o) = &obs {
            tracing::debug!(
                target: "berth::feedback",
                worker = %self.worker,
                session = o.from_session,
                predicted = o.predicted_tokens,
                reported = o.reported_tokens,
                prompt = usage.prompt_tokens,
                verdict = o.verdict.as_str(),
                dropped = o.corrected_chunks,
                "cached tokens compared"
            );
        }
        metrics.answer(&self.worker, Some(obs.as_ref()));
    }
}
