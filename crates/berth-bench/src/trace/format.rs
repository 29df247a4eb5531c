//! One line of a trace file, parsed and checked.
//!
//! Two formats, with aiperf 0.13's field names and meanings:
//!
//! - `mooncake_trace`: `timestamp` (ms, optional), `input_length`, `output_length`,
//!   `hash_ids`, and aiperf's additions `session_id` (rows sharing one are a session's turns in
//!   file order), `delay` (ms to wait after the previous turn's answer) and `text_input` (a
//!   literal prompt instead of `input_length`).
//! - `bailian_trace`: `chat_id`, `parent_chat_id` (-1 for roots), `timestamp` (seconds),
//!   `input_length`, `output_length`, `turn`, `hash_ids`.
//!
//! Unknown fields are ignored (aiperf's synthesizer adds `group_id`, Bailian has `type`). A line
//! that is not a JSON object of the format stops the run with an error naming its line number.

use serde::Deserialize;

use crate::error::BenchError;

/// The trace format (`--custom-dataset-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Mooncake's trace format with aiperf's session additions.
    #[value(alias = "mooncake-trace")]
    MooncakeTrace,
    /// Alibaba's Qwen "bailian" usage traces.
    #[value(alias = "bailian-trace")]
    BailianTrace,
}

impl TraceFormat {
    /// Tokens per hash id when `--prompt-input-tokens-block-size` is not given (aiperf's
    /// defaults: 512 for Mooncake, 16 for Bailian's SipHash blocks).
    pub fn default_block_size(self) -> u32 {
        match self {
            Self::MooncakeTrace => 512,
            Self::BailianTrace => 16,
        }
    }
}

/// Which session a row belongs to, as the file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowSession {
    /// A Mooncake row with a `session_id`.
    Named(String),
    /// A Mooncake row without one: a session of one turn.
    Single,
    /// A Bailian row: its chat and its parent (-1 for roots).
    Chat {
        /// `chat_id`.
        chat_id: i64,
        /// `parent_chat_id`.
        parent: i64,
        /// `turn`.
        turn: i64,
    },
}

/// What the turn adds to the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowInput {
    /// `input_length` tokens made of the blocks `hash_ids` (no ids: unique text).
    Blocks {
        /// The block ids, in order.
        hash_ids: Vec<u64>,
        /// Tokens of the new content.
        input_length: u64,
    },
    /// A literal prompt (`text_input`).
    Text(String),
}

/// One parsed row.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// 1-based line number in the file.
    pub line: u64,
    /// Its session.
    pub session: RowSession,
    /// Recorded send time, ms (Bailian's seconds converted).
    pub timestamp_ms: Option<f64>,
    /// Recorded wait after the previous turn's answer, ms.
    pub delay_ms: Option<f64>,
    /// The new content.
    pub input: RowInput,
    /// Output tokens recorded.
    pub output_length: Option<u64>,
}

#[derive(Deserialize)]
struct MooncakeLine {
    session_id: Option<String>,
    timestamp: Option<f64>,
    delay: Option<f64>,
    input_length: Option<u64>,
    text_input: Option<String>,
    messages: Option<serde::de::IgnoredAny>,
    payload: Option<serde::de::IgnoredAny>,
    output_length: Option<u64>,
    hash_ids: Option<Vec<u64>>,
}

#[derive(Deserialize)]
struct BailianLine {
    chat_id: i64,
    #[serde(default = "minus_one")]
    parent_chat_id: i64,
    timestamp: Option<f64>,
    input_length: u64,
    output_length: u64,
    #[serde(default = "one")]
    turn: i64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

fn minus_one() -> i64 {
    -1
}

fn one() -> i64 {
    1
}

fn bad(line: u64, message: impl std::fmt::Display) -> BenchError {
    BenchError::Trace {
        line,
        message: message.to_string(),
    }
}

/// A JSON error of line `line`: serde's message without its "at line 1 column N" (the file's
/// line is what matters), the column kept.
fn bad_json(line: u64, e: &serde_json::Error) -> BenchError {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text);
    bad(line, format!("{message} (column {})", e.column()))
}

fn time_field(line: u64, name: &str, v: Option<f64>) -> Result<Option<f64>, BenchError> {
    match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(bad(
            line,
            format!("`{name}` {x} must be a finite number >= 0"),
        )),
        v => Ok(v),
    }
}

/// Parses line number `line` (1-based) of a trace in `format`.
pub fn parse_row(format: TraceFormat, line: u64, text: &str) -> Result<TraceRow, BenchError> {
    match format {
        TraceFormat::MooncakeTrace => parse_mooncake(line, text),
        TraceFormat::BailianTrace => parse_bailian(line, text),
    }
}

fn parse_mooncake(line: u64, text: &str) -> Result<TraceRow, BenchError> {
    let m: MooncakeLine = serde_json::from_str(text).map_err(|e| bad_json(line, &e))?;
    if m.messages.is_some() || m.payload.is_some() {
        return Err(bad(
            line,
            "`messages` and `payload` rows are not supported by berth bench (use `input_length` \
             with `hash_ids`, or `text_input`)",
        ));
    }
    let input = match (m.input_length, m.text_input, m.hash_ids) {
        (Some(_), Some(_), _) => {
            return Err(bad(
                line,
                "`input_length` and `text_input` are mutually exclusive",
            ));
        }
        (None, None, _) => {
            return Err(bad(
                line,
                "one of `input_length` or `text_input` is required",
            ));
        }
        (None, Some(_), Some(_)) => {
            return Err(bad(line, "`hash_ids` needs `input_length`"));
        }
        (None, Some(t), None) => RowInput::Text(t),
        (Some(0), None, _) => return Err(bad(line, "`input_length` must be at least 1")),
        (Some(n), None, ids) => RowInput::Blocks {
            hash_ids: ids.unwrap_or_default(),
            input_length: n,
        },
    };
    let session = match m.session_id {
        Some(s) if s.is_empty() => return Err(bad(line, "`session_id` must not be empty")),
        Some(s) => RowSession::Named(s),
        None => RowSession::Single,
    };
    Ok(TraceRow {
        line,
        session,
        timestamp_ms: time_field(line, "timestamp", m.timestamp)?,
        delay_ms: time_field(line, "delay", m.delay)?,
        input,
        output_length: m.output_length,
    })
}

