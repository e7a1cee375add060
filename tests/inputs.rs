//! Bad input is refused with exit 2 before any network I/O, with a message that says why.

use crate::support::{GitServer, World, userinfo};

const GOOD_SHA: &str = "3f2a9c5e8b7d6a1f0e4c2b9a8d7e6f5a4b3c2d1e";

fn server(w: &World) -> GitServer {
    w.repo("repo.git", &[&[("a.txt", Some("a\n"))]]);
    GitServer::start(&w.srv(), Some(crate::support::TOKEN))
}

#[test]
fn refuses_every_kind_of_non_full_sha_without_a_request() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    let cases: &[(String, &str)] = &[
        ("3f2a9c5".into(), "abbreviated object id (7 hex digits)"),
        (
            GOOD_SHA[..39].into(),
            "abbreviated object id (39 hex digits)",
        ),
        ("HEAD".into(), "revision expression"),
        ("main".into(), "branch or tag name"),
        ("v1.0".into(), "branch or tag name"),
        ("abc^".into(), "revision expression"),
        ("g".repeat(40), "40 characters but is not hexadecimal"),
        (format!("{GOOD_SHA}\n"), "surrounding whitespace"),
        (format!(" {GOOD_SHA}"), "surrounding whitespace"),
        (format!("\u{feff}{GOOD_SHA}"), "byte-order mark"),
        // Between the two lengths, and past the longer: no repository's full id.
        ("a".repeat(41), "abbreviated object id (41 hex digits)"),
        ("a".repeat(63), "abbreviated object id (63 hex digits)"),
        ("a".repeat(65), "has 65 hex digits"),
        ("g".repeat(64), "64 characters but is not hexadecimal"),
        ("0".repeat(40), "zero object id"),
        ("0".repeat(64), "zero object id"),
        (String::new(), "the object id is empty"),
    ];
    for (sha, reason) in cases {
        let dir = w.path("sandbox");
        let run = w.restore_with(&dir, &url, "sessions/a", sha, &["--json"], &[]);
        run.assert_code(2);
        let j = run.json();
        assert_eq!(j["ok"], false);
        assert_eq!(j["exit_code"], 2);
        assert_eq!(j["error"]["kind"], "usage");
        let msg = j["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains(reason),
            "{sha:?}: message {msg:?} lacks {reason:?}"
        );
        assert!(
            srv.log().is_empty(),
            "{sha:?} caused requests: {:?}",
            srv.log()
        );
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "{sha:?} wrote into the target"
        );
    }
}

#[test]
fn upper_case_sha_is_normalised() {
    let w = World::new();
    let ids = w.repo("repo.git", &[&[("a.txt", Some("a\n"))]]);
    let srv = GitServer::start(&w.srv(), None);
    let dir = w.path("sandbox");
    let run = w.run(
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL", &srv.url("repo.git", None)),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &ids[0].to_uppercase()),
        ],
    );
    run.assert_code(0);
    assert_eq!(run.json()["tip"], ids[0].as_str());
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), ids[0]);
}

#[test]
fn branch_names_follow_git_check_ref_format() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    // The same list the unit test of `SessionBranch` refuses.
    let bad: Vec<String> =
        serde_json::from_str(include_str!("fixtures/invalid-branch-names.json")).unwrap();
    for name in &bad {
        let short = name.strip_prefix("refs/heads/").unwrap_or(name);
        let git = w.git_output(w.tmp.path(), &["check-ref-format", "--branch", short]);
        assert!(
            !git.status.success(),
            "git accepts {name:?}, the test is wrong"
        );
        let run = w.restore_with(&w.path("sandbox"), &url, name, GOOD_SHA, &[], &[]);
        run.assert_case_says(&format!("{name:?}"), 2, &["invalid session branch name"]);
    }
    assert!(srv.log().is_empty());
    // Names git accepts are accepted, and refs/heads/ is normalised away.
    for name in ["sessions/4f1c", "refs/heads/sessions/x", "a.b-c_d/e"] {
        let short = name.strip_prefix("refs/heads/").unwrap_or(name);
        w.git(w.tmp.path(), &["check-ref-format", "--branch", short]);
        let ids = w.git(&w.srv().join("repo.git"), &["rev-parse", "main"]);
        let dir = w.path(&format!("ok-{}", short.replace('/', "_")));
        w.restore_with(&dir, &url, name, &ids, &[], &[])
            .assert_code(0);
        assert_eq!(
            w.git(&dir, &["symbolic-ref", "HEAD"]),
            format!("refs/heads/{short}")
        );
    }
}

