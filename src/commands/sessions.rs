//! `git-session restore` of a sessions manifest (`GIT_SESSION_SESSIONS_FILE`, `--sessions FILE`):
//! every session checked first (a bad manifest is exit 2 before any request), then each restored
//! as a single restore is ([`super::restore::execute`]), several at once
//! (`GIT_SESSION_SESSIONS_CONCURRENCY`), each with its own inputs and its own HTTP client, so one
//! session's credentials reach only its own URLs. One failing neither stops nor touches the others.
//! `save`, `push` and `status` with `--all` run the same way over the manifest's trees
//! ([`run_all`]), each single command given its session's inputs ([`super::Given::Manifest`]);
//! `watch --all` reads the manifest here too ([`read_all`]) and runs its loop per session.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cli::RestoreArgs;
use crate::cli::{AllArgs, SaveArgs, StatusArgs};
use crate::error::{Error, Refusal, Result};
use crate::manifest::Session;
use crate::output::json::{CommandResult, SessionFields, SessionRestored};
use crate::output::{SessionLine, Success};
use crate::restore::RestoreOptions;
use crate::restore::archive::{ArchiveOptions, ArchiveSource};
use crate::types::Owner;

/// Each session's stack: the main thread's, which a single restore runs on.
const STACK_BYTES: usize = 8 << 20;

/// The manifest to restore: `--sessions FILE`, else `GIT_SESSION_SESSIONS_FILE` (empty: unset, as
/// every variable); `None`: a single restore.
pub fn manifest(args: &RestoreArgs) -> Option<PathBuf> {
    args.sessions
        .clone()
        .or_else(|| crate::inputs::env_nonempty("GIT_SESSION_SESSIONS_FILE").map(PathBuf::from))
}

/// A single session's flag beside a manifest (clap refuses them beside `--sessions`; this, beside
/// the variable): each session's inputs come from the manifest only.
fn single_session_flags(args: &RestoreArgs) -> Result<()> {
    let given = [
        (args.read_url.is_some(), "--read-url"),
        (args.push_url.is_some(), "--push-url"),
        (args.archive_url.is_some(), "--archive-url"),
        (args.archive.is_some(), "--archive"),
        (!args.sparse.is_empty(), "--sparse"),
        (args.from.is_some(), "--from"),
        // Those with a default: any other value was given.
        (args.depth != 1, "--depth"),
        (args.lfs != crate::restore::LfsMode::Auto, "--lfs"),
        (
            args.submodules != crate::restore::SubmoduleMode::None,
            "--submodules",
        ),
    ];
    match given.iter().find(|(set, _)| *set) {
        Some((_, flag)) => Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "{flag} names one session's input, but GIT_SESSION_SESSIONS_FILE names a \
                 manifest of sessions: put it in the manifest's entries, or unset the variable"
            ),
        )),
        None => Ok(()),
    }
}

/// Restore every session of the manifest at `manifest`; prints the result and returns the exit
/// code (0 when every session was restored, else the first failing session's, in the manifest's
/// order; 2 for a bad manifest, before any request).
pub fn run(args: &RestoreArgs, manifest: &Path, json: bool, quiet: bool) -> u8 {
    let jobs = single_session_flags(args)
        .and_then(|()| crate::manifest::read(manifest))
        .and_then(|sessions| become_owner(&sessions).map(|()| sessions))
        .and_then(|sessions| {
            sessions
                .into_iter()
                .map(|s| Job::new(args, s))
                .collect::<Result<Vec<Job>>>()
        });
    let jobs = match jobs {
        Ok(jobs) => jobs,
        Err(err) => {
            crate::output::failure(json, "restore", &err);
            return err.exit_code();
        }
    };
    crate::progress::lines_only();
    let lines = each(jobs, crate::knobs::get().sessions_concurrency, Job::run);
    crate::output::sessions(json, quiet, "restore", lines)
}

/// The single command `--all` runs in each session.
#[derive(Clone, Copy)]
pub enum Each<'a> {
    /// `save --all`.
    Save(&'a SaveArgs, &'a Owner),
    /// `push --all`.
    Push,
    /// `status --all`.
    Status(&'a StatusArgs),
}

