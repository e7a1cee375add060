//! `restore` over git: the happy path, the lease, reruns, conflicts, faults, crashes, secrets.

use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;

use crate::support::{
    GitServer, Run, TOKEN, TestCa, World, all_files, assert_no_secret, git_session_peak_rss,
    incompressible, left_nothing, names_in, read_text, session_record, userinfo,
};

/// A repository with three commits on `main`: nested folders, an executable, a symlink, a file
/// removed in the last commit, and 24 files so that a mid-checkout kill lands mid-way.
fn fixture(w: &World) -> Vec<String> {
    let mut many: Vec<(String, Option<String>)> = (0..24)
        .map(|i| (format!("many/f{i:02}.txt"), Some(format!("file {i}\n"))))
        .collect();
    many.push(("README.md".into(), Some("one\n".into())));
    // A Windows device name: git on Linux restores it, so must we.
    many.push(("src/aux.c".into(), Some("int aux;\n".into())));
    let first: Vec<(&str, Option<&str>)> = many
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_deref()))
        .collect();
    w.repo(
        "repo.git",
        &[
            &first,
            &[
                ("README.md", Some("two\n")),
                ("bin/run.sh", Some("#!/bin/sh\necho hi\n")),
                ("src/deep/er/lib.rs", Some("fn a() {}\n")),
                ("link-to-readme", Some("->README.md")),
                ("gone.txt", Some("bye\n")),
            ],
            &[("README.md", Some("three\n")), ("gone.txt", None)],
        ],
    )
}

fn restore(
    w: &World,
    dir: &Path,
    url: &str,
    branch: &str,
    sha: &str,
    extra: &[(&str, &str)],
) -> Run {
    w.restore_with(dir, url, branch, sha, &["--json"], extra)
}

/// The fixture on a git server; with a token, the server asks for it and `url` carries it.
struct Served {
    w: World,
    ids: Vec<String>,
    srv: GitServer,
    url: String,
}

impl Served {
    fn start(token: Option<&str>) -> Self {
        let w = World::new();
        let ids = fixture(&w);
        let srv = GitServer::start(&w.srv(), token);
        let url = srv.url("repo.git", token.map(|_| userinfo()).as_deref());
        Served { w, ids, srv, url }
    }

    /// `restore --json` of `sha` on the session branch `s` into `dir`, with `vars` besides.
    fn restore(&self, dir: &Path, sha: &str, vars: &[(&str, &str)]) -> Run {
        self.w
            .restore_with(dir, &self.url, "s", sha, &["--json"], vars)
    }
}

/// The checks every finished git restore must pass, judged by the git CLI.
fn assert_restored(w: &World, dir: &Path, branch: &str, sha: &str) {
    assert_eq!(w.git(dir, &["rev-parse", "HEAD"]), sha);
    assert_eq!(
        w.git(dir, &["symbolic-ref", "HEAD"]),
        format!("refs/heads/{branch}")
    );
    assert_eq!(
        w.git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    w.git(dir, &["fsck", "--no-progress"]);
    // The work tree equals the commit's tree exactly: no file missing, none extra.
    let listed = w.git(dir, &["ls-files"]);
    let want = w.git(dir, &["ls-tree", "-r", "--name-only", sha]);
    assert_eq!(listed, want);
    assert!(
        !dir.join(restore_staging()).exists(),
        "staging folder left behind"
    );
}

fn restore_staging() -> &'static str {
    ".git-session-restore"
}

#[test]
fn restores_a_non_tip_commit_exactly() {
    let w = World::new();
    let ids = fixture(&w);
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let dir = w.path("sandbox");
    let url = srv.url("repo.git", Some(&userinfo()));
    let run = restore(&w, &dir, &url, "sessions/abc", &ids[1], &[]);
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["ok"], true);
    assert_eq!(j["command"], "restore");
    assert_eq!(j["branch"], "sessions/abc");
    assert_eq!(j["tip"], ids[1].as_str());
    assert_eq!(j["source"], "git");
    assert_eq!(j["lease"], crate::support::zero_id());
    assert_eq!(j["warnings"], serde_json::json!([]));
    assert_restored(&w, &dir, "sessions/abc", &ids[1]);
    assert_eq!(read_text(dir.join("README.md")), "two\n");
    assert_eq!(read_text(dir.join("gone.txt")), "bye\n");
    let mode = crate::support::mode_of(&dir.join("bin/run.sh"));
    assert_eq!(mode & 0o111, 0o111, "exec bit lost");
    assert_eq!(
        std::fs::read_link(dir.join("link-to-readme")).unwrap(),
        Path::new("README.md")
    );
    // Depth 1 by default: one commit, marked shallow.
    assert_eq!(w.git(&dir, &["rev-list", "--count", "HEAD"]), "1");
    assert_eq!(
        w.git(&dir, &["rev-parse", "--is-shallow-repository"]),
        "true"
    );
    // Exactly that commit: no tags, no other branches.
    assert_eq!(
        w.git(&dir, &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/sessions/abc"
    );
}

#[test]
fn configures_origin_without_secrets_and_with_upstream() {
    let w = World::new();
    let ids = fixture(&w);
    let bare = w.srv().join("repo.git");
    w.git(&bare, &["branch", "sessions/up", &ids[2]]);
    w.git(&bare, &["tag", "v1", &ids[0]]);
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let dir = w.path("sandbox");
    let url = srv.url("repo.git", Some(&userinfo()));
    let push = srv.url(
        "repo.git",
        Some(&format!("p:{}", crate::support::pct(TOKEN))),
    );
    restore(
        &w,
        &dir,
        &url,
        "sessions/up",
        &ids[2],
        &[("PUSH_URL", &push)],
    )
    .assert_code(0);
    // Both url and pushurl (SPEC), even when they name the same repository, credential-free:
    // their only userinfo is a made-up user name that tells the credential helper the direction.
    assert_eq!(
        w.git(&dir, &["config", "remote.origin.url"]),
        srv.url("repo.git", Some("git-session-read"))
    );
    assert_eq!(
        w.git(&dir, &["config", "remote.origin.pushurl"]),
        srv.url("repo.git", Some("git-session-push"))
    );
    let cfg = w.git(&dir, &["config", "--list", "--local"]);
    assert_no_secret(".git/config", cfg.as_bytes());
    assert_eq!(
        cfg.matches("@127.0.0.1").count(),
        cfg.matches("git-session-read@127.0.0.1").count()
            + cfg.matches("git-session-push@127.0.0.1").count(),
        "userinfo in config:\n{cfg}"
    );
    assert_eq!(
        w.git(&dir, &["config", "--get-all", "remote.origin.fetch"]),
        "+refs/heads/sessions/up:refs/remotes/origin/sessions/up"
    );
    assert_eq!(
        w.git(&dir, &["config", "remote.origin.tagOpt"]),
        "--no-tags"
    );
    assert_eq!(
        w.git(&dir, &["rev-parse", "--abbrev-ref", "@{upstream}"]),
        "origin/sessions/up"
    );
    assert!(
        w.git(&dir, &["status", "-sb"])
            .starts_with("## sessions/up...origin/sessions/up")
    );
    // Plain git works with the configured remote (credentials passed through the environment).
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{TOKEN}", crate::support::USER));
    let out = std::process::Command::new("git")
        .args(["fetch", "-q", "origin"])
        .current_dir(&dir)
        .env_clear()
        .envs(w.env())
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.extraHeader")
        .env(
            "GIT_CONFIG_VALUE_0",
            format!("Authorization: Basic {basic}"),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(w.git(&dir, &["rev-parse", "origin/sessions/up"]), ids[2]);
    assert_eq!(w.git(&dir, &["tag", "--list"]), "", "tags were fetched");
}

#[test]
fn lease_is_zero_tip_or_tip_with_warning() {
    let w = World::new();
    let ids = fixture(&w);
    let bare = w.srv().join("repo.git");
    w.git(&bare, &["branch", "sessions/at-tip", &ids[1]]);
    w.git(&bare, &["branch", "sessions/moved", &ids[2]]);
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);

    let j = restore(&w, &w.path("a"), &url, "sessions/new", &ids[1], &[]).json();
    assert_eq!(j["lease"], crate::support::zero_id());
    let j = restore(&w, &w.path("b"), &url, "sessions/at-tip", &ids[1], &[]).json();
    assert_eq!(j["lease"], ids[1].as_str());
    let run = restore(&w, &w.path("c"), &url, "sessions/moved", &ids[1], &[]);
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["lease"], ids[1].as_str());
    let warning = j["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains(&ids[2]) && warning.contains("stale"),
        "{warning}"
    );
    assert_restored(&w, &w.path("c"), "sessions/moved", &ids[1]);
    let record = session_record(&w.path("c"));
    assert_eq!(record["lease"], ids[1].as_str());
    assert_eq!(record["tip"], ids[1].as_str());
    assert_eq!(record["branch"], "sessions/moved");
    assert_eq!(record["source"], "git");
}

