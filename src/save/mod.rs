//! `save`, first half: stage everything in the work tree and commit it on the session branch
//! (like `git add -A && git commit`), then rewrite the index so `git status` is clean.
//!
//! The push is the second half ([`crate::push`]).
//!
//! The steps, each in its file: `checks` (what must hold first: `HEAD` on the session branch,
//! no operation stopped halfway), `changes` (what changed, like `git status`), `stage` (the
//! changed files hashed into blobs, secrets refused), `commit` (message, identities, tree,
//! commit, branch), `index` (the index rewritten). `config` gives the identities and the
//! excludes file; `index_lock` holds `index.lock` from reading the index to writing it.
//! [`pending_changes`] is `status`'s view of the same steps, writing nothing.

use std::path::Path;

use crate::error::Result;
use crate::hint::Hint;
use crate::types::{FullSha, SessionBranch};
use base::{fail, head_tree_of, open};
use checks::{refuse_unfinished_operations, session_head};
use commit::{commit_message, identities, new_tree, update_branch, write_commit};
use index::{hashed_stats, write_index};

mod base;
mod changes;
mod checks;
mod commit;
mod config;
mod index;
mod index_lock;
mod pending;
pub(crate) mod stage;

pub use crate::output::json::PendingChange;
pub use commit::CommitOptions;
pub use pending::{PendingChanges, pending_changes};
pub use stage::MAX_FILE_BYTES;

/// What staging and committing did.
#[derive(Debug)]
pub struct Committed {
    /// The new commit, or `None` when nothing changed.
    pub commit: Option<FullSha>,
    /// Warnings for the user (files over 50 MiB and nested repositories left out).
    pub warnings: Vec<String>,
    /// Whether the new commit is signed.
    pub signed: bool,
    /// The key that signed it, when it is signed.
    pub signing_key: Option<crate::signing::KeyDescription>,
}

/// Stage every change in `workdir` (additions, edits, deletions, exec-bit changes, symlinks;
/// honouring `.gitignore` at every level, `.git/info/exclude`, `core.excludesFile`), commit it on
/// `refs/heads/<branch>` on top of `HEAD`, and write the index.
///
/// Only new and changed files are read (found by stat data, like `git status`); the commit's tree is
/// `HEAD^{tree}` with those edits, which is what `git add -A && git commit` writes. Objects are
/// written first, then the branch (with a reflog entry), then the index (from the new tree, with the
/// stat data of the work tree files, so `git status` is clean and fast afterwards).
///
/// # Errors
/// [`Error::Integrity`](crate::error::Error::Integrity) (exit 6) when a file to commit contains a
/// secret (nothing is committed); [`Error::Usage`](crate::error::Error::Usage) for an empty message
/// or a malformed `GIT_AUTHOR_DATE`/`GIT_COMMITTER_DATE`;
/// [`Error::Conflict`](crate::error::Error::Conflict) when `HEAD` is not on the session branch, the
/// index is locked by another git process, a merge, cherry-pick or revert is in progress, or paths
/// are unmerged; [`Error::Internal`](crate::error::Error::Internal) on I/O failures.
pub fn stage_and_commit(
    workdir: &Path,
    branch: &SessionBranch,
    opts: &CommitOptions<'_>,
) -> Result<Committed> {
    stage_and_commit_in(workdir, branch, opts, &config::ProcessEnv)
}

fn stage_and_commit_in(
    workdir: &Path,
    branch: &SessionBranch,
    opts: &CommitOptions<'_>,
    env: &dyn config::Env,
) -> Result<Committed> {
    let message = commit_message(opts)?;
    let dirs = crate::repo::dirs::GitDirs::of_or_main(workdir);
    let git_dir = dirs.git_dir.clone();
    let user = config::UserConfig::load(&dirs.common_dir, workdir, env);
    let mut warnings = user.warnings.clone();
    let (author, committer) = identities(&user, env, opts.secrets)?;

    let repo = open(&git_dir, user.excludes_file.as_deref())?;
    let head = session_head(&repo, branch)?;
    let head_tree_id = head_tree_of(&repo, head)?;
    let head_tree = repo
        .find_tree(head_tree_id)
        .map_err(|e| fail(format!("reading the tree of HEAD {head}"), e))?;

    // Held from here to the end, like `git commit` does: no other git process writes the index
    // meanwhile. Dropping it (on any error) removes it.
    let mut index_lock = index_lock::IndexLock::acquire(&dirs)?;
    let index = repo
        .index_or_empty()
        .map_err(|e| fail("reading the index", e))?;
    refuse_unfinished_operations(&git_dir, &index)?;

    let plan = changes::collect(&repo, &index, head_tree_id)?;
    let staged = stage::stage(&repo, &index, workdir, &plan, &head_tree, opts.secrets)?;
    warnings.extend(staged.warnings.iter().cloned());
    tracing::debug!(
        removals = staged.removals.len(),
        upserts = staged.upserts.len(),
        "save: changes found"
    );
    let Some(tree) = new_tree(&repo, head_tree_id, &staged)? else {
        // The index disagreed with `HEAD` although the tree is the same: a save killed after
        // moving the branch, before writing the index. Write it now, so `git status` is clean.
        if !plan.targets.is_empty() {
            let hashed = hashed_stats(&staged);
            let fresh = &plan.fresh_stats;
            if let Err(e) = write_index(&repo, index_lock, head_tree_id, &index, fresh, &hashed) {
                warnings.push(format!(
                    "the index could not be rewritten ({e}); once that is cleared, {} repairs it",
                    Hint::ResetIndex
                ));
            }
        }
        return Ok(Committed {
            commit: None,
            warnings,
            signed: false,
            signing_key: None,
        });
    };

    let identities = (author, committer.clone());
    let (commit_id, signing_key) =
        write_commit(&repo, tree, head, identities, &message, opts.signer)?;
    // Listed before the branch moves: a push of this commit uploads them first.
    crate::repo::lfs::add_pending(&git_dir, &staged.lfs)?;
    index_lock.ref_update_begins(&branch.full_ref(), commit_id)?;
    update_branch(&repo, branch, head, commit_id, &committer, &message)?;
    index_lock.ref_update_ended();
    let hashed = hashed_stats(&staged);
    if let Err(e) = write_index(&repo, index_lock, tree, &index, &plan.fresh_stats, &hashed) {
        warnings.push(format!(
            "committed {commit_id}, but the index could not be rewritten ({e}); once that is cleared, {} repairs it",
            Hint::ResetIndex
        ));
    }
    Ok(Committed {
        commit: Some(FullSha::from_id(commit_id)),
        warnings,
        signed: opts.signer.is_some(),
        signing_key,
    })
}
