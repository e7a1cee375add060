//! Git LFS before a push: the objects `save` stored in `.git/lfs/objects` (the pending list of
//! [`crate::repo::lfs`]) are uploaded through the LFS batch API first, so the remote never gets
//! a commit whose LFS pointers its LFS server lacks. The server answers "done" for objects it
//! has; each uploaded object is verified when the server asks for it.

use crate::error::{Error, Result};
use crate::repo::lfs as store;
use crate::repo::session::Session;
use crate::types::RemoteUrl;
use crate::wire::http::Http;
use crate::wire::lfs::{self as wire, Answer, Endpoint, Operation};

/// Upload the pending objects of `session` to the LFS server of `url` (or the work tree's
/// `.lfsconfig`); returns how many were sent.
///
/// # Errors
/// Those of [`wire::batch`] and [`wire::upload`]; [`Error::Conflict`] when a pending object is
/// gone from `.git/lfs/objects`.
pub fn upload_pending(http: &Http, session: &Session, url: &RemoteUrl) -> Result<usize> {
    let pending = store::pending(session.own_dir())?;
    if pending.is_empty() {
        return Ok(0);
    }
    let endpoint = match store::worktree_url(&session.workdir) {
        Some(configured) => Endpoint::configured(&configured, url)?,
        None => Endpoint::of_remote(url),
    };
    let _progress =
        crate::progress::Progress::spinner(&format!("uploading {} Git LFS objects", pending.len()));
    let mut sent = 0;
    for chunk in pending.chunks(wire::BATCH_SIZE) {
        let answers = http.retrying("asking the LFS server where to upload", || {
            wire::batch(http, &endpoint, Operation::Upload, chunk)
        })?;
        for (pointer, answer) in chunk.iter().zip(answers) {
            let Answer::Transfer(action, verify) = answer else {
                continue;
            };
            // Asked first: an object the server already has needs no local copy.
            if !store::has(session.objects_dir(), pointer) {
                return Err(Error::conflict(format!(
                    "LFS object {} is gone from .git/lfs/objects and the LFS server does not have \
                     it, so it cannot be uploaded: put the content of the file it belongs to back \
                     and save again; nothing was pushed",
                    pointer.oid
                )));
            }
            let path = store::object_path(session.objects_dir(), pointer);
            http.retrying("uploading an LFS object", || {
                let file = crate::fs::open_regular(&path, false)
                    .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
                wire::upload(http, &endpoint, (&action, verify.as_deref()), pointer, file)
            })?;
            sent += 1;
        }
        store::clear_pending(session.own_dir(), chunk)?;
    }
    tracing::info!("{sent} LFS objects uploaded to {endpoint}");
    Ok(sent)
}
