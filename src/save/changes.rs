//! What changed: `HEAD^{tree}` against the index (changes staged with plain git), the index against
//! the work tree (stat-based, like `git status`), and untracked files (honouring `.gitignore` at every
//! level, `.git/info/exclude` and `core.excludesFile`).
//!
//! The result is, per path, what `git add -A` would put into the index there: the work tree file,
//! the staged index entry, or nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, BString};
use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
use gix::status::plumbing::index_as_worktree_with_renames::{Entry, VisitEntry};

use crate::error::Result;

/// Where the content of a path comes from in the new commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Read (hash) the file in the work tree; it may turn out to be gone.
    Worktree,
    /// Take the index entry as it is (staged with plain git, unchanged in the work tree since).
    Index {
        /// The staged object.
        id: gix::ObjectId,
        /// Its mode.
        mode: gix::index::entry::Mode,
    },
    /// The path is not in the new commit.
    Remove,
}

/// The changes to apply to `HEAD^{tree}`.
#[derive(Debug, Default)]
pub struct Plan {
    /// Every path that may differ from `HEAD^{tree}`, with where its content comes from.
    pub targets: BTreeMap<BString, Target>,
    /// Fresh stat data for index entries whose content did not change (git's "refresh").
    pub fresh_stats: HashMap<BString, gix::index::entry::Stat>,
    /// Untracked nested repositories (left out).
    pub nested_repos: Vec<BString>,
}

/// Compare `HEAD^{tree}`, the index and the work tree.
///
/// # Errors
/// [`Error::Internal`] when the status cannot be computed.
pub fn collect(
    repo: &gix::Repository,
    index: &gix::index::State,
    head_tree: gix::ObjectId,
) -> Result<Plan> {
    let mut plan = Plan::default();
    collect_staged(repo, index, head_tree, &mut plan.targets)?;
    // Work tree state wins over staged state: it is recorded second.
    for item in worktree_status(repo, index)? {
        match item {
            Seen::Worktree(path) => {
                plan.targets.insert(path, Target::Worktree);
            }
            Seen::Removed(path) => {
                plan.targets.insert(path, Target::Remove);
            }
            Seen::Fresh(path, stat) => {
                plan.fresh_stats.insert(path, stat);
            }
            Seen::NestedRepo(path) => plan.nested_repos.push(path),
        }
    }
    plan.nested_repos.sort();
    Ok(plan)
}

/// Changes staged with plain git: `HEAD^{tree}` against the index, into `targets`.
fn collect_staged(
    repo: &gix::Repository,
    index: &gix::index::State,
    head_tree: gix::ObjectId,
    targets: &mut BTreeMap<BString, Target>,
) -> Result<()> {
    let mut pathspec = repo
        .pathspec(
            false,
            None::<&str>,
            false,
            index,
            gix::worktree::stack::state::attributes::Source::IdMapping,
        )
        .map_err(|e| super::base::fail("preparing the status", e))?;
    repo.tree_index_status(
        &head_tree,
        index,
        Some(&mut pathspec),
        gix::status::tree_index::TrackRenames::Disabled,
        |change, _, _| {
            record_staged(change, targets);
            Ok(gix::diff::index::Action::Continue(()))
        },
    )
    .map_err(|e| super::base::fail("comparing HEAD with the index", e))?;
    Ok(())
}

/// Where one staged change puts the content of its path (a rewrite: the source is removed).
fn record_staged(
    change: gix::diff::index::ChangeRef<'_, '_>,
    targets: &mut BTreeMap<BString, Target>,
) {
    use gix::diff::index::ChangeRef;
    match change {
        ChangeRef::Addition {
            location,
            entry_mode,
            id,
            ..
        }
        | ChangeRef::Modification {
            location,
            entry_mode,
            id,
            ..
        } => {
            targets.insert(
                location.into_owned(),
                Target::Index {
                    id: id.into_owned(),
                    mode: entry_mode,
                },
            );
        }
        ChangeRef::Deletion { location, .. } => {
            targets.insert(location.into_owned(), Target::Remove);
        }
        ChangeRef::Rewrite {
            source_location,
            location,
            entry_mode,
            id,
            ..
        } => {
            targets.insert(source_location.into_owned(), Target::Remove);
            targets.insert(
                location.into_owned(),
                Target::Index {
                    id: id.into_owned(),
                    mode: entry_mode,
                },
            );
        }
    }
}

