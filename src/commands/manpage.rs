//! `git-session manpage --out DIR`: one manual page per command (`git-session.1`,
//! `git-session-restore.1`, …), generated from the same clap tree as `--help` (clap_mangen), with
//! ENVIRONMENT, EXIT STATUS and EXAMPLES sections added. Installed in a `man1` folder on
//! `MANPATH`, `man git-session-save` and `git session --help` (git runs `man git-session`) work.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Variables every command reads.
const COMMON_ENV: [(&str, &str); 9] = [
    (
        "SESSION_DIR",
        "The work tree when -C is not given (default: the current directory).",
    ),
    (
        "GIT_SESSION_SANDBOX",
        "The sandbox owning the session: a Session-Sandbox: trailer on every commit, \"owner\" in --json.",
    ),
    (
        "GIT_SESSION_AGENT",
        "The agent working in it (Session-Agent:).",
    ),
    (
        "GIT_SESSION_PERSON",
        "The person it works for (Session-Person:).",
    ),
    (
        "RUST_LOG",
        "Log filter (overrides -v), e.g. git_session=debug.",
    ),
    (
        "GIT_SESSION_PROTOCOL",
        "Fetch protocol: unset (v2 when the server answers it, else v0/v1), 0 (v0/v1) or 2 (v2 only).",
    ),
    (
        "GIT_SESSION_CONNECT_TIMEOUT_MS, GIT_SESSION_READ_TIMEOUT_MS",
        "Connect and read timeouts (10000, 60000).",
    ),
    (
        "https_proxy, http_proxy, all_proxy, no_proxy (or upper-case)",
        "Proxies, as curl reads them for plain git; credentials in the proxy URL (a secret, never shown). A proxy that fails is named in the error.",
    ),
    (
        "SSL_CERT_FILE, SSL_CERT_DIR, GIT_SSL_CAINFO, GIT_PROXY_SSL_CAINFO",
        "CA roots: SSL_CERT_FILE/SSL_CERT_DIR's or the system's, git's CA files added; bundled Mozilla roots when none has any.",
    ),
];

/// `(name, what)` pairs: variables and what they do, or examples and their commands.
type Described = &'static [(&'static str, &'static str)];

