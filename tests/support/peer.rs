//! A server process the tests start besides git's own (`jgit`, `dulwich`): it prints `PORT <n>`
//! once it listens on 127.0.0.1, logs to stderr, and exits when its stdin closes, so a test process
//! that dies leaves no server behind. Stopped when dropped.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A running peer server.
pub struct PeerProcess {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// Everything it wrote to stderr so far (drained for good: a full pipe would stall it).
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl PeerProcess {
    /// Run `cmd` (stdin kept open, never written) and wait up to `timeout` for its `PORT` line;
    /// panics with what `name` wrote to stderr if it does not come.
    pub fn spawn(name: &str, mut cmd: Command, timeout: Duration) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the {name} test server ({cmd:?}): {e}"));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err_pipe = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&stderr);
        let err_thread = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = err_pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        // The first stdout line is `PORT <n>`; the rest is drained so the server never blocks.
        let out_pipe = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(out_pipe);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let started = Instant::now();
        let line = rx.recv_timeout(timeout);
        let port = line
            .as_deref()
            .ok()
            .and_then(|l| l.trim_end().strip_prefix("PORT "))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|&p| p != 0);
        let Some(port) = port else {
            let _ = child.kill();
            let status = child.wait();
            let _ = err_thread.join();
            let log = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
            panic!(
                "the {name} test server did not report its port (waited {:?} of {timeout:?}; \
                 stdout line: {:?}; exit: {:?})\n--- its stderr ---\n{log}",
                started.elapsed(),
                line.ok(),
                status.ok(),
            );
        };
        PeerProcess {
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

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