#[test]
fn asks_for_one_ref_and_one_commit_over_protocol_v2() {
    let w = World::new();
    let ids = fixture(&w);
    let bare = w.srv().join("repo.git");
    for i in 0..50 {
        w.git(&bare, &["branch", &format!("other/{i}"), &ids[0]]);
    }
    w.git(&bare, &["branch", "sessions/me-too", &ids[0]]);
    let srv = GitServer::start(&w.srv(), None);
    restore(
        &w,
        &w.path("s"),
        &srv.url("repo.git", None),
        "sessions/me",
        &ids[1],
        &[],
    )
    .assert_code(0);
    // Two requests: the ls-refs posted without the capability advertisement, then the fetch.
    let log = srv.log();
    assert_eq!(srv.requests(), ["ls-refs", "fetch"], "{log:#?}");
    assert!(
        log.iter()
            .all(|e| e.git_protocol.as_deref() == Some("version=2"))
    );
    let body = |cmd: &str| {
        log.iter()
            .map(|e| String::from_utf8_lossy(&e.body).into_owned())
            .find(|b| b.contains(cmd))
            .unwrap_or_else(|| panic!("no {cmd} request: {log:#?}"))
    };
    let ls = body("command=ls-refs");
    assert!(
        ls.contains("command=ls-refs") && ls.contains("ref-prefix refs/heads/sessions/me\n"),
        "{ls}"
    );
    assert_eq!(ls.matches("ref-prefix").count(), 1, "{ls}");
    let fetch = body("command=fetch");
    assert!(fetch.contains(&format!("want {}\n", ids[1])), "{fetch}");
    assert_eq!(fetch.matches("want ").count(), 1, "{fetch}");
    assert!(fetch.contains("deepen 1\n"), "{fetch}");
    assert!(!fetch.contains("include-tag"), "{fetch}");
    // The format is sent where it is not git's default (no advertisement said which it is).
    let sha256 = crate::support::object_format() == "sha256";
    for body in [&ls, &fetch] {
        assert_eq!(body.contains("object-format=sha256\n"), sha256, "{body}");
        assert_eq!(body.contains("object-format="), sha256, "{body}");
    }
    // A branch that merely shares the prefix is not taken for the session branch: the session is
    // new (the zero lease).
    let record = session_record(&w.path("s"));
    assert_eq!(record["lease"], crate::support::zero_id());
}

#[test]
fn depth_n_fetches_n_commits() {
    let s = Served::start(None);
    let Served { w, ids, url, .. } = &s;
    let dir = w.path("s");
    w.run(
        &dir,
        &["restore", "--depth", "2"],
        &[
            ("READ_URL", url),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &ids[2]),
        ],
    )
    .assert_code(0);
    assert_eq!(w.git(&dir, &["rev-list", "--count", "HEAD"]), "2");
    assert_restored(w, &dir, "s", &ids[2]);
    let dir = w.path("full");
    w.run(
        &dir,
        &["restore", "--depth", "0"],
        &[
            ("READ_URL", url),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &ids[2]),
        ],
    )
    .assert_code(0);
    assert_eq!(w.git(&dir, &["rev-list", "--count", "HEAD"]), "3");
    assert_eq!(
        w.git(&dir, &["rev-parse", "--is-shallow-repository"]),
        "false"
    );
}

#[test]
fn rerun_on_the_same_session_is_a_no_op_that_touches_nothing() {
    let s = Served::start(None);
    let Served { w, ids, srv, url } = &s;
    let dir = w.path("s");
    s.restore(&dir, &ids[1], &[]).assert_code(0);
    std::fs::write(dir.join("README.md"), "local edit\n").unwrap();
    std::fs::write(dir.join("untracked.txt"), "mine\n").unwrap();
    let record_before = std::fs::read(dir.join(".git/git-session.json")).unwrap();
    srv.clear_log();
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(0);
    assert_eq!(run.json()["noop"], true);
    assert!(srv.log().is_empty(), "a no-op rerun made requests");
    assert_eq!(read_text(dir.join("README.md")), "local edit\n");
    assert_eq!(read_text(dir.join("untracked.txt")), "mine\n");
    assert_eq!(
        std::fs::read(dir.join(".git/git-session.json")).unwrap(),
        record_before
    );
    // After a local commit, HEAD descends from TIP_SHA: still a no-op.
    w.git(&dir, &["commit", "-qam", "local"]);
    let head = w.git(&dir, &["rev-parse", "HEAD"]);
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), head);
    // The result names where the tree is, not the older TIP_SHA given again.
    assert_eq!(run.json()["tip"], head.as_str());
    // Another session's tree: exit 2.
    let run = restore(w, &dir, url, "other", &ids[1], &[]);
    run.assert_says(2, &["another session"]);
    // Same session, a commit HEAD does not descend from: exit 7, nothing changed.
    let run = s.restore(&dir, &ids[2], &[]);
    run.assert_code(7);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), head);
}

