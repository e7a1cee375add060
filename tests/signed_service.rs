//! `save` and `watch` signing through a signing service (`SIGNING_URL`, `SIGNING_URL_FILE`,
//! `SIGNING_PUBLIC_KEY`): the reference service (`examples/signing-service.py`) on 127.0.0.1
//! signs with the real `ssh-keygen`, `git verify-commit` judges the pushed commits, and each
//! hostile version of the service (garbage, another key, other bytes, a stall, HTTP 500, an
//! endless answer, a refused token) ends the save with exit 11 and nothing committed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::push::Setup;
use crate::support::keys::{allowed_signers, keygen, public_line, verify_commit};
use crate::support::signing_service::SigningService;
use crate::support::watch::Watch;
use crate::support::{Run, TOKEN, assert_matches_schema};

const BRANCH: &str = "sessions/service";

/// A restored sandbox with an edit to save, and a key of `kind` for the service.
struct Sandbox {
    s: Setup,
    dir: PathBuf,
    key: PathBuf,
}

impl Sandbox {
    fn new(kind: &str) -> Self {
        let s = Setup::new();
        let dir = s.sandbox("sandbox", BRANCH, s.ids.last().unwrap());
        let key = keygen(&s.w.path("keys"), kind, &format!("service-{kind}"));
        std::fs::write(dir.join("README.md"), "edited by the agent\n").unwrap();
        Sandbox { s, dir, key }
    }

    /// The service in `mode`, below the world's folder `name`.
    fn service(&self, name: &str, mode: &str, extra: &[&str]) -> SigningService {
        SigningService::start(&self.s.w.path(name), &self.key, mode, extra)
    }

    /// `save --json` with `PUSH_URL`, `SIGNING_PUBLIC_KEY` (the service key's) and `vars`.
    fn save(&self, vars: &[(&str, &str)]) -> Run {
        let url = self.s.url();
        let public = public_line(&self.key);
        let mut all = vec![
            ("PUSH_URL", url.as_str()),
            ("SIGNING_PUBLIC_KEY", public.as_str()),
        ];
        all.extend_from_slice(vars);
        self.s.w.run(
            &self.dir,
            &["save", "-m", "Signed by the service", "--json"],
            &all,
        )
    }

    fn head(&self) -> String {
        self.s.w.git(&self.dir, &["rev-parse", "HEAD"])
    }

    /// `git verify-commit` of `commit` on the server against the service's key.
    #[track_caller]
    fn assert_verified(&self, commit: &str) {
        let allowed = allowed_signers(&self.s.w.path("keys"), &[&self.key]);
        let (ok, words) = verify_commit(&self.s.w, &self.s.bare(), &allowed, commit);
        assert!(ok, "git verify-commit refused {commit}: {words}");
        assert!(words.contains("Good \"git\" signature"), "{words}");
    }

    /// Nothing was committed or pushed, and the edit is still in the tree.
    #[track_caller]
    fn assert_nothing_committed(&self, case: &str, head: &str) {
        assert_eq!(self.head(), head, "{case}: HEAD moved");
        assert_eq!(
            self.s.remote(BRANCH),
            None,
            "{case}: the branch reached the server"
        );
        let status = self.s.w.git(&self.dir, &["status", "--porcelain"]);
        assert!(
            status.contains("README.md"),
            "{case}: the edit is gone: {status}"
        );
    }
}

