//! `restore` of a sessions manifest (`GIT_SESSION_SESSIONS_FILE`, `--sessions`): a bad manifest is
//! exit 2 before any request; several repositories restored at once, one failing without harm to
//! the others; a rerun completing only what is unfinished.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{
    GitServer, Run, TOKEN, World, assert_matches_schema, hex_len, left_nothing, userinfo,
};

/// Three repositories `a.git`, `b.git`, `c.git` on one server that wants the token.
struct Three {
    w: World,
    srv: GitServer,
    /// Each repository's tip, in the order a, b, c.
    tips: Vec<String>,
}

impl Three {
    fn start() -> Self {
        let w = World::new();
        let mut tips = Vec::new();
        for name in ["a", "b", "c"] {
            let readme = format!("{name} one\n");
            let lib = format!("pub fn {name}() {{}}\n");
            let ids = w.repo(
                &format!("{name}.git"),
                &[
                    &[("README.md", Some(readme.as_str()))],
                    &[
                        ("src/lib.rs", Some(lib.as_str())),
                        ("bin/run.sh", Some("#!/bin/sh\n")),
                    ],
                ],
            );
            tips.push(ids.last().unwrap().clone());
        }
        let srv = GitServer::start(&w.srv(), Some(TOKEN));
        Three { w, srv, tips }
    }

    fn url(&self, name: &str) -> String {
        self.srv.url(&format!("{name}.git"), Some(&userinfo()))
    }

    /// An entry restoring repository `name` at `tip` into `dir` (relative to the manifest).
    fn entry(&self, name: &str, dir: &str, tip: &str) -> Value {
        json!({
            "dir": dir,
            "read_url": self.url(name),
            "push_url": self.url(name),
            "session_branch": format!("sessions/{name}"),
            "tip_sha": tip,
        })
    }

    /// The three sessions into `<folder>/a`, `/b`, `/c`, `c` at `c_tip`.
    fn manifest(&self, folder: &str, c_tip: &str) -> Value {
        json!({"sessions": [
            self.entry("a", &format!("{folder}/a"), &self.tips[0]),
            self.entry("b", &format!("{folder}/b"), &self.tips[1]),
            self.entry("c", &format!("{folder}/c"), c_tip),
        ]})
    }

    /// Write `manifest` to `work/sessions.json` and restore it with `--json` and `vars`.
    fn restore(&self, manifest: &Value, vars: &[(&str, &str)]) -> Run {
        let file = self.w.path("sessions.json");
        std::fs::write(&file, manifest.to_string()).unwrap();
        let mut all = vec![("GIT_SESSION_SESSIONS_FILE", file.to_str().unwrap())];
        all.extend_from_slice(vars);
        self.w.run(&self.w.path(""), &["restore", "--json"], &all)
    }

    fn dir(&self, rel: &str) -> PathBuf {
        self.w.path(rel)
    }

    /// `dir` holds `tip` as git sees it: HEAD there, nothing changed, the index the commit's tree.
    /// (A tree restored as another user is read by root's git: `safe.directory` lets it.)
    #[track_caller]
    fn assert_restored(&self, dir: &Path, tip: &str, branch: &str) {
        let git = |args: &[&str]| {
            self.w.git_with_env(
                dir,
                args,
                &[
                    ("GIT_CONFIG_COUNT", "1"),
                    ("GIT_CONFIG_KEY_0", "safe.directory"),
                    ("GIT_CONFIG_VALUE_0", "*"),
                ],
            )
        };
        let at = dir.display();
        assert_eq!(git(&["rev-parse", "HEAD"]), tip, "{at}");
        assert_eq!(git(&["status", "--porcelain"]), "", "{at}");
        assert_eq!(git(&["symbolic-ref", "--short", "HEAD"]), branch, "{at}");
        assert_eq!(
            git(&["ls-files"]),
            git(&["ls-tree", "-r", "--name-only", "HEAD"]),
            "{at}"
        );
    }
}

/// A full object id that no repository holds.
fn missing_tip() -> String {
    "7".repeat(hex_len())
}