#[test]
fn other_content_is_a_conflict_unless_forced() {
    let s = Served::start(None);
    let Served { w, ids, srv, url } = &s;
    let dir = w.path("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("README.md"), "precious\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "keep me\n").unwrap();
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(7);
    assert_eq!(run.json()["error"]["kind"], "conflict");
    assert!(srv.log().is_empty(), "a refused restore made requests");
    assert_eq!(read_text(dir.join("README.md")), "precious\n");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);

    let run = w.restore_with(&dir, url, "s", &ids[1], &["--force"], &[]);
    run.assert_code(0);
    assert_eq!(read_text(dir.join("README.md")), "two\n");
    assert_eq!(read_text(dir.join("notes.txt")), "keep me\n");
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), ids[1]);
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "?? notes.txt");

    // A repository restore did not write is never replaced.
    let foreign = w.path("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    w.git(&foreign, &["init", "-q"]);
    for args in [&["restore"][..], &["restore", "--force"][..]] {
        let run = w.run(
            &foreign,
            args,
            &[
                ("READ_URL", url),
                ("SESSION_BRANCH", "s"),
                ("TIP_SHA", &ids[1]),
            ],
        );
        run.assert_code(7);
    }
}

/// `--force` overwrites the files the commit tracks and deletes nothing (SPEC rule 6): a symlink a
/// person made where the commit has a folder (`src` → a folder elsewhere) is not the commit's to
/// replace, so the restore is exit 7 naming it, with nothing changed, also through a second level
/// (`src/deep`); a symlink where the commit has a file is overwritten as a tracked file.
#[test]
fn forced_restore_refuses_a_symlink_where_the_commit_has_a_folder() {
    let s = Served::start(None);
    let Served { w, ids, url, .. } = &s;
    let elsewhere = w.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("mine.txt"), "mine\n").unwrap();
    for (link, at) in [("src", "src"), ("src/deep", "src/deep")] {
        let dir = w.path(&format!("s-{}", link.replace('/', "-")));
        std::fs::create_dir_all(dir.join(at).parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join(at)).unwrap();
        std::fs::write(dir.join("notes.txt"), "keep me\n").unwrap();
        let run = w.restore_with(&dir, url, "s", &ids[1], &["--force", "--json"], &[]);
        run.assert_code(7);
        let msg = run.error_message();
        assert!(msg.contains(&dir.join(at).display().to_string()), "{msg}");
        assert!(
            std::fs::symlink_metadata(dir.join(at))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{link}: the symlink was replaced"
        );
        assert!(!dir.join(".git").exists(), "{link}: a .git was left");
        assert_eq!(
            names_in(&dir),
            ["notes.txt", "src"],
            "{link}: something was written"
        );
        assert_eq!(
            names_in(&elsewhere),
            ["mine.txt"],
            "{link}: written through the symlink"
        );
    }
    // A symlink where the commit has a file: a tracked path, overwritten by --force.
    let dir = w.path("s-file");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("mine.txt"), dir.join("README.md")).unwrap();
    let run = w.restore_with(&dir, url, "s", &ids[1], &["--force"], &[]);
    run.assert_code(0);
    assert_eq!(read_text(dir.join("README.md")), "two\n");
    assert_eq!(read_text(elsewhere.join("mine.txt")), "mine\n");
}

#[test]
fn missing_commit_is_not_found_and_leaves_nothing() {
    let s = Served::start(None);
    let Served { w, srv, .. } = &s;
    let dir = w.path("s");
    let run = s.restore(&dir, &"ab".repeat(crate::support::hex_len() / 2), &[]);
    run.assert_code(8);
    let j = run.json();
    assert_eq!(j["error"]["kind"], "not_found");
    assert!(
        j["error"]["message"]
            .as_str()
            .unwrap()
            .contains("commit not found on the remote")
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "left something behind"
    );
    // A repository that does not exist: also 8.
    let run = restore(
        w,
        &w.path("t"),
        &srv.url("nope.git", None),
        "s",
        &"ab".repeat(crate::support::hex_len() / 2),
        &[],
    );
    run.assert_code(8);
}

#[test]
fn wrong_token_is_an_auth_failure() {
    let w = World::new();
    let ids = fixture(&w);
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let run = restore(
        &w,
        &w.path("s"),
        &srv.url("repo.git", Some("t:wrong")),
        "s",
        &ids[0],
        &[],
    );
    run.assert_code(4);
    let msg = run.error_message();
    assert!(
        msg.contains("credentials rejected") && msg.contains("expired"),
        "{msg}"
    );
    assert_eq!(srv.log().len(), 1, "a 401 was retried");
    let run = restore(
        &w,
        &w.path("t"),
        &srv.url("repo.git", None),
        "s",
        &ids[0],
        &[],
    );
    run.assert_code(4);
}

#[test]
fn url_file_is_reread_once_after_a_401() {
    let w = World::new();
    let ids = fixture(&w);
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let file = w.tmp.path().join("read-url");
    std::fs::write(
        &file,
        format!("{}\n", srv.url("repo.git", Some(&userinfo()))),
    )
    .unwrap();
    srv.knobs.unauthorized_next.store(1, SeqCst);
    let dir = w.path("s");
    let run = w.run(
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL_FILE", file.to_str().unwrap()),
            ("READ_URL", "http://127.0.0.1:1/ignored.git"),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &ids[0]),
        ],
    );
    run.assert_code(0);
    assert_restored(&w, &dir, "s", &ids[0]);
    // The same with a plain variable: no second chance.
    srv.knobs.unauthorized_next.store(1, SeqCst);
    restore(
        &w,
        &w.path("t"),
        &srv.url("repo.git", Some(&userinfo())),
        "s",
        &ids[0],
        &[],
    )
    .assert_code(4);
}

#[test]
fn transient_failures_are_retried_then_give_up() {
    let s = Served::start(None);
    let Served { w, ids, srv, .. } = &s;
    // Fails twice, then answers: success.
    srv.knobs.fail_next.store(2, SeqCst);
    let dir = w.path("s");
    s.restore(&dir, &ids[1], &[]).assert_code(0);
    assert_restored(w, &dir, "s", &ids[1]);
    assert_eq!(srv.log().iter().filter(|e| e.status == 503).count(), 2);
    // Always failing: exit 5 after exactly 4 attempts, one request each: the posted ls-refs,
    // posted again (a 503 is an overloaded server's, not one that does not speak v2: no
    // handshake; it was 5 requests, the first 503 taken for a refusal of v2).
    srv.clear_log();
    srv.knobs.fail_next.store(1000, SeqCst);
    let run = s.restore(&w.path("t"), &ids[1], &[]);
    run.assert_code(5);
    assert_eq!(run.json()["error"]["kind"], "network");
    assert_eq!(
        srv.requests(),
        [
            // The body of a request failed before it is read is not logged.
            "POST /repo.git/git-upload-pack",
            "POST /repo.git/git-upload-pack",
            "POST /repo.git/git-upload-pack",
            "POST /repo.git/git-upload-pack"
        ]
    );
    assert!(
        run.stderr.contains("gave up after 4 attempts"),
        "{}",
        run.stderr
    );
    // Nothing listening: exit 5.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let run = restore(
        w,
        &w.path("u"),
        &format!("http://127.0.0.1:{port}/repo.git"),
        "s",
        &ids[1],
        &[],
    );
    run.assert_code(5);
}

