//! One lease for every push from the sandbox (SPEC rule 3): plain `git push` goes through
//! git-session's pre-push check, ownership comes from git-session's own ledger, a killed or
//! concurrent save is never a false stale, and credentials go per direction. Plain git is run as
//! a person in the sandbox shell would: credentials only in `READ_URL`/`PUSH_URL`.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::push::Setup;
use crate::support::{TOKEN, all_files, assert_no_secret, userinfo};

impl Setup {
    /// The session `branch` at the seed's second commit, restored into sandboxes `a` and `b`.
    fn two_sandboxes(&self, branch: &str) -> (PathBuf, PathBuf) {
        self.w.git(&self.bare(), &["branch", branch, &self.ids[1]]);
        (
            self.sandbox("a", branch, &self.ids[1]),
            self.sandbox("b", branch, &self.ids[1]),
        )
    }

    /// Sandbox `a` saves a new file `a.txt` holding `text`; `b`'s lease is stale from then on.
    /// Returns the remote `branch`'s new tip.
    fn owner_saves(&self, a: &Path, branch: &str, text: &str) -> String {
        std::fs::write(a.join("a.txt"), text).unwrap();
        self.save(a, "A's work", &[]).assert_code(0);
        self.remote(branch).unwrap()
    }

    /// Plain git in `dir` with the session URLs in the environment (no other credentials).
    pub(crate) fn shell_git(&self, dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let url = self.url();
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(self.w.env())
            .env("READ_URL", &url)
            .env("PUSH_URL", &url)
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        assert_no_secret("git stdout", &out.stdout);
        assert_no_secret("git stderr", &out.stderr);
        out
    }

    /// [`Self::shell_git`] that must succeed.
    #[track_caller]
    pub(crate) fn shell_git_ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.shell_git(dir, args, &[]);
        assert!(
            out.status.success(),
            "git {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// [`Self::shell_git`] that must fail; its stderr.
    #[track_caller]
    pub(crate) fn shell_git_refused(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.shell_git(dir, args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "git {args:?} succeeded:\n{stderr}");
        stderr
    }

    fn save(&self, dir: &Path, message: &str, extra: &[(&str, &str)]) -> crate::support::Run {
        let url = self.url();
        let mut vars = vec![("PUSH_URL", url.as_str()), ("READ_URL", url.as_str())];
        vars.extend_from_slice(extra);
        self.w.run(dir, &["save", "-m", message, "--json"], &vars)
    }
}

/// Sandbox B's lease is behind (A saved): `git pull` (merge, then rebase) and `git push` in B are
/// refused with the stale error's words and both ids, the remote stays at A's commit, and A, the
/// owner, keeps saving.
#[test]
fn a_stale_sandbox_cannot_take_the_session_with_git_pull_and_git_push() {
    let s = Setup::new();
    let branch = "sessions/pull";
    let (a, b) = s.two_sandboxes(branch);
    let ca = s.owner_saves(&a, branch, "from a\n");
    let cb = s.commit(&b, "b.txt", "from b\n");
    assert_eq!(s.remote_state(&b), "moved");

    s.shell_git_ok(&b, &["pull", "-q", "--no-rebase", "--no-edit"]);
    let merge = s.w.git(&b, &["rev-parse", "HEAD"]);
    assert_ne!(merge, cb, "the pull made no merge");
    let stderr = s.shell_git_refused(&b, &["push", "-q"]);
    assert!(
        stderr.contains("stale session") && stderr.contains(&ca) && stderr.contains(&s.ids[1]),
        "{stderr}"
    );
    assert_eq!(s.remote(branch).as_deref(), Some(ca.as_str()));
    // By URL with an explicit refspec, as a person might try next.
    let url = s.url();
    let refspec = format!("HEAD:refs/heads/{branch}");
    s.shell_git_refused(&b, &["push", "-q", &url, &refspec]);
    assert_eq!(s.remote(branch).as_deref(), Some(ca.as_str()));
    // The merge is not B's to push with git-session either.
    s.push(&b, &[]).assert_code(3);

    s.w.git(&b, &["reset", "-q", "--hard", &cb]);
    s.shell_git_ok(&b, &["pull", "-q", "--rebase"]);
    let stderr = s.shell_git_refused(&b, &["push", "-q"]);
    assert!(stderr.contains("stale session"), "{stderr}");
    assert_eq!(s.remote(branch).as_deref(), Some(ca.as_str()));
    s.push(&b, &[]).assert_code(3);
    assert_eq!(s.remote_state(&b), "moved");

    // A still owns the session.
    std::fs::write(a.join("a.txt"), "more from a\n").unwrap();
    let run = s.save(&a, "A again", &[]);
    run.assert_code(0);
    assert_eq!(run.json()["previous_tip"], ca.as_str());
    assert_eq!(s.remote(branch), Some(s.lease(&a)));
}

/// The owner pushes with plain git, to origin and by URL (no remote-tracking ref moves then):
/// both are let through and recorded, and `save` goes on from them.
#[test]
fn the_owners_plain_pushes_to_origin_and_by_url_count_as_its_own() {
    let s = Setup::new();
    let branch = "sessions/own";
    let a = s.sandbox("a", branch, &s.ids[1]);
    // A new session: the first plain `git push` creates the branch (no upstream needed).
    let c1 = s.commit(&a, "f", "1\n");
    s.shell_git_ok(&a, &["push", "-q"]);
    assert_eq!(s.remote(branch).as_deref(), Some(c1.as_str()));
    // git moved refs/remotes/origin/<branch>: it knows the push landed, so that is the lease.
    assert_eq!(s.remote_state(&a), "lease");
    let c2 = s.commit(&a, "f", "2\n");
    let url = s.url();
    let refspec = format!("HEAD:refs/heads/{branch}");
    s.shell_git_ok(&a, &["push", "-q", &url, &refspec]);
    assert_eq!(s.remote(branch).as_deref(), Some(c2.as_str()));
    assert_eq!(s.remote_state(&a), "own");
    std::fs::write(a.join("f"), "3\n").unwrap();
    let run = s.save(&a, "three", &[]);
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["previous_tip"], c2.as_str());
    assert_eq!(s.remote(branch), Some(s.lease(&a)));
    // Pushed entirely with plain git, then `push`: success without uploading.
    let c4 = s.commit(&a, "f", "4\n");
    s.shell_git_ok(&a, &["push", "-q", "origin"]);
    let posts = s.posts();
    let run = s.push(&a, &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], c4.as_str());
    assert_eq!(s.posts(), posts, "push uploaded what git had pushed");
    assert_eq!(s.lease(&a), c4);
    let ledger = std::fs::read_to_string(a.join(".git/git-session-ledger")).unwrap();
    for c in [&c1, &c2, &c4] {
        assert!(
            ledger
                .lines()
                .any(|l| l.contains(&format!(" {c} git-push"))),
            "{ledger}"
        );
    }
}

