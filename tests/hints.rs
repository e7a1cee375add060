//! Every command git-session suggests runs as printed (`git_session::hint::Hint`).
//!
//! Each scenario builds the state whose message prints a hint, against the real `git
//! http-backend`, takes the command from the output as printed (stderr, or the `--json` error or
//! warning), runs it with `sh -c` in the work tree as a person would — git-session on `PATH`, the
//! world's HOME and git config, an editor that accepts what git proposes, and no session variable
//! but those the hint names (a push or save that a failed push or save suggests gets the URLs the
//! failed one had) — and checks that it did what the message says (the push lands, the branch is
//! back, the submodule is there). [`every_hint_has_a_run_or_is_named_as_missing`] fails for a variant of
//! [`Hint::ALL`] that no scenario runs, and [`no_command_is_spelled_outside_the_hint_type`] for a
//! backticked `git …` in a message of `src/` that is not a [`Hint`].

use std::path::{Path, PathBuf};
use std::process::Command;

use git_session::hint::Hint;

use crate::support::{GitServer, Run, TOKEN, World, userinfo};

const BRANCH: &str = "sessions/hints";

/// The hints no scenario runs yet, each with why: named here so that nobody mistakes them for
/// done. The completeness test fails for any other variant without a run.
const NOT_YET: &[&str] = &[];

/// A served repository with the session branch at its one commit, and sandboxes restored from it.
struct Session {
    w: World,
    srv: GitServer,
    tip: String,
}

impl Session {
    fn new() -> Self {
        let w = World::new();
        let ids = w.repo(
            "repo.git",
            &[&[("f.txt", Some("one\n")), ("g.txt", Some("g\n"))]],
        );
        let bare = w.srv().join("repo.git");
        w.git(&bare, &["branch", BRANCH, &ids[0]]);
        let srv = GitServer::start(&w.srv(), Some(TOKEN));
        Session {
            w,
            srv,
            tip: ids[0].clone(),
        }
    }

    fn url(&self) -> String {
        self.srv.url("repo.git", Some(&userinfo()))
    }

    /// The session variables of a sandbox (what `save` and `push` run with).
    fn vars(&self) -> Vec<(&'static str, String)> {
        vec![("READ_URL", self.url()), ("PUSH_URL", self.url())]
    }

    /// Restore the session into the new sandbox `name`.
    fn sandbox(&self, name: &str) -> PathBuf {
        let dir = self.w.path(name);
        self.w
            .restore_with(&dir, &self.url(), BRANCH, &self.tip, &["--json"], &[])
            .assert_code(0);
        dir
    }

    fn save(&self, dir: &Path, message: &str) -> Run {
        let vars = self.vars();
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.w.run(dir, &["save", "-m", message, "--json"], &vars)
    }

    fn git(&self, dir: &Path, args: &[&str]) -> String {
        self.w.git(dir, args)
    }

    fn head(&self, dir: &Path) -> String {
        self.git(dir, &["rev-parse", "HEAD"])
    }

    /// The session branch on the server.
    fn remote_tip(&self) -> String {
        self.git(&self.w.srv().join("repo.git"), &["rev-parse", BRANCH])
    }

    /// Move the session branch on the server back to its first commit, so that the next sandbox
    /// of a scenario is not stale after the last one pushed.
    fn reset_remote(&self) {
        let bare = self.w.srv().join("repo.git");
        self.git(
            &bare,
            &["update-ref", &format!("refs/heads/{BRANCH}"), &self.tip],
        );
    }

    /// `path` of `commit` as the server holds it.
    fn remote_file(&self, commit: &str, path: &str) -> String {
        self.git(
            &self.w.srv().join("repo.git"),
            &["show", &format!("{commit}:{path}")],
        )
    }

    /// Commit `path` holding `text` with plain git; the new commit.
    fn commit(&self, dir: &Path, path: &str, text: &str) -> String {
        std::fs::write(dir.join(path), text).unwrap();
        self.git(dir, &["add", path]);
        self.git(dir, &["commit", "-qm", &format!("{path}: {}", text.trim())]);
        self.head(dir)
    }
}

