//! The pack file as a mapping whose pages are released as they are used.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many bytes of the pack (compressed, while indexing) or of objects (decoded, while checking
/// out) may be served before the mapping's pages are released again. 1 MiB, not more: the pages
/// faulted around each read (64 KiB at a time) stay resident until the next release, so this
/// bounds the mapping's share of the peak RSS (4 MiB of the 17 MiB of a sparse restore of git/git's
/// Documentation when it was 4 MiB); a release costs one `madvise` and the re-read pages a minor
/// fault each 64 KiB, from the page cache.
const RELEASE_EVERY: usize = 1 << 20;

/// A read-only mapping of a pack file whose resident pages are dropped (`madvise(MADV_DONTNEED)`)
/// after every `RELEASE_EVERY` bytes served; later reads fault them back in from the page cache.
pub struct ReleasingMap {
    pub(super) map: memmap2::Mmap,
    served: AtomicUsize,
    /// The fault-around window ([`WINDOW`]) the last read at an offset ([`ReleasingMap::note_at`])
    /// ended in.
    window: AtomicUsize,
}

/// The bytes the kernel maps around a read fault of a file mapping (`fault_around_bytes`, 64 KiB
/// by default, aligned): a read of a few bytes in a window not yet resident makes all of it so.
const WINDOW: usize = 64 << 10;

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
            window: AtomicUsize::new(usize::MAX),
        })
    }

    /// Count the `len` bytes at `offset` as served, and a whole [`WINDOW`] more when they start
    /// outside the window the last such read ended in (the pages faulted around them): a delta
    /// resolution that reads small entries scattered over the pack makes a window resident for
    /// each, many times the bytes it reads.
    pub fn note_at(&self, offset: usize, len: usize) {
        let end = (offset + len.max(1) - 1) / WINDOW;
        let last = self.window.swap(end, Ordering::Relaxed);
        let around = if last == offset / WINDOW { 0 } else { WINDOW };
        self.note(len + around);
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
pub struct SharedMap(pub(super) Arc<ReleasingMap>);

impl std::ops::Deref for SharedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0.map
    }
}