impl Each<'_> {
    fn name(self) -> &'static str {
        match self {
            Each::Save(..) => "save",
            Each::Push => "push",
            Each::Status(_) => "status",
        }
    }

    /// The session's line: the single command run in its tree with its inputs.
    fn run(self, s: &Session) -> SessionLine {
        let given = super::Given::Manifest(s);
        let dir = s.dir.clone();
        let result = match self {
            Each::Save(args, owner) => super::save::run(args, dir, owner, given),
            Each::Push => super::push::run(dir, given),
            Each::Status(args) => super::status::run(args, dir, given),
        };
        let failed = match self {
            Each::Save(..) => "not saved",
            Each::Push => "not pushed",
            Each::Status(_) => "no status",
        };
        line(
            failed,
            s.dir.display().to_string(),
            s.branch.to_string(),
            result,
        )
    }
}

/// `save`, `push` or `status` with `--all`: the command in every session of the manifest
/// (`--sessions FILE`, else `GIT_SESSION_SESSIONS_FILE`), each with its own inputs; prints the
/// result and returns the exit code, by [`run`]'s rule.
pub fn run_all(command: Each, all: &AllArgs, push_url: bool, json: bool, quiet: bool) -> u8 {
    let sessions = match read_all(all, push_url) {
        Ok(sessions) => sessions,
        Err(err) => {
            crate::output::failure(json, command.name(), &err);
            return err.exit_code();
        }
    };
    crate::progress::lines_only();
    let lines = each(sessions, crate::knobs::get().sessions_concurrency, |s| {
        command.run(&s)
    });
    crate::output::sessions(json, quiet, command.name(), lines)
}

/// The sessions of the manifest `--all` reads (`--push-url`, a single session's, refused beside
/// it), their folders made the owner's (SPEC rule 9) before any thread starts.
///
/// # Errors
/// [`Error::Usage`] for no manifest, a bad one or `--push-url`; what reading it fails with.
pub fn read_all(all: &AllArgs, push_url: bool) -> Result<Vec<Session>> {
    all_manifest(all, push_url)
        .and_then(|path| crate::manifest::read(&path))
        .and_then(|sessions| become_owner(&sessions).map(|()| sessions))
}

/// The manifest `--all` reads; `--push-url` names one session's input and is refused beside it.
fn all_manifest(all: &AllArgs, push_url: bool) -> Result<PathBuf> {
    if push_url {
        return Err(Error::Usage(
            Refusal::Invalid,
            "--push-url names one session's input, but --all runs in every session of the \
             manifest: put each push_url in the manifest's entries"
                .into(),
        ));
    }
    all.sessions
        .clone()
        .or_else(|| crate::inputs::env_nonempty("GIT_SESSION_SESSIONS_FILE").map(PathBuf::from))
        .ok_or_else(|| {
            Error::Usage(
                Refusal::Missing,
                "--all needs a sessions manifest: give --sessions FILE or set \
                 GIT_SESSION_SESSIONS_FILE"
                    .into(),
            )
        })
}

/// SPEC rule 9 for each session's folder, before any thread starts: run as root, git-session
/// becomes the owner of the first folder another user owns (and checks every folder's path as for
/// `-C`); from then on it works as that user, so a folder of someone else's fails to be written
/// (exit 10) rather than being written as root.
fn become_owner(sessions: &[Session]) -> Result<()> {
    for s in sessions {
        crate::fs::owner::become_owner(&s.given, &s.dir).map_err(|e| match e {
            Error::Usage(why, text) => Error::Usage(why, format!("{}: {text}", s.name())),
            other => other,
        })?;
    }
    Ok(())
}

/// One session's restore, ready to run.
struct Job {
    opts: RestoreOptions,
    archive: Option<ArchiveOptions>,
}

