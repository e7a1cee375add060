//! `git-session credential`: a git credential helper (git-credential(1), "CUSTOM HELPERS") that
//! answers `get` from the environment, so plain `git fetch`/`git push` in the sandbox shell work with
//! no secret on disk.
//!
//! It answers for the session URLs in the environment (`READ_URL_FILE`/`READ_URL`,
//! `PUSH_URL_FILE`/`PUSH_URL`, files re-read on every call) whose scheme, host and path match the
//! request (restore sets `credential.useHttpPath`); when both match, `PUSH_URL` wins (it can write).
//! `store` and `erase` do nothing.
//!
//! # Security
//! stdout carries only `username=`/`password=` lines (git reads it as credentials); every message
//! goes to stderr. Nothing is written anywhere.

use std::io::{BufRead, Write};

use crate::error::{Error, Result};
use crate::inputs;
use crate::types::RemoteUrl;

/// Run the helper for `operation` (`get`, `store`, `erase`), reading the request from stdin.
///
/// # Errors
/// [`Error::Usage`] for an unknown operation; a URL variable that is set but invalid.
pub fn run(operation: &str) -> Result<()> {
    if operation != "get" {
        return match operation {
            "store" | "erase" => Ok(()),
            other => Err(Error::Usage(format!(
                "unknown credential operation '{other}' (git calls get, store, erase)"
            ))),
        };
    }
    let mut protocol = String::new();
    let mut host = String::new();
    let mut path = String::new();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Error::io("reading the credential request", e))?;
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once('=') {
            match k {
                "protocol" => protocol = v.to_owned(),
                "host" => host = v.to_owned(),
                "path" => path = v.trim_matches('/').to_owned(),
                _ => {}
            }
        }
    }
    let mut candidates: Vec<RemoteUrl> = Vec::new();
    for (var, file_var) in [("PUSH_URL", "PUSH_URL_FILE"), ("READ_URL", "READ_URL_FILE")] {
        if let Some(source) = inputs::url(None, var, file_var)? {
            candidates.push(source.load()?);
        }
    }
    let found = candidates.into_iter().find(|u| {
        let (p, h, pa) = u.credential_parts();
        p == protocol && h == host && (path.is_empty() || pa.trim_matches('/') == path)
    });
    let Some(url) = found.filter(RemoteUrl::has_credentials) else {
        eprintln!(
            "git-session credential: no session URL in the environment matches {protocol}://{host}/{path}"
        );
        return Ok(());
    };
    let c = url.credentials().expect("filtered on credentials");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "username={}", c.username.expose());
    let _ = writeln!(out, "password={}", c.password.expose());
    Ok(())
}
