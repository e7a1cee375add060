//! The one handle every write into a work tree goes through (SPEC rule 7).
//!
//! A [`Tree`] is the target folder opened once (`O_DIRECTORY | O_NOFOLLOW`: a symlink in its
//! place is refused); every file, folder and symlink the restore makes, every removal and every
//! look at what is there is then relative to that handle, resolved by the kernel beneath it and
//! through no symlink at all (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`; where the
//! kernel lacks it, one `O_NOFOLLOW` folder at a time). A folder swapped for a symlink mid-run,
//! to somewhere outside or to somewhere inside such as the staging folder's hooks, therefore
//! fails the write (`ELOOP`) instead of leading it there, and no absolute path of the tree is
//! joined and reopened after the start. Files are
//! created with `O_CREAT | O_EXCL | O_NOFOLLOW`, folders are made one component at a time and
//! never entered through a symlink, and what a run made is recorded by (device, inode, birth time) so that a
//! rollback removes only what is still the thing this run made.

use std::io;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use cap_fs_ext::DirExt as _;
use cap_std::fs::{Dir, MetadataExt as _};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// What is at a path of the tree, not following a symlink there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symlink (never followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// Something a run made, known by its (device, inode), so that undoing it removes only that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// Relative to the tree.
    pub rel: PathBuf,
    dev: u64,
    ino: u64,
    /// Its birth time where the file system keeps one: an inode number is reused at once.
    born: Option<std::time::SystemTime>,
    dir: bool,
}

/// The work tree, opened once.
#[derive(Debug)]
pub struct Tree {
    dir: Dir,
    root: PathBuf,
}

