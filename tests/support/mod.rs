//! Test harness: an isolated environment (temporary HOME, empty global and system git config),
//! the git CLI as the judge, fixture repositories, and the `git-session` binary run as a user would.
//!
//! Every run of the binary is checked for the test token (plain, Basic-header base64, %-encoded in any
//! spelling) and the test proxy's password in its stdout and stderr: a leak fails whichever test
//! caused it.

#![allow(dead_code)]

pub mod dulwich;
pub mod jgit;
pub mod keys;
pub mod lfs;
pub mod peer;
pub mod real_repo;
pub mod reflink;
pub mod server;
pub mod signing_service;
pub mod slow_proxy;
pub mod squid;
pub mod watch;
pub mod wire;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;

pub use server::{Endpoint, GitServer, Scripted, TestCa};

/// The token the test server requires. Distinctive, so a grep finds every leak.
pub const TOKEN: &str = "tok3n-Sekr1t+/=Zq";
/// The Basic user name that goes with it.
pub const USER: &str = "t";
/// The password of the tests' proxy ([`squid::Squid`], user [`squid::PROXY_USER`]): a secret
/// like the token, searched for wherever the token is.
pub const PROXY_PASSWORD: &str = "pr0xy-Pa55+/=Wv";

/// The encodings in which the proxy's password must never appear: as it is, percent-encoded,
/// and the base64 of a `Proxy-Authorization` header's `user:password` and of the password alone.
pub fn proxy_password_forms() -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    vec![
        PROXY_PASSWORD.to_owned(),
        pct(PROXY_PASSWORD),
        b64.encode(format!("{}:{PROXY_PASSWORD}", squid::PROXY_USER)),
        b64.encode(PROXY_PASSWORD).trim_end_matches('=').to_owned(),
    ]
}

/// The encodings in which the token must never appear.
pub fn token_forms() -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    vec![
        TOKEN.to_owned(),
        b64.encode(format!("{USER}:{TOKEN}")),
        b64.encode(TOKEN),
        // Unpadded and URL-safe (the padded forms end in '=' here).
        b64.encode(TOKEN).trim_end_matches('=').to_owned(),
        url_safe.encode(TOKEN),
        url_safe.encode(format!("{USER}:{TOKEN}")),
        pct(TOKEN),
    ]
}

/// The token inside base64 text, as a file or a header may hold it: of `user:token` for several
/// user names (git hosts use `x-access-token`, `oauth2`), of the token alone, and after one or two
/// other bytes (the three alignments), each standard and URL-safe, padded and not. Each form
/// is `(what it encodes, the encoding)`.
pub fn base64_token_forms() -> Vec<(String, String)> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let mut forms: Vec<(String, String)> = Vec::new();
    for plain in [
        format!("{USER}:{TOKEN}"),
        format!("x-access-token:{TOKEN}"),
        format!("oauth2:{TOKEN}"),
        TOKEN.to_owned(),
        format!("a{TOKEN}"),
        format!("ab{TOKEN}\n"),
        format!("{{\"token\":\"{TOKEN}\"}}"),
    ] {
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&plain);
            if !forms.iter().any(|(_, e)| *e == encoded) {
                forms.push((plain.escape_debug().to_string(), encoded));
            }
        }
    }
    // Wrapped as `base64` (76 columns) and PEM (64, CRLF) write it, and indented as in YAML: a
    // line break falls inside the token's part.
    let plain = format!("{}{TOKEN}", "k".repeat(45));
    let encoded = STANDARD.encode(&plain);
    for (width, eol) in [(76, "\n"), (64, "\r\n"), (70, "\n    ")] {
        let lines: Vec<&str> = encoded
            .as_bytes()
            .chunks(width)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        forms.push((format!("{plain} wrapped at {width}"), lines.join(eol)));
    }
    forms
}

/// Percent-encode every non-alphanumeric byte.
pub fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The userinfo that carries the token in a URL.
pub fn userinfo() -> String {
    format!("{USER}:{}", pct(TOKEN))
}

