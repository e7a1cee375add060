//! The handoff record: the owners (`GIT_SESSION_SANDBOX`, `_AGENT`, `_PERSON`) as git trailers on
//! every commit git-session makes, read back by `git interpret-trailers` on the server's copy, and
//! as `"owner"` in every `--json` result; refused values.

use std::path::{Path, PathBuf};

use crate::support::watch::Watch;
use crate::support::{GitServer, Run, TOKEN, World, assert_matches_schema, pct, userinfo};

const BRANCH: &str = "sessions/own";

struct Fixture {
    w: World,
    /// `None` while the server is down.
    srv: Option<GitServer>,
    tip: String,
}

impl Fixture {
    fn new() -> Self {
        let w = World::new();
        let ids = w.repo("repo.git", &[&[("a.txt", Some("a\n"))]]);
        let srv = GitServer::start(&w.srv(), Some(TOKEN));
        Fixture {
            w,
            srv: Some(srv),
            tip: ids[0].clone(),
        }
    }

    fn url(&self) -> String {
        self.srv
            .as_ref()
            .expect("the server is up")
            .url("repo.git", Some(&userinfo()))
    }

    fn restore(&self, name: &str) -> PathBuf {
        self.restore_at(name, &self.tip)
    }

    /// Restore the session branch at `tip` into a new sandbox `name`.
    fn restore_at(&self, name: &str, tip: &str) -> PathBuf {
        let dir = self.w.path(name);
        self.w
            .restore_with(&dir, &self.url(), BRANCH, tip, &[], &[])
            .assert_code(0);
        dir
    }

    /// A sandbox with a new file `b.txt` not yet saved, and its HEAD.
    fn sandbox_with_b(&self) -> (PathBuf, String) {
        let dir = self.restore("s");
        std::fs::write(dir.join("b.txt"), "b\n").unwrap();
        let head = self.w.git(&dir, &["rev-parse", "HEAD"]);
        (dir, head)
    }

    /// `save --json` of `b.txt` with the owner variable `var` set to `value`.
    fn save_b(&self, dir: &Path, var: &str, value: &str) -> Run {
        self.w.run(
            dir,
            &["save", "-m", "Add b", "--json"],
            &[(var, value), ("PUSH_URL", &self.url())],
        )
    }

    /// `git interpret-trailers --parse` of the server's copy of `commit`.
    fn server_trailers(&self, commit: &str) -> String {
        let bare = self.w.srv().join("repo.git");
        let message = self.w.git(&bare, &["cat-file", "commit", commit]);
        let body = message.split_once("\n\n").map_or("", |(_, b)| b).to_owned();
        self.w
            .git_stdin(&bare, &["interpret-trailers", "--parse"], body.as_bytes())
    }
}

const OWNERS: [(&str, &str); 3] = [
    ("GIT_SESSION_SANDBOX", "sb-7f3a"),
    ("GIT_SESSION_AGENT", "claude-code/2.1"),
    ("GIT_SESSION_PERSON", "Ada Lovelace <ada@example.com>"),
];

