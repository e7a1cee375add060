//! Git's lock on a file of the git dir (`config.lock`, `index.lock`), taken as git takes it
//! (created beside the file, renamed over it to commit), so that no edit is lost, neither between
//! git-session's processes (the agents of one repository edit its one config) nor against a plain
//! git command; and made so that a command killed while holding it (`kill -9` at any moment) never
//! blocks the next one (a boot killed while writing its index is completed by the rerun).
//!
//! As `save`'s `index.lock`: the holder holds an exclusive `flock` on its record
//! (`<git dir>/git-session-<name>-lock`) for as long as it may hold the lock, so git-session's
//! commands take turns and whoever takes the `flock` knows the last holder is gone. The lock file
//! is created under a name of its own, its inode written to the record, and only then linked to
//! `<name>.lock`: a lock with the recorded inode is one a killed git-session left, and is removed;
//! any other is another git process's, waited for on the one clock. The index's record is the one
//! `save` keeps (`ino <inode>` first in both), so either removes what the other left.
//!
//! The record names the lock by inode number and, where the file system keeps one, birth time
//! ([`identity`]): a number alone is reused at once (ext4 gives a freed inode to the next file
//! made), so once a killed holder's lock was removed by hand, a live git's `index.lock` could
//! carry the number the record still names.

use std::fs::File;
use std::io::{Seek as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};

/// The suffix of the file made before it becomes the lock.
const MAKING_SUFFIX: &str = ".git-session-making";

/// Which file of the git dir is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locked {
    /// `config`: the repository's shared config.
    Config,
    /// `index`: a work tree's index (its git dir's own).
    Index,
}

impl Locked {
    /// The file's name in the git dir.
    fn name(self) -> &'static str {
        match self {
            Locked::Config => "config",
            Locked::Index => "index",
        }
    }

    /// The record's name (flock'd while the lock is held; its content: the lock's [`identity`]
    /// or nothing).
    pub fn record(self) -> &'static str {
        match self {
            Locked::Config => "git-session-config-lock",
            Locked::Index => "git-session-index-lock",
        }
    }

    /// What the holder does, for the messages.
    fn doing(self) -> &'static str {
        match self {
            Locked::Config => "editing the repository's config",
            Locked::Index => "writing the work tree's index",
        }
    }
}

/// Git's lock on a file of the git dir: `<name>.lock`, ours while this lives (removed on drop
/// unless renamed over the file).
pub struct FileLock {
    path: PathBuf,
    file: Option<File>,
    /// Flock'd for as long as the lock may exist.
    record: File,
    locked: Locked,
}

impl FileLock {
    /// Take `<name>.lock` beside `target` (a file named as `locked` says), first removing one a
    /// killed git-session left.
    ///
    /// # Errors
    /// [`Error::Conflict`] (exit 7) when another git-session command, or another git process,
    /// holds it past `GIT_SESSION_LOCK_WAIT_S`; local I/O errors otherwise.
    pub fn take(target: &Path, locked: Locked) -> Result<Self> {
        let dir = target.parent().unwrap_or(Path::new("."));
        let name = locked.name();
        let path = target.with_file_name(format!("{name}.lock"));
        let record_path = dir.join(locked.record());
        let record = open_record(&record_path, "run the command again")?;
        crate::clock::lock(
            &record,
            &record_path,
            &format!("another git-session command {}", locked.doing()),
        )?;
        remove_what_a_killed_holder_left(&record, &path, name);
        let making = dir.join(format!("{name}.lock.{}{MAKING_SUFFIX}", std::process::id()));
        let file = create_new(&making)?;
        let made = file
            .metadata()
            .map_err(|e| Error::io(format!("reading {}", making.display()), e))?;
        let mut held = FileLock {
            path,
            file: Some(file),
            record,
            locked,
        };
        held.write_record(&format!("{}\n", identity(&made)))
            .map_err(|e| Error::io(format!("writing {}", record_path.display()), e))?;
        let linked = held.link(&making);
        let _ = std::fs::remove_file(&making);
        if linked.is_err() {
            held.file = None;
            let _ = held.write_record("");
        }
        linked.map(|()| held)
    }