#[test]
fn three_sessions_one_with_a_wrong_tip_the_others_restored_and_a_rerun_completes_it() {
    let t = Three::start();
    let run = t.restore(&t.manifest("trees", &missing_tip()), &[]);
    let out = run.json();
    assert_matches_schema(&out);
    let failed = out["sessions"][2]["exit_code"].as_u64().unwrap();
    assert_ne!(failed, 0, "{out:#}");
    // The documented rule: the first failing session's code, in the manifest's order.
    run.assert_code(i32::try_from(failed).unwrap());
    assert_eq!(out["ok"], false);
    assert_eq!(out["command"], "restore");
    assert_eq!(out["exit_code"], failed);
    assert_eq!(out["sessions"][2]["kind"], "not_found", "{out:#}");
    assert!(
        out["sessions"][2]["message"]
            .as_str()
            .unwrap()
            .contains("TIP_SHA")
    );
    for (i, name) in ["a", "b"].iter().enumerate() {
        let s = &out["sessions"][i];
        let dir = t.dir(&format!("trees/{name}"));
        assert_eq!(s["dir"], dir.to_str().unwrap());
        assert_eq!(
            (s["ok"].clone(), s["exit_code"].clone()),
            (json!(true), json!(0))
        );
        assert_eq!(s["tip"], t.tips[i].as_str());
        assert_eq!(s["lease"], crate::support::zero_id());
        assert_eq!(s["branch"], format!("sessions/{name}"));
        assert_eq!(s["noop"], false);
        t.assert_restored(&dir, &t.tips[i], &format!("sessions/{name}"));
    }
    assert_eq!(
        out["sessions"][2]["dir"],
        t.dir("trees/c").to_str().unwrap()
    );
    assert!(
        left_nothing(&t.dir("trees/c")),
        "the failed session left files"
    );
    // The manifest fixed: only c is restored, a and b are left as they are.
    let rerun = t.restore(&t.manifest("trees", &t.tips[2]), &[]);
    rerun.assert_code(0);
    let out = rerun.json();
    assert_matches_schema(&out);
    assert_eq!(out["ok"], true);
    let noops: Vec<&Value> = out["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["noop"])
        .collect();
    assert_eq!(
        noops,
        [&json!(true), &json!(true), &json!(false)],
        "{out:#}"
    );
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        t.assert_restored(
            &t.dir(&format!("trees/{name}")),
            &t.tips[i],
            &format!("sessions/{name}"),
        );
    }
}

#[test]
fn without_json_each_session_has_its_line_and_a_failure_its_error() {
    let t = Three::start();
    let file = t.w.path("sessions.json");
    std::fs::write(&file, t.manifest("trees", &missing_tip()).to_string()).unwrap();
    let run = t.w.run(
        &t.w.path(""),
        &["restore", "--sessions", file.to_str().unwrap()],
        &[("GIT_SESSION_SESSIONS_CONCURRENCY", "1")],
    );
    run.assert_code(8);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(lines[0].starts_with("restored sessions/a"), "{}", lines[0]);
    assert!(lines[1].starts_with("restored sessions/b"), "{}", lines[1]);
    let c = t.dir("trees/c");
    assert!(lines[2].contains(c.to_str().unwrap()), "{}", lines[2]);
    assert!(lines[2].contains("exit 8"), "{}", lines[2]);
    assert!(run.stderr.contains("error: "), "{}", run.stderr);
}

/// A kill at each of restore's failpoints while three sessions restore, then a rerun: every
/// session restored, and only those the kill left unfinished restored again.
#[test]
fn a_kill_at_each_failpoint_then_a_rerun_completes_exactly_what_was_missing() {
    let t = Three::start();
    for point in [
        "after-staging",
        "after-fetch",
        "mid-checkout",
        "before-record",
        "after-publish",
    ] {
        let manifest = t.manifest(point, &t.tips[2]);
        let killed = t.restore(&manifest, &[("GIT_SESSION_FAILPOINT", point)]);
        killed.assert_killed_at(point);
        let finished: Vec<bool> = ["a", "b", "c"]
            .iter()
            .map(|n| t.dir(&format!("{point}/{n}/.git")).is_dir())
            .collect();
        let rerun = t.restore(&manifest, &[]);
        rerun.assert_code(0);
        let out = rerun.json();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            assert_eq!(
                out["sessions"][i]["noop"],
                json!(finished[i]),
                "{point}: {name}: {out:#}"
            );
            t.assert_restored(
                &t.dir(&format!("{point}/{name}")),
                &t.tips[i],
                &format!("sessions/{name}"),
            );
        }
    }
}

