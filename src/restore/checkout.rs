//! Check out a commit's tree into the work tree and write the index, so `git status` is clean.
//!
//! The index is built from the tree with git's path protections on (`.git` in any spelling, `..`,
//! `/` in names, NTFS and HFS aliases such as `GIT~1`: SPEC rule 7 for tree entries), before any file
//! is written. Files are written through the tree's one handle ([`super::write`], SPEC rule 7).

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use crate::error::{Error, Result, chain};
use crate::failpoint;

pub use crate::names::protections;

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

/// The most folders a commit's tree may nest (git's `core.maxTreeDepth`, 4096 by default).
pub const MAX_TREE_DEPTH: usize = 4096;

/// The most bytes of paths the index of a commit's tree may hold (each file's full path): the
/// index holds them all in memory.
pub const MAX_TREE_PATH_BYTES: u64 = 256 << 20;

/// What a tree holds once expanded: files (every index entry: blobs, symlinks, submodules),
/// folders, and the bytes of the files' paths relative to it.
#[derive(Debug, Clone, Copy, Default)]
struct Expanded {
    files: u64,
    folders: u64,
    path_bytes: u64,
}

/// A tree being measured: its subtrees (id, name) and how far they are added up.
struct Frame {
    id: gix::ObjectId,
    path: gix::bstr::BString,
    subtrees: Vec<(gix::ObjectId, gix::bstr::BString)>,
    next: usize,
    sum: Expanded,
}

/// Measure what `tree` expands to before anything that size exists, each distinct tree read once
/// (a tree that repeats the same subtrees names millions of paths from a pack of a few KiB), in
/// memory bounded by `max_entries`: refuse a folder holding two entries of one name (file and
/// file, file and folder, folder and symlink: a checkout could not hold both, and git's fsck
/// refuses them as `duplicateEntries`), more than `max_entries` files and folders
/// (`--max-entries`), over [`MAX_TREE_PATH_BYTES`] of paths, or folders nested over
/// [`MAX_TREE_DEPTH`] deep.
///
/// # Errors
/// [`Error::Integrity`] (exit 6) naming what was refused.
pub fn measure_tree(
    objects: &impl gix::objs::Find,
    tree: gix::ObjectId,
    max_entries: u64,
) -> Result<()> {
    let mut measured: std::collections::HashMap<gix::ObjectId, Expanded> = Default::default();
    // Entries read from distinct trees: each is expanded at least once, so this many is refused
    // before the sum is known, and bounds what the frames hold.
    let mut read = 0u64;
    let mut buf = Vec::new();
    let mut stack = vec![read_frame(
        objects,
        tree,
        Default::default(),
        &mut buf,
        &mut read,
    )?];
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            break;
        };
        if read > max_entries {
            return Err(too_many(max_entries));
        }
        let Some((id, name)) = top.subtrees.get(top.next) else {
            let done = stack.pop().expect("a frame");
            measured.insert(done.id, done.sum);
            let Some(parent) = stack.last_mut() else {
                break;
            };
            let name_len = parent.subtrees[parent.next].1.len();
            add(&mut parent.sum, done.sum, name_len);
            parent.next += 1;
            check_sum(&parent.sum, max_entries)?;
            continue;
        };
        if let Some(sum) = measured.get(id).copied() {
            add(&mut top.sum, sum, name.len());
            top.next += 1;
            check_sum(&top.sum, max_entries)?;
            continue;
        }
        if depth >= MAX_TREE_DEPTH {
            return Err(Error::Integrity(format!(
                "the commit's tree nests folders over {MAX_TREE_DEPTH} deep (at '{}'): refused, \
                 nothing was written",
                top.path
            )));
        }
        let mut path = top.path.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        let frame = read_frame(objects, *id, path, &mut buf, &mut read)?;
        stack.push(frame);
    }
    Ok(())
}

