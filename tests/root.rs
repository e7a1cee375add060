//! Run as root in a folder another user owns (SPEC rule 9): git-session works as that user, so
//! the folder's owner, racing the run by swapping folders for symlinks, reaches nothing outside
//! that the owner could not reach anyway. These tests need root (CI runs as root); without it
//! each says it was skipped.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{GitServer, NOBODY, World, give_to_nobody, is_root};

/// A repository whose folder `a` holds 80 files, and `README.md`.
fn fixture(w: &World) -> String {
    let files: Vec<(String, String)> = (0..80)
        .map(|i| (format!("a/f{i:02}.txt"), format!("file {i}\n")))
        .chain([("README.md".to_owned(), "hello\n".to_owned())])
        .collect();
    let commit: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_str())))
        .collect();
    w.repo("repo.git", &[&commit]).pop().unwrap()
}

/// A folder outside the target, root's and not writable by others, holding files with the
/// names of the first ten files the tree has under `a/` (checked out before the swap): a run
/// led there through a symlink would create the others beside them, or chown or remove these.
fn outside(w: &World) -> PathBuf {
    let dir = w.path("outside");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..10 {
        std::fs::write(dir.join(format!("f{i:02}.txt")), "precious\n").unwrap();
    }
    dir
}

/// Name → (uid, gid, mode, content) of every entry of `dir`.
fn snapshot(dir: &Path) -> BTreeMap<String, (u32, u32, u32, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            let content = if m.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                (m.uid(), m.gid(), m.mode(), content),
            )
        })
        .collect()
}

/// Run `script` with `sh` as [`NOBODY`] in `dir`.
fn as_nobody(dir: &Path, script: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args([
        &format!("--reuid={}", NOBODY.0),
        &format!("--regid={}", NOBODY.1),
        "--clear-groups",
        "sh",
        "-c",
        script,
    ])
    .current_dir(dir);
    cmd
}

fn restore_command(w: &World, dir: &Path, url: &str, tip: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"));
    cmd.args(["restore", "--json"])
        .current_dir(dir)
        .env_clear()
        .envs(w.env())
        .env("GIT_SESSION_RETRY_BASE_MS", "5")
        .env("READ_URL", url)
        .env("SESSION_BRANCH", "s")
        .env("TIP_SHA", tip);
    cmd
}

/// The world, its served repository and the tip, when running as root (else `None`, said).
fn set_up() -> Option<(World, GitServer, String)> {
    if !is_root() {
        eprintln!("skipped: needs root");
        return None;
    }
    let w = World::new();
    let tip = fixture(&w);
    let srv = GitServer::start(&w.srv(), None);
    Some((w, srv, tip))
}

/// The session's inputs, reading from and pushing to `url`.
fn session_vars<'a>(url: &'a str, tip: &'a str) -> [(&'static str, &'a str); 4] {
    [
        ("READ_URL", url),
        ("PUSH_URL", url),
        ("SESSION_BRANCH", "s"),
        ("TIP_SHA", tip),
    ]
}

/// `owned`, given to [`NOBODY`], restored by root.
fn restored_for_nobody(w: &World, vars: &[(&str, &str)]) -> PathBuf {
    let dir = w.path("owned");
    give_to_nobody(&dir);
    w.run(&dir, &["restore"], vars).assert_code(0);
    crate::support::assert_all_nobodys(&dir);
    dir
}

