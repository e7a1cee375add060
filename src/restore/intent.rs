//! The intent file in the staging folder: which restore created it, and what an interrupted
//! checkout left (the files it cut short, judged by [`CutShort`]).

use crate::error::{Error, Result};
use crate::types::{FullSha, SessionBranch};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub(super) const INTENT_FILE: &str = "git-session-intent.json";

/// The boot intent's file name inside `.git` (`boot::intent`): which boot is under way.
pub(super) const BOOT_INTENT: &str = "git-session-boot.json";

/// A boot's last step, once the session record is written: the template's record and the boot's
/// intent removed. Also run by a rerun that finds both records (a boot killed between the two),
/// which then has nothing else left to do.
pub(super) fn forget_template(git_dir: &Path) {
    let template =
        std::fs::remove_file(crate::repo::template::TemplateRecord::path(git_dir)).is_ok();
    let intent = std::fs::remove_file(git_dir.join(BOOT_INTENT)).is_ok();
    if template || intent {
        crate::fs::sync_dir(git_dir);
    }
}

/// What the staging folder says about the restore that created it.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(super) struct Intent {
    pub(super) branch: SessionBranch,
    pub(super) tip: FullSha,
    /// When the first interrupted run's checkout began (milliseconds since the Unix epoch),
    /// carried from run to run so that files it cut short stay recognised after a rerun that
    /// failed (see [`CutShort`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) checkout_began_ms: Option<u64>,
    /// The file over the big-object threshold the interrupted checkout was writing (relative to
    /// the target): however long it took, a prefix of its content there is the killed run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) big_file: Option<PathBuf>,
}

/// When the checkout of an interrupted git restore began: the newest `.idx` in its staging
/// folder's `objects/pack` (written just before the checkout), or `None` when it never got there.
pub(super) fn checkout_began(staging: &Path) -> Option<std::time::SystemTime> {
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

/// The staging folder's intent, written by this run.
pub(super) fn read_intent(path: &Path) -> Result<Vec<u8>> {
    let fix = "remove the folder and restore again";
    crate::fs::state::read(path, crate::fs::state::RECORD_CAP, fix)?
        .ok_or_else(|| Error::conflict(format!("{} is gone: {fix}", path.display())))
}