fn parse_bailian(line: u64, text: &str) -> Result<TraceRow, BenchError> {
    let b: BailianLine = serde_json::from_str(text).map_err(|e| bad_json(line, &e))?;
    if b.input_length == 0 {
        return Err(bad(line, "`input_length` must be at least 1"));
    }
    if b.parent_chat_id == b.chat_id {
        return Err(bad(line, "`parent_chat_id` equals `chat_id`"));
    }
    let ts = time_field(line, "timestamp", b.timestamp)?;
    Ok(TraceRow {
        line,
        session: RowSession::Chat {
            chat_id: b.chat_id,
            parent: b.parent_chat_id,
            turn: b.turn,
        },
        timestamp_ms: ts.map(|s| s * 1000.0),
        delay_ms: None,
        input: RowInput::Blocks {
            hash_ids: b.hash_ids,
            input_length: b.input_length,
        },
        output_length: Some(b.output_length),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mooncake_rows() {
        let r = parse_row(
            TraceFormat::MooncakeTrace,
            3,
            r#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47], "group_id": 7}"#,
        )
        .unwrap();
        assert_eq!(r.line, 3);
        assert_eq!(r.session, RowSession::Single);
        assert_eq!(r.timestamp_ms, Some(27482.0));
        assert_eq!(
            r.input,
            RowInput::Blocks {
                hash_ids: vec![46, 47],
                input_length: 6955
            }
        );
        let r = parse_row(
            TraceFormat::MooncakeTrace,
            1,
            r#"{"session_id": "s1", "delay": 2.5, "text_input": "hi", "output_length": 4}"#,
        )
        .unwrap();
        assert_eq!(r.session, RowSession::Named("s1".into()));
        assert_eq!(r.delay_ms, Some(2.5));
        assert_eq!(r.input, RowInput::Text("hi".into()));
    }

    #[test]
    fn bailian_rows_convert_seconds_and_default_parent() {
        let r = parse_row(
            TraceFormat::BailianTrace,
            9,
            r#"{"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 521, "output_length": 132, "type": "text", "turn": 1, "hash_ids": [1089, 1090]}"#,
        )
        .unwrap();
        assert_eq!(
            r.session,
            RowSession::Chat {
                chat_id: 159,
                parent: -1,
                turn: 1
            }
        );
        assert!((r.timestamp_ms.unwrap() - 61_114.0).abs() < 1e-6);
        assert_eq!(r.output_length, Some(132));
        let r = parse_row(
            TraceFormat::BailianTrace,
            1,
            r#"{"chat_id": 2, "input_length": 5, "output_length": 1}"#,
        )
        .unwrap();
        assert_eq!(
            r.session,
            RowSession::Chat {
                chat_id: 2,
                parent: -1,
                turn: 1
            }
        );
        assert_eq!(r.timestamp_ms, None);
    }

    #[test]
    fn refusals_name_the_line() {
        for (format, text, needle) in [
            (TraceFormat::MooncakeTrace, "not json", "expected"),
            (TraceFormat::MooncakeTrace, "[1, 2]", "invalid type"),
            (
                TraceFormat::MooncakeTrace,
                r#"{"output_length": 3}"#,
                "required",
            ),
            (
                TraceFormat::MooncakeTrace,
                r#"{"input_length": 3, "text_input": "x"}"#,
                "mutually exclusive",
            ),
            (
                TraceFormat::MooncakeTrace,
                r#"{"text_input": "x", "hash_ids": [1]}"#,
                "needs `input_length`",
            ),
            (
                TraceFormat::MooncakeTrace,
                r#"{"input_length": 3, "hash_ids": [-1]}"#,
                "invalid value",
            ),
            (
                TraceFormat::MooncakeTrace,
                r#"{"input_length": 3, "timestamp": -5}"#,
                "`timestamp`",
            ),
            (
                TraceFormat::MooncakeTrace,
                r#"{"messages": [{"role": "user", "content": "x"}]}"#,
                "not supported",
            ),
            (
                TraceFormat::MooncakeTrace,
                r#"{"input_length": 0}"#,
                "at least 1",
            ),
            (
                TraceFormat::MooncakeTrace,
                r#"{"input_length": 3, "session_id": 7}"#,
                "invalid type",
            ),
            (
                TraceFormat::BailianTrace,
                r#"{"parent_chat_id": -1, "input_length": 3, "output_length": 1}"#,
                "chat_id",
            ),
            (
                TraceFormat::BailianTrace,
                r#"{"chat_id": 4, "parent_chat_id": 4, "input_length": 3, "output_length": 1}"#,
                "equals",
            ),
        ] {
            let err = parse_row(format, 42, text).unwrap_err().to_string();
            assert!(err.starts_with("trace line 42: "), "{text}: {err}");
            assert!(!err.contains("at line 1"), "{text}: {err}");
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
