//! Turn the [`Plan`](super::changes::Plan) into tree edits: hash the new and changed work tree files
//! (and only those) into blobs, scan them for secrets first, and leave out what must not be staged
//! (files over 50 MiB, nested repositories). A path that the next `restore` would refuse
//! ([`crate::names`]: `.git` in any spelling, the staging folder) is refused, like a token.
//!
//! Blobs are converted like `git add` does (`.gitattributes` `text`/`eol`/`ident`/
//! `working-tree-encoding`), but never through a filter driver: the repository is opened with its
//! `filter.*` configuration removed (SPEC rule 8).

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;

use super::changes::{Plan, Target};
use crate::error::{Error, Result};
use crate::scan::Scanner;

/// Files larger than this (50 MiB) are not staged.
pub const MAX_FILE_BYTES: u64 = 52_428_800;
/// The scan reads content in chunks of this size (with overlap, see [`Scanner`]).
const SCAN_CHUNK: usize = 1 << 20;
/// Work tree files per hashing thread before another thread is worth starting.
const FILES_PER_THREAD: usize = 64;
/// At most this many hashing threads (each may hold one file of up to 50 MiB in memory).
const MAX_THREADS: usize = 4;

/// The path rules git applies on Linux when adding files (`core.protectNTFS` on, HFS and Windows
/// device names off): for building the index of a tree already committed (the paths staged now
/// were checked by the stricter [`crate::names`]).
pub fn name_rules() -> gix::validate::path::component::Options {
    gix::validate::path::component::Options {
        protect_windows: false,
        protect_hfs: false,
        protect_ntfs: true,
    }
}

/// The edits to apply to `HEAD^{tree}`.
#[derive(Debug, Default)]
pub struct Staged {
    /// Paths to remove (applied first).
    pub removals: Vec<BString>,
    /// Entries to add or replace.
    pub upserts: Vec<(BString, EntryKind, gix::ObjectId)>,
    /// Stat data of the work tree files that were hashed, taken before reading them.
    pub stats: HashMap<BString, gix::index::entry::Stat>,
    /// What was left out, and why.
    pub warnings: Vec<String>,
    /// The Git LFS objects stored for files the tree's `.gitattributes` mark `filter=lfs`
    /// (their blobs are pointers), to be uploaded before the push.
    pub lfs: Vec<crate::types::lfs::Pointer>,
}

/// What one work tree path turned out to be.
enum Outcome {
    /// Not there (anymore), or a directory now (its files are staged on their own).
    Gone,
    Blob {
        kind: EntryKind,
        id: gix::ObjectId,
        stat: gix::index::entry::Stat,
        /// The LFS object the blob (a pointer) names, when the file is an LFS file.
        lfs: Option<crate::types::lfs::Pointer>,
    },
    TooLarge(u64),
    NestedRepo,
    Untrackable,
    Secret,
}

/// Hash, scan and classify every path of `plan`.
///
/// # Errors
/// [`Error::Integrity`] when a file to commit contains one of `secrets` (blobs of other files may
/// already be in the object database, unreferenced; no blob with a secret is ever written);
/// [`Error::Internal`] on I/O failures.
pub fn stage(
    repo: &gix::Repository,
    index: &gix::index::State,
    workdir: &Path,
    plan: &Plan,
    head_tree: &gix::Tree<'_>,
    secrets: &[String],
) -> Result<Staged> {
    let exec_bit = repo
        .filesystem_options()
        .map_err(|e| super::base::fail("reading core.fileMode", e))?
        .executable_bit;
    let mut stager = Stager {
        repo,
        head_tree,
        scanner: Scanner::new(secrets),
        staged: Staged::default(),
        secret_paths: Vec::new(),
        secret_names: 0,
        refused_names: Vec::new(),
    };
    let mut from_worktree: Vec<&BStr> = Vec::new();
    for (path, target) in &plan.targets {
        if stager.sort_target(path, target)? {
            from_worktree.push(path.as_ref());
        }
    }
    for (path, outcome) in hash_all(repo, index, workdir, &from_worktree, secrets, exec_bit)? {
        stager.record_outcome(path, outcome)?;
    }
    for path in &plan.nested_repos {
        stager.leave_out_nested_repo(path.as_ref());
    }
    stager.finish()
}