#[test]
fn credentials_on_argv_are_refused() {
    let w = World::new();
    let srv = server(&w);
    let run = w.run(
        &w.path("sandbox"),
        &[
            "restore",
            "--json",
            "--read-url",
            &srv.url("repo.git", Some(&userinfo())),
            "--session-branch",
            "s",
            "--tip-sha",
            GOOD_SHA,
        ],
        &[],
    );
    run.assert_code(2);
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("carries credentials")
    );
    assert!(srv.log().is_empty());
}

#[test]
fn missing_variables_are_named() {
    let w = World::new();
    let dir = w.path("sandbox");
    let run = w.run(
        &dir,
        &["restore"],
        &[("SESSION_BRANCH", "s"), ("TIP_SHA", GOOD_SHA)],
    );
    run.assert_case_says("no READ_URL", 2, &["READ_URL is not set"]);
    let run = w.run(
        &dir,
        &["restore"],
        &[
            ("READ_URL", "http://127.0.0.1:1/r.git"),
            ("TIP_SHA", GOOD_SHA),
        ],
    );
    run.assert_case_says("no SESSION_BRANCH", 2, &["SESSION_BRANCH is not set"]);
    let run = w.restore_with(&dir, "ftp://h/r.git", "s", GOOD_SHA, &[], &[]);
    run.assert_case_says("ftp://", 2, &["unsupported URL scheme"]);
    let run = w.run(&dir, &["restore", "--json", "--no-such-flag"], &[]);
    run.assert_code(2);
    assert_eq!(run.json()["error"]["kind"], "usage");
}

/// A URL file holding more than one line (or a tab inside the URL) is exit 2 before any request:
/// URL parsing would otherwise drop the line break and join the lines into another URL.
#[test]
fn a_url_file_with_a_line_break_inside_is_refused() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    let file = w.path("url-file");
    let restore = |dir: &std::path::Path| {
        w.run(
            dir,
            &["restore", "--json"],
            &[
                ("READ_URL_FILE", file.to_str().unwrap()),
                ("SESSION_BRANCH", "sessions/x"),
                ("TIP_SHA", GOOD_SHA),
            ],
        )
    };
    for (i, content) in [
        format!("{url}\nsecond-line\n"),
        format!("{url}\r\nsecond-line"),
        url.replacen("repo", "re\tpo", 1),
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(&file, content).unwrap();
        let dir = w.path(&format!("sandbox{i}"));
        let run = restore(&dir);
        run.assert_code(2);
        let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("control character"), "{msg}");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "{i}: something was written"
        );
        assert!(srv.log().is_empty(), "{i}: a request was made");
    }
    // One URL and a trailing newline is fine.
    std::fs::write(&file, format!("{url}\n")).unwrap();
    restore(&w.path("fine")).assert_code(8);
    assert!(srv.log().iter().all(|e| !e.path.contains("second")));
}

/// `-C` (or `SESSION_DIR`) naming a file is bad input (exit 2) for every command, not an I/O error.
#[test]
fn a_work_tree_that_is_a_file_is_exit_2() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    let file = w.path("a-file");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "x\n").unwrap();
    let cwd = w.path("cwd");
    let vars = [
        ("READ_URL", url.as_str()),
        ("PUSH_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/x"),
        ("TIP_SHA", GOOD_SHA),
    ];
    for cmd in [
        &["restore"][..],
        &["save", "-m", "x"],
        &["push"],
        &["status"],
    ] {
        let mut args = vec!["-C", file.to_str().unwrap()];
        args.extend_from_slice(cmd);
        args.push("--json");
        let run = w.run(&cwd, &args, &vars);
        run.assert_code(2);
        let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("is not a directory"), "{cmd:?}: {msg}");
        let mut env = vars.to_vec();
        env.push(("SESSION_DIR", file.to_str().unwrap()));
        let mut args = cmd.to_vec();
        args.push("--json");
        w.run(&cwd, &args, &env).assert_code(2);
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x\n");
    assert!(srv.log().is_empty());
}

