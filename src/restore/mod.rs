//! `restore`: put the tree of one exact commit into the session directory (SPEC "Commands",
//! rules 1, 2, 6, 8, 9).
//!
//! Every restore works the same way, whatever the source:
//! 1. inspect the target: a finished restore of this session is a no-op; another session's tree is
//!    exit 2; another repository or other content is exit 7 unless `--force`;
//! 2. build the git dir in a staging folder inside the target (`.git-session-restore/`), with an
//!    intent file naming the branch and commit;
//! 3. fill it (`fetch`), check the tree out, write the index;
//! 4. write the session record, then rename the staging folder to `.git`: only a finished restore
//!    has a `.git`. A kill before that leaves the staging folder, which the next run (same branch and
//!    commit) discards and redoes, overwriting the files it had written.

pub mod archive;
mod boot;
mod cache;
pub mod checkout;
pub(crate) mod early;
mod git;
mod lfs;
mod probe;
pub mod sparse;
pub(crate) mod submodules;
mod verify;
mod write;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Refusal, Result};
use crate::repo::session::{SessionRecord, Source};
use crate::types::{FullSha, SessionBranch};
use crate::wire::http::UrlSource;

pub use git::restore_git;
pub use lfs::LfsMode;
pub use submodules::SubmoduleMode;

pub use crate::names::STAGING_DIR;
const INTENT_FILE: &str = "git-session-intent.json";

/// What to restore, and where: everything validated.
#[derive(Debug)]
pub struct RestoreOptions {
    /// The work tree (created if missing).
    pub dir: PathBuf,
    /// The session branch.
    pub branch: SessionBranch,
    /// The commit to restore.
    pub tip: FullSha,
    /// Where to read from (required for git; for an archive, used to look the lease up).
    pub read: Option<UrlSource>,
    /// Where pushes go, if known (only its credential-free form is written).
    pub push: Option<UrlSource>,
    /// History depth; `None` fetches the whole history.
    pub depth: Option<u32>,
    /// Overwrite files the commit tracks; leave other files in place.
    pub force: bool,
    /// Bounds on the fetched pack.
    pub limits: crate::pack::PackLimits,
    /// When to fetch Git LFS objects (`--lfs`).
    pub lfs: LfsMode,
    /// Which submodules to fetch (`--submodules`).
    pub submodules: SubmoduleMode,
    /// The folders of a sparse checkout (`--sparse`); `None`: the whole tree.
    pub sparse: Option<sparse::Cone>,
    /// Bake a template (`git-session bake`): `tip` is the base; no lease is looked up, `HEAD` is
    /// left detached and a template record is written instead of a session record. `branch` is
    /// then [`TEMPLATE_BRANCH`], which only names the bake in its intent.
    pub template: bool,
    /// A baked template (or its git dir) whose objects seed a restore into an empty folder
    /// (`--cache`, see [`cache`]).
    pub cache: Option<PathBuf>,
}

/// The branch name a bake's intent carries (a bake has no session branch).
pub const TEMPLATE_BRANCH: &str = "git-session-template";

/// The result of a restore.
#[derive(Debug)]
pub struct RestoreReport {
    /// The session branch.
    pub branch: SessionBranch,
    /// The commit restored.
    pub tip: FullSha,
    /// The recorded lease.
    pub lease: FullSha,
    /// Where the tree came from.
    pub source: Source,
    /// `true` when the tree already held this session and nothing was touched.
    pub noop: bool,
    /// Files written.
    pub files: usize,
    /// Warnings for the user (also in the JSON output).
    pub warnings: Vec<String>,
    /// What LFS, submodules and a sparse cone added.
    pub extras: Extras,
}

/// What a restore did beyond the tree's own files.
#[derive(Debug, Default)]
pub struct Extras {
    /// Git LFS files written with their content.
    pub lfs_files: usize,
    /// Submodules restored, by path.
    pub submodules: Vec<String>,
    /// The cone's folders of a sparse restore.
    pub sparse: Option<Vec<String>>,
}

