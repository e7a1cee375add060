//! `save`, first half: stage everything in the work tree and commit it on the session branch
//! (like `git add -A && git commit`), then rewrite the index so `git status` is clean.
//!
//! The push is the second half ([`crate::push`]).

use std::path::Path;

use crate::error::Result;
use crate::types::{FullSha, SessionBranch};

/// What to commit with.
pub struct CommitOptions<'a> {
    /// The commit message.
    pub message: &'a str,
    /// Strings that must not be committed (the session tokens in their encodings, see
    /// [`RemoteUrl::secret_forms`](crate::types::RemoteUrl::secret_forms)).
    pub secrets: &'a [String],
}

/// What staging and committing did.
#[derive(Debug)]
pub struct Committed {
    /// The new commit, or `None` when nothing changed.
    pub commit: Option<FullSha>,
    /// Warnings for the user (files over 50 MiB and nested repositories left out).
    pub warnings: Vec<String>,
}

/// Stage every change in `workdir` (additions, edits, deletions, exec-bit changes, symlinks;
/// honouring `.gitignore` at every level, `.git/info/exclude`, `core.excludesFile`), commit it on
/// `refs/heads/<branch>` on top of `HEAD`, and write the index.
///
/// # Errors
/// [`Error::Integrity`](crate::Error::Integrity) (exit 6) when a file to commit contains a secret
/// (nothing is committed); [`Error::Internal`](crate::Error::Internal) on I/O failures.
pub fn stage_and_commit(
    workdir: &Path,
    branch: &SessionBranch,
    opts: &CommitOptions<'_>,
) -> Result<Committed> {
    let _ = (workdir, branch, opts);
    Err(crate::Error::Internal("save is not implemented yet".into()))
}