/// Run the binary with `args` and `vars` from inside `gone`, a folder deleted just before (by the
/// shell that then execs the binary): its exit code and stdout.
fn run_in_deleted_dir(
    w: &World,
    gone: &std::path::Path,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (Option<i32>, String) {
    std::fs::create_dir_all(gone).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"cd "$1" && rmdir "$1" && shift && exec "$@""#)
        .arg("sh")
        .arg(gone)
        .arg(env!("CARGO_BIN_EXE_git-session"))
        .args(args)
        .env_clear()
        .envs(w.env())
        .env("GIT_SESSION_RETRY_BASE_MS", "5")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A current directory that was deleted is bad input (exit 2) that says what to do, for every
/// command; an absolute `-C` still works from there, and a relative `_FILE` is refused.
#[test]
fn a_deleted_current_directory_is_exit_2() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    let gone = w.path("gone");
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/x"),
        ("TIP_SHA", GOOD_SHA),
    ];
    for cmd in [&["restore"][..], &["save"], &["push"], &["status"]] {
        let mut args = cmd.to_vec();
        args.push("--json");
        let (code, stdout) = run_in_deleted_dir(&w, &gone, &args, &vars);
        assert_eq!(code, Some(2), "{cmd:?}: {stdout}");
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let msg = json["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("current directory no longer exists"),
            "{cmd:?}: {msg}"
        );
        let mut args = vec!["-C", "relative"];
        args.extend_from_slice(cmd);
        let (code, _) = run_in_deleted_dir(&w, &gone, &args, &vars);
        assert_eq!(code, Some(2), "{cmd:?} with a relative -C");
    }
    assert!(srv.log().is_empty());
    // With an absolute -C the deleted current directory does not matter.
    let target = w.path("target");
    let args = ["-C", target.to_str().unwrap(), "restore", "--json"];
    let (code, stdout) = run_in_deleted_dir(&w, &gone, &args, &vars);
    assert_eq!(code, Some(8), "{stdout}");
    let ids = w.repo("real.git", &[&[("a.txt", Some("a\n"))]]);
    let real = srv.url("real.git", Some(&userinfo()));
    let tree = w.path("tree");
    let target = tree.to_str().unwrap();
    let vars = [
        ("READ_URL", real.as_str()),
        ("SESSION_BRANCH", "sessions/x"),
        ("TIP_SHA", ids[0].as_str()),
    ];
    let succeeds = |args: &[&str]| {
        let (code, stdout) = run_in_deleted_dir(&w, &gone, args, &vars);
        assert_eq!(code, Some(0), "{args:?}: {stdout}");
    };
    succeeds(&["-C", target, "restore", "--json"]);
    // A relative _FILE cannot be meant from a deleted folder: exit 2 with the hint.
    std::fs::write(w.path("urlfile"), format!("{real}\n")).unwrap();
    let args = ["-C", target, "status", "--remote", "--json"];
    let (code, stdout) = run_in_deleted_dir(&w, &gone, &args, &[("READ_URL_FILE", "urlfile")]);
    assert_eq!(code, Some(2), "{stdout}");
    assert!(
        stdout.contains("READ_URL_FILE (urlfile) is relative"),
        "{stdout}"
    );
    succeeds(&["-C", target, "status", "--json"]);
    std::fs::write(tree.join("b.txt"), "b\n").unwrap();
    succeeds(&["-C", target, "save", "--no-push", "-m", "b", "--json"]);
    assert_eq!(w.git(&tree, &["show", "HEAD:b.txt"]), "b");
}

/// `-C` naming a symlink to a folder that does not exist is exit 2, saying so (it was exit 1,
/// "File exists"), and nothing is created where it points.
#[test]
fn a_work_tree_that_is_a_dangling_symlink_is_exit_2() {
    let w = World::new();
    let link = w.path("link");
    let nowhere = w.path("nowhere");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&nowhere, &link).unwrap();
    let vars = [
        ("READ_URL", "http://127.0.0.1:9/repo.git"),
        ("SESSION_BRANCH", "sessions/x"),
        ("TIP_SHA", GOOD_SHA),
    ];
    let run = w.run(
        &w.path(""),
        &["-C", link.to_str().unwrap(), "restore", "--json"],
        &vars,
    );
    run.assert_code(2);
    let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.contains("is a symlink to") && msg.contains("does not exist"),
        "{msg}"
    );
    assert!(!nowhere.exists());
}

