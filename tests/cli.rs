//! For people and templates: `status`, the credential helper with real `git push`, URL rotation,
//! JWT expiry, the JSON schema of every command, every exit code, completions, man page.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::support::{GitServer, TOKEN, World, assert_matches_schema, userinfo};
use crate::support::{assert_no_secret_in_files, output_with_stdin, served_repo};

fn jwt(exp: u64) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}.{}",
        b64.encode(r#"{"alg":"HS256","typ":"JWT"}"#),
        b64.encode(format!(r#"{{"exp":{exp},"sub":"sandbox"}}"#)),
        b64.encode("sig")
    )
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

struct Fixture {
    w: World,
    srv: GitServer,
    ids: Vec<String>,
}

impl Fixture {
    fn new() -> Self {
        let (w, srv, ids) = served_repo(&[
            &[("a.txt", Some("a\n")), ("dir/b.txt", Some("b\n"))],
            &[("a.txt", Some("a2\n"))],
        ]);
        Fixture { w, srv, ids }
    }

    fn url(&self) -> String {
        self.srv.url("repo.git", Some(&userinfo()))
    }

    fn restore(&self, name: &str, branch: &str) -> PathBuf {
        let dir = self.w.path(name);
        let (url, tip) = (self.url(), &self.ids[1]);
        self.w
            .restore_with(&dir, &url, branch, tip, &[], &[])
            .assert_code(0);
        dir
    }
}

/// git run as a person would in `dir`, with `var` in its environment besides; it must succeed.
fn plain_git(w: &World, dir: &Path, args: &[&str], var: (&str, &str)) -> std::process::Output {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .envs(w.env())
        .env(var.0, var.1)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "git {args:?}: {stderr}");
    out
}

#[test]
fn status_reports_the_session_in_json_and_for_people() {
    let f = Fixture::new();
    let dir = f.restore("s", "sessions/st");
    std::fs::write(dir.join("a.txt"), "edited\n").unwrap();
    std::fs::write(dir.join("new.txt"), "new\n").unwrap();
    std::fs::remove_file(dir.join("dir/b.txt")).unwrap();
    let run = f.w.run(
        &dir,
        &["status", "--json", "--remote"],
        &[("READ_URL", &f.url())],
    );
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["ok"], true);
    assert_eq!(j["command"], "status");
    assert_eq!(j["branch"], "sessions/st");
    assert_eq!(j["lease"], "0000000000000000000000000000000000000000");
    assert_eq!(j["head"], f.ids[1].as_str());
    assert_eq!(j["ahead"], 0);
    assert_eq!(j["remote_tip"], "0000000000000000000000000000000000000000");
    assert_eq!(j["url_expires_at"], serde_json::Value::Null);
    let mut changed: Vec<(String, String)> = j["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["status"].as_str().unwrap().to_owned(),
                c["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        vec![
            ("A".into(), "new.txt".into()),
            ("D".into(), "dir/b.txt".into()),
            ("M".into(), "a.txt".into())
        ]
    );
    // The same, for a person; commits made with plain git count as ahead.
    f.w.git(&dir, &["add", "-A"]);
    f.w.git(&dir, &["commit", "-qm", "local"]);
    let run = f.w.run(&dir, &["status"], &[]);
    run.assert_code(0);
    assert!(
        run.stdout.contains("On session branch sessions/st"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("1 commit(s) ahead"), "{}", run.stdout);
    assert!(run.stdout.contains("Changes: none"), "{}", run.stdout);
    // `git session status` works through git's own dispatch when the binary is on PATH.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_git-session"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let out = plain_git(&f.w, &dir, &["session", "status"], ("PATH", &path));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sessions/st"));
}

#[test]
fn plain_git_push_works_through_the_credential_helper_and_nothing_stores_the_secret() {
    let f = Fixture::new();
    let dir = f.restore("s", "sessions/cred");
    // A user-level helper that would store credentials on disk if git ever called it with them.
    let store = f.w.tmp.path().join("home/.git-credentials");
    std::fs::write(
        f.w.tmp.path().join("home/.gitconfig"),
        format!(
            "[credential]\n\thelper = store --file={}\n",
            store.display()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("c.txt"), "c\n").unwrap();
    f.w.git(&dir, &["add", "-A"]);
    f.w.git(&dir, &["commit", "-qm", "by a person"]);
    let push = ["push", "-q", "origin", "HEAD"];
    let out = plain_git(&f.w, &dir, &push, ("PUSH_URL", &f.url()));
    crate::support::assert_no_secret("git push stderr", &out.stderr);
    assert_eq!(
        f.w.git(&f.w.srv().join("repo.git"), &["rev-parse", "sessions/cred"]),
        f.w.git(&dir, &["rev-parse", "HEAD"])
    );
    assert!(!store.exists(), "another helper stored the credentials");
    // And fetch, with READ_URL only.
    plain_git(
        &f.w,
        &dir,
        &["fetch", "-q", "origin"],
        ("READ_URL", &f.url()),
    );
    assert_no_secret_in_files(&dir.join(".git"));
    assert_no_secret_in_files(&f.w.tmp.path().join("home"));
}

#[test]
fn the_credential_helper_answers_only_matching_urls_on_stdout() {
    let f = Fixture::new();
    let helper = |input: &str, vars: &[(&str, &str)]| {
        let out = output_with_stdin(
            std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
                .args(["credential", "get"])
                .env_clear()
                .envs(f.w.env())
                .envs(vars.iter().copied()),
            input.as_bytes(),
        );
        assert!(out.status.success());
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let host = format!("127.0.0.1:{}", f.srv.addr.port());
    // origin's url and pushurl carry made-up user names that say the direction.
    let fetch = format!("protocol=http\nhost={host}\npath=repo.git\nusername=git-session-read\n\n");
    let push_req =
        format!("protocol=http\nhost={host}\npath=repo.git\nusername=git-session-push\n\n");
    let req = format!("protocol=http\nhost={host}\npath=repo.git\n\n");
    let read = f.srv.url("repo.git", Some("r:read-token-123"));
    let push = f.srv.url("repo.git", Some("p:push-token-456"));
    let (out, _) = helper(&fetch, &[("READ_URL", &read)]);
    assert_eq!(out, "username=r\npassword=read-token-123\n");
    let (out, _) = helper(&fetch, &[("READ_URL", &read), ("PUSH_URL", &push)]);
    assert_eq!(out, "username=r\npassword=read-token-123\n");
    let (out, _) = helper(&push_req, &[("READ_URL", &read), ("PUSH_URL", &push)]);
    assert_eq!(out, "username=p\npassword=push-token-456\n");
    // A push without PUSH_URL: git is told to stop (no prompt), never given READ_URL's token.
    let (out, err) = helper(&push_req, &[("READ_URL", &read)]);
    assert_eq!(out, "quit=1\n");
    assert!(err.contains("PUSH_URL"), "{err}");
    // A URL typed by hand says no direction: only PUSH_URL's credentials.
    let (out, _) = helper(&req, &[("READ_URL", &read), ("PUSH_URL", &push)]);
    assert_eq!(out, "username=p\npassword=push-token-456\n");
    let (out, err) = helper(&req, &[("READ_URL", &read)]);
    assert_eq!(out, "");
    assert!(err.contains("only PUSH_URL"), "{err}");
    // Another path or host: nothing on stdout, a note on stderr.
    let (out, err) = helper(
        &format!("protocol=http\nhost={host}\npath=other.git\n\n"),
        &[("PUSH_URL", &push)],
    );
    assert_eq!(out, "");
    assert!(
        err.contains("no PUSH_URL in the environment matches"),
        "{err}"
    );
    // A _FILE is re-read at every call.
    let file = f.w.tmp.path().join("push-url");
    std::fs::write(&file, &push).unwrap();
    let (out, _) = helper(&req, &[("PUSH_URL_FILE", file.to_str().unwrap())]);
    assert!(out.contains("push-token-456"));
    std::fs::write(&file, f.srv.url("repo.git", Some("p:rotated-789"))).unwrap();
    let (out, _) = helper(&req, &[("PUSH_URL_FILE", file.to_str().unwrap())]);
    assert!(out.contains("rotated-789"));
    let (out, _) = helper("", &[]);
    assert_eq!(out, "");
}

#[test]
fn push_url_file_rotation_between_two_pushes() {
    let w = World::new();
    let ids = w.repo("repo.git", &[&[("a", Some("a\n"))]]);
    let old_token = "first-token-aaaa";
    let new_token = "second-token-bbbb";
    // Two servers on the same repositories, each accepting only its own token: a push that used the
    // old URL after rotation would be refused.
    let first = GitServer::start(&w.srv(), Some(old_token));
    let second = GitServer::start(&w.srv(), Some(new_token));
    let dir = w.path("s");
    w.run(
        &dir,
        &["restore"],
        &[
            (
                "READ_URL",
                &first.url("repo.git", Some(&format!("t:{old_token}"))),
            ),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &ids[0]),
        ],
    )
    .assert_code(0);
    let file = w.tmp.path().join("push-url");
    std::fs::write(
        &file,
        first.url("repo.git", Some(&format!("t:{old_token}"))),
    )
    .unwrap();
    let vars = [
        ("PUSH_URL_FILE", file.to_str().unwrap()),
        ("PUSH_URL", "http://127.0.0.1:1/ignored.git"),
    ];
    std::fs::write(dir.join("one"), "1\n").unwrap();
    w.run(&dir, &["save", "-m", "one"], &vars).assert_code(0);
    std::fs::write(
        &file,
        second.url("repo.git", Some(&format!("t:{new_token}"))),
    )
    .unwrap();
    std::fs::write(dir.join("two"), "2\n").unwrap();
    let run = w.run(&dir, &["save", "-m", "two", "--json"], &vars);
    run.assert_code(0);
    assert_eq!(run.json()["pushed"], true);
    assert!(
        second
            .log()
            .iter()
            .any(|e| e.path.ends_with("git-receive-pack"))
    );
    assert!(first.log().iter().all(|e| e.status != 401));
    assert_eq!(
        w.git(&w.srv().join("repo.git"), &["rev-parse", "s"]),
        w.git(&dir, &["rev-parse", "HEAD"])
    );
}

#[test]
fn a_jwt_about_to_expire_is_warned_about_and_its_expiry_reported() {
    let f = Fixture::new();
    let dir = f.restore("s", "sessions/jwt");
    let soon = now() + 120;
    let url = f.srv.url("repo.git", Some(&format!("t:{}", jwt(soon))));
    let run = f.w.run(&dir, &["status", "--json"], &[("READ_URL", &url)]);
    run.assert_code(0);
    let j = run.json();
    let want = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(soon),
    )
    .to_string();
    assert_eq!(j["url_expires_at"], want.as_str());
    let w = j["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("READ_URL token expires in") && w.contains(&want),
        "{w}"
    );
    assert!(
        run.stderr.contains("warning: the READ_URL token expires"),
        "{}",
        run.stderr
    );
    // Far from expiry: no warning.
    let later = f
        .srv
        .url("repo.git", Some(&format!("t:{}", jwt(now() + 3600))));
    let j =
        f.w.run(&dir, &["status", "--json"], &[("READ_URL", &later)])
            .json();
    assert_eq!(j["warnings"], serde_json::json!([]));
    // Expired, on a command that uses the URL: warned, and the refusal says when it expired.
    let expired = f
        .srv
        .url("repo.git", Some(&format!("t:{}", jwt(now() - 60))));
    let run =
        f.w.restore_with(&f.w.path("t"), &expired, "x", &f.ids[0], &["--json"], &[]);
    run.assert_code(4);
    assert!(
        run.stderr.contains("credentials rejected"),
        "{}",
        run.stderr
    );
}

/// The fields of `save --json` and `push --json`, which answer alike.
const SAVE_FIELDS: &[&str] = &[
    "ok",
    "command",
    "branch",
    "warnings",
    "tip",
    "previous_tip",
    "committed",
    "pushed",
];

#[test]
fn every_command_prints_one_json_object_with_the_spec_fields() {
    let f = Fixture::new();
    let dir = f.w.path("s");
    let fields = |j: &serde_json::Value, keys: &[&str]| {
        for k in keys {
            assert!(j.get(k).is_some(), "missing {k} in {j}");
        }
        if j.get("ok").is_some() {
            assert_matches_schema(j);
        }
    };
    let run = f.w.run(
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL", &f.url()),
            ("SESSION_BRANCH", "sessions/j"),
            ("TIP_SHA", &f.ids[1]),
        ],
    );
    let j = run.json();
    fields(
        &j,
        &[
            "ok", "command", "branch", "warnings", "tip", "lease", "source",
        ],
    );
    std::fs::write(dir.join("x"), "x\n").unwrap();
    let j =
        f.w.run(
            &dir,
            &["save", "-m", "x", "--json"],
            &[("PUSH_URL", &f.url())],
        )
        .json();
    fields(&j, SAVE_FIELDS);
    assert_eq!(
        (j["committed"].as_bool(), j["pushed"].as_bool()),
        (Some(true), Some(true))
    );
    let j =
        f.w.run(&dir, &["push", "--json"], &[("PUSH_URL", &f.url())])
            .json();
    fields(&j, SAVE_FIELDS);
    let j =
        f.w.run(
            &dir,
            &["status", "--json", "--remote"],
            &[("READ_URL", &f.url())],
        )
        .json();
    fields(
        &j,
        &[
            "ok",
            "command",
            "branch",
            "warnings",
            "lease",
            "head",
            "ahead",
            "changed",
            "remote_tip",
            "url_expires_at",
        ],
    );
    let j = f.w.run(&dir, &["status", "--json"], &[]).json();
    fields(&j, &["ok", "command", "changed"]);
    assert!(j.get("remote_tip").is_none(), "{j}");
    let j =
        f.w.run(
            &f.w.path("tpl"),
            &["bake", "--json"],
            &[("READ_URL", &f.url()), ("TIP_SHA", &f.ids[0])],
        )
        .json();
    fields(&j, &["ok", "command", "base", "files"]);
    assert_eq!(
        (j["command"].as_str(), j["branch"].as_null()),
        (Some("bake"), Some(()))
    );
    // The schema is strict: a field it does not describe is a violation.
    let mut extra = j.clone();
    extra["surprise"] = serde_json::json!(1);
    let schema_catches = std::panic::catch_unwind(|| assert_matches_schema(&extra));
    assert!(
        schema_catches.is_err(),
        "an undescribed field passed the schema"
    );
    // Failures: exactly one object with ok, command, exit_code, error.kind, error.message.
    let j = f.w.run(&dir, &["push", "--json"], &[]).json();
    fields(&j, &["ok", "command", "exit_code", "error"]);
    assert_eq!(j["ok"], false);
    assert_eq!(j["command"], "push");
    fields(&j["error"], &["kind", "message"]);
}

