//! `config.lock`, taken as git takes it (created beside the config, renamed over it to commit), so
//! that no edit of the shared config is lost, neither between git-session's processes (the agents
//! of one repository edit its one config) nor against a plain `git config`; and made so that a
//! command killed while holding it (`kill -9` at any moment) never blocks the next one.
//!
//! As `save`'s `index.lock`: the editor holds an exclusive `flock` on its record
//! (`<git dir>/git-session-config-lock`) for as long as it may hold `config.lock`, so git-session's
//! editors take turns and whoever takes the `flock` knows the last holder is gone. The lock file
//! is created under a name of its own, its inode written to the record, and only then linked to
//! `config.lock`: a `config.lock` with the recorded inode is one a killed editor left, and is
//! removed; any other is another git process's, waited for on the one clock.

use std::fs::File;
use std::io::{Seek as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};

/// The record of the lock (flock'd while it is held; its content: `ino <inode>` or nothing).
pub const RECORD: &str = "git-session-config-lock";
/// The suffix of the file made before it becomes `config.lock`.
const MAKING_SUFFIX: &str = ".git-session-making";

/// Git's lock on a config file: `config.lock`, ours while this lives (removed on drop unless
/// renamed over the config).
pub(super) struct ConfigLock {
    path: PathBuf,
    file: Option<File>,
    /// Flock'd for as long as the lock may exist.
    record: File,
}

impl ConfigLock {
    /// Take `config.lock` beside `config`, first removing one a killed git-session left.
    ///
    /// # Errors
    /// [`Error::Conflict`] (exit 7) when another git-session command, or another git process,
    /// holds it past `GIT_SESSION_LOCK_WAIT_S`; local I/O errors otherwise.
    pub(super) fn take(config: &Path) -> Result<Self> {
        let dir = config.parent().unwrap_or(Path::new("."));
        let path = config.with_file_name("config.lock");
        let record_path = dir.join(RECORD);
        let record = open_record(&record_path)?;
        crate::clock::lock(
            &record,
            &record_path,
            "another git-session command editing the repository's config",
        )?;
        remove_what_a_killed_editor_left(&record, &path);
        let making = dir.join(format!("config.lock.{}{MAKING_SUFFIX}", std::process::id()));
        let file = create_new(&making)?;
        let ino = file
            .metadata()
            .map_err(|e| Error::io(format!("reading {}", making.display()), e))?
            .ino();
        let mut held = ConfigLock {
            path,
            file: Some(file),
            record,
        };
        held.write_record(&format!("ino {ino}\n"))
            .map_err(|e| Error::io(format!("writing {}", record_path.display()), e))?;
        let linked = held.link(&making);
        let _ = std::fs::remove_file(&making);
        if linked.is_err() {
            held.file = None;
            let _ = held.write_record("");
        }
        linked.map(|()| held)
    }

    /// Link the made file to `config.lock`, waiting while another git process holds it.
    fn link(&self, making: &Path) -> Result<()> {
        let wait = crate::knobs::get().lock_wait;
        let deadline = Instant::now() + wait;
        loop {
            match std::fs::hard_link(making, &self.path) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if Instant::now() >= deadline {
                        return Err(held_by_another(&self.path, wait.as_secs()));
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
        self.record.sync_data()
    }

    /// Write `bytes` into the lock and rename it over `config`.
    pub(super) fn commit(mut self, config: &Path, bytes: &[u8]) -> Result<()> {
        let mut file = self.file.take().expect("a lock is committed once");
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        drop(file);
        let done = written.and_then(|()| std::fs::rename(&self.path, config));
        if let Err(e) = done {
            let _ = std::fs::remove_file(&self.path);
            let _ = self.write_record("");
            return Err(Error::io(format!("writing {}", config.display()), e));
        }
        crate::fs::sync_dir(config.parent().unwrap_or(Path::new(".")));
        let _ = self.write_record("");
        Ok(())
    }
}

impl Drop for ConfigLock {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
            let _ = self.write_record("");
        }
    }
}

fn open_record(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))
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

/// Under the record's `flock`: a `config.lock` whose inode the record names was made by an editor
/// that is gone (the kernel dropped its `flock`); so were its half-made files.
fn remove_what_a_killed_editor_left(mut record: &File, lock: &Path) {
    use std::io::Read as _;
    let mut text = String::new();
    if record.rewind().is_err() || record.read_to_string(&mut text).is_err() {
        return;
    }
    let recorded = text
        .lines()
        .find_map(|l| l.strip_prefix("ino "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    if let (Some(ino), Ok(meta)) = (recorded, std::fs::symlink_metadata(lock))
        && meta.is_file()
        && meta.ino() == ino
    {
        tracing::info!("removing {}, left by a killed git-session", lock.display());
        let _ = std::fs::remove_file(lock);
    }
    let Some(dir) = lock.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("config.lock.") && name.ends_with(MAKING_SUFFIX) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn held_by_another(lock: &Path, secs: u64) -> Error {
    Error::conflict(format!(
        "{} has been there for over {secs} s (GIT_SESSION_LOCK_WAIT_S): another git process is \
         editing the repository's config (wait for it to end), or one that was killed left it \
         (then remove it); nothing was changed",
        lock.display()
    ))
}
