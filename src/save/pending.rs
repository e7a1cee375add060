//! What `save` would commit now, for `status` (and `watch`): the changed paths found the way
//! `save` finds them and what would block it, without reading file contents or writing anything.

use std::path::Path;

use super::base::{bytes_to_path, fail, head_tree_of, open};
use super::checks::{refuse_unfinished_operations, session_head};
use super::{changes, config};
use crate::error::{Error, Result};
use crate::output::json::PendingChange;
use crate::types::SessionBranch;

/// What `save` would commit now, for `status`.
#[derive(Debug, Clone)]
pub struct PendingChanges {
    /// The changed paths.
    pub changes: Vec<PendingChange>,
    /// Why `save` would refuse until the user acts (an unfinished merge, unmerged paths, …): its
    /// exit-7 problem (without "then save again").
    pub blocked: Option<String>,
}

/// The paths `save` would consider changed, found the way `save` finds them (stat data, staged
/// changes, untracked files honouring the ignore rules), without reading file contents or writing
/// anything. A file whose stat changed but whose content did not is listed too (as `git status`
/// would before refreshing).
///
/// # Errors
/// [`Error::Conflict`] when `HEAD` is not on the session branch; [`Error::Internal`] otherwise.
pub fn pending_changes(workdir: &Path, branch: &SessionBranch) -> Result<PendingChanges> {
    let dirs = crate::repo::dirs::GitDirs::of_or_main(workdir);
    let git_dir = dirs.git_dir;
    let user = config::UserConfig::load(&dirs.common_dir, workdir, &config::ProcessEnv);
    let repo = open(&git_dir, user.excludes_file.as_deref())?;
    let head = session_head(&repo, branch)?;
    let head_tree = head_tree_of(&repo, head)?;
    let index = repo
        .index_or_empty()
        .map_err(|e| fail("reading the index", e))?;
    let blocked = match refuse_unfinished_operations(&git_dir, &index) {
        Ok(()) => None,
        Err(Error::Conflict(c)) => Some(c.problem),
        Err(e) => return Err(e),
    };
    let plan = changes::collect(&repo, &index, head_tree)?;
    let tree = repo
        .find_tree(head_tree)
        .map_err(|e| fail("reading HEAD's tree", e))?;
    let mut out = Vec::new();
    for (path, target) in &plan.targets {
        let in_head_entry = tree
            .lookup_entry_by_path(bytes_to_path(path.as_ref()))
            .ok()
            .flatten();
        let in_head = in_head_entry.is_some();
        let file = workdir.join(bytes_to_path(path.as_ref()));
        let on_disk = std::fs::symlink_metadata(&file).is_ok();
        // An LFS file whose content is HEAD's pointer's object is no change (git with git-lfs
        // cleans it to the same pointer), though its bytes differ from the blob.
        let lfs_same = in_head_entry
            .and_then(|e| e.object().ok())
            .filter(|blob| blob.data.len() as u64 <= crate::types::lfs::MAX_POINTER_BYTES)
            .and_then(|blob| crate::types::lfs::Pointer::parse(&blob.data))
            .is_some_and(|pointer| crate::repo::lfs::file_holds(&file, &pointer));
        if lfs_same {
            continue;
        }
        let status = match target {
            changes::Target::Remove => "D",
            _ if !in_head => "A",
            changes::Target::Worktree if !on_disk => "D",
            _ => "M",
        };
        if status == "D" && !in_head {
            continue;
        }
        out.push(PendingChange {
            status,
            path: path.to_string(),
        });
    }
    Ok(PendingChanges {
        changes: out,
        blocked,
    })
}
