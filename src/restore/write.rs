//! Writing index entries into the work tree, every one through the tree's one handle
//! ([`crate::fs::tree`]): folders made a component at a time and never entered through a
//! symlink, files created with `O_EXCL | O_NOFOLLOW`, blobs through git's conversions as the
//! tree's `.gitattributes` ask ([`WorktreeForm`]), each entry's stat data taken
//! from what was written.

use std::collections::HashSet;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use gix::index::entry::{Mode, Stat};

use crate::error::{Error, Result};
use crate::failpoint;
use crate::fs::tree::{Kind, Made, Tree};

/// The fewest entries a checkout thread is given: each thread has its own pack reader, caches and
/// buffers (about 1 MiB), and a smaller checkout gains nothing from a second thread (a sparse
/// restore of git/git's Documentation, 1509 files, took 2 MiB more peak RSS with two).
const MIN_RUN: usize = 4096;

/// How [`write_entries`] treats what is already there.
#[derive(Debug, Clone, Copy)]
pub struct Overwrite {
    /// Files and symlinks the commit tracks may be replaced (`--force`, resuming, a boot).
    pub files: bool,
}

/// Writes entries into one tree, remembering the folders known to be folders.
pub struct Writer<'t> {
    tree: &'t Tree,
    overwrite: Overwrite,
    folders: HashSet<PathBuf>,
    /// Whether the checkout's failpoints apply (the checkout after a fetch, not a boot).
    failpoints: bool,
    /// What this writer made, oldest first.
    pub made: Vec<Made>,
}

impl<'t> Writer<'t> {
    /// A writer into `tree`.
    pub fn new(tree: &'t Tree, overwrite: Overwrite) -> Self {
        Writer {
            tree,
            overwrite,
            folders: HashSet::from([PathBuf::new()]),
            failpoints: false,
            made: Vec::new(),
        }
    }

    /// The same writer, with the checkout's failpoints (`mid-checkout`, `hold-mid-checkout`).
    #[must_use]
    pub fn with_failpoints(mut self) -> Self {
        self.failpoints = true;
        self
    }

    /// Write every entry of `index` (blobs from `objects`, converted by `form`) and set its stat
    /// data. Failpoints: `mid-checkout` aborts once half of the blobs were read,
    /// `hold-mid-checkout` holds there once.
    ///
    /// # Errors
    /// [`Error::Conflict`] for something in the way that may not be replaced; [`Error::LocalIo`]
    /// (exit 10 for a full disk) when a write fails, a path on the way that leads outside the
    /// tree among them; [`Error::Integrity`] for a blob missing from `objects`.
    pub fn write_entries(
        &mut self,
        index: &mut gix::index::File,
        objects: &impl gix::objs::Find,
        form: &mut WorktreeForm<'_>,
    ) -> Result<()> {
        // Entries outside a sparse checkout's cone get no file (and keep their empty stat).
        let inside: Vec<usize> = (0..index.entries().len())
            .filter(|&n| !super::sparse::skipped(&index.entries()[n]))
            .collect();
        let half = self.failpoints.then(|| Half::new(inside.len()));
        let stats = self.write_part(index, &inside, objects, form, half.as_ref())?;
        set_stats(index, stats);
        Ok(())
    }

