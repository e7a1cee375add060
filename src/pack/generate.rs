//! The receive-pack request body: the update command as pkt-lines, a flush, then a pack of exactly
//! the objects the remote lacks (`gitprotocol-pack` "Reference Update Request and Packfile
//! Transfer"), spooled to a temporary file — never to memory — so retries and a 411 resend reuse it.
//!
//! A blob whose path held another blob in the tree the push builds on (which the server has) is
//! sent as a delta against that blob when that is smaller ([`super::delta`]): a thin pack, which
//! receive-pack completes unless it advertises `no-thin`.

use std::collections::{HashMap, HashSet};
use std::io::{BufWriter, Write};
use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix::bstr::BString;

use gix_pack::data::output;
use gix_packetline::blocking_io::encode;

use crate::error::chain;
use crate::error::{Error, Result};
use crate::hint::Hint;
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

/// Blobs larger than this (or whose base is) are sent whole, never as a delta: the encoding holds
/// both and the source's index, so memory stays below the whole-object case of a push.
pub const DELTA_MAX_BYTES: usize = 8 << 20;

/// One ref update to send.
pub struct Update<'a> {
    /// The ref's value the server must still have (the lease; zero for a new ref).
    pub old: FullSha,
    /// The value to set.
    pub new: FullSha,
    /// A commit the server has that `new` descends from: the lease, or `TIP_SHA` for a new branch.
    pub base: FullSha,
    /// The full ref name.
    pub refname: &'a str,
    /// The capabilities to ask for on the command line.
    pub caps: &'a [String],
    /// Whether the pack may hold deltas against objects it does not carry (receive-pack did not
    /// advertise `no-thin`).
    pub thin: bool,
}

/// Write the request for `update` into a temporary file in the git dir.
///
/// The pack holds the commits `base..new` and the trees and blobs they add compared with their
/// parents — which works from a depth-1 restore, where nothing older than `base` exists locally —
/// with blobs as deltas against `base`'s blob at the same path when `thin` and smaller.
///
/// # Errors
/// [`Error::Integrity`] when an object to push holds a secret (`secrets`: the session tokens,
/// the signing key);
/// [`Error::Internal`] when objects cannot be read, [`Error::LocalIo`] when the file cannot be
/// written.
pub fn spool(repo: &gix::Repository, update: &Update<'_>, secrets: &[String]) -> Result<Spooled> {
    let Update {
        old,
        new,
        base,
        refname,
        caps,
        thin,
    } = *update;
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
    check_names(&db, &commits, &counts)?;
    let num = counts.len() as u32;
    let bases = if thin {
        delta_bases(repo, &commits, &counts, base)?
    } else {
        HashMap::new()
    };
    write_pack(
        &db,
        repo.object_hash(),
        repo.objects.store_ref().path(),
        counts,
        &bases,
        &mut out,
        secrets,
    )?;
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
        .map_err(|e| Error::from_chain("walking the commits to push", &e))?
        .map(|info| info.map(|i| i.id))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::from_chain("walking the commits to push", &e))
}

type Db = gix::odb::store::Handle<std::sync::Arc<gix::odb::Store>>;

/// The objects of `commits` the remote lacks: the commits, and the trees and blobs they add
/// compared with their parents. gix-pack's expansion also yields the parents of the first
/// commits and their root trees; the remote has those (they are `base` or below it).
fn objects_to_push(db: &Db, commits: &[gix::ObjectId]) -> Result<Vec<output::Count>> {
    let interrupt = AtomicBool::new(false);
    let progress = gix::progress::Discard;
    let ids: Vec<gix::ObjectId> = commits.to_vec();
    // Unthreaded: the threaded count looks up each object's pack location, which inflates the
    // object whole (gix-odb's `location_by_oid`) — a 1 GiB blob held in memory just to count it.
    // The pack is written from the objects themselves, so locations are not needed.
    let (mut counts, _) = output::count::objects_unthreaded(
        db,
        &mut ids.into_iter().map(Ok),
        &progress,
        &interrupt,
        output::count::objects::ObjectExpansion::TreeAdditionsComparedToAncestor,
    )
    .map_err(|e| Error::from_chain("counting the objects to push", &e))?;
    let wanted: std::collections::HashSet<gix::ObjectId> = commits.iter().copied().collect();
    let mut buf = Vec::new();
    let mut known = std::collections::HashSet::new();
    for c in commits {
        let data = gix::objs::Find::try_find(db, c, &mut buf)
            .map_err(|e| Error::from_chain(format!("reading commit {c}"), &e))?;
        if let Some(data) = data {
            for p in gix::objs::CommitRefIter::from_bytes(data.data, c.kind()).parent_ids() {
                if !wanted.contains(&p) {
                    known.insert(p);
                }
            }
        }
    }
    let mut known_trees = std::collections::HashSet::new();
    for p in &known {
        if let Ok(Some(data)) = gix::objs::Find::try_find(db, p, &mut buf)
            && let Ok(tree) = gix::objs::CommitRefIter::from_bytes(data.data, p.kind()).tree_id()
        {
            known_trees.insert(tree);
        }
    }
    counts.retain(|c| !known.contains(&c.id) && !known_trees.contains(&c.id));
    Ok(counts)
}

