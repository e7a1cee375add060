//! Nothing of a repository's own config runs (SPEC rule 8, a baked template's included), and
//! what was written to disk earlier (a cache, a baked pack, the ledger, the records) is checked
//! before it is used.

use std::path::{Path, PathBuf};

use crate::bake::Baked;

/// Every key of repository config that could run a program or redirect the work, each pointing
/// at a script that leaves a marker file named after the key.
const MARKERS: [&str; 10] = [
    "filter-clean",
    "filter-smudge",
    "filter-process",
    "fsmonitor",
    "ssh-command",
    "include-smudge",
    "includeif-smudge",
    "hook-post-checkout",
    "hookspath-post-checkout",
    "worktree-config-hook",
];

/// A folder of markers and the script that leaves them (`$1` names the marker; it passes its
/// input through, as a filter would, but with a line added).
struct Trap {
    markers: PathBuf,
    script: PathBuf,
}

impl Trap {
    fn new(root: &Path) -> Self {
        let markers = root.join("markers");
        std::fs::create_dir_all(&markers).unwrap();
        let script = root.join("trap.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n: > '{}'/\"$1\"\ncat\necho TRAPPED\n",
                markers.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Trap { markers, script }
    }

    fn hook(&self, dir: &Path, name: &str, marker: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n'{}' {marker} </dev/null\n",
                self.script.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Arm the git dir `git_dir` of the tree `tree`: every key of [`MARKERS`] in its config,
    /// hooks in its hooks folder and in a `core.hooksPath` folder (also set in
    /// `config.worktree`), and `core.worktree` naming `elsewhere`.
    fn arm(&self, git_dir: &Path, elsewhere: &Path) {
        let root = self.markers.parent().unwrap();
        let s = self.script.display();
        let include = root.join("included.config");
        std::fs::write(
            &include,
            format!("[filter \"included\"]\n\tsmudge = '{s}' include-smudge\n\tclean = '{s}' include-smudge\n"),
        )
        .unwrap();
        let include_if = root.join("included-if.config");
        std::fs::write(
            &include_if,
            format!("[filter \"included\"]\n\tsmudge = '{s}' includeif-smudge\n\tclean = '{s}' includeif-smudge\n"),
        )
        .unwrap();
        let hooks_path = root.join("their-hooks");
        for name in [
            "post-checkout",
            "pre-commit",
            "post-commit",
            "reference-transaction",
        ] {
            let marker = if name == "post-checkout" {
                "hookspath-post-checkout".to_owned()
            } else {
                format!("hookspath-{name}")
            };
            self.hook(&hooks_path, name, &marker);
            self.hook(&git_dir.join("hooks"), name, &format!("hook-{name}"));
        }
        let worktree_hooks = root.join("worktree-hooks");
        self.hook(&worktree_hooks, "post-checkout", "worktree-config-hook");
        std::fs::create_dir_all(elsewhere).unwrap();
        std::fs::write(elsewhere.join("foreign.txt"), "not this tree's\n").unwrap();
        let mut config = std::fs::read_to_string(git_dir.join("config")).unwrap();
        config.push_str(&format!(
            "[filter \"evil\"]\n\tclean = '{s}' filter-clean\n\tsmudge = '{s}' filter-smudge\n\
             \tprocess = '{s}' filter-process\n\trequired = true\n\
             [core]\n\tfsmonitor = '{s}'\n\thooksPath = {hp}\n\tworktree = {wt}\n\
             \tsshCommand = '{s}' ssh-command\n\
             [include]\n\tpath = {inc}\n\
             [includeIf \"gitdir:/\"]\n\tpath = {incif}\n\
             [extensions]\n\tworktreeConfig = true\n",
            hp = hooks_path.display(),
            wt = elsewhere.display(),
            inc = include.display(),
            incif = include_if.display(),
        ));
        // core.fsmonitor names the script alone: git calls it with a version as `$1`.
        std::fs::write(git_dir.join("config"), config).unwrap();
        std::fs::write(
            git_dir.join("config.worktree"),
            format!("[core]\n\thooksPath = {}\n", worktree_hooks.display()),
        )
        .unwrap();
    }

    /// Each key on its own: none of the programs ran.
    #[track_caller]
    fn assert_nothing_ran(&self, when: &str) {
        for marker in MARKERS {
            assert!(
                !self.markers.join(marker).exists(),
                "{when}: the program of '{marker}' ran"
            );
        }
        let left: Vec<_> = std::fs::read_dir(&self.markers)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{when}: programs ran: {left:?}");
    }
}

/// The repository of these tests: a `.gitattributes` that sends every file through the filters
/// the armed config defines.
fn filtered() -> Baked {
    Baked::of(&[
        &[("seed.txt", Some("seed\n"))],
        &[
            (
                ".gitattributes",
                Some("*.txt filter=evil\n*.md filter=included\n"),
            ),
            ("keep.txt", Some("keep\n")),
            ("edit.txt", Some("one\n")),
            ("doc.md", Some("doc\n")),
        ],
        &[("edit.txt", Some("two\n")), ("doc.md", Some("doc two\n"))],
        &[("new.txt", Some("new\n"))],
    ])
}

/// A baked template whose git dir was edited after the bake (a filter with `clean`, `smudge`
/// and `process` commands used by the tree's `.gitattributes`, `core.fsmonitor`,
/// `core.hooksPath`, `core.worktree`, `core.sshCommand`, `[include]`, `[includeIf]`, hooks, a
/// `config.worktree`): the boot runs none of them, writes the tip's files into the tree itself
/// (not into `core.worktree`'s folder), and leaves no hook but git-session's own check.
#[test]
fn a_templates_config_runs_nothing_at_boot() {
    let b = filtered();
    let w = &b.w;
    let dir = w.path("t");
    b.bake(&dir).assert_code(0);
    let trap = Trap::new(&w.path("trap"));
    let elsewhere = w.path("elsewhere");
    trap.arm(&dir.join(".git"), &elsewhere);

    let run = b.boot(&dir, &[], &[]);
    trap.assert_nothing_ran("the boot");
    run.assert_code(0);
    for (path, text) in [
        ("keep.txt", "keep\n"),
        ("edit.txt", "two\n"),
        ("doc.md", "doc two\n"),
        ("new.txt", "new\n"),
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.join(path)).unwrap(),
            text,
            "{path} as the tip has it"
        );
    }
    let mut hooks: Vec<_> = std::fs::read_dir(dir.join(".git/hooks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    hooks.sort();
    assert_eq!(hooks, ["pre-push"], "only git-session's own check is left");
    let check = std::fs::read_to_string(dir.join(".git/hooks/pre-push")).unwrap();
    assert!(check.contains("git-session pre-push check"), "{check}");
    assert!(!dir.join(".git/config.worktree").exists());
    assert!(
        run.json()["warnings"]
            .to_string()
            .contains("hooks/post-checkout"),
        "{}",
        run.json()["warnings"]
    );
    let mut foreign: Vec<_> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    foreign.sort();
    assert_eq!(
        foreign,
        ["foreign.txt"],
        "nothing written into core.worktree"
    );
    // Judged by git only now: the config is the boot's own (git would run what it names).
    let config = std::fs::read_to_string(dir.join(".git/config")).unwrap();
    for key in [
        "filter",
        "fsmonitor",
        "hooksPath",
        "worktree",
        "sshCommand",
        "include",
    ] {
        assert!(!config.contains(key), "{key} left in the config: {config}");
    }
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), b.tip());
    w.git(&dir, &["diff", "--quiet", b.tip()]);
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
    trap.assert_nothing_ran("git after the boot");
}