#[test]
fn every_commit_carries_its_owners_as_trailers_and_every_result_names_them() {
    let f = Fixture::new();
    let dir = f.restore("s");
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    let url = f.url();
    let mut vars = OWNERS.to_vec();
    vars.push(("PUSH_URL", &url));
    let run = f.w.run(
        &dir,
        &["save", "-m", "Add b\n\nThe body says why.", "--json"],
        &vars,
    );
    run.assert_code(0);
    let j = run.json();
    assert_matches_schema(&j);
    assert_eq!(
        j["owner"],
        serde_json::json!({
            "sandbox": "sb-7f3a",
            "agent": "claude-code/2.1",
            "person": "Ada Lovelace <ada@example.com>"
        })
    );
    let commit = j["commit"].as_str().unwrap().to_owned();
    assert_eq!(
        f.server_trailers(&commit),
        "Session-Sandbox: sb-7f3a\nSession-Agent: claude-code/2.1\n\
         Session-Person: Ada Lovelace <ada@example.com>"
    );
    // git's own reader agrees, on the local copy too.
    assert_eq!(
        f.w.git(
            &dir,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Session-Agent,valueonly)"
            ]
        ),
        "claude-code/2.1"
    );
    assert_eq!(
        f.w.git(&dir, &["log", "-1", "--format=%B"]),
        "Add b\n\nThe body says why.\n\nSession-Sandbox: sb-7f3a\nSession-Agent: claude-code/2.1\n\
         Session-Person: Ada Lovelace <ada@example.com>"
    );

    // A subset: only what is set, in the JSON and in the commit; a status carries it too.
    std::fs::write(dir.join("c.txt"), "c\n").unwrap();
    let run = f.w.run(
        &dir,
        &["save", "-m", "Add c", "--json"],
        &[("GIT_SESSION_AGENT", "codex"), ("PUSH_URL", &url)],
    );
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["owner"], serde_json::json!({"agent": "codex"}));
    let commit = j["commit"].as_str().unwrap().to_owned();
    assert_eq!(f.server_trailers(&commit), "Session-Agent: codex");
    let status = f.w.run(
        &dir,
        &["status", "--json"],
        &[("GIT_SESSION_SANDBOX", "sb-1")],
    );
    status.assert_code(0);
    assert_eq!(
        status.json()["owner"],
        serde_json::json!({"sandbox": "sb-1"})
    );

    // None set: no trailer, an empty owner.
    std::fs::write(dir.join("d.txt"), "d\n").unwrap();
    let run = f.w.run(
        &dir,
        &["save", "-m", "Add d", "--json"],
        &[("PUSH_URL", &url)],
    );
    run.assert_code(0);
    assert_eq!(run.json()["owner"], serde_json::json!({}));
    assert_eq!(f.w.git(&dir, &["log", "-1", "--format=%B"]), "Add d");
}

