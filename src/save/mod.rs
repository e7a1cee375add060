//! `save`, first half: stage everything in the work tree and commit it on the session branch
//! (like `git add -A && git commit`), then rewrite the index so `git status` is clean.
//!
//! The push is the second half ([`crate::push`]).

use std::collections::HashMap;
use std::path::Path;

use gix::bstr::{BStr, BString};

use crate::error::{Error, Refusal, Result};
use crate::repo::operations::{commits_off_branch, stopped_operation};
use crate::types::{FullSha, SessionBranch};
use base::{bytes_to_path, fail};

mod base;
mod changes;
mod config;
mod index_lock;
pub(crate) mod stage;

pub use crate::output::json::PendingChange;
pub use stage::MAX_FILE_BYTES;

/// What to commit with.
pub struct CommitOptions<'a> {
    /// The commit message.
    pub message: &'a str,
    /// Strings that must not be committed (the session tokens in their encodings, see
    /// [`RemoteUrl::secret_forms`](crate::types::RemoteUrl::secret_forms)).
    pub secrets: &'a [String],
    /// Who owns the session: added to the message as trailers (`Session-Sandbox:`, …).
    pub owner: &'a crate::types::Owner,
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
/// Only new and changed files are read (found by stat data, like `git status`); the commit's tree is
/// `HEAD^{tree}` with those edits, which is what `git add -A && git commit` writes. Objects are
/// written first, then the branch (with a reflog entry), then the index (from the new tree, with the
/// stat data of the work tree files, so `git status` is clean and fast afterwards).
///
/// # Errors
/// [`Error::Integrity`] (exit 6) when a file to commit contains a secret
/// (nothing is committed); [`Error::Usage`] for an empty message or a
/// malformed `GIT_AUTHOR_DATE`/`GIT_COMMITTER_DATE`; [`Error::Conflict`]
/// when `HEAD` is not on the session branch, the index is locked by another git process, a merge,
/// cherry-pick or revert is in progress, or paths are unmerged;
/// [`Error::Internal`] on I/O failures.
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
    let git_dir = workdir.join(".git");
    let user = config::UserConfig::load(&git_dir, workdir, env);
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
    let mut index_lock = index_lock::IndexLock::acquire(repo.git_dir())?;
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
                    "the index could not be rewritten ({e}); `git reset` repairs it"
                ));
            }
        }
        return Ok(Committed {
            commit: None,
            warnings,
        });
    };

    let commit_id = write_commit(&repo, tree, head, author, committer.clone(), &message)?;
    // Listed before the branch moves: a push of this commit uploads them first.
    crate::repo::lfs::add_pending(&git_dir, &staged.lfs)?;
    index_lock.ref_update_begins(&branch.full_ref(), commit_id)?;
    update_branch(&repo, branch, head, commit_id, &committer, &message)?;
    index_lock.ref_update_ended();
    let hashed = hashed_stats(&staged);
    if let Err(e) = write_index(&repo, index_lock, tree, &index, &plan.fresh_stats, &hashed) {
        warnings.push(format!(
            "committed {commit_id}, but the index could not be rewritten ({e}); `git reset` repairs it"
        ));
    }
    Ok(Committed {
        commit: Some(FullSha::from_id(commit_id)),
        warnings,
    })
}

/// The commit message, cleaned like `git commit -m` does, with the owners' trailers.
///
/// # Errors
/// [`Error::Usage`] when nothing is left of it; [`Error::Integrity`] when it or an owner holds a
/// secret.
fn commit_message(opts: &CommitOptions<'_>) -> Result<String> {
    let message = clean_message(opts.message)
        .ok_or_else(|| Error::Usage(Refusal::Invalid, "the commit message is empty".into()))?;
    if opts.secrets.iter().any(|s| message.contains(s.as_str())) {
        return Err(Error::Integrity(
            "the commit message contains a session token: nothing was committed; write the message \
             without it"
                .into(),
        ));
    }
    if let Some(var) = opts.owner.holding_secret(opts.secrets) {
        return Err(Error::Integrity(format!(
            "{var} contains a session token: nothing was committed; set it without the token"
        )));
    }
    Ok(opts.owner.add_trailers(&message))
}

/// The author and the committer of the new commit, dated now unless the environment says otherwise.
///
/// # Errors
/// [`Error::Usage`] for a malformed `GIT_<ROLE>_DATE`; [`Error::Integrity`] when a name or email
/// holds a secret.
fn identities(
    user: &config::UserConfig,
    env: &dyn config::Env,
    secrets: &[String],
) -> Result<(gix::actor::Signature, gix::actor::Signature)> {
    let now = gix::date::Time::now_local_or_utc();
    let author = config::signature(config::Role::Author, user, env, now)?;
    let committer = config::signature(config::Role::Committer, user, env, now)?;
    for (role, who) in [("author", &author), ("committer", &committer)] {
        if secrets.iter().any(|s| {
            who.name.to_string().contains(s.as_str()) || who.email.to_string().contains(s.as_str())
        }) {
            return Err(Error::Integrity(format!(
                "the {role} name or email contains a session token: nothing was committed; set \
                 GIT_{}_NAME/EMAIL or user.name/user.email without it",
                role.to_uppercase()
            )));
        }
    }
    Ok((author, committer))
}

