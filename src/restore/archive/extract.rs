//! Extraction of untrusted tar members into a fresh staging folder, contained by rules this module
//! enforces itself (SPEC rule 7), whatever the tar library would allow:
//! - only regular files, directories and symlinks; hard links, devices, FIFOs and anything else: exit 6;
//! - no absolute path, no `..`, no `.git` component in any spelling (git's NTFS and HFS rules,
//!   through `gix::validate::path::component`), checked on the raw path before any prefix is stripped;
//! - nothing is written or created through a symlink: every ancestor of a member must be a directory
//!   this extraction made; files are created with `O_CREAT|O_EXCL`, which never follows a link;
//! - a path that appears twice with different types is refused;
//! - modes come from the execute bit alone (0666/0777 before the umask, as git checks out);
//! - symlinks are created as recorded (their targets are not interpreted), as git does.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use super::tar_stream::{Kind, Member, TarStream, read_error};
use crate::error::{Error, Result};
use crate::restore::checkout::protections;

/// How many leading path components to drop.
#[derive(Debug, Clone, Copy)]
pub enum Strip {
    /// One, when the first member's top-level folder name holds the commit id's first 7 hex digits
    /// (as `git archive --prefix=repo-<id>/` and code-storage archive endpoints write), else none.
    Auto,
    /// Exactly this many (`--strip-components N`).
    Components(usize),
}

/// What an extraction produced.
#[derive(Debug, Default)]
pub struct Extracted {
    /// Regular files written.
    pub files: usize,
    /// Symlinks created.
    pub symlinks: usize,
    /// Directories created.
    pub dirs: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    File,
    Dir,
    Symlink,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::File => "a file",
            Type::Dir => "a directory",
            Type::Symlink => "a symlink",
        }
    }
}

fn unsafe_entry(path: &[u8], why: impl std::fmt::Display) -> Error {
    Error::Integrity(format!(
        "unsafe archive entry '{}': {why}; nothing was restored",
        String::from_utf8_lossy(path).escape_debug()
    ))
}

