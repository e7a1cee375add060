//! Commit signing (`git_session::signing`) judged by the real tools: keys made by `ssh-keygen`,
//! signatures checked by `ssh-keygen -Y verify` and by `git verify-commit` with an allowed-signers
//! file, and the other way round, `ssh-keygen -Y sign`'s signatures checked by the module.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use git_session::Error;
use git_session::error::SigningCause;
use git_session::signing::{MAX_KEY_FILE, PublicKey, SigningKey};

use crate::support::World;

/// The variable the key file's path comes from.
const KEY_FILE_VAR: &str = "SIGNING_KEY_FILE";

/// The key types git-session signs with, as `ssh-keygen -t` names them.
const TYPES: [&str; 3] = ["ed25519", "ecdsa", "rsa"];

const PAYLOAD: &[u8] =
    b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A <a@x> 1 +0000\n\nmsg\n";

/// Run `ssh-keygen` with `args` in `dir`, `stdin` fed; its output.
fn ssh_keygen(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = Command::new("ssh-keygen")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ssh-keygen (openssh-client) must be installed");
    // ssh-keygen exits before reading a payload when the signature is malformed.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

/// A new key of `kind` (`ed25519`, `ecdsa`, `rsa`, with `extra` arguments) at `dir/name`, with
/// the comment `name@test`; its path.
fn keygen(dir: &Path, kind: &str, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let comment = format!("{name}@test");
    let file = path.to_str().unwrap();
    // `extra` after the defaults: a later `-N` wins, so it may set a passphrase.
    let mut args = vec!["-q", "-t", kind, "-N", "", "-C", &comment];
    args.extend_from_slice(extra);
    args.extend(["-f", file]);
    let out = ssh_keygen(dir, &args, b"");
    assert!(out.status.success(), "ssh-keygen {args:?}: {out:?}");
    path
}

fn pub_line(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub"))
        .unwrap()
        .trim()
        .to_owned()
}

/// `ssh-keygen -Y verify` of `signature` over `payload` by `public` (one line) as `id`.
fn keygen_verifies(dir: &Path, public: &str, payload: &[u8], signature: &str) -> Output {
    let signers = dir.join("allowed_signers");
    std::fs::write(&signers, format!("id namespaces=\"git\" {public}\n")).unwrap();
    let sig = dir.join("payload.sig");
    std::fs::write(&sig, signature).unwrap();
    let args = [
        "-Y",
        "verify",
        "-f",
        signers.to_str().unwrap(),
        "-I",
        "id",
        "-n",
        "git",
        "-s",
        sig.to_str().unwrap(),
    ];
    ssh_keygen(dir, &args, payload)
}

/// `ssh-keygen -Y sign -n NAMESPACE -f key` of `payload`: the armored signature.
fn keygen_signs(dir: &Path, key: &Path, namespace: &str, payload: &[u8]) -> String {
    let file = dir.join("payload");
    std::fs::write(&file, payload).unwrap();
    let _ = std::fs::remove_file(dir.join("payload.sig"));
    let args = [
        "-Y",
        "sign",
        "-n",
        namespace,
        "-f",
        key.to_str().unwrap(),
        file.to_str().unwrap(),
    ];
    let out = ssh_keygen(dir, &args, b"");
    assert!(out.status.success(), "ssh-keygen -Y sign: {out:?}");
    std::fs::read_to_string(dir.join("payload.sig")).unwrap()
}

/// The cause and the message of a signing failure.
#[track_caller]
fn signing_cause(err: &Error) -> SigningCause {
    assert_eq!((err.exit_code(), err.kind()), (11, "signing"), "{err}");
    match err {
        Error::Signing(s) => s.cause,
        other => panic!("not a signing error: {other:?}"),
    }
}

/// The base64 lines of a key file (what holds the key's bytes), none shown in `text`.
#[track_caller]
fn assert_shows_no_key(key_file: &[u8], text: &str) {
    let key = String::from_utf8_lossy(key_file);
    for line in key.lines().map(str::trim) {
        if line.len() >= 16 && !line.starts_with("-----") {
            assert!(!text.contains(line), "the key's line {line} in:\n{text}");
        }
    }
}

#[test]
fn signatures_of_every_key_type_verify_with_ssh_keygen_and_match_its_own() {
    let w = World::new();
    let dir = w.tmp.path();
    for kind in TYPES {
        let key = keygen(dir, kind, &format!("id_{kind}"), &[]);
        let signer = SigningKey::from_file(&key, KEY_FILE_VAR).unwrap();
        let ours = signer.sign(PAYLOAD).unwrap();
        assert!(
            ours.starts_with("-----BEGIN SSH SIGNATURE-----\n")
                && ours.ends_with("-----END SSH SIGNATURE-----\n"),
            "{ours}"
        );
        let public = pub_line(&key);
        let out = keygen_verifies(dir, &public, PAYLOAD, &ours);
        assert!(
            out.status.success(),
            "{kind}: ssh-keygen -Y verify: {out:?}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Good \"git\" signature for id"),
            "{out:?}"
        );
        // The same signature checked against other bytes fails: the check above can fail.
        let out = keygen_verifies(dir, &public, b"other bytes", &ours);
        assert!(!out.status.success(), "{kind}: verified over other bytes");
        // Ed25519 and RSA (PKCS#1 v1.5) signatures are deterministic: byte for byte ssh-keygen's.
        if kind != "ecdsa" {
            assert_eq!(ours, keygen_signs(dir, &key, "git", PAYLOAD), "{kind}");
        }
        // The public half and the description are those ssh-keygen gives.
        assert_eq!(signer.public_key().to_openssh(), public);
        let listed = ssh_keygen(dir, &["-l", "-f", key.to_str().unwrap()], b"");
        assert!(listed.status.success(), "{listed:?}");
        let listed = String::from_utf8_lossy(&listed.stdout);
        assert_eq!(signer.describe().to_string(), listed.trim(), "{kind}");
        assert_eq!(
            PublicKey::parse(&public, "SIGNING_PUBLIC_KEY")
                .unwrap()
                .describe()
                .to_string(),
            listed.trim()
        );
        assert_shows_no_key(&std::fs::read(&key).unwrap(), &format!("{signer:?}"));
    }
}

