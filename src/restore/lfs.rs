//! Git LFS in a restore: the checked-out tree's pointer files (paths its `.gitattributes` mark
//! `filter=lfs`) are replaced by their objects, fetched through the LFS batch API into
//! `.git/lfs/objects` (where git-lfs keeps them), as `git lfs pull` would; no `git-lfs` binary is
//! run, and nothing from a configuration is.
//!
//! Each object streams to a temporary file in the staging git dir, its size and SHA-256 checked
//! on the way, and is renamed into `lfs/objects` only once whole: a killed run's objects are kept
//! for the rerun ([`keep_objects`]). A work-tree file is replaced by a rename, so it holds either
//! the pointer or the whole content.

use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use gix::bstr::{BStr, BString, ByteSlice as _};

use crate::error::{Error, Result};
use crate::fs::tree::Tree;
use crate::wire::http::Http;
use crate::wire::lfs::{self as wire, Answer, Endpoint, Operation, Pointer};
use crate::wire::streaming::Streaming;

use super::lfs_select::Selection;

/// When a restore fetches LFS objects (`--lfs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LfsMode {
    /// When the tree's `.gitattributes` mark a path `filter=lfs`.
    #[default]
    Auto,
    /// Every pointer file, whatever the attributes say.
    Always,
    /// Never: pointer files stay as they are.
    Never,
}

/// A pointer file of the tree, to be replaced by its object.
#[derive(Debug, Clone)]
pub struct LfsFile {
    /// Its path in the tree.
    pub path: BString,
    /// What it points to.
    pub pointer: Pointer,
}

/// The tree's LFS files and where their server is.
#[derive(Debug, Default)]
pub struct LfsPlan {
    /// The pointer files to replace.
    pub files: Vec<LfsFile>,
    /// `lfs.url` from the tree's `.lfsconfig`.
    pub configured_url: Option<String>,
    /// Warnings: include or exclude patterns that matched none of the tree's LFS files.
    pub notes: Vec<String>,
}

/// The pointer files of `index` to replace, as `mode` asks; `read` gives a blob's bytes when it
/// is small enough to be a pointer (`None` otherwise).
///
/// # Errors
/// [`Error::Internal`] when the tree's `.gitattributes` cannot be read.
pub fn find(
    repo: &gix::Repository,
    index: &gix::index::File,
    mode: LfsMode,
    read: &mut dyn FnMut(&gix::oid) -> Option<Vec<u8>>,
) -> Result<LfsPlan> {
    // A file is marked only by the value `lfs` written in a `.gitattributes` (in a line or a
    // macro): without one, no path's attributes need matching (on git/git, whose `.gitattributes`
    // name other filters, 60-90 ms after the pack's last byte).
    let names_lfs = index.entries().iter().any(|e| {
        let p = e.path(index);
        (p == ".gitattributes" || p.ends_with(b"/.gitattributes"))
            && repo
                .find_object(e.id)
                .map_or(true, |blob| blob.data.find(b"lfs").is_some())
    });
    if mode == LfsMode::Never || (mode == LfsMode::Auto && !names_lfs) {
        return Ok(LfsPlan::default());
    }
    super::write::check_attribute_patterns(repo, index)?;
    let mut attributes = repo
        .attributes_only(
            index,
            gix::worktree::stack::state::attributes::Source::IdMapping,
        )
        .map_err(|e| Error::from_chain("reading the tree's .gitattributes", &e))?;
    let mut outcome = attributes.selected_attribute_matches(["filter"]);
    let mut selection = Selection::from_knobs();
    let mut asked = 0;
    let mut plan = LfsPlan::default();
    for entry in index.entries() {
        if !entry.mode.is_submodule() && entry.path(index) == ".lfsconfig" {
            plan.configured_url =
                read(&entry.id).and_then(|b| crate::repo::lfs::configured_url(&b));
        }
        if super::sparse::skipped(entry)
            || !matches!(
                entry.mode,
                gix::index::entry::Mode::FILE | gix::index::entry::Mode::FILE_EXECUTABLE
            )
        {
            continue;
        }
        let path = entry.path(index);
        if mode == LfsMode::Auto {
            let platform = attributes
                .at_entry(path, Some(entry.mode))
                .map_err(|e| Error::from_chain(format!("reading the attributes of {path}"), &e))?;
            platform.matching_attributes(&mut outcome);
            let lfs = outcome.iter_selected().any(|m| {
                matches!(m.assignment.state, gix::attrs::StateRef::Value(v) if v.as_bstr() == "lfs")
            });
            if !lfs {
                continue;
            }
        }
        asked += 1;
        if !selection.wants(path) {
            continue;
        }
        if let Some(pointer) = read(&entry.id).and_then(|b| Pointer::parse(&b)) {
            plan.files.push(LfsFile {
                path: path.to_owned(),
                pointer,
            });
        }
    }
    plan.notes = selection.unmatched(asked);
    if plan.files.is_empty() && mode == LfsMode::Auto && plan.configured_url.is_none() {
        return Ok(LfsPlan {
            notes: plan.notes,
            ..LfsPlan::default()
        });
    }
    Ok(plan)
}

