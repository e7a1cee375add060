//! Set-up and checks shared by several test files: a real repository with every kind of path
//! (served, and as `git archive`), a served `repo.git`, children run by hand and checked for the
//! token, failpoint kills, refusals that name their reason.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::{GitServer, TOKEN, World, assert_no_secret, userinfo};

/// A repository with relative and absolute symlinks, executables, nested folders, non-ASCII,
/// space-holding and non-UTF-8 names, an empty file, a Windows device name, long paths (pax
/// headers in `git archive`), and a file over 1 MiB. Returns (scratch work tree, commit ids).
pub fn real_repo(w: &World, name: &str) -> (PathBuf, Vec<String>) {
    let scratch = w.scratch(&format!("scratch-{name}"));
    let put = |rel: &[u8], data: &[u8], exec: bool| {
        let path = scratch.join(OsStr::from_bytes(rel));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, data).unwrap();
        let mode = if exec { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let sym = |rel: &str, target: &str| {
        let path = scratch.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    };
    put(b"README.md", b"# real\n", false);
    put(b"bin/run.sh", b"#!/bin/sh\necho run\n", true);
    put(b"bin/tool", b"\x7fELF-ish\n", true);
    put(b"nested/a/b/c/deep.txt", b"deep\n", false);
    put("ünïcödé/文件.txt".as_bytes(), "内容\n".as_bytes(), false);
    put(b"with space/file name.txt", b"spaced\n", false);
    put(b"empty.txt", b"", false);
    put(b"aux.c", b"int aux;\n", false);
    put(b"src/con.h", b"#define CON\n", false);
    put(b"caf\xe9-latin1.txt", b"latin1 name\n", false);
    let long = format!(
        "{}/{}/long-name-{}.txt",
        "x".repeat(90),
        "y".repeat(90),
        "z".repeat(80)
    );
    put(long.as_bytes(), b"long path\n", false);
    // Whole 8-byte words past 3 MiB + 17 bytes.
    let big = crate::support::incompressible((3 << 20) + 24, &mut 0x1234_5678_9abc_def0u64);
    put(b"data/big.bin", &big, false);
    sym("link-rel", "README.md");
    sym("nested/a/up", "../../README.md");
    sym("abs-link", "/etc/hostname");
    sym("dir-link", "nested/a");
    sym("dangling", "does/not/exist");
    sym("long-link", &format!("{}/target", "q".repeat(150)));
    sym("ünïcödé/link-文件", "文件.txt");
    let first = w.commit_all(&scratch, "first");
    put(b"README.md", b"# real, second\n", false);
    put(b"later.txt", b"later\n", false);
    let second = w.commit_all(&scratch, "second");
    (scratch, vec![first, second])
}

/// `git archive --format=tar.gz [--prefix=…] <commit>` into a file.
pub fn git_archive(
    w: &World,
    repo: &Path,
    commit: &str,
    prefix: Option<&str>,
    out: &str,
) -> PathBuf {
    let path = w.path(&format!("archives/{out}"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut args = vec!["archive", "--format=tar.gz"];
    let pre;
    if let Some(x) = prefix {
        pre = format!("--prefix={x}");
        args.push(&pre);
    }
    let o = format!("--output={}", path.display());
    args.push(&o);
    args.push(commit);
    w.git(repo, &args);
    path
}

/// Serve `repo` (a scratch work tree) as the bare `srv/<name>.git`, receive-pack on, every push kept
/// as a pack (so the pushed objects can be counted).
pub fn serve_bare(w: &World, repo: &Path, name: &str) -> PathBuf {
    let bare = w.serve_scratch(repo, &format!("{name}.git"));
    w.git(&bare, &["config", "receive.unpackLimit", "1"]);
    w.git(&bare, &["config", "transfer.unpackLimit", "1"]);
    bare
}

/// [`real_repo`] served as `repo.git` (see [`serve_bare`]) by a server that wants the token.
pub struct RealServed {
    /// The scratch work tree.
    pub repo: PathBuf,
    /// Its commits, in order.
    pub ids: Vec<String>,
    /// `srv/repo.git`.
    pub bare: PathBuf,
    pub srv: GitServer,
    /// READ_URL, with the token.
    pub read: String,
}

impl RealServed {
    pub fn new(w: &World, name: &str) -> Self {
        let (repo, ids) = real_repo(w, name);
        let bare = serve_bare(w, &repo, "repo");
        let srv = GitServer::start(&w.srv(), Some(TOKEN));
        let read = srv.url("repo.git", Some(&userinfo()));
        RealServed {
            repo,
            ids,
            bare,
            srv,
            read,
        }
    }
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
    for file in super::all_files(dir) {
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
