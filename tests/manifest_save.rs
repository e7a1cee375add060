//! `save`, `push` and `status` with `--all` over a sessions manifest: each tree with its own lease
//! and its own push URL, one result per session, a stale session stopping only itself.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::watch::Watch;
use crate::support::{GitServer, Run, TOKEN, World, assert_matches_schema, userinfo};

/// `b`'s server wants this token; `a`'s and `c`'s want [`TOKEN`].
const OTHER: &str = "0ther-Secr3t";

/// Three sessions `a`, `b`, `c` restored from a manifest into `trees/…`, `b` on a server of its
/// own with its own token.
struct Trees {
    w: World,
    srv: GitServer,
    other: GitServer,
    manifest: PathBuf,
}

impl Trees {
    fn restore() -> Self {
        let w = World::new();
        let mut tips = Vec::new();
        for name in ["a", "b", "c"] {
            let readme = format!("{name} one\n");
            let ids = w.repo(
                &format!("{name}.git"),
                &[&[("README.md", Some(readme.as_str()))]],
            );
            tips.push(ids.last().unwrap().clone());
        }
        let srv = GitServer::start(&w.srv(), Some(TOKEN));
        let other = GitServer::start(&w.srv(), Some(OTHER));
        let entry = |name: &str, url: String, tip: &str| {
            json!({
                "dir": format!("trees/{name}"),
                "read_url": url,
                "push_url": url,
                "session_branch": format!("sessions/{name}"),
                "tip_sha": tip,
            })
        };
        let manifest = json!({"sessions": [
            entry("a", srv.url("a.git", Some(&userinfo())), &tips[0]),
            entry("b", other.url("b.git", Some(&format!("t:{OTHER}"))), &tips[1]),
            entry("c", srv.url("c.git", Some(&userinfo())), &tips[2]),
        ]});
        let path = w.path("sessions.json");
        std::fs::write(&path, manifest.to_string()).unwrap();
        let t = Trees {
            w,
            srv,
            other,
            manifest: path,
        };
        t.run(&["restore", "--json"]).assert_code(0);
        t
    }