/// The edits collected so far, and the paths refused for holding a secret.
struct Stager<'a> {
    repo: &'a gix::Repository,
    head_tree: &'a gix::Tree<'a>,
    scanner: Scanner<'a>,
    staged: Staged,
    /// Paths whose content holds a secret.
    secret_paths: Vec<BString>,
    /// How many paths hold a secret in their name: refused like contents that do, and never shown.
    secret_names: usize,
    /// Paths the name rule refuses, and why.
    refused_names: Vec<(BString, crate::names::NameError)>,
}

impl Stager<'_> {
    /// Stage what `target` says for `path`, short of reading the work tree: `true` when the work
    /// tree file at `path` is to be hashed.
    fn sort_target(&mut self, path: &BString, target: &Target) -> Result<bool> {
        if *target != Target::Remove && self.scanner.scan_all(path, SCAN_CHUNK) {
            self.secret_names += 1;
            return Ok(false);
        }
        match target {
            Target::Remove => self.staged.removals.push(path.clone()),
            Target::Worktree => return Ok(self.name_allowed(path.as_ref(), false)),
            Target::Index { id, mode } => {
                if self.name_allowed(path.as_ref(), *mode == gix::index::entry::Mode::SYMLINK) {
                    self.take_staged_entry(path, *id, *mode)?;
                }
            }
        }
        Ok(false)
    }

    /// Whether the name rule lets `path` into a tree; if not, it is recorded as refused.
    fn name_allowed(&mut self, path: &BStr, symlink: bool) -> bool {
        match crate::names::check_path(path, symlink) {
            Ok(()) => true,
            Err(e) => {
                self.refused_names.push((path.to_owned(), e));
                false
            }
        }
    }

    /// Take the index entry staged with plain git at `path`, checked like a work tree file.
    fn take_staged_entry(
        &mut self,
        path: &BString,
        id: gix::ObjectId,
        mode: gix::index::entry::Mode,
    ) -> Result<()> {
        let Some(kind) = mode.to_tree_entry_mode().map(|m| m.kind()) else {
            return Ok(());
        };
        if kind == EntryKind::Commit {
            self.staged.upserts.push((path.clone(), kind, id));
            return Ok(());
        }
        // A blob staged with plain git: it is new content too, so it is checked like a file.
        let header = self
            .repo
            .find_header(id)
            .map_err(|e| super::base::fail(format!("reading the staged object of {path}"), e))?;
        if header.size() > MAX_FILE_BYTES {
            self.staged
                .warnings
                .push(too_large(path.as_ref(), header.size(), self.head_tree)?);
            return Ok(());
        }
        let blob = self
            .repo
            .find_blob(id)
            .map_err(|e| super::base::fail(format!("reading the staged object of {path}"), e))?;
        if self.scanner.scan_all(&blob.data, SCAN_CHUNK) {
            self.secret_paths.push(path.clone());
            return Ok(());
        }
        self.staged.upserts.push((path.clone(), kind, id));
        Ok(())
    }

    /// Stage (or leave out, with a warning) the work tree path that hashing found to be `outcome`.
    fn record_outcome(&mut self, path: &BStr, outcome: Outcome) -> Result<()> {
        let staged = &mut self.staged;
        match outcome {
            Outcome::Gone => staged.removals.push(path.to_owned()),
            Outcome::Blob {
                kind,
                id,
                stat,
                lfs,
            } => {
                // Only now is a symlink known to be one (`.gitmodules` may not be).
                if kind == EntryKind::Link && !self.name_allowed(path, true) {
                    return Ok(());
                }
                // An LFS file git re-read with its content unchanged (a racily clean one) names
                // the object HEAD has: nothing new to upload.
                let new_object = lfs.filter(|_| {
                    self.head_tree
                        .lookup_entry_by_path(path.to_str_lossy().as_ref())
                        .ok()
                        .flatten()
                        .is_none_or(|e| e.object_id() != id)
                });
                let staged = &mut self.staged;
                staged.lfs.extend(new_object);
                staged.upserts.push((path.to_owned(), kind, id));
                staged.stats.insert(path.to_owned(), stat);
            }
            Outcome::TooLarge(size) => staged.warnings.push(too_large(path, size, self.head_tree)?),
            Outcome::NestedRepo => {
                // A tracked file replaced by a repository: the file is gone, the repository is
                // not staged.
                staged.removals.push(path.to_owned());
                staged.warnings.push(nested_repo(path));
            }
            Outcome::Untrackable => staged.warnings.push(format!(
                "left out {path}: it is not a regular file, symbolic link or directory"
            )),
            Outcome::Secret => self.secret_paths.push(path.to_owned()),
        }
        Ok(())
    }

    /// Warn about the untracked nested repository at `path` (never naming a path with a secret).
    fn leave_out_nested_repo(&mut self, path: &BStr) {
        if self.scanner.scan_all(path, SCAN_CHUNK) {
            self.staged
                .warnings
                .push("left out a nested git repository whose path holds a session token".into());
        } else {
            self.staged.warnings.push(nested_repo(path));
        }
    }

    /// The edits, or the refusal when any path or content holds a secret, or a path breaks the
    /// name rule.
    fn finish(mut self) -> Result<Staged> {
        if self.secret_paths.is_empty() && self.secret_names == 0 {
            return match self.refused_names.first() {
                None => Ok(self.staged),
                Some((path, why)) => Err(Error::Integrity(format!(
                    "refusing to commit '{}' ({why}): a restore of the session would refuse \
                     it{}; rename it and save again. Nothing was committed",
                    path.to_str_lossy().escape_debug(),
                    match self.refused_names.len() {
                        1 => String::new(),
                        n => format!(" ({} more such paths)", n - 1),
                    }
                ))),
            };
        }
        self.secret_paths.sort();
        let mut shown: Vec<String> = self
            .secret_paths
            .iter()
            .take(5)
            .map(|p| p.to_string())
            .collect();
        if self.secret_paths.len() > 5 {
            shown.push(format!("{} more files", self.secret_paths.len() - 5));
        }
        if self.secret_names > 0 {
            shown.push(format!(
                "{} file(s) whose path contains it",
                self.secret_names
            ));
        }
        Err(Error::Integrity(format!(
            "refusing to commit a secret (a session token, or the private key of \
             SIGNING_KEY_FILE): found in {}; remove it (or ignore the file) and save again. \
             Nothing was committed",
            shown.join(", "),
        )))
    }
}

