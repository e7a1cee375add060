//! SPEC rule 9: when restore runs as root on a directory owned by someone else, everything it
//! creates is handed to the directory's owner, so the agent can edit and git does not report
//! "dubious ownership" (git-config(1) `safe.directory`).

use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use crate::error::{Error, Result};

/// The owner (uid, gid) to give created files, if it differs from ours.
///
/// `probe` is a path this process just created (its owner is our effective uid).
pub fn owner_to_match(dir: &Path, probe: &Path) -> Option<(u32, u32)> {
    let target = std::fs::metadata(dir).ok()?;
    let ours = std::fs::symlink_metadata(probe).ok()?;
    (ours.uid() == 0 && target.uid() != 0).then(|| (target.uid(), target.gid()))
}

/// Give `path` and, if it is a directory, everything below it to `owner`, without following symlinks.
///
/// # Errors
/// [`Error::Internal`] when an ownership change fails.
pub fn chown_tree(path: &Path, owner: (u32, u32)) -> Result<()> {
    std::os::unix::fs::lchown(path, Some(owner.0), Some(owner.1))
        .map_err(|e| Error::io(format!("changing the owner of {}", path.display()), e))?;
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
        {
            let entry = entry.map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            chown_tree(&entry.path(), owner)?;
        }
    }
    Ok(())
}

/// Give the files of `index` (and the directories above them, up to `workdir`) to `owner`.
///
/// # Errors
/// [`Error::Internal`] when an ownership change fails.
pub fn chown_checkout(workdir: &Path, index: &gix::index::File, owner: (u32, u32)) -> Result<()> {
    let mut dirs = std::collections::BTreeSet::new();
    for entry in index.entries() {
        let rel = Path::new(std::ffi::OsStr::from_bytes(entry.path(index)));
        let path = workdir.join(rel);
        std::os::unix::fs::lchown(&path, Some(owner.0), Some(owner.1))
            .map_err(|e| Error::io(format!("changing the owner of {}", path.display()), e))?;
        let mut parent = rel.parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            if !dirs.insert(p.to_path_buf()) {
                break;
            }
            parent = p.parent();
        }
    }
    for d in dirs {
        let path = workdir.join(d);
        std::os::unix::fs::lchown(&path, Some(owner.0), Some(owner.1))
            .map_err(|e| Error::io(format!("changing the owner of {}", path.display()), e))?;
    }
    Ok(())
}
