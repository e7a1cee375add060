//! Commits made with plain git in an archive-restored tree before history was attached (a
//! restore without `READ_URL`: the branch unborn, every file untracked), moved onto `TIP_SHA`.
//!
//! Such a commit is a root commit, and its tree holds only what the person added: a file they
//! never added is not deleted by it, it was untracked. So each commit is replayed with its own
//! tree plus every entry of `TIP_SHA`'s tree that no commit up to it ever tracked, its root's
//! parent being `TIP_SHA`: `git add P && git commit` gives TIP + P, `git add -A` the whole tree,
//! and a later `git rm` (of a tracked path) stays a deletion. The index is the person's, with the
//! same rule, so `git status` shows what they left uncommitted.

use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt as _;

use gix::bstr::{BString, ByteSlice as _};
use gix::index::entry::Mode;
use gix::objs::tree::EntryKind;

use crate::error::{Error, Result};
use crate::restore::checkout;

/// At most this many commits are replayed (the person's, before the first command with
/// `READ_URL`); more is refused rather than walked.
const MAX_COMMITS: usize = 10_000;

/// What a replay made.
pub struct Replayed {
    /// The branch's new commit: `TIP_SHA` when the person committed nothing.
    pub head: gix::ObjectId,
    /// `TIP_SHA`'s entries (indexes into its flat tree) that the person's commits tracked.
    pub claimed: HashSet<usize>,
}

/// A flat tree: each entry's path, mode and id, in index order.
pub type Flat = Vec<(BString, Mode, gix::ObjectId)>;

/// Which of `TIP_SHA`'s paths a set of paths claims: the same path, a path below it (it became a
/// folder) or a file where one of its folders is (the folder became a file).
struct Claims<'a> {
    tip: &'a Flat,
    /// Index into `tip` by path, and each folder of `tip` with the entries below it.
    by_path: HashMap<&'a [u8], usize>,
    below: HashMap<&'a [u8], Vec<usize>>,
}

impl<'a> Claims<'a> {
    fn new(tip: &'a Flat) -> Self {
        let mut by_path = HashMap::new();
        let mut below: HashMap<&[u8], Vec<usize>> = HashMap::new();
        for (i, (path, _, _)) in tip.iter().enumerate() {
            by_path.insert(path.as_slice(), i);
            for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
                below.entry(&path[..at]).or_default().push(i);
            }
        }
        Claims {
            tip,
            by_path,
            below,
        }
    }

    /// Add to `claimed` the entries of `TIP_SHA` that `paths` claim.
    fn add<'p>(&self, paths: impl Iterator<Item = &'p [u8]>, claimed: &mut HashSet<usize>) {
        for path in paths {
            if let Some(i) = self.by_path.get(path) {
                claimed.insert(*i);
            }
            if let Some(all) = self.below.get(path) {
                claimed.extend(all);
            }
            for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
                if let Some(i) = self.by_path.get(&path[..at]) {
                    claimed.insert(*i);
                }
            }
        }
    }

    /// The entries of `TIP_SHA` not `claimed`.
    fn unclaimed<'s>(
        &'s self,
        claimed: &'s HashSet<usize>,
    ) -> impl Iterator<Item = &'a (BString, Mode, gix::ObjectId)> + 's {
        self.tip
            .iter()
            .enumerate()
            .filter(|(i, _)| !claimed.contains(i))
            .map(|(_, e)| e)
    }
}

/// The entries of `tree`, flattened.
fn flatten(repo: &gix::Repository, tree: gix::ObjectId) -> Result<Flat> {
    let index = checkout::index_from_tree(
        repo,
        &repo.objects,
        tree,
        crate::pack::DEFAULT_MAX_TREE_ENTRIES,
    )?;
    Ok(index
        .entries()
        .iter()
        .map(|e| (e.path(&index).to_owned(), e.mode, e.id))
        .collect())
}

fn kind_of(mode: Mode) -> EntryKind {
    match mode {
        Mode::FILE_EXECUTABLE => EntryKind::BlobExecutable,
        Mode::SYMLINK => EntryKind::Link,
        Mode::COMMIT => EntryKind::Commit,
        _ => EntryKind::Blob,
    }
}

