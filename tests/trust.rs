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