#[test]
fn tls_with_test_ca_works_and_untrusted_ca_is_refused() {
    let w = World::new();
    let ids = fixture(&w);
    let ca = TestCa::new();
    let ca_file = w.tmp.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.ca_pem).unwrap();
    let srv = GitServer::start_tls(&w.srv(), Some(TOKEN), &ca);
    let url = srv.url("repo.git", Some(&userinfo()));
    assert!(url.starts_with("https://"));
    let dir = w.path("s");
    restore(
        &w,
        &dir,
        &url,
        "s",
        &ids[1],
        &[("SSL_CERT_FILE", ca_file.to_str().unwrap())],
    )
    .assert_code(0);
    assert_restored(&w, &dir, "s", &ids[1]);
    // Another CA (the one the server's certificate does not chain to): refused, exit 5.
    let other = TestCa::new();
    let other_file = w.tmp.path().join("other.pem");
    std::fs::write(&other_file, &other.ca_pem).unwrap();
    let run = restore(
        &w,
        &w.path("t"),
        &url,
        "s",
        &ids[1],
        &[("SSL_CERT_FILE", other_file.to_str().unwrap())],
    );
    run.assert_code(5);
    assert!(
        run.stderr.to_lowercase().contains("certificate"),
        "{}",
        run.stderr
    );
    // The same certificate would be refused again: no retries, and the hint names the knob.
    assert!(!run.stderr.contains("gave up after"), "{}", run.stderr);
    assert!(!run.stderr.contains("retrying"), "{}", run.stderr);
    assert!(run.stderr.contains("GIT_SSL_CAINFO"), "{}", run.stderr);
    assert_eq!(run.json()["error"]["kind"], "network", "{}", run.stdout);
}

#[test]
fn a_server_without_protocol_v2_is_fetched_from_over_v0_unless_v2_is_forced() {
    let w = World::new();
    let ids = fixture(&w);
    // With the token: every run's output is searched for it (the v0 paths included).
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    srv.knobs.v0_only.store(true, SeqCst);
    let url = srv.url("repo.git", Some(&userinfo()));
    let run = restore(&w, &w.path("s"), &url, "s", &ids[1], &[]);
    run.assert_code(0);
    assert_restored(&w, &w.path("s"), "s", &ids[1]);
    // The posted ls-refs answered with nothing (one request more), then a ref advertisement and
    // one stateless fetch: no ls-refs after it (the advertisement has the refs).
    let log = srv.log();
    assert_eq!(
        srv.requests(),
        ["ls-refs", "info/refs", "fetch v0"],
        "{log:?}"
    );
    assert!(
        log[2].body.windows(9).any(|x| x == b"deepen 1\n"),
        "{log:?}"
    );
    assert!(
        !log[1..]
            .iter()
            .any(|e| String::from_utf8_lossy(&e.body).contains("command="))
    );

    // The same retries as over v2: two failed requests, then a pack cut off half-way.
    use SeqCst;
    srv.clear_log();
    srv.knobs.fail_next.store(2, SeqCst);
    srv.knobs.cut_post_after.store(300, SeqCst);
    srv.knobs.cut_posts.store(1, SeqCst);
    let run = restore(&w, &w.path("r"), &url, "r", &ids[1], &[]);
    run.assert_code(0);
    assert_restored(&w, &w.path("r"), "r", &ids[1]);
    assert_eq!(srv.knobs.cut_posts.load(SeqCst), 0, "the pack was cut once");
    assert!(srv.log().len() >= 5, "{:?}", srv.log());

    srv.clear_log();
    let run = restore(
        &w,
        &w.path("t"),
        &url,
        "t",
        &ids[1],
        &[("GIT_SESSION_PROTOCOL", "2")],
    );
    run.assert_code(5);
    assert!(
        run.stderr.contains("does not speak git protocol v2")
            && run.stderr.contains("GIT_SESSION_PROTOCOL=2"),
        "{}",
        run.stderr
    );
    assert_eq!(
        srv.requests(),
        ["ls-refs", "info/refs"],
        "a protocol error was retried"
    );
    let t = w.path("t");
    assert!(
        left_nothing(&t),
        "the refused restore wrote into the target"
    );

    let run = restore(
        &w,
        &w.path("u"),
        &url,
        "u",
        &ids[1],
        &[("GIT_SESSION_PROTOCOL", "3")],
    );
    run.assert_says(2, &["GIT_SESSION_PROTOCOL"]);
}

#[test]
fn unsafe_tree_entries_are_refused_and_nothing_is_written() {
    let w = World::new();
    fixture(&w);
    let bare = w.srv().join("repo.git");
    let blob = w.git_stdin(
        &bare,
        &["hash-object", "-w", "--stdin"],
        b"[core]\n\tfsmonitor = touch /tmp/pwned\n",
    );
    let hook = w.git_stdin(
        &bare,
        &["hash-object", "-w", "--stdin"],
        b"#!/bin/sh\ntouch /tmp/pwned\n",
    );
    let hooks_tree = w.literal_tree(&bare, &[("100755", b"post-checkout", &hook)]);
    let ok = ("100644", &b"fine.txt"[..], blob.as_str());
    type Entries<'a> = Vec<(&'a str, &'a [u8], &'a str)>;
    let cases: Vec<(&str, Entries)> = vec![
        ("dot-git", vec![ok, ("40000", b".git", &hooks_tree)]),
        ("dot-GIT", vec![("40000", b".GIT", &hooks_tree), ok]),
        ("git-tilde", vec![("40000", b"GIT~1", &hooks_tree), ok]),
        ("dotdot", vec![("100644", b"..", &blob), ok]),
        ("slash", vec![ok, ("100644", b"a/b", &blob)]),
        ("git-config", vec![("100644", b".git", &blob), ok]),
    ];
    let srv = GitServer::start(&w.srv(), None);
    for (name, entries) in cases {
        let commit = w.literal_commit("repo.git", &format!("evil/{name}"), &entries);
        let dir = w.path(&format!("s-{name}"));
        let run = restore(&w, &dir, &srv.url("repo.git", None), "s", &commit, &[]);
        run.assert_code(6);
        assert_eq!(run.json()["error"]["kind"], "integrity", "{name}");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{name}: left {left:?}");
    }
    // A nested `.git` below a folder, too.
    let sub = w.literal_tree(&bare, &[("40000", b".git", &hooks_tree)]);
    let commit = w.literal_commit("repo.git", "evil/nested", &[("40000", b"sub", &sub), ok]);
    let dir = w.path("s-nested");
    restore(&w, &dir, &srv.url("repo.git", None), "s", &commit, &[]).assert_code(6);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert!(!Path::new("/tmp/pwned").exists());
}