/// Exit 2, a `usage` error naming `var`, the JSON as the schema says; returns the message.
#[track_caller]
fn assert_usage_error_naming(run: &Run, var: &str) -> String {
    run.assert_code(2);
    let j = run.json();
    assert_matches_schema(&j);
    assert_eq!(j["error"]["kind"], "usage");
    let message = j["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains(var), "{message}");
    message
}

#[test]
fn an_owner_with_a_line_break_is_exit_2_and_nothing_is_committed() {
    let f = Fixture::new();
    let (dir, head) = f.sandbox_with_b();
    for (var, bad) in [
        (
            "GIT_SESSION_AGENT",
            "claude\nSigned-off-by: Mallory <m@example.com>",
        ),
        ("GIT_SESSION_PERSON", "ada\r"),
        ("GIT_SESSION_SANDBOX", "sb\u{1b}[31m"),
    ] {
        let run = f.save_b(&dir, var, bad);
        assert_usage_error_naming(&run, var);
        assert_eq!(
            f.w.git(&dir, &["rev-parse", "HEAD"]),
            head,
            "{var}: a commit was made"
        );
        assert_eq!(
            f.w.git(&dir, &["status", "--porcelain"]),
            "?? b.txt",
            "{var}: the index was touched"
        );
    }
    // Not only save: a restore with a bad owner writes nothing either.
    let fresh = f.w.path("fresh");
    let run = f.w.restore_with(
        &fresh,
        &f.url(),
        BRANCH,
        &f.tip,
        &["--json"],
        &[("GIT_SESSION_AGENT", "a\nb")],
    );
    run.assert_code(2);
    assert_eq!(std::fs::read_dir(&fresh).unwrap().count(), 0);
}

/// Unicode line and paragraph separators (a reader splits the trailer there) and format
/// characters (invisible in `git log`: a zero-width space, a right-to-left override) are refused
/// like line breaks, naming the variable and the code point; nothing is committed.
#[test]
fn an_owner_with_a_unicode_separator_or_format_character_is_exit_2() {
    let f = Fixture::new();
    let (dir, head) = f.sandbox_with_b();
    let chars = [
        '\u{2028}', '\u{2029}', '\u{85}', '\u{200B}', '\u{200C}', '\u{200D}', '\u{200E}',
        '\u{200F}', '\u{202A}', '\u{202E}', '\u{2060}', '\u{2064}', '\u{FEFF}', '\u{AD}',
    ];
    for (i, ch) in chars.into_iter().enumerate() {
        let var = [
            "GIT_SESSION_SANDBOX",
            "GIT_SESSION_AGENT",
            "GIT_SESSION_PERSON",
        ][i % 3];
        let value = format!("ada{ch}Signed-off-by: Mallory <m@example.com>");
        let run = f.save_b(&dir, var, &value);
        let message = assert_usage_error_naming(&run, var);
        let code_point = format!("U+{:04X}", u32::from(ch));
        assert!(message.contains(&code_point), "{code_point}: {message}");
        assert_eq!(f.w.git(&dir, &["rev-parse", "HEAD"]), head, "{code_point}");
        assert_eq!(f.w.git(&dir, &["status", "--porcelain"]), "?? b.txt");
    }
    let bare = f.w.srv().join("repo.git");
    assert_eq!(
        f.w.git(&bare, &["for-each-ref", "refs/heads/sessions"]),
        "",
        "pushed"
    );
}

#[test]
fn an_owner_holding_the_session_token_is_exit_6_and_nothing_is_committed() {
    let f = Fixture::new();
    let (dir, head) = f.sandbox_with_b();
    for value in [format!("agent-{TOKEN}"), pct(TOKEN)] {
        let run = f.save_b(&dir, "GIT_SESSION_PERSON", &value);
        run.assert_code(6);
        let j = run.json();
        assert_eq!(j["error"]["kind"], "integrity");
        assert!(
            j["error"]["message"]
                .as_str()
                .unwrap()
                .contains("GIT_SESSION_PERSON"),
            "{j}"
        );
        assert_eq!(f.w.git(&dir, &["rev-parse", "HEAD"]), head);
    }
}

impl Fixture {
    fn remote_tip(&self) -> String {
        let bare = self.w.srv().join("repo.git");
        let out = self.w.git_output(
            &bare,
            &[
                "rev-parse",
                "-q",
                "--verify",
                &format!("refs/heads/{BRANCH}"),
            ],
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Wait up to `secs` for the remote session branch to hold `path` with `content`.
    fn remote_has(&self, path: &str, content: &str, secs: f64) -> bool {
        let bare = self.w.srv().join("repo.git");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
        while std::time::Instant::now() < deadline {
            let out = self
                .w
                .git_output(&bare, &["show", &format!("refs/heads/{BRANCH}:{path}")]);
            if out.status.success() && out.stdout == content.as_bytes() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    }
}

#[test]
fn watch_saves_an_edit_within_three_intervals_and_an_idle_tree_makes_no_commit() {
    let f = Fixture::new();
    let dir = f.restore("s");
    let url = f.url();
    let mut watch = Watch::start(&f.w, &dir, &["--every", "1s"], &url);
    // Idle: three intervals, no commit, no line.
    assert!(watch.next(3).is_none(), "an idle tree printed a save");
    assert_eq!(f.remote_tip(), "", "an idle tree created the branch");
    let head = f.w.git(&dir, &["rev-parse", "HEAD"]);
    assert_eq!(head, f.tip, "an idle tree made a commit");
    // An edit reaches the remote within three intervals.
    let t0 = std::time::Instant::now();
    std::fs::write(dir.join("notes.md"), "working\n").unwrap();
    assert!(
        f.remote_has("notes.md", "working\n", 3.0),
        "the edit did not reach the remote within 3 intervals"
    );
    let j = watch.next(2).expect("no JSON line for the save");
    assert!(t0.elapsed().as_secs_f64() < 3.5, "{:?}", t0.elapsed());
    assert_eq!(
        (
            j["command"].as_str(),
            j["committed"].as_bool(),
            j["pushed"].as_bool()
        ),
        (Some("save"), Some(true), Some(true)),
        "{j}"
    );
    assert_eq!(j["owner"], serde_json::json!({"agent": "watcher"}));
    let commit = j["commit"].as_str().unwrap().to_owned();
    assert_eq!(f.remote_tip(), commit);
    assert_eq!(f.server_trailers(&commit), "Session-Agent: watcher");
    // A person's plain `git commit` is pushed too.
    std::fs::write(dir.join("by-hand.txt"), "hand\n").unwrap();
    f.w.git(&dir, &["add", "by-hand.txt"]);
    f.w.git(&dir, &["commit", "-qm", "By hand"]);
    let by_hand = f.w.git(&dir, &["rev-parse", "HEAD"]);
    let j = watch.next(4).expect("the plain commit was not pushed");
    assert_eq!(
        (j["committed"].as_bool(), j["pushed"].as_bool()),
        (Some(false), Some(true)),
        "{j}"
    );
    assert_eq!(f.remote_tip(), by_hand);
    // Idle again: nothing more.
    assert!(watch.next(3).is_none(), "an idle tree printed a save");
    watch.signal("-TERM");
    let (code, stderr, _) = watch.wait(10);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(f.remote_tip(), by_hand);
}

#[test]
fn sigterm_saves_the_pending_edit_and_exits_0_within_seconds() {
    let f = Fixture::new();
    let dir = f.restore("s");
    let url = f.url();
    let watch = Watch::start(&f.w, &dir, &["--every", "10m"], &url);
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(dir.join("pending.txt"), "not yet saved\n").unwrap();
    let t0 = std::time::Instant::now();
    watch.signal("-TERM");
    let (code, stderr, seen) = watch.wait(10);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(t0.elapsed().as_secs() < 8, "{:?}", t0.elapsed());
    assert!(
        f.remote_has("pending.txt", "not yet saved\n", 0.1),
        "SIGTERM lost the pending edit"
    );
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(f.w.git(&dir, &["status", "--porcelain"]), "");
    // SIGINT with nothing pending: exit 0 at once, no commit.
    let watch = Watch::start(&f.w, &dir, &["--every", "10m"], &url);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let head = f.w.git(&dir, &["rev-parse", "HEAD"]);
    watch.signal("-INT");
    let (code, stderr, seen) = watch.wait(5);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(f.w.git(&dir, &["rev-parse", "HEAD"]), head);
}

#[test]
fn a_takeover_by_another_sandbox_ends_watch_with_exit_3_and_keeps_its_work() {
    let f = Fixture::new();
    let a = f.restore("a");
    let b = f.restore("b");
    let url = f.url();
    std::fs::write(b.join("b.txt"), "b\n").unwrap();
    f.w.run(&b, &["save", "-m", "B takes over"], &[("PUSH_URL", &url)])
        .assert_code(0);
    let b_tip = f.remote_tip();
    let mut watch = Watch::start(&f.w, &a, &["--every", "1s"], &url);
    std::fs::write(a.join("a.txt"), "a's work\n").unwrap();
    let j = watch.next(5).expect("no line for the refused save");
    assert_eq!(
        (j["exit_code"].as_u64(), j["error"]["kind"].as_str()),
        (Some(3), Some("stale")),
        "{j}"
    );
    assert_eq!(j["remote_tip"], b_tip.as_str());
    let (code, stderr, _) = watch.wait(5);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(f.remote_tip(), b_tip, "the remote moved");
    // A's work is kept in its last local commit.
    assert_eq!(f.w.git(&a, &["show", "HEAD:a.txt"]), "a's work");
    assert_eq!(f.w.git(&a, &["status", "--porcelain"]), "");
}

#[test]
fn a_server_down_for_two_ticks_then_back_loses_nothing() {
    let mut f = Fixture::new();
    let dir = f.restore("s");
    let url = f.url();
    let port = f.srv.as_ref().unwrap().addr.port();
    let mut watch = Watch::start(&f.w, &dir, &["--every", "1s"], &url);
    f.srv = None; // down
    std::fs::write(
        dir.join("during.txt"),
        "written while the server was down\n",
    )
    .unwrap();
    for tick in 0..2 {
        let j = watch
            .next(6)
            .unwrap_or_else(|| panic!("no line for tick {tick}"));
        assert_eq!(
            (j["exit_code"].as_u64(), j["error"]["kind"].as_str()),
            (Some(5), Some("network")),
            "{j}"
        );
    }
    // The work is committed locally meanwhile, once.
    assert_eq!(
        f.w.git(&dir, &["show", "HEAD:during.txt"]),
        "written while the server was down"
    );
    f.srv = Some(GitServer::start_with(&f.w.srv(), Some(TOKEN), None, port)); // back
    let j = loop {
        let j = watch.next(6).expect("no save after the server came back");
        if j["ok"] == true {
            break j;
        }
        assert_eq!(j["error"]["kind"], "network", "{j}");
    };
    assert_eq!(j["pushed"], true, "{j}");
    assert!(f.remote_has("during.txt", "written while the server was down\n", 0.1));
    assert_eq!(
        f.w.git(&dir, &["rev-list", "--count", &format!("{}..HEAD", f.tip)]),
        "1",
        "one commit, not one per tick"
    );
    watch.signal("-TERM");
    let (code, stderr, _) = watch.wait(10);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn watch_refuses_a_bad_interval_before_anything() {
    let f = Fixture::new();
    let dir = f.restore("s");
    // A duration past a day panicked adding it to the clock (exit 1) before it was capped.
    for (flag, bad) in [
        ("--every", "soon"),
        ("--every", "0s"),
        ("--every", "300000000000y"),
        ("--every", "18446744073709551615s"),
        ("--quiet-for", "300000000000y"),
    ] {
        let mut args = vec!["watch", "--json", flag, bad];
        if flag != "--every" {
            args.extend(["--every", "1s"]);
        }
        let run = f.w.run(&dir, &args, &[("PUSH_URL", &f.url())]);
        run.assert_code(2);
        assert!(
            run.error_message().contains(flag),
            "{flag} {bad}: {}",
            run.stdout
        );
        assert_matches_schema(&run.json());
    }
    let run = f.w.run(&dir, &["watch", "--every", "1s", "--json"], &[]);
    run.assert_code(2);
    assert!(run.error_message().contains("PUSH_URL"), "{}", run.stdout);
}

/// The strings of a TOML array of basic strings (`["a", "b\"c"]`), as far as the recipe needs.
fn toml_strings(array: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = array.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => s.push(chars.next().unwrap()),
                '"' => break,
                c => s.push(c),
            }
        }
        out.push(s);
    }
    out
}

/// The recipes in `recipes/`, checked to be the ones the README shows: the Claude Code Stop hook's
/// command and Codex's notify program (its argv).
fn recipes_shown_in_the_readme() -> (String, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("claude-code-settings.json")).unwrap(),
    )
    .unwrap();
    let command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    let readme = std::fs::read_to_string(root.join("../README.md")).unwrap();
    let shown = serde_json::to_string(&command).unwrap();
    assert!(
        readme.contains(&shown),
        "the README's Claude Code hook is not recipes/claude-code-settings.json's"
    );
    let codex = std::fs::read_to_string(root.join("codex-config.toml")).unwrap();
    for line in codex.lines().filter(|l| l.contains("git-session save")) {
        assert!(
            readme.contains(line),
            "the README's Codex recipe is not recipes/codex-config.toml's: {line}"
        );
    }
    let array = &codex[codex.find("notify = [").unwrap()..];
    let argv = toml_strings(&array[..array.find(']').unwrap()]);
    (command, argv)
}