/// With TIP_SHA, SESSION_BRANCH and READ_URL all unset, one run names all three (it took three
/// runs to learn of each in turn); two unset: both named.
#[test]
fn every_missing_input_is_named_at_once() {
    let w = World::new();
    let dir = w.path("sandbox");
    let run = w.run(&dir, &["restore", "--json"], &[]);
    run.assert_code(2);
    let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("TIP_SHA, SESSION_BRANCH, READ_URL are not set"),
        "{message}"
    );
    let run = w.run(&dir, &["restore", "--json"], &[("TIP_SHA", GOOD_SHA)]);
    run.assert_code(2);
    let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("SESSION_BRANCH, READ_URL are not set"),
        "{message}"
    );
    assert!(!dir.join(".git").exists());
}

/// The tuning knobs are read once, before any request: a value that is not a whole number or is
/// out of its range is exit 2 naming the variable and its range. Before, a malformed value was
/// silently the default, `0` ms timed every read out at once (exit 5 after the retries), and a
/// huge one panicked adding it to a clock (exit 1).
#[test]
fn a_malformed_or_out_of_range_knob_is_exit_2_before_any_request() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    let tip = w.git(&w.srv().join("repo.git"), &["rev-parse", "HEAD"]);
    let huge = u64::MAX.to_string();
    let cases: &[(&str, &str, &str)] = &[
        ("GIT_SESSION_READ_TIMEOUT_MS", "0", "from 100 to 86400000"),
        ("GIT_SESSION_CONNECT_TIMEOUT_MS", "ten", "milliseconds"),
        ("GIT_SESSION_RETRY_BASE_MS", &huge, "from 0 to 60000"),
        ("GIT_SESSION_LOCK_WAIT_S", &huge, "from 0 to 86400"),
        ("GIT_SESSION_FIRST_BYTE_WAIT_MS", &huge, "default, 600000"),
        ("GIT_SESSION_LOW_SPEED_TIME_MS", "-5", "milliseconds"),
        ("GIT_SESSION_LFS_CONCURRENCY", "0", "from 1 to 64"),
        ("GIT_SESSION_MAX_SUBMODULES", "1e3", "submodules"),
        ("GIT_SESSION_BIG_OBJECT_BYTES", "0", "bytes"),
    ];
    for (var, value, range) in cases {
        let dir = w.path("sandbox");
        let run = w.restore_with(&dir, &url, "sessions/a", &tip, &["--json"], &[(var, value)]);
        let what = format!("{var}={value}");
        run.assert_case_says(&what, 2, &[var, range]);
        assert_eq!(run.json()["error"]["kind"], "usage", "{what}");
        assert!(
            srv.log().is_empty(),
            "{what} made requests: {:?}",
            srv.log()
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{what} wrote");
    }
    // In range, the same knobs restore.
    let dir = w.path("sandbox");
    w.restore_with(
        &dir,
        &url,
        "sessions/a",
        &tip,
        &[],
        &[("GIT_SESSION_READ_TIMEOUT_MS", "30000")],
    )
    .assert_code(0);
    // `save` reads them before it commits: exit 2 leaves no commit behind. (GIT_SESSION_PROTOCOL
    // was read only when the push connected, after the commit.)
    std::fs::write(dir.join("a.txt"), "b\n").unwrap();
    srv.clear_log();
    let head = w.git(&dir, &["rev-parse", "HEAD"]);
    for (var, value) in [
        ("GIT_SESSION_READ_TIMEOUT_MS", "0"),
        ("GIT_SESSION_PROTOCOL", "v2"),
    ] {
        let vars = [("PUSH_URL", url.as_str()), (var, value)];
        w.run(&dir, &["save", "-m", "edit"], &vars)
            .assert_says(2, &[var]);
        assert_eq!(
            w.git(&dir, &["rev-parse", "HEAD"]),
            head,
            "{var}: committed"
        );
    }
    assert!(srv.log().is_empty(), "save made requests: {:?}", srv.log());
}