/// `cmd` started with the barrier `failpoint` armed in `barrier`, its output piped.
fn held(mut cmd: std::process::Command, failpoint: &str, barrier: &Path) -> std::process::Child {
    cmd.env("GIT_SESSION_FAILPOINT", failpoint)
        .env("GIT_SESSION_BARRIER_DIR", barrier)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Once `child` holds at its barrier, swap the folder `folder` for a symlink to `outside`, let
/// the run go on and return its exit code and stderr.
fn swap_while_held(
    child: std::process::Child,
    barrier: &Path,
    folder: &Path,
    outside: &Path,
) -> (Option<i32>, String) {
    wait_for_entries(barrier, 1);
    assert!(
        folder.is_dir(),
        "{} is not where the run writes",
        folder.display()
    );
    std::fs::rename(folder, folder.with_extension("moved")).unwrap();
    std::os::unix::fs::symlink(outside, folder).unwrap();
    std::fs::write(barrier.join("test"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

fn wait_for_entries(dir: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0) < n {
        assert!(
            Instant::now() < deadline,
            "the restore never reached the barrier"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_folder_swapped_for_a_symlink_mid_checkout_leads_nowhere_outside() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    let outside = outside(&w);
    let before = snapshot(&outside);
    let dir = w.path("owned");
    give_to_nobody(&dir);
    let barrier = w.path("barrier");
    std::fs::create_dir_all(&barrier).unwrap();
    std::fs::set_permissions(
        &barrier,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    // The restore holds once half of the files are read; meanwhile the folder's owner swaps `a`
    // for a symlink to the outside folder; then the restore goes on.
    let child = held(
        restore_command(&w, &dir, &srv.url("repo.git", None), &tip),
        "hold-mid-checkout",
        &barrier,
    );
    wait_for_entries(&barrier, 1);
    let swap = format!("mv a a.moved && ln -s '{}' a", outside.display());
    assert!(as_nobody(&dir, &swap).status().unwrap().success());
    std::fs::write(barrier.join("test"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("restore exit {:?}:\n{stderr}", out.status.code());
    assert_eq!(
        snapshot(&outside),
        before,
        "the folder outside changed (restore exit {:?}):\n{stderr}",
        out.status.code()
    );
    // The owner's own folder holds only the owner's files.
    crate::support::assert_all_nobodys(&dir);
}

#[test]
fn a_user_swapping_folders_for_symlinks_in_a_loop_reaches_nothing_outside() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    let outside = outside(&w);
    let before = snapshot(&outside);
    let url = srv.url("repo.git", None);
    let mut codes = Vec::new();
    for round in 0..12 {
        let dir = w.path(&format!("owned{round}"));
        give_to_nobody(&dir);
        // Swap `a` for a symlink and back, as fast as the shell goes, until told to stop.
        let racer = format!(
            "while [ ! -e '{stop}' ]; do \
               mv a a.x 2>/dev/null && ln -s '{out}' a 2>/dev/null; \
               rm -f a 2>/dev/null; mv a.x a 2>/dev/null; \
             done",
            stop = dir.with_extension("stop").display(),
            out = outside.display()
        );
        let mut racer = as_nobody(&dir, &racer).spawn().unwrap();
        let out = restore_command(&w, &dir, &url, &tip).output().unwrap();
        std::fs::write(dir.with_extension("stop"), b"").unwrap();
        racer.wait().unwrap();
        codes.push(out.status.code());
        assert_eq!(
            snapshot(&outside),
            before,
            "round {round}: the folder outside changed (restore exit {:?}):\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        crate::support::assert_all_nobodys(&dir);
    }
    eprintln!("restore exit codes under the race: {codes:?}");
}

#[test]
fn root_refuses_a_target_below_a_folder_another_user_can_change() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    let url = srv.url("repo.git", None);
    use std::os::unix::fs::PermissionsExt as _;
    let restore_in = |dir: &Path| {
        let vars = [
            ("READ_URL", url.as_str()),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &tip),
        ];
        w.run(dir, &["restore", "--json"], &vars)
    };
    // World-writable without the sticky bit: anyone could move the target away.
    let open = w.path("open");
    std::fs::create_dir_all(open.join("work")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = restore_in(&open.join("work"));
    run.assert_code(2);
    let message = run.error_message();
    assert!(
        message.contains(&format!("{}:", open.display())) && message.contains("everyone can write"),
        "{message}"
    );
    assert!(!open.join("work/.git").exists() && !open.join("work/README.md").exists());
    // With the sticky bit (as /tmp has) others cannot move what they do not own: allowed.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    restore_in(&open.join("work")).assert_code(0);
    // A folder above that belongs to a third user (not root, not the target's owner).
    let theirs = w.path("theirs");
    std::fs::create_dir_all(theirs.join("work")).unwrap();
    std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
    give_to_nobody(&theirs.join("work"));
    let run = restore_in(&theirs.join("work"));
    run.assert_code(2);
    let message = run.error_message();
    assert!(
        message.contains(&theirs.display().to_string()) && message.contains("uid 4242"),
        "{message}"
    );
}

#[test]
fn every_command_run_as_root_works_as_the_trees_owner() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    let url = srv.url("repo.git", None);
    let vars = session_vars(&url, &tip);
    let dir = restored_for_nobody(&w, &vars);
    crate::support::assert_all_nobodys(&dir);
    std::fs::write(dir.join("new.txt"), "new\n").unwrap();
    std::os::unix::fs::chown(dir.join("new.txt"), Some(NOBODY.0), Some(NOBODY.1)).unwrap();
    // A process's own identity shows in what it creates: a save that stayed root would leave
    // root's objects, index and ledger in `.git`.
    let save = w.run(&dir, &["save", "-m", "as the owner", "--json"], &vars);
    save.assert_code(0);
    crate::support::assert_all_nobodys(&dir);
    w.run(&dir, &["status", "--remote", "--json"], &vars)
        .assert_code(0);
    crate::support::assert_all_nobodys(&dir);
    let bare = w.srv().join("repo.git");
    assert_eq!(
        w.git(&bare, &["rev-parse", "refs/heads/s"]),
        save.json()["tip"].as_str().unwrap()
    );
}

#[test]
fn root_never_follows_the_owners_symlink_into_a_folder_of_roots() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    use std::os::unix::fs::PermissionsExt as _;
    let url = srv.url("repo.git", None);
    // Root's own folders, reachable only by root, one holding a file.
    let rootonly = w.path("rootonly");
    std::fs::create_dir_all(rootonly.join("conf")).unwrap();
    std::fs::create_dir_all(rootonly.join("empty")).unwrap();
    std::fs::write(rootonly.join("conf/README.md"), "root's\n").unwrap();
    std::fs::set_permissions(&rootonly, std::fs::Permissions::from_mode(0o700)).unwrap();
    let before = snapshot(&rootonly.join("conf"));
    let owned = w.path("owned");
    give_to_nobody(&owned);
    // The owner points a name in their folder at root's, directly or higher up.
    let plant = format!(
        "ln -s '{}/conf' w && ln -s '{}' lnk",
        rootonly.display(),
        rootonly.display()
    );
    assert!(as_nobody(&owned, &plant).status().unwrap().success());
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "s"),
        ("TIP_SHA", &tip),
    ];
    for (given, args) in [
        ("w", vec!["restore", "--force", "--json"]),
        ("lnk/empty", vec!["restore", "--json"]),
        ("lnk/empty", vec!["bake", "--json"]),
    ] {
        let dir = owned.join(given);
        let mut all = vec!["-C", dir.to_str().unwrap()];
        all.extend(args);
        let run = w.run(&w.path(""), &all, &vars);
        run.assert_code(2);
        let message = run.error_message();
        assert!(message.contains("symlink"), "{given}: {message}");
    }
    assert_eq!(snapshot(&rootonly.join("conf")), before);
    assert_eq!(
        std::fs::read_dir(rootonly.join("empty")).unwrap().count(),
        0
    );
}

#[test]
fn root_with_roots_home_reads_what_the_owner_can() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    use std::os::unix::fs::PermissionsExt as _;
    let url = srv.url("repo.git", None);
    let dir = w.path("owned");
    give_to_nobody(&dir);
    // A boot's usual HOME: root's, which the owner cannot read (with git's ignore file in it).
    let home = w.path("roothome");
    std::fs::create_dir_all(home.join(".config/git")).unwrap();
    std::fs::write(home.join(".config/git/ignore"), "*.tmp\n").unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let home_str = home.to_str().unwrap();
    let vars = [
        ("READ_URL", url.as_str()),
        ("PUSH_URL", url.as_str()),
        ("SESSION_BRANCH", "s"),
        ("TIP_SHA", tip.as_str()),
        ("HOME", home_str),
        ("GIT_CONFIG_GLOBAL", ""),
    ];
    w.run(&dir, &["restore", "--json"], &vars).assert_code(0);
    w.run(&dir, &["status", "--json"], &vars).assert_code(0);
    std::fs::write(dir.join("new.txt"), "new\n").unwrap();
    std::os::unix::fs::chown(dir.join("new.txt"), Some(NOBODY.0), Some(NOBODY.1)).unwrap();
    w.run(&dir, &["save", "-m", "x", "--json"], &vars)
        .assert_code(0);
    crate::support::assert_all_nobodys(&dir);
}

#[test]
fn a_fifo_in_place_of_saves_lock_record_is_refused_not_waited_on() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    let url = srv.url("repo.git", None);
    let vars = session_vars(&url, &tip);
    let dir = restored_for_nobody(&w, &vars);
    assert!(
        as_nobody(
            &dir,
            "rm -f .git/git-session-index-lock && mkfifo .git/git-session-index-lock && echo x >> README.md"
        )
        .status()
        .unwrap()
        .success()
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
        .args(["save", "-m", "x", "--json"])
        .current_dir(&dir)
        .env_clear()
        .envs(w.env())
        .envs(vars)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("save waited on the FIFO for 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

/// A restore of the fixture into a fresh `target`, held mid-checkout while its `a` is swapped for
/// a symlink to `to`, then let go: the target, the exit code and standard error.
fn checkout_with_a_swapped_in_symlink(w: &World, to: &Path) -> (PathBuf, Option<i32>, String) {
    let tip = fixture(w);
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("target");
    std::fs::create_dir_all(&dir).unwrap();
    let barrier = w.path("barrier");
    std::fs::create_dir_all(&barrier).unwrap();
    let child = held(
        restore_command(w, &dir, &srv.url("repo.git", None), &tip),
        "hold-mid-checkout",
        &barrier,
    );
    let (code, stderr) = swap_while_held(child, &barrier, &dir.join("a"), to);
    (dir, code, stderr)
}

/// The swapped-in symlink failed the next write: exit 10 naming it.
fn assert_the_write_failed(code: Option<i32>, stderr: &str) {
    assert_eq!(code, Some(10), "{stderr}");
    assert!(
        stderr.contains("a/f"),
        "the message names the file: {stderr}"
    );
}

/// Without root too (an agent in the sandbox racing its own restore, or a tool it runs): every
/// write goes through the tree's one handle, so a folder swapped for a symlink to a folder
/// outside fails the write there instead of leading it outside.
#[test]
fn a_folder_swapped_for_a_symlink_mid_checkout_fails_the_write_not_outside() {
    let w = World::new();
    let outside = outside(&w);
    let before = snapshot(&outside);
    let (_, code, stderr) = checkout_with_a_swapped_in_symlink(&w, &outside);
    assert_eq!(
        snapshot(&outside),
        before,
        "restore exit {code:?}:\n{stderr}"
    );
    assert_the_write_failed(code, &stderr);
}

/// A symlink the folder's owner swaps in mid-run is not followed even when it stays inside the
/// target: `a -> .git-session-restore` would put the commit's files into the git dir being
/// built (its hooks among the places reachable so).
#[test]
fn a_folder_swapped_for_a_symlink_inside_the_target_mid_checkout_is_not_followed() {
    let w = World::new();
    let inside = Path::new(".git-session-restore");
    let (dir, code, stderr) = checkout_with_a_swapped_in_symlink(&w, inside);
    let walk = std::process::Command::new("find")
        .args([dir.join(inside), dir.join(".git")])
        .args(["-name", "f*.txt"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&walk.stdout),
        "",
        "restore exit {code:?}:\n{stderr}"
    );
    assert_the_write_failed(code, &stderr);
}

/// The same for an archive: a folder of the extraction swapped for a symlink to a folder
/// outside, while the extraction holds after ten files, fails the next write there.
#[test]
fn a_folder_swapped_for_a_symlink_mid_extraction_fails_the_write_not_outside() {
    let w = World::new();
    let tip = fixture(&w);
    let archive = w.path("repo.tar.gz");
    let git_dir = format!("--git-dir={}", w.srv().join("repo.git").display());
    let out = format!("--output={}", archive.display());
    w.git(
        &w.path(""),
        &[&git_dir, "archive", "--format=tar.gz", &out, &tip],
    );
    let outside = outside(&w);
    let before = snapshot(&outside);
    let dir = w.path("target");
    std::fs::create_dir_all(&dir).unwrap();
    let barrier = w.path("barrier");
    std::fs::create_dir_all(&barrier).unwrap();
    let mut restore = restore_command(&w, &dir, "", &tip);
    restore
        .env_remove("READ_URL")
        .args(["--archive", archive.to_str().unwrap()]);
    let child = held(restore, "hold-mid-extract", &barrier);
    let a = dir.join(".git-session-restore/tree/a");
    let (code, stderr) = swap_while_held(child, &barrier, &a, &outside);
    assert_eq!(
        snapshot(&outside),
        before,
        "restore exit {code:?}:\n{stderr}"
    );
    assert_ne!(code, Some(0), "{stderr}");
}

/// The owner of a name in a sticky folder (as `/tmp` is) swaps it, atomically and in a loop,
/// between their own folder and a symlink to a folder of root's, while root restores there.
/// Root must never work in root's folder as root: the path is resolved once, and a path that
/// led to different folders while it was checked is refused (exit 2). Before, `-C` was
/// resolved and checked by separate lookups: root restored into root's folder as root.
#[test]
fn root_never_works_as_root_through_a_name_the_owner_swaps_atomically() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    use std::os::unix::fs::PermissionsExt as _;
    let url = srv.url("repo.git", None);
    let rootonly = w.path("rootonly");
    std::fs::create_dir_all(&rootonly).unwrap();
    std::fs::set_permissions(&rootonly, std::fs::Permissions::from_mode(0o755)).unwrap();
    let public = w.path("public");
    give_to_nobody(&public);
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::os::unix::fs::chown(&public, Some(0), Some(0)).unwrap();
    // nobody's folder `gsw` and nobody's symlink `lnk` to root's folder, exchanged in a loop.
    let flipper = format!(
        "import ctypes, os, time\n\
         os.chdir('{public}')\n\
         os.mkdir('gsw'); os.symlink('{root}', 'lnk')\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         while not os.path.exists('{stop}'):\n\
         \x20   libc.renameat2(-100, b'gsw', -100, b'lnk', 2)\n",
        public = public.display(),
        root = rootonly.display(),
        stop = public.with_extension("stop").display()
    );
    let mut racer = as_nobody(&public, "exec python3 -c \"$0\"")
        .arg(&flipper)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The racer stops when the test ends, failed or not.
    struct Stop(PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.0, b"");
        }
    }
    let stop = Stop(public.with_extension("stop"));
    let given = public.join("gsw");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !given.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "s"),
        ("TIP_SHA", &tip),
    ];
    let mut codes = BTreeMap::new();
    for _ in 0..40 {
        let run = w.run(
            &w.path(""),
            &["-C", given.to_str().unwrap(), "restore", "--json"],
            &vars,
        );
        *codes.entry(run.code).or_insert(0) += 1;
        let inside: Vec<_> = std::fs::read_dir(&rootonly).unwrap().flatten().collect();
        assert!(
            inside.is_empty(),
            "root wrote into root's folder through the owner's symlink (exit {:?}): {:?}\n{}",
            run.code,
            inside
                .iter()
                .map(|e| (
                    e.file_name(),
                    std::os::unix::fs::MetadataExt::uid(&e.metadata().unwrap())
                ))
                .collect::<Vec<_>>(),
            run.stderr
        );
        let _ = std::fs::remove_dir_all(given.join(".git"));
    }
    drop(stop);
    racer.wait().unwrap();
    eprintln!("exit codes under the atomic swap: {codes:?}");
}

