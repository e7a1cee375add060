//! The writer thread of the early checkout: it creates the files the resolver hands over, each
//! folder made one at a time and never followed through a symlink, each file created with
//! `O_EXCL | O_NOFOLLOW`, and records what it made ([`Outcome`]) for the checkout after the
//! transfer and for a rollback.

use std::collections::HashSet;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use gix::bstr::{BStr, BString, ByteSlice as _};

use crate::fs::tree::{Made, Tree};

/// One file the early checkout wrote: what the index entry for it holds.
#[derive(Debug, Clone)]
pub struct Written {
    /// Its path, relative to the work tree, `/`-separated.
    pub path: BString,
    /// The blob it holds.
    pub id: gix::ObjectId,
    /// Regular or executable.
    pub mode: gix::index::entry::Mode,
    /// Its stat data, taken right after it was written.
    pub stat: gix::index::entry::Stat,
}

/// What the early checkout left: its files, and everything it made (files and folders, each
/// known by its inode: [`crate::fs::tree::Tree::undo`] removes them on a failure).
#[derive(Debug, Default)]
pub struct Outcome {
    /// The files, each writer's in the order it wrote them.
    pub files: Vec<Written>,
    /// Every file and folder made, in an order [`crate::fs::tree::Tree::undo`] can take back:
    /// every folder after the one holding it (see [`Outcome::merge`]).
    pub made: Vec<Made>,
}

impl Outcome {
    /// The outcomes of several writers as one: their files, and what they made ordered so an undo
    /// (newest first) removes every file, then the folders deepest first — a writer may have
    /// made a folder inside one another made.
    pub(super) fn merge(outcomes: Vec<Outcome>) -> Outcome {
        let mut all = Outcome::default();
        for o in outcomes {
            all.files.extend(o.files);
            all.made.extend(o.made);
        }
        crate::fs::tree::order_for_undo(&mut all.made);
        all
    }
}

/// A file for the writer: its path, blob, mode and content.
pub(super) struct Job {
    pub(super) path: BString,
    pub(super) id: gix::ObjectId,
    pub(super) mode: gix::index::entry::Mode,
    pub(super) data: Data,
}

/// An object's bytes, shared by the resolver's cache and the writer without a copy (an `Arc<[u8]>`
/// made from the inflated `Vec` copied every object once more: 46 MiB for git/git's tree).
pub(super) type Data = Arc<Vec<u8>>;

/// Where the early checkout writes, and what it must know before its first file.
pub struct Target {
    /// The work tree's handle (the tree was empty when the restore began).
    pub tree: Tree,
    /// The commit whose tree is written.
    pub tip: gix::ObjectId,
    /// Called once, before the first file is written (records in the intent that writing began).
    pub before_first_file: Box<dyn FnOnce() -> crate::error::Result<()> + Send>,
}

/// What is called once, before the first file is written.
type BeforeFirstFile = Box<dyn FnOnce() -> crate::error::Result<()> + Send>;

/// The call every writer makes before its first file: the first one runs `before_first_file`
/// (the others wait for it under the lock); none writes a file when it failed.
pub(super) struct Gate {
    first: std::sync::Mutex<Option<BeforeFirstFile>>,
    failed: std::sync::atomic::AtomicBool,
}

impl Gate {
    pub(super) fn new(first: BeforeFirstFile) -> Self {
        Gate {
            first: std::sync::Mutex::new(Some(first)),
            failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether files may be written (`before_first_file` ran, and succeeded).
    fn pass(&self) -> bool {
        let Ok(mut first) = self.first.lock() else {
            return false;
        };
        if let Some(f) = first.take()
            && f().is_err()
        {
            self.failed.store(true, Ordering::SeqCst);
        }
        !self.failed.load(Ordering::SeqCst)
    }
}

/// Writes the files the resolver hands over (one of a few writers, each given the files of
/// some folders: two never write the same path).
pub(super) struct Writer {
    tree: Tree,
    gate: Arc<Gate>,
    passed: bool,
    writing: Arc<AtomicUsize>,
    /// Folders known to exist as folders.
    folders: HashSet<BString>,
    /// Paths already written.
    done: HashSet<BString>,
    out: Outcome,
    stopped: bool,
}

impl Writer {
    pub(super) fn new(tree: Tree, gate: Arc<Gate>, writing: Arc<AtomicUsize>) -> Self {
        Writer {
            tree,
            gate,
            passed: false,
            writing,
            folders: HashSet::from([BString::default()]),
            done: HashSet::new(),
            out: Outcome::default(),
            stopped: false,
        }
    }

    pub(super) fn run(mut self, jobs: mpsc::Receiver<Job>) -> Outcome {
        for job in jobs {
            self.writing.fetch_sub(job.data.len(), Ordering::Relaxed);
            if !self.stopped {
                self.write(job);
            }
        }
        self.out
    }

    fn write(&mut self, job: Job) {
        if self.done.contains(&job.path) {
            return;
        }
        if !self.passed {
            if !self.gate.pass() {
                self.stopped = true;
                return;
            }
            self.passed = true;
        }
        match self.write_file(job.path.as_ref(), job.mode, &job.data) {
            Ok(Some(stat)) => {
                self.done.insert(job.path.clone());
                self.out.files.push(Written {
                    path: job.path,
                    id: job.id,
                    mode: job.mode,
                    stat,
                });
            }
            Ok(None) => {}
            // A full disk and the like: the checkout after the transfer reports it.
            Err(_) => self.stopped = true,
        }
    }

    /// Create the file at `path` (and its folders), or `None` when something is in the way.
    fn write_file(
        &mut self,
        path: &BStr,
        mode: gix::index::entry::Mode,
        data: &[u8],
    ) -> std::io::Result<Option<gix::index::entry::Stat>> {
        if let Some(slash) = path.rfind_byte(b'/')
            && !self.folders(&path[..slash])?
        {
            return Ok(None);
        }
        let rel = Path::new(std::ffi::OsStr::from_bytes(path));
        let executable = mode == gix::index::entry::Mode::FILE_EXECUTABLE;
        let (mut file, made) = match self.tree.create_file(rel, executable) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(e),
        };
        self.out.made.push(made);
        if crate::failpoint::armed("mid-early-checkout") && self.out.files.len() == 2 {
            let _ = file.write_all(&data[..data.len() / 2]);
            crate::failpoint::hit("mid-early-checkout");
        }
        if let Err(e) = file.write_all(data) {
            // A full disk: no file cut short is left for the rerun to mistake for the user's.
            drop(file);
            let _ = self.tree.remove_file(rel);
            return Err(e);
        }
        let meta = gix::index::fs::Metadata::from_file(&file)?;
        gix::index::entry::Stat::from_fs(&meta)
            .map(Some)
            .map_err(std::io::Error::other)
    }

    /// Make the folders of `folder` that do not exist; `false` when something else is in the way.
    fn folders(&mut self, folder: &BStr) -> std::io::Result<bool> {
        if self.folders.contains(folder) {
            return Ok(true);
        }
        if let Some(slash) = folder.rfind_byte(b'/')
            && !self.folders(&folder[..slash])?
        {
            return Ok(false);
        }
        let rel = Path::new(std::ffi::OsStr::from_bytes(folder));
        match self.tree.create_dir(rel) {
            Ok(made) => self.out.made.push(made),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if self.tree.kind(rel)? != Some(crate::fs::tree::Kind::Dir) {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
        self.folders.insert(folder.to_owned());
        Ok(true)
    }
}
