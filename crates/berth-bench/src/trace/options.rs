//! The trace flags, validated once before the run (each refusal names its flag).

use crate::cli::Args;
use crate::config::{non_negative, positive};
use crate::error::BenchError;
use crate::trace::source::TraceSource;

/// The validated trace options of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceConfig {
    /// The file, its format and the sampling.
    pub source: TraceSource,
    /// Tokens per hash id (`--prompt-input-tokens-block-size`).
    pub block_size: u32,
    /// Send at the recorded times (`--fixed-schedule`).
    pub fixed_schedule: bool,
    /// Divides recorded times and delays (`--replay-speedup`).
    pub speedup: f64,
    /// Ignore recorded delays between turns (`--ignore-trace-delays`).
    pub ignore_delays: bool,
    /// Cap of `max_tokens` (`--trace-max-output-tokens`).
    pub max_output_tokens: Option<u64>,
    /// `max_tokens` of rows without `output_length` (`--output-tokens-mean`).
    pub default_output_tokens: u64,
}

impl TraceConfig {
    /// `max_tokens` for a row (at least 1).
    pub fn max_tokens(&self, output_length: Option<u64>) -> u64 {
        let n = output_length.unwrap_or(self.default_output_tokens);
        self.max_output_tokens.map_or(n, |cap| n.min(cap)).max(1)
    }
}

impl TraceConfig {
    /// Validates the trace flags of `a`; `None` without `--input-file`.
    pub fn from_args(a: &Args) -> Result<Option<Self>, BenchError> {
        trace_config(a)
    }
}

/// The trace options, `None` without `--input-file`.
fn trace_config(a: &Args) -> Result<Option<TraceConfig>, BenchError> {
    let Some(path) = &a.input_file else {
        for (given, flag) in [
            (a.custom_dataset_type.is_some(), "--custom-dataset-type"),
            (a.fixed_schedule, "--fixed-schedule"),
            (a.replay_speedup.is_some(), "--replay-speedup"),
            (a.ignore_trace_delays, "--ignore-trace-delays"),
            (
                a.prompt_input_tokens_block_size.is_some(),
                "--prompt-input-tokens-block-size",
            ),
            (
                a.trace_max_output_tokens.is_some(),
                "--trace-max-output-tokens",
            ),
            (a.trace_session_sample.is_some(), "--trace-session-sample"),
        ] {
            if given {
                return Err(BenchError::config(flag, "needs --input-file"));
            }
        }
        return Ok(None);
    };
    let Some(format) = a.custom_dataset_type else {
        return Err(BenchError::config(
            "--custom-dataset-type",
            "--input-file needs it: mooncake_trace or bailian_trace",
        ));
    };
    let block_size = match a.prompt_input_tokens_block_size {
        Some(0) => {
            return Err(BenchError::config(
                "--prompt-input-tokens-block-size",
                "must be at least 1",
            ));
        }
        Some(b) if b > MAX_BLOCK_SIZE => {
            return Err(BenchError::config(
                "--prompt-input-tokens-block-size",
                format!("at most {MAX_BLOCK_SIZE}"),
            ));
        }
        Some(b) => b,
        None => format.default_block_size(),
    };
    let sample = match a.trace_session_sample {
        Some(p) if !(p.is_finite() && p > 0.0 && p <= 1.0) => {
            return Err(BenchError::config(
                "--trace-session-sample",
                format!("{p} must be in (0, 1]"),
            ));
        }
        p => p,
    };
    if a.trace_max_output_tokens == Some(0) {
        return Err(BenchError::config(
            "--trace-max-output-tokens",
            "must be at least 1",
        ));
    }
    if a.num_sessions == Some(0) {
        return Err(BenchError::config("--num-sessions", "must be at least 1"));
    }
    Ok(Some(TraceConfig {
        source: TraceSource {
            path: path.clone(),
            format,
            max_sessions: a.num_sessions,
            sample,
            seed: a.random_seed.unwrap_or(0),
        },
        block_size,
        fixed_schedule: a.fixed_schedule,
        speedup: a
            .replay_speedup
            .map(|s| positive("--replay-speedup", s))
            .transpose()?
            .unwrap_or(1.0),
        ignore_delays: a.ignore_trace_delays,
        max_output_tokens: a.trace_max_output_tokens,
        default_output_tokens: non_negative("--output-tokens-mean", a.output_tokens_mean)?.round()
            as u64,
    }))
}