/// `ssh-keygen -l`'s `SHA256:…` fingerprint of the key file `key`.
fn fingerprint(key: &Path) -> String {
    let out = std::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg(key.with_extension("pub"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace().nth(1).unwrap().to_owned()
}

#[test]
fn save_with_the_service_pushes_a_commit_git_verify_commit_accepts() {
    for (kind, type_name) in [("ed25519", "ED25519"), ("rsa", "RSA")] {
        let sb = Sandbox::new(kind);
        let service = sb.service("service", "sign", &[]);
        let run = sb.save(&[("SIGNING_URL", &service.url())]);
        run.assert_code(0);
        let j = run.json();
        assert_matches_schema(&j);
        let commit = j["commit"].as_str().unwrap().to_owned();
        assert_eq!(
            sb.s.remote(BRANCH).as_deref(),
            Some(commit.as_str()),
            "{kind}"
        );
        sb.assert_verified(&commit);
        assert_eq!(j["signed"], true, "{j}");
        assert_eq!(
            j["signing_key"],
            format!("{type_name} {}", fingerprint(&sb.key)),
            "{j}"
        );
        assert_eq!(
            service.requests(),
            ["POST /sign 200"],
            "{kind}: one request per signature"
        );
        // The header git reads: `gpgsig-sha256` in a SHA-256 repository.
        let header = if crate::support::object_format() == "sha256" {
            "gpgsig-sha256 -----BEGIN SSH SIGNATURE-----"
        } else {
            "gpgsig -----BEGIN SSH SIGNATURE-----"
        };
        let object = sb.s.w.git(&sb.s.bare(), &["cat-file", "commit", &commit]);
        assert!(object.contains(header), "{object}");
    }
}

#[test]
fn an_unsigned_save_says_signed_false() {
    let sb = Sandbox::new("ed25519");
    let url = sb.s.url();
    let run = sb.s.w.run(
        &sb.dir,
        &["save", "-m", "Unsigned", "--json"],
        &[("PUSH_URL", &url)],
    );
    run.assert_code(0);
    let j = run.json();
    assert_matches_schema(&j);
    assert_eq!(j["signed"], false, "{j}");
    assert!(j.get("signing_key").is_none(), "{j}");
}

/// A hostile mode of the service, what the refusal says, the requests it gets.
struct Hostile<'a> {
    mode: &'a str,
    extra: &'a [&'a str],
    words: &'a [&'a str],
    requests: &'a [&'a str],
}

/// Each hostile service: exit 11, kind `signing`, the message naming the variable and the cause,
/// nothing committed, the requests it got.
#[test]
fn a_hostile_service_commits_nothing_and_exits_11() {
    let sb = Sandbox::new("ed25519");
    let other = keygen(&sb.s.w.path("other"), "ed25519", "other");
    let other = other.to_str().unwrap().to_owned();
    let other_key = ["--other-key", other.as_str()];
    let head = sb.head();
    let case = |mode, extra, words, requests| Hostile {
        mode,
        extra,
        words,
        requests,
    };
    let cases = [
        case(
            "garbage",
            &[],
            &[
                "SIGNING_PUBLIC_KEY",
                "is not an SSH signature",
                "SIGNING_URL",
            ],
            &["POST /sign 200"],
        ),
        case(
            "other-key",
            &other_key,
            &["made by another key", "SIGNING_PUBLIC_KEY", "SIGNING_URL"],
            &["POST /sign 200"],
        ),
        case(
            "other-bytes",
            &[],
            &["does not verify", "SIGNING_PUBLIC_KEY", "SIGNING_URL"],
            &["POST /sign 200"],
        ),
        case(
            "500",
            &[],
            &["signing service (SIGNING_URL)", "HTTP 500", "4 requests"],
            &["POST /sign 500"; 4],
        ),
        case(
            "huge",
            &[],
            &["signing service (SIGNING_URL)", "more than 65536 bytes"],
            &["POST /sign 200"],
        ),
        // Refused by its Content-Length: the bytes it announces never come.
        case(
            "huge-length",
            &[],
            &["signing service (SIGNING_URL)", "more than 65536 bytes"],
            &["POST /sign 200"],
        ),
    ];
    for Hostile {
        mode,
        extra,
        words,
        requests,
    } in cases
    {
        let service = sb.service(&format!("service-{mode}"), mode, extra);
        let run = sb.save(&[("SIGNING_URL", &service.url())]);
        run.assert_case_says(mode, 11, words);
        let j = run.json();
        assert_matches_schema(&j);
        assert_eq!(j["error"]["kind"], "signing", "{mode}: {j}");
        for word in words {
            assert!(
                j["error"]["message"].as_str().unwrap().contains(word),
                "{mode}: {j}"
            );
        }
        sb.assert_nothing_committed(mode, &head);
        assert_eq!(service.requests(), requests, "{mode}");
    }
}