/// Add a subtree's expansion, named `name_len` bytes, to its parent's.
fn add(sum: &mut Expanded, sub: Expanded, name_len: usize) {
    sum.files = sum.files.saturating_add(sub.files);
    sum.folders = sum.folders.saturating_add(sub.folders).saturating_add(1);
    sum.path_bytes = sum
        .path_bytes
        .saturating_add(sub.path_bytes)
        .saturating_add(sub.files.saturating_mul(name_len as u64 + 1));
}

fn check_sum(sum: &Expanded, max_entries: u64) -> Result<()> {
    if sum.files.saturating_add(sum.folders) > max_entries {
        return Err(too_many(max_entries));
    }
    if sum.path_bytes > MAX_TREE_PATH_BYTES {
        return Err(Error::Integrity(format!(
            "the commit's tree expands to over {MAX_TREE_PATH_BYTES} bytes of paths (a tree that \
             repeats its subtrees?): refused before building the index, nothing was written"
        )));
    }
    Ok(())
}

fn too_many(max_entries: u64) -> Error {
    Error::Integrity(format!(
        "the commit's tree expands to over {max_entries} files and folders (a tree that repeats \
         its subtrees?): refused before building the index, nothing was written \
         (--max-entries raises the limit)"
    ))
}

/// Read the tree `id` (at `path`, for messages): its files counted, its subtrees listed, two
/// entries of one name refused.
fn read_frame(
    objects: &impl gix::objs::Find,
    id: gix::ObjectId,
    path: gix::bstr::BString,
    buf: &mut Vec<u8>,
    read: &mut u64,
) -> Result<Frame> {
    let unreadable = |why: String| {
        Error::Integrity(format!(
            "the commit's tree holds an unsafe or unreadable entry, nothing was written: the \
             tree {id} at '{path}' {why}"
        ))
    };
    let data = objects
        .try_find(&id, buf)
        .map_err(|e| unreadable(format!("cannot be read: {}", chain(&e))))?
        .ok_or_else(|| unreadable("is not in the pack".to_owned()))?;
    if data.kind != gix::objs::Kind::Tree {
        return Err(unreadable(format!("is a {}", data.kind)));
    }
    let mut names: Vec<(&[u8], gix::objs::tree::EntryKind)> = Vec::new();
    let mut frame = Frame {
        id,
        path: Default::default(),
        subtrees: Vec::new(),
        next: 0,
        sum: Expanded::default(),
    };
    for entry in gix::objs::TreeRefIter::from_bytes(data.data, gix::hash::Kind::Sha1) {
        let entry = entry.map_err(|e| unreadable(format!("is malformed: {e}")))?;
        *read += 1;
        names.push((entry.filename.as_ref(), entry.mode.kind()));
        if entry.mode.is_tree() {
            frame
                .subtrees
                .push((entry.oid.to_owned(), entry.filename.to_owned()));
        } else {
            frame.sum.files += 1;
            frame.sum.path_bytes += entry.filename.len() as u64;
        }
    }
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|p| p[0].0 == p[1].0) {
        use gix::objs::tree::EntryKind;
        let kind = |kind: EntryKind| match kind {
            EntryKind::Tree => "a folder",
            EntryKind::Blob | EntryKind::BlobExecutable => "a file",
            EntryKind::Link => "a symlink",
            EntryKind::Commit => "a submodule",
        };
        return Err(Error::Integrity(format!(
            "the commit's tree holds two entries named '{}' in '{}' ({} and {}): git refuses \
             such a tree (fsck: duplicateEntries), and a checkout cannot hold both; nothing was \
             written",
            gix::bstr::BStr::new(pair[0].0),
            path,
            kind(pair[0].1),
            kind(pair[1].1)
        )));
    }
    frame.path = path;
    Ok(frame)
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
        if super::sparse::skipped(entry) {
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
/// most 10 of them.
pub fn gitlink_warning(gitlinks: &[String]) -> Option<String> {
    if gitlinks.is_empty() {
        return None;
    }
    let shown: Vec<&str> = gitlinks.iter().take(10).map(String::as_str).collect();
    let more = gitlinks.len() - shown.len();
    Some(format!(
        "{} submodule(s) left as empty folders (restore with --submodules shallow or recursive \
         fetches them, as `git submodule update --init --depth 1` does): {}{}",
        gitlinks.len(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}

/// Before a checkout that may replace files (`--force`, or completing an interrupted restore),
/// refuse what it would delete or must not overwrite (SPEC rule 6: other files are left in place,
/// nothing is deleted):
/// - a file or a symlink where the commit has a folder (one of an entry's leading components):
///   replacing it would delete what the commit does not track;
/// - a non-empty folder where the commit has a file;
/// - when completing an interrupted restore (`resume` given), a file or symlink whose content is
///   not the commit's, unless [`super::intent::CutShort`] judges it a file the killed checkout cut short:
///   content the interrupted restore did not write.
///
/// # Errors
/// [`Error::Conflict`] (exit 7) naming the path, before anything is written.
pub fn refuse_what_is_in_the_way(
    repo: &gix::Repository,
    workdir: &Path,
    index: &gix::index::File,
    objects: &crate::pack::PackObjects,
    resume: Option<super::intent::CutShort>,
) -> Result<()> {
    let mut judge = InTheWay {
        workdir,
        resume_only: resume.is_some(),
        cut: resume,
        // The checkout writes what the tree's `.gitattributes` make of a blob (`eol=crlf`,
        // `ident`, `working-tree-encoding`): that is what the killed run left, so that is what is
        // compared.
        to_worktree: None,
        folders_seen: Default::default(),
    };
    if judge.resume_only {
        judge.to_worktree = Some(super::write::WorktreeForm::new(repo, index)?);
    }
    for entry in index.entries() {
        let rel = Path::new(std::ffi::OsStr::from_bytes(entry.path(index)));
        judge.leading_folders(rel)?;
        if entry.mode == gix::index::entry::Mode::COMMIT {
            // A submodule's folder: what the killed run checked out in it is redone in place.
            continue;
        }
        let path = workdir.join(rel);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let empty = std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none());
            if !empty {
                return Err(judge.conflict(&path, "is a folder where the commit has a file"));
            }
            continue;
        }
        if judge.resume_only {
            judge.resumed_file(entry, index, objects, &path, &meta)?;
        }
    }
    if let Some(path) = judge.cut.as_ref().and_then(|c| c.first_foreign()) {
        return Err(judge.conflict(path, NOT_WRITTEN_BY_THE_RESTORE));
    }
    Ok(())
}

const NOT_WRITTEN_BY_THE_RESTORE: &str =
    "holds content the interrupted restore did not write (changed since?)";

/// The state of [`refuse_what_is_in_the_way`]'s walk.
struct InTheWay<'a> {
    workdir: &'a Path,
    resume_only: bool,
    cut: Option<super::intent::CutShort>,
    to_worktree: Option<super::write::WorktreeForm<'a>>,
    folders_seen: std::collections::HashSet<std::path::PathBuf>,
}

impl InTheWay<'_> {
    fn conflict(&self, path: &Path, what: &str) -> Error {
        Error::conflict(format!(
            "{} {what}: nothing was changed (move it aside{})",
            path.display(),
            if self.resume_only {
                ", or pass --force to overwrite the files the commit tracks"
            } else {
                ""
            }
        ))
    }

    /// Refuse a file or a symlink where the commit has one of `rel`'s leading folders: the commit
    /// does not track it, so even `--force` may not delete it (SPEC rule 6).
    fn leading_folders(&mut self, rel: &Path) -> Result<()> {
        let mut parent = std::path::PathBuf::new();
        let mut components = rel.components().peekable();
        while let Some(component) = components.next() {
            if components.peek().is_none() {
                break;
            }
            parent.push(component);
            if !self.folders_seen.insert(parent.clone()) {
                continue;
            }
            if let Ok(meta) = std::fs::symlink_metadata(self.workdir.join(&parent))
                && !meta.is_dir()
            {
                return Err(self.conflict(
                    &self.workdir.join(&parent),
                    if meta.file_type().is_symlink() {
                        "is a symlink where the commit has a folder"
                    } else {
                        "is a file where the commit has a folder"
                    },
                ));
            }
        }
        Ok(())
    }

    /// Completing an interrupted restore: the file at `path` must hold the commit's content, or
    /// a prefix of it that the killed checkout cut short.
    fn resumed_file(
        &mut self,
        entry: &gix::index::Entry,
        index: &gix::index::File,
        objects: &crate::pack::PackObjects,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<()> {
        use crate::pack::Compared;
        let mtime = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        let symlink = meta.file_type().is_symlink();
        let compared = if let Some(big) = objects.big(&entry.id) {
            // Compared a chunk at a time: it is never held whole.
            if meta.is_file() {
                objects
                    .compare_big(big, path)
                    .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
            } else {
                Compared::Other
            }
        } else {
            let mut buf = Vec::new();
            let blob = gix::objs::Find::try_find(objects, &entry.id, &mut buf)
                .ok()
                .flatten()
                .map(|d| d.data.to_vec())
                .unwrap_or_default();
            let blob = match &mut self.to_worktree {
                Some(form) if entry.mode != gix::index::entry::Mode::SYMLINK => {
                    form.convert(blob, entry.path(index))?
                }
                _ => blob,
            };
            // An LFS file the killed run had already replaced by its object (never read whole).
            let lfs_done = !symlink && is_lfs_content(&blob, path);
            let on_disk = if lfs_done {
                None
            } else if symlink {
                std::fs::read_link(path)
                    .map(|t| t.into_os_string().into_encoded_bytes())
                    .ok()
            } else {
                std::fs::read(path).ok()
            };
            let same_kind = symlink == (entry.mode == gix::index::entry::Mode::SYMLINK);
            match on_disk {
                _ if lfs_done => Compared::Same,
                Some(d) if same_kind && d == blob => Compared::Same,
                Some(d) if same_kind && !symlink && blob.starts_with(&d) => Compared::Prefix,
                _ => Compared::Other,
            }
        };
        match (&mut self.cut, compared) {
            (Some(cut), Compared::Same) => cut.whole(mtime),
            (Some(cut), Compared::Prefix) => cut.prefix(path.to_owned(), mtime),
            _ => return Err(self.conflict(path, NOT_WRITTEN_BY_THE_RESTORE)),
        }
        Ok(())
    }
}

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
/// [`Error::Conflict`] when a file is in the way and `overwrite` is false; [`Error::LocalIo`] on
/// other I/O failures.
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
    let mut form = super::write::WorktreeForm::new(repo, index)?;
    // Entries outside a sparse checkout's cone get no file.
    let outside = set_skipped_aside(index);
    // Files over the big-object threshold are streamed from the pack; the others are held whole.
    let big = set_big_files_aside(index, &objects)?;
    let early = set_early_files_aside(index, tree, early)?;
    let _progress = crate::progress::Progress::spinner(&format!("checking out {total} files"));
    let mut writer = super::write::Writer::new(tree, super::write::Overwrite { files: overwrite })
        .with_failpoints();
    writer.write_entries(index, &objects, &mut form)?;
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
    for (path, id, mode, flags) in outside {
        index.dangerously_push_entry(Default::default(), id, flags, mode, path.as_ref());
    }
    index.sort_entries();
    Ok(total)
}

