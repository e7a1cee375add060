//! File-system helpers at the bottom of every data flow: atomic writes ([`write_atomic`]) and
//! ownership ([`owner`]: what restore creates as root belongs to the tree's owner, SPEC rule 9);
//! copy-on-write copies ([`reflink`]).

pub mod owner;
pub mod reflink;
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

/// [`write_atomic`] unless the regular file at `path` holds `bytes` already ([`holds`]): an
/// unchanged file keeps its inode and mtime (git's stat data of it stays valid, and nothing
/// watching the folder sees a change). Returns whether it wrote.
///
/// # Errors
/// As [`write_atomic`].
pub fn write_atomic_if_changed(path: &Path, bytes: &[u8]) -> Result<bool> {
    if holds(path, bytes) {
        return Ok(false);
    }
    write_atomic(path, bytes)?;
    Ok(true)
}

/// Whether the regular file at `path` (not followed) holds exactly `bytes`: its size first,
/// then at most that many bytes read.
pub fn holds(path: &Path, bytes: &[u8]) -> bool {
    let Ok(file) = open_regular(path, false) else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.len() == bytes.len() as u64) {
        return false;
    }
    let mut existing = Vec::with_capacity(bytes.len());
    let limit = bytes.len() as u64 + 1;
    std::io::Read::read_to_end(&mut std::io::Read::take(&file, limit), &mut existing).is_ok()
        && existing == bytes
}

/// Open the file at `path` to read it without ever waiting on it: `O_NONBLOCK` (a FIFO or a
/// device put in a file's place by whoever owns the folder can hold neither the open nor a
/// read), then checked to be a regular file; through no symlink unless `follow`. Every file of a
/// work tree, a git dir or a template is read through this (or [`read_regular`]).
///
/// # Errors
/// The open's error; [`std::io::ErrorKind::InvalidInput`] when something other than a regular
/// file is in its place.
pub fn open_regular(path: &Path, follow: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | nofollow)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The whole content of the regular file at `path`, opened with [`open_regular`].
///
/// # Errors
/// As [`open_regular`], or the read's error.
pub fn read_regular(path: &Path, follow: bool) -> std::io::Result<Vec<u8>> {
    let mut file = open_regular(path, follow)?;
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut out)?;
    Ok(out)
}

/// Open the folder at `path` (to lock or fsync it): `O_DIRECTORY`, so a FIFO in its place fails
/// the open instead of holding it.
///
/// # Errors
/// The open's error (`ENOTDIR` for anything but a folder).
pub fn open_dir(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
}

/// fsync a directory so a rename inside it is durable (best effort: some filesystems refuse).
pub fn sync_dir(dir: &Path) {
    if let Ok(f) = open_dir(dir) {
        let _ = f.sync_all();
    }
}

/// The current time as RFC 3339 UTC with seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
