//! The receive-pack request body: the update command as pkt-lines, a flush, then a pack of exactly
//! the objects the remote lacks (`gitprotocol-pack` "Reference Update Request and Packfile
//! Transfer"), spooled to a temporary file — never to memory — so retries and a 411 resend reuse it.

use std::io::{BufWriter, Write};
use std::sync::atomic::AtomicBool;

use gix_pack::data::output;
use gix_packetline::blocking_io::encode;

use crate::error::chain;
use crate::error::{Error, Result};
use crate::types::FullSha;

/// A request body on disk.
pub struct Spooled {
    /// The temporary file: unnamed (`O_TMPFILE`, or unlinked at once), so no crash leaves it behind.
    file: std::sync::Arc<std::fs::File>,
    /// Its size in bytes.
    pub len: u64,
    /// Objects in the pack.
    pub objects: u32,
    /// The update's old value.
    pub old: FullSha,
    /// The update's new value.
    pub new: FullSha,
    /// Send with a Content-Length rather than chunked (after a 411, or a chunked upload cut short).
    pub sized: std::cell::Cell<bool>,
}

impl Spooled {
    /// A reader of the whole body from its start; each has its own position, so a reader still
    /// held by an abandoned request cannot move another's.
    pub fn reader(&self) -> SpoolReader {
        SpoolReader {
            file: self.file.clone(),
            pos: 0,
        }
    }
}

/// Reads a [`Spooled`] body with positional reads (`pread`).
pub struct SpoolReader {
    file: std::sync::Arc<std::fs::File>,
    pos: u64,
}

