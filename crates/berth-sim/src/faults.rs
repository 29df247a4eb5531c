//! Fault injection: the per-instance switches a test or an operator flips to make a worker
//! misbehave, and the decisions taken from them on each request.
//!
//! The current faults live in a `tokio::sync::watch` channel, so a request hanging before its
//! first byte wakes as soon as the hang is lifted. Error injection is deterministic: with rate
//! `r`, request `n` fails when `floor(n*r)` steps past `floor((n-1)*r)`, which spreads failures
//! evenly and fails every request at `r = 1`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// The faults a worker currently injects. `Faults::default()` injects none.
///
/// `POST /sim/faults` takes this object as JSON (missing fields take their default, so a POST
/// replaces the whole set), plus `"exit": true` to make the worker die at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Fraction of inference requests (0..=1) answered with `error_status` instead.
    pub error_rate: f64,
    /// HTTP status of injected errors (default 500).
    pub error_status: u16,
    /// Hold inference requests before their first byte until this is cleared.
    pub hang: bool,
    /// Extra wall-clock delay before the first byte of inference responses, in milliseconds
    /// (not scaled by the time scale).
    pub first_byte_delay_ms: u64,
    /// Multiplies every simulated delay (1 = normal speed; no effect at time scale 0).
    pub slowdown: f64,
    /// Abort the connection after this many body chunks: SSE events for streams, half the body
    /// for non-streamed responses (status and headers are already sent).
    pub drop_after_chunks: Option<u32>,
    /// `/health` and `/health_generate` answer 503.
    pub fail_health: bool,
    /// The worker dies (every connection is cut, the listener closes) once it has received this
    /// many inference requests.
    pub exit_after_requests: Option<u64>,
    /// llama-server's habit: a connection that carried a streamed response is dead afterwards
    /// although its headers promised keep-alive (no `Connection: close`). The connection stays
    /// open, and the next request sent on it is dropped unanswered (the connection is cut), which
    /// is what a client that reuses it before the engine's close arrives always sees.
    pub close_after_stream: bool,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            error_rate: 0.0,
            error_status: 500,
            hang: false,
            first_byte_delay_ms: 0,
            slowdown: 1.0,
            drop_after_chunks: None,
            fail_health: false,
            exit_after_requests: None,
            close_after_stream: false,
        }
    }
}

impl Faults {
    /// Checks ranges; the error names the command-line flag.
    pub fn validate(&self) -> Result<(), crate::SimError> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(invalid("error-rate", "must be between 0 and 1"));
        }
        if !(100..=599).contains(&self.error_status) {
            return Err(invalid("error-status", "must be an HTTP status (100-599)"));
        }
        if !(self.slowdown.is_finite() && self.slowdown >= 0.0) {
            return Err(invalid("slowdown", "must be a finite factor >= 0"));
        }
        Ok(())
    }

    /// The fixed first-byte delay as a `Duration`.
    pub fn first_byte_delay(&self) -> Duration {
        Duration::from_millis(self.first_byte_delay_ms)
    }
}

fn invalid(flag: &'static str, reason: &str) -> crate::SimError {
    crate::SimError::InvalidConfig {
        flag,
        reason: reason.to_owned(),
    }
}

/// The live fault set of one worker, shared by its handle and its request handlers.
#[derive(Debug)]
pub(crate) struct FaultState {
    current: watch::Sender<Faults>,
    error_seq: AtomicU64,
}

impl FaultState {
    pub(crate) fn new(initial: Faults) -> Self {
        Self {
            current: watch::Sender::new(initial),
            error_seq: AtomicU64::new(0),
        }
    }

    pub(crate) fn get(&self) -> Faults {
        self.current.borrow().clone()
    }

    pub(crate) fn set(&self, faults: Faults) {
        self.current.send_replace(faults);
    }

    pub(crate) fn modify(&self, f: impl FnOnce(&mut Faults)) {
        self.current.send_modify(f);
    }

    /// Whether the next inference request gets an injected error, and its status.
    pub(crate) fn injected_error(&self, faults: &Faults) -> Option<u16> {
        if faults.error_rate <= 0.0 {
            return None;
        }
        let n = self.error_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let fails =
            (n as f64 * faults.error_rate).floor() > ((n - 1) as f64 * faults.error_rate).floor();
        fails.then_some(faults.error_status)
    }

    /// Waits while the `hang` fault is set.
    pub(crate) async fn wait_while_hanging(&self) {
        let mut rx = self.current.subscribe();
        // The sender lives as long as `self`, so `wait_for` cannot fail while we borrow it.
        let _ = rx.wait_for(|f| !f.hang).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_rate_is_deterministic_and_even() {
        let state = FaultState::new(Faults::default());
        let faults = Faults {
            error_rate: 0.25,
            error_status: 503,
            ..Faults::default()
        };
        let failed = (0..100)
            .filter(|_| state.injected_error(&faults).is_some())
            .count();
        assert_eq!(failed, 25);
        let all = Faults {
            error_rate: 1.0,
            ..Faults::default()
        };
        assert!((0..10).all(|_| state.injected_error(&all) == Some(500)));
        assert!(state.injected_error(&Faults::default()).is_none());
    }

    #[test]
    fn validation_names_the_flag() {
        let err = Faults {
            error_rate: 2.0,
            ..Faults::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("--error-rate"));
        assert!(Faults::default().validate().is_ok());
    }

    #[test]
    fn faults_round_trip_as_json_with_defaults() {
        let f: Faults = serde_json::from_str(r#"{"hang": true}"#).unwrap();
        assert_eq!(
            f,
            Faults {
                hang: true,
                ..Faults::default()
            }
        );
        assert!(serde_json::from_str::<Faults>(r#"{"bogus": 1}"#).is_err());
    }
}
