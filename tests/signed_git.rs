//! Plain git signs through git-session: restore with `SIGNING_*` sets `gpg.format = ssh`,
//! `commit.gpgSign`, `user.signingKey = key::…` and `gpg.ssh.program` = git-session, which
//! answers git's `ssh-keygen -Y sign`. Every commit `git commit`, `--amend`, `rebase` and
//! `merge --no-ff` make is judged by `git verify-commit` with the real `ssh-keygen`, while git
//! itself runs with no `ssh-keygen` on its `PATH` and (but where said) no `SIGNING_*`.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::push::Setup;
use crate::support::keys::{allowed_signers, keygen, public_line, verify_commit};
use crate::support::{World, session_record};

const BRANCH: &str = "sessions/plain-signed";

/// A folder holding only a link to `git`: git's `PATH` without `ssh-keygen` (git finds its own
/// programs through its exec path, which the link keeps).
fn path_without_ssh_keygen(w: &World) -> String {
    let bin = w.path("no-ssh-keygen-bin");
    if !bin.exists() {
        std::fs::create_dir_all(&bin).unwrap();
        let git = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join("git"))
            .find(|p| p.is_file())
            .expect("git on PATH");
        std::os::unix::fs::symlink(git, bin.join("git")).unwrap();
    }
    assert_eq!(crate::support::names_in(&bin), ["git"]);
    bin.display().to_string()
}

/// Plain git in `dir` with no `ssh-keygen` on its `PATH`, `vars` besides.
fn git_bare_path(w: &World, dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let path = path_without_ssh_keygen(w);
    let mut all = vec![("PATH", path.as_str())];
    all.extend_from_slice(vars);
    let out = w.git_output_with_env(dir, args, &all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No such file"),
        "git could not run something without PATH: {stderr}"
    );
    out
}

