//! Submodules in `restore` (`--submodules`): two nested levels over git's `http-backend`, a
//! relative and an absolute URL, checked by `git submodule status`; `.gitmodules` from CVE
//! reports refused before anything is written.

use std::path::Path;

use crate::support::{GitServer, Run, TOKEN, World, userinfo};

/// A scratch repository holding `files`, the gitlinks `links` (`path`, commit) and a
/// `.gitmodules` of `gitmodules`, served as `srv/<name>`; returns its commit.
pub(crate) fn repo_with_links(
    w: &World,
    name: &str,
    files: &[(&str, &str)],
    links: &[(&str, &str)],
    gitmodules: &str,
) -> String {
    let scratch = w.scratch(&format!("scratch-{name}"));
    for (path, text) in files {
        let p = scratch.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    if !gitmodules.is_empty() {
        std::fs::write(scratch.join(".gitmodules"), gitmodules).unwrap();
    }
    w.git(&scratch, &["add", "."]);
    for (path, commit) in links {
        w.git(
            &scratch,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{commit},{path}"),
            ],
        );
    }
    w.git(&scratch, &["commit", "-q", "-m", name]);
    let tip = w.git(&scratch, &["rev-parse", "HEAD"]);
    w.serve_scratch(&scratch, name);
    tip
}

/// `c.git` (a leaf), `b.git` (with `c` at `deep/c`, relative URL), `top.git` (with `b` at
/// `libs/b`, relative, and `c` again at `vendor/c` by absolute URL); returns (top, b, c).
fn nested(w: &World, srv: &GitServer) -> (String, String, String) {
    let c = repo_with_links(w, "c.git", &[("c.txt", "leaf\n")], &[], "");
    let b = repo_with_links(
        w,
        "b.git",
        &[("b.txt", "middle\n")],
        &[("deep/c", &c)],
        "[submodule \"c\"]\n\tpath = deep/c\n\turl = ../c.git\n",
    );
    let top = repo_with_links(
        w,
        "top.git",
        &[("README.md", "top\n")],
        &[("libs/b", &b), ("vendor/c", &c)],
        &format!(
            "[submodule \"libs/b\"]\n\tpath = libs/b\n\turl = ../b.git\n\
             [submodule \"vendor-c\"]\n\tpath = vendor/c\n\turl = {}\n",
            srv.url("c.git", None)
        ),
    );
    (top, b, c)
}

fn restore(w: &World, dir: &Path, url: &str, tip: &str, which: &str) -> Run {
    w.run(
        dir,
        &["restore", "--json", "--submodules", which],
        &[
            ("READ_URL", url),
            ("SESSION_BRANCH", "sessions/sub"),
            ("TIP_SHA", tip),
        ],
    )
}

#[test]
fn recursive_restores_two_nested_levels_that_git_submodule_status_reads_clean() {
    let w = World::new();
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let (top, b, c) = nested(&w, &srv);
    let dir = w.path("s");
    let run = restore(
        &w,
        &dir,
        &srv.url("top.git", Some(&userinfo())),
        &top,
        "recursive",
    );
    run.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(dir.join("libs/b/b.txt")).unwrap(),
        "middle\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("libs/b/deep/c/c.txt")).unwrap(),
        "leaf\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("vendor/c/c.txt")).unwrap(),
        "leaf\n"
    );
    let status = w.git(&dir, &["submodule", "status", "--recursive"]);
    assert_eq!(
        status,
        format!(
            " {b} libs/b ({})\n {c} libs/b/deep/c ({})\n {c} vendor/c ({})",
            &b[..7],
            &c[..7],
            &c[..7]
        ),
        "{status}"
    );
    assert_eq!(
        w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert_eq!(w.git(&dir.join("libs/b/deep/c"), &["rev-parse", "HEAD"]), c);
    assert!(dir.join(".git/modules/libs/b/modules/c/HEAD").is_file());
    assert_eq!(run.json()["warnings"], serde_json::json!([]));
    assert_eq!(
        run.json()["submodules"],
        serde_json::json!(["libs/b", "vendor/c"])
    );
    crate::support::assert_matches_schema(&run.json());
    // The absolute URL is READ_URL's origin, so it had the token too; nothing shows it.
    assert!(!run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN));
    assert!(
        !std::fs::read_to_string(dir.join(".git/config"))
            .unwrap()
            .contains(TOKEN)
    );
}

