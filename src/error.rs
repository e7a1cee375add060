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
    /// Exit 10, `io`: the local file system refused (no space left, a read-only file system,
    /// permission denied). The message names the path and what to do; an interrupted restore is
    /// completed by the rerun.
    #[error("{0}")]
    LocalIo(String),
    /// Exit 1, `internal`: an unexpected failure (a bug, or local I/O of another kind).
    #[error("{0}")]
    Internal(String),
}

/// The result type of git-session's fallible operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The process exit code of the SPEC's table (`1`–`10`).
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
            Error::LocalIo(_) => 10,
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
            Error::LocalIo(_) => "io",
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
            | Error::LocalIo(message)
            | Error::Internal(message) => {
                message.push_str(". ");
                message.push_str(note);
            }
        }
        self
    }

    /// A local I/O failure, naming what was being done: [`Error::LocalIo`] (exit 10, with what to
    /// do) when the file system refused — no space, a quota, a read-only file system, permission
    /// denied — else [`Error::Internal`].
    pub fn io(context: impl std::fmt::Display, err: std::io::Error) -> Self {
        match local_io_hint(err.kind()) {
            Some(hint) => Error::LocalIo(format!("{context}: {err} — {hint}")),
            None => Error::Internal(format!("{context}: {err}")),
        }
    }

    /// Like [`Error::internal`], but [`Error::LocalIo`] when an [`std::io::Error`] the file system
    /// refused (see [`Error::io`]) is among the causes of `err` (gix and gix-pack wrap them).
    pub fn from_chain(
        context: impl std::fmt::Display,
        err: &(dyn std::error::Error + 'static),
    ) -> Self {
        let text = crate::error::chain(err);
        match local_io_kind(err).and_then(local_io_hint) {
            Some(hint) => Error::LocalIo(format!("{context}: {text} — {hint}")),
            None => Error::Internal(format!("{context}: {text}")),
        }
    }

    /// An internal error wrapping any lower-level error with context.
    pub fn internal(context: impl std::fmt::Display, err: impl std::fmt::Display) -> Self {
        Error::Internal(format!("{context}: {err}"))
    }
}

/// Render an error with its sources, like `a: b: c`.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    msg
}

/// The kind of the first [`std::io::Error`] among `err` and its causes.
pub fn local_io_kind(err: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        // gix's own error keeps its causes in a tree that `source()` does not walk.
        if let Some(io) = e
            .downcast_ref::<gix::Error>()
            .and_then(|g| g.downcast_any_ref::<std::io::Error>())
        {
            return Some(io.kind());
        }
        next = e.source();
    }
    None
}

/// What to do about a local file-system refusal of `kind`, or `None` when it is not one.
pub fn local_io_hint(kind: std::io::ErrorKind) -> Option<&'static str> {
    use std::io::ErrorKind as K;
    Some(match kind {
        K::StorageFull | K::QuotaExceeded | K::FileTooLarge => {
            "the disk is full: free some space, then run the command again (an interrupted restore \
             is completed by the rerun)"
        }
        K::ReadOnlyFilesystem => {
            "the file system is read-only: make it writable (or use another folder), then run the \
             command again"
        }
        K::PermissionDenied => {
            "permission denied: fix the folder's permissions (or run as its owner), then run the \
             command again"
        }
        _ => return None,
    })
}
