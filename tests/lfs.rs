//! Git LFS in `restore`: objects fetched from a real giftless server for a repository made with
//! the real git-lfs client, the result read by git with git-lfs; hostile LFS servers (wrong
//! content, an endless body, a redirect to another host); a kill mid-way completed by the rerun.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::support::lfs::{Giftless, Reply, Scripted, batch_answer, lfs_repo, oid};
use crate::support::{GitServer, Run, TOKEN, TestCa, World, incompressible, userinfo};

fn restore(w: &World, dir: &Path, url: &str, tip: &str, extra: &[(&str, &str)]) -> Run {
    w.restore_with(dir, url, "sessions/lfs", tip, &["--json"], extra)
}

/// Three LFS files (one executable, one in a folder) and a plain one.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    let mut seed = 7;
    vec![
        ("big.bin", incompressible(300_000, &mut seed)),
        ("assets/model.bin", incompressible(70_000, &mut seed)),
        ("tool.bin", b"#!/bin/sh\necho tool\n".to_vec()),
        ("README.md", b"plain\n".to_vec()),
    ]
}

pub(crate) fn make(w: &World, lfs_url: &str) -> (String, Vec<(&'static str, Vec<u8>)>) {
    let files = files();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, d)| (*p, d.as_slice())).collect();
    let (scratch, _) = lfs_repo(w, "lfs-scratch", lfs_url, &refs);
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        scratch.join("tool.bin"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let tip = w.commit_all(&scratch, "tool is executable");
    w.serve_scratch(&scratch, "repo.git");
    (tip, files)
}

fn object_path(dir: &Path, data: &[u8]) -> std::path::PathBuf {
    let id = oid(data);
    dir.join(".git/lfs/objects")
        .join(&id[..2])
        .join(&id[2..4])
        .join(&id)
}

#[test]
fn lfs_files_are_restored_from_a_real_lfs_server_and_read_clean_to_git_lfs() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, files) = make(&w, &lfs.url("org/repo"));
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let dir = w.path("s");
    let run = restore(&w, &dir, &srv.url("repo.git", Some(&userinfo())), &tip, &[]);
    run.assert_code(0);
    assert_eq!(run.json()["lfs_files"], 3);
    crate::support::assert_matches_schema(&run.json());
    // Right after the restore (its files as new as the index), status sees no change either.
    let status = w.run(&dir, &["status", "--json"], &[]);
    status.assert_code(0);
    assert_eq!(
        status.json()["changed"],
        serde_json::json!([]),
        "{}",
        status.stdout
    );
    for (path, data) in &files {
        assert_eq!(&std::fs::read(dir.join(path)).unwrap(), data, "{path}");
        if path.ends_with(".bin") {
            assert_eq!(&std::fs::read(object_path(&dir, data)).unwrap(), data);
        }
    }
    let mode = crate::support::mode_of(&dir.join("tool.bin"));
    assert_eq!(mode & 0o111, 0o111, "tool.bin is executable: {mode:o}");
    // git with git-lfs (configured by the restore alone: HOME's config is empty) sees no change,
    // and git-lfs finds every object it needs.
    assert_eq!(
        w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    w.git(&dir, &["lfs", "fsck"]);
    let listed = w.git(&dir, &["lfs", "ls-files"]);
    assert_eq!(
        listed.lines().filter(|l| l.contains(" * ")).count(),
        3,
        "{listed}"
    );
    // The LFS server is another origin than READ_URL: it never saw the token.
    assert!(!lfs.stderr().contains(TOKEN));
    // A change to an LFS file is a change to git, as with git-lfs's own checkout.
    std::fs::write(dir.join("big.bin"), b"changed").unwrap();
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), " M big.bin");
}

#[test]
fn lfs_never_leaves_the_pointer_files_and_fetches_nothing() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, files) = make(&w, &lfs.url("org/repo"));
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("s");
    let before = lfs.stderr().matches("objects/batch").count();
    let run = w.run(
        &dir,
        &["restore", "--json", "--lfs", "never"],
        &[
            ("READ_URL", &srv.url("repo.git", None)),
            ("SESSION_BRANCH", "sessions/lfs"),
            ("TIP_SHA", &tip),
        ],
    );
    run.assert_code(0);
    let text = std::fs::read_to_string(dir.join("big.bin")).unwrap();
    assert!(
        text.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:"),
        "{text}"
    );
    assert!(!dir.join(".git/lfs").exists());
    assert_eq!(lfs.stderr().matches("objects/batch").count(), before);
    assert_ne!(std::fs::read(dir.join("big.bin")).unwrap(), files[0].1);
}