impl Tree {
    /// Open the folder `root` (not a symlink to one).
    ///
    /// # Errors
    /// The open's error: `root` is missing, not a folder, or a symlink (`ELOOP`).
    pub fn open(root: &Path) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(root)?;
        Ok(Tree {
            dir: Dir::from_std_file(file),
            root: root.to_owned(),
        })
    }

    /// A second handle on the same folder (for another thread).
    ///
    /// # Errors
    /// `dup` failed.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Tree {
            dir: self.dir.try_clone()?,
            root: self.root.clone(),
        })
    }

    /// The folder's path as given, for messages only: nothing is opened through it.
    pub fn shown(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    /// What is at `rel`, not following a symlink there; `None` when nothing is.
    ///
    /// # Errors
    /// Any failure but "not found" (a symlink on the way that leads outside among them).
    pub fn kind(&self, rel: &Path) -> io::Result<Option<Kind>> {
        match self.symlink_metadata(rel) {
            Ok(meta) => Ok(Some(kind_of(&meta.file_type()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The index entry's stat data for `rel`, not following a symlink there.
    ///
    /// # Errors
    /// `rel` cannot be read.
    pub fn stat(&self, rel: &Path) -> io::Result<gix::index::entry::Stat> {
        Ok(stat_of(&self.symlink_metadata(rel)?))
    }

    /// Make the folder `rel` (its parent exists).
    ///
    /// # Errors
    /// `AlreadyExists` when something is there; others from `mkdirat`.
    pub fn create_dir(&self, rel: &Path) -> io::Result<Made> {
        self.in_parent(rel, |dir, name| {
            dir.create_dir(name)?;
            made(dir, name, rel, true)
        })
    }

    /// Make every missing folder of `rel` (itself included), one component at a time, appending
    /// each made to `made`; `Ok(Some(p))` names the first component that is there but not a
    /// folder (a symlink among them: never entered). The first `known` components are folders
    /// the caller made or checked: not looked at again (a chain of folders each one deeper would
    /// cost a lookup per level per folder).
    ///
    /// # Errors
    /// A folder could not be made or looked at.
    pub fn create_dirs(
        &self,
        rel: &Path,
        known: usize,
        made: &mut Vec<Made>,
    ) -> io::Result<Option<PathBuf>> {
        let mut at: PathBuf = rel.components().take(known).collect();
        for component in rel.components().skip(known) {
            at.push(component);
            match self.kind(&at)? {
                Some(Kind::Dir) => {}
                Some(_) => return Ok(Some(at)),
                None => match self.create_dir(&at) {
                    Ok(m) => made.push(m),
                    // Made meanwhile by someone else: fine if it is a folder.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        if self.kind(&at)? != Some(Kind::Dir) {
                            return Ok(Some(at));
                        }
                    }
                    Err(e) => return Err(e),
                },
            }
        }
        Ok(None)
    }

    /// Create the file `rel`, which must not exist (`O_EXCL`, never through a symlink), with mode
    /// 0666 or 0777 before the umask, as git checks files out.
    ///
    /// # Errors
    /// `AlreadyExists` when anything is at `rel`; others from `openat2`.
    pub fn create_file(&self, rel: &Path, executable: bool) -> io::Result<(std::fs::File, Made)> {
        let file = self.create_new(rel, executable)?;
        let meta = file.metadata()?;
        use std::os::unix::fs::MetadataExt as _;
        let made = Made {
            rel: rel.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
            born: meta.created().ok(),
            dir: false,
        };
        Ok((file, made))
    }

    /// [`Tree::create_file`] for a caller that undoes nothing (no [`Made`], one `fstat` fewer).
    ///
    /// # Errors
    /// As [`Tree::create_file`].
    pub fn create_new(&self, rel: &Path, executable: bool) -> io::Result<std::fs::File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
        self.open_in(rel, flags, if executable { 0o777 } else { 0o666 })
    }

    /// The metadata of `rel`, not following a symlink there.
    ///
    /// # Errors
    /// `rel` cannot be looked at (`NotFound` among them).
    pub fn symlink_metadata(&self, rel: &Path) -> io::Result<cap_std::fs::Metadata> {
        self.in_parent(rel, |dir, name| dir.symlink_metadata(name))
    }

    /// The names in the folder `rel` (`""`: the tree itself) and what each is.
    ///
    /// # Errors
    /// The folder cannot be read.
    pub fn entries(&self, rel: &Path) -> io::Result<Vec<(std::ffi::OsString, Kind)>> {
        let read = if rel.as_os_str().is_empty() {
            self.dir.entries()?
        } else {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY;
            Dir::from_std_file(self.open_in(rel, flags, 0)?).entries()?
        };
        read.map(|e| {
            let e = e?;
            Ok((e.file_name(), kind_of(&e.file_type()?)))
        })
        .collect()
    }

    /// A handle on the folder `rel` of this tree, reached through real folders only (a symlink
    /// on the way is refused, `ELOOP`).
    ///
    /// # Errors
    /// A component is missing, not a folder, or a symlink.
    pub fn subtree(&self, rel: &Path) -> io::Result<Tree> {
        Ok(Tree {
            dir: self.walk(rel)?,
            root: self.root.join(rel),
        })
    }

    /// Remove the folder `rel` and everything in it (symlinks removed, never followed).
    ///
    /// # Errors
    /// From the removals.
    pub fn remove_all(&self, rel: &Path) -> io::Result<()> {
        self.in_parent(rel, |dir, name| dir.remove_dir_all(name))
    }

    /// Move `rel` to `to_rel` in the tree `to` (`renameat`, both relative to their handles).
    ///
    /// # Errors
    /// From `renameat`.
    pub fn rename_to(&self, rel: &Path, to: &Tree, to_rel: &Path) -> io::Result<()> {
        self.in_parent(rel, |dir, name| {
            to.in_parent(to_rel, |to_dir, to_name| dir.rename(name, to_dir, to_name))
        })
    }

    /// Open the existing regular file `rel` for writing in place (never through a symlink there).
    ///
    /// # Errors
    /// From `openat2` (`ELOOP` for a symlink at `rel`).
    pub fn open_existing(&self, rel: &Path) -> io::Result<std::fs::File> {
        // A FIFO in a file's place fails (`ENXIO`) instead of waiting for a reader.
        self.open_in(rel, OFlags::WRONLY | OFlags::NONBLOCK, 0)
    }

    /// Open the existing regular file `rel` for reading (never through a symlink, never a FIFO).
    ///
    /// # Errors
    /// From `openat2` (`ELOOP` for a symlink at `rel`); `InvalidInput` for anything but a
    /// regular file.
    pub fn open_read(&self, rel: &Path) -> io::Result<std::fs::File> {
        let file = self.open_in(rel, OFlags::RDONLY | OFlags::NONBLOCK, 0)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(file)
    }

    /// Create the symlink `rel` holding `contents` as recorded (not interpreted, as git does).
    ///
    /// # Errors
    /// `AlreadyExists` when anything is at `rel`; others from `symlinkat`.
    pub fn symlink(&self, contents: &Path, rel: &Path) -> io::Result<Made> {
        self.in_parent(rel, |dir, name| {
            dir.symlink_contents(contents, name)?;
            made(dir, name, rel, false)
        })
    }

    /// Remove the file or symlink `rel` (a symlink itself, never what it points to).
    ///
    /// # Errors
    /// From `unlinkat` (`NotFound` among them).
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        self.in_parent(rel, |dir, name| dir.remove_file_or_symlink(name))
    }

    /// Remove the empty folder `rel`.
    ///
    /// # Errors
    /// From `unlinkat` (not empty, `NotFound`).
    pub fn remove_dir(&self, rel: &Path) -> io::Result<()> {
        self.in_parent(rel, |dir, name| dir.remove_dir(name))
    }

    /// The bytes of the file `rel` when it holds at most `cap` (never more than `cap + 1` read:
    /// its size is the folder owner's, and it can grow after a stat), or the target of the
    /// symlink `rel`.
    ///
    /// # Errors
    /// `rel` cannot be read; [`io::ErrorKind::FileTooLarge`] past `cap`.
    pub fn read(&self, rel: &Path, symlink: bool, cap: u64) -> io::Result<Vec<u8>> {
        if symlink {
            use std::os::unix::ffi::OsStringExt as _;
            let target = self.in_parent(rel, |dir, name| dir.read_link_contents(name))?;
            return Ok(target.into_os_string().into_vec());
        }
        // Never blocks on a FIFO put in a file's place.
        let file = self.open_in(rel, OFlags::RDONLY | OFlags::NONBLOCK, 0)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        super::read_capped(file, cap)
    }

    /// Undo what a run made, newest first: each is removed only while it is still the file,
    /// symlink or folder this run made (same device, inode and, where kept, birth time), and a folder only when empty.
    ///
    /// # Errors
    /// The first removal that failed (the rest are still tried).
    pub fn undo(&self, made: &[Made]) -> io::Result<()> {
        let mut first = None;
        for m in made.iter().rev() {
            let same = self.symlink_metadata(&m.rel).is_ok_and(|meta| {
                meta.dev() == m.dev
                    && meta.ino() == m.ino
                    && meta.created().ok().map(cap_std::time::SystemTime::into_std) == m.born
            });
            if !same {
                continue;
            }
            let removed = if m.dir {
                self.remove_dir(&m.rel)
            } else {
                self.remove_file(&m.rel)
            };
            if let Err(e) = removed
                && e.kind() != io::ErrorKind::NotFound
                && (!m.dir || e.raw_os_error() != Some(libc::ENOTEMPTY))
            {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// Order `made` (what several writers made into one tree, each list oldest first) so that
/// [`Tree::undo`], which goes newest first, removes every file and symlink before any folder and
/// each folder before the one holding it: the folders first, shallowest first (a folder is always
/// made after its parent, whoever made that), then the rest.
pub fn order_for_undo(made: &mut [Made]) {
    made.sort_by_key(|m| (!m.dir, if m.dir { m.rel.components().count() } else { 0 }));
}

/// How every lookup below the handle resolves: beneath it, through no symlink.
const BENEATH: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

impl Tree {
    /// Open `rel` with `flags`, resolved beneath the tree through no symlink, its last component
    /// included.
    fn open_in(&self, rel: &Path, flags: OFlags, mode: u32) -> io::Result<std::fs::File> {
        let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let mode = Mode::from_raw_mode(mode);
        if let Some(opened) = openat2(&self.dir, rel, flags, mode) {
            return opened.map(std::fs::File::from).map_err(symlink_on_path);
        }
        let (parent, name) = split(rel)?;
        let dir = self.walk(parent)?;
        rustix::fs::openat(&dir, name, flags, mode)
            .map(std::fs::File::from)
            .map_err(|e| symlink_on_path(e.into()))
    }

    /// Run `f` on the folder holding `rel`, reached as [`Tree::open_in`] reaches files, and on
    /// `rel`'s last component.
    fn in_parent<T>(
        &self,
        rel: &Path,
        f: impl FnOnce(&Dir, &Path) -> io::Result<T>,
    ) -> io::Result<T> {
        let (parent, name) = split(rel)?;
        if parent.as_os_str().is_empty() {
            return f(&self.dir, name);
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let dir = match openat2(&self.dir, parent, flags, Mode::empty()) {
            Some(opened) => Dir::from_std_file(opened.map_err(symlink_on_path)?.into()),
            None => self.walk(parent)?,
        };
        f(&dir, name)
    }

    /// The folder `parent`, one `O_NOFOLLOW` component at a time (where `openat2` is missing).
    fn walk(&self, parent: &Path) -> io::Result<Dir> {
        let mut dir = self.dir.try_clone()?;
        for part in parent.components() {
            dir = dir.open_dir_nofollow(part).map_err(symlink_on_path)?;
        }
        Ok(dir)
    }
}

/// `ELOOP` from a lookup that follows no symlink, said as what it means (and given a kind that
/// [`crate::error::local_io_hint`] answers).
fn symlink_on_path(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        io::Error::new(
            io::ErrorKind::NotADirectory,
            "a symlink is on the path (one put there while the command ran?); symlinks in the \
             tree are never followed",
        )
    } else {
        e
    }
}

/// `openat2` beneath `dir` through no symlink; `None` when the kernel (or a seccomp filter)
/// refuses the call itself, or keeps asking for a retry, so the caller walks instead.
fn openat2(
    dir: &Dir,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Option<io::Result<rustix::fd::OwnedFd>> {
    for _ in 0..8 {
        match rustix::fs::openat2(dir, rel, flags, mode, BENEATH) {
            Ok(fd) => return Some(Ok(fd)),
            // A rename elsewhere in the tree raced the lookup.
            Err(Errno::AGAIN) => {}
            Err(Errno::NOSYS | Errno::PERM) => return None,
            Err(e) => return Some(Err(e.into())),
        }
    }
    None
}

/// `rel`'s folder and last component; only plain names (no `..`, no root) are taken.
fn split(rel: &Path) -> io::Result<(&Path, &Path)> {
    let plain = rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    match (plain, rel.parent(), rel.file_name()) {
        (true, Some(parent), Some(name)) => Ok((parent, Path::new(name))),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a plain path in the tree: {}", rel.display()),
        )),
    }
}

/// What is at `name` in `dir` now, as something this run made at `rel`.
fn made(dir: &Dir, name: &Path, rel: &Path, is_dir: bool) -> io::Result<Made> {
    let meta = dir.symlink_metadata(name)?;
    Ok(Made {
        rel: rel.to_owned(),
        dev: meta.dev(),
        ino: meta.ino(),
        born: meta.created().ok().map(cap_std::time::SystemTime::into_std),
        dir: is_dir,
    })
}

fn kind_of(ft: &cap_std::fs::FileType) -> Kind {
    if ft.is_dir() {
        Kind::Dir
    } else if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_file() {
        Kind::File
    } else {
        Kind::Other
    }
}

/// The index's stat data, as `gix::index::entry::Stat::from_fs` takes it.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn stat_of(meta: &cap_std::fs::Metadata) -> gix::index::entry::Stat {
    use gix::index::entry::stat::Time;
    let time = |secs: i64, nsecs: i64| Time {
        secs: secs.max(0) as u32,
        nsecs: nsecs.max(0) as u32,
    };
    gix::index::entry::Stat {
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        // Truncated to 32 bits as git and gix do.
        dev: meta.dev() as u32,
        ino: meta.ino() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.size() as u32,
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_swapped_for_a_symlink_leads_no_write_outside() {
        let top = tempfile::tempdir().unwrap();
        let (root, outside) = (top.path().join("tree"), top.path().join("outside"));
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        let tree = Tree::open(&root).unwrap();
        std::fs::remove_dir(root.join("a")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("a")).unwrap();
        assert!(tree.create_file(Path::new("a/x"), false).is_err());
        assert!(tree.create_dir(Path::new("a/d")).is_err());
        assert!(tree.symlink(Path::new("/etc"), Path::new("a/l")).is_err());
        assert_eq!(
            tree.create_dirs(Path::new("a/b"), 0, &mut Vec::new())
                .unwrap(),
            Some(PathBuf::from("a"))
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    /// Two writers' lists, one of which made `d` after the other had begun (it made `d/x` inside
    /// it later): ordered for the undo, everything goes, `d` too; taken in the order the lists
    /// came, `d` (not empty yet) would be left behind.
    #[test]
    fn what_several_writers_made_is_undone_whole_once_ordered() {
        let top = tempfile::tempdir().unwrap();
        let tree = Tree::open(top.path()).unwrap();
        let first_writer = vec![
            tree.create_dir(Path::new("e")).unwrap(),
            tree.create_file(Path::new("e/f"), false).unwrap().1,
        ];
        let second_writer = vec![tree.create_dir(Path::new("d")).unwrap()];
        let later = [
            tree.create_dir(Path::new("d/x")).unwrap(),
            tree.create_file(Path::new("d/x/f"), false).unwrap().1,
        ];
        let mut made: Vec<Made> = later.into_iter().chain(first_writer).collect();
        made.extend(second_writer);
        order_for_undo(&mut made);
        tree.undo(&made).unwrap();
        let left: Vec<_> = std::fs::read_dir(top.path()).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    /// Inside the tree too: `a -> b/c` is never followed, by any operation, whichever way the
    /// path is resolved (`openat2`, or the walk where the kernel lacks it).
    #[test]
    fn a_symlink_that_stays_inside_is_not_followed_either() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("tree");
        std::fs::create_dir_all(root.join("b/c")).unwrap();
        std::fs::write(root.join("b/c/kept"), "x").unwrap();
        std::os::unix::fs::symlink("b/c", root.join("a")).unwrap();
        let tree = Tree::open(&root).unwrap();
        let refused = |r: io::Result<()>| {
            let e = r.expect_err("went through the symlink");
            assert_eq!(e.kind(), io::ErrorKind::NotADirectory, "{e}");
        };
        refused(tree.create_file(Path::new("a/x"), false).map(drop));
        refused(tree.create_dir(Path::new("a/d")).map(drop));
        refused(tree.symlink(Path::new("x"), Path::new("a/l")).map(drop));
        refused(tree.open_existing(Path::new("a/kept")).map(drop));
        refused(tree.read(Path::new("a/kept"), false, 1 << 20).map(drop));
        refused(tree.remove_file(Path::new("a/kept")));
        refused(tree.symlink_metadata(Path::new("a/kept")).map(drop));
        refused(tree.entries(Path::new("a")).map(drop));
        refused(tree.walk(Path::new("a")).map(drop));
        assert_eq!(tree.kind(Path::new("a")).unwrap(), Some(Kind::Symlink));
        let names: Vec<_> = std::fs::read_dir(root.join("b/c"))
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn the_root_itself_may_not_be_a_symlink() {
        let top = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(top.path(), top.path().join("link")).unwrap();
        assert!(Tree::open(&top.path().join("link")).is_err());
    }

    #[test]
    fn undo_removes_only_what_is_still_what_the_run_made() {
        let top = tempfile::tempdir().unwrap();
        let tree = Tree::open(top.path()).unwrap();
        let mut made = Vec::new();
        assert_eq!(
            tree.create_dirs(Path::new("d/e"), 0, &mut made).unwrap(),
            None
        );
        made.push(tree.create_file(Path::new("d/e/f"), false).unwrap().1);
        made.push(tree.create_file(Path::new("g"), true).unwrap().1);
        // Someone replaces `g` with their own file (later than the clock's tick: the inode
        // number is reused at once), and puts a file of theirs in `d`.
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::fs::remove_file(top.path().join("g")).unwrap();
        std::fs::write(top.path().join("g"), b"theirs").unwrap();
        std::fs::write(top.path().join("d/theirs"), b"theirs").unwrap();
        tree.undo(&made).unwrap();
        assert!(!top.path().join("d/e").exists());
        assert_eq!(std::fs::read(top.path().join("g")).unwrap(), b"theirs");
        assert!(top.path().join("d/theirs").exists());
    }
}
