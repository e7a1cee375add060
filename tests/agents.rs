//! Several agents in one repository (`git-session agent add|list|remove`): each agent's linked
//! work tree, on its own session branch with its own lease and ledger, checked with the git CLI
//! against git's http-backend.

use std::path::{Path, PathBuf};

use crate::push::Setup;
use crate::support::{Run, zero_id};

const BRANCH: &str = "sessions/main";

impl Setup {
    /// The session `sessions/main` (new on the server) restored at the seed's second commit into
    /// `main`.
    fn main_tree(&self) -> PathBuf {
        self.sandbox("main", BRANCH, &self.ids[1])
    }

    fn agent(&self, main: &Path, args: &[&str]) -> Run {
        self.w
            .run(main, &[&["agent"][..], args, &["--json"]].concat(), &[])
    }

    /// `agent add NAME`, which must succeed; the agent's folder.
    fn add_agent(&self, main: &Path, name: &str) -> PathBuf {
        let run = self.agent(main, &["add", name]);
        run.assert_code(0);
        PathBuf::from(run.json()["dir"].as_str().unwrap())
    }

    fn save_in(&self, dir: &Path, message: &str) -> Run {
        let url = self.url();
        self.w.run(
            dir,
            &["save", "-m", message, "--json"],
            &[("PUSH_URL", url.as_str()), ("READ_URL", url.as_str())],
        )
    }
}

/// `agent add` makes a linked work tree git knows (`git worktree list`), on `<session>-<NAME>` at
/// the session's tip, its files equal to the commit and `git status` clean at once; `agent list`
/// shows it; `agent remove` takes it away, with its branch (nothing was unpushed).
#[test]
fn add_list_remove_round_trip() {
    let s = Setup::new();
    let main = s.main_tree();
    let run = s.agent(&main, &["add", "reviewer"]);
    run.assert_code(0);
    let json = run.json();
    let dir = PathBuf::from(json["dir"].as_str().unwrap());
    assert_eq!(
        dir,
        main.with_file_name("main-reviewer").canonicalize().unwrap()
    );
    assert_eq!(json["agent_branch"], "sessions/main-reviewer");
    assert_eq!(json["start"], s.ids[1].as_str());
    assert_eq!(json["lease"], zero_id().as_str());
    let files = json["copied"].as_u64().unwrap() + json["written"].as_u64().unwrap();
    assert_eq!(files, 4, "{json}");
    assert!(json["copied"].as_u64().unwrap() >= 1, "{json}");
    crate::support::assert_matches_schema(&json);

    let list = s.w.git(&main, &["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(&format!("worktree {}", dir.display())),
        "{list}"
    );
    assert!(
        list.contains("branch refs/heads/sessions/main-reviewer"),
        "{list}"
    );
    assert_eq!(s.w.git(&dir, &["status", "--porcelain"]), "");
    s.w.git(&dir, &["diff", "--quiet", "HEAD"]);
    assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), s.ids[1]);
    assert_eq!(
        s.w.git(&dir, &["symbolic-ref", "HEAD"]),
        "refs/heads/sessions/main-reviewer"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        "two\n"
    );

    let listed = s.agent(&main, &["list"]);
    listed.assert_code(0);
    let agents = listed.json()["agents"].clone();
    assert_eq!(agents.as_array().unwrap().len(), 1, "{agents}");
    assert_eq!(agents[0]["name"], "reviewer");
    assert_eq!(agents[0]["ahead"], 0);
    assert_eq!(agents[0]["changed"], 0);
    crate::support::assert_matches_schema(&listed.json());

    s.agent(&main, &["remove", "reviewer"]).assert_code(0);
    assert!(!dir.exists());
    let list = s.w.git(&main, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains("reviewer"), "{list}");
    let branches =
        s.w.git(&main, &["branch", "--list", "sessions/main-reviewer"]);
    assert_eq!(branches, "");
}