/// A force push (after an amend of pushed work) and a deletion of the session branch are refused
/// whatever git allows; a push around the check (`--no-verify`) is not this tree's own, and the
/// next command says how that can have happened.
#[test]
fn force_pushes_and_deletions_are_refused_and_no_verify_is_not_own() {
    let s = Setup::new();
    let branch = "sessions/force";
    let a = s.sandbox("a", branch, &s.ids[1]);
    let c1 = s.commit(&a, "f", "1\n");
    s.push(&a, &[]).assert_code(0);
    s.w.git(&a, &["commit", "-q", "--amend", "-m", "amended"]);
    let amended = s.w.git(&a, &["rev-parse", "HEAD"]);
    let stderr = s.shell_git_refused(&a, &["push", "-q", "--force"]);
    assert!(stderr.contains("not a fast-forward"), "{stderr}");
    let refspec = format!("+HEAD:refs/heads/{branch}");
    s.shell_git_refused(&a, &["push", "-q", "origin", &refspec]);
    assert_eq!(s.remote(branch).as_deref(), Some(c1.as_str()));
    let delete = format!(":refs/heads/{branch}");
    let stderr = s.shell_git_refused(&a, &["push", "-q", "origin", &delete]);
    assert!(stderr.contains("delete"), "{stderr}");
    assert_eq!(s.remote(branch).as_deref(), Some(c1.as_str()));

    s.shell_git_ok(&a, &["push", "-q", "--force", "--no-verify"]);
    assert_eq!(s.remote(branch).as_deref(), Some(amended.as_str()));
    assert_eq!(s.remote_state(&a), "moved");
    let run = s.push(&a, &[]);
    run.assert_code(3);
    let msg = run.error_message();
    assert!(msg.contains("--no-verify"), "{msg}");
}