/// [`git_bare_path`], which must succeed; its stdout.
#[track_caller]
fn git_ok(w: &World, dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> String {
    let out = git_bare_path(w, dir, args, vars);
    assert!(
        out.status.success(),
        "git {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A sandbox restored with `SIGNING_KEY_FILE` naming a new key of `kind`; the key's path.
fn signed_sandbox(s: &Setup, name: &str, kind: &str) -> (PathBuf, PathBuf) {
    let key = keygen(&s.w.path("keys"), kind, &format!("{name}-{kind}"));
    let dir = s.w.path(name);
    let vars = [("SIGNING_KEY_FILE", key.to_str().unwrap())];
    s.w.restore_with(&dir, &s.url(), BRANCH, s.ids.last().unwrap(), &[], &vars)
        .assert_code(0);
    (dir, key)
}

/// Edit `file` and commit it with plain git (no `ssh-keygen`, `vars` besides); the new `HEAD`.
fn commit(s: &Setup, dir: &Path, file: &str, vars: &[(&str, &str)]) -> String {
    std::fs::write(dir.join(file), format!("{file} by the agent\n")).unwrap();
    git_ok(&s.w, dir, &["add", "-A"], vars);
    git_ok(&s.w, dir, &["commit", "-qm", &format!("edit {file}")], vars);
    s.w.git(dir, &["rev-parse", "HEAD"])
}

/// `commit` is signed by `key`: `git verify-commit` (the real `ssh-keygen`) accepts it, and its
/// signature header is the repository's format's.
#[track_caller]
fn assert_signed(s: &Setup, dir: &Path, key: &Path, commit: &str) {
    let allowed = allowed_signers(&s.w.path("keys"), &[key]);
    let (ok, words) = verify_commit(&s.w, dir, &allowed, commit);
    assert!(ok, "git verify-commit refused {commit}: {words}");
    assert!(words.contains("Good \"git\" signature"), "{words}");
    let header = if crate::support::object_format() == "sha256" {
        "\ngpgsig-sha256 -----BEGIN SSH SIGNATURE-----"
    } else {
        "\ngpgsig -----BEGIN SSH SIGNATURE-----"
    };
    let raw = s.w.git(dir, &["cat-file", "commit", commit]);
    assert!(raw.contains(header), "{raw}");
}

/// The base64 lines of the private key file `key` (what must never be copied anywhere), but for
/// those that encode only the public key (the file holds it too: a line at the same alignment as
/// the public key's base64 is a piece of it).
fn private_lines(key: &Path) -> Vec<String> {
    let public = public_line(key);
    std::fs::read_to_string(key)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 16 && !public.contains(l))
        .map(str::to_owned)
        .collect()
}

/// No file below `dir` holds a line of the private key `key`.
#[track_caller]
fn assert_no_private_key_in(dir: &Path, key: &Path) {
    let lines = private_lines(key);
    assert!(!lines.is_empty());
    for file in crate::support::all_files(dir) {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for line in &lines {
            assert!(
                !text.contains(line.as_str()),
                "{} holds the private key",
                file.display()
            );
        }
    }
}

/// `git config --get KEY` in `dir` (`None`: not set).
fn config(w: &World, dir: &Path, key: &str) -> Option<String> {
    let out = w.git_output(dir, &["config", "--get", key]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The public key `key::…` names: the `.pub` line without its comment.
fn signing_key_value(key: &Path) -> String {
    let line = public_line(key);
    let fields: Vec<&str> = line.split_whitespace().take(2).collect();
    format!("key::{}", fields.join(" "))
}

#[test]
fn plain_git_commit_amend_rebase_and_merge_sign_with_no_ssh_keygen() {
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "sandbox", "ed25519");
    let w = &s.w;
    // What restore wrote, as git reads it.
    assert_eq!(config(w, &dir, "gpg.format").as_deref(), Some("ssh"));
    assert_eq!(config(w, &dir, "commit.gpgsign").as_deref(), Some("true"));
    assert_eq!(
        config(w, &dir, "user.signingkey"),
        Some(signing_key_value(&key))
    );
    let program = config(w, &dir, "gpg.ssh.program").unwrap();
    assert_eq!(
        Path::new(&program).canonicalize().unwrap(),
        Path::new(env!("CARGO_BIN_EXE_git-session"))
            .canonicalize()
            .unwrap()
    );
    let record = session_record(&dir)["signing"].clone();
    assert_eq!(record["source"], "key-file", "{record}");
    assert_eq!(record["key_file"], key.to_str().unwrap(), "{record}");
    assert!(config(w, &dir, "tag.gpgsign").is_none(), "commits only");

    // No SIGNING_* in git's environment: the session record says where the key is.
    let first = commit(&s, &dir, "README.md", &[]);
    assert_signed(&s, &dir, &key, &first);
    git_ok(w, &dir, &["commit", "-q", "--amend", "-m", "amended"], &[]);
    let amended = w.git(&dir, &["rev-parse", "HEAD"]);
    assert_ne!(amended, first);
    assert_signed(&s, &dir, &key, &amended);
    commit(&s, &dir, "b.txt", &[]);
    commit(&s, &dir, "c.txt", &[]);
    git_ok(w, &dir, &["rebase", "-q", "--force-rebase", "HEAD~2"], &[]);
    for rev in ["HEAD", "HEAD~1"] {
        let id = w.git(&dir, &["rev-parse", rev]);
        assert_signed(&s, &dir, &key, &id);
    }
    git_ok(w, &dir, &["checkout", "-q", "-b", "side", "HEAD~1"], &[]);
    commit(&s, &dir, "side.txt", &[]);
    git_ok(w, &dir, &["checkout", "-q", BRANCH], &[]);
    git_ok(
        w,
        &dir,
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
        &[],
    );
    let merge = w.git(&dir, &["rev-parse", "HEAD"]);
    assert_eq!(
        w.git(&dir, &["rev-list", "--parents", "-n1", "HEAD"])
            .split(' ')
            .count(),
        3
    );
    assert_signed(&s, &dir, &key, &merge);
    git_ok(w, &dir, &["checkout", "-q", "-b", "picked", "HEAD~1"], &[]);
    let side = w.git(&dir, &["rev-parse", "side"]);
    git_ok(w, &dir, &["cherry-pick", side.as_str()], &[]);
    let picked = w.git(&dir, &["rev-parse", "HEAD"]);
    assert_ne!(picked, side);
    assert_signed(&s, &dir, &key, &picked);
    git_ok(w, &dir, &["checkout", "-q", BRANCH], &[]);
    // A tag is signed when asked (`tag.gpgSign` is not set).
    git_ok(w, &dir, &["tag", "-s", "-m", "signed tag", "v1"], &[]);
    let allowed = allowed_signers(&w.path("keys"), &[&key]);
    let allowed_arg = format!("gpg.ssh.allowedSignersFile={}", allowed.display());
    let verify_tag = [
        "-c",
        "gpg.ssh.program=ssh-keygen",
        "-c",
        allowed_arg.as_str(),
        "verify-tag",
        "v1",
    ];
    w.git(&dir, &verify_tag);

    // With SIGNING_KEY_FILE in git's environment too.
    let vars = [("SIGNING_KEY_FILE", key.to_str().unwrap())];
    let with_env = commit(&s, &dir, "d.txt", &vars);
    assert_signed(&s, &dir, &key, &with_env);
    assert_no_private_key_in(&dir.join(".git"), &key);
}

#[test]
fn ecdsa_and_rsa_keys_sign_plain_commits_too() {
    let s = Setup::new();
    for kind in ["ecdsa", "rsa"] {
        let (dir, key) = signed_sandbox(&s, &format!("sandbox-{kind}"), kind);
        let id = commit(&s, &dir, "README.md", &[]);
        assert_signed(&s, &dir, &key, &id);
        assert_no_private_key_in(&dir.join(".git"), &key);
    }
}

/// git runs its signer in the work tree's top folder; in a linked work tree (`git worktree add`)
/// it names the git dir, whose common dir holds the session record: both sign.
#[test]
fn commits_from_a_subfolder_and_a_linked_work_tree_are_signed() {
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "sandbox", "ed25519");
    std::fs::write(dir.join("src/a.rs"), "edited\n").unwrap();
    git_ok(
        &s.w,
        &dir.join("src"),
        &["commit", "-qam", "from src/"],
        &[],
    );
    let id = s.w.git(&dir, &["rev-parse", "HEAD"]);
    assert_signed(&s, &dir, &key, &id);
    let linked = s.w.path("linked");
    let linked_arg = linked.to_str().unwrap();
    git_ok(
        &s.w,
        &dir,
        &["worktree", "add", "-q", "-b", "other", linked_arg],
        &[],
    );
    let id = commit(&s, &linked, "README.md", &[]);
    assert_signed(&s, &linked, &key, &id);
}

/// The key file made unusable after the restore: `git commit` fails with git-session's words,
/// no commit is made, and git-session itself exits 11.
#[test]
fn a_key_that_cannot_sign_fails_git_commit_and_commits_nothing() {
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "sandbox", "ed25519");
    let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
    let private = std::fs::read(&key).unwrap();
    let encrypted = keygen(&s.w.path("other"), "ed25519", "locked");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-p", "-N", "a passphrase", "-P", "", "-f"])
        .arg(&encrypted)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let cases: [(&str, Option<Vec<u8>>, &str); 4] = [
        ("empty", Some(Vec::new()), "is empty"),
        ("missing", None, "does not exist"),
        (
            "encrypted",
            Some(std::fs::read(&encrypted).unwrap()),
            "passphrase-protected",
        ),
        (
            "public",
            Some(public_line(&key).into_bytes()),
            "holds a public key",
        ),
    ];
    std::fs::write(dir.join("README.md"), "work to commit\n").unwrap();
    s.w.git(&dir, &["add", "-A"]);
    for (case, content, words) in cases {
        match &content {
            Some(bytes) => std::fs::write(&key, bytes).unwrap(),
            None => std::fs::remove_file(&key).unwrap(),
        }
        let out = git_bare_path(&s.w, &dir, &["commit", "-qm", "unsigned?"], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{case}: git commit succeeded");
        for said in ["git-session could not sign", "SIGNING_KEY_FILE", words] {
            assert!(stderr.contains(said), "{case}: no {said:?} in {stderr}");
        }
        assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), head, "{case}");
    }
    // git-session's own exit, and no signature file beside the payload.
    let tmp = s.w.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let payload = tmp.join("payload");
    std::fs::write(&payload, "tree x\n").unwrap();
    let pubfile = tmp.join("asked.pub");
    let asked = signing_key_value(&key);
    std::fs::write(&pubfile, asked.trim_start_matches("key::")).unwrap();
    let args = [
        "-Y",
        "sign",
        "-n",
        "git",
        "-f",
        pubfile.to_str().unwrap(),
        "-U",
        payload.to_str().unwrap(),
    ];
    let run = s.w.run(&dir, &args, &[]);
    run.assert_says(11, &["could not sign", "holds a public key"]);
    assert_eq!(crate::support::names_in(&tmp), ["asked.pub", "payload"]);
    // The key back: git-session as ssh-keygen writes `<payload>.sig` (0644, as ssh-keygen
    // does), which ssh-keygen accepts, and nothing else; then the same commit signs.
    std::fs::write(&key, &private).unwrap();
    s.w.run(&dir, &args, &[]).assert_code(0);
    assert_eq!(
        crate::support::names_in(&tmp),
        ["asked.pub", "payload", "payload.sig"]
    );
    assert_eq!(crate::support::mode_of(&tmp.join("payload.sig")), 0o644);
    let check = std::process::Command::new("ssh-keygen")
        .args(["-Y", "check-novalidate", "-n", "git", "-s"])
        .arg(tmp.join("payload.sig"))
        .stdin(std::fs::File::open(&payload).unwrap())
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    git_ok(&s.w, &dir, &["commit", "-qm", "signed now"], &[]);
    let id = s.w.git(&dir, &["rev-parse", "HEAD"]);
    assert_signed(&s, &dir, &key, &id);
}