/// `n` agents each save a file of their own at once (separate processes held at `before-lock`
/// until all arrived): each lands on its own branch on the server, none moves another's, and the
/// main session's branch stays where it was.
fn agents_save_at_once(n: usize) {
    let s = Setup::new();
    let main = s.main_tree();
    s.save_in(&main, "nothing yet").assert_code(0);
    let main_before = s.remote(BRANCH);
    let dirs: Vec<PathBuf> = (0..n)
        .map(|i| s.add_agent(&main, &format!("a{i}")))
        .collect();
    for (i, dir) in dirs.iter().enumerate() {
        std::fs::write(dir.join(format!("by-a{i}.txt")), format!("agent {i}\n")).unwrap();
    }
    let barrier = s.w.tmp.path().join(format!("agents-{n}"));
    let count = n.to_string();
    let url = s.url();
    let vars = [
        ("GIT_SESSION_FAILPOINT", "before-lock"),
        ("GIT_SESSION_BARRIER_DIR", barrier.to_str().unwrap()),
        ("GIT_SESSION_BARRIER_COUNT", count.as_str()),
        ("PUSH_URL", url.as_str()),
        ("READ_URL", url.as_str()),
    ];
    let runs: Vec<Run> = std::thread::scope(|sc| {
        let handles: Vec<_> = dirs
            .iter()
            .map(|d| {
                let vars = &vars;
                let w = &s.w;
                sc.spawn(move || w.run(d, &["save", "-m", "agent work", "--json"], vars))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(std::fs::read_dir(&barrier).unwrap().count(), n);
    for (i, (run, dir)) in runs.iter().zip(&dirs).enumerate() {
        assert_eq!(run.code, Some(0), "a{i}: {}\n{}", run.stdout, run.stderr);
        let head = s.w.git(dir, &["rev-parse", "HEAD"]);
        let branch = format!("sessions/main-a{i}");
        assert_eq!(s.remote(&branch), Some(head.clone()), "a{i}");
        let files = s.w.git(&s.bare(), &["ls-tree", "--name-only", &head]);
        let mine = format!("by-a{i}.txt");
        assert!(files.lines().any(|f| f == mine), "a{i}: {files}");
        assert_eq!(
            files.lines().filter(|f| f.starts_with("by-a")).count(),
            1,
            "a{i} holds another agent's file: {files}"
        );
        assert_eq!(s.w.git(dir, &["status", "--porcelain"]), "");
    }
    assert_eq!(
        s.remote(BRANCH),
        main_before,
        "the main session's branch moved"
    );
    assert_eq!(s.w.git(&main, &["rev-parse", "HEAD"]), s.ids[1]);
}

#[test]
fn two_agents_saving_at_once_each_land_on_their_own_branch() {
    agents_save_at_once(2);
}

#[test]
fn eight_agents_saving_at_once_each_land_on_their_own_branch() {
    agents_save_at_once(8);
}

/// A plain `git push` to another session's branch of the same repository is refused by the
/// pre-push check before anything is uploaded, naming the owner: agent A → agent B's branch,
/// the main tree → an agent's, an agent → the main session's. The server's refs stay.
#[test]
fn a_plain_push_to_another_sessions_branch_is_refused_naming_its_owner() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    let b = s.add_agent(&main, "b");
    s.save_in(&b, "b's first").assert_code(0);
    let b_tip = s.remote("sessions/main-b");
    assert!(b_tip.is_some());
    s.commit(&a, "a.txt", "a\n");
    let said = s.shell_git_refused(&a, &["push", "origin", "HEAD:refs/heads/sessions/main-b"]);
    assert!(
        said.contains("sessions/main-b is agent b's session branch"),
        "{said}"
    );
    assert!(said.contains(&b.display().to_string()), "{said}");
    assert_eq!(s.remote("sessions/main-b"), b_tip, "B's branch moved");

    let said = s.shell_git_refused(
        &a,
        &["push", "origin", &format!("HEAD:refs/heads/{BRANCH}")],
    );
    assert!(said.contains("is the main session's branch"), "{said}");
    assert_eq!(
        s.remote(BRANCH),
        None,
        "the main session's branch was created"
    );

    s.commit(&main, "m.txt", "m\n");
    let said = s.shell_git_refused(
        &main,
        &["push", "origin", "HEAD:refs/heads/sessions/main-b"],
    );
    assert!(
        said.contains("sessions/main-b is agent b's session branch"),
        "{said}"
    );
    assert_eq!(s.remote("sessions/main-b"), b_tip, "B's branch moved");

    // A's own branch goes through, by plain git too.
    s.shell_git_ok(&a, &["push", "origin", "HEAD:refs/heads/sessions/main-a"]);
    assert_eq!(
        s.remote("sessions/main-a"),
        Some(s.w.git(&a, &["rev-parse", "HEAD"]))
    );
}

/// Someone else creates the agent's branch on the server: the agent's save is stale (exit 3,
/// both ids), the other agent and the main session are not.
#[test]
fn an_agents_branch_moved_by_someone_else_is_stale_for_that_agent_only() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    let b = s.add_agent(&main, "b");
    s.w.git(&s.bare(), &["branch", "sessions/main-a", &s.ids[0]]);
    std::fs::write(a.join("a.txt"), "a\n").unwrap();
    let run = s.save_in(&a, "a's work");
    run.assert_code(3);
    let message = run.error_message();
    assert!(message.contains(&s.ids[0]), "{message}");
    assert!(message.contains("its lease is the zero id"), "{message}");
    assert_eq!(run.json()["lease"], zero_id().as_str());
    assert_eq!(run.json()["remote_tip"], s.ids[0].as_str());
    assert_eq!(s.remote("sessions/main-a"), Some(s.ids[0].clone()));
    std::fs::write(b.join("b.txt"), "b\n").unwrap();
    s.save_in(&b, "b's work").assert_code(0);
    std::fs::write(main.join("m.txt"), "m\n").unwrap();
    s.save_in(&main, "main's work").assert_code(0);
}

/// `agent remove` refuses a tree with uncommitted changes, then one with unpushed commits (exit
/// 7, nothing removed); `--force` removes it and keeps its branch.
#[test]
fn remove_refuses_unpushed_work_unless_forced() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    std::fs::write(a.join("dirty.txt"), "x\n").unwrap();
    let run = s.agent(&main, &["remove", "a"]);
    run.assert_says(7, &["1 changed file(s)", "--force"]);
    assert!(a.join("dirty.txt").exists());
    s.w.git(&a, &["add", "-A"]);
    s.w.git(&a, &["commit", "-qm", "local"]);
    let head = s.w.git(&a, &["rev-parse", "HEAD"]);
    s.agent(&main, &["remove", "a"])
        .assert_says(7, &["1 unpushed commit(s)"]);
    assert!(a.exists());
    // Pushed with plain git, the commit is no longer unpushed work.
    let pushed = s.agent(&main, &["list"]).json();
    assert_eq!(pushed["agents"][0]["ahead"], 1, "{pushed}");
    let b = s.add_agent(&main, "b");
    s.commit(&b, "b.txt", "b\n");
    s.shell_git_ok(
        &b,
        &["push", "-q", "origin", "HEAD:refs/heads/sessions/main-b"],
    );
    let listed = s.agent(&main, &["list"]).json();
    assert_eq!(listed["agents"][1]["ahead"], 0, "{listed}");
    s.agent(&main, &["remove", "b"]).assert_code(0);
    assert!(!b.exists());
    let run = s.agent(&main, &["remove", "a", "--force"]);
    run.assert_code(0);
    assert_eq!(run.json()["branch_kept"], true);
    assert!(!a.exists());
    assert_eq!(
        s.w.git(&main, &["rev-parse", "refs/heads/sessions/main-a"]),
        head
    );
    let list = s.w.git(&main, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains("main-a"), "{list}");
}

/// Killed mid-way (the layout written, then half of the files), `agent add` run again completes:
/// the agent's tree equals the commit and git status is clean.
#[test]
fn a_killed_agent_add_is_completed_by_the_rerun() {
    let s = Setup::new();
    let main = s.main_tree();
    for (name, point) in [("k1", "agent-layout-written"), ("k2", "mid-agent-checkout")] {
        let run = s.w.run(
            &main,
            &["agent", "add", name],
            &[("GIT_SESSION_FAILPOINT", point)],
        );
        run.assert_killed_at(point);
        let dir = s.add_agent(&main, name);
        assert_eq!(s.w.git(&dir, &["status", "--porcelain"]), "", "{point}");
        s.w.git(&dir, &["diff", "--quiet", "HEAD"]);
        assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), s.ids[1]);
    }
    let listed = s.agent(&main, &["list"]).json();
    assert_eq!(listed["agents"].as_array().unwrap().len(), 2, "{listed}");
}