#[test]
fn the_agent_recipes_save_after_a_turn_and_a_stale_sandbox_is_told_to_stop() {
    let f = Fixture::new();
    let dir = f.restore("s");
    let url = f.url();
    let log = f.w.path("saves.jsonl");
    // The recipes call `git-session` by name.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_git-session"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run_recipe = |argv: &[String]| {
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&dir)
            .env_clear()
            .envs(f.w.env())
            .env("PATH", &path)
            .env("HOME", f.w.tmp.path().join("home"))
            .env("CLAUDE_PROJECT_DIR", &dir)
            .env("SESSION_DIR", &dir)
            .env("GIT_SESSION_LOG", &log)
            .env("GIT_SESSION_RETRY_BASE_MS", "5")
            .env("PUSH_URL", &url)
            .output()
            .unwrap();
        crate::support::assert_no_secret("recipe stdout", &out.stdout);
        crate::support::assert_no_secret("recipe stderr", &out.stderr);
        // Exit 0 even when the session is lost: an exit 2 would make Claude go on working.
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let last_save = || {
        let text = std::fs::read_to_string(&log).unwrap();
        crate::support::assert_no_secret("the recipe's log", text.as_bytes());
        let j: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_matches_schema(&j);
        j
    };

    // Claude Code: the Stop hook's command, run as Claude Code runs it (sh -c, in the project).
    let (command, mut argv) = recipes_shown_in_the_readme();
    std::fs::write(dir.join("turn1.txt"), "one\n").unwrap();
    run_recipe(&["sh".into(), "-c".into(), command.clone()]);
    let j = last_save();
    assert_eq!(
        (j["committed"].as_bool(), j["pushed"].as_bool()),
        (Some(true), Some(true)),
        "{j}"
    );
    assert_eq!(
        f.server_trailers(j["commit"].as_str().unwrap()),
        "Session-Agent: claude-code"
    );
    assert!(f.remote_has("turn1.txt", "one\n", 0.1));

    // Codex: the notify program, with the event's JSON appended as Codex does.
    argv.push(r#"{"type":"agent-turn-complete","turn-id":"1"}"#.into());
    std::fs::write(dir.join("turn2.txt"), "two\n").unwrap();
    run_recipe(&argv);
    let j = last_save();
    assert_eq!(
        f.server_trailers(j["commit"].as_str().unwrap()),
        "Session-Agent: codex"
    );
    assert!(f.remote_has("turn2.txt", "two\n", 0.1));

    // Another sandbox takes the session: the Stop hook tells Claude Code to end the session
    // (`continue: false` on stdout, exit 0; an exit 2 would make Claude go on working).
    let b = f.restore_at("b", &f.remote_tip());
    std::fs::write(b.join("b.txt"), "b\n").unwrap();
    f.w.run(&b, &["save", "-m", "B"], &[("PUSH_URL", &url)])
        .assert_code(0);
    std::fs::write(dir.join("turn3.txt"), "three\n").unwrap();
    let out = run_recipe(&["sh".into(), "-c".into(), command]);
    let told: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the hook's stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(told["continue"], false, "{told}");
    assert!(
        told["stopReason"]
            .as_str()
            .unwrap()
            .contains("another sandbox owns this session"),
        "{told}"
    );
    assert_eq!(last_save()["error"]["kind"], "stale");
}

