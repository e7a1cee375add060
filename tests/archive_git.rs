//! An archive-restored tree is a git tree from the first command (issue 27): plain git sees it
//! clean, `git diff` shows only the person's edits, and commits made with plain git before any
//! git-session command attaches history are pushed on top of `TIP_SHA` by the next `save`.

use std::path::{Path, PathBuf};

use crate::restore_archive::{BRANCH, restore_env};
use crate::support::real_repo::{RealServed, git_archive};
use crate::support::{GitServer, World};

/// A served repository, an archive of its first commit, and the READ_URL (with the token).
struct Restored {
    w: World,
    bare: PathBuf,
    tip: String,
    read: String,
    _srv: GitServer,
}

impl Restored {
    fn new() -> Self {
        let w = World::new();
        let RealServed {
            ids,
            bare,
            srv,
            read,
            ..
        } = RealServed::new(&w, "plain");
        let tip = ids[0].clone();
        Restored {
            w,
            bare,
            tip,
            read,
            _srv: srv,
        }
    }

    /// Restore the archive of `TIP_SHA` into a new folder `name`, for the session branch
    /// `BRANCH-name`.
    fn restore(&self, name: &str) -> PathBuf {
        let repo = self.bare.clone();
        let archive = git_archive(&self.w, &repo, &self.tip, None, &format!("{name}.tar.gz"));
        let dir = self.w.path(name);
        let branch = format!("{BRANCH}-{name}");
        let vars = [
            ("READ_URL", self.read.as_str()),
            ("SESSION_BRANCH", &branch),
        ];
        restore_env(&self.w, &dir, &archive, &self.tip, &[], &vars).assert_code(0);
        dir
    }

    /// Plain git in `dir`, as the person in the sandbox runs it (READ_URL in the environment, for
    /// the credential helper the restore configured).
    fn git(&self, dir: &Path, args: &[&str]) -> String {
        self.w.git_with_env(dir, args, &[("READ_URL", &self.read)])
    }
}

