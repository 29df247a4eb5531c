//! The validated configuration of one run.
//!
//! Every flag is checked here, once, before a single request is sent: a bad session-routing
//! mode, option or header name, a negative mean or an unbounded workload stops the run with a
//! message naming the flag.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::cli::Args;
use crate::error::BenchError;
use crate::routing::SessionRouting;
use crate::run::arrivals::ArrivalPattern;
use crate::trace::TraceConfig;
use crate::workload::{EndpointType, WorkloadShape};

/// What `records.jsonl` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportLevel {
    /// One record per request: timings, tokens, worker, errors.
    Records,
    /// Records plus the exact headers and body sent.
    Raw,
}

/// Most sessions one agent tree may hold (keeps every run bounded).
pub const MAX_TREE_SESSIONS: u64 = 10_000;
/// Most root sessions one run may plan.
pub const MAX_SESSIONS: u64 = 10_000_000;

/// A validated run configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchConfig {
    /// Base URL.
    pub url: String,
    /// Model name.
    pub model: String,
    /// API driven.
    pub endpoint: EndpointType,
    /// Streamed responses.
    pub streaming: bool,
    /// Root sessions to run; `None` means until the duration ends.
    pub num_sessions: Option<u64>,
    /// Live root sessions at once.
    pub concurrency: u64,
    /// Root session starts per second.
    pub request_rate: Option<f64>,
    /// How those starts are spread.
    pub arrival_pattern: ArrivalPattern,
    /// Workload distributions.
    pub shape: WorkloadShape,
    /// Seed; `None` draws one from the OS and mints session ids from the OS too.
    pub seed: Option<u64>,
    /// Stop starting turns after this long.
    #[serde(serialize_with = "secs")]
    pub duration: Option<Duration>,
    /// Leading requests excluded from figures.
    pub warmup_requests: u64,
    /// Per-request timeout.
    #[serde(serialize_with = "secs_f64")]
    pub request_timeout: Duration,
    /// Retries per turn.
    pub max_retries: u32,
    /// Workers behind the URL, so idle ones count in load max/mean.
    pub expected_workers: Option<u64>,
    /// The session-routing mode.
    pub routing: SessionRouting,
    /// Extra body fields.
    pub extra_inputs: Map<String, Value>,
    /// Artifact directory.
    pub artifact_dir: Option<PathBuf>,
    /// Records export level.
    pub export_level: ExportLevel,
    /// Progress output on.
    pub progress: bool,
    /// Trace replay (`--input-file`) instead of the synthetic workload.
    pub trace: Option<TraceConfig>,
}

fn secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn secs_f64<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(crate) fn non_negative(flag: &str, v: f64) -> Result<f64, BenchError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(BenchError::config(
            flag,
            format!("{v} must be a finite number >= 0"),
        ))
    }
}

pub(crate) fn positive(flag: &str, v: f64) -> Result<f64, BenchError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(BenchError::config(
            flag,
            format!("{v} must be a finite number > 0"),
        ))
    }
}

