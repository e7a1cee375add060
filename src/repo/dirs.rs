//! A work tree's two git dirs, found from its folder: the main tree's `.git`, or a linked work
//! tree's (`git worktree add`, an agent's) own git dir and the common dir it shares. Below the
//! rest of `repo/`, which picks the one or the other by kind (see [`super::worktree`]).
//!
//! # Security
//! A `.git` file is followed only when the link holds both ways: it names
//! `<common>/worktrees/<NAME>` (a real folder, no symlink on the way there below the common dir),
//! whose `gitdir` file names this tree's `.git` again. Anything else is not an agent's tree.

use std::path::{Path, PathBuf};

/// The folder of the common dir holding the linked work trees' git dirs.
pub const WORKTREES: &str = "worktrees";

/// The most a `.git` file, `commondir` or `gitdir` may hold.
const LINK_CAP: u64 = 4096;

/// A work tree's two git dirs, each file reached through the accessor of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    /// Its own: `HEAD`, index, the session record, the ledger, the write lock.
    pub git_dir: PathBuf,
    /// The shared one: objects, refs, config, hooks, the LFS store.
    pub common_dir: PathBuf,
}

impl GitDirs {
    /// The main tree's: both are `<workdir>/.git`.
    pub fn main(workdir: &Path) -> Self {
        let git_dir = workdir.join(".git");
        GitDirs {
            common_dir: git_dir.clone(),
            git_dir,
        }
    }

    /// The git dirs of the work tree at `workdir`: its `.git` folder, or the linked work tree its
    /// `.git` file names when the link holds both ways (`None` otherwise).
    pub fn of(workdir: &Path) -> Option<Self> {
        let dot_git = workdir.join(".git");
        let meta = std::fs::symlink_metadata(&dot_git).ok()?;
        if meta.is_dir() {
            return Some(Self::main(workdir));
        }
        if !meta.is_file() {
            return None;
        }
        linked(workdir)
    }

    /// [`GitDirs::of`], else the main tree's layout (whose files are then found missing).
    pub fn of_or_main(workdir: &Path) -> Self {
        Self::of(workdir).unwrap_or_else(|| Self::main(workdir))
    }

    /// Where the refs are (loose refs, `packed-refs`): shared.
    pub fn refs_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Where the repository's `config` is: shared.
    pub fn config_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Where the hooks (`hooks/`) are: shared.
    pub fn hooks_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Where the objects (`objects/`, `shallow`), the LFS store (`lfs/objects`) and the
    /// submodules' git dirs (`modules/`) are: shared.
    pub fn objects_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Where this work tree's own state is: `HEAD`, the index, the session record, the ledger,
    /// the write lock, the LFS pending list, `info/sparse-checkout`.
    pub fn own_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Whether this is a linked work tree's (an agent's).
    pub fn is_linked(&self) -> bool {
        self.git_dir != self.common_dir
    }
}

pub(super) fn read_link(path: &Path) -> Option<String> {
    let bytes = crate::fs::state::read(path, LINK_CAP, "").ok()??;
    let text = String::from_utf8(bytes).ok()?;
    Some(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// A linked work tree's git dirs, checked both ways.
pub(super) fn linked(workdir: &Path) -> Option<GitDirs> {
    let named = read_link(&workdir.join(".git"))?;
    let named = Path::new(named.strip_prefix("gitdir: ")?);
    let git_dir = workdir.join(named).canonicalize().ok()?;
    let common = read_link(&git_dir.join("commondir"))?;
    let common_dir = git_dir.join(common).canonicalize().ok()?;
    let name = git_dir.file_name()?;
    let worktrees = common_dir.join(WORKTREES);
    let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if git_dir != worktrees.join(name) || !real_dir(&worktrees) || !real_dir(&git_dir) {
        return None;
    }
    if back_link(&git_dir)?.canonicalize().ok()? != workdir.canonicalize().ok()? {
        return None;
    }
    Some(GitDirs {
        git_dir,
        common_dir,
    })
}

/// The work tree a linked git dir's `gitdir` file names (its `.git`'s folder), as named: not
/// resolved, so a symlink put in the folder's place is seen as one, never followed.
pub(super) fn back_link(git_dir: &Path) -> Option<PathBuf> {
    let dot_git = PathBuf::from(read_link(&git_dir.join("gitdir"))?);
    if !dot_git.is_absolute() || dot_git.file_name()? != ".git" {
        return None;
    }
    dot_git.parent().map(Path::to_path_buf)
}

/// The work tree of the git dir `git_dir`: its parent for a main tree's `.git`, the folder its
/// `gitdir` file names for a linked one (`None` when that does not lead back to `git_dir`).
pub fn workdir_of(git_dir: &Path) -> Option<PathBuf> {
    if !git_dir.join("commondir").exists() {
        return git_dir.parent().map(Path::to_path_buf);
    }
    let workdir = back_link(git_dir)?;
    let dirs = linked(&workdir)?;
    (dirs.git_dir == git_dir.canonicalize().ok()?).then_some(workdir)
}