/// Take the entries with git's skip-worktree bit (outside a sparse checkout's cone) out of
/// `index`; they go back in, with no stat, once the others are written.
fn set_skipped_aside(
    index: &mut gix::index::File,
) -> Vec<(
    gix::bstr::BString,
    gix::ObjectId,
    gix::index::entry::Mode,
    gix::index::entry::Flags,
)> {
    let mut out = Vec::new();
    index.remove_entries(|_, path, entry| {
        let skip = super::sparse::skipped(entry);
        if skip {
            out.push((path.to_owned(), entry.id, entry.mode, entry.flags));
        }
        skip
    });
    out
}

/// Take the entries the early checkout wrote (same path, blob and mode) out of `index`, so gix's
/// checkout does not write them again; returns them. A file written early that the index does not
/// hold so (possible only for a tree with duplicate names) is removed.
///
/// # Errors
/// [`Error::LocalIo`] when such a file cannot be removed.
fn set_early_files_aside<'w>(
    index: &mut gix::index::File,
    tree: &crate::fs::tree::Tree,
    early: &'w [super::early::Written],
) -> Result<Vec<&'w super::early::Written>> {
    if early.is_empty() {
        return Ok(Vec::new());
    }
    let by_path: std::collections::HashMap<&gix::bstr::BStr, &super::early::Written> =
        early.iter().map(|w| (w.path.as_ref(), w)).collect();
    let mut kept = Vec::with_capacity(early.len());
    index.remove_entries(|_, path, entry| {
        let Some(w) = by_path.get(path) else {
            return false;
        };
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
struct BigFile {
    path: gix::bstr::BString,
    id: gix::ObjectId,
    mode: gix::index::entry::Mode,
    blob: crate::pack::BigBlob,
}

/// Take the big files out of `index` (they go back in, with their stat, once written).
///
/// # Errors
/// [`Error::Integrity`] for a symlink whose target is that big.
fn set_big_files_aside(
    index: &mut gix::index::File,
    objects: &crate::pack::PackObjects,
) -> Result<Vec<BigFile>> {
    let mut big = Vec::new();
    for entry in index.entries() {
        if entry.mode == gix::index::entry::Mode::COMMIT {
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

/// Write one big file by streaming it from the pack through `writer` (its folders made, a file
/// or symlink in its place replaced when allowed, never written through); returns its stat.
///
/// # Errors
/// [`Error::Conflict`] for a file in the way without `overwrite`, or a file where a folder goes;
/// [`Error::LocalIo`] for I/O failures.
fn write_big_file(
    writer: &mut super::write::Writer<'_>,
    file: &BigFile,
    objects: &crate::pack::PackObjects,
) -> Result<gix::index::entry::Stat> {
    let rel = Path::new(std::ffi::OsStr::from_bytes(&file.path));
    let exec = file.mode == gix::index::entry::Mode::FILE_EXECUTABLE;
    let shown = writer.shown(rel).display().to_string();
    let out = writer.open_new(rel, exec)?;
    let mut out = HalfwayFailpoint {
        inner: std::io::BufWriter::with_capacity(256 << 10, out),
        written: 0,
        half: file.blob.size() / 2,
    };
    objects
        .stream_big(file.blob, &mut out)
        .and_then(|_| std::io::Write::flush(&mut out))
        .map_err(|e| Error::io(format!("writing {shown}"), e))?;
    let out = out
        .inner
        .into_inner()
        .map_err(|e| Error::io(format!("writing {shown}"), e.into_error()))?;
    let meta = gix::index::fs::Metadata::from_file(&out)
        .map_err(|e| Error::io(format!("reading {shown}"), e))?;
    gix::index::entry::Stat::from_fs(&meta)
        .map_err(|e| Error::internal(format!("reading {shown}"), e))
}

/// Write the index file.
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn write_index(index: &mut gix::index::File) -> Result<()> {
    index
        .write(gix::index::write::Options::default())
        .map_err(|e| Error::from_chain("writing the index", &e))
}

/// Whether the file at `path` holds the object of the LFS pointer `blob`.
fn is_lfs_content(blob: &[u8], path: &Path) -> bool {
    crate::wire::lfs::Pointer::parse(blob)
        .is_some_and(|pointer| crate::repo::lfs::file_holds(path, &pointer))
}

/// A writer that aborts the process once half of a big file is written (flushed to the file):
/// the `mid-big-file` failpoint.
struct HalfwayFailpoint<W: std::io::Write> {
    inner: std::io::BufWriter<W>,
    written: u64,
    half: u64,
}

impl<W: std::io::Write> std::io::Write for HalfwayFailpoint<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        if self.written > self.half && failpoint::armed("mid-big-file") {
            self.inner.flush()?;
            failpoint::hit("mid-big-file");
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trees in memory, by id, and how many times one was read.
    #[derive(Default)]
    struct Trees(
        std::collections::HashMap<gix::ObjectId, Vec<u8>>,
        std::cell::Cell<usize>,
    );

    impl Trees {
        /// Store a tree of `entries` (mode, name, id) as written; returns its id.
        fn put(&mut self, entries: &[(&str, &str, gix::ObjectId)]) -> gix::ObjectId {
            let mut data = Vec::new();
            for (mode, name, id) in entries {
                data.extend_from_slice(format!("{mode} {name}\0").as_bytes());
                data.extend_from_slice(id.as_slice());
            }
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Tree, &data)
                .unwrap();
            self.0.insert(id, data);
            id
        }

        /// A tree of `n` entries named `d00`… of `mode`, each `id`.
        fn of(&mut self, n: usize, mode: &str, id: gix::ObjectId) -> gix::ObjectId {
            let names: Vec<String> = (0..n).map(|i| format!("d{i:02}")).collect();
            let entries: Vec<_> = names.iter().map(|n| (mode, n.as_str(), id)).collect();
            self.put(&entries)
        }
    }

    impl gix::objs::Find for Trees {
        fn try_find<'a>(
            &self,
            id: &gix::oid,
            buffer: &'a mut Vec<u8>,
        ) -> gix::Result<Option<gix::objs::Data<'a>>> {
            self.1.set(self.1.get() + 1);
            let Some(data) = self.0.get(id) else {
                return Ok(None);
            };
            buffer.clear();
            buffer.extend_from_slice(data);
            Ok(Some(gix::objs::Data::new(
                buffer,
                gix::objs::Kind::Tree,
                gix::hash::Kind::Sha1,
            )))
        }
    }

    fn refused(trees: &Trees, root: gix::ObjectId, max: u64) -> String {
        match measure_tree(trees, root, max) {
            Err(Error::Integrity(msg)) => msg,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_tree_is_measured_exactly_and_each_distinct_tree_read_once() {
        let blob = gix::ObjectId::from_hex(b"0123456789012345678901234567890123456789").unwrap();
        let mut t = Trees::default();
        // 16 folders of 16 folders of 16 files: 4096 files and 272 folders.
        let leaf = t.of(16, "100644", blob);
        let mid = t.of(16, "40000", leaf);
        let root = t.of(16, "40000", mid);
        measure_tree(&t, root, 4096 + 272).unwrap();
        assert_eq!(t.1.replace(0), 3);
        assert!(refused(&t, root, 4096 + 271).contains("over 4367 files and folders"));
        // 16 levels of 16 folders: 16^16 files, refused at once.
        let mut bomb = leaf;
        for _ in 0..15 {
            bomb = t.of(16, "40000", bomb);
        }
        assert!(refused(&t, bomb, 1_000_000).contains("--max-entries"));
        // A chain of folders deeper than git's core.maxTreeDepth.
        let mut deep = leaf;
        for _ in 0..MAX_TREE_DEPTH {
            deep = t.of(1, "40000", deep);
        }
        assert!(refused(&t, deep, u64::MAX).contains("over 4096 deep"));
    }

    #[test]
    fn two_entries_of_one_name_are_refused_even_when_not_adjacent() {
        let blob = gix::ObjectId::from_hex(b"0123456789012345678901234567890123456789").unwrap();
        let mut t = Trees::default();
        let sub = t.of(2, "100644", blob);
        // Git's order puts `a.b` between the file `a` and the folder `a` (sorted as `a/`).
        let root = t.put(&[
            ("100644", "a", blob),
            ("100644", "a.b", blob),
            ("40000", "a", sub),
        ]);
        let msg = refused(&t, root, 100);
        assert!(msg.contains("two entries named 'a' in ''"), "{msg}");
        assert!(msg.contains("(a folder and a file)"), "{msg}");
        let nested = t.put(&[("120000", "x", blob), ("40000", "x", sub)]);
        let root = t.put(&[("40000", "top", nested)]);
        let msg = refused(&t, root, 100);
        assert!(
            msg.contains("named 'x' in 'top' (a folder and a symlink)"),
            "{msg}"
        );
        // A subtree the objects lack.
        let root = t.put(&[("40000", "gone", blob)]);
        assert!(refused(&t, root, 100).contains("is not in the pack"));
    }
}