/// ctime, mtime, inode and size of `path` as the index records them (`git ls-files --debug`).
fn indexed_stat(r: &Restored, dir: &Path, path: &str) -> String {
    let debug = r.git(dir, &["ls-files", "--debug", "--", path]);
    let field = |name: &str| {
        debug
            .split_whitespace()
            .skip_while(|w| *w != name)
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    format!(
        "ctime {} mtime {} ino {} size {}",
        field("ctime:"),
        field("mtime:"),
        field("ino:"),
        field("size:")
    )
}

/// The same, from the file system.
fn stat(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::symlink_metadata(path).unwrap();
    format!(
        "ctime {}:{} mtime {}:{} ino {} size {}",
        m.ctime(),
        m.ctime_nsec(),
        m.mtime(),
        m.mtime_nsec(),
        m.ino(),
        m.size()
    )
}

#[test]
fn plain_git_sees_a_clean_tree_right_after_an_archive_restore() {
    let r = Restored::new();
    let dir = r.restore("clean");
    // The index's stat data are the files' as they are in place (a file at the top was renamed
    // there, which changed its ctime), so git hashes nothing again.
    for path in ["README.md", "nested/a/b/c/deep.txt", "bin/run.sh"] {
        assert_eq!(
            indexed_stat(&r, &dir, path),
            stat(&dir.join(path)),
            "{path}"
        );
    }
    assert_eq!(
        r.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        "",
        "git status right after the restore"
    );
    // The index holds exactly the commit's tree.
    assert_eq!(
        r.git(&dir, &["write-tree"]),
        r.w.git(&r.bare, &["rev-parse", &format!("{}^{{tree}}", r.tip)])
    );
    assert_eq!(r.git(&dir, &["rev-parse", "HEAD"]), r.tip);
    // An edit shows as that edit, and only it.
    std::fs::write(dir.join("README.md"), "# real, edited\n").unwrap();
    assert_eq!(r.git(&dir, &["status", "--porcelain"]), " M README.md");
    let diff = r.git(&dir, &["diff", "--no-color"]);
    assert!(
        diff.contains("-# real") && diff.contains("+# real, edited"),
        "{diff}"
    );
    assert_eq!(r.git(&dir, &["diff", "--name-only"]), "README.md");
}

/// `add P` committed with plain git before any git-session command, then `save`: the remote
/// branch is TIP ← "add P" ← save's commit, and TIP..remote changes only what the person changed.
/// Also with the commit amended, and with `git commit -a`.
#[test]
fn commits_made_with_plain_git_before_history_is_attached_are_pushed_on_tip() {
    let r = Restored::new();
    for (case, amend, all) in [
        ("one", false, false),
        ("amend", true, false),
        ("all", false, true),
    ] {
        let dir = r.restore(case);
        std::fs::write(dir.join("P.md"), format!("P of {case}\n")).unwrap();
        if all {
            std::fs::write(dir.join("README.md"), "# real, by commit -a\n").unwrap();
            r.git(&dir, &["add", "P.md"]);
            r.git(&dir, &["commit", "-q", "-a", "-m", "add P"]);
        } else {
            r.git(&dir, &["add", "P.md"]);
            r.git(&dir, &["commit", "-q", "-m", "add P"]);
        }
        if amend {
            r.git(&dir, &["commit", "-q", "--amend", "-m", "add P, amended"]);
        }
        let by_git = r.git(&dir, &["rev-parse", "HEAD"]);
        assert_eq!(r.git(&dir, &["rev-parse", "HEAD^"]), r.tip, "{case}");
        // More, not committed: save commits it on top.
        std::fs::write(dir.join("more.txt"), "more\n").unwrap();
        let branch = format!("{BRANCH}-{case}");
        let run = r.w.run(
            &dir,
            &["save", "-m", "more", "--json"],
            &[("READ_URL", &r.read), ("PUSH_URL", &r.read)],
        );
        run.assert_code(0);
        let remote =
            r.w.git(&r.bare, &["rev-parse", &format!("refs/heads/{branch}")]);
        assert_eq!(
            r.w.git(&r.bare, &["rev-parse", &format!("{remote}^")]),
            by_git,
            "{case}"
        );
        assert_eq!(
            r.w.git(&r.bare, &["rev-parse", &format!("{remote}^^")]),
            r.tip,
            "{case}"
        );
        let changed = r.w.git(&r.bare, &["diff", "--name-only", &r.tip, &remote]);
        let want = if all {
            "P.md\nREADME.md\nmore.txt"
        } else {
            "P.md\nmore.txt"
        };
        assert_eq!(changed, want, "{case}");
        assert_eq!(
            r.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
            "",
            "{case}"
        );
    }
}

/// An archive that is not the commit's tree (here the next commit's tree, which records no commit
/// id, and a file whose content the remote does not have, as `export-subst` makes): once history
/// is attached, git-session says so in every output's warnings, the index follows the commit
/// (git can read every object it names: it held the archive's ids, which no one has, and `save`
/// failed with exit 1), git shows the difference as changes, and `save` commits them.
#[test]
fn an_archive_that_differs_from_the_commit_is_said_when_history_is_attached() {
    let r = Restored::new();
    let scratch = r.w.tmp.path().join("scratch-plain");
    r.w.git(&scratch, &["checkout", "-q", "main"]);
    std::fs::write(scratch.join("only-here.txt"), "not on the remote\n").unwrap();
    let local = r.w.commit_all(&scratch, "never pushed");
    let archive = git_archive(
        &r.w,
        &scratch,
        &format!("{local}^{{tree}}"),
        None,
        "other.tar.gz",
    );
    let dir = r.w.path("other");
    restore_env(&r.w, &dir, &archive, &r.tip, &[], &[("READ_URL", &r.read)]).assert_code(0);
    let run =
        r.w.run(&dir, &["status", "--json"], &[("READ_URL", &r.read)]);
    run.assert_code(0);
    let warnings = run.json()["warnings"].to_string();
    assert!(
        warnings.contains("are not commit") && warnings.contains(&r.tip),
        "{}",
        run.stdout
    );
    assert_eq!(r.git(&dir, &["diff", "--cached", "--name-only"]), "");
    assert_eq!(
        r.git(&dir, &["status", "--porcelain"]),
        " M README.md\n?? later.txt\n?? only-here.txt"
    );
    let save = r.w.run(
        &dir,
        &["save", "-m", "the archive's difference", "--json"],
        &[("READ_URL", &r.read), ("PUSH_URL", &r.read)],
    );
    save.assert_code(0);
    let pushed = save.json()["tip"].as_str().unwrap().to_owned();
    let tree = |rev: &str, at: &Path| r.w.git(at, &["rev-parse", &format!("{rev}^{{tree}}")]);
    assert_eq!(tree(&pushed, &r.bare), tree(&local, &scratch));
}

/// The git command a refusal prints, run as printed: `git reset --soft <id>` in the message.
fn run_the_hint(r: &Restored, dir: &Path, message: &str) {
    let start = message.find("`git reset --soft ").expect(message) + 1;
    let len = message[start..].find('`').expect(message);
    let command = &message[start..start + len];
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    r.git(dir, &args);
}

/// Each way history can be rewritten in an archive-restored tree — an amend of what a save pushed,
/// an amend of `TIP_SHA` itself before the first save — is refused with exit 7 saying which, and
/// the command the message prints works as printed in that tree: the next save pushes.
#[test]
fn the_hints_of_a_rewritten_history_work_as_printed_in_an_archive_restored_tree() {
    let r = Restored::new();
    let save = |dir: &Path| {
        r.w.run(
            dir,
            &["save", "-m", "work", "--json"],
            &[("READ_URL", &r.read), ("PUSH_URL", &r.read)],
        )
    };
    // An amend of the pushed commit.
    let dir = r.restore("amended");
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    save(&dir).assert_code(0);
    let pushed = r.git(&dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("c.txt"), "c\n").unwrap();
    r.git(&dir, &["add", "c.txt"]);
    r.git(&dir, &["commit", "-q", "--amend", "-m", "amended"]);
    let run = save(&dir);
    run.assert_code(7);
    let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.contains("rewritten after the push") && msg.contains(&pushed),
        "{msg}"
    );
    run_the_hint(&r, &dir, &msg);
    save(&dir).assert_code(0);
    assert_eq!(r.git(&dir, &["rev-parse", "HEAD^"]), pushed);
    // An amend of TIP_SHA itself, before anything was saved.
    let dir = r.restore("tip-amended");
    r.git(&dir, &["commit", "-q", "--amend", "-m", "not TIP any more"]);
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    let run = save(&dir);
    run.assert_code(7);
    let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.contains("does not descend from the restored TIP_SHA"),
        "{msg}"
    );
    run_the_hint(&r, &dir, &msg);
    save(&dir).assert_code(0);
    assert_eq!(r.git(&dir, &["rev-parse", "HEAD^"]), r.tip);
}

