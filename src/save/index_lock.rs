//! `index.lock`, taken as git takes it (a file created beside the index that no other git command
//! will create while it exists, renamed over the index to commit), but made so that a save killed
//! while holding it (`kill -9`, a power cut) never blocks the next one, while a lock that a live git
//! process holds is still respected.
//!
//! How a lock is known to be ours: the save holds an exclusive `flock` on its record
//! (`.git/git-session-index-lock`) for as long as it may hold `index.lock`; the kernel drops the
//! `flock` when the process dies, so whoever takes it knows the previous holder is gone (no pid
//! reuse to fear). The lock file is first created under a name of its own, its inode written to
//! the record, and only then linked to `index.lock`: there is no moment when an `index.lock` of
//! ours exists without the record naming it. A later save that finds an `index.lock` with the
//! recorded inode removes it; any other `index.lock` is another git process's (exit 7).
//!
//! The branch is moved while the lock is held, by a ref transaction that takes `HEAD.lock` and the
//! branch's `.lock` (made by gix, so their inodes cannot be known first). The record names the
//! update first (`ref <new id> <time> <ref>`): a kill in the middle leaves locks that a later save
//! removes when they were made within seconds of that time and hold a start of the new id's line
//! or of HEAD's symbolic ref (a plain git command writes another id).

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The record of the lock a save takes (flock'd while it is held; its content: `ino <inode>`
/// and the lock's birth time, [`crate::repo::file_lock::identity`]).
pub const RECORD: &str = "git-session-index-lock";
/// The suffix of the file made before it becomes `index.lock`.
const MAKING_SUFFIX: &str = ".git-session-making";

/// `index.lock`, held: dropped without [`IndexLock::commit`], it is removed.
#[derive(Debug)]
pub struct IndexLock {
    lock: PathBuf,
    index: PathBuf,
    file: File,
    /// Flock'd for as long as the lock may exist.
    record: File,
    /// The record's first line (`ino <inode> born <time>`).
    ino_line: String,
    done: bool,
}

impl IndexLock {
    /// Take `index.lock` in the work tree's own git dir, first removing one a killed save left.
    ///
    /// # Errors
    /// [`Error::Conflict`] (exit 7) when another git process holds `index.lock`; local I/O
    /// errors otherwise.
    pub fn acquire(dirs: &crate::repo::dirs::GitDirs) -> Result<IndexLock> {
        let git_dir = dirs.git_dir.as_path();
        let index = git_dir.join("index");
        let lock = git_dir.join("index.lock");
        let record = open_record(git_dir)?;
        remove_what_a_killed_save_left(dirs, &lock, &record);
        let making = git_dir.join(format!("index.lock.{}{MAKING_SUFFIX}", std::process::id()));
        let _ = std::fs::remove_file(&making);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&making)
            .map_err(|e| Error::io(format!("creating {}", making.display()), e))?;
        let made = file
            .metadata()
            .map_err(|e| Error::io(format!("reading {}", making.display()), e))?;
        let mut held = IndexLock {
            lock,
            index,
            file,
            record,
            ino_line: format!("{}\n", crate::repo::file_lock::identity(&made)),
            done: false,
        };
        held.write_record(&held.ino_line.clone())
            .map_err(|e| Error::io(format!("writing {}", git_dir.join(RECORD).display()), e))?;
        crate::failpoint::hit("index-lock-made");
        let linked = std::fs::hard_link(&making, &held.lock);
        let _ = std::fs::remove_file(&making);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                held.done = true;
                let _ = held.write_record("");
                return Err(held_by_another(&held.lock));
            }
            // No hard links on this file system: create it in place, then record it.
            Err(_) => held.create_in_place()?,
        }
        crate::failpoint::hit("index-lock-taken");
        Ok(held)
    }

    /// Create `index.lock` directly (where hard links are refused): a kill before its inode is
    /// recorded leaves a lock that the next save refuses, as git would.
    fn create_in_place(&mut self) -> Result<()> {
        self.file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.lock)
            .map_err(|e| {
                self.done = true;
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    held_by_another(&self.lock)
                } else {
                    Error::io(format!("creating {}", self.lock.display()), e)
                }
            })?;
        self.ino_line = match self.file.metadata() {
            Ok(made) => format!("{}\n", crate::repo::file_lock::identity(&made)),
            Err(_) => "ino 0\n".to_owned(),
        };
        self.write_record(&self.ino_line.clone())
            .map_err(|e| Error::io("recording index.lock", e))
    }

    /// Record that `full_ref` (and `HEAD`) are about to be moved to `new`, until
    /// [`IndexLock::ref_update_ended`].
    ///
    /// # Errors
    /// Local I/O errors writing the record.
    pub fn ref_update_begins(&mut self, full_ref: &str, new: gix::ObjectId) -> Result<()> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let text = format!("{}ref {new} {now} {full_ref}\n", self.ino_line);
        self.write_record_at(&text, Some("index-lock-ref-recording"))
            .map_err(|e| Error::io("recording the branch update", e))
    }

    /// The ref transaction is over (its locks are gone).
    pub fn ref_update_ended(&mut self) {
        let _ = self.write_record_at(&self.ino_line.clone(), Some("index-lock-ref-ended"));
    }

    /// The lock file, to write the new index into.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Flush the lock file to disk and rename it over the index.
    ///
    /// # Errors
    /// The file system's refusal; the lock is removed then.
    pub fn commit(mut self) -> std::io::Result<()> {
        self.file.sync_all()?;
        std::fs::rename(&self.lock, &self.index)?;
        self.done = true;
        let _ = self.write_record("");
        Ok(())
    }

    fn write_record(&mut self, text: &str) -> std::io::Result<()> {
        self.write_record_at(text, None)
    }

    /// Overwrite the record in place, then cut what is left of a longer one. Never emptied on the
    /// way (a kill between a truncate and a write would leave `index.lock` unnamed): every content
    /// but the last ("") starts with the same `ino` line, so a kill between the two steps leaves
    /// that line, and at worst a stale `ref` line, which a later save checks before it acts.
    /// `failpoint` is hit between the two steps.
    fn write_record_at(&mut self, text: &str, failpoint: Option<&str>) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        self.record.write_all_at(text.as_bytes(), 0)?;
        if let Some(name) = failpoint {
            crate::failpoint::hit(name);
        }
        self.record.set_len(text.len() as u64)
    }
}

