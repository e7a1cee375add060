//! `SIGNING_REQUIRED=1`: `save`, `push` and plain `git push` refuse, before anything is uploaded,
//! every commit since the lease that is unsigned, signed by another key, or whose signature does
//! not verify (exit 11, the commits named); signed work (by `save`, and by plain git through
//! `ssh-keygen`) pushes; the key file's private key is never committed or pushed (exit 6); and
//! `status` shows the signing state. Signatures made by the real `ssh-keygen`, judged by git's
//! own rules (`gpgsig`, `gpgsig-sha256` in a SHA-256 repository).

use std::path::{Path, PathBuf};

use crate::push::Setup;
use crate::support::keys::{keygen, public_line};
use crate::support::{TOKEN, userinfo};

const BRANCH: &str = "sessions/required";

/// A restored sandbox (a new session branch: the first push creates it) and the agent's key.
fn sandbox(s: &Setup) -> (PathBuf, PathBuf) {
    let dir = s.sandbox("sandbox", BRANCH, &s.ids[1]);
    let key = keygen(&s.w.path("keys"), "ed25519", "agent");
    (dir, key)
}

/// The variables of a sandbox that must sign with `key`, signatures required.
fn required(key: &Path) -> [(&'static str, &str); 2] {
    [
        ("SIGNING_KEY_FILE", key.to_str().unwrap()),
        ("SIGNING_REQUIRED", "1"),
    ]
}

/// A commit of `file` holding `text` by plain git, signed by `key` through `ssh-keygen` (as
/// `git commit -S` signs with `gpg.format=ssh`); its id.
fn signed_commit(s: &Setup, dir: &Path, file: &str, text: &str, key: &Path) -> String {
    std::fs::write(dir.join(file), text).unwrap();
    s.w.git(dir, &["add", "-A"]);
    let key = format!("user.signingkey={}", key.display());
    s.w.git(
        dir,
        &[
            "-c",
            "gpg.format=ssh",
            "-c",
            "gpg.ssh.program=ssh-keygen",
            "-c",
            &key,
            "commit",
            "-S",
            "-qm",
            &format!("signed {file}"),
        ],
    );
    s.w.git(dir, &["rev-parse", "HEAD"])
}

/// `save` in `dir` with `vars` besides the push URL.
fn save(s: &Setup, dir: &Path, vars: &[(&str, &str)]) -> crate::support::Run {
    let url = s.url();
    let mut all = vec![("PUSH_URL", url.as_str())];
    all.extend_from_slice(vars);
    s.w.run(dir, &["save", "-m", "Saved", "--json"], &all)
}

/// Nothing reached the server: the session branch is not there and no receive-pack request
/// was made.
#[track_caller]
fn nothing_uploaded(s: &Setup) {
    assert_eq!(
        s.remote(BRANCH),
        None,
        "the session branch reached the server"
    );
    assert_eq!(s.posts(), 0, "a receive-pack request was made");
}

/// The refusal of `msg`: exit 11's words, naming `commit` and why, and the printed way on.
#[track_caller]
fn says_refused(msg: &str, commit: &str, why: &str, base: &str) {
    for word in [
        "SIGNING_REQUIRED=1",
        commit,
        why,
        &format!("`git rebase --rebase-merges --force-rebase --gpg-sign {base}`"),
    ] {
        assert!(msg.contains(word), "no {word:?} in: {msg}");
    }
}

/// A plain, unsigned commit: `push`, `save` (whose own commit is signed) and plain `git push`
/// each refuse it before upload, naming it; without the requirement the same push goes.
#[test]
fn unsigned_work_is_refused_before_upload_by_save_push_and_git_push() {
    let s = Setup::new();
    let (dir, key) = sandbox(&s);
    let vars = required(&key);
    let base = &s.ids[1];
    let unsigned = s.commit(&dir, "plain.txt", "by plain git\n");

    let run = s.push(&dir, &vars);
    run.assert_code(11);
    assert_eq!(run.json()["error"]["kind"], "signing", "{}", run.stdout);
    let msg = run.error_message();
    says_refused(&msg, &unsigned, "(unsigned)", base);
    assert!(msg.contains("nothing was uploaded"), "{msg}");
    nothing_uploaded(&s);

    std::fs::write(dir.join("README.md"), "saved by the agent\n").unwrap();
    let run = save(&s, &dir, &vars);
    run.assert_code(11);
    let msg = run.error_message();
    says_refused(&msg, &unsigned, "(unsigned)", base);
    let saved = s.w.git(&dir, &["rev-parse", "HEAD"]);
    assert!(
        !msg.contains(&format!("{saved} (")),
        "save's own commit is signed: {msg}"
    );
    assert!(msg.contains("committed") && msg.contains("kept"), "{msg}");
    assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD~1"]), unsigned);
    nothing_uploaded(&s);

    let out = s.shell_git(&dir, &["push", "-q", "origin", "HEAD"], &vars);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "git push went through: {stderr}");
    says_refused(&stderr, &unsigned, "(unsigned)", base);
    assert!(stderr.contains("git pushed nothing"), "{stderr}");
    nothing_uploaded(&s);

    // The requirement, and nothing else, refused it.
    s.push(&dir, &vars[..1]).assert_code(0);
    assert_eq!(s.remote(BRANCH), Some(saved));
}