#[test]
fn ssh_keygen_signatures_verify_and_every_other_signature_is_refused() {
    let w = World::new();
    let dir = w.tmp.path();
    let other = keygen(dir, "ed25519", "other", &[]);
    for kind in TYPES {
        let key = keygen(dir, kind, &format!("id_{kind}"), &[]);
        let public = PublicKey::parse(&pub_line(&key), "SIGNING_PUBLIC_KEY").unwrap();
        let theirs = keygen_signs(dir, &key, "git", PAYLOAD);
        public.verify(PAYLOAD, theirs.as_bytes()).unwrap();
        // Over other bytes, one byte more, or a payload cut short.
        for payload in [
            &b"other bytes"[..],
            &[PAYLOAD, b"\n"].concat(),
            &PAYLOAD[..PAYLOAD.len() - 1],
        ] {
            let err = public.verify(payload, theirs.as_bytes()).unwrap_err();
            assert_eq!(signing_cause(&err), SigningCause::SignatureInvalid, "{err}");
            assert!(err.to_string().contains("SIGNING_PUBLIC_KEY"), "{err}");
        }
        // By another key.
        let by_other = keygen_signs(dir, &other, "git", PAYLOAD);
        let err = public.verify(PAYLOAD, by_other.as_bytes()).unwrap_err();
        assert_eq!(signing_cause(&err), SigningCause::SignatureByAnotherKey);
        let other_fp = SigningKey::from_file(&other, KEY_FILE_VAR)
            .unwrap()
            .describe()
            .fingerprint;
        assert!(err.to_string().contains(&other_fp), "{err}");
        // For another namespace (a file signature is not a commit signature).
        let file_sig = keygen_signs(dir, &key, "file", PAYLOAD);
        let err = public.verify(PAYLOAD, file_sig.as_bytes()).unwrap_err();
        assert_eq!(signing_cause(&err), SigningCause::SignatureInvalid);
        assert!(err.to_string().contains("\"file\""), "{err}");
        // Garbage, an empty answer, the armor cut short, one character of the body changed.
        let mut flipped = theirs.clone().into_bytes();
        let at = flipped.len() / 2;
        flipped[at] = if flipped[at] == b'A' { b'B' } else { b'A' };
        let cut = &theirs.as_bytes()[..theirs.len() / 2];
        for bad in [&b"garbage"[..], b"", cut, &flipped] {
            let err = public
                .verify(PAYLOAD, bad)
                .expect_err(&String::from_utf8_lossy(bad));
            assert!(
                matches!(
                    signing_cause(&err),
                    SigningCause::SignatureMalformed
                        | SigningCause::SignatureInvalid
                        | SigningCause::SignatureByAnotherKey
                ),
                "{err}"
            );
        }
        let err = public.verify(PAYLOAD, b"garbage").unwrap_err();
        assert_eq!(signing_cause(&err), SigningCause::SignatureMalformed);
    }
}

