//! Check out a commit's tree into the work tree and write the index, so `git status` is clean.
//!
//! The steps, in the order a source runs them (`git`, `submodules`; a boot and an archive use the
//! index steps only):
//! 1. [`index_from_tree`] (`index`): the index built from the tree with git's path protections on
//!    (`.git` in any spelling, `..`, `/` in names, NTFS and HFS aliases such as `GIT~1`: SPEC
//!    rule 7 for tree entries), the tree measured first (`measure`), before any file is written;
//!    [`require_blobs`] then refuses an index naming a blob the pack lacks;
//! 2. [`refuse_what_is_in_the_way`] (`in_the_way`): before a checkout that may replace files,
//!    what it must not delete or overwrite;
//! 3. [`checkout`], below: the entries not written with the others are set aside (`set_aside`),
//!    the others written through the tree's one handle ([`super::write`], SPEC rule 7), each big
//!    file streamed from the pack (`big_file`), then the set-aside entries put back;
//! 4. [`write_index`] (`index`).

mod big_file;
mod in_the_way;
mod index;
mod measure;
mod set_aside;

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use crate::error::Result;
use big_file::write_big_file;
use set_aside::{set_big_files_aside, set_early_files_aside};

pub use crate::names::protections;
pub use in_the_way::refuse_what_is_in_the_way;
pub use index::{
    gitlink_warning, index_from_tree, require_blobs, write_index, write_index_if_changed,
};
pub use measure::{MAX_TREE_DEPTH, MAX_TREE_PATH_BYTES, measure_tree};

/// Where [`checkout`] writes and what is there already.
pub struct Destination<'a> {
    /// The work tree's one handle.
    pub tree: &'a crate::fs::tree::Tree,
    /// Existing files the commit tracks may be replaced (`--force`, or resuming an interrupted
    /// restore).
    pub overwrite: bool,
    /// The files the early checkout wrote while the pack arrived: set aside, not written again.
    pub early: &'a [super::early::Written],
}

/// Write the files of `index` into `to.tree`, reading blobs from `objects`. Files over the
/// big-object threshold are streamed from the pack, never held whole, after `before_big_file`
/// was told each one's path.
///
/// Failpoints: `mid-checkout` aborts once half of the blobs were read, `mid-big-file` once half
/// of a big file is written.
///
/// # Errors
/// [`Error::Conflict`](crate::error::Error::Conflict) when a file is in the way and `overwrite` is
/// false; [`Error::LocalIo`](crate::error::Error::LocalIo) on other I/O failures.
pub fn checkout(
    repo: &gix::Repository,
    objects: crate::pack::PackObjects,
    index: &mut gix::index::File,
    to: Destination<'_>,
    before_big_file: &dyn Fn(&Path) -> Result<()>,
) -> Result<usize> {
    let Destination {
        tree,
        overwrite,
        early,
    } = to;
    let total = index
        .entries()
        .iter()
        .filter(|e| !super::sparse::skipped(e))
        .count();
    // The conversions are read from the whole tree's `.gitattributes`, before any is set aside.
    let stack = super::write::WorktreeForm::stack(repo, index)?.detach();
    // Files over the big-object threshold are streamed from the pack; the others are held whole.
    let big = set_big_files_aside(index, &objects)?;
    let early = set_early_files_aside(index, tree, early)?;
    let _progress = crate::progress::Progress::spinner(&format!("checking out {total} files"));
    let mut writer = super::write::Writer::new(tree, super::write::Overwrite { files: overwrite })
        .with_failpoints();
    writer.write_entries_in_parallel(repo, index, &objects, &stack)?;
    tracing::debug!(
        "checkout: {} entries written after the early ones",
        index.entries().len()
    );
    for file in big {
        before_big_file(Path::new(std::ffi::OsStr::from_bytes(&file.path)))?;
        let stat = write_big_file(&mut writer, &file, &objects)?;
        index.dangerously_push_entry(
            stat,
            file.id,
            gix::index::entry::Flags::empty(),
            file.mode,
            file.path.as_ref(),
        );
    }
    for file in early {
        index.dangerously_push_entry(
            file.stat,
            file.id,
            gix::index::entry::Flags::empty(),
            file.mode,
            file.path.as_ref(),
        );
    }
    index.sort_entries();
    Ok(total)
}
