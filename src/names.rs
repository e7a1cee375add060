//! The one rule for the names a tree may hold, shared by `save` (what it commits) and `restore`
//! (what it checks out): whatever `save` commits, the next `restore` accepts.
//!
//! A path is refused when one of its components is empty, `.` or `..`, holds `/`, or is `.git` in
//! any spelling git protects against: case, NTFS aliases (`git~1`, trailing dots and spaces,
//! `.git::$INDEX_ALLOCATION`) and HFS+ ignorable code points (`.g\u{200c}it`), judged the same on
//! every platform (`core.protectNTFS` and `core.protectHFS` both on); when a symlink is named
//! `.gitmodules` in any such spelling; and when its first component is the staging folder
//! [`STAGING_DIR`] (any ASCII case), where `restore` builds the git dir. Windows device names
//! (`aux.c`) are allowed, as git on Linux allows them.

use gix::bstr::{BStr, ByteSlice};

/// The staging folder's name inside a restore's target: where the git dir is built.
pub const STAGING_DIR: &str = ".git-session-restore";

/// Why a path is refused.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    /// git's rule for a path component.
    #[error("{0}")]
    Component(gix::validate::path::component::Error),
    /// The staging folder at the top.
    #[error("{STAGING_DIR} is where git-session builds the git dir of a restore")]
    StagingDir,
}

/// git's component protections in the rule: `core.protectNTFS` and `core.protectHFS` on, Windows
/// device names off (for `gix`'s tree-to-index and checkout options).
pub fn protections() -> gix::validate::path::component::Options {
    gix::validate::path::component::Options {
        protect_windows: false,
        protect_hfs: true,
        protect_ntfs: true,
    }
}

/// Check one component: `top` when it is the first of its path, `symlink` when it is the last and
/// names a symlink.
///
/// # Errors
/// [`NameError`] saying why it is refused.
pub fn check_component(name: &BStr, top: bool, symlink: bool) -> Result<(), NameError> {
    let mode = symlink.then_some(gix::validate::path::component::Mode::Symlink);
    gix::validate::path::component(name, mode, protections()).map_err(NameError::Component)?;
    if top && name.eq_ignore_ascii_case(STAGING_DIR.as_bytes()) {
        return Err(NameError::StagingDir);
    }
    Ok(())
}

/// Whether `path` lies in the staging folder (its first component is [`STAGING_DIR`], any ASCII
/// case): the part of the rule that needs the whole path, for callers whose components were
/// checked with [`protections`] already (gix's tree-to-index).
pub fn in_staging_dir(path: &BStr) -> bool {
    let top = path.split_str("/").next().unwrap_or_default();
    top.eq_ignore_ascii_case(STAGING_DIR.as_bytes())
}

/// Check every component of the `/`-separated `path`; `symlink` when it names a symlink.
///
/// # Errors
/// [`NameError`] for the first component refused.
pub fn check_path(path: &BStr, symlink: bool) -> Result<(), NameError> {
    let mut parts = path.split_str("/").peekable();
    let mut top = true;
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        check_component(part.as_bstr(), top, symlink && last)?;
        top = false;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_every_spelling_of_git_and_the_staging_folder() {
        for bad in [
            ".git/x",
            ".GIT/x",
            "a/.git",
            ".g\u{200c}it/x",
            ".git\u{200d}/x",
            "\u{feff}.git/x",
            "git~1/x",
            "GIT~1",
            ".git./x",
            ".git /x",
            ".git::$INDEX_ALLOCATION/x",
            ".git-session-restore/x",
            ".GIT-SESSION-RESTORE",
            "a//b",
            "a/../b",
            "./a",
        ] {
            assert!(check_path(bad.into(), false).is_err(), "{bad:?} accepted");
        }
        assert!(check_path(".gitmodules".into(), true).is_err());
        assert!(in_staging_dir(".Git-Session-Restore/x".into()));
        assert!(!in_staging_dir("src/.git-session-restore/x".into()));
        assert!(check_path(".gitmodules".into(), false).is_ok());
        for good in [
            "src/.git-session-restore/x",
            ".gitignore",
            ".github/workflows/ci.yml",
            "aux.c",
            "gi\u{200c}t/x",
            "日本/файл.txt",
            "a.git/x",
        ] {
            assert!(check_path(good.into(), false).is_ok(), "{good:?} refused");
        }
    }
}