    /// Write the entries numbered `part` of `index`; returns their stat data by number.
    fn write_part(
        &mut self,
        index: &gix::index::File,
        part: &[usize],
        objects: &impl gix::objs::Find,
        form: &mut WorktreeForm<'_>,
        half: Option<&Half>,
    ) -> Result<Vec<(usize, Stat)>> {
        let mut buf = Vec::new();
        let mut stats = Vec::with_capacity(part.len());
        for &n in part {
            if let Some(half) = half {
                half.step();
            }
            let entry = &index.entries()[n];
            let path = entry.path(index);
            let rel = Path::new(std::ffi::OsStr::from_bytes(path));
            let stat = match entry.mode {
                Mode::COMMIT => self.folder(rel).map(|()| Stat::default())?,
                Mode::FILE | Mode::FILE_EXECUTABLE | Mode::SYMLINK => {
                    let blob = objects
                        .try_find(&entry.id, &mut buf)
                        .map_err(|e| Error::Integrity(format!("reading the blob of {path}: {e}")))?
                        .ok_or_else(|| {
                            Error::Integrity(format!(
                                "the blob {} of {path} is missing from the received objects",
                                entry.id
                            ))
                        })?;
                    if entry.mode == Mode::SYMLINK {
                        let target = Path::new(std::ffi::OsStr::from_bytes(blob.data));
                        self.symlink(rel, target)?
                    } else {
                        let data = form.convert(blob.data.to_vec(), path)?;
                        self.file(rel, entry.mode == Mode::FILE_EXECUTABLE, &data)?
                    }
                }
                _ => continue,
            };
            stats.push((n, stat));
        }
        Ok(stats)
    }