impl RestoreReport {
    /// A git restore of `opts.tip` that wrote `files` files.
    fn of_git(opts: &RestoreOptions, lease: FullSha, files: usize, warnings: Vec<String>) -> Self {
        RestoreReport {
            branch: opts.branch.clone(),
            tip: opts.tip,
            lease,
            source: Source::Git,
            noop: false,
            files,
            warnings,
            extras: Default::default(),
        }
    }
}

/// What the staging folder says about the restore that created it.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Intent {
    branch: SessionBranch,
    tip: FullSha,
    /// When the first interrupted run's checkout began (milliseconds since the Unix epoch),
    /// carried from run to run so that files it cut short stay recognised after a rerun that
    /// failed (see [`CutShort`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkout_began_ms: Option<u64>,
    /// The file over the big-object threshold the interrupted checkout was writing (relative to
    /// the target): however long it took, a prefix of its content there is the killed run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    big_file: Option<PathBuf>,
}

/// The state of the target directory before a restore.
enum Target {
    /// Missing or empty.
    Empty,
    /// A finished restore with this record.
    Session(Box<SessionRecord>),
    /// An interrupted restore of this intent.
    Interrupted(Intent),
    /// A baked template (`git-session bake`), possibly with an interrupted boot in it.
    Template(crate::repo::template::TemplateRecord),
    /// A `.git` that restore did not write.
    ForeignRepository,
    /// Other files (a few names for the message).
    Occupied(Vec<String>),
}