/// SIGKILL of `save` at a sweep of delays around its upload, with a server hook that sleeps (so
/// the server is still applying a push when the rerun looks): the rerun exits 0, the remote holds
/// the local commit, history is linear, and each edit is committed and pushed exactly once.
#[test]
fn a_killed_save_is_completed_by_the_rerun_never_a_false_stale() {
    let s = Setup::new();
    let branch = "sessions/kill";
    s.w.git(&s.bare(), &["branch", branch, &s.ids[1]]);
    let hook = s.bare().join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\ncat >/dev/null\nsleep 0.3\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let a = s.sandbox("a", branch, &s.ids[1]);
    let url = s.url();
    let delays: Vec<u64> = (0..12).map(|i| i * 60).collect();
    for (round, delay) in delays.iter().enumerate() {
        std::fs::write(a.join("f"), format!("{round}\n")).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
            .args(["save", "-m", &format!("edit {round}"), "--json"])
            .current_dir(&a)
            .env_clear()
            .envs(s.w.env())
            .env("PUSH_URL", &url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(*delay));
        let _ = child.kill();
        let _ = child.wait();
        let run = s.save(&a, &format!("edit {round}"), &[]);
        assert_eq!(
            run.code,
            Some(0),
            "round {round} (killed after {delay} ms): the rerun failed\n{}\n{}",
            run.stdout,
            run.stderr
        );
        let head = s.w.git(&a, &["rev-parse", "HEAD"]);
        assert_eq!(s.remote(branch), Some(head.clone()), "round {round}");
        assert_eq!(s.lease(&a), head, "round {round}");
    }
    let merges = s.w.git(&s.bare(), &["rev-list", "--merges", branch]);
    assert!(merges.is_empty(), "history is not linear: {merges}");
    let subjects = s.w.git(
        &s.bare(),
        &["log", "--format=%s", &format!("{}..{branch}", s.ids[1])],
    );
    let mut seen: Vec<&str> = subjects.lines().collect();
    seen.reverse();
    let want: Vec<String> = (0..delays.len()).map(|i| format!("edit {i}")).collect();
    assert_eq!(seen, want, "each edit once, in order");
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
}

/// Two saves started at once in one tree, held at a barrier so both reach the lock together: both
/// exit 0 (the second pushes its own commit on top, or has nothing to do), never exit 3.
#[test]
fn two_saves_at_once_in_one_tree_are_serialised() {
    let s = Setup::new();
    let branch = "sessions/twice";
    s.w.git(&s.bare(), &["branch", branch, &s.ids[1]]);
    let a = s.sandbox("a", branch, &s.ids[1]);
    for round in 0..6 {
        std::fs::write(a.join("f"), format!("{round}\n")).unwrap();
        let barrier = s.w.tmp.path().join(format!("twice-{round}"));
        let vars = [
            ("GIT_SESSION_FAILPOINT", "before-lock"),
            ("GIT_SESSION_BARRIER_DIR", barrier.to_str().unwrap()),
            ("GIT_SESSION_BARRIER_COUNT", "2"),
        ];
        let (r1, r2) = std::thread::scope(|sc| {
            let h1 = sc.spawn(|| s.save(&a, "one", &vars));
            let h2 = sc.spawn(|| {
                // The second writes a file of its own first, so it may have a commit to add.
                std::fs::write(a.join(format!("g{round}")), "x\n").unwrap();
                s.save(&a, "two", &vars)
            });
            (h1.join().unwrap(), h2.join().unwrap())
        });
        assert_eq!(std::fs::read_dir(&barrier).unwrap().count(), 2);
        for r in [&r1, &r2] {
            assert_eq!(r.code, Some(0), "round {round}: {}\n{}", r.stdout, r.stderr);
        }
        let head = s.w.git(&a, &["rev-parse", "HEAD"]);
        assert_eq!(s.remote(branch), Some(head.clone()), "round {round}");
        assert_eq!(s.lease(&a), head);
        assert!(s.w.git(&a, &["status", "--porcelain"]).is_empty());
    }
}

