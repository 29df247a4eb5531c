//! The core's one error enum.
//!
//! Configuration errors name the command-line flag that carries the bad value, so the gateway
//! can refuse to start with a message the operator can act on. Routing errors are the two
//! outcomes of a decision that are not a worker; the gateway maps them to HTTP in one place.

/// Everything the routing core can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A configuration value is invalid; `flag` is the command-line flag that carries it.
    #[error("invalid {flag}: {reason}")]
    Config {
        /// The flag, e.g. `--routing-key-headers`.
        flag: &'static str,
        /// What is wrong with the value, for a human.
        reason: String,
    },
    /// The policy places by routing key and the request carries none.
    #[error(
        "this gateway's routing policy requires a routing key: send an X-SMG-Routing-Key header \
         (or a configured --routing-key-headers name), or start the gateway with \
         --allow-requests-without-routing-key"
    )]
    MissingRoutingKey,
    /// No worker that serves the request's model is available.
    #[error("no available workers")]
    NoAvailableWorkers,
    /// Every worker the request could use is overloaded and `--worker-overload-shed` is on.
    #[error("every worker that could serve this request is overloaded")]
    WorkerOverloadShed,
}

impl Error {
    pub(crate) fn config(flag: &'static str, reason: impl Into<String>) -> Self {
        Self::Config {
            flag,
            reason: reason.into(),
        }
    }
}