#[test]
fn lfs_include_and_exclude_narrow_what_is_fetched() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, files) = make(&w, &lfs.url("org/repo"));
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("s");
    let run = restore(
        &w,
        &dir,
        &srv.url("repo.git", None),
        &tip,
        &[
            ("GIT_SESSION_LFS_INCLUDE", "assets,*.bin"),
            ("GIT_SESSION_LFS_EXCLUDE", "big.bin"),
        ],
    );
    run.assert_code(0);
    assert_eq!(
        std::fs::read(dir.join("assets/model.bin")).unwrap(),
        files[1].1
    );
    assert_eq!(std::fs::read(dir.join("tool.bin")).unwrap(), files[2].1);
    let big = std::fs::read_to_string(dir.join("big.bin")).unwrap();
    assert!(big.starts_with("version https://git-lfs"), "{big}");
}

#[test]
fn a_kill_mid_lfs_is_completed_by_the_rerun_which_fetches_only_what_is_missing() {
    for point in ["mid-lfs", "mid-smudge"] {
        let w = World::new();
        let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
        let (tip, files) = make(&w, &lfs.url("org/repo"));
        let srv = GitServer::start(&w.srv(), None);
        let dir = w.path("s");
        let url = srv.url("repo.git", None);
        let killed = restore(
            &w,
            &dir,
            &url,
            &tip,
            &[
                ("GIT_SESSION_FAILPOINT", point),
                ("GIT_SESSION_LFS_CONCURRENCY", "1"),
            ],
        );
        assert_eq!(killed.code, None, "{point}: killed\n{}", killed.stderr);
        assert!(!dir.join(".git").exists());
        let gets = |l: &Giftless| l.stderr().matches("GET /org/repo/objects/storage/").count();
        let before = gets(&lfs);
        restore(&w, &dir, &url, &tip, &[]).assert_code(0);
        for (path, data) in &files {
            assert_eq!(
                &std::fs::read(dir.join(path)).unwrap(),
                data,
                "{point}: {path}"
            );
        }
        assert_eq!(
            w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
            "",
            "{point}"
        );
        let again = gets(&lfs) - before;
        match point {
            // One object was whole when the kill came: the rerun fetched the other two.
            "mid-lfs" => assert_eq!((before, again), (1, 2), "{point}"),
            // All three were: none is fetched again.
            _ => assert_eq!((before, again), (3, 0), "{point}"),
        }
    }
}

/// An LFS server at `lfs`, for a repository whose `.lfsconfig` names it, served by git; returns
/// the restore's result and the target.
fn restore_against(w: &World, lfs_url: &str, data: &[u8]) -> (Run, std::path::PathBuf) {
    restore_against_with(w, lfs_url, data, &[])
}

fn restore_against_with(
    w: &World,
    lfs_url: &str,
    data: &[u8],
    env: &[(&str, &str)],
) -> (Run, std::path::PathBuf) {
    restore_files_against(w, lfs_url, &[("a.bin", data)], env)
}

/// A commit whose LFS files `files` (path, content) name objects only `lfs_url` serves, restored.
fn restore_files_against(
    w: &World,
    lfs_url: &str,
    files: &[(&str, &[u8])],
    env: &[(&str, &str)],
) -> (Run, std::path::PathBuf) {
    // The objects are not pushed anywhere real: the hostile server is the only LFS server.
    let scratch = w.scratch("hostile-lfs");
    std::fs::write(
        scratch.join(".gitattributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    std::fs::write(
        scratch.join(".lfsconfig"),
        format!("[lfs]\n\turl = {lfs_url}\n"),
    )
    .unwrap();
    for (path, data) in files {
        let pointer = format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
            oid(data),
            data.len()
        );
        std::fs::write(scratch.join(path), pointer).unwrap();
    }
    let tip = w.commit_all(&scratch, "a pointer");
    w.serve_scratch(&scratch, "repo.git");
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let dir = w.path("s");
    let run = restore(
        w,
        &dir,
        &srv.url("repo.git", Some(&userinfo())),
        &tip,
        &[&[("GIT_SESSION_RETRY_BASE_MS", "10")], env].concat(),
    );
    (run, dir)
}