fn failed(what: impl std::fmt::Display, e: impl std::error::Error + 'static) -> Error {
    Error::from_chain(what, &e)
}

/// The person's commits reachable from `head`, parents first; `None` when `tip` is among them
/// (the branch already descends from `TIP_SHA`: nothing to replay).
pub fn commits_to_replay(
    repo: &gix::Repository,
    head: gix::ObjectId,
    tip: gix::ObjectId,
) -> Result<Option<Vec<gix::ObjectId>>> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    // Depth-first, a commit pushed again after its parents are done.
    let mut stack = vec![(head, false)];
    while let Some((id, parents_done)) = stack.pop() {
        if id == tip {
            return Ok(None);
        }
        if parents_done {
            order.push(id);
            continue;
        }
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > MAX_COMMITS {
            return Err(Error::conflict(format!(
                "over {MAX_COMMITS} commits were made on this archive-restored tree before its \
                 history was attached: too many to move onto TIP_SHA {tip}"
            )));
        }
        let commit = repo
            .find_commit(id)
            .map_err(|e| failed(format!("reading commit {id}"), e))?;
        stack.push((id, true));
        for parent in commit.parent_ids() {
            if !seen.contains(&parent.detach()) || parent.detach() == tip {
                stack.push((parent.detach(), false));
            }
        }
    }
    Ok(Some(order))
}

/// Replay `order` (the person's commits, parents first, from [`commits_to_replay`]) onto `tip`
/// (see the module); `head` is the branch's commit (`None`: unborn). The commits keep their
/// author, committer and message; a signature is dropped, as it signed another commit.
///
/// # Errors
/// [`Error::Internal`] for objects that cannot be read or written.
pub fn replay(
    repo: &gix::Repository,
    tip: gix::ObjectId,
    tip_tree: &Flat,
    head: Option<gix::ObjectId>,
    order: &[gix::ObjectId],
) -> Result<Replayed> {
    let claims = Claims::new(tip_tree);
    let Some(head) = head.filter(|_| !order.is_empty()) else {
        return Ok(Replayed {
            head: tip,
            claimed: HashSet::new(),
        });
    };
    let mut moved: HashMap<gix::ObjectId, (gix::ObjectId, HashSet<usize>)> = HashMap::new();
    for id in order {
        let commit = repo
            .find_commit(*id)
            .map_err(|e| failed(format!("reading commit {id}"), e))?;
        let mut decoded = commit
            .decode()
            .and_then(gix::objs::CommitRef::into_owned)
            .map_err(|e| failed(format!("reading commit {id}"), e))?;
        let mut claimed = HashSet::new();
        let mut parents = Vec::new();
        for parent in &decoded.parents {
            let (new, theirs) = moved
                .get(parent)
                .cloned()
                .unwrap_or((*parent, HashSet::new()));
            claimed.extend(theirs);
            if !parents.contains(&new) {
                parents.push(new);
            }
        }
        if parents.is_empty() {
            parents.push(tip);
        }
        let own = flatten(repo, decoded.tree)?;
        claims.add(own.iter().map(|(p, _, _)| p.as_slice()), &mut claimed);
        let mut editor = repo
            .edit_tree(decoded.tree)
            .map_err(|e| failed(format!("reading the tree of {id}"), e))?;
        for (path, mode, entry) in claims.unclaimed(&claimed) {
            editor
                .upsert(path.as_bstr(), kind_of(*mode), *entry)
                .map_err(|e| failed("building a replayed tree", e))?;
        }
        decoded.tree = editor
            .write()
            .map_err(|e| failed("writing a replayed tree", e))?
            .detach();
        decoded.parents = parents.into();
        decoded
            .extra_headers
            .retain(|(k, _)| k != "gpgsig" && k != "gpgsig-sha256");
        let new = repo
            .write_object(&decoded)
            .map_err(|e| failed(format!("writing the replay of {id}"), e))?
            .detach();
        moved.insert(*id, (new, claimed));
    }
    let (new_head, claimed) = moved
        .remove(&head)
        .ok_or_else(|| Error::Internal(format!("the replay of {head} went missing")))?;
    Ok(Replayed {
        head: new_head,
        claimed,
    })
}