/// `SIGNING_KEY_FILE` in git's environment naming another key than `user.signingKey`: refused,
/// naming both fingerprints.
#[test]
fn another_key_than_the_one_git_asks_for_is_refused() {
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "sandbox", "ed25519");
    let other = keygen(&s.w.path("other"), "ed25519", "other");
    let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("README.md"), "work\n").unwrap();
    s.w.git(&dir, &["add", "-A"]);
    let vars = [("SIGNING_KEY_FILE", other.to_str().unwrap())];
    let out = git_bare_path(&s.w, &dir, &["commit", "-qm", "x"], &vars);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fingerprint = |k: &Path| {
        let out = std::process::Command::new("ssh-keygen")
            .arg("-lf")
            .arg(k)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_owned()
    };
    for said in [
        fingerprint(&key),
        fingerprint(&other),
        "user.signingKey".into(),
    ] {
        assert!(stderr.contains(&said), "no {said} in {stderr}");
    }
    assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), head);
}

/// A restore without `SIGNING_*` sets nothing up; a rerun with it does (and a new key replaces
/// the old); a rerun without keeps what is there, since the shell an agent reruns restore in may
/// lack `SIGNING_*`.
#[test]
fn restore_sets_signing_up_only_when_asked_and_a_rerun_without_keeps_it() {
    let s = Setup::new();
    let w = &s.w;
    let dir = s.sandbox("sandbox", BRANCH, s.ids.last().unwrap());
    for key in [
        "gpg.format",
        "gpg.ssh.program",
        "commit.gpgsign",
        "user.signingkey",
    ] {
        assert_eq!(config(w, &dir, key), None, "{key}");
    }
    assert!(session_record(&dir).get("signing").is_none());
    let unsigned = commit(&s, &dir, "a.txt", &[]);
    assert!(
        !w.git(&dir, &["cat-file", "commit", &unsigned])
            .contains("gpgsig")
    );

    let rerun = |vars: &[(&str, &str)]| {
        let run = w.restore_with(&dir, &s.url(), BRANCH, s.ids.last().unwrap(), &[], vars);
        run.assert_code(0);
        run
    };
    let key = keygen(&w.path("keys"), "ed25519", "first");
    rerun(&[("SIGNING_KEY_FILE", key.to_str().unwrap())]);
    assert_eq!(
        config(w, &dir, "user.signingkey"),
        Some(signing_key_value(&key))
    );
    let id = commit(&s, &dir, "b.txt", &[]);
    assert_signed(&s, &dir, &key, &id);

    let newer = keygen(&w.path("keys"), "ecdsa", "second");
    rerun(&[("SIGNING_KEY_FILE", newer.to_str().unwrap())]);
    assert_eq!(
        config(w, &dir, "user.signingkey"),
        Some(signing_key_value(&newer))
    );
    assert_eq!(
        session_record(&dir)["signing"]["key_file"],
        newer.to_str().unwrap()
    );
    let id = commit(&s, &dir, "c.txt", &[]);
    assert_signed(&s, &dir, &newer, &id);

    rerun(&[]);
    assert_eq!(
        config(w, &dir, "user.signingkey"),
        Some(signing_key_value(&newer))
    );
    let id = commit(&s, &dir, "d.txt", &[]);
    assert_signed(&s, &dir, &newer, &id);
    // One value of each key: git reads them as set once.
    let all = w.git(&dir, &["config", "--get-all", "user.signingkey"]);
    assert_eq!(all.lines().count(), 1, "{all}");
}

