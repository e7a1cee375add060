//! A running `git-session watch --json` (as agent `watcher`), its JSON lines read as they come:
//! the set-up the watch tests share.

use super::World;

/// A running `git-session watch --json`, its stdout read line by line.
pub struct Watch {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<serde_json::Value>,
}

impl Watch {
    pub fn start(w: &World, dir: &std::path::Path, args: &[&str], url: &str) -> Self {
        Self::start_with(w, dir, args, url, &[])
    }

    pub fn start_with(
        w: &World,
        dir: &std::path::Path,
        args: &[&str],
        url: &str,
        vars: &[(&str, &str)],
    ) -> Self {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
            .arg("watch")
            .args(args)
            .arg("--json")
            .current_dir(dir)
            .env_clear()
            .envs(w.env())
            .env("GIT_SESSION_RETRY_BASE_MS", "5")
            .env("GIT_SESSION_AGENT", "watcher")
            .env("PUSH_URL", url)
            .envs(vars.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watch {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next JSON line within `secs`, checked against the schema.
    pub fn next(&mut self, secs: u64) -> Option<serde_json::Value> {
        let line = self
            .lines
            .recv_timeout(std::time::Duration::from_secs(secs))
            .ok()?;
        super::assert_no_secret("watch stdout", line.as_bytes());
        let j: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {line}"));
        super::assert_matches_schema(&j);
        self.seen.push(j.clone());
        Some(j)
    }

    pub fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// Wait up to `secs` for the exit; its code and stderr.
    pub fn wait(mut self, secs: u64) -> (Option<i32>, String, Vec<serde_json::Value>) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("watch did not exit within {secs} s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        while self.next(1).is_some() {}
        let mut stderr = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        super::assert_no_secret("watch stderr", stderr.as_bytes());
        (status.code(), stderr, std::mem::take(&mut self.seen))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