/// A plain push and another sandbox's `git-session push`, both held past their lease checks: the
/// server's compare-and-swap lets exactly one in, and the loser's words say why.
#[test]
fn a_plain_push_racing_another_sandbox_exactly_one_wins() {
    let s = Setup::new();
    let branch = "sessions/plainrace";
    let (a, b) = s.two_sandboxes(branch);
    let ca = s.commit(&a, "a.txt", "a\n");
    let cb = s.commit(&b, "b.txt", "b\n");
    let barrier = s.w.tmp.path().join("plainrace");
    let vars = [
        ("GIT_SESSION_FAILPOINT", "after-lease-check"),
        ("GIT_SESSION_BARRIER_DIR", barrier.to_str().unwrap()),
        ("GIT_SESSION_BARRIER_COUNT", "2"),
    ];
    let (ra, rb) = std::thread::scope(|sc| {
        let ha = sc.spawn(|| s.shell_git(&a, &["push", "-q"], &vars));
        let hb = sc.spawn(|| s.push(&b, &vars));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert_eq!(std::fs::read_dir(&barrier).unwrap().count(), 2);
    let remote = s.remote(branch).unwrap();
    match (ra.status.success(), rb.code) {
        (true, Some(3)) => assert_eq!(remote, ca),
        (false, Some(0)) => assert_eq!(remote, cb),
        other => panic!(
            "{other:?}\nA: {}\nB: {}",
            String::from_utf8_lossy(&ra.stderr),
            rb.stderr
        ),
    }
}

/// Credentials per direction: a good READ_URL and a wrong PUSH_URL on the same host and path let
/// `git fetch` work and make `git push` fail on auth; with no PUSH_URL a push fails at once,
/// naming PUSH_URL, with no prompt — and never with READ_URL's token.
#[test]
fn fetches_get_read_url_and_pushes_push_url_even_on_the_same_host_and_path() {
    let s = Setup::new();
    let branch = "sessions/dir";
    s.w.git(&s.bare(), &["branch", branch, &s.ids[1]]);
    let a = s.sandbox("a", branch, &s.ids[1]);
    s.commit(&a, "f", "1\n");
    let wrong = s.srv.url("repo.git", Some("t:wrong-token"));
    let out = s.shell_git(&a, &["fetch", "-q"], &[("PUSH_URL", &wrong)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.shell_git(&a, &["push", "-q"], &[("PUSH_URL", &wrong)]);
    assert!(!out.status.success());
    assert_eq!(s.remote(branch).as_deref(), Some(s.ids[1].as_str()));

    // No PUSH_URL: the helper quits (no prompt: an askpass program would record being asked).
    let asked = s.w.tmp.path().join("asked");
    let askpass = s.w.tmp.path().join("askpass.sh");
    std::fs::write(
        &askpass,
        format!(
            "#!/bin/sh\necho asked >> '{}'\necho nope\n",
            asked.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new("git")
        .args(["push", "-q"])
        .current_dir(&a)
        .env_clear()
        .envs(
            s.w.env()
                .into_iter()
                .filter(|(k, _)| k != "GIT_TERMINAL_PROMPT"),
        )
        .env("READ_URL", s.url())
        .env("GIT_ASKPASS", &askpass)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("PUSH_URL"), "{stderr}");
    assert!(!asked.exists(), "git prompted for a password:\n{stderr}");
    assert_eq!(s.remote(branch).as_deref(), Some(s.ids[1].as_str()));
}

/// A hook manager after restore: husky's `core.hooksPath`, then lefthook-style rewriting of
/// `pre-push`. The next git-session command warns and re-installs the check; a stale plain push is
/// refused again, and the manager's own hooks still run (pre-push after the check, pre-commit
/// through a shim).
#[test]
fn a_hook_managers_changes_are_undone_and_its_hooks_chained() {
    let s = Setup::new();
    let branch = "sessions/hooks";
    let (a, b) = s.two_sandboxes(branch);
    s.owner_saves(&a, branch, "a\n");

    // husky: its own hooks folder in core.hooksPath.
    let husky = b.join(".husky/_");
    std::fs::create_dir_all(&husky).unwrap();
    let marks = s.w.tmp.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    for name in ["pre-push", "pre-commit"] {
        let path = husky.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ncat >/dev/null\necho \"$@\" > '{}/husky-{name}'\n",
                marks.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    s.w.git(&b, &["config", "core.hooksPath", ".husky/_"]);
    let run = s.w.run(&b, &["status", "--json"], &[]);
    run.assert_code(0);
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("core.hooksPath"), "{warnings}");
    // Put back: git runs its default hooks folder again (where the check is).
    assert!(
        !s.w.git_output(&b, &["config", "core.hooksPath"])
            .status
            .success(),
        "core.hooksPath is still set"
    );
    s.commit(&b, "b.txt", "b\n");
    assert!(
        marks.join("husky-pre-commit").exists(),
        "husky's pre-commit did not run"
    );
    s.shell_git_ok(&b, &["pull", "-q", "--no-rebase", "--no-edit"]);
    let stderr = s.shell_git_refused(&b, &["push", "-q"]);
    assert!(stderr.contains("stale session"), "{stderr}");
    assert!(
        !marks.join("husky-pre-push").exists(),
        "chained hook ran for a refused push"
    );

    // lefthook: `pre-push` rewritten in place.
    let c = s.sandbox("c", "sessions/hooks2", &s.ids[1]);
    let hooks = c.join(".git/hooks");
    std::fs::write(
        hooks.join("pre-push"),
        format!(
            "#!/bin/sh\ncat > '{}/lefthook-stdin'\necho \"$1\" > '{}/lefthook-args'\n",
            marks.display(),
            marks.display()
        ),
    )
    .unwrap();
    let run = s.w.run(&c, &["status", "--json"], &[]);
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("replaced"), "{warnings}");
    let cc = s.commit(&c, "c.txt", "c\n");
    s.shell_git_ok(&c, &["push", "-q"]);
    assert_eq!(s.remote("sessions/hooks2").as_deref(), Some(cc.as_str()));
    let stdin = std::fs::read_to_string(marks.join("lefthook-stdin")).unwrap();
    assert!(
        stdin.contains(&cc),
        "the chained hook got no ref lines: {stdin:?}"
    );
    assert_eq!(
        std::fs::read_to_string(marks.join("lefthook-args"))
            .unwrap()
            .trim(),
        "origin"
    );
    assert_eq!(s.remote_state(&c), "lease");
}

/// A `pre-push` hook grown to 2 GiB (sparse) by the tree's owner is someone else's hook, judged
/// without reading it whole: moved aside as `pre-push.chained`, the check put back, with the
/// warning. Before, it was read whole (an allocation of 2 GiB: the alloc-limit build's abort).
#[test]
fn a_huge_pre_push_hook_is_moved_aside_never_read_whole() {
    let s = Setup::new();
    let a = s.sandbox("a", "sessions/huge", &s.ids[1]);
    let hook = a.join(".git/hooks/pre-push");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&hook).unwrap();
    file.set_len(2 << 30).unwrap();
    drop(file);
    let run = s.w.run(&a, &["status", "--json"], &[]);
    run.assert_code(0);
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("replaced"), "{warnings}");
    let chained = a.join(".git/hooks/pre-push.chained");
    assert_eq!(std::fs::metadata(&chained).unwrap().len(), 2 << 30);
    let ours = std::fs::read_to_string(&hook).unwrap();
    assert!(ours.contains("git-session pre-push check"), "{ours}");
}

/// A new session (the branch not on the remote yet): `git status` never says the upstream is
/// gone, plain `git fetch` does not fail on the absent branch (`git pull` says there is no
/// upstream yet, as README says), and the first plain
/// `git push` creates it and sets its upstream.
#[test]
fn a_new_sessions_plain_git_has_no_gone_upstream() {
    let s = Setup::new();
    let a = s.sandbox("a", "sessions/fresh", &s.ids[1]);
    let status = s.w.git(&a, &["status"]);
    assert!(!status.contains("gone"), "{status}");
    assert!(!status.contains("--unset-upstream"), "{status}");
    s.shell_git_ok(&a, &["fetch", "-q"]);
    let out = s.shell_git(&a, &["pull", "-q"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("couldn't find remote ref"), "{stderr}");
    // As README says: git's words for a branch without an upstream, exit 1, nothing changed.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("There is no tracking information"),
        "{stderr}"
    );
    let c1 = s.commit(&a, "f", "1\n");
    s.shell_git_ok(&a, &["push", "-q"]);
    assert_eq!(s.remote("sessions/fresh").as_deref(), Some(c1.as_str()));
    assert_eq!(
        s.w.git(&a, &["rev-parse", "--abbrev-ref", "@{upstream}"]),
        "origin/sessions/fresh"
    );
    let status = s.w.git(&a, &["status", "-sb"]);
    assert!(
        status.starts_with("## sessions/fresh...origin/sessions/fresh"),
        "{status}"
    );
    // Through git-session too: its first push sets the upstream and the exact refspec.
    let b = s.sandbox("b", "sessions/fresh2", &s.ids[1]);
    std::fs::write(b.join("g"), "1\n").unwrap();
    s.save(&b, "first", &[]).assert_code(0);
    assert_eq!(
        s.w.git(&b, &["rev-parse", "--abbrev-ref", "@{upstream}"]),
        "origin/sessions/fresh2"
    );
    assert_eq!(
        s.w.git(&b, &["config", "--get-all", "remote.origin.fetch"]),
        "+refs/heads/sessions/fresh2:refs/remotes/origin/sessions/fresh2"
    );
    s.shell_git_ok(&b, &["pull", "-q"]);
}

/// What the messages say about local work: a stale save names the commit it made and keeps it;
/// a save whose push failed on the network names its commit and says a rerun pushes it.
#[test]
fn a_failed_saves_message_names_the_local_commit_it_keeps() {
    let s = Setup::new();
    let branch = "sessions/words";
    let (a, b) = s.two_sandboxes(branch);
    s.owner_saves(&a, branch, "a\n");
    std::fs::write(b.join("b.txt"), "b\n").unwrap();
    let run = s.save(&b, "B", &[]);
    run.assert_code(3);
    let j = run.json();
    let commit = s.w.git(&b, &["rev-parse", "HEAD"]);
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&commit) && msg.contains("kept"), "{msg}");
    assert!(!msg.contains("nothing local was touched"), "{msg}");

    std::fs::write(a.join("a.txt"), "a2\n").unwrap();
    s.srv
        .knobs
        .fail_next
        .store(100, std::sync::atomic::Ordering::SeqCst);
    let run = s.save(&a, "A2", &[]);
    s.srv
        .knobs
        .fail_next
        .store(0, std::sync::atomic::Ordering::SeqCst);
    run.assert_code(5);
    let commit = s.w.git(&a, &["rev-parse", "HEAD"]);
    let msg = run.error_message();
    assert!(
        msg.contains(&commit) && msg.contains("rerunning `git-session save` pushes it"),
        "{msg}"
    );
    let run = s.save(&a, "A2", &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], commit.as_str());
}

