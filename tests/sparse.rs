//! Sparse restores (`--sparse`): cone mode as git's, over a server with `filter` (a partial
//! clone: only the cone's blobs fetched, the rest promised) and without it (the whole pack, written
//! sparsely); checked with git's `sparse-checkout list`, `status`, `ls-files -t` and a lazy fetch;
//! `save` from the sparse tree keeps what is outside the cone.

use std::path::Path;

use crate::support::{GitServer, Run, World, read_text};

const FILES: [(&str, &str); 6] = [
    ("top.txt", "top\n"),
    ("a/x.txt", "x\n"),
    ("a/b/y.txt", "y\n"),
    ("a/b/c/z.txt", "z\n"),
    ("a/other/w.txt", "w\n"),
    ("d/e.txt", "e\n"),
];
const INSIDE: [&str; 4] = ["top.txt", "a/x.txt", "a/b/y.txt", "a/b/c/z.txt"];

/// The repository on a git server with `uploadpack.allowFilter` as `filter` says.
struct Served {
    w: World,
    tip: String,
    /// Serves as long as the test holds it.
    _srv: GitServer,
    url: String,
}

fn served(filter: bool) -> Served {
    let w = World::new();
    let files: Vec<(&str, Option<&str>)> = FILES.iter().map(|(p, c)| (*p, Some(*c))).collect();
    let tip = w.repo("repo.git", &[&files]).pop().unwrap();
    let allow = if filter { "true" } else { "false" };
    w.git(
        &w.srv().join("repo.git"),
        &["config", "uploadpack.allowFilter", allow],
    );
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    Served {
        w,
        tip,
        _srv: srv,
        url,
    }
}

fn restore(w: &World, dir: &Path, url: &str, tip: &str, extra: &[&str]) -> Run {
    w.restore_with(
        dir,
        url,
        "sessions/sparse",
        tip,
        &[&["--json"][..], extra].concat(),
        &[],
    )
}

fn assert_sparse(w: &World, dir: &Path) {
    for (path, content) in FILES {
        let inside = INSIDE.contains(&path);
        assert_eq!(dir.join(path).exists(), inside, "{path}");
        if inside {
            assert_eq!(read_text(dir.join(path)), content);
        }
    }
    assert_eq!(w.git(dir, &["sparse-checkout", "list"]), "a/b");
    assert_eq!(
        w.git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    let tagged = w.git(dir, &["ls-files", "-t"]);
    assert!(
        tagged.contains("S d/e.txt") && tagged.contains("H a/b/y.txt"),
        "{tagged}"
    );
}

#[test]
fn a_sparse_restore_over_a_server_with_filter_is_a_partial_clone_of_the_cone() {
    let Served { w, tip, url, _srv } = served(true);
    let dir = w.path("s");
    let run = restore(&w, &dir, &url, &tip, &["--sparse", "a/b"]);
    run.assert_code(0);
    assert_eq!(run.json()["sparse"], serde_json::json!(["a/b"]));
    assert_eq!(run.json()["files"], 4, "the files written: the cone's");
    crate::support::assert_matches_schema(&run.json());
    assert_sparse(&w, &dir);
    let status = w.run(&dir, &["status", "--json"], &[]);
    status.assert_code(0);
    assert_eq!(status.json()["sparse"], serde_json::json!(["a/b"]));
    assert_eq!(status.json()["changed"], serde_json::json!([]));
    crate::support::assert_matches_schema(&status.json());
    assert_eq!(
        w.git(&dir, &["config", "extensions.partialClone"]),
        "origin"
    );
    // The blobs outside the cone were not fetched...
    let outside = w.git(&dir, &["rev-parse", "HEAD:d/e.txt"]);
    let missing = w.git(&dir, &["rev-list", "--objects", "--missing=print", "HEAD"]);
    assert!(missing.contains(&format!("?{outside}")), "{missing}");
    // ...and plain git fetches one from the promisor remote when it needs it.
    assert_eq!(w.git(&dir, &["cat-file", "-p", "HEAD:d/e.txt"]), "e");
    w.git(&dir, &["fsck", "--no-progress"]);
}

#[test]
fn a_sparse_restore_over_a_server_without_filter_writes_the_whole_pack_sparsely() {
    let Served { w, tip, url, _srv } = served(false);
    let dir = w.path("s");
    let file = w.tmp.path().join("cone");
    // Read as `git sparse-checkout set --stdin` reads it: a quoted line is unquoted (and a `#`
    // line would be a folder, as in git).
    std::fs::write(&file, "\"a/\\142/\"\n").unwrap();
    let run = w.run(
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL", &url),
            ("SESSION_BRANCH", "sessions/sparse"),
            ("TIP_SHA", &tip),
            ("GIT_SESSION_SPARSE_FILE", file.to_str().unwrap()),
        ],
    );
    run.assert_code(0);
    assert_sparse(&w, &dir);
    let missing = w.git(&dir, &["rev-list", "--objects", "--missing=print", "HEAD"]);
    assert!(!missing.contains('?'), "{missing}");
    assert!(
        w.git_output(&dir, &["config", "extensions.partialClone"])
            .stdout
            .is_empty()
    );
}