use crate::repo::lfs::object_path;

/// The pointer files of an archive-restored tree (its files are in `tree`, its `index` built from
/// them): without an object store to read `.gitattributes` through, `auto` takes every file that
/// is a strict LFS pointer once some `.gitattributes` of the tree names `filter=lfs`.
///
/// # Errors
/// None today; reading a file that is gone or unreadable skips it.
pub fn find_in_tree(tree: &Tree, index: &gix::index::File, mode: LfsMode) -> Result<LfsPlan> {
    let read = |path: &BStr, cap: u64| -> Option<Vec<u8>> {
        let rel = Path::new(std::ffi::OsStr::from_bytes(path));
        let meta = tree.symlink_metadata(rel).ok()?;
        (meta.is_file() && meta.len() <= cap)
            .then(|| tree.read(rel, false, cap).ok())
            .flatten()
    };
    let regular = |e: &gix::index::Entry| {
        matches!(
            e.mode,
            gix::index::entry::Mode::FILE | gix::index::entry::Mode::FILE_EXECUTABLE
        )
    };
    let marked = index.entries().iter().filter(|e| regular(e)).any(|e| {
        let p = e.path(index);
        (p == ".gitattributes" || p.ends_with(b"/.gitattributes"))
            && read(p, 1 << 20).is_some_and(|b| b.find(b"filter=lfs").is_some())
    });
    if mode == LfsMode::Never || (mode == LfsMode::Auto && !marked) {
        return Ok(LfsPlan::default());
    }
    let mut selection = Selection::from_knobs();
    let mut asked = 0;
    let mut plan = LfsPlan::default();
    for entry in index.entries().iter().filter(|e| regular(e)) {
        let path = entry.path(index);
        if path == ".lfsconfig" {
            plan.configured_url =
                read(path, 64 << 10).and_then(|b| crate::repo::lfs::configured_url(&b));
            continue;
        }
        if u64::from(entry.stat.size) > wire::MAX_POINTER_BYTES {
            continue;
        }
        // Without attributes, the LFS files are the pointers: the patterns select among them.
        let Some(pointer) = read(path, wire::MAX_POINTER_BYTES).and_then(|b| Pointer::parse(&b))
        else {
            continue;
        };
        asked += 1;
        if selection.wants(path) {
            plan.files.push(LfsFile {
                path: path.to_owned(),
                pointer,
            });
        }
    }
    plan.notes = selection.unmatched(asked);
    Ok(plan)
}