    /// Run git-session in the work folder with the manifest in `GIT_SESSION_SESSIONS_FILE`.
    fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, &[])
    }

    /// [`Trees::run`] with `vars` too.
    fn run_with(&self, args: &[&str], vars: &[(&str, &str)]) -> Run {
        let file = self.manifest.to_str().unwrap();
        let mut all = vec![("GIT_SESSION_SESSIONS_FILE", file)];
        all.extend_from_slice(vars);
        self.w.run(&self.w.path(""), args, &all)
    }

    fn edit(&self, name: &str, text: &str) {
        std::fs::write(self.w.path(&format!("trees/{name}/notes.txt")), text).unwrap();
    }

    /// The session branch's tip on the server, as git sees it (`None`: absent).
    fn remote_tip(&self, name: &str) -> Option<String> {
        let out = self.w.git_output_with_env(
            &self.w.srv().join(format!("{name}.git")),
            &[
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/sessions/{name}"),
            ],
            &[],
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The basic credentials each server was sent.
    fn sent(srv: &GitServer) -> Vec<String> {
        use base64::Engine as _;
        srv.log()
            .iter()
            .filter_map(|e| e.authorization.as_deref())
            .map(|v| {
                let b64 = v.strip_prefix("Basic ").unwrap_or(v);
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap_or_default();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .collect()
    }

    /// Another sandbox moves `name`'s session branch on the server: a commit of its own.
    fn move_branch(&self, name: &str) -> String {
        let bare = self.w.srv().join(format!("{name}.git"));
        let tree = self.w.git(&bare, &["rev-parse", "HEAD^{tree}"]);
        let theirs = self.w.git(
            &bare,
            &["commit-tree", &tree, "-p", "HEAD", "-m", "another sandbox"],
        );
        self.w.git(
            &bare,
            &[
                "update-ref",
                &format!("refs/heads/sessions/{name}"),
                &theirs,
            ],
        );
        theirs
    }
}

fn session(out: &Value, i: usize) -> &Value {
    &out["sessions"][i]
}

#[test]
fn save_all_pushes_each_edited_tree_with_its_own_credential_and_a_clean_one_is_fine() {
    let t = Trees::restore();
    let before = (t.srv.log().len(), t.other.log().len());
    t.edit("a", "a two\n");
    t.edit("b", "b two\n");
    let run = t.run(&["save", "--all", "--json", "-m", "all at once"]);
    run.assert_code(0);
    let out = run.json();
    assert_matches_schema(&out);
    assert_eq!(
        (
            out["ok"].clone(),
            out["command"].clone(),
            out["exit_code"].clone()
        ),
        (json!(true), json!("save"), json!(0)),
        "{out:#}"
    );
    for (i, name) in ["a", "b"].iter().enumerate() {
        let s = session(&out, i);
        let dir = t.w.path(&format!("trees/{name}"));
        assert_eq!(s["dir"], dir.to_str().unwrap(), "{out:#}");
        assert_eq!(
            (s["ok"].clone(), s["exit_code"].clone()),
            (json!(true), json!(0))
        );
        assert_eq!(
            (s["committed"].clone(), s["pushed"].clone()),
            (json!(true), json!(true))
        );
        let commit = s["commit"].as_str().unwrap();
        assert_eq!(s["tip"], commit, "{out:#}");
        assert_eq!(t.remote_tip(name).as_deref(), Some(commit), "{name}");
        let bare = t.w.srv().join(format!("{name}.git"));
        assert_eq!(
            t.w.git(&bare, &["log", "-1", "--format=%s", commit]),
            "all at once"
        );
        assert_eq!(
            t.w.git(&bare, &["show", &format!("{commit}:notes.txt")]),
            format!("{name} two")
        );
    }
    let c = session(&out, 2);
    assert_eq!(
        (c["ok"].clone(), c["committed"].clone()),
        (json!(true), json!(false)),
        "{out:#}"
    );
    // Nothing committed in c; its branch is created at the restored tip, as a single save does.
    let c_head = t.w.git(&t.w.path("trees/c"), &["rev-parse", "HEAD"]);
    assert_eq!(c["commit"], Value::Null);
    assert_eq!(t.remote_tip("c"), Some(c_head));
    // Each save spoke to its own server with its own token only.
    let a_sent = &Trees::sent(&t.srv)[..];
    let b_sent = &Trees::sent(&t.other)[..];
    assert!(t.srv.log().len() > before.0 && t.other.log().len() > before.1);
    assert!(a_sent.iter().all(|c| c.ends_with(TOKEN)), "{a_sent:?}");
    assert!(b_sent.iter().all(|c| c.ends_with(OTHER)), "{b_sent:?}");
    assert!(
        t.other.log()[before.1..]
            .iter()
            .any(|e| e.path.starts_with("/b.git/git-receive-pack")),
        "b pushed to its own server"
    );
    // A person's output: one line per session.
    t.edit("c", "c two\n");
    let run = t.run(&["save", "--all"]);
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(
        lines[0].contains("trees/a: nothing to commit"),
        "{}",
        run.stdout
    );
    assert!(lines[2].contains("trees/c: committed "), "{}", run.stdout);
    assert!(t.remote_tip("c").is_some());
}

#[test]
fn a_stale_session_stops_only_itself_and_sets_the_exit_code() {
    let t = Trees::restore();
    for name in ["a", "b", "c"] {
        t.edit(name, &format!("{name} mine\n"));
    }
    let theirs = t.move_branch("a");
    // The environment's URLs are a single session's: --all never uses them.
    let nowhere = "http://127.0.0.1:1/nowhere.git";
    let run = t.run_with(
        &["save", "--all", "--json"],
        &[("PUSH_URL", nowhere), ("READ_URL", nowhere)],
    );
    run.assert_code(3);
    let out = run.json();
    assert_matches_schema(&out);
    assert_eq!(
        (out["ok"].clone(), out["exit_code"].clone()),
        (json!(false), json!(3))
    );
    let a = session(&out, 0);
    assert_eq!(
        (a["ok"].clone(), a["exit_code"].clone(), a["kind"].clone()),
        (json!(false), json!(3), json!("stale")),
        "{out:#}"
    );
    assert_eq!(a["stale_remote_tip"], theirs.as_str(), "{out:#}");
    let lease = a["stale_lease"].as_str().unwrap();
    assert!(
        lease.bytes().all(|b| b == b'0'),
        "a new branch: the zero id, {out:#}"
    );
    assert!(a["message"].as_str().unwrap().contains(&theirs));
    // The other sandbox's commit stays; a's own commit is kept locally.
    assert_eq!(t.remote_tip("a").as_deref(), Some(theirs.as_str()));
    for (i, name) in [(1, "b"), (2, "c")] {
        let s = session(&out, i);
        assert_eq!(
            (s["ok"].clone(), s["pushed"].clone()),
            (json!(true), json!(true)),
            "{out:#}"
        );
        assert_eq!(
            t.remote_tip(name).as_deref(),
            s["commit"].as_str(),
            "{name}"
        );
    }
}

#[test]
fn status_and_push_all_list_each_session() {
    let t = Trees::restore();
    t.edit("a", "a two\n");
    let b = t.w.path("trees/b");
    let run = t.run(&["status", "--all", "--json"]);
    run.assert_code(0);
    let out = run.json();
    assert_matches_schema(&out);
    assert_eq!(out["command"], "status", "{out:#}");
    assert_eq!(out["sessions"].as_array().unwrap().len(), 3);
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let s = session(&out, i);
        assert_eq!(s["branch"], format!("sessions/{name}"), "{out:#}");
        assert_eq!(s["ok"], true);
        assert_eq!(s["ahead"], 0);
    }
    assert_eq!(
        session(&out, 0)["changed"],
        json!([{"status": "A", "path": "notes.txt"}])
    );
    assert_eq!(session(&out, 2)["changed"], json!([]));

    // A commit of b's made with git itself, for push --all to send.
    t.edit("b", "b two\n");
    t.w.git(&b, &["add", "notes.txt"]);
    t.w.git(&b, &["commit", "-q", "-m", "b by git"]);
    let local = t.w.git(&b, &["rev-parse", "HEAD"]);
    let run = t.run(&["push", "--all", "--json"]);
    run.assert_code(0);
    let out = run.json();
    assert_matches_schema(&out);
    assert_eq!(out["command"], "push");
    assert_eq!(session(&out, 1)["pushed"], true, "{out:#}");
    assert_eq!(t.remote_tip("b"), Some(local));
    // a's file is not committed by a push: its branch is created at the restored tip.
    let a_head = t.w.git(&t.w.path("trees/a"), &["rev-parse", "HEAD"]);
    assert_eq!(session(&out, 0)["tip"], a_head.as_str(), "{out:#}");
    assert_eq!(t.remote_tip("a"), Some(a_head));
    assert_eq!(session(&out, 2)["committed"], false);
}

#[test]
fn all_needs_a_manifest_takes_sessions_and_refuses_a_single_sessions_push_url() {
    let t = Trees::restore();
    let work = t.w.path("");
    t.w.run(&work, &["save", "--all"], &[]).assert_says(
        2,
        &[
            "--all needs a sessions manifest",
            "GIT_SESSION_SESSIONS_FILE",
        ],
    );
    t.run(&["push", "--all", "--push-url", "http://127.0.0.1:1/x.git"])
        .assert_says(2, &["--push-url names one session's input"]);
    // watch --all likewise, before it watches anything.
    t.w.run(&work, &["watch", "--all", "--every", "1s"], &[])
        .assert_says(2, &["--all needs a sessions manifest"]);
    t.run(&[
        "watch",
        "--all",
        "--every",
        "1s",
        "--push-url",
        "http://127.0.0.1:1/x.git",
    ])
    .assert_says(2, &["--push-url names one session's input"]);
    // --sessions without --all is refused by the parser.
    t.w.run(&work, &["status", "--sessions", "sessions.json"], &[])
        .assert_code(2);
    let run = t.w.run(
        &work,
        &["status", "--all", "--sessions", "sessions.json"],
        &[],
    );
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    for (line, name) in lines.iter().zip(["a", "b", "c"]) {
        assert!(line.contains(&format!("trees/{name}: ")), "{}", run.stdout);
    }
    // A session the manifest gives no push URL fails alone, naming its entry.
    let mut m: Value = serde_json::from_slice(&std::fs::read(&t.manifest).unwrap()).unwrap();
    m["sessions"][1].as_object_mut().unwrap().remove("push_url");
    std::fs::write(t.w.path("no-push.json"), m.to_string()).unwrap();
    let run = t.w.run(
        &work,
        &["push", "--all", "--json", "--sessions", "no-push.json"],
        &[],
    );
    run.assert_code(2);
    let out = run.json();
    assert_matches_schema(&out);
    let b = session(&out, 1);
    assert_eq!(
        (b["exit_code"].clone(), b["kind"].clone()),
        (json!(2), json!("usage"))
    );
    assert!(
        b["message"].as_str().unwrap().contains("session 1 ("),
        "{out:#}"
    );
    assert!(
        b["message"].as_str().unwrap().contains("no push_url"),
        "{out:#}"
    );
    assert_eq!(
        (
            session(&out, 0)["ok"].clone(),
            session(&out, 2)["ok"].clone()
        ),
        (json!(true), json!(true))
    );
}

/// `watch --all --json` over `t`'s manifest in the work folder; the environment's URLs lead
/// nowhere: --all never uses them.
fn watch_all(t: &Trees, every: &str) -> Watch {
    let nowhere = "http://127.0.0.1:1/nowhere.git";
    Watch::start_with(
        &t.w,
        &t.w.path(""),
        &["--all", "--every", every],
        nowhere,
        &[
            ("GIT_SESSION_SESSIONS_FILE", t.manifest.to_str().unwrap()),
            ("READ_URL", nowhere),
        ],
    )
}

/// The next line of `watch` about session `name` (`trees/NAME`): the first kept in `others`, else
/// the next printed, others' kept in `others` meanwhile.
fn next_of(t: &Trees, watch: &mut Watch, name: &str, others: &mut Vec<Value>) -> Value {
    let dir = t.w.path(&format!("trees/{name}"));
    if let Some(i) = others
        .iter()
        .position(|j| j["dir"] == dir.to_str().unwrap())
    {
        return others.remove(i);
    }
    loop {
        let j = watch
            .next(15)
            .unwrap_or_else(|| panic!("no line for {name}; others: {others:#?}"));
        if j["dir"] == dir.to_str().unwrap() {
            return j;
        }
        others.push(j);
    }
}

#[test]
fn watch_all_checkpoints_each_tree_on_its_own_server_and_a_stale_one_stops_alone() {
    let t = Trees::restore();
    let before = (t.srv.log().len(), t.other.log().len());
    let mut watch = watch_all(&t, "300ms");
    t.edit("a", "a two\n");
    t.edit("b", "b two\n");
    let mut others = Vec::new();
    for name in ["a", "b"] {
        let j = next_of(&t, &mut watch, name, &mut others);
        assert_eq!(
            (
                j["command"].clone(),
                j["committed"].clone(),
                j["pushed"].clone()
            ),
            (json!("save"), json!(true), json!(true)),
            "{j:#}"
        );
        assert_eq!(
            t.remote_tip(name).as_deref(),
            j["commit"].as_str(),
            "{name}"
        );
        let bare = t.w.srv().join(format!("{name}.git"));
        assert_eq!(
            t.w.git(
                &bare,
                &["show", &format!("refs/heads/sessions/{name}:notes.txt")]
            ),
            format!("{name} two")
        );
    }
    // Each tree's line, none for the clean c: it made no commit.
    assert!(others.is_empty(), "{others:#?}");
    assert_eq!(t.remote_tip("c"), None);
    // Each save spoke to its own server with its own token only.
    let a_sent = &Trees::sent(&t.srv)[..];
    let b_sent = &Trees::sent(&t.other)[..];
    assert!(t.srv.log().len() > before.0 && t.other.log().len() > before.1);
    assert!(a_sent.iter().all(|c| c.ends_with(TOKEN)), "{a_sent:?}");
    assert!(b_sent.iter().all(|c| c.ends_with(OTHER)), "{b_sent:?}");

    // Another sandbox takes c: c's next save is stale and ends c's watch only.
    let theirs = t.move_branch("c");
    t.edit("c", "c mine\n");
    let c = next_of(&t, &mut watch, "c", &mut others);
    assert_eq!(
        (
            c["ok"].clone(),
            c["exit_code"].clone(),
            c["error"]["kind"].clone()
        ),
        (json!(false), json!(3), json!("stale")),
        "{c:#}"
    );
    assert_eq!(c["remote_tip"], theirs.as_str(), "{c:#}");
    // a and b are still watched; c is not.
    t.edit("a", "a three\n");
    t.edit("c", "c mine, again\n");
    let a = next_of(&t, &mut watch, "a", &mut others);
    assert_eq!(
        (a["ok"].clone(), a["pushed"].clone()),
        (json!(true), json!(true)),
        "{a:#}"
    );
    assert_eq!(t.remote_tip("a").as_deref(), a["commit"].as_str());
    // SIGTERM: b's pending edit is saved; the exit code is c's, the first that failed.
    t.edit("b", "b three\n");
    watch.signal("-TERM");
    let (code, stderr, seen) = watch.wait(15);
    assert_eq!(code, Some(3), "{stderr}");
    let c_dir = t.w.path("trees/c");
    assert!(
        stderr.contains(&format!("{}: no longer watched (exit 3)", c_dir.display())),
        "{stderr}"
    );
    // Every line the watch printed: c's only one is its stale one.
    let c_lines = seen
        .iter()
        .filter(|j| j["dir"] == c_dir.to_str().unwrap())
        .count();
    assert_eq!(c_lines, 1, "c saved again after it stopped: {seen:#?}");
    assert_eq!(t.remote_tip("c").as_deref(), Some(theirs.as_str()));
    let bare = t.w.srv().join("b.git");
    assert_eq!(
        t.w.git(&bare, &["show", "refs/heads/sessions/b:notes.txt"]),
        "b three"
    );
}

#[test]
fn watch_all_saves_every_session_on_sigterm_within_the_bound() {
    let t = Trees::restore();
    let watch = watch_all(&t, "10m");
    std::thread::sleep(std::time::Duration::from_millis(500));
    for name in ["a", "b", "c"] {
        t.edit(name, &format!("{name} pending\n"));
    }
    let t0 = std::time::Instant::now();
    watch.signal("-TERM");
    let (code, stderr, seen) = watch.wait(15);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(t0.elapsed().as_secs() < 8, "{:?}", t0.elapsed());
    for name in ["a", "b", "c"] {
        let dir = t.w.path(&format!("trees/{name}"));
        let lines: Vec<&Value> = seen
            .iter()
            .filter(|j| j["dir"] == dir.to_str().unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{name}: {seen:#?}");
        assert_eq!(lines[0]["pushed"], true, "{name}: {seen:#?}");
        assert_eq!(t.remote_tip(name).as_deref(), lines[0]["commit"].as_str());
        let bare = t.w.srv().join(format!("{name}.git"));
        assert_eq!(
            t.w.git(
                &bare,
                &["show", &format!("refs/heads/sessions/{name}:notes.txt")]
            ),
            format!("{name} pending")
        );
    }
}

#[test]
fn save_all_killed_mid_save_then_rerun_pushes_every_session_exactly_once() {
    // One at a time, the kill lands in a's save with b and c not begun; three at once, wherever
    // the others are then.
    for (point, at_once) in [
        ("after-push", "1"),
        ("after-push", "3"),
        ("index-lock-taken", "1"),
        ("index-lock-taken", "3"),
    ] {
        let case = format!("{point}, {at_once} at once");
        let t = Trees::restore();
        let base: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|name| {
                t.w.git(
                    &t.w.srv().join(format!("{name}.git")),
                    &["rev-parse", "HEAD"],
                )
            })
            .collect();
        for name in ["a", "b", "c"] {
            t.edit(name, &format!("{name} once\n"));
        }
        let concurrency = ("GIT_SESSION_SESSIONS_CONCURRENCY", at_once);
        t.run_with(
            &["save", "--all", "-m", "once"],
            &[("GIT_SESSION_FAILPOINT", point), concurrency],
        )
        .assert_killed_at(point);
        if at_once == "1" {
            // Killed in a's save: a pushed and not recorded (after-push) or not pushed; b and c
            // untouched.
            let a_pushed = t.remote_tip("a").is_some();
            assert_eq!(a_pushed, point == "after-push", "{case}");
            assert_eq!(
                (t.remote_tip("b"), t.remote_tip("c")),
                (None, None),
                "{case}"
            );
        }
        let run = t.run_with(&["save", "--all", "--json", "-m", "once"], &[concurrency]);
        run.assert_code(0);
        let out = run.json();
        assert_matches_schema(&out);
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            let s = session(&out, i);
            assert_eq!(s["ok"], true, "{case}: {out:#}");
            let tip = t
                .remote_tip(name)
                .unwrap_or_else(|| panic!("{case}: {name} lost"));
            let bare = t.w.srv().join(format!("{name}.git"));
            // One commit over the restored tip: pushed once, not committed or pushed twice.
            assert_eq!(
                t.w.git(
                    &bare,
                    &["rev-list", "--count", &format!("{}..{tip}", base[i])]
                ),
                "1",
                "{case}: {name}"
            );
            assert_eq!(
                t.w.git(&bare, &["show", &format!("{tip}:notes.txt")]),
                format!("{name} once"),
                "{case}: {name}"
            );
            let tree = t.w.path(&format!("trees/{name}"));
            assert_eq!(
                t.w.git(&tree, &["rev-parse", "HEAD"]),
                tip,
                "{case}: {name}"
            );
            assert_eq!(
                t.w.git(&tree, &["status", "--porcelain"]),
                "",
                "{case}: {name}"
            );
        }
        // A third run has nothing left to do.
        let run = t.run_with(&["save", "--all", "--json"], &[concurrency]);
        run.assert_code(0);
        let out = run.json();
        for i in 0..3 {
            assert_eq!(session(&out, i)["committed"], false, "{case}: {out:#}");
        }
    }
}

#[test]
fn watch_all_shows_a_sessions_warning_on_its_own_line_only() {
    let t = Trees::restore();
    // A hook manager turns off the check of plain git push in a only: a's save warns of it.
    let a = t.w.path("trees/a");
    t.w.git(&a, &["config", "core.hooksPath", ".husky/_"]);
    let mut watch = watch_all(&t, "300ms");
    for name in ["a", "b", "c"] {
        t.edit(name, &format!("{name} two\n"));
    }
    let mut others = Vec::new();
    let lines: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|name| next_of(&t, &mut watch, name, &mut others))
        .collect();
    let warned = |j: &Value| {
        j["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("core.hooksPath"))
    };
    assert!(warned(&lines[0]), "{lines:#?}");
    assert!(!warned(&lines[1]) && !warned(&lines[2]), "{lines:#?}");
    watch.signal("-TERM");
    let (code, stderr, _) = watch.wait(15);
    assert_eq!(code, Some(0), "{stderr}");
    let a_dir = a.display().to_string();
    for line in stderr.lines().filter(|l| l.contains("core.hooksPath")) {
        assert!(line.starts_with(&format!("warning: {a_dir}: ")), "{stderr}");
    }
}