#[test]
fn save_from_a_sparse_tree_keeps_what_is_outside_the_cone() {
    let Served { w, tip, url, _srv } = served(true);
    let dir = w.path("s");
    restore(&w, &dir, &url, &tip, &["--sparse", "a/b"]).assert_code(0);
    std::fs::write(dir.join("a/b/y.txt"), "changed\n").unwrap();
    std::fs::write(dir.join("a/b/new.txt"), "new\n").unwrap();
    let run = w.run(
        &dir,
        &["save", "-m", "sparse edit", "--json"],
        &[("PUSH_URL", &url)],
    );
    run.assert_code(0);
    let commit = run.json()["commit"].as_str().unwrap().to_owned();
    let bare = w.srv().join("repo.git");
    let listed = w.git(&bare, &["ls-tree", "-r", "--name-only", &commit]);
    assert_eq!(
        listed,
        "a/b/c/z.txt\na/b/new.txt\na/b/y.txt\na/other/w.txt\na/x.txt\nd/e.txt\ntop.txt"
    );
    assert_eq!(
        w.git(&bare, &["show", &format!("{commit}:a/b/y.txt")]),
        "changed"
    );
    assert_eq!(w.git(&bare, &["show", &format!("{commit}:d/e.txt")]), "e");
    assert_eq!(
        w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert!(!dir.join("d").exists());
}

#[test]
fn a_sparse_folder_that_is_not_one_is_refused_before_any_network_io() {
    let w = World::new();
    let dir = w.path("s");
    // What `git sparse-checkout set --cone` refuses as arguments.
    for bad in ["../x", "a/*", "/a/b", "!a", "a]"] {
        let run = restore(
            &w,
            &dir,
            "http://127.0.0.1:9/repo.git",
            &"a".repeat(40),
            &["--sparse", bad],
        );
        run.assert_code(2);
    }
}

#[test]
fn a_sparse_restore_killed_mid_way_is_completed_by_the_rerun() {
    for point in ["after-fetch", "after-sparse-fetch", "mid-checkout"] {
        let Served { w, tip, url, _srv } = served(true);
        let dir = w.path("s");
        let killed = w.run(
            &dir,
            &["restore", "--json", "--sparse", "a/b"],
            &[
                ("READ_URL", url.as_str()),
                ("SESSION_BRANCH", "sessions/sparse"),
                ("TIP_SHA", tip.as_str()),
                ("GIT_SESSION_FAILPOINT", point),
            ],
        );
        assert_eq!(killed.code, None, "{point}: killed\n{}", killed.stderr);
        restore(&w, &dir, &url, &tip, &["--sparse", "a/b"]).assert_code(0);
        assert_sparse(&w, &dir);
    }
}

#[test]
fn a_sparse_folder_the_tree_lacks_is_named_in_a_warning() {
    let Served { w, tip, url, _srv } = served(true);
    let dir = w.path("s");
    let run = restore(&w, &dir, &url, &tip, &["--sparse", "a/b", "a/bb"]);
    run.assert_code(0);
    let warnings = run.json()["warnings"].to_string();
    assert!(
        warnings.contains("the tree has no folder a/bb"),
        "{warnings}"
    );
    assert_sparse_files(&dir);
}

fn assert_sparse_files(dir: &Path) {
    for (path, _) in FILES {
        assert_eq!(dir.join(path).exists(), INSIDE.contains(&path), "{path}");
    }
}

/// Every file below `dir` but `.git`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// `--sparse` reads its folders exactly as `git sparse-checkout set --cone` (git 2.47) reads its
/// arguments (issue 38, part 3): the same refusals (a leading `/` or `!`, `*?[]`, a path leaving
/// the top, a file's path), the same normalisation (`./`, `..`, `//`, a trailing `/`, spaces),
/// the same `.git/info/sparse-checkout`, `ls-files -t` and files, compared case by case with a
/// clone where git itself ran. Before, `./a`, `a//b` and `a/../d` were refused, `/a` was taken,
/// and the pattern file listed parents and folders in another order than git.
#[test]
fn sparse_folders_are_read_as_git_sparse_checkout_set_cone_reads_them() {
    let Served { w, tip, url, _srv } = served(true);
    let reference = w.tmp.path().join("reference");
    let bare = w.srv().join("repo.git");
    w.git(
        w.tmp.path(),
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            reference.to_str().unwrap(),
        ],
    );
    let cases: &[&[&str]] = &[
        &["a/b"],
        &["./a/b"],
        &["a//b/"],
        &[" a/b "],
        &["a/other/../b"],
        &["d", "a/b/c"],
        &["a", "a/b"],
        &["a/b", "a/b"],
        &["a/b/.."],
        &["."],
        &["nope"],
        &["/a/b"],
        &["!a"],
        &["a/*"],
        &["../a"],
        &["a/b/../../.."],
        &["a/x.txt"],
    ];
    for (i, folders) in cases.iter().enumerate() {
        let mut args = vec!["sparse-checkout", "set", "--cone"];
        args.extend_from_slice(folders);
        let git = w.git_output(&reference, &args);
        let dir = w.path(&format!("s{i}"));
        let mut extra = vec!["--sparse"];
        extra.extend_from_slice(folders);
        let run = restore(&w, &dir, &url, &tip, &extra);
        let what = format!("{folders:?}");
        if !git.status.success() {
            run.assert_case_says(&what, 2, &["sparse folder"]);
            assert!(!dir.join(".git").exists(), "{what}: written");
            continue;
        }
        run.assert_code(0);
        let read = |d: &Path| std::fs::read_to_string(d.join(".git/info/sparse-checkout")).unwrap();
        assert_eq!(read(&dir), read(&reference), "{what}: the pattern file");
        assert_eq!(
            w.git(&dir, &["ls-files", "-t"]),
            w.git(&reference, &["ls-files", "-t"]),
            "{what}: ls-files -t"
        );
        assert_eq!(files_in(&dir), files_in(&reference), "{what}: the files");
        assert_eq!(
            w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
            "",
            "{what}"
        );
        let warned = run.json()["warnings"]
            .to_string()
            .contains("the tree has no folder");
        assert_eq!(warned, folders == &["nope"], "{what}: {}", run.stdout);
    }
}