/// A restored tree whose config names the same programs: `save`, `push` and `status` run none
/// of them, and `save` commits the tree's own files (not those of `core.worktree`'s folder).
#[test]
fn a_sessions_config_runs_nothing_in_save_push_or_status() {
    let b = filtered();
    let w = &b.w;
    let dir = w.path("s");
    b.boot(&dir, &[], &[]).assert_code(0);
    let trap = Trap::new(&w.path("trap"));
    let elsewhere = w.path("elsewhere");
    trap.arm(&dir.join(".git"), &elsewhere);
    std::fs::write(dir.join("keep.txt"), "edited\n").unwrap();
    std::fs::write(dir.join("notes.md"), "notes\n").unwrap();
    let url = b.url();
    let push = [("PUSH_URL", url.as_str())];

    let status = w.run(&dir, &["status", "--json"], &[]);
    trap.assert_nothing_ran("status");
    status.assert_code(0);
    let changed = status.json().to_string();
    assert!(changed.contains("keep.txt"), "{changed}");
    assert!(!changed.contains("foreign.txt"), "{changed}");

    let save = w.run(&dir, &["save", "-m", "edited", "--json"], &push);
    trap.assert_nothing_ran("save");
    save.assert_code(0);
    let bare = w.srv().join("repo.git");
    let remote = w.git(&bare, &["rev-parse", "sessions/baked"]);
    assert_eq!(w.git(&bare, &["rev-parse", &format!("{remote}^")]), b.tip());
    assert_eq!(
        w.git(&bare, &["show", &format!("{remote}:keep.txt")]),
        "edited"
    );
    assert_eq!(
        w.git(&bare, &["show", &format!("{remote}:notes.md")]),
        "notes"
    );
    let files = w.git(&bare, &["ls-tree", "-r", "--name-only", &remote]);
    assert_eq!(
        files.lines().collect::<Vec<_>>(),
        [
            ".gitattributes",
            "doc.md",
            "edit.txt",
            "keep.txt",
            "new.txt",
            "notes.md",
            "seed.txt"
        ],
        "the tree's own files, nothing of core.worktree's folder"
    );

    std::fs::write(dir.join("new.txt"), "newer\n").unwrap();
    w.run(&dir, &["save", "--no-push", "-m", "second", "--json"], &[])
        .assert_code(0);
    let pushed = w.run(&dir, &["push", "--json"], &push);
    trap.assert_nothing_ran("push");
    pushed.assert_code(0);
    let remote = w.git(&bare, &["rev-parse", "sessions/baked"]);
    assert_eq!(
        w.git(&bare, &["show", &format!("{remote}:new.txt")]),
        "newer"
    );
    w.run(&dir, &["status", "--remote", "--json"], &push)
        .assert_code(0);
    trap.assert_nothing_ran("status --remote");
}

