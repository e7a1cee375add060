//! Helpers every step of `save` shares.

use std::path::Path;

use gix::bstr::BStr;

use crate::error::Error;

/// An internal error naming what was being done, with the whole chain of causes of `err` (exit 10
/// when the file system refused).
pub(super) fn fail(
    context: impl std::fmt::Display,
    err: impl std::error::Error + 'static,
) -> Error {
    Error::from_chain(context, &err)
}

/// A repository path (bytes, `/`-separated) as a file system path (Unix: the same bytes).
pub(super) fn bytes_to_path(path: &BStr) -> &Path {
    Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path))
}
