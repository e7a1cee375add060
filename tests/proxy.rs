//! Networks people have: a proxy from the environment (a real squid from Debian on 127.0.0.1,
//! with Basic proxy auth, plain or over TLS with its own CA) in front of a TLS git server with a
//! private CA; restore, save, LFS and plain git through the credential helper all go through it;
//! a dead or refusing proxy is named as the proxy, never as the git server; git's own
//! `GIT_SSL_CAINFO` is honoured. The proxy's password is a secret like the token (see
//! `support::PROXY_PASSWORD`): every run's output is searched for it.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::lfs::{Giftless, lfs_repo};
use crate::support::squid::{PROXY_USER, Squid};
use crate::support::{
    GitServer, PROXY_PASSWORD, Run, TOKEN, TestCa, World, assert_no_secret,
    assert_no_secret_in_files, incompressible, pct, userinfo,
};

const BRANCH: &str = "sessions/proxy";

/// `ca`'s certificate in a file of the world's.
fn ca_file(w: &World, name: &str, ca: &TestCa) -> String {
    let path = w.tmp.path().join(name);
    std::fs::write(&path, &ca.ca_pem).unwrap();
    path.display().to_string()
}

/// The userinfo the proxy wants, percent-encoded.
fn proxy_userinfo() -> String {
    format!("{PROXY_USER}:{}", pct(PROXY_PASSWORD))
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn restore(w: &World, dir: &Path, url: &str, tip: &str, vars: &[(&str, &str)]) -> Run {
    let mut all = vec![("GIT_SESSION_RETRY_BASE_MS", "20")];
    all.extend_from_slice(vars);
    w.restore_with(dir, url, BRANCH, tip, &["--json"], &all)
}

/// Plain git in `dir` with the world's environment and `vars`; its output checked for secrets.
fn plain_git(w: &World, dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_git-session"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .envs(w.env())
        .env("PATH", path)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    assert_no_secret("git stdout", &out.stdout);
    assert_no_secret("git stderr", &out.stderr);
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_dead_proxy_is_named_as_the_proxy_not_as_the_git_server() {
    let w = World::new();
    let ids = w.repo("repo.git", &[&[("a.txt", Some("a\n"))]]);
    let ca = TestCa::new();
    let ca_pem = ca_file(&w, "ca.pem", &ca);
    let tls = GitServer::start_tls(&w.srv(), Some(TOKEN), &ca);
    let plain = GitServer::start(&w.srv(), Some(TOKEN));
    let port = dead_port();
    let proxy = format!("http://{}@127.0.0.1:{port}", proxy_userinfo());
    for (var, srv) in [("HTTPS_PROXY", &tls), ("http_proxy", &plain)] {
        let url = srv.url("repo.git", Some(&userinfo()));
        let run = restore(
            &w,
            &w.path(var),
            &url,
            &ids[0],
            &[("NO_PROXY", ""), (var, &proxy), ("SSL_CERT_FILE", &ca_pem)],
        );
        run.assert_code(5);
        let msg = run.error_message();
        assert!(
            msg.contains(&format!(
                "could not connect to the proxy http://127.0.0.1:{port} (from {var})"
            )),
            "{var}: {msg}"
        );
        assert!(
            srv.log().is_empty(),
            "{var}: the git server was reached: {msg}"
        );
    }
    // NO_PROXY names the server: it is reached directly, the dead proxy never tried.
    let url = tls.url("repo.git", Some(&userinfo()));
    let vars = [
        ("NO_PROXY", "example.com, localhost"),
        ("HTTPS_PROXY", proxy.as_str()),
        ("SSL_CERT_FILE", ca_pem.as_str()),
    ];
    restore(&w, &w.path("direct"), &url, &ids[0], &vars).assert_code(0);
    // A proxy git-session cannot speak to: refused at once, the variable named, not its value.
    let socks = format!("socks5://{}@127.0.0.1:{port}", proxy_userinfo());
    let run = restore(
        &w,
        &w.path("socks"),
        &url,
        &ids[0],
        &[
            ("NO_PROXY", ""),
            ("HTTPS_PROXY", &socks),
            ("SSL_CERT_FILE", &ca_pem),
        ],
    );
    run.assert_code(2);
    assert!(
        run.error_message().contains("HTTPS_PROXY"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_proxy_that_accepts_and_never_answers_is_named_too() {
    let w = World::new();
    let ids = w.repo("repo.git", &[&[("a.txt", Some("a\n"))]]);
    let ca = TestCa::new();
    let ca_pem = ca_file(&w, "ca.pem", &ca);
    let tls = GitServer::start_tls(&w.srv(), Some(TOKEN), &ca);
    let plain = GitServer::start(&w.srv(), Some(TOKEN));
    // Connections accepted and held, never a byte answered (the thread ends with the test binary).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming().flatten() {
            held.push(conn);
        }
    });
    let proxy = format!("http://{}@127.0.0.1:{port}", proxy_userinfo());
    for (var, srv) in [("HTTPS_PROXY", &tls), ("HTTP_PROXY", &plain)] {
        let run = restore(
            &w,
            &w.path(var),
            &srv.url("repo.git", Some(&userinfo())),
            &ids[0],
            &[
                ("NO_PROXY", ""),
                (var, &proxy),
                ("SSL_CERT_FILE", &ca_pem),
                ("GIT_SESSION_CONNECT_TIMEOUT_MS", "500"),
                ("GIT_SESSION_READ_TIMEOUT_MS", "500"),
                ("GIT_SESSION_RETRY_TOTAL_MS", "1500"),
            ],
        );
        run.assert_code(5);
        let msg = run.error_message();
        assert!(
            msg.contains(&format!("proxy http://127.0.0.1:{port} (from {var})")),
            "{var}: {msg}"
        );
        assert!(srv.log().is_empty(), "{var}: {msg}");
    }
}

#[test]
fn git_ssl_cainfo_is_honoured_as_ssl_cert_file_is() {
    let w = World::new();
    let ids = w.repo("repo.git", &[&[("a.txt", Some("a\n"))]]);
    let ca = TestCa::new();
    let ca_pem = ca_file(&w, "ca.pem", &ca);
    let srv = GitServer::start_tls(&w.srv(), Some(TOKEN), &ca);
    let url = srv.url("repo.git", Some(&userinfo()));
    let dir = w.path("s");
    restore(&w, &dir, &url, &ids[0], &[("GIT_SSL_CAINFO", &ca_pem)]).assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), ids[0]);
    // Another CA there: the server is not trusted (exit 5, as with SSL_CERT_FILE).
    let other = ca_file(&w, "other.pem", &TestCa::new());
    let run = restore(
        &w,
        &w.path("t"),
        &url,
        &ids[0],
        &[("GIT_SSL_CAINFO", &other)],
    );
    run.assert_code(5);
    assert!(
        run.error_message().contains("certificate"),
        "{}",
        run.stderr
    );
    // A file git could not use either: refused at the first handshake (before any request is
    // sent; git too reads it only for https://), naming the variable.
    let missing = w.tmp.path().join("missing.pem").display().to_string();
    let run = restore(
        &w,
        &w.path("u"),
        &url,
        &ids[0],
        &[("GIT_SSL_CAINFO", &missing)],
    );
    run.assert_code(2);
    assert!(
        run.error_message().contains("GIT_SSL_CAINFO"),
        "{}",
        run.stderr
    );
}

