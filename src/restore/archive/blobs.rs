//! The blob id of every file and symlink an archive restore extracts, hashed on a thread of its own
//! so that the hashing overlaps the extraction (the extraction's thread also inflates the gzip
//! stream). From them the restore writes the index, so plain git sees a clean tree from the first
//! command ([`super::index`]).
//!
//! The bytes go over in batches of about [`BATCH`] (many small files in one): a message per file
//! or per chunk made the two threads wake each other some 100,000 times for 24,000 files, which
//! cost more system time than the hashing itself.
//!
//! Memory: the batches in flight are bounded by the channel (about 1 MiB); what is kept is one
//! path, mode, stat and id per entry, as the index itself holds.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use sha1::Digest as _;

use crate::error::{Error, Result};
use crate::types::Format;

/// An object id being hashed, in the repository's format. SHA-1 through the `sha1` crate: gix's
/// hasher adds git's collision detection, which costs more than the rest of the extraction.
#[derive(Clone)]
pub(super) enum IdHasher {
    Sha1(sha1::Sha1),
    Other(gix::hash::Hasher),
}

impl IdHasher {
    pub(super) fn new(format: Format) -> Self {
        match format {
            Format::Sha1 => IdHasher::Sha1(sha1::Sha1::new()),
            other => IdHasher::Other(gix::hash::hasher(other)),
        }
    }

    pub(super) fn update(&mut self, bytes: &[u8]) {
        match self {
            IdHasher::Sha1(h) => h.update(bytes),
            IdHasher::Other(h) => h.update(bytes),
        }
    }

    /// The id. SHA-256 cannot fail; SHA-1 here has no collision detection to fail.
    pub(super) fn finish(self) -> gix::ObjectId {
        match self {
            IdHasher::Sha1(h) => gix::ObjectId::from_bytes_or_panic(h.finalize().as_slice()),
            IdHasher::Other(h) => h
                .try_finalize()
                .expect("only SHA-1's collision detection fails"),
        }
    }
}

/// What the extraction does with each file's bytes besides writing the file.
#[derive(Debug, Clone, Copy)]
pub enum Hash<'a> {
    /// Nothing.
    Skip,
    /// Its blob id in this format (for the index).
    Ids(Format),
    /// Its blob id in this format, and the blob kept in a pack in this `objects/pack` folder (see
    /// [`crate::pack::blob_pack`]).
    IdsAndPack(&'a std::path::Path, Format),
}

/// One extracted file or symlink: its path below the tree ('/'-joined), index mode and blob id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Relative to the work tree, '/'-separated.
    pub path: Vec<u8>,
    /// `FILE`, `FILE_EXECUTABLE` or `SYMLINK`.
    pub mode: gix::index::entry::Mode,
    /// The blob's id.
    pub id: gix::ObjectId,
    /// The stat data of the file as written (`None`: to be read once it is in place).
    pub stat: Option<gix::index::entry::Stat>,
}

enum Op {
    /// A blob of this many bytes begins.
    Begin(u64),
    /// The next this many bytes of the batch's data are the blob's.
    Data(usize),
    End,
}

/// What one message carries: operations, and the bytes their `Data` take in order.
#[derive(Default)]
struct Batch {
    ops: Vec<Op>,
    data: Vec<u8>,
}

impl Batch {
    /// An empty batch with room for a whole one (the last `update` may pass `BATCH` by a chunk).
    fn with_room() -> Self {
        Batch {
            ops: Vec::with_capacity(4096 + 64),
            data: Vec::with_capacity(BATCH + (64 << 10)),
        }
    }
}

/// The bytes a batch collects before it is sent.
const BATCH: usize = 256 << 10;
/// Batches in flight between the extraction and the hashing thread.
const IN_FLIGHT: usize = 4;

/// The hashing thread and the entries whose ids it computes, in order.
pub struct Hashing {
    tx: Option<SyncSender<Batch>>,
    /// Batches the thread is done with, emptied, to fill again: a new 256 KiB buffer per batch
    /// was a fresh mapping (page faults, zeroed pages) and a realloc chain every time.
    back: Receiver<Batch>,
    thread: Option<JoinHandle<Hashed>>,
    /// Set by [`Hashing::finish`]: the stream was whole, so the pack is finished (an extraction
    /// that failed leaves none).
    whole: std::sync::Arc<std::sync::atomic::AtomicBool>,
    batch: Batch,
    entries: Vec<(
        Vec<u8>,
        gix::index::entry::Mode,
        Option<gix::index::entry::Stat>,
    )>,
}

impl Hashing {
    /// Start the thread hashing ids of `format`; with `pack`, it keeps every blob in a pack there
    /// too.
    ///
    /// # Errors
    /// The I/O error of creating the pack.
    pub fn start(format: Format, pack: Option<&std::path::Path>) -> Result<Self> {
        let (tx, rx) = sync_channel(IN_FLIGHT);
        let (back_tx, back) = sync_channel(IN_FLIGHT + 1);
        let pack = pack
            .map(|dir| {
                crate::pack::blob_pack::BlobPack::create(dir, format)
                    .map_err(|e| Error::io(format!("creating a pack in {}", dir.display()), e))
            })
            .transpose()?;
        let whole = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = whole.clone();
        let thread = std::thread::Builder::new()
            .name("blob-ids".into())
            .spawn(move || hash_all(format, &rx, &back_tx, pack, &done))
            .ok();
        Ok(Hashing {
            tx: Some(tx),
            back,
            thread,
            batch: Batch::with_room(),
            entries: Vec::new(),
            whole,
        })
    }