/// Nothing of a refused LFS restore is outside the target, and no `.git` was published.
fn assert_refused(run: &Run, dir: &Path, code: i32, words: &str) {
    run.assert_code(code);
    let err = run.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(err.contains(words), "{err}");
    assert!(!dir.join(".git").exists());
    assert!(!err.contains(TOKEN) && !run.stderr.contains(TOKEN));
}

#[test]
fn an_lfs_server_sending_wrong_content_is_refused() {
    let w = World::new();
    let data = b"the real content\n".repeat(100);
    let evil = Scripted::start(|seen, port| {
        if seen.target.ends_with("/objects/batch") {
            return batch_answer(seen, &|oid| format!("http://127.0.0.1:{port}/o/{oid}"), &[]);
        }
        Reply::Full(200, vec![], b"the fake content\n".repeat(100))
    });
    let (run, dir) = restore_against(&w, &evil.url("org/repo"), &data);
    assert_refused(&run, &dir, 6, "sent content with SHA-256");
    let stored: Vec<_> = walk(&dir)
        .into_iter()
        .filter(|p| p.contains("lfs/objects"))
        .collect();
    assert!(stored.is_empty(), "{stored:?}");
    // The LFS server has another origin than READ_URL: no request carried the token.
    assert!(
        evil.requests()
            .iter()
            .all(|r| !r.head.contains("Authorization"))
    );
}

/// An LFS object's link to a server whose TLS certificate is refused (it chains to a CA this
/// machine does not trust): exit 5 at once naming GIT_SSL_CAINFO, never retried (the same
/// certificate is refused on every attempt; it was 4 attempts, ending "gave up after").
#[test]
fn an_lfs_link_to_a_server_whose_certificate_is_refused_is_not_retried() {
    let w = World::new();
    let ca = TestCa::new();
    let tls = GitServer::start_tls(&w.path("tls"), None, &ca);
    let base = tls.url("storage", None);
    assert!(base.starts_with("https://"));
    let lfs =
        Scripted::start(move |seen, _| batch_answer(seen, &|oid| format!("{base}/o/{oid}"), &[]));
    let (run, dir) = restore_against(&w, &lfs.url("org/repo"), b"the content\n");
    assert_refused(&run, &dir, 5, "TLS certificate of https://localhost:");
    assert!(run.stderr.contains("GIT_SSL_CAINFO"), "{}", run.stderr);
    assert!(!run.stderr.contains("gave up after"), "{}", run.stderr);
    assert!(!run.stderr.contains("retrying"), "{}", run.stderr);
}

