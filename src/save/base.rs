//! Helpers every step of `save` shares.

use std::path::Path;

use gix::bstr::{BStr, BString};

use crate::error::{Error, Result};

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

/// The tree of the commit `head`.
pub(super) fn head_tree_of(repo: &gix::Repository, head: gix::ObjectId) -> Result<gix::ObjectId> {
    Ok(repo
        .find_commit(head)
        .and_then(|c| c.tree_id())
        .map_err(|e| fail(format!("reading the HEAD commit {head}"), e))?
        .detach())
}

/// Open the repository as every command does ([`crate::repo::open_with`]: nothing of its config
/// runs, no filter driver among it), `core.excludesFile` set to the resolved user value.
pub(super) fn open(git_dir: &Path, excludes_file: Option<&Path>) -> Result<gix::Repository> {
    let mut overrides: Vec<BString> = Vec::new();
    if let Some(path) = excludes_file {
        let mut value = BString::from("core.excludesFile=");
        value.extend_from_slice(path.as_os_str().as_encoded_bytes());
        overrides.push(value);
    }
    crate::repo::open_with(git_dir, overrides)
}
