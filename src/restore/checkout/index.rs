//! The index: built from the commit's tree before any file is written (step 1 of the checkout),
//! checked for the blobs the pack must hold, and written last (step 4), once the files are in
//! place.

use super::super::sparse;
use super::measure::measure_tree;
use crate::error::{Error, Result, chain};
use crate::hint::Hint;
use crate::names::protections;

/// Build the index of `repo` for `tree`, read from `objects`, refusing unsafe entry names by the
/// rule `save` also keeps ([`crate::names`]), and first a tree that [`measure_tree`] refuses (two
/// entries of one name, too many entries).
///
/// # Errors
/// [`Error::Integrity`] (exit 6) for an entry named `.git` in any spelling, `..`, or holding `/`,
/// one at the staging folder's path, a tree that cannot be read, and those of [`measure_tree`].
pub fn index_from_tree(
    repo: &gix::Repository,
    objects: &impl gix::objs::Find,
    tree: gix::ObjectId,
    max_entries: u64,
) -> Result<gix::index::File> {
    measure_tree(objects, tree, max_entries)?;
    let state = gix::index::State::from_tree(&tree, objects, protections()).map_err(|e| {
        Error::Integrity(format!(
            "the commit's tree holds an unsafe or unreadable entry, nothing was written: {}",
            chain(&e)
        ))
    })?;
    // gix checked each component by the rule; the rest of it (the staging folder) needs the path.
    if let Some(entry) = state
        .entries()
        .iter()
        .find(|e| crate::names::in_staging_dir(e.path(&state)))
    {
        return Err(Error::Integrity(format!(
            "the commit's tree has an entry at '{}' ({}): refused, nothing was written",
            String::from_utf8_lossy(entry.path(&state)).escape_debug(),
            crate::names::NameError::StagingDir
        )));
    }
    Ok(gix::index::File::from_state(state, repo.index_path()))
}

/// Refuse an index naming a blob that `has` does not hold: the server failed to send it (SPEC
/// rule 2, exit 6), found before anything is written. Gitlinks (submodules) name commits of
/// another repository and are not looked for: their paths are returned (they stay empty folders,
/// as a `git clone` without `--recurse-submodules` leaves them).
///
/// # Errors
/// [`Error::Integrity`] naming the path and the blob.
pub fn require_blobs(
    index: &gix::index::File,
    has: impl Fn(&gix::oid) -> bool,
) -> Result<Vec<String>> {
    let mut gitlinks = Vec::new();
    for entry in index.entries() {
        if sparse::skipped(entry) {
            continue;
        }
        if entry.mode == gix::index::entry::Mode::COMMIT {
            gitlinks.push(entry.path(index).to_string());
            continue;
        }
        if has(&entry.id) {
            continue;
        }
        return Err(Error::Integrity(format!(
            "the remote's pack lacks the blob {} of '{}': the server sent an incomplete \
             commit; nothing was written",
            entry.id,
            entry.path(index)
        )));
    }
    Ok(gitlinks)
}

/// The warning for the submodules a restore left empty (`None` when there are none), naming at
/// most 10 of them; `again` is the restore that fetches them (`--submodules`, same folder).
pub fn gitlink_warning(gitlinks: &[String], again: &Hint) -> Option<String> {
    if gitlinks.is_empty() {
        return None;
    }
    let shown: Vec<&str> = gitlinks.iter().take(10).map(String::as_str).collect();
    let more = gitlinks.len() - shown.len();
    Some(format!(
        "{} submodule(s) left as empty folders: {}{}; to fetch them, restore again into this \
         folder with --submodules (shallow, or recursive for theirs too), READ_URL as for this \
         restore: {again}",
        gitlinks.len(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}

/// Write the index file.
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn write_index(index: &mut gix::index::File) -> Result<()> {
    let mut bytes = Vec::new();
    index
        .write_to(&mut bytes, gix::index::write::Options::default())
        .map_err(|e| Error::from_chain("writing the index", &e))?;
    commit_index(index, &bytes)
}

/// `bytes` written as `index`'s file under git-session's `index.lock` (one a killed restore left
/// is removed by the next; gix's own lock would stay and block every rerun).
fn commit_index(index: &gix::index::File, bytes: &[u8]) -> Result<()> {
    use crate::repo::file_lock::{FileLock, Locked};
    let path = index.path();
    FileLock::take(path, Locked::Index)?.commit(path, bytes, false)
}

/// [`write_index`] unless the index file holds these bytes already (a boot that changed
/// nothing): the file keeps its inode and mtime, so git's racy-clean check of the entries still
/// measures against the time the index was really written. Returns whether it wrote.
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn write_index_if_changed(index: &mut gix::index::File) -> Result<bool> {
    let mut bytes = Vec::new();
    index
        .write_to(&mut bytes, gix::index::write::Options::default())
        .map_err(|e| Error::from_chain("writing the index", &e))?;
    if crate::fs::holds(index.path(), &bytes) {
        return Ok(false);
    }
    commit_index(index, &bytes)?;
    Ok(true)
}