#[test]
fn an_lfs_server_sending_an_endless_body_is_cut_at_the_pointer_s_size() {
    let w = World::new();
    let data = b"x".repeat(5000);
    let evil = Scripted::start(|seen, port| {
        if seen.target.ends_with("/objects/batch") {
            return batch_answer(seen, &|oid| format!("http://127.0.0.1:{port}/o/{oid}"), &[]);
        }
        Reply::Endless(u64::MAX / 2, b"x".repeat(64 << 10))
    });
    let started = std::time::Instant::now();
    let (run, dir) = restore_against(&w, &evil.url("org/repo"), &data);
    assert_refused(&run, &dir, 6, "sent more than the 5000 bytes");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn an_lfs_server_that_stalls_mid_object_is_cut_by_the_read_timeout_and_retried() {
    let w = World::new();
    let data = b"y".repeat(5000);
    let evil = Scripted::start(|seen, port| {
        if seen.target.ends_with("/objects/batch") {
            return batch_answer(seen, &|oid| format!("http://127.0.0.1:{port}/o/{oid}"), &[]);
        }
        Reply::Stall(5000, b"y".repeat(100))
    });
    let started = std::time::Instant::now();
    let (run, dir) = restore_against_with(
        &w,
        &evil.url("org/repo"),
        &data,
        &[("GIT_SESSION_READ_TIMEOUT_MS", "500")],
    );
    assert_refused(&run, &dir, 5, "broke off");
    // Four attempts (the SPEC's three retries), each cut at the read timeout, not the minute the
    // server holds the connection.
    let gets = evil.requests().iter().filter(|r| r.method == "GET").count();
    assert_eq!(gets, 4, "{gets} downloads");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn a_keep_alive_connection_the_server_closed_while_idle_costs_no_attempt() {
    // The server answers each object's first two downloads with 500 and closes connections idle
    // for 200 ms; the retries wait 500 ms and more. Four attempts ride out two 500s only if no
    // attempt is spent on a connection the server closed during the wait (a helper's trial found
    // the transfer threads sending on such connections).
    let w = World::new();
    let data = b"kept alive\n".repeat(500);
    let body = data.clone();
    let tries = Mutex::new(0u32);
    let lfs = Scripted::keeping_alive(Duration::from_millis(200), move |seen, port| {
        if seen.target.ends_with("/objects/batch") {
            return batch_answer(seen, &|oid| format!("http://127.0.0.1:{port}/o/{oid}"), &[]);
        }
        let mut n = tries.lock().unwrap();
        *n += 1;
        if *n <= 2 {
            return Reply::Full(500, vec![], b"boom".to_vec());
        }
        Reply::Full(200, vec![], body.clone())
    });
    let (run, dir) = restore_against_with(
        &w,
        &lfs.url("org/repo"),
        &data,
        &[("GIT_SESSION_RETRY_BASE_MS", "500")],
    );
    run.assert_code(0);
    assert_eq!(std::fs::read(dir.join("a.bin")).unwrap(), data);
    let gets = lfs.requests().iter().filter(|r| r.method == "GET").count();
    assert_eq!(gets, 3, "{gets} downloads reached the server");
}

#[test]
fn a_transfer_that_fails_for_good_ends_the_run_without_the_others_retries() {
    // One object is missing (404, not retried); the other stalls. The run ends with the 404's
    // exit 8 after the stalled attempt, not after all four (found by a helper's trial).
    let w = World::new();
    let (missing, stalled) = (b"missing\n".repeat(10), b"stalled\n".repeat(10));
    let gone = oid(&missing);
    let lfs = Scripted::start(move |seen, port| {
        if seen.target.ends_with("/objects/batch") {
            return batch_answer(seen, &|oid| format!("http://127.0.0.1:{port}/o/{oid}"), &[]);
        }
        if seen.target.ends_with(&gone) {
            return Reply::Full(404, vec![], b"gone".to_vec());
        }
        Reply::Stall(80, b"s".to_vec())
    });
    let (run, dir) = restore_files_against(
        &w,
        &lfs.url("org/repo"),
        &[("gone.bin", &missing), ("slow.bin", &stalled)],
        &[("GIT_SESSION_READ_TIMEOUT_MS", "1000")],
    );
    assert_refused(&run, &dir, 8, "does not have LFS object");
    let slow = oid(&stalled);
    let tries = lfs
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.target.ends_with(&slow))
        .count();
    assert!(tries <= 2, "the stalled object was tried {tries} times");
}

#[test]
fn a_redirect_to_another_host_carries_neither_the_action_s_headers_nor_the_token() {
    let w = World::new();
    let data = b"stored elsewhere\n".repeat(300);
    let body = data.clone();
    let storage = Scripted::start(move |_, _| Reply::Full(200, vec![], body.clone()));
    let storage_url = storage.url("bucket");
    let lfs = Scripted::start(move |seen, port| {
        if seen.target.ends_with("/objects/batch") {
            return batch_answer(
                seen,
                &|oid| format!("http://127.0.0.1:{port}/o/{oid}"),
                &[
                    ("Authorization", "Bearer lfs-action-secret"),
                    ("X-Extra", "lfs-extra-secret"),
                ],
            );
        }
        Reply::Full(
            302,
            vec![(
                "Location".into(),
                format!("{storage_url}/{}", &seen.target[3..]),
            )],
            vec![],
        )
    });
    let (run, dir) = restore_against(&w, &lfs.url("org/repo"), &data);
    run.assert_code(0);
    assert_eq!(std::fs::read(dir.join("a.bin")).unwrap(), data);
    // The LFS server's own link got its headers; the other host got none of them.
    let first = lfs.requests();
    assert!(
        first
            .iter()
            .any(|r| r.method == "GET" && r.head.contains("lfs-action-secret"))
    );
    let moved = storage.requests();
    assert_eq!(moved.len(), 1);
    for secret in [
        "lfs-action-secret",
        "lfs-extra-secret",
        TOKEN,
        "Authorization",
    ] {
        assert!(
            !moved[0].head.contains(secret),
            "{secret} reached the other host:\n{}",
            moved[0].head
        );
    }
}

fn walk(dir: &Path) -> Vec<String> {
    crate::support::all_files(dir)
        .into_iter()
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn save_stores_changed_lfs_files_as_pointers_and_uploads_their_objects_before_the_push() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, _) = make(&w, &lfs.url("org/repo"));
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let url = srv.url("repo.git", Some(&userinfo()));
    let dir = w.path("s");
    restore(&w, &dir, &url, &tip, &[]).assert_code(0);
    let mut seed = 99;
    let changed = incompressible(120_000, &mut seed);
    let added = incompressible(80_000, &mut seed);
    std::fs::write(dir.join("big.bin"), &changed).unwrap();
    std::fs::create_dir_all(dir.join("new")).unwrap();
    std::fs::write(dir.join("new/added.bin"), &added).unwrap();
    std::fs::write(dir.join("notes.txt"), "not lfs\n").unwrap();
    let run = w.run(
        &dir,
        &["save", "-m", "lfs edits", "--json"],
        &[("PUSH_URL", &url)],
    );
    run.assert_code(0);
    let commit = run.json()["commit"].as_str().unwrap().to_owned();
    let bare = w.srv().join("repo.git");
    // On the server: pointers in the commit, the objects in the LFS store.
    for (path, data) in [("big.bin", &changed), ("new/added.bin", &added)] {
        let blob = w.git(&bare, &["show", &format!("{commit}:{path}")]);
        let id = oid(data);
        assert_eq!(
            blob,
            format!(
                "version https://git-lfs.github.com/spec/v1\noid sha256:{id}\nsize {}",
                data.len()
            ),
            "{path}"
        );
        assert_eq!(
            &std::fs::read(lfs.store.join("org/repo").join(&id)).unwrap(),
            data,
            "{path}"
        );
    }
    assert_eq!(
        w.git(&bare, &["show", &format!("{commit}:notes.txt")]),
        "not lfs"
    );
    assert_eq!(
        w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert!(!dir.join(".git/lfs/git-session-pending").exists());
    // A fresh restore of the pushed commit gets the new content back.
    let fresh = w.path("fresh");
    restore(&w, &fresh, &url, &commit, &[]).assert_code(0);
    assert_eq!(std::fs::read(fresh.join("new/added.bin")).unwrap(), added);
    assert!(!lfs.stderr().contains(TOKEN));
}

#[test]
fn a_push_whose_lfs_upload_fails_pushes_nothing_and_the_next_save_uploads_it() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, _) = make(&w, &lfs.url("org/repo"));
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let dir = w.path("s");
    restore(&w, &dir, &url, &tip, &[]).assert_code(0);
    let data = b"new lfs content\n".repeat(500);
    std::fs::write(dir.join("big.bin"), &data).unwrap();
    // The work tree's .lfsconfig names a server that is not there: the upload fails first.
    let lfsconfig = std::fs::read_to_string(dir.join(".lfsconfig")).unwrap();
    std::fs::write(
        dir.join(".lfsconfig"),
        "[lfs]\n\turl = http://127.0.0.1:9/org/repo\n",
    )
    .unwrap();
    let run = w.run(
        &dir,
        &["save", "-m", "m", "--json"],
        &[("PUSH_URL", &url), ("GIT_SESSION_RETRY_BASE_MS", "10")],
    );
    run.assert_code(5);
    let bare = w.srv().join("repo.git");
    let branch = w.git_output(
        &bare,
        &["rev-parse", "--verify", "-q", "refs/heads/sessions/lfs"],
    );
    assert!(!branch.status.success(), "nothing was pushed");
    assert!(dir.join(".git/lfs/git-session-pending").exists());
    let status = w.run(&dir, &["status", "--json"], &[]);
    status.assert_code(0);
    assert_eq!(status.json()["lfs_pending"], 1);
    crate::support::assert_matches_schema(&status.json());
    // Plain git push is held back too: its pointers' objects are not on the LFS server.
    let plain = w.git_output(&dir, &["push", "origin", "HEAD"]);
    assert!(!plain.status.success());
    let said = String::from_utf8_lossy(&plain.stderr);
    assert!(said.contains("are not on the LFS server yet"), "{said}");
    std::fs::write(dir.join(".lfsconfig"), lfsconfig).unwrap();
    let again = w.run(&dir, &["save", "-m", "m2", "--json"], &[("PUSH_URL", &url)]);
    again.assert_code(0);
    assert_eq!(
        std::fs::read(lfs.store.join("org/repo").join(oid(&data))).unwrap(),
        data
    );
    assert!(!dir.join(".git/lfs/git-session-pending").exists());
}

