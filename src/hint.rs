//! Every command git-session suggests in a message, in one type: a [`Hint`] renders as the
//! command between backticks, its arguments quoted for `sh`, so that it can be copied and run as
//! printed. Messages embed hints and never spell a command themselves (a test scans `src/` for
//! backticked `git …` outside this file); `tests/hints.rs` runs every variant of [`Hint::ALL`]
//! as printed, in the state whose message printed it, and fails for a variant without a run.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::types::{FullSha, SessionBranch};

/// One command a message suggests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    /// `git am --continue`: finish a stopped `git am`.
    AmContinue,
    /// `git am --abort`.
    AmAbort,
    /// `git rebase --continue`: finish a stopped rebase.
    RebaseContinue,
    /// `git rebase --abort` (it also drops uncommitted changes).
    RebaseAbort,
    /// `git commit`: conclude a merge whose conflicts are resolved.
    Commit,
    /// `git merge --abort`.
    MergeAbort,
    /// `git cherry-pick --continue`.
    CherryPickContinue,
    /// `git cherry-pick --abort`.
    CherryPickAbort,
    /// `git cherry-pick --quit`: stop a sequence of picks, keeping those made.
    CherryPickQuit,
    /// `git revert --continue`.
    RevertContinue,
    /// `git revert --abort`.
    RevertAbort,
    /// `git add -u`: mark every resolved path resolved (`save` stages every change anyway).
    AddUpdate,
    /// `git bisect reset`: end a bisect.
    BisectReset,
    /// `git switch BRANCH`: back onto the session branch.
    Switch(SessionBranch),
    /// `git stash`: put local changes aside (before a switch git refuses).
    Stash,
    /// `git stash pop`: take them back.
    StashPop,
    /// `git merge COMMIT`: bring commits made off the branch onto it.
    Merge(FullSha),
    /// `git merge --ff-only COMMIT`: bring the branch up to a commit this tree pushed.
    MergeFfOnly(FullSha),
    /// `git reset --soft COMMIT`: keep the work tree and index, move the branch there.
    ResetSoft(FullSha),
    /// `git reset`: rebuild the index from `HEAD` (the work tree untouched).
    ResetIndex,
    /// `git-session save`.
    Save,
    /// `git-session push`.
    Push,
    /// `git push`: the same plain push again.
    GitPush,
    /// `git push REMOTE HEAD:refs/heads/NAME`: the branch, under another name, to another
    /// repository (a remote's name: a URL may hold credentials and is never printed).
    PushElsewhere {
        /// The remote's name.
        remote: String,
        /// The branch name to push to.
        name: String,
    },
    /// `rm -r -- PATH`: remove what git-session wrote (its pre-push check, from a tree that is no
    /// longer a session) or what stands in the place of a file it wrote.
    Remove(PathBuf),
    /// `git lfs push --all origin`: upload the LFS objects of every local ref (git-lfs).
    LfsPushAll,
    /// `git fsck`: find the damaged objects of the repository.
    Fsck,
    /// `git-session restore -C DIR`, with the session's inputs (`READ_URL`, `SESSION_BRANCH`,
    /// `TIP_SHA`) from the environment.
    Restore(PathBuf),
    /// `SESSION_BRANCH=… TIP_SHA=… git-session restore [--submodules shallow] -C DIR`, with
    /// `READ_URL` from the environment: the session at `tip` into `dir` (a new folder, or the
    /// same one to fetch the submodules a restore left empty).
    RestoreAt {
        /// The folder.
        dir: PathBuf,
        /// The session branch.
        branch: SessionBranch,
        /// The commit.
        tip: FullSha,
        /// With `--submodules shallow`.
        submodules: bool,
    },
    /// `git -C DIR fetch -q --depth=1 origin BASE; git format-patch --stdout BASE..HEAD | git -C
    /// DIR am --3way`: this tree's commits since `base`, replayed in the tree `dir` (it works from
    /// a shallow tree, where a fetch from it does not), with `base` there for a three-way merge.
    BringCommitsOver {
        /// The commit local work starts from (excluded).
        base: FullSha,
        /// The last local commit.
        head: FullSha,
        /// The tree they go to.
        dir: PathBuf,
    },
    /// `git-session -C DIR save`.
    SaveIn(PathBuf),
    /// `git-session -C DIR agent add NAME`: a linked work tree of its own for another agent.
    AgentAdd {
        /// The session's main tree.
        dir: PathBuf,
        /// The agent's name.
        name: crate::types::AgentName,
    },
    /// `git-session agent remove NAME --force`: remove an agent's tree with what it holds.
    AgentRemoveForce(crate::types::AgentName),
    /// `git-session status`, run with `READ_URL` set: in a tree restored from an archive alone,
    /// it attaches history (fetches `TIP_SHA`, moves the person's plain commits onto it).
    Status,
    /// `git rebase --rebase-merges --force-rebase --gpg-sign BASE`: every commit since `base`
    /// made again, signed (with the signing set-up restore wrote into `.git/config`), merges
    /// kept as merges.
    Resign(FullSha),
}

