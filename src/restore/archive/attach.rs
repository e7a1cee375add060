//! History for an archive-restored tree.
//!
//! A restore given `READ_URL` fetches `TIP_SHA`'s commit and trees beside the extraction
//! ([`fetch_commit`]; with `filter blob:none` where the server takes it, else the whole commit)
//! and leaves a git tree that works offline: index, branch at `TIP_SHA` (shallow), and the
//! archive's tree checked against the commit's ([`check_archive_tree`]).
//!
//! A restore without `READ_URL` cannot: the branch is unborn, and plain git sees every file as
//! untracked until the first `save`, `push` or `status` run with `READ_URL` attaches history
//! ([`attach_history`]): it fetches `TIP_SHA` at depth 1 (unless git already has it), moves onto
//! it whatever the person committed meanwhile ([`super::replay`]), and builds the index from the
//! files' current stat data, so no file is re-written and a changed file shows as changed.

use std::sync::atomic::AtomicBool;

use crate::error::{Error, Result};
use crate::repo::open as open_repo;
use crate::repo::session::{Session, Source};
use crate::restore::checkout;
use crate::types::{FullSha, SessionBranch};
use crate::wire::http::{Http, UrlSource};
use crate::wire::upload_pack as fetch;

/// The record of a history not attached yet: `tree <archive's root tree id>`, or `tree unknown`
/// when the restore did not hash the files (no `READ_URL`).
const PROMISED: &str = crate::repo::HISTORY_PROMISED;

/// Record that the tree in `git_dir` has no history yet (see the module); `root` is the archive's
/// root tree id when it was computed.
///
/// # Errors
/// Local I/O errors.
pub fn promise(git_dir: &std::path::Path, root: Option<gix::ObjectId>) -> Result<()> {
    let root = root.map_or_else(|| "unknown".to_owned(), |id| id.to_string());
    crate::fs::write_atomic(&git_dir.join(PROMISED), format!("tree {root}\n").as_bytes())
}

/// `Some` when history is not attached yet, holding the archive's root tree id when known (an id
/// of `format`, the repository's).
fn promised(
    git_dir: &std::path::Path,
    format: crate::types::Format,
) -> Result<Option<Option<gix::ObjectId>>> {
    let fix = "remove it, then run the command again";
    let Some(bytes) = crate::fs::state::read(&git_dir.join(PROMISED), 4096, fix)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    let hex = text.trim().strip_prefix("tree ");
    if hex == Some("unknown") {
        return Ok(Some(None));
    }
    let id = hex
        .and_then(|hex| gix::ObjectId::from_hex(hex.as_bytes()).ok())
        .filter(|id| id.kind() == format);
    // A record that cannot be read checks against an id no tree has: the difference is said.
    Ok(Some(Some(
        id.unwrap_or_else(|| gix::ObjectId::null(format)),
    )))
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
    if promised(&session.git_dir, session.record.object_format)?.is_some() {
        return Ok(true);
    }
    Ok(open_repo(&session.git_dir)
        .is_ok_and(|repo| branch_commit(&repo, &session.record.branch).is_none()))
}

/// The branch's commit when the branch is born and its commit is here.
fn branch_commit(repo: &gix::Repository, branch: &SessionBranch) -> Option<gix::ObjectId> {
    match repo.try_find_reference(branch.full_ref().as_str()) {
        Ok(Some(mut r)) => r
            .peel_to_id()
            .ok()
            .map(gix::Id::detach)
            .filter(|id| repo.has_object(id)),
        _ => None,
    }
}

/// Fetch `tip` at depth 1 from `read` into `pack_dir`: its commit and trees only when `filter`
/// (`filter blob:none`, the server takes it), else the whole commit.
///
/// # Errors
/// Those of the fetch (auth 4, network 5, integrity 6, not found 8).
pub fn fetch_commit(
    http: &Http,
    read: &UrlSource,
    branch: &SessionBranch,
    tip: FullSha,
    pack_dir: &std::path::Path,
    filter: bool,
    interrupt: &AtomicBool,
) -> Result<fetch::Fetched> {
    std::fs::create_dir_all(pack_dir)
        .map_err(|e| Error::io(format!("creating {}", pack_dir.display()), e))?;
    http.with_retries(read, "fetching the restored commit's history", |url| {
        let caps = fetch::handshake(http, url, branch)?;
        caps.check_tip(url, "the restored commit", tip)?;
        let mut want = fetch::Want::depth_one(tip, pack_dir, Default::default());
        want.filter = filter.then_some("blob:none");
        fetch::fetch_pack(http, url, &caps, want, interrupt)
    })
}

