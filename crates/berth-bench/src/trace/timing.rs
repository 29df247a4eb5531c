//! When a turn is due: a pure function of the options and the recorded times.
//!
//! - `--fixed-schedule`: a row with a `timestamp` is due at that time, counted from the
//!   trace's earliest kept timestamp (so the replay starts at once); a row without one (aiperf's
//!   session turns carry a `delay` instead) is due its `delay` after the previous answer.
//! - otherwise sessions start when `--concurrency` / `--request-rate` let them, and a later
//!   turn is due its `delay` after the previous answer, or, without a `delay`, at its
//!   timestamp's offset from the session's first timestamp (counted from when the session
//!   started);
//! - `--replay-speedup S` divides every recorded time and delay by `S`;
//! - `--ignore-trace-delays` drops delays and in-session offsets (turns go back to back);
//!   `--fixed-schedule` timestamps still apply, as in aiperf.
//!
//! Never before the previous turn's answer: a turn resends it.

use std::time::Duration;

use crate::trace::TraceRow;

/// When a turn is due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Due {
    /// As soon as the previous answer arrived.
    Now,
    /// At this offset from the replay's start.
    FromStart(Duration),
    /// This long after the previous answer.
    AfterAnswer(Duration),
    /// At this offset from the session's start.
    FromSessionStart(Duration),
}

fn ms(v: f64, speedup: f64) -> Duration {
    Duration::from_secs_f64((v / speedup).max(0.0) / 1000.0)
}

/// When `row` is due; `trace_first_ms` is the trace's earliest kept timestamp and
/// `session_first_ms` the timestamp of the session's first row.
pub fn due(
    row: &TraceRow,
    fixed_schedule: bool,
    speedup: f64,
    ignore_delays: bool,
    trace_first_ms: Option<f64>,
    session_first_ms: Option<f64>,
) -> Due {
    if fixed_schedule && let (Some(ts), Some(first)) = (row.timestamp_ms, trace_first_ms) {
        return Due::FromStart(ms(ts - first, speedup));
    }
    if ignore_delays {
        return Due::Now;
    }
    if let Some(d) = row.delay_ms {
        return Due::AfterAnswer(ms(d, speedup));
    }
    if fixed_schedule {
        return Due::Now;
    }
    match (row.timestamp_ms, session_first_ms) {
        (Some(ts), Some(first)) => Due::FromSessionStart(ms(ts - first, speedup)),
        _ => Due::Now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{RowInput, RowSession};

    fn row(ts: Option<f64>, delay: Option<f64>) -> TraceRow {
        TraceRow {
            line: 1,
            session: RowSession::Single,
            timestamp_ms: ts,
            delay_ms: delay,
            input: RowInput::Text("x".into()),
            output_length: None,
        }
    }

    #[test]
    fn due_times() {
        let s = Duration::from_secs_f64;
        let f = Some(1000.0);
        // Fixed schedule: timestamps from the trace's first, delays after answers.
        assert_eq!(
            due(&row(Some(3000.0), None), true, 1.0, false, f, f),
            Due::FromStart(s(2.0))
        );
        assert_eq!(
            due(&row(Some(3000.0), None), true, 4.0, true, f, f),
            Due::FromStart(s(0.5))
        );
        assert_eq!(
            due(&row(None, Some(500.0)), true, 2.0, false, f, f),
            Due::AfterAnswer(s(0.25))
        );
        assert_eq!(
            due(&row(None, Some(500.0)), true, 1.0, true, f, f),
            Due::Now
        );
        assert_eq!(due(&row(None, None), true, 1.0, false, f, f), Due::Now);
        // Closed loop: delays after answers, timestamps from the session's first.
        assert_eq!(
            due(
                &row(Some(3000.0), Some(10.0)),
                false,
                1.0,
                false,
                f,
                Some(2000.0)
            ),
            Due::AfterAnswer(s(0.01))
        );
        assert_eq!(
            due(&row(Some(3000.0), None), false, 2.0, false, f, Some(2000.0)),
            Due::FromSessionStart(s(0.5))
        );
        assert_eq!(
            due(
                &row(Some(3000.0), Some(10.0)),
                false,
                1.0,
                true,
                f,
                Some(2000.0)
            ),
            Due::Now
        );
        assert_eq!(due(&row(None, None), false, 1.0, false, f, None), Due::Now);
    }
}