/// A plain `git worktree add` tree is still no session (exit 2), and the refusal names `agent
/// add`, which then works as printed.
#[test]
fn a_plain_linked_work_tree_is_refused_with_the_agent_hint() {
    let s = Setup::new();
    let main = s.main_tree();
    let plain = s.w.path("plain");
    s.w.git(
        &main,
        &["worktree", "add", "-q", plain.to_str().unwrap(), "-b", "x"],
    );
    let run = s.w.run(&plain, &["status", "--json"], &[]);
    run.assert_says(2, &["linked work tree", "agent add agent"]);
    let _ = s.add_agent(&main, "agent");
}

/// Hostile names and layouts: exit 2, nothing written outside.
#[test]
fn hostile_names_and_links_are_refused() {
    let s = Setup::new();
    let main = s.main_tree();
    for bad in ["../x", "a/b", "..", "a\u{1}b", "-f", "x.lock", ""] {
        let run = s.agent(&main, &["add", bad]);
        run.assert_code(2);
    }
    assert!(!s.w.path("x").exists());
    assert!(!main.join(".git/worktrees").exists());

    // `<common>/worktrees/NAME` a symlink to a folder elsewhere: refused, nothing written there.
    let elsewhere = s.w.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(main.join(".git/worktrees")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, main.join(".git/worktrees/evil")).unwrap();
    s.agent(&main, &["add", "evil"]).assert_code(2);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // A tree whose `.git` file points at another repository's git dir is not an agent's tree.
    let a = s.add_agent(&main, "a");
    let other = s.sandbox("other", "sessions/other", &s.ids[1]);
    std::fs::write(
        a.join(".git"),
        format!("gitdir: {}\n", other.join(".git").display()),
    )
    .unwrap();
    s.w.run(&a, &["status", "--json"], &[]).assert_code(2);
    std::fs::write(a.join("f.txt"), "x\n").unwrap();
    s.save_in(&a, "through a forged link").assert_code(2);
    assert_eq!(s.remote("sessions/other"), None);
}