/// The warning for a file over the limit: new files are left out, tracked ones stay as committed.
fn too_large(path: &BStr, size: u64, head_tree: &gix::Tree<'_>) -> Result<String> {
    let tracked = head_tree
        .lookup_entry(path.split_str("/"))
        .map_err(|e| super::base::fail(format!("looking up {path} in HEAD"), e))?
        .is_some_and(|e| !e.mode().is_tree());
    // In bytes: a file just over the limit read "50.0 MiB, over the 50 MiB limit".
    let over = format!(
        "{size} bytes, over the limit of {MAX_FILE_BYTES} bytes (50 MiB) by {}",
        size - MAX_FILE_BYTES
    );
    Ok(if tracked {
        format!("{path} is {over}: left at its committed version")
    } else {
        format!("left out {path}: {over}")
    })
}

fn nested_repo(path: &BStr) -> String {
    let path = path.trim_end_with(|c| c == '/');
    format!(
        "left out {}/: it is a nested git repository",
        path.as_bstr()
    )
}

/// Hash the work tree files at `paths`, in parallel when there are many.
fn hash_all<'p>(
    repo: &gix::Repository,
    index: &gix::index::State,
    workdir: &Path,
    paths: &[&'p BStr],
    secrets: &[String],
    exec_bit: bool,
) -> Result<Vec<(&'p BStr, Outcome)>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_THREADS)
        .min(paths.len().div_ceil(FILES_PER_THREAD))
        .max(1);
    let run = |repo: gix::Repository, part: Vec<&'p BStr>| -> Result<Vec<(&'p BStr, Outcome)>> {
        let mut hasher = Hasher::new(&repo, index, workdir, secrets, exec_bit)?;
        part.into_iter()
            .map(|p| hasher.hash(p).map(|o| (p, o)))
            .collect()
    };
    if threads == 1 {
        return run(repo.clone(), paths.to_vec());
    }
    let mut parts: Vec<Vec<&'p BStr>> = vec![Vec::new(); threads];
    for (i, p) in paths.iter().enumerate() {
        parts[i % threads].push(p);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| {
                let repo = repo.clone();
                s.spawn(move || run(repo, part))
            })
            .collect();
        let mut out = Vec::with_capacity(paths.len());
        for h in handles {
            match h.join() {
                Ok(r) => out.extend(r?),
                Err(_) => return Err(Error::Internal("a hashing thread panicked".into())),
            }
        }
        Ok(out)
    })
}