#[test]
fn tip_that_is_not_a_commit_is_an_integrity_error() {
    let w = World::new();
    fixture(&w);
    let bare = w.srv().join("repo.git");
    let tree = w.git(&bare, &["rev-parse", "main^{tree}"]);
    // Make the tree reachable so upload-pack serves it.
    w.git(&bare, &["tag", "a-tree", &tree]);
    let srv = GitServer::start(&w.srv(), None);
    let run = restore(
        &w,
        &w.path("s"),
        &srv.url("repo.git", None),
        "s",
        &tree,
        &[],
    );
    assert!(matches!(run.code, Some(6) | Some(8)), "{}", run.stderr);
}

#[test]
fn a_kill_at_every_failpoint_is_completed_by_the_next_run() {
    let s = Served::start(None);
    let Served { w, ids, .. } = &s;
    for point in [
        "after-staging",
        "mid-early-checkout",
        "after-fetch",
        "mid-checkout",
        "before-record",
        "after-publish",
    ] {
        let dir = w.path(&format!("s-{point}"));
        let run = s.restore(&dir, &ids[1], &[("GIT_SESSION_FAILPOINT", point)]);
        run.assert_killed_at(point);
        if point == "mid-checkout" {
            let written = all_files(&dir)
                .iter()
                .filter(|p| p.starts_with(dir.join("many")))
                .count();
            assert!(
                written > 0 && written < 24,
                "mid-checkout killed at {written} of 24 files"
            );
        }
        if point == "mid-early-checkout" {
            // Two files written whole as their blobs arrived, the third cut short by the kill:
            // the rerun must know it as the killed run's own.
            let written = all_files(&dir)
                .iter()
                .filter(|p| !p.starts_with(dir.join(restore_staging())))
                .count();
            assert_eq!(written, 3, "mid-early-checkout killed at {written} files");
        }
        if point != "after-publish" {
            // Not mistaken for a finished restore, by git or by git-session.
            assert!(
                !dir.join(".git").exists(),
                "{point}: .git exists after a kill"
            );
            let status = w.git_output(
                &dir,
                &["-C", dir.to_str().unwrap(), "rev-parse", "--git-dir"],
            );
            let shown = String::from_utf8_lossy(&status.stdout);
            assert!(
                !shown.contains(dir.to_str().unwrap()),
                "{point}: git sees a repository"
            );
        }
        let run = s.restore(&dir, &ids[1], &[]);
        run.assert_code(0);
        assert_eq!(run.json()["noop"], point == "after-publish", "{point}");
        assert_restored(w, &dir, "s", &ids[1]);
    }
}

#[test]
fn an_interrupted_restore_of_another_commit_is_a_conflict() {
    let s = Served::start(None);
    let Served { w, ids, url, .. } = &s;
    let dir = w.path("s");
    s.restore(&dir, &ids[1], &[("GIT_SESSION_FAILPOINT", "mid-checkout")]);
    s.restore(&dir, &ids[2], &[]).assert_code(7);
    let run = w.restore_with(&dir, url, "s", &ids[2], &["--force"], &[]);
    run.assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), ids[2]);
}

#[test]
fn secrets_never_reach_output_logs_or_files() {
    let s = Served::start(Some(TOKEN));
    let Served { w, ids, srv, url } = &s;
    let dir = w.path("s");
    let mut outputs = Vec::new();
    let trace = [("RUST_LOG", "trace")];
    for extra in [&trace[..], &[][..]] {
        let run = w.run(
            &dir,
            &["-vv", "restore"],
            &[
                &[
                    ("READ_URL", url.as_str()),
                    ("PUSH_URL", url.as_str()),
                    ("SESSION_BRANCH", "s"),
                    ("TIP_SHA", ids[1].as_str()),
                ][..],
                extra,
            ]
            .concat(),
        );
        outputs.push(run.stdout + &run.stderr);
    }
    // Failures: wrong token, missing commit, unreachable, credentials on argv.
    let bad = srv.url(
        "repo.git",
        Some(&format!(
            "{}x:{}",
            crate::support::USER,
            crate::support::pct(TOKEN)
        )),
    );
    for (u, sha) in [(&bad, &ids[0]), (url, &"cd".repeat(20))] {
        let run = w.run(
            &w.path("f"),
            &["-vv", "restore", "--json"],
            &[
                ("READ_URL", u),
                ("SESSION_BRANCH", "s"),
                ("TIP_SHA", sha),
                ("RUST_LOG", "trace"),
            ],
        );
        outputs.push(run.stdout + &run.stderr);
    }
    let run = w.run(
        &w.path("g"),
        &["restore", "--read-url", url],
        &[("SESSION_BRANCH", "s"), ("TIP_SHA", &ids[0])],
    );
    run.assert_code(2);
    outputs.push(run.stdout + &run.stderr);
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("DEBUG") || o.contains("TRACE")),
        "no logs were produced"
    );
    for o in &outputs {
        assert_no_secret("output", o.as_bytes());
    }
    for file in all_files(&dir) {
        assert_no_secret(&file.display().to_string(), &std::fs::read(&file).unwrap());
    }
}

#[test]
fn root_restore_hands_the_tree_to_the_directory_owner() {
    if !crate::support::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Served::start(None);
    let Served { w, ids, .. } = &s;
    let dir = w.path("owned");
    crate::support::give_to_nobody(&dir);
    s.restore(&dir, &ids[1], &[]).assert_code(0);
    crate::support::assert_all_nobodys(&dir);
    // git, run as that user, sees a clean tree and no dubious ownership.
    if let Ok(out) = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "git",
            "-C",
            dir.to_str().unwrap(),
            "status",
            "--porcelain",
        ])
        .env_clear()
        .envs(w.env())
        .env("HOME", "/nonexistent")
        .output()
    {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
    }
}

#[test]
fn a_stalled_read_times_out_and_is_retried() {
    let s = Served::start(None);
    let Served { w, ids, srv, .. } = &s;
    srv.knobs.stall_next.store(1, SeqCst);
    let dir = w.path("s");
    s.restore(&dir, &ids[1], &[("GIT_SESSION_READ_TIMEOUT_MS", "2000")])
        .assert_code(0);
    assert_restored(w, &dir, "s", &ids[1]);
    srv.knobs.stall_next.store(4, SeqCst);
    let run = s.restore(
        &w.path("t"),
        &ids[1],
        &[("GIT_SESSION_READ_TIMEOUT_MS", "2000")],
    );
    run.assert_says(5, &["no response head", "GIT_SESSION_READ_TIMEOUT_MS"]);
}