/// For each blob and tree to push, the blob or tree the same path held in `base`'s tree, when
/// there is one and it differs: the delta base the server has (git's own pushes deltify trees
/// too: a one-line edit otherwise sends every tree on its path whole). Paths come from the new
/// trees of `commits` (a tree not in `counts` holds no new object).
fn delta_bases(
    repo: &gix::Repository,
    commits: &[ObjectId],
    counts: &[output::Count],
    base: FullSha,
) -> Result<HashMap<ObjectId, ObjectId>> {
    let new: HashSet<ObjectId> = counts.iter().map(|c| c.id).collect();
    let internal =
        |what: &str, e: &(dyn std::error::Error + 'static)| Error::internal(what, chain(e));
    // Each new object's path, and whether it is a tree (a tree's delta base must be a tree).
    let mut paths: HashMap<ObjectId, (BString, bool)> = HashMap::new();
    let mut walked = HashSet::new();
    for commit in commits {
        let tree = repo
            .find_commit(*commit)
            .and_then(|c| c.tree_id().map(|t| t.detach()))
            .map_err(|e| internal("reading a commit to push", &e))?;
        let mut stack = vec![(tree, BString::default())];
        while let Some((tree, prefix)) = stack.pop() {
            if !new.contains(&tree) || !walked.insert(tree) {
                continue;
            }
            paths.entry(tree).or_insert((prefix.clone(), true));
            let tree = repo
                .find_tree(tree)
                .map_err(|e| internal("reading a tree to push", &e))?;
            for entry in tree.iter() {
                let entry = entry.map_err(|e| internal("reading a tree to push", &e))?;
                let mut path = prefix.clone();
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(entry.filename());
                let id = entry.object_id();
                if entry.mode().is_tree() {
                    stack.push((id, path));
                } else if entry.mode().is_blob() && new.contains(&id) {
                    paths.entry(id).or_insert((path, false));
                }
            }
        }
    }
    let base_tree = repo
        .find_commit(base.id())
        .and_then(|c| c.tree())
        .map_err(|e| internal("reading the tree the push builds on", &e))?;
    let mut bases = HashMap::new();
    for (id, (path, is_tree)) in paths {
        if path.is_empty() {
            if base_tree.id != id {
                bases.insert(id, base_tree.id);
            }
            continue;
        }
        let entry = base_tree
            .lookup_entry(path.split(|&b| b == b'/'))
            .map_err(|e| internal("reading the tree the push builds on", &e))?;
        if let Some(entry) = entry
            && entry.mode().is_tree() == is_tree
            && (is_tree || entry.mode().is_blob())
            && entry.object_id() != id
        {
            bases.insert(id, entry.object_id());
        }
    }
    Ok(bases)
}

/// Write the pack of `counts` to `out` (`gitformat-pack`: header, entries, a trailer hashed in
/// the repository's `format`, SHA-1 or SHA-256, as receive-pack checks it), one object at a time,
/// each a whole entry or a delta against its object in `bases` (when both are at most
/// [`DELTA_MAX_BYTES`] and the delta is under half the object's size, as git's `try_delta` asks).
/// A blob over [`STREAM_BYTES`] stored whole (a big file committed with plain `git
/// commit`: loose, or in the pack `git add` writes for a file over `core.bigFileThreshold`) is
/// streamed, inflated and deflated again 64 KiB at a time, so memory stays at [`STREAM_BYTES`]
/// whatever the push holds; other objects are held whole one at a time.
/// (`iter_from_counts` batches objects into chunks sized by their count, which holds tens of large
/// blobs at once, and gix's `FromEntriesIter` needs every entry compressed in memory.)
///
/// SPEC rule 5: a session token never leaves in a pushed file, whoever committed it — nor in a
/// commit message, an identity or a file name (commits and trees are scanned too).
fn write_pack(
    db: &Db,
    format: gix::hash::Kind,
    objects_dir: &std::path::Path,
    counts: Vec<output::Count>,
    bases: &HashMap<ObjectId, ObjectId>,
    out: &mut dyn Write,
    secrets: &[String],
) -> Result<()> {
    let io = |e| Error::io("writing the push request", e);
    let compression = gix::zlib::Compression::default();
    let mut out = gix::hash::io::Write::new(out, format);
    out.write_all(&gix_pack::data::header::encode(
        gix_pack::data::Version::V2,
        counts.len() as u32,
    ))
    .map_err(io)?;
    let mut obj_buf = Vec::new();
    let mut base_buf = Vec::new();
    for count in counts {
        let id = count.id;
        if let Some(size) = big_blob(db, &id)
            && let Some(content) = big_blob_content(objects_dir, &id, size)?
        {
            stream_blob(content, &id, size, &mut out, secrets)?;
            continue;
        }
        let entry = entry_of(
            db,
            &count,
            bases,
            &mut obj_buf,
            &mut base_buf,
            secrets,
            compression,
        )?;
        let header = entry.to_entry_header(gix_pack::data::Version::V2, |_| {
            unreachable!("no entry refers to another by position")
        });
        header
            .write_to(entry.decompressed_size as u64, &mut out)
            .map_err(io)?;
        out.write_all(&entry.compressed_data).map_err(io)?;
    }
    let digest = out
        .hash
        .clone()
        .try_finalize()
        .map_err(|e| Error::internal("hashing the pack", e))?;
    out.inner.write_all(digest.as_slice()).map_err(io)?;
    Ok(())
}

/// The entry of one object held whole: a delta against its base in `bases` when that is
/// smaller, else the object itself.
///
/// # Errors
/// [`Error::Integrity`] for an object holding a session token; [`Error::Internal`] for a missing
/// object or one that cannot be compressed.
fn entry_of(
    db: &Db,
    count: &output::Count,
    bases: &HashMap<ObjectId, ObjectId>,
    obj_buf: &mut Vec<u8>,
    base_buf: &mut Vec<u8>,
    secrets: &[String],
    compression: gix::zlib::Compression,
) -> Result<output::Entry> {
    let obj = gix::objs::Find::try_find(db, &count.id, obj_buf)
        .map_err(|e| Error::from_chain(format!("reading object {}", count.id), &e))?
        .ok_or_else(|| {
            Error::internal(
                "writing the pack",
                format!("object {} is missing", count.id),
            )
        })?;
    // Percent-decoded too, as save scans (`s3cr%33t` is the token to a URL parser).
    if crate::scan::Scanner::new(secrets).scan_all(obj.data, 1 << 20) {
        return Err(token_found(obj.kind, count.id));
    }
    if let Some(base) = bases.get(&count.id)
        && obj.data.len() <= DELTA_MAX_BYTES
        && let Some(delta) = delta_against(db, base, obj.data, base_buf)
    {
        return Ok(output::Entry {
            id: count.id,
            kind: output::entry::Kind::DeltaOid { id: *base },
            decompressed_size: delta.len(),
            compressed_data: deflate(&delta, compression).map_err(|e| {
                Error::internal(format!("compressing the delta of {}", count.id), e)
            })?,
        });
    }
    output::Entry::from_data(count, &obj, compression)
        .map_err(|e| Error::from_chain(format!("compressing object {}", count.id), &e))
}

/// Blobs over this many bytes are streamed into the pack, never held whole.
pub const STREAM_BYTES: u64 = 32 << 20;

/// The size of `id` when it is a blob over [`STREAM_BYTES`].
fn big_blob(db: &Db, id: &ObjectId) -> Option<u64> {
    let header = gix::objs::FindHeader::try_header(db, id).ok()??;
    (header.kind == gix::objs::Kind::Blob && header.size > STREAM_BYTES).then_some(header.size)
}

/// The content of the big blob `id` as a stream, from its loose file (`gitformat-loose`: the
/// `blob <size>\0` header checked and skipped) or from a pack where it is stored whole (as
/// `git add` stores a file over `core.bigFileThreshold`); `None` for a blob stored as a delta.
///
/// # Errors
/// [`Error::LocalIo`] when the file cannot be read; [`Error::Integrity`] for a loose file whose
/// header is not that blob's.
fn big_blob_content(
    objects_dir: &std::path::Path,
    id: &ObjectId,
    size: u64,
) -> Result<Option<Box<dyn std::io::Read>>> {
    use std::io::Read as _;
    let hex = id.to_hex().to_string();
    let loose = objects_dir.join(&hex[..2]).join(&hex[2..]);
    let read_err = |path: &std::path::Path, e| Error::io(format!("reading {}", path.display()), e);
    match crate::fs::open_regular(&loose, false) {
        Ok(file) => {
            let mut input = flate2::read::ZlibDecoder::new(std::io::BufReader::new(file));
            let header = format!("blob {size}\0");
            let mut got = vec![0u8; header.len()];
            input
                .read_exact(&mut got)
                .map_err(|e| read_err(&loose, e))?;
            if got != header.as_bytes() {
                return Err(not_the_blob(id));
            }
            return Ok(Some(Box::new(input)));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(read_err(&loose, e)),
    }
    let pack_dir = objects_dir.join("pack");
    let Ok(listing) = std::fs::read_dir(&pack_dir) else {
        return Ok(None);
    };
    for idx in listing.filter_map(|e| e.ok()).map(|e| e.path()) {
        if idx.extension().is_none_or(|x| x != "idx") {
            continue;
        }
        let index = match gix_pack::index::File::at(&idx, id.kind()) {
            Ok(index) => index,
            Err(e) => {
                tracing::debug!("{}: {e}", idx.display());
                continue;
            }
        };
        let Some(i) = index.lookup(id) else { continue };
        let offset = index.pack_offset_at_index(i);
        let pack_path = idx.with_extension("pack");
        let pack = gix_pack::data::File::at(&pack_path, id.kind())
            .map_err(|e| Error::from_chain(format!("reading {}", pack_path.display()), &e))?;
        let entry = pack
            .entry(offset)
            .map_err(|e| Error::from_chain(format!("reading {}", pack_path.display()), &e))?;
        if entry.header != gix_pack::data::entry::Header::Blob || entry.decompressed_size != size {
            tracing::debug!(
                "{id} is stored as {:?} in {}: held whole",
                entry.header,
                pack_path.display()
            );
            return Ok(None);
        }
        let mut file =
            crate::fs::open_regular(&pack_path, true).map_err(|e| read_err(&pack_path, e))?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(entry.data_offset))
            .map_err(|e| read_err(&pack_path, e))?;
        let input = flate2::read::ZlibDecoder::new(std::io::BufReader::new(file)).take(size);
        return Ok(Some(Box::new(input)));
    }
    Ok(None)
}

fn not_the_blob(id: &ObjectId) -> Error {
    Error::Integrity(format!(
        "the stored object {id} is not the blob it names (run {}): nothing was uploaded",
        Hint::Fsck
    ))
}

/// Write the blob `id` of `size` bytes, read from `input`, as a pack entry: scanned for the
/// session's tokens across chunk boundaries, hashed to check it is `id`, and deflated into `out`
/// 64 KiB at a time.
///
/// # Errors
/// [`Error::Integrity`] for a token, or content that is not that blob; [`Error::LocalIo`] when it
/// cannot be read or the request not written.
fn stream_blob(
    mut input: Box<dyn std::io::Read>,
    id: &ObjectId,
    size: u64,
    out: &mut dyn Write,
    secrets: &[String],
) -> Result<()> {
    let read_err = |e| Error::io(format!("reading the blob {id}"), e);
    gix_pack::data::entry::Header::Blob
        .write_to(size, out)
        .map_err(|e| Error::io("writing the push request", e))?;
    let mut hasher = gix::hash::hasher(id.kind());
    hasher.update(&gix::objs::encode::loose_header(
        gix::objs::Kind::Blob,
        size,
    ));
    let mut z = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
    let mut scanner = crate::scan::Scanner::new(secrets);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = input.read(&mut chunk).map_err(read_err)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&chunk[..n]);
        // The scanner keeps the last chunk's tail: a token across the boundary is found, and
        // percent-decoded ones too, as save finds them.
        scanner.feed(&chunk[..n]);
        if scanner.found() {
            return Err(token_found(gix::objs::Kind::Blob, *id));
        }
        z.write_all(&chunk[..n])
            .map_err(|e| Error::io("writing the push request", e))?;
    }
    z.finish()
        .map_err(|e| Error::io("writing the push request", e))?;
    let actual = hasher.try_finalize().map_err(|_| not_the_blob(id))?;
    if total != size || actual != *id {
        return Err(not_the_blob(id));
    }
    Ok(())
}

