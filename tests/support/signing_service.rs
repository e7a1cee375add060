//! The reference signing service (`examples/signing-service.py`, run by python3) on 127.0.0.1,
//! honest or in one of its hostile modes, killed on drop. Its log counts the requests.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::{TOKEN, USER, pct};

/// A running signing service.
pub struct SigningService {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    log: PathBuf,
    /// The file holding the token it accepts (rewrite it to rotate).
    pub token_file: PathBuf,
}

impl SigningService {
    /// The service in `dir` signing with `key`, accepting [`TOKEN`], in `mode` (`sign` is the
    /// honest one), with `extra` arguments (`--other-key K`, `--rotate-url-file F`).
    pub fn start(dir: &Path, key: &Path, mode: &str, extra: &[&str]) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let token_file = dir.join("service-token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        let log = dir.join("service.log");
        let _ = std::fs::remove_file(&log);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/signing-service.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("--key")
            .arg(key)
            .arg("--token-file")
            .arg(&token_file)
            .arg("--log")
            .arg(&log)
            .args(["--mode", mode])
            .args(extra)
            .env("HOME", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 must be installed");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the signing service did not start: {line:?}"));
        SigningService {
            child,
            port,
            log,
            token_file,
        }
    }

    /// Its URL with the test token as userinfo.
    pub fn url(&self) -> String {
        self.url_with(TOKEN)
    }

    /// Its URL with `token` as the userinfo's password.
    pub fn url_with(&self, token: &str) -> String {
        format!("http://{USER}:{}@127.0.0.1:{}/sign", pct(token), self.port)
    }

    /// The requests it logged, one `"POST /sign <status>"` each.
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for SigningService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