#[test]
fn a_pack_cut_mid_stream_is_fetched_again() {
    let s = Served::start(None);
    let Served { w, ids, srv, .. } = &s;
    let dir = w.path("s");
    // Cut one POST response after 300 bytes, mid-pack: the ls-refs answer is shorter and passes
    // whole, the pack of the first fetch is cut, the retry gets it whole.
    srv.knobs.cut_post_after.store(300, SeqCst);
    srv.knobs.cut_posts.store(1, SeqCst);
    s.restore(&dir, &ids[1], &[]).assert_code(0);
    assert_restored(w, &dir, "s", &ids[1]);
    let fetches = srv
        .log()
        .iter()
        .filter(|e| String::from_utf8_lossy(&e.body).contains("command=fetch"))
        .count();
    assert_eq!(fetches, 2, "the cut fetch was not retried once");
    // Cut every time: exit 5, nothing left behind.
    srv.knobs.cut_posts.store(100, SeqCst);
    let t = w.path("t");
    let run = s.restore(&t, &ids[1], &[]);
    run.assert_code(5);
    // The message names the cause under the pack parser's own words.
    assert!(
        run.stderr.contains("broke off") && run.stderr.contains("unexpected EOF"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_dir(&t).unwrap().count(), 0);
}

/// A pack damaged in transit (one byte inverted, the framing intact) is refused with exit 6 and
/// nothing written, and it is not fetched again: the server answered, the data is wrong.
#[test]
fn a_corrupt_pack_is_refused() {
    let s = Served::start(None);
    let Served { w, ids, srv, .. } = &s;
    srv.knobs.pack_flips.store(1, SeqCst);
    let dir = w.path("s");
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(6);
    let msg = run.json()["error"]["message"].to_string();
    assert!(msg.contains("is corrupt"), "{msg}");
    assert!(left_nothing(&dir), "files left: {msg}");
    let fetches = srv
        .log()
        .iter()
        .filter(|e| String::from_utf8_lossy(&e.body).contains("command=fetch"))
        .count();
    assert_eq!(fetches, 1, "a corrupt pack was fetched again");
    // The knob is spent: the same command now restores.
    s.restore(&dir, &ids[1], &[]).assert_code(0);
    assert_restored(w, &dir, "s", &ids[1]);
}

/// Data after the pack's checksum is refused (exit 6, nothing written), as `git index-pack` refuses
/// it: whether it came in the packet that ends the pack (and was read along with the checksum) or in
/// a packet of its own.
#[test]
fn data_after_the_pack_is_refused() {
    let s = Served::start(None);
    let Served { w, ids, srv, .. } = &s;
    *srv.knobs.pack_junk.lock().unwrap() = Some(vec![b'x'; 80]);
    for (own_packet, name) in [(false, "same-packet"), (true, "own-packet")] {
        srv.knobs.pack_junk_own_packet.store(own_packet, SeqCst);
        let dir = w.path(name);
        let run = s.restore(&dir, &ids[1], &[]);
        run.assert_code(6);
        let msg = run.json()["error"]["message"].to_string();
        assert!(msg.contains("after the end of the pack"), "{name}: {msg}");
        assert!(left_nothing(&dir), "{name}: files left");
    }
    // The same server without the junk: the restore works.
    *srv.knobs.pack_junk.lock().unwrap() = None;
    let dir = w.path("clean");
    s.restore(&dir, &ids[1], &[]).assert_code(0);
    assert_restored(w, &dir, "s", &ids[1]);
}

/// SPEC rule 1 for the other length: a 40-hex prefix of a SHA-256 commit is an abbreviation
/// there, a 64-hex id names nothing in a SHA-1 repository; both exit 2 after the capability
/// exchange, over v2 and v0, before any object is asked for, nothing written.
#[test]
fn an_id_of_the_other_format_is_refused_after_the_capability_exchange() {
    let w = World::new();
    let ids = fixture(&w);
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let tip = &ids[1];
    let other = if crate::support::hex_len() == 64 {
        tip[..40].to_owned()
    } else {
        format!("{tip}{}", &"ab".repeat(12))
    };
    let said = if crate::support::hex_len() == 64 {
        "a 40-digit id for a SHA-256 repository: give all 64 digits"
    } else {
        "a 64-digit (SHA-256) id for a SHA-1 repository"
    };
    for protocol in ["2", "0"] {
        srv.clear_log();
        let dir = w.path(&format!("v{protocol}"));
        let run = restore(
            &w,
            &dir,
            &url,
            "s",
            &other,
            &[("GIT_SESSION_PROTOCOL", protocol)],
        );
        run.assert_says(2, &[said, "TIP_SHA"]);
        assert!(
            !dir.exists() || left_nothing(&dir),
            "v{protocol}: {:?}",
            names_in(&dir)
        );
        let log = srv.log();
        assert!(
            !log.is_empty(),
            "v{protocol}: the capabilities were not asked for"
        );
        assert!(
            log.iter()
                .all(|e| !String::from_utf8_lossy(&e.body).contains("want ")),
            "v{protocol}: an object was asked for: {log:#?}"
        );
    }
}

#[test]
fn a_tree_entry_at_the_staging_folder_is_refused() {
    let w = World::new();
    fixture(&w);
    let bare = w.srv().join("repo.git");
    let hook = w.git_stdin(
        &bare,
        &["hash-object", "-w", "--stdin"],
        b"#!/bin/sh\ntouch /tmp/gs-staging-hook-ran\n",
    );
    let hooks = w.literal_tree(&bare, &[("100755", b"pre-commit", &hook)]);
    let staging = w.literal_tree(&bare, &[("40000", b"hooks", &hooks)]);
    let blob = w.git_stdin(&bare, &["hash-object", "-w", "--stdin"], b"fine\n");
    let commit = w.literal_commit(
        "repo.git",
        "evil/staging",
        &[
            ("40000", b".git-session-restore", &staging),
            ("100644", b"fine.txt", &blob),
        ],
    );
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("s");
    let run = restore(&w, &dir, &srv.url("repo.git", None), "s", &commit, &[]);
    run.assert_says(6, &[".git-session-restore"]);
    assert!(left_nothing(&dir));
    assert!(!Path::new("/tmp/gs-staging-hook-ran").exists());
}

/// A 96 MiB pack (incompressible 1 MiB blobs) restores in far less memory than the pack: its pages
/// are released from the mapping as the deltas are resolved and the blobs are checked out.
#[test]
fn a_large_pack_restores_with_bounded_memory() {
    let w = World::new();
    let scratch = w.scratch("scratch-big");
    std::fs::create_dir_all(scratch.join("blobs")).unwrap();
    let mut x: u64 = 0x2545F4914F6CDD1D;
    for i in 0..96 {
        let buf = incompressible(1 << 20, &mut x);
        std::fs::write(scratch.join(format!("blobs/{i:02}.bin")), buf).unwrap();
    }
    let sha = w.commit_all(&scratch, "big");
    w.serve_scratch(&scratch, "big.git");
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    let url = srv.url("big.git", None);
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/big"),
        ("TIP_SHA", sha.as_str()),
    ];
    let kib = git_session_peak_rss(&dir, w.env(), &vars, &["restore"]);
    eprintln!("peak RSS of restoring a 96 MiB pack: {kib} KiB");
    assert_restored(&w, &dir, "sessions/big", &sha);
    let pack_kib: u64 = std::fs::read_dir(dir.join(".git/objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum::<u64>()
        / 1024;
    assert!(pack_kib > 96 * 1024, "the pack is {pack_kib} KiB");
    // Without releasing, the checkout alone keeps the whole pack mapped (> 96 MiB).
    assert!(
        kib < 48 * 1024,
        "peak RSS {kib} KiB while restoring a {pack_kib} KiB pack"
    );
}

/// SPEC rule 6 for `--force` and for completing an interrupted restore: nothing is deleted, and a
/// rerun replaces only what the interrupted run wrote (a file it cut short included).
#[test]
fn forced_or_resumed_restores_delete_nothing_in_the_way() {
    let s = Served::start(None);
    let Served { w, ids, url, .. } = &s;
    let force = |dir: &Path| w.restore_with(dir, url, "s", &ids[1], &["--force", "--json"], &[]);
    // A restore of ids[1] into `dir` killed at failpoint `point`.
    let killed_at = |dir: &Path, point: &str| {
        s.restore(dir, &ids[1], &[("GIT_SESSION_FAILPOINT", point)])
            .assert_killed_at(point);
    };
    // A folder where the commit has a file, and a file where it has a folder: kept, exit 7.
    for (name, make) in [
        ("folder-for-file", "README.md/data"),
        ("file-for-folder", "bin"),
    ] {
        let dir = w.path(name);
        std::fs::create_dir_all(dir.join(make).parent().unwrap()).unwrap();
        std::fs::write(dir.join(make), "precious\n").unwrap();
        let run = force(&dir);
        run.assert_code(7);
        assert_eq!(read_text(dir.join(make)), "precious\n", "{name}");
        assert!(!dir.join(".git").exists(), "{name}");
        assert_eq!(all_files(&dir).len(), 1, "{name}: {:?}", all_files(&dir));
    }

    // Killed mid-checkout; then a person edits a file, and the kill had cut another one short.
    let dir = w.path("resume");
    killed_at(&dir, "mid-checkout");
    let written: Vec<_> = all_files(&dir)
        .into_iter()
        .filter(|p| p.starts_with(dir.join("many")))
        .collect();
    assert!(written.len() >= 2, "{written:?}");
    std::fs::write(&written[0], "user work\n").unwrap();
    std::fs::write(&written[1], "fil").unwrap(); // a prefix of "file NN\n"
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(7);
    let msg = run.error_message();
    assert!(
        msg.contains(written[0].to_str().unwrap()) && msg.contains("did not write"),
        "{msg}"
    );
    assert_eq!(read_text(&written[0]), "user work\n");
    // The refused rerun rebuilt the staging folder, with a new pack index; make it clearly later
    // than the cut-short file, as when the person takes a while: the killed checkout's start
    // must still be the one judged by.
    let pack_dir = dir.join(restore_staging()).join("objects/pack");
    for entry in std::fs::read_dir(&pack_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "idx") {
            // The owner may set the times through a read-only handle (futimens).
            let file = std::fs::File::open(&path).unwrap();
            file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(10))
                .unwrap();
        }
    }
    // Still an interrupted restore: once the edit is moved aside, the rerun completes it.
    std::fs::remove_file(&written[0]).unwrap();
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(0);
    assert_restored(w, &dir, "s", &ids[1]);

    // A file grown to 2 GiB (sparse) after the kill: longer than its blob, so neither it nor a
    // start of it, judged without reading it whole (it was read whole: the alloc-limit abort).
    let dir = w.path("resume-huge");
    killed_at(&dir, "mid-checkout");
    let grown = all_files(&dir)
        .into_iter()
        .find(|p| p.starts_with(dir.join("many")))
        .unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&grown)
        .unwrap();
    file.set_len(2 << 30).unwrap();
    drop(file);
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(7);
    assert!(
        run.error_message().contains(grown.to_str().unwrap()),
        "{}",
        run.stdout
    );
    assert_eq!(std::fs::metadata(&grown).unwrap().len(), 2 << 30);

    // A person's edit that only shortens a file (here: empties it), made after the kill, is not
    // mistaken for a file the kill cut short.
    let dir = w.path("resume-shortened");
    killed_at(&dir, "before-record");
    let readme = dir.join("README.md");
    let file = std::fs::File::create(&readme).unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(10))
        .unwrap();
    drop(file);
    let run = s.restore(&dir, &ids[1], &[]);
    run.assert_code(7);
    assert_eq!(std::fs::read(&readme).unwrap(), b"");

    // A git restore killed mid-checkout, with a file cut short, is completed by an archive
    // restore of the same commit.
    let dir = w.path("resume-by-archive");
    killed_at(&dir, "mid-checkout");
    let cut = all_files(&dir)
        .into_iter()
        .find(|p| p.starts_with(dir.join("many")))
        .unwrap();
    std::fs::write(&cut, "fi").unwrap();
    let archive = w.path("commit.tar.gz");
    w.git(
        &w.srv().join("repo.git"),
        &[
            "archive",
            "--format=tar.gz",
            &format!("--prefix=repo-{}/", ids[1]),
            "-o",
            archive.to_str().unwrap(),
            &ids[1],
        ],
    );
    let run = w.run(
        &dir,
        &["restore", "--json", "--archive", archive.to_str().unwrap()],
        &[("SESSION_BRANCH", "s"), ("TIP_SHA", &ids[1])],
    );
    run.assert_code(0);
    assert!(read_text(&cut).starts_with("file "));
}