#[test]
fn shallow_restores_only_the_tree_s_own_submodules_and_none_leaves_them_empty() {
    let w = World::new();
    let srv = GitServer::start(&w.srv(), None);
    let (top, _, _) = nested(&w, &srv);
    let dir = w.path("s");
    restore(&w, &dir, &srv.url("top.git", None), &top, "shallow").assert_code(0);
    assert!(dir.join("libs/b/b.txt").is_file());
    assert_eq!(
        std::fs::read_dir(dir.join("libs/b/deep/c"))
            .unwrap()
            .count(),
        0
    );
    let status = w.git(&dir, &["submodule", "status"]);
    assert!(status.lines().all(|l| l.starts_with(' ')), "{status}");
    let none = w.path("n");
    let run = restore(&w, &none, &srv.url("top.git", None), &top, "none");
    run.assert_code(0);
    assert_eq!(std::fs::read_dir(none.join("libs/b")).unwrap().count(), 0);
    assert!(
        run.json()["warnings"][0]
            .as_str()
            .unwrap()
            .contains("libs/b, vendor/c")
    );
}

#[test]
fn gitmodules_from_cve_reports_are_refused_before_anything_is_written() {
    let cases = [
        // CVE-2018-11235: a name that leaves .git/modules.
        "[submodule \"../../modules/evil\"]\n\tpath = libs/b\n\turl = ../c.git\n",
        // CVE-2017-1000117: a URL read as an option.
        "[submodule \"b\"]\n\tpath = libs/b\n\turl = -oProxyCommand=touch /tmp/pwned\n",
        // Other protocols than smart HTTP(S).
        "[submodule \"b\"]\n\tpath = libs/b\n\turl = file:///etc\n",
        "[submodule \"b\"]\n\tpath = libs/b\n\turl = ext::sh -c touch% /tmp/pwned\n",
        // A relative URL climbing above the server's root.
        "[submodule \"b\"]\n\tpath = libs/b\n\turl = ../../../../x.git\n",
        // An absolute name, whose git dir would have been that path (a helper's trial found it).
        "[submodule \"/tmp/gs-absolute-submodule\"]\n\tpath = libs/b\n\turl = ../c.git\n",
    ];
    for (i, gitmodules) in cases.iter().enumerate() {
        let w = World::new();
        let srv = GitServer::start(&w.srv(), None);
        let c = repo_with_links(&w, "c.git", &[("c.txt", "leaf\n")], &[], "");
        let top = repo_with_links(
            &w,
            "top.git",
            &[("README.md", "x\n")],
            &[("libs/b", &c)],
            gitmodules,
        );
        let dir = w.path("s");
        let run = restore(&w, &dir, &srv.url("top.git", None), &top, "recursive");
        run.assert_code(6);
        let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("refused as git refuses it"), "{i}: {msg}");
        assert!(
            !dir.exists() || std::fs::read_dir(&dir).unwrap().count() == 0,
            "{i}: written"
        );
        assert!(!w.tmp.path().join("modules").exists() && !Path::new("/tmp/pwned").exists());
        assert!(
            !Path::new("/tmp/gs-absolute-submodule").exists(),
            "{i}: written outside"
        );
    }
}

#[test]
fn a_restore_killed_mid_submodules_is_completed_by_the_rerun() {
    for point in ["mid-submodules", "after-fetch"] {
        let w = World::new();
        let srv = GitServer::start(&w.srv(), None);
        let (top, b, c) = nested(&w, &srv);
        let dir = w.path("s");
        let url = srv.url("top.git", None);
        let killed = w.run(
            &dir,
            &["restore", "--json", "--submodules", "recursive"],
            &[
                ("READ_URL", url.as_str()),
                ("SESSION_BRANCH", "sessions/sub"),
                ("TIP_SHA", top.as_str()),
                ("GIT_SESSION_FAILPOINT", point),
            ],
        );
        assert_eq!(killed.code, None, "{point}: killed\n{}", killed.stderr);
        assert!(!dir.join(".git").exists(), "{point}");
        restore(&w, &dir, &url, &top, "recursive").assert_code(0);
        let status = w.git(&dir, &["submodule", "status", "--recursive"]);
        assert!(
            status.lines().all(|l| l.starts_with(' ')) && status.lines().count() == 3,
            "{point}: {status}"
        );
        assert_eq!(w.git(&dir.join("libs/b"), &["rev-parse", "HEAD"]), b);
        assert_eq!(w.git(&dir.join("libs/b/deep/c"), &["rev-parse", "HEAD"]), c);
        assert_eq!(
            w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
            "",
            "{point}"
        );
    }
}

#[test]
fn submodules_fanning_out_past_the_bound_are_refused() {
    let w = World::new();
    let srv = GitServer::start(&w.srv(), None);
    let (top, _, _) = nested(&w, &srv);
    let dir = w.path("s");
    let run = w.run(
        &dir,
        &["restore", "--json", "--submodules", "recursive"],
        &[
            ("READ_URL", srv.url("top.git", None).as_str()),
            ("SESSION_BRANCH", "sessions/sub"),
            ("TIP_SHA", top.as_str()),
            ("GIT_SESSION_MAX_SUBMODULES", "2"),
        ],
    );
    run.assert_code(6);
    let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("more than 2"), "{msg}");
    assert!(!dir.join(".git").exists());
}