/// Assert that `text` holds none of the token's forms, nor the token percent-encoded in any
/// spelling (some bytes escaped, in either case).
pub fn assert_no_secret(what: &str, text: &[u8]) {
    let text = String::from_utf8_lossy(text);
    for form in token_forms().into_iter().chain(proxy_password_forms()) {
        assert!(
            !text.contains(&form),
            "{what} contains the token ({form}):\n{text}"
        );
    }
    assert!(
        !percent_decoded(&text).contains(TOKEN),
        "{what} contains the token percent-encoded:\n{text}"
    );
    assert!(
        !percent_decoded(&text).contains(PROXY_PASSWORD),
        "{what} contains the proxy's password percent-encoded:\n{text}"
    );
}

/// `text` with every `%XX` escape decoded (what is not one is kept).
pub fn percent_decoded(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

thread_local! {
    /// Whether this test's repositories are SHA-256 ones (set by [`as_sha256`]; each test runs on
    /// its own thread).
    static SHA256: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `test` with every repository [`World::scratch`] creates in the SHA-256 object format:
/// one test body, both formats (see [`sha256_too!`](crate::sha256_too)).
pub fn as_sha256(test: impl FnOnce()) {
    SHA256.set(true);
    test();
}

/// The object format of this test's repositories: `sha1` or `sha256`.
pub fn object_format() -> &'static str {
    if SHA256.get() { "sha256" } else { "sha1" }
}

/// This test's object format as gix names it.
pub fn gix_format() -> gix::hash::Kind {
    if SHA256.get() {
        gix::hash::Kind::Sha256
    } else {
        gix::hash::Kind::Sha1
    }
}

/// How many hex digits a full id has in this test's repositories: 40 or 64.
pub fn hex_len() -> usize {
    if SHA256.get() { 64 } else { 40 }
}

/// The zero id of this test's object format.
pub fn zero_id() -> String {
    "0".repeat(hex_len())
}

/// Run each named test of the module again on SHA-256 repositories, in a `sha256` submodule:
/// the same body, the fixture's format switched ([`as_sha256`]).
#[macro_export]
macro_rules! sha256_too {
    ($($name:ident),* $(,)?) => {
        mod sha256 {
            $(
                #[test]
                fn $name() {
                    $crate::support::as_sha256(super::$name)
                }
            )*
        }
    };
}

/// A temporary, isolated world: HOME, git config, a server root with bare repositories.
pub struct World {
    /// Everything lives below this.
    pub tmp: tempfile::TempDir,
}

/// The result of running the binary.
pub struct Run {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// The run of a finished child (started by [`World::run`], or by hand: stdin fed, or under
    /// another user), its output checked for the token.
    pub fn of(out: &Output) -> Run {
        let text = |stream: &str, bytes: &[u8]| {
            assert_no_secret(stream, bytes);
            String::from_utf8_lossy(bytes).into_owned()
        };
        Run {
            code: out.status.code(),
            stdout: text("stdout", &out.stdout),
            stderr: text("stderr", &out.stderr),
        }
    }

    /// The single JSON object on stdout.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Assert the exit code, showing the output on failure.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Assert the exit code and that stderr names every one of `words`.
    #[track_caller]
    pub fn assert_says(&self, code: i32, words: &[&str]) -> &Self {
        self.assert_case_says("", code, words)
    }

    /// [`Run::assert_says`] for the case `what` of a table, named on failure.
    #[track_caller]
    pub fn assert_case_says(&self, what: &str, code: i32, words: &[&str]) -> &Self {
        self.assert_code(code);
        for word in words {
            assert!(
                self.stderr.contains(word),
                "{what}: no {word:?} in:\n{}",
                self.stderr
            );
        }
        self
    }

    /// Assert the run was killed at failpoint `point` (SIGKILL, or abort's 134) and said so.
    #[track_caller]
    pub fn assert_killed_at(&self, point: &str) -> &Self {
        assert!(
            self.code.is_none() || self.code == Some(134),
            "{point}: not killed: {:?} {}",
            self.code,
            self.stderr
        );
        let said = format!("failpoint '{point}'");
        assert!(self.stderr.contains(&said), "{point}: {}", self.stderr);
        self
    }

    /// The message of the error a `--json` run printed.
    #[track_caller]
    pub fn error_message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no error message:\n{}", self.stdout))
            .to_owned()
    }
}

