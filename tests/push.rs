//! `push` against a real git http-backend: fast-forward only, the lease, report-status, faults.
//! Commits are made with plain git here; `save`'s staging is tested in `save.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::support::wire::{band, pkt};
use crate::support::{
    GitServer, Run, TOKEN, World, git_session_peak_rss, incompressible, userinfo, zero_id,
};

/// A server with `repo.git` (two commits, `ids`) and sandboxes restored from it.
pub(crate) struct Setup {
    pub(crate) w: World,
    pub(crate) srv: GitServer,
    pub(crate) ids: Vec<String>,
}

impl Setup {
    pub(crate) fn new() -> Self {
        let w = World::new();
        let ids = w.repo(
            "repo.git",
            &[
                &[
                    ("README.md", Some("one\n")),
                    ("src/a.rs", Some("a\n")),
                    ("run.sh", Some("#!/bin/sh\n")),
                ],
                &[("README.md", Some("two\n")), ("link", Some("->README.md"))],
            ],
        );
        let srv = GitServer::start(&w.srv(), Some(TOKEN));
        Setup { w, srv, ids }
    }

    pub(crate) fn url(&self) -> String {
        self.srv.url("repo.git", Some(&userinfo()))
    }

    pub(crate) fn bare(&self) -> PathBuf {
        self.w.srv().join("repo.git")
    }

    /// Restore `branch` at `tip` into a new sandbox `name`.
    pub(crate) fn sandbox(&self, name: &str, branch: &str, tip: &str) -> PathBuf {
        let dir = self.w.path(name);
        self.w
            .restore_with(&dir, &self.url(), branch, tip, &[], &[])
            .assert_code(0);
        dir
    }

    pub(crate) fn commit(&self, dir: &Path, file: &str, content: &str) -> String {
        std::fs::write(dir.join(file), content).unwrap();
        self.w.git(dir, &["add", "-A"]);
        self.w.git(dir, &["commit", "-qm", &format!("edit {file}")]);
        self.w.git(dir, &["rev-parse", "HEAD"])
    }

    pub(crate) fn push(&self, dir: &Path, extra: &[(&str, &str)]) -> Run {
        let url = self.url();
        let mut vars = vec![("PUSH_URL", url.as_str())];
        vars.extend_from_slice(extra);
        self.w.run(dir, &["push", "--json"], &vars)
    }

    pub(crate) fn remote(&self, branch: &str) -> Option<String> {
        let out = self.w.git_output(
            &self.bare(),
            &[
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}"),
            ],
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// A person's plain `git push origin HEAD:refs/heads/<branch>`, with the token.
    pub(crate) fn git_push(&self, dir: &Path, branch: &str) {
        let refspec = format!("HEAD:refs/heads/{branch}");
        self.w.git_auth(dir, &["push", "-q", "origin", &refspec]);
    }

    /// `status --remote --json` in `dir`.
    pub(crate) fn remote_status(&self, dir: &Path) -> Run {
        self.w.run(
            dir,
            &["status", "--remote", "--json"],
            &[("READ_URL", &self.url())],
        )
    }

    /// `status --remote --json`'s `remote_state` (exit 0 checked).
    #[track_caller]
    pub(crate) fn remote_state(&self, dir: &Path) -> String {
        let run = self.remote_status(dir);
        run.assert_code(0);
        run.json()["remote_state"].as_str().unwrap().to_owned()
    }

    pub(crate) fn lease(&self, dir: &Path) -> String {
        let rec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(".git/git-session.json")).unwrap())
                .unwrap();
        rec["lease"].as_str().unwrap().to_owned()
    }

    pub(crate) fn posts(&self) -> usize {
        self.srv.receive_pack_posts().len()
    }
}

/// About 200 KB of text that compresses poorly: over the size sent in one piece.
fn big_text() -> String {
    (0..40_000)
        .map(|i| format!("{:x}", i * 2654435761u64 % 1_000_003))
        .collect()
}

/// Commit `origin` as it is, serve it as `repo.git`, and restore that commit on `branch` into
/// sandbox `s`: the bare repository, the server, the URL and the sandbox.
fn serve_and_restore(
    w: &World,
    origin: &Path,
    branch: &str,
) -> (PathBuf, GitServer, String, PathBuf) {
    let tip = w.commit_all(origin, "base");
    let bare = w.serve_scratch(origin, "repo.git");
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let url = srv.url("repo.git", Some(&userinfo()));
    let dir = w.path("s");
    w.restore_with(&dir, &url, branch, &tip, &[], &[])
        .assert_code(0);
    (bare, srv, url, dir)
}

#[test]
fn creates_the_branch_and_fast_forwards_it() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/a", &s.ids[0]);
    let c1 = s.commit(&dir, "new.txt", "new\n");
    let run = s.push(&dir, &[]);
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["ok"], true);
    assert_eq!(j["command"], "push");
    assert_eq!(j["branch"], "sessions/a");
    assert_eq!(j["tip"], c1.as_str());
    assert_eq!(j["previous_tip"], zero_id());
    assert_eq!(j["pushed"], true);
    assert_eq!(s.remote("sessions/a").as_deref(), Some(c1.as_str()));
    assert_eq!(s.lease(&dir), c1);
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
    // The pushed tree is the local tree.
    assert_eq!(
        s.w.git(&s.bare(), &["rev-parse", "sessions/a^{tree}"]),
        s.w.git(&dir, &["rev-parse", "HEAD^{tree}"])
    );
    // A second commit fast-forwards from the new lease.
    let c2 = s.commit(&dir, "README.md", "edited\n");
    let j = s.push(&dir, &[]).json();
    assert_eq!(j["previous_tip"], c1.as_str());
    assert_eq!(j["tip"], c2.as_str());
    assert_eq!(s.remote("sessions/a").as_deref(), Some(c2.as_str()));
    // Nothing new: success, nothing uploaded.
    let before = s.posts();
    let j = s.push(&dir, &[]).json();
    assert_eq!(j["pushed"], false);
    assert_eq!(j["tip"], c2.as_str());
    assert_eq!(s.posts(), before);
    // Upstream tracking follows.
    assert_eq!(s.w.git(&dir, &["rev-parse", "origin/sessions/a"]), c2);
    assert_eq!(s.w.git(&dir, &["status", "--porcelain"]), "");
}

#[test]
fn a_stale_lease_is_exit_3_and_nothing_is_uploaded() {
    let s = Setup::new();
    s.w.git(&s.bare(), &["branch", "sessions/s", &s.ids[0]]);
    let a = s.sandbox("a", "sessions/s", &s.ids[0]);
    let b = s.sandbox("b", "sessions/s", &s.ids[0]);
    let cb = s.commit(&b, "b.txt", "from b\n");
    s.push(&b, &[]).assert_code(0);
    let ca = s.commit(&a, "a.txt", "from a\n");
    let before = s.posts();
    let run = s.push(&a, &[]);
    run.assert_code(3);
    let j = run.json();
    assert_eq!(j["error"]["kind"], "stale");
    assert_eq!(j["lease"], s.ids[0].as_str());
    assert_eq!(j["remote_tip"], cb.as_str());
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&s.ids[0]) && msg.contains(&cb), "{msg}");
    assert_eq!(s.posts(), before, "a stale push uploaded");
    assert_eq!(s.remote("sessions/s").as_deref(), Some(cb.as_str()));
    assert_eq!(
        s.w.git(&a, &["rev-parse", "HEAD"]),
        ca,
        "the local commit was lost"
    );
    assert_eq!(s.lease(&a), s.ids[0]);
}

#[test]
fn a_branch_created_behind_a_zero_lease_is_stale() {
    let s = Setup::new();
    let a = s.sandbox("a", "sessions/z", &s.ids[1]);
    assert_eq!(s.lease(&a), zero_id());
    s.w.git(&s.bare(), &["branch", "sessions/z", &s.ids[0]]);
    s.commit(&a, "x", "x\n");
    let run = s.push(&a, &[]);
    run.assert_code(3);
    assert_eq!(run.json()["lease"], zero_id());
    assert_eq!(s.remote("sessions/z").as_deref(), Some(s.ids[0].as_str()));
}

#[test]
fn rewritten_local_history_is_a_conflict_before_upload() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/r", &s.ids[1]);
    let c1 = s.commit(&dir, "f", "1\n");
    s.push(&dir, &[]).assert_code(0);
    s.w.git(&dir, &["commit", "-q", "--amend", "-m", "rewritten"]);
    let before = s.posts();
    let run = s.push(&dir, &[]);
    run.assert_code(7);
    assert_eq!(run.json()["error"]["kind"], "conflict");
    assert_eq!(s.posts(), before);
    assert_eq!(s.remote("sessions/r").as_deref(), Some(c1.as_str()));
}

