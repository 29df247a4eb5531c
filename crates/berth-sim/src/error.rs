//! The crate's one error type.

/// Everything that can go wrong in the simulated worker.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A configuration value is out of range; names the command-line flag.
    #[error("invalid value for --{flag}: {reason}")]
    InvalidConfig {
        /// The flag (or builder setter) at fault, without the leading dashes.
        flag: &'static str,
        /// Why the value was refused.
        reason: String,
    },
    /// Binding or accepting on the listening socket failed.
    #[error("listener error: {0}")]
    Io(#[from] std::io::Error),
    /// The worker was told to exit by an injected `exit` fault.
    #[error("worker exited by injected fault")]
    ExitFault,
    /// A response was aborted on purpose by an injected `drop_after_chunks` fault.
    #[error("connection dropped by injected fault")]
    DroppedByFault,
    /// The engine stopped while a request waited for it.
    #[error("engine stopped")]
    EngineStopped,
}