/// Per-thread state for hashing work tree files.
struct Hasher<'r> {
    repo: &'r gix::Repository,
    pipeline: gix::filter::Pipeline<'r>,
    index: &'r gix::index::State,
    workdir: &'r Path,
    scanner: Scanner<'r>,
    exec_bit: bool,
    buf: Vec<u8>,
    /// The attributes again, asked only for `filter` (the pipeline runs no driver).
    lfs_attributes: (gix::worktree::Stack, gix::attrs::search::Outcome),
}

impl<'r> Hasher<'r> {
    fn new(
        repo: &'r gix::Repository,
        index: &'r gix::index::State,
        workdir: &'r Path,
        secrets: &'r [String],
        exec_bit: bool,
    ) -> Result<Self> {
        let attributes = repo
            .attributes_only(
                index,
                gix::worktree::stack::state::attributes::Source::WorktreeThenIdMapping,
            )
            .map_err(|e| super::base::fail("reading .gitattributes", e))?
            .detach();
        let lfs_stack = attributes.clone();
        let lfs_outcome = lfs_stack.selected_attribute_matches(["filter"]);
        let pipeline = gix::filter::Pipeline::new(repo, attributes)
            .map_err(|e| super::base::fail("preparing the content conversion", e))?;
        Ok(Hasher {
            repo,
            pipeline,
            index,
            workdir,
            scanner: Scanner::new(secrets),
            exec_bit,
            buf: Vec::new(),
            lfs_attributes: (lfs_stack, lfs_outcome),
        })
    }

