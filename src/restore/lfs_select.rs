//! Which LFS files a restore fetches: `GIT_SESSION_LFS_INCLUDE` / `_EXCLUDE` read exactly as
//! git-lfs 3 reads `git lfs pull -I/-X` and `lfs.fetchinclude` / `lfs.fetchexclude` (its
//! `filepathfilter`, gitignore style; checked against the real `git lfs` in `tests/lfs.rs`):
//! - spaces around a pattern and `/` at its end are dropped (`assets/` is `assets`);
//! - a pattern without a `/` matches any one folder or file name of the path, at any depth
//!   (`*.bin` takes `a/b/c.bin`; `assets` takes `docs/assets/x`);
//! - a pattern with a `/` is read from the top, a leading `/` or not (`assets/sub`,
//!   `/assets`), and matches the path or one of the folders leading to it;
//! - a folder matched takes everything below it; `*`, `?` and `[…]` never match a `/`, `**`
//!   does (git's wildmatch); `\` quotes the next character; repeated `/` count as one.

use gix::bstr::{BStr, BString, ByteSlice as _};

/// One include or exclude pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LfsPattern {
    /// As given (for messages).
    raw: String,
    /// The glob, without leading or trailing `/`, repeated ones collapsed.
    glob: BString,
    /// Read from the top (it had a `/`), else matched against each name of the path.
    anchored: bool,
}

impl LfsPattern {
    /// The pattern `raw` means for git-lfs.
    pub fn new(raw: &str) -> Self {
        let trimmed = raw.trim().trim_end_matches('/');
        let anchored = trimmed.contains('/');
        let glob: Vec<&str> = trimmed.split('/').filter(|c| !c.is_empty()).collect();
        LfsPattern {
            raw: raw.to_owned(),
            glob: glob.join("/").into(),
            anchored,
        }
    }

    /// Whether `path` (a file of the tree, `/`-separated) is selected.
    pub fn matches(&self, path: &BStr) -> bool {
        use gix::glob::wildmatch::Mode;
        if self.glob.is_empty() {
            return false;
        }
        // Beyond the bound the knob is refused before any work (`crate::knobs`): never matched.
        if !crate::glob::bounded(&self.glob) {
            return false;
        }
        let glob = self.glob.as_bstr();
        let wildmatch =
            |text: &[u8]| gix::glob::wildmatch(glob, text.as_bstr(), Mode::NO_MATCH_SLASH_LITERAL);
        let path: &[u8] = path.as_bytes();
        if !self.anchored {
            return path.split(|b| *b == b'/').any(wildmatch);
        }
        // The path itself, or one of the folders leading to it.
        path.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(|(i, _)| &path[..i])
            .chain(std::iter::once(path))
            .any(wildmatch)
    }
}

/// The include and exclude patterns, and which of them matched an LFS file of the tree.
#[derive(Debug)]
pub struct Selection {
    include: Vec<(LfsPattern, bool)>,
    exclude: Vec<(LfsPattern, bool)>,
}

impl Selection {
    /// The patterns of `GIT_SESSION_LFS_INCLUDE` and `GIT_SESSION_LFS_EXCLUDE`.
    pub fn from_knobs() -> Self {
        let knobs = crate::knobs::get();
        Selection::new(&knobs.lfs_include, &knobs.lfs_exclude)
    }

    /// The selection of `include` and `exclude` (each empty: everything).
    pub fn new(include: &[String], exclude: &[String]) -> Self {
        let list = |p: &[String]| p.iter().map(|p| (LfsPattern::new(p), false)).collect();
        Selection {
            include: list(include),
            exclude: list(exclude),
        }
    }

    /// Whether the LFS file `path` is fetched: some include pattern (or none given) and no
    /// exclude pattern matches it, as git-lfs decides. Every pattern matching it is noted.
    pub fn wants(&mut self, path: &BStr) -> bool {
        let hit = |patterns: &mut [(LfsPattern, bool)]| {
            let mut any = false;
            for (pattern, matched) in patterns {
                if pattern.matches(path) {
                    *matched = true;
                    any = true;
                }
            }
            any
        };
        let included = hit(&mut self.include) || self.include.is_empty();
        let excluded = hit(&mut self.exclude);
        included && !excluded
    }

