//! A server that answers the `ls-refs` posted without the capability advertisement (issue 43)
//! with something that looks like protocol v2 but is not what was asked: the boot never takes it
//! for the remote's word on the session branch (a wrong lease makes the session's first `save`
//! fail with exit 3), falls back at the cost of one request, checks out `TIP_SHA` and nothing
//! else, and shows the server's words escaped.

use crate::support::wire::pkt;
use crate::support::{Endpoint, GitServer, Run, Scripted, World, served_repo, userinfo};

/// A served `repo.git` whose `sessions/h` is at its last commit.
struct Liar {
    w: World,
    srv: GitServer,
    tip: String,
}

impl Liar {
    fn new() -> Self {
        let (w, srv, ids) = served_repo(&[&[("a.txt", Some("a\n"))], &[("b.txt", Some("b\n"))]]);
        let tip = ids[1].clone();
        let bare = w.srv().join("repo.git");
        w.git(&bare, &["update-ref", "refs/heads/sessions/h", &tip]);
        Liar { w, srv, tip }
    }

    /// Answer the next posted `ls-refs` with `body` (HTTP 200, upload-pack's result type).
    fn lie_once(&self, body: Vec<u8>) {
        let mut scripts = self.srv.knobs.scripted.lock().unwrap();
        scripts.clear();
        scripts.push(Scripted::once(Endpoint::LsRefs, body));
    }

    fn restore(&self, case: &str, extra_args: &[&str]) -> Run {
        let url = self.srv.url("repo.git", Some(&userinfo()));
        let mut args = extra_args.to_vec();
        args.extend(["restore", "--json"]);
        self.srv.clear_log();
        self.w.run(
            &self.w.path(case),
            &args,
            &[
                ("READ_URL", url.as_str()),
                ("SESSION_BRANCH", "sessions/h"),
                ("TIP_SHA", self.tip.as_str()),
                ("RUST_LOG", "debug"),
                ("GIT_SESSION_RETRY_BASE_MS", "10"),
            ],
        )
    }

    /// The restore of `case` checked out `TIP_SHA` with the remote branch as the lease (the
    /// tracking ref written), after the handshake the lie called for.
    fn assert_leased_after_the_handshake(&self, case: &str, run: &Run) {
        run.assert_code(0);
        let dir = self.w.path(case);
        assert_eq!(self.w.git(&dir, &["rev-parse", "HEAD"]), self.tip, "{case}");
        assert_eq!(
            run.json()["lease"],
            self.tip.as_str(),
            "{case}: the remote branch is at TIP_SHA, the lease must say so: {}",
            run.stdout
        );
        assert_eq!(
            self.w
                .git(&dir, &["rev-parse", "refs/remotes/origin/sessions/h"]),
            self.tip,
            "{case}"
        );
        // The posted ls-refs first, then the handshake's path (its ls-refs and fetch in any
        // order): one request more than the handshake alone.
        let mut requests = self.srv.requests();
        assert_eq!(
            requests.first().map(String::as_str),
            Some("ls-refs"),
            "{case}"
        );
        requests.sort();
        assert_eq!(
            requests,
            ["fetch", "info/refs", "ls-refs", "ls-refs"],
            "{case}: one request more than the handshake alone"
        );
    }
}

/// A v0/v1 ref advertisement in the body of the answer to the posted `ls-refs` (a server, or
/// something in front of it, answering every upload-pack request with it), and an answer of
/// `ls-refs` lines in the other object format naming other branches only, a delimiter or
/// response-end packet where the flush belongs: none is a v2 answer for this repository, so none
/// may say "no such branch" (lease zero). All were taken as "no such branch": the lease was the
/// zero id and the session's first `save` a create that the server refuses (exit 3).
#[test]
fn answers_that_are_not_v2_ls_refs_are_not_an_absent_branch() {
    let l = Liar::new();
    let flush = b"0000".to_vec();
    // A smart-HTTP v0 advertisement, service line first.
    let mut v0 = pkt("# service=git-upload-pack\n").into_bytes();
    v0.extend(&flush);
    v0.extend(
        pkt(&format!(
            "{} HEAD\0multi_ack thin-pack side-band-64k ofs-delta shallow no-progress\n",
            l.tip
        ))
        .into_bytes(),
    );
    v0.extend(pkt(&format!("{} refs/heads/main\n", l.tip)).into_bytes());
    v0.extend(&flush);
    // ls-refs lines of the other format (a SHA-256 server to a SHA-1 boot, or the reverse),
    // naming other branches.
    let other_len = if crate::support::hex_len() == 64 {
        40
    } else {
        64
    };
    let other = "ab".repeat(other_len / 2);
    let mut wrong_format = pkt(&format!("{other} refs/heads/sessions/h-old\n")).into_bytes();
    wrong_format.extend(&flush);
    // A v2 delimiter or response-end packet where the flush ending an ls-refs answer belongs.
    let delim = b"0001".to_vec();
    let response_end = b"0002".to_vec();
    for (case, body) in [
        ("v0", v0),
        ("format", wrong_format),
        ("delim", delim),
        ("response-end", response_end),
    ] {
        l.lie_once(body);
        let run = l.restore(case, &[]);
        l.assert_leased_after_the_handshake(case, &run);
    }
}

