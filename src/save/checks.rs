//! What must hold before `save` stages anything (and what `status` reports as blocking it):
//! `HEAD` on the session branch, no merge, cherry-pick, revert, rebase or bisect in progress, no
//! unmerged paths. Each refusal (exit 7) says how to get back without losing a commit.

use std::path::Path;

use super::base::fail;
use crate::error::{Error, Result};
use crate::hint::Hint;
use crate::repo::operations::{commits_off_branch, stopped_operation};
use crate::types::{FullSha, SessionBranch};

/// The commit `HEAD` is at, checking that `HEAD` is on the session branch.
///
/// # Errors
/// [`Error::Conflict`] when it is not, saying how to get back without losing commits (ending in
/// [`Error::save_refused`]).
pub(super) fn session_head(
    repo: &gix::Repository,
    branch: &SessionBranch,
) -> Result<gix::ObjectId> {
    let full = branch.full_ref();
    let head_name = repo.head_name().map_err(|e| fail("reading HEAD", e))?;
    let off_branch = match head_name {
        Some(name) if name.as_bstr() == full.as_str() => None,
        _ if let Some((what, dir, finish)) = stopped_operation(repo.git_dir()) => {
            return Err(Error::save_refused(format!(
                "{what} is in progress (.git/{dir}), so HEAD is not on the session branch {full}: \
                 finish it with {finish}"
            )));
        }
        _ if repo.git_dir().join("BISECT_START").exists() => {
            return Err(Error::save_refused(format!(
                "a bisect is in progress (.git/BISECT_START), so HEAD is not on the session branch \
                 {full}: end it with {}{}",
                Hint::BisectReset,
                commits_off_branch(repo, branch)
                    .map(|head| format!(
                        ", then bring over the commits made during it ({})",
                        Hint::Merge(FullSha::from_id(head))
                    ))
                    .unwrap_or_default()
            )));
        }
        Some(name) => Some(format!("HEAD is on {name}")),
        None => Some("HEAD is detached".to_owned()),
    };
    if let Some(where_) = off_branch {
        return Err(Error::save_refused(format!(
            "{where_}, not on the session branch {full}: {}",
            switch_back(repo, branch)
        )));
    }
    let reference = repo
        .try_find_reference(full.as_str())
        .map_err(|e| fail(format!("reading {full}"), e))?;
    let Some(mut reference) = reference else {
        return Err(Error::conflict(format!(
            "the session branch {full} has no commit yet: its history must be fetched before saving"
        )));
    };
    Ok(reference
        .peel_to_id()
        .map_err(|e| fail(format!("reading {full}"), e))?
        .detach())
}

/// How to get `HEAD` back onto the session branch: `git switch`, and when `HEAD` holds commits the
/// branch lacks, a `git merge` of them afterwards (a fast-forward when it can be), so that none is
/// left behind; local changes in the way are stashed first and taken back last.
fn switch_back(repo: &gix::Repository, branch: &SessionBranch) -> String {
    let switch = format!("switch back with {}", Hint::Switch(branch.clone()));
    let then = commits_off_branch(repo, branch)
        .map(|head| {
            format!(
                ", then bring over the commits made there with {}",
                Hint::Merge(FullSha::from_id(head))
            )
        })
        .unwrap_or_default();
    format!(
        "{switch}{then} (should git refuse over local changes, run {} first and {} at the end)",
        Hint::Stash,
        Hint::StashPop
    )
}

/// Refuse to save in the middle of a merge, cherry-pick or revert, or with unmerged paths: `git
/// commit` would write a merge commit or refuse, and a plain commit of the work tree would publish
/// conflict markers or drop the merged-in parent.
///
/// # Errors
/// [`Error::Conflict`] (exit 7), saying how to finish or abort.
pub(super) fn refuse_unfinished_operations(git_dir: &Path, index: &gix::index::File) -> Result<()> {
    let or = |finish: Hint, abort: Hint| format!("{finish} (or {abort})");
    let operation = [
        ("MERGE_HEAD", "a merge", Hint::Commit, Hint::MergeAbort),
        (
            "CHERRY_PICK_HEAD",
            "a cherry-pick",
            Hint::CherryPickContinue,
            Hint::CherryPickAbort,
        ),
        (
            "REVERT_HEAD",
            "a revert",
            Hint::RevertContinue,
            Hint::RevertAbort,
        ),
    ]
    .into_iter()
    .find(|(file, ..)| git_dir.join(file).exists())
    .map(|(file, what, finish, abort)| (file, what, or(finish, abort)))
    .or_else(|| {
        git_dir.join("sequencer").exists().then(|| {
            (
                "sequencer",
                "a cherry-pick or revert of several commits",
                format!(
                    "{} or {} (or {} to stop there)",
                    Hint::CherryPickContinue,
                    Hint::RevertContinue,
                    Hint::CherryPickQuit
                ),
            )
        })
    })
    .or_else(|| stopped_operation(git_dir).map(|(what, dir, finish)| (dir, what, finish)));
    let unmerged: std::collections::BTreeSet<String> = index
        .entries()
        .iter()
        .filter(|e| e.stage_raw() != 0)
        .map(|e| e.path(index).to_string())
        .collect();
    if !unmerged.is_empty() {
        let shown: Vec<&str> = unmerged.iter().take(5).map(String::as_str).collect();
        let then = match operation {
            Some((file, what, finish)) => {
                format!(", then finish {what} (.git/{file}) with {finish}")
            }
            None => " (or undo the operation that made them)".to_owned(),
        };
        return Err(Error::save_refused(format!(
            "{} path(s) are unmerged ({}{}): resolve the conflicts and mark them resolved ({}){then}",
            unmerged.len(),
            shown.join(", "),
            if unmerged.len() > shown.len() {
                ", …"
            } else {
                ""
            },
            Hint::AddUpdate
        )));
    }
    if let Some((file, what, finish)) = operation {
        return Err(Error::save_refused(format!(
            "{what} is in progress (.git/{file}): finish it with {finish}"
        )));
    }
    Ok(())
}
