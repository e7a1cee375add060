//! The documents are true to the code: every environment variable the code reads (and its
//! libraries read: proxies, CA roots) is in `--help`, the top manual page and README; no help text
//! shows a Rust doc link raw.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::World;

/// Upper-case string literals in the product's code that are not variables: git's own file and
/// ref names, value names in help, protocol words, test values in examples.
const NOT_VARIABLES: &[&str] = &[
    "HEAD",
    "ORIG_HEAD",
    "MERGE_HEAD",
    "REVERT_HEAD",
    "CHERRY_PICK_HEAD",
    "BISECT_START",
    "URL",
    "DIR",
    "BYTES",
    "BRANCH",
    "SHA",
    "MESSAGE",
    "DURATION",
    "WHICH",
    "WHEN",
    "TREE",
    "SOURCE",
    "NAME",
    "NAK",
    "HS256",
    "FILE",
    "ASSETS",
    "CARGO_PKG_VERSION",
    "PACK",
    // Key types as `ssh-keygen -l` names them (src/signing).
    "ED25519",
    "ECDSA",
    "RSA",
    "DSA",
    "UNKNOWN",
];

/// Prefixes the code completes (`format!("{prefix}_NAME")`): GIT_AUTHOR_NAME, GIT_COMMITTER_DATE…
/// are listed whole in the docs.
const PREFIXES: &[&str] = &["GIT_AUTHOR", "GIT_COMMITTER"];

/// Variables the libraries read for us (reqwest: proxies; rustls-native-certs: CA roots; gix's
/// config locations, through save's `Env`: git's config files).
const READ_BY_LIBRARIES: &[&str] = &[
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "XDG_CONFIG_HOME",
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `"NAME"` literal (or `"PREFIX_{…}"`, kept as `PREFIX_`) outside unit-test modules and
/// comments in src/.
fn names_in_code() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut names = BTreeSet::new();
    for f in files {
        if f.ends_with("fuzzing.rs") {
            continue; // the fuzz targets' harness: reads no environment
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for piece in line.split('"').skip(1).step_by(2) {
                let name = piece.split("{").next().unwrap();
                let is_name = name.len() >= 3
                    && name.starts_with(|c: char| c.is_ascii_uppercase())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                if is_name && (piece == name || name.ends_with('_')) {
                    names.insert(name.to_owned());
                }
            }
        }
    }
    names
}

/// `name` as a word of `text` (a prefix `X_` matches `X_<name>`).
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        !word(before) && (name.ends_with('_') || !word(after))
    })
}