/// `GIT_SESSION_SPARSE_FILE` is read as `git sparse-checkout set --cone --stdin` reads its input:
/// none of the argument checks (a leading `/`, a glob character and `!` are taken literally), a
/// line starting with `"` unquoted C-style, a `#` line a folder like any other. Compared with git
/// case by case, as above.
#[test]
fn the_sparse_file_is_read_as_git_sparse_checkout_set_stdin_reads_it() {
    let Served { w, tip, url, _srv } = served(true);
    let reference = w.tmp.path().join("reference");
    let bare = w.srv().join("repo.git");
    w.git(
        w.tmp.path(),
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            reference.to_str().unwrap(),
        ],
    );
    let cases = [
        "/a/b\n",
        "# a comment?\na/b\n",
        "\"a/\\142\"\n",
        "a/*\n!d\n",
        " a/b \r\n\n",
        "a/./b/../b\n",
    ];
    for (i, text) in cases.iter().enumerate() {
        let what = format!("{text:?}");
        w.git_stdin(
            &reference,
            &["sparse-checkout", "set", "--cone", "--stdin"],
            text.as_bytes(),
        );
        let file = w.tmp.path().join(format!("cone{i}"));
        std::fs::write(&file, text).unwrap();
        let dir = w.path(&format!("s{i}"));
        let run = w.run(
            &dir,
            &["restore", "--json"],
            &[
                ("READ_URL", url.as_str()),
                ("SESSION_BRANCH", "sessions/sparse"),
                ("TIP_SHA", tip.as_str()),
                ("GIT_SESSION_SPARSE_FILE", file.to_str().unwrap()),
            ],
        );
        run.assert_code(0);
        let read = |d: &Path| std::fs::read_to_string(d.join(".git/info/sparse-checkout")).unwrap();
        assert_eq!(read(&dir), read(&reference), "{what}: the pattern file");
        assert_eq!(
            w.git(&dir, &["ls-files", "-t"]),
            w.git(&reference, &["ls-files", "-t"]),
            "{what}: ls-files -t"
        );
        assert_eq!(files_in(&dir), files_in(&reference), "{what}: the files");
    }
}

crate::sha256_too!(
    a_sparse_restore_over_a_server_with_filter_is_a_partial_clone_of_the_cone,
    a_sparse_restore_over_a_server_without_filter_writes_the_whole_pack_sparsely,
    a_sparse_restore_killed_mid_way_is_completed_by_the_rerun,
    a_sparse_folder_the_tree_lacks_is_named_in_a_warning,
    sparse_folders_are_read_as_git_sparse_checkout_set_cone_reads_them,
);
