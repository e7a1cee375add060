//! One rule per text boundary (issue 38, part 2): text a server, the environment or argv chose
//! reaches the terminal with its control characters escaped; git's credential protocol never gets
//! a line the URL smuggled in; commit messages hold no control characters; the pre-push check
//! reads every ref line git writes, as bytes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::push::Setup;
use crate::support::wire::{band, pkt};
use crate::support::{Endpoint, Run, Scripted, served_repo, userinfo};

/// The bytes a terminal would act on, raw.
const RAW: [char; 6] = ['\x1b', '\x07', '\r', '\x7f', '\u{9b}', '\0'];

#[track_caller]
fn assert_escaped(stderr: &str, escaped: &str) {
    assert!(
        !stderr.chars().any(|c| RAW.contains(&c)),
        "a raw control character on stderr: {stderr:?}"
    );
    assert!(
        stderr.contains(escaped),
        "{escaped} not on stderr: {stderr:?}"
    );
}

/// An ERR line, side-band channel 3, an unknown section's name and a push's `ng` reason, each
/// carrying ESC, BEL and CR: stderr (and the logs at debug) shows them escaped, never raw.
#[test]
fn a_hostile_servers_words_reach_stderr_escaped() {
    let (w, srv, ids) = served_repo(&[&[("a.txt", Some("a\n"))]]);
    let script = |s: Scripted| srv.knobs.scripted.lock().unwrap().push(s);
    let url = srv.url("repo.git", Some(&userinfo()));
    let restore = |name: &str| {
        w.run(
            &w.path(name),
            &["restore"],
            &[
                ("READ_URL", url.as_str()),
                ("SESSION_BRANCH", "sessions/t"),
                ("TIP_SHA", ids[0].as_str()),
                ("RUST_LOG", "debug"),
            ],
        )
    };
    let evil = "\x1b[2J\x1b]0;pwned\x07 over\rwritten";
    script(Scripted::once(
        Endpoint::Fetch,
        pkt(&format!("ERR upload-pack: {evil}\n")).into_bytes(),
    ));
    let run = restore("err");
    run.assert_code(5);
    assert_escaped(&run.stderr, "\\x1b[2J\\x1b]0;pwned\\x07 over\\rwritten");

    let mut body = pkt("packfile\n").into_bytes();
    body.extend_from_slice(&band(2, evil.as_bytes()));
    body.extend_from_slice(&band(3, evil.as_bytes()));
    body.extend_from_slice(b"0000");
    script(Scripted::once(Endpoint::Fetch, body));
    let run = restore("band3");
    run.assert_code(5);
    assert_escaped(&run.stderr, "\\x1b[2J\\x1b]0;pwned\\x07 over\\rwritten");

    script(Scripted::once(
        Endpoint::Fetch,
        format!("{}0000", pkt("sec\x1b[31mtion\x07\n")).into_bytes(),
    ));
    let run = restore("section");
    run.assert_code(5);
    assert_escaped(&run.stderr, "sec\\x1b[31mtion\\x07");

    let dir = w.path("p");
    restore("p").assert_code(0);
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    w.git(&dir, &["add", "-A"]);
    w.git(&dir, &["commit", "-qm", "b"]);
    let report = format!(
        "{}{}0000",
        pkt("unpack ok\n"),
        pkt(&format!("ng refs/heads/sessions/t hook declined: {evil}\n"))
    );
    let mut reply = band(2, format!("{evil}\n").as_bytes());
    reply.extend_from_slice(&band(1, report.as_bytes()));
    reply.extend_from_slice(b"0000");
    script(Scripted::once(Endpoint::ReceivePack, reply));
    let run = w.run(
        &dir,
        &["-vv", "push"],
        &[("PUSH_URL", &url), ("RUST_LOG", "debug")],
    );
    run.assert_code(9);
    assert_escaped(&run.stderr, "\\x1b[2J\\x1b]0;pwned\\x07 over\\rwritten");
}

/// `git-session` with raw `args` (bytes that need not be UTF-8) in `cwd`.
fn run_os(w: &crate::support::World, cwd: &Path, args: &[&[u8]]) -> Run {
    std::fs::create_dir_all(cwd).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_git-session"))
        .args(args.iter().map(|a| OsStr::from_bytes(a)))
        .current_dir(cwd)
        .env_clear()
        .envs(w.env())
        .output()
        .unwrap();
    Run::of(&out)
}

/// argv: clap's errors echo it escaped; an argument that is not UTF-8 is exit 2 naming it
/// escaped, never a panic; a commit message with a control character (but a line break or a
/// tab) is exit 2 naming the flag, before anything is committed.
#[test]
fn argv_and_commit_messages_are_held_to_the_rule() {
    let w = crate::support::World::new();
    let dir = w.path("x");
    // clap strips ANSI sequences itself, but shows a CR or a C1 control raw.
    let run = run_os(&w, &dir, &[b"status", b"x\ry\xc2\x9bz"]);
    run.assert_code(2);
    assert_escaped(&run.stderr, "x\\ry\\u{9b}z");

    for args in [
        &[&b"save"[..], b"-m", b"caf\xe9"][..],
        &[b"restore", b"--json", b"--tip-sha", b"\xff\x1b"],
    ] {
        let run = run_os(&w, &dir, args);
        run.assert_code(2);
        assert_escaped(&run.stderr, "\\x");
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }

    for (flag, message, shown) in [
        ("-m", "fix\x1b[31m red", "\\x1b"),
        ("--message", "a\rb\x07", "\\r"),
    ] {
        for command in ["save", "watch"] {
            let mut args = vec![command, flag, message];
            if command == "watch" {
                args.extend(["--every", "1s"]);
            }
            let run = w.run(&dir, &args, &[]);
            run.assert_code(2);
            assert!(run.stderr.contains("--message"), "{}", run.stderr);
            assert!(run.stderr.contains("control character"), "{}", run.stderr);
            assert_escaped(&run.stderr, shown);
        }
    }
}