impl Drop for IndexLock {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.lock);
            let _ = self.write_record("");
        }
    }
}

/// Open the record and take its `flock`. The tree's write lock keeps other saves out, so the
/// `flock` is free unless a save of an older version runs without it: then wait like it.
fn open_record(git_dir: &Path) -> Result<File> {
    let path = git_dir.join(RECORD);
    let file = crate::repo::file_lock::open_record(&path, "save again")?;
    crate::clock::lock(&file, &path, "a save of an older git-session")?;
    Ok(file)
}

/// With the record's `flock` held (so whoever wrote it is gone): remove the `index.lock` it names,
/// and the files a killed save was making.
fn remove_what_a_killed_save_left(dirs: &crate::repo::dirs::GitDirs, lock: &Path, record: &File) {
    let git_dir = dirs.git_dir.as_path();
    use std::io::Read as _;
    let mut text = String::new();
    // Bounded: the record is a few short lines of ours.
    let _ = record
        .take(crate::fs::state::RECORD_CAP)
        .read_to_string(&mut text);
    let mut lines = text.lines();
    let recorded = lines.next().filter(|l| l.starts_with("ino "));
    if let Some(update) = lines.next().and_then(|l| l.strip_prefix("ref ")) {
        remove_ref_locks(git_dir, &dirs.common_dir, update);
    }
    if let (Some(line), Ok(meta)) = (recorded, std::fs::symlink_metadata(lock))
        && crate::repo::file_lock::names(line, &meta)
    {
        tracing::info!("removing the index.lock a killed save left");
        let _ = std::fs::remove_file(lock);
    }
    let Ok(entries) = std::fs::read_dir(git_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("index.lock.") && name.ends_with(MAKING_SUFFIX) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Remove `HEAD.lock` and the branch's lock left by a killed ref update (`update`: `<new id>
/// <unix ms> <full ref>`; `HEAD.lock` in the work tree's own git dir, the branch's in the common
/// dir): only files made within seconds of it holding the new id's line or
/// HEAD's symbolic ref, or a start of either (nothing, or a write cut short).
fn remove_ref_locks(git_dir: &Path, common_dir: &Path, update: &str) {
    let mut fields = update.split(' ');
    let (Some(new), Some(Ok(at)), Some(full_ref)) = (
        fields.next(),
        fields.next().map(str::parse::<u64>),
        fields.next(),
    ) else {
        return;
    };
    if full_ref.split('/').any(|c| c.is_empty() || c == "..") || !full_ref.starts_with("refs/") {
        return;
    }
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at);
    let symref = format!("ref: {full_ref}\n");
    let new_line = format!("{new}\n");
    for lock in [
        git_dir.join("HEAD.lock"),
        common_dir.join(format!("{full_ref}.lock")),
    ] {
        let Ok(meta) = std::fs::symlink_metadata(&lock) else {
            continue;
        };
        let near = meta.modified().is_ok_and(|m| {
            let gap = m.duration_since(at).or_else(|e| Ok::<_, ()>(e.duration()));
            gap.is_ok_and(|g| g < std::time::Duration::from_secs(5))
        });
        // At most what the check below admits (the lock's size is whoever made it's); one that
        // cannot be read is not taken for ours.
        let Ok(content) = crate::fs::read_regular(&lock, false, 255) else {
            continue;
        };
        // Any start of what gix writes there: the kill may fall between its writes (`writeln!`
        // writes the id, then the line break).
        let ours =
            new_line.as_bytes().starts_with(&content) || symref.as_bytes().starts_with(&content);
        if meta.is_file() && meta.len() < 256 && near && ours {
            tracing::info!("removing the {} a killed save left", lock.display());
            let _ = std::fs::remove_file(&lock);
        }
    }
}

fn held_by_another(lock: &Path) -> Error {
    Error::conflict(format!(
        "{} exists: another git process is using this repository (if none is running, remove \
         the file and save again)",
        lock.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A save killed while gix wrote a ref lock leaves any prefix of what it writes there (git's
    /// `writeln!` is two writes: the id, then the line break): each is removed, in both formats.
    #[test]
    fn a_lock_cut_short_by_the_kill_is_removed_and_another_gits_is_not() {
        for hex in ["1".repeat(40), "2".repeat(64)] {
            let dir = tempfile::tempdir().unwrap();
            let git_dir = dir.path();
            std::fs::create_dir_all(git_dir.join("refs/heads/sessions")).unwrap();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis();
            let update = format!("{hex} {now} refs/heads/sessions/x");
            let symref = "ref: refs/heads/sessions/x\n";
            let line = format!("{hex}\n");
            for content in [
                "",
                &hex[..7],
                hex.as_str(),
                line.as_str(),
                &symref[..9],
                symref,
            ] {
                for lock in ["HEAD.lock", "refs/heads/sessions/x.lock"] {
                    std::fs::write(git_dir.join(lock), content).unwrap();
                }
                remove_ref_locks(git_dir, git_dir, &update);
                for lock in ["HEAD.lock", "refs/heads/sessions/x.lock"] {
                    assert!(!git_dir.join(lock).exists(), "{lock} holding {content:?}");
                }
            }
            // Another id (a plain git command's), or more than git-session's line: kept.
            let other = "3".repeat(hex.len());
            for content in [format!("{other}\n"), format!("{line}x")] {
                std::fs::write(git_dir.join("HEAD.lock"), &content).unwrap();
                remove_ref_locks(git_dir, git_dir, &update);
                assert!(git_dir.join("HEAD.lock").exists(), "{content:?}");
            }
        }
    }
}
