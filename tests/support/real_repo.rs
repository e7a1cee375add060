//! The real repository the archive and git restore tests share: every kind of path git can
//! hold, served over HTTP and made into `git archive` tar.gz files.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::{GitServer, TOKEN, World, userinfo};

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
