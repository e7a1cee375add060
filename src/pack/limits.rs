//! What a received pack may make this process hold, and the error when it asks for more.

/// The default of `--max-object-bytes`: 4 GiB.
pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 4 << 30;

pub use crate::knobs::DEFAULT_BIG_OBJECT_BYTES;

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
            big_object_bytes: crate::knobs::get().big_object_bytes,
            max_tree_entries: DEFAULT_MAX_TREE_ENTRIES,
        }
    }
}

impl PackLimits {
    pub(crate) fn alloc_limit(&self) -> Option<usize> {
        Some(usize::try_from(self.max_object_bytes).unwrap_or(usize::MAX))
    }
}

/// Why [`receive()`](super::receive()) failed.
#[derive(Debug)]
pub enum ReceiveError {
    /// The local file system refused to hold the pack or its index (no space, read-only,
    /// permission denied), or another local I/O failure: the stream may be fine.
    Local(crate::Error),
    /// The pack claims an object or delta result larger than the limit (exit 6, before it is
    /// allocated).
    TooLarge(String),
    /// The stream is not a valid pack (or was cut: the caller knows whether the connection was).
    Corrupt(String),
}

impl ReceiveError {
    /// A failure of gix-pack reading the stream or writing the files: local when a file-system
    /// refusal is among its causes (the tee into the pack file, the index writer), too large when
    /// gix-pack's allocation limit refused a size, else corrupt.
    pub(super) fn from_gix(
        context: &str,
        err: &(dyn std::error::Error + 'static),
        limits: PackLimits,
    ) -> Self {
        if crate::error::local_io_kind(err)
            .and_then(crate::error::local_io_hint)
            .is_some()
        {
            return ReceiveError::Local(crate::Error::from_chain(context, err));
        }
        if gix::error::classify(err).is_resource_exhausted() {
            return ReceiveError::TooLarge(format!(
                "the pack claims an object or delta result over {} bytes (--max-object-bytes \
                 raises the limit): refused before allocating it ({})",
                limits.max_object_bytes,
                crate::error::chain(err)
            ));
        }
        ReceiveError::Corrupt(crate::error::chain(err))
    }
}
