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

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::peer::PeerProcess;

/// A Dulwich smart-HTTP server serving the bare repositories under `root`; stopped when dropped.
pub struct DulwichServer(PeerProcess);

impl DulwichServer {
    /// Starts the server on a free port and waits (30 s at most) for it to listen.
    pub fn start(root: &Path) -> Self {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = here.join("target/peers/dulwich/venv/bin/python");
        assert!(
            python.exists(),
            "Dulwich is not installed ({} is missing): run scripts/peers",
            python.display()
        );
        let mut cmd = Command::new(&python);
        cmd.arg(here.join("tests/peers/dulwich_server.py"))
            .arg(root)
            .arg("0");
        DulwichServer(PeerProcess::spawn("Dulwich", cmd, Duration::from_secs(30)))
    }

    /// `http://127.0.0.1:PORT/<name>`, e.g. `url("repo.git")`.
    pub fn url(&self, name: &str) -> String {
        self.0.url(name)
    }

    /// What the server wrote to stderr so far: one line per request, and Python tracebacks for the
    /// requests it answered 500.
    pub fn stderr(&self) -> String {
        self.0.stderr()
    }
}
