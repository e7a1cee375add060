//! The early checkout: regular files written as their blobs stream in, while the rest of the pack
//! is still on the wire, so the checkout after the transfer has little left to do.
//!
//! git's `pack-objects` writes a fetch's pack as commits, then trees, then blobs, each delta after
//! its base (`compute_write_order` in git's `builtin/pack-objects.c`): the paths of most blobs are
//! known before the blobs arrive. Two threads see every entry the pack stream inflates
//! ([`EntryObserver`]):
//! - the **resolver** hashes it, resolves offset deltas against recent objects (a bounded cache),
//!   reads the commit `TIP_SHA` and the trees it names, and hands each blob whose path is known to
//!   the writer when nothing can make its checked-out form differ from the blob: a regular file
//!   (symlinks and submodules wait), no `.gitattributes` on its way that could convert it
//!   (`eol=crlf`, `ident`, `filter`, `working-tree-encoding`, macros: see [`Rules`]). The
//!   `.gitattributes` files wait too: gix's checkout reads them from the index it is given. It
//!   never drops an entry (the stream waits for it instead), so it names every object of the
//!   pack, and [`crate::pack::receive()`] writes the pack's index from those ids rather than
//!   resolving every delta again after the last byte;
//! - the **writer** creates the files; when it falls behind, files are left to the checkout
//!   after the transfer, which sets the files written here aside ([`Written`]) and writes the
//!   index of all of them.
//!
//! What keeps it as safe as the checkout after the transfer:
//! - only into an empty target (no `--force`, no resume) and for a whole (not thin) pack;
//! - an object is used only when its id, hashed here, is named by the commit `TIP_SHA` or by a tree
//!   used so, so nothing the server did not commit to is written;
//! - every name passes git's path protections ([`super::checkout::protections`]) and the staging
//!   folder's name is never used; folders are made one at a time and never followed through a
//!   symlink; files are created with `O_EXCL | O_NOFOLLOW`;
//! - the intent records when writing began before the first file, so a kill leaves files the
//!   rerun's judge ([`super::intent::CutShort`]) knows as this run's own, and completes;
//! - a failure of the restore removes every file and folder written here ([`Outcome::roll_back`]),
//!   so "nothing was written" still holds for an unsafe tree or an incomplete pack.
//!
//! Memory: entries over [`MAX_ENTRY_BYTES`] are not collected (a whole object is hashed by the
//! stream instead); at most [`QUEUE_BYTES`] wait for the resolver and as many for the writer;
//! the cache of delta bases holds at most [`CACHE_BYTES`], the trees kept by id at most 4 MiB,
//! the paths named at most [`PATH_BYTES`] (whatever the tree's shape: past it, the files are left
//! to the checkout after the transfer); and 32 bytes per object for the ids.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use gix::bstr::{BStr, BString, ByteSlice as _};
use gix::odb::pack::data::entry::Header;

use crate::fs::tree::{Made, Tree};
use crate::pack::EntryObserver;

/// The largest entry (inflated) the worker looks at, in bytes.
pub const MAX_ENTRY_BYTES: u64 = 2 << 20;
/// The most inflated bytes waiting for the worker.
pub const QUEUE_BYTES: usize = 8 << 20;
/// The most bytes of recent objects kept as delta bases.
pub const CACHE_BYTES: usize = 8 << 20;
/// The most bytes of trees kept by id, for folders that name them after they arrived.
const SEEN_TREE_BYTES: usize = 4 << 20;
/// The most bytes the paths this checkout names may cost, whatever the tree's shape (a tree that
/// repeats the same subtrees names millions of paths from a pack of a few KiB): each counts its
/// length and [`PATH_COST`]. Past it no more paths are named; their files are left to the checkout
/// after the transfer, which has a bound of its own (`--max-entries`).
pub const PATH_BYTES: usize = 16 << 20;
/// What a named path costs besides its bytes: the maps and sets that hold it on its way to the
/// writer, and the writer's record of it.
const PATH_COST: usize = 192;

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

/// What the early checkout left: its files, and everything it made (files and folders, oldest
/// first, each known by its inode: [`crate::fs::tree::Tree::undo`] removes them on a failure).
#[derive(Debug, Default)]
pub struct Outcome {
    /// The files, in the order they were written.
    pub files: Vec<Written>,
    /// Every file and folder made.
    pub made: Vec<Made>,
}