/// Nothing git-session writes or starts holds the token: every file in the sandboxes' git dirs
/// (config, records, ledger, hooks) after plain pushes through the check and the helper.
#[test]
fn the_check_and_the_helper_leave_no_secret_on_disk() {
    let s = Setup::new();
    let a = s.sandbox("a", "sessions/sweep", &s.ids[1]);
    s.commit(&a, "f", "1\n");
    s.shell_git_ok(&a, &["push", "-q"]);
    let url = s.url();
    s.commit(&a, "f", "2\n");
    s.shell_git_ok(&a, &["push", "-q", &url, "HEAD:refs/heads/sessions/sweep"]);
    s.shell_git_ok(&a, &["fetch", "-q"]);
    for file in all_files(&a.join(".git")) {
        assert_no_secret(&file.display().to_string(), &std::fs::read(&file).unwrap());
    }
    let hook = std::fs::read_to_string(a.join(".git/hooks/pre-push")).unwrap();
    assert!(!hook.contains(&userinfo()) && !hook.contains(TOKEN));
}

/// Faults a trial found, each fixed: another spelling of the server's host is checked too; a
/// moved tree keeps the check; a hook manager's folder that is later removed breaks no `git
/// commit`; a `core.hooksPath` in a work tree's config is found; pre-commit's migration (our hook
/// kept as `pre-push.legacy`) raises no false alarm; git-session in a linked work tree says where
/// the session is (exit 2, not 1); and a push of this tree's own commit from another branch is
/// "up to date", not "history was rewritten".
#[test]
fn the_check_holds_for_other_spellings_moves_and_work_trees() {
    let s = Setup::new();
    let branch = "sessions/spell";
    let (a, b) = s.two_sandboxes(branch);
    let owner_tip = s.owner_saves(&a, branch, "a\n");
    // B is stale: `localhost` names the same server as the restore's 127.0.0.1.
    s.commit(&b, "b.txt", "b\n");
    s.shell_git_ok(&b, &["pull", "-q", "--no-rebase", "--no-edit"]);
    let other = format!(
        "http://{}@localhost:{}/repo.git",
        userinfo(),
        s.srv.addr.port()
    );
    let refspec = format!("HEAD:refs/heads/{branch}");
    s.shell_git_refused(&b, &["push", "-q", &other, &refspec]);
    assert_eq!(s.remote(branch).as_deref(), Some(owner_tip.as_str()));
    // Moved, B is still checked.
    let moved = s.w.path("b-moved");
    std::fs::rename(&b, &moved).unwrap();
    s.shell_git_refused(&moved, &["push", "-q", "origin"]);
    assert_eq!(s.remote(branch).as_deref(), Some(owner_tip.as_str()));
    // The owner's push by the other spelling is recorded as its own.
    let ca = s.commit(&a, "a.txt", "a2\n");
    s.shell_git_ok(&a, &["push", "-q", &other, &refspec]);
    assert_eq!(s.remote_state(&a), "own");
    let run = s.save(&a, "nothing new", &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], ca.as_str());

    hook_managers_keep_the_check(&s, &a);

    // In a linked work tree: exit 2, naming the main tree.
    let wt = s.w.path("a-wt");
    s.w.git(
        &a,
        &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
    );
    let run = s.w.run(&wt, &["status", "--json"], &[]);
    run.assert_code(2);
    let msg = run.error_message();
    assert!(msg.contains(a.to_str().unwrap()), "{msg}");

    // This tree's own commit pushed from another branch: the session branch is behind it.
    let side = s.commit(&wt, "side.txt", "side\n");
    s.shell_git_ok(&wt, &["push", "-q", "origin", &format!("side:{branch}")]);
    let run = s.push(&a, &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], side.as_str());
    assert!(
        run.json()["warnings"]
            .to_string()
            .contains("git merge --ff-only"),
        "{}",
        run.stdout
    );
    assert_eq!(s.lease(&a), side);
}

