//! The local Git LFS store as git-lfs lays it out (`.git/lfs/objects/ab/cd/abcd…`), and the list
//! of objects `save` stored that the LFS server may still lack (`.git/lfs/git-session-pending`,
//! one `oid size` per line), uploaded by the next push.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::hint::Hint;
use crate::types::lfs::{Oid, Pointer};

/// The pending list's file, below the git dir.
const PENDING: &str = "lfs/git-session-pending";

/// The most of the pending list read (one line is 80 bytes: about 200,000 objects).
const MAX_PENDING: u64 = 16 << 20;

/// The most of the work tree's `.lfsconfig` read.
const MAX_LFSCONFIG: u64 = 64 << 10;

/// Where the object of `pointer` is kept.
pub fn object_path(git_dir: &Path, pointer: &Pointer) -> PathBuf {
    let hex = pointer.oid.to_string();
    git_dir
        .join("lfs/objects")
        .join(&hex[..2])
        .join(&hex[2..4])
        .join(hex)
}

/// Whether the store holds `pointer`'s object whole (objects are renamed in only once checked).
pub fn has(git_dir: &Path, pointer: &Pointer) -> bool {
    std::fs::symlink_metadata(object_path(git_dir, pointer))
        .is_ok_and(|m| m.is_file() && m.len() == pointer.size)
}

/// Whether the file at `path` holds `pointer`'s object (its size, then its SHA-256, read a
/// chunk at a time).
pub fn file_holds(path: &Path, pointer: &Pointer) -> bool {
    use std::io::Read as _;
    let Ok(mut file) = crate::fs::open_regular(path, false) else {
        return false;
    };
    if !file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() == pointer.size)
    {
        return false;
    }
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 256 << 10];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => digest.update(&buf[..n]),
            Err(_) => return false,
        }
    }
    Oid::of_digest(&digest.finish()) == pointer.oid
}

/// Store `data` as an LFS object (a temporary file renamed in); returns its pointer.
///
/// # Errors
/// [`Error::LocalIo`] when the disk refuses.
pub fn store(git_dir: &Path, data: &[u8]) -> Result<Pointer> {
    let pointer = Pointer {
        oid: Oid::of(data),
        size: data.len() as u64,
    };
    if has(git_dir, &pointer) {
        return Ok(pointer);
    }
    let dest = object_path(git_dir, &pointer);
    let tmp_dir = git_dir.join("lfs/tmp");
    for dir in [tmp_dir.as_path(), dest.parent().unwrap_or(git_dir)] {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let mut tmp = tempfile::NamedTempFile::new_in(&tmp_dir)
        .map_err(|e| Error::io(format!("creating a file in {}", tmp_dir.display()), e))?;
    tmp.write_all(data)
        .map_err(|e| Error::io(format!("writing {}", tmp.path().display()), e))?;
    tmp.persist(&dest)
        .map_err(|e| Error::io(format!("writing {}", dest.display()), e.error))?;
    Ok(pointer)
}

/// Add `pointers` to the pending list.
///
/// # Errors
/// [`Error::LocalIo`] when the disk refuses.
pub fn add_pending(git_dir: &Path, pointers: &[Pointer]) -> Result<()> {
    if pointers.is_empty() {
        return Ok(());
    }
    let mut all = pending(git_dir)?;
    all.extend_from_slice(pointers);
    write_pending(git_dir, all)
}

/// The objects stored by `save` not yet known to be on the LFS server.
///
/// # Errors
/// [`Error::LocalIo`] / [`Error::Internal`] when the list cannot be read.
pub fn pending(git_dir: &Path) -> Result<Vec<Pointer>> {
    let fix = format!(
        "remove it ({}) and upload the LFS objects with {}",
        Hint::Remove(git_dir.join(PENDING)),
        Hint::LfsPushAll
    );
    let Some(bytes) = crate::fs::state::read(&git_dir.join(PENDING), MAX_PENDING, &fix)? else {
        return Ok(Vec::new());
    };
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| {
            let (oid, size) = l.split_once(' ')?;
            Some(Pointer {
                oid: Oid::from_hex(oid)?,
                size: size.parse().ok()?,
            })
        })
        .collect())
}

/// Take `done` off the pending list.
///
/// # Errors
/// [`Error::LocalIo`] when the disk refuses.
pub fn clear_pending(git_dir: &Path, done: &[Pointer]) -> Result<()> {
    let left: Vec<Pointer> = pending(git_dir)?
        .into_iter()
        .filter(|p| !done.contains(p))
        .collect();
    write_pending(git_dir, left)
}

fn write_pending(git_dir: &Path, mut all: Vec<Pointer>) -> Result<()> {
    all.sort();
    all.dedup();
    let path = git_dir.join(PENDING);
    if all.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("removing {}", path.display()), e))
            }
            _ => Ok(()),
        };
    }
    let text: String = all
        .iter()
        .map(|p| format!("{} {}\n", p.oid, p.size))
        .collect();
    std::fs::create_dir_all(git_dir.join("lfs"))
        .map_err(|e| Error::io(format!("creating {}", git_dir.join("lfs").display()), e))?;
    crate::fs::write_atomic(&path, text.as_bytes())
}

/// `lfs.url` of a `.lfsconfig` text (a git config file; includes are not followed).
pub fn configured_url(bytes: &[u8]) -> Option<String> {
    if bytes.len() as u64 > MAX_LFSCONFIG {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let file: gix::config::File = text.parse().ok()?;
    file.string("lfs.url").map(|s| s.to_string())
}

/// `lfs.url` of the work tree's `.lfsconfig` (read bounded, never through a symlink).
pub fn worktree_url(workdir: &Path) -> Option<String> {
    let bytes = crate::fs::state::read(&workdir.join(".lfsconfig"), MAX_LFSCONFIG, "")
        .ok()
        .flatten()?;
    configured_url(&bytes)
}