    /// A blob of `size` bytes at `path` begins; its bytes follow through [`Hashing::update`].
    pub fn begin(&mut self, path: Vec<u8>, mode: gix::index::entry::Mode, size: u64) {
        self.entries.push((path, mode, None));
        self.batch.ops.push(Op::Begin(size));
    }

    /// The next bytes of the current blob.
    pub fn update(&mut self, bytes: &[u8]) {
        self.batch.data.extend_from_slice(bytes);
        self.batch.ops.push(Op::Data(bytes.len()));
        if self.batch.data.len() >= BATCH {
            self.send();
        }
    }

    /// The current blob is whole; `stat`: the file's stat data as written, if known.
    pub fn end(&mut self, stat: Option<gix::index::entry::Stat>) {
        if let Some(last) = self.entries.last_mut() {
            last.2 = stat;
        }
        self.batch.ops.push(Op::End);
        if self.batch.ops.len() >= 4096 {
            self.send();
        }
    }

    fn send(&mut self) {
        let next = self.back.try_recv().unwrap_or_else(|_| Batch::with_room());
        let batch = std::mem::replace(&mut self.batch, next);
        // A thread that could not start (or died) is found by `finish`.
        if let Some(tx) = &self.tx
            && tx.send(batch).is_err()
        {
            self.tx = None;
        }
    }

    /// Every entry with its id, in the order they began.
    ///
    /// # Errors
    /// [`Error::Internal`] when the hashing thread did not start or did not finish.
    pub fn finish(mut self) -> Result<Vec<Blob>> {
        self.send();
        self.whole.store(true, std::sync::atomic::Ordering::SeqCst);
        self.tx = None;
        let (ids, pack) = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .ok_or_else(|| {
                Error::Internal("the thread hashing the archive's files failed".into())
            })?;
        if let Some(Err(e)) = pack {
            return Err(Error::io("writing the archive's blobs into a pack", e));
        }
        if ids.len() != self.entries.len() {
            return Err(Error::Internal(format!(
                "hashed {} of the archive's {} files",
                ids.len(),
                self.entries.len()
            )));
        }
        Ok(std::mem::take(&mut self.entries)
            .into_iter()
            .zip(ids)
            .map(|((path, mode, stat), id)| Blob {
                path,
                mode,
                id,
                stat,
            })
            .collect())
    }
}

impl Drop for Hashing {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the thread made: the ids, and the pack's path (or the error that stopped it).
type Hashed = (
    Vec<gix::ObjectId>,
    Option<std::io::Result<std::path::PathBuf>>,
);

/// The thread: a blob id per `Begin … End`, until the sender is gone; each blob into `pack` too.
fn hash_all(
    format: Format,
    rx: &Receiver<Batch>,
    back: &SyncSender<Batch>,
    mut pack: Option<crate::pack::blob_pack::BlobPack>,
    whole: &std::sync::atomic::AtomicBool,
) -> Hashed {
    let mut ids = Vec::new();
    let mut hasher = IdHasher::new(format);
    let mut failed = None;
    while let Ok(mut batch) = rx.recv() {
        let mut at = 0;
        for op in batch.ops.drain(..) {
            let packed = match op {
                Op::Begin(size) => {
                    hasher = IdHasher::new(format);
                    hasher.update(format!("blob {size}\0").as_bytes());
                    pack.as_mut().map(|p| p.begin(size))
                }
                Op::Data(n) => {
                    let bytes = &batch.data[at..at + n];
                    hasher.update(bytes);
                    at += n;
                    pack.as_mut().map(|p| p.data(bytes))
                }
                Op::End => {
                    let id = std::mem::replace(&mut hasher, IdHasher::new(format)).finish();
                    ids.push(id);
                    pack.as_mut().map(|p| p.end(id))
                }
            };
            if let Some(Err(e)) = packed {
                // The ids go on; the pack stops, its error is reported.
                pack = None;
                failed = Some(e);
            }
        }
        batch.data.clear();
        // Full (the extraction made new ones meanwhile) or gone: dropped.
        let _ = back.try_send(batch);
    }
    let pack = match (failed, pack) {
        (Some(e), _) => Some(Err(e)),
        (None, Some(p)) if whole.load(std::sync::atomic::Ordering::SeqCst) => Some(p.finish()),
        (None, Some(p)) => {
            p.abandon();
            None
        }
        (None, None) => None,
    };
    (ids, pack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_git_blob_ids_in_order() {
        for format in [Format::Sha1, Format::Sha256] {
            ids_in(format);
        }
    }

    fn ids_in(format: Format) {
        let mut h = Hashing::start(format, None).unwrap();
        let big = vec![b'x'; 300_000];
        for (path, bytes) in [("a", &b"hello\n"[..]), ("b/c", &big), ("d", b"")] {
            h.begin(
                path.into(),
                gix::index::entry::Mode::FILE,
                bytes.len() as u64,
            );
            for chunk in bytes.chunks(65536) {
                h.update(chunk);
            }
            h.end(None);
        }
        let blobs = h.finish().unwrap();
        let want = |b: &[u8]| gix::objs::compute_hash(format, gix::objs::Kind::Blob, b).unwrap();
        assert_eq!(blobs[0].id, want(b"hello\n"));
        assert_eq!(blobs[1].id, want(&big));
        assert_eq!(blobs[1].path, b"b/c");
        assert_eq!(blobs[2].id, want(b""));
    }
}
