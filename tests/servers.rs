//! The git servers people use (issue 24): the same session on git's `http-backend` over protocol
//! v2 and forced to v0, on JGit's `GitServlet` (v0/v1 only) and on Dulwich's WSGI server (v0/v1
//! only), each started here on 127.0.0.1 (`scripts/peers` installs JGit and Dulwich). Every case
//! runs on every server; where a server cannot do something, the case asserts the documented
//! error (README "Servers"). Rerun: `scripts/test servers::`.

use std::path::{Path, PathBuf};

use crate::support::branch_tip;
use crate::support::dulwich::DulwichServer;
use crate::support::jgit::JGitServer;
use crate::support::{GitServer, Run, World};

/// The session branch the fixture's repository has.
const BRANCH: &str = "sessions/s";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// git's http-backend, protocol v2.
    GitV2,
    /// git's http-backend answering v0 (the `Git-Protocol` header dropped).
    GitV0,
    /// JGit 4.11's GitServlet on Jetty 9 (v0/v1).
    JGit,
    /// Dulwich's `dulwich.web` (v0/v1).
    Dulwich,
}

enum Running {
    Git(GitServer),
    JGit(JGitServer),
    Dulwich(DulwichServer),
}

/// A server of one kind over a world whose `srv/repo.git` has three commits on `main` and
/// `sessions/s` at the third.
struct Served {
    peer: Peer,
    w: World,
    ids: Vec<String>,
    running: Running,
}

impl Served {
    fn new(peer: Peer) -> Self {
        let w = World::new();
        let ids = w.repo(
            "repo.git",
            &[
                &[
                    ("README.md", Some("one\n")),
                    ("src/lib.rs", Some("fn a() {}\n")),
                ],
                &[
                    ("README.md", Some("two\n")),
                    ("bin/run.sh", Some("#!/bin/sh\n")),
                ],
                &[
                    ("docs/guide.md", Some("guide\n")),
                    ("link", Some("->README.md")),
                ],
            ],
        );
        let bare = w.srv().join("repo.git");
        w.git(
            &bare,
            &["update-ref", &format!("refs/heads/{BRANCH}"), &ids[2]],
        );
        // The defaults of each server: no SHA-in-want setting.
        w.git(
            &bare,
            &["config", "--unset", "uploadpack.allowAnySHA1InWant"],
        );
        let running = match peer {
            Peer::GitV2 | Peer::GitV0 => {
                let srv = GitServer::start(&w.srv(), None);
                srv.knobs
                    .v0_only
                    .store(peer == Peer::GitV0, std::sync::atomic::Ordering::SeqCst);
                Running::Git(srv)
            }
            Peer::JGit => Running::JGit(JGitServer::start(&w.srv())),
            Peer::Dulwich => Running::Dulwich(DulwichServer::start(&w.srv())),
        };
        Served {
            peer,
            w,
            ids,
            running,
        }
    }

    fn url(&self) -> String {
        match &self.running {
            Running::Git(s) => s.url("repo.git", None),
            Running::JGit(s) => s.url("repo.git"),
            Running::Dulwich(s) => s.url("repo.git"),
        }
    }

    fn bare(&self) -> PathBuf {
        self.w.srv().join("repo.git")
    }

    /// Set `key` in the served repository's config (each server reads it per request).
    fn config(&self, key: &str, value: &str) {
        self.w.git(&self.bare(), &["config", key, value]);
    }

    /// `git-session restore` of `sha` for `branch` into a new folder `name`.
    fn restore(&self, name: &str, branch: &str, sha: &str) -> (PathBuf, Run) {
        let dir = self.w.path(name);
        let url = self.url();
        let push = [("PUSH_URL", url.as_str())];
        let run = self
            .w
            .restore_with(&dir, &url, branch, sha, &["--json"], &push);
        (dir, run)
    }

    fn run(&self, dir: &Path, args: &[&str]) -> Run {
        let url = self.url();
        self.w.run(
            dir,
            args,
            &[("READ_URL", url.as_str()), ("PUSH_URL", url.as_str())],
        )
    }

    /// Where `branch` is on the server, read by the git CLI in the served repository.
    fn remote(&self, branch: &str) -> Option<String> {
        branch_tip(&self.w, &self.bare(), branch)
    }

    /// `save -m message` in `dir`, which must push: returns the commit, checked on the server.
    fn save_pushed(&self, dir: &Path, message: &str) -> String {
        let save = self.run(dir, &["save", "-m", message, "--json"]);
        save.assert_code(0);
        let pushed = save.json()["commit"].as_str().unwrap().to_owned();
        let peer = self.peer;
        assert_eq!(
            self.remote(BRANCH).as_deref(),
            Some(pushed.as_str()),
            "{peer:?}"
        );
        pushed
    }