#[test]
fn a_plain_git_push_from_this_tree_advances_the_lease() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/p", &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    s.push(&dir, &[]).assert_code(0);
    // To the URL: git records nothing of it, so the next push learns it from the remote and says so.
    let c2 = s.commit(&dir, "f", "2\n");
    s.w.git_auth(
        &dir,
        &["push", "-q", &s.url(), "HEAD:refs/heads/sessions/p"],
    );
    assert_eq!(s.remote("sessions/p").as_deref(), Some(c2.as_str()));
    let c3 = s.commit(&dir, "f", "3\n");
    let run = s.push(&dir, &[]);
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["tip"], c3.as_str());
    assert_eq!(j["previous_tip"], c2.as_str());
    let warning = j["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("lease advances"), "{j}");
    assert_eq!(s.remote("sessions/p").as_deref(), Some(c3.as_str()));
    assert_eq!(s.lease(&dir), c3);
    // To `origin`: git moved refs/remotes/origin/sessions/p, so git-session knows it landed
    // and the next push goes on from it plainly, with no warning.
    let c4 = s.commit(&dir, "f", "4\n");
    s.git_push(&dir, "sessions/p");
    let c5 = s.commit(&dir, "f", "5\n");
    let j = s.push(&dir, &[]).json();
    assert_eq!(
        (j["tip"].as_str(), j["previous_tip"].as_str()),
        (Some(c5.as_str()), Some(c4.as_str())),
        "{j}"
    );
    assert_eq!(j["warnings"], serde_json::json!([]), "{j}");
    assert_eq!(s.remote("sessions/p").as_deref(), Some(c5.as_str()));
    // Pushed entirely by plain git: push reports success without uploading, and no warning.
    let c6 = s.commit(&dir, "f", "6\n");
    s.git_push(&dir, "sessions/p");
    let before = s.posts();
    let j = s.push(&dir, &[]).json();
    assert_eq!(j["tip"], c6.as_str());
    assert_eq!(j["pushed"], false, "{j}");
    assert_eq!(j["warnings"], serde_json::json!([]), "{j}");
    assert_eq!(s.posts(), before);
    assert_eq!(s.lease(&dir), c6);
}

#[test]
fn after_a_plain_git_push_status_and_save_say_it_landed_plainly() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/q", &s.ids[1]);
    let c1 = s.commit(&dir, "f", "1\n");
    s.w.git_auth(&dir, &["push", "-q"]);
    assert_eq!(s.remote("sessions/q").as_deref(), Some(c1.as_str()));
    let vars = [("READ_URL", s.url())];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let status = s.w.run(&dir, &["status", "--json", "--remote"], &vars);
    status.assert_code(0);
    let j = status.json();
    assert_eq!(j["lease"], c1.as_str(), "{j}");
    assert_eq!(
        (j["ahead"].as_u64(), j["remote_state"].as_str()),
        (Some(0), Some("lease")),
        "{j}"
    );
    let human = s.w.run(&dir, &["status"], &vars);
    assert!(
        human.stdout.contains("0 commit(s) ahead"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("git push landed"), "{}", human.stdout);
    std::fs::write(dir.join("g"), "more\n").unwrap();
    let url = s.url();
    let save = s.w.run(
        &dir,
        &["save", "-m", "more", "--json"],
        &[("PUSH_URL", url.as_str()), ("READ_URL", url.as_str())],
    );
    save.assert_code(0);
    let j = save.json();
    assert_eq!(j["previous_tip"], c1.as_str(), "{j}");
    assert_eq!(j["warnings"], serde_json::json!([]), "{j}");
    assert_eq!(s.remote("sessions/q").as_deref(), j["tip"].as_str());
}

#[test]
fn a_declining_hook_is_exit_9_with_its_message() {
    let s = Setup::new();
    let hook = s.bare().join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'policy: session branches are frozen' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = s.sandbox("a", "sessions/h", &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    let run = s.push(&dir, &[]);
    run.assert_code(9);
    let j = run.json();
    assert_eq!(j["error"]["kind"], "rejected");
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("session branches are frozen") && msg.contains("declined"),
        "{msg}"
    );
    assert_eq!(s.remote("sessions/h"), None);
    // Refused for sure: no record of an upload in flight is kept.
    assert!(!dir.join(".git/git-session-sending").exists());
}

/// `report` in side-band 1, then the flush that ends the response.
fn in_band_1(report: &str) -> Vec<u8> {
    [band(1, report.as_bytes()), b"0000".to_vec()].concat()
}

#[test]
fn http_200_without_a_good_report_is_a_failure() {
    let s = Setup::new();
    let branch = "sessions/f";
    let dir = s.sandbox("a", branch, &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    let ok_report = format!(
        "{}{}0000",
        pkt("unpack ok\n"),
        pkt(&format!("ok refs/heads/{branch}\n"))
    );
    let replies: Vec<(&str, Vec<u8>, i32)> = vec![
        ("empty body", Vec::new(), 5),
        ("flush only", b"0000".to_vec(), 5),
        (
            "ng",
            in_band_1(&format!(
                "{}{}0000",
                pkt("unpack ok\n"),
                pkt(&format!("ng refs/heads/{branch} hook declined\n"))
            )),
            9,
        ),
        (
            "unpack error",
            in_band_1(&format!("{}0000", pkt("unpack index-pack abnormal exit\n"))),
            9,
        ),
        (
            "side-band fatal",
            [band(3, b"fatal: the disk is full\n"), b"0000".to_vec()].concat(),
            5,
        ),
        (
            "unpack ok, no ref status",
            in_band_1(&format!("{}0000", pkt("unpack ok\n"))),
            5,
        ),
        ("report outside side-band", ok_report.into_bytes(), 5),
    ];
    for (what, reply, code) in replies {
        *s.srv.knobs.receive_pack_reply.lock().unwrap() = Some(reply);
        let run = s.push(&dir, &[]);
        assert_eq!(run.code, Some(code), "{what}: {}", run.stderr);
        assert_eq!(run.json()["ok"], false, "{what}");
        assert_eq!(s.remote(branch), None, "{what}: the remote changed");
        assert_eq!(s.lease(&dir), zero_id(), "{what}: the lease moved");
    }
    *s.srv.knobs.receive_pack_reply.lock().unwrap() = None;
    s.push(&dir, &[]).assert_code(0);
}

#[test]
fn a_token_refused_for_writing_is_exit_4() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/w", &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    s.srv.knobs.unauthorized_posts.store(1, Ordering::SeqCst);
    let run = s.push(&dir, &[]);
    run.assert_code(4);
    let msg = run.error_message();
    assert!(
        msg.contains("write URL was refused") && msg.contains("mint a new one"),
        "{msg}"
    );
    assert_eq!(s.remote("sessions/w"), None);
    // A write URL with no credentials at all is told so, not that it may have expired.
    let bare_url = s.srv.url("repo.git", None);
    let run =
        s.w.run(&dir, &["push", "--json"], &[("PUSH_URL", &bare_url)]);
    run.assert_code(4);
    let msg = run.error_message();
    assert!(
        msg.contains("carries no credentials") && !msg.contains("expired"),
        "{msg}"
    );
}

#[test]
fn a_token_refused_for_writing_a_large_push_fails_before_the_upload() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/w", &s.ids[1]);
    s.commit(&dir, "f", &big_text());
    s.srv.knobs.unauthorized_posts.store(1, Ordering::SeqCst);
    let run = s.push(&dir, &[]);
    run.assert_code(4);
    let posts = s.srv.receive_pack_posts();
    assert_eq!(posts.len(), 1);
    assert!(
        posts[0].body_len <= 4,
        "the pack was uploaded before authentication"
    );
    assert_eq!(s.remote("sessions/w"), None);
}

#[test]
fn transient_failures_are_retried_and_a_landed_push_is_recognised() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/t", &s.ids[1]);
    let c1 = s.commit(&dir, "f", "1\n");
    s.srv.knobs.fail_next.store(2, Ordering::SeqCst);
    s.push(&dir, &[]).assert_code(0);
    assert_eq!(s.remote("sessions/t").as_deref(), Some(c1.as_str()));
    // The report is cut after the ref moved: the retry re-reads the tip, sees ours, succeeds.
    let c2 = s.commit(&dir, "f", "2\n");
    s.srv.knobs.cut_post_after.store(1, Ordering::SeqCst);
    s.srv.knobs.cut_posts.store(1, Ordering::SeqCst);
    let run = s.push(&dir, &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], c2.as_str());
    // One POST for the first push, one (cut) for the second; the retry found the push landed.
    assert_eq!(s.posts(), 2, "{:#?}", s.srv.log());
    assert_eq!(s.lease(&dir), c2);
}