/// The tree of the commit `head`.
fn head_tree_of(repo: &gix::Repository, head: gix::ObjectId) -> Result<gix::ObjectId> {
    Ok(repo
        .find_commit(head)
        .and_then(|c| c.tree_id())
        .map_err(|e| fail(format!("reading the HEAD commit {head}"), e))?
        .detach())
}

/// Write the commit of `tree` on top of `head`.
fn write_commit(
    repo: &gix::Repository,
    tree: gix::ObjectId,
    head: gix::ObjectId,
    author: gix::actor::Signature,
    committer: gix::actor::Signature,
    message: &str,
) -> Result<gix::ObjectId> {
    let commit = gix::objs::Commit {
        tree,
        parents: std::iter::once(head).collect(),
        author,
        committer,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    Ok(repo
        .write_object(&commit)
        .map_err(|e| fail("writing the commit", e))?
        .detach())
}

/// The object and the stat data (taken before reading) of every work tree file that was hashed.
fn hashed_stats(
    staged: &stage::Staged,
) -> HashMap<&BStr, (gix::ObjectId, gix::index::entry::Stat)> {
    staged
        .upserts
        .iter()
        .filter_map(|(path, _, id)| {
            staged
                .stats
                .get(path)
                .map(|stat| (path.as_ref(), (*id, *stat)))
        })
        .collect()
}

/// Open the repository as every command does ([`crate::repo::open_with`]: nothing of its config
/// runs, no filter driver among it), `core.excludesFile` set to the resolved user value.
fn open(git_dir: &Path, excludes_file: Option<&Path>) -> Result<gix::Repository> {
    let mut overrides: Vec<BString> = Vec::new();
    if let Some(path) = excludes_file {
        let mut value = BString::from("core.excludesFile=");
        value.extend_from_slice(path.as_os_str().as_encoded_bytes());
        overrides.push(value);
    }
    crate::repo::open_with(git_dir, overrides)
}

/// How to get `HEAD` back onto the session branch: `git switch`, and when `HEAD` holds commits the
/// branch lacks, a `git merge` of them afterwards (a fast-forward when it can be), so that none is
/// left behind.
fn switch_back(repo: &gix::Repository, branch: &SessionBranch) -> String {
    let switch = format!(
        "switch back (`git switch {branch}`; should git refuse over local changes, `git stash` \
         first and `git stash pop` after)"
    );
    match commits_off_branch(repo, branch) {
        Some(head) => {
            format!("{switch}, then bring over the commits made there (`git merge {head}`)")
        }
        None => switch,
    }
}

/// The commit `HEAD` is at, checking that `HEAD` is on the session branch.
///
/// # Errors
/// [`Error::Conflict`] when it is not, saying how to get back without losing commits (ending in
/// [`Error::save_refused`]).
fn session_head(repo: &gix::Repository, branch: &SessionBranch) -> Result<gix::ObjectId> {
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
                 {full}: end it with `git bisect reset`{}",
                commits_off_branch(repo, branch)
                    .map(|head| format!(
                        ", then bring over the commits made during it (`git merge {head}`)"
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

/// Refuse to save in the middle of a merge, cherry-pick or revert, or with unmerged paths: `git
/// commit` would write a merge commit or refuse, and a plain commit of the work tree would publish
/// conflict markers or drop the merged-in parent.
///
/// # Errors
/// [`Error::Conflict`] (exit 7), saying how to finish or abort.
fn refuse_unfinished_operations(git_dir: &Path, index: &gix::index::File) -> Result<()> {
    let operation = [
        (
            "MERGE_HEAD",
            "a merge",
            "`git commit` (or `git merge --abort`)",
        ),
        (
            "CHERRY_PICK_HEAD",
            "a cherry-pick",
            "`git cherry-pick --continue` (or `--abort`)",
        ),
        (
            "REVERT_HEAD",
            "a revert",
            "`git revert --continue` (or `--abort`)",
        ),
        (
            "sequencer",
            "a cherry-pick or revert of several commits",
            "`git cherry-pick --continue` or `git revert --continue` (or `--quit` to stop there)",
        ),
    ]
    .into_iter()
    .find(|(file, _, _)| git_dir.join(file).exists())
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
            "{} path(s) are unmerged ({}{}): resolve the conflicts and `git add` them{then}",
            unmerged.len(),
            shown.join(", "),
            if unmerged.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        )));
    }
    if let Some((file, what, finish)) = operation {
        return Err(Error::save_refused(format!(
            "{what} is in progress (.git/{file}): finish it with {finish}"
        )));
    }
    Ok(())
}

/// The tree of the new commit, `None` when the edits leave `HEAD^{tree}` as it is.
fn new_tree(
    repo: &gix::Repository,
    head_tree: gix::ObjectId,
    staged: &stage::Staged,
) -> Result<Option<gix::ObjectId>> {
    if staged.removals.is_empty() && staged.upserts.is_empty() {
        return Ok(None);
    }
    let tree = write_tree(repo, head_tree, staged)?;
    Ok((tree != head_tree).then_some(tree))
}