/// A file's text; panics if it is missing.
#[track_caller]
pub fn read_text(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The permission bits of `path` (following symlinks).
pub fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    meta.permissions().mode() & 0o7777
}

/// The names in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// True when `dir` is absent or empty: what a refused restore leaves.
pub fn left_nothing(dir: &Path) -> bool {
    !dir.exists() || std::fs::read_dir(dir).unwrap().next().is_none()
}

/// The session record a restore wrote (`.git/git-session.json` below `dir`).
pub fn session_record(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&read_text(dir.join(".git/git-session.json"))).unwrap()
}

impl World {
    /// A fresh world.
    pub fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("gs-test-")
            .tempdir()
            .unwrap();
        for d in ["home", "srv", "work"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        // No automatic gc: one detached after a big commit packs the loose objects that a
        // `clone` of the same repository is copying (its "failed to copy file … No such file").
        std::fs::write(
            tmp.path().join("home/.gitconfig"),
            "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n",
        )
        .unwrap();
        std::fs::write(tmp.path().join("gitconfig-system"), "").unwrap();
        World { tmp }
    }

    /// The root the server serves.
    pub fn srv(&self) -> PathBuf {
        self.tmp.path().join("srv")
    }

    /// A path below the world's work folder.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join("work").join(rel)
    }

    /// The isolated environment for children (git and git-session).
    pub fn env(&self) -> Vec<(String, String)> {
        let home = self.tmp.path().join("home");
        vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), home.display().to_string()),
            (
                "GIT_CONFIG_GLOBAL".into(),
                home.join(".gitconfig").display().to_string(),
            ),
            (
                "GIT_CONFIG_SYSTEM".into(),
                self.tmp
                    .path()
                    .join("gitconfig-system")
                    .display()
                    .to_string(),
            ),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
            ("NO_PROXY".into(), "127.0.0.1,localhost".into()),
            ("LC_ALL".into(), "C".into()),
            ("GIT_AUTHOR_NAME".into(), "Test Author".into()),
            ("GIT_AUTHOR_EMAIL".into(), "author@example.com".into()),
            ("GIT_COMMITTER_NAME".into(), "Test Committer".into()),
            ("GIT_COMMITTER_EMAIL".into(), "committer@example.com".into()),
            ("GIT_AUTHOR_DATE".into(), "2026-01-01T00:00:00Z".into()),
            ("GIT_COMMITTER_DATE".into(), "2026-01-01T00:00:00Z".into()),
        ]
    }

    /// Run `git` in `dir` with the isolated environment; panics on failure.
    #[track_caller]
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        self.git_with_env(dir, args, &[])
    }

    /// Run `git` in `dir` with the isolated environment plus `vars` (editors for `rebase -i`);
    /// panics on failure.
    #[track_caller]
    pub fn git_with_env(&self, dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> String {
        let out = self.git_output_with_env(dir, args, vars);
        assert!(
            out.status.success(),
            "git {args:?} failed in {}:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// Run `git` in `dir` with the test token as a Basic `http.extraHeader` passed through the
    /// environment (never argv), as a person's plain `git push` with a credential would.
    #[track_caller]
    pub fn git_auth(&self, dir: &Path, args: &[&str]) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{TOKEN}"));
        let header = format!("Authorization: Basic {b64}");
        self.git_with_env(
            dir,
            args,
            &[
                ("GIT_CONFIG_COUNT", "1"),
                ("GIT_CONFIG_KEY_0", "http.extraHeader"),
                ("GIT_CONFIG_VALUE_0", &header),
            ],
        )
    }

    /// Run `git` and return its raw output.
    pub fn git_output(&self, dir: &Path, args: &[&str]) -> Output {
        self.git_output_with_env(dir, args, &[])
    }

    /// [`World::git_output`] with `vars` added to the isolated environment.
    pub fn git_output_with_env(&self, dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(self.env())
            .envs(vars.iter().copied())
            .output()
            .unwrap()
    }

    /// A fresh scratch work tree `tmp/<name>` (`git init -b main`), to be filled and then served
    /// with [`World::commit_all`] and [`World::serve_scratch`].
    pub fn scratch(&self, name: &str) -> PathBuf {
        let scratch = self.tmp.path().join(name);
        std::fs::create_dir_all(&scratch).unwrap();
        let format = format!("--object-format={}", object_format());
        self.git(&scratch, &["init", "-q", "-b", "main", &format]);
        scratch
    }

    /// `git add -A && git commit` in `scratch`; returns the new commit's id.
    pub fn commit_all(&self, scratch: &Path, message: &str) -> String {
        self.git(scratch, &["add", "-A"]);
        self.git(scratch, &["commit", "-q", "--allow-empty", "-m", message]);
        self.git(scratch, &["rev-parse", "HEAD"])
    }

    /// Serve `scratch` as the bare `srv/<name>` (a bare clone, receive-pack on). Returns its path.
    pub fn serve_scratch(&self, scratch: &Path, name: &str) -> PathBuf {
        let bare = self.srv().join(name);
        self.git(
            self.tmp.path(),
            &[
                "clone",
                "-q",
                "--bare",
                scratch.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        self.git(&bare, &["config", "http.receivepack", "true"]);
        bare
    }

    /// Create the bare repository `srv/<name>` holding one commit per entry of `commits`
    /// (each a list of `(path, content)`; content `None` deletes), on branch `main`.
    /// Returns the commit ids in order.
    pub fn repo(&self, name: &str, commits: &[&[(&str, Option<&str>)]]) -> Vec<String> {
        let scratch = self.scratch(&format!("scratch-{name}"));
        let mut ids = Vec::new();
        for (i, files) in commits.iter().enumerate() {
            for (path, content) in files.iter() {
                let p = scratch.join(path);
                match content {
                    Some(c) => {
                        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                        let _ = std::fs::remove_file(&p);
                        if let Some(target) = c.strip_prefix("->") {
                            std::os::unix::fs::symlink(target, &p).unwrap();
                        } else {
                            std::fs::write(&p, c).unwrap();
                            if path.ends_with(".sh") {
                                use std::os::unix::fs::PermissionsExt as _;
                                std::fs::set_permissions(
                                    &p,
                                    std::fs::Permissions::from_mode(0o755),
                                )
                                .unwrap();
                            }
                        }
                    }
                    None => {
                        let _ = std::fs::remove_file(&p);
                        // A folder left empty goes too (a path may become a file later).
                        let _ = std::fs::remove_dir(p.parent().unwrap());
                    }
                }
            }
            ids.push(self.commit_all(&scratch, &format!("commit {i}")));
        }
        let bare = self.serve_scratch(&scratch, name);
        self.git(&bare, &["config", "uploadpack.allowAnySHA1InWant", "false"]);
        ids
    }

    /// Write a commit into bare repository `srv/<name>` whose root tree holds `entries`
    /// (`(mode, name, object id)`) verbatim — unsafe names included — and point `refs/heads/<branch>`
    /// at it. Returns the commit id.
    pub fn literal_commit(
        &self,
        name: &str,
        branch: &str,
        entries: &[(&str, &[u8], &str)],
    ) -> String {
        let bare = self.srv().join(name);
        let tree = self.literal_tree(&bare, entries);
        let commit = self.git(&bare, &["commit-tree", &tree, "-m", "crafted"]);
        self.git(
            &bare,
            &["update-ref", &format!("refs/heads/{branch}"), &commit],
        );
        commit
    }

    /// Write a tree object verbatim (`git hash-object --literally`); returns its id.
    pub fn literal_tree(&self, bare: &Path, entries: &[(&str, &[u8], &str)]) -> String {
        let mut body = Vec::new();
        for (mode, name, id) in entries {
            body.extend_from_slice(mode.as_bytes());
            body.push(b' ');
            body.extend_from_slice(name);
            body.push(0);
            body.extend_from_slice(&hex_to_bytes(id));
        }
        self.git_stdin(
            bare,
            &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
            &body,
        )
    }

    /// Run git with `input` on stdin; panics on failure.
    pub fn git_stdin(&self, dir: &Path, args: &[&str], input: &[u8]) -> String {
        let out = self.git_stdin_bytes(dir, args, input);
        String::from_utf8_lossy(&out).trim().to_owned()
    }

    /// Run git with `input` on stdin and return its stdout as is (a pack); panics on failure.
    pub fn git_stdin_bytes(&self, dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut child = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(self.env())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// `git-session restore ARGS` in `dir` of `tip` from `url` on session branch `branch`, with
    /// `vars` besides (the set-up every restore test shares).
    pub fn restore_with(
        &self,
        dir: &Path,
        url: &str,
        branch: &str,
        tip: &str,
        args: &[&str],
        vars: &[(&str, &str)],
    ) -> Run {
        let mut all = vec![
            ("READ_URL", url),
            ("SESSION_BRANCH", branch),
            ("TIP_SHA", tip),
        ];
        all.extend_from_slice(vars);
        self.run(dir, &[&["restore"][..], args].concat(), &all)
    }

    /// Run the binary in `cwd` with the isolated environment plus `vars`, and check its output for
    /// secrets.
    pub fn run(&self, cwd: &Path, args: &[&str], vars: &[(&str, &str)]) -> Run {
        self.run_without(cwd, args, vars, &[])
    }

    /// [`World::run`], killed once `limit` has passed (a hang fails the test, not the suite):
    /// `None` when it had to be killed.
    pub fn run_limited(
        &self,
        cwd: &Path,
        args: &[&str],
        vars: &[(&str, &str)],
        limit: Duration,
    ) -> Option<Run> {
        let child = Command::new(env!("CARGO_BIN_EXE_git-session"))
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .envs(self.env())
            .envs(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_with_limit(child, limit);
        out.status.code().map(|_| Run::of(&out))
    }

    /// `git-session ARGS` on a terminal (util-linux `script`), in `cwd` with `vars`: what the
    /// terminal showed, checked for secrets; the run must succeed.
    pub fn on_a_terminal(&self, cwd: &Path, args: &str, vars: &[(&str, &str)]) -> String {
        let tty_log = self.tmp.path().join("tty.log");
        let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_git-session"));
        let out = Command::new("script")
            .args(["-qec", &cmd, tty_log.to_str().unwrap()])
            .current_dir(cwd)
            .env_clear()
            .envs(self.env())
            .envs(vars.iter().copied())
            .env("TERM", "xterm")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("util-linux script");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = std::fs::read_to_string(&tty_log).unwrap();
        assert_no_secret("terminal", shown.as_bytes());
        shown
    }

    /// [`World::run`] with the variables `remove` taken out of the isolated environment.
    pub fn run_without(
        &self,
        cwd: &Path,
        args: &[&str],
        vars: &[(&str, &str)],
        remove: &[&str],
    ) -> Run {
        std::fs::create_dir_all(cwd).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_git-session"));
        cmd.args(args).current_dir(cwd).env_clear().envs(self.env());
        for name in remove {
            cmd.env_remove(name);
        }
        let out = cmd
            .env("GIT_SESSION_RETRY_BASE_MS", "5")
            .envs(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .output()
            .unwrap();
        Run::of(&out)
    }
}

fn hex_to_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Every file below `dir` (not following symlinks), for secret scans.
pub fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                out.push(p);
            }
        }
    }
    out
}

/// `len` bytes of xorshift noise from `seed`: data zlib cannot shrink, for memory tests.
pub fn incompressible(len: usize, seed: &mut u64) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    for chunk in buf.chunks_mut(8) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        chunk.copy_from_slice(&seed.to_le_bytes()[..chunk.len()]);
    }
    buf
}