/// The submodule bound is checked for a whole level before any of it is fetched (issue 38,
/// part 3): with `GIT_SESSION_MAX_SUBMODULES=1` and the tree's two submodules, neither
/// repository is asked for anything (before, the first was fetched, then the second refused).
#[test]
fn the_submodule_bound_is_checked_before_any_submodule_is_fetched() {
    let w = World::new();
    let srv = GitServer::start(&w.srv(), None);
    let (top, _, _) = nested(&w, &srv);
    let dir = w.path("s");
    let run = w.run(
        &dir,
        &["restore", "--json", "--submodules", "shallow"],
        &[
            ("READ_URL", srv.url("top.git", None).as_str()),
            ("SESSION_BRANCH", "sessions/sub"),
            ("TIP_SHA", top.as_str()),
            ("GIT_SESSION_MAX_SUBMODULES", "1"),
        ],
    );
    run.assert_code(6);
    let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("more than 1"), "{msg}");
    let asked: Vec<String> = srv
        .log()
        .iter()
        .map(|e| e.path.clone())
        .filter(|p| !p.starts_with("/top.git/"))
        .collect();
    assert!(asked.is_empty(), "submodules fetched: {asked:?}");
    assert!(!dir.join(".git").exists());
}

/// Formats are never mixed: a submodule whose repository is of the other object format than its
/// superproject (a SHA-1 one in a SHA-256 superproject, or the reverse; its gitlink is
/// necessarily an id of the superproject's length) is refused with exit 2 naming it and both
/// formats, once its server has said its format and before anything of it is asked for; nothing
/// is published (no `.git`), and the rerun without `--submodules` restores the superproject.
#[test]
fn a_submodule_of_the_other_format_is_refused_clearly() {
    let w = World::new();
    let srv = GitServer::start(&w.srv(), None);
    let (ours, theirs, theirs_title) = match crate::support::object_format() {
        "sha1" => ("SHA-1", "sha256", "SHA-256"),
        _ => ("SHA-256", "sha1", "SHA-1"),
    };
    let other = w.tmp.path().join("scratch-other");
    let init = format!("--object-format={theirs}");
    w.git(
        w.tmp.path(),
        &["init", "-q", "-b", "main", &init, other.to_str().unwrap()],
    );
    std::fs::write(other.join("o.txt"), "other format\n").unwrap();
    let sub = w.commit_all(&other, "other format");
    w.serve_scratch(&other, "other.git");
    // The superproject's gitlink is an id of its own format: the other repository's id, cut or
    // padded to that length.
    let link = format!("{sub}{}", "0".repeat(64))[..crate::support::hex_len()].to_owned();
    let top = repo_with_links(
        &w,
        "top.git",
        &[("README.md", "top\n")],
        &[("libs/other", &link)],
        "[submodule \"other\"]\n\tpath = libs/other\n\turl = ../other.git\n",
    );
    let dir = w.path("s");
    let url = srv.url("top.git", None);
    let run = restore(&w, &dir, &url, &top, "shallow");
    run.assert_says(
        2,
        &[
            "submodule libs/other",
            &format!("is a {theirs_title} repository, but its superproject is {ours}"),
        ],
    );
    let asked: Vec<String> = srv
        .log()
        .iter()
        .filter(|e| e.path.starts_with("/other.git/"))
        .map(|e| String::from_utf8_lossy(&e.body).into_owned())
        .collect();
    assert!(!asked.is_empty(), "its format was not asked for");
    assert!(
        asked.iter().all(|body| !body.contains("want ")),
        "an object of it was asked for: {asked:?}"
    );
    assert!(!dir.join(".git").exists());
    assert!(!dir.join("libs/other/o.txt").exists());

    restore(&w, &dir, &url, &top, "none").assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), top);
    assert_eq!(
        w.git(&dir, &["rev-parse", "--show-object-format"]),
        crate::support::object_format()
    );
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
    w.git(&dir, &["fsck", "--no-progress"]);
}

crate::sha256_too!(
    recursive_restores_two_nested_levels_that_git_submodule_status_reads_clean,
    shallow_restores_only_the_tree_s_own_submodules_and_none_leaves_them_empty,
    gitmodules_from_cve_reports_are_refused_before_anything_is_written,
    a_restore_killed_mid_submodules_is_completed_by_the_rerun,
    a_submodule_of_the_other_format_is_refused_clearly,
);
