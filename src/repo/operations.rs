//! What git is in the middle of in the local repository, as `save`, `push` and `status` must
//! know before they act: a stopped rebase or `git am`, and commits made off the session branch.

use std::path::Path;

use crate::hint::Hint;
use crate::types::SessionBranch;

/// A rebase or `git am` stopped midway (its state folder in the git dir): what it is, its folder,
/// and how to finish it. A rebase leaves `HEAD` off the branch, and `git switch` is refused until
/// it ends; `git am` stops on the branch.
pub fn stopped_operation(git_dir: &Path) -> Option<(&'static str, &'static str, String)> {
    if git_dir.join("rebase-merge").is_dir() {
        return Some(("a rebase", "rebase-merge", rebase_finish()));
    }
    let apply = git_dir.join("rebase-apply");
    if apply.join("applying").exists() {
        return Some((
            "git am",
            "rebase-apply",
            format!("{} (or {})", Hint::AmContinue, Hint::AmAbort),
        ));
    }
    apply
        .is_dir()
        .then(|| ("a rebase", "rebase-apply", rebase_finish()))
}

/// How to finish a stopped rebase. `--abort` resets the work tree, so it is flagged.
fn rebase_finish() -> String {
    format!(
        "{} (or {}, which also drops uncommitted changes)",
        Hint::RebaseContinue,
        Hint::RebaseAbort
    )
}

/// `HEAD`'s commit when it is off the session branch and holds commits the branch lacks (made on
/// a detached `HEAD`, another branch, or during a bisect): they would be left behind.
pub fn commits_off_branch(repo: &gix::Repository, branch: &SessionBranch) -> Option<gix::ObjectId> {
    let head = repo.head_id().ok().map(|id| id.detach());
    let tip = repo
        .try_find_reference(branch.full_ref().as_str())
        .ok()
        .flatten()
        .and_then(|mut r| r.peel_to_id().ok())
        .map(|id| id.detach());
    match (head, tip) {
        (Some(head), Some(tip))
            if head != tip && !super::descends_from(repo, tip, head).unwrap_or(false) =>
        {
            Some(head)
        }
        _ => None,
    }
}
