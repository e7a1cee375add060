//! Attaching history to an archive-restored tree: the first `save`, `push` or `status` that needs
//! it fetches `TIP_SHA` at depth 1 with `READ_URL`.
//!
//! A tree restored with a `READ_URL` is a git tree from the first command ([`promise`]): its index,
//! branch (at `TIP_SHA`, shallow) and promisor remote were written by the restore, so plain git
//! works in it and may have committed on top of `TIP_SHA` already. Attaching then only brings the
//! objects and checks that the archive's tree is the commit's (a warning when not); the index and
//! the branch are the person's and stay as they are.
//!
//! An older archive restore (or one without `READ_URL`) has an unborn branch: attaching points the
//! branch at `TIP_SHA` and builds the index from its tree with the files' current stat data, so
//! no file is re-written and a file already changed shows as changed (SPEC "Commands" → restore).

use std::io::Read;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::sync::atomic::AtomicBool;

use crate::error::{Error, Result};
use crate::repo::open as open_repo;
use crate::repo::session::{Session, Source};
use crate::restore::checkout;
use crate::wire::http::{Http, UrlSource};
use crate::wire::upload_pack as fetch;

/// The record of a history promised but not attached yet: `tree <archive's root tree id>`.
const PROMISED: &str = "git-session-history-promised";

/// Record that the tree in `git_dir` was restored with its history promised (see the module);
/// `root` is the archive's root tree id.
///
/// # Errors
/// Local I/O errors.
pub fn promise(git_dir: &std::path::Path, root: gix::ObjectId) -> Result<()> {
    crate::fs::write_atomic(&git_dir.join(PROMISED), format!("tree {root}\n").as_bytes())
}

/// The archive's root tree id when history was promised and is not attached yet.
fn promised(git_dir: &std::path::Path) -> Result<Option<gix::ObjectId>> {
    let fix = "remove it, then run the command again";
    let Some(bytes) = crate::fs::state::read(&git_dir.join(PROMISED), 4096, fix)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    let id = text
        .trim()
        .strip_prefix("tree ")
        .and_then(|hex| gix::ObjectId::from_hex(hex.as_bytes()).ok());
    Ok(Some(id.unwrap_or_else(|| {
        gix::ObjectId::null(gix::hash::Kind::Sha1)
    })))
}

/// Whether `session` is an archive restore whose history is not here yet: promised (see the
/// module), an unborn branch, or a branch at a commit that is not here (the promise record was
/// removed).
///
/// # Errors
/// [`Error::Conflict`] when the promise record is not a small regular file (what to do is said).
pub fn needs_history(session: &Session) -> Result<bool> {
    if session.record.source != Source::Archive {
        return Ok(false);
    }
    if promised(&session.git_dir)?.is_some() {
        return Ok(true);
    }
    Ok(open_repo(&session.git_dir).is_ok_and(|repo| {
        match repo.try_find_reference(session.record.branch.full_ref().as_str()) {
            Ok(Some(mut r)) => r
                .peel_to_id()
                .map_or(true, |id| !repo.has_object(id.detach())),
            _ => true,
        }
    }))
}

