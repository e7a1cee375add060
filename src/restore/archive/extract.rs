//! Extraction of untrusted tar members into a fresh staging folder, contained by rules this module
//! enforces itself (SPEC rule 7), whatever the tar library would allow:
//! - only regular files, directories and symlinks; hard links, devices, FIFOs and anything else: exit 6;
//! - no absolute path, no `..`, no `.git` component in any spelling (git's NTFS and HFS rules,
//!   through `gix::validate::path::component`), checked on the raw path before any prefix is stripped;
//! - nothing is written or created through a symlink: every write goes through one handle on the
//!   fresh folder ([`crate::fs::tree`]: resolved beneath it by the kernel), every ancestor of a
//!   member must be a real directory, and files are created with `O_CREAT|O_EXCL|O_NOFOLLOW`;
//! - the top-level name `.git-session-restore` (where the git dir is built) is refused;
//! - a path that appears twice with different types is refused;
//! - modes come from the execute bit alone (0666/0777 before the umask, as git checks out);
//! - symlinks are created as recorded (their targets are not interpreted), as git does.

use std::ffi::OsStr;
use std::io::{BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::tar_stream::{Kind, Member, TarStream, read_error};
use crate::error::{Error, Result};
use crate::fs::tree::{Kind as TreeKind, Tree};
use crate::names::STAGING_DIR;
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
    /// Every file and symlink with its blob id, in the archive's order.
    pub blobs: Vec<super::blobs::Blob>,
    /// Regular files written.
    pub files: usize,
    /// Symlinks created.
    pub symlinks: usize,
    /// Directories created.
    pub dirs: usize,
    /// The symlinks' targets, when hashing: git reads a symlink's blob to check it (a file it
    /// hashes), so these blobs are stored locally rather than fetched from the promisor.
    pub links: Vec<Vec<u8>>,
    /// The fewest folders above any file or symlink of the archive, counted before any strip
    /// (`None`: the archive holds none): the `--strip-components` that keeps every file.
    pub shallowest: Option<usize>,
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
/// What is already below `root` is judged by the file system itself (`lstat`, never following a
/// link), not by a table of the paths seen: this extraction is the only writer there, so memory
/// stays bounded whatever the number of members. The last parent directory checked is remembered:
/// once a directory, a path stays one (a member of another type at that path is refused).
///
/// # Errors
/// [`Error::Integrity`] (exit 6) for any unsafe member or a corrupt stream; [`Error::Network`] when
/// the transport broke; [`Error::Internal`] for local I/O failures.
pub fn extract<R: Read>(
    stream: &mut TarStream<R>,
    root: &Tree,
    strip: Strip,
    tip_hex: &str,
    hash: super::blobs::Hash<'_>,
) -> Result<Extracted> {
    let mut extraction = Extraction {
        root,
        tip_hex,
        strip: match strip {
            Strip::Components(n) => Some((n, None)),
            Strip::Auto => None,
        },
        checked_parent: Vec::new(),
        out: Extracted::default(),
        hashing: match hash {
            super::blobs::Hash::Skip => None,
            super::blobs::Hash::Ids(format) => Some(super::blobs::Hashing::start(format, None)?),
            super::blobs::Hash::IdsAndPack(dir, format) => {
                Some(super::blobs::Hashing::start(format, Some(dir))?)
            }
        },
    };
    while let Some(member) = stream.next_member()? {
        // git archive writes the commit id first: a wrong archive stops here, not at its end.
        if let Some(id) = &stream.commit_id {
            check_commit_id(id, tip_hex)?;
        }
        let Member { path, kind } = member;
        if let Some(target) = extraction.place(&path, &kind)? {
            extraction.create(stream, &path, kind, &target)?;
        }
    }
    let Extraction {
        mut out, hashing, ..
    } = extraction;
    if let Some(hashing) = hashing {
        out.blobs = hashing.finish()?;
    }
    Ok(out)
}

/// The state of one [`extract`].
struct Extraction<'a> {
    root: &'a Tree,
    tip_hex: &'a str,
    /// Components to drop, and the top-level folder they are (with [`Strip::Auto`]); decided by
    /// the first member.
    strip: Option<(usize, Option<Vec<u8>>)>,
    /// The parent (relative, its components) whose every component was last checked to be a
    /// directory.
    checked_parent: Vec<Vec<u8>>,
    out: Extracted,
    /// The blob ids of the files and symlinks, hashed beside the extraction (when the index is
    /// to be written: their memory grows with the number of files, as the index does).
    hashing: Option<super::blobs::Hashing>,
}

