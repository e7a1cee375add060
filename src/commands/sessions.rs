//! `git-session restore` of a sessions manifest (`GIT_SESSION_SESSIONS_FILE`, `--sessions FILE`):
//! every session checked first (a bad manifest is exit 2 before any request), then each restored
//! as a single restore is ([`super::restore::execute`]), several at once
//! (`GIT_SESSION_SESSIONS_CONCURRENCY`), each with its own inputs and its own HTTP client, so one
//! session's credentials reach only its own URLs. One failing neither stops nor touches the others.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cli::RestoreArgs;
use crate::error::{Error, Refusal, Result};
use crate::manifest::Session;
use crate::output::json::{CommandResult, SessionRestored};
use crate::output::{SessionLine, Success};
use crate::restore::RestoreOptions;
use crate::restore::archive::{ArchiveOptions, ArchiveSource};

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
    let lines = restore_all(jobs, crate::knobs::get().sessions_concurrency);
    crate::output::sessions(json, quiet, lines)
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
            limits: crate::pack::PackLimits {
                max_object_bytes: args.max_object_bytes,
                max_tree_entries: args.max_entries,
                ..Default::default()
            },
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
        line(dir, branch, result)
    }
}

/// Run `jobs`, `at_once` at a time, each on a thread of its own; the lines in the jobs' order.
fn restore_all(jobs: Vec<Job>, at_once: usize) -> Vec<SessionLine> {
    let count = jobs.len();
    let queue: Vec<Mutex<Option<Job>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
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
            let line = job.run();
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

/// A session's outcome as its line of the result.
fn line(dir: String, branch: String, result: Result<Success>) -> SessionLine {
    match result {
        Ok(Success {
            result: CommandResult::Restore(restored),
            branch,
            warnings,
            human,
        }) => SessionLine {
            result: SessionRestored {
                dir,
                ok: true,
                exit_code: 0,
                branch,
                kind: None,
                message: None,
                restored: Some(restored),
                warnings,
            },
            human,
        },
        Ok(other) => SessionLine {
            human: other.human,
            result: SessionRestored {
                dir,
                ok: true,
                exit_code: 0,
                branch,
                kind: None,
                message: None,
                restored: None,
                warnings: other.warnings,
            },
        },
        Err(err) => {
            let message = err.to_string();
            SessionLine {
                human: format!(
                    "{dir}: not restored (exit {}, {}): {message}",
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
                    restored: None,
                    warnings: Vec::new(),
                },
            }
        }
    }
}