/// Per command (`""`: the top page): the variables it reads and its examples.
const PAGES: &[(&str, Described, Described)] = &[
    (
        "watch",
        &[
            (
                "PUSH_URL, PUSH_URL_FILE",
                "The URL each save pushes to (a _FILE is re-read at every save).",
            ),
            ("SESSION_BRANCH", "Must match the session record when set."),
            (
                "GIT_SESSION_SESSIONS_FILE",
                "With --all (or --sessions FILE): the manifest whose sessions are watched, each with its own push_url and read_url; PUSH_URL and SESSION_BRANCH are not read then.",
            ),
            (
                "SIGNING_KEY_FILE, SIGNING_URL, SIGNING_URL_FILE, SIGNING_PUBLIC_KEY, SIGNING_REQUIRED",
                "Each save signs and checks as git-session-save(1) says: a checkpoint that cannot be signed commits nothing and ends the watch (exit 11).",
            ),
        ],
        &[
            (
                "Checkpoint every 2 minutes, never half-way through a write",
                "git-session watch --every 2m --quiet-for 5s --json",
            ),
            ("Stop it, saving what is pending", "kill -TERM $WATCH_PID"),
            (
                "Watch every session of a manifest, each against its own lease",
                "GIT_SESSION_SESSIONS_FILE=/run/sessions.json git-session watch --all --every 2m --json",
            ),
        ],
    ),
    (
        "restore",
        &[
            (
                "READ_URL, READ_URL_FILE",
                "The smart-HTTP URL to fetch from (a _FILE is read at each use: a rotated token is picked up).",
            ),
            (
                "PUSH_URL, PUSH_URL_FILE",
                "The URL save and push use (recorded without its credentials).",
            ),
            ("SESSION_BRANCH", "The session branch, e.g. sessions/4f1c."),
            (
                "TIP_SHA",
                "The full commit id to restore: 40 hex digits, 64 in a SHA-256 repository (abbreviations are refused).",
            ),
            (
                "ARCHIVE_URL",
                "A tar.gz of TIP_SHA to extract instead of fetching.",
            ),
            (
                "GIT_SESSION_CACHE",
                "A baked template whose objects seed a restore into an empty folder.",
            ),
            (
                "GIT_SESSION_LFS_INCLUDE, GIT_SESSION_LFS_EXCLUDE",
                "Comma-separated patterns narrowing the Git LFS files fetched (as lfs.fetchinclude/fetchexclude).",
            ),
            (
                "GIT_SESSION_LFS_CONCURRENCY",
                "Git LFS downloads at once (default 8).",
            ),
            (
                "GIT_SESSION_SUBMODULE_URL_<name>, GIT_SESSION_SUBMODULE_URLS_FILE",
                "A submodule's URL in place of its .gitmodules one (a file: one `<name> <url>` per line).",
            ),
            (
                "GIT_SESSION_SPARSE_FILE",
                "The folders of a sparse restore, one per line (as --sparse).",
            ),
            (
                "SIGNING_KEY_FILE, SIGNING_URL, SIGNING_URL_FILE, SIGNING_PUBLIC_KEY",
                "Signing set up for plain git: gpg.format ssh, commit.gpgSign, user.signingKey and gpg.ssh.program (git-session itself) in .git/config, the source recorded (never the private key, nor a URL with credentials).",
            ),
            (
                "SIGNING_REQUIRED",
                "Recorded: plain git push and push refuse unsigned work where the environment does not say otherwise.",
            ),
        ],
        &[
            (
                "Boot a sandbox at the session's commit",
                "READ_URL=https://git.example/r.git PUSH_URL=https://git.example/r.git SESSION_BRANCH=sessions/4f1c TIP_SHA=$SHA git-session -C /workspace restore --json",
            ),
            (
                "Extract an archive from standard input",
                "curl -sSf $ARCHIVE | git-session restore --archive - --json",
            ),
            (
                "Restore one folder of a monorepo, with its submodules",
                "git-session restore --sparse services/api --submodules recursive --json",
            ),
        ],
    ),
    (
        "bake",
        &[
            (
                "READ_URL, READ_URL_FILE",
                "The URL to fetch the base from (pass it as a build secret: READ_URL_FILE).",
            ),
            ("TIP_SHA", "The base commit to bake in."),
        ],
        &[(
            "A template build step",
            "RUN --mount=type=secret,id=read_url READ_URL_FILE=/run/secrets/read_url TIP_SHA=$BASE git-session -C /workspace bake",
        )],
    ),
    (
        "save",
        &[
            ("PUSH_URL, PUSH_URL_FILE", "The URL to push to."),
            ("SESSION_BRANCH", "Must match the session record when set."),
            (
                "SIGNING_KEY_FILE",
                "An OpenSSH private key (Ed25519, ECDSA P-256, RSA of 2048 bits or more; unencrypted), read at each use: the commit is signed with it (exit 11 when it cannot sign: nothing is committed).",
            ),
            (
                "SIGNING_URL, SIGNING_URL_FILE, SIGNING_PUBLIC_KEY",
                "A signing service instead (one POST per commit); its signature is used only once it verifies against SIGNING_PUBLIC_KEY. Without SIGNING_*, the source restore recorded signs.",
            ),
            (
                "SIGNING_REQUIRED",
                "1: commits since the lease that are unsigned or signed by another key are refused before upload (exit 11, with the rebase that signs them again).",
            ),
            (
                "GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_*",
                "The commit's identities (else user.name and user.email, as git reads them).",
            ),
        ],
        &[
            (
                "Save the agent's work",
                "git-session save -m \"Add the parser\" --json",
            ),
            ("Commit only", "git-session save -m wip --no-push"),
        ],
    ),
    (
        "push",
        &[
            ("PUSH_URL, PUSH_URL_FILE", "The URL to push to."),
            ("SESSION_BRANCH", "Must match the session record when set."),
            (
                "SIGNING_REQUIRED",
                "1: commits since the lease that are unsigned or signed by another key are refused before upload (exit 11, with the rebase that signs them again).",
            ),
        ],
        &[(
            "Push commits made with plain git commit",
            "git commit -qam fix && git-session push --json",
        )],
    ),
    (
        "status",
        &[
            (
                "READ_URL, READ_URL_FILE",
                "With --remote: the URL asked for the session branch.",
            ),
            ("SESSION_BRANCH", "Must match the session record when set."),
            (
                "SIGNING_KEY_FILE, SIGNING_URL, SIGNING_URL_FILE, SIGNING_PUBLIC_KEY, SIGNING_REQUIRED",
                "The signing state shown (else what restore recorded): the key's type and fingerprint or the service, why it cannot sign, and with signatures required the commits a push would refuse.",
            ),
        ],
        &[(
            "Where the session stands, remote included",
            "git session status --remote",
        )],
    ),
    (
        "agent",
        &[],
        &[
            (
                "A tree of its own for a second agent, then its usual save",
                "cd \"$(git-session agent add reviewer)\" && git-session save -m \"Review\" --json",
            ),
            (
                "The agents and their unpushed work",
                "git-session agent list",
            ),
        ],
    ),
    (
        "agent add",
        &[],
        &[
            (
                "On a branch of its choosing, at a given commit, in a given folder",
                "git-session agent add fixer --branch sessions/4f1c-fix --at \"$TIP_SHA\" --dir /work/fixer",
            ),
            (
                "From outside the main tree",
                "git-session -C /work/repo agent add reviewer --json",
            ),
        ],
    ),
    (
        "agent list",
        &[],
        &[("Each agent as JSON", "git-session agent list --json")],
    ),
    (
        "agent remove",
        &[],
        &[
            (
                "Once its work is pushed",
                "git-session -C /work/repo-reviewer save -m done && git-session agent remove reviewer",
            ),
            (
                "Dropping what it did not push (its branch is kept)",
                "git-session agent remove reviewer --force",
            ),
        ],
    ),
    (
        "credential",
        &[(
            "READ_URL, PUSH_URL (and their _FILE forms)",
            "The credentials answered.",
        )],
        &[(
            "As git calls it (configured by restore)",
            "git -c credential.helper='!git-session credential' fetch",
        )],
    ),
    (
        "schema",
        &[],
        &[(
            "Validate an output with any JSON Schema tool",
            "git-session schema > git-session.schema.json",
        )],
    ),
    (
        "completions",
        &[],
        &[(
            "Bash completions",
            "git-session completions bash > /etc/bash_completion.d/git-session",
        )],
    ),
    (
        "manpage",
        &[],
        &[(
            "Install the pages",
            "git-session manpage --out /usr/local/share/man/man1",
        )],
    ),
    (
        "",
        &[],
        &[
            (
                "Restore, work, save",
                "git-session restore && make test && git-session save -m \"Fix the build\" --json",
            ),
            (
                "The same in a person's shell",
                "git session status; git commit -am fix; git push",
            ),
        ],
    ),
];