/// A key that cannot sign at restore time fails the restore (exit 11) before anything is
/// written: a tree whose commits could not be signed is never left behind.
#[test]
fn a_restore_with_a_key_that_cannot_sign_writes_nothing() {
    let s = Setup::new();
    let empty = s.w.path("keys/empty");
    std::fs::create_dir_all(empty.parent().unwrap()).unwrap();
    std::fs::write(&empty, "").unwrap();
    let dir = s.w.path("sandbox");
    let vars = [("SIGNING_KEY_FILE", empty.to_str().unwrap())];
    let run =
        s.w.restore_with(&dir, &s.url(), BRANCH, s.ids.last().unwrap(), &[], &vars);
    run.assert_says(11, &["SIGNING_KEY_FILE", "is empty"]);
    assert!(crate::support::left_nothing(&dir));
}

/// A baked template carries no signing; its boot (and a restore seeded from it with `--cache`)
/// sets up what the boot's environment says.
#[test]
fn a_boot_and_a_cache_seeded_restore_set_signing_up() {
    let b = crate::bake::Baked::new();
    let w = &b.w;
    let tree = w.path("template");
    b.bake(&tree).assert_code(0);
    assert_eq!(
        config(w, &tree, "gpg.format"),
        None,
        "an image carries no key"
    );
    let key = keygen(&w.path("keys"), "ed25519", "boot");
    let vars = [("SIGNING_KEY_FILE", key.to_str().unwrap())];
    let cache = w.path("cache");
    b.bake(&cache).assert_code(0);
    let seeded = w.path("seeded");
    let cache_arg = cache.to_str().unwrap();
    for (dir, flags) in [(&tree, vec![]), (&seeded, vec!["--cache", cache_arg])] {
        b.boot(dir, &vars, &flags).assert_code(0);
        assert_eq!(
            config(w, dir, "user.signingkey"),
            Some(signing_key_value(&key))
        );
        std::fs::write(dir.join("keep.txt"), "edited\n").unwrap();
        git_ok(w, dir, &["commit", "-qam", "booted"], &[]);
        let id = w.git(dir, &["rev-parse", "HEAD"]);
        let allowed = allowed_signers(&w.path("keys"), &[&key]);
        let (ok, words) = verify_commit(w, dir, &allowed, &id);
        assert!(ok, "{}: {words}", dir.display());
    }
    // Booted without SIGNING_*: nothing set up.
    let plain = w.path("plain");
    b.bake(&plain).assert_code(0);
    b.boot(&plain, &[], &[]).assert_code(0);
    assert_eq!(config(w, &plain, "gpg.format"), None);
    assert!(session_record(&plain).get("signing").is_none());
}

