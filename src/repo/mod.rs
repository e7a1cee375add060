//! The local repository: its layout and config ([`layout`]), the session record ([`session`]),
//! the template record of a baked tree ([`template`]), the lease decision ([`lease`]) and the check that holds plain `git push` to it
//! ([`prepush`]), the signatures `SIGNING_REQUIRED` asks of what a push uploads ([`signed`]), and
//! what git is in the middle of ([`operations`]).
//!
//! Opened with nothing from user or system git config (SPEC rule 8). Knows no wire and no
//! command.

mod config_lock;
pub mod dirs;
pub mod layout;
pub mod lease;
pub mod lfs;
pub mod operations;
pub mod prepush;
pub mod session;
pub mod signed;
pub mod template;
pub mod worktree;

use std::path::Path;

/// The file in the git dir of an archive-restored tree whose history is not attached yet (a
/// restore without `READ_URL`); the first command with `READ_URL` attaches it and removes the file.
pub const HISTORY_PROMISED: &str = "git-session-history-promised";

use gix::bstr::BString;

use crate::error::{Error, Result};

/// Open a repository with nothing from user or system configuration (SPEC rule 8).
///
/// # Errors
/// [`Error::Internal`] when the git dir cannot be opened.
pub fn open(git_dir: &Path) -> Result<gix::Repository> {
    open_with(git_dir, std::iter::empty::<BString>())
}

/// The files of a git dir that gix (or git-session) reads whole when present.
const READ_WHOLE: [&str; 11] = [
    "HEAD",
    "config",
    "config.worktree",
    "info/attributes",
    "hooks/pre-push",
    "packed-refs",
    "shallow",
    "index",
    "commondir",
    "objects/info/alternates",
    "info/exclude",
];

/// The first of what every git dir holds (`HEAD`, `objects/`, `refs/`) that `git_dir` lacks:
/// a local fault (exit 7) when the open fails, not an internal error.
fn missing_part(git_dir: &Path) -> Option<&'static str> {
    ["HEAD", "objects", "refs"]
        .into_iter()
        .find(|part| std::fs::symlink_metadata(git_dir.join(part)).is_err())
}

/// Each of [`READ_WHOLE`] that is there must be (or lead by symlink to) a regular file: one
/// pointed at `/dev/zero` or a FIFO would be read without end, or block, by every command (a
/// root boot included). Called before every open.
///
/// # Errors
/// [`Error::Conflict`] (exit 7) naming the file.
pub fn check_read_files(git_dir: &Path) -> Result<()> {
    check_regular_files(git_dir, READ_WHOLE.iter().copied())
}

/// [`check_read_files`] for `names` (relative to `git_dir`), e.g. the session branch's refs.
///
/// # Errors
/// [`Error::Conflict`] (exit 7) naming the file.
pub fn check_regular_files<'a>(
    git_dir: &Path,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    for name in names {
        let path = git_dir.join(name);
        match std::fs::metadata(&path) {
            Ok(meta) if !meta.is_file() => {
                return Err(Error::conflict(format!(
                    "{} is not a regular file (a device, a FIFO or a folder, or a symlink to \
                     one): git reads it whole, so nothing reads it; put back the file git \
                     wrote, or remove it if git can do without it",
                    path.display()
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The repository configuration nothing of which may run or redirect (SPEC rule 8): `[include]`
/// and `[includeIf]` (not followed anyway: includes are off), every `filter.<driver>` (its
/// `clean`, `smudge` and `process` commands), and these keys of `[core]`.
const UNSAFE_SECTIONS: [&str; 3] = ["filter", "include", "includeIf"];
const UNSAFE_CORE_KEYS: [&str; 4] = ["fsmonitor", "hooksPath", "worktree", "sshCommand"];

/// [`open`] with `overrides` (`key=value`) applied on top. The only function in the crate that
/// opens a repository: every command reads repositories through it.
///
/// Nothing of the repository's own config can make this process run a program or work on
/// another folder, however the config was edited (a baked template's included): user, system
/// and environment config are not read, includes are not followed, filter drivers and
/// `core.fsmonitor`, `core.hooksPath`, `core.sshCommand` are removed from the configuration this
/// process sees, and the work tree is always the git dir's parent, whatever `core.worktree` says.
/// Hooks never run: gix runs none, and git-session runs only its own pre-push check, from git.
///
/// # Errors
/// [`Error::Internal`] when the git dir cannot be opened.
pub fn open_with<I, S>(git_dir: &Path, overrides: I) -> Result<gix::Repository>
where
    I: IntoIterator<Item = S>,
    S: Into<BString>,
{
    check_read_files(git_dir)?;
    // Restore runs as root on trees it hands to their owner (rule 9): gix then opens them with
    // reduced trust (their config cannot make it run anything), which also caps every object at
    // 16 MiB. The cap is lifted; the sizes of what was received are bounded by `PackLimits`.
    // The index's checksum is always verified (`index.skipHash` in the repository's config would
    // turn that off), and every object is the one its id names (no `refs/replace/`).
    let mut all: Vec<BString> = vec![
        "gitoxide.objects.allocLimitIfReducedTrust=0".into(),
        "index.skipHash=false".into(),
        "core.useReplaceRefs=false".into(),
    ];
    all.extend(overrides.into_iter().map(Into::into));
    let options = gix::open::Options::isolated().config_overrides(all);
    let failed = |e: &(dyn std::error::Error + 'static)| {
        Error::from_chain(format!("opening {}", git_dir.display()), e)
    };
    let mut repo = gix::open_opts(git_dir, options).map_err(|e| match missing_part(git_dir) {
        // Removed or moved after git wrote it: the tree's fault, not ours.
        Some(part) => Error::conflict(format!(
            "{} is missing: git cannot open {} as a repository without it; put it back, or \
             restore into a new folder",
            git_dir.join(part).display(),
            git_dir.display()
        )),
        None => failed(&e),
    })?;
    if repo.workdir().is_some()
        && let Some(parent) = dirs::workdir_of(git_dir)
    {
        // `core.worktree` chose the work tree at open: this tree's own folder instead.
        repo.set_workdir(parent.to_path_buf())
            .map_err(|e| failed(&e))?;
    }
    let mut config = repo.config_snapshot_mut();
    let mut unsafe_sections = Vec::new();
    for name in UNSAFE_SECTIONS {
        if let Some(sections) = config.sections_and_ids_by_name(name) {
            unsafe_sections.extend(sections.map(|(_, id)| id));
        }
    }
    for id in unsafe_sections {
        config.remove_section_by_id(id);
    }
    let cores: Vec<_> = config
        .sections_and_ids_by_name("core")
        .map(|sections| sections.map(|(_, id)| id).collect())
        .unwrap_or_default();
    for id in cores {
        if let Some(mut section) = config.section_mut_by_id(id) {
            for key in UNSAFE_CORE_KEYS {
                while section.remove(key).is_some() {}
            }
        }
    }
    config.commit().map_err(|e| failed(&e))?;
    Ok(repo)
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
        let commit = gix::objs::CommitRefIter::from_bytes(data.data, id.kind());
        queue.extend(commit.parent_ids());
    }
    Ok(false)
}