#[test]
fn the_module_accepts_exactly_the_altered_signatures_ssh_keygen_accepts() {
    // Every character of the armor's body changed in turn: the module's verdict is ssh-keygen's
    // (ssh-key 0.6.7 alone read a blob whose length prefix was wrong).
    let w = World::new();
    let dir = w.tmp.path();
    let key = keygen(dir, "ed25519", "id", &[]);
    let line = pub_line(&key);
    let public = PublicKey::parse(&line, "SIGNING_PUBLIC_KEY").unwrap();
    let good = keygen_signs(dir, &key, "git", PAYLOAD);
    let body_start = good.find('\n').unwrap() + 1;
    let body_end = good.rfind("-----END").unwrap();
    let mut refused = 0;
    for at in body_start..body_end {
        let mut altered = good.clone().into_bytes();
        altered[at] = match altered[at] {
            b'\n' | b'=' => continue,
            b'A' => b'B',
            _ => b'A',
        };
        let ours = public.verify(PAYLOAD, &altered).is_ok();
        let theirs = keygen_verifies(dir, &line, PAYLOAD, std::str::from_utf8(&altered).unwrap())
            .status
            .success();
        assert_eq!(
            ours,
            theirs,
            "character {at} changed: the module says {ours}, ssh-keygen {theirs}:\n{}",
            String::from_utf8_lossy(&altered)
        );
        refused += usize::from(!ours);
    }
    // All but the version (ssh-keygen reads 0 as well as 1) and what decodes the same.
    assert!(refused > 200, "{refused}");
}

#[test]
fn a_public_key_that_is_no_key_or_of_another_type_is_refused_naming_its_variable() {
    let w = World::new();
    let dir = w.tmp.path();
    for text in [
        "",
        "garbage",
        "ssh-ed25519 AAAA",
        "-----BEGIN SSH SIGNATURE-----",
    ] {
        let err = PublicKey::parse(text, "SIGNING_PUBLIC_KEY").unwrap_err();
        assert_eq!(
            signing_cause(&err),
            SigningCause::PublicKeyMalformed,
            "{text}"
        );
        assert!(err.to_string().contains("SIGNING_PUBLIC_KEY"), "{err}");
    }
    let p384 = keygen(dir, "ecdsa", "p384", &["-b", "384"]);
    let err = PublicKey::parse(&pub_line(&p384), "SIGNING_PUBLIC_KEY").unwrap_err();
    assert_eq!(signing_cause(&err), SigningCause::KeyUnsupported);
    assert!(err.to_string().contains("ecdsa-sha2-nistp384"), "{err}");
    let small = keygen(dir, "rsa", "rsa-1024", &["-b", "1024"]);
    let err = PublicKey::parse(&pub_line(&small), "SIGNING_PUBLIC_KEY").unwrap_err();
    assert_eq!(signing_cause(&err), SigningCause::KeyUnsupported);
    assert!(err.to_string().contains("1024-bit RSA key"), "{err}");
}