/// Signed work pushes with the requirement: `save`'s commits, plain commits signed through
/// `ssh-keygen` with the same key, and a signed merge, by `push` and by plain `git push`.
#[test]
fn all_signed_work_pushes() {
    let s = Setup::new();
    let (dir, key) = sandbox(&s);
    let vars = required(&key);
    std::fs::write(dir.join("README.md"), "saved\n").unwrap();
    save(&s, &dir, &vars).assert_code(0);
    signed_commit(&s, &dir, "one.txt", "1\n", &key);
    s.push(&dir, &vars).assert_code(0);
    assert_eq!(
        s.remote(BRANCH),
        Some(s.w.git(&dir, &["rev-parse", "HEAD"]))
    );

    s.w.git(&dir, &["switch", "-qc", "side"]);
    signed_commit(&s, &dir, "side.txt", "side\n", &key);
    s.w.git(&dir, &["switch", "-q", BRANCH]);
    signed_commit(&s, &dir, "two.txt", "2\n", &key);
    let key_config = format!("user.signingkey={}", key.display());
    s.w.git(
        &dir,
        &[
            "-c",
            "gpg.format=ssh",
            "-c",
            "gpg.ssh.program=ssh-keygen",
            "-c",
            &key_config,
            "merge",
            "-S",
            "-q",
            "--no-ff",
            "--no-edit",
            "side",
        ],
    );
    let status = s.w.run(&dir, &["status", "--json"], &vars);
    assert_eq!(status.json()["signing"]["unsigned"], 0, "{}", status.stdout);
    let out = s.shell_git(&dir, &["push", "-q", "origin", "HEAD"], &vars);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.remote(BRANCH),
        Some(s.w.git(&dir, &["rev-parse", "HEAD"]))
    );
}

/// A commit signed by another key, one whose signature is over other bytes, and one whose
/// signature is no SSH signature: each refused, for its reason.
#[test]
fn signatures_by_another_key_or_that_do_not_verify_are_refused() {
    let s = Setup::new();
    let (dir, key) = sandbox(&s);
    let vars = required(&key);
    let base = &s.ids[1];
    let other = keygen(&s.w.path("other"), "ed25519", "other");
    let by_other = signed_commit(&s, &dir, "other.txt", "other\n", &other);
    let run = s.push(&dir, &vars);
    run.assert_code(11);
    let other_fp = key_fingerprint(&other);
    says_refused(
        &run.error_message(),
        &by_other,
        &format!("signed by another key, ED25519 {other_fp}"),
        base,
    );
    nothing_uploaded(&s);

    // The key's own signature, over a message changed afterwards.
    s.w.git(&dir, &["reset", "-q", "--hard", base]);
    let signed = signed_commit(&s, &dir, "mine.txt", "mine\n", &key);
    let object = s.w.git(&dir, &["cat-file", "commit", &signed]);
    let altered = object.replace("signed mine.txt", "signed mine.txt, changed");
    let forged = write_commit(&s, &dir, &altered);
    let run = s.push(&dir, &vars);
    says_refused(
        &run.error_message(),
        &forged,
        "its signature does not verify",
        base,
    );
    // A signature header holding no SSH signature.
    let pgp = object.replace(
        "-----BEGIN SSH SIGNATURE-----",
        "-----BEGIN PGP SIGNATURE-----",
    );
    let pgp = write_commit(&s, &dir, &pgp);
    let run = s.push(&dir, &vars);
    says_refused(
        &run.error_message(),
        &pgp,
        "its signature is no SSH signature",
        base,
    );
    nothing_uploaded(&s);
    s.w.git(&dir, &["reset", "-q", "--hard", &signed]);
    s.push(&dir, &vars).assert_code(0);
}

