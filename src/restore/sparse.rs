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

/// The folders of a cone, as `git sparse-checkout set --cone` (git 2.47) keeps them: trimmed,
/// without a trailing `/`, `.`, `..` and repeated `/` resolved (git's `strbuf_normalize_path`),
/// none inside another, sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cone {
    dirs: Vec<String>,
    /// Given as arguments (`--sparse`), which git also checks against the tree's files.
    from_args: bool,
}

/// Why git refuses a folder given as an argument (`sanitize_paths`), unless `--skip-checks`.
fn refused_by_git(arg: &str) -> Option<&'static str> {
    if arg.starts_with('/') {
        Some("it starts with '/' (git: specify directories rather than patterns, no leading slash)")
    } else if arg.starts_with('!') {
        Some("it starts with '!' (git: specify directories rather than patterns)")
    } else if arg.contains(['*', '?', '[', ']']) {
        Some("it has one of '*?[]' (git: specify directories rather than patterns)")
    } else {
        None
    }
}

/// git's `strbuf_normalize_path`: `.` and repeated `/` dropped, `..` takes the folder before it
/// away; `None` when it would leave the top. A `.` or `..` at the end leaves a trailing `/`, as
/// in git (whose cone then holds only that folder's own files).
fn normalize(path: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = path;
    if rest.starts_with('/') {
        out.push('/');
        rest = rest.trim_start_matches('/');
    }
    let root = out.len();
    loop {
        if rest == "." {
            break;
        }
        if let Some(r) = rest.strip_prefix("./") {
            rest = r.trim_start_matches('/');
            continue;
        }
        let up = match rest.strip_prefix("..") {
            Some("") => Some(""),
            Some(r) if r.starts_with('/') => Some(r.trim_start_matches('/')),
            _ => None,
        };
        if let Some(r) = up {
            if out.len() <= root {
                return None;
            }
            out.pop();
            while out.len() > root && !out.ends_with('/') {
                out.pop();
            }
            rest = r;
            continue;
        }
        match rest.find('/') {
            Some(i) => {
                out.push_str(&rest[..=i]);
                rest = rest[i + 1..].trim_start_matches('/');
            }
            None => {
                out.push_str(rest);
                break;
            }
        }
    }
    Some(out)
}

/// git's `unquote_c_style` for a line of `--stdin` that starts with `"`; `None` when malformed.
fn unquote(line: &str) -> Option<String> {
    let body = line.strip_prefix('"')?;
    let mut out = Vec::new();
    let mut bytes = body.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'"' => return String::from_utf8(out).ok(),
            b'\\' => {
                let c = bytes.next()?;
                out.push(match c {
                    b'a' => 7,
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 11,
                    b'\\' | b'"' => c,
                    b'0'..=b'3' => {
                        let (d2, d3) = (bytes.next()?, bytes.next()?);
                        if !(b'0'..=b'7').contains(&d2) || !(b'0'..=b'7').contains(&d3) {
                            return None;
                        }
                        (c - b'0') << 6 | (d2 - b'0') << 3 | (d3 - b'0')
                    }
                    _ => return None,
                });
            }
            _ => out.push(b),
        }
    }
    None
}

impl Cone {
    /// The cone of `dirs` (`--sparse`), or of the lines of the file `GIT_SESSION_SPARSE_FILE`
    /// (read as `git sparse-checkout set --cone --stdin` reads its input) when no folder is
    /// given; `None` when neither names one.
    ///
    /// # Errors
    /// [`Error::Usage`] (exit 2) for what git refuses (an argument starting with `/` or `!` or
    /// holding `*?[]`; a path leaving the top; a malformed quoted line), a control character,
    /// and an unreadable file.
    pub fn from_inputs(dirs: &[String]) -> Result<Option<Cone>> {
        if !dirs.is_empty() {
            return Cone::new(dirs).map(Some);
        }
        let Ok(path) = std::env::var("GIT_SESSION_SPARSE_FILE") else {
            return Ok(None);
        };
        let fix = "give one folder per line, as git sparse-checkout set --stdin reads them";
        let bytes = crate::fs::state::read(std::path::Path::new(&path), MAX_SPARSE_FILE, fix)?
            .ok_or_else(|| {
                Error::Usage(
                    Refusal::Invalid,
                    format!("GIT_SESSION_SPARSE_FILE names {path}, which does not exist"),
                )
            })?;
        let mut lines = Vec::new();
        for line in String::from_utf8_lossy(&bytes).lines() {
            if line.starts_with('"') {
                lines.push(unquote(line).ok_or_else(|| {
                    invalid(line, "git cannot unquote it (a C-style quoted line)")
                })?);
            } else {
                lines.push(line.to_owned());
            }
        }
        if lines.iter().all(|l| l.trim().is_empty()) {
            return Ok(None);
        }
        Cone::build(&lines, false).map(Some)
    }

    /// The cone of `dirs`, given as `git sparse-checkout set --cone` arguments.
    ///
    /// # Errors
    /// As [`Cone::from_inputs`].
    pub fn new(dirs: &[String]) -> Result<Cone> {
        for d in dirs {
            if let Some(why) = refused_by_git(d) {
                return Err(invalid(d, why));
            }
        }
        Cone::build(dirs, true)
    }