/// An archive restore sets signing up as a git restore does.
#[test]
fn an_archive_restore_sets_signing_up() {
    let w = World::new();
    let real = crate::support::real_repo::RealServed::new(&w, "plain");
    let tip = &real.ids[0];
    let archive = crate::support::real_repo::git_archive(&w, &real.bare, tip, None, "a.tar.gz");
    let key = keygen(&w.path("keys"), "ed25519", "archive");
    let dir = w.path("sandbox");
    let vars = [
        ("READ_URL", real.read.as_str()),
        ("SIGNING_KEY_FILE", key.to_str().unwrap()),
    ];
    crate::restore_archive::restore_env(&w, &dir, &archive, tip, &[], &vars).assert_code(0);
    assert_eq!(
        config(&w, &dir, "user.signingkey"),
        Some(signing_key_value(&key))
    );
    assert_eq!(session_record(&dir)["signing"]["source"], "key-file");
    std::fs::write(dir.join("new.txt"), "new\n").unwrap();
    git_ok(&w, &dir, &["add", "-A"], &[]);
    git_ok(&w, &dir, &["commit", "-qm", "on an archive"], &[]);
    let id = w.git(&dir, &["rev-parse", "HEAD"]);
    let allowed = allowed_signers(&w.path("keys"), &[&key]);
    let (ok, words) = verify_commit(&w, &dir, &allowed, &id);
    assert!(ok, "{words}");
}