/// Check that the archive's tree (`archive_tree`, its index written from it) is `tip`'s. When it
/// is not (`export-subst`, `export-ignore`, a server that sent another tree), the index is rebuilt
/// from `HEAD`'s tree, as the archive's blob ids are in no repository; returns the warning then.
///
/// # Errors
/// Those of reading the objects and writing the index.
pub fn check_archive_tree(
    repo: &gix::Repository,
    tip: FullSha,
    archive_tree: gix::ObjectId,
) -> Result<Option<String>> {
    let tree = super::replay::tree_of(repo, tip.id())?;
    if archive_tree == tree {
        return Ok(None);
    }
    let differ = reindex_from_head(repo)?;
    Ok(Some(format!(
        "the archive's files are not commit {tip}'s tree (the archive's tree is \
         {archive_tree}, the commit's {tree}): the index now follows the commit, so git \
         shows the {differ} path(s) that differ as changes, and a save commits them; \
         restore from git (without an archive) to have the commit's files"
    )))
}

/// Attach history (see the module): fetch `TIP_SHA` at depth 1 unless it is here, check the
/// archive's tree, and when the branch does not descend from `TIP_SHA` yet, move it there with
/// the person's commits and index replayed onto it.
///
/// # Errors
/// Those of the fetch (auth 4, network 5, integrity 6, not found 8); [`Error::Internal`] for local
/// I/O.
pub fn attach_history(session: &Session, read: &UrlSource) -> Result<Vec<String>> {
    let record = &session.record;
    let mut repo = open_repo(&session.git_dir)?;
    let here = repo.has_object(record.tip.id())
        && super::replay::tree_of(&repo, record.tip.id()).is_ok_and(|tree| repo.has_object(tree));
    // What plain git fetched already (a lazy fetch) is not fetched again.
    if !here {
        let http = Http::new()?;
        let pack_dir = session.objects_dir().join("objects/pack");
        let interrupt = AtomicBool::new(false);
        let fetched = fetch_commit(
            &http,
            read,
            &record.branch,
            record.tip,
            &pack_dir,
            false,
            &interrupt,
        )?;
        crate::repo::layout::write_shallow(session.objects_dir(), &fetched.shallow)?;
        repo = open_repo(&session.git_dir)?;
    }
    super::replay::tree_of(&repo, record.tip.id())?;
    let promised = promised(&session.git_dir, record.object_format)?;
    let head = branch_commit(&repo, &record.branch);
    let order = match head {
        Some(head) => super::replay::commits_to_replay(&repo, head, record.tip.id())?,
        None => Some(Vec::new()),
    };
    let mut warnings = Vec::new();
    match order {
        // The branch descends from TIP_SHA (a restore with READ_URL): the index and the branch
        // are the person's.
        None => {
            if let Some(Some(archive_tree)) = promised {
                warnings.extend(check_archive_tree(&repo, record.tip, archive_tree)?);
            }
        }
        Some(order) => warnings.extend(move_onto_tip(session, &repo, head, &order)?),
    }
    if promised.is_some() {
        let path = session.git_dir.join(PROMISED);
        std::fs::remove_file(&path)
            .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
    }
    tracing::info!(
        "attached the history of {} to the archive-restored tree",
        record.tip
    );
    Ok(warnings)
}

/// The branch of a tree restored without history moved onto `TIP_SHA`: the person's commits
/// (`order`, parents first, from `head`) replayed, the index rebuilt (see [`super::replay`]).
fn move_onto_tip(
    session: &Session,
    repo: &gix::Repository,
    head: Option<gix::ObjectId>,
    order: &[gix::ObjectId],
) -> Result<Option<String>> {
    let record = &session.record;
    let tip_tree = super::replay::tip_tree(repo, record.tip.id())?;
    let replayed = super::replay::replay(repo, record.tip.id(), &tip_tree, head, order)?;
    let mut index =
        super::replay::index_after(repo, &session.workdir, &tip_tree, head, replayed.claimed)?;
    checkout::write_index(&mut index)?;
    if record.lease == record.tip {
        crate::repo::layout::write_ref(
            &session.git_dir,
            &record.branch.tracking_ref(),
            record.tip,
        )?;
    }
    let new_head = FullSha::from_id(replayed.head);
    crate::repo::layout::write_ref(session.refs_dir(), &record.branch.full_ref(), new_head)?;
    Ok(head.filter(|_| !order.is_empty()).map(|old| {
        format!(
            "the {} commit(s) made with plain git before history was attached now descend \
             from TIP_SHA {}: the branch moved from {old} to {new_head} (the same changes; \
             TIP_SHA's files they never added are kept)",
            order.len(),
            record.tip
        )
    }))
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
