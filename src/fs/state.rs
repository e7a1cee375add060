//! The files git-session wrote into a git dir earlier — the session and template records, the
//! intents, the ledger — read back as untrusted input: whoever owns the folder (or built the
//! template image) may have replaced them since.
//!
//! # Security
//! Opened with `O_NOFOLLOW` (a symlink put in a file's place is refused, never read or written
//! through) and `O_NONBLOCK` (a FIFO cannot hang the read), checked to be a regular file, and
//! read up to a cap fixed here, never to a size the file claims. Writes go through
//! [`super::write_atomic`] (a rename replaces a symlink, it does not follow it) or
//! [`open_append`].

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use crate::error::{Error, Result};

/// The most a record or an intent may hold (they are well under 64 KiB).
pub const RECORD_CAP: u64 = 1 << 20;
/// The most the ledger may hold: about 700,000 pushes.
pub const LEDGER_CAP: u64 = 64 << 20;

/// The contents of the state file at `path`, `Ok(None)` when there is none. `fix` says what to do
/// when it is not a regular file of at most `cap` bytes.
///
/// # Errors
/// [`Error::Conflict`] for a symlink, a folder, a FIFO or a device in its place, or a file over
/// `cap`, naming it and saying `fix`; [`Error::LocalIo`] when it cannot be read.
pub fn read(path: &Path, cap: u64, fix: &str) -> Result<Option<Vec<u8>>> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refused(path, "a symlink", fix));
        }
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    if !meta.is_file() {
        return Err(refused(path, "not a regular file", fix));
    }
    if meta.len() > cap {
        return Err(refused(
            path,
            &format!("{} bytes (over {cap})", meta.len()),
            fix,
        ));
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    if bytes.len() as u64 > cap {
        return Err(refused(path, &format!("over {cap} bytes"), fix));
    }
    Ok(Some(bytes))
}

/// Open the state file at `path` to append to it, creating it (mode 0644) when missing, never
/// through a symlink or a hard link.
///
/// # Errors
/// [`Error::Conflict`] when something other than a regular file is in its place, or a file with
/// other names (naming it and saying `fix`); [`Error::LocalIo`] when it cannot be opened.
pub fn open_append(path: &Path, fix: &str) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refused(path, "a symlink", fix)
            } else {
                Error::io(format!("opening {}", path.display()), e)
            }
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    if !meta.is_file() {
        return Err(refused(path, "not a regular file", fix));
    }
    // Written in place: a hard link would have the file it shares written (as root, when the
    // tree is root's).
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(refused(path, "a hard link (the file has other names)", fix));
    }
    Ok(file)
}

/// Replace the small state file at `path` with `bytes` by a rename (a symlink or a hard link in
/// its place is replaced, never written through), without an fsync: for records whose loss a
/// crash may cause (they are best effort).
///
/// # Errors
/// [`Error::LocalIo`] when the file cannot be written.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::io(format!("creating a temporary file in {}", dir.display()), e))?;
    tmp.write_all(bytes)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    tmp.persist(path)
        .map_err(|e| Error::io(format!("renaming into {}", path.display()), e.error))?;
    Ok(())
}

/// Something else in place of a file git-session wrote: local content in the way (exit 7), not
/// an internal failure.
pub(crate) fn refused(path: &Path, what: &str, fix: &str) -> Error {
    Error::conflict(format!(
        "{} is {what}, not a file git-session wrote: nothing was read from it or written \
         through it; {fix}",
        path.display()
    ))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_fifos_folders_and_big_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "theirs\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(read(&link, RECORD_CAP, "fix").is_err());
        assert!(open_append(&link, "fix").is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "theirs\n");
        assert!(read(dir.path(), RECORD_CAP, "fix").is_err());
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 11]).unwrap();
        assert!(read(&big, 10, "fix").is_err());
        assert_eq!(read(&big, 11, "fix").unwrap().unwrap().len(), 11);
        assert!(read(&dir.path().join("none"), 10, "fix").unwrap().is_none());
    }

    /// The ledger is appended to in place (and cut back to its whole lines): a hard link to a
    /// file outside (an empty one, or one without a line break, passes the ledger's parse) is
    /// refused, that file never written (it was appended to, or emptied).
    #[test]
    fn a_hard_link_is_never_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "").unwrap();
        let link = dir.path().join("ledger");
        std::fs::hard_link(&outside, &link).unwrap();
        let err = open_append(&link, "fix").expect_err("refused");
        assert!(format!("{err}").contains("hard link"), "{err}");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "");
        std::fs::remove_file(&outside).unwrap();
        assert!(open_append(&link, "fix").is_ok(), "its only name now");
    }
}