/// `-C MAIN` names the session, `--dir DIR` the agent's folder: they are two flags (clap once
/// filled `--dir` from `-C`); a folder that is not empty, or whose parent is missing, is refused
/// (exit 2) with `--dir` in the words.
#[test]
fn dir_and_c_are_separate_and_a_taken_folder_is_refused() {
    let s = Setup::new();
    let main = s.main_tree();
    let elsewhere = s.w.path("elsewhere");
    let main_arg = main.to_str().unwrap();
    let run = s.w.run(
        &elsewhere,
        &["-C", main_arg, "agent", "add", "x", "--json"],
        &[],
    );
    run.assert_code(0);
    assert_eq!(
        PathBuf::from(run.json()["dir"].as_str().unwrap()),
        main.with_file_name("main-x").canonicalize().unwrap()
    );
    let chosen = s.w.path("chosen");
    let run = s.w.run(
        &elsewhere,
        &[
            "-C", main_arg, "agent", "add", "y", "--dir", "chosen-y", "--json",
        ],
        &[],
    );
    run.assert_code(0);
    assert_eq!(
        PathBuf::from(run.json()["dir"].as_str().unwrap()),
        elsewhere.join("chosen-y").canonicalize().unwrap()
    );
    std::fs::create_dir_all(&chosen).unwrap();
    std::fs::write(chosen.join("keep"), "mine\n").unwrap();
    let taken = chosen.to_str().unwrap();
    s.agent(&main, &["add", "z", "--dir", taken])
        .assert_says(2, &["not an empty folder", "--dir"]);
    assert_eq!(crate::support::names_in(&chosen), ["keep"]);
    s.agent(&main, &["add", "z", "--dir", "/nonexistent-parent/z"])
        .assert_says(2, &["--dir"]);
}

/// In an agent's tree, `status` and `push` work against the agent's record: its branch, its
/// lease (the zero id, then its own push), not the main session's.
#[test]
fn status_and_push_in_an_agents_tree_use_its_own_lease() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    // Plain `git fetch` works in both trees before the agent's branch exists on the server.
    s.shell_git_ok(&main, &["fetch", "-q", "origin"]);
    s.shell_git_ok(&a, &["fetch", "-q", "origin"]);
    let status = s.w.run(&a, &["status", "--json"], &[]);
    status.assert_code(0);
    assert_eq!(status.json()["branch"], "sessions/main-a");
    assert_eq!(status.json()["lease"], zero_id().as_str());
    let head = s.commit(&a, "a.txt", "a\n");
    s.push(&a, &[]).assert_code(0);
    assert_eq!(s.remote("sessions/main-a"), Some(head.clone()));
    let status = s.w.run(&a, &["status", "--json"], &[]);
    assert_eq!(status.json()["lease"], head.as_str());
    assert_eq!(
        s.w.run(&main, &["status", "--json"], &[]).json()["lease"],
        zero_id().as_str()
    );
    assert_eq!(s.remote(BRANCH), None);
    assert_eq!(
        s.w.git(&a, &["rev-parse", "refs/remotes/origin/sessions/main-a"]),
        head
    );
    // And after: the agent's line of origin's fetch is exact now, the main session's unchanged.
    let fetch =
        s.w.git(&main, &["config", "--get-all", "remote.origin.fetch"]);
    assert!(
        fetch.contains("+refs/heads/sessions/main-a:refs/remotes/origin/sessions/main-a"),
        "{fetch}"
    );
    assert_eq!(fetch.lines().count(), 2, "{fetch}");
    s.shell_git_ok(&main, &["fetch", "-q", "origin"]);
    s.shell_git_ok(&a, &["pull", "-q", "--ff-only"]);
}