    /// Link the made file to the lock, waiting while another git process holds it.
    fn link(&self, making: &Path) -> Result<()> {
        let wait = crate::knobs::get().lock_wait;
        let deadline = Instant::now() + wait;
        loop {
            match std::fs::hard_link(making, &self.path) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if Instant::now() >= deadline {
                        return Err(held_by_another(&self.path, wait.as_secs(), self.locked));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                // No hard links on this file system: rename instead (atomic, but it would
                // replace a lock another process made in between; git's own never is).
                Err(_) if !self.path.exists() => {
                    return std::fs::rename(making, &self.path)
                        .map_err(|e| Error::io(format!("creating {}", self.path.display()), e));
                }
                Err(e) => return Err(Error::io(format!("creating {}", self.path.display()), e)),
            }
        }
    }

    fn write_record(&mut self, text: &str) -> std::io::Result<()> {
        self.record.set_len(0)?;
        self.record.rewind()?;
        self.record.write_all(text.as_bytes())?;
        // The index is not flushed to disk (see `commit`): nor is its record.
        if self.locked == Locked::Config {
            self.record.sync_data()?;
        }
        Ok(())
    }

    /// Write `bytes` into the lock and rename it over `target`; `durable`: flushed to disk first
    /// (git does so for the config; the index is a cache of the tree, as git's default treats it).
    /// Failpoint `mid-index`: an index's bytes written into the lock, not yet renamed.
    ///
    /// # Errors
    /// Local I/O errors (the lock is removed).
    pub fn commit(mut self, target: &Path, bytes: &[u8], durable: bool) -> Result<()> {
        let mut file = self.file.take().expect("a lock is committed once");
        let mut written = file.write_all(bytes);
        if durable {
            written = written.and_then(|()| file.sync_all());
        }
        drop(file);
        if self.locked == Locked::Index {
            crate::failpoint::hit("mid-index");
        }
        let done = written.and_then(|()| std::fs::rename(&self.path, target));
        if let Err(e) = done {
            let _ = std::fs::remove_file(&self.path);
            let _ = self.write_record("");
            return Err(Error::io(format!("writing {}", target.display()), e));
        }
        if durable {
            crate::fs::sync_dir(target.parent().unwrap_or(Path::new(".")));
        }
        let _ = self.write_record("");
        Ok(())
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
            let _ = self.write_record("");
        }
    }
}

/// Open (or create, mode 0600) the lock record at `path`, refused when it is a symlink, not a
/// regular file or a hard link (it is written in place); `then`: what the refusal's hint says to
/// do once it is removed.
///
/// # Errors
/// [`Error::Conflict`]-kind refusals of [`crate::fs::state::refused`]; local I/O errors.
pub fn open_record(path: &Path, then: &str) -> Result<File> {
    let hint = format!("remove it, then {then}");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                crate::fs::state::refused(path, "a symlink", &hint)
            } else {
                Error::io(format!("opening {}", path.display()), e)
            }
        })?;
    // O_RDWR opens a FIFO without waiting, but reading the record would wait forever.
    let meta = file.metadata().ok().filter(std::fs::Metadata::is_file);
    let Some(meta) = meta else {
        return Err(crate::fs::state::refused(path, "not a regular file", &hint));
    };
    // Written in place: a hard link (to a file outside the tree, made by whoever built the
    // template) would have it emptied and overwritten, as root when the tree is root's.
    if meta.nlink() > 1 {
        return Err(crate::fs::state::refused(
            path,
            "a hard link (the file has other names)",
            &hint,
        ));
    }
    Ok(file)
}

fn create_new(path: &Path) -> Result<File> {
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))
}