/// A run of the binary under GNU time and a watchdog: exit code (`None`: killed by a signal or the
/// watchdog), stderr, peak RSS in MiB, wall time.
pub struct Measured {
    pub code: Option<i32>,
    pub stderr: String,
    pub peak_kib: u64,
    pub peak_mib: u64,
    pub wall: Duration,
}

impl Measured {
    /// Exit `code` with `words` on stderr, the peak RSS under `max_mib`; `case` names the input.
    pub fn assert_refused(&self, case: &str, code: i32, words: &str, max_mib: u64) {
        assert_eq!(self.code, Some(code), "{case}: {}", self.stderr);
        assert!(self.stderr.contains(words), "{case}: {}", self.stderr);
        assert!(
            self.peak_mib < max_mib,
            "{case}: peak RSS {} MiB",
            self.peak_mib
        );
    }
}

pub fn measure(
    env: Vec<(String, String)>,
    dir: &Path,
    args: &[&str],
    vars: &[(&str, &str)],
    limit: Duration,
) -> Measured {
    std::fs::create_dir_all(dir).unwrap();
    let rss = tempfile::NamedTempFile::new().unwrap();
    let started = Instant::now();
    use std::os::unix::process::CommandExt as _;
    let mut child = Command::new("/usr/bin/time")
        .process_group(0)
        .args(["-f", "%M", "-o"])
        .arg(rss.path())
        .arg(env!("CARGO_BIN_EXE_git-session"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .envs(env)
        .env("GIT_SESSION_RETRY_BASE_MS", "5")
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("GNU time is needed (apt-get install time)");
    let mut killed = false;
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            // GNU time and git-session below it: the whole process group.
            let _ = Command::new("kill")
                .args(["-9", &format!("-{}", child.id())])
                .status();
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let wall = started.elapsed();
    assert_no_secret("stdout", &out.stdout);
    assert_no_secret("stderr", &out.stderr);
    let peak_kib: u64 = std::fs::read_to_string(rss.path())
        .unwrap_or_default()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    // GNU time reports the child's status as its own: "Command exited with non-zero status N",
    // or "Command terminated by signal N" (an abort: no exit code, not 0).
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = std::fs::read_to_string(rss.path()).unwrap_or_default();
    let code = if killed || text.contains("Command terminated by signal") {
        None
    } else {
        text.lines()
            .find_map(|l| l.strip_prefix("Command exited with non-zero status "))
            .and_then(|n| n.trim().parse().ok())
            .or(Some(0))
    };
    // The figures BENCHMARKS.md quotes ("memory against a hostile server").
    eprintln!(
        "measured: git-session {} → exit {code:?}, peak RSS {} KiB, {:.1} s",
        args.join(" "),
        peak_kib,
        wall.as_secs_f64()
    );
    Measured {
        code,
        stderr,
        peak_kib,
        peak_mib: peak_kib / 1024,
        wall,
    }
}

/// Run git-session with `args` in `dir` (environment: `env` plus `vars`, nothing else) under GNU
/// time; return its peak RSS in KiB. Panics unless it exits 0.
pub fn git_session_peak_rss(
    dir: &Path,
    env: Vec<(String, String)>,
    vars: &[(&str, &str)],
    args: &[&str],
) -> u64 {
    let m = measure(env, dir, args, vars, Duration::from_secs(1800));
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    m.peak_kib
}

/// UID and GID of `nobody`, the other user of the ownership tests (SPEC rule 9).
pub const NOBODY: (u32, u32) = (65534, 65534);

/// Create `dir` owned by [`NOBODY`], reachable by that user.
pub fn give_to_nobody(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::os::unix::fs::chown(dir, Some(NOBODY.0), Some(NOBODY.1)).unwrap();
    let mut p = dir.parent();
    while let Some(d) = p {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(d).unwrap().permissions().mode();
        let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o005));
        p = d.parent();
    }
}