/// Plain `git push` of a plain `git commit`, first thing in an archive-restored tree: the pre-push
/// check lets it through (the branch is new) and the remote gets TIP ← the commit.
#[test]
fn a_plain_git_push_first_thing_in_an_archive_restored_tree_lands_on_tip() {
    let r = Restored::new();
    let dir = r.restore("plain-push");
    std::fs::write(dir.join("P.md"), "P\n").unwrap();
    r.git(&dir, &["add", "P.md"]);
    r.git(&dir, &["commit", "-q", "-m", "add P"]);
    let head = r.git(&dir, &["rev-parse", "HEAD"]);
    r.w.git_with_env(
        &dir,
        &["push", "-q", "origin", "HEAD"],
        &[("READ_URL", &r.read), ("PUSH_URL", &r.read)],
    );
    let branch = format!("refs/heads/{BRANCH}-plain-push");
    assert_eq!(r.w.git(&r.bare, &["rev-parse", &branch]), head);
    assert_eq!(r.w.git(&r.bare, &["rev-parse", &format!("{head}^")]), r.tip);
}

/// The promise record removed, or replaced by a symlink: the next command says what to do (it
/// swallowed the record's error and failed with exit 1, "Could not peel reference"), and once
/// it is gone attaches history all the same: the branch's commit is not here, so it is needed.
#[test]
fn a_removed_or_tampered_promise_record_is_said_and_history_still_attached() {
    let r = Restored::new();
    let record = ".git/git-session-history-promised";
    let dir = r.restore("gone");
    std::fs::remove_file(dir.join(record)).unwrap();
    let run =
        r.w.run(&dir, &["status", "--json"], &[("READ_URL", &r.read)]);
    run.assert_code(0);
    assert_eq!(r.git(&dir, &["status", "--porcelain"]), "");
    assert_eq!(r.w.git(&dir, &["rev-parse", "HEAD"]), r.tip);

    let dir = r.restore("linked");
    std::fs::remove_file(dir.join(record)).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.join(record)).unwrap();
    let run =
        r.w.run(&dir, &["status", "--json"], &[("READ_URL", &r.read)]);
    run.assert_code(7);
    let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(record) && message.contains("remove it"),
        "{message}"
    );
    std::fs::remove_file(dir.join(record)).unwrap();
    r.w.run(&dir, &["status", "--json"], &[("READ_URL", &r.read)])
        .assert_code(0);
    assert_eq!(r.git(&dir, &["status", "--porcelain"]), "");
}

/// An archive restore without READ_URL cannot ask the remote, and takes TIP_SHA for the lease: a
/// new session (no branch on the remote) was then "deleted" to every save, exit 3 blaming another
/// sandbox. The first push creates it instead — and once another sandbox has, it is stale.
#[test]
fn a_new_session_restored_from_an_archive_without_read_url_can_save() {
    let r = Restored::new();
    let archive = git_archive(&r.w, &r.bare, &r.tip, None, "unasked.tar.gz");
    let vars = [("READ_URL", r.read.as_str()), ("PUSH_URL", r.read.as_str())];
    let mut dirs = Vec::new();
    for name in ["first", "second"] {
        let dir = r.w.path(name);
        restore_env(
            &r.w,
            &dir,
            &archive,
            &r.tip,
            &[],
            &[("SESSION_BRANCH", "sessions/unasked")],
        )
        .assert_code(0);
        std::fs::write(dir.join(format!("{name}.txt")), "work\n").unwrap();
        dirs.push(dir);
    }
    let status = r.w.run(&dirs[0], &["status", "--remote", "--json"], &vars);
    assert_eq!(status.json()["remote_state"], "lease", "{}", status.stdout);
    let save =
        r.w.run(&dirs[0], &["save", "-m", "first work", "--json"], &vars);
    save.assert_code(0);
    let tip = save.json()["tip"].as_str().unwrap().to_owned();
    let remote = r.w.git(&r.bare, &["rev-parse", "sessions/unasked"]);
    assert_eq!(remote, tip);
    assert_eq!(r.w.git(&r.bare, &["rev-parse", &format!("{tip}^")]), r.tip);
    let late =
        r.w.run(&dirs[1], &["save", "-m", "second work", "--json"], &vars);
    late.assert_code(3);
    assert_eq!(r.w.git(&r.bare, &["rev-parse", "sessions/unasked"]), tip);
}