/// Apply the edits to `HEAD^{tree}` and write the changed trees.
fn write_tree(
    repo: &gix::Repository,
    head_tree: gix::ObjectId,
    staged: &stage::Staged,
) -> Result<gix::ObjectId> {
    let err = |e: gix::Error| fail("building the new tree", e);
    let mut editor = repo.edit_tree(head_tree).map_err(err)?;
    // Removals first: a file replaced by a directory (or the reverse) is a removal and additions.
    for path in &staged.removals {
        editor.remove(path).map_err(err)?;
    }
    for (path, kind, id) in &staged.upserts {
        editor.upsert(path, *kind, *id).map_err(err)?;
    }
    Ok(editor.write().map_err(err)?.detach())
}

/// Move the session branch from `old` to `new` (through `HEAD`, so both reflogs get the entry), only
/// if it is still at `old`.
fn update_branch(
    repo: &gix::Repository,
    branch: &SessionBranch,
    old: gix::ObjectId,
    new: gix::ObjectId,
    committer: &gix::actor::Signature,
    message: &str,
) -> Result<()> {
    use gix::refs::Target;
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
    let subject = message.lines().next().unwrap_or_default();
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: format!("commit: {subject}").into(),
            },
            expected: PreviousValue::MustExistAndMatch(Target::Object(old)),
            new: Target::Object(new),
        },
        name: "HEAD".try_into().map_err(|e| fail("naming HEAD", e))?,
        deref: true,
    };
    let mut time = gix::date::parse::TimeBuf::default();
    let edits = repo
        .edit_references_as([edit], Some(committer.to_ref(&mut time)))
        .map_err(|e| {
            Error::conflict(format!(
                "could not move {} from {old} to the new commit {new}: {}",
                branch.full_ref(),
                crate::error::chain(&e)
            ))
        })?;
    let full = branch.full_ref();
    if !edits.iter().any(|e| e.name.as_bstr() == full.as_str()) {
        return Err(Error::Internal(format!(
            "HEAD moved away from {full} while saving; the commit {new} is not on the branch"
        )));
    }
    Ok(())
}

/// Write the index of `tree`, with stat data: fresh for the files just hashed, the previous entry's
/// (or the refreshed one) where the content is unchanged, none (so git re-checks) otherwise.
fn write_index(
    repo: &gix::Repository,
    mut lock: index_lock::IndexLock,
    tree: gix::ObjectId,
    old: &gix::index::State,
    fresh: &HashMap<BString, gix::index::entry::Stat>,
    hashed: &HashMap<&BStr, (gix::ObjectId, gix::index::entry::Stat)>,
) -> Result<()> {
    let mut state = gix::index::State::from_tree(&tree, &repo.objects, stage::name_rules())
        .map_err(|e| fail("building the index from the new tree", e))?;
    for (entry, path) in state.entries_mut_with_paths() {
        if let Some((id, stat)) = hashed.get(path) {
            if *id == entry.id {
                entry.stat = *stat;
            }
            continue;
        }
        if let Some(prev) =
            old.entry_by_path_and_stage(path, gix::index::entry::Stage::Unconflicted)
            && prev.id == entry.id
            && prev.mode == entry.mode
        {
            entry.stat = fresh.get(path).copied().unwrap_or(prev.stat);
            // `git update-index --assume-unchanged` / `--skip-worktree` stay set, as with git.
            use gix::index::entry::Flags;
            entry.flags |= prev.flags & (Flags::ASSUME_VALID | Flags::SKIP_WORKTREE);
            if entry.flags.contains(Flags::SKIP_WORKTREE) {
                entry.flags |= Flags::EXTENDED;
            }
        }
    }
    let file = gix::index::File::from_state(state, repo.index_path());
    let mut out = std::io::BufWriter::new(lock.file());
    file.write_to(&mut out, gix::index::write::Options::default())
        .map_err(|e| fail("writing the index", e))?;
    out.into_inner()
        .map_err(|e| Error::io("writing the index", e.into_error()))?;
    lock.commit()
        .map_err(|e| Error::io("writing the index", e))?;
    Ok(())
}

/// git's `--cleanup=whitespace` (the default for `commit -m`): trailing whitespace and leading,
/// trailing and repeated blank lines removed, a final newline. `None` when nothing is left.
fn clean_message(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut blank = false;
    for line in raw.lines() {
        let line = line.trim_end_matches([' ', '\t', '\r', '\x0b', '\x0c']);
        if line.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cleaned_like_git_commit_m() {
        assert_eq!(clean_message("Save").as_deref(), Some("Save\n"));
        assert_eq!(
            clean_message("\n\n  subject  \n\n\n\nbody \t\r\nmore\n\n").as_deref(),
            Some("  subject\n\nbody\nmore\n")
        );
        assert_eq!(clean_message(" \n\t\n"), None);
        assert_eq!(clean_message(""), None);
    }
}

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
    let git_dir = workdir.join(".git");
    let user = config::UserConfig::load(&git_dir, workdir, &config::ProcessEnv);
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