/// The index after a replay: the person's own entries (their index, else their commit's tree),
/// and every entry of `TIP_SHA` they never tracked, with the stat data of the file in place when
/// it is that blob (otherwise empty: git hashes the file and shows it as changed).
///
/// # Errors
/// Local I/O; those of reading the index.
pub fn index_after(
    repo: &gix::Repository,
    workdir: &std::path::Path,
    tip_tree: &Flat,
    old_head: Option<gix::ObjectId>,
    mut claimed: HashSet<usize>,
) -> Result<gix::index::File> {
    let claims = Claims::new(tip_tree);
    let mut state = gix::index::State::new(repo.object_hash());
    let index_path = repo.index_path();
    let own = match index_path.exists() {
        true => Some(
            gix::index::File::at(&index_path, repo.object_hash(), false, Default::default())
                .map_err(|e| failed("reading the index", e))?,
        ),
        false => match old_head {
            Some(head) => {
                let tree = tree_of(repo, head)?;
                Some(checkout::index_from_tree(
                    repo,
                    &repo.objects,
                    tree,
                    crate::pack::DEFAULT_MAX_TREE_ENTRIES,
                )?)
            }
            None => None,
        },
    };
    if let Some(own) = &own {
        claims.add(
            own.entries().iter().map(|e| e.path(own).as_bytes()),
            &mut claimed,
        );
        for e in own.entries() {
            state.dangerously_push_entry(e.stat, e.id, e.flags, e.mode, e.path(own));
        }
    }
    for (path, mode, id) in claims.unclaimed(&claimed) {
        let file = workdir.join(std::ffi::OsStr::from_bytes(path));
        let stat = if matches_blob(&file, *mode, *id)? {
            let meta = gix::index::fs::Metadata::from_path_no_follow(&file)
                .map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
            gix::index::entry::Stat::from_fs(&meta)
                .map_err(|e| failed(format!("reading {}", file.display()), e))?
        } else {
            gix::index::entry::Stat::default()
        };
        state.dangerously_push_entry(
            stat,
            *id,
            gix::index::entry::Flags::empty(),
            *mode,
            path.as_bstr(),
        );
    }
    state.sort_entries();
    Ok(gix::index::File::from_state(state, repo.index_path()))
}

/// `tip`'s tree, flattened (see [`replay`]).
///
/// # Errors
/// Those of reading the tree.
pub fn tip_tree(repo: &gix::Repository, tip: gix::ObjectId) -> Result<Flat> {
    flatten(repo, tree_of(repo, tip)?)
}

/// The tree of the commit `id`, which must be here.
///
/// # Errors
/// [`Error::Integrity`] when it is not here or is no commit.
pub(super) fn tree_of(repo: &gix::Repository, id: gix::ObjectId) -> Result<gix::ObjectId> {
    let mut buf = Vec::new();
    let data = gix::objs::Find::try_find(&repo.objects, &id, &mut buf)
        .map_err(|e| Error::Integrity(format!("cannot read {id}: {e}")))?
        .filter(|d| d.kind == gix::objs::Kind::Commit)
        .ok_or_else(|| Error::Integrity(format!("the remote did not send commit {id}")))?;
    gix::objs::CommitRefIter::from_bytes(data.data, repo.object_hash())
        .tree_id()
        .map_err(|e| Error::Integrity(format!("commit {id} is malformed: {e}")))
}

/// Whether the work-tree file at `path` is exactly the blob `id` with the index `mode`.
pub(super) fn matches_blob(
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
        let hash = gix::objs::compute_hash(id.kind(), gix::objs::Kind::Blob, bytes);
        return Ok(hash.is_ok_and(|h| h == id));
    }
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt as _;
    let exec = meta.permissions().mode() & 0o100 != 0;
    let want_exec = mode == gix::index::entry::Mode::FILE_EXECUTABLE;
    if !meta.is_file() || exec != want_exec {
        return Ok(false);
    }
    let mut file = crate::fs::open_regular(path, false).map_err(reading)?;
    let hash = gix::objs::compute_stream_hash(
        id.kind(),
        gix::objs::Kind::Blob,
        &mut file,
        meta.len(),
        &mut gix::progress::Discard,
        &std::sync::atomic::AtomicBool::new(false),
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