/// A pending LFS object gone from `.git/lfs/objects` before its push: when the LFS server lacks it
/// too, exit 7 saying to put the content back (it suggested `git lfs push --all origin`, which
/// cannot upload what is gone either); when the server has it already, the push goes on (the
/// batch API is asked first).
#[test]
fn a_pending_lfs_object_gone_locally_is_asked_for_before_it_is_missed() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, _) = make(&w, &lfs.url("org/repo"));
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let dir = w.path("s");
    restore(&w, &dir, &url, &tip, &[]).assert_code(0);
    let data = b"content gone before its push\n".repeat(300);
    std::fs::write(dir.join("big.bin"), &data).unwrap();
    w.run(&dir, &["save", "--no-push", "-m", "m", "--json"], &[])
        .assert_code(0);
    let id = oid(&data);
    let local = dir
        .join(".git/lfs/objects")
        .join(&id[..2])
        .join(&id[2..4])
        .join(&id);
    std::fs::remove_file(&local).unwrap();
    let run = w.run(&dir, &["push", "--json"], &[("PUSH_URL", &url)]);
    run.assert_says(7, &["is gone from .git/lfs/objects", "does not have it"]);
    assert!(!run.stderr.contains("git lfs push"), "{}", run.stderr);
    // The server has it (another sandbox uploaded the same content): nothing to upload, pushed.
    let stored = lfs.store.join("org/repo").join(&id);
    std::fs::create_dir_all(stored.parent().unwrap()).unwrap();
    std::fs::write(&stored, &data).unwrap();
    w.run(&dir, &["push", "--json"], &[("PUSH_URL", &url)])
        .assert_code(0);
    assert!(!dir.join(".git/lfs/git-session-pending").exists());
}

