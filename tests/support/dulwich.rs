//! A real Dulwich smart-HTTP server for the integration tests: `tests/peers/dulwich_server.py`
//! (`dulwich.web` under `wsgiref`, one thread per request) run by the virtualenv that
//! `scripts/peers` installs at `target/peers/dulwich/venv`. It serves every bare repository under a
//! root folder at `http://127.0.0.1:PORT/<name>`, upload-pack and receive-pack, anonymously,
//! protocol v0/v1 only.
//!
//! Traits of this peer (Dulwich 1.2.21) that tests meet:
//! - upload-pack requires the client to ask for `side-band-64k`, `thin-pack` and `ofs-delta`, and
//!   answers a `want` of any object that is not an advertised ref tip (no `allow-*-sha1-in-want`)
//!   with HTTP 500 and a plain-text body, not an `ERR` pkt-line;
//! - receive-pack reports `ok` for a command whose old id is stale and leaves the ref as it was,
//!   and `atomic` does not make such a batch fail;
//! - answers are HTTP/1.0 without `Content-Length` (one request per connection).
//!
//! The server exits when its stdin closes, so a test process that dies leaves no server behind.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the server may take to print its port.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A Dulwich smart-HTTP server (dulwich.web under wsgiref) serving the bare repositories under
/// `root`; stopped when dropped.
pub struct DulwichServer {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// Everything the server wrote to stderr so far (its request log and tracebacks).
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl DulwichServer {
    /// The virtualenv's interpreter that `scripts/peers` installs.
    fn python() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/dulwich/venv/bin/python")
    }

    /// Starts the server on a free port and waits (30 s at most) for it to listen.
    pub fn start(root: &Path) -> Self {
        let python = Self::python();
        assert!(
            python.exists(),
            "Dulwich is not installed ({} is missing): run scripts/peers",
            python.display()
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/dulwich_server.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .arg(root)
            .arg("0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run {} {}: {e}", python.display(), script.display())
            });

        // Drain stderr for good: a full pipe would stall the server.
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err_pipe = child.stderr.take().expect("piped stderr");
        let err_buf = Arc::clone(&stderr);
        let err_thread: JoinHandle<()> = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = err_pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                err_buf.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });

        // The first stdout line is `PORT <n>`; anything after it is drained and ignored.
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
        let line = rx.recv_timeout(START_TIMEOUT);
        let port = line
            .as_deref()
            .ok()
            .and_then(|l| l.trim_end().strip_prefix("PORT "))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|&p| p != 0);
        match port {
            Some(port) => DulwichServer {
                child,
                port,
                stderr,
            },
            None => {
                let _ = child.kill();
                let status = child.wait();
                let _ = err_thread.join();
                let log = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
                panic!(
                    "the Dulwich server did not report its port (waited {:?} of {:?}; \
                     stdout line: {:?}; exit: {:?})\n--- its stderr ---\n{log}",
                    started.elapsed(),
                    START_TIMEOUT,
                    line.ok(),
                    status.ok(),
                );
            }
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

    /// What the server wrote to stderr so far: one line per request, and Python tracebacks for the
    /// requests it answered 500.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

impl Drop for DulwichServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