    /// The checks every restored tree must pass, judged by the git CLI.
    fn assert_restored(&self, dir: &Path, branch: &str, sha: &str) {
        let w = &self.w;
        assert_eq!(w.git(dir, &["rev-parse", "HEAD"]), sha, "{:?}", self.peer);
        assert_eq!(
            w.git(dir, &["symbolic-ref", "HEAD"]),
            format!("refs/heads/{branch}")
        );
        assert_eq!(w.git(dir, &["status", "--porcelain"]), "");
        assert_eq!(
            w.git(dir, &["rev-parse", "--is-shallow-repository"]),
            "true"
        );
        w.git(dir, &["fsck", "--no-progress"]);
    }

    /// The error of a refused restore, and that nothing was written.
    fn assert_refused(&self, dir: &Path, run: &Run, code: i32, words: &[&str]) {
        run.assert_code(code);
        for word in words {
            assert!(
                run.stderr.contains(word),
                "{:?}: no '{word}' in: {}",
                self.peer,
                run.stderr
            );
        }
        assert!(
            !dir.exists() || std::fs::read_dir(dir).unwrap().count() == 0,
            "{:?}: the refused restore wrote into the target",
            self.peer
        );
    }
}

fn restores_the_branch_tip(peer: Peer) {
    let s = Served::new(peer);
    let (dir, run) = s.restore("t", BRANCH, &s.ids[2]);
    run.assert_code(0);
    assert_eq!(run.json()["tip"], s.ids[2].as_str());
    assert_eq!(
        run.json()["warnings"],
        serde_json::json!([]),
        "{}",
        run.stdout
    );
    s.assert_restored(&dir, BRANCH, &s.ids[2]);
    assert_eq!(
        std::fs::read_to_string(dir.join("docs/guide.md")).unwrap(),
        "guide\n"
    );
}

/// A commit no ref tips (`main~1`): git and JGit serve any commit a ref reaches over HTTP;
/// Dulwich serves only advertised tips, with or without the setting, and the refusal names it.
fn restores_a_commit_no_ref_tips(peer: Peer, allow_reachable: bool) {
    let s = Served::new(peer);
    if allow_reachable {
        s.config("uploadpack.allowReachableSHA1InWant", "true");
    }
    let (dir, run) = s.restore("t", "sessions/new", &s.ids[1]);
    if peer == Peer::Dulwich {
        s.assert_refused(
            &dir,
            &run,
            5,
            &[
                "uploadpack.allowReachableSHA1InWant",
                "ephemeral ref",
                &s.ids[1],
            ],
        );
        return;
    }
    run.assert_code(0);
    s.assert_restored(&dir, "sessions/new", &s.ids[1]);
}

/// An id no object has: not found (exit 8) where the server says it serves any reachable
/// commit (v2; v0 with the setting advertised); otherwise the server's refusal cannot tell "no
/// such commit" from "not served", and says both (exit 5).
fn refuses_an_unknown_commit(peer: Peer, allow_reachable: bool) {
    let s = Served::new(peer);
    if allow_reachable {
        s.config("uploadpack.allowReachableSHA1InWant", "true");
    }
    let unknown = "1234567890123456789012345678901234567890";
    let (dir, run) = s.restore("t", "sessions/new", unknown);
    match (peer, allow_reachable) {
        (Peer::GitV2, _) | (Peer::GitV0, true) => {
            s.assert_refused(&dir, &run, 8, &["not found", "TIP_SHA"]);
        }
        // JGit checks the shallow request first and answers "internal server error".
        (Peer::JGit, false) | (Peer::JGit, true) => {
            s.assert_refused(&dir, &run, 5, &["internal server error"]);
        }
        _ => s.assert_refused(
            &dir,
            &run,
            5,
            &["uploadpack.allowReachableSHA1InWant", "check TIP_SHA"],
        ),
    }
}

fn saves_and_a_stale_save_is_refused(peer: Peer) {
    let s = Served::new(peer);
    let (a, run) = s.restore("a", BRANCH, &s.ids[2]);
    run.assert_code(0);
    let (b, run) = s.restore("b", BRANCH, &s.ids[2]);
    run.assert_code(0);
    std::fs::write(a.join("new.txt"), "from a\n").unwrap();
    let pushed = s.save_pushed(&a, "work in a");
    assert_eq!(
        s.w.git(&s.bare(), &["rev-parse", &format!("{pushed}^")]),
        s.ids[2]
    );
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);

    std::fs::write(b.join("other.txt"), "from b\n").unwrap();
    let stale = s.run(&b, &["save", "-m", "work in b", "--json"]);
    stale.assert_code(3);
    let j = stale.json();
    assert_eq!(j["error"]["kind"], "stale", "{}", stale.stdout);
    assert_eq!(j["lease"], s.ids[2].as_str(), "{}", stale.stdout);
    assert_eq!(j["remote_tip"], pushed.as_str(), "{}", stale.stdout);
    assert_eq!(
        s.remote(BRANCH).as_deref(),
        Some(pushed.as_str()),
        "untouched"
    );

    let status = s.run(&a, &["status", "--remote", "--json"]);
    status.assert_code(0);
    assert_eq!(status.json()["remote_state"], "lease", "{}", status.stdout);
    let status = s.run(&b, &["status", "--remote", "--json"]);
    status.assert_code(0);
    assert_eq!(status.json()["remote_state"], "moved", "{}", status.stdout);
}