#[test]
fn watch_waits_for_a_quiet_tree_and_lets_a_person_save_meanwhile() {
    let f = Fixture::new();
    let dir = f.restore("s");
    let url = f.url();
    let mut watch = Watch::start(
        &f.w,
        &dir,
        &["--every", "300ms", "--quiet-for", "1500ms"],
        &url,
    );
    // A file written to for 2 s, a line every 200 ms: no save catches it half-way.
    let mut content = String::new();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(2) {
        content.push_str("line\n");
        std::fs::write(dir.join("growing.log.txt"), &content).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(
            f.remote_tip(),
            "",
            "a save caught the file while it was being written"
        );
    }
    let done = std::time::Instant::now();
    let j = watch.next(5).expect("no save once the tree was quiet");
    let waited = done.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(1200),
        "saved after {waited:?}: not quiet long enough"
    );
    assert_eq!(j["pushed"], true, "{j}");
    assert!(
        f.remote_has("growing.log.txt", &content, 0.1),
        "the save holds a half-written file"
    );
    // A person's own save between ticks is not held up by the watch.
    std::fs::write(dir.join("mine.txt"), "mine\n").unwrap();
    let run = f.w.run(
        &dir,
        &["save", "-m", "Mine", "--json"],
        &[("PUSH_URL", &url)],
    );
    run.assert_code(0);
    assert!(f.remote_has("mine.txt", "mine\n", 0.1));
    watch.signal("-TERM");
    let (code, stderr, _) = watch.wait(10);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn watch_retries_a_token_in_a_file_and_gives_up_after_three_refused_tokens() {
    let f = Fixture::new();
    let dir = f.restore("s");
    // Integrity (6): a file holding the session token is refused and retried, not fatal.
    let url = f.url();
    let mut watch = Watch::start(&f.w, &dir, &["--every", "300ms"], &url);
    std::fs::write(dir.join("leak.txt"), format!("token={TOKEN}\n")).unwrap();
    for _ in 0..2 {
        let j = watch.next(5).expect("no line for the refused save");
        assert_eq!(j["error"]["kind"], "integrity", "{j}");
    }
    std::fs::write(dir.join("leak.txt"), "token=<removed>\n").unwrap();
    let j = loop {
        let j = watch.next(5).expect("no save after the token was removed");
        if j["ok"] == true {
            break j;
        }
    };
    assert_eq!(j["pushed"], true, "{j}");
    watch.signal("-TERM");
    assert_eq!(watch.wait(10).0, Some(0));
    // Auth (4): a refused token three ticks in a row ends the loop with exit 4; commits stay local.
    let srv = f.srv.as_ref().unwrap();
    let bad = srv.url("repo.git", Some("t:not-the-token"));
    let mut watch = Watch::start(&f.w, &dir, &["--every", "300ms"], &bad);
    std::fs::write(dir.join("more.txt"), "more\n").unwrap();
    for _ in 0..3 {
        let j = watch.next(10).expect("no line for the refused token");
        assert_eq!(j["error"]["kind"], "auth", "{j}");
    }
    let (code, stderr, _) = watch.wait(5);
    assert_eq!(code, Some(4), "{stderr}");
    assert_eq!(f.w.git(&dir, &["show", "HEAD:more.txt"]), "more");
}

