//! The boot intent (`.git/git-session-boot.json`): which boot is under way, written first so
//! that a rerun completes it.

use super::super::options::RestoreOptions;
use crate::error::{Error, Result};
use crate::types::{FullSha, SessionBranch};
use serde::{Deserialize, Serialize};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

pub(super) use super::super::intent::BOOT_INTENT;

/// What an interrupted boot was doing.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct BootIntent {
    branch: SessionBranch,
    tip: FullSha,
    /// The paths the switch was writing when it was written last: a kill may have cut any of
    /// them short, so the rerun writes them again whatever they hold.
    #[serde(default)]
    pub(super) writing: Vec<String>,
}

impl BootIntent {
    pub(super) fn write(&self, git_dir: &Path) -> Result<()> {
        let bytes =
            serde_json::to_vec(self).map_err(|e| Error::internal("encoding the intent", e))?;
        // The switch writes it again before its first file: unchanged when it writes none. One
        // journal commit (the fsyncs batched), not two.
        crate::fs::durable_batch(|| {
            crate::fs::write_atomic_if_changed(&git_dir.join(BOOT_INTENT), &bytes)
        })
        .map(|_| ())
    }
}

/// Step 1: refuse another interrupted boot (unless `--force`), record this one (keeping what an
/// interrupted run of the same boot was writing), and sweep the temporary pack files a killed
/// fetch left.
pub(super) fn begin(opts: &RestoreOptions, git_dir: &Path) -> Result<BootIntent> {
    let path = git_dir.join(BOOT_INTENT);
    let mut intent = BootIntent {
        branch: opts.branch.clone(),
        tip: opts.tip,
        writing: Vec::new(),
    };
    // An intent that cannot be read or parsed is no boot's (fresh start): it is replaced below.
    if let Ok(Some(bytes)) = crate::fs::state::read(&path, crate::fs::state::RECORD_CAP, "")
        && let Ok(earlier) = serde_json::from_slice::<BootIntent>(&bytes)
    {
        if earlier.branch == intent.branch && earlier.tip == intent.tip {
            intent.writing = earlier.writing;
        } else if !earlier.writing.is_empty() && !opts.force {
            // Only a boot that began to switch the files binds the tree to its commit; one that
            // failed before (a wrong id, a refused token, a conflict) changed nothing.
            return Err(Error::conflict(format!(
                "{} holds an interrupted boot of '{}' at {}: rerun that restore, or pass --force",
                opts.dir.display(),
                earlier.branch,
                earlier.tip
            )));
        }
    }
    intent.write(git_dir)?;
    if let Ok(entries) = std::fs::read_dir(git_dir.join("objects/pack")) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.as_bytes().starts_with(b"tmp_") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(intent)
}