#[test]
fn chunked_bodies_refused_with_411_are_resent_with_a_length() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/l", &s.ids[1]);
    // Over the size sent in one piece: streamed, chunked.
    let c1 = s.commit(&dir, "f", &big_text());
    s.srv.knobs.refuse_chunked.store(true, Ordering::SeqCst);
    s.push(&dir, &[]).assert_code(0);
    assert_eq!(s.remote("sessions/l").as_deref(), Some(c1.as_str()));
    let posts = s.srv.receive_pack_posts();
    // The authentication probe, the chunked attempt refused with 411, the resend with a length.
    // (A server that answers before reading the body may also cut the connection under the
    // upload; the retry then starts over, so the sequence can repeat once.)
    let seen: Vec<_> = posts
        .iter()
        .map(|e| (e.status, e.chunked, e.body_len > 4))
        .collect();
    assert_eq!(seen[0], (200, false, false), "{seen:?}");
    assert!(seen.contains(&(411, true, false)), "{seen:?}");
    assert_eq!(*seen.last().unwrap(), (200, false, true), "{seen:?}");
    assert!(seen.iter().all(|p| *p != (200, true, true)), "{seen:?}");
}

#[test]
fn two_pushers_racing_on_one_lease_exactly_one_wins() {
    let s = Setup::new();
    let branch = "sessions/race";
    s.w.git(&s.bare(), &["branch", branch, &s.ids[1]]);
    let mut tip = s.ids[1].clone();
    let rounds: usize = std::env::var("RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    for round in 0..rounds {
        let a = s.sandbox(&format!("r{round}a"), branch, &tip);
        let b = s.sandbox(&format!("r{round}b"), branch, &tip);
        let ca = s.commit(&a, "a.txt", &format!("a {round}\n"));
        let cb = s.commit(&b, "b.txt", &format!("b {round}\n"));
        let barrier = s.w.tmp.path().join(format!("barrier-{round}"));
        let vars = [
            ("GIT_SESSION_FAILPOINT", "after-lease-check"),
            ("GIT_SESSION_BARRIER_DIR", barrier.to_str().unwrap()),
            ("GIT_SESSION_BARRIER_COUNT", "2"),
        ];
        let (ra, rb) = std::thread::scope(|sc| {
            let ha = sc.spawn(|| s.push(&a, &vars));
            let hb = sc.spawn(|| s.push(&b, &vars));
            (ha.join().unwrap(), hb.join().unwrap())
        });
        // Both really passed their lease checks before either uploaded.
        assert_eq!(
            std::fs::read_dir(&barrier).unwrap().count(),
            2,
            "round {round}"
        );
        let codes = (ra.code, rb.code);
        let remote = s.remote(branch).unwrap();
        match codes {
            (Some(0), Some(3)) => assert_eq!(remote, ca, "round {round}"),
            (Some(3), Some(0)) => assert_eq!(remote, cb, "round {round}"),
            _ => panic!(
                "round {round}: codes {codes:?}\nA: {}\nB: {}",
                ra.stderr, rb.stderr
            ),
        }
        let loser = if codes.0 == Some(3) {
            (&a, &ra, &ca)
        } else {
            (&b, &rb, &cb)
        };
        assert_eq!(loser.1.json()["error"]["kind"], "stale");
        assert_eq!(
            s.w.git(loser.0, &["rev-parse", "HEAD"]),
            *loser.2,
            "round {round}: the loser's commit was lost"
        );
        tip = remote;
    }
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
    assert_eq!(
        s.w.git(&s.bare(), &["rev-list", "--count", branch]),
        (rounds + 2).to_string()
    );
}

#[test]
fn a_one_file_edit_of_a_large_tree_sends_a_handful_of_objects() {
    let w = World::new();
    let files: Vec<(String, Option<String>)> = (0..3000)
        .map(|i| {
            (
                format!("d{}/e{}/f{i}.txt", i % 10, i % 7),
                Some(format!("content {i}\n")),
            )
        })
        .collect();
    let refs: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_deref()))
        .collect();
    let ids = w.repo("big.git", &[&refs]);
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("big.git", None);
    let dir = w.path("s");
    w.restore_with(&dir, &url, "s", &ids[0], &[], &[])
        .assert_code(0);
    std::fs::write(dir.join("d3/e3/f3.txt"), "changed\n").unwrap();
    w.git(&dir, &["commit", "-qam", "one edit"]);
    let bare = w.srv().join("big.git");
    let before = w.git(&bare, &["count-objects"]);
    w.run(&dir, &["push"], &[("PUSH_URL", &url)]).assert_code(0);
    let count = |s: &str| {
        s.split_whitespace()
            .next()
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    let after = w.git(&bare, &["count-objects"]);
    // commit + root tree + d3 + d3/e3 + the blob
    assert_eq!(count(&after) - count(&before), 5, "{before} -> {after}");
    w.git(&bare, &["fsck", "--no-progress"]);
}

#[test]
fn a_large_push_streams_with_bounded_memory() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/big", &s.ids[1]);
    // 120 incompressible files of 1 MiB: 120 MiB of objects.
    let mut x: u64 = 0x9E3779B97F4A7C15;
    std::fs::create_dir_all(dir.join("blobs")).unwrap();
    for i in 0..120 {
        let buf = incompressible(1 << 20, &mut x);
        std::fs::write(dir.join(format!("blobs/{i}.bin")), buf).unwrap();
    }
    s.w.git(&dir, &["add", "-A"]);
    s.w.git(&dir, &["commit", "-qm", "big"]);
    let url = s.url();
    let kib = git_session_peak_rss(&dir, s.w.env(), &[("PUSH_URL", url.as_str())], &["push"]);
    eprintln!("peak RSS of a 120 MiB push: {kib} KiB");
    // 64 MiB plus the largest object (1 MiB).
    assert!(
        kib < (64 + 1) * 1024,
        "peak RSS {kib} KiB for a 120 MiB push"
    );
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
    assert_eq!(
        s.remote("sessions/big").unwrap(),
        s.w.git(&dir, &["rev-parse", "HEAD"])
    );
}

#[test]
fn push_works_from_the_record_and_refuses_another_session() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/mine", &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    // TIP_SHA and READ_URL in the environment are not consulted; another branch is refused.
    let run = s.push(
        &dir,
        &[("SESSION_BRANCH", "sessions/other"), ("TIP_SHA", &s.ids[0])],
    );
    run.assert_code(2);
    assert!(
        run.stderr.contains("belongs to another session"),
        "{}",
        run.stderr
    );
    let run = s.w.run(&dir, &["push"], &[]);
    run.assert_code(2);
    assert!(run.stderr.contains("PUSH_URL is not set"), "{}", run.stderr);
    let run = s.w.run(&dir, &["push", "--push-url", &s.url()], &[]);
    run.assert_code(2);
    assert!(run.stderr.contains("carries credentials"), "{}", run.stderr);
    let elsewhere = s.w.path("not-a-session");
    let run = s.w.run(&elsewhere, &["push"], &[("PUSH_URL", &s.url())]);
    run.assert_code(2);
    // Outside the tree: told to cd into it (or -C), not to restore over it.
    assert!(
        run.stderr.contains("cd into the session's tree") && run.stderr.contains("-C DIR"),
        "{}",
        run.stderr
    );
    s.push(&dir, &[("SESSION_BRANCH", "refs/heads/sessions/mine")])
        .assert_code(0);
}