    fn hash(&mut self, rela: &BStr) -> Result<Outcome> {
        let rela_path = super::base::bytes_to_path(rela);
        let path = self.workdir.join(rela_path);
        let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
        let md = match std::fs::symlink_metadata(&path) {
            Ok(md) => md,
            Err(e) if is_gone(&e) => return Ok(Outcome::Gone),
            Err(e) => return Err(io(e)),
        };
        let ft = md.file_type();
        if ft.is_symlink() {
            return self.hash_symlink(rela, &path);
        }
        if ft.is_dir() {
            return Ok(match std::fs::symlink_metadata(path.join(".git")) {
                Ok(_) => Outcome::NestedRepo,
                // A file that became a directory: its files are staged as untracked files.
                Err(_) => Outcome::Gone,
            });
        }
        if !ft.is_file() {
            return Ok(Outcome::Untrackable);
        }
        if md.len() > MAX_FILE_BYTES {
            return Ok(Outcome::TooLarge(md.len()));
        }
        crate::failpoint::barrier("hold-save-hash");
        let changed = || {
            Error::conflict(format!(
                "{} changed while it was being saved; run save again",
                path.display()
            ))
        };
        let file = match crate::fs::open_regular(&path, false) {
            Ok(f) => f,
            Err(e) if is_gone(&e) => return Ok(Outcome::Gone),
            // A regular file at the lstat, something else at the open (a FIFO, a device: not a
            // regular file; a symlink: ELOOP under O_NOFOLLOW): swapped meanwhile.
            Err(e)
                if e.kind() == std::io::ErrorKind::InvalidInput
                    || e.raw_os_error() == Some(libc::ELOOP) =>
            {
                return Err(changed());
            }
            Err(e) => return Err(io(e)),
        };
        // The stat data recorded in the index is taken before reading, so a change during the
        // read shows up in the next `git status`.
        let fmd = gix::index::fs::Metadata::from_file(&file).map_err(io)?;
        let std_md = file.metadata().map_err(io)?;
        if !std_md.is_file() || !same_file(&md, &std_md) {
            return Err(changed());
        }
        let stat = stat_of(&fmd);
        self.buf.clear();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut self.buf)
            .map_err(io)?;
        if self.buf.len() as u64 > MAX_FILE_BYTES {
            return Ok(Outcome::TooLarge(std_md.len().max(self.buf.len() as u64)));
        }
        if self.scanner.scan_all(&self.buf, SCAN_CHUNK) {
            return Ok(Outcome::Secret);
        }
        let kind = if self.exec_bit {
            if gix::fs::is_executable(&std_md) {
                EntryKind::BlobExecutable
            } else {
                EntryKind::Blob
            }
        } else {
            // core.fileMode false: keep the recorded executable bit, as git does.
            match self.index.entry_by_path(rela).map(|e| e.mode) {
                Some(gix::index::entry::Mode::FILE_EXECUTABLE) => EntryKind::BlobExecutable,
                _ => EntryKind::Blob,
            }
        };
        if let Some(pointer) = self.store_lfs(rela)? {
            let id = self.write(pointer.encode().as_bytes(), rela)?;
            return Ok(Outcome::Blob {
                kind,
                id,
                stat,
                lfs: Some(pointer),
            });
        }
        let id = self.convert_and_write(rela, rela_path)?;
        let Some(id) = id else {
            return Ok(Outcome::Secret);
        };
        Ok(Outcome::Blob {
            kind,
            id,
            stat,
            lfs: None,
        })
    }

    /// Hash the symlink at `path` (its target, scanned like content).
    fn hash_symlink(&mut self, rela: &BStr, path: &Path) -> Result<Outcome> {
        let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
        let stat = stat_of(&gix::index::fs::Metadata::from_path_no_follow(path).map_err(io)?);
        let target = match std::fs::read_link(path) {
            Ok(t) => t,
            Err(e) if is_gone(&e) => return Ok(Outcome::Gone),
            Err(e) => return Err(io(e)),
        };
        let target = std::os::unix::ffi::OsStringExt::into_vec(target.into_os_string());
        if self.scanner.scan_all(&target, SCAN_CHUNK) {
            return Ok(Outcome::Secret);
        }
        let id = self.write(&target, rela)?;
        Ok(Outcome::Blob {
            kind: EntryKind::Link,
            id,
            stat,
            lfs: None,
        })
    }

    /// As git-lfs's clean filter, for a file the tree's `.gitattributes` mark `filter=lfs` (and
    /// that is not a pointer already): its content (`self.buf`) goes to the LFS store; returns
    /// the pointer to commit in its place.
    fn store_lfs(&mut self, rela: &BStr) -> Result<Option<crate::types::lfs::Pointer>> {
        if !self.is_lfs(rela)? || crate::types::lfs::Pointer::parse(&self.buf).is_some() {
            return Ok(None);
        }
        crate::repo::lfs::store(self.repo.common_dir(), &self.buf).map(Some)
    }

    /// Whether the tree's `.gitattributes` mark `rela` `filter=lfs`.
    fn is_lfs(&mut self, rela: &BStr) -> Result<bool> {
        let (stack, outcome) = &mut self.lfs_attributes;
        let platform = stack
            .at_entry(
                rela,
                Some(gix::index::entry::Mode::FILE),
                &self.repo.objects,
            )
            .map_err(|e| super::base::fail(format!("reading the attributes of {rela}"), e))?;
        platform.matching_attributes(outcome);
        Ok(outcome.iter_selected().any(|m| {
            matches!(m.assignment.state, gix::attrs::StateRef::Value(v) if v.as_bstr() == "lfs")
        }))
    }

    /// Convert `self.buf` like `git add` (attributes, no drivers), scan the result if it differs,
    /// and write it. `None`: the converted content holds a secret.
    fn convert_and_write(
        &mut self,
        rela: &BStr,
        rela_path: &Path,
    ) -> Result<Option<gix::ObjectId>> {
        use gix::filter::plumbing::pipeline::convert::ToGitOutcome;
        let converted = self
            .pipeline
            .convert_to_git(self.buf.as_slice(), rela_path, self.index)
            .map_err(|e| super::base::fail(format!("converting {rela}"), e))?;
        let data: Vec<u8>;
        let bytes: &[u8] = match converted {
            ToGitOutcome::Unchanged(_) => &self.buf,
            ToGitOutcome::Buffer(b) => b,
            ToGitOutcome::Process(mut r) => {
                let mut v = Vec::new();
                r.read_to_end(&mut v)
                    .map_err(|e| Error::io(format!("converting {rela}"), e))?;
                data = v;
                &data
            }
        };
        if bytes.as_ptr() != self.buf.as_ptr() && self.scanner.scan_all(bytes, SCAN_CHUNK) {
            return Ok(None);
        }
        let id = self
            .repo
            .write_blob(bytes)
            .map_err(|e| super::base::fail(format!("writing the blob of {rela}"), e))?
            .detach();
        Ok(Some(id))
    }

    fn write(&self, data: &[u8], rela: &BStr) -> Result<gix::ObjectId> {
        Ok(self
            .repo
            .write_blob(data)
            .map_err(|e| super::base::fail(format!("writing the blob of {rela}"), e))?
            .detach())
    }
}

fn stat_of(md: &gix::index::fs::Metadata) -> gix::index::entry::Stat {
    gix::index::entry::Stat::from_fs(md).unwrap_or_default()
}

fn is_gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}
