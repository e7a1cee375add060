//! Packs (`gitformat-pack`): received and indexed as they stream in ([`mod@receive`], through our own
//! entry stream [`entries`]; a thin pack completed from the local objects first, [`thin`]), read back for the checkout ([`objects`]), and generated for a push
//! ([`generate`]). The wire delivers and sends the bytes; this module knows only the format.
//!
//! Memory is bounded whatever a pack holds: the pack is read through a [`ReleasingMap`] whose
//! pages are released as they are used, every size a pack claims is checked against
//! [`PackLimits`] before anything that size is allocated, and objects over the big-object
//! threshold are never held whole.

pub mod blob_pack;
pub mod delta;
pub mod entries;
pub mod generate;
mod limits;
mod map;
pub mod objects;
pub mod receive;
mod released;
mod so_far;
pub mod thin;

pub use entries::EntryObserver;
pub use limits::{
    DEFAULT_BIG_OBJECT_BYTES, DEFAULT_MAX_OBJECT_BYTES, DEFAULT_MAX_TREE_ENTRIES, PackLimits,
    ReceiveError,
};
pub use map::{ReleasingMap, SharedMap};
pub use objects::{BigBlob, Compared, PackObjects};
pub use receive::{Received, receive};
pub use released::ReleasingObjects;
#[cfg(test)]
pub(crate) use released::fixture;
pub use so_far::PackSoFar;
pub use thin::receive_thin;