#[test]
fn an_expired_jwt_is_named_in_the_auth_error() {
    use base64::Engine as _;
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/j", &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let jwt = format!(
        "{}.{}.{}",
        b64.encode(r#"{"alg":"HS256","typ":"JWT"}"#),
        b64.encode(r#"{"exp":1700000000,"sub":"sandbox"}"#),
        b64.encode("signature-bytes")
    );
    let url = s.srv.url("repo.git", Some(&format!("t:{jwt}")));
    let run = s.w.run(&dir, &["push", "--json"], &[("PUSH_URL", &url)]);
    run.assert_code(4);
    let msg = run.error_message();
    assert!(msg.contains("expired at 2023-11-14T22:13:20Z"), "{msg}");
    assert!(!msg.contains(&jwt) && !run.stderr.contains(&jwt));
    // Restore names it too (it said only "the URL may have expired").
    let run = s.w.restore_with(
        &s.w.path("b"),
        &url,
        "sessions/j",
        &s.ids[1],
        &["--json"],
        &[],
    );
    run.assert_code(4);
    let msg = run.error_message();
    assert!(msg.contains("expired at 2023-11-14T22:13:20Z"), "{msg}");
}

/// A JWT whose `exp` lies past year 9999 (or past any integer) counts as not expiring: `status`
/// works and a refused push is still exit 4 (both were exit 1, a formatting or time overflow).
#[test]
fn a_jwt_expiring_after_year_9999_counts_as_no_expiry() {
    use base64::Engine as _;
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/far", &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    for exp in ["253402300800", "1e30", "18446744073709551615"] {
        let jwt = format!(
            "{}.{}.{}",
            b64.encode(r#"{"alg":"HS256"}"#),
            b64.encode(format!(r#"{{"exp":{exp}}}"#)),
            b64.encode("signature-bytes")
        );
        let url = s.srv.url("repo.git", Some(&format!("t:{jwt}")));
        let run = s.w.run(&dir, &["status", "--json"], &[("PUSH_URL", &url)]);
        run.assert_code(0);
        assert!(
            run.json()["url_expires_at"].is_null(),
            "{exp}: {}",
            run.stdout
        );
        s.w.run(&dir, &["status"], &[("PUSH_URL", &url)])
            .assert_code(0);
        let run = s.w.run(&dir, &["push", "--json"], &[("PUSH_URL", &url)]);
        run.assert_code(4);
        assert!(!run.stderr.contains(&jwt) && !run.stdout.contains(&jwt));
    }
}

#[test]
fn a_stale_tree_that_pulled_the_new_tip_is_still_stale() {
    let s = Setup::new();
    s.w.git(&s.bare(), &["branch", "sessions/pull", &s.ids[1]]);
    let a = s.sandbox("a", "sessions/pull", &s.ids[1]);
    let b = s.sandbox("b", "sessions/pull", &s.ids[1]);
    let cb = s.commit(&b, "b.txt", "from b\n");
    s.push(&b, &[]).assert_code(0);
    s.commit(&a, "a.txt", "from a\n");
    // A person in the stale tree pulls B's work and merges it: B's commit is now in A's history,
    // but A did not push it, so A does not own the session.
    s.w.git_auth(
        &a,
        &[
            "pull",
            "-q",
            "--no-rebase",
            "--no-edit",
            "origin",
            "sessions/pull",
        ],
    );
    let run = s.push(&a, &[]);
    run.assert_code(3);
    assert_eq!(run.json()["remote_tip"], cb.as_str());
    assert_eq!(s.remote("sessions/pull").as_deref(), Some(cb.as_str()));
}

/// A tree reset to another sandbox's tip (its HEAD now equals the remote's, with no commit of its
/// own) does not own the session either: neither `push` nor a `save` with nothing to commit takes
/// the lease, and a later commit is still refused.
#[test]
fn a_stale_tree_reset_to_the_new_tip_is_still_stale() {
    let s = Setup::new();
    s.w.git(&s.bare(), &["branch", "sessions/reset", &s.ids[1]]);
    let a = s.sandbox("a", "sessions/reset", &s.ids[1]);
    let b = s.sandbox("b", "sessions/reset", &s.ids[1]);
    let cb = s.commit(&b, "b.txt", "from b\n");
    s.push(&b, &[]).assert_code(0);
    s.w.git_auth(&a, &["fetch", "-q", "origin"]);
    s.w.git(&a, &["reset", "-q", "--hard", "origin/sessions/reset"]);
    assert_eq!(s.w.git(&a, &["rev-parse", "HEAD"]), cb);
    let run = s.push(&a, &[]);
    run.assert_code(3);
    assert_eq!(run.json()["remote_tip"], cb.as_str());
    assert_eq!(run.json()["lease"], s.ids[1].as_str());
    let url = s.url();
    let run = s.w.run(
        &a,
        &["save", "-m", "nothing", "--json"],
        &[("PUSH_URL", &url)],
    );
    run.assert_code(3);
    assert_eq!(
        s.lease(&a),
        s.ids[1],
        "the lease moved to another sandbox's commit"
    );
    s.commit(&a, "a.txt", "from a\n");
    s.push(&a, &[]).assert_code(3);
    assert_eq!(s.remote("sessions/reset").as_deref(), Some(cb.as_str()));
}

/// A push that landed but whose process died before recording the lease (the server said `ok`):
/// the rerun recognises its own commit on the remote and records it, uploading nothing again; the
/// dead process left no spool file.
#[test]
fn a_push_that_landed_before_a_crash_is_recorded_by_the_rerun() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/crash", &s.ids[1]);
    let c1 = s.commit(&dir, "f", "1\n");
    let run = s.push(&dir, &[("GIT_SESSION_FAILPOINT", "after-push")]);
    assert!(
        run.stderr.contains("failpoint 'after-push'"),
        "{}",
        run.stderr
    );
    assert_eq!(s.remote("sessions/crash").as_deref(), Some(c1.as_str()));
    assert_eq!(
        s.lease(&dir),
        zero_id(),
        "the lease was recorded before the crash"
    );
    // The spooled request died with the process: nothing of it is left in the git dir.
    let left: Vec<String> = std::fs::read_dir(dir.join(".git"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("git-session-push") || n.starts_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let posts = s.posts();
    let run = s.push(&dir, &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], c1.as_str());
    assert_eq!(run.json()["pushed"], false);
    assert_eq!(s.posts(), posts, "the rerun uploaded again");
    assert_eq!(s.lease(&dir), c1);
    assert!(!dir.join(".git/git-session-sending").exists());
    // Landed, then a new commit before any rerun: the lease advances to the landed one and the
    // new commit goes on top of it.
    let c2 = s.commit(&dir, "f", "2\n");
    s.push(&dir, &[("GIT_SESSION_FAILPOINT", "after-push")]);
    assert_eq!(s.remote("sessions/crash").as_deref(), Some(c2.as_str()));
    let c3 = s.commit(&dir, "f", "3\n");
    // A named spool file that an earlier build left on a crash is swept by the next upload.
    std::fs::write(dir.join(".git/git-session-push-AbC123"), "old spool").unwrap();
    let run = s.push(&dir, &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], c3.as_str());
    assert_eq!(run.json()["previous_tip"], c2.as_str());
    assert!(
        run.stderr.contains("which this tree pushed earlier"),
        "{}",
        run.stderr
    );
    assert_eq!(s.remote("sessions/crash").as_deref(), Some(c3.as_str()));
    assert_eq!(s.lease(&dir), c3);
    assert!(!dir.join(".git/git-session-push-AbC123").exists());
}

#[test]
fn a_token_committed_with_plain_git_is_never_pushed() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/leak", &s.ids[1]);
    // Also percent-encoded where nothing needs it (`%33` for `3`): a URL parser reads it as the
    // token, and save refuses it (a fresh trial found push sent it).
    let mut forms = crate::support::token_forms();
    let odd: String = TOKEN
        .bytes()
        .enumerate()
        .map(|(i, b)| {
            if i % 3 == 0 {
                format!("%{b:02X}")
            } else {
                (b as char).to_string()
            }
        })
        .collect();
    forms.push(odd);
    for (i, form) in forms.iter().enumerate() {
        let c = s.commit(&dir, &format!("leak{i}.txt"), &format!("x {form} y\n"));
        let before = s.posts();
        let run = s.push(&dir, &[]);
        run.assert_code(6);
        assert_eq!(run.json()["error"]["kind"], "integrity");
        assert_eq!(s.posts(), before, "the pack was uploaded");
        assert_eq!(s.remote("sessions/leak"), None);
        s.w.git(&dir, &["reset", "-q", "--hard", "HEAD~1"]);
        let _ = c;
    }
    s.commit(&dir, "fine.txt", "no secret here\n");
    s.push(&dir, &[]).assert_code(0);
}

/// The token in base64 (of `user:token` for any user name, of the token alone, at any alignment,
/// standard or URL-safe) committed with plain git is never uploaded: exit 6 before the POST, in a
/// small file and in a file over the streaming threshold (32 MiB, read 64 KiB at a time: the form
/// across a chunk boundary).
#[test]
fn a_token_in_base64_committed_with_plain_git_is_never_pushed() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/b64", &s.ids[1]);
    for (i, (plain, form)) in crate::support::base64_token_forms().into_iter().enumerate() {
        s.commit(&dir, &format!("auth{i}.txt"), &format!("Basic {form}\n"));
        let before = s.posts();
        let run = s.push(&dir, &[]);
        assert_eq!(s.posts(), before, "uploaded {form} (of {plain})");
        run.assert_code(6);
        assert_eq!(run.json()["error"]["kind"], "integrity");
        assert_eq!(s.remote("sessions/b64"), None);
        s.w.git(&dir, &["reset", "-q", "--hard", "HEAD~1"]);
    }
    // A big file, streamed: the form straddles the first 64 KiB chunk's end.
    let (_, form) = crate::support::base64_token_forms().remove(2);
    let mut big = vec![b'x'; 33 << 20];
    let at = (64 << 10) - 5;
    big[at..at + form.len()].copy_from_slice(form.as_bytes());
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    s.w.git(&dir, &["add", "big.bin"]);
    s.w.git(&dir, &["commit", "-qm", "big"]);
    let before = s.posts();
    let run = s.push(&dir, &[]);
    run.assert_code(6);
    assert_eq!(s.posts(), before, "the pack was uploaded");
    assert_eq!(s.remote("sessions/b64"), None);
}

