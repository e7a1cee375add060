//! Sparse restores (`--sparse DIR…`, `GIT_SESSION_SPARSE_FILE`): the folders of a cone, as
//! `git sparse-checkout set --cone` takes them. Files at the top, every file below a cone folder,
//! and the files directly in the folders leading to one are checked out; every other index entry
//! gets git's skip-worktree bit and no file. With a server that offers `filter`, the commit is
//! fetched with `filter blob:none` and then only the blobs the cone needs (a partial clone whose
//! promisor remote lets plain git fetch the others when it needs them).

use gix::bstr::{BStr, ByteSlice as _};

use crate::error::{Error, Refusal, Result};

/// The most of `GIT_SESSION_SPARSE_FILE` read.
const MAX_SPARSE_FILE: u64 = 1 << 20;

/// The folders of a cone, normalised: no leading or trailing `/`, none inside another, sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cone {
    dirs: Vec<String>,
}

impl Cone {
    /// The cone of `dirs` (`--sparse`), or of the lines of the file `GIT_SESSION_SPARSE_FILE`
    /// when no folder is given; `None` when neither names one.
    ///
    /// # Errors
    /// [`Error::Usage`] (exit 2) for a folder with a `..` or `.` component, a glob character
    /// (`* ? [ \`), or a control character, and for an unreadable file.
    pub fn from_inputs(dirs: &[String]) -> Result<Option<Cone>> {
        let mut given: Vec<String> = dirs.to_vec();
        if given.is_empty()
            && let Ok(path) = std::env::var("GIT_SESSION_SPARSE_FILE")
        {
            let fix = "give one folder per line, as `git sparse-checkout set --stdin` reads them";
            let bytes = crate::fs::state::read(std::path::Path::new(&path), MAX_SPARSE_FILE, fix)?
                .ok_or_else(|| {
                    Error::Usage(
                        Refusal::Invalid,
                        format!("GIT_SESSION_SPARSE_FILE names {path}, which does not exist"),
                    )
                })?;
            given = String::from_utf8_lossy(&bytes)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned)
                .collect();
        }
        if given.is_empty() {
            return Ok(None);
        }
        Cone::new(&given).map(Some)
    }

    /// The cone of `dirs`.
    ///
    /// # Errors
    /// As [`Cone::from_inputs`].
    pub fn new(dirs: &[String]) -> Result<Cone> {
        let mut out: Vec<String> = Vec::new();
        for d in dirs {
            let dir = d.trim_matches('/');
            let bad = dir.is_empty()
                || dir
                    .split('/')
                    .any(|c| c.is_empty() || c == "." || c == "..")
                || dir
                    .chars()
                    .any(|c| c.is_control() || matches!(c, '*' | '?' | '[' | '\\'));
            if bad {
                return Err(Error::Usage(
                    Refusal::Invalid,
                    format!(
                        "the sparse folder '{}' is not one: give folders of the tree, like src/lib (no '..', '.', globs or control characters)",
                        d.escape_debug()
                    ),
                ));
            }
            out.push(dir.to_owned());
        }
        out.sort();
        out.dedup();
        // A folder inside another adds nothing.
        let all = out.clone();
        out.retain(|d| {
            !all.iter()
                .any(|o| o != d && d.starts_with(&format!("{o}/")))
        });
        Ok(Cone { dirs: out })
    }

    /// The folders of the cone that `index` has no file below (a typo, most likely).
    pub fn missing_in(&self, index: &gix::index::File) -> Vec<&str> {
        self.dirs
            .iter()
            .filter(|d| {
                let prefix = format!("{d}/");
                !index
                    .entries()
                    .iter()
                    .any(|e| e.path(index).starts_with(prefix.as_bytes()))
            })
            .map(String::as_str)
            .collect()
    }

    /// The folders, as `git sparse-checkout list` shows them.
    pub fn dirs(&self) -> &[String] {
        &self.dirs
    }

    /// Whether the file `path` is checked out.
    pub fn contains(&self, path: &BStr) -> bool {
        let Some(slash) = path.rfind_byte(b'/') else {
            return true;
        };
        let parent = &path[..slash];
        self.dirs.iter().any(|d| {
            let d = d.as_bytes();
            (path.len() > d.len() && path.starts_with(d) && path[d.len()] == b'/')
                || (d.len() >= parent.len()
                    && d.starts_with(parent)
                    && (d.len() == parent.len() || d[parent.len()] == b'/'))
        })
    }

    /// `.git/info/sparse-checkout` as `git sparse-checkout set --cone` writes it.
    pub fn patterns(&self) -> String {
        let mut parents: Vec<&str> = Vec::new();
        for d in &self.dirs {
            let mut at = 0;
            while let Some(i) = d[at..].find('/') {
                parents.push(&d[..at + i]);
                at += i + 1;
            }
        }
        parents.retain(|p| !self.dirs.iter().any(|d| d == p));
        let mut all: Vec<(&str, bool)> = parents.into_iter().map(|p| (p, true)).collect();
        all.extend(self.dirs.iter().map(|d| (d.as_str(), false)));
        all.sort();
        all.dedup();
        let mut out = String::from("/*\n!/*/\n");
        for (p, parent) in all {
            out.push_str(&format!("/{p}/\n"));
            if parent {
                out.push_str(&format!("!/{p}/*/\n"));
            }
        }
        out
    }
}

/// Give every entry of `index` outside `cone` git's skip-worktree bit; returns the blobs of the
/// entries inside it (each once), which the checkout needs.
pub fn mark(index: &mut gix::index::File, cone: &Cone) -> Vec<gix::ObjectId> {
    use gix::index::entry::{Flags, Mode};
    let (entries, backing) = index.entries_mut_and_pathbacking();
    let mut blobs = Vec::new();
    for entry in entries {
        if cone.contains(entry.path_in(backing)) {
            if entry.mode != Mode::COMMIT {
                blobs.push(entry.id);
            }
        } else {
            entry.flags |= Flags::SKIP_WORKTREE | Flags::EXTENDED;
        }
    }
    blobs.sort();
    blobs.dedup();
    blobs
}

/// Whether `entry` has no file in the work tree (outside the cone).
pub fn skipped(entry: &gix::index::Entry) -> bool {
    entry
        .flags
        .contains(gix::index::entry::Flags::SKIP_WORKTREE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cone(d: &[&str]) -> Cone {
        Cone::new(&d.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).expect("cone")
    }

    #[test]
    fn the_cone_holds_what_git_s_cone_mode_holds() {
        let c = cone(&["a/b/", "/c", "c/d"]);
        assert_eq!(c.dirs(), ["a/b", "c"]);
        for (path, inside) in [
            ("top.txt", true),
            ("a/file", true),
            ("a/x/file", false),
            ("a/b/file", true),
            ("a/b/deep/er/file", true),
            ("a/bc/file", false),
            ("c/d/e", true),
            ("cc/file", false),
            ("d/file", false),
        ] {
            assert_eq!(c.contains(path.into()), inside, "{path}");
        }
        assert_eq!(c.patterns(), "/*\n!/*/\n/a/\n!/a/*/\n/a/b/\n/c/\n");
    }

    #[test]
    fn folders_that_are_not_folders_of_a_tree_are_refused() {
        for bad in ["", "/", "a/../b", "./a", "a//b", "src/*", "a\nb", "a\\b"] {
            assert!(Cone::new(&[bad.to_owned()]).is_err(), "{bad:?}");
        }
    }
}
