//! The attribute rules of the early checkout: which `.gitattributes` lines could make a file's
//! checked-out form differ from its blob. The resolver holds back every file one of them matches,
//! for the checkout after the transfer, which applies the attributes properly.

use gix::bstr::{BStr, ByteSlice as _};

/// The rules of one `.gitattributes` that matter to a checkout: the patterns of lines assigning
/// an attribute that could make a file's checked-out form differ from its blob. Precedence is
/// ignored (a later line unsetting it does not help): a file any of them match waits for the
/// checkout after the transfer, which applies the attributes properly.
#[derive(Default)]
pub(super) struct Rules {
    /// A line could not be parsed: every file under it waits.
    all: bool,
    patterns: Vec<gix::glob::Pattern>,
}

impl Rules {
    pub(super) fn parse(data: &[u8]) -> Self {
        let mut rules = Rules::default();
        for line in gix::attrs::parse(data) {
            let Ok((kind, assignments, _)) = line else {
                rules.all = true;
                continue;
            };
            let gix::attrs::parse::Kind::Pattern(pattern) = kind else {
                // A macro may redefine any name (`[attr]binary eol=crlf`), here and in every
                // nested file: only the root's count, and the root holds every path.
                rules.all = true;
                continue;
            };
            let mut converting = false;
            for assignment in assignments {
                match assignment {
                    Ok(a) => converting |= may_convert(a.name.as_str(), a.state),
                    Err(_) => converting = true,
                }
            }
            // A pattern too costly to match holds every file back; the checkout refuses the tree.
            if !crate::glob::bounded(&pattern.text) {
                rules.all = true;
            } else if converting {
                rules.patterns.push(pattern);
            }
        }
        rules
    }

    /// Whether a line may convert the file at `rel` (relative to the attributes file's folder).
    pub(super) fn may_convert(&self, rel: &BStr) -> bool {
        self.all
            || self.patterns.iter().any(|p| {
                p.matches_repo_relative_path(
                    rel,
                    rel.rfind_byte(b'/').map(|i| i + 1),
                    Some(false),
                    gix::glob::pattern::Case::Sensitive,
                    gix::glob::wildmatch::Mode::NO_MATCH_SLASH_LITERAL,
                )
            })
    }
}

/// Whether assigning `name` so may make a checkout write something else than the blob, on this
/// platform (LF line endings, no `core.autocrlf`: `text` and `eol=lf` change nothing on the way
/// out). Only `eol`, `crlf`, `filter`, `ident` and `working-tree-encoding` convert; any other name
/// is either git's harmless own or a macro, and a macro is git's only where the root
/// `.gitattributes` defines it, whose macro line already holds back every file (git/git's
/// `*.pl text eof=lf`, a typo, held 19 files for after the transfer).
fn may_convert(name: &str, state: gix::attrs::StateRef<'_>) -> bool {
    use gix::attrs::StateRef;
    let value = |v: &str| matches!(state, StateRef::Value(x) if x.as_bstr() == v);
    match name {
        "eol" => !(value("lf") || matches!(state, StateRef::Unset | StateRef::Unspecified)),
        "crlf" => !(value("input") || matches!(state, StateRef::Unset | StateRef::Unspecified)),
        // No filter driver ever runs (SPEC rule 8): a filter other than LFS (whose files the LFS
        // stage rewrites) leaves the blob as it is (git/git's `*.po filter=gettext-no-location`,
        // its 35 largest files, 15 MB, were all written after the pack's last byte).
        "filter" => {
            !matches!(state, StateRef::Unset | StateRef::Unspecified)
                && !matches!(state, StateRef::Value(v) if v.as_bstr() != "lfs")
        }
        "ident" | "working-tree-encoding" => {
            !matches!(state, StateRef::Unset | StateRef::Unspecified)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn converts(attributes: &str, path: &str) -> bool {
        Rules::parse(attributes.as_bytes()).may_convert(path.into())
    }

    #[test]
    fn only_attributes_that_change_the_checked_out_bytes_hold_a_file_back() {
        // Harmless on Linux without core.autocrlf: text, eol=lf, diff, merge, linguist-*.
        for plain in [
            "* text=auto",
            "*.sh text eol=lf",
            "*.c diff=cpp whitespace=trail",
            "*.bin binary",
            "*.min.js linguist-generated -diff",
            "*.txt -crlf",
            "*.txt crlf=input",
            "*.txt !eol",
            "*.po filter=gettext-no-location",
            "*.txt -filter",
            // A name no macro defines (a typo of `eol`): git ignores it.
            "*.txt eof=crlf",
            "*.txt mymacro",
        ] {
            assert!(!converts(plain, "a/b.sh"), "{plain}");
            assert!(!converts(plain, "x.txt"), "{plain}");
        }
        for (converting, path) in [
            ("*.bat text eol=crlf", "win/run.bat"),
            ("*.c ident", "a.c"),
            ("*.psd filter=lfs", "art/x.psd"),
            ("*.txt working-tree-encoding=UTF-16", "x.txt"),
            ("*.txt crlf", "x.txt"),
            ("[attr]mymacro eol=crlf\n*.txt mymacro", "x.txt"),
            ("/top.txt eol=crlf", "top.txt"),
            ("docs/** eol=crlf", "docs/a/b.md"),
        ] {
            assert!(converts(converting, path), "{converting} on {path}");
        }
        // A pattern that does not match leaves the file alone; an anchored one matches only there.
        assert!(!converts("*.bat eol=crlf", "run.sh"));
        assert!(!converts("/top.txt eol=crlf", "sub/top.txt"));
        // A macro may redefine a harmless name: everything under that file waits.
        assert!(converts("[attr]binary eol=crlf\n*.dat binary", "x.dat"));
        assert!(converts("[attr]diff eol=crlf\n*.md diff", "other.txt"));
        // An assignment gix refuses holds back the files of its line.
        assert!(converts("*.txt builtin_objectmode", "x.txt"));
    }
}