/// The hook-manager half of [`the_check_holds_for_other_spellings_moves_and_work_trees`], in the
/// owner's sandbox `a`.
fn hook_managers_keep_the_check(s: &Setup, a: &Path) {
    // A hook manager's folder removed after the check was put back: `git commit` still works.
    let husky = a.join(".husky/_");
    std::fs::create_dir_all(&husky).unwrap();
    std::fs::write(husky.join("pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    make_executable(&husky.join("pre-commit"));
    s.w.git(a, &["config", "core.hooksPath", ".husky/_"]);
    s.w.run(a, &["status"], &[]).assert_code(0);
    std::fs::remove_dir_all(a.join(".husky")).unwrap();
    s.commit(a, "a.txt", "a3\n");
    s.w.git(a, &["reset", "-q", "--hard", "HEAD~1"]);

    // core.hooksPath in a work tree's own config (extensions.worktreeConfig).
    s.w.git(a, &["config", "extensions.worktreeConfig", "true"]);
    s.w.git(
        a,
        &[
            "config",
            "--worktree",
            "core.hooksPath",
            "/nonexistent-hooks",
        ],
    );
    let run = s.w.run(a, &["status", "--json"], &[]);
    run.assert_code(0);
    assert!(
        run.json()["warnings"]
            .to_string()
            .contains("core.hooksPath"),
        "{}",
        run.stdout
    );
    assert!(
        !s.w.git_output(a, &["config", "--worktree", "core.hooksPath"])
            .status
            .success()
    );

    // pre-commit's migration: our hook kept as pre-push.legacy, which its hook runs.
    let hooks = a.join(".git/hooks");
    std::fs::rename(hooks.join("pre-push"), hooks.join("pre-push.legacy")).unwrap();
    std::fs::write(
        hooks.join("pre-push"),
        "#!/bin/sh\nexec \"$(dirname \"$0\")/pre-push.legacy\" \"$@\"\n",
    )
    .unwrap();
    make_executable(&hooks.join("pre-push"));
    let run = s.w.run(a, &["status", "--json"], &[]);
    assert_eq!(
        run.json()["warnings"],
        serde_json::json!([]),
        "{}",
        run.stdout
    );
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The owner's plain push while a hook manager had turned the check off is not recorded (the
/// check did not run), so the next save is refused — and says why: the warning comes with the
/// failure too, and the stale error names the check having been off.
#[test]
fn a_save_refused_after_the_check_was_off_says_why() {
    let s = Setup::new();
    let branch = "sessions/off";
    s.w.git(&s.bare(), &["branch", branch, &s.ids[1]]);
    let a = s.sandbox("a", branch, &s.ids[1]);
    std::fs::create_dir_all(a.join(".husky")).unwrap();
    s.w.git(&a, &["config", "core.hooksPath", ".husky"]);
    s.commit(&a, "w", "w\n");
    s.shell_git_ok(&a, &["push", "-q"]);
    std::fs::write(a.join("v"), "v\n").unwrap();
    let run = s.save(&a, "v", &[]);
    run.assert_code(3);
    let j = run.json();
    assert!(j["warnings"].to_string().contains("core.hooksPath"), "{j}");
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(msg.contains("was off in this tree"), "{msg}");
    assert!(
        run.stderr.contains("warning: core.hooksPath"),
        "{}",
        run.stderr
    );
}

/// A new session's fetch refspec takes the session branch only — not other branches that start
/// with its name — and becomes exact once a plain `git push` created the branch.
#[test]
fn a_new_sessions_fetch_takes_no_other_sessions_branches() {
    let s = Setup::new();
    for other in ["sessions/new-old", "sessions/newer", "sessions/newish"] {
        s.w.git(&s.bare(), &["branch", other, &s.ids[0]]);
    }
    let a = s.sandbox("a", "sessions/new", &s.ids[1]);
    s.shell_git_ok(&a, &["fetch", "-q"]);
    let tracking =
        s.w.git(&a, &["for-each-ref", "--format=%(refname)", "refs/remotes"]);
    assert_eq!(tracking, "", "fetched other branches: {tracking}");
    s.commit(&a, "f", "1\n");
    s.shell_git_ok(&a, &["push", "-q"]);
    s.w.run(&a, &["status"], &[]).assert_code(0);
    assert_eq!(
        s.w.git(&a, &["config", "--get-all", "remote.origin.fetch"]),
        "+refs/heads/sessions/new:refs/remotes/origin/sessions/new"
    );
    s.shell_git_ok(&a, &["fetch", "-q"]);
    assert_eq!(
        s.w.git(&a, &["for-each-ref", "--format=%(refname)", "refs/remotes"]),
        "refs/remotes/origin/sessions/new"
    );
}

/// A plain `git push` held in its check before the lock (git has read the remote by then) while
/// a `save` (or a `watch` checkpoint) in the same tree pushes: git's view of the remote is now
/// older than the lease — this tree's own push, not another sandbox's. The plain push is never
/// called stale; it is told to run again, and the rerun finds everything pushed.
#[test]
fn a_plain_push_overtaken_by_this_trees_own_save_is_never_called_stale() {
    let s = Setup::new();
    let branch = "sessions/ownrace";
    s.w.git(&s.bare(), &["branch", branch, &s.ids[1]]);
    let a = s.sandbox("a", branch, &s.ids[1]);
    s.commit(&a, "plain.txt", "plain\n");
    std::fs::write(a.join("saved.txt"), "s\n").unwrap();
    let barrier = s.w.tmp.path().join("ownrace");
    let vars = [
        ("GIT_SESSION_FAILPOINT", "before-lock"),
        ("GIT_SESSION_BARRIER_DIR", barrier.to_str().unwrap()),
        ("GIT_SESSION_BARRIER_COUNT", "2"),
    ];
    let plain = std::thread::scope(|sc| {
        let hp = sc.spawn(|| s.shell_git(&a, &["push", "-q"], &vars));
        // The hook is waiting once its marker is there: the save runs to the end meanwhile.
        let t0 = std::time::Instant::now();
        while std::fs::read_dir(&barrier).map_or(0, |d| d.count()) == 0 {
            assert!(
                t0.elapsed().as_secs() < 30,
                "the plain push never reached its check"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let saved = s.save(&a, "saved", &[]);
        assert_eq!(saved.code, Some(0), "{}", saved.stderr);
        std::fs::write(barrier.join("test"), b"").unwrap();
        hp.join().unwrap()
    });
    let words = String::from_utf8_lossy(&plain.stderr);
    assert!(!plain.status.success(), "{words}");
    assert!(!words.contains("another sandbox"), "{words}");
    assert!(words.contains("run `git push` again"), "{words}");
    let again = s.shell_git(&a, &["push", "-q"], &[]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(s.remote(branch), Some(s.w.git(&a, &["rev-parse", "HEAD"])));
}

/// A stale tree pushes the owner's commit to another repository still at its lease (a mirror, a
/// local copy): the check lets that through, and recorded it in the ledger as this tree's — so
/// its next save took the session on top of the owner's commit (exit 0). Only pushes to the
/// session's own repository are recorded: the save is stale (exit 3), the remote untouched.
#[test]
fn a_push_to_another_repository_does_not_make_the_owners_commit_this_trees() {
    let s = Setup::new();
    let branch = "sessions/mirror";
    let (a, b) = s.two_sandboxes(branch);
    let owner_tip = s.owner_saves(&a, branch, "a\n");
    let mirror = s.w.path("mirror.git");
    s.w.git(
        s.w.path("").as_path(),
        &[
            "clone",
            "-q",
            "--bare",
            s.bare().to_str().unwrap(),
            mirror.to_str().unwrap(),
        ],
    );
    s.w.git(
        &mirror,
        &["update-ref", &format!("refs/heads/{branch}"), &s.ids[1]],
    );
    s.shell_git_ok(&b, &["fetch", "-q"]);
    let refspec = format!("{owner_tip}:refs/heads/{branch}");
    s.shell_git_ok(&b, &["push", "-q", mirror.to_str().unwrap(), &refspec]);
    let ledger = std::fs::read_to_string(b.join(".git/git-session-ledger")).unwrap_or_default();
    assert!(!ledger.contains(&owner_tip), "{ledger}");
    std::fs::write(b.join("b.txt"), "b\n").unwrap();
    s.save(&b, "B's work", &[]).assert_code(3);
    assert_eq!(s.remote(branch).as_deref(), Some(owner_tip.as_str()));
    assert_eq!(s.remote_state(&b), "moved");
}

/// The check reads git's ids in the repository's own format: a ref line whose ids have the other
/// length (40 digits in a SHA-256 repository, 64 in a SHA-1 one) is refused with exit 7 and
/// nothing recorded, never compared with the lease.
#[test]
fn the_check_refuses_ids_of_the_other_format() {
    let s = Setup::new();
    let branch = "sessions/len";
    let a = s.sandbox("a", branch, &s.ids[1]);
    let c1 = s.commit(&a, "f", "1\n");
    let other = |id: &str| match crate::support::hex_len() {
        40 => format!("{id}{}", &id[..24]),
        _ => id[..40].to_owned(),
    };
    let zero = other(&crate::support::zero_id());
    for (local, remote) in [(other(&c1), zero.clone()), (c1.clone(), zero)] {
        let line = format!("HEAD {local} refs/heads/{branch} {remote}\n");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
            .args(["hook", "pre-push"])
            .current_dir(&a)
            .env_clear()
            .envs(s.w.env())
            .env("GIT_SESSION_HOOK_REMOTE", "origin")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), line.as_bytes()).unwrap();
        let run = crate::support::Run::of(&child.wait_with_output().unwrap());
        run.assert_code(7);
        assert!(
            run.stderr.contains("git passed the pre-push check")
                && run.stderr.contains("git pushed nothing"),
            "{}",
            run.stderr
        );
    }
    assert!(!a.join(".git/git-session-ledger").exists());
    // The real push goes through.
    s.shell_git_ok(&a, &["push", "-q"]);
    assert_eq!(s.remote(branch).as_deref(), Some(c1.as_str()));
}

crate::sha256_too!(
    a_stale_sandbox_cannot_take_the_session_with_git_pull_and_git_push,
    the_owners_plain_pushes_to_origin_and_by_url_count_as_its_own,
    force_pushes_and_deletions_are_refused_and_no_verify_is_not_own,
    a_killed_save_is_completed_by_the_rerun_never_a_false_stale,
    a_plain_push_racing_another_sandbox_exactly_one_wins,
    fetches_get_read_url_and_pushes_push_url_even_on_the_same_host_and_path,
    a_new_sessions_plain_git_has_no_gone_upstream,
    a_plain_push_overtaken_by_this_trees_own_save_is_never_called_stale,
    the_check_refuses_ids_of_the_other_format,
);