    /// One warning per knob whose patterns matched none of the LFS files [`Selection::wants`]
    /// was asked about (none when it was asked about none: the tree has no LFS file to select).
    pub fn unmatched(&self, asked: usize) -> Vec<String> {
        if asked == 0 {
            return Vec::new();
        }
        let mut notes = Vec::new();
        for (var, patterns) in [
            ("GIT_SESSION_LFS_INCLUDE", &self.include),
            ("GIT_SESSION_LFS_EXCLUDE", &self.exclude),
        ] {
            let idle: Vec<String> = patterns
                .iter()
                .filter(|(_, matched)| !matched)
                .map(|(p, _)| format!("'{}'", p.raw.escape_debug()))
                .collect();
            if !idle.is_empty() {
                notes.push(format!(
                    "{var}: {} matched none of the tree's {asked} LFS files (as git-lfs reads \
                     patterns: one without a '/' matches a name at any depth, one with a '/' is \
                     read from the top)",
                    idle.join(", ")
                ));
            }
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree of `tests/lfs.rs`'s comparison with `git lfs ls-files -I` (git-lfs 3.3.0), and
    /// what git-lfs selected for each pattern.
    const FILES: &[&str] = &[
        "top.bin",
        "a.txt",
        "assets/x.bin",
        "assets/sub/y.bin",
        "docs/assets/z.bin",
        "docs/d.txt",
        "b/assets",
        "c/assetsfoo/q.bin",
        "data/a.bin/inner.txt",
        "sp ace/s.bin",
        "br[k]/k.bin",
        "deep/a/b/c.bin",
    ];

    fn selected(include: &str) -> Vec<&'static str> {
        let p = LfsPattern::new(include);
        let mut out: Vec<&str> = FILES
            .iter()
            .copied()
            .filter(|f| p.matches((*f).into()))
            .collect();
        out.sort_unstable();
        out
    }

    /// The fuzzer's find (18 s before: nine runs of `**` matched against their own text) is
    /// never matched now: such a pattern is refused as a knob, and is no match here.
    #[test]
    fn a_pattern_past_the_bound_is_never_matched() {
        let found = "h/**///**//**///*//**//**///**//**//**///*//**.**//**///**.t-";
        let started = std::time::Instant::now();
        assert!(!LfsPattern::new(found).matches(found.as_bytes().as_bstr()));
        assert!(started.elapsed().as_secs() < 2, "{:?}", started.elapsed());
    }

    #[test]
    fn patterns_select_what_git_lfs_selects() {
        for (pattern, want) in [
            (
                "*.bin",
                &[
                    "assets/sub/y.bin",
                    "assets/x.bin",
                    "br[k]/k.bin",
                    "c/assetsfoo/q.bin",
                    "data/a.bin/inner.txt",
                    "deep/a/b/c.bin",
                    "docs/assets/z.bin",
                    "sp ace/s.bin",
                    "top.bin",
                ][..],
            ),
            (
                "assets",
                &[
                    "assets/sub/y.bin",
                    "assets/x.bin",
                    "b/assets",
                    "docs/assets/z.bin",
                ],
            ),
            (
                "assets/",
                &[
                    "assets/sub/y.bin",
                    "assets/x.bin",
                    "b/assets",
                    "docs/assets/z.bin",
                ],
            ),
            (
                " assets ",
                &[
                    "assets/sub/y.bin",
                    "assets/x.bin",
                    "b/assets",
                    "docs/assets/z.bin",
                ],
            ),
            ("/assets", &["assets/sub/y.bin", "assets/x.bin"]),
            ("/assets/", &["assets/sub/y.bin", "assets/x.bin"]),
            ("assets/*", &["assets/sub/y.bin", "assets/x.bin"]),
            ("assets/**", &["assets/sub/y.bin", "assets/x.bin"]),
            (
                "**/assets",
                &[
                    "assets/sub/y.bin",
                    "assets/x.bin",
                    "b/assets",
                    "docs/assets/z.bin",
                ],
            ),
            ("docs/assets", &["docs/assets/z.bin"]),
            ("x.bin", &["assets/x.bin"]),
            ("a.bin", &["data/a.bin/inner.txt"]),
            ("deep/a", &["deep/a/b/c.bin"]),
            ("deep//a", &["deep/a/b/c.bin"]),
            ("a/b", &[]),
            ("sub", &["assets/sub/y.bin"]),
            ("/sub", &[]),
            ("*/sub", &["assets/sub/y.bin"]),
            ("/*.bin", &["top.bin"]),
            (
                "*/*/*.bin",
                &["assets/sub/y.bin", "c/assetsfoo/q.bin", "docs/assets/z.bin"],
            ),
            ("deep/**/c.bin", &["deep/a/b/c.bin"]),
            ("**/c.bin", &["deep/a/b/c.bin"]),
            ("[ab]", &["b/assets", "deep/a/b/c.bin"]),
            ("br[k]", &[]),
            ("br\\[k\\]", &["br[k]/k.bin"]),
            ("?.txt", &["a.txt", "docs/d.txt"]),
            ("ASSETS", &[]),
            ("./assets", &[]),
            ("assets/../docs", &[]),
            (".", &[]),
            ("/", &[]),
            ("top", &[]),
            ("sp ace", &["sp ace/s.bin"]),
        ] {
            assert_eq!(selected(pattern), want, "{pattern:?}");
        }
        assert_eq!(selected("*").len(), FILES.len());
        assert_eq!(selected("**").len(), FILES.len());
    }

    #[test]
    fn patterns_that_match_nothing_are_named_once_per_knob() {
        let mut s = Selection::new(
            &["*.bin".into(), "nope".into()],
            &["assets".into(), "/x".into()],
        );
        let wanted: Vec<&str> = FILES
            .iter()
            .copied()
            .filter(|f| s.wants((*f).into()))
            .collect();
        assert!(
            wanted.contains(&"top.bin") && !wanted.contains(&"assets/x.bin"),
            "{wanted:?}"
        );
        let notes = s.unmatched(FILES.len());
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("GIT_SESSION_LFS_INCLUDE: 'nope' matched none"),
            "{notes:?}"
        );
        assert!(
            notes[1].starts_with("GIT_SESSION_LFS_EXCLUDE: '/x' matched none"),
            "{notes:?}"
        );
        assert!(s.unmatched(0).is_empty());
    }
}