impl BenchConfig {
    /// Validates `args`.
    pub fn try_from_args(a: &Args) -> Result<Self, BenchError> {
        let routing = SessionRouting::parse(&a.session_routing, &a.session_routing_opt)?;
        let shape = WorkloadShape {
            turns_mean: non_negative("--session-turns-mean", a.session_turns_mean)?,
            turns_stddev: non_negative("--session-turns-stddev", a.session_turns_stddev)?,
            delay_mean_ms: non_negative("--session-turn-delay-mean", a.session_turn_delay_mean)?,
            delay_stddev_ms: non_negative(
                "--session-turn-delay-stddev",
                a.session_turn_delay_stddev,
            )?,
            shared_system_prompt_length: a.shared_system_prompt_length,
            num_system_prompts: a.num_system_prompts,
            input_tokens_mean: non_negative(
                "--synthetic-input-tokens-mean",
                a.synthetic_input_tokens_mean,
            )?,
            input_tokens_stddev: non_negative(
                "--synthetic-input-tokens-stddev",
                a.synthetic_input_tokens_stddev,
            )?,
            output_tokens_mean: non_negative("--output-tokens-mean", a.output_tokens_mean)?,
            output_tokens_stddev: non_negative("--output-tokens-stddev", a.output_tokens_stddev)?,
            agent_fanout: a.agent_fanout,
            agent_depth: a.agent_depth,
            agent_context: a.agent_context,
        };
        if shape.num_system_prompts == 0 {
            return Err(BenchError::config(
                "--num-system-prompts",
                "must be at least 1",
            ));
        }
        if shape.num_system_prompts > 1 && shape.shared_system_prompt_length == 0 {
            return Err(BenchError::config(
                "--num-system-prompts",
                "needs --shared-system-prompt-length > 0",
            ));
        }
        if shape.turns_mean < 1.0 {
            return Err(BenchError::config(
                "--session-turns-mean",
                "must be at least 1",
            ));
        }
        if shape.sessions_per_tree() > MAX_TREE_SESSIONS {
            return Err(BenchError::config(
                "--agent-fanout/--agent-depth",
                format!(
                    "a tree would hold {} sessions (at most {MAX_TREE_SESSIONS})",
                    shape.sessions_per_tree()
                ),
            ));
        }
        let duration = a
            .benchmark_duration
            .map(|d| positive("--benchmark-duration", d).map(Duration::from_secs_f64))
            .transpose()?;
        let trace = TraceConfig::from_args(a)?;
        if routing == SessionRouting::PreviousResponseId {
            if a.endpoint_type != EndpointType::Responses {
                return Err(BenchError::config(
                    "--session-routing",
                    "previous_response_id needs --endpoint-type responses (a Responses chain)",
                ));
            }
            if trace.is_some() {
                return Err(BenchError::config(
                    "--session-routing",
                    "previous_response_id is not supported with --input-file (trace replay)",
                ));
            }
        }
        let num_sessions = match (a.num_sessions, duration) {
            (Some(0), _) => return Err(BenchError::config("--num-sessions", "must be at least 1")),
            (Some(n), _) if n > MAX_SESSIONS => {
                return Err(BenchError::config(
                    "--num-sessions",
                    format!("at most {MAX_SESSIONS}"),
                ));
            }
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(100),
        };
        if a.concurrency == 0 {
            return Err(BenchError::config("--concurrency", "must be at least 1"));
        }
        let request_rate = a
            .request_rate
            .map(|r| positive("--request-rate", r))
            .transpose()?;
        if a.arrival_pattern != ArrivalPattern::Constant && request_rate.is_none() {
            return Err(BenchError::config(
                "--arrival-pattern",
                "needs --request-rate",
            ));
        }
        let timeout = positive("--request-timeout-seconds", a.request_timeout_seconds)?;
        let export_level = match (a.export_level, &a.artifact_dir) {
            (Some(_), None) => {
                return Err(BenchError::config("--export-level", "needs --artifact-dir"));
            }
            (level, _) => level.unwrap_or(ExportLevel::Records),
        };
        if a.model.is_empty() {
            return Err(BenchError::config("--model", "must not be empty"));
        }
        // Checks the URL now so a typo fails before the run.
        crate::transport::HttpClient::new(&a.url, Duration::from_secs(1))?;
        Ok(Self {
            url: a.url.clone(),
            model: a.model.clone(),
            endpoint: a.endpoint_type,
            streaming: a.streaming,
            // A trace replays its own sessions (`--num-sessions` caps them in `trace`).
            num_sessions: if trace.is_some() { None } else { num_sessions },
            concurrency: a.concurrency,
            request_rate,
            arrival_pattern: a.arrival_pattern,
            shape,
            seed: a.random_seed,
            duration,
            warmup_requests: a.warmup_requests,
            request_timeout: Duration::from_secs_f64(timeout),
            max_retries: a.max_retries,
            expected_workers: match a.expected_workers {
                Some(0) => {
                    return Err(BenchError::config(
                        "--expected-workers",
                        "must be at least 1",
                    ));
                }
                n => n,
            },
            routing,
            extra_inputs: parse_extra_inputs(&a.extra_inputs)?,
            artifact_dir: a.artifact_dir.clone(),
            export_level,
            progress: !a.quiet,
            trace,
        })
    }
}

