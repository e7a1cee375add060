//! The local repository: its layout and config ([`layout`]), the session record ([`session`]),
//! the template record of a baked tree ([`template`]), the lease decision ([`lease`]) and the check that holds plain `git push` to it
//! ([`prepush`]), and what git is in the middle of ([`operations`]).
//!
//! Opened with nothing from user or system git config (SPEC rule 8). Knows no wire and no
//! command.

pub mod layout;
pub mod lease;
pub mod operations;
pub mod prepush;
pub mod session;
pub mod template;

use std::path::Path;

use crate::error::{Error, Result};

/// Open a repository with nothing from user or system configuration (SPEC rule 8).
///
/// # Errors
/// [`Error::Internal`] when the git dir cannot be opened.
pub fn open(git_dir: &Path) -> Result<gix::Repository> {
    // Restore runs as root on trees it hands to their owner (rule 9): gix then opens them with
    // reduced trust (their config cannot make it run anything), which also caps every object at
    // 16 MiB. The cap is lifted; the sizes of what was received are bounded by `PackLimits`.
    let options = gix::open::Options::isolated()
        .config_overrides(["gitoxide.objects.allocLimitIfReducedTrust=0"]);
    gix::open_opts(git_dir, options).map_err(|e| {
        Error::internal(
            format!("opening {}", git_dir.display()),
            crate::error::chain(&e),
        )
    })
}

/// Whether `descendant` is `ancestor` or has it in its history, walking parents through the local
/// object database (missing parents — a shallow boundary — end the walk).
///
/// # Errors
/// [`Error::Internal`] when an object cannot be read.
pub fn descends_from(
    repo: &gix::Repository,
    descendant: gix::ObjectId,
    ancestor: gix::ObjectId,
) -> Result<bool> {
    let mut seen = std::collections::HashSet::new();
    let mut queue = vec![descendant];
    let mut buf = Vec::new();
    while let Some(id) = queue.pop() {
        if id == ancestor {
            return Ok(true);
        }
        if !seen.insert(id) {
            continue;
        }
        let Ok(Some(data)) = gix::objs::Find::try_find(&repo.objects, &id, &mut buf) else {
            continue;
        };
        if data.kind != gix::objs::Kind::Commit {
            continue;
        }
        let commit = gix::objs::CommitRefIter::from_bytes(data.data, gix::hash::Kind::Sha1);
        queue.extend(commit.parent_ids());
    }
    Ok(false)
}