/// A sparse main tree: `agent add` says "not yet" (exit 2) and writes nothing.
#[test]
fn a_sparse_main_tree_is_not_copied_yet() {
    let s = Setup::new();
    let main = s.w.path("main");
    s.w.restore_with(
        &main,
        &s.url(),
        BRANCH,
        &s.ids[1],
        &["--sparse", "src"],
        &[],
    )
    .assert_code(0);
    s.agent(&main, &["add", "a"])
        .assert_says(2, &["sparse", "not", "yet"]);
    assert!(!main.with_file_name("main-a").exists());
    assert!(!main.join(".git/worktrees").exists());
}

/// LFS files appear in the agent's tree with their content: a clean one copied from the main
/// tree, one whose stat data changed there written from the shared LFS store; git with git-lfs
/// sees the agent's tree clean.
#[test]
fn lfs_files_appear_in_an_agents_tree_with_their_content() {
    use crate::support::lfs::Giftless;
    let w = crate::support::World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, files) = crate::lfs::make(&w, &lfs.url("org/repo"));
    let srv = crate::support::GitServer::start(&w.srv(), Some(crate::support::TOKEN));
    let main = w.path("main");
    let url = srv.url("repo.git", Some(&crate::support::userinfo()));
    w.restore_with(&main, &url, "sessions/lfs", &tip, &[], &[])
        .assert_code(0);
    // Same content, new stat data: not clean by the main index, so not copied from there.
    let (_, big) = files.iter().find(|(p, _)| *p == "big.bin").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(main.join("big.bin"), big).unwrap();
    let run = w.run(&main, &["agent", "add", "a", "--json"], &[]);
    run.assert_code(0);
    let json = run.json();
    assert!(json["copied"].as_u64().unwrap() >= 2, "{json}");
    assert!(json["written"].as_u64().unwrap() >= 1, "{json}");
    let dir = PathBuf::from(json["dir"].as_str().unwrap());
    for (path, data) in &files {
        assert_eq!(&std::fs::read(dir.join(path)).unwrap(), data, "{path}");
    }
    assert_eq!(
        w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
}

/// Checked-out submodules in the main tree: `agent add` says "not yet" (exit 2), nothing written.
/// Without them (gitlinks left empty, as restore leaves them) the agent gets the empty folders.
#[test]
fn submodules_checked_out_are_not_copied_yet() {
    use crate::submodules::repo_with_links;
    let w = crate::support::World::new();
    let srv = crate::support::GitServer::start(&w.srv(), None);
    let leaf = repo_with_links(&w, "c.git", &[("c.txt", "leaf\n")], &[], "");
    let top = repo_with_links(
        &w,
        "top.git",
        &[("README.md", "top\n")],
        &[("libs/c", &leaf)],
        "[submodule \"c\"]\n\tpath = libs/c\n\turl = ../c.git\n",
    );
    let url = srv.url("top.git", None);
    let with = w.path("with");
    w.restore_with(
        &with,
        &url,
        "sessions/sub",
        &top,
        &["--submodules", "shallow"],
        &[],
    )
    .assert_code(0);
    w.run(&with, &["agent", "add", "a", "--json"], &[])
        .assert_says(2, &["submodules", "not", "yet"]);
    assert!(!with.with_file_name("with-a").exists());
    let without = w.path("without");
    w.restore_with(&without, &url, "sessions/sub", &top, &[], &[])
        .assert_code(0);
    let run = w.run(&without, &["agent", "add", "a", "--json"], &[]);
    run.assert_code(0);
    let dir = PathBuf::from(run.json()["dir"].as_str().unwrap());
    assert_eq!(std::fs::read_dir(dir.join("libs/c")).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        "top\n"
    );
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
}

/// Run as root in a main tree another user owns, `agent add` works as that user (as restore
/// does): the agent's tree and git dir are the owner's; a parent folder the owner cannot write is
/// refused with `--dir` in the words, nothing made as root.
#[test]
fn as_root_an_agent_is_added_as_the_main_trees_owner() {
    use crate::support::{assert_all_nobodys, give_to_nobody, is_root};
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Setup::new();
    let main = s.w.path("owned/main");
    give_to_nobody(&main);
    s.w.restore_with(&main, &s.url(), BRANCH, &s.ids[1], &[], &[])
        .assert_code(0);
    let run = s.agent(&main, &["add", "a"]);
    run.assert_code(10);
    assert!(run.error_message().contains("--dir"), "{}", run.stderr);
    assert!(!main.with_file_name("main-a").exists());
    let agents = s.w.path("agents");
    give_to_nobody(&agents);
    let dir = agents.join("a");
    let run = s.agent(&main, &["add", "a", "--dir", dir.to_str().unwrap()]);
    run.assert_code(0);
    assert_all_nobodys(&agents);
    assert_all_nobodys(&main);
    // git run as root checks the owner's tree only when told it is safe.
    let status =
        s.w.git(&dir, &["-c", "safe.directory=*", "status", "--porcelain"]);
    assert_eq!(status, "");
}