/// The one pack of a baked tree's (or cache's) git dir, made writable.
fn the_pack(dir: &Path) -> PathBuf {
    let pack = std::fs::read_dir(dir.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pack"))
        .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    for p in [pack.clone(), pack.with_extension("idx")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    pack
}

/// Replace the trailing SHA-1 of the file at `path` (a pack index, a git index) by the checksum
/// of what precedes it, as a careful forger would.
fn recompute_trailer(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let body = bytes.len() - 20;
    let mut child = std::process::Command::new("sha1sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&bytes[..body])
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    for i in 0..20 {
        bytes[body + i] = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// A baked pack cut short, or with one byte changed: the boot checks it, fetches the whole
/// commit instead with a warning naming why (never a failed boot), and every file is the tip's.
/// Also when every file is racily clean (written in the index's own clock tick, as a fast bake
/// does): their bytes are then judged without the base's blobs, which the damage took.
#[test]
fn a_damaged_baked_pack_falls_back_to_a_full_fetch() {
    for damage in [
        "cut short",
        "a byte changed",
        "a byte changed, every entry racy",
    ] {
        let b = Baked::new();
        let dir = b.baked_tree("t");
        let pack = the_pack(&dir);
        let mut bytes = std::fs::read(&pack).unwrap();
        let mid = bytes.len() / 2;
        if damage == "cut short" {
            bytes.truncate(mid);
        } else {
            bytes[mid] ^= 0x40;
        }
        std::fs::write(&pack, bytes).unwrap();
        if damage.ends_with("racy") {
            let index = std::fs::File::options()
                .write(true)
                .open(dir.join(".git/index"))
                .unwrap();
            let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
            index.set_modified(long_ago).unwrap();
        }
        let run = b.boot(&dir, &[], &[]);
        run.assert_code(0);
        let warnings = run.json()["warnings"].to_string();
        assert!(warnings.contains("damaged"), "{damage}: {warnings}");
        b.assert_booted(&dir);
    }
}

/// The baked tree's own index changed after the bake (an entry naming the tip's blob for a file
/// that still holds the base's content, its stat data and checksum kept right): the boot does
/// not trust it, and the file is the tip's.
#[test]
fn a_changed_template_index_is_not_trusted() {
    let b = Baked::new();
    let w = &b.w;
    let dir = b.baked_tree("t");
    let bare = w.srv().join("repo.git");
    let tip_blob = w.git(&bare, &["rev-parse", &format!("{}:edit.txt", b.tip())]);
    let index = dir.join(".git/index");
    let mut bytes = std::fs::read(&index).unwrap();
    let name = b"edit.txt\0";
    let at = bytes
        .windows(name.len())
        .enumerate()
        .position(|(i, win)| win == name && i >= 62 && bytes[i - 1] == 8)
        .expect("the entry of edit.txt");
    let id = at - 62 + 40;
    bytes[id..id + 20].copy_from_slice(&unhex(&tip_blob));
    std::fs::write(&index, bytes).unwrap();
    recompute_trailer(&index);
    assert!(
        w.git(&dir, &["ls-files", "-s", "edit.txt"])
            .contains(&tip_blob)
    );

    let run = b.boot(&dir, &[], &[]);
    run.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(dir.join("edit.txt")).unwrap(),
        "one\nTWO\nthree\n",
        "the tip's edit.txt"
    );
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("does not hold the tree"), "{warnings}");
    b.assert_booted(&dir);
}

/// A cache whose pack index was changed (two blobs' offsets swapped, its checksum recomputed):
/// `restore --cache` never reads that index, and every file is the tip's.
#[test]
fn a_changed_cache_index_never_gives_a_wrong_file() {
    let b = Baked::new();
    let w = &b.w;
    let cache = w.path("cache");
    b.bake(&cache).assert_code(0);
    let idx = the_pack(&cache).with_extension("idx");
    let mut bytes = std::fs::read(&idx).unwrap();
    let n = u32::from_be_bytes(bytes[8 + 255 * 4..8 + 256 * 4].try_into().unwrap()) as usize;
    let bare = w.srv().join("repo.git");
    let position = |path: &str| {
        let id = unhex(&w.git(&bare, &["rev-parse", &format!("{}:{path}", b.tip())]));
        (0..n)
            .find(|i| bytes[8 + 1024 + 20 * i..][..20] == id[..])
            .unwrap()
    };
    let (i, j) = (position("keep.txt"), position("lib/f00.txt"));
    for (table, width) in [(8 + 1024 + 20 * n, 4), (8 + 1024 + 24 * n, 4)] {
        for k in 0..width {
            bytes.swap(table + width * i + k, table + width * j + k);
        }
    }
    std::fs::write(&idx, bytes).unwrap();
    recompute_trailer(&idx);

    let dir = w.path("s");
    let run = b.boot(&dir, &[], &["--cache", cache.to_str().unwrap()]);
    run.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
        "keep\n"
    );
    assert_eq!(
        w.git(&dir, &["hash-object", "lib/f00.txt"]),
        w.git(&bare, &["rev-parse", &format!("{}:lib/f00.txt", b.tip())])
    );
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), b.tip());
    w.git(&dir, &["fsck", "--no-progress"]);
}

