//! The entries the checkout does not write with the others, taken out of the index before it and
//! put back after: those the early checkout wrote, and the big files (streamed one by one,
//! [`super::big_file`]). Those outside a sparse checkout's cone stay in place (the writer passes
//! them by): copying them out and back held a second copy of their paths through the checkout.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use super::super::early::Written;
use super::super::sparse;
use crate::error::{Error, Result};

/// Take the entries the early checkout wrote (same path, blob and mode) out of `index`, so gix's
/// checkout does not write them again; returns them. A file written early that the index does not
/// hold so (possible only for a tree with duplicate names) is removed.
///
/// # Errors
/// [`Error::LocalIo`] when such a file cannot be removed.
pub(super) fn set_early_files_aside<'w>(
    index: &mut gix::index::File,
    tree: &crate::fs::tree::Tree,
    early: &'w [Written],
) -> Result<Vec<&'w Written>> {
    if early.is_empty() {
        return Ok(Vec::new());
    }
    let by_path: std::collections::HashMap<&gix::bstr::BStr, &Written> =
        early.iter().map(|w| (w.path.as_ref(), w)).collect();
    let mut kept = Vec::with_capacity(early.len());
    index.remove_entries(|_, path, entry| {
        let Some(w) = by_path.get(path) else {
            return false;
        };
        if sparse::skipped(entry) {
            return false;
        }
        let same = w.id == entry.id && w.mode == entry.mode;
        if same {
            kept.push(*w);
        }
        same
    });
    if kept.len() < early.len() {
        let kept_paths: std::collections::HashSet<&gix::bstr::BStr> =
            kept.iter().map(|w| gix::bstr::BStr::new(&w.path)).collect();
        for stray in early
            .iter()
            .filter(|w| !kept_paths.contains(&gix::bstr::BStr::new(&w.path)))
        {
            let rel = Path::new(std::ffi::OsStr::from_bytes(&stray.path));
            tree.remove_file(rel)
                .map_err(|e| Error::io(format!("removing {}", tree.shown(rel).display()), e))?;
        }
    }
    Ok(kept)
}

/// A file of the commit over the big-object threshold, taken out of the index for the checkout of the others.
pub(super) struct BigFile {
    pub(super) path: gix::bstr::BString,
    pub(super) id: gix::ObjectId,
    pub(super) mode: gix::index::entry::Mode,
    pub(super) blob: crate::pack::BigBlob,
}

/// Take the big files out of `index` (they go back in, with their stat, once written).
///
/// # Errors
/// [`Error::Integrity`] for a symlink whose target is that big.
pub(super) fn set_big_files_aside(
    index: &mut gix::index::File,
    objects: &crate::pack::PackObjects,
) -> Result<Vec<BigFile>> {
    let mut big = Vec::new();
    for entry in index.entries() {
        if entry.mode == gix::index::entry::Mode::COMMIT || sparse::skipped(entry) {
            continue;
        }
        let Some(blob) = objects.big(&entry.id) else {
            continue;
        };
        if entry.mode == gix::index::entry::Mode::SYMLINK {
            return Err(Error::Integrity(format!(
                "the symlink '{}' has a target of {} bytes: refused, nothing was written",
                entry.path(index),
                blob.size()
            )));
        }
        big.push(BigFile {
            path: entry.path(index).to_owned(),
            id: entry.id,
            mode: entry.mode,
            blob,
        });
    }
    if !big.is_empty() {
        let paths: std::collections::HashSet<gix::bstr::BString> =
            big.iter().map(|b| b.path.clone()).collect();
        index.remove_entries(|_, path, _| paths.contains(path));
    }
    Ok(big)
}