enum Message {
    Begin,
    Entry {
        offset: u64,
        header: Header,
        data: Vec<u8>,
    },
    Hashed {
        offset: u64,
        id: gix::ObjectId,
    },
    Ids(mpsc::Sender<Vec<(u64, gix::ObjectId)>>),
}

/// A file for the writer: its path, blob, mode and content.
struct Job {
    path: BString,
    id: gix::ObjectId,
    mode: gix::index::entry::Mode,
    data: Arc<[u8]>,
}

/// The bytes waiting for the resolver: the stream waits while they are over [`QUEUE_BYTES`].
#[derive(Default)]
struct Budget {
    queued: std::sync::Mutex<usize>,
    room: std::sync::Condvar,
    /// The resolver ended (a panic included): nobody makes room any more.
    gone: std::sync::atomic::AtomicBool,
}

/// The early checkout of one restore: an [`EntryObserver`] for the fetch, and its two threads —
/// the resolver (names every object: it never drops an entry, so the pack's index can be
/// written from its ids) and the writer (writes files; when it falls behind, files are left to
/// the checkout after the transfer).
pub struct EarlyCheckout {
    tx: Option<mpsc::Sender<Message>>,
    budget: Arc<Budget>,
    resolver: Option<std::thread::JoinHandle<()>>,
    writer: Option<std::thread::JoinHandle<Outcome>>,
}

impl std::fmt::Debug for EarlyCheckout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyCheckout").finish_non_exhaustive()
    }
}

/// Where the early checkout writes, and what it must know before its first file.
pub struct Target {
    /// The work tree's handle (the tree was empty when the restore began).
    pub tree: Tree,
    /// The commit whose tree is written.
    pub tip: gix::ObjectId,
    /// Called once, before the first file is written (records in the intent that writing began).
    pub before_first_file: Box<dyn FnOnce() -> crate::error::Result<()> + Send>,
}

impl EarlyCheckout {
    /// Start the resolver and the writer for `target`.
    pub fn start(target: Target) -> Self {
        let (tx, rx) = mpsc::channel();
        let (jobs_tx, jobs_rx) = mpsc::sync_channel(16 * 1024);
        let budget = Arc::new(Budget::default());
        let writing = Arc::new(AtomicUsize::new(0));
        let tip = target.tip;
        let writer = {
            let writer = Writer::new(target, writing.clone());
            std::thread::Builder::new()
                .name("early-checkout-writer".into())
                .spawn(move || writer.run(jobs_rx))
                .ok()
        };
        let resolver = {
            let budget = budget.clone();
            let resolver = Resolver::new(tip, budget, jobs_tx, writing);
            writer.as_ref().and_then(|_| {
                std::thread::Builder::new()
                    .name("early-checkout".into())
                    .spawn(move || resolver.run(rx))
                    .ok()
            })
        };
        EarlyCheckout {
            tx: resolver.is_some().then_some(tx),
            budget,
            resolver,
            writer,
        }
    }

    /// Wait for both threads to finish what they were given, and return what was written.
    pub fn finish(mut self) -> Outcome {
        self.tx = None;
        if let Some(r) = self.resolver.take() {
            let _ = r.join();
        }
        let outcome = self
            .writer
            .take()
            .and_then(|w| w.join().ok())
            .unwrap_or_default();
        tracing::debug!("early checkout: {} files written", outcome.files.len());
        outcome
    }
}

impl EntryObserver for EarlyCheckout {
    fn begin(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Message::Begin);
        }
    }

    fn wants(&self, size: u64) -> bool {
        self.tx.is_some() && size <= MAX_ENTRY_BYTES
    }

    fn entry(&self, offset: u64, header: Header, data: Vec<u8>) {
        let Some(tx) = &self.tx else { return };
        let len = data.len();
        if let Ok(mut queued) = self.budget.queued.lock() {
            while *queued > 0
                && *queued + len > QUEUE_BYTES
                && !self.budget.gone.load(Ordering::Relaxed)
            {
                queued = match self.budget.room.wait(queued) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
            *queued += len;
        }
        let _ = tx.send(Message::Entry {
            offset,
            header,
            data,
        });
    }

    fn hashed(&self, offset: u64, id: gix::ObjectId) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Message::Hashed { offset, id });
        }
    }

    fn ids(&self) -> Option<Vec<(u64, gix::ObjectId)>> {
        let tx = self.tx.as_ref()?;
        let (reply, answer) = mpsc::channel();
        tx.send(Message::Ids(reply)).ok()?;
        answer.recv().ok()
    }
}