#[test]
fn an_archive_restore_fetches_the_lfs_files_too() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let (tip, files) = make(&w, &lfs.url("org/repo"));
    let scratch = w.tmp.path().join("lfs-scratch");
    // As a forge serves it: pointer files (git archive would run git-lfs's smudge filter).
    let archive = w.path("lfs.tar.gz");
    w.git_with_env(
        &scratch,
        &[
            "archive",
            "--format=tar.gz",
            &format!("--output={}", archive.display()),
            &tip,
        ],
        &[("GIT_LFS_SKIP_SMUDGE", "1")],
    );
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("s");
    let run = w.run(
        &dir,
        &["restore", "--json", "--archive", archive.to_str().unwrap()],
        &[
            ("READ_URL", &srv.url("repo.git", None)),
            ("SESSION_BRANCH", "sessions/lfs"),
            ("TIP_SHA", &tip),
        ],
    );
    run.assert_code(0);
    assert_eq!(run.json()["lfs_files"], 3);
    for (path, data) in &files {
        assert_eq!(&std::fs::read(dir.join(path)).unwrap(), data, "{path}");
    }
    assert_eq!(
        w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    w.git(&dir, &["lfs", "fsck"]);
}

#[test]
fn a_bake_holds_the_lfs_content_and_a_boot_fetches_only_the_changed_files() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let lfs_url = lfs.url("org/repo");
    let (base, files) = make(&w, &lfs_url);
    let scratch = w.tmp.path().join("lfs-scratch");
    let mut seed = 5;
    let changed = incompressible(90_000, &mut seed);
    std::fs::write(scratch.join("big.bin"), &changed).unwrap();
    std::fs::write(scratch.join("added.bin"), b"added lfs file\n").unwrap();
    let tip = w.commit_all(&scratch, "change one, add one");
    w.git(&scratch, &["lfs", "push", "--all", &lfs_url]);
    let bare = w.srv().join("repo.git");
    w.git(&scratch, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let dir = w.path("s");
    w.run(
        &dir,
        &["bake", "--json"],
        &[("READ_URL", url.as_str()), ("TIP_SHA", base.as_str())],
    )
    .assert_code(0);
    assert_eq!(
        std::fs::read(dir.join("big.bin")).unwrap(),
        files[0].1,
        "baked with content"
    );
    let gets = |l: &Giftless| l.stderr().matches("GET /org/repo/objects/storage/").count();
    // A tampered template: the changed file's object planted in its LFS store, wrong content of the
    // right size. The boot must not take it.
    let id = oid(&changed);
    let planted = dir
        .join(".git/lfs/objects")
        .join(&id[..2])
        .join(&id[2..4])
        .join(&id);
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    std::fs::write(&planted, vec![b'x'; changed.len()]).unwrap();
    let before = gets(&lfs);
    restore(&w, &dir, &url, &tip, &[]).assert_code(0);
    assert_eq!(std::fs::read(dir.join("big.bin")).unwrap(), changed);
    assert_eq!(
        std::fs::read(dir.join("added.bin")).unwrap(),
        b"added lfs file\n"
    );
    assert_eq!(
        std::fs::read(dir.join("assets/model.bin")).unwrap(),
        files[1].1
    );
    assert_eq!(
        gets(&lfs) - before,
        2,
        "only the changed and the added object"
    );
    assert_eq!(
        w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    w.git(&dir, &["lfs", "fsck"]);
}

/// Whether `path` holds an LFS pointer rather than content.
fn is_pointer(path: &Path) -> bool {
    std::fs::read(path)
        .unwrap()
        .starts_with(b"version https://git-lfs.github.com/spec/v1\n")
}

/// `GIT_SESSION_LFS_INCLUDE` / `_EXCLUDE` select exactly the files the real `git lfs pull -I -X`
/// selects (git-lfs 3; issue 38, part 3): a pattern without a `/` matches a name at any depth
/// (`*.bin`, `x.bin`, `assets`, a folder `a.bin`), one with a `/` is read from the top, a
/// folder takes what is below it, `*` stays within a folder and `**` does not. Before, every
/// pattern was read from the top (`*.bin` took only `top.bin`), and a pattern that matched
/// nothing said nothing: now it is one warning naming it.
#[test]
fn lfs_include_and_exclude_select_what_git_lfs_pull_selects() {
    let w = World::new();
    let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
    let paths = [
        "top.bin",
        "assets/x.bin",
        "assets/sub/y.bin",
        "docs/assets/z.bin",
        "data/a.bin/inner.bin",
        "deep/a/b/c.bin",
    ];
    let files: Vec<(&str, Vec<u8>)> = paths
        .iter()
        .map(|p| (*p, format!("content of {p}\n").into_bytes()))
        .collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, d)| (*p, d.as_slice())).collect();
    let (scratch, tip) = lfs_repo(&w, "lfs-scratch", &lfs.url("org/repo"), &refs);
    w.serve_scratch(&scratch, "repo.git");
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let cases: &[(&str, &str)] = &[
        ("*.bin", ""),
        ("assets", ""),
        ("assets/", ""),
        ("/assets", ""),
        ("assets/*", ""),
        ("**/assets", ""),
        ("docs/assets", ""),
        ("x.bin", ""),
        ("a.bin", ""),
        ("deep/a", ""),
        ("a/b", ""),
        ("sub", ""),
        ("*/sub", ""),
        ("/*.bin", ""),
        ("deep/**/c.bin", ""),
        ("[ab]", ""),
        ("", "assets"),
        ("*.bin", "assets/sub"),
        ("assets, docs", "z.bin"),
        ("nope,top.bin", ""),
    ];
    for (i, (include, exclude)) in cases.iter().enumerate() {
        let what = format!("-I {include:?} -X {exclude:?}");
        // git-lfs: a clone without the smudge filter, then `git lfs pull -I -X`.
        let reference = w.tmp.path().join(format!("ref{i}"));
        let clone = [
            "clone",
            "-q",
            scratch.to_str().unwrap(),
            reference.to_str().unwrap(),
        ];
        w.git_with_env(w.tmp.path(), &clone, &[("GIT_LFS_SKIP_SMUDGE", "1")]);
        w.git(&reference, &["lfs", "install", "--local"]);
        let mut pull = vec!["lfs", "pull"];
        if !include.is_empty() {
            pull.extend(["-I", include]);
        }
        if !exclude.is_empty() {
            pull.extend(["-X", exclude]);
        }
        w.git(&reference, &pull);
        let dir = w.path(&format!("s{i}"));
        let run = restore(
            &w,
            &dir,
            &url,
            &tip,
            &[
                ("GIT_SESSION_LFS_INCLUDE", include),
                ("GIT_SESSION_LFS_EXCLUDE", exclude),
            ],
        );
        run.assert_code(0);
        let fetched = |d: &Path| -> Vec<&str> {
            paths
                .iter()
                .copied()
                .filter(|p| !is_pointer(&d.join(p)))
                .collect()
        };
        let ours = fetched(&dir);
        assert_eq!(ours, fetched(&reference), "{what}");
        assert_eq!(run.json()["lfs_files"], ours.len(), "{what}");
        let warnings = run.json()["warnings"].to_string();
        // Patterns that select nothing, for git-lfs as for us.
        let unmatched = ["a/b", "nope,top.bin"].contains(include);
        assert_eq!(
            warnings.contains("matched none"),
            unmatched,
            "{what}: {warnings}"
        );
        if unmatched {
            let named = format!(
                "GIT_SESSION_LFS_INCLUDE: '{}'",
                include.split(',').next().unwrap()
            );
            assert!(warnings.contains(&named), "{warnings}");
            assert_eq!(
                run.stderr.matches("matched none").count(),
                1,
                "{}",
                run.stderr
            );
        }
    }
}

