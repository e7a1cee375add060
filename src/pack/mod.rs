//! Packs (`gitformat-pack`): received and indexed as they stream in ([`mod@receive`], through our own
//! entry stream [`entries`]; a thin pack completed from the local objects first, [`thin`]), read back for the checkout ([`objects`]), and generated for a push
//! ([`generate`]). The wire delivers and sends the bytes; this module knows only the format.
//!
//! Memory is bounded whatever a pack holds: the pack is read through a [`ReleasingMap`] whose
//! pages are released as they are used, every size a pack claims is checked against
//! [`PackLimits`] before anything that size is allocated, and objects over the big-object
//! threshold are never held whole.

pub mod delta;
pub mod entries;
pub mod generate;
pub mod objects;
pub mod receive;
pub mod thin;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use entries::EntryObserver;
pub use objects::{BigBlob, Compared, PackObjects};
pub use receive::{ReceiveError, Received, receive};
pub use thin::receive_thin;

/// How many bytes of the pack (compressed, while indexing) or of objects (decoded, while checking
/// out) may be served before the mapping's pages are released again.
const RELEASE_EVERY: usize = 4 << 20;

/// A read-only mapping of a pack file whose resident pages are dropped (`madvise(MADV_DONTNEED)`)
/// after every `RELEASE_EVERY` bytes served; later reads fault them back in from the page cache.
pub struct ReleasingMap {
    map: memmap2::Mmap,
    served: AtomicUsize,
}

impl ReleasingMap {
    /// Map `file` read-only.
    ///
    /// # Errors
    /// The `mmap` error.
    pub fn new(file: &std::fs::File) -> std::io::Result<Self> {
        // SAFETY: the pack file is written by this process only, and never after it is mapped.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(ReleasingMap {
            map,
            served: AtomicUsize::new(0),
        })
    }

    /// Count `bytes` as served, and release the resident pages once enough were.
    pub fn note(&self, bytes: usize) {
        if self.served.fetch_add(bytes, Ordering::Relaxed) + bytes >= RELEASE_EVERY {
            self.served.store(0, Ordering::Relaxed);
            // SAFETY: the mapping is alive (borrowed from `self`), read-only and backed by a file that
            // no longer changes: dropping its page-table entries loses nothing, and a later read of
            // any byte (including by another thread holding a slice) faults the same content back in.
            #[allow(unsafe_code)]
            let _ = unsafe {
                self.map
                    .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
            };
        }
    }
}

/// A shared [`ReleasingMap`] as the byte slice gix-pack reads its pack data from.
#[derive(Clone)]
pub struct SharedMap(Arc<ReleasingMap>);

impl std::ops::Deref for SharedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0.map
    }
}

/// The default of `--max-object-bytes`: 4 GiB.
pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 4 << 30;

/// Objects over this many bytes are never held in memory whole (git's `core.bigFileThreshold`):
/// 512 MiB.
pub const DEFAULT_BIG_OBJECT_BYTES: u64 = 512 << 20;

/// The default of `--max-entries`: the most files and folders an archive or a commit's tree may
/// hold.
pub const DEFAULT_MAX_TREE_ENTRIES: u64 = 1_000_000;

/// Bounds on what a received pack may make this process hold (SPEC rule 7: every size the
/// remote decides is bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackLimits {
    /// The largest object or delta result, in bytes: a larger one is refused (exit 6) before it
    /// is allocated.
    pub max_object_bytes: u64,
    /// Objects larger than this are hashed as they stream in and checked out by streaming from
    /// the pack, never held whole; a delta with a result this large is refused. Test knob:
    /// `GIT_SESSION_BIG_OBJECT_BYTES`.
    pub big_object_bytes: u64,
    /// The most files and folders a commit's tree may expand to (`--max-entries`): the index
    /// holds every file, and a tree that repeats its subtrees expands to millions from a few KiB.
    pub max_tree_entries: u64,
}

impl Default for PackLimits {
    fn default() -> Self {
        PackLimits {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            big_object_bytes: std::env::var("GIT_SESSION_BIG_OBJECT_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_BIG_OBJECT_BYTES),
            max_tree_entries: DEFAULT_MAX_TREE_ENTRIES,
        }
    }
}

impl PackLimits {
    pub(crate) fn alloc_limit(&self) -> Option<usize> {
        Some(usize::try_from(self.max_object_bytes).unwrap_or(usize::MAX))
    }
}