#[test]
fn a_stalled_service_ends_within_the_read_timeout() {
    let sb = Sandbox::new("ed25519");
    let head = sb.head();
    let service = sb.service("service", "stall", &[]);
    let (url, public) = (sb.s.url(), public_line(&sb.key));
    let started = Instant::now();
    let run =
        sb.s.w
            .run_limited(
                &sb.dir,
                &["save", "-m", "Stalled", "--json"],
                &[
                    ("PUSH_URL", &url),
                    ("SIGNING_PUBLIC_KEY", &public),
                    ("SIGNING_URL", &service.url()),
                    ("GIT_SESSION_READ_TIMEOUT_MS", "1000"),
                    ("GIT_SESSION_RETRY_TOTAL_MS", "3000"),
                    ("GIT_SESSION_RETRY_BASE_MS", "5"),
                ],
                Duration::from_secs(60),
            )
            .expect("a save against a stalled signing service did not end within 60 s");
    let took = started.elapsed();
    run.assert_says(
        11,
        &[
            "signing service (SIGNING_URL)",
            "gave no signature in time",
            "GIT_SESSION_",
        ],
    );
    assert_eq!(run.json()["error"]["kind"], "signing");
    // Each attempt ends after 1 s, all of them within the 3 s budget: 20 s is scheduling slack.
    assert!(took < Duration::from_secs(20), "took {took:?}");
    sb.assert_nothing_committed("stall", &head);
    assert!(
        (1..=4).contains(&service.requests().len()),
        "{:?}",
        service.requests()
    );
}

#[test]
fn a_refused_token_in_signing_url_file_is_re_read_once_and_the_rotated_one_signs() {
    const OLD: &str = "0ld-t0ken-Rotated+/=x";
    let sb = Sandbox::new("ed25519");
    let url_file = sb.s.w.path("signing-url");
    let service = sb.service(
        "service",
        "401-then-rotate",
        &["--rotate-url-file", url_file.to_str().unwrap()],
    );
    let old_url = format!("{}\n", service.url_with(OLD));
    std::fs::write(&url_file, &old_url).unwrap();
    let run = sb.save(&[("SIGNING_URL_FILE", url_file.to_str().unwrap())]);
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(!text.contains(OLD), "{stream} shows the old token: {text}");
    }
    run.assert_code(0);
    assert_eq!(
        service.requests(),
        ["POST /sign 401", "POST /sign 200"],
        "exactly one retry, with the rotated URL"
    );
    assert_ne!(
        crate::support::read_text(&url_file),
        old_url,
        "the service rotated it"
    );
    let commit = run.json()["commit"].as_str().unwrap().to_owned();
    sb.assert_verified(&commit);
}

#[test]
fn a_refused_token_in_signing_url_is_exit_11_after_one_request() {
    let sb = Sandbox::new("ed25519");
    let head = sb.head();
    let service = sb.service("service", "sign", &[]);
    let run = sb.save(&[("SIGNING_URL", &service.url_with("not-the-token"))]);
    run.assert_says(11, &["signing service (SIGNING_URL)", "HTTP 401"]);
    assert_eq!(service.requests(), ["POST /sign 401"], "no file to re-read");
    sb.assert_nothing_committed("401", &head);
}

#[test]
fn an_unreachable_service_is_exit_11_naming_the_variable() {
    let sb = Sandbox::new("ed25519");
    let head = sb.head();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!(
        "http://t:{}@127.0.0.1:{port}/sign",
        crate::support::pct(TOKEN)
    );
    let run = sb.save(&[("SIGNING_URL", &url)]);
    run.assert_says(
        11,
        &["signing service (SIGNING_URL)", "could not be reached"],
    );
    sb.assert_nothing_committed("unreachable", &head);
}

/// A service whose TLS certificate is refused (it chains to a CA this machine does not trust):
/// exit 11 after one attempt, naming GIT_SSL_CAINFO (it was retried as a network failure).
#[test]
fn a_service_whose_certificate_is_refused_is_exit_11_without_retries() {
    let sb = Sandbox::new("ed25519");
    let head = sb.head();
    let ca = crate::support::TestCa::new();
    let tls = crate::support::GitServer::start_tls(&sb.s.w.path("tls"), None, &ca);
    let url = tls.url("sign", Some(&format!("t:{}", crate::support::pct(TOKEN))));
    let run = sb.save(&[("SIGNING_URL", &url)]);
    run.assert_says(
        11,
        &[
            "signing service (SIGNING_URL)",
            "TLS certificate of https://localhost:",
            "GIT_SSL_CAINFO",
        ],
    );
    assert!(!run.stderr.contains("requests in"), "{}", run.stderr);
    sb.assert_nothing_committed("certificate", &head);
}