/// Answers no retry can change are exit 6, not 5 (which tells a backend to try again): a batch
/// answer claiming 2^40 bytes for a 3,000-byte pointer (asked once, never retried), and a
/// `.lfsconfig` whose `lfs.url` is not http(s). Each says what to do.
#[test]
fn lfs_answers_no_retry_can_change_are_exit_6() {
    let w = World::new();
    let data = incompressible(3000, &mut 11);
    let liar = Scripted::start(|seen, port| {
        let request: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
        let objects: Vec<serde_json::Value> = request["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let oid = o["oid"].as_str().unwrap();
                let href = format!("http://127.0.0.1:{port}/o/{oid}");
                serde_json::json!({"oid": oid, "size": 1u64 << 40,
                    "actions": {"download": {"href": href}}})
            })
            .collect();
        let body = serde_json::json!({"transfer": "basic", "objects": objects});
        Reply::Full(
            200,
            vec![("Content-Type".into(), "application/vnd.git-lfs+json".into())],
            serde_json::to_vec(&body).unwrap(),
        )
    });
    let (run, dir) = restore_against(&w, &liar.url("org/repo"), &data);
    assert_refused(
        &run,
        &dir,
        6,
        "1099511627776 bytes where the pointer says 3000",
    );
    assert!(run.stderr.contains("--lfs=never"), "{}", run.stderr);
    let batches = liar
        .requests()
        .iter()
        .filter(|r| r.target.ends_with("/objects/batch"))
        .count();
    assert_eq!(batches, 1, "asked again where no retry can help");

    for url in ["file:///etc/lfs", "ssh://git@127.0.0.1/org/repo"] {
        let w = World::new();
        let (run, dir) = restore_against(&w, url, &data);
        assert_refused(&run, &dir, 6, "lfs.url");
        assert!(
            run.stderr.contains("http(s) URL in .lfsconfig"),
            "{url}: {}",
            run.stderr
        );
    }
}

crate::sha256_too!(
    lfs_files_are_restored_from_a_real_lfs_server_and_read_clean_to_git_lfs,
    lfs_never_leaves_the_pointer_files_and_fetches_nothing,
    lfs_include_and_exclude_narrow_what_is_fetched,
    a_kill_mid_lfs_is_completed_by_the_rerun_which_fetches_only_what_is_missing,
    a_bake_holds_the_lfs_content_and_a_boot_fetches_only_the_changed_files,
);