/// Root creating a missing target in a folder others can write to (a sticky `/tmp`) is
/// refused: another user could create the name first, as a folder or a symlink of theirs.
#[test]
fn root_refuses_to_create_a_target_in_a_folder_others_can_write_to() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    use std::os::unix::fs::PermissionsExt as _;
    let public = w.path("public");
    give_to_nobody(&public);
    std::os::unix::fs::chown(&public, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let url = srv.url("repo.git", None);
    let target = public.join("new");
    let run = w.run(
        &w.path(""),
        &["-C", target.to_str().unwrap(), "restore", "--json"],
        &[
            ("READ_URL", url.as_str()),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &tip),
        ],
    );
    run.assert_code(2);
    let message = run.error_message();
    assert!(message.contains("other users can write to"), "{message}");
    assert!(!target.exists());
}

/// The folder's owner in shapes other than a passwd entry with a home, run as root with root's
/// unreadable home as `HOME` (a boot's usual): a uid with no passwd entry at all (and `nobody`,
/// whose home `/nonexistent` is missing). Restore, status and save work as the owner, and what
/// they make is the owner's.
#[test]
fn owners_without_an_account_or_a_home_work_with_roots_home() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    use std::os::unix::fs::PermissionsExt as _;
    let url = srv.url("repo.git", None);
    let home = w.path("roothome");
    std::fs::create_dir_all(home.join(".config/git")).unwrap();
    std::fs::write(home.join(".config/git/ignore"), "*.tmp\n").unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A uid no account file names (checked, not assumed).
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let stranger = (4_000_000..)
        .find(|u| {
            !passwd
                .lines()
                .any(|l| l.split(':').nth(2) == Some(&u.to_string()))
        })
        .unwrap();
    for (name, owner) in [("no-account", (stranger, stranger)), ("no-home", NOBODY)] {
        let dir = w.path(name);
        give_to_nobody(&dir);
        std::os::unix::fs::chown(&dir, Some(owner.0), Some(owner.1)).unwrap();
        let vars = [
            ("READ_URL", url.as_str()),
            ("PUSH_URL", url.as_str()),
            ("SESSION_BRANCH", name),
            ("TIP_SHA", tip.as_str()),
            ("HOME", home.to_str().unwrap()),
            ("GIT_CONFIG_GLOBAL", ""),
        ];
        w.run(&dir, &["restore", "--json"], &vars).assert_code(0);
        w.run(&dir, &["status", "--json"], &vars).assert_code(0);
        std::fs::write(dir.join("new.txt"), "new\n").unwrap();
        std::os::unix::fs::chown(dir.join("new.txt"), Some(owner.0), Some(owner.1)).unwrap();
        w.run(&dir, &["save", "-m", "x", "--json"], &vars)
            .assert_code(0);
        for entry in crate::support::all_files(&dir) {
            let meta = std::fs::symlink_metadata(&entry).unwrap();
            assert_eq!(
                (meta.uid(), meta.gid()),
                owner,
                "{name}: {}",
                entry.display()
            );
        }
    }
}