/// A TLS git server with a private CA holding an LFS repository whose objects are on giftless
/// (plain http), both reached only through `squid`.
struct Behind {
    w: World,
    lfs: Giftless,
    srv: GitServer,
    tip: String,
    lfs_data: Vec<u8>,
    ca_pem: String,
}

impl Behind {
    fn new() -> Self {
        let w = World::new();
        let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
        let mut seed = 5;
        let lfs_data = incompressible(50_000, &mut seed);
        let (scratch, _) = lfs_repo(
            &w,
            "lfs-scratch",
            &lfs.url("org/repo"),
            &[("big.bin", &lfs_data), ("README.md", b"plain\n")],
        );
        let tip = w.git(&scratch, &["rev-parse", "HEAD"]);
        w.serve_scratch(&scratch, "repo.git");
        let ca = TestCa::new();
        let ca_pem = ca_file(&w, "git-ca.pem", &ca);
        let srv = GitServer::start_tls(&w.srv(), Some(TOKEN), &ca);
        Behind {
            w,
            lfs,
            srv,
            tip,
            lfs_data,
            ca_pem,
        }
    }

    fn url(&self) -> String {
        self.srv.url("repo.git", Some(&userinfo()))
    }
}

#[test]
fn restore_save_lfs_and_plain_git_go_through_a_proxy_with_credentials() {
    let b = Behind::new();
    let w = &b.w;
    let squid = Squid::start(Some(PROXY_PASSWORD), None);
    let proxy = squid.url(Some(&proxy_userinfo()));
    // As a template sets them: git's CA variable only, the proxy for both schemes, lower-case
    // as curl reads them.
    let net = [
        ("NO_PROXY", ""),
        ("https_proxy", proxy.as_str()),
        ("http_proxy", proxy.as_str()),
        ("GIT_SSL_CAINFO", b.ca_pem.as_str()),
    ];
    let dir = w.path("s");
    let url = b.url();
    // With every log on: the proxy's password shows in none (every run's output is searched).
    let logged = [&net[..], &[("RUST_LOG", "trace")]].concat();
    let run = restore(w, &dir, &url, &b.tip, &logged);
    run.assert_code(0);
    assert_eq!(run.json()["lfs_files"], 1);
    assert_eq!(std::fs::read(dir.join("big.bin")).unwrap(), b.lfs_data);
    let git_port = b.srv.addr.port();
    let log = squid.access_log_with(&format!("CONNECT localhost:{git_port} {PROXY_USER} "));
    assert!(
        log.contains(&format!("CONNECT localhost:{git_port} {PROXY_USER} ")),
        "the git server was not reached through the proxy:\n{log}"
    );
    assert!(
        log.contains(&format!("POST {}", b.lfs.url("org/repo"))),
        "the LFS server was not reached through the proxy:\n{log}"
    );
    // save: an LFS object uploaded and the commit pushed, through the proxy.
    let mut seed = 11;
    let changed = incompressible(40_000, &mut seed);
    std::fs::write(dir.join("big.bin"), &changed).unwrap();
    std::fs::write(dir.join("notes.txt"), "by the agent\n").unwrap();
    let vars: Vec<(&str, &str)> = [("PUSH_URL", url.as_str())]
        .into_iter()
        .chain(net)
        .collect();
    let run = w.run(&dir, &["save", "-m", "through the proxy", "--json"], &vars);
    run.assert_code(0);
    let bare = w.srv().join("repo.git");
    let saved = run.json()["tip"].as_str().unwrap().to_owned();
    assert_eq!(w.git(&bare, &["rev-parse", BRANCH]), saved);
    let id = crate::support::lfs::oid(&changed);
    assert_eq!(
        std::fs::read(b.lfs.store.join("org/repo").join(&id)).unwrap(),
        changed
    );
    let log = squid.access_log_with(&format!("PUT {}", b.lfs.url("org/repo")));
    assert!(
        log.contains(&format!("PUT {}", b.lfs.url("org/repo"))),
        "{log}"
    );
    // Plain git in the tree: its own proxy and CA settings (the same variables), the credential
    // helper for the token, the pre-push check (git-session again) through the proxy too.
    std::fs::write(dir.join("notes.txt"), "by a person\n").unwrap();
    w.git(&dir, &["commit", "-qam", "by a person"]);
    plain_git(w, &dir, &["push", "-q", "origin", "HEAD"], &vars);
    assert_eq!(
        w.git(&bare, &["rev-parse", BRANCH]),
        w.git(&dir, &["rev-parse", "HEAD"])
    );
    let read: Vec<(&str, &str)> = [("READ_URL", url.as_str())]
        .into_iter()
        .chain(net)
        .collect();
    plain_git(w, &dir, &["fetch", "-q", "origin"], &read);
    // git's own requests (its user agent, not git-session's): the push and the fetch.
    let tunnel = format!("CONNECT localhost:{git_port} {PROXY_USER} \"git/2");
    let by_git = |log: &str| {
        log.lines()
            .filter(|l| l.contains(&tunnel) && !l.contains("git-session"))
            .count()
    };
    let log = squid.access_log_until(|log| by_git(log) >= 2);
    assert!(
        by_git(&log) >= 2,
        "plain git did not go through the proxy:\n{log}"
    );
    // No secret anywhere git-session or git wrote.
    assert_no_secret_in_files(&dir.join(".git"));
    assert_no_secret_in_files(&w.tmp.path().join("home"));
    assert!(!b.lfs.stderr().contains(TOKEN));
}