impl Job {
    /// The session's own inputs; the bounds and `--force` of the command line apply to each.
    fn new(args: &RestoreArgs, s: Session) -> Result<Job> {
        let archive = s
            .archive
            .map(|url| super::restore::archive_options(args, Some(ArchiveSource::Url(url))))
            .transpose()?;
        let opts = RestoreOptions {
            dir: s.dir,
            branch: s.branch,
            tip: s.tip,
            read: s.read,
            push: s.push,
            depth: (s.depth > 0).then_some(s.depth),
            force: args.force,
            limits: super::restore::pack_limits(args),
            lfs: s.lfs,
            submodules: s.submodules,
            sparse: s.sparse,
            template: false,
            cache: s.cache,
            signing: None,
        };
        Ok(Job { opts, archive })
    }

    fn run(self) -> SessionLine {
        let dir = self.opts.dir.display().to_string();
        let branch = self.opts.branch.to_string();
        let result = super::restore::execute(self.opts, self.archive.as_ref());
        line("not restored", dir, branch, result)
    }
}

/// Run `jobs`, `at_once` at a time, each on a thread of its own; the lines in the jobs' order.
fn each<J: Send>(
    jobs: Vec<J>,
    at_once: usize,
    run: impl Fn(J) -> SessionLine + Sync,
) -> Vec<SessionLine> {
    let count = jobs.len();
    let queue: Vec<Mutex<Option<J>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let done: Vec<Mutex<Option<SessionLine>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let worker = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = queue.get(i) else { break };
            let Some(job) = slot.lock().ok().and_then(|mut j| j.take()) else {
                continue;
            };
            let line = run(job);
            let k = finished.fetch_add(1, Ordering::Relaxed) + 1;
            crate::progress::finished(&format!("[{k}/{count}] {}", line.human));
            if let Ok(mut d) = done[i].lock() {
                *d = Some(line);
            }
        }
    };
    std::thread::scope(|scope| {
        let mut spawned = 0;
        for n in 0..at_once.min(count) {
            let started = std::thread::Builder::new()
                .name(format!("git-session-session-{n}"))
                .stack_size(STACK_BYTES)
                .spawn_scoped(scope, worker);
            spawned += usize::from(started.is_ok());
        }
        // No thread could start: the sessions run here, one after another.
        if spawned == 0 {
            worker();
        }
    });
    done.into_iter()
        .filter_map(|d| d.into_inner().ok().flatten())
        .collect()
}

/// A session's outcome as its line of the result; `failed` names a failure (`not restored`).
fn line(failed: &str, dir: String, branch: String, result: Result<Success>) -> SessionLine {
    match result {
        Ok(Success {
            result,
            branch,
            warnings,
            human,
        }) => {
            // A restore's line names its folder already.
            let human = match result {
                CommandResult::Restore(_) => human,
                _ => format!("{dir}: {}", human.lines().collect::<Vec<_>>().join("; ")),
            };
            let fields = match result {
                CommandResult::Restore(r) => Some(SessionFields::Restore(r)),
                CommandResult::Save(p) | CommandResult::Push(p) => Some(SessionFields::Pushed(p)),
                CommandResult::Status(s) => Some(SessionFields::Status(Box::new(s))),
                _ => None,
            };
            SessionLine {
                human,
                result: SessionRestored {
                    dir,
                    ok: true,
                    exit_code: 0,
                    branch,
                    kind: None,
                    message: None,
                    stale_lease: None,
                    stale_remote_tip: None,
                    restored: fields,
                    warnings,
                },
            }
        }
        Err(err) => {
            let message = err.to_string();
            let stale = match err.root() {
                Error::Stale(s) => Some((s.lease, s.remote_tip)),
                _ => None,
            };
            SessionLine {
                human: format!(
                    "{dir}: {failed} (exit {}, {}): {message}",
                    err.exit_code(),
                    err.kind()
                ),
                result: SessionRestored {
                    dir,
                    ok: false,
                    exit_code: err.exit_code(),
                    branch,
                    kind: Some(err.kind()),
                    message: Some(message),
                    stale_lease: stale.map(|s| s.0),
                    stale_remote_tip: stale.map(|s| s.1),
                    restored: None,
                    warnings: Vec::new(),
                },
            }
        }
    }
}
