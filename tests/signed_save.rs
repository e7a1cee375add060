//! `save` and `watch` with signing set up (`SIGNING_KEY_FILE`, `SIGNING_URL`): every commit they
//! make is signed, judged by `git verify-commit` with an allowed-signers file on the server's copy;
//! a signing failure commits nothing (exit 11, HEAD unchanged, the work kept in the tree).

use std::path::{Path, PathBuf};

use crate::push::Setup;
use crate::support::keys::{allowed_signers, keygen, verify_commit};

const BRANCH: &str = "sessions/signed";

/// A restored sandbox, a key of `kind` made by `ssh-keygen` beside it, and an edit to save.
fn signed_sandbox(s: &Setup, kind: &str) -> (PathBuf, PathBuf) {
    let dir = s.sandbox("sandbox", BRANCH, s.ids.last().unwrap());
    let key = keygen(&s.w.path("keys"), kind, &format!("agent-{kind}"));
    std::fs::write(dir.join("README.md"), "edited by the agent\n").unwrap();
    (dir, key)
}

fn save(s: &Setup, dir: &Path, vars: &[(&str, &str)]) -> crate::support::Run {
    let url = s.url();
    let mut all = vec![("PUSH_URL", url.as_str())];
    all.extend_from_slice(vars);
    s.w.run(dir, &["save", "-m", "Signed save", "--json"], &all)
}

#[test]
fn save_with_a_key_file_pushes_commits_git_verify_commit_accepts() {
    for kind in ["ed25519", "ecdsa", "rsa"] {
        let s = Setup::new();
        let (dir, key) = signed_sandbox(&s, kind);
        let run = save(&s, &dir, &[("SIGNING_KEY_FILE", key.to_str().unwrap())]);
        run.assert_code(0);
        let commit = run.json()["commit"].as_str().unwrap().to_owned();
        assert_eq!(s.remote(BRANCH).as_deref(), Some(commit.as_str()), "{kind}");
        let allowed = allowed_signers(&s.w.path("keys"), &[&key]);
        let (ok, words) = verify_commit(&s.w, &s.bare(), &allowed, &commit);
        assert!(
            ok,
            "{kind}: git verify-commit refused the saved commit: {words}"
        );
        assert!(words.contains("Good \"git\" signature"), "{kind}: {words}");
        // Another key's allowed-signers file: the signature is the key's, not any key's.
        let other = keygen(&s.w.path("other"), "ed25519", "other");
        let others = allowed_signers(&s.w.path("other"), &[&other]);
        let (ok, words) = verify_commit(&s.w, &s.bare(), &others, &commit);
        assert!(!ok, "{kind}: verified against another key: {words}");
    }
}

#[test]
fn a_key_file_that_cannot_sign_commits_nothing_and_keeps_the_work() {
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "ed25519");
    let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
    let keys = s.w.path("keys");
    let empty = keys.join("empty");
    std::fs::write(&empty, "").unwrap();
    let encrypted = keys.join("encrypted");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "a passphrase", "-f"])
        .arg(&encrypted)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let public = key.with_extension("pub");
    for (file, words) in [
        (&empty, "is empty"),
        (&encrypted, "passphrase-protected"),
        (&public, "holds a public key"),
    ] {
        let run = save(&s, &dir, &[("SIGNING_KEY_FILE", file.to_str().unwrap())]);
        run.assert_says(11, &["SIGNING_KEY_FILE", words]);
        assert_eq!(run.json()["error"]["kind"], "signing", "{}", run.stdout);
        assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), head, "{words}");
        assert_eq!(s.remote(BRANCH), None, "nothing reached the server");
        let status = s.w.git(&dir, &["status", "--porcelain"]);
        assert!(status.contains("README.md"), "the edit is kept: {status}");
        // Nothing of the key in what the run showed (the public key is no secret).
        let private = std::fs::read_to_string(&key).unwrap();
        for line in private.lines().filter(|l| !l.starts_with("-----")).skip(2) {
            assert!(!run.stdout.contains(line) && !run.stderr.contains(line));
        }
    }
}

crate::sha256_too!(save_with_a_key_file_pushes_commits_git_verify_commit_accepts);
