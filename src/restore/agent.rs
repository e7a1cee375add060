//! An agent's files (`git-session agent add`): the start commit's tree checked out into the
//! agent's new linked work tree, each file copied from the main tree's checkout when that file is
//! clean there, else written from the shared object store; then the agent's index, so `git
//! status` is clean at once.
//!
//! # Security
//! Both trees are reached only through their handles ([`crate::fs::tree`]): a main-tree file is
//! opened `O_NOFOLLOW`, beneath the main tree, and copied only when it is a regular file whose
//! stat data is what the main index recorded for the same blob and mode.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use gix::index::entry::{Mode, Stat};

use crate::error::{Error, Result};
use crate::fs::tree::Tree;

/// The main tree as the copy reads it: its handle and its index.
pub struct MainCheckout<'a> {
    /// The main tree's one handle.
    pub tree: &'a Tree,
    /// Its index (blob, mode and stat data by path).
    pub index: &'a gix::index::File,
}

/// How an agent's files came to be.
#[derive(Debug, Default, Clone, Copy)]
pub struct Materialised {
    /// Copied from the main tree.
    pub copied: u64,
    /// Written from the object store.
    pub written: u64,
    /// Of the copied (and of the LFS objects), those whose extents the file system shares
    /// (`FICLONE`): no bytes written.
    pub cloned: u64,
}

/// The stat comparison git makes (`core.checkStat` default, no `core.trustctime` change).
fn stat_options() -> gix::index::entry::stat::Options {
    gix::index::entry::stat::Options {
        trust_ctime: true,
        check_stat: true,
        use_nsec: true,
        use_stdev: false,
    }
}

/// Check out `start_tree` of `repo` (opened on the agent's git dir) into `to`, and write the
/// agent's index (`repo`'s index path) last. A main-tree file is copied when it is clean by its
/// index entry: same blob id and mode, its stat data matching, and not racily clean (modified
/// before the main index was written); every other file is written from the object store
/// through git's conversions. Failpoint `mid-agent-checkout`: once half of the entries are done.
///
/// # Errors
/// Those of [`super::checkout::index_from_tree`] (an unsafe entry: exit 6, nothing written);
/// [`Error::LocalIo`] when a file cannot be written.
pub fn materialise(
    repo: &gix::Repository,
    main: &MainCheckout<'_>,
    to: &Tree,
    start_tree: gix::ObjectId,
) -> Result<Materialised> {
    let mut index = super::checkout::index_from_tree(
        repo,
        &repo.objects,
        start_tree,
        crate::pack::DEFAULT_MAX_TREE_ENTRIES,
    )?;
    let mut form = super::write::WorktreeForm::new(repo, &index)?;
    let mut writer = super::write::Writer::new(to, super::write::Overwrite { files: false });
    let mut done = Materialised::default();
    let mut buf = Vec::new();
    let mut stats = Vec::with_capacity(index.entries().len());
    let half = index.entries().len() / 2;
    for (n, entry) in index.entries().iter().enumerate() {
        if n == half {
            crate::failpoint::hit("mid-agent-checkout");
        }
        let path = entry.path(&index);
        let rel = Path::new(std::ffi::OsStr::from_bytes(path));
        let stat = match entry.mode {
            Mode::COMMIT => writer.folder(rel).map(|()| Stat::default())?,
            Mode::FILE | Mode::FILE_EXECUTABLE => {
                let copied = copy_if_clean(main, &mut writer, entry, path, rel, &mut done)?;
                if let Some(Copy::Whole(stat)) = copied {
                    done.copied += 1;
                    stat
                } else if let Some(Copy::Torn(dst)) = copied {
                    // Rewritten in the main tree while it was copied: from the object store.
                    let blob = blob(repo, &entry.id, path, &mut buf)?;
                    done.written += 1;
                    rewrite(&writer, dst, rel, &form.convert(blob, path)?)?
                } else {
                    let blob = blob(repo, &entry.id, path, &mut buf)?;
                    done.written += 1;
                    let executable = entry.mode == Mode::FILE_EXECUTABLE;
                    match lfs_object(repo, &blob) {
                        // The LFS store is shared: the content, as the main tree has it.
                        Some(stored) => copy_file(&mut writer, stored, rel, executable, &mut done)?,
                        None => writer.file(rel, executable, &form.convert(blob, path)?)?,
                    }
                }
            }
            Mode::SYMLINK => {
                let target = blob(repo, &entry.id, path, &mut buf)?;
                done.written += 1;
                writer.symlink(rel, Path::new(std::ffi::OsStr::from_bytes(&target)))?
            }
            _ => continue,
        };
        stats.push((n, stat));
    }
    let entries = index.entries_mut();
    for (n, stat) in stats {
        entries[n].stat = stat;
    }
    super::checkout::write_index(&mut index)?;
    Ok(done)
}

fn blob(
    repo: &gix::Repository,
    id: &gix::oid,
    path: &gix::bstr::BStr,
    buf: &mut Vec<u8>,
) -> Result<Vec<u8>> {
    let found = gix::objs::Find::try_find(&repo.objects, id, buf)
        .map_err(|e| Error::Integrity(format!("reading the blob of {path}: {e}")))?
        .ok_or_else(|| {
            Error::Integrity(format!(
                "the blob {id} of {path} is missing from the repository"
            ))
        })?;
    Ok(found.data.to_vec())
}