/// Largest `--prompt-input-tokens-block-size` (a block's text is built whole).
pub const MAX_BLOCK_SIZE: u32 = 65_536;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceFormat;

    fn trace(flags: &[&str]) -> Result<Option<TraceConfig>, BenchError> {
        TraceConfig::from_args(&Args::from_flags(flags.iter().copied())?)
    }

    #[test]
    fn defaults_follow_the_format() {
        let m = trace(&[
            "--input-file",
            "t.jsonl",
            "--custom-dataset-type",
            "mooncake_trace",
        ])
        .unwrap()
        .unwrap();
        assert_eq!((m.block_size, m.speedup), (512, 1.0));
        assert_eq!(
            m.source.max_sessions, None,
            "all sessions, not the synthetic 100"
        );
        let b = trace(&[
            "--input-file",
            "t.jsonl",
            "--custom-dataset-type",
            "bailian-trace",
            "--isl-block-size",
            "32",
            "--num-sessions",
            "5",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(b.source.format, TraceFormat::BailianTrace);
        assert_eq!((b.block_size, b.source.max_sessions), (32, Some(5)));
        assert!(trace(&[]).unwrap().is_none());
        assert_eq!(m.max_tokens(Some(900)), 900);
        let capped = TraceConfig {
            max_output_tokens: Some(32),
            ..m
        };
        assert_eq!(capped.max_tokens(Some(900)), 32);
        assert_eq!(capped.max_tokens(Some(0)), 1);
        assert_eq!(capped.max_tokens(None), 32);
    }

    #[test]
    fn bad_trace_flags_name_the_flag() {
        let file = [
            "--input-file",
            "t.jsonl",
            "--custom-dataset-type",
            "mooncake_trace",
        ];
        for (extra, needle) in [
            (&["--fixed-schedule"][..], "--fixed-schedule"),
            (
                &["--custom-dataset-type", "mooncake_trace"],
                "--custom-dataset-type",
            ),
            (&["--trace-session-sample", "0.5"], "--trace-session-sample"),
        ] {
            let err = trace(extra).unwrap_err().to_string();
            assert!(
                err.contains(needle) && err.contains("needs --input-file"),
                "{err}"
            );
        }
        let err = trace(&["--input-file", "t.jsonl"]).unwrap_err().to_string();
        assert!(err.contains("--custom-dataset-type"), "{err}");
        for (extra, needle) in [
            (
                &["--prompt-input-tokens-block-size", "0"][..],
                "--prompt-input-tokens-block-size",
            ),
            (
                &["--prompt-input-tokens-block-size", "70000"],
                "--prompt-input-tokens-block-size",
            ),
            (&["--trace-session-sample", "1.5"], "--trace-session-sample"),
            (&["--trace-session-sample", "0"], "--trace-session-sample"),
            (&["--replay-speedup", "0"], "--replay-speedup"),
            (
                &["--trace-max-output-tokens", "0"],
                "--trace-max-output-tokens",
            ),
            (&["--num-sessions", "0"], "--num-sessions"),
            (
                &["--custom-dataset-type", "sharegpt"],
                "--custom-dataset-type",
            ),
        ] {
            let mut flags = file.to_vec();
            flags.extend_from_slice(extra);
            let err = trace(&flags).unwrap_err().to_string();
            assert!(err.contains(needle), "{extra:?}: {err}");
        }
    }
}