/// Two restores of one folder at once (a boot script run twice): both start together (barrier
/// `before-lock`), the second waits for the first and then finds the work done; neither fails,
/// and the tree is exact.
#[test]
fn two_restores_of_one_folder_at_once_both_succeed() {
    let s = Served::start(None);
    let Served { w, ids, .. } = &s;
    let dir = w.path("twice");
    let barrier = w.path("barrier");
    let barrier_dir = barrier.to_str().unwrap();
    let vars = [
        ("GIT_SESSION_FAILPOINT", "before-lock"),
        ("GIT_SESSION_BARRIER_DIR", barrier_dir),
    ];
    let runs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| s.restore(&dir, &ids[1], &vars)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in &runs {
        run.assert_code(0);
    }
    let noops: Vec<bool> = runs.iter().map(|r| r.json()["noop"] == true).collect();
    assert_eq!(
        noops.iter().filter(|n| **n).count(),
        1,
        "exactly one restore did the work"
    );
    let waited = runs
        .iter()
        .filter(|r| r.stderr.contains("another restore of this folder"))
        .count();
    assert_eq!(
        waited,
        1,
        "{:?}",
        runs.iter().map(|r| &r.stderr).collect::<Vec<_>>()
    );
    assert_restored(w, &dir, "s", &ids[1]);
}