impl Extraction<'_> {
    /// Where the member `path` goes below the root, every rule checked and its parents created;
    /// `None` when there is nothing to create (a stripped folder, a directory already there).
    fn place(&mut self, path: &[u8], kind: &Kind) -> Result<Option<PathBuf>> {
        let components = check_raw_path(path, kind)?;
        let ty = match kind {
            Kind::File { .. } => Type::File,
            Kind::Dir => Type::Dir,
            Kind::Symlink(_) => Type::Symlink,
            Kind::Other(flag) => return Err(unsafe_entry(path, type_name(*flag))),
        };
        let n = self.stripped(path, &components, ty, kind)?;
        if ty != Type::Dir {
            let depth = components.len().saturating_sub(1);
            self.out.shallowest = Some(self.out.shallowest.map_or(depth, |d| d.min(depth)));
        }
        if components.len() <= n {
            // The stripped folder itself (or, with --strip-components, a member above the cut).
            return Ok(None);
        }
        let rel = &components[n..];
        if rel[0].eq_ignore_ascii_case(STAGING_DIR.as_bytes()) {
            // The git dir is built there and becomes `.git`: an entry there would be a hook or config.
            return Err(unsafe_entry(
                path,
                format!("{STAGING_DIR} is where git-session builds the git dir"),
            ));
        }
        // Every ancestor must be a real directory: never write through a link. Those the last
        // member's parent shares were checked then: only the rest are looked at, so a chain of
        // folders each one deeper costs one lookup each, not one per level (2,000 levels: 2
        // million lookups of paths up to 4 KiB long).
        let parent = &rel[..rel.len() - 1];
        if self.checked_parent.as_slice() != parent {
            let known = self
                .checked_parent
                .iter()
                .zip(parent)
                .take_while(|(a, b)| a == b)
                .count();
            ensure_dirs(self.root, parent, known, path, &mut self.out)?;
            self.checked_parent = parent.to_vec();
        }
        Ok(Some(PathBuf::from(OsStr::from_bytes(&rel.join(&b'/')))))
    }

    /// Something is at `target` already (the create said so: nothing is looked up before it, one
    /// syscall per member): a member of the same type again is replaced, the later wins, as tar
    /// does (counted once); another type is refused. `Ok(false)`: a directory already there,
    /// nothing to create.
    fn clear(&mut self, path: &[u8], ty: Type, target: &Path) -> Result<bool> {
        match existing_type(self.root, target, path)? {
            Some(prev) if prev != ty => Err(unsafe_entry(
                path,
                format!("it appears twice, as {} and as {}", prev.name(), ty.name()),
            )),
            Some(Type::Dir) => Ok(false),
            Some(prev) => {
                self.root.remove_file(target).map_err(|e| {
                    Error::io(
                        format!("replacing {}", self.root.shown(target).display()),
                        e,
                    )
                })?;
                match prev {
                    Type::File => self.out.files -= 1,
                    _ => self.out.symlinks -= 1,
                }
                Ok(true)
            }
            // Gone meanwhile: create it.
            None => Ok(true),
        }
    }

    /// How many leading components of `path` to drop. With [`Strip::Auto`] the first member
    /// decides; after it, every member must be inside the folder it stripped.
    fn stripped(
        &mut self,
        path: &[u8],
        components: &[Vec<u8>],
        ty: Type,
        kind: &Kind,
    ) -> Result<usize> {
        let tip_hex = self.tip_hex;
        let (n, prefix) = self.strip.get_or_insert_with(|| {
            let first = components.first().cloned().unwrap_or_default();
            let holds_id = first.len() >= 7
                && String::from_utf8_lossy(&first)
                    .to_ascii_lowercase()
                    .contains(&tip_hex[..7]);
            let is_folder = components.len() > 1 || *kind == Kind::Dir;
            if holds_id && is_folder {
                (1, Some(first))
            } else {
                (0, None)
            }
        });
        if let Some(prefix) = prefix {
            if components.first() != Some(prefix) {
                return Err(unsafe_entry(
                    path,
                    "outside the archive's single top-level folder",
                ));
            }
            if components.len() == 1 && ty != Type::Dir {
                return Err(unsafe_entry(
                    path,
                    format!(
                        "the archive's top-level folder appears again as {}",
                        ty.name()
                    ),
                ));
            }
        }
        Ok(*n)
    }

    /// Create the member at `target` (nothing is there: see [`Extraction::place`]); a file is
    /// created with `O_EXCL | O_NOFOLLOW`, through the tree's handle.
    fn create<R: Read>(
        &mut self,
        stream: &mut TarStream<R>,
        path: &[u8],
        kind: Kind,
        target: &Path,
    ) -> Result<()> {
        let root = self.root;
        let shown = || root.shown(target);
        match kind {
            Kind::Dir => {
                if self
                    .made(path, Type::Dir, target, || root.create_dir(target))?
                    .is_some()
                {
                    self.out.dirs += 1;
                }
            }
            Kind::File { exec } => {
                let made = self.made(path, Type::File, target, || root.create_new(target, exec))?;
                let Some(file) = made else {
                    unreachable!("a file is created or refused")
                };
                let mode = if exec {
                    gix::index::entry::Mode::FILE_EXECUTABLE
                } else {
                    gix::index::entry::Mode::FILE
                };
                if let Some(h) = &mut self.hashing {
                    h.begin(index_path(target), mode, stream.data_len());
                }
                let mut w = BufWriter::with_capacity(64 * 1024, file);
                copy(&mut stream.data(), &mut w, &shown(), self.hashing.as_mut())?;
                let file = w.into_inner().map_err(|e| {
                    Error::io(format!("writing {}", shown().display()), e.into_error())
                })?;
                if let Some(h) = &mut self.hashing {
                    // Read from the open file, with no path lookup (see `index::write` for when
                    // the move into place changes it).
                    let stat = gix::index::fs::Metadata::from_file(&file)
                        .ok()
                        .and_then(|m| gix::index::entry::Stat::from_fs(&m).ok());
                    h.end(stat);
                }
                self.out.files += 1;
                if self.out.files == 10 {
                    crate::failpoint::barrier("hold-mid-extract");
                }
            }
            Kind::Symlink(link) => {
                if link.is_empty() || link.contains(&0) {
                    return Err(unsafe_entry(path, "a symlink without a usable target"));
                }
                let contents = Path::new(OsStr::from_bytes(&link));
                self.made(path, Type::Symlink, target, || {
                    root.symlink(contents, target)
                })?;
                if let Some(h) = &mut self.hashing {
                    let mode = gix::index::entry::Mode::SYMLINK;
                    h.begin(index_path(target), mode, link.len() as u64);
                    h.update(&link);
                    h.end(None);
                    self.out.links.push(link);
                }
                self.out.symlinks += 1;
            }
            Kind::Other(_) => unreachable!("refused by Extraction::place"),
        }
        Ok(())
    }
}

