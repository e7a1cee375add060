//! The resolver thread of the early checkout: it hashes every entry the pack stream inflates,
//! resolves offset deltas against recent objects, reads the commit `TIP_SHA` and the trees it
//! names, and hands each blob whose path is known and whose file no attribute may convert
//! ([`super::attributes`]) to the writer ([`super::writer`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use gix::bstr::{BStr, BString, ByteSlice as _};
use gix::odb::pack::data::entry::Header;

use super::attributes::Rules;
use super::limits::{
    CACHE_BYTES, MAX_ENTRY_BYTES, PATH_BYTES, PATH_COST, QUEUE_BYTES, SEEN_TREE_BYTES,
};
use super::writer::{Data, Job};

/// What the pack stream, through [`super::EarlyCheckout`], sends the resolver, in order.
pub(super) enum Message {
    Begin,
    /// Where the entries that passed can be read again (a delta's base no longer cached).
    Pack(crate::pack::PackSoFar),
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

/// The bytes waiting for the resolver: the stream waits while they are over [`QUEUE_BYTES`].
#[derive(Default)]
pub(super) struct Budget {
    pub(super) queued: std::sync::Mutex<usize>,
    pub(super) room: std::sync::Condvar,
    /// The resolver ended (a panic included): nobody makes room any more.
    pub(super) gone: std::sync::atomic::AtomicBool,
}

/// Recent objects by pack offset, for the deltas that follow them; oldest out first.
#[derive(Default)]
struct Cache {
    objects: HashMap<u64, (gix::objs::Kind, Data)>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl Cache {
    fn insert(&mut self, offset: u64, kind: gix::objs::Kind, data: Data) {
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

/// Names every object of the pack and finds the files to write.
pub(super) struct Resolver {
    tip: gix::ObjectId,
    budget: Arc<Budget>,
    /// One queue a writer; a file goes to the writer of its folder.
    jobs: Vec<mpsc::SyncSender<Job>>,
    /// Bytes waiting for the writer: over [`QUEUE_BYTES`], files are left to the later checkout.
    writing: Arc<AtomicUsize>,
    cache: Cache,
    /// The pack written so far, for the bases the cache no longer holds.
    pack: Option<crate::pack::PackSoFar>,
    /// Every entry's object, by offset: the pack's index when it is complete.
    ids: Vec<(u64, gix::ObjectId)>,
    /// Trees named by the commit or a used tree, not seen yet: their folders.
    trees: HashMap<gix::ObjectId, Vec<BString>>,
    /// Trees seen, by id (up to [`SEEN_TREE_BYTES`]).
    seen_trees: HashMap<gix::ObjectId, Data>,
    seen_bytes: usize,
    /// Blobs named by a used tree, not seen yet: their paths and modes (`None`: not a file to write
    /// early, only an attributes file to read).
    blobs: HashMap<gix::ObjectId, Vec<(BString, Option<gix::index::entry::Mode>)>>,
    /// Folders (`""`: the root) holding a `.gitattributes`, and its blob.
    attributes: HashMap<BString, gix::ObjectId>,
    rules: HashMap<gix::ObjectId, Rules>,
    /// Paths handed to the writer.
    sent: HashSet<BString>,
    /// Deltas resolved, deltas whose base was not at hand, files left (writer behind), bases
    /// read back from the pack so far.
    counts: (usize, usize, usize, usize),
    /// What the paths named so far cost (see [`PATH_BYTES`]); never lowered.
    path_bytes: usize,
}

impl Resolver {
    pub(super) fn new(
        tip: gix::ObjectId,
        budget: Arc<Budget>,
        jobs: Vec<mpsc::SyncSender<Job>>,
        writing: Arc<AtomicUsize>,
    ) -> Self {
        Resolver {
            tip,
            budget,
            jobs,
            writing,
            cache: Cache::default(),
            pack: None,
            ids: Vec::new(),
            trees: HashMap::new(),
            seen_trees: HashMap::new(),
            seen_bytes: 0,
            blobs: HashMap::new(),
            attributes: HashMap::new(),
            rules: HashMap::new(),
            sent: HashSet::new(),
            counts: (0, 0, 0, 0),
            path_bytes: 0,
        }
    }

    pub(super) fn run(mut self, rx: mpsc::Receiver<Message>) {
        for message in rx {
            match message {
                Message::Begin => {
                    self.cache = Cache::default();
                    self.pack = None;
                    self.ids.clear();
                }
                Message::Pack(pack) => self.pack = Some(pack),
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
            "early checkout: {} objects named; {} deltas resolved ({} bases read back from the \
             pack), {} without their base at hand; {} files left to the checkout after the \
             transfer (the writer was behind)",
            self.ids.len(),
            self.counts.0,
            self.counts.3,
            self.counts.1,
            self.counts.2
        );
    }

    fn entry(&mut self, offset: u64, header: Header, data: Vec<u8>) {
        let (kind, data): (_, Data) = match header {
            Header::OfsDelta { base_distance } => {
                let base = offset.checked_sub(base_distance);
                if let Some(b) = base.filter(|b| !self.cache.objects.contains_key(b)) {
                    self.read_back(b);
                }
                let Some((kind, base)) = base.and_then(|b| self.cache.objects.get(&b)) else {
                    self.counts.1 += 1;
                    return;
                };
                let Some(object) =
                    crate::pack::delta::apply(base, &data, MAX_ENTRY_BYTES as usize * 4)
                else {
                    return;
                };
                self.counts.0 += 1;
                (*kind, Arc::new(object))
            }
            Header::RefDelta { .. } => {
                self.counts.1 += 1;
                return;
            }
            _ => match header.as_kind() {
                Some(kind) => (kind, Arc::new(data)),
                None => return,
            },
        };
        let Ok(id) = gix::objs::compute_hash(self.tip.kind(), kind, &data) else {
            return;
        };
        self.ids.push((offset, id));
        self.object(id, kind, &data);
        self.cache.insert(offset, kind, data);
    }

    /// The base at `offset`, evicted from the cache (or never given: over
    /// [`MAX_ENTRY_BYTES`]), read back from the pack written so far into the cache.
    fn read_back(&mut self, offset: u64) {
        let Some((kind, data)) = self
            .pack
            .as_ref()
            .and_then(|p| p.object_at(offset, MAX_ENTRY_BYTES))
        else {
            return;
        };
        self.counts.3 += 1;
        self.cache.insert(offset, kind, Arc::new(data));
    }

    fn object(&mut self, id: gix::ObjectId, kind: gix::objs::Kind, data: &Data) {
        match kind {
            gix::objs::Kind::Commit if id == self.tip => {
                let tree = gix::objs::CommitRefIter::from_bytes(data, self.tip.kind())
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
        let mut work: Vec<(BString, Data)> = vec![(folder.to_owned(), Arc::new(data.to_vec()))];
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
        for entry in gix::objs::TreeRefIter::from_bytes(data, self.tip.kind()) {
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
        data: &Data,
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
        if self.jobs[writer_of(path.as_ref(), self.jobs.len())]
            .try_send(job)
            .is_ok()
        {
            self.sent.insert(path);
        } else {
            self.writing.fetch_sub(len, Ordering::Relaxed);
            self.counts.2 += 1;
        }
    }
}

/// Which of `writers` writes the file at `path`: the same for every file of a folder, so two
/// writers never write one path, and rarely create files in the same folder (the kernel takes a
/// folder's lock for each).
fn writer_of(path: &BStr, writers: usize) -> usize {
    use std::hash::{Hash as _, Hasher as _};
    let folder = path.rfind_byte(b'/').map_or(&path[..0], |i| &path[..i]);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    folder.hash(&mut h);
    usize::try_from(h.finish() % writers.max(1) as u64).unwrap_or(0)
}

impl Drop for Resolver {
    fn drop(&mut self) {
        // Under the lock, so a stream thread about to wait sees it.
        let _queued = self.budget.queued.lock();
        self.budget.gone.store(true, Ordering::Relaxed);
        self.budget.room.notify_all();
    }
}