/// A hostile `SIGNING_KEY_FILE`: its path, and the cause it must be refused for.
fn hostile_key_files(dir: &Path) -> Vec<(&'static str, PathBuf, SigningCause)> {
    use SigningCause::*;
    let mut cases = Vec::new();
    let mut file = |name: &'static str, bytes: &[u8], cause| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        cases.push((name, path, cause));
    };
    file("empty", b"", KeyEmpty);
    file("blank", b"\n  \n", KeyEmpty);
    file("garbage", b"not a key at all\n", KeyMalformed);
    file("binary", &[0xff, 0x00, 0x1b, 0x9b], KeyMalformed);
    file("huge", &vec![b'A'; MAX_KEY_FILE + 1], KeyMalformed);
    let key = std::fs::read(keygen(dir, "ed25519", "good", &[])).unwrap();
    let text = String::from_utf8(key.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The armor kept, the body cut in half: the key's own bytes, which no message may show.
    let cut = [&lines[..3], &lines[lines.len() - 1..]].concat().join("\n");
    file("truncated", cut.as_bytes(), KeyMalformed);
    // Each with ssh-keygen's own files.
    let mut made = |name: &'static str, kind: &str, extra: &[&str], cause| {
        let path = keygen(dir, kind, name, extra);
        cases.push((name, path, cause));
    };
    made("encrypted", "ed25519", &["-N", "passphrase"], KeyEncrypted);
    made("encrypted-rsa", "rsa", &["-N", "passphrase"], KeyEncrypted);
    made("p384", "ecdsa", &["-b", "384"], KeyUnsupported);
    // ssh-keygen makes it and signs with it; its signatures verify nowhere (the fuzzer found it
    // signing, then refusing its own signature).
    made("rsa-1024", "rsa", &["-b", "1024"], KeyUnsupported);
    made("pem-rsa", "rsa", &["-m", "PEM"], KeyUnsupported);
    made(
        "pem-rsa-encrypted",
        "rsa",
        &["-m", "PEM", "-N", "passphrase"],
        KeyEncrypted,
    );
    made("pkcs8-ecdsa", "ecdsa", &["-m", "PKCS8"], KeyUnsupported);
    cases.push(("public", dir.join("good.pub"), KeyIsPublic));
    cases.push(("missing", dir.join("no-such-key"), KeyMissing));
    cases.push(("missing-folder", dir.join("no/such/key"), KeyMissing));
    cases.push(("a folder", dir.to_path_buf(), KeyUnreadable));
    std::os::unix::fs::symlink(dir.join("gone"), dir.join("dangling")).unwrap();
    cases.push(("dangling", dir.join("dangling"), KeyMissing));
    if !crate::support::is_root() {
        use std::os::unix::fs::PermissionsExt as _;
        let path = keygen(dir, "ed25519", "unreadable", &[]);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
        cases.push(("unreadable", path, KeyUnreadable));
    }
    cases
}

#[test]
fn every_hostile_key_file_is_refused_for_its_cause_naming_the_variable_and_never_the_key() {
    let w = World::new();
    let dir = w.tmp.path().join("keys");
    std::fs::create_dir(&dir).unwrap();
    for (name, path, cause) in hostile_key_files(&dir) {
        let err = SigningKey::from_file(&path, KEY_FILE_VAR).unwrap_err();
        assert_eq!(signing_cause(&err), cause, "{name}: {err}");
        let message = err.to_string();
        assert!(message.contains(KEY_FILE_VAR), "{name}: {message}");
        assert!(
            message.contains(&path.display().to_string()),
            "{name}: {message}"
        );
        assert!(
            !message.contains('\x1b') && !message.contains('\n'),
            "{message}"
        );
        let debug = format!("{err:?}");
        for key in ["good", "encrypted", "encrypted-rsa", "pem-rsa", "truncated"] {
            let bytes = std::fs::read(dir.join(key)).unwrap();
            assert_shows_no_key(&bytes, &message);
            assert_shows_no_key(&bytes, &debug);
        }
    }
    // A symlink to a good key (a mounted secret is one) is followed.
    std::os::unix::fs::symlink(dir.join("good"), dir.join("link")).unwrap();
    SigningKey::from_file(&dir.join("link"), KEY_FILE_VAR).unwrap();
}