    /// [`Writer::write_entries`] with a few threads, each a contiguous run of the index (so
    /// rarely two in one folder) with its own writer, conversions (`stack`, read from the whole
    /// tree's `.gitattributes`) and pack reader; what they made becomes this writer's.
    ///
    /// # Errors
    /// As [`Writer::write_entries`]: the first thread's error.
    pub fn write_entries_in_parallel(
        &mut self,
        repo: &gix::Repository,
        index: &mut gix::index::File,
        objects: &crate::pack::PackObjects,
        stack: &gix::worktree::Stack,
    ) -> Result<()> {
        let inside: Vec<usize> = (0..index.entries().len())
            .filter(|&n| !super::sparse::skipped(&index.entries()[n]))
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(2, 4));
        let chunk = inside.len().div_ceil(threads).max(MIN_RUN);
        let half = self.failpoints.then(|| Half::new(inside.len()));
        let (tree, overwrite, failpoints, half) =
            (self.tree, self.overwrite, self.failpoints, &half);
        let shared: &gix::index::File = index;
        let parts: Vec<Result<Part>> = std::thread::scope(|scope| {
            let handles: Vec<_> = inside
                .chunks(chunk.max(1))
                .map(|part| {
                    let (repo, objects, stack) = (repo.clone(), objects.clone(), stack.clone());
                    scope.spawn(move || {
                        let mut form = WorktreeForm::with_stack(&repo, stack)?;
                        let mut writer = Writer::new(tree, overwrite);
                        writer.failpoints = failpoints;
                        let stats =
                            writer.write_part(shared, part, &objects, &mut form, half.as_ref())?;
                        Ok((stats, writer.made))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Internal("a writing thread panicked".into()))
                    })
                })
                .collect()
        });
        let mut made = std::mem::take(&mut self.made);
        let mut failed = None;
        for part in parts {
            match part {
                Ok((stats, part_made)) => {
                    made.extend(part_made);
                    set_stats(index, stats);
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        crate::fs::tree::order_for_undo(&mut made);
        self.made = made;
        failed.map_or(Ok(()), Err)
    }

    /// Write the file `rel` holding `data`; returns its stat data.
    ///
    /// # Errors
    /// As [`Writer::write_entries`].
    pub fn file(&mut self, rel: &Path, executable: bool, data: &[u8]) -> Result<Stat> {
        let (mut file, made) = self.create(rel, |tree| tree.create_file(rel, executable))?;
        self.made.push(made);
        if let Err(e) = file.write_all(data) {
            drop(file);
            // A full disk: no file cut short is left for the rerun to mistake for the user's.
            let _ = self.tree.remove_file(rel);
            return Err(Error::io(
                format!("writing {}", self.tree.shown(rel).display()),
                e,
            ));
        }
        let meta = gix::index::fs::Metadata::from_file(&file)
            .map_err(|e| Error::io(format!("reading {}", self.tree.shown(rel).display()), e))?;
        Stat::from_fs(&meta).map_err(|e| Error::internal("reading a file's times", e))
    }

    /// Create a file `rel` (its folders made) and hand it over open, for a caller that streams
    /// into it.
    ///
    /// # Errors
    /// As [`Writer::write_entries`].
    pub fn open_new(&mut self, rel: &Path, executable: bool) -> Result<std::fs::File> {
        let (file, made) = self.create(rel, |tree| tree.create_file(rel, executable))?;
        self.made.push(made);
        Ok(file)
    }

    /// Make the symlink `rel` to `target`; returns its stat data.
    pub(crate) fn symlink(&mut self, rel: &Path, target: &Path) -> Result<Stat> {
        let made = self.create(rel, |tree| tree.symlink(target, rel))?;
        self.made.push(made);
        self.tree
            .stat(rel)
            .map_err(|e| Error::io(format!("reading {}", self.tree.shown(rel).display()), e))
    }

    /// Make the folder `rel` (an empty folder for a submodule) and those above it.
    pub(crate) fn folder(&mut self, rel: &Path) -> Result<()> {
        if self.folders.contains(rel) {
            return Ok(());
        }
        // Folders are made parent first: with the parent made, only the last one is new.
        let known = match rel.parent() {
            Some(parent) if self.folders.contains(parent) => rel.components().count() - 1,
            _ => 0,
        };
        let in_the_way = self
            .tree
            .create_dirs(rel, known, &mut self.made)
            .map_err(|e| Error::io(format!("creating {}", self.tree.shown(rel).display()), e))?;
        if let Some(blocker) = in_the_way {
            return Err(self.in_the_way(&blocker, "a file where the commit has a folder"));
        }
        // The set holds every folder above one it holds: stop at the first already there.
        let mut at = rel.to_path_buf();
        while self.folders.insert(at.clone()) && at.pop() {}
        Ok(())
    }

    /// Run `make` for `rel` once its folders exist; when something is there already, replace it
    /// if allowed (a file or symlink, never a folder), else refuse.
    fn create<T>(&mut self, rel: &Path, make: impl Fn(&Tree) -> std::io::Result<T>) -> Result<T> {
        if let Some(parent) = rel.parent() {
            self.folder(parent)?;
        }
        let shown = || self.tree.shown(rel).display().to_string();
        match make(self.tree) {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let kind = self
                    .tree
                    .kind(rel)
                    .map_err(|e| Error::io(format!("reading {}", shown()), e))?;
                if !self.overwrite.files || matches!(kind, Some(Kind::Dir | Kind::Other)) {
                    return Err(Error::conflict(format!(
                        "a file is in the way of the checkout: {}",
                        shown()
                    )));
                }
                self.tree
                    .remove_file(rel)
                    .map_err(|e| Error::io(format!("replacing {}", shown()), e))?;
                make(self.tree).map_err(|e| Error::io(format!("creating {}", shown()), e))
            }
            Err(e) => Err(Error::io(format!("creating {}", shown()), e)),
        }
    }

    /// `rel`'s path, for messages only.
    pub fn shown(&self, rel: &Path) -> PathBuf {
        self.tree.shown(rel)
    }

    fn in_the_way(&self, rel: &Path, what: &str) -> Error {
        Error::conflict(format!(
            "{} is in the way of the checkout ({what})",
            self.tree.shown(rel).display()
        ))
    }
}

/// What one thread of [`Writer::write_entries_in_parallel`] wrote: the stat data by entry number,
/// and what it made.
type Part = (Vec<(usize, Stat)>, Vec<Made>);

/// Set the stat data of the entries numbered so.
fn set_stats(index: &mut gix::index::File, stats: Vec<(usize, Stat)>) {
    let entries = index.entries_mut();
    for (n, stat) in stats {
        entries[n].stat = stat;
    }
}

/// The checkout's failpoints, once half of the entries were taken (by whichever writer):
/// `mid-checkout` aborts, `hold-mid-checkout` holds once.
struct Half {
    at: usize,
    taken: std::sync::atomic::AtomicUsize,
}