impl std::io::Read for SpoolReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(&*self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Write the request for `old → new` on `refname` into a temporary file in the git dir.
///
/// The pack holds the commits `base..new` (with `base` the lease, or `TIP_SHA` for a new branch,
/// which the server has) and the trees and blobs they add compared with their parents — which works
/// from a depth-1 restore, where nothing older than `base` exists locally.
///
/// # Errors
/// [`Error::Integrity`] when an object to push holds a session token (`secrets`);
/// [`Error::Internal`] when objects cannot be read, [`Error::LocalIo`] when the file cannot be
/// written.
pub fn spool(
    repo: &gix::Repository,
    old: FullSha,
    new: FullSha,
    base: FullSha,
    refname: &str,
    caps: &[String],
    secrets: &[String],
) -> Result<Spooled> {
    let io = |e| Error::io("writing the push request", e);
    sweep_old_spools(repo.git_dir());
    let file = tempfile::tempfile_in(repo.git_dir())
        .map_err(|e| Error::io("creating the push spool file", e))?;
    let mut out = BufWriter::with_capacity(256 * 1024, file.try_clone().map_err(io)?);
    let mut command = format!("{old} {new} {refname}").into_bytes();
    command.push(0);
    command.extend_from_slice(caps.join(" ").as_bytes());
    command.push(b'\n');
    encode::data_to_write(&command, &mut out).map_err(io)?;
    encode::flush_to_write(&mut out).map_err(io)?;

    let commits = commits_to_push(repo, new, base)?;
    // gix-pack's generator needs the store handle itself, with packs pinned while it copies from them.
    let mut db = repo
        .objects
        .clone()
        .into_inner()
        .into_inner()
        .into_arc()
        .map_err(|e| Error::io("opening the object database", e))?;
    db.prevent_pack_unload();
    let counts = objects_to_push(&db, &commits)?;
    let num = counts.len() as u32;
    write_pack(&db, counts, &mut out, secrets)?;
    out.flush().map_err(io)?;
    let f = out.into_inner().map_err(|e| io(e.into_error()))?;
    let len = f.metadata().map_err(io)?.len();
    Ok(Spooled {
        file: std::sync::Arc::new(file),
        len,
        objects: num,
        old,
        new,
        sized: std::cell::Cell::new(false),
    })
}

/// Remove named spool files that earlier builds left behind when they died mid-push.
fn sweep_old_spools(git_dir: &std::path::Path) {
    if let Ok(dir) = std::fs::read_dir(git_dir) {
        for entry in dir.flatten() {
            if entry
                .file_name()
                .as_encoded_bytes()
                .starts_with(b"git-session-push-")
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// The commits `base..new`, newest first.
fn commits_to_push(
    repo: &gix::Repository,
    new: FullSha,
    base: FullSha,
) -> Result<Vec<gix::ObjectId>> {
    repo.rev_walk([new.id()])
        .with_hidden([base.id()])
        .all()
        .map_err(|e| Error::internal("walking the commits to push", chain(&e)))?
        .map(|info| info.map(|i| i.id))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::internal("walking the commits to push", chain(&e)))
}

type Db = gix::odb::store::Handle<std::sync::Arc<gix::odb::Store>>;

/// The objects of `commits` the remote lacks: the commits, and the trees and blobs they add
/// compared with their parents. gix-pack's expansion also yields the parents of the first
/// commits and their root trees; the remote has those (they are `base` or below it).
fn objects_to_push(db: &Db, commits: &[gix::ObjectId]) -> Result<Vec<output::Count>> {
    let interrupt = AtomicBool::new(false);
    let progress = gix::progress::Discard;
    // The iterator is boxed as 'static: it owns its ids.
    let ids: Vec<gix::ObjectId> = commits.to_vec();
    let (mut counts, _) = output::count::objects(
        db.clone(),
        Box::new(ids.into_iter().map(Ok)),
        &progress,
        &interrupt,
        output::count::objects::Options {
            thread_limit: None,
            chunk_size: 10,
            input_object_expansion:
                output::count::objects::ObjectExpansion::TreeAdditionsComparedToAncestor,
        },
    )
    .map_err(|e| Error::internal("counting the objects to push", chain(&e)))?;
    let wanted: std::collections::HashSet<gix::ObjectId> = commits.iter().copied().collect();
    let mut buf = Vec::new();
    let mut known = std::collections::HashSet::new();
    for c in commits {
        let data = gix::objs::Find::try_find(db, c, &mut buf)
            .map_err(|e| Error::internal(format!("reading commit {c}"), chain(&e)))?;
        if let Some(data) = data {
            for p in
                gix::objs::CommitRefIter::from_bytes(data.data, gix::hash::Kind::Sha1).parent_ids()
            {
                if !wanted.contains(&p) {
                    known.insert(p);
                }
            }
        }
    }
    let mut known_trees = std::collections::HashSet::new();
    for p in &known {
        if let Ok(Some(data)) = gix::objs::Find::try_find(db, p, &mut buf)
            && let Ok(tree) =
                gix::objs::CommitRefIter::from_bytes(data.data, gix::hash::Kind::Sha1).tree_id()
        {
            known_trees.insert(tree);
        }
    }
    counts.retain(|c| !known.contains(&c.id) && !known_trees.contains(&c.id));
    Ok(counts)
}

/// Write the pack of `counts` to `out`, one object at a time, each a whole (non-delta) entry:
/// memory stays at the largest object, whatever the push's size. (`iter_from_counts` batches
/// objects into chunks sized by their count, which holds tens of large blobs at once, and its
/// copied deltas refer to entries by position, which needs in-order delivery.)
///
/// SPEC rule 5: a session token never leaves in a pushed file, whoever committed it — nor in a
/// commit message, an identity or a file name (commits and trees are scanned too).
fn write_pack(
    db: &Db,
    counts: Vec<output::Count>,
    out: &mut dyn Write,
    secrets: &[String],
) -> Result<()> {
    let num = counts.len() as u32;
    let compression = gix::zlib::Compression::default();
    let mut obj_buf = Vec::new();
    let leaked = std::cell::Cell::new(None::<(gix::objs::Kind, gix::ObjectId)>);
    let leaked_ref = &leaked;
    let entries = counts.into_iter().map(move |count| {
        use gix::bstr::ByteSlice as _;
        use gix::error::ErrorExt as _;
        let obj = gix::objs::Find::try_find(db, &count.id, &mut obj_buf)?
            .ok_or_else(|| gix::error::message!("object {} is missing", count.id).raise())?;
        if secrets
            .iter()
            .any(|s| obj.data.find(s.as_bytes()).is_some())
        {
            leaked_ref.set(Some((obj.kind, count.id)));
            return Err(gix::error::message!("a pushed object holds a session token").raise());
        }
        output::Entry::from_data(&count, &obj, compression).map(|e| vec![e])
    });
    let mut writer = output::bytes::FromEntriesIter::new(
        entries,
        out,
        num,
        gix_pack::data::Version::V2,
        gix::hash::Kind::Sha1,
    );
    for written in writer.by_ref() {
        if let Err(e) = written {
            return Err(match leaked.get() {
                Some((kind, id)) => token_found(kind, id),
                None => Error::from_chain("writing the pack", &e),
            });
        }
    }
    Ok(())
}

/// The refusal of an object holding a session token, naming where it sits.
fn token_found(kind: gix::objs::Kind, id: gix::ObjectId) -> Error {
    let what = match kind {
        gix::objs::Kind::Blob => format!("a file in the commits to push (blob {id})"),
        gix::objs::Kind::Commit => format!("the message or identity of commit {id}"),
        gix::objs::Kind::Tree => format!("a file name in the commits to push (tree {id})"),
        gix::objs::Kind::Tag => format!("tag {id}"),
    };
    Error::Integrity(format!(
        "{what} contains a session token: nothing was uploaded; remove the token from those \
         commits (e.g. amend them) and push again"
    ))
}