impl Extraction<'_> {
    /// Run `create` for the member `path` at `target`; when something is there already, clear
    /// it (see [`Extraction::clear`]) and run it once more. `None`: a directory was there.
    fn made<T>(
        &mut self,
        path: &[u8],
        ty: Type,
        target: &Path,
        create: impl Fn() -> std::io::Result<T>,
    ) -> Result<Option<T>> {
        let failed = |e| create_error(path, &self.root.shown(target), e);
        match create() {
            Ok(made) => Ok(Some(made)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if !self.clear(path, ty, target)? {
                    return Ok(None);
                }
                create()
                    .map(Some)
                    .map_err(|e| create_error(path, &self.root.shown(target), e))
            }
            Err(e) => Err(failed(e)),
        }
    }
}

/// What is at `rel` (not following a link), if anything; `member` names the archive entry.
fn existing_type(root: &Tree, rel: &Path, member: &[u8]) -> Result<Option<Type>> {
    match root.kind(rel) {
        Ok(None) => Ok(None),
        Ok(Some(TreeKind::Dir)) => Ok(Some(Type::Dir)),
        Ok(Some(TreeKind::Symlink)) => Ok(Some(Type::Symlink)),
        Ok(Some(TreeKind::File)) => Ok(Some(Type::File)),
        // Only this extraction writes there: something else put it there meanwhile.
        Ok(Some(TreeKind::Other)) => Err(Error::conflict(format!(
            "{} is neither a file, a directory nor a symlink (put there while the archive was \
             extracted?): remove it, then restore again",
            root.shown(rel).display()
        ))),
        Err(e) => Err(create_error(member, &root.shown(rel), e)),
    }
}

