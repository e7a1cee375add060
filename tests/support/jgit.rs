//! A real JGit smart-HTTP server for the tests: JGit 4.11's `GitServlet` on an embedded Jetty 9
//! (`tests/peers/jgit/JGitServer.java`), installed into `target/peers/jgit` by `scripts/peers`.
//!
//! It serves every bare repository under a root folder at `http://127.0.0.1:PORT/<name>` (nested
//! names such as `org/repo.git` too), upload-pack and receive-pack both open to anonymous users.
//! Protocol v0 only (a `Git-Protocol: version=2` request gets a v0 answer). Each repository's own
//! config is read on every request (`uploadpack.allowReachableSHA1InWant`, `allowTipSHA1InWant`,
//! `receive.denyNonFastForwards`, `receive.pushOptions`, ...).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How long the server may take to print its `PORT` line (a JVM start is ~0.5 s when idle).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A JGit smart-HTTP server (GitServlet on Jetty) serving the bare repositories under `root`;
/// stopped when dropped.
pub struct JGitServer {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// Everything it wrote to stderr so far (Jetty/JGit warnings, stack traces of failed requests).
    stderr: Arc<Mutex<Vec<u8>>>,
}

/// Where `scripts/peers` installed the server.
fn install_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/jgit")
}

impl JGitServer {
    /// Starts `java -cp <lib/*:classes> JGitServer root 0` and waits for its `PORT` line.
    /// Panics (with the server's stderr) if it does not come within 60 s.
    pub fn start(root: &Path) -> Self {
        let dir = install_dir();
        let classes = dir.join("classes");
        if !classes.join("JGitServer.class").is_file() || !dir.join("lib").is_dir() {
            panic!(
                "the JGit test server is not installed in {}: run scripts/peers",
                dir.display()
            );
        }
        let class_path = format!("{}/*:{}", dir.join("lib").display(), classes.display());
        let mut child = Command::new("java")
            .arg("-cp")
            .arg(&class_path)
            .arg("JGitServer")
            .arg(root)
            .arg("0")
            // Kept open and never written: the server exits when it closes, i.e. with the test.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start java (the JGit test server): {e}"));

        let stderr = Arc::new(Mutex::new(Vec::new()));
        {
            let mut pipe = child.stderr.take().unwrap();
            let sink = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
        let (tx, rx) = mpsc::channel();
        {
            let pipe = child.stdout.take().unwrap();
            std::thread::spawn(move || {
                let mut lines = BufReader::new(pipe).lines();
                // The first line is the PORT line; keep draining the rest so the server never blocks.
                let first = lines.next();
                let _ = tx.send(first);
                for _ in lines {}
            });
        }
        let stderr_text = |stderr: &Arc<Mutex<Vec<u8>>>| {
            String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned()
        };
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let status = child.wait();
                // Let the stderr thread catch the last of it.
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "the JGit test server did not print its PORT line ({}; {:?}); its stderr:\n{}",
                    match other {
                        Err(_) => "timed out after 60 s".to_owned(),
                        Ok(None) => "stdout closed".to_owned(),
                        Ok(Some(Err(e))) => format!("read error: {e}"),
                        Ok(Some(Ok(_))) => unreachable!(),
                    },
                    status,
                    stderr_text(&stderr)
                );
            }
        };
        let port = match line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse::<u16>().ok())
        {
            Some(port) => port,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the JGit test server printed {line:?}, not `PORT <n>`; its stderr:\n{}",
                    stderr_text(&stderr)
                );
            }
        };
        JGitServer {
            child,
            port,
            stderr,
        }
    }

    /// `http://127.0.0.1:PORT/<name>`, e.g. `url("repo.git")`.
    pub fn url(&self, name: &str) -> String {
        format!(
            "http://127.0.0.1:{}/{}",
            self.port,
            name.trim_start_matches('/')
        )
    }

    /// What the server wrote to stderr so far (a failed request logs its stack trace there).
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

impl Drop for JGitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
