//! The routing set-ups the demo compares, grouped into row sets that each run one workload.

use anyhow::Context;
use berth_bench::cli::Args as BenchArgs;
use berth_bench::{BenchConfig, RunOutput, execute};
use berth_gateway::routing::PolicyKind;

use super::Args;
use super::fleet::Fleet;
use super::workload::Workload;

/// One routing set-up: gateway policy and flags, and how the bench tells it the session.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scenario {
    /// Row label.
    pub(super) label: &'static str,
    /// `--policy`.
    pub(super) policy: &'static str,
    /// `--routing-key-override`.
    pub(super) routing_key_override: bool,
    /// `--session-routing` of the bench.
    pub(super) session_routing: &'static str,
    /// `--pd-disaggregation`: the fleet is 2 prefill + 2 decode workers, `policy` on both legs.
    pub(super) pd: bool,
}

/// The original rows, baseline first.
pub(super) const SCENARIOS: [Scenario; 7] = [
    Scenario {
        label: "round_robin",
        policy: "round_robin",
        routing_key_override: false,
        session_routing: "none",
        pd: false,
    },
    Scenario {
        label: "cache_aware",
        policy: "cache_aware",
        routing_key_override: false,
        session_routing: "none",
        pd: false,
    },
    Scenario {
        label: "cache_aware + override (rid)",
        policy: "cache_aware",
        routing_key_override: true,
        session_routing: "rid",
        pd: false,
    },
    Scenario {
        label: "manual",
        policy: "manual",
        routing_key_override: false,
        session_routing: "smg_routing_key",
        pd: false,
    },
    Scenario {
        label: "consistent_hashing",
        policy: "consistent_hashing",
        routing_key_override: false,
        session_routing: "smg_routing_key",
        pd: false,
    },
    // berth's own policy; it honours routing keys like manual.
    Scenario {
        label: "ttft_aware",
        policy: "ttft_aware",
        routing_key_override: false,
        session_routing: "smg_routing_key",
        pd: false,
    },
    // berth's recommendation for agentic traffic (issue #21): ttft_aware priced by sessions.
    Scenario {
        label: "agentic",
        policy: "agentic",
        routing_key_override: false,
        session_routing: "smg_routing_key",
        pd: false,
    },
];

/// The PD row (issue #10), after the original rows: `manual` on both legs of a fleet of 2
/// prefill + 2 decode workers (the prefix cache lives on the prefill workers).
pub(super) const PD_SCENARIO: Scenario = Scenario {
    label: "PD manual (2P+2D)",
    policy: "manual",
    routing_key_override: false,
    session_routing: "smg_routing_key",
    pd: true,
};

/// The agentic rows (issue #8), baseline first. A row whose policy this build's gateway does
/// not know is left out at run time (see [`available`]), so a policy's row can be listed before
/// the policy lands.
pub(super) const AGENTIC_SCENARIOS: [Scenario; 7] = SCENARIOS;

/// The trace rows (issue #16): the same seven policies on the replayed agentic coding trace.
pub(super) const TRACE_SCENARIOS: [Scenario; 7] = SCENARIOS;

/// Whether this build's gateway accepts `scenario`'s policy name.
pub(super) fn available(scenario: &Scenario) -> bool {
    scenario.policy.parse::<PolicyKind>().is_ok()
}

/// A group of rows that run one workload and are compared with each other.
#[derive(Debug, Clone)]
pub(super) struct RowSet {
    /// Short name: the heading, and the prefix of row labels in the report (empty for the
    /// original set, so its labels stay as they were).
    pub(super) name: &'static str,
    /// The workload and fleet.
    pub(super) workload: Workload,
    /// The rows that run (policies this gateway knows).
    pub(super) scenarios: Vec<Scenario>,
    /// Rows left out because the gateway does not know their policy yet.
    pub(super) skipped: Vec<Scenario>,
}

impl RowSet {
    fn new(name: &'static str, workload: Workload, all: &[Scenario]) -> Self {
        let (scenarios, skipped) = all.iter().partition(|s| available(s));
        Self {
            name,
            workload,
            scenarios,
            skipped,
        }
    }

    /// A row's label in the report and summaries.
    pub(super) fn key(&self, scenario: &Scenario) -> String {
        if self.name.is_empty() {
            scenario.label.to_owned()
        } else {
            format!("{}: {}", self.name, scenario.label)
        }
    }
}

/// The row sets of a demo run: the original rows, then the agentic set (unless
/// `--agentic-sessions 0`), then the trace set (unless `--trace-sessions 0`).
pub(super) fn row_sets(args: &Args) -> Vec<RowSet> {
    let mut sets = Vec::new();
    if args.quick || args.sessions > 0 {
        let mut rows = SCENARIOS.to_vec();
        rows.push(PD_SCENARIO);
        sets.push(RowSet::new("", Workload::classic(args), &rows));
    }
    if args.quick || args.agentic_sessions > 0 {
        sets.push(RowSet::new(
            "agentic",
            Workload::agentic(args),
            &AGENTIC_SCENARIOS,
        ));
    }
    if args.quick || args.trace_sessions > 0 {
        sets.push(RowSet::new(
            "trace",
            Workload::trace(args),
            &TRACE_SCENARIOS,
        ));
    }
    sets
}

/// Runs one scenario on a fresh fleet.
pub(super) async fn run(scenario: &Scenario, workload: &Workload) -> anyhow::Result<RunOutput> {
    let fleet = Fleet::start(scenario, &workload.fleet).await?;
    let mut flags = workload.bench_flags(&fleet.url(), scenario.session_routing);
    if scenario.pd {
        // The bench sees the decode workers (they answer); the load figures are over those.
        if let Some(i) = flags.iter().position(|f| f == "--expected-workers") {
            flags[i + 1] = (super::fleet::WORKERS / 2).to_string();
        }
    }
    let config = BenchArgs::from_flags(flags)
        .and_then(|args| BenchConfig::try_from_args(&args))
        .context("bench configuration")?;
    let output = execute(config, std::future::pending()).await;
    fleet.stop().await;
    Ok(output?)
}