/// Bake at the first commit (a release branch's tip: Dulwich serves tips only), boot at the
/// session branch's tip: only the difference is fetched (the base named as `shallow` and `have`,
/// a thin pack), and the boot's tree is the tip's; the same from a cache (`--cache`). Over git's
/// http-backend the boot is two requests (the posted ls-refs and the fetch, at once), three where
/// it answers v0 only (the posted ls-refs refused, then `info/refs`).
fn boots_a_baked_template(peer: Peer) {
    let s = Served::new(peer);
    s.w.git(&s.bare(), &["update-ref", "refs/heads/release", &s.ids[0]]);
    let dir = s.w.path("t");
    let url = s.url();
    s.w.run(
        &dir,
        &["bake", "--json"],
        &[("READ_URL", url.as_str()), ("TIP_SHA", s.ids[0].as_str())],
    )
    .assert_code(0);
    assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), s.ids[0]);
    if let Running::Git(srv) = &s.running {
        srv.clear_log();
    }
    let (_, run) = s.restore("t", BRANCH, &s.ids[2]);
    run.assert_code(0);
    // The ls-refs posted without the advertisement, beside the fetch where the bake found the
    // server taking it (in either order); a v0 server costs one request more.
    if let Running::Git(srv) = &s.running {
        let mut requests = srv.requests();
        if peer == Peer::GitV2 {
            requests.sort();
        }
        let expected: &[&str] = match peer {
            Peer::GitV2 => &["fetch", "ls-refs"],
            _ => &["ls-refs", "info/refs", "fetch v0"],
        };
        assert_eq!(requests, expected, "{peer:?}");
    }
    assert_eq!(
        run.json()["warnings"],
        serde_json::json!([]),
        "{peer:?}: a server that knows the base: {}",
        run.stdout
    );
    s.assert_restored(&dir, BRANCH, &s.ids[2]);
    assert!(!dir.join(".git/git-session-template.json").exists());

    // A restore seeded from a template elsewhere (`--cache`) fetches the same difference.
    let cache = s.w.path("cache");
    s.w.run(
        &cache,
        &["bake", "--json"],
        &[("READ_URL", url.as_str()), ("TIP_SHA", s.ids[0].as_str())],
    )
    .assert_code(0);
    let seeded = s.w.path("seeded");
    let run = s.w.run(
        &seeded,
        &["restore", "--json", "--cache", cache.to_str().unwrap()],
        &[
            ("READ_URL", url.as_str()),
            ("SESSION_BRANCH", BRANCH),
            ("TIP_SHA", s.ids[2].as_str()),
        ],
    );
    run.assert_code(0);
    assert_eq!(
        run.json()["warnings"],
        serde_json::json!([]),
        "{}",
        run.stdout
    );
    s.assert_restored(&seeded, BRANCH, &s.ids[2]);
}

/// An archive of the tip (served as a file), history from the server on the first save.
fn saves_a_tree_restored_from_an_archive(peer: Peer) {
    let s = Served::new(peer);
    let archive = s.w.path("archives/tip.tar.gz");
    std::fs::create_dir_all(archive.parent().unwrap()).unwrap();
    s.w.git(
        &s.bare(),
        &[
            "archive",
            "--format=tar.gz",
            &format!("--output={}", archive.display()),
            &s.ids[2],
        ],
    );
    let dir = s.w.path("t");
    let url = s.url();
    let run = s.w.run(
        &s.w.path(""),
        &[
            "restore",
            "--json",
            "--archive",
            archive.to_str().unwrap(),
            "-C",
            dir.to_str().unwrap(),
        ],
        &[
            ("READ_URL", url.as_str()),
            ("PUSH_URL", url.as_str()),
            ("SESSION_BRANCH", BRANCH),
            ("TIP_SHA", s.ids[2].as_str()),
        ],
    );
    run.assert_code(0);
    std::fs::write(dir.join("docs/guide.md"), "guide, edited\n").unwrap();
    let pushed = s.save_pushed(&dir, "edit the guide");
    assert_eq!(
        s.w.git(&s.bare(), &["diff", "--name-only", &s.ids[2], &pushed]),
        "docs/guide.md"
    );
    s.w.git(&s.bare(), &["fsck", "--no-progress"]);
}

