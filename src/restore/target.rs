//! Step 1: inspect the target directory (and hold its lock while a restore runs).

use super::intent::{INTENT_FILE, Intent};
use crate::error::{Error, Result};
use crate::names::STAGING_DIR;
use crate::repo::session::SessionRecord;
use std::path::{Path, PathBuf};

/// The state of the target directory before a restore.
pub(super) enum Target {
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

pub(super) fn inspect(dir: &Path) -> Result<Target> {
    let git_dir = dir.join(".git");
    if git_dir.exists() {
        if let Some(record) = SessionRecord::read(&git_dir)? {
            // A boot killed after its session record, before its template's record went.
            super::intent::forget_template(&git_dir);
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
pub(super) struct TargetLock {
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

/// Take the [`TargetLock`] of `dir`, waiting for another restore that holds it (at most
/// `GIT_SESSION_LOCK_WAIT_S`).
///
/// # Errors
/// [`Error::Internal`] when the folder cannot be created, opened or locked.
pub(super) fn lock_target(dir: &Path) -> Result<TargetLock> {
    crate::failpoint::barrier("before-lock");
    let created = !dir.exists();
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let folder =
        crate::fs::open_dir(dir).map_err(|e| Error::io(format!("opening {}", dir.display()), e))?;
    let lock = TargetLock {
        _folder: folder,
        dir: dir.to_owned(),
        created,
    };
    crate::clock::lock(&lock._folder, dir, "another restore of this folder")?;
    Ok(lock)
}

/// Take back a `.git` seeded from a cache into `dir` (empty before) when the boot failed before
/// writing any file: `dir` is then as it was. Anything else in `dir` keeps the `.git` (the boot
/// wrote files; its rerun completes them). Best effort: a failure to remove is only logged.
pub(super) fn unseed(dir: &Path, created: bool) {
    let only_git = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().all(|e| e.file_name() == ".git"))
        .unwrap_or(false);
    if !only_git {
        return;
    }
    if let Err(e) = std::fs::remove_dir_all(dir.join(".git")) {
        tracing::warn!("could not remove the seeded {}/.git: {e}", dir.display());
    }
    if created {
        let _ = std::fs::remove_dir(dir);
    }
}