/// Each kind of bad manifest: exit 2 naming the entry and the field, before any request, and
/// nothing written.
#[test]
fn a_bad_manifest_is_exit_2_naming_the_entry_and_field_before_any_request() {
    let t = Three::start();
    let good = |name: &str, dir: &str| t.entry(name, dir, &t.tips[0]);
    let with = |dir: &str, key: &str, value: Value| {
        let mut e = good("a", dir);
        e[key] = value;
        e
    };
    let without = |dir: &str, key: &str| {
        let mut e = good("a", dir);
        e.as_object_mut().unwrap().remove(key);
        e
    };
    let secret_url = t.url("a");
    let a_file = t.w.path("plain-file");
    std::fs::write(&a_file, "x").unwrap();
    let two = |second: Value| json!({"sessions": [good("a", "bad/x"), second]});
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("not an object", json!([1]), vec!["must be a JSON object"]),
        ("no sessions", json!({"sessions": []}), vec!["0 sessions"]),
        (
            "an unknown top-level field",
            json!({"sessions": [good("a", "bad/x")], "session": 1}),
            vec!["unknown field \"session\""],
        ),
        (
            "an unknown entry field",
            two(with("bad/y", "tip", json!("x"))),
            vec!["session 1 (", "bad/y", "unknown field \"tip\""],
        ),
        (
            "an abbreviated tip",
            two(with("bad/y", "tip_sha", json!(&t.tips[0][..12]))),
            vec!["session 1 (", "bad/y", "tip_sha"],
        ),
        (
            "a tip of another type",
            two(with("bad/y", "tip_sha", json!(7))),
            vec!["session 1 (", "tip_sha", "must be a string"],
        ),
        (
            "a bad branch",
            two(with("bad/y", "session_branch", json!("a..b"))),
            vec!["session 1 (", "session_branch"],
        ),
        (
            "no branch",
            two(without("bad/y", "session_branch")),
            vec!["session 1 (", "session_branch", "missing"],
        ),
        (
            "no dir",
            two(without("bad/y", "dir")),
            vec!["session 1:", "dir", "missing"],
        ),
        (
            "no read URL",
            two(without("bad/y", "read_url")),
            vec!["session 1 (", "read_url", "missing"],
        ),
        (
            "both a URL and its file",
            two(with("bad/y", "read_url_file", json!("url.txt"))),
            vec!["session 1 (", "read_url_file", "not both"],
        ),
        (
            "a URL file that is missing",
            two({
                let mut e = without("bad/y", "push_url");
                e["push_url_file"] = json!("no-such-file");
                e
            }),
            vec!["session 1 (", "push_url_file", "no-such-file"],
        ),
        (
            "a URL of another scheme",
            two(with("bad/y", "read_url", json!("ftp://127.0.0.1/a.git"))),
            vec!["session 1 (", "read_url"],
        ),
        (
            "a negative depth",
            two(with("bad/y", "depth", json!(-1))),
            vec!["session 1 (", "depth", "whole number"],
        ),
        (
            "a depth holding a credentialed URL",
            two(with("bad/y", "depth", json!(secret_url))),
            vec!["session 1 (", "depth"],
        ),
        (
            "a branch holding a credentialed URL",
            two(with("bad/y", "session_branch", json!(secret_url))),
            vec!["session 1 (", "session_branch"],
        ),
        (
            "an absolute sparse folder",
            two(with("bad/y", "sparse", json!(["/etc"]))),
            vec!["session 1 (", "sparse"],
        ),
        (
            "an unknown lfs mode",
            two(with("bad/y", "lfs", json!("sometimes"))),
            vec!["session 1 (", "lfs", "auto, always, never"],
        ),
        (
            "an unknown submodules mode",
            two(with("bad/y", "submodules", json!("all"))),
            vec!["session 1 (", "submodules", "none, shallow, recursive"],
        ),
        (
            "the same dir twice",
            two(good("b", "bad/x")),
            vec!["session 1 (", "dir", "session 0 (", "the same folder"],
        ),
        (
            "a dir inside another",
            two(good("b", "bad/x/inner")),
            vec!["session 1 (", "dir", "session 0 (", "inside"],
        ),
        (
            "a dir that is a file",
            two(good("b", a_file.to_str().unwrap())),
            vec!["session 1 (", "plain-file", "dir", "not a directory"],
        ),
        (
            "too many sessions",
            json!({"sessions": (0..65).map(|i| good("a", &format!("bad/{i}"))).collect::<Vec<_>>()}),
            vec!["65 sessions", "1 to 64"],
        ),
    ];
    for (what, manifest, words) in &cases {
        let run = t.restore(manifest, &[]);
        run.assert_case_says(what, 2, &[&["sessions manifest"][..], words].concat());
        assert_eq!(run.json()["error"]["kind"], "usage", "{what}");
        assert_matches_schema(&run.json());
        assert!(t.srv.log().is_empty(), "{what}: a request was made");
        assert!(
            left_nothing(&t.w.path("bad")),
            "{what}: something was written"
        );
    }
    // Not JSON, and a file over the bound.
    for (what, bytes, word) in [
        ("not JSON", b"{\"sessions\": [".to_vec(), "not JSON"),
        ("too big", vec![b' '; (1 << 20) + 1], "over 1048576 bytes"),
    ] {
        let file = t.w.path("raw.json");
        std::fs::write(&file, bytes).unwrap();
        let run = t.w.run(
            &t.w.path(""),
            &["restore", "--sessions", file.to_str().unwrap()],
            &[],
        );
        run.assert_case_says(what, 2, &[word]);
        assert!(t.srv.log().is_empty(), "{what}: a request was made");
    }
}