/// A server hook that echoes the token split over two side-band lines (`remote: tok3n-Se` then
/// `remote: kr1t+/=Zq`), or over two packets of one line, then declines: the push fails (exit 9)
/// with the remote's words, and no part of the token is shown, joined or not.
#[test]
fn a_token_the_server_echoes_split_over_lines_or_packets_is_never_shown() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/echo", &s.ids[1]);
    let (head, tail) = TOKEN.split_at(8);
    let hook = s.bare().join("hooks/pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' 'hook: {head}'\nsleep 0.2\n\
             printf '%s\\n' '{tail}'\nsleep 0.2\nprintf 'again: {head}'\nsleep 0.3\n\
             printf '%s\\n' '{tail} (split mid-line)'\nsleep 0.2\necho 'sessions are frozen'\nexit 1\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    s.commit(&dir, "a.txt", "a\n");
    for verbosity in [&[][..], &["-vv"][..]] {
        let url = s.url();
        let mut args = vec!["push", "--json"];
        args.extend_from_slice(verbosity);
        let run = s.w.run(&dir, &args, &[("PUSH_URL", url.as_str())]);
        run.assert_code(9);
        let msg = run.error_message();
        assert!(msg.contains("sessions are frozen"), "{msg}");
        for text in [&run.stdout, &run.stderr] {
            let joined = text.replace("\nremote: ", "").replace("\\nremote: ", "");
            assert!(!joined.contains(TOKEN), "the token, split:\n{text}");
            assert!(
                !text.contains(head) && !text.contains(tail),
                "a part shown:\n{text}"
            );
        }
    }
    assert_eq!(s.remote("sessions/echo"), None);
}

/// A path a restore would refuse, committed with plain git (which allows `.g\u{200c}it` on
/// Linux), is never pushed: exit 6 naming it, before the upload, so the session's tip stays
/// restorable. A path restore accepts goes through.
#[test]
fn a_path_restore_would_refuse_committed_with_plain_git_is_never_pushed() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/names", &s.ids[1]);
    for (path, name) in [
        (".g\u{200c}it/hooks/x", ".g\u{200c}it"),
        ("sub/GIT~1/config", "GIT~1"),
        (".git-session-restore/config", ".git-session-restore"),
    ] {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "x\n").unwrap();
        // git on Linux refuses GIT~1 only under core.protectNTFS, which a person may turn off.
        s.w.git(&dir, &["-c", "core.protectNTFS=false", "add", "-A"]);
        s.w.git(&dir, &["commit", "-qm", "odd name"]);
        let before = s.posts();
        let run = s.push(&dir, &[]);
        run.assert_code(6);
        let msg = run.error_message();
        assert!(
            msg.contains(&name.escape_debug().to_string()),
            "{path:?}: {msg}"
        );
        assert_eq!(s.posts(), before, "{path:?}: uploaded");
        assert_eq!(s.remote("sessions/names"), None);
        s.w.git(&dir, &["reset", "-q", "--hard", "HEAD~1"]);
        let top = path.split('/').next().unwrap();
        let _ = std::fs::remove_dir_all(dir.join(top));
    }
    s.commit(&dir, "fine.txt", "fine\n");
    s.push(&dir, &[]).assert_code(0);
}

/// A file over the streaming threshold (32 MiB) committed with plain `git commit` (save leaves
/// files over 50 MiB out) is pushed from its loose object, 64 KiB at a time: 96 MiB of
/// incompressible data with a peak RSS under 64 MiB (it held the blob and its compressed copy,
/// about 200 MiB, before), the server's copy exact; the same for a file `git add` stored in a
/// pack of its own (over `core.bigFileThreshold`). A token in such a file, across a 64 KiB
/// boundary, is refused before anything is uploaded.
#[test]
fn a_big_file_committed_with_git_is_pushed_from_its_loose_object_in_bounded_memory() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/huge", &s.ids[1]);
    let mut x: u64 = 0x2545F4914F6CDD1D;
    std::fs::write(dir.join("huge.bin"), incompressible(96 << 20, &mut x)).unwrap();
    s.w.git(&dir, &["add", "huge.bin"]);
    s.w.git(&dir, &["commit", "-qm", "huge"]);
    let url = s.url();
    let kib = git_session_peak_rss(&dir, s.w.env(), &[("PUSH_URL", url.as_str())], &["push"]);
    eprintln!("peak RSS of pushing a 96 MiB loose blob: {kib} KiB");
    assert!(kib < 64 * 1024, "peak RSS {kib} KiB for a 96 MiB blob");
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
    let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
    assert_eq!(s.remote("sessions/huge").unwrap(), head);
    assert_eq!(
        s.w.git(&s.bare(), &["rev-parse", &format!("{head}:huge.bin")]),
        s.w.git(&dir, &["rev-parse", "HEAD:huge.bin"])
    );
    // A file over core.bigFileThreshold: git add streams it into a pack of its own, whole.
    std::fs::write(dir.join("packed.bin"), incompressible(96 << 20, &mut x)).unwrap();
    s.w.git(
        &dir,
        &["-c", "core.bigFileThreshold=32m", "add", "packed.bin"],
    );
    s.w.git(&dir, &["commit", "-qm", "packed"]);
    let id = s.w.git(&dir, &["rev-parse", "HEAD:packed.bin"]);
    let hex = id.as_str();
    assert!(
        !dir.join(".git/objects")
            .join(&hex[..2])
            .join(&hex[2..])
            .exists(),
        "not packed"
    );
    let kib = git_session_peak_rss(&dir, s.w.env(), &[("PUSH_URL", url.as_str())], &["push"]);
    eprintln!("peak RSS of pushing a 96 MiB packed blob: {kib} KiB");
    assert!(
        kib < 64 * 1024,
        "peak RSS {kib} KiB for a 96 MiB packed blob"
    );
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
    let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
    assert_eq!(s.remote("sessions/huge").unwrap(), head);
    // The token across the first chunk's end.
    let mut leak = vec![b'x'; 40 << 20];
    let at = (64 << 10) - 3;
    leak[at..at + TOKEN.len()].copy_from_slice(TOKEN.as_bytes());
    std::fs::write(dir.join("leak.bin"), &leak).unwrap();
    s.w.git(&dir, &["add", "leak.bin"]);
    s.w.git(&dir, &["commit", "-qm", "leak"]);
    let before = s.posts();
    let run = s.push(&dir, &[]);
    run.assert_code(6);
    assert!(run.stderr.contains("session token") || run.stdout.contains("session token"));
    assert_eq!(s.posts(), before, "the pack was uploaded");
    assert_eq!(s.remote("sessions/huge").unwrap(), head);
}