/// A signing service: restore records `SIGNING_URL_FILE`'s path and `SIGNING_PUBLIC_KEY`, never
/// a URL that carries credentials (a warning says plain git then needs `SIGNING_URL` in its
/// environment, and git commit says so when it is missing).
#[test]
fn a_service_is_recorded_by_its_url_file_and_never_by_a_secret_url() {
    let s = Setup::new();
    let w = &s.w;
    let service_key = keygen(&w.path("keys"), "ed25519", "service");
    let public = public_line(&service_key);
    let url_file = w.path("signing-url");
    let secret_url = format!("http://{}@127.0.0.1:9/sign", crate::support::userinfo());
    std::fs::write(&url_file, &secret_url).unwrap();
    let dir = w.path("by-file");
    let vars = [
        ("SIGNING_URL_FILE", url_file.to_str().unwrap()),
        ("SIGNING_PUBLIC_KEY", public.as_str()),
    ];
    w.restore_with(&dir, &s.url(), BRANCH, s.ids.last().unwrap(), &[], &vars)
        .assert_code(0);
    let record = session_record(&dir)["signing"].clone();
    assert_eq!(record["source"], "service", "{record}");
    assert_eq!(record["url_file"], url_file.to_str().unwrap(), "{record}");
    assert_eq!(
        config(w, &dir, "user.signingkey"),
        Some(signing_key_value(&service_key))
    );
    crate::support::assert_no_secret_in_files(&dir.join(".git"));

    let dir = w.path("by-url");
    let vars = [
        ("SIGNING_URL", secret_url.as_str()),
        ("SIGNING_PUBLIC_KEY", public.as_str()),
    ];
    let run = w.restore_with(&dir, &s.url(), BRANCH, s.ids.last().unwrap(), &[], &vars);
    run.assert_code(0);
    assert!(
        run.stderr.contains("SIGNING_URL carries credentials"),
        "{}",
        run.stderr
    );
    let record = session_record(&dir)["signing"].clone();
    assert!(
        record.get("url").is_none() && record.get("url_file").is_none(),
        "{record}"
    );
    crate::support::assert_no_secret_in_files(&dir.join(".git"));
    let head = w.git(&dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("README.md"), "work\n").unwrap();
    let out = git_bare_path(w, &dir, &["commit", "-qam", "x"], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SIGNING_URL") && stderr.contains("not in git's environment"),
        "{stderr}"
    );
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), head);
}

/// git checks signatures through `gpg.ssh.program` too: with `ssh-keygen` on `PATH` git-session
/// hands `verify` and `find-principals` to it; without, `git verify-commit` fails saying what is
/// missing, and shows the signature's key (git-session's `check-novalidate`).
#[test]
fn verification_through_git_session_needs_ssh_keygen_for_allowed_signers() {
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "sandbox", "ed25519");
    let id = commit(&s, &dir, "README.md", &[]);
    let allowed = allowed_signers(&s.w.path("keys"), &[&key]);
    let allowed_arg = format!("gpg.ssh.allowedSignersFile={}", allowed.display());
    let args = ["-c", allowed_arg.as_str(), "verify-commit", id.as_str()];
    let out = s.w.git_output(&dir, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = git_bare_path(&s.w, &dir, &args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("needs OpenSSH's ssh-keygen"), "{stderr}");
    assert!(
        stderr.contains("Good \"git\" signature with ED25519 key SHA256:"),
        "{stderr}"
    );
}