/// Fetch `TIP_SHA` at depth 1 from `read`, set the branch, and write the index (see the module).
///
/// # Errors
/// Those of the fetch (auth 4, network 5, integrity 6, not found 8); [`Error::Internal`] for local
/// I/O.
pub fn attach_history(session: &Session, read: &UrlSource) -> Result<Vec<String>> {
    let record = &session.record;
    let http = Http::new()?;
    let pack_dir = session.git_dir.join("objects/pack");
    std::fs::create_dir_all(&pack_dir)
        .map_err(|e| Error::io(format!("creating {}", pack_dir.display()), e))?;
    let interrupt = AtomicBool::new(false);
    let fetched = http.with_retries(read, "fetching the restored commit's history", |url| {
        let caps = fetch::handshake(&http, url, &record.branch)?;
        fetch::fetch_pack(
            &http,
            url,
            &caps,
            fetch::Want::depth_one(record.tip, &pack_dir, Default::default()),
            &interrupt,
        )
    })?;
    let repo = open_repo(&session.git_dir)?;
    let mut buf = Vec::new();
    let data = gix::objs::Find::try_find(&repo.objects, &record.tip.id(), &mut buf)
        .map_err(|e| Error::Integrity(format!("cannot read {}: {e}", record.tip)))?
        .filter(|d| d.kind == gix::objs::Kind::Commit)
        .ok_or_else(|| {
            Error::Integrity(format!("the remote did not send commit {}", record.tip))
        })?;
    let tree = gix::objs::CommitRefIter::from_bytes(data.data, gix::hash::Kind::Sha1)
        .tree_id()
        .map_err(|e| Error::Integrity(format!("commit {} is malformed: {e}", record.tip)))?;
    crate::repo::layout::write_shallow(&session.git_dir, &fetched.shallow)?;
    if let Some(archive_tree) = promised(&session.git_dir)? {
        let mut warnings = Vec::new();
        if archive_tree != tree {
            let differ = reindex_from_head(&repo)?;
            warnings.push(format!(
                "the archive's files are not commit {}'s tree (the archive's tree is \
                 {archive_tree}, the commit's {tree}): the index now follows the commit, so git \
                 shows the {differ} path(s) that differ as changes, and a save commits them; \
                 restore from git (without an archive) to have the commit's files",
                record.tip
            ));
        }
        let path = session.git_dir.join(PROMISED);
        std::fs::remove_file(&path)
            .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        tracing::info!(
            "attached the history of {} to the archive-restored tree",
            record.tip
        );
        return Ok(warnings);
    }

    let mut index = checkout::index_from_tree(
        &repo,
        &repo.objects,
        tree,
        crate::pack::DEFAULT_MAX_TREE_ENTRIES,
    )?;
    let (entries, paths) = index.entries_mut_and_pathbacking();
    for entry in entries {
        let rel = std::path::Path::new(std::ffi::OsStr::from_bytes(entry.path_in(paths)));
        let path = session.workdir.join(rel);
        if matches_blob(&path, entry.mode, entry.id)? {
            let meta = gix::index::fs::Metadata::from_path_no_follow(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            entry.stat = gix::index::entry::Stat::from_fs(&meta)
                .map_err(|e| Error::from_chain(format!("reading {}", path.display()), &e))?;
        }
        // Otherwise the stat stays empty: git and save see the file as changed and hash it.
    }
    checkout::write_index(&mut index)?;
    if record.lease == record.tip {
        crate::repo::layout::write_ref(
            &session.git_dir,
            &record.branch.tracking_ref(),
            record.tip,
        )?;
    }
    crate::repo::layout::write_ref(&session.git_dir, &record.branch.full_ref(), record.tip)?;
    tracing::info!(
        "attached the history of {} to the archive-restored tree",
        record.tip
    );
    Ok(Vec::new())
}

/// The index the restore wrote holds the archive's blob ids, which neither the repository nor
/// the remote has where the archive is not the commit (`export-subst`, `export-ignore`, a lying
/// server): git could neither commit nor diff them. It is rebuilt from `HEAD`'s tree (the commit,
/// or the person's commits on it), keeping the stat data of every entry that is the same, so
/// the files that differ show as changes. Returns how many paths differ.
fn reindex_from_head(repo: &gix::Repository) -> Result<usize> {
    let head = repo
        .head_commit()
        .map_err(|e| Error::from_chain("reading HEAD", &e))?;
    let head_tree = head
        .tree_id()
        .map_err(|e| Error::from_chain("reading HEAD's tree", &e))?;
    let old = repo
        .open_index()
        .map_err(|e| Error::from_chain("reading the index", &e))?;
    let mut kept = std::collections::HashMap::new();
    for entry in old.entries() {
        kept.insert(
            entry.path(&old).to_vec(),
            (entry.id, entry.mode, entry.stat),
        );
    }
    let mut index = checkout::index_from_tree(
        repo,
        &repo.objects,
        head_tree.detach(),
        crate::pack::DEFAULT_MAX_TREE_ENTRIES,
    )?;
    let mut differ = 0;
    let (entries, paths) = index.entries_mut_and_pathbacking();
    for entry in entries {
        let path: &[u8] = entry.path_in(paths);
        match kept.remove(path) {
            Some((id, mode, stat)) if id == entry.id && mode == entry.mode => entry.stat = stat,
            _ => differ += 1,
        }
    }
    checkout::write_index(&mut index)?;
    Ok(differ + kept.len())
}

/// Whether the work-tree file at `path` is exactly the blob `id` with the index `mode`.
fn matches_blob(
    path: &std::path::Path,
    mode: gix::index::entry::Mode,
    id: gix::ObjectId,
) -> Result<bool> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(false);
    };
    let reading = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
    if mode == gix::index::entry::Mode::SYMLINK {
        if !meta.file_type().is_symlink() {
            return Ok(false);
        }
        let target = std::fs::read_link(path).map_err(reading)?;
        let bytes = target.as_os_str().as_bytes();
        let hash = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, bytes);
        return Ok(hash.is_ok_and(|h| h == id));
    }
    let exec = meta.permissions().mode() & 0o100 != 0;
    let want_exec = mode == gix::index::entry::Mode::FILE_EXECUTABLE;
    if !meta.is_file() || exec != want_exec {
        return Ok(false);
    }
    let mut file = crate::fs::open_regular(path, false).map_err(reading)?;
    let hash = gix::objs::compute_stream_hash(
        gix::hash::Kind::Sha1,
        gix::objs::Kind::Blob,
        &mut file,
        meta.len(),
        &mut gix::progress::Discard,
        &AtomicBool::new(false),
    );
    match hash {
        // A file that changed size since its stat is not the blob: only `meta.len()` bytes were
        // hashed, so one more byte (or one fewer) means it differs.
        Ok(h) => Ok(h == id && file.read(&mut [0u8; 1]).map_err(reading)? == 0),
        Err(e) => match e.downcast_any_ref::<std::io::Error>() {
            Some(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Some(io) => Err(reading(std::io::Error::new(io.kind(), io.to_string()))),
            None => Ok(false),
        },
    }
}