/// An `ERR` line with terminal escapes (a title change, a colour, a bell, a cursor move) in the
/// answer to the posted `ls-refs`, echoing the token: the fallback's log line at `-vv` shows them
/// escaped, never raw, and the token redacted.
#[test]
fn an_err_line_with_terminal_escapes_is_shown_escaped() {
    let l = Liar::new();
    // With the token echoed (the harness checks every output for it).
    let evil = format!(
        "ERR \x1b]0;owned\x07\x1b[31mred\x1b[2J\x1b[H\x08 you sent {}\r\n",
        crate::support::TOKEN
    );
    l.lie_once(pkt(&evil).into_bytes());
    let run = l.restore("err", &["-vv"]);
    l.assert_leased_after_the_handshake("err", &run);
    for (name, out) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(
            !out.contains('\x1b') && !out.contains('\x07') && !out.contains('\x08'),
            "{name}: {out:?}"
        );
    }
    assert!(
        run.stderr.contains("owned"),
        "the fallback is logged: {}",
        run.stderr
    );
}

/// The posted `ls-refs` answered as v2 (the branch at `TIP_SHA`), then the fetch refused for the
/// credential: exit 4 after two requests, the token nowhere in the output; answered with a
/// redirect: exit 5 naming it, not followed.
#[test]
fn a_v2_answer_then_a_401_or_a_redirect_on_the_fetch_is_no_checkout() {
    let l = Liar::new();
    // The tip of a child commit makes the boot fetch.
    for (status, code) in [(401, 4), (302, 5), (307, 5)] {
        let mut s = Scripted::once(Endpoint::Fetch, Vec::new());
        s.status = status;
        s.times = 10;
        {
            let mut scripts = l.srv.knobs.scripted.lock().unwrap();
            scripts.clear();
            scripts.push(s);
        }
        let case = format!("s{status}");
        let run = l.restore(&case, &[]);
        run.assert_code(code);
        crate::support::assert_no_secret("stdout", run.stdout.as_bytes());
        crate::support::assert_no_secret("stderr", run.stderr.as_bytes());
        let dir = l.w.path(&case);
        assert!(
            !dir.join("a.txt").exists(),
            "{case}: nothing checked out: {}",
            run.stdout
        );
    }
}

/// An overloaded server (429, 502, 503, 504: what a proxy or a server under a fleet's boots
/// answers) refusing the posted `ls-refs` is the network's, as the posted request's documentation
/// says: the retry posts it again after the backoff. It was taken for a server that does not speak
/// v2 (as Dulwich's 500 is): the handshake sent at once, without a backoff, to a server that had
/// just said it was overloaded, and every later step of the boot on the slower path (4 requests
/// where 3 do).
#[test]
fn an_overloaded_server_s_refusal_of_the_posted_ls_refs_is_retried_as_posted() {
    let l = Liar::new();
    for status in [429, 502, 503, 504] {
        let mut s = Scripted::once(Endpoint::LsRefs, b"busy, try later\n".to_vec());
        s.status = status;
        s.content_type = "text/plain";
        {
            let mut scripts = l.srv.knobs.scripted.lock().unwrap();
            scripts.clear();
            scripts.push(s);
        }
        let case = format!("s{status}");
        let run = l.restore(&case, &[]);
        run.assert_code(0);
        assert_eq!(run.json()["lease"], l.tip.as_str(), "{case}");
        assert_eq!(
            l.srv.requests(),
            ["ls-refs", "ls-refs", "fetch"],
            "{case}: posted again, no handshake"
        );
    }
}
