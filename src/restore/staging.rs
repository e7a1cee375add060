//! The staging folder (`.git-session-restore/`): its intent file, what an interrupted checkout
//! left, and the last step, `publish`, that renames it to `.git` (so only a finished restore has a
//! `.git`).

use super::intent::{INTENT_FILE, Intent, checkout_began, read_intent};
use super::options::RestoreOptions;
use super::plan::Plan;
use crate::error::{Error, Result};
pub(super) use crate::names::STAGING_DIR;
use crate::repo::session::SessionRecord;
use std::path::{Path, PathBuf};

/// Create (or recreate) the staging folder with its intent file.
pub(super) fn begin_staging(opts: &RestoreOptions, plan: &Plan) -> Result<PathBuf> {
    std::fs::create_dir_all(&opts.dir)
        .map_err(|e| Error::io(format!("creating {}", opts.dir.display()), e))?;
    let staging = opts.dir.join(STAGING_DIR);
    // A killed run's LFS objects are checked and whole: kept for this one.
    let parked = opts.dir.join(format!("{STAGING_DIR}.lfs"));
    if staging.exists() {
        super::lfs::keep_objects(&staging, &parked);
        std::fs::remove_dir_all(&staging)
            .map_err(|e| Error::io(format!("removing the stale {}", staging.display()), e))?;
    }
    std::fs::create_dir(&staging)
        .map_err(|e| Error::io(format!("creating {}", staging.display()), e))?;
    super::lfs::restore_objects(&parked, &staging);
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

/// Record in the staging folder's intent that the checkout began now (before the transfer ended:
/// the early checkout), so a rerun after a kill knows files cut short since as this run's own.
///
/// # Errors
/// [`Error::Internal`] / [`Error::LocalIo`] when the intent cannot be rewritten.
pub(super) fn note_checkout_began(staging: &Path) -> Result<()> {
    let path = staging.join(INTENT_FILE);
    let bytes = read_intent(&path)?;
    let mut intent: Intent =
        serde_json::from_slice(&bytes).map_err(|e| malformed_intent(&path, e))?;
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
pub(super) fn note_big_file(staging: &Path, rel: &Path) -> Result<()> {
    let path = staging.join(INTENT_FILE);
    let bytes = read_intent(&path)?;
    let mut intent: Intent =
        serde_json::from_slice(&bytes).map_err(|e| malformed_intent(&path, e))?;
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

/// Write the record and move the staging folder to `.git`: the restore is finished. A
/// template's record notes `posted_v2` (the server took the fetch posted without the
/// handshake).
pub(super) fn publish(
    opts: &RestoreOptions,
    staging: &Path,
    record: &SessionRecord,
    posted_v2: bool,
) -> Result<()> {
    crate::failpoint::hit("before-record");
    if opts.template {
        crate::repo::template::TemplateRecord {
            version: 1,
            base: opts.tip,
            baked_at: record.restored_at.clone(),
            tool_version: record.tool_version.clone(),
            object_format: opts.tip.format(),
            posted_v2,
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

/// Remove the staging folder after a failure that was not a kill (best effort).
pub(super) fn abandon(staging: &Path) {
    if let Err(e) = std::fs::remove_dir_all(staging) {
        tracing::warn!("could not remove {}: {e}", staging.display());
    }
}

/// The staging folder's intent does not parse: changed by something else (local state, exit 7).
fn malformed_intent(path: &Path, e: serde_json::Error) -> Error {
    Error::conflict(format!(
        "{} is malformed ({e}): remove the folder it is in and restore again",
        path.display()
    ))
}