/// Parses `--extra-inputs`: `key:value` pairs (value as JSON when it parses, else a string) or
/// whole JSON objects; later entries win.
pub fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, BenchError> {
    let mut out = Map::new();
    for item in items {
        let trimmed = item.trim();
        if trimmed.starts_with('{') {
            match serde_json::from_str::<Value>(trimmed) {
                Ok(Value::Object(obj)) => out.extend(obj),
                _ => {
                    return Err(BenchError::config(
                        "--extra-inputs",
                        format!("`{item}` is not a JSON object"),
                    ));
                }
            }
        } else if let Some((k, v)) = trimmed.split_once(':') {
            if k.is_empty() {
                return Err(BenchError::config(
                    "--extra-inputs",
                    format!("`{item}` has an empty key"),
                ));
            }
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
            out.insert(k.to_owned(), value);
        } else {
            return Err(BenchError::config(
                "--extra-inputs",
                format!("`{item}` is neither key:value nor a JSON object"),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(flags: &[&str]) -> Result<BenchConfig, BenchError> {
        BenchConfig::try_from_args(&Args::from_flags(flags.iter().copied())?)
    }

    #[test]
    fn defaults_are_bounded() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.num_sessions, Some(100));
        assert_eq!(
            cfg(&["--benchmark-duration", "5"]).unwrap().num_sessions,
            None
        );
    }

    #[test]
    fn bad_flags_name_the_flag() {
        for (flags, needle) in [
            (&["--session-routing", "sticky"][..], "--session-routing"),
            (
                &[
                    "--session-routing",
                    "identity_headers",
                    "--session-routing-opt",
                    "session=a b",
                ],
                "RFC 9110",
            ),
            (
                &["--session-routing", "previous_response_id"][..],
                "--endpoint-type responses",
            ),
            (&["--num-sessions", "0"], "--num-sessions"),
            (&["--concurrency", "0"], "--concurrency"),
            (&["--session-turns-mean", "0.5"], "--session-turns-mean"),
            (&["--request-rate", "0"], "--request-rate"),
            (&["--benchmark-duration=-1"], "--benchmark-duration"),
            (
                &["--agent-fanout", "100", "--agent-depth", "3"],
                "--agent-fanout",
            ),
            (&["--export-level", "raw"], "--artifact-dir"),
            (&["--url", "https://127.0.0.1:1"], "--url"),
            (&["--extra-inputs", "novalue"], "--extra-inputs"),
            (&["--num-system-prompts", "0"], "--num-system-prompts"),
            (
                &["--num-system-prompts", "4"],
                "--shared-system-prompt-length",
            ),
            (&["--arrival-pattern", "poisson"], "--request-rate"),
            (&["--arrival-pattern", "gamma"], "--arrival-pattern"),
            (
                &["--synthetic-input-tokens-mean", "NaN"],
                "--synthetic-input-tokens-mean",
            ),
        ] {
            let err = cfg(flags).unwrap_err().to_string();
            assert!(err.contains(needle), "{flags:?}: {err}");
        }
    }

    #[test]
    fn extra_inputs_merge() {
        let m = parse_extra_inputs(&[
            "ignore_eos:true".into(),
            r#"{"nvext":{"priority":1}}"#.into(),
            "tag:hello".into(),
        ])
        .unwrap();
        assert_eq!(
            Value::Object(m),
            serde_json::json!({"ignore_eos": true, "nvext": {"priority": 1}, "tag": "hello"})
        );
    }
}