/// The delta from object `base` to `target`, when `base` is here, at most [`DELTA_MAX_BYTES`], and
/// the delta is under half of `target`'s size.
fn delta_against(db: &Db, base: &ObjectId, target: &[u8], buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let header = gix::objs::FindHeader::try_header(db, base).ok()??;
    if header.size > DELTA_MAX_BYTES as u64 {
        return None;
    }
    let source = gix::objs::Find::try_find(db, base, buf).ok()??;
    super::delta::encode(source.data, target, target.len() / 2)
}

/// `data`, zlib-compressed as pack entries are.
fn deflate(data: &[u8], compression: gix::zlib::Compression) -> std::io::Result<Vec<u8>> {
    let mut out = gix::zlib::stream::deflate::Write::new(Vec::new(), compression);
    out.write_all(data)?;
    out.flush()?;
    Ok(out.into_inner())
}

/// Refuse new trees holding a name that a restore would refuse ([`crate::names`]): plain git
/// commits `.g\u{200c}it/x` or the staging folder, and the session's tip could not be restored.
///
/// # Errors
/// [`Error::Integrity`] naming the entry and its tree, before anything is uploaded.
fn check_names(db: &Db, commits: &[ObjectId], counts: &[output::Count]) -> Result<()> {
    let mut buf = Vec::new();
    let mut roots = std::collections::HashSet::new();
    for c in commits {
        if let Ok(Some(data)) = gix::objs::Find::try_find(db, c, &mut buf)
            && let Ok(tree) = gix::objs::CommitRefIter::from_bytes(data.data, c.kind()).tree_id()
        {
            roots.insert(tree);
        }
    }
    for count in counts {
        // By header first: a blob (perhaps of a GiB) is never read here.
        let is_tree = gix::objs::FindHeader::try_header(db, &count.id)
            .ok()
            .flatten()
            .is_some_and(|h| h.kind == gix::objs::Kind::Tree);
        if !is_tree {
            continue;
        }
        let Ok(Some(obj)) = gix::objs::Find::try_find(db, &count.id, &mut buf) else {
            continue;
        };
        for entry in gix::objs::TreeRefIter::from_bytes(obj.data, count.id.kind()).flatten() {
            let link = entry.mode.kind() == gix::objs::tree::EntryKind::Link;
            if let Err(why) =
                crate::names::check_component(entry.filename, roots.contains(&count.id), link)
            {
                return Err(Error::Integrity(format!(
                    "the commits to push hold '{}' (in tree {}): {why}, and a restore of the \
                     session would refuse it; nothing was uploaded. Rename it in those commits \
                     and push again",
                    entry.filename.to_string().escape_debug(),
                    count.id
                )));
            }
        }
    }
    Ok(())
}

/// The refusal of an object holding a secret (a session token, the signing key), naming where
/// it sits.
fn token_found(kind: gix::objs::Kind, id: gix::ObjectId) -> Error {
    let what = match kind {
        gix::objs::Kind::Blob => format!("a file in the commits to push (blob {id})"),
        gix::objs::Kind::Commit => format!("the message or identity of commit {id}"),
        gix::objs::Kind::Tree => format!("a file name in the commits to push (tree {id})"),
        gix::objs::Kind::Tag => format!("tag {id}"),
    };
    Error::Integrity(format!(
        "{what} contains a secret (a session token, or the private key of SIGNING_KEY_FILE): \
         nothing was uploaded; remove it from those commits (e.g. amend them) and push again"
    ))
}
