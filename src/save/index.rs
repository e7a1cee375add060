//! The last step: the index rewritten from the new tree, keeping stat data where the content is
//! unchanged, so `git status` is clean and fast afterwards. Written through the `index.lock`
//! that `save` has held since it read the index ([`super::index_lock`]).

use std::collections::HashMap;

use gix::bstr::{BStr, BString};

use super::base::fail;
use super::{index_lock, stage};
use crate::error::{Error, Result};

/// The object and the stat data (taken before reading) of every work tree file that was hashed.
pub(super) fn hashed_stats(
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

/// Write the index of `tree`, with stat data: fresh for the files just hashed, the previous entry's
/// (or the refreshed one) where the content is unchanged, none (so git re-checks) otherwise.
pub(super) fn write_index(
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
