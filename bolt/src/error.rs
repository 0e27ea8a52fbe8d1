//! How a task can end without an output.

/// Why a task gave no output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The handler ran and returned an error (or panicked): its message.
    #[error("task failed: {0}")]
    Failed(String),
    /// An executor would not run it (no handler of that name, for example).
    #[error("task refused: {0}")]
    Refused(String),
    /// No result within the task's timeout; the task was canceled.
    #[error("task timed out")]
    Timeout,
    /// Canceled by the caller.
    #[error("task canceled")]
    Canceled,
    /// The scheduler gave up on it (every attempt timed out, was refused or bounced).
    #[error("task lost: {0}")]
    Lost(String),
    /// The client could not submit it, or its output could not be fetched.
    #[error("client error: {0}")]
    Client(String),
}