/// Everything below `dir` belongs to [`NOBODY`].
#[track_caller]
pub fn assert_all_nobodys(dir: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            assert_eq!(
                (m.uid(), m.gid()),
                NOBODY,
                "{} is not the owner's",
                e.path().display()
            );
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
}

/// A tmpfs of `size` (mount options such as `1m` or `1m,ro`) mounted at `at`, unmounted on drop,
/// for full and read-only file systems. Needs root (CI runs as root): without it, `mount` returns
/// `None` and the test says it was skipped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                !is_root(),
                "running as root, but mounting a tmpfs failed: this test cannot run here"
            );
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        Some(Tmpfs(at.to_owned()))
    }

    pub fn resize(&self, size: &str) {
        let ok = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// Validate `value` (one `--json` object) against `git-session schema` (JSON Schema draft
/// 2020-12, compiled once); panics with every violation.
#[track_caller]
pub fn assert_matches_schema(value: &serde_json::Value) {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let out = Command::new(env!("CARGO_BIN_EXE_git-session"))
            .arg("schema")
            .output()
            .unwrap();
        assert!(out.status.success(), "git-session schema failed");
        let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "not a draft 2020-12 schema"
        );
        jsonschema::draft202012::new(&schema).expect("the schema does not compile")
    });
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the output does not match `git-session schema`:\n{}\n{value:#}",
        errors.join("\n")
    );
}