/// What [`copy_if_clean`] made of a clean file.
enum Copy {
    /// Copied whole, its stat data.
    Whole(Stat),
    /// Created, but the main tree's file changed while it was copied (its stat data moved, or it
    /// shrank): what it holds may be torn, so it is written again from the object store.
    Torn(std::fs::File),
}

/// Copy the main tree's `rel` into the agent's tree when it is clean there by its index entry;
/// `None` (nothing written) when it is not, or cannot be opened as a regular file. The source's
/// stat data is taken again once copied: a file rewritten in place meanwhile is [`Copy::Torn`],
/// never a copy the agent's index would call clean. Barrier `hold-agent-copy`: each file between
/// its check and its copy.
fn copy_if_clean(
    main: &MainCheckout<'_>,
    writer: &mut super::write::Writer<'_>,
    entry: &gix::index::Entry,
    path: &gix::bstr::BStr,
    rel: &Path,
    done: &mut Materialised,
) -> Result<Option<Copy>> {
    let Some(theirs) = main.index.entry_by_path(path) else {
        return Ok(None);
    };
    if theirs.id != entry.id || theirs.mode != entry.mode || super::sparse::skipped(theirs) {
        return Ok(None);
    }
    let Ok(src) = main.tree.open_read(rel) else {
        return Ok(None);
    };
    let Ok(meta) = gix::index::fs::Metadata::from_file(&src) else {
        return Ok(None);
    };
    let Ok(now) = Stat::from_fs(&meta) else {
        return Ok(None);
    };
    if !theirs.stat.matches(&now, stat_options())
        || theirs.stat.is_racy(main.index.timestamp(), stat_options())
    {
        return Ok(None);
    }
    crate::failpoint::barrier("hold-agent-copy");
    let executable = entry.mode == Mode::FILE_EXECUTABLE;
    let dst = writer.open_new(rel, executable)?;
    let len = meta.len();
    let copied = crate::fs::reflink::clone_into(&src, &dst, len);
    let after = gix::index::fs::Metadata::from_file(&src)
        .ok()
        .and_then(|m| Stat::from_fs(&m).ok());
    let cloned = match copied {
        Ok(how) if after == Some(now) => how == crate::fs::reflink::Copied::Cloned,
        Ok(_) => return Ok(Some(Copy::Torn(dst))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Ok(Some(Copy::Torn(dst)));
        }
        Err(e) => {
            return Err(Error::io(
                format!("copying {}", writer.shown(rel).display()),
                e,
            ));
        }
    };
    done.cloned += u64::from(cloned);
    stat_of(writer, &dst, rel).map(|stat| Some(Copy::Whole(stat)))
}

/// The stat data of the agent's file `dst` (`rel`).
fn stat_of(writer: &super::write::Writer<'_>, dst: &std::fs::File, rel: &Path) -> Result<Stat> {
    let meta = gix::index::fs::Metadata::from_file(dst)
        .map_err(|e| Error::io(format!("reading {}", writer.shown(rel).display()), e))?;
    Stat::from_fs(&meta).map_err(|e| Error::internal("reading a file's times", e))
}

/// Make the agent's file `dst` (`rel`), a torn copy, hold exactly `data`; its stat data.
fn rewrite(
    writer: &super::write::Writer<'_>,
    dst: std::fs::File,
    rel: &Path,
    data: &[u8],
) -> Result<Stat> {
    use std::os::unix::fs::FileExt as _;
    dst.set_len(0)
        .and_then(|()| dst.write_all_at(data, 0))
        .map_err(|e| Error::io(format!("writing {}", writer.shown(rel).display()), e))?;
    stat_of(writer, &dst, rel)
}

/// Create `rel` in the agent's tree holding what `src` (an LFS object of the shared store, which
/// is never rewritten) holds; returns its stat data. By copy-on-write where the file system shares
/// extents, exactly the length `src` has when opened (one growing meanwhile is not copied without
/// end).
fn copy_file(
    writer: &mut super::write::Writer<'_>,
    src: std::fs::File,
    rel: &Path,
    executable: bool,
    done: &mut Materialised,
) -> Result<Stat> {
    let dst = writer.open_new(rel, executable)?;
    let shown = writer.shown(rel).display().to_string();
    let copying = |e| Error::io(format!("copying {shown}"), e);
    let len = src.metadata().map_err(copying)?.len();
    if crate::fs::reflink::clone_into(&src, &dst, len).map_err(copying)?
        == crate::fs::reflink::Copied::Cloned
    {
        done.cloned += 1;
    }
    stat_of(writer, &dst, rel)
}

/// The shared LFS store's object for `blob` when it is an LFS pointer whose object is there.
fn lfs_object(repo: &gix::Repository, blob: &[u8]) -> Option<std::fs::File> {
    let pointer = crate::types::lfs::Pointer::parse(blob)?;
    let path = crate::repo::lfs::object_path(repo.common_dir(), &pointer);
    let file = crate::fs::open_regular(&path, false).ok()?;
    file.metadata()
        .is_ok_and(|m| m.is_file() && m.len() == pointer.size)
        .then_some(file)
}