/// On a SHA-256 session, a blob over the streaming size is streamed too, from its loose object
/// (hashed as it goes with SHA-256 to check it is the blob it names) and from a pack of its own
/// (found through that pack's SHA-256 index): memory stays under the blob's size, and the
/// server's `git fsck` passes. (The SHA-1 case is the test above, at 96 MiB.)
#[test]
fn a_big_file_of_a_sha256_session_is_streamed_loose_and_packed() {
    crate::support::as_sha256(|| {
        let s = Setup::new();
        let dir = s.sandbox("a", "sessions/huge", &s.ids[1]);
        let url = s.url();
        let mut x: u64 = 0x9E3779B97F4A7C15;
        for (name, add) in [
            ("loose.bin", &["add", "loose.bin"][..]),
            (
                "packed.bin",
                &["-c", "core.bigFileThreshold=32m", "add", "packed.bin"],
            ),
        ] {
            std::fs::write(dir.join(name), incompressible(40 << 20, &mut x)).unwrap();
            s.w.git(&dir, add);
            s.w.git(&dir, &["commit", "-qm", name]);
            let vars = [("PUSH_URL", url.as_str())];
            let kib = git_session_peak_rss(&dir, s.w.env(), &vars, &["push"]);
            eprintln!("peak RSS of pushing a 40 MiB SHA-256 blob ({name}): {kib} KiB");
            assert!(
                kib < 32 * 1024,
                "peak RSS {kib} KiB for a 40 MiB blob ({name})"
            );
            let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
            assert_eq!(head.len(), 64);
            assert_eq!(s.remote("sessions/huge").unwrap(), head);
            assert_eq!(
                s.w.git(&s.bare(), &["rev-parse", &format!("{head}:{name}")]),
                s.w.git(&dir, &["rev-parse", &format!("HEAD:{name}")])
            );
            s.w.git(&s.bare(), &["fsck", "--no-progress"]);
        }
    });
}

/// Nor in a commit message of plain git (or a file name: trees are scanned like blobs), and `save`
/// refuses a message holding it before committing anything.
#[test]
fn a_token_in_a_commit_message_is_never_pushed_or_committed() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/msg", &s.ids[1]);
    for (i, form) in crate::support::token_forms().iter().enumerate() {
        std::fs::write(dir.join("m.txt"), format!("{i}\n")).unwrap();
        s.w.git(&dir, &["add", "-A"]);
        s.w.git(&dir, &["commit", "-qm", &format!("oops {form}")]);
        let c = s.w.git(&dir, &["rev-parse", "HEAD"]);
        let before = s.posts();
        let run = s.push(&dir, &[]);
        run.assert_code(6);
        let msg = run.error_message();
        assert!(msg.contains(&format!("commit {c}")), "{msg}");
        assert_eq!(s.posts(), before, "the pack was uploaded");
        s.w.git(&dir, &["reset", "-q", "--hard", "HEAD~1"]);

        std::fs::write(dir.join("m.txt"), "edited\n").unwrap();
        let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
        let url = s.url();
        let run = s.w.run(
            &dir,
            &["save", "-m", &format!("oops {form}"), "--json"],
            &[("PUSH_URL", &url)],
        );
        run.assert_code(6);
        assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), head, "committed");
        assert_eq!(s.posts(), before, "the pack was uploaded");
        // Nor in the identity save commits with.
        let run = s.w.run(
            &dir,
            &["save", "-m", "fine", "--json"],
            &[
                ("PUSH_URL", &url),
                ("GIT_AUTHOR_NAME", &format!("me {form}")),
            ],
        );
        run.assert_code(6);
        assert!(
            run.error_message().contains("author name or email"),
            "{}",
            run.stdout
        );
        assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), head, "committed");
        std::fs::remove_file(dir.join("m.txt")).unwrap();
    }
    assert_eq!(s.remote("sessions/msg"), None);
}

#[test]
fn deletions_renames_modes_symlinks_and_an_emptied_tree_round_trip_through_save() {
    use std::os::unix::fs::PermissionsExt as _;
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/rt", &s.ids[1]);
    let url = s.url();
    let save = |dir: &Path| {
        let run = s.w.run(
            dir,
            &["save", "-m", "round trip", "--json"],
            &[("PUSH_URL", &url)],
        );
        run.assert_code(0);
        run.json()
    };
    std::fs::rename(dir.join("src/a.rs"), dir.join("src/renamed.rs")).unwrap();
    std::fs::remove_file(dir.join("README.md")).unwrap();
    std::fs::set_permissions(
        dir.join("src/renamed.rs"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink("src/renamed.rs", dir.join("new-link")).unwrap();
    std::fs::remove_file(dir.join("link")).unwrap();
    std::os::unix::fs::symlink("run.sh", dir.join("link")).unwrap();
    let j = save(&dir);
    assert_eq!(j["pushed"], true);
    let tip = j["tip"].as_str().unwrap().to_owned();
    assert_eq!(s.remote("sessions/rt").as_deref(), Some(tip.as_str()));
    assert_eq!(
        s.w.git(&s.bare(), &["ls-tree", "-r", &tip]),
        s.w.git(&dir, &["ls-tree", "-r", "HEAD"])
    );
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
    // A fresh sandbox restored at the new tip has exactly this tree.
    let b = s.sandbox("b", "sessions/rt", &tip);
    for (path, mode) in [("src/renamed.rs", 0o755), ("run.sh", 0o644)] {
        let m = std::fs::metadata(b.join(path))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(m & 0o100, mode & 0o100, "{path}");
    }
    assert_eq!(
        std::fs::read_link(b.join("new-link")).unwrap(),
        Path::new("src/renamed.rs")
    );
    assert_eq!(
        std::fs::read_link(b.join("link")).unwrap(),
        Path::new("run.sh")
    );
    assert!(!b.join("README.md").exists());
    // Everything deleted: the empty tree.
    for entry in std::fs::read_dir(&b).unwrap().flatten() {
        if entry.file_name() == ".git" {
            continue;
        }
        let p = entry.path();
        if p.is_dir() && !p.is_symlink() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    let j = save(&b);
    let tip = j["tip"].as_str().unwrap().to_owned();
    // The empty tree, as git names it in the repository's format.
    assert_eq!(
        s.w.git(&s.bare(), &["rev-parse", &format!("{tip}^{{tree}}")]),
        s.w.git(&s.bare(), &["hash-object", "-t", "tree", "/dev/null"])
    );
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
}

/// A damaged session record says how to recover (exit 1), and one written by a newer version of the
/// record is refused (exit 2) instead of being read as this one.
#[test]
fn a_malformed_or_newer_session_record_is_named() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/rec", &s.ids[1]);
    let path = dir.join(".git/git-session.json");
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, "{ not json").unwrap();
    let run = s.w.run(&dir, &["status", "--json"], &[]);
    // Local state, not a bug: exit 7 (issue 38).
    run.assert_code(7);
    let msg = run.error_message();
    assert!(
        msg.contains("malformed") && msg.contains("new folder"),
        "{msg}"
    );
    // A newer version that lacks this version's fields is still named by its version.
    std::fs::write(&path, r#"{"version": 2}"#).unwrap();
    let run = s.w.run(&dir, &["status", "--json"], &[]);
    run.assert_code(2);
    let msg = run.error_message();
    assert!(msg.contains("version 2"), "{msg}");
    let newer = good.replacen("\"version\": 1", "\"version\": 2", 1);
    assert_ne!(newer, good, "no version field in {good}");
    std::fs::write(&path, newer).unwrap();
    let run = s.w.run(&dir, &["status", "--json"], &[]);
    run.assert_code(2);
    let msg = run.error_message();
    assert!(msg.contains("version 2"), "{msg}");
    std::fs::write(&path, good).unwrap();
    s.w.run(&dir, &["status"], &[]).assert_code(0);
}

/// A PUSH_URL naming another repository than the one the tree was restored to push to is named on
/// stderr before the push's own (confusing) error, and in the JSON failure's `warnings`.
#[test]
fn a_push_url_for_another_repository_is_named() {
    let s = Setup::new();
    s.w.repo("other.git", &[&[("x.txt", Some("x\n"))]]);
    let dir = s.w.path("a");
    let url = s.url();
    s.w.run(
        &dir,
        &["restore"],
        &[
            ("READ_URL", url.as_str()),
            ("PUSH_URL", url.as_str()),
            ("SESSION_BRANCH", "sessions/other"),
            ("TIP_SHA", &s.ids[1]),
        ],
    )
    .assert_code(0);
    s.commit(&dir, "f", "1\n");
    let other = s.srv.url("other.git", Some(&userinfo()));
    let run = s.w.run(&dir, &["push", "--json"], &[("PUSH_URL", &other)]);
    assert_ne!(run.code, Some(0), "pushed to another repository");
    assert!(
        run.stderr.contains("PUSH_URL points at") && run.stderr.contains("other.git"),
        "{}",
        run.stderr
    );
    // In the failure's JSON too: an agent reads only that.
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("PUSH_URL points at"), "{warnings}");
    // The right one: no such warning.
    let run = s.push(&dir, &[]);
    run.assert_code(0);
    assert!(!run.stderr.contains("points at"), "{}", run.stderr);
}

/// A large upload to a server that keeps reading, slowly, is not cut off by the read timeout: the
/// time allowed grows with the body (1 s per 16 KiB on top of it). Before, the timeout ran over the
/// whole upload, and every attempt failed (exit 5).
#[test]
fn a_slow_but_steady_upload_is_not_cut_off() {
    let s = Setup::new();
    let dir = s.sandbox("a", "sessions/slow", &s.ids[1]);
    // 2 MiB that does not compress: 32 pauses of 60 ms, about 2 s of reading.
    std::fs::write(dir.join("big.bin"), incompressible(2 << 20, &mut 7)).unwrap();
    s.w.git(&dir, &["add", "-A"]);
    s.w.git(&dir, &["commit", "-qm", "big"]);
    let c = s.w.git(&dir, &["rev-parse", "HEAD"]);
    s.srv.knobs.slow_body_ms.store(60, Ordering::SeqCst);
    let run = s.push(&dir, &[("GIT_SESSION_READ_TIMEOUT_MS", "1000")]);
    run.assert_code(0);
    assert_eq!(s.remote("sessions/slow").as_deref(), Some(c.as_str()));
    assert!(!run.stderr.contains("timed out"), "{}", run.stderr);
}

/// A stale tree that fetched another sandbox's tip by URL, reset to it and ran a plain `git push`
/// ("Everything up-to-date", which still moves the remote-tracking ref with an "update by push"
/// reflog entry) does not take the session: the commit was not made here. `status --remote` says
/// so too, where it said "up to date".
#[test]
fn an_up_to_date_plain_push_of_a_fetched_tip_is_still_stale() {
    let s = Setup::new();
    s.w.git(&s.bare(), &["branch", "sessions/utd", &s.ids[1]]);
    let a = s.sandbox("a", "sessions/utd", &s.ids[1]);
    let b = s.sandbox("b", "sessions/utd", &s.ids[1]);
    let cb = s.commit(&b, "b.txt", "from b\n");
    s.push(&b, &[]).assert_code(0);
    let url = s.url();
    s.w.git(&a, &["fetch", "-q", &url, "sessions/utd"]);
    s.w.git(&a, &["reset", "-q", "--hard", "FETCH_HEAD"]);
    s.git_push(&a, "sessions/utd");
    let log = std::fs::read_to_string(a.join(".git/logs/refs/remotes/origin/sessions/utd"))
        .unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains(&cb) && l.ends_with("update by push")),
        "git wrote no 'update by push' entry, so this test proves nothing: {log}"
    );
    let run = s.remote_status(&a);
    run.assert_code(0);
    assert_eq!(run.json()["remote_state"], "moved", "{}", run.stdout);
    let run = s.push(&a, &[]);
    run.assert_code(3);
    assert_eq!(run.json()["remote_tip"], cb.as_str());
    assert_eq!(s.lease(&a), s.ids[1]);
    // B, which made and pushed the commit, sees it as its lease.
    let run = s.remote_status(&b);
    assert_eq!(run.json()["remote_state"], "lease", "{}", run.stdout);
}