/// Under the record's `flock`: a lock whose inode the record names was made by a holder that is
/// gone (the kernel dropped its `flock`); so were its half-made files (`<name>.lock.*-making`).
fn remove_what_a_killed_holder_left(mut record: &File, lock: &Path, name: &str) {
    use std::io::Read as _;
    let mut text = String::new();
    // Bounded: the record is a line of ours, but the folder's owner can grow it.
    if record.rewind().is_err()
        || record
            .take(crate::fs::state::RECORD_CAP)
            .read_to_string(&mut text)
            .is_err()
    {
        return;
    }
    let recorded = text.lines().find(|l| l.starts_with("ino "));
    if let (Some(line), Ok(meta)) = (recorded, std::fs::symlink_metadata(lock))
        && names(line, &meta)
    {
        tracing::info!("removing {}, left by a killed git-session", lock.display());
        let _ = std::fs::remove_file(lock);
    }
    let Some(dir) = lock.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let lock_name = name;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name
            .strip_prefix(lock_name)
            .is_some_and(|n| n.starts_with(".lock."))
            && name.ends_with(MAKING_SUFFIX)
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How a record names the lock file `meta` is of: `ino <inode>`, and ` born <s>.<ns>` where the
/// file system keeps a birth time (ext4, xfs, btrfs, tmpfs): an inode number is reused at once,
/// the pair never.
pub fn identity(meta: &std::fs::Metadata) -> String {
    match born(meta) {
        Some((s, ns)) => format!("ino {} born {s}.{ns:09}", meta.ino()),
        None => format!("ino {}", meta.ino()),
    }
}

/// Whether the record's line `line` ([`identity`]) names the regular file `meta` is of. A line
/// without a birth time (written by a git-session before this one, or on a file system keeping
/// none) names it by its inode number alone, as before.
pub fn names(line: &str, meta: &std::fs::Metadata) -> bool {
    let Some(rest) = line.strip_prefix("ino ") else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let ino = fields.next().and_then(|n| n.parse::<u64>().ok());
    if !meta.is_file() || ino != Some(meta.ino()) {
        return false;
    }
    match (fields.next(), fields.next(), fields.next()) {
        (None, _, _) => true,
        (Some("born"), Some(at), None) => {
            born(meta).is_some_and(|(s, ns)| at == format!("{s}.{ns:09}"))
        }
        _ => false,
    }
}

/// The birth time of the file `meta` is of, as seconds and nanoseconds since the epoch.
fn born(meta: &std::fs::Metadata) -> Option<(u64, u32)> {
    let at = meta.created().ok()?;
    let since = at.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some((since.as_secs(), since.subsec_nanos()))
}

fn held_by_another(lock: &Path, secs: u64, locked: Locked) -> Error {
    let result = match locked {
        Locked::Config => "nothing was changed",
        Locked::Index => "run the command again once it is gone",
    };
    Error::conflict(format!(
        "{} has been there for over {secs} s (GIT_SESSION_LOCK_WAIT_S): another git process is \
         {} (wait for it to end), or one that was killed left it (then remove it); {result}",
        lock.display(),
        locked.doing(),
    ))
}

#[cfg(test)]
// The tests read their own fixtures, not a work tree's files.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A record names the lock file by inode and birth time: a file of the recorded number but
    /// another birth (the number reused at once once the killed holder's lock was removed: ext4
    /// does) is not named; a line of an older git-session (no birth time) still is, by number.
    #[test]
    fn a_record_names_its_lock_by_inode_and_birth_not_by_number_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.lock");
        std::fs::write(&path, b"").unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(names(&identity(&meta), &meta));
        assert!(names(&format!("ino {}", meta.ino()), &meta));
        assert!(!names(&format!("ino {}", meta.ino() + 1), &meta));
        assert!(!names(&format!("ino {} x", meta.ino()), &meta));
        assert!(!names(&format!("{} born 1.5", identity(&meta)), &meta));
        if meta.created().is_ok() {
            let reborn = format!("ino {} born 1.000000000", meta.ino());
            assert!(!names(&reborn, &meta), "another file of the same number");
        }
        let link = dir.path().join("other");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let symlink = std::fs::symlink_metadata(&link).unwrap();
        assert!(
            !names(&identity(&symlink), &symlink),
            "a symlink is never ours"
        );
    }

    /// A FIFO or a symlink in place of a lock's record is refused at once (reading a FIFO's record
    /// would wait forever), for the index a restore writes as for the config; so is a hard link
    /// (the record is written in place: the file it shares would be emptied).
    #[test]
    fn a_record_that_is_not_a_regular_file_is_refused_not_waited_on() {
        for locked in [Locked::Index, Locked::Config] {
            let dir = tempfile::tempdir().unwrap();
            let record = dir.path().join(locked.record());
            let made = std::process::Command::new("mkfifo").arg(&record).status();
            assert!(made.unwrap().success());
            let target = dir.path().join(locked.name());
            let err = FileLock::take(&target, locked).err().expect("refused");
            assert!(format!("{err}").contains("not a regular file"), "{err}");
            std::fs::remove_file(&record).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", &record).unwrap();
            let err = FileLock::take(&target, locked).err().expect("refused");
            assert!(format!("{err}").contains("symlink"), "{err}");
            // A hard link to a file elsewhere: refused, that file never written.
            std::fs::remove_file(&record).unwrap();
            let outside = dir.path().join("outside");
            std::fs::write(&outside, "precious\n").unwrap();
            std::fs::hard_link(&outside, &record).unwrap();
            let err = FileLock::take(&target, locked).err().expect("refused");
            assert!(format!("{err}").contains("hard link"), "{err}");
            assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
        }
    }
}