/// `watch` in an agent's tree checkpoints onto the agent's branch (its own lease), the main
/// session's branch untouched; SIGTERM ends it with nothing unpushed.
#[test]
fn watch_in_an_agents_tree_saves_to_the_agents_branch() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    let url = s.url();
    let mut watch = crate::support::watch::Watch::start(&s.w, &a, &["--every", "1s"], &url);
    std::fs::write(a.join("notes.md"), "working\n").unwrap();
    let j = watch.next(10).expect("no save within 10 s");
    assert_eq!(j["branch"], "sessions/main-a", "{j}");
    assert_eq!(j["pushed"], true, "{j}");
    let tip = j["tip"].as_str().unwrap().to_owned();
    assert_eq!(s.remote("sessions/main-a"), Some(tip.clone()));
    assert_eq!(s.remote(BRANCH), None);
    watch.signal("-TERM");
    let (code, stderr, _) = watch.wait(20);
    assert_eq!(code, Some(0), "{stderr}");
    let status = s.w.run(&a, &["status", "--json"], &[]);
    assert_eq!(status.json()["lease"], tip.as_str());
    let record = main.join(".git/worktrees/a/git-session.json");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(record).unwrap()).unwrap();
    assert_eq!(record["lease"], tip.as_str());
    assert_eq!(record["agent"], "a");
}

/// `agent remove --force` never follows a symlink out: one inside the agent's tree goes itself,
/// and an agent's folder replaced by a symlink (to a folder whose forged `.git` links back) loses
/// only the symlink; the folders pointed at keep every file.
#[test]
fn remove_follows_no_symlink_out_of_the_agents_tree() {
    let s = Setup::new();
    let main = s.main_tree();
    let outside = s.w.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("precious"), "keep\n").unwrap();
    let a = s.add_agent(&main, "a");
    std::os::unix::fs::symlink(&outside, a.join("escape")).unwrap();
    s.agent(&main, &["remove", "a", "--force"]).assert_code(0);
    assert!(!a.exists());
    assert_eq!(crate::support::names_in(&outside), ["precious"]);

    let b = s.add_agent(&main, "b");
    let target = s.w.path("target");
    std::fs::rename(&b, &target).unwrap();
    std::os::unix::fs::symlink(&target, &b).unwrap();
    s.agent(&main, &["remove", "b", "--force"]).assert_code(0);
    assert!(
        std::fs::symlink_metadata(&b).is_err(),
        "the symlink is left"
    );
    assert!(
        target.join("README.md").is_file(),
        "the folder pointed at was removed"
    );
}

/// On a file system that shares extents (XFS with reflink), `agent add` clones the main tree's
/// clean files (`FICLONE`): `cloned` counts every copied file, and the agent's tree takes almost no
/// space (its index and folders), where written files would take their size. On the tests' own
/// file system (ext4 or tmpfs) nothing is cloned.
#[test]
fn an_agents_files_are_cloned_where_the_file_system_shares_extents() {
    let s = Setup::new();
    let Some(xfs) = crate::support::reflink::Xfs::mount(&s.w.path("fs")) else {
        return;
    };
    // The same on the tests' own file system, before the session's branch moves.
    let plain = s.main_tree();
    let run = s.agent(&plain, &["add", "copy"]);
    run.assert_code(0);
    let json = run.json();
    assert!(json["copied"].as_u64().unwrap() >= 1, "{json}");
    assert_eq!(json["cloned"], 0, "{json}");

    let main = xfs.path().join("main");
    s.w.restore_with(&main, &s.url(), BRANCH, &s.ids[1], &[], &[])
        .assert_code(0);
    // A 16 MiB file committed in the main tree, so a written copy would show in the free space.
    let big: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(main.join("big.bin"), &big).unwrap();
    let pushed = s.save_in(&main, "a big file");
    pushed.assert_code(0);
    let before = xfs.free_bytes();
    let run = s.agent(&main, &["add", "cow"]);
    run.assert_code(0);
    let json = run.json();
    let copied = json["copied"].as_u64().unwrap();
    assert!(copied >= 2, "{json}");
    assert_eq!(json["cloned"].as_u64().unwrap(), copied, "{json}");
    let used = before.saturating_sub(xfs.free_bytes());
    assert!(used < 4 << 20, "the agent's tree took {used} bytes: {json}");
    let dir = PathBuf::from(json["dir"].as_str().unwrap());
    assert_eq!(std::fs::read(dir.join("big.bin")).unwrap(), big);
    assert_eq!(s.w.git(&dir, &["status", "--porcelain"]), "");

    drop(xfs);
}