#[test]
fn every_exit_code_has_its_kind() {
    let f = Fixture::new();
    let url = f.url();
    let code = |run: &crate::support::Run, code: i32, kind: &str| {
        run.assert_code(code);
        let j = run.json();
        assert_eq!(j["exit_code"], code);
        assert_eq!(j["error"]["kind"], kind, "{j}");
        assert_matches_schema(&j);
    };
    // 1: a panic exits 1 with a short message (never 101 or 134).
    let restore = |dir: &str, url: &str, tip: &str, vars: &[(&str, &str)]| {
        f.w.restore_with(&f.w.path(dir), url, "s", tip, &["--json"], vars)
    };
    let run = restore("p", &url, &f.ids[0], &[("GIT_SESSION_FAILPOINT", "panic")]);
    code(&run, 1, "internal");
    assert!(run.stderr.contains("internal error"), "{}", run.stderr);
    // 2: usage.
    code(&restore("u", &url, "abc", &[]), 2, "usage");
    // 3: stale.
    f.w.git(
        &f.w.srv().join("repo.git"),
        &["branch", "sessions/st", &f.ids[1]],
    );
    let a = f.restore("a", "sessions/st");
    let b = f.restore("b", "sessions/st");
    std::fs::write(b.join("b"), "b\n").unwrap();
    f.w.run(&b, &["save"], &[("PUSH_URL", &url)]).assert_code(0);
    std::fs::write(a.join("a"), "a\n").unwrap();
    let run = f.w.run(&a, &["save", "--json"], &[("PUSH_URL", &url)]);
    code(&run, 3, "stale");
    assert_eq!(run.json()["lease"], f.ids[1].as_str());
    // 4: auth.
    let wrong = f.srv.url("repo.git", Some("t:nope"));
    code(&restore("c", &wrong, &f.ids[0], &[]), 4, "auth");
    // 5: network.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let refused = format!("http://127.0.0.1:{port}/r.git");
    code(&restore("d", &refused, &f.ids[0], &[]), 5, "network");
    // 6: integrity (a token in a file to commit).
    let s = f.restore("e", "sessions/e");
    std::fs::write(s.join("leak.txt"), TOKEN).unwrap();
    code(
        &f.w.run(&s, &["save", "--json"], &[("PUSH_URL", &url)]),
        6,
        "integrity",
    );
    // 7: conflict.
    let g = f.w.path("g");
    std::fs::create_dir_all(&g).unwrap();
    std::fs::write(g.join("mine"), "x").unwrap();
    code(
        &f.w.restore_with(&g, &url, "s", &f.ids[0], &["--json"], &[]),
        7,
        "conflict",
    );
    // 8: not found.
    code(&restore("h", &url, &"ab".repeat(20), &[]), 8, "not_found");
    // 9: rejected (a declining hook).
    let hook = f.w.srv().join("repo.git/hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho no >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = f.restore("i", "sessions/i");
    std::fs::write(s.join("n"), "n\n").unwrap();
    code(
        &f.w.run(&s, &["save", "--json"], &[("PUSH_URL", &url)]),
        9,
        "rejected",
    );
}

/// The page at `path` as `man -l` renders it, as plain text.
fn man_text(path: &Path) -> String {
    let out = std::process::Command::new("man")
        .arg("-l")
        .arg(path)
        .env("MANWIDTH", "200")
        .env("MAN_KEEP_FORMATTING", "0")
        .env("LC_ALL", "C")
        .output()
        .expect("man (man-db) must be installed: scripts/test installs it");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "man -l {}: {stderr}", path.display());
    // Without a terminal grotty still overstrikes bold ("N\bN"): keep the last of each pair.
    let mut text = String::new();
    for c in String::from_utf8_lossy(&out.stdout).chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    text
}