/// Roff-escape `text` for a paragraph: backslashes, and a leading `.` or `'` (a request).
fn roff(text: &str) -> String {
    let text = text.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text
    }
}

fn extra_sections(name: &str, w: &mut Vec<u8>) -> std::io::Result<()> {
    let (env, examples) = PAGES
        .iter()
        .find(|(page, _, _)| *page == name)
        .or_else(|| PAGES.iter().find(|(page, _, _)| page.is_empty()))
        .map_or((&[][..], &[][..]), |(_, env, examples)| (*env, *examples));
    writeln!(w, ".SH ENVIRONMENT")?;
    // The top page lists every variable git-session reads; a command's page, those it reads.
    let listed: Vec<&(&str, &str)> = if name.is_empty() {
        crate::cli::ENVIRONMENT.iter().collect()
    } else {
        env.iter().chain(COMMON_ENV.iter()).collect()
    };
    for (var, what) in listed {
        writeln!(w, ".TP\n\\fB{}\\fR\n{}", roff(var), roff(what))?;
    }
    writeln!(w, ".SH \"EXIT STATUS\"")?;
    for row in crate::error::exit_table() {
        let kind = if row.kind.is_empty() {
            String::new()
        } else {
            format!(" ({})", row.kind)
        };
        writeln!(
            w,
            ".TP\n\\fB{}\\fR{}\n{}",
            row.code,
            roff(&kind),
            roff(&row.meaning)
        )?;
    }
    writeln!(w, ".SH EXAMPLES")?;
    for (what, cmd) in examples {
        writeln!(
            w,
            ".PP\n{}:\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE",
            roff(what),
            roff(cmd)
        )?;
    }
    writeln!(
        w,
        ".SH \"SEE ALSO\"\n\\fBgit\\-session\\fR(1), \\fBgit\\fR(1)"
    )?;
    Ok(())
}