#[test]
fn a_proxy_refusing_the_credentials_is_named_as_the_proxy() {
    let b = Behind::new();
    let w = &b.w;
    let squid = Squid::start(Some(PROXY_PASSWORD), None);
    let plain = GitServer::start(&w.srv(), Some(TOKEN));
    let wrong = squid.url(Some(&format!("{PROXY_USER}:{}x", pct(PROXY_PASSWORD))));
    let none = squid.url(None);
    let shown = format!("the proxy http://127.0.0.1:{}", squid.port);
    // Through a tunnel (https) and forwarded (http), without credentials and with wrong ones.
    let cases = [
        ("HTTPS_PROXY", b.url(), &none),
        ("HTTPS_PROXY", b.url(), &wrong),
        (
            "HTTP_PROXY",
            plain.url("repo.git", Some(&userinfo())),
            &none,
        ),
        (
            "HTTP_PROXY",
            plain.url("repo.git", Some(&userinfo())),
            &wrong,
        ),
    ];
    for (i, (var, url, proxy)) in cases.iter().enumerate() {
        let run = restore(
            w,
            &w.path(&format!("c{i}")),
            url,
            &b.tip,
            &[
                ("NO_PROXY", ""),
                (var, proxy.as_str()),
                ("SSL_CERT_FILE", &b.ca_pem),
                ("GIT_SESSION_RETRY_TOTAL_MS", "2000"),
            ],
        );
        run.assert_code(5);
        let msg = run.error_message();
        assert!(msg.contains(&format!("{shown} (from {var})")), "{i}: {msg}");
        assert!(
            msg.contains("407") || msg.contains("proxy authorization"),
            "{i}: {msg}"
        );
    }
    assert!(b.srv.log().is_empty() && plain.log().is_empty());
}

