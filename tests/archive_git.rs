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
    srv: GitServer,
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
            srv,
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

    /// Restore the archive of `TIP_SHA` into `name` as [`Restored::restore`] does, but with no
    /// `READ_URL`: an archive stream and nothing else, as the contract allows.
    fn restore_archive_only(&self, name: &str) -> (PathBuf, crate::support::Run) {
        let archive = git_archive(
            &self.w,
            &self.bare,
            &self.tip,
            None,
            &format!("{name}.tar.gz"),
        );
        let dir = self.w.path(name);
        let branch = format!("{BRANCH}-{name}");
        let run = restore_env(
            &self.w,
            &dir,
            &archive,
            &self.tip,
            &[],
            &[("SESSION_BRANCH", &branch)],
        );
        run.assert_code(0);
        (dir, run)
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
/// id, and a file whose content the remote does not have, as `export-subst` makes): the restore,
/// which fetches the commit's trees beside the extraction, says so in its warnings, the index follows the commit
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
    let run = restore_env(&r.w, &dir, &archive, &r.tip, &[], &[("READ_URL", &r.read)]);
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
    let (dir, _) = r.restore_archive_only("gone");
    std::fs::remove_file(dir.join(record)).unwrap();
    let run =
        r.w.run(&dir, &["status", "--json"], &[("READ_URL", &r.read)]);
    run.assert_code(0);
    assert_eq!(r.git(&dir, &["status", "--porcelain"]), "");
    assert_eq!(r.w.git(&dir, &["rev-parse", "HEAD"]), r.tip);

    let (dir, _) = r.restore_archive_only("linked");
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

/// The tree git would commit for `dir`'s files as they are: a copy without `.git`, all added.
fn work_tree_id(r: &Restored, dir: &Path, name: &str) -> String {
    let copy = r.w.path(&format!("judge-{name}"));
    let status = std::process::Command::new("cp")
        .args(["-a", dir.to_str().unwrap(), copy.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_dir_all(copy.join(".git")).unwrap();
    let format = format!("--object-format={}", crate::support::object_format());
    r.w.git(&copy, &["init", "-q", &format]);
    r.w.git(&copy, &["add", "-A"]);
    r.w.git(&copy, &["write-tree"])
}

/// Each commit of `from..to` on the remote, oldest first (`--topo-order`: the same order each run), as `git diff-tree --name-status` lists
/// its change from its parent.
fn changes_on_remote(r: &Restored, from: &str, to: &str) -> Vec<String> {
    let range = format!("{from}..{to}");
    let list =
        r.w.git(&r.bare, &["rev-list", "--topo-order", "--reverse", &range]);
    list.lines()
        .map(|c| {
            r.w.git(
                &r.bare,
                &["diff-tree", "--no-commit-id", "--name-status", "-r", c],
            )
            .replace('\t', " ")
        })
        .collect()
}

/// Issue 39, section 1: an archive restored with no `READ_URL` (the archive alone) has no
/// history; the restore says in one line what plain git sees until it is attached. The person's
/// plain commits made meanwhile — one, two, an amend, `git commit -a`, `git rm`, and a commit of
/// one added file — are moved onto TIP_SHA by the next `save` with the URLs set: the remote
/// branch is a fast-forward child of TIP_SHA whose commits make exactly the person's changes and
/// whose tree is their work. (It was exit 7, "does not descend from the restored TIP_SHA", and
/// the printed `git reset --soft <TIP>` failed: "Could not parse object".)
#[test]
fn plain_commits_in_a_tree_restored_from_an_archive_alone_are_moved_onto_tip() {
    let r = Restored::new();
    let write = |dir: &Path, name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    // A merge's own change is empty to `diff-tree`: its parents carry the changes.
    let cases: [(&str, &[&str]); 7] = [
        ("one", &["A P.md\nM README.md", "A more.txt"]),
        ("only-p", &["A P.md", "A more.txt"]),
        ("two", &["A P.md", "M README.md", "A more.txt"]),
        ("amend", &["A P.md\nA Q.md", "A more.txt"]),
        ("all", &["A P.md", "M README.md", "A more.txt"]),
        ("rm", &["A P.md", "D empty.txt", "A more.txt"]),
        (
            "merge",
            &["A P.md", "M README.md", "A side.txt", "", "A more.txt"],
        ),
    ];
    for (case, want) in cases {
        let (dir, run) = r.restore_archive_only(case);
        let said = run.json()["warnings"].to_string();
        assert!(
            said.contains("untracked") && said.contains("READ_URL"),
            "{case}: {said}"
        );
        // Plain git sees no history: every file untracked.
        assert!(
            r.git(&dir, &["status", "--porcelain"])
                .contains("?? README.md"),
            "{case}"
        );
        write(&dir, "P.md", &format!("P of {case}\n"));
        match case {
            "one" => {
                write(&dir, "README.md", "# real, edited\n");
                r.git(&dir, &["add", "-A"]);
                r.git(&dir, &["commit", "-q", "-m", "one"]);
            }
            "only-p" => {
                r.git(&dir, &["add", "P.md"]);
                r.git(&dir, &["commit", "-q", "-m", "P alone"]);
            }
            "two" => {
                r.git(&dir, &["add", "P.md"]);
                r.git(&dir, &["commit", "-q", "-m", "P"]);
                write(&dir, "README.md", "# real, second commit\n");
                r.git(&dir, &["add", "README.md"]);
                r.git(&dir, &["commit", "-q", "-m", "README"]);
            }
            "amend" => {
                r.git(&dir, &["add", "-A"]);
                r.git(&dir, &["commit", "-q", "-m", "P"]);
                write(&dir, "Q.md", "Q\n");
                r.git(&dir, &["add", "Q.md"]);
                r.git(&dir, &["commit", "-q", "--amend", "-m", "P and Q"]);
            }
            "all" => {
                r.git(&dir, &["add", "-A"]);
                r.git(&dir, &["commit", "-q", "-m", "P"]);
                write(&dir, "README.md", "# real, by commit -a\n");
                r.git(&dir, &["commit", "-q", "-a", "-m", "README"]);
            }
            "merge" => {
                r.git(&dir, &["add", "-A"]);
                r.git(&dir, &["commit", "-q", "-m", "P"]);
                r.git(&dir, &["checkout", "-q", "-b", "side"]);
                write(&dir, "side.txt", "side\n");
                r.git(&dir, &["add", "side.txt"]);
                r.git(&dir, &["commit", "-q", "-m", "side"]);
                r.git(&dir, &["checkout", "-q", "-"]);
                write(&dir, "README.md", "# real, beside the side\n");
                r.git(&dir, &["commit", "-q", "-a", "-m", "README"]);
                r.git(&dir, &["merge", "-q", "--no-edit", "side"]);
            }
            _ => {
                r.git(&dir, &["add", "-A"]);
                r.git(&dir, &["commit", "-q", "-m", "P"]);
                r.git(&dir, &["rm", "-q", "empty.txt"]);
                r.git(&dir, &["commit", "-q", "-m", "rm"]);
            }
        }
        // More, not committed: save commits it on top.
        write(&dir, "more.txt", "more\n");
        let vars = [("READ_URL", r.read.as_str()), ("PUSH_URL", r.read.as_str())];
        let mut run = r.w.run(&dir, &["save", "-m", "more", "--json"], &vars);
        if run.code == Some(7) {
            // A hint, if any, must work as printed.
            let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
            run_the_hint(&r, &dir, &msg);
            run = r.w.run(&dir, &["save", "-m", "more", "--json"], &vars);
        }
        run.assert_code(0);
        let said = run.json()["warnings"].to_string();
        let branch = format!("refs/heads/{BRANCH}-{case}");
        let remote = r.w.git(&r.bare, &["rev-parse", &branch]);
        assert!(
            r.w.git_output(&r.bare, &["merge-base", "--is-ancestor", &r.tip, &remote])
                .status
                .success(),
            "{case}: the remote branch is not a child of TIP_SHA"
        );
        assert_eq!(
            changes_on_remote(&r, &r.tip, &remote),
            want,
            "{case}: {said}"
        );
        let tree =
            r.w.git(&r.bare, &["rev-parse", &format!("{remote}^{{tree}}")]);
        assert_eq!(tree, work_tree_id(&r, &dir, case), "{case}");
        assert_eq!(
            r.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
            "",
            "{case}"
        );
        assert_eq!(r.git(&dir, &["rev-parse", "HEAD"]), remote, "{case}");
    }
}

/// Fetch requests (protocol v2 `command=fetch`) the server answered.
fn fetches(srv: &GitServer) -> Vec<String> {
    srv.log()
        .iter()
        .map(|e| String::from_utf8_lossy(&e.body).into_owned())
        .filter(|body| body.contains("command=fetch"))
        .collect()
}

/// Issue 39, section 1: restored from an archive with READ_URL set, the tree's commit and trees
/// are fetched during the restore (one fetch: `filter blob:none` where the server takes it, else
/// the whole commit), so plain git works offline — READ_URL unset and the server stopped —
/// as in a git-restored tree: `git status`, `git log -1`, `git diff`, `git commit`. (They exited
/// 128: the commit was left to a lazy fetch.) A server without `filter` gets no
/// `partialclonefilter`, nor a promisor remote, as it sent every object.
#[test]
fn plain_git_works_offline_in_a_tree_restored_from_an_archive_with_read_url() {
    for filter in [true, false] {
        let w = World::new();
        let RealServed {
            ids,
            bare,
            srv,
            read,
            ..
        } = RealServed::new(&w, "offline");
        w.git(
            &bare,
            &["config", "uploadpack.allowFilter", &filter.to_string()],
        );
        let tip = ids[0].clone();
        let archive = git_archive(&w, &bare, &tip, None, "offline.tar.gz");
        let dir = w.path("offline");
        restore_env(&w, &dir, &archive, &tip, &[], &[("READ_URL", &read)]).assert_code(0);
        let asked = fetches(&srv);
        assert_eq!(asked.len(), 1, "filter {filter}: {asked:?}");
        assert_eq!(
            asked[0].contains("filter blob:none"),
            filter,
            "{}",
            asked[0]
        );
        let config = |key: &str| {
            let out = w.git_output(&dir, &["config", "--get", key]);
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        let want = if filter { "blob:none" } else { "" };
        assert_eq!(
            config("remote.origin.partialclonefilter"),
            want,
            "filter {filter}"
        );
        let want = if filter { "origin" } else { "" };
        assert_eq!(config("extensions.partialClone"), want, "filter {filter}");
        drop(srv);
        // Offline, and READ_URL not in the environment.
        assert_eq!(
            w.git(&dir, &["status", "--porcelain"]),
            "",
            "filter {filter}"
        );
        assert_eq!(w.git(&dir, &["log", "-1", "--format=%H"]), tip);
        assert_eq!(w.git(&dir, &["diff"]), "");
        std::fs::write(dir.join("new.txt"), "new\n").unwrap();
        w.git(&dir, &["add", "new.txt"]);
        assert!(w.git(&dir, &["diff", "--cached"]).contains("+new"));
        // Every blob is here (with `filter`, the archive's, kept in a pack): the diff of an edit.
        std::fs::write(dir.join("README.md"), "# real, edited\n").unwrap();
        let diff = w.git(&dir, &["diff"]);
        assert!(
            diff.contains("-# real") && diff.contains("+# real, edited"),
            "{diff}"
        );
        w.git(&dir, &["add", "README.md"]);
        std::fs::write(dir.join("nested/a/b/c/deep.txt"), "deeper\n").unwrap();
        w.git(&dir, &["commit", "-q", "-a", "-m", "offline, -a"]);
        w.git(&dir, &["fsck", "--no-progress"]);
        w.git(&dir, &["reset", "-q", "--soft", "HEAD^"]);
        w.git(&dir, &["commit", "-q", "-m", "offline"]);
        assert_eq!(w.git(&dir, &["rev-parse", "HEAD^"]), tip);
        assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
    }
}

/// Issue 39, section 1: what the restore fetched is never fetched again — not by plain git (its
/// lazy fetch downloaded the whole commit from a server without `filter`, warning "filtering not
/// recognized by server") nor by `git-session status`, which downloaded it a second time.
#[test]
fn nothing_an_archive_restore_fetched_is_fetched_again() {
    for filter in [false, true] {
        let r = Restored::new();
        r.w.git(
            &r.bare,
            &["config", "uploadpack.allowFilter", &filter.to_string()],
        );
        let dir = r.restore(&format!("once-{filter}"));
        let out =
            r.w.git_output_with_env(&dir, &["status", "--porcelain"], &[("READ_URL", &r.read)]);
        assert!(out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("filtering not recognized"), "{stderr}");
        r.git(&dir, &["log", "-1"]);
        r.w.run(&dir, &["status", "--json"], &[("READ_URL", &r.read)])
            .assert_code(0);
        std::fs::write(dir.join("x.txt"), "x\n").unwrap();
        r.w.run(
            &dir,
            &["save", "-m", "x", "--json"],
            &[("READ_URL", &r.read), ("PUSH_URL", &r.read)],
        )
        .assert_code(0);
        let asked = fetches(&r.srv);
        assert_eq!(asked.len(), 1, "filter {filter}: {asked:?}");
    }
}

/// A plain `git push` of plain commits in a tree restored from an archive alone (given only
/// PUSH_URL, so `origin` exists) is refused by the pre-push check, which says what attaches
/// history (it said "rebuild your work on top of" TIP_SHA, which is not in the repository); the
/// command it names, run as printed, moves the commits onto TIP_SHA, and the push then lands.
#[test]
fn a_plain_git_push_before_history_is_attached_says_what_attaches_it() {
    let r = Restored::new();
    let archive = git_archive(&r.w, &r.bare, &r.tip, None, "push-first.tar.gz");
    let dir = r.w.path("push-first");
    let branch = format!("{BRANCH}-push-first");
    let vars = [
        ("SESSION_BRANCH", branch.as_str()),
        ("PUSH_URL", r.read.as_str()),
    ];
    restore_env(&r.w, &dir, &archive, &r.tip, &[], &vars).assert_code(0);
    std::fs::write(dir.join("P.md"), "P\n").unwrap();
    r.git(&dir, &["add", "P.md"]);
    r.git(&dir, &["commit", "-q", "-m", "add P"]);
    let push = |env: &[(&str, &str)]| {
        r.w.git_output_with_env(&dir, &["push", "-q", "origin", "HEAD"], env)
    };
    let out = push(&[("PUSH_URL", &r.read)]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    let start = said.find("`git-session ").expect(&said) + 1;
    let len = said[start..].find('`').expect(&said);
    let args: Vec<&str> = said[start..start + len]
        .split_whitespace()
        .skip(1)
        .collect();
    assert!(said.contains("READ_URL"), "{said}");
    r.w.run(&dir, &args, &[("READ_URL", &r.read)])
        .assert_code(0);
    let out = push(&[("PUSH_URL", &r.read)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let remote =
        r.w.git(&r.bare, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(
        r.w.git(&r.bare, &["rev-parse", &format!("{remote}^")]),
        r.tip
    );
    assert_eq!(changes_on_remote(&r, &r.tip, &remote), ["A P.md"]);
}

/// A tree restored from an archive alone (no READ_URL: nothing known of the remote branch) has no
/// upstream yet, so `git status` after a plain commit never calls it "gone" (README's promise for
/// a new session; it said "the upstream is gone" before).
#[test]
fn an_archive_alone_tree_has_no_upstream_git_calls_gone() {
    let r = Restored::new();
    let archive = git_archive(&r.w, &r.bare, &r.tip, None, "no-upstream.tar.gz");
    let dir = r.w.path("no-upstream");
    let branch = format!("{BRANCH}-no-upstream");
    let vars = [
        ("SESSION_BRANCH", branch.as_str()),
        ("PUSH_URL", r.read.as_str()),
    ];
    restore_env(&r.w, &dir, &archive, &r.tip, &[], &vars).assert_code(0);
    r.git(&dir, &["add", "-A"]);
    r.git(&dir, &["commit", "-q", "-m", "x"]);
    let status = r.git(&dir, &["status"]);
    assert!(!status.contains("gone"), "{status}");
}

crate::sha256_too!(
    plain_git_sees_a_clean_tree_right_after_an_archive_restore,
    plain_git_works_offline_in_a_tree_restored_from_an_archive_with_read_url,
    an_archive_that_differs_from_the_commit_is_said_when_history_is_attached,
    a_removed_or_tampered_promise_record_is_said_and_history_still_attached,
    commits_made_with_plain_git_before_history_is_attached_are_pushed_on_tip,
    plain_commits_in_a_tree_restored_from_an_archive_alone_are_moved_onto_tip,
);