/// Extract every member of `stream` below `root` (an empty directory).
///
/// `tip_hex` is the commit id, for [`Strip::Auto`].
///
/// # Errors
/// [`Error::Integrity`] (exit 6) for any unsafe member or a corrupt stream; [`Error::Network`] when
/// the transport broke; [`Error::Internal`] for local I/O failures.
pub fn extract<R: Read>(
    stream: &mut TarStream<R>,
    root: &Path,
    strip: Strip,
    tip_hex: &str,
) -> Result<Extracted> {
    let mut seen: HashMap<Vec<u8>, Type> = HashMap::new();
    let mut out = Extracted::default();
    let mut strip_state: Option<(usize, Option<Vec<u8>>)> = match strip {
        Strip::Components(n) => Some((n, None)),
        Strip::Auto => None,
    };
    while let Some(member) = stream.next_member()? {
        let Member { path, kind } = member;
        let components = check_raw_path(&path, &kind)?;
        if let Kind::Other(flag) = kind {
            return Err(unsafe_entry(&path, type_name(flag)));
        }
        let (n, prefix) = strip_state.get_or_insert_with(|| {
            let first = components.first().cloned().unwrap_or_default();
            let holds_id = first.len() >= 7
                && String::from_utf8_lossy(&first)
                    .to_ascii_lowercase()
                    .contains(&tip_hex[..7]);
            let is_folder = components.len() > 1 || kind == Kind::Dir;
            if holds_id && is_folder {
                (1, Some(first))
            } else {
                (0, None)
            }
        });
        if let Some(prefix) = prefix
            && components.first() != Some(prefix)
        {
            return Err(unsafe_entry(
                &path,
                "outside the archive's single top-level folder",
            ));
        }
        if components.len() <= *n {
            // The stripped folder itself.
            continue;
        }
        let rel = &components[*n..];
        let ty = match &kind {
            Kind::File { .. } => Type::File,
            Kind::Dir => Type::Dir,
            Kind::Symlink(_) => Type::Symlink,
            Kind::Other(_) => unreachable!("refused above"),
        };
        // Every ancestor must be a directory made by this extraction: never write through a link.
        let mut key: Vec<u8> = Vec::new();
        for comp in &rel[..rel.len() - 1] {
            if !key.is_empty() {
                key.push(b'/');
            }
            key.extend_from_slice(comp);
            match seen.get(&key) {
                Some(Type::Dir) => {}
                Some(other) => {
                    return Err(unsafe_entry(
                        &path,
                        format!("its parent is {} in this archive", other.name()),
                    ));
                }
                None => {
                    let dir = root.join(OsStr::from_bytes(&key));
                    std::fs::create_dir(&dir)
                        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
                    seen.insert(key.clone(), Type::Dir);
                    out.dirs += 1;
                }
            }
        }
        let full = rel.join(&b'/');
        let target: PathBuf = root.join(OsStr::from_bytes(&full));
        match seen.get(&full).copied() {
            Some(prev) if prev != ty => {
                return Err(unsafe_entry(
                    &path,
                    format!("it appears twice, as {} and as {}", prev.name(), ty.name()),
                ));
            }
            Some(Type::Dir) => continue,
            Some(_) => {
                // The same file or symlink again: the later one wins, as tar does.
                std::fs::remove_file(&target)
                    .map_err(|e| Error::io(format!("replacing {}", target.display()), e))?;
            }
            None => {}
        }
        match kind {
            Kind::Dir => {
                std::fs::create_dir(&target)
                    .map_err(|e| Error::io(format!("creating {}", target.display()), e))?;
                out.dirs += 1;
            }
            Kind::File { exec } => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(if exec { 0o777 } else { 0o666 })
                    .open(&target)
                    .map_err(|e| Error::io(format!("creating {}", target.display()), e))?;
                let mut w = BufWriter::with_capacity(64 * 1024, file);
                copy(&mut stream.data(), &mut w, &target)?;
                w.flush()
                    .map_err(|e| Error::io(format!("writing {}", target.display()), e))?;
                out.files += 1;
            }
            Kind::Symlink(link) => {
                if link.is_empty() || link.contains(&0) {
                    return Err(unsafe_entry(&path, "a symlink without a usable target"));
                }
                std::os::unix::fs::symlink(OsStr::from_bytes(&link), &target).map_err(|e| {
                    Error::io(format!("creating the symlink {}", target.display()), e)
                })?;
                out.symlinks += 1;
            }
            Kind::Other(_) => unreachable!("refused above"),
        }
        seen.insert(full, ty);
    }
    Ok(out)
}

fn copy(from: &mut impl Read, to: &mut impl Write, target: &Path) -> Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_error(e)),
        };
        to.write_all(&buf[..n])
            .map_err(|e| Error::io(format!("writing {}", target.display()), e))?;
    }
}

fn type_name(flag: u8) -> String {
    match flag {
        b'1' => "a hard link (git archive never writes them)".into(),
        b'3' => "a character device".into(),
        b'4' => "a block device".into(),
        b'6' => "a FIFO".into(),
        b'S' => "a sparse file".into(),
        other => format!("an entry of type '{}'", (other as char).escape_default()),
    }
}

/// Split a raw member path into components and refuse what can escape or reach `.git`.
fn check_raw_path(path: &[u8], kind: &Kind) -> Result<Vec<Vec<u8>>> {
    if path.is_empty() {
        return Err(unsafe_entry(path, "an empty path"));
    }
    if path.contains(&0) {
        return Err(unsafe_entry(path, "a NUL byte in the path"));
    }
    if path[0] == b'/' {
        return Err(unsafe_entry(path, "an absolute path"));
    }
    let mut comps = Vec::new();
    let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    let last_index = parts.iter().rposition(|p| !p.is_empty() && *p != b".");
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == b"." {
            continue;
        }
        if *part == b".." {
            return Err(unsafe_entry(path, "a '..' component"));
        }
        let mode = (Some(i) == last_index && matches!(kind, Kind::Symlink(_)))
            .then_some(gix::validate::path::component::Mode::Symlink);
        gix::validate::path::component((*part).into(), mode, protections())
            .map_err(|e| unsafe_entry(path, format!("a forbidden path component ({e})")))?;
        comps.push(part.to_vec());
    }
    if comps.is_empty() {
        // "./" or similar: the archive root itself.
        return Ok(comps);
    }
    Ok(comps)
}
