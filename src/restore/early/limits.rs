//! What the early checkout may hold in memory, whatever the pack: entries over [`MAX_ENTRY_BYTES`]
//! are not collected (a whole object is hashed by the stream instead); at most [`QUEUE_BYTES`] wait
//! for the resolver and as many for the writer; the cache of delta bases holds at most
//! [`CACHE_BYTES`], the trees kept by id at most [`SEEN_TREE_BYTES`], the paths named at most
//! [`PATH_BYTES`] (whatever the tree's shape: past it, the files are left to the checkout after the
//! transfer); and 32 bytes per object for the ids.

/// The largest entry (inflated) the worker looks at, in bytes.
pub(super) const MAX_ENTRY_BYTES: u64 = 2 << 20;
/// The most inflated bytes waiting for the worker.
pub(super) const QUEUE_BYTES: usize = 8 << 20;
/// The most bytes of recent objects kept as delta bases.
pub(super) const CACHE_BYTES: usize = 8 << 20;
/// The most bytes of trees kept by id, for folders that name them after they arrived.
pub(super) const SEEN_TREE_BYTES: usize = 4 << 20;
/// The most bytes the paths this checkout names may cost, whatever the tree's shape (a tree that
/// repeats the same subtrees names millions of paths from a pack of a few KiB): each counts its
/// length and [`PATH_COST`]. Past it no more paths are named; their files are left to the checkout
/// after the transfer, which has a bound of its own (`--max-entries`).
pub(super) const PATH_BYTES: usize = 16 << 20;
/// What a named path costs besides its bytes: the maps and sets that hold it on its way to the
/// writer, and the writer's record of it.
pub(super) const PATH_COST: usize = 192;