/// Ownership by plain git is decided by what made the commit, not by how the reflog entry starts:
/// `git cherry-pick --ff` of another sandbox's commit (a fast-forward, "cherry-pick: fast-forward")
/// does not make it ours; a rebase step finished by `git rebase --continue` does, as do a commit
/// whose subject says "fast-forward" and one made in a linked work tree; and a commit this tree
/// pushed and then rewrote (an amend) is exit 7, not stale, with `status --remote` agreeing. A
/// plain push to `origin` that git saw land is the lease ("lease", not "own").
#[test]
fn plain_git_ownership_follows_what_made_the_commit() {
    let s = Setup::new();
    let url = s.url();

    // Another sandbox's commit, fast-forwarded onto with cherry-pick --ff and "pushed" up to date.
    s.w.git(&s.bare(), &["branch", "sessions/ff", &s.ids[1]]);
    let a = s.sandbox("a", "sessions/ff", &s.ids[1]);
    let b = s.sandbox("b", "sessions/ff", &s.ids[1]);
    let cb = s.commit(&b, "b.txt", "from b\n");
    s.push(&b, &[]).assert_code(0);
    s.w.git(&a, &["fetch", "-q", &url, "sessions/ff"]);
    s.w.git(&a, &["cherry-pick", "--ff", "FETCH_HEAD"]);
    assert_eq!(s.w.git(&a, &["rev-parse", "HEAD"]), cb);
    s.git_push(&a, "sessions/ff");
    assert_eq!(s.remote_state(&a), "moved");
    s.push(&a, &[]).assert_code(3);
    assert_eq!(s.lease(&a), s.ids[1]);

    // Own work whose last rebase step was committed by `git rebase --continue`, pushed with git.
    let c = s.sandbox("c", "sessions/cont", &s.ids[1]);
    s.commit(&c, "g", "1\n");
    s.w.git_with_env(
        &c,
        &["rebase", "-q", "-i", &s.ids[1]],
        &[("GIT_SEQUENCE_EDITOR", "sed -i s/^pick/edit/")],
    );
    std::fs::write(c.join("g"), "1\nmore\n").unwrap();
    s.w.git(&c, &["add", "g"]);
    s.w.git_with_env(&c, &["rebase", "--continue"], &[("GIT_EDITOR", "true")]);
    let rebased = s.w.git(&c, &["rev-parse", "HEAD"]);
    s.git_push(&c, "sessions/cont");
    assert_eq!(s.remote_state(&c), "lease");
    let run = s.push(&c, &[]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], rebased.as_str());
    assert_eq!(s.lease(&c), rebased);

    // Own work whose subject says "fast-forward" (the user's words, not git's marker), and own
    // work committed in a linked work tree, both pushed with git.
    let e = s.sandbox("e", "sessions/words", &s.ids[1]);
    std::fs::write(e.join("w"), "1\n").unwrap();
    s.w.git(&e, &["add", "w"]);
    s.w.git(&e, &["commit", "-qm", "Fix the fast-forward check"]);
    s.git_push(&e, "sessions/words");
    assert_eq!(s.remote_state(&e), "lease");
    s.push(&e, &[]).assert_code(0);
    let wt = s.w.path("e-worktree");
    s.w.git(
        &e,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "feat"],
    );
    std::fs::write(wt.join("wt.txt"), "from the worktree\n").unwrap();
    s.w.git(&wt, &["add", "wt.txt"]);
    s.w.git(&wt, &["commit", "-qm", "worktree work"]);
    s.w.git(&e, &["merge", "-q", "--ff-only", "feat"]);
    let from_wt = s.w.git(&e, &["rev-parse", "HEAD"]);
    s.git_push(&e, "sessions/words");
    assert_eq!(s.remote_state(&e), "lease");
    let run = s.push(&e, &[]);
    run.assert_code(0);
    assert_eq!(s.lease(&e), from_wt);

    // HEAD detached elsewhere: status still answers (save would refuse), judging the session
    // branch as the push does.
    s.w.git(&e, &["checkout", "-q", "--detach", &s.ids[1]]);
    let run = s.remote_status(&e);
    run.assert_code(0);
    assert_eq!(run.json()["remote_state"], "lease", "{}", run.stdout);
    assert!(run.json()["changed"].is_null(), "{}", run.stdout);
    s.w.git(&e, &["switch", "-q", "sessions/words"]);

    a_pushed_commit_amended_is_refused(&s);
}