/// The SYNOPSIS line, git's way: every option with its value (`[-C <DIR>]`), positionals, and
/// `<COMMAND>` for the top page.
fn synopsis(cmd: &clap::Command, name: &str) -> String {
    let mut line = name.to_owned();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if arg.is_hide_set() || arg.is_positional() || id == "help" || id == "version" {
            continue;
        }
        let flag = match (arg.get_short(), arg.get_long()) {
            (Some(c), _) => format!("-{c}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => continue,
        };
        let value = if arg.get_action().takes_values() {
            let names = arg
                .get_value_names()
                .map(|v| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|| id.to_uppercase());
            format!(" <{names}>")
        } else {
            String::new()
        };
        let repeat = if matches!(arg.get_action(), clap::ArgAction::Count) {
            "..."
        } else {
            ""
        };
        if arg.is_required_set() {
            line.push_str(&format!(" {flag}{value}"));
        } else {
            line.push_str(&format!(" [{flag}{value}]{repeat}"));
        }
    }
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let names = arg
            .get_value_names()
            .map(|v| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
        line.push_str(&format!(" <{names}>"));
    }
    if cmd.has_subcommands() {
        line.push_str(" <COMMAND> [<ARGS>]");
    }
    line
}

/// One page.
fn page(cmd: clap::Command, short_name: &str) -> std::io::Result<Vec<u8>> {
    let name = if short_name.is_empty() {
        "git-session".to_owned()
    } else {
        format!("git-session {short_name}")
    };
    let usage = synopsis(&cmd, &name);
    let has_subcommands = cmd.has_subcommands();
    let man = clap_mangen::Man::new(cmd.override_usage(usage));
    let mut w = Vec::new();
    man.render_title(&mut w)?;
    man.render_name_section(&mut w)?;
    man.render_synopsis_section(&mut w)?;
    man.render_description_section(&mut w)?;
    man.render_options_section(&mut w)?;
    if has_subcommands {
        man.render_subcommands_section(&mut w)?;
    }
    extra_sections(short_name, &mut w)?;
    man.render_version_section(&mut w)?;
    Ok(w)
}

/// Write `git-session.1` and one `git-session-<command>.1` per visible command into `dir`
/// (created if missing); returns the files written.
///
/// # Errors
/// [`Error::LocalIo`] when `dir` cannot be created or a page cannot be written.
pub fn write_pages(root: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let mut root = root.bin_name("git-session");
    // Built, the subcommands hold the global options (-C, --json, …) too.
    root.build();
    let mut pages = vec![("git-session".to_owned(), String::new(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name().to_owned();
        if name == "help" {
            continue;
        }
        let full = format!("git-session-{name}");
        let cmd = sub
            .clone()
            .name(full.clone())
            .bin_name(format!("git-session {name}"))
            .version(root.get_version().unwrap_or_default().to_owned());
        // `agent add`, `agent list`, …: a page each, as git has `git-worktree` for its own.
        for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
            let leaf = nested.get_name();
            if leaf == "help" {
                continue;
            }
            let nested_full = format!("{full}-{leaf}");
            let nested_cmd = nested
                .clone()
                .name(nested_full.clone())
                .bin_name(format!("git-session {name} {leaf}"))
                .version(root.get_version().unwrap_or_default().to_owned());
            pages.push((nested_full, format!("{name} {leaf}"), nested_cmd));
        }
        pages.push((full, name, cmd));
    }
    let mut written = Vec::new();
    for (file, short, cmd) in pages {
        let path = dir.join(format!("{file}.1"));
        let bytes =
            page(cmd, &short).map_err(|e| Error::io(format!("rendering {}", path.display()), e))?;
        crate::fs::write_atomic(&path, &bytes)?;
        written.push(path);
    }
    Ok(written)
}
