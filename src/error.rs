//! The one error type of git-session and its mapping to the exit codes of the SPEC's table.
//!
//! Every failure that reaches `main` is an [`Error`]; [`Error::exit_code`] and [`Error::kind`] are
//! exhaustive matches, so a new variant does not compile until it has a code and a JSON `kind`.

use crate::types::FullSha;

/// A failure of a command, carrying a message that says what happened and what to do.
///
/// # Security
/// Messages are built from redacted values only: URLs are shown through
/// [`RemoteUrl`](crate::types::RemoteUrl)'s `Display`, which never shows userinfo.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Exit 2, `usage`: invalid input (abbreviated SHA, bad branch name, credentials on argv,
    /// a missing variable, another session's tree, SHA-256).
    #[error("{0}")]
    Usage(String),
    /// Exit 3, `stale`: the session branch on the remote is not at the lease.
    #[error("{message}")]
    Stale {
        /// What happened, naming both ids.
        message: String,
        /// The recorded tip this sandbox expected on the remote (zero id: absent).
        lease: FullSha,
        /// The tip the remote has now (zero id: absent).
        remote_tip: FullSha,
    },
    /// Exit 4, `auth`: credentials refused (HTTP 401/403).
    #[error("{0}")]
    Auth(String),
    /// Exit 5, `network`: the remote is unreachable or unusable after bounded retries
    /// (also TLS failures and servers without protocol v2).
    #[error("{0}")]
    Network(String),
    /// Exit 5, `network`: the remote answered something that breaks the protocol (not retried).
    #[error("{0}")]
    Protocol(String),
    /// Exit 6, `integrity`: wrong object, unsafe tree entry, corrupt or truncated stream.
    #[error("{0}")]
    Integrity(String),
    /// Exit 7, `conflict`: other content or uncommitted work in the way.
    #[error("{0}")]
    Conflict(String),
    /// Exit 8, `not_found`: the commit or the repository does not exist on the remote.
    #[error("{0}")]
    NotFound(String),
    /// Exit 9, `rejected`: the remote refused the update for its own reasons.
    #[error("{0}")]
    Rejected(String),
    /// Exit 1, `internal`: an unexpected failure (local I/O, a bug).
    #[error("{0}")]
    Internal(String),
}

/// The result type of git-session's fallible operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The process exit code of the SPEC's table (`1`–`9`).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Internal(_) => 1,
            Error::Usage(_) => 2,
            Error::Stale { .. } => 3,
            Error::Auth(_) => 4,
            Error::Network(_) | Error::Protocol(_) => 5,
            Error::Integrity(_) => 6,
            Error::Conflict(_) => 7,
            Error::NotFound(_) => 8,
            Error::Rejected(_) => 9,
        }
    }

    /// The `error.kind` of the JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Internal(_) => "internal",
            Error::Usage(_) => "usage",
            Error::Stale { .. } => "stale",
            Error::Auth(_) => "auth",
            Error::Network(_) | Error::Protocol(_) => "network",
            Error::Integrity(_) => "integrity",
            Error::Conflict(_) => "conflict",
            Error::NotFound(_) => "not_found",
            Error::Rejected(_) => "rejected",
        }
    }

    /// Whether a retry of the same request may succeed (connect errors, resets, timeouts, 5xx, 429).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Network(_))
    }

    /// The same error with `note` appended to its message as a new sentence (what became of local
    /// work, say); the kind and the exit code stay.
    pub fn with_note(mut self, note: &str) -> Self {
        match &mut self {
            Error::Stale { message, .. }
            | Error::Usage(message)
            | Error::Auth(message)
            | Error::Network(message)
            | Error::Protocol(message)
            | Error::Integrity(message)
            | Error::Conflict(message)
            | Error::NotFound(message)
            | Error::Rejected(message)
            | Error::Internal(message) => {
                message.push_str(". ");
                message.push_str(note);
            }
        }
        self
    }

    /// An internal error for a local I/O failure, naming what was being done.
    pub fn io(context: impl std::fmt::Display, err: std::io::Error) -> Self {
        Error::Internal(format!("{context}: {err}"))
    }

    /// An internal error wrapping any lower-level error with context.
    pub fn internal(context: impl std::fmt::Display, err: impl std::fmt::Display) -> Self {
        Error::Internal(format!("{context}: {err}"))
    }
}
