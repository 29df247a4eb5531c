//! The one error type of berth-bench.

/// Everything that stops a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A flag or option is invalid; the run never started. The message names the flag.
    #[error("invalid configuration: {flag}: {message}")]
    Config {
        /// The flag (or `--session-routing-opt` key) at fault.
        flag: String,
        /// What is wrong with it.
        message: String,
    },
    /// A line of the `--input-file` trace is malformed; the run stops before or while replaying.
    #[error("trace line {line}: {message}")]
    Trace {
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// Reading the `--input-file` trace failed.
    #[error("cannot read trace {path}: {source}")]
    TraceIo {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing an artifact failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Serializing an artifact failed.
    #[error("cannot serialize {what}: {source}")]
    Json {
        /// What was being serialized.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// The client library refused a key or id.
    #[error(transparent)]
    Client(#[from] berth_client::ClientError),
    /// Every request of the run failed, so there is nothing to report.
    #[error("no request succeeded ({failed} failed); first error: {first}")]
    NothingSucceeded {
        /// How many requests failed.
        failed: usize,
        /// The first failure, as recorded.
        first: String,
    },
    /// Some measured requests failed (and `--allow-failed-requests` was not given).
    #[error(
        "{failed} of {requests} requests failed (pass --allow-failed-requests to exit 0 anyway); first error: {first}"
    )]
    RequestsFailed {
        /// How many measured requests failed.
        failed: u64,
        /// How many measured requests were sent.
        requests: u64,
        /// The first failure, as recorded.
        first: String,
    },
}

impl BenchError {
    /// A configuration error naming `flag`.
    pub(crate) fn config(flag: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config {
            flag: flag.into(),
            message: message.into(),
        }
    }
}