#[test]
fn a_service_without_its_public_key_or_beside_a_key_file_is_refused_before_anything() {
    let sb = Sandbox::new("ed25519");
    let head = sb.head();
    let service = sb.service("service", "sign", &[]);
    let url = sb.s.url();
    let run = sb.s.w.run(
        &sb.dir,
        &["save", "-m", "No public key", "--json"],
        &[("PUSH_URL", &url), ("SIGNING_URL", &service.url())],
    );
    run.assert_says(11, &["needs SIGNING_PUBLIC_KEY"]);
    assert_eq!(run.json()["error"]["kind"], "signing");
    sb.assert_nothing_committed("no public key", &head);

    let run = sb.save(&[
        ("SIGNING_URL", &service.url()),
        ("SIGNING_KEY_FILE", sb.key.to_str().unwrap()),
    ]);
    run.assert_says(11, &["SIGNING_KEY_FILE and SIGNING_URL", "both set"]);
    sb.assert_nothing_committed("two sources", &head);
    assert_eq!(
        service.requests(),
        Vec::<String>::new(),
        "nothing was asked"
    );
}

/// The service's token is a session secret: `save` refuses a file holding it (exit 6, the service
/// never asked), whether `SIGNING_URL` or `SIGNING_URL_FILE` gave it. Before, the file was
/// committed, signed and pushed.
#[test]
fn a_file_holding_the_service_token_is_refused_before_signing() {
    const SERVICE_TOKEN: &str = "s1gning-Service-t0ken";
    let sb = Sandbox::new("ed25519");
    let head = sb.head();
    let service = sb.service("service", "sign", &[]);
    std::fs::write(service.token_file.as_path(), SERVICE_TOKEN).unwrap();
    let url = service.url_with(SERVICE_TOKEN);
    let url_file = sb.s.w.path("signing-url");
    std::fs::write(&url_file, &url).unwrap();
    std::fs::write(sb.dir.join("leak.txt"), format!("{SERVICE_TOKEN}\n")).unwrap();
    for (var, value) in [
        ("SIGNING_URL", url.as_str()),
        ("SIGNING_URL_FILE", url_file.to_str().unwrap()),
    ] {
        let run = sb.save(&[(var, value)]);
        run.assert_says(6, &["leak.txt"]);
        assert!(!run.stderr.contains(SERVICE_TOKEN), "{var}: {}", run.stderr);
        assert!(!run.stdout.contains(SERVICE_TOKEN), "{var}: {}", run.stdout);
        sb.assert_nothing_committed(var, &head);
    }
    assert_eq!(
        service.requests(),
        Vec::<String>::new(),
        "nothing was signed"
    );
}

#[test]
fn watch_checkpoints_are_signed_by_the_service() {
    let sb = Sandbox::new("ed25519");
    let service = sb.service("service", "sign", &[]);
    let (url, public) = (service.url(), public_line(&sb.key));
    let vars = [
        ("SIGNING_URL", url.as_str()),
        ("SIGNING_PUBLIC_KEY", public.as_str()),
    ];
    let mut watch = Watch::start_with(&sb.s.w, &sb.dir, &["--every", "300ms"], &sb.s.url(), &vars);
    let mut next = |what: &str| {
        watch
            .next(20)
            .unwrap_or_else(|| panic!("no checkpoint for {what} within 20 s"))
    };
    // The edit made before it started, then a second one.
    let first = next("the first edit");
    std::fs::write(sb.dir.join("notes.md"), "more work\n").unwrap();
    let second = next("the second edit");
    watch.signal("-TERM");
    watch.wait(20);
    for j in [&first, &second] {
        assert_eq!(j["ok"], true, "{j}");
        assert_eq!(j["signed"], true, "{j}");
        assert_eq!(
            j["signing_key"],
            format!("ED25519 {}", fingerprint(&sb.key)),
            "{j}"
        );
        sb.assert_verified(j["commit"].as_str().unwrap());
    }
    assert_eq!(
        sb.s.remote(BRANCH).as_deref(),
        second["commit"].as_str(),
        "the second checkpoint was pushed"
    );
    assert_eq!(
        service.requests(),
        ["POST /sign 200"; 2],
        "one request per checkpoint"
    );
}

crate::sha256_too!(save_with_the_service_pushes_a_commit_git_verify_commit_accepts);