impl Hint {
    /// The name of every variant, in declaration order: `tests/hints.rs` has a run for each.
    pub const ALL: [&'static str; 35] = [
        "AmContinue",
        "AmAbort",
        "RebaseContinue",
        "RebaseAbort",
        "Commit",
        "MergeAbort",
        "CherryPickContinue",
        "CherryPickAbort",
        "CherryPickQuit",
        "RevertContinue",
        "RevertAbort",
        "AddUpdate",
        "BisectReset",
        "Switch",
        "Stash",
        "StashPop",
        "Merge",
        "MergeFfOnly",
        "ResetSoft",
        "ResetIndex",
        "Save",
        "Push",
        "GitPush",
        "PushElsewhere",
        "Remove",
        "LfsPushAll",
        "Fsck",
        "Restore",
        "RestoreAt",
        "BringCommitsOver",
        "SaveIn",
        "AgentAdd",
        "AgentRemoveForce",
        "Status",
        "Resign",
    ];

    /// This hint's variant name (one of [`Hint::ALL`]).
    pub fn name(&self) -> &'static str {
        match self {
            Hint::AmContinue => "AmContinue",
            Hint::AmAbort => "AmAbort",
            Hint::RebaseContinue => "RebaseContinue",
            Hint::RebaseAbort => "RebaseAbort",
            Hint::Commit => "Commit",
            Hint::MergeAbort => "MergeAbort",
            Hint::CherryPickContinue => "CherryPickContinue",
            Hint::CherryPickAbort => "CherryPickAbort",
            Hint::CherryPickQuit => "CherryPickQuit",
            Hint::RevertContinue => "RevertContinue",
            Hint::RevertAbort => "RevertAbort",
            Hint::AddUpdate => "AddUpdate",
            Hint::BisectReset => "BisectReset",
            Hint::Switch(_) => "Switch",
            Hint::Stash => "Stash",
            Hint::StashPop => "StashPop",
            Hint::Merge(_) => "Merge",
            Hint::MergeFfOnly(_) => "MergeFfOnly",
            Hint::ResetSoft(_) => "ResetSoft",
            Hint::ResetIndex => "ResetIndex",
            Hint::Save => "Save",
            Hint::Push => "Push",
            Hint::GitPush => "GitPush",
            Hint::PushElsewhere { .. } => "PushElsewhere",
            Hint::Remove(_) => "Remove",
            Hint::LfsPushAll => "LfsPushAll",
            Hint::Fsck => "Fsck",
            Hint::Restore(_) => "Restore",
            Hint::RestoreAt { .. } => "RestoreAt",
            Hint::BringCommitsOver { .. } => "BringCommitsOver",
            Hint::SaveIn(_) => "SaveIn",
            Hint::AgentAdd { .. } => "AgentAdd",
            Hint::AgentRemoveForce(_) => "AgentRemoveForce",
            Hint::Status => "Status",
            Hint::Resign(_) => "Resign",
        }
    }

    /// The command line, unquoted by backticks.
    pub fn command(&self) -> String {
        let fixed = match self {
            Hint::AmContinue => "git am --continue",
            Hint::AmAbort => "git am --abort",
            Hint::RebaseContinue => "git rebase --continue",
            Hint::RebaseAbort => "git rebase --abort",
            Hint::Commit => "git commit",
            Hint::MergeAbort => "git merge --abort",
            Hint::CherryPickContinue => "git cherry-pick --continue",
            Hint::CherryPickAbort => "git cherry-pick --abort",
            Hint::CherryPickQuit => "git cherry-pick --quit",
            Hint::RevertContinue => "git revert --continue",
            Hint::RevertAbort => "git revert --abort",
            Hint::AddUpdate => "git add -u",
            Hint::BisectReset => "git bisect reset",
            Hint::Stash => "git stash",
            Hint::StashPop => "git stash pop",
            Hint::ResetIndex => "git reset",
            Hint::Save => "git-session save",
            Hint::Push => "git-session push",
            Hint::GitPush => "git push",
            Hint::LfsPushAll => "git lfs push --all origin",
            Hint::Fsck => "git fsck",
            Hint::Status => "git-session status",
            other => return other.command_with_arguments(),
        };
        fixed.to_owned()
    }

    fn command_with_arguments(&self) -> String {
        match self {
            Hint::Switch(branch) => format!("git switch {}", word(branch.as_str())),
            Hint::Merge(commit) => format!("git merge {commit}"),
            Hint::MergeFfOnly(commit) => format!("git merge --ff-only {commit}"),
            Hint::ResetSoft(commit) => format!("git reset --soft {commit}"),
            Hint::PushElsewhere { remote, name } => format!(
                "git push {} HEAD:{}",
                word(remote),
                word(&format!("refs/heads/{name}"))
            ),
            Hint::Remove(path) => format!("rm -r -- {}", path_word(path)),
            Hint::Restore(dir) => format!("git-session restore -C {}", path_word(dir)),
            Hint::RestoreAt {
                dir,
                branch,
                tip,
                submodules,
            } => format!(
                "SESSION_BRANCH={} TIP_SHA={tip} git-session restore{} -C {}",
                word(branch.as_str()),
                if *submodules {
                    " --submodules shallow"
                } else {
                    ""
                },
                path_word(dir)
            ),
            // The base fetched into the new (shallow) folder first: without its blobs `am --3way`
            // cannot build the ancestor, and a change next to the other sandbox's fails to apply.
            Hint::BringCommitsOver { base, head, dir } => format!(
                "git -C {dir} fetch -q --depth=1 origin {base}; git format-patch --stdout \
                 {base}..{head} | git -C {dir} am --3way",
                dir = path_word(dir)
            ),
            Hint::SaveIn(dir) => format!("git-session -C {} save", path_word(dir)),
            Hint::AgentAdd { dir, name } => {
                format!("git-session -C {} agent add {name}", path_word(dir))
            }
            Hint::AgentRemoveForce(name) => format!("git-session agent remove {name} --force"),
            // Forced, or rebase would keep the commits that need no replaying as they are.
            Hint::Resign(base) => {
                format!("git rebase --rebase-merges --force-rebase --gpg-sign {base}")
            }
            fixed => fixed.command(),
        }
    }
}