/// Recent objects by pack offset, for the deltas that follow them; oldest out first.
#[derive(Default)]
struct Cache {
    objects: HashMap<u64, (gix::objs::Kind, Arc<[u8]>)>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl Cache {
    fn insert(&mut self, offset: u64, kind: gix::objs::Kind, data: Arc<[u8]>) {
        if data.len() > CACHE_BYTES {
            return;
        }
        self.bytes += data.len();
        self.objects.insert(offset, (kind, data));
        self.order.push_back(offset);
        while self.bytes > CACHE_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some((_, d)) = self.objects.remove(&old) {
                self.bytes -= d.len();
            }
        }
    }
}

/// The rules of one `.gitattributes` that matter to a checkout: the patterns of lines assigning
/// an attribute that could make a file's checked-out form differ from its blob. Precedence is
/// ignored (a later line unsetting it does not help): a file any of them match waits for the
/// checkout after the transfer, which applies the attributes properly.
#[derive(Default)]
struct Rules {
    /// A line could not be parsed: every file under it waits.
    all: bool,
    patterns: Vec<gix::glob::Pattern>,
}

impl Rules {
    fn parse(data: &[u8]) -> Self {
        let mut rules = Rules::default();
        for line in gix::attrs::parse(data) {
            let Ok((kind, assignments, _)) = line else {
                rules.all = true;
                continue;
            };
            let gix::attrs::parse::Kind::Pattern(pattern) = kind else {
                // A macro may redefine any name (`[attr]binary eol=crlf`), here and in every
                // nested file: only the root's count, and the root holds every path.
                rules.all = true;
                continue;
            };
            let mut converting = false;
            for assignment in assignments {
                match assignment {
                    Ok(a) => converting |= may_convert(a.name.as_str(), a.state),
                    Err(_) => converting = true,
                }
            }
            if converting {
                rules.patterns.push(pattern);
            }
        }
        rules
    }

    /// Whether a line may convert the file at `rel` (relative to the attributes file's folder).
    fn may_convert(&self, rel: &BStr) -> bool {
        self.all
            || self.patterns.iter().any(|p| {
                p.matches_repo_relative_path(
                    rel,
                    rel.rfind_byte(b'/').map(|i| i + 1),
                    Some(false),
                    gix::glob::pattern::Case::Sensitive,
                    gix::glob::wildmatch::Mode::NO_MATCH_SLASH_LITERAL,
                )
            })
    }
}

/// Whether assigning `name` so may make a checkout write something else than the blob, on this
/// platform (LF line endings, no `core.autocrlf`: `text` and `eol=lf` change nothing on the way
/// out). Unknown names may be macros, so they count.
fn may_convert(name: &str, state: gix::attrs::StateRef<'_>) -> bool {
    use gix::attrs::StateRef;
    const HARMLESS: &[&str] = &[
        "binary",
        "conflict-marker-size",
        "delta",
        "diff",
        "encoding",
        "export-ignore",
        "export-subst",
        "merge",
        "text",
        "whitespace",
    ];
    if HARMLESS.contains(&name) || name.starts_with("linguist-") {
        return false;
    }
    let value = |v: &str| matches!(state, StateRef::Value(x) if x.as_bstr() == v);
    match name {
        "eol" => !(value("lf") || matches!(state, StateRef::Unset | StateRef::Unspecified)),
        "crlf" => !(value("input") || matches!(state, StateRef::Unset | StateRef::Unspecified)),
        _ => !matches!(state, StateRef::Unset | StateRef::Unspecified),
    }
}