#[test]
fn completions_man_page_and_version() {
    let w = World::new();
    let run = w.run(w.tmp.path(), &["completions", "bash"], &[]);
    run.assert_code(0);
    assert!(run.stdout.contains("git-session") && run.stdout.contains("restore"));
    let pages = w.tmp.path().join("man1");
    let run = w.run(
        w.tmp.path(),
        &["manpage", "--out", pages.to_str().unwrap()],
        &[],
    );
    run.assert_code(0);
    let help = w.run(w.tmp.path(), &["--help"], &[]);
    for command in "restore bake save push status schema completions manpage".split(' ') {
        assert!(
            help.stdout.contains(command),
            "--help does not show {command}:\n{}",
            help.stdout
        );
    }
    for page in [
        "git-session",
        "git-session-restore",
        "git-session-bake",
        "git-session-save",
        "git-session-push",
        "git-session-status",
        "git-session-schema",
    ] {
        let path = pages.join(format!("{page}.1"));
        assert!(
            run.stdout.contains(path.to_str().unwrap()),
            "{page}.1 not listed:\n{}",
            run.stdout
        );
        // Rendered as man renders it: the sections a reader looks for, the options with values.
        let text = man_text(&path);
        let sections = [
            "NAME",
            "SYNOPSIS",
            "OPTIONS",
            "ENVIRONMENT",
            "EXIT STATUS",
            "EXAMPLES",
        ];
        for section in sections {
            assert!(text.contains(section), "{page}.1 has no {section}:\n{text}");
        }
        assert!(
            text.contains("-C <DIR>"),
            "{page}.1's synopsis lacks -C <DIR>:\n{text}"
        );
        assert!(
            !text.contains("=]"),
            "{page}.1 shows an empty env value:\n{text}"
        );
    }
    let save = std::fs::read_to_string(pages.join("git-session-save.1")).unwrap();
    assert!(
        save.contains("PUSH_URL") && save.contains("stale"),
        "{save}"
    );
    // Every page's EXIT STATUS is the table every exit comes from (src/error.rs walks the
    // variants into it; README and CONTRACT print it).
    for page in std::fs::read_dir(&pages).unwrap() {
        let text = std::fs::read_to_string(page.unwrap().path()).unwrap();
        for row in git_session::error::exit_table() {
            let line = format!(".TP\n\\fB{}\\fR", row.code);
            let meaning = row.meaning.replace('-', "\\-");
            assert!(
                text.contains(&line) && text.contains(&meaning),
                "exit {} in {text}",
                row.code
            );
        }
    }
    let restore_help = w.run(
        w.tmp.path(),
        &["restore", "--help"],
        &[("SESSION_BRANCH", "")],
    );
    assert!(
        !restore_help.stdout.contains("=]"),
        "{}",
        restore_help.stdout
    );
    let run = w.run(w.tmp.path(), &["--version"], &[]);
    run.assert_code(0);
    assert_eq!(
        run.stdout.trim(),
        format!("git-session {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn commands_find_the_session_from_a_subfolder() {
    let f = Fixture::new();
    let dir = f.restore("s", "sessions/sub");
    let run = f.w.run(&dir.join("dir"), &["status", "--json"], &[]);
    run.assert_code(0);
    assert_eq!(run.json()["branch"], "sessions/sub");
    std::fs::write(dir.join("dir/c.txt"), "c\n").unwrap();
    let run =
        f.w.run(&dir.join("dir"), &["save", "--no-push", "--json"], &[]);
    run.assert_code(0);
    assert_eq!(run.json()["committed"], true);
    assert_eq!(f.w.git(&dir, &["status", "--porcelain"]), "");
}

#[test]
fn save_as_root_leaves_git_usable_for_the_trees_owner() {
    use std::os::unix::fs::MetadataExt as _;
    if !crate::support::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let f = Fixture::new();
    crate::support::give_to_nobody(&f.w.path("owned"));
    let dir = f.restore("owned", "s");
    std::fs::write(dir.join("new.txt"), "n\n").unwrap();
    f.w.run(&dir, &["save", "--no-push"], &[]).assert_code(0);
    for file in crate::support::all_files(&dir.join(".git")) {
        let m = std::fs::symlink_metadata(&file).unwrap();
        assert_eq!(
            m.uid(),
            65534,
            "{} belongs to root after save",
            file.display()
        );
    }
}

#[test]
fn progress_shows_on_a_terminal_only() {
    let f = Fixture::new();
    let dir = f.w.path("tty");
    let url = f.url();
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "s"),
        ("TIP_SHA", f.ids[1].as_str()),
    ];
    let shown = f.w.on_a_terminal(
        f.w.tmp.path(),
        &format!("-C {} restore", dir.display()),
        &vars,
    );
    assert!(
        shown.contains("receiving objects") && shown.contains("checking out"),
        "{shown}"
    );
    // Not a terminal: no progress, and none with --json or -q either.
    let run = f.w.run(
        &f.w.path("pipe"),
        &["restore"],
        &[
            ("READ_URL", &f.url()),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &f.ids[1]),
        ],
    );
    run.assert_code(0);
    assert!(!run.stderr.contains("receiving objects"), "{}", run.stderr);
}