/// The ledger (and save's record of its `index.lock`) replaced by a symlink to a file elsewhere:
/// `save` refuses to push (nothing pushed) and the files elsewhere are unchanged. A session record grown past its cap: a clear error.
#[test]
fn state_files_are_never_followed_or_read_past_their_cap() {
    let b = filtered();
    let w = &b.w;
    let dir = w.path("s");
    b.boot(&dir, &[], &[]).assert_code(0);
    let outside = w.path("outside.txt");
    std::fs::write(&outside, "not the ledger\n").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join(".git/git-session-ledger")).unwrap();
    let outside_too = w.path("outside-too.txt");
    std::fs::write(&outside_too, "not the lock's owner\n").unwrap();
    let lock_owner = dir.join(".git/git-session-index-lock");
    // The boot's index lock left its (empty) record: replaced.
    let _ = std::fs::remove_file(&lock_owner);
    std::os::unix::fs::symlink(&outside_too, &lock_owner).unwrap();
    std::fs::write(dir.join("keep.txt"), "edited\n").unwrap();
    let url = b.url();
    let run = w.run(
        &dir,
        &["save", "-m", "x", "--json"],
        &[("PUSH_URL", url.as_str())],
    );
    assert_ne!(run.code, Some(0), "{}", run.stdout);
    assert!(run.stderr.contains("symlink"), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "not the ledger\n"
    );
    assert_eq!(
        std::fs::read_to_string(&outside_too).unwrap(),
        "not the lock's owner\n",
        "save's record of its index.lock is replaced, never written through"
    );
    let bare = w.srv().join("repo.git");
    let remote = w.git_output(&bare, &["rev-parse", "-q", "--verify", "sessions/baked"]);
    assert!(!remote.status.success(), "nothing was pushed");

    std::fs::remove_file(dir.join(".git/git-session-ledger")).unwrap();
    let record = dir.join(".git/git-session.json");
    let mut text = std::fs::read(&record).unwrap();
    text.extend(std::iter::repeat_n(b' ', 2 << 20));
    std::fs::write(&record, text).unwrap();
    let run = w.run(&dir, &["status", "--json"], &[]);
    // Local content in the way (7), not an internal failure (1).
    run.assert_code(7);
    assert!(run.stderr.contains("bytes (over"), "{}", run.stderr);
}

crate::sha256_too!(a_damaged_baked_pack_falls_back_to_a_full_fetch);