#[test]
fn every_variable_the_code_reads_is_in_help_the_manual_and_readme() {
    let read: BTreeSet<String> = names_in_code()
        .into_iter()
        .filter(|n| !NOT_VARIABLES.contains(&n.as_str()) && !PREFIXES.contains(&n.as_str()))
        .chain(READ_BY_LIBRARIES.iter().map(|s| s.to_string()))
        .collect();
    // The scan finds what it must (else it would pass on nothing).
    for known in [
        "READ_URL",
        "GIT_SESSION_LOCK_WAIT_S",
        "GIT_SESSION_SUBMODULE_URL_",
        "EMAIL",
    ] {
        assert!(read.contains(known), "the scan missed {known}: {read:?}");
    }
    let w = World::new();
    let help = w.run(w.tmp.path(), &["--help"], &[]);
    help.assert_code(0);
    let pages = w.tmp.path().join("man1");
    w.run(
        w.tmp.path(),
        &["manpage", "--out", pages.to_str().unwrap()],
        &[],
    )
    .assert_code(0);
    let man = std::fs::read_to_string(pages.join("git-session.1"))
        .unwrap()
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "");
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let listed: String = git_session::cli::ENVIRONMENT
        .iter()
        .map(|(names, _)| format!("{names}\n"))
        .collect();
    let mut missing = Vec::new();
    for name in &read {
        for (doc, text) in [
            ("cli::ENVIRONMENT", listed.as_str()),
            ("git-session --help", help.stdout.as_str()),
            ("git-session.1", man.as_str()),
            ("README.md", readme.as_str()),
        ] {
            if !mentions(text, name) {
                missing.push(format!("{name} is not in {doc}"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // And nothing listed that the code no longer reads.
    for (names, _) in git_session::cli::ENVIRONMENT {
        for name in names.split(", ") {
            let name = name.trim_end_matches("<name>");
            let completed = PREFIXES.iter().any(|p| name.starts_with(&format!("{p}_")));
            assert!(
                read.contains(name) || completed,
                "{name} is listed but nothing reads it"
            );
        }
    }
}

/// A doc comment's link (`[`MAX_NESTING`]`) shows raw in clap's help: none in any command's.
#[test]
fn no_help_text_shows_a_doc_link_raw() {
    let w = World::new();
    let cmd = <git_session::cli::Cli as clap::CommandFactory>::command();
    let mut commands = vec![vec![]];
    commands.extend(cmd.get_subcommands().map(|s| vec![s.get_name().to_owned()]));
    for args in commands {
        let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
        argv.push("--help");
        let run = w.run(w.tmp.path(), &argv, &[]);
        run.assert_code(0);
        assert!(!run.stdout.contains("[`"), "{argv:?}:\n{}", run.stdout);
    }
}

/// A reader that went away (`git-session schema | head -c 600`) ends git-session as it ends git:
/// killed by SIGPIPE, nothing on stderr. Before: exit 1, "internal error (a bug in git-session):
/// … Broken pipe". A full disk behind a redirect is exit 10.
#[test]
fn a_closed_stdout_ends_the_command_as_it_ends_git() {
    use std::os::unix::process::ExitStatusExt as _;
    let w = World::new();
    let pages = w.tmp.path().join("man1");
    for args in [
        vec!["schema"],
        vec!["completions", "fish"],
        vec!["--help"],
        vec!["manpage", "--out", pages.to_str().unwrap()],
        vec!["manpage", "--out", pages.to_str().unwrap(), "--json"],
        // A failure (no session here): its JSON to a closed stdout.
        vec!["status", "--json"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
            .args(&args)
            .current_dir(w.tmp.path())
            .env_clear()
            .envs(w.env())
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("internal error"), "{args:?}: {stderr}");
        assert_eq!(
            out.status.signal(),
            Some(libc_sigpipe()),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_git-session"))
        .arg("schema")
        .env_clear()
        .envs(w.env())
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(10), "{stderr}");
    assert!(stderr.contains("writing to standard output"), "{stderr}");
}

fn libc_sigpipe() -> i32 {
    13
}

/// `--json` errors from argument parsing carry all of clap's words (which argument is missing,
/// which values are valid) and the command's name, for every command; `manpage --json` prints
/// one JSON object.
#[test]
fn json_usage_errors_keep_claps_detail_and_name_the_command() {
    let w = World::new();
    let dir = w.tmp.path();
    let run = w.run(dir, &["manpage", "--json"], &[]);
    run.assert_code(2);
    let v = run.json();
    assert_eq!(v["command"], "manpage", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("--out <DIR>"), "{msg}");
    let run = w.run(dir, &["restore", "--lfs", "sometimes", "--json"], &[]);
    run.assert_code(2);
    let v = run.json();
    assert_eq!(v["command"], "restore", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("sometimes") && msg.contains("always"), "{msg}");
    // clap drops escape sequences from what it echoes ("invalid value '1'"): the value as given
    // is added, escaped.
    let run = w.run(dir, &["restore", "--depth", "1\x1b[2J", "--json"], &[]);
    run.assert_code(2);
    let msg = run.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("'1\\x1b[2J'"), "{msg}");
    assert!(!run.stderr.contains('\x1b'), "{}", run.stderr);
    let run = w.run(dir, &["credential", "--json"], &[]);
    run.assert_code(2);
    assert_eq!(run.json()["command"], "credential");
    let pages = dir.join("man1");
    let run = w.run(
        dir,
        &["manpage", "--out", pages.to_str().unwrap(), "--json"],
        &[],
    );
    run.assert_code(0);
    let v = run.json();
    assert_eq!(v["command"], "manpage", "{v}");
    let listed = v["pages"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|p| p.as_str().unwrap().ends_with("git-session-restore.1")),
        "{v}"
    );
    crate::support::assert_matches_schema(&v);
}