/// Run `cmd` with `input` on its stdin and return its output. The input is written from a thread,
/// so a child that answers (or refuses) before reading it all cannot deadlock; a pipe it closed is
/// no error, its output tells.
pub fn output_with_stdin(cmd: &mut std::process::Command, input: &[u8]) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let writer = std::thread::spawn(move || match stdin.write_all(&data) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// No file below `dir` holds the token in any form.
#[track_caller]
pub fn assert_no_secret_in_files(dir: &Path) {
    for file in all_files(dir) {
        assert_no_secret(&file.display().to_string(), &std::fs::read(&file).unwrap());
    }
}

/// Where `refs/heads/<branch>` points in the repository `git_dir` (`None`: no such branch).
pub fn branch_tip(w: &World, git_dir: &Path, branch: &str) -> Option<String> {
    let refname = format!("refs/heads/{branch}");
    let out = w.git_output(git_dir, &["rev-parse", "--verify", "-q", &refname]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A fresh world whose `srv/repo.git` holds `commits` (see [`World::repo`]), served by a server
/// that wants the token; with the commit ids.
pub fn served_repo(commits: &[&[(&str, Option<&str>)]]) -> (World, GitServer, Vec<String>) {
    let w = World::new();
    let ids = w.repo("repo.git", commits);
    let srv = GitServer::start(&w.srv(), Some(TOKEN));
    (w, srv, ids)
}

/// Wait for `child`, killing it once `limit` has passed (a hang fails the test, not the suite).
pub fn wait_with_limit(
    mut child: std::process::Child,
    limit: std::time::Duration,
) -> std::process::Output {
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// Make the freed inode number `ino` the one the next file made in `dir` gets, where the file
/// system reuses freed numbers lowest first (ext4, within the folder's group): files are made in
/// `dir` until one gets `ino` (the lower free numbers are then taken), and that one is removed.
/// Returns the other files made, to remove once the next file is made. Gives up after 20,000
/// (other file systems: tmpfs never reuses a number).
pub fn free_for_the_next_file(dir: &Path, ino: u64) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let mut made = Vec::new();
    for i in 0..20_000 {
        let path = dir.join(format!("filler-{i}"));
        std::fs::write(&path, b"").unwrap();
        if std::fs::metadata(&path).unwrap().ino() == ino {
            std::fs::remove_file(&path).unwrap();
            return made;
        }
        made.push(path);
    }
    made
}
