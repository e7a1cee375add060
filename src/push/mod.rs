//! The receive-pack client: a fast-forward-only push of the session branch against the lease.

use crate::error::{Error, Result};
use crate::http::UrlSource;
use crate::session::Session;
use crate::types::{FullSha, SessionBranch};

/// What a push did.
#[derive(Debug, Clone)]
pub struct PushOutcome {
    /// The session branch.
    pub branch: SessionBranch,
    /// The remote tip now (the new lease): what the backend stores as the session's current tip.
    pub tip: FullSha,
    /// The remote tip before (the lease the push was made against).
    pub previous_tip: FullSha,
    /// Whether anything was uploaded and the ref moved.
    pub pushed: bool,
    /// Warnings for the user.
    pub warnings: Vec<String>,
}

/// Push the session branch.
///
/// # Errors
/// Stale (3), auth (4), network (5), conflict (7), rejected (9).
pub fn push(session: &mut Session, source: &UrlSource) -> Result<PushOutcome> {
    let _ = (session, source);
    Err(Error::Internal("push is not implemented yet".into()))
}