#[test]
fn the_concurrency_knob_is_range_checked() {
    let t = Three::start();
    for value in ["0", "65", "two", " 4"] {
        let run = t.restore(
            &t.manifest("trees", &t.tips[2]),
            &[("GIT_SESSION_SESSIONS_CONCURRENCY", value)],
        );
        run.assert_case_says(value, 2, &["GIT_SESSION_SESSIONS_CONCURRENCY", "1 to 64"]);
        assert!(t.srv.log().is_empty());
    }
}

/// The credential in the Basic `Authorization` header `value`, decoded.
fn basic(value: &str) -> String {
    use base64::Engine as _;
    let b64 = value.strip_prefix("Basic ").unwrap_or(value);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn each_sessions_credential_goes_only_to_its_own_server() {
    const OTHER: &str = "0ther-Secr3t";
    let t = Three::start();
    let other = GitServer::start(&t.w.srv(), Some(OTHER));
    let mut b = t.entry("b", "trees/b", &t.tips[1]);
    let b_url = other.url("b.git", Some(&format!("t:{OTHER}")));
    b["read_url"] = json!(b_url);
    b["push_url"] = json!(b_url);
    let manifest = json!({"sessions": [t.entry("a", "trees/a", &t.tips[0]), b]});
    t.restore(&manifest, &[]).assert_code(0);
    t.assert_restored(&t.dir("trees/a"), &t.tips[0], "sessions/a");
    t.assert_restored(&t.dir("trees/b"), &t.tips[1], "sessions/b");
    let sent = |srv: &GitServer| -> Vec<String> {
        srv.log()
            .iter()
            .filter_map(|e| e.authorization.as_deref().map(basic))
            .collect()
    };
    let (to_a, to_b) = (sent(&t.srv), sent(&other));
    assert!(!to_a.is_empty() && !to_b.is_empty(), "{to_a:?} {to_b:?}");
    assert!(to_a.iter().all(|c| c.ends_with(TOKEN)), "{to_a:?}");
    assert!(to_b.iter().all(|c| c.ends_with(OTHER)), "{to_b:?}");
}

/// Three sessions each hold at a barrier until all three reach it: only sessions restored at once
/// get past it (one after another, the first would wait there 60 s and say so).
#[test]
fn the_sessions_are_restored_at_once() {
    let t = Three::start();
    let barrier = t.w.path("barrier");
    let started = std::time::Instant::now();
    let run = t.restore(
        &t.manifest("trees", &t.tips[2]),
        &[
            ("GIT_SESSION_FAILPOINT", "before-lock"),
            ("GIT_SESSION_BARRIER_DIR", barrier.to_str().unwrap()),
            ("GIT_SESSION_BARRIER_COUNT", "3"),
            ("GIT_SESSION_SESSIONS_CONCURRENCY", "3"),
        ],
    );
    run.assert_code(0);
    assert!(!run.stderr.contains("timed out"), "{}", run.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(crate::support::names_in(&barrier).len(), 3);
}

#[test]
fn an_empty_variable_is_unset_and_a_single_sessions_flag_beside_a_manifest_is_refused() {
    let t = Three::start();
    let run = t.w.run(
        &t.w.path(""),
        &["restore", "--json"],
        &[("GIT_SESSION_SESSIONS_FILE", "")],
    );
    // The single restore, which misses its inputs.
    run.assert_says(2, &["TIP_SHA, SESSION_BRANCH, READ_URL are not set"]);
    let file = t.w.path("sessions.json");
    std::fs::write(&file, t.manifest("trees", &t.tips[2]).to_string()).unwrap();
    let run = t.w.run(
        &t.w.path(""),
        &["restore", "--sparse", "src"],
        &[("GIT_SESSION_SESSIONS_FILE", file.to_str().unwrap())],
    );
    run.assert_says(2, &["--sparse", "GIT_SESSION_SESSIONS_FILE"]);
    let run = t.w.run(
        &t.w.path(""),
        &[
            "restore",
            "--sessions",
            file.to_str().unwrap(),
            "--sparse",
            "src",
        ],
        &[],
    );
    run.assert_says(2, &["--sparse", "--sessions"]);
    let run = t.w.run(
        &t.w.path(""),
        &["restore", "--depth", "5"],
        &[("GIT_SESSION_SESSIONS_FILE", file.to_str().unwrap())],
    );
    run.assert_says(2, &["--depth", "GIT_SESSION_SESSIONS_FILE"]);
    assert!(t.srv.log().is_empty());
    assert!(left_nothing(&t.w.path("trees")));
}

/// SPEC rule 9 for each session: run as root, the sessions in a folder another user owns are
/// restored as that user, nothing in them root's.
#[test]
fn run_as_root_the_sessions_in_another_users_folder_are_restored_as_that_user() {
    if !crate::support::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let t = Three::start();
    crate::support::give_to_nobody(&t.dir("owned"));
    let manifest = json!({"sessions": [
        t.entry("a", "owned/a", &t.tips[0]),
        t.entry("b", "owned/b", &t.tips[1]),
    ]});
    t.restore(&manifest, &[]).assert_code(0);
    crate::support::assert_all_nobodys(&t.dir("owned"));
    t.assert_restored(&t.dir("owned/a"), &t.tips[0], "sessions/a");
    t.assert_restored(&t.dir("owned/b"), &t.tips[1], "sessions/b");
}

/// The optional fields reach each session's restore: a URL file relative to the manifest's
/// folder and the whole history (`depth: 0`), a sparse cone, an archive.
#[test]
fn each_sessions_own_options_reach_its_restore() {
    let t = Three::start();
    std::fs::create_dir_all(t.w.path("urls")).unwrap();
    std::fs::write(t.w.path("urls/a.txt"), t.url("a")).unwrap();
    let files = t.w.path("files");
    std::fs::create_dir_all(&files).unwrap();
    let archive = files.join("c.tar.gz");
    let prefix = format!("c-{}/", &t.tips[2][..7]);
    t.w.git(
        &t.w.srv().join("c.git"),
        &[
            "archive",
            "--format=tar.gz",
            &format!("--prefix={prefix}"),
            "-o",
            archive.to_str().unwrap(),
            &t.tips[2],
        ],
    );
    t.srv.serve_files(&files);
    let mut a = t.entry("a", "opts/a", &t.tips[0]);
    a.as_object_mut().unwrap().remove("read_url");
    a["read_url_file"] = json!("urls/a.txt");
    a["depth"] = json!(0);
    let mut b = t.entry("b", "opts/b", &t.tips[1]);
    b["sparse"] = json!(["src"]);
    let mut c = t.entry("c", "opts/c", &t.tips[2]);
    c["archive_url"] = json!(t.srv.file_url("c.tar.gz", Some(&userinfo())));
    let run = t.restore(&json!({"sessions": [a, b, c]}), &[]);
    run.assert_code(0);
    let out = run.json();
    assert_matches_schema(&out);
    let (a, b, c) = (t.dir("opts/a"), t.dir("opts/b"), t.dir("opts/c"));
    t.assert_restored(&a, &t.tips[0], "sessions/a");
    assert_eq!(t.w.git(&a, &["rev-list", "--count", "HEAD"]), "2");
    t.assert_restored(&b, &t.tips[1], "sessions/b");
    assert_eq!(out["sessions"][1]["sparse"], json!(["src"]));
    assert!(b.join("src/lib.rs").is_file() && b.join("README.md").is_file());
    assert!(!b.join("bin").exists(), "outside the cone");
    assert_eq!(out["sessions"][2]["source"], "archive");
    t.assert_restored(&c, &t.tips[2], "sessions/c");
    assert!(c.join("bin/run.sh").is_file());
}

/// `git-session schema` describes the manifest (`$defs.Document`): the manifests of these tests
/// match it, and one with an unknown field does not.
#[test]
fn the_schema_describes_the_manifest() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
        .arg("schema")
        .output()
        .unwrap();
    let mut schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        schema["$defs"]["Document"].is_object(),
        "no Document in the schema"
    );
    let defs = schema["$defs"].take();
    let document = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": defs,
        "$ref": "#/$defs/Document",
    });
    let validator = jsonschema::draft202012::new(&document).unwrap();
    let t = Three::start();
    let mut full = t.entry("a", "x", &t.tips[0]);
    full["depth"] = json!(0);
    full["sparse"] = json!(["src"]);
    full["lfs"] = json!("never");
    full["submodules"] = json!("shallow");
    full["cache"] = json!("/opt/template");
    full["archive_url_file"] = json!("archive-url.txt");
    for good in [t.manifest("trees", &t.tips[2]), json!({"sessions": [full]})] {
        let errors: Vec<String> = validator
            .iter_errors(&good)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{good:#}");
    }
    let mut unknown = t.entry("a", "x", &t.tips[0]);
    unknown["tip"] = json!("x");
    for bad in [
        json!({"sessions": [unknown]}),
        json!({"sessions": []}),
        json!({"sessions": [t.entry("a", "x", &t.tips[0])], "extra": 1}),
        json!({"sessions": [{"dir": "x"}]}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad:#}");
    }
}

/// On a terminal, no bars of restores running at once drawn over each other: a line as each
/// session finishes.
#[test]
fn on_a_terminal_a_line_as_each_session_finishes() {
    let t = Three::start();
    let file = t.w.path("sessions.json");
    std::fs::write(&file, t.manifest("trees", &t.tips[2]).to_string()).unwrap();
    let args = format!("restore --sessions {}", file.display());
    let shown = t.w.on_a_terminal(&t.w.path(""), &args, &[]);
    for k in 1..=3 {
        assert!(
            shown.contains(&format!("[{k}/3] restored sessions/")),
            "{shown}"
        );
    }
    assert!(!shown.contains("receiving objects"), "{shown}");
}

crate::sha256_too!(
    three_sessions_one_with_a_wrong_tip_the_others_restored_and_a_rerun_completes_it,
    a_bad_manifest_is_exit_2_naming_the_entry_and_field_before_any_request,
);

/// A credentialed URL put in the wrong field is refused without being shown, though nothing else
/// in the manifest holds that credential for the redaction to learn (`Run` checks every output
/// for the token).
#[test]
fn a_credential_in_the_wrong_field_is_never_shown() {
    let t = Three::start();
    let secret = t.url("a");
    for field in [
        "session_branch",
        "tip_sha",
        "depth",
        "lfs",
        "submodules",
        "sparse",
    ] {
        let mut e = t.entry("a", "bad/x", &t.tips[0]);
        e["read_url"] = json!(t.srv.url("a.git", None));
        e.as_object_mut().unwrap().remove("push_url");
        e[field] = json!(secret);
        let run = t.restore(&json!({"sessions": [e]}), &[]);
        assert_ne!(run.code, Some(0), "{field}");
        assert!(
            run.error_message().contains(field),
            "{field}: {}",
            run.stderr
        );
        assert!(t.srv.log().is_empty(), "{field}: a request was made");
    }
}