impl fmt::Display for Hint {
    /// The command between backticks, as messages show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.command())
    }
}

/// `s` as one `sh` word: as it is when it holds only characters the shell takes literally, else
/// single-quoted.
pub fn word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'_' | b'-' | b'.' | b'/' | b':' | b'@' | b'+' | b',' | b'%'
                )
        })
        && !s.starts_with('-');
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `p` as one `sh` word that survives the terminal rule: as [`word`] when it is UTF-8 without a
/// character the rule escapes, else `"$(printf '…')"` with those bytes as octal escapes (shown
/// escaped inside quotes, a control character would name another folder when run as printed).
fn path_word(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let bytes = p.as_os_str().as_bytes();
    if let Ok(s) = std::str::from_utf8(bytes)
        && crate::text::line_str(s) == s
    {
        return word(s);
    }
    let mut out = String::from("\"$(printf '");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'%' => out.push_str("%%"),
            b'\'' => out.push_str("'\\''"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push_str("')\"");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One hint of every variant: the match fails to compile when a variant is added, until it
    /// is added here (and to [`Hint::ALL`]).
    fn one_of_each() -> Vec<Hint> {
        let id = FullSha::zero(gix::hash::Kind::Sha1);
        let branch: SessionBranch = "sessions/x".parse().unwrap();
        let all = vec![
            Hint::AmContinue,
            Hint::AmAbort,
            Hint::RebaseContinue,
            Hint::RebaseAbort,
            Hint::Commit,
            Hint::MergeAbort,
            Hint::CherryPickContinue,
            Hint::CherryPickAbort,
            Hint::CherryPickQuit,
            Hint::RevertContinue,
            Hint::RevertAbort,
            Hint::AddUpdate,
            Hint::BisectReset,
            Hint::Switch(branch.clone()),
            Hint::Stash,
            Hint::StashPop,
            Hint::Merge(id),
            Hint::MergeFfOnly(id),
            Hint::ResetSoft(id),
            Hint::ResetIndex,
            Hint::Save,
            Hint::Push,
            Hint::GitPush,
            Hint::PushElsewhere {
                remote: "mirror".into(),
                name: "x".into(),
            },
            Hint::Remove("/w/.git/hooks/pre-push".into()),
            Hint::LfsPushAll,
            Hint::Fsck,
            Hint::Restore("/w".into()),
            Hint::RestoreAt {
                dir: "/w".into(),
                branch,
                tip: id,
                submodules: true,
            },
            Hint::BringCommitsOver {
                base: id,
                head: id,
                dir: "/w 2".into(),
            },
            Hint::SaveIn("/w".into()),
            Hint::AgentAdd {
                dir: "/w".into(),
                name: "a".parse().unwrap(),
            },
            Hint::AgentRemoveForce("a".parse().unwrap()),
            Hint::Status,
            Hint::Resign(id),
        ];
        for hint in &all {
            match hint {
                Hint::AmContinue
                | Hint::AmAbort
                | Hint::RebaseContinue
                | Hint::RebaseAbort
                | Hint::Commit
                | Hint::MergeAbort
                | Hint::CherryPickContinue
                | Hint::CherryPickAbort
                | Hint::CherryPickQuit
                | Hint::RevertContinue
                | Hint::RevertAbort
                | Hint::AddUpdate
                | Hint::BisectReset
                | Hint::Switch(_)
                | Hint::Stash
                | Hint::StashPop
                | Hint::Merge(_)
                | Hint::MergeFfOnly(_)
                | Hint::ResetSoft(_)
                | Hint::ResetIndex
                | Hint::Save
                | Hint::Push
                | Hint::GitPush
                | Hint::PushElsewhere { .. }
                | Hint::Remove(_)
                | Hint::LfsPushAll
                | Hint::Fsck
                | Hint::Restore(_)
                | Hint::RestoreAt { .. }
                | Hint::BringCommitsOver { .. }
                | Hint::SaveIn(_)
                | Hint::AgentAdd { .. }
                | Hint::AgentRemoveForce(_)
                | Hint::Status
                | Hint::Resign(_) => {}
            }
        }
        all
    }

    /// A path holding control characters or bytes that are not UTF-8 is printed so that the
    /// terminal rule leaves it alone and `sh` gives back the exact bytes.
    #[test]
    fn an_odd_path_runs_as_printed_through_the_terminal_rule() {
        use std::os::unix::ffi::OsStrExt as _;
        let raw: &[u8] = b"/tmp/p\x1b]0;T\x07\rq'x%y\\z \xff\xc3\xa9";
        let path = Path::new(std::ffi::OsStr::from_bytes(raw));
        let shown = path_word(path);
        assert_eq!(crate::text::terminal(&shown), shown.as_str());
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf '%s' {shown}")])
            .output()
            .unwrap();
        assert_eq!(out.stdout, raw, "{shown}");
        assert_eq!(path_word(Path::new("/plain/dir")), "/plain/dir");
    }

    #[test]
    fn all_names_every_variant_once_in_order() {
        let names: Vec<&str> = one_of_each().iter().map(Hint::name).collect();
        assert_eq!(names, Hint::ALL);
    }

    #[test]
    fn arguments_are_quoted_for_the_shell() {
        assert_eq!(word("sessions/a-1"), "sessions/a-1");
        assert_eq!(word("a b"), "'a b'");
        assert_eq!(word("it's"), "'it'\\''s'");
        assert_eq!(word("$(x)"), "'$(x)'");
        assert_eq!(word("-n"), "'-n'");
        assert_eq!(word(""), "''");
        for hint in one_of_each() {
            let text = hint.to_string();
            assert!(text.starts_with('`') && text.ends_with('`'), "{text}");
            assert_eq!(text.matches('`').count(), 2, "{text}");
        }
    }
}