impl Half {
    fn new(count: usize) -> Self {
        Half {
            at: count / 2,
            taken: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn step(&self) {
        if self.taken.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == self.at {
            failpoint::hit("mid-checkout");
            failpoint::barrier("hold-mid-checkout");
        }
    }
}

/// Refuse a tree whose `.gitattributes` hold a pattern matching could take exponential time on
/// (`crate::glob`), before git's attribute matching ever sees it: the server chose both the
/// patterns and the paths.
///
/// # Errors
/// [`Error::Integrity`] (exit 6) naming the file and the pattern.
pub(crate) fn check_attribute_patterns(
    repo: &gix::Repository,
    index: &gix::index::File,
) -> Result<()> {
    for entry in index.entries() {
        let path = entry.path(index);
        if path != ".gitattributes" && !path.ends_with(b"/.gitattributes") {
            continue;
        }
        let Ok(blob) = repo.find_object(entry.id) else {
            continue; // not here yet (a sparse or partial tree): gix cannot read it either
        };
        for line in gix::attrs::parse(&blob.data).flatten() {
            if let gix::attrs::parse::Kind::Pattern(p) = line.0
                && !crate::glob::bounded(&p.text)
            {
                return Err(Error::Integrity(format!(
                    "{path}: the pattern '{}' holds more than {} runs of '*': matching it can \
                     take exponential time, so git-session does not check out this tree",
                    crate::text::line(&p.text),
                    crate::glob::MAX_STAR_RUNS
                )));
            }
        }
    }
    Ok(())
}

/// A blob as the checkout writes it into the work tree: through git's conversions as the tree's
/// `.gitattributes` ask (read from the tree, as the checkout reads them).
pub(crate) struct WorktreeForm<'repo> {
    pipeline: gix::filter::Pipeline<'repo>,
}

impl<'repo> WorktreeForm<'repo> {
    /// The conversions `index`'s `.gitattributes` ask for.
    pub(crate) fn new(repo: &'repo gix::Repository, index: &gix::index::File) -> Result<Self> {
        Self::with_stack(repo, Self::stack(repo, index)?.detach())
    }

    /// What [`WorktreeForm::new`] reads from `index`: its `.gitattributes`, checked first.
    pub(crate) fn stack<'r>(
        repo: &'r gix::Repository,
        index: &gix::index::File,
    ) -> Result<gix::AttributeStack<'r>> {
        check_attribute_patterns(repo, index)?;
        repo.attributes_only(
            index,
            gix::worktree::stack::state::attributes::Source::IdMapping,
        )
        .map_err(|e| Error::from_chain("reading the tree's .gitattributes", &e))
    }

    /// The conversions of `stack` (from [`WorktreeForm::stack`]), for `repo`.
    pub(crate) fn with_stack(
        repo: &'repo gix::Repository,
        stack: gix::worktree::Stack,
    ) -> Result<Self> {
        let pipeline = gix::filter::Pipeline::new(repo, stack)
            .map_err(|e| Error::from_chain("preparing git's conversions", &e))?;
        Ok(WorktreeForm { pipeline })
    }

    /// `blob` as the checkout writes it at `path`.
    pub(crate) fn convert(&mut self, blob: Vec<u8>, path: &gix::bstr::BStr) -> Result<Vec<u8>> {
        use gix::filter::plumbing::pipeline::convert::ToWorktreeOutcome;
        let out = self
            .pipeline
            .convert_to_worktree(&blob, path, Default::default())
            .map_err(|e| Error::from_chain(format!("converting {path}"), &e))?;
        Ok(match out {
            ToWorktreeOutcome::Unchanged(_) => blob,
            ToWorktreeOutcome::Buffer(converted) => converted.to_vec(),
            // No filter driver is configured (SPEC rule 8), so none runs.
            ToWorktreeOutcome::Process(_) => blob,
        })
    }
}