/// `ssh-keygen -l`'s fingerprint of the key `key` (`SHA256:…`).
fn key_fingerprint(key: &Path) -> String {
    let out = std::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg(key.with_extension("pub"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().nth(1).unwrap().to_owned()
}

/// Write the commit object `text` with git and move the branch to it; its id.
fn write_commit(s: &Setup, dir: &Path, text: &str) -> String {
    let id = s.w.git_stdin(
        dir,
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        format!("{text}\n").as_bytes(),
    );
    s.w.git(dir, &["reset", "-q", "--hard", &id]);
    id
}

/// What this tree pushed before is not checked again (the lease, an unsigned commit pushed
/// without the requirement); a merge is checked like any commit.
#[test]
fn the_lease_is_not_checked_and_a_merge_is() {
    let s = Setup::new();
    let (dir, key) = sandbox(&s);
    let vars = required(&key);
    s.commit(&dir, "early.txt", "pushed unsigned\n");
    // A set-up that could not sign (two sources) is save's refusal, not a push's — unless
    // signatures are required, which it cannot check.
    let two = [
        ("SIGNING_KEY_FILE", vars[0].1),
        ("SIGNING_URL", "http://127.0.0.1:9/sign"),
    ];
    let run = s.push(&dir, &[two[0], two[1], ("SIGNING_REQUIRED", "1")]);
    run.assert_code(11);
    assert!(
        run.error_message().contains("are both set"),
        "{}",
        run.stdout
    );
    s.push(&dir, &two).assert_code(0);
    let lease = s.lease(&dir);
    signed_commit(&s, &dir, "later.txt", "signed\n", &key);
    s.push(&dir, &vars).assert_code(0);

    let lease2 = s.lease(&dir);
    assert_ne!(lease, lease2);
    s.w.git(&dir, &["switch", "-qc", "side"]);
    signed_commit(&s, &dir, "side.txt", "side\n", &key);
    s.w.git(&dir, &["switch", "-q", BRANCH]);
    s.w.git(&dir, &["merge", "-q", "--no-ff", "--no-edit", "side"]);
    let merge = s.w.git(&dir, &["rev-parse", "HEAD"]);
    let run = s.push(&dir, &vars);
    run.assert_code(11);
    let msg = run.error_message();
    says_refused(&msg, &merge, "(unsigned)", &lease2);
    assert!(msg.contains("1 commit(s) to upload is"), "{msg}");
    assert_eq!(s.remote(BRANCH), Some(lease2));
}

/// Restored with `SIGNING_KEY_FILE` and `SIGNING_REQUIRED=1`: where the environment is silent
/// (git's in an agent's shell), the requirement restore recorded holds — plain `git push`,
/// `push` and `status` go by it — and a commit plain git signed through restore's set-up
/// pushes; `SIGNING_REQUIRED=0` in the environment wins.
#[test]
fn the_requirement_restore_recorded_holds_where_the_environment_is_silent() {
    let s = Setup::new();
    let key = keygen(&s.w.path("keys"), "ed25519", "agent");
    let dir = s.w.path("sandbox");
    s.w.restore_with(&dir, &s.url(), BRANCH, &s.ids[1], &[], &required(&key))
        .assert_code(0);
    std::fs::write(dir.join("plain.txt"), "unsigned\n").unwrap();
    s.w.git(&dir, &["add", "-A"]);
    s.w.git(&dir, &["commit", "-q", "--no-gpg-sign", "-m", "unsigned"]);
    let unsigned = s.w.git(&dir, &["rev-parse", "HEAD"]);

    let out = s.shell_git(&dir, &["push", "-q", "origin", "HEAD"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "git push went through: {stderr}");
    says_refused(&stderr, &unsigned, "(unsigned)", &s.ids[1]);
    let run = s.push(&dir, &[]);
    run.assert_code(11);
    says_refused(&run.error_message(), &unsigned, "(unsigned)", &s.ids[1]);
    nothing_uploaded(&s);
    let status = s.w.run(&dir, &["status", "--json"], &[]);
    assert_eq!(
        status.json()["signing"]["required"],
        true,
        "{}",
        status.stdout
    );
    assert_eq!(status.json()["signing"]["unsigned"], 1, "{}", status.stdout);

    // Signed by plain git through restore's set-up (git-session as its ssh-keygen).
    s.w.git(&dir, &["reset", "-q", "--hard", &s.ids[1]]);
    let signed = s.commit(&dir, "signed.txt", "signed\n");
    let out = s.shell_git(&dir, &["push", "-q", "origin", "HEAD"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.remote(BRANCH), Some(signed));

    s.w.git(
        &dir,
        &["commit", "-q", "--allow-empty", "--no-gpg-sign", "-m", "u"],
    );
    s.push(&dir, &[("SIGNING_REQUIRED", "0")]).assert_code(0);
}

/// The bounds: a commit object over 1 MiB is refused unread; more than 10,000 commits in one
/// push are refused unchecked past the cap.
#[test]
fn a_commit_too_big_or_too_many_to_check_is_refused() {
    let s = Setup::new();
    let (dir, key) = sandbox(&s);
    let vars = required(&key);
    let message = s.w.path("message");
    std::fs::write(&message, "x".repeat(1 << 20)).unwrap();
    s.w.git(
        &dir,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-F",
            message.to_str().unwrap(),
        ],
    );
    let big = s.w.git(&dir, &["rev-parse", "HEAD"]);
    let run = s.push(&dir, &vars);
    run.assert_code(11);
    assert!(
        run.error_message().contains(&format!("{big} (1048"))
            && run.error_message().contains("over the 1 MiB checked"),
        "{}",
        run.error_message()
    );

    // 10,001 empty commits by fast-import.
    let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
    let mut stream = String::new();
    for i in 0..10_001 {
        stream.push_str(&format!(
            "commit refs/heads/{BRANCH}\ncommitter A <a@x> {i} +0000\ndata 2\nc\n"
        ));
        if i == 0 {
            stream.push_str(&format!("from {head}\n"));
        }
        stream.push('\n');
    }
    s.w.git_stdin(&dir, &["fast-import", "--quiet"], stream.as_bytes());
    s.w.git(&dir, &["reset", "-q", "--hard", BRANCH]);
    let run = s.push(&dir, &vars);
    run.assert_code(11);
    assert!(
        run.error_message()
            .contains("more than 10000 commits to upload"),
        "{}",
        run.error_message()
    );
    nothing_uploaded(&s);
}

/// The Git LFS objects `save` stored go before the commits that point at them: with unsigned
/// work, neither goes (the LFS server gets nothing, no receive-pack request is made).
#[test]
fn unsigned_work_sends_no_lfs_object_either() {
    let (w, srv, lfs, dir, data) = crate::hints::lfs_saved_not_pushed();
    let key = keygen(&w.path("keys"), "ed25519", "agent");
    let url = srv.url("repo.git", Some(&userinfo()));
    let mut vars = required(&key).to_vec();
    vars.push(("PUSH_URL", &url));
    let run = w.run(&dir, &["push", "--json"], &vars);
    run.assert_code(11);
    assert!(run.error_message().contains("(unsigned)"), "{}", run.stdout);
    let object = lfs
        .store
        .join("org/repo")
        .join(crate::support::lfs::oid(&data));
    assert!(!object.exists(), "the LFS object was uploaded");
    assert_eq!(srv.receive_pack_posts().len(), 0);
}

/// The private key of `SIGNING_KEY_FILE` is never committed: the key file copied into the tree,
/// or its text pasted (indented) in a larger file, is refused by `save` (exit 6, naming the file,
/// nothing committed) and by `push` when plain git committed it; the public key is fine.
#[test]
fn the_private_key_is_never_committed_or_pushed() {
    for kind in ["ed25519", "rsa"] {
        let s = Setup::new();
        let dir = s.sandbox("sandbox", BRANCH, &s.ids[1]);
        let key = keygen(&s.w.path("keys"), kind, "agent");
        let vars = [("SIGNING_KEY_FILE", key.to_str().unwrap())];
        let text = std::fs::read_to_string(&key).unwrap();
        let head = s.w.git(&dir, &["rev-parse", "HEAD"]);
        let leaks = |run: &crate::support::Run| {
            for line in text.lines().filter(|l| l.len() > 40).skip(1) {
                assert!(
                    !run.stdout.contains(line) && !run.stderr.contains(line),
                    "{kind}: the key's text in the output"
                );
            }
        };

        std::fs::create_dir_all(dir.join("deploy")).unwrap();
        std::fs::copy(&key, dir.join("deploy/id_key")).unwrap();
        let run = save(&s, &dir, &vars);
        run.assert_code(6);
        assert!(run.error_message().contains("deploy/id_key"), "{kind}");
        leaks(&run);
        assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), head, "{kind}");
        std::fs::remove_file(dir.join("deploy/id_key")).unwrap();

        let indented: String = text.lines().map(|l| format!("    {l}\n")).collect();
        let yaml = format!("name: agent\nssh:\n  key: |\n{indented}  user: git\n");
        std::fs::write(dir.join("deploy/config.yaml"), yaml).unwrap();
        let run = save(&s, &dir, &vars);
        run.assert_code(6);
        assert!(run.error_message().contains("config.yaml"), "{kind}");
        leaks(&run);
        std::fs::remove_file(dir.join("deploy/config.yaml")).unwrap();

        std::fs::write(dir.join("deploy/authorized_keys"), public_line(&key) + "\n").unwrap();
        save(&s, &dir, &vars).assert_code(0);
        nothing_more_than_public(&s, &key);

        // Committed by plain git: the push refuses to send it.
        std::fs::copy(&key, dir.join("deploy/id_key")).unwrap();
        s.w.git(&dir, &["add", "-A"]);
        s.w.git(&dir, &["commit", "-qm", "the key"]);
        let pushed = s.remote(BRANCH);
        let run = s.push(&dir, &vars);
        run.assert_code(6);
        assert!(
            run.error_message().contains("nothing was uploaded"),
            "{kind}"
        );
        leaks(&run);
        assert_eq!(s.remote(BRANCH), pushed);
    }
}

/// The server holds the public key's file and none of the private key's lines.
fn nothing_more_than_public(s: &Setup, key: &Path) {
    let text = std::fs::read_to_string(key).unwrap();
    let tip = s.remote(BRANCH).unwrap();
    let on_server = s.w.git(
        &s.bare(),
        &["show", &format!("{tip}:deploy/authorized_keys")],
    );
    assert_eq!(on_server, public_line(key));
    let all = s.w.git(&s.bare(), &["log", "-p", &tip]);
    for line in text.lines().skip(2).filter(|l| l.len() > 40) {
        assert!(!all.contains(line));
    }
}

/// `status` (human and `--json`) shows the signing state, exit 0 whatever it is: off; a key
/// file with its type and fingerprint, and with the requirement the commits a push refuses; a
/// key file that cannot sign; a service (its URL without the token); variables that make no
/// set-up.
#[test]
fn status_shows_the_signing_state() {
    let s = Setup::new();
    let (dir, key) = sandbox(&s);
    let status = |vars: &[(&str, &str)]| {
        let run = s.w.run(&dir, &["status", "--json"], vars);
        run.assert_code(0);
        let human = s.w.run(&dir, &["status"], vars);
        human.assert_code(0);
        let line = human
            .stdout
            .lines()
            .find(|l| l.starts_with("Signing: "))
            .unwrap_or_else(|| panic!("no Signing line:\n{}", human.stdout))
            .to_owned();
        (run.json()["signing"].clone(), line)
    };
    let (json, line) = status(&[]);
    assert_eq!(json["source"], "none");
    assert_eq!(json["required"], false);
    assert_eq!(line, "Signing: off; signatures not required");

    let fingerprint = key_fingerprint(&key);
    let (json, line) = status(&[("SIGNING_KEY_FILE", key.to_str().unwrap())]);
    assert_eq!(json["source"], "key_file");
    assert_eq!(json["key_file"], key.to_str().unwrap());
    assert_eq!(json["key_type"], "ED25519");
    assert_eq!(json["fingerprint"], fingerprint.as_str());
    assert_eq!(json["unsigned"], serde_json::Value::Null);
    assert!(line.contains(&fingerprint), "{line}");

    s.commit(&dir, "plain.txt", "plain\n");
    let (json, line) = status(&required(&key));
    assert_eq!(json["required"], true);
    assert_eq!(json["unsigned"], 1);
    assert!(
        line.contains("1 commit(s) since the lease are not signed") && line.contains("git rebase"),
        "{line}"
    );

    let empty = s.w.path("keys/empty");
    std::fs::write(&empty, "").unwrap();
    let (json, line) = status(&[("SIGNING_KEY_FILE", empty.to_str().unwrap())]);
    assert_eq!(json["source"], "key_file");
    assert_eq!(json["key_type"], serde_json::Value::Null);
    assert!(
        json["problem"].as_str().unwrap().contains("is empty"),
        "{json}"
    );
    assert!(
        line.contains("cannot sign") && line.contains("is empty"),
        "{line}"
    );

    let url = format!("http://{}@127.0.0.1:9/sign?sig={TOKEN}", userinfo());
    let public = public_line(&key);
    let (json, line) = status(&[("SIGNING_URL", &url), ("SIGNING_PUBLIC_KEY", &public)]);
    assert_eq!(json["source"], "service");
    assert_eq!(json["url"], "http://127.0.0.1:9/sign");
    assert_eq!(json["fingerprint"], fingerprint.as_str());
    assert!(line.contains("http://127.0.0.1:9/sign"), "{line}");

    let (json, line) = status(&[("SIGNING_REQUIRED", "1")]);
    assert_eq!(json["source"], "invalid");
    assert!(
        json["problem"]
            .as_str()
            .unwrap()
            .contains("SIGNING_REQUIRED=1 needs"),
        "{json}"
    );
    assert!(line.starts_with("Signing: not set up: "), "{line}");
}

crate::sha256_too!(
    unsigned_work_is_refused_before_upload_by_save_push_and_git_push,
    all_signed_work_pushes,
    signatures_by_another_key_or_that_do_not_verify_are_refused,
);

/// Plain `git push` of unsigned work under another name than the session branch's — another
/// branch, a tag (lightweight or annotated), several refs at once — uploads it as surely as a
/// push to the session branch: the requirement refuses it before anything is uploaded. Signed
/// work goes under any name, the restored history (which the server has) unchecked.
#[test]
fn unsigned_work_pushed_under_another_name_is_refused_too() {
    let s = Setup::new();
    let (dir, key) = sandbox(&s);
    let vars = required(&key);
    let unsigned = s.commit(&dir, "plain.txt", "by plain git\n");
    s.w.git(&dir, &["tag", "light"]);
    s.w.git(&dir, &["tag", "-a", "-m", "annotated", "annotated"]);
    for refspec in [
        "HEAD:refs/heads/other",
        "light",
        "annotated",
        "+HEAD:refs/heads/forced",
    ] {
        let out = s.shell_git(&dir, &["push", "-q", "origin", refspec], &vars);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "git push {refspec} went through");
        says_refused(&stderr, &unsigned, "(unsigned)", &s.ids[1]);
        assert_eq!(s.posts(), 0, "git push {refspec} reached the server");
    }
    assert_eq!(s.remote("other"), None);

    // Signed on top of the restored tip: pushed under another name and as a tag.
    s.w.git(&dir, &["reset", "-q", "--hard", &s.ids[1]]);
    let signed = signed_commit(&s, &dir, "signed.txt", "signed\n", &key);
    s.w.git(&dir, &["tag", "-f", "light"]);
    let out = s.shell_git(
        &dir,
        &["push", "-q", "origin", "HEAD:refs/heads/other", "light"],
        &vars,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.remote("other"), Some(signed));
}