fn inspect(dir: &Path) -> Result<Target> {
    let git_dir = dir.join(".git");
    if git_dir.exists() {
        if let Some(record) = SessionRecord::read(&git_dir)? {
            return Ok(Target::Session(Box::new(record)));
        }
        return Ok(
            match crate::repo::template::TemplateRecord::read(&git_dir)? {
                Some(template) => Target::Template(template),
                None => Target::ForeignRepository,
            },
        );
    }
    let intent_path = dir.join(STAGING_DIR).join(INTENT_FILE);
    if let Ok(Some(bytes)) = crate::fs::state::read(&intent_path, crate::fs::state::RECORD_CAP, "")
        && let Ok(intent) = serde_json::from_slice::<Intent>(&bytes)
    {
        return Ok(Target::Interrupted(intent));
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Target::Empty),
        Err(e) => return Err(Error::io(format!("reading {}", dir.display()), e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // A staging folder without a readable intent was cut before it was written: ours, empty.
        if name == STAGING_DIR {
            continue;
        }
        names.push(name);
    }
    names.sort();
    Ok(if names.is_empty() {
        Target::Empty
    } else {
        Target::Occupied(names)
    })
}

/// An exclusive lock on the target folder (`flock` on the folder itself, so nothing is left in the
/// tree, and a killed holder releases it), held for a whole restore: a second restore of the same
/// folder waits, then finds the work done (a no-op) instead of building the same staging folder
/// at the same time. Created here if missing; removed again on drop if this created it and it is
/// still empty (a restore that wrote nothing).
struct TargetLock {
    _folder: std::fs::File,
    dir: PathBuf,
    created: bool,
}

impl Drop for TargetLock {
    fn drop(&mut self) {
        if self.created {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Take the [`TargetLock`] of `dir`, waiting for another restore that holds it.
///
/// # Errors
/// [`Error::Internal`] when the folder cannot be created, opened or locked.
fn lock_target(dir: &Path) -> Result<TargetLock> {
    crate::failpoint::barrier("before-lock");
    let created = !dir.exists();
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let folder =
        std::fs::File::open(dir).map_err(|e| Error::io(format!("opening {}", dir.display()), e))?;
    let lock = TargetLock {
        _folder: folder,
        dir: dir.to_owned(),
        created,
    };
    match lock._folder.try_lock() {
        Ok(()) => return Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => {
            tracing::warn!(
                "another restore is running in {}: waiting for it to finish",
                dir.display()
            );
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(Error::io(format!("locking {}", dir.display()), e));
        }
    }
    lock._folder
        .lock()
        .map_err(|e| Error::io(format!("locking {}", dir.display()), e))?;
    Ok(lock)
}

/// When the checkout of an interrupted git restore began: the newest `.idx` in its staging
/// folder's `objects/pack` (written just before the checkout), or `None` when it never got there.
fn checkout_began(staging: &Path) -> Option<std::time::SystemTime> {
    std::fs::read_dir(staging.join("objects/pack"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "idx"))
        .filter_map(|e| e.metadata().ok()?.modified().ok())
        .max()
}

/// Files that a killed git checkout (which writes files in place) may have cut short, judged when
/// completing it: a file whose content is a strict prefix of the commit's counts as the killed
/// run's own only if it was last written while that run was checking out — from `since` (when
/// its checkout began) to shortly after the newest file it wrote whole. A person's later edit
/// (even one that only shortens the file) falls outside that window and is kept (exit 7).
#[derive(Debug, Default)]
pub struct CutShort {
    since: Option<std::time::SystemTime>,
    newest_whole: Option<std::time::SystemTime>,
    candidates: Vec<(PathBuf, std::time::SystemTime)>,
    /// A big file the killed checkout was writing (absolute): a prefix of it is its own.
    writing: Option<PathBuf>,
}

impl CutShort {
    /// Slack for file-system timestamps and the threads still writing when the kill came.
    const SLACK: std::time::Duration = std::time::Duration::from_secs(2);

    /// No file judged yet; `since`: when the killed checkout began (`None`: it never did).
    pub fn new(since: Option<std::time::SystemTime>) -> Self {
        CutShort {
            since,
            ..CutShort::default()
        }
    }

    /// The big file (absolute path) the killed checkout was writing, which may have taken longer
    /// than the window allows.
    pub fn writing(mut self, path: Option<PathBuf>) -> Self {
        self.writing = path;
        self
    }

    /// A file in place that holds exactly the commit's content, last written at `mtime`.
    pub fn whole(&mut self, mtime: std::time::SystemTime) {
        self.newest_whole = self.newest_whole.max(Some(mtime));
    }

    /// A file in place whose content is a strict prefix of the commit's.
    pub fn prefix(&mut self, path: PathBuf, mtime: std::time::SystemTime) {
        self.candidates.push((path, mtime));
    }

    /// The first candidate that is not the killed run's own.
    pub fn first_foreign(&self) -> Option<&Path> {
        let Some(since) = self.since else {
            return self.candidates.first().map(|(p, _)| p.as_path());
        };
        let from = since.checked_sub(Self::SLACK).unwrap_or(since);
        let until = self.newest_whole.unwrap_or(since).max(since) + Self::SLACK;
        self.candidates
            .iter()
            .filter(|(p, _)| Some(p) != self.writing.as_ref())
            .find(|(_, mtime)| *mtime < from || *mtime > until)
            .map(|(p, _)| p.as_path())
    }

    /// The candidates judged the killed run's own.
    pub fn accepted(&self) -> std::collections::HashSet<PathBuf> {
        if self.first_foreign().is_some() {
            return Default::default();
        }
        self.candidates.iter().map(|(p, _)| p.clone()).collect()
    }
}

/// How restore may write into the target, decided from its state.
struct Plan {
    /// Files the commit tracks may be overwritten.
    overwrite: bool,
    /// Only what an interrupted restore of this commit left may be replaced (`overwrite` without
    /// `--force`): files holding the commit's content, or a prefix of it cut by the kill.
    resume_only: bool,
    /// When the interrupted run was a git restore that got as far as its checkout: when that
    /// checkout began (the newest pack index in its staging folder). Only such a run can have left
    /// a file cut short (see [`CutShort`]).
    cut_short_since: Option<std::time::SystemTime>,
    /// The big file the interrupted checkout was writing, relative to the target.
    cut_short_big: Option<PathBuf>,
    /// The target held nothing (faster checkout).
    empty: bool,
    /// The target holds an interrupted restore of this session: a failure keeps its staging
    /// folder and intent, so that the next run still completes it.
    interrupted: bool,
}

/// What [`plan`] decided.
enum Decision {
    /// Restore, writing as the plan says.
    Restore(Plan),
    /// Boot a session from the baked template in the target ([`boot`]).
    Boot(crate::repo::template::TemplateRecord),
    /// The target already holds this session: a no-op success.
    Done(Box<RestoreReport>),
}

/// Decide what to do with the target: restore it, or finish early (a no-op).
fn plan(opts: &RestoreOptions) -> Result<Decision> {
    match inspect(&opts.dir)? {
        Target::Template(template) => plan_template(opts, template),
        Target::Session(record) if opts.template => Err(Error::conflict(format!(
            "{} holds session '{}', not a template: bake into an empty directory",
            opts.dir.display(),
            record.branch
        ))),
        Target::Empty => Ok(Decision::Restore(Plan {
            overwrite: opts.force,
            empty: true,
            resume_only: false,
            cut_short_since: None,
            cut_short_big: None,
            interrupted: false,
        })),
        Target::Session(record) => plan_session(opts, &record),
        Target::Interrupted(intent) => {
            if intent.branch == opts.branch && intent.tip == opts.tip || opts.force {
                tracing::info!("resuming an interrupted restore of {}", intent.tip);
                Ok(Decision::Restore(Plan {
                    overwrite: true,
                    empty: false,
                    resume_only: !opts.force,
                    cut_short_since: intent
                        .checkout_began_ms
                        .map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
                        .or_else(|| checkout_began(&opts.dir.join(STAGING_DIR))),
                    cut_short_big: intent.big_file.clone(),
                    interrupted: true,
                }))
            } else {
                Err(Error::conflict(format!(
                    "{} holds an interrupted restore of '{}' at {}: rerun that restore, or pass --force",
                    opts.dir.display(),
                    intent.branch,
                    intent.tip
                )))
            }
        }
        Target::ForeignRepository => Err(Error::conflict(format!(
            "{} already holds a git repository that git-session did not restore: nothing was changed",
            opts.dir.display()
        ))),
        Target::Occupied(names) => {
            if opts.force {
                Ok(Decision::Restore(Plan {
                    overwrite: true,
                    empty: false,
                    resume_only: false,
                    cut_short_since: None,
                    cut_short_big: None,
                    interrupted: false,
                }))
            } else {
                let shown: Vec<_> = names.iter().take(5).cloned().collect();
                let hint = if opts.template {
                    "bake into an empty folder"
                } else {
                    "pass --force to overwrite the files the commit tracks and keep the others"
                };
                Err(Error::conflict(format!(
                    "{} is not empty ({}{}): restore would mix the commit with other content; {hint}",
                    opts.dir.display(),
                    shown.join(", "),
                    if names.len() > 5 { ", …" } else { "" }
                )))
            }
        }
    }
}

/// A target holding a session: this one at `TIP_SHA` (or descending from it) is done already.
fn plan_session(opts: &RestoreOptions, record: &SessionRecord) -> Result<Decision> {
    if record.branch != opts.branch {
        return Err(Error::Usage(
            Refusal::AnotherSession,
            format!(
                "{} belongs to another session (branch '{}', not '{}'): restore into an empty directory",
                opts.dir.display(),
                record.branch,
                opts.branch
            ),
        ));
    }
    if holds_tip(&opts.dir, record, opts.tip)? {
        return Ok(Decision::Done(Box::new(RestoreReport {
            branch: record.branch.clone(),
            tip: opts.tip,
            lease: record.lease,
            source: record.source,
            noop: true,
            files: 0,
            warnings: Vec::new(),
            extras: Default::default(),
        })));
    }
    Err(Error::conflict(format!(
        "{} already holds session '{}' at a commit that does not descend from {}: \
         nothing was changed (move the tree aside to restore afresh)",
        opts.dir.display(),
        record.branch,
        opts.tip
    )))
}

/// A target holding a template: a bake of the same base is done already; a restore boots it.
fn plan_template(
    opts: &RestoreOptions,
    template: crate::repo::template::TemplateRecord,
) -> Result<Decision> {
    if !opts.template {
        return Ok(Decision::Boot(template));
    }
    if template.base == opts.tip {
        return Ok(Decision::Done(Box::new(RestoreReport {
            branch: opts.branch.clone(),
            tip: opts.tip,
            lease: FullSha::zero(),
            source: Source::Git,
            noop: true,
            files: 0,
            warnings: Vec::new(),
            extras: Default::default(),
        })));
    }
    Err(Error::conflict(format!(
        "{} already holds a template baked at {}, not {}: bake into an empty directory",
        opts.dir.display(),
        template.base,
        opts.tip
    )))
}

/// Whether the finished restore in `dir` has `HEAD` at `tip` or descending from it.
fn holds_tip(dir: &Path, record: &SessionRecord, tip: FullSha) -> Result<bool> {
    if record.tip == tip && record.source == Source::Archive {
        // An archive restore has no history yet: the record is the proof.
        return Ok(true);
    }
    let repo = crate::repo::open(&dir.join(".git"))?;
    let Ok(head) = repo.head_id() else {
        return Ok(record.tip == tip);
    };
    crate::repo::descends_from(&repo, head.detach(), tip.id())
}

/// Create (or recreate) the staging folder with its intent file.
fn begin_staging(opts: &RestoreOptions, plan: &Plan) -> Result<PathBuf> {
    std::fs::create_dir_all(&opts.dir)
        .map_err(|e| Error::io(format!("creating {}", opts.dir.display()), e))?;
    let staging = opts.dir.join(STAGING_DIR);
    // A killed run's LFS objects are checked and whole: kept for this one.
    let parked = opts.dir.join(format!("{STAGING_DIR}.lfs"));
    if staging.exists() {
        lfs::keep_objects(&staging, &parked);
        std::fs::remove_dir_all(&staging)
            .map_err(|e| Error::io(format!("removing the stale {}", staging.display()), e))?;
    }
    std::fs::create_dir(&staging)
        .map_err(|e| Error::io(format!("creating {}", staging.display()), e))?;
    lfs::restore_objects(&parked, &staging);
    let intent = Intent {
        branch: opts.branch.clone(),
        tip: opts.tip,
        checkout_began_ms: plan
            .cut_short_since
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        big_file: plan.cut_short_big.clone(),
    };
    let bytes =
        serde_json::to_vec(&intent).map_err(|e| Error::internal("encoding the intent", e))?;
    crate::fs::write_atomic(&staging.join(INTENT_FILE), &bytes)?;
    crate::failpoint::hit("after-staging");
    Ok(staging)
}

/// The staging folder's intent, written by this run.
fn read_intent(path: &Path) -> Result<Vec<u8>> {
    let fix = "remove the folder and restore again";
    crate::fs::state::read(path, crate::fs::state::RECORD_CAP, fix)?
        .ok_or_else(|| Error::Internal(format!("{} is gone: {fix}", path.display())))
}

/// Record in the staging folder's intent that the checkout began now (before the transfer ended:
/// the early checkout), so a rerun after a kill knows files cut short since as this run's own.
///
/// # Errors
/// [`Error::Internal`] / [`Error::LocalIo`] when the intent cannot be rewritten.
fn note_checkout_began(staging: &Path) -> Result<()> {
    let path = staging.join(INTENT_FILE);
    let bytes = read_intent(&path)?;
    let mut intent: Intent =
        serde_json::from_slice(&bytes).map_err(|e| Error::internal("reading the intent", e))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default();
    intent.checkout_began_ms.get_or_insert(now);
    let bytes =
        serde_json::to_vec(&intent).map_err(|e| Error::internal("encoding the intent", e))?;
    crate::fs::write_atomic(&path, &bytes)
}

/// Record in the staging folder's intent that the checkout is writing the big file `rel`, so a
/// rerun after a kill knows a prefix of it as the killed run's own (see [`CutShort::writing`]).
///
/// # Errors
/// [`Error::Internal`] when the intent cannot be rewritten.
fn note_big_file(staging: &Path, rel: &Path) -> Result<()> {
    let path = staging.join(INTENT_FILE);
    let bytes = read_intent(&path)?;
    let mut intent: Intent =
        serde_json::from_slice(&bytes).map_err(|e| Error::internal("reading the intent", e))?;
    if intent.checkout_began_ms.is_none() {
        intent.checkout_began_ms = checkout_began(staging)
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    }
    intent.big_file = Some(rel.to_owned());
    let bytes =
        serde_json::to_vec(&intent).map_err(|e| Error::internal("encoding the intent", e))?;
    crate::fs::write_atomic(&path, &bytes)
}

/// Write the record and move the staging folder to `.git`: the restore is finished.
fn publish(opts: &RestoreOptions, staging: &Path, record: &SessionRecord) -> Result<()> {
    crate::failpoint::hit("before-record");
    if opts.template {
        crate::repo::template::TemplateRecord {
            version: 1,
            base: opts.tip,
            baked_at: record.restored_at.clone(),
            tool_version: record.tool_version.clone(),
        }
        .write(staging)?;
    } else {
        record.write(staging)?;
    }
    let _ = std::fs::remove_file(staging.join(INTENT_FILE));
    let git_dir = opts.dir.join(".git");
    // Renamed through the target's handle, so a target swapped for a symlink meanwhile is refused.
    crate::fs::tree::Tree::open(&opts.dir)
        .and_then(|tree| {
            let from = staging
                .strip_prefix(&opts.dir)
                .unwrap_or(Path::new(STAGING_DIR));
            // Never a symlink put in the staging folder's place: `.git` would lead elsewhere.
            if tree.kind(from)? != Some(crate::fs::tree::Kind::Dir) {
                return Err(std::io::Error::other(format!(
                    "{} is no longer the folder this restore made",
                    staging.display()
                )));
            }
            tree.rename_to(from, &tree, Path::new(".git"))
        })
        .map_err(|e| Error::io(format!("moving {} into place", git_dir.display()), e))?;
    crate::fs::sync_dir(&opts.dir);
    crate::failpoint::hit("after-publish");
    Ok(())
}

/// The lease from where ls-refs found the session branch (`None`: not there, a new session): the
/// zero id, or `TIP_SHA`, with a warning when the branch is elsewhere.
fn lease_from(
    branch: &SessionBranch,
    tip: FullSha,
    remote_tip: Option<FullSha>,
    warnings: &mut Vec<String>,
) -> FullSha {
    match remote_tip {
        None => FullSha::zero(),
        Some(t) if t == tip => tip,
        Some(other) => {
            warnings.push(stale_tip_warning(branch, other, tip));
            tip
        }
    }
}

/// The warning for a remote branch that is not at `TIP_SHA`: the backend handed out a stale tip.
fn stale_tip_warning(
    branch: &crate::types::SessionBranch,
    remote: FullSha,
    tip: FullSha,
) -> String {
    format!(
        "the remote branch '{branch}' is at {remote}, not at TIP_SHA {tip}: the backend handed out a stale tip; \
         the tree of {tip} is restored, but a push from it will be refused (exit 3)"
    )
}

/// Remove the staging folder after a failure that was not a kill (best effort).
fn abandon(staging: &Path) {
    if let Err(e) = std::fs::remove_dir_all(staging) {
        tracing::warn!("could not remove {}: {e}", staging.display());
    }
}