/// Submodules are not fetched yet (`--submodules` is issue 25's): a restore leaves each gitlink
/// an empty folder, as `git clone` without `--recurse-submodules` does, and says which.
#[test]
fn submodules_left_empty_are_named_in_a_warning() {
    let w = World::new();
    let scratch = w.scratch("with-gitlinks");
    std::fs::write(scratch.join("README.md"), "top\n").unwrap();
    std::fs::write(
        scratch.join(".gitmodules"),
        "[submodule \"a\"]\n\tpath = libs/a\n\turl = ../a.git\n",
    )
    .unwrap();
    let other = "1234567890123456789012345678901234567890";
    w.git(&scratch, &["add", "-A"]);
    for path in ["libs/a", "libs/b"] {
        w.git(
            &scratch,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{other},{path}"),
            ],
        );
    }
    // Not `commit_all`: its `add -A` drops gitlinks whose folders are absent.
    w.git(&scratch, &["commit", "-q", "-m", "two submodules"]);
    let tip = w.git(&scratch, &["rev-parse", "HEAD"]);
    assert_eq!(
        w.git(&scratch, &["ls-tree", "-r", "--name-only", &tip, "libs"]),
        "libs/a\nlibs/b"
    );
    w.serve_scratch(&scratch, "repo.git");
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("s");
    let run = restore(&w, &dir, &srv.url("repo.git", None), "s", &tip, &[]);
    run.assert_code(0);
    let warnings = run.json()["warnings"].clone();
    assert_eq!(warnings.as_array().map(Vec::len), Some(1), "{warnings}");
    let text = warnings[0].as_str().unwrap();
    assert!(
        text.starts_with("2 submodule(s) left as empty folders")
            && text.contains(": libs/a, libs/b;"),
        "{text}"
    );
    for path in ["libs/a", "libs/b"] {
        assert_eq!(
            std::fs::read_dir(dir.join(path)).unwrap().count(),
            0,
            "{path}"
        );
    }
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), tip);
}

/// A READ_URL with a query string: git-session uses it, `.git/config` never holds it (it may be
/// a secret), and the restore says plain git goes without it (it was dropped silently).
#[test]
fn a_read_url_query_is_used_never_written_and_said() {
    let s = Served::start(None);
    let dir = s.w.path("query");
    let url = format!("{}?sig=QUERYsecret99", s.url);
    let run =
        s.w.restore_with(&dir, &url, "s", &s.ids[1], &["--json"], &[]);
    run.assert_code(0);
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("query string"), "{warnings}");
    assert!(!warnings.contains("QUERYsecret99"), "{warnings}");
    let config = read_text(dir.join(".git/config"));
    assert!(!config.contains("QUERYsecret99"), "{config}");
}

crate::sha256_too!(
    restores_a_non_tip_commit_exactly,
    asks_for_one_ref_and_one_commit_over_protocol_v2,
    configures_origin_without_secrets_and_with_upstream,
    lease_is_zero_tip_or_tip_with_warning,
    depth_n_fetches_n_commits,
    rerun_on_the_same_session_is_a_no_op_that_touches_nothing,
    missing_commit_is_not_found_and_leaves_nothing,
    a_server_without_protocol_v2_is_fetched_from_over_v0_unless_v2_is_forced,
    a_kill_at_every_failpoint_is_completed_by_the_next_run,
    an_id_of_the_other_format_is_refused_after_the_capability_exchange,
);

/// A forced restore (no early checkout: everything is written after the transfer) of 600 files
/// in 12 folders is written by several threads, each a run of the index: every file is there with
/// its content, the conversions of the whole tree's `.gitattributes` applied in each thread (a
/// `eol=crlf` file at both ends of the index), and every index entry's stat data is that of its
/// file (`git diff-files` names no stat-dirty entry, without refreshing).
#[test]
fn a_checkout_after_the_transfer_written_by_several_threads_is_whole() {
    let w = World::new();
    // Over twice the fewest entries a checkout thread is given (4096), so two threads write.
    let mut files: Vec<(String, Option<String>)> = (0..8300)
        .map(|i| {
            (
                format!("d{:02}/f{i:04}.txt", i % 12),
                Some(format!("file {i}\n")),
            )
        })
        .collect();
    files.push((".gitattributes".into(), Some("*.crlf eol=crlf\n".into())));
    files.push(("a.crlf".into(), Some("a\nb\n".into())));
    files.push(("z/z.crlf".into(), Some("y\nz\n".into())));
    let commit: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_deref()))
        .collect();
    let ids = w.repo("repo.git", &[&commit]);
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("other.txt"), "kept\n").unwrap();
    let url = srv.url("repo.git", None);
    let run = w.restore_with(&dir, &url, "s", &ids[0], &["--force"], &[]);
    run.assert_code(0);
    for i in [0, 4149, 4150, 8299] {
        let path = dir.join(format!("d{:02}/f{i:04}.txt", i % 12));
        assert_eq!(read_text(&path), format!("file {i}\n"));
    }
    assert_eq!(read_text(dir.join("a.crlf")), "a\r\nb\r\n");
    assert_eq!(read_text(dir.join("z/z.crlf")), "y\r\nz\r\n");
    assert_eq!(w.git(&dir, &["diff-files", "--name-only"]), "");
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "?? other.txt");
    let listed = w.git(&dir, &["ls-files"]);
    assert_eq!(listed.lines().count(), 8303);
}

/// SIGKILL at a sweep of moments through a restore of 8300 files (written early by several
/// writers, the rest after the transfer by several threads), some converted by `eol=crlf`, some
/// named `filter=` (written early as they are), then a rerun: the tree is exactly the commit
/// (git's judgement: nothing modified, nothing untracked, no staging folder left).
#[test]
fn a_restore_killed_at_any_moment_is_completed_exactly_by_the_rerun() {
    let w = World::new();
    let mut files: Vec<(String, Option<String>)> = (0..8300)
        .map(|i| {
            (
                format!("d{:02}/f{i:04}.txt", i % 12),
                Some(format!("file {i}\n").repeat(1 + i % 50)),
            )
        })
        .collect();
    files.push((
        ".gitattributes".into(),
        Some("*.crlf text eol=crlf\n*.po filter=gettext\n".into()),
    ));
    for i in 0..40 {
        files.push((
            format!("c{}/x{i}.crlf", i % 4),
            Some("a\nb\n".repeat(i + 1)),
        ));
        files.push((
            format!("po/l{i}.po"),
            Some(format!("msgid {i}\n").repeat(100)),
        ));
    }
    let commit: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_deref()))
        .collect();
    let ids = w.repo("repo.git", &[&commit]);
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let started = std::time::Instant::now();
    w.restore_with(&w.path("whole"), &url, "s", &ids[0], &[], &[])
        .assert_code(0);
    let whole = started.elapsed();
    for round in 1..=5u32 {
        let dir = w.path(&format!("k{round}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
            .args(["restore", "--json"])
            .current_dir(&dir)
            .env_clear()
            .envs(w.env())
            .env("READ_URL", &url)
            .env("SESSION_BRANCH", "s")
            .env("TIP_SHA", &ids[0])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(whole * round / 6);
        let _ = child.kill();
        let _ = child.wait();
        let run = w.restore_with(&dir, &url, "s", &ids[0], &[], &[]);
        assert_eq!(
            run.code,
            Some(0),
            "round {round} (killed after {:?} of {whole:?}): {}\n{}",
            whole * round / 6,
            run.stdout,
            run.stderr
        );
        assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), ids[0]);
        assert_eq!(
            w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
            "",
            "round {round}"
        );
        assert_eq!(read_text(dir.join("c1/x1.crlf")), "a\r\nb\r\na\r\nb\r\n");
        assert!(!dir.join(".git-session-restore").exists(), "round {round}");
    }
}
