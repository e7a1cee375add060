//! A real JGit smart-HTTP server for the tests: JGit 4.11's `GitServlet` on an embedded Jetty 9
//! (`tests/peers/jgit/JGitServer.java`), installed into `target/peers/jgit` by `scripts/peers`.
//!
//! It serves every bare repository under a root folder at `http://127.0.0.1:PORT/<name>` (nested
//! names such as `org/repo.git` too), upload-pack and receive-pack both open to anonymous users.
//! Protocol v0 only (a `Git-Protocol: version=2` request gets a v0 answer). Each repository's own
//! config is read on every request (`uploadpack.allowReachableSHA1InWant`, `allowTipSHA1InWant`,
//! `receive.denyNonFastForwards`, `receive.pushOptions`, ...).

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::peer::PeerProcess;

/// A JGit smart-HTTP server (GitServlet on Jetty) serving the bare repositories under `root`;
/// stopped when dropped.
pub struct JGitServer(PeerProcess);

impl JGitServer {
    /// Starts `java -cp <lib/*:classes> JGitServer root 0` and waits for its `PORT` line (60 s at
    /// most: a JVM start is ~0.5 s when idle).
    pub fn start(root: &Path) -> Self {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/jgit");
        let classes = dir.join("classes");
        assert!(
            classes.join("JGitServer.class").is_file() && dir.join("lib").is_dir(),
            "the JGit test server is not installed in {}: run scripts/peers",
            dir.display()
        );
        let mut cmd = Command::new("java");
        cmd.arg("-cp")
            .arg(format!(
                "{}/*:{}",
                dir.join("lib").display(),
                classes.display()
            ))
            .arg("JGitServer")
            .arg(root)
            .arg("0");
        JGitServer(PeerProcess::spawn("JGit", cmd, Duration::from_secs(60)))
    }

    /// `http://127.0.0.1:PORT/<name>`, e.g. `url("repo.git")`.
    pub fn url(&self, name: &str) -> String {
        self.0.url(name)
    }

    /// What the server wrote to stderr so far (a failed request logs its stack trace there).
    pub fn stderr(&self) -> String {
        self.0.stderr()
    }
}