    fn build(dirs: &[String], from_args: bool) -> Result<Cone> {
        let mut out: Vec<String> = Vec::new();
        for d in dirs {
            if d.chars().any(char::is_control) {
                return Err(invalid(d, "it has a control character"));
            }
            let trimmed = d
                .trim_matches(|c: char| c.is_ascii_whitespace())
                .trim_end_matches('/');
            let dir = normalize(trimmed).ok_or_else(|| {
                invalid(
                    d,
                    "it leaves the top of the tree (git: could not normalize path)",
                )
            })?;
            // Nothing (`.`, `a/..`) adds no folder, as in git: the files at the top only.
            let dir = dir.trim_start_matches('/');
            if !dir.is_empty() {
                out.push(dir.to_owned());
            }
        }
        out.sort();
        out.dedup();
        // A folder inside another adds nothing.
        let all = out.clone();
        out.retain(|d| {
            !all.iter()
                .any(|o| o != d && d.starts_with(&format!("{o}/")))
        });
        Ok(Cone {
            dirs: out,
            from_args,
        })
    }

    /// `--sparse` arguments that name a file of `index`: git refuses them (`'top.txt' is not a
    /// directory`), before anything is checked out.
    ///
    /// # Errors
    /// [`Error::Usage`] (exit 2) naming the first.
    pub fn refuse_files(&self, index: &gix::index::File) -> Result<()> {
        if !self.from_args {
            return Ok(());
        }
        for d in &self.dirs {
            if index.entry_by_path(d.as_bytes().as_bstr()).is_some() {
                return Err(invalid(
                    d,
                    "the tree has a file there, not a folder (git: it is not a directory)",
                ));
            }
        }
        Ok(())
    }

    /// The folders of the cone that `index` has no file below (a typo, most likely).
    pub fn missing_in(&self, index: &gix::index::File) -> Vec<&str> {
        self.dirs
            .iter()
            .filter(|d| {
                let prefix = format!("{}/", d.trim_end_matches('/'));
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

    /// `.git/info/sparse-checkout` as `git sparse-checkout set --cone` writes it: the folders
    /// leading to the cone's (each with its subfolders left out), then the cone's, each sorted,
    /// `*?[\` quoted.
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
        parents.sort_unstable();
        parents.dedup();
        let quote = |p: &str| -> String {
            p.chars()
                .flat_map(|c| {
                    let special = matches!(c, '*' | '?' | '[' | '\\');
                    special
                        .then_some('\\')
                        .into_iter()
                        .chain(std::iter::once(c))
                })
                .collect()
        };
        let mut out = String::from("/*\n!/*/\n");
        for p in parents {
            let p = quote(p);
            out.push_str(&format!("/{p}/\n!/{p}/*/\n"));
        }
        for d in &self.dirs {
            out.push_str(&format!("/{}/\n", quote(d)));
        }
        out
    }
}

fn invalid(given: &str, why: &str) -> Error {
    Error::Usage(
        Refusal::Invalid,
        format!(
            "the sparse folder '{}' is refused: {why}; give folders of the tree, like src/lib",
            given.escape_debug()
        ),
    )
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
        let c = cone(&["a/b/", " c ", "c/d", "./e/../c"]);
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
        // Parents first, then the cone's folders, as git writes them.
        assert_eq!(
            cone(&["b", "c/d"]).patterns(),
            "/*\n!/*/\n/c/\n!/c/*/\n/b/\n/c/d/\n"
        );
    }

    #[test]
    fn paths_are_normalised_as_git_normalises_them() {
        for (given, dirs) in [
            ("./a", &["a"][..]),
            ("a//b", &["a/b"]),
            ("a/./b/", &["a/b"]),
            ("a/../c", &["c"]),
            ("a/..", &[]),
            (".", &[]),
            ("", &[]),
            ("a\\b", &["a\\b"]),
            ("#a", &["#a"]),
            // git keeps the `/` a final `..` leaves: only a's own files.
            ("a/b/..", &["a/"]),
        ] {
            assert_eq!(cone(&[given]).dirs(), dirs, "{given:?}");
        }
        let weird = cone(&["a/b/.."]);
        assert_eq!(weird.patterns(), "/*\n!/*/\n/a/\n!/a/*/\n/a//\n");
        assert!(weird.contains("a/f".into()) && !weird.contains("a/b/f".into()));
        assert_eq!(cone(&["a\\b"]).patterns(), "/*\n!/*/\n/a\\\\b/\n");
    }

    #[test]
    fn what_git_refuses_is_refused() {
        for bad in [
            "/a",
            "!a",
            "src/*",
            "a?",
            "a[b",
            "a]",
            "..",
            "x/../../a",
            "a\nb",
        ] {
            assert!(Cone::new(&[bad.to_owned()]).is_err(), "{bad:?}");
        }
        // From a file (git's --stdin): no such checks; quoted lines are unquoted.
        let c = Cone::build(&["/a/b".into(), "*".into(), "!c".into()], false).unwrap();
        assert_eq!(c.dirs(), ["!c", "*", "a/b"]);
        assert_eq!(unquote("\"a\\tb\\\"\\101\"").as_deref(), Some("a\tb\"A"));
        assert_eq!(unquote("\"a\\q\""), None);
    }
}