/// The amend half of [`plain_git_ownership_follows_what_made_the_commit`]: a commit pushed with
/// git or with git-session, then amended, is exit 7 and `status` says the history was rewritten.
fn a_pushed_commit_amended_is_refused(s: &Setup) {
    // Pushed with git, then amended: local history no longer holds the remote tip.
    let d = s.sandbox("d", "sessions/amend", &s.ids[1]);
    let y = s.commit(&d, "h", "1\n");
    s.git_push(&d, "sessions/amend");
    s.w.git(&d, &["commit", "-q", "--amend", "-m", "amended"]);
    assert_eq!(s.remote_state(&d), "rewritten");
    let run = s.push(&d, &[]);
    run.assert_code(7);
    let msg = run.error_message();
    assert!(
        msg.contains("history was rewritten") && msg.contains(&y),
        "{msg}"
    );
    assert_eq!(s.remote("sessions/amend").as_deref(), Some(y.as_str()));

    // Pushed by git-session (the lease is that commit), then amended: the remote is at the lease,
    // but a push is refused (exit 7), and status says so rather than "a push will fast-forward".
    let f = s.sandbox("f", "sessions/amend2", &s.ids[1]);
    let z = s.commit(&f, "k", "1\n");
    s.push(&f, &[]).assert_code(0);
    assert_eq!(s.lease(&f), z);
    assert_eq!(s.remote_state(&f), "lease");
    s.w.git(&f, &["commit", "-q", "--amend", "-m", "amended"]);
    assert_eq!(s.remote_state(&f), "rewritten");
    let human = s.w.run(&f, &["status"], &[]);
    human.assert_code(0);
    assert!(
        human.stdout.contains("history was rewritten"),
        "{}",
        human.stdout
    );
    let run = s.push(&f, &[]);
    run.assert_code(7);
    // It says how to recover: keep the changes as a new commit on top of the pushed one.
    let msg = run.error_message();
    assert!(msg.contains(&format!("git reset --soft {z}")), "{msg}");
    assert_eq!(s.remote("sessions/amend2").as_deref(), Some(z.as_str()));
}

/// Edited files go as deltas against the version the server has (a thin pack receive-pack
/// completes): a one-line edit of a 1 MB file, a binary file with a few bytes changed, a file
/// that grew and one that shrank cost a few KiB where whole objects took about 1 MB; a file
/// replaced whole goes whole. The server's `git fsck` passes and every file reads back as pushed.
#[test]
fn edited_files_are_pushed_as_deltas() {
    let w = World::new();
    let mut seed = 5u64;
    let mut lines = |n: usize| -> Vec<String> {
        (0..n)
            .map(|_| {
                let noise = incompressible(24, &mut seed);
                noise.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n"
            })
            .collect()
    };
    let big = lines(20_000); // about 1 MB
    let grow = lines(2_000);
    let shrink = lines(2_000);
    let replace = lines(2_000);
    let binary = incompressible(200_000, &mut 17u64.clone());
    let origin = w.scratch("origin");
    for (name, content) in [
        ("big.txt", &big),
        ("grow.txt", &grow),
        ("shrink.txt", &shrink),
        ("replace.txt", &replace),
    ] {
        std::fs::write(origin.join(name), content.concat()).unwrap();
    }
    std::fs::write(origin.join("bin.dat"), &binary).unwrap();
    let (bare, srv, url, dir) = serve_and_restore(&w, &origin, "sessions/d");

    let mut edited = big.clone();
    edited.insert(10_000, "one new line\n".into());
    std::fs::write(dir.join("big.txt"), edited.concat()).unwrap();
    let mut bin = binary.clone();
    for at in [10, 100_000, 199_990] {
        bin[at] ^= 0xff;
    }
    std::fs::write(dir.join("bin.dat"), &bin).unwrap();
    let grown = [grow.clone(), lines(20)].concat();
    std::fs::write(dir.join("grow.txt"), grown.concat()).unwrap();
    std::fs::write(dir.join("shrink.txt"), shrink[..1_000].concat()).unwrap();
    std::fs::write(dir.join("replace.txt"), lines(2_000).concat()).unwrap();
    w.git(&dir, &["commit", "-qam", "edits"]);
    let head = w.git(&dir, &["rev-parse", "HEAD"]);

    srv.clear_log();
    w.run(&dir, &["push", "--json"], &[("PUSH_URL", url.as_str())])
        .assert_code(0);
    let sent = srv.receive_pack_bytes();
    // replace.txt alone is about 50 KB compressed; whole objects were about 1 MB in all.
    assert!(
        (40_000..80_000).contains(&sent),
        "{sent} bytes sent for the push"
    );
    assert_eq!(w.git(&bare, &["rev-parse", "refs/heads/sessions/d"]), head);
    w.git(&bare, &["fsck", "--no-progress", "--strict"]);
    for name in [
        "big.txt",
        "bin.dat",
        "grow.txt",
        "shrink.txt",
        "replace.txt",
    ] {
        let remote = w.git_output(&bare, &["cat-file", "blob", &format!("sessions/d:{name}")]);
        assert_eq!(
            remote.stdout,
            std::fs::read(dir.join(name)).unwrap(),
            "{name} as the server has it"
        );
    }
}

/// A server that advertises `no-thin` gets whole objects: a 3-byte edit of a 200 KB binary file
/// sends the file whole (git's receive-pack never advertises it, so the test server adds it to
/// the real advertisement); without it the same kind of edit goes as a delta of a few bytes.
#[test]
fn a_server_advertising_no_thin_gets_whole_objects() {
    let w = World::new();
    let mut seed = 23u64;
    let binary = incompressible(200_000, &mut seed);
    let origin = w.scratch("origin");
    std::fs::write(origin.join("bin.dat"), &binary).unwrap();
    let (bare, srv, url, dir) = serve_and_restore(&w, &origin, "sessions/n");
    let sent_for_an_edit = |at: usize, no_thin: bool| -> usize {
        let mut bin = std::fs::read(dir.join("bin.dat")).unwrap();
        bin[at] ^= 0xff;
        std::fs::write(dir.join("bin.dat"), &bin).unwrap();
        w.git(&dir, &["commit", "-qam", "edit"]);
        srv.knobs
            .advertise_no_thin
            .store(no_thin, std::sync::atomic::Ordering::SeqCst);
        srv.clear_log();
        w.run(&dir, &["push", "--json"], &[("PUSH_URL", url.as_str())])
            .assert_code(0);
        assert_eq!(
            w.git(&bare, &["rev-parse", "refs/heads/sessions/n"]),
            w.git(&dir, &["rev-parse", "HEAD"])
        );
        w.git(&bare, &["fsck", "--no-progress", "--strict"]);
        srv.receive_pack_bytes()
    };
    let whole = sent_for_an_edit(100, true);
    assert!(whole > 190_000, "{whole} bytes sent to a no-thin server");
    let thin = sent_for_an_edit(150_000, false);
    assert!(thin < 5_000, "{thin} bytes sent as a thin pack");
}

/// A session pushing to a repository of the other object format (a SHA-1 session to a SHA-256
/// repository; in the sha256 run, the reverse) is exit 2 naming both formats, after the
/// advertisement and before any upload: never a silent conversion. Nothing is recorded either.
#[test]
fn a_push_to_a_repository_of_the_other_format_is_exit_2_before_any_upload() {
    let s = Setup::new();
    let (ours, theirs) = match crate::support::object_format() {
        "sha1" => ("SHA-1", "sha256"),
        _ => ("SHA-256", "sha1"),
    };
    let other = s.w.srv().join("other.git");
    s.w.git(
        &s.w.srv(),
        &[
            "init",
            "-q",
            "--bare",
            &format!("--object-format={theirs}"),
            "other.git",
        ],
    );
    s.w.git(&other, &["config", "http.receivepack", "true"]);
    let dir = s.sandbox("a", "sessions/f", &s.ids[1]);
    s.commit(&dir, "f", "1\n");
    let url = s.srv.url("other.git", Some(&userinfo()));
    let before = s.posts();
    for args in [&["push", "--json"][..], &["save", "-m", "x", "--json"]] {
        std::fs::write(dir.join("g"), "more\n").unwrap();
        let run = s.w.run(&dir, args, &[("PUSH_URL", &url)]);
        run.assert_code(2);
        let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            msg.contains(&format!("object-format={theirs}")) && msg.contains(ours),
            "{args:?}: {msg}"
        );
        assert!(msg.contains("nothing was uploaded"), "{args:?}: {msg}");
    }
    assert_eq!(s.posts(), before, "something was uploaded");
    assert_eq!(s.w.git(&other, &["for-each-ref"]), "");
    assert_eq!(s.lease(&dir), zero_id());
    assert!(!dir.join(".git/git-session-ledger").exists());
}

crate::sha256_too!(
    creates_the_branch_and_fast_forwards_it,
    a_stale_lease_is_exit_3_and_nothing_is_uploaded,
    a_branch_created_behind_a_zero_lease_is_stale,
    rewritten_local_history_is_a_conflict_before_upload,
    a_plain_git_push_from_this_tree_advances_the_lease,
    after_a_plain_git_push_status_and_save_say_it_landed_plainly,
    a_push_that_landed_before_a_crash_is_recorded_by_the_rerun,
    edited_files_are_pushed_as_deltas,
    deletions_renames_modes_symlinks_and_an_emptied_tree_round_trip_through_save,
    a_push_to_a_repository_of_the_other_format_is_exit_2_before_any_upload,
);