#[test]
fn an_https_proxy_with_its_own_ca_works_for_git_session_and_plain_git() {
    let b = Behind::new();
    let w = &b.w;
    let proxy_ca = TestCa::new();
    let proxy_ca_pem = ca_file(w, "proxy-ca.pem", &proxy_ca);
    let squid = Squid::start(Some(PROXY_PASSWORD), Some(&proxy_ca));
    let proxy = squid.url(Some(&proxy_userinfo()));
    assert!(proxy.starts_with("https://"));
    let url = b.url();
    let net = [
        ("NO_PROXY", ""),
        ("HTTPS_PROXY", proxy.as_str()),
        ("GIT_SSL_CAINFO", b.ca_pem.as_str()),
        ("GIT_PROXY_SSL_CAINFO", proxy_ca_pem.as_str()),
    ];
    let dir = w.path("s");
    // (LFS goes to giftless directly: no http proxy is set.)
    let run = restore(w, &dir, &url, &b.tip, &net);
    run.assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), b.tip);
    let tunnel = format!("CONNECT localhost:{} {PROXY_USER} ", b.srv.addr.port());
    let log = squid.access_log_with(&tunnel);
    assert!(log.contains(&tunnel), "{log}");
    // Plain git reads the same variables.
    let read: Vec<(&str, &str)> = [("READ_URL", url.as_str())]
        .into_iter()
        .chain(net)
        .collect();
    plain_git(w, &dir, &["fetch", "-q", "origin"], &read);
    // Without the proxy's CA the proxy is not trusted: the error names it.
    let run = restore(
        w,
        &w.path("t"),
        &url,
        &b.tip,
        &[
            ("NO_PROXY", ""),
            ("HTTPS_PROXY", proxy.as_str()),
            ("GIT_SSL_CAINFO", b.ca_pem.as_str()),
            ("GIT_SESSION_RETRY_TOTAL_MS", "2000"),
        ],
    );
    run.assert_code(5);
    let msg = run.error_message();
    assert!(
        msg.contains(&format!(
            "the proxy https://127.0.0.1:{} (from HTTPS_PROXY)",
            squid.port
        )),
        "{msg}"
    );
    assert!(msg.contains("certificate"), "{msg}");
}