/// A knob takes digits only, in a range where it does what it says, and is checked before any
/// request (issue 38, part 3). Before: `+5000` and space-padded values were taken, and values
/// that made every restore fail were in range (`GIT_SESSION_FIRST_BYTE_WAIT_MS=0`,
/// `GIT_SESSION_BIG_OBJECT_BYTES=1`, `GIT_SESSION_MAX_SUBMODULES=0`, a low-speed floor of
/// 2^64-1 bytes per second).
#[test]
fn knobs_take_digits_only_within_a_range_that_does_what_they_say() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    let tip = w.git(&w.srv().join("repo.git"), &["rev-parse", "HEAD"]);
    let cases: &[(&str, &str, &str)] = &[
        (
            "GIT_SESSION_READ_TIMEOUT_MS",
            "+5000",
            "from 100 to 86400000",
        ),
        ("GIT_SESSION_READ_TIMEOUT_MS", " 5000", "digits only"),
        ("GIT_SESSION_READ_TIMEOUT_MS", "5000 ", "digits only"),
        ("GIT_SESSION_CONNECT_TIMEOUT_MS", "0x1000", "digits only"),
        ("GIT_SESSION_LOW_SPEED_TIME_MS", "5000ms", "milliseconds"),
        ("GIT_SESSION_LOCK_WAIT_S", "+1", "from 0 to 86400"),
        ("GIT_SESSION_PROTOCOL", " 2", "must be 0"),
        (
            "GIT_SESSION_FIRST_BYTE_WAIT_MS",
            "0",
            "from 100 to 86400000",
        ),
        ("GIT_SESSION_SECTION_WAIT_MS", "1", "from 100 to"),
        ("GIT_SESSION_RETRY_TOTAL_MS", "99", "from 100 to"),
        ("GIT_SESSION_CONNECT_TIMEOUT_MS", "1", "from 100 to"),
        ("GIT_SESSION_LOW_SPEED_TIME_MS", "50", "from 100 to"),
        (
            "GIT_SESSION_LOW_SPEED_LIMIT",
            "18446744073709551615",
            "from 0 to 1073741824",
        ),
        ("GIT_SESSION_BIG_OBJECT_BYTES", "1", "from 1048576 to"),
        ("GIT_SESSION_MAX_SUBMODULES", "0", "from 1 to 100000"),
    ];
    for (var, value, range) in cases {
        let dir = w.path("sandbox");
        let run = w.restore_with(&dir, &url, "sessions/a", &tip, &["--json"], &[(var, value)]);
        let what = format!("{var}={value:?}");
        run.assert_case_says(&what, 2, &[var, range]);
        assert!(
            srv.log().is_empty(),
            "{what} made requests: {:?}",
            srv.log()
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{what} wrote");
    }
    // Each bound itself is taken.
    let dir = w.path("sandbox");
    let bounds = [
        ("GIT_SESSION_FIRST_BYTE_WAIT_MS", "100000"),
        ("GIT_SESSION_SECTION_WAIT_MS", "100000"),
        ("GIT_SESSION_BIG_OBJECT_BYTES", "1048576"),
        ("GIT_SESSION_MAX_SUBMODULES", "1"),
        ("GIT_SESSION_LOCK_WAIT_S", "0"),
        ("GIT_SESSION_RETRY_BASE_MS", "0"),
    ];
    w.restore_with(&dir, &url, "sessions/a", &tip, &[], &bounds)
        .assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), tip);
}