/// The backticked commands of `text`, in order.
fn commands_in(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The command `hint` renders, as `text` prints it (it must be there).
#[track_caller]
fn printed(text: &str, hint: &Hint) -> String {
    let want = hint.command();
    commands_in(text)
        .into_iter()
        .find(|c| *c == want)
        .unwrap_or_else(|| panic!("{hint} is not printed in:\n{text}"))
}

/// Run `command` with `sh -c` in `dir` as a person would (see the module's doc), with `vars`
/// besides; it must succeed.
#[track_caller]
fn run_as_printed(w: &World, dir: &Path, command: &str, vars: &[(&str, String)]) -> Run {
    let run = run_printed(w, dir, command, vars);
    assert_eq!(
        run.code,
        Some(0),
        "`{command}` failed as printed:\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// [`run_as_printed`], whatever its exit code.
fn run_printed(w: &World, dir: &Path, command: &str, vars: &[(&str, String)]) -> Run {
    let bin = Path::new(env!("CARGO_BIN_EXE_git-session"))
        .parent()
        .unwrap();
    let mut env = w.env();
    for (k, v) in env.iter_mut() {
        if k == "PATH" {
            *v = format!("{}:{v}", bin.display());
        }
    }
    let out = Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .env_clear()
        .envs(env)
        .env("GIT_EDITOR", "true")
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    Run::of(&out)
}

fn sha(s: &str) -> git_session::types::FullSha {
    s.parse().unwrap()
}

fn branch() -> git_session::types::SessionBranch {
    BRANCH.parse().unwrap()
}

/// Sandbox A saves after B took the session: exit 3. The printed way on — restore the current
/// tip into a new folder, bring A's commits over (A is shallow: a fetch from it is refused), save
/// there — lands A's work on top of B's.
#[test]
fn a_stale_save_goes_on_in_a_new_folder_as_printed() {
    let s = Session::new();
    let a = s.sandbox("a");
    let b = s.sandbox("b");
    std::fs::write(b.join("b.txt"), "b\n").unwrap();
    s.save(&b, "B's work").assert_code(0);
    let b_tip = s.remote_tip();
    std::fs::write(a.join("a.txt"), "a\n").unwrap();
    let run = s.save(&a, "A's work");
    run.assert_code(3);
    let a_head = s.head(&a);
    let msg = run.error_message();
    let new = a
        .canonicalize()
        .unwrap()
        .with_file_name(format!("a-{}", &b_tip[..12]));
    let restore = printed(
        &msg,
        &Hint::RestoreAt {
            dir: new.clone(),
            branch: branch(),
            tip: sha(&b_tip),
            submodules: false,
        },
    );
    let bring = printed(
        &msg,
        &Hint::BringCommitsOver {
            base: sha(&s.tip),
            head: sha(&a_head),
            dir: new.clone(),
        },
    );
    let save = printed(&msg, &Hint::SaveIn(new.clone()));
    assert!(
        msg.contains("READ_URL and PUSH_URL as for this tree"),
        "{msg}"
    );

    let vars = s.vars();
    run_as_printed(&s.w, &a, &restore, &vars);
    // What a person would try first: git rejects what it fetched from the shallow tree.
    let fetch =
        s.w.git_output(&new, &["fetch", "-q", a.to_str().unwrap(), &a_head]);
    let said = String::from_utf8_lossy(&fetch.stderr);
    assert!(said.contains("shallow roots are not allowed"), "{said}");
    run_as_printed(&s.w, &a, &bring, &vars);
    run_as_printed(&s.w, &a, &save, &vars);
    let landed = s.remote_tip();
    assert_eq!(landed, s.head(&new));
    assert_eq!(
        s.git(&new, &["rev-parse", "HEAD~1"]),
        b_tip,
        "on top of B's"
    );
    assert_eq!(s.remote_file(&landed, "a.txt"), "a");
    assert_eq!(s.remote_file(&landed, "b.txt"), "b");
    assert_eq!(
        s.git(&new, &["log", "-1", "--format=%s"]),
        "A's work",
        "the commit itself came over"
    );
}

/// Run the stale save's three printed commands (restore, bring the commits over, save) from `a`
/// with the session's variables; the commit landed.
fn go_on_as_printed(s: &Session, a: &Path, msg: &str, base: &str, remote: &str) -> String {
    let new = a.canonicalize().unwrap().with_file_name(format!(
        "{}-{}",
        a.file_name().unwrap().to_str().unwrap(),
        &remote[..12]
    ));
    let restore = printed(
        msg,
        &Hint::RestoreAt {
            dir: new.clone(),
            branch: branch(),
            tip: sha(remote),
            submodules: false,
        },
    );
    let bring = printed(
        msg,
        &Hint::BringCommitsOver {
            base: sha(base),
            head: sha(&s.head(a)),
            dir: new.clone(),
        },
    );
    let save = printed(msg, &Hint::SaveIn(new.clone()));
    let vars = s.vars();
    run_as_printed(&s.w, a, &restore, &vars);
    run_as_printed(&s.w, a, &bring, &vars);
    run_as_printed(&s.w, a, &save, &vars);
    let landed = s.remote_tip();
    assert_eq!(landed, s.head(&new));
    assert_eq!(
        s.git(&new, &["rev-parse", "HEAD~1"]),
        remote,
        "on top of the remote tip"
    );
    landed
}

/// A stale save after a `git pull` brought in the other sandbox's first commit: the commits to
/// bring over start at what was pulled (they started at the lease, and `am` failed on the pulled
/// commit the new folder already has).
#[test]
fn a_stale_save_after_a_pull_brings_only_its_own_commits() {
    let s = Session::new();
    s.reset_remote();
    let a = s.sandbox("pa");
    let b = s.sandbox("pb");
    std::fs::write(b.join("b.txt"), "b1\n").unwrap();
    s.save(&b, "B1").assert_code(0);
    let b1 = s.remote_tip();
    run_as_printed(&s.w, &a, "git pull -q --no-rebase --no-edit", &s.vars());
    assert_eq!(s.head(&a), b1);
    std::fs::write(b.join("b.txt"), "b2\n").unwrap();
    s.save(&b, "B2").assert_code(0);
    let b2 = s.remote_tip();
    std::fs::write(a.join("a.txt"), "a\n").unwrap();
    let run = s.save(&a, "A's work");
    run.assert_code(3);
    let landed = go_on_as_printed(&s, &a, &run.error_message(), &b1, &b2);
    assert_eq!(s.remote_file(&landed, "a.txt"), "a");
    assert_eq!(s.remote_file(&landed, "b.txt"), "b2");
}

/// A stale save whose change sits next to the other sandbox's in one file: the patch's context no
/// longer applies, and `am --3way` needs the base's blob, which a depth-1 restore lacks; the
/// printed command fetches it first, and the three-way merge keeps both changes.
#[test]
fn a_stale_save_next_to_the_other_change_merges_three_way_as_printed() {
    let s = Session::new();
    s.reset_remote();
    let a = s.sandbox("ta");
    std::fs::write(a.join("f.txt"), "1\n2\n3\n4\n5\n").unwrap();
    s.save(&a, "five lines").assert_code(0);
    let t1 = s.remote_tip();
    let b = s.w.path("tb");
    s.w.restore_with(&b, &s.url(), BRANCH, &t1, &["--json"], &[])
        .assert_code(0);
    std::fs::write(b.join("f.txt"), "1\nB\n3\n4\n5\n").unwrap();
    s.save(&b, "B's line").assert_code(0);
    let t2 = s.remote_tip();
    std::fs::write(a.join("f.txt"), "1\n2\n3\nA\n5\n").unwrap();
    let run = s.save(&a, "A's line");
    run.assert_code(3);
    let landed = go_on_as_printed(&s, &a, &run.error_message(), &t1, &t2);
    assert_eq!(s.remote_file(&landed, "f.txt"), "1\nB\n3\nA\n5");
}

/// A restore without `--submodules` leaves the submodule empty; the printed restore, in the same
/// folder, fetches it (it was a silent no-op), and no command that asks for a password is printed.
#[test]
fn submodules_left_empty_are_fetched_by_the_printed_restore() {
    let w = World::new();
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let lib = crate::submodules::repo_with_links(&w, "lib.git", &[("lib.txt", "lib\n")], &[], "");
    let top = crate::submodules::repo_with_links(
        &w,
        "top.git",
        &[("README.md", "top\n")],
        &[("libs/lib", &lib)],
        "[submodule \"lib\"]\n\tpath = libs/lib\n\turl = ../lib.git\n",
    );
    let url = srv.url("top.git", Some(&userinfo()));
    let dir = w.path("s");
    let run = w.restore_with(&dir, &url, BRANCH, &top, &["--json"], &[]);
    run.assert_code(0);
    let warnings = run.json()["warnings"].to_string();
    assert_eq!(std::fs::read_dir(dir.join("libs/lib")).unwrap().count(), 0);
    assert!(!warnings.contains("submodule update"), "{warnings}");
    let again = printed(
        &warnings,
        &Hint::RestoreAt {
            dir: dir.canonicalize().unwrap(),
            branch: branch(),
            tip: sha(&top),
            submodules: true,
        },
    );
    assert!(
        warnings.contains("READ_URL as for this restore"),
        "{warnings}"
    );
    run_as_printed(&w, &dir, &again, &[("READ_URL", url.clone())]);
    assert_eq!(
        std::fs::read_to_string(dir.join("libs/lib/lib.txt")).unwrap(),
        "lib\n"
    );
    assert_eq!(
        w.git(&dir, &["submodule", "status"]),
        format!(" {lib} libs/lib ({})", &lib[..7])
    );
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
    // Run once more, it is the no-op it says.
    let run = w.restore_with(
        &dir,
        &url,
        BRANCH,
        &top,
        &["--json", "--submodules", "shallow"],
        &[],
    );
    run.assert_code(0);
    assert_eq!(run.json()["noop"], true);
}

/// Commits made on another branch, and local changes git will not switch over: the printed
/// stash, switch, merge and stash pop bring everything onto the session branch, and a save
/// pushes it.
#[test]
fn off_the_branch_with_changes_in_the_way_switch_merge_and_stash_as_printed() {
    let s = Session::new();
    let a = s.sandbox("a");
    s.git(&a, &["switch", "-q", "-c", "side"]);
    let side = s.commit(&a, "f.txt", "side\n");
    std::fs::write(a.join("f.txt"), "local\n").unwrap();
    // git itself refuses the switch over the change.
    assert!(!s.w.git_output(&a, &["switch", BRANCH]).status.success());
    let run = s.save(&a, "after");
    run.assert_code(7);
    let msg = run.error_message();
    let stash = printed(&msg, &Hint::Stash);
    let switch = printed(&msg, &Hint::Switch(branch()));
    let merge = printed(&msg, &Hint::Merge(sha(&side)));
    let pop = printed(&msg, &Hint::StashPop);
    for command in [stash, switch, merge, pop] {
        run_as_printed(&s.w, &a, &command, &[]);
    }
    s.save(&a, "after").assert_code(0);
    let landed = s.remote_tip();
    assert_eq!(s.remote_file(&landed, "f.txt"), "local");
    assert_eq!(s.git(&a, &["rev-parse", "HEAD~1"]), side);
}

/// A bisect with a commit made during it: the printed `git bisect reset` and `git merge` keep it.
#[test]
fn a_bisect_ends_and_its_commit_comes_over_as_printed() {
    let s = Session::new();
    let a = s.sandbox("a");
    s.git(&a, &["bisect", "start"]);
    s.git(&a, &["checkout", "-q", "--detach"]);
    let during = s.commit(&a, "during.txt", "during\n");
    let run = s.save(&a, "x");
    run.assert_code(7);
    let msg = run.error_message();
    let reset = printed(&msg, &Hint::BisectReset);
    let merge = printed(&msg, &Hint::Merge(sha(&during)));
    run_as_printed(&s.w, &a, &reset, &[]);
    run_as_printed(&s.w, &a, &merge, &[]);
    s.save(&a, "x").assert_code(0);
    assert_eq!(s.remote_tip(), during);
}

/// Two local commits and `git rebase -i` stopped at the first: `save` refuses; the printed
/// `--continue` (in one tree) and `--abort` (in another) each let the next save push.
#[test]
fn a_stopped_rebase_continues_or_aborts_as_printed() {
    let s = Session::new();
    for (name, hint) in [("a", Hint::RebaseContinue), ("b", Hint::RebaseAbort)] {
        let dir = s.sandbox(name);
        s.commit(&dir, "x.txt", "1\n");
        let last = s.commit(&dir, "y.txt", "2\n");
        s.w.git_with_env(
            &dir,
            &["rebase", "-q", "-i", &s.tip],
            &[("GIT_SEQUENCE_EDITOR", "sed -i 1s/^pick/edit/")],
        );
        let run = s.save(&dir, "x");
        run.assert_code(7);
        let msg = run.error_message();
        printed(&msg, &Hint::RebaseAbort);
        let command = printed(&msg, &hint);
        run_as_printed(&s.w, &dir, &command, &[]);
        s.save(&dir, "x").assert_code(0);
        assert!(!dir.join(".git/rebase-merge").exists(), "{name}");
        assert_eq!(s.remote_file(&s.remote_tip(), "y.txt"), "2");
        if hint == Hint::RebaseAbort {
            assert_eq!(
                s.remote_tip(),
                last,
                "the abort kept the commits as they were"
            );
        }
        s.reset_remote();
    }
}

/// `git am` stopped on a patch that does not apply: the printed `git am --continue` (after the
/// fix) and `git am --abort` each let the save go.
#[test]
fn a_stopped_git_am_continues_or_aborts_as_printed() {
    let s = Session::new();
    for (name, hint) in [("a", Hint::AmContinue), ("b", Hint::AmAbort)] {
        let dir = s.sandbox(name);
        s.commit(&dir, "f.txt", "patched\n");
        let patch = s.w.path(&format!("{name}.patch"));
        let text = s.git(&dir, &["format-patch", "-1", "--stdout"]);
        std::fs::write(&patch, format!("{text}\n")).unwrap();
        s.git(&dir, &["reset", "-q", "--hard", &s.tip]);
        s.commit(&dir, "f.txt", "other\n");
        let am = s.w.git_output(&dir, &["am", patch.to_str().unwrap()]);
        assert!(!am.status.success());
        let run = s.save(&dir, "x");
        run.assert_code(7);
        let msg = run.error_message();
        printed(&msg, &Hint::AmAbort);
        let command = printed(&msg, &hint);
        if hint == Hint::AmContinue {
            std::fs::write(dir.join("f.txt"), "patched\n").unwrap();
            s.git(&dir, &["add", "f.txt"]);
        }
        run_as_printed(&s.w, &dir, &command, &[]);
        s.save(&dir, "x").assert_code(0);
        let want = if hint == Hint::AmContinue {
            "patched"
        } else {
            "other"
        };
        assert_eq!(s.remote_file(&s.remote_tip(), "f.txt"), want);
        s.reset_remote();
    }
}

/// A save refused (exit 7) while a stopped operation holds `f.txt` in conflict: the printed `hint`
/// finishes it — after the printed `git add -u` of `f.txt` holding `resolved` when `hint` is
/// `cont` (each other hint named in `also` must be printed too) — and the save then pushes `f.txt`
/// as `resolved`, or as `kept` when `hint` drops the operation.
fn finish_as_printed(
    s: &Session,
    dir: &Path,
    hint: &Hint,
    cont: &Hint,
    also: &[Hint],
    texts: (&str, &str),
) {
    let (resolved, kept) = texts;
    let run = s.save(dir, "x");
    run.assert_code(7);
    let msg = run.error_message();
    let add = printed(&msg, &Hint::AddUpdate);
    for other in also {
        printed(&msg, other);
    }
    let command = printed(&msg, hint);
    if hint == cont {
        std::fs::write(dir.join("f.txt"), format!("{resolved}\n")).unwrap();
        run_as_printed(&s.w, dir, &add, &[]);
    }
    run_as_printed(&s.w, dir, &command, &[]);
    s.save(dir, "x").assert_code(0);
    let want = if hint == cont { resolved } else { kept };
    assert_eq!(s.remote_file(&s.remote_tip(), "f.txt"), want);
    s.reset_remote();
}

/// Make `f.txt` conflict: a commit on `side` and another on the session branch; returns `side`'s.
fn conflicting_commits(s: &Session, dir: &Path) -> String {
    s.git(dir, &["switch", "-q", "-c", "side"]);
    let side = s.commit(dir, "f.txt", "theirs\n");
    s.git(dir, &["switch", "-q", BRANCH]);
    s.commit(dir, "f.txt", "ours\n");
    side
}

/// A merge with a conflict: the printed `git add -u` and `git commit` conclude it (or `git merge
/// --abort` drops it), and the save pushes.
#[test]
fn a_conflicted_merge_concludes_or_aborts_as_printed() {
    let s = Session::new();
    for (name, hint) in [("a", Hint::Commit), ("b", Hint::MergeAbort)] {
        let dir = s.sandbox(name);
        conflicting_commits(&s, &dir);
        assert!(!s.w.git_output(&dir, &["merge", "side"]).status.success());
        finish_as_printed(
            &s,
            &dir,
            &hint,
            &Hint::Commit,
            &[Hint::MergeAbort],
            ("both", "ours"),
        );
    }
}

/// A cherry-pick with a conflict: `--continue` after the printed `git add -u`, or `--abort`; and
/// a pick of two commits whose first was committed by hand: the printed `git cherry-pick --quit`.
#[test]
fn a_stopped_cherry_pick_continues_aborts_or_quits_as_printed() {
    let s = Session::new();
    for (name, hint) in [
        ("a", Hint::CherryPickContinue),
        ("b", Hint::CherryPickAbort),
    ] {
        let dir = s.sandbox(name);
        conflicting_commits(&s, &dir);
        assert!(
            !s.w.git_output(&dir, &["cherry-pick", "side"])
                .status
                .success()
        );
        let cont = Hint::CherryPickContinue;
        finish_as_printed(&s, &dir, &hint, &cont, &[], ("both", "ours"));
    }
    let dir = s.sandbox("c");
    conflicting_commits(&s, &dir);
    s.git(&dir, &["switch", "-q", "side"]);
    s.commit(&dir, "z.txt", "z\n");
    s.git(&dir, &["switch", "-q", BRANCH]);
    assert!(
        !s.w.git_output(&dir, &["cherry-pick", "side~1", "side"])
            .status
            .success()
    );
    std::fs::write(dir.join("f.txt"), "both\n").unwrap();
    s.git(&dir, &["add", "f.txt"]);
    s.w.git_with_env(&dir, &["commit", "-q"], &[("GIT_EDITOR", "true")]);
    assert!(dir.join(".git/sequencer").exists());
    let run = s.save(&dir, "x");
    run.assert_code(7);
    let msg = run.error_message();
    printed(&msg, &Hint::CherryPickContinue);
    printed(&msg, &Hint::RevertContinue);
    let quit = printed(&msg, &Hint::CherryPickQuit);
    run_as_printed(&s.w, &dir, &quit, &[]);
    s.save(&dir, "x").assert_code(0);
    assert_eq!(s.remote_file(&s.remote_tip(), "f.txt"), "both");
}

/// A revert with a conflict: the printed `git revert --continue` (after `git add -u`) or
/// `git revert --abort`.
#[test]
fn a_stopped_revert_continues_or_aborts_as_printed() {
    let s = Session::new();
    for (name, hint) in [("a", Hint::RevertContinue), ("b", Hint::RevertAbort)] {
        let dir = s.sandbox(name);
        let first = s.commit(&dir, "f.txt", "two\n");
        s.commit(&dir, "f.txt", "three\n");
        assert!(
            !s.w.git_output(&dir, &["revert", "--no-edit", &first])
                .status
                .success()
        );
        let cont = Hint::RevertContinue;
        finish_as_printed(
            &s,
            &dir,
            &hint,
            &cont,
            &[Hint::RevertAbort],
            ("reverted", "three"),
        );
    }
}

/// A save whose push fails on the network keeps its commit; the printed `git-session save`, run
/// again once the server is back, pushes it.
#[test]
fn a_failed_push_is_pushed_by_the_printed_save() {
    let s = Session::new();
    let a = s.sandbox("a");
    std::fs::write(a.join("a.txt"), "a\n").unwrap();
    let fail = |n| {
        s.srv
            .knobs
            .fail_next
            .store(n, std::sync::atomic::Ordering::SeqCst)
    };
    fail(1000);
    let run = s.save(&a, "kept");
    fail(0);
    run.assert_code(5);
    let save = printed(&run.error_message(), &Hint::Save);
    run_as_printed(&s.w, &a, &save, &s.vars());
    assert_eq!(s.remote_tip(), s.head(&a));
}

/// History rewritten after a push (an amend): the printed `git reset --soft` and the save after
/// it push the amended content on top of what was pushed.
#[test]
fn rewritten_history_is_saved_on_top_as_printed() {
    let s = Session::new();
    let a = s.sandbox("a");
    std::fs::write(a.join("a.txt"), "a\n").unwrap();
    s.save(&a, "pushed").assert_code(0);
    let pushed = s.remote_tip();
    std::fs::write(a.join("a.txt"), "amended\n").unwrap();
    s.git(&a, &["commit", "-qa", "--amend", "-m", "amended"]);
    let run = s.save(&a, "x");
    run.assert_code(7);
    let msg = run.error_message();
    let reset = printed(&msg, &Hint::ResetSoft(sha(&pushed)));
    let save = printed(&msg, &Hint::Save);
    run_as_printed(&s.w, &a, &reset, &[]);
    run_as_printed(&s.w, &a, &save, &s.vars());
    let landed = s.remote_tip();
    assert_eq!(s.git(&a, &["rev-parse", "HEAD~1"]), pushed);
    assert_eq!(s.remote_file(&landed, "a.txt"), "amended");
}

/// This tree's commit pushed from a linked work tree's branch: the session branch is behind it,
/// and the printed `git merge --ff-only` brings it up.
#[test]
fn a_branch_behind_its_own_push_is_brought_up_as_printed() {
    let s = Session::new();
    let a = s.sandbox("a");
    let wt = s.w.path("a-wt");
    s.git(
        &a,
        &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
    );
    let side = s.commit(&wt, "side.txt", "side\n");
    let url = s.url();
    let push = Command::new("git")
        .args(["push", "-q", "origin", &format!("side:{BRANCH}")])
        .current_dir(&wt)
        .env_clear()
        .envs(s.w.env())
        .env("READ_URL", &url)
        .env("PUSH_URL", &url)
        .output()
        .unwrap();
    assert!(push.status.success(), "{push:?}");
    let vars = s.vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = s.w.run(&a, &["push", "--json"], &vars);
    run.assert_code(0);
    let warnings = run.json()["warnings"].to_string();
    let merge = printed(&warnings, &Hint::MergeFfOnly(sha(&side)));
    run_as_printed(&s.w, &a, &merge, &[]);
    assert_eq!(s.head(&a), side);
    assert_eq!(s.git(&a, &["status", "--porcelain"]), "");
}

/// A plain `git push` of the session branch to another repository (a mirror without it) is
/// refused; the printed push under another name goes through.
#[test]
fn a_push_elsewhere_goes_under_the_printed_name() {
    let s = Session::new();
    let a = s.sandbox("a");
    std::fs::write(a.join("a.txt"), "a\n").unwrap();
    s.save(&a, "on the server").assert_code(0);
    let mirror = s.w.tmp.path().join("mirror.git");
    s.git(
        s.w.tmp.path(),
        &["init", "-q", "--bare", mirror.to_str().unwrap()],
    );
    // The sandbox is shallow: the mirror takes its shallow history.
    s.git(&mirror, &["config", "receive.shallowUpdate", "true"]);
    s.git(&a, &["remote", "add", "mirror", mirror.to_str().unwrap()]);
    let out = s.w.git_output(
        &a,
        &["push", "mirror", &format!("HEAD:refs/heads/{BRANCH}")],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = format!("{BRANCH}-copy");
    let command = printed(
        &stderr,
        &Hint::PushElsewhere {
            remote: "mirror".into(),
            name: name.clone(),
        },
    );
    run_as_printed(&s.w, &a, &command, &[]);
    assert_eq!(s.git(&mirror, &["rev-parse", &name]), s.head(&a));
}

/// A tree whose session record is gone still has the check: git pushes nothing, and the printed
/// removal lets plain git push again.
#[test]
fn the_check_of_a_tree_that_is_no_longer_a_session_is_removed_as_printed() {
    let s = Session::new();
    let a = s.sandbox("a");
    let mirror = s.w.tmp.path().join("mirror.git");
    s.git(
        s.w.tmp.path(),
        &["init", "-q", "--bare", mirror.to_str().unwrap()],
    );
    // The sandbox is shallow: the mirror takes its shallow history.
    s.git(&mirror, &["config", "receive.shallowUpdate", "true"]);
    s.git(&a, &["remote", "add", "mirror", mirror.to_str().unwrap()]);
    std::fs::remove_file(a.join(".git/git-session.json")).unwrap();
    let out = s.w.git_output(&a, &["push", "mirror", "HEAD:refs/heads/x"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let hook = a.canonicalize().unwrap().join(".git/hooks/pre-push");
    let command = printed(&stderr, &Hint::Remove(hook));
    run_as_printed(&s.w, &a, &command, &[]);
    s.git(&a, &["push", "-q", "mirror", "HEAD:refs/heads/x"]);
    assert_eq!(s.git(&mirror, &["rev-parse", "x"]), s.head(&a));
}

/// `status` in a folder that is no session: the printed restore (with the inputs it names) makes
/// one there.
#[test]
fn a_folder_that_is_no_session_becomes_one_by_the_printed_restore() {
    let s = Session::new();
    let dir = s.w.path("empty");
    std::fs::create_dir_all(&dir).unwrap();
    let run = s.w.run(&dir, &["status", "--json"], &[]);
    run.assert_code(2);
    let msg = run.error_message();
    let restore = printed(&msg, &Hint::Restore(dir.canonicalize().unwrap()));
    assert!(
        msg.contains("READ_URL, SESSION_BRANCH and TIP_SHA"),
        "{msg}"
    );
    let vars = [
        ("READ_URL", s.url()),
        ("SESSION_BRANCH", BRANCH.to_owned()),
        ("TIP_SHA", s.tip.clone()),
    ];
    run_as_printed(&s.w, &dir, &restore, &vars);
    s.w.run(&dir, &["status", "--json"], &[]).assert_code(0);
}

/// A served repository with Git LFS files (a real giftless server), restored, and an LFS file
/// changed and saved without a push: its object waits in the pending list.
pub(crate) fn lfs_saved_not_pushed() -> (
    World,
    GitServer,
    crate::support::lfs::Giftless,
    PathBuf,
    Vec<u8>,
) {
    let w = World::new();
    let lfs = crate::support::lfs::Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, _) = crate::lfs::make(&w, &lfs.url("org/repo"));
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let url = srv.url("repo.git", Some(&userinfo()));
    let dir = w.path("s");
    w.restore_with(&dir, &url, BRANCH, &tip, &["--json"], &[])
        .assert_code(0);
    let data = crate::support::incompressible(50_000, &mut 5);
    std::fs::write(dir.join("big.bin"), &data).unwrap();
    w.run(&dir, &["save", "--no-push", "-m", "lfs", "--json"], &[])
        .assert_code(0);
    assert!(dir.join(".git/lfs/git-session-pending").exists());
    (w, srv, lfs, dir, data)
}

/// The LFS object `data` is on the server, and the session branch at `dir`'s `HEAD`.
fn lfs_landed(w: &World, lfs: &crate::support::lfs::Giftless, dir: &Path, data: &[u8]) {
    let id = crate::support::lfs::oid(data);
    assert_eq!(
        std::fs::read(lfs.store.join("org/repo").join(&id)).unwrap(),
        data
    );
    let bare = w.srv().join("repo.git");
    assert_eq!(
        w.git(&bare, &["rev-parse", BRANCH]),
        w.git(dir, &["rev-parse", "HEAD"])
    );
}

/// A plain `git push` of a commit whose LFS object git-session has not uploaded is refused; the
/// printed `git-session push` uploads it first and pushes.
#[test]
fn lfs_objects_not_uploaded_go_with_the_printed_push() {
    let (w, srv, lfs, dir, data) = lfs_saved_not_pushed();
    let url = srv.url("repo.git", Some(&userinfo()));
    let out = Command::new("git")
        .args(["push", "-q", "origin"])
        .current_dir(&dir)
        .env_clear()
        .envs(w.env())
        .env("PUSH_URL", &url)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let push = printed(&stderr, &Hint::Push);
    run_as_printed(&w, &dir, &push, &[("PUSH_URL", url)]);
    lfs_landed(&w, &lfs, &dir, &data);
}

/// Something else in place of the pending list (here a symlink): the printed removal and
/// `git lfs push --all origin` upload the object, and the push after them goes.
#[test]
fn a_pending_list_in_the_way_is_removed_and_uploaded_as_printed() {
    let (w, srv, lfs, dir, data) = lfs_saved_not_pushed();
    let url = srv.url("repo.git", Some(&userinfo()));
    let pending = dir.join(".git/lfs/git-session-pending");
    std::fs::rename(&pending, dir.join(".git/lfs/kept")).unwrap();
    std::os::unix::fs::symlink("kept", &pending).unwrap();
    let run = w.run(&dir, &["push", "--json"], &[("PUSH_URL", &url)]);
    run.assert_code(7);
    let msg = run.error_message();
    let remove = printed(
        &msg,
        &Hint::Remove(
            dir.canonicalize()
                .unwrap()
                .join(".git/lfs/git-session-pending"),
        ),
    );
    let upload = printed(&msg, &Hint::LfsPushAll);
    run_as_printed(&w, &dir, &remove, &[]);
    run_as_printed(&w, &dir, &upload, &[]);
    let id = crate::support::lfs::oid(&data);
    assert!(
        lfs.store.join("org/repo").join(&id).exists(),
        "uploaded by git-lfs"
    );
    w.run(&dir, &["push", "--json"], &[("PUSH_URL", &url)])
        .assert_code(0);
    lfs_landed(&w, &lfs, &dir, &data);
}

/// A big file committed with plain git whose loose object was damaged: the push refuses it
/// (exit 6), and the printed `git fsck` names the damaged object.
#[test]
fn a_damaged_object_is_found_by_the_printed_fsck() {
    use std::io::{Read as _, Write as _};
    let s = Session::new();
    let a = s.sandbox("a");
    let big: Vec<u8> = (0..33u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(a.join("big.dat"), &big).unwrap();
    s.git(&a, &["add", "big.dat"]);
    s.git(&a, &["commit", "-qm", "big"]);
    let id = s.git(&a, &["rev-parse", "HEAD:big.dat"]);
    let loose = a.join(".git/objects").join(&id[..2]).join(&id[2..]);
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(std::fs::File::open(&loose).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 1;
    std::fs::remove_file(&loose).unwrap();
    let mut out = flate2::write::ZlibEncoder::new(
        std::fs::File::create(&loose).unwrap(),
        flate2::Compression::fast(),
    );
    out.write_all(&raw).unwrap();
    out.finish().unwrap();
    let vars = s.vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = s.w.run(&a, &["push", "--json"], &vars);
    run.assert_code(6);
    let fsck = printed(&run.error_message(), &Hint::Fsck);
    // fsck fails, as it should in a damaged repository: what counts is that it names the object.
    let found = run_printed(&s.w, &a, &fsck, &[]);
    assert_ne!(found.code, Some(0));
    assert!(
        found.stderr.contains(&id) || found.stdout.contains(&id),
        "{}{}",
        found.stdout,
        found.stderr
    );
}

/// A plain `git push` held in its check (git has read the remote) while this tree's own save
/// pushes: refused, told to run again; the printed `git push` then finds everything pushed.
#[test]
fn a_plain_push_overtaken_by_a_save_goes_again_as_printed() {
    let s = Session::new();
    let a = s.sandbox("a");
    s.commit(&a, "plain.txt", "plain\n");
    std::fs::write(a.join("saved.txt"), "s\n").unwrap();
    let barrier = s.w.tmp.path().join("barrier");
    let url = s.url();
    let plain = std::thread::scope(|sc| {
        let held = sc.spawn(|| {
            Command::new("git")
                .args(["push", "-q"])
                .current_dir(&a)
                .env_clear()
                .envs(s.w.env())
                .envs(s.vars())
                .env("GIT_SESSION_FAILPOINT", "before-lock")
                .env("GIT_SESSION_BARRIER_DIR", &barrier)
                .env("GIT_SESSION_BARRIER_COUNT", "2")
                .output()
                .unwrap()
        });
        let t0 = std::time::Instant::now();
        while std::fs::read_dir(&barrier).map_or(0, |d| d.count()) == 0 {
            assert!(
                t0.elapsed().as_secs() < 30,
                "the plain push never reached its check"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        s.save(&a, "saved").assert_code(0);
        std::fs::write(barrier.join("test"), b"").unwrap();
        held.join().unwrap()
    });
    assert!(!plain.status.success());
    let stderr = String::from_utf8_lossy(&plain.stderr);
    let again = printed(&stderr, &Hint::GitPush);
    run_as_printed(
        &s.w,
        &a,
        &again,
        &[("READ_URL", url.clone()), ("PUSH_URL", url)],
    );
    assert_eq!(s.remote_tip(), s.head(&a));
}

/// The index cannot be rewritten after the commit (a folder put in its place while the save ran):
/// the save warns, also when its push then fails; once what the warning names is cleared, the
/// printed `git reset` repairs the index, and the next save pushes the commit, nothing left to
/// commit.
#[test]
fn an_index_not_rewritten_is_repaired_by_the_printed_reset() {
    let s = Session::new();
    let a = s.sandbox("a");
    std::fs::write(a.join("a.txt"), "a\n").unwrap();
    let barrier = s.w.tmp.path().join("barrier");
    let mut vars = s.vars();
    vars.push(("GIT_SESSION_FAILPOINT", "hold-save-hash".into()));
    vars.push(("GIT_SESSION_BARRIER_DIR", barrier.display().to_string()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = std::thread::scope(|sc| {
        let saving = sc.spawn(|| s.w.run(&a, &["save", "-m", "x", "--json"], &vars));
        let t0 = std::time::Instant::now();
        while std::fs::read_dir(&barrier).map_or(0, |d| d.count()) == 0 {
            assert!(t0.elapsed().as_secs() < 30, "the save never hashed a file");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::remove_file(a.join(".git/index")).unwrap();
        std::fs::create_dir_all(a.join(".git/index/in-the-way")).unwrap();
        std::fs::write(barrier.join("test"), b"").unwrap();
        saving.join().unwrap()
    });
    // Committed; the push then refuses to read a git dir with a folder for its index (exit 7), and
    // the commit's warning is shown with that failure (it was lost).
    run.assert_code(7);
    let warnings = run.json()["warnings"].to_string();
    let reset = printed(&warnings, &Hint::ResetIndex);
    std::fs::remove_dir_all(a.join(".git/index")).unwrap();
    run_as_printed(&s.w, &a, &reset, &[]);
    assert_eq!(s.git(&a, &["status", "--porcelain"]), "");
    // The commit pushes as any other (a push refuses a folder in the index's place).
    let run = s.save(&a, "x");
    run.assert_code(0);
    assert_eq!(run.json()["committed"], false);
    assert_eq!(s.remote_tip(), s.head(&a));
}

/// A plain `git worktree add` tree is refused with `agent add`, which makes an agent's tree as
/// printed; that agent's dirty tree refuses `agent remove`, whose `--force` then removes it.
#[test]
fn agent_hints_run_as_printed() {
    let s = Session::new();
    let main = s.sandbox("main");
    let plain = s.w.path("plain");
    s.git(
        &main,
        &["worktree", "add", "-q", plain.to_str().unwrap(), "-b", "p"],
    );
    let run = s.w.run(&plain, &["status", "--json"], &[]);
    run.assert_code(2);
    let words = run.error_message();
    let add = printed(
        &words,
        &Hint::AgentAdd {
            dir: main.canonicalize().unwrap(),
            name: "agent".parse().unwrap(),
        },
    );
    let made = run_as_printed(&s.w, &plain, &add, &[]);
    let dir = PathBuf::from(made.stdout.trim());
    assert_eq!(s.git(&dir, &["status", "--porcelain"]), "");
    std::fs::write(dir.join("f.txt"), "changed\n").unwrap();
    let run = s.w.run(&main, &["agent", "remove", "agent", "--json"], &[]);
    run.assert_code(7);
    let force = printed(
        &run.error_message(),
        &Hint::AgentRemoveForce("agent".parse().unwrap()),
    );
    run_as_printed(&s.w, &main, &force, &[]);
    assert!(!dir.exists());
}

/// Every variant of [`Hint::ALL`] is run by a scenario above (one that takes it with
/// `printed(…, &Hint::…)`), or named in [`NOT_YET`]; a name there that has a run is an error too.
/// A plain `git push` in a tree restored from an archive alone (no history yet): the pre-push
/// check prints `git-session status`, to run with READ_URL set; run so, the push then lands on
/// TIP_SHA.
#[test]
fn a_plain_push_before_history_is_attached_goes_after_the_printed_status() {
    use crate::support::real_repo::{RealServed, git_archive};
    let w = World::new();
    let served = RealServed::new(&w, "hint-status");
    let tip = served.ids[0].clone();
    let archive = git_archive(&w, &served.bare, &tip, None, "status-hint.tar.gz");
    let dir = w.path("archive-alone");
    let vars = [
        ("SESSION_BRANCH", BRANCH),
        ("PUSH_URL", served.read.as_str()),
    ];
    crate::restore_archive::restore_env(&w, &dir, &archive, &tip, &[], &vars).assert_code(0);
    std::fs::write(dir.join("P.md"), "P\n").unwrap();
    w.git(&dir, &["add", "P.md"]);
    w.git(&dir, &["commit", "-q", "-m", "add P"]);
    let push = || {
        run_printed(
            &w,
            &dir,
            "git push -q origin HEAD",
            &[("PUSH_URL", served.read.clone())],
        )
    };
    let refused = push();
    assert_ne!(refused.code, Some(0), "pushed before history was attached");
    let status = printed(&refused.stderr, &Hint::Status);
    assert!(
        refused.stderr.contains("with READ_URL set"),
        "{}",
        refused.stderr
    );
    run_as_printed(&w, &dir, &status, &[("READ_URL", served.read.clone())]);
    let pushed = push();
    assert_eq!(pushed.code, Some(0), "{}", pushed.stderr);
    let remote = w.git(
        &served.bare,
        &["rev-parse", &format!("refs/heads/{BRANCH}")],
    );
    assert_eq!(
        w.git(&served.bare, &["rev-parse", &format!("{remote}^")]),
        tip
    );
}

/// `SIGNING_REQUIRED=1` (restored with it and `SIGNING_KEY_FILE`) refuses commits made unsigned
/// — by plain `git push` from a shell with only the session URLs (the requirement restore
/// recorded), and by `git-session push` — and prints how to sign them again: the printed rebase
/// makes them again, signed through restore's set-up, and the printed push then lands them,
/// `git verify-commit` accepting each.
#[test]
fn unsigned_commits_are_signed_again_by_the_printed_rebase() {
    use crate::support::keys::{allowed_signers, keygen, verify_commit};
    let s = Session::new();
    let key = keygen(&s.w.path("keys"), "ed25519", "agent");
    let a = s.w.path("signing");
    let required = [
        ("SIGNING_KEY_FILE", key.display().to_string()),
        ("SIGNING_REQUIRED", "1".to_owned()),
    ];
    let restore_vars: Vec<(&str, &str)> = required.iter().map(|(k, v)| (*k, v.as_str())).collect();
    s.w.restore_with(&a, &s.url(), BRANCH, &s.tip, &["--json"], &restore_vars)
        .assert_code(0);
    let allowed = allowed_signers(&s.w.path("keys"), &[&key]);
    let unsigned = |file: &str| {
        std::fs::write(a.join(file), "unsigned\n").unwrap();
        s.git(&a, &["add", file]);
        s.git(&a, &["commit", "-q", "--no-gpg-sign", "-m", file]);
    };
    let signed_again = |push: &str, hint_after: &Hint, vars: &[(&str, String)]| {
        let lease = s.remote_tip();
        let run = run_printed(&s.w, &a, push, vars);
        assert_ne!(
            run.code,
            Some(0),
            "{push}: the unsigned commits were pushed"
        );
        let words = if push.contains("--json") {
            run.error_message()
        } else {
            run.stderr.clone()
        };
        assert!(words.contains("(unsigned)"), "{words}");
        assert_eq!(s.remote_tip(), lease, "uploaded");
        let resign = printed(&words, &Hint::Resign(sha(&lease)));
        let again = printed(&words, hint_after);
        run_as_printed(&s.w, &a, &resign, vars);
        let head = s.head(&a);
        for commit in [head.clone(), format!("{head}~1")] {
            let (ok, said) = verify_commit(&s.w, &a, &allowed, &commit);
            assert!(ok, "{commit} not signed again: {said}");
        }
        run_as_printed(&s.w, &a, &again, vars);
        assert_eq!(s.remote_tip(), head);
    };
    unsigned("one.txt");
    unsigned("two.txt");
    signed_again("git push -q", &Hint::GitPush, &s.vars());
    unsigned("three.txt");
    let vars = [s.vars(), required.to_vec()].concat();
    signed_again("git-session push --json", &Hint::Push, &vars);
}

#[test]
fn every_hint_has_a_run_or_is_named_as_missing() {
    let source = include_str!("hints.rs");
    let scenarios = &source[..source.find("fn every_hint_has_a_run").unwrap()];
    let mut missing = Vec::new();
    for name in Hint::ALL {
        // `printed(…, &Hint::X…)`, or `(tree, Hint::X)` of a loop whose body prints `&hint`.
        let run = names(scenarios, &format!("&Hint::{name}"))
            || names(scenarios, &format!(", Hint::{name})"));
        match (run, NOT_YET.contains(&name)) {
            (true, true) => panic!("{name} has a run: take it out of NOT_YET"),
            (false, false) => missing.push(name),
            _ => {}
        }
    }
    assert!(
        missing.is_empty(),
        "hints with no run as printed (add a scenario to tests/hints.rs): {missing:?}"
    );
    for name in NOT_YET {
        assert!(Hint::ALL.contains(name), "NOT_YET names no hint: {name}");
    }
}

/// Whether `text` holds `name` not followed by more of an identifier (`Push` is not `PushElsewhere`).
fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        text[at + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_')
    })
}

/// No message in `src/` spells a command between backticks outside `src/hint.rs`: every
/// suggestion is a [`Hint`], so it is run above. Comments and docs are not messages.
#[test]
fn no_command_is_spelled_outside_the_hint_type() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path == src.join("hint.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                if ["`git ", "`git`", "`git-session"]
                    .iter()
                    .any(|c| code.contains(c))
                {
                    found.push(format!("{}:{}: {}", path.display(), i + 1, code));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "commands spelled in messages, not through git_session::hint::Hint:\n{}",
        found.join("\n")
    );
}