/// Red team: `agent remove` decides what is unpushed only once it holds the agent's write lock. A
/// save of the agent's under way holds that lock (here the test holds it, as such a save does) and
/// commits meanwhile: the removal that waited for it must see the commit, refuse (7) and keep the
/// tree and the branch. Deciding before the lock removed both, the commit with them.
#[test]
fn remove_decides_what_is_unpushed_holding_the_agents_lock() {
    use std::io::BufRead as _;
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    let held = std::fs::File::open(main.join(".git/worktrees/a")).unwrap();
    held.lock().unwrap();
    let mut remove = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
        .args(["agent", "remove", "a", "--json"])
        .current_dir(&main)
        .env_clear()
        .envs(s.w.env())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(remove.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 || line.contains("waiting for it") {
            said.push_str(&line);
            break;
        }
        said.push_str(&line);
    }
    assert!(said.contains("waiting for it"), "{said}");
    // The save's commit, its push to come.
    let commit = s.commit(&a, "work.txt", "the agent's work\n");
    drop(held);
    let out = remove.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{said}{stdout}");
    assert!(a.join("work.txt").is_file(), "the agent's tree was removed");
    assert_eq!(
        s.w.git(&main, &["rev-parse", "refs/heads/sessions/main-a"]),
        commit
    );
}

/// Red team: a main-tree file rewritten in place (same length) after `agent add` found it clean
/// but before it copied it (held at `hold-agent-copy`) must not reach the agent's tree as a copy
/// its index calls clean: every file of the agent's holds the start commit's bytes and `git
/// status` is clean. Copying without looking again gave the agent the main tree's new bytes under
/// the old blob's index entry, which git's stat check never reads again.
#[test]
fn a_file_rewritten_while_agent_add_copies_it_is_not_called_clean() {
    let s = Setup::new();
    let main = s.main_tree();
    let barrier = s.w.tmp.path().join("copy-barrier");
    let add = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
        .args(["agent", "add", "a", "--json"])
        .current_dir(&main)
        .env_clear()
        .envs(s.w.env())
        .env("GIT_SESSION_FAILPOINT", "hold-agent-copy")
        .env("GIT_SESSION_BARRIER_DIR", &barrier)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_dir(&barrier).map_or(0, |d| d.count()) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "agent add never copied"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Every tracked file rewritten in place, the same length, other bytes.
    for file in s.w.git(&main, &["ls-files"]).lines() {
        let path = main.join(file);
        if std::fs::symlink_metadata(&path).unwrap().is_symlink() {
            continue;
        }
        let len = std::fs::read(&path).unwrap().len();
        std::fs::write(&path, vec![b'#'; len]).unwrap();
    }
    std::fs::write(barrier.join("test"), b"").unwrap();
    let out = add.wait_with_output().unwrap();
    let run = crate::support::Run::of(&out);
    run.assert_code(0);
    let dir = PathBuf::from(run.json()["dir"].as_str().unwrap());
    for file in s.w.git(&dir, &["ls-files"]).lines() {
        if std::fs::symlink_metadata(dir.join(file))
            .unwrap()
            .is_symlink()
        {
            continue;
        }
        let want =
            s.w.git_output(&dir, &["cat-file", "blob", &format!("HEAD:{file}")]);
        assert_eq!(
            std::fs::read(dir.join(file)).unwrap(),
            want.stdout,
            "{file} holds the main tree's new bytes"
        );
    }
    assert_eq!(s.w.git(&dir, &["status", "--porcelain"]), "");
}