/// A SHA-256 repository: git (both protocols) and Dulwich 1.2 serve it — restored, the tree a
/// real SHA-256 repository, saved and pushed; JGit 4.11 cannot read one (its `info/refs` is an
/// HTTP 500: "Invalid id" of a 64-digit ref), a network failure after the retries, nothing
/// written (README "Servers").
fn sha256_repository(peer: Peer) {
    crate::support::as_sha256(|| {
        let s = Served::new(peer);
        let (dir, run) = s.restore("t", BRANCH, &s.ids[2]);
        if peer == Peer::JGit {
            s.assert_refused(&dir, &run, 5, &["HTTP 500"]);
            return;
        }
        run.assert_code(0);
        assert_eq!(run.json()["object_format"], "sha256");
        s.assert_restored(&dir, BRANCH, &s.ids[2]);
        assert_eq!(
            s.w.git(&dir, &["rev-parse", "--show-object-format"]),
            "sha256"
        );
        std::fs::write(dir.join("README.md"), "sha-256\n").unwrap();
        let pushed = s.save_pushed(&dir, "edit on SHA-256");
        assert_eq!(pushed.len(), 64);
        s.w.git(&s.bare(), &["fsck", "--no-progress"]);
    })
}

/// In a peer's module, one `#[test]` per case: `test: case(arguments after the peer);`.
macro_rules! peer_tests {
    ($peer:expr; $($test:ident: $case:ident($($arg:expr),*);)*) => {$(
        #[test]
        fn $test() {
            super::$case($peer $(, $arg)*);
        }
    )*};
}

macro_rules! matrix {
    ($($name:ident => $peer:expr),* $(,)?) => {$(
        mod $name {
            use super::*;

            peer_tests! { $peer;
                restores_the_branch_tip: restores_the_branch_tip();
                restores_a_commit_no_ref_tips_without_the_server_setting:
                    restores_a_commit_no_ref_tips(false);
                restores_a_commit_no_ref_tips_with_allow_reachable_sha1_in_want:
                    restores_a_commit_no_ref_tips(true);
                refuses_an_unknown_commit_without_the_server_setting:
                    refuses_an_unknown_commit(false);
                refuses_an_unknown_commit_with_allow_reachable_sha1_in_want:
                    refuses_an_unknown_commit(true);
                saves_and_a_stale_save_is_refused: saves_and_a_stale_save_is_refused();
                boots_a_baked_template: boots_a_baked_template();
                saves_a_tree_restored_from_an_archive: saves_a_tree_restored_from_an_archive();
                sha256_repository: sha256_repository();
            }
        }
    )*};
}

matrix! {
    git_v2 => Peer::GitV2,
    git_v0 => Peer::GitV0,
    jgit => Peer::JGit,
    dulwich => Peer::Dulwich,
}

/// Dulwich serves the deltas of the repository's packs as they are, as `REF_DELTA`s, some before
/// their base (found serving tokio): a tree whose files are deltas of each other, repacked by
/// git, restores from Dulwich as from git, the files as git has them. Before, exit 6: "a delta
/// chain could not be followed as the ref base … could not be found".
#[test]
fn dulwich_s_ref_deltas_of_a_repacked_repository_are_restored() {
    let w = World::new();
    let mut seed = 3u64;
    let text: String = crate::support::incompressible(30_000, &mut seed)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .chunks(40)
        .map(|c| c.concat() + "\n")
        .collect();
    let versions: Vec<String> = (0..6)
        .map(|i| text.replacen(&text[..40], &format!("{i:040}"), 1))
        .collect();
    let files: Vec<(String, &str)> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("v{i}.txt"), v.as_str()))
        .collect();
    let commit: Vec<(&str, Option<&str>)> =
        files.iter().map(|(p, v)| (p.as_str(), Some(*v))).collect();
    let ids = w.repo("repo.git", &[&commit]);
    let bare = w.srv().join("repo.git");
    w.git(&bare, &["repack", "-adf", "--window=10", "--depth=5"]);
    let srv = DulwichServer::start(&w.srv());
    let dir = w.path("s");
    let run = w.restore_with(
        &dir,
        &srv.url("repo.git"),
        BRANCH,
        &ids[0],
        &["--json"],
        &[],
    );
    run.assert_code(0);
    for (path, content) in &files {
        assert_eq!(
            std::fs::read_to_string(dir.join(path)).unwrap(),
            *content,
            "{path}"
        );
    }
    w.git(&dir, &["fsck", "--no-progress"]);
}
