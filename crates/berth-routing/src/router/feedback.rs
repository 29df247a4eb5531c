//! The router's side of cached-token feedback (`policy/feedback.rs`): the ticket each decision's
//! lease carries, and the answer's report compared with it.

use std::cell::OnceCell;

use super::Router;
use crate::decision::Lease;
use crate::policy::feedback::Expectation;
use crate::policy::{Observation, PrefixHashes, Prior, Report, Ticket};
use crate::worker::{WorkerId, WorkerSnapshot};

impl Router {
    /// Whether answers are read for their reported cached tokens (`--cache-feedback` not
    /// `off`, and a policy with a prefix index).
    pub fn reads_reports(&self) -> bool {
        self.feedback.reads()
    }

    /// Compares an answer's reported cached tokens with what was predicted for its worker
    /// (the ticket its lease carried) and, under `--cache-feedback on`, corrects the prefix
    /// index and the worker's effective KV estimate. `None`: nothing to compare with.
    pub fn observe_reported(
        &self,
        ticket: Ticket,
        report: Report,
        snap: &WorkerSnapshot,
    ) -> Option<Observation> {
        // `agentic` sizes its typical turn by the continuing turns the engines report: a
        // pinned session's turn without the index's prediction streamed unread (what it added
        // to the prompt its previous answer on that worker reported, read before this answer
        // replaces it)
        if let (None, Some(key), Some(prompt), Some(t)) = (
            &ticket.expectation,
            ticket.session,
            report.prompt_tokens,
            self.policy.ttft(),
        ) {
            let previous = self.feedback.previous_prompt(key, ticket.worker);
            t.observe_continuing_turn(prompt, report.cached_tokens, previous);
        }
        self.feedback.observe(&self.policy, ticket, report, snap)
    }

    /// The ticket of a decision for `worker`: the index's prediction (from `prior`, when the
    /// policy left one) and the pinned session's key.
    pub(super) fn ticket(
        &self,
        prior: Option<OnceCell<Prior>>,
        prefix: Option<&PrefixHashes>,
        tokens_hint: bool,
        worker: WorkerId,
        lease: &Lease,
    ) -> Option<Ticket> {
        if !self.feedback.reads() {
            return None;
        }
        let expectation =
            prior
                .and_then(OnceCell::into_inner)
                .zip(prefix)
                .map(|(prior, hashes)| Expectation {
                    worker,
                    hashes: hashes.clone(),
                    prior,
                    bytes_per_token: if tokens_hint {
                        4.0
                    } else {
                        self.cfg.ttft.chars_per_token
                    },
                });
        let session = lease.pin_key();
        (expectation.is_some() || session.is_some()).then_some(Ticket {
            worker,
            expectation,
            session,
        })
    }
}
