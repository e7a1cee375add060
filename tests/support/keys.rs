//! SSH keys made by the real `ssh-keygen`, and the real tools' judgement of signed commits:
//! `git verify-commit` with an allowed-signers file (the set-up every signing test shares).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::World;

/// A new unencrypted key of `kind` (`ed25519`, `ecdsa`, `rsa`) at `dir/name`, made by
/// `ssh-keygen`; its path (the public half beside it, `.pub`).
pub fn keygen(dir: &Path, kind: &str, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            kind,
            "-N",
            "",
            "-C",
            &format!("{name}@test"),
            "-f",
        ])
        .arg(&path)
        .env("HOME", dir)
        .output()
        .expect("ssh-keygen (openssh-client) must be installed");
    assert!(out.status.success(), "ssh-keygen: {out:?}");
    path
}

/// The one-line public key beside the private key `key`.
pub fn public_line(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub"))
        .unwrap()
        .trim()
        .to_owned()
}

/// An allowed-signers file at `dir/allowed_signers` trusting `keys` for every principal.
pub fn allowed_signers(dir: &Path, keys: &[&Path]) -> PathBuf {
    let path = dir.join("allowed_signers");
    let text: String = keys
        .iter()
        .map(|k| format!("* {}\n", public_line(k)))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `git verify-commit` of `commit` in `repo` against `allowed` (with the real `ssh-keygen`):
/// whether it verified, and git's words.
pub fn verify_commit(w: &World, repo: &Path, allowed: &Path, commit: &str) -> (bool, String) {
    let allowed = allowed.display().to_string();
    let out = w.git_output_with_env(
        repo,
        &[
            "-c",
            "gpg.format=ssh",
            "-c",
            "gpg.ssh.program=ssh-keygen",
            "-c",
            &format!("gpg.ssh.allowedSignersFile={allowed}"),
            "verify-commit",
            "-v",
            commit,
        ],
        &[],
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