/// Names every object of the pack and finds the files to write.
struct Resolver {
    tip: gix::ObjectId,
    budget: Arc<Budget>,
    jobs: mpsc::SyncSender<Job>,
    /// Bytes waiting for the writer: over [`QUEUE_BYTES`], files are left to the later checkout.
    writing: Arc<AtomicUsize>,
    cache: Cache,
    /// Every entry's object, by offset: the pack's index when it is complete.
    ids: Vec<(u64, gix::ObjectId)>,
    /// Trees named by the commit or a used tree, not seen yet: their folders.
    trees: HashMap<gix::ObjectId, Vec<BString>>,
    /// Trees seen, by id (up to [`SEEN_TREE_BYTES`]).
    seen_trees: HashMap<gix::ObjectId, Arc<[u8]>>,
    seen_bytes: usize,
    /// Blobs named by a used tree, not seen yet: their paths and modes (`None`: not a file to write
    /// early, only an attributes file to read).
    blobs: HashMap<gix::ObjectId, Vec<(BString, Option<gix::index::entry::Mode>)>>,
    /// Folders (`""`: the root) holding a `.gitattributes`, and its blob.
    attributes: HashMap<BString, gix::ObjectId>,
    rules: HashMap<gix::ObjectId, Rules>,
    /// Paths handed to the writer.
    sent: HashSet<BString>,
    /// Deltas resolved, deltas whose base was not at hand, files left (writer behind).
    counts: (usize, usize, usize),
    /// What the paths named so far cost (see [`PATH_BYTES`]); never lowered.
    path_bytes: usize,
}

impl Resolver {
    fn new(
        tip: gix::ObjectId,
        budget: Arc<Budget>,
        jobs: mpsc::SyncSender<Job>,
        writing: Arc<AtomicUsize>,
    ) -> Self {
        Resolver {
            tip,
            budget,
            jobs,
            writing,
            cache: Cache::default(),
            ids: Vec::new(),
            trees: HashMap::new(),
            seen_trees: HashMap::new(),
            seen_bytes: 0,
            blobs: HashMap::new(),
            attributes: HashMap::new(),
            rules: HashMap::new(),
            sent: HashSet::new(),
            counts: (0, 0, 0),
            path_bytes: 0,
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Message>) {
        for message in rx {
            match message {
                Message::Begin => {
                    self.cache = Cache::default();
                    self.ids.clear();
                }
                Message::Entry {
                    offset,
                    header,
                    data,
                } => {
                    if let Ok(mut queued) = self.budget.queued.lock() {
                        *queued -= data.len();
                    }
                    self.budget.room.notify_all();
                    self.entry(offset, header, data);
                }
                Message::Hashed { offset, id } => self.ids.push((offset, id)),
                Message::Ids(reply) => {
                    let _ = reply.send(self.ids.clone());
                }
            }
        }
        tracing::debug!(
            "early checkout: {} objects named; {} deltas resolved, {} without their base at \
             hand; {} files left to the checkout after the transfer (the writer was behind)",
            self.ids.len(),
            self.counts.0,
            self.counts.1,
            self.counts.2
        );
    }

    fn entry(&mut self, offset: u64, header: Header, data: Vec<u8>) {
        let (kind, data): (_, Arc<[u8]>) = match header {
            Header::OfsDelta { base_distance } => {
                let Some((kind, base)) = offset
                    .checked_sub(base_distance)
                    .and_then(|b| self.cache.objects.get(&b))
                else {
                    self.counts.1 += 1;
                    return;
                };
                let Some(object) =
                    crate::pack::delta::apply(base, &data, MAX_ENTRY_BYTES as usize * 4)
                else {
                    return;
                };
                self.counts.0 += 1;
                (*kind, object.into())
            }
            Header::RefDelta { .. } => {
                self.counts.1 += 1;
                return;
            }
            _ => match header.as_kind() {
                Some(kind) => (kind, data.into()),
                None => return,
            },
        };
        let Ok(id) = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data) else {
            return;
        };
        self.ids.push((offset, id));
        self.object(id, kind, &data);
        self.cache.insert(offset, kind, data);
    }