/// Every script in `scripts/` and the example server answer `-h` and `--help` with their usage
/// (exit 0) and create nothing: run from an empty folder, it stays empty, and the repository's
/// work tree gains no file (`examples/serve --help` once made `./--help/.server-home/.gitconfig`).
#[test]
fn every_script_and_example_answers_help_creating_nothing() {
    let w = World::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let untracked = || {
        let out = std::process::Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(root)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = untracked();
    // The example is built beside the test binary (target/<profile>/examples).
    let exe = std::env::current_exe().unwrap();
    let serve = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/serve");
    let mut programs: Vec<PathBuf> = std::fs::read_dir(root.join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    programs.sort();
    assert!(programs.len() >= 8, "{programs:?}");
    programs.push(serve);
    for program in &programs {
        for flag in ["-h", "--help"] {
            let cwd = w.path(&format!(
                "empty-{}{flag}",
                program.file_name().unwrap().to_string_lossy()
            ));
            std::fs::create_dir_all(&cwd).unwrap();
            let out = std::process::Command::new("timeout")
                .arg("20")
                .arg(program)
                .arg(flag)
                .current_dir(&cwd)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{} {flag}: {}{stdout}",
                program.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                stdout.to_lowercase().contains("usage"),
                "{} {flag} printed no usage: {stdout}",
                program.display()
            );
            let made: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
            assert!(
                made.is_empty(),
                "{} {flag} created {made:?}",
                program.display()
            );
        }
    }
    assert_eq!(
        untracked(),
        before,
        "a script created files in the repository"
    );
}