/// `git credential fill` through git-session's helper, the session URL in `READ_URL`.
fn credential_fill(s: &Setup, read_url: &str) -> Output {
    let url = s.url();
    let host = url.split_once('@').unwrap().1.split('/').next().unwrap();
    let helper = format!("!'{}' credential", env!("CARGO_BIN_EXE_git-session"));
    let mut child = Command::new("git")
        .args(["-c", &format!("credential.helper={helper}")])
        .args(["credential", "fill"])
        .env_clear()
        .envs(s.w.env())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("READ_URL", read_url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    let request =
        format!("protocol=http\nhost={host}\npath=repo.git\nusername=git-session-read\n\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `READ_URL` whose userinfo decodes to a line break or NUL (`%0Aquit=1`, `%0Ahost=`): the
/// helper exits 2 naming the variable and answers nothing, so plain git gets neither the
/// smuggled `quit=1` nor another host (before: both reached git's credential protocol).
#[test]
fn a_url_smuggling_credential_lines_is_refused_and_nothing_answered() {
    let s = Setup::new();
    let good = s.url();
    let out = credential_fill(&s, &good);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("password="),
        "the clean URL is answered: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let base = good.split_once('@').unwrap().1.to_owned();
    for userinfo in [
        "t:TOK%0Aquit=1",
        "t:TOK%0Ahost=evil.example",
        "t:TOK%0D%0Apassword=other",
        "t%00x:TOK",
    ] {
        let hostile = format!("http://{userinfo}@{base}");
        // The helper as git runs it: exit 2 naming READ_URL, nothing on stdout.
        let mut child = Command::new(env!("CARGO_BIN_EXE_git-session"))
            .args(["credential", "get"])
            .env_clear()
            .envs(s.w.env())
            .env("READ_URL", &hostile)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdin.take());
        let helper = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&helper.stderr);
        assert_eq!(helper.status.code(), Some(2), "{userinfo}: {stderr}");
        assert!(
            helper.stdout.is_empty(),
            "{userinfo}: answered {:?}",
            helper.stdout
        );
        assert!(stderr.contains("READ_URL"), "{stderr}");
        // Plain git through the helper: no smuggled key reached it.
        let out = credential_fill(&s, &hostile);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!out.status.success(), "{userinfo}: {stdout}");
        assert!(!stdout.contains("password="), "{userinfo}: {stdout}");
        assert!(!stdout.contains("evil"), "{userinfo}: {stdout}");
        assert!(!stderr.contains("told us to quit"), "{userinfo}: {stderr}");
    }
}

/// Plain git in `dir` with raw `args`, the session URL in the environment.
fn git_os(s: &Setup, dir: &Path, args: &[&[u8]]) -> Output {
    let url = s.url();
    Command::new("git")
        .args(args.iter().map(|a| OsStr::from_bytes(a)))
        .current_dir(dir)
        .env_clear()
        .envs(s.w.env())
        .env("READ_URL", &url)
        .env("PUSH_URL", &url)
        .output()
        .unwrap()
}

/// The pre-push check reads git's ref lines as bytes, fields from the right: a fast-forward
/// pushed from a branch whose name is not UTF-8 goes through (before: refused, the lines were
/// read as UTF-8), and a force push from a branch whose name holds U+00A0 or from a revision
/// typed with spaces is refused (before: the line split into more than 4 fields was skipped,
/// and the force push went through).
#[test]
fn the_pre_push_check_reads_every_ref_line_git_writes() {
    let s = Setup::new();
    let branch = "sessions/text";
    let full = format!("refs/heads/{branch}");
    s.w.git(&s.bare(), &["branch", branch, &s.ids[1]]);
    let a = s.sandbox("a", branch, &s.ids[1]);
    // A fast-forward from a branch named in Latin-1 bytes.
    let c1 = s.commit(&a, "f", "1\n");
    git_os(&s, &a, &[b"branch", b"caf\xe9", c1.as_bytes()]);
    let out = git_os(
        &s,
        &a,
        &[
            b"push",
            b"-q",
            b"origin",
            &[&b"refs/heads/caf\xe9:"[..], full.as_bytes()].concat(),
        ],
    );
    assert!(
        out.status.success(),
        "a fast-forward was refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.remote(branch).as_deref(), Some(c1.as_str()));

    // A rewritten commit, force-pushed under names git-session used to skip.
    s.w.git(&a, &["reset", "-q", "--hard", &s.ids[1]]);
    let forced = s.commit(&a, "g", "rewritten work\n");
    git_os(
        &s,
        &a,
        &[b"branch", "a\u{a0}b".as_bytes(), forced.as_bytes()],
    );
    for src in [
        "refs/heads/a\u{a0}b".to_owned(),
        "HEAD^{/edit g}".to_owned(),
        forced.clone(),
    ] {
        let refspec = format!("+{src}:{full}");
        let out = git_os(&s, &a, &[b"push", b"-q", b"origin", refspec.as_bytes()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{src:?}: the force push went through"
        );
        assert!(stderr.contains("not a fast-forward"), "{src:?}: {stderr}");
        assert_eq!(s.remote(branch).as_deref(), Some(c1.as_str()), "{src:?}");
    }
}