/// Red team: the shared config is edited by one process at a time. Agent a's first save sets its
/// branch's fetch line in `<common>/config` (held at `hold-config-edit` once it has read it) while
/// `agent add b` writes b's fetch line and upstream there: both edits are kept. Read, edit and
/// rename without a lock, a's write put back the config it had read, and b lost its upstream
/// (plain `git push` in b's tree then had none) and its fetch line.
#[test]
fn agents_editing_the_shared_config_at_once_lose_no_edit() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    std::fs::write(a.join("by-a.txt"), "a\n").unwrap();
    let barrier = s.w.tmp.path().join("config-barrier");
    let url = s.url();
    let vars = [
        ("PUSH_URL", url.as_str()),
        ("READ_URL", url.as_str()),
        ("GIT_SESSION_FAILPOINT", "hold-config-edit"),
        ("GIT_SESSION_BARRIER_DIR", barrier.to_str().unwrap()),
    ];
    std::thread::scope(|sc| {
        let w = &s.w;
        let a = &a;
        let vars = &vars;
        let save = sc.spawn(move || w.run(a, &["save", "-m", "a's work", "--json"], vars));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::fs::read_dir(&barrier).map_or(0, |d| d.count()) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "a's save never edited the config"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // b's add, given a few seconds (it may wait for a's edit to end), then a goes on.
        let add = sc.spawn(|| s.agent(&main, &["add", "b"]));
        let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while !add.is_finished() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::write(barrier.join("test"), b"").unwrap();
        save.join().unwrap().assert_code(0);
        add.join().unwrap().assert_code(0);
    });
    let config = |key: &str| s.w.git_output(&main, &["config", "--get-all", key]);
    let merge = config("branch.sessions/main-b.merge");
    assert_eq!(
        String::from_utf8_lossy(&merge.stdout).trim(),
        "refs/heads/sessions/main-b",
        "b's upstream was lost"
    );
    let fetch = String::from_utf8_lossy(&config("remote.origin.fetch").stdout).into_owned();
    assert_eq!(fetch.lines().count(), 3, "a fetch line was lost: {fetch}");
    assert!(
        fetch.contains("+refs/heads/sessions/main-a:refs/remotes/origin/sessions/main-a"),
        "a's exact fetch line was lost: {fetch}"
    );
}

/// Red team: every way plain git can name another session's branch is refused before upload: a
/// forced refspec, a deletion, `--all` and `--mirror` (which carry it among others), and a push
/// by URL instead of `origin`. b's branch and the main session's stay as they were.
#[test]
fn other_spellings_of_a_push_to_another_sessions_branch_are_refused() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    let b = s.add_agent(&main, "b");
    s.save_in(&b, "b's first").assert_code(0);
    let b_tip = s.remote("sessions/main-b");
    s.commit(&a, "a.txt", "a\n");
    let url = s.w.git(&a, &["remote", "get-url", "origin"]);
    let cases: [&[&str]; 6] = [
        &["push", "origin", "+HEAD:refs/heads/sessions/main-b"],
        &["push", "origin", ":refs/heads/sessions/main-b"],
        &["push", "origin", "--delete", "sessions/main-b"],
        &["push", "--all", "origin"],
        &["push", "--mirror", "origin"],
        &["push", &url, "+HEAD:refs/heads/sessions/main-b"],
    ];
    for args in cases {
        let said = s.shell_git_refused(&a, args);
        assert!(
            said.contains("session branch") || said.contains("session's branch"),
            "{args:?}: {said}"
        );
        assert_eq!(
            s.remote("sessions/main-b"),
            b_tip,
            "{args:?} moved b's branch"
        );
        assert_eq!(
            s.remote(BRANCH),
            None,
            "{args:?} made the main session's branch"
        );
    }
}

/// An edit of the shared config killed while it holds `config.lock` (`kill -9`) never blocks the
/// next command: the rerun removes the lock the killed one made and goes on at once; a
/// `config.lock` some other git process made is still respected (waited for, then exit 7).
#[test]
fn a_config_lock_left_by_a_killed_save_is_taken_back_by_the_rerun() {
    let s = Setup::new();
    let main = s.main_tree();
    let a = s.add_agent(&main, "a");
    std::fs::write(a.join("by-a.txt"), "a\n").unwrap();
    let url = s.url();
    let common = main.join(".git");
    let lock = common.join("config.lock");
    let run = |fail: &str| {
        let mut vars = vec![
            ("PUSH_URL", url.as_str()),
            ("READ_URL", url.as_str()),
            ("GIT_SESSION_LOCK_WAIT_S", "20"),
        ];
        if !fail.is_empty() {
            vars.push(("GIT_SESSION_FAILPOINT", fail));
        }
        s.w.run(&a, &["save", "-m", "a's work", "--json"], &vars)
    };
    let killed = run("config-lock-taken");
    assert_ne!(killed.code, Some(0), "the failpoint was not reached");
    assert!(
        killed.stderr.contains("config-lock-taken"),
        "{}",
        killed.stderr
    );
    assert!(lock.exists(), "the killed save left no config.lock");
    let started = std::time::Instant::now();
    run("").assert_code(0);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "the rerun waited {:?} for the killed save's lock",
        started.elapsed()
    );
    assert!(!lock.exists(), "config.lock is still there");
    assert!(
        s.remote("sessions/main-a").is_some(),
        "a's work did not land"
    );
    // Another process's lock is respected: the next edit waits for it, then says so (exit 7).
    std::fs::write(&lock, "[core]\n").unwrap();
    let b = s.w.run(
        &main,
        &["agent", "add", "b", "--json"],
        &[("GIT_SESSION_LOCK_WAIT_S", "1")],
    );
    b.assert_code(7);
    assert!(lock.exists(), "another process's config.lock was removed");
}
