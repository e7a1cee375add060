//! The blob id of every file and symlink an archive restore extracts, hashed on a thread of its own
//! so that the hashing overlaps the extraction (the extraction's thread also inflates the gzip
//! stream). From them the restore writes the index, so plain git sees a clean tree from the first
//! command ([`super::index`]).
//!
//! Memory: the chunks in flight are bounded by the channel (a few hundred KiB); what is kept is
//! one path, mode and id per entry, as the index itself holds.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use sha1::Digest as _;

use crate::error::{Error, Result};

/// One extracted file or symlink: its path below the tree ('/'-joined), index mode and blob id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Relative to the work tree, '/'-separated.
    pub path: Vec<u8>,
    /// `FILE`, `FILE_EXECUTABLE` or `SYMLINK`.
    pub mode: gix::index::entry::Mode,
    /// The blob's id.
    pub id: gix::ObjectId,
}

enum Msg {
    /// A blob of this many bytes begins.
    Begin(u64),
    Data(Vec<u8>),
    End,
}

/// Chunks in flight between the extraction and the hashing thread.
const IN_FLIGHT: usize = 8;

/// The hashing thread and the entries whose ids it computes, in order.
pub struct Hashing {
    tx: Option<SyncSender<Msg>>,
    thread: Option<JoinHandle<Vec<gix::ObjectId>>>,
    entries: Vec<(Vec<u8>, gix::index::entry::Mode)>,
}

impl Hashing {
    /// Start the thread.
    pub fn start() -> Self {
        let (tx, rx) = sync_channel(IN_FLIGHT);
        let thread = std::thread::Builder::new()
            .name("blob-ids".into())
            .spawn(move || hash_all(&rx))
            .ok();
        Hashing {
            tx: Some(tx),
            thread,
            entries: Vec::new(),
        }
    }

    /// A blob of `size` bytes at `path` begins; its bytes follow through [`Hashing::update`].
    pub fn begin(&mut self, path: Vec<u8>, mode: gix::index::entry::Mode, size: u64) {
        self.entries.push((path, mode));
        self.send(Msg::Begin(size));
    }

    /// The next bytes of the current blob.
    pub fn update(&mut self, bytes: &[u8]) {
        self.send(Msg::Data(bytes.to_vec()));
    }

    /// The current blob is whole.
    pub fn end(&mut self) {
        self.send(Msg::End);
    }

    fn send(&mut self, msg: Msg) {
        // A thread that could not start (or died) is found by `finish`.
        if let Some(tx) = &self.tx
            && tx.send(msg).is_err()
        {
            self.tx = None;
        }
    }

    /// Every entry with its id, in the order they began.
    ///
    /// # Errors
    /// [`Error::Internal`] when the hashing thread did not start or did not finish.
    pub fn finish(mut self) -> Result<Vec<Blob>> {
        self.tx = None;
        let ids = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .ok_or_else(|| {
                Error::Internal("the thread hashing the archive's files failed".into())
            })?;
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
            .map(|((path, mode), id)| Blob { path, mode, id })
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

/// The thread: a blob id per `Begin … End`, until the sender is gone.
fn hash_all(rx: &Receiver<Msg>) -> Vec<gix::ObjectId> {
    let mut ids = Vec::new();
    let mut hasher = sha1::Sha1::new();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Begin(size) => {
                hasher = sha1::Sha1::new();
                hasher.update(format!("blob {size}\0").as_bytes());
            }
            Msg::Data(bytes) => hasher.update(&bytes),
            Msg::End => {
                let digest = std::mem::take(&mut hasher).finalize();
                ids.push(gix::ObjectId::from_bytes_or_panic(digest.as_slice()));
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_git_blob_ids_in_order() {
        let mut h = Hashing::start();
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
            h.end();
        }
        let blobs = h.finish().unwrap();
        let want = |b: &[u8]| {
            gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, b).unwrap()
        };
        assert_eq!(blobs[0].id, want(b"hello\n"));
        assert_eq!(blobs[1].id, want(&big));
        assert_eq!(blobs[1].path, b"b/c");
        assert_eq!(blobs[2].id, want(b""));
    }
}