/// A target whose owner cannot pass a folder above it (root's 0700 folder): exit 10 naming that
/// folder, and the fix printed works. Before: "creating <target>: permission denied" although the
/// target existed.
#[test]
fn a_folder_above_the_target_closed_to_its_owner_is_named() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    let url = srv.url("repo.git", None);
    let closed = w.path("closed");
    let dir = closed.join("work");
    give_to_nobody(&dir);
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let run = w.run(&dir, &["restore", "--json"], &session_vars(&url, &tip));
    run.assert_code(10);
    let msg = run.error_message();
    assert!(
        msg.contains(&format!("cannot pass {}", closed.display()))
            && msg.contains(&format!("chmod o+x {}", closed.display())),
        "{msg}"
    );
    assert!(!msg.contains("creating"), "{msg}");
    assert!(
        crate::support::names_in(&dir).is_empty(),
        "wrote into {}",
        dir.display()
    );
    // The fix as printed.
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("chmod o+x {}", closed.display())])
        .output()
        .unwrap();
    assert!(out.status.success());
    w.run(&dir, &["restore"], &session_vars(&url, &tip))
        .assert_code(0);
    crate::support::assert_all_nobodys(&dir);
}

/// As root, `-C ../new` from a folder beside it (the target not there yet) restores into `new`:
/// it was refused as "a symlink on it is being swapped" (the path's text, `here/..`, compared
/// with its canonical form).
#[test]
fn a_relative_target_through_dot_dot_that_does_not_exist_yet_is_created() {
    let Some((w, srv, tip)) = set_up() else {
        return;
    };
    let url = srv.url("repo.git", None);
    let here = w.path("here");
    std::fs::create_dir_all(&here).unwrap();
    let run = w.run(
        &here,
        &["restore", "-C", "../new"],
        &session_vars(&url, &tip),
    );
    run.assert_code(0);
    assert_eq!(w.git(&w.path("new"), &["rev-parse", "HEAD"]), tip);
}