#[test]
fn sigterm_during_a_save_stuck_in_retries_ends_within_the_final_save_time() {
    let mut f = Fixture::new();
    let dir = f.restore("s");
    let url = f.url();
    f.srv = None; // down: every save retries, 4 attempts over about 15 s with this base
    let watch = Watch::start_with(
        &f.w,
        &dir,
        &["--every", "500ms"],
        &url,
        &[("GIT_SESSION_RETRY_BASE_MS", "2000")],
    );
    std::fs::write(dir.join("pending.txt"), "pending\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500)); // the save is in its retries now
    let t0 = std::time::Instant::now();
    watch.signal("-TERM");
    let (code, stderr, seen) = watch.wait(20);
    let took = t0.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "SIGTERM took {took:?}: {stderr}"
    );
    assert_eq!(code, Some(5), "{stderr}");
    assert_eq!(seen.last().unwrap()["error"]["kind"], "network", "{seen:?}");
    // The work is in the local commit.
    assert_eq!(f.w.git(&dir, &["show", "HEAD:pending.txt"]), "pending");
}

crate::sha256_too!(
    every_commit_carries_its_owners_as_trailers_and_every_result_names_them,
    watch_saves_an_edit_within_three_intervals_and_an_idle_tree_makes_no_commit,
    sigterm_saves_the_pending_edit_and_exits_0_within_seconds,
    a_takeover_by_another_sandbox_ends_watch_with_exit_3_and_keeps_its_work,
    a_server_down_for_two_ticks_then_back_loses_nothing,
    the_agent_recipes_save_after_a_turn_and_a_stale_sandbox_is_told_to_stop,
);