#[test]
fn a_key_file_with_windows_line_ends_or_blank_lines_around_still_signs() {
    let w = World::new();
    let dir = w.tmp.path();
    let key = keygen(dir, "ed25519", "id", &[]);
    let text = std::fs::read_to_string(&key).unwrap();
    let public = PublicKey::parse(&pub_line(&key), "SIGNING_PUBLIC_KEY").unwrap();
    for (name, variant) in [
        ("crlf", text.replace('\n', "\r\n")),
        ("blank-lines", format!("\n\n{text}\n\n")),
        ("no-final-newline", text.trim_end().to_owned()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, variant).unwrap();
        let signer =
            SigningKey::from_file(&path, KEY_FILE_VAR).unwrap_or_else(|e| panic!("{name}: {e}"));
        let signature = signer.sign(PAYLOAD).unwrap();
        public.verify(PAYLOAD, signature.as_bytes()).unwrap();
    }
}

#[test]
fn git_verify_commit_accepts_a_commit_whose_gpgsig_is_the_modules_signature() {
    let w = World::new();
    let repo = w.scratch("repo");
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    let head = w.commit_all(&repo, "first\n\nbody");
    let keys = w.tmp.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let signers = keys.join("allowed_signers");
    let mut allowed = String::new();
    let mut keys_made = Vec::new();
    for kind in TYPES {
        let key = keygen(&keys, kind, &format!("id_{kind}"), &[]);
        allowed.push_str(&format!("committer@example.com {}\n", pub_line(&key)));
        keys_made.push(key);
    }
    std::fs::write(&signers, allowed).unwrap();
    // The test repository's own config, never the machine's.
    w.git(
        &repo,
        &[
            "config",
            "gpg.ssh.allowedSignersFile",
            signers.to_str().unwrap(),
        ],
    );
    let commit = w.git_stdin_bytes(&repo, &["cat-file", "commit", &head], b"");
    for key in &keys_made {
        let signature = SigningKey::from_file(key, KEY_FILE_VAR)
            .unwrap()
            .sign(&commit)
            .unwrap();
        let signed = with_gpgsig(&commit, &signature);
        let id = w.git_stdin(
            &repo,
            &["hash-object", "-t", "commit", "-w", "--stdin"],
            &signed,
        );
        let out = w.git_output(&repo, &["verify-commit", "-v", &id]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", key.display());
        assert!(
            stderr.contains("Good \"git\" signature for committer@example.com"),
            "{stderr}"
        );
        // The same header on a commit with another message does not verify: the check can fail.
        let altered = String::from_utf8(signed).unwrap().replace("first", "fir5t");
        let id = w.git_stdin(
            &repo,
            &["hash-object", "-t", "commit", "-w", "--stdin"],
            altered.as_bytes(),
        );
        let out = w.git_output(&repo, &["verify-commit", &id]);
        assert!(!out.status.success(), "an altered commit verified");
    }
}

/// `commit` (a commit object's bytes) with a `gpgsig` header holding `signature` after its
/// headers, continuation lines starting with a space, as git writes it.
fn with_gpgsig(commit: &[u8], signature: &str) -> Vec<u8> {
    let end = commit
        .windows(2)
        .position(|w| w == b"\n\n")
        .expect("a commit has a blank line after its headers");
    let header = format!("gpgsig {}", signature.trim_end().replace('\n', "\n "));
    [
        &commit[..=end],
        header.as_bytes(),
        b"\n",
        &commit[end + 1..],
    ]
    .concat()
}

#[test]
fn a_key_file_whose_public_half_was_altered_is_refused_as_damaged_not_used() {
    // The fuzzer's find: an ECDSA key file that decodes, whose public half is not its private
    // half's, so every signature it makes fails verification.
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/signing/ecdsa-public-half-altered");
    let err = match SigningKey::from_file(&path, KEY_FILE_VAR) {
        Ok(key) => key.sign(PAYLOAD).unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(signing_cause(&err), SigningCause::KeyMalformed, "{err}");
    assert!(err.to_string().contains("damaged key file"), "{err}");
}