/// Fetch the objects of `files` that `git_dir/lfs/objects` lacks from `endpoint`, a batch of
/// [`wire::BATCH_SIZE`] at a time, `GIT_SESSION_LFS_CONCURRENCY` transfers at once ([`crate::knobs::Knobs::lfs_concurrency`]); returns how many were
/// fetched.
///
/// # Errors
/// Those of [`wire::batch`] and [`wire::download`]; [`Error::LocalIo`] for the disk.
pub fn fetch(http: &Http, endpoint: &Endpoint, git_dir: &Path, files: &[LfsFile]) -> Result<usize> {
    let mut wanted: Vec<Pointer> = files.iter().map(|f| f.pointer).collect();
    wanted.sort();
    wanted.dedup();
    // Objects are renamed into place only once checked: one there with its size is whole.
    wanted.retain(|p| !crate::repo::lfs::has(git_dir, p));
    if wanted.is_empty() {
        return Ok(0);
    }
    let tmp = git_dir.join("lfs/tmp");
    std::fs::create_dir_all(&tmp)
        .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    let threads = crate::knobs::get().lfs_concurrency;
    let _progress =
        crate::progress::Progress::spinner(&format!("fetching {} Git LFS objects", wanted.len()));
    // The batches are asked for one ahead of the transfers (a bounded queue between them), so the
    // transfers never wait for a batch's round trip nor for the slowest of a batch.
    let (queue, work) =
        std::sync::mpsc::sync_channel::<(Pointer, Box<wire::Action>)>(wire::BATCH_SIZE);
    let work = Mutex::new(work);
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let fail = |e: Error| {
        if let Ok(mut f) = failed.lock() {
            f.get_or_insert(e);
        }
    };
    let has_failed = || failed.lock().map(|f| f.is_some()).unwrap_or(true);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let queue = queue;
            for chunk in wanted.chunks(wire::BATCH_SIZE) {
                if has_failed() {
                    return;
                }
                let answers = match http.retrying("asking the LFS server for objects", || {
                    wire::batch(http, endpoint, Operation::Download, chunk)
                }) {
                    Ok(a) => a,
                    Err(e) => return fail(e),
                };
                for (pointer, answer) in chunk.iter().zip(answers) {
                    if let Answer::Transfer(action, _) = answer
                        && queue.send((*pointer, action)).is_err()
                    {
                        return;
                    }
                }
            }
        });
        for _ in 0..threads.min(wanted.len()) {
            scope.spawn(|| {
                // Each transfer thread reads its bodies itself (see `wire::streaming`).
                let stream = Streaming::new(http).map_err(&fail).ok();
                // After a failure the queue is still drained, so the batches never wait on it.
                while let Some((pointer, action)) = work.lock().ok().and_then(|w| w.recv().ok()) {
                    let Some(stream) = &stream else { continue };
                    if has_failed() {
                        continue;
                    }
                    if let Err(e) =
                        fetch_one(stream, endpoint, git_dir, (&action, &pointer), &has_failed)
                    {
                        fail(e);
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(wanted.len())
}

/// Download one object into `lfs/tmp`, then rename it into `lfs/objects` (retried as a whole).
fn fetch_one(
    stream: &Streaming<'_>,
    endpoint: &Endpoint,
    git_dir: &Path,
    (action, pointer): (&wire::Action, &Pointer),
    stop: &dyn Fn() -> bool,
) -> Result<()> {
    let dest = object_path(git_dir, pointer);
    let tmp = git_dir
        .join("lfs/tmp")
        .join(format!("{}.part", pointer.oid));
    stream.http().retrying("fetching an LFS object", || {
        // Another transfer failed for good: the run's error is that one, so no more attempts.
        if stop() {
            return Err(Error::Protocol(format!(
                "LFS object {} not fetched: another transfer failed",
                pointer.oid
            )));
        }
        let file = std::fs::File::create(&tmp)
            .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
        let mut out = std::io::BufWriter::with_capacity(256 << 10, file);
        let got = wire::download(stream, endpoint, action, pointer, &mut out).and_then(|()| {
            out.flush()
                .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))
        });
        if got.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        got
    })?;
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
    }
    std::fs::rename(&tmp, &dest)
        .map_err(|e| Error::io(format!("writing {}", dest.display()), e))?;
    crate::failpoint::hit("mid-lfs");
    Ok(())
}

/// Replace each pointer file of `files` in `tree` by its object from `git_dir/lfs/objects`
/// (copied to the staging folder `staging` in `tree`, then renamed over the pointer), and record
/// the file's new stat in `index`.
///
/// # Errors
/// [`Error::LocalIo`] when the disk refuses; [`Error::Internal`] when an object is missing.
pub fn smudge(
    tree: &Tree,
    staging: &Path,
    git_dir: &Path,
    index: &mut gix::index::File,
    files: &[LfsFile],
) -> Result<()> {
    let made = git_dir.join("lfs/tmp");
    std::fs::create_dir_all(&made)
        .map_err(|e| Error::io(format!("creating {}", made.display()), e))?;
    let tmp = staging.join("lfs/tmp/smudge");
    for (n, file) in files.iter().enumerate() {
        if n == files.len() / 2 {
            crate::failpoint::hit("mid-smudge");
        }
        let rel = Path::new(std::ffi::OsStr::from_bytes(&file.path));
        let shown = tree.shown(rel).display().to_string();
        let src = object_path(git_dir, &file.pointer);
        let mut from = crate::fs::open_regular(&src, false)
            .map_err(|e| Error::io(format!("reading {}", src.display()), e))?;
        let Some(at) = index.entry_index_by_path(file.path.as_bstr()).ok() else {
            continue;
        };
        let executable = index.entries()[at].mode == gix::index::entry::Mode::FILE_EXECUTABLE;
        let _ = tree.remove_file(&tmp);
        let mut to = tree
            .create_new(&tmp, executable)
            .map_err(|e| Error::io(format!("creating {}", tree.shown(&tmp).display()), e))?;
        std::io::copy(&mut from, &mut to).map_err(|e| Error::io(format!("writing {shown}"), e))?;
        drop(to);
        tree.rename_to(&tmp, tree, rel)
            .map_err(|e| Error::io(format!("writing {shown}"), e))?;
        let stat = tree
            .stat(rel)
            .map_err(|e| Error::io(format!("reading {shown}"), e))?;
        index.entries_mut()[at].stat = stat;
    }
    Ok(())
}

/// Carry the objects of a killed run's staging git dir (`old`) over to the new one (`new`), so a
/// rerun fetches only what is missing.
pub fn keep_objects(old: &Path, parked: &Path) {
    let from = old.join("lfs/objects");
    if from.is_dir() {
        let _ = std::fs::rename(&from, parked);
    }
}

/// Put the objects [`keep_objects`] parked into the new staging git dir.
pub fn restore_objects(parked: &Path, new: &Path) {
    if parked.is_dir() {
        let _ = std::fs::create_dir_all(new.join("lfs"));
        let _ = std::fs::rename(parked, new.join("lfs/objects"));
    }
}

use std::os::unix::ffi::OsStrExt as _;