    fn object(&mut self, id: gix::ObjectId, kind: gix::objs::Kind, data: &Arc<[u8]>) {
        match kind {
            gix::objs::Kind::Commit if id == self.tip => {
                let tree = gix::objs::CommitRefIter::from_bytes(data, gix::hash::Kind::Sha1)
                    .tree_id()
                    .ok();
                if let Some(tree) = tree {
                    self.want_tree(tree, BString::default());
                }
            }
            gix::objs::Kind::Tree => {
                for folder in self.trees.remove(&id).unwrap_or_default() {
                    self.tree(folder.as_ref(), data);
                }
                // Kept for the folders that name it later (the same tree at two paths, or a tree
                // sent before its parent).
                if self.seen_bytes + data.len() <= SEEN_TREE_BYTES
                    && !self.seen_trees.contains_key(&id)
                {
                    self.seen_bytes += data.len();
                    self.seen_trees.insert(id, data.clone());
                }
            }
            gix::objs::Kind::Blob => {
                if let Some(paths) = self.blobs.remove(&id) {
                    if paths.iter().any(|(_, mode)| mode.is_none()) {
                        self.rules.insert(id, Rules::parse(data));
                    }
                    for (path, mode) in paths {
                        if let Some(mode) = mode {
                            self.send(path, id, mode, data);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn want_tree(&mut self, id: gix::ObjectId, folder: BString) {
        if let Some(data) = self.seen_trees.get(&id).cloned() {
            self.tree(folder.as_ref(), &data);
        } else {
            self.trees.entry(id).or_default().push(folder);
        }
    }

    /// The tree of `folder` arrived: name its entries, and those of the subtrees seen already —
    /// with a work list, not recursion: a hostile pack may send a deep tree children first.
    fn tree(&mut self, folder: &BStr, data: &[u8]) {
        let mut work: Vec<(BString, Arc<[u8]>)> = vec![(folder.to_owned(), data.into())];
        while let Some((folder, data)) = work.pop() {
            if self.path_bytes > PATH_BYTES {
                return;
            }
            for (id, path) in self.tree_entries(folder.as_ref(), &data) {
                match self.seen_trees.get(&id) {
                    Some(seen) => work.push((path, seen.clone())),
                    None => self.trees.entry(id).or_default().push(path),
                }
            }
        }
    }

    /// Name the entries of `folder`'s tree `data`; returns its subtrees (id, path).
    fn tree_entries(&mut self, folder: &BStr, data: &[u8]) -> Vec<(gix::ObjectId, BString)> {
        use gix::objs::tree::EntryKind;
        let mut subtrees = Vec::new();
        let mut entries = Vec::new();
        for entry in gix::objs::TreeRefIter::from_bytes(data, gix::hash::Kind::Sha1) {
            let Ok(entry) = entry else { return subtrees };
            let name = entry.filename;
            if crate::names::check_component(name, folder.is_empty(), false).is_err() {
                continue;
            }
            entries.push((entry.mode.kind(), name.to_owned(), entry.oid.to_owned()));
        }
        // A folder's entries are named all or none: its `.gitattributes` with its files.
        let cost: usize = entries
            .iter()
            .map(|(_, name, _)| folder.len() + 1 + name.len() + PATH_COST)
            .sum();
        if self.path_bytes + cost > PATH_BYTES {
            if self.path_bytes <= PATH_BYTES {
                tracing::debug!(
                    "early checkout: the tree names over {PATH_BYTES} bytes of paths; the rest \
                     is left to the checkout after the transfer"
                );
            }
            self.path_bytes = PATH_BYTES + 1;
            return subtrees;
        }
        self.path_bytes += cost;
        for (kind, name, id) in entries {
            let mut path = folder.to_owned();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(&name);
            let mode = match kind {
                EntryKind::Tree => {
                    subtrees.push((id, path));
                    continue;
                }
                EntryKind::Blob => gix::index::entry::Mode::FILE,
                EntryKind::BlobExecutable => gix::index::entry::Mode::FILE_EXECUTABLE,
                EntryKind::Link | EntryKind::Commit => continue,
            };
            if name == ".gitattributes" {
                // Read here, written by the checkout after the transfer: its attributes come from
                // the index it is given, and this file must be in it.
                self.attributes.insert(folder.to_owned(), id);
                self.blobs
                    .entry(id)
                    .or_default()
                    .push((BString::default(), None));
                continue;
            }
            self.blobs.entry(id).or_default().push((path, Some(mode)));
        }
        subtrees
    }

    /// Whether no `.gitattributes` on the way to `path` may convert it (each one read already).
    fn plain(&self, path: &BStr) -> bool {
        let mut at = 0usize;
        loop {
            let folder = &path[..at.saturating_sub(1)];
            if let Some(id) = self.attributes.get(folder) {
                let rel = &path[at..];
                match self.rules.get(id) {
                    Some(rules) if !rules.may_convert(rel) => {}
                    _ => return false,
                }
            }
            match path[at..].find_byte(b'/') {
                Some(i) => at += i + 1,
                None => return true,
            }
        }
    }

    /// Hand the file at `path` to the writer, unless it is not plain or the writer is behind.
    fn send(
        &mut self,
        path: BString,
        id: gix::ObjectId,
        mode: gix::index::entry::Mode,
        data: &Arc<[u8]>,
    ) {
        if self.sent.contains(&path) || !self.plain(path.as_ref()) {
            return;
        }
        let len = data.len();
        if self.writing.load(Ordering::Relaxed) + len > QUEUE_BYTES {
            self.counts.2 += 1;
            return;
        }
        self.writing.fetch_add(len, Ordering::Relaxed);
        let job = Job {
            path: path.clone(),
            id,
            mode,
            data: data.clone(),
        };
        if self.jobs.try_send(job).is_ok() {
            self.sent.insert(path);
        } else {
            self.writing.fetch_sub(len, Ordering::Relaxed);
            self.counts.2 += 1;
        }
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        // Under the lock, so a stream thread about to wait sees it.
        let _queued = self.budget.queued.lock();
        self.budget.gone.store(true, Ordering::Relaxed);
        self.budget.room.notify_all();
    }
}

/// Writes the files the resolver hands over.
struct Writer {
    tree: Tree,
    before_first_file: Option<Box<dyn FnOnce() -> crate::error::Result<()> + Send>>,
    writing: Arc<AtomicUsize>,
    /// Folders known to exist as folders.
    folders: HashSet<BString>,
    /// Paths already written.
    done: HashSet<BString>,
    out: Outcome,
    stopped: bool,
}

impl Writer {
    fn new(target: Target, writing: Arc<AtomicUsize>) -> Self {
        Writer {
            tree: target.tree,
            before_first_file: Some(target.before_first_file),
            writing,
            folders: HashSet::from([BString::default()]),
            done: HashSet::new(),
            out: Outcome::default(),
            stopped: false,
        }
    }

    fn run(mut self, jobs: mpsc::Receiver<Job>) -> Outcome {
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
        if let Some(first) = self.before_first_file.take()
            && first().is_err()
        {
            self.stopped = true;
            return;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn converts(attributes: &str, path: &str) -> bool {
        Rules::parse(attributes.as_bytes()).may_convert(path.into())
    }

    #[test]
    fn only_attributes_that_change_the_checked_out_bytes_hold_a_file_back() {
        // Harmless on Linux without core.autocrlf: text, eol=lf, diff, merge, linguist-*.
        for plain in [
            "* text=auto",
            "*.sh text eol=lf",
            "*.c diff=cpp whitespace=trail",
            "*.bin binary",
            "*.min.js linguist-generated -diff",
            "*.txt -crlf",
            "*.txt crlf=input",
            "*.txt !eol",
        ] {
            assert!(!converts(plain, "a/b.sh"), "{plain}");
            assert!(!converts(plain, "x.txt"), "{plain}");
        }
        for (converting, path) in [
            ("*.bat text eol=crlf", "win/run.bat"),
            ("*.c ident", "a.c"),
            ("*.psd filter=lfs", "art/x.psd"),
            ("*.txt working-tree-encoding=UTF-16", "x.txt"),
            ("*.txt crlf", "x.txt"),
            ("*.txt mymacro", "x.txt"),
            ("/top.txt eol=crlf", "top.txt"),
            ("docs/** eol=crlf", "docs/a/b.md"),
        ] {
            assert!(converts(converting, path), "{converting} on {path}");
        }
        // A pattern that does not match leaves the file alone; an anchored one matches only there.
        assert!(!converts("*.bat eol=crlf", "run.sh"));
        assert!(!converts("/top.txt eol=crlf", "sub/top.txt"));
        // A macro may redefine a harmless name: everything under that file waits.
        assert!(converts("[attr]binary eol=crlf\n*.dat binary", "x.dat"));
        assert!(converts("[attr]diff eol=crlf\n*.md diff", "other.txt"));
        // An assignment gix refuses holds back the files of its line.
        assert!(converts("*.txt builtin_objectmode", "x.txt"));
    }
}
