//! Stage 2 of a proxied request: route it.
//!
//! [`RouteFacts`] is what the core may know about the request, borrowed from the inspected
//! request; the same facts route the regular request and, in PD mode, each of its two legs (on
//! the leg's own router and worker view, with the leg in the request so pins stay apart).

use super::Endpoint;
use super::held::ClientHead;
use super::inspect::Inspected;
use crate::error::GatewayError;
use crate::fields::Fields;
use crate::metrics::LegBranchLabels;
use crate::registry::{View, Worker};
use crate::routing::{
    BodyKeys, Branch, Decision, Error as RouteError, Leg, RouteRequest, Router, WorkerId,
};
use crate::state::AppState;

/// The facts of one request that routing may use.
pub(crate) struct RouteFacts<'a> {
    headers: &'a Fields,
    rid: Option<&'a str>,
    body: Option<&'a BodyKeys>,
    /// The model the request names, or the fleet's only model.
    pub(crate) model: Option<&'a str>,
    prefix: Option<&'a crate::routing::policy::PrefixHashes>,
    tokens: Option<&'a [u32]>,
    stream: Option<bool>,
    /// The body was read only for cached-token feedback.
    feedback_read: bool,
}

impl<'a> RouteFacts<'a> {
    pub(crate) fn new(
        endpoint: Endpoint,
        parts: &'a ClientHead,
        inspected: &'a Inspected,
        tokens: Option<&'a [u32]>,
        (inspect_body, feedback_read): (bool, bool),
        view: &'a View,
    ) -> Self {
        Self {
            headers: &parts.fields,
            rid: inspected.rid.as_deref().filter(|_| endpoint.reads_rid()),
            body: inspected.keys.as_deref(),
            model: inspected
                .model
                .as_deref()
                .or(view.snapshot.only_model().map(|m| &**m)),
            prefix: inspected.prefix.as_deref(),
            tokens,
            stream: inspect_body.then_some(inspected.stream),
            feedback_read,
        }
    }

    /// One decision for `leg` on `router` over `view`, treating `exclude` as unavailable.
    pub(crate) fn route(
        &self,
        state: &AppState,
        router: &Router,
        leg: Leg,
        view: &View,
        exclude: &[WorkerId],
    ) -> Result<Decision, RouteError> {
        let loads = state.registry.loads();
        let req = RouteRequest {
            rid: self.rid,
            headers: self.headers,
            body: self.body,
            model: self.model,
            leg,
            text: None,
            tokens: self.tokens,
            prefix: self.prefix,
            exclude,
            stream: self.stream,
            loads: loads.as_deref(),
            feedback_read: self.feedback_read,
        };
        let now = state.clock.now();
        state
            .routing_rng
            .with(|rng| router.route(&req, &view.snapshot, now, rng))
    }
}

/// A routing refusal as the gateway's error (counting `no_healthy_workers` for a pin-keeping
/// router).
pub(crate) fn route_error(state: &AppState, router: &Router, e: RouteError) -> GatewayError {
    match e {
        RouteError::MissingRoutingKey => GatewayError::MissingRoutingKey {
            policy: router.policy().as_str(),
        },
        RouteError::NoAvailableWorkers => {
            // A pin-keeping router reports every decision's branch, refusals included.
            if router.keeps_pins() {
                state.metrics.count_branch(Branch::NoHealthyWorkers);
            }
            GatewayError::NoAvailableWorkers
        }
        RouteError::WorkerOverloadShed => GatewayError::WorkerOverloadShed {
            retry_after_secs: state.config.load_monitor.interval.as_secs().max(1),
        },
        RouteError::Config { .. } => GatewayError::Config(e.to_string()),
    }
}

/// Counts a decision's branch and key source, and logs a keyed decision.
pub(crate) fn record_decision(
    state: &AppState,
    d: &Decision,
    worker: &Worker,
    leg: Leg,
    model: Option<&str>,
) {
    // Every decision of a pin-keeping router has a branch, keyless ones (`no_routing_id`)
    // included.
    let branch = d.branch.map(|b| b.as_str());
    if let Some(b) = d.branch {
        state.metrics.count_branch(b);
    }
    if let Some(branch) = branch
        && leg != Leg::Regular
    {
        state
            .metrics
            .pd_branch
            .get_or_create(&LegBranchLabels {
                leg: leg_name(leg),
                branch,
            })
            .inc();
    }
    if let Some(key) = &d.key {
        state.metrics.count_key_source(key.source);
        tracing::debug!(
            source = key.source.as_str(),
            key = %key.key,
            branch = branch.unwrap_or("policy"),
            worker = %worker.url,
            leg = leg_name(leg),
            model = model.unwrap_or(""),
            "Sticky routing decision"
        );
    }
}

/// The leg as a log field and metric label.
pub(crate) fn leg_name(leg: Leg) -> &'static str {
    match leg {
        Leg::Regular => "regular",
        Leg::Prefill => "prefill",
        Leg::Decode => "decode",
    }
}