/// Every numeric flag takes digits only, in its range, checked before any request: exit 2
/// naming the flag and the range. `--depth` has git's range: `git clone --depth 2147483648`
/// is refused before any request, and so is ours (it went to the server: exit 5 after 6
/// requests); 2147483647 is taken by both.
#[test]
fn numeric_flags_take_digits_only_within_their_range_before_any_request() {
    let w = World::new();
    let srv = server(&w);
    let url = srv.url("repo.git", Some(&userinfo()));
    let bare = w.srv().join("repo.git");
    let tip = w.git(&bare, &["rev-parse", "HEAD"]);
    // What the real git says of the same depths.
    let source = format!("file://{}", bare.display());
    for (depth, ok) in [
        ("2147483648", false),
        ("4294967296", false),
        ("2147483647", true),
    ] {
        let into = w.tmp.path().join(format!("git-clone-{depth}"));
        let out = w.git_output(
            w.tmp.path(),
            &[
                "clone",
                "-q",
                "--depth",
                depth,
                &source,
                into.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.success(), ok, "git clone --depth {depth}");
    }
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["--depth", "2147483648"],
            "--depth",
            "from 0 to 2147483647",
        ),
        (
            &["--depth", "4294967296"],
            "--depth",
            "from 0 to 2147483647",
        ),
        (&["--depth", "+1"], "--depth", "digits only"),
        (&["--depth", " 1"], "--depth", "digits only"),
        (&["--depth", "0x10"], "--depth", "digits only"),
        (
            &["--strip-components", "+1"],
            "--strip-components",
            "from 0 to 4096",
        ),
        (
            &["--strip-components", "4097"],
            "--strip-components",
            "from 0 to 4096",
        ),
        (&["--max-entries", "0"], "--max-entries", "from 1 to"),
        (&["--max-entries", "1e6"], "--max-entries", "digits only"),
        (&["--max-bytes", "0"], "--max-bytes", "from 1 to"),
        (
            &["--max-object-bytes", "1 "],
            "--max-object-bytes",
            "digits only",
        ),
        (
            &["--max-header-bytes", "511"],
            "--max-header-bytes",
            "from 512 to",
        ),
    ];
    for (args, flag, range) in cases {
        let dir = w.path("sandbox");
        let args = [&["--json"][..], args].concat();
        let run = w.restore_with(&dir, &url, "sessions/a", &tip, &args, &[]);
        let what = format!("{args:?}");
        run.assert_case_says(&what, 2, &[flag, range]);
        assert_eq!(run.json()["error"]["kind"], "usage", "{what}");
        assert!(
            srv.log().is_empty(),
            "{what} made requests: {:?}",
            srv.log()
        );
    }
    let dir = w.path("sandbox");
    w.restore_with(
        &dir,
        &url,
        "sessions/a",
        &tip,
        &["--depth", "2147483647"],
        &[],
    )
    .assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), tip);
}

/// `watch --every` and `--quiet-for` take digits and a unit (ms, s, m, h), nothing else, in
/// their range: exit 2 naming the flag and the range, before the session is even looked at.
#[test]
fn watch_durations_take_digits_and_a_unit_within_their_range() {
    let w = World::new();
    let dir = w.path("anywhere");
    std::fs::create_dir_all(&dir).unwrap();
    for (flag, bad) in [
        ("--every", "+1s"),
        ("--every", " 1s"),
        ("--every", "1 s"),
        ("--every", "1sec"),
        ("--every", "50ms"),
        ("--every", "1.5s"),
        ("--quiet-for", "+0s"),
        ("--quiet-for", "5"),
    ] {
        let mut args = vec!["watch", "--json", flag, bad];
        if flag != "--every" {
            args.extend(["--every", "1s"]);
        }
        let run = w.run(&dir, &args, &[]);
        let what = format!("{flag} {bad:?}");
        run.assert_case_says(&what, 2, &[flag, "to 24h", "digits, then ms, s, m or h"]);
    }
}

crate::sha256_too!(upper_case_sha_is_normalised);

#[test]
fn a_credentialed_url_given_in_another_input_is_never_echoed() {
    // A URL pasted into the wrong variable or flag: the refusal names the input, and `World::run`
    // fails the test if the token shows in any encoding.
    let w = World::new();
    let dir = w.path("sandbox");
    let url = format!("http://{}@127.0.0.1:1/r.git", userinfo());
    let read = "http://127.0.0.1:1/r.git";
    for (branch, tip) in [(url.as_str(), GOOD_SHA), ("sessions/x", url.as_str())] {
        let run = w.restore_with(&dir, read, branch, tip, &["--json"], &[]);
        run.assert_code(2);
        let run = w.run(
            &dir,
            &[
                "restore",
                "--json",
                "--session-branch",
                branch,
                "--tip-sha",
                tip,
            ],
            &[("READ_URL", read)],
        );
        run.assert_code(2);
    }
    let run = w.restore_with(
        &dir,
        read,
        "sessions/x",
        GOOD_SHA,
        &[],
        &[("GIT_SESSION_AGENT", &url)],
    );
    assert_ne!(run.code, Some(0));
}

#[test]
fn a_url_file_that_never_ends_is_refused_not_read_forever() {
    // /dev/zero in a _FILE's place (and so in a manifest's read_url_file): bounded, exit 2.
    let w = World::new();
    let dir = w.path("sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    let run = w
        .run_limited(
            &dir,
            &["restore", "--json"],
            &[
                ("READ_URL_FILE", "/dev/zero"),
                ("SESSION_BRANCH", "sessions/x"),
                ("TIP_SHA", GOOD_SHA),
            ],
            std::time::Duration::from_secs(30),
        )
        .expect("the restore ended by itself");
    run.assert_says(2, &["READ_URL_FILE", "longer than any URL"]);
}