/// Make sure `root/comps…` is a chain of real directories, creating the missing ones; the first
/// `known` were checked already.
fn ensure_dirs(
    root: &Tree,
    comps: &[Vec<u8>],
    known: usize,
    path: &[u8],
    out: &mut Extracted,
) -> Result<()> {
    let mut dir: PathBuf = comps[..known]
        .iter()
        .map(|c| OsStr::from_bytes(c))
        .collect();
    for comp in &comps[known..] {
        dir.push(OsStr::from_bytes(comp));
        match existing_type(root, &dir, path)? {
            Some(Type::Dir) => {}
            Some(other) => {
                return Err(unsafe_entry(
                    path,
                    format!("its parent is {} in this archive", other.name()),
                ));
            }
            None => {
                root.create_dir(&dir)
                    .map_err(|e| create_error(path, &root.shown(&dir), e))?;
                out.dirs += 1;
            }
        }
    }
    Ok(())
}

/// A failure to create an entry: a name the file system cannot hold is the archive's fault (6).
fn create_error(path: &[u8], target: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::InvalidFilename {
        return unsafe_entry(path, format!("a name this file system cannot hold ({e})"));
    }
    Error::io(format!("creating {}", target.display()), e)
}

/// `rel` as the index writes paths.
fn index_path(rel: &Path) -> Vec<u8> {
    rel.as_os_str().as_bytes().to_vec()
}

fn copy(
    from: &mut impl Read,
    to: &mut impl Write,
    target: &Path,
    mut hashing: Option<&mut super::blobs::Hashing>,
) -> Result<()> {
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
        if let Some(h) = hashing.as_mut() {
            h.update(&buf[..n]);
        }
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

/// Compare the commit id an archive records with `TIP_SHA`.
///
/// # Errors
/// [`Error::Integrity`] when they differ, saying why when the lengths do: an id of the other object
/// format (an archive of another repository), or a length no format has.
pub(super) fn check_commit_id(id: &str, tip_hex: &str) -> Result<()> {
    let id = id.trim();
    if id.eq_ignore_ascii_case(tip_hex) {
        return Ok(());
    }
    let mut shown: String = id
        .chars()
        .take(64)
        .collect::<String>()
        .escape_debug()
        .collect();
    if id.chars().count() > 64 {
        shown.push('…');
    }
    let digits = id.len();
    let hex = !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit());
    let title = |len: usize| match len {
        64 => "SHA-256",
        _ => "SHA-1",
    };
    let why = if hex && digits != tip_hex.len() {
        if digits == 40 || digits == 64 {
            format!(
                " (a {} id of {digits} hex digits, TIP_SHA a {} one of {}: an archive of a \
                 repository of the other object format)",
                title(digits),
                title(tip_hex.len()),
                tip_hex.len()
            )
        } else {
            format!(" (its id has {digits} hex digits: a full id has 40 (SHA-1) or 64 (SHA-256))")
        }
    } else {
        String::new()
    };
    Err(Error::Integrity(format!(
        "the archive is of commit {shown}{why}, not of TIP_SHA {tip_hex}: nothing was restored"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_id_of_another_length_says_why() {
        let sha1 = "a".repeat(40);
        let sha256 = "a".repeat(64);
        assert!(check_commit_id(&format!(" {} ", sha1.to_uppercase()), &sha1).is_ok());
        assert!(check_commit_id(&sha256, &sha256).is_ok());
        let said = |id: &str, tip: &str| check_commit_id(id, tip).unwrap_err().to_string();
        let e = said(&sha256, &sha1);
        assert!(
            e.contains("a SHA-256 id of 64 hex digits, TIP_SHA a SHA-1 one of 40"),
            "{e}"
        );
        let e = said(&sha1, &sha256);
        assert!(
            e.contains("a SHA-1 id of 40 hex digits, TIP_SHA a SHA-256 one of 64"),
            "{e}"
        );
        for n in [39, 41, 63, 65] {
            let e = said(&"b".repeat(n), &sha1);
            assert!(e.contains(&format!("its id has {n} hex digits")), "{e}");
        }
        let e = said(&"b".repeat(40), &sha1);
        assert!(!e.contains("hex digits"), "{e}");
    }
}