#[test]
fn the_network_variables_are_in_the_help_of_each_command_that_talks_to_a_server() {
    let w = World::new();
    for command in ["restore", "bake", "save", "push", "watch", "status"] {
        let run = w.run(w.tmp.path(), &[command, "--help"], &[]);
        run.assert_code(0);
        for var in ["HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "GIT_SSL_CAINFO"] {
            assert!(
                run.stdout.contains(var),
                "{command}: no {var}:\n{}",
                run.stdout
            );
        }
    }
}

/// A git server behind the proxy echoing the proxy's password (in an `ERR` line and side-band
/// messages, plain, percent-encoded and as the `Proxy-Authorization` header's base64) never gets
/// it shown: the password is learned from the proxy variable as the token is from READ_URL, and
/// every output (the logs at debug included) is searched for it.
#[test]
fn a_proxy_password_echoed_by_the_server_is_redacted() {
    use crate::support::wire::{band, pkt};
    use crate::support::{Endpoint, Scripted};
    use base64::Engine as _;
    let w = World::new();
    let ids = w.repo("repo.git", &[&[("a.txt", Some("a\n"))]]);
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    let squid = Squid::start(Some(PROXY_PASSWORD), None);
    let proxy = squid.url(Some(&proxy_userinfo()));
    let header =
        base64::engine::general_purpose::STANDARD.encode(format!("{PROXY_USER}:{PROXY_PASSWORD}"));
    let echo = format!(
        "you came through {PROXY_PASSWORD}, {}, {header}",
        pct(PROXY_PASSWORD)
    );
    let mut body = pkt("packfile\n").into_bytes();
    body.extend_from_slice(&band(2, echo.as_bytes()));
    body.extend_from_slice(&band(3, echo.as_bytes()));
    body.extend_from_slice(b"0000");
    for (i, reply) in [pkt(&format!("ERR {echo}\n")).into_bytes(), body]
        .into_iter()
        .enumerate()
    {
        srv.knobs
            .scripted
            .lock()
            .unwrap()
            .push(Scripted::once(Endpoint::Fetch, reply));
        let run = restore(
            &w,
            &w.path(&format!("s{i}")),
            &srv.url("repo.git", Some(&userinfo())),
            &ids[0],
            &[
                ("NO_PROXY", ""),
                ("http_proxy", &proxy),
                ("RUST_LOG", "debug"),
            ],
        );
        run.assert_code(5);
        assert!(run.stdout.contains("<redacted>"), "{i}: {}", run.stdout);
    }
    let log = squid.access_log_with(&format!("POST {}", srv.url("repo.git", None)));
    assert!(log.contains(&format!("{PROXY_USER} ")), "{log}");
}
