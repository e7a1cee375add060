//! File-system helpers at the bottom of every data flow: atomic writes ([`write_atomic`]) and
//! ownership ([`owner`]: what restore creates as root belongs to the tree's owner, SPEC rule 9).

pub mod owner;
pub mod state;
pub mod tree;

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Write `bytes` to `path` through a temporary file in the same directory, fsync it, rename it into
/// place, and fsync the directory.
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::io(format!("creating a temporary file in {}", dir.display()), e))?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    tmp.persist(path)
        .map_err(|e| Error::io(format!("renaming into {}", path.display()), e.error))?;
    sync_dir(dir);
    Ok(())
}

/// fsync a directory so a rename inside it is durable (best effort: some filesystems refuse).
pub fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// The current time as RFC 3339 UTC with seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