/// The work tree against the index, and untracked files (honouring the ignore rules).
fn worktree_status(repo: &gix::Repository, index: &gix::index::State) -> Result<Vec<Seen>> {
    let dirwalk = repo
        .dirwalk_options()
        .map_err(|e| super::base::fail("preparing the directory walk", e))?
        .emit_untracked(gix::dir::walk::EmissionMode::Matching)
        .emit_ignored(None)
        .emit_empty_directories(false)
        .empty_patterns_match_prefix(false)
        .recurse_repositories(false)
        .classify_untracked_bare_repositories(false);
    let options = gix::status::index_worktree::Options {
        sorting: None,
        dirwalk_options: Some(dirwalk),
        rewrites: None,
        thread_limit: None,
    };
    let mut visitor = Visitor { items: Vec::new() };
    let interrupt = AtomicBool::new(false);
    repo.index_worktree_status(
        index,
        Vec::<BString>::new(),
        &mut visitor,
        gix::status::plumbing::index_as_worktree::traits::FastEq,
        NoSubmodules,
        &mut gix::progress::Discard,
        &interrupt,
        options,
    )
    .map_err(|e| super::base::fail("comparing the index with the work tree", e))?;
    Ok(visitor.items)
}

enum Seen {
    Worktree(BString),
    Removed(BString),
    Fresh(BString, gix::index::entry::Stat),
    NestedRepo(BString),
}

struct Visitor {
    items: Vec<Seen>,
}

impl<'index> VisitEntry<'index> for Visitor {
    type ContentChange = ();
    type SubmoduleStatus = ();

    fn visit_entry(&mut self, entry: Entry<'index, (), ()>) {
        match entry {
            Entry::Modification {
                entry,
                rela_path,
                status,
                ..
            } => {
                let path = rela_path.to_owned();
                let gitlink = entry.mode == gix::index::entry::Mode::COMMIT;
                let seen = match status {
                    EntryStatus::NeedsUpdate(stat) => Seen::Fresh(path, stat),
                    EntryStatus::Change(Change::Removed) => Seen::Removed(path),
                    // Submodules are never recursed into or updated (SPEC rule 8): only a removal counts.
                    _ if gitlink => return,
                    EntryStatus::Change(_)
                    | EntryStatus::Conflict { .. }
                    | EntryStatus::IntentToAdd => Seen::Worktree(path),
                };
                self.items.push(seen);
            }
            Entry::DirectoryContents { entry, .. } => {
                if entry.status != gix::dir::entry::Status::Untracked {
                    return;
                }
                match entry.disk_kind {
                    Some(gix::dir::entry::Kind::File | gix::dir::entry::Kind::Symlink) => {
                        self.items.push(Seen::Worktree(entry.rela_path));
                    }
                    Some(gix::dir::entry::Kind::Repository) => {
                        self.items.push(Seen::NestedRepo(entry.rela_path));
                    }
                    // Empty directories are not tracked; sockets, FIFOs and devices cannot be
                    // (git skips them too).
                    _ => {}
                }
            }
            // Rename tracking is off, so there are no rewrites.
            Entry::Rewrite { .. } => {}
        }
    }
}

/// Submodules are not looked into: no status, no recursion.
#[derive(Clone, Copy)]
struct NoSubmodules;

impl gix::status::plumbing::index_as_worktree::traits::SubmoduleStatus for NoSubmodules {
    type Output = ();

    fn status(&mut self, _entry: &gix::index::Entry, _rela_path: &BStr) -> gix::Result<Option<()>> {
        Ok(None)
    }
}