crate::sha256_too!(plain_git_commit_amend_rebase_and_merge_sign_with_no_ssh_keygen);

/// Through the reference signing service: restore with `SIGNING_URL_FILE` (the URL with its
/// token in the file) and `SIGNING_PUBLIC_KEY`; plain `git commit` with neither in its
/// environment signs through the service, the file re-read; a service answering garbage fails
/// the commit with git-session's words, no commit made.
#[test]
fn plain_git_signs_through_a_signing_service() {
    use crate::support::signing_service::SigningService;
    let s = Setup::new();
    let w = &s.w;
    let key = keygen(&w.path("keys"), "ed25519", "service");
    let public = public_line(&key);
    let service = SigningService::start(&w.path("service"), &key, "sign", &[]);
    let url_file = w.path("signing-url");
    std::fs::write(&url_file, service.url()).unwrap();
    let dir = w.path("sandbox");
    let vars = [
        ("SIGNING_URL_FILE", url_file.to_str().unwrap()),
        ("SIGNING_PUBLIC_KEY", public.as_str()),
    ];
    w.restore_with(&dir, &s.url(), BRANCH, s.ids.last().unwrap(), &[], &vars)
        .assert_code(0);
    assert!(service.requests().is_empty(), "restore asks nothing");
    let id = commit(&s, &dir, "README.md", &[]);
    assert_signed(&s, &dir, &key, &id);
    assert_eq!(service.requests(), ["POST /sign 200"]);
    crate::support::assert_no_secret_in_files(&dir.join(".git"));

    let garbage = SigningService::start(&w.path("garbage"), &key, "garbage", &[]);
    std::fs::write(&url_file, garbage.url()).unwrap();
    let head = w.git(&dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("README.md"), "more work\n").unwrap();
    let out = git_bare_path(w, &dir, &["commit", "-qam", "x"], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for said in [
        "git-session could not sign",
        "is not an SSH signature",
        "SIGNING_URL_FILE",
    ] {
        assert!(stderr.contains(said), "no {said:?} in {stderr}");
    }
    crate::support::assert_no_secret("git's stderr", stderr.as_bytes());
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), head);
    assert_eq!(garbage.requests(), ["POST /sign 200"]);
}

#[test]
fn save_in_a_shell_without_signing_variables_signs_as_restore_set_up() {
    // The agent's shell lacks SIGNING_*: save signs with the source restore recorded, as plain
    // git commit there does (it committed unsigned before).
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "sandbox", "ed25519");
    std::fs::write(dir.join("README.md"), "saved by the agent\n").unwrap();
    let url = s.url();
    let run = s.w.run(
        &dir,
        &["save", "-m", "Saved without SIGNING_*", "--json"],
        &[("PUSH_URL", url.as_str())],
    );
    run.assert_code(0);
    assert_eq!(run.json()["signed"], true, "{}", run.stdout);
    let commit = run.json()["commit"].as_str().unwrap().to_owned();
    assert_signed(&s, &dir, &key, &commit);
    // A key file gone since the restore: nothing is committed, the work stays.
    std::fs::write(dir.join("README.md"), "again\n").unwrap();
    std::fs::remove_file(&key).unwrap();
    let run = s.w.run(
        &dir,
        &["save", "-m", "again", "--json"],
        &[("PUSH_URL", url.as_str())],
    );
    run.assert_says(11, &["SIGNING_KEY_FILE", "does not exist"]);
    assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), commit);
}

#[test]
fn status_in_a_shell_without_signing_variables_shows_what_restore_recorded() {
    let s = Setup::new();
    let (dir, key) = signed_sandbox(&s, "sandbox", "ed25519");
    let run = s.w.run(&dir, &["status", "--json"], &[]);
    run.assert_code(0);
    let signing = &run.json()["signing"];
    assert_eq!(signing["source"], "key_file", "{}", run.stdout);
    assert_eq!(signing["key_file"], key.to_str().unwrap());
    assert_eq!(signing["key_type"], "ED25519");
}
