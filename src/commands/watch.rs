//! `git-session watch --every DURATION`: checkpoints for a working agent. Each interval, when the
//! tree changed or commits are ahead of the lease (a person's plain `git commit` included), it
//! saves — commit and push, the same code and rules as `save` — and prints one line (one JSON
//! object with `--json`) per save; an idle tree makes no commit. At most one interval plus the
//! quiet period of work is ever unsaved.
//!
//! Ends: another sandbox owning the session (exit 3, at once; the local commit is kept); three
//! refused tokens in a row (exit 4; a `*_FILE` is re-read each time); SIGTERM or SIGINT (one final
//! save of pending work within about 8 s, then exit 0 when nothing is left unpushed, else that
//! save's code). Network failures (5), integrity refusals (6), local conflicts (7), a refusing
//! remote (9) and a full disk (10) are reported and retried on the next tick. No lock is held
//! between saves: a person's `git-session save` or plain git waits for one save at most.
//!
//! `watch --all` runs this loop once per session of a manifest, each on a thread of its own with
//! its entry's inputs ([`Given::Manifest`]); one session's end stops only it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use super::Given;
use crate::cli::{PushArgs, SaveArgs, WatchArgs};
use crate::error::{Error, Refusal, Result};
use crate::hint::Hint;
use crate::repo::session::Session;
use crate::types::Owner;
use crate::{manifest, output, redact};

/// How long the final save on SIGTERM/SIGINT may take before watch gives up on it.
pub const FINAL_SAVE_SECS: u64 = 8;

/// Refused tokens in a row that end the loop.
pub const AUTH_REFUSALS: u32 = 3;

/// What a tick found.
enum Pending {
    /// Nothing to save.
    Nothing,
    /// Work to save; the newest modification time among the changed files, if any.
    Work(Option<SystemTime>),
}

/// The longest `--every` or `--quiet-for`: a day (a longer one would overflow the clock's
/// arithmetic, and no session lasts that long between checkpoints).
const MAX_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

/// The shortest `--every`: the shortest wait any knob may ask for (a shorter tick only spins).
const MIN_EVERY: Duration = Duration::from_millis(crate::knobs::MIN_WAIT_MS);

/// Parse a duration such as `30s`, `2m`, `1m30s`, `500ms`: digits then `ms`, `s`, `m` or `h`,
/// repeated, nothing else (no sign, space or other unit), from `min` to a day.
fn duration(flag: &str, text: &str, min: Duration) -> Result<Duration> {
    let refuse = || {
        Error::Usage(
            Refusal::Invalid,
            format!(
                "{flag} is '{}': it must be a duration from {} to 24h such as 30s, 2m, 1m30s or \
                 500ms (digits, then ms, s, m or h)",
                text.escape_debug(),
                humantime::format_duration(min)
            ),
        )
    };
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let unit_len = rest[digits..]
            .bytes()
            .take_while(u8::is_ascii_alphabetic)
            .count();
        let (number, unit) = (&rest[..digits], &rest[digits..digits + unit_len]);
        let scale = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(refuse()),
        };
        let millis = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .ok_or_else(refuse)?;
        total = total
            .checked_add(Duration::from_millis(millis))
            .ok_or_else(refuse)?;
        rest = &rest[digits + unit_len..];
    }
    if text.is_empty() || total < min || total > MAX_INTERVAL {
        return Err(refuse());
    }
    Ok(total)
}

/// Where a watched session's inputs come from (owned: each save runs on a thread of its own).
#[derive(Clone)]
enum Source {
    /// A single watch: the environment and the flags.
    Environment(PushArgs),
    /// `watch --all`: one entry of the manifest, so its credentials reach only its own URLs.
    Manifest(Arc<manifest::Session>),
}

impl Source {
    /// The manifest session's place, which its warnings are kept under ([`output::in_session`]).
    fn index(&self) -> Option<usize> {
        match self {
            Source::Environment(_) => None,
            Source::Manifest(s) => Some(s.index),
        }
    }

    fn given(&self) -> Given<'_> {
        match self {
            Source::Environment(push) => Given::environment(push),
            Source::Manifest(s) => Given::Manifest(s),
        }
    }
}

/// What every watched session shares: the command line's knobs and the stop flag.
struct Watching {
    every: Duration,
    quiet_for: Duration,
    save: SaveArgs,
    owner: Owner,
    json: bool,
    quiet: bool,
    /// Set by SIGTERM or SIGINT.
    stop: Arc<AtomicBool>,
}

impl Watching {
    fn new(args: &WatchArgs, owner: &Owner, json: bool, quiet: bool) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(signal, stop.clone())
                .map_err(|e| Error::io("installing the signal handlers", e))?;
        }
        Ok(Watching {
            every: duration("--every", &args.every, MIN_EVERY)?,
            quiet_for: duration("--quiet-for", &args.quiet_for, Duration::ZERO)?,
            save: SaveArgs {
                message: args.message.clone(),
                no_push: false,
                push: args.push.clone(),
                all: crate::cli::AllArgs {
                    all: false,
                    sessions: None,
                },
            },
            owner: owner.clone(),
            json,
            quiet,
            stop,
        })
    }
}

/// Run the loop in `dir`; returns the exit code. Every outcome is printed here.
pub fn run(args: &WatchArgs, dir: PathBuf, owner: &Owner, json: bool, quiet: bool) -> u8 {
    let started = Watching::new(args, owner, json, quiet).and_then(|w| {
        // Refuse at once what every save would refuse: no session here, no PUSH_URL.
        Session::open(&dir, args.push.session_branch.as_deref())?;
        super::push::push_source(&args.push)?;
        Ok(w)
    });
    match started {
        Ok(w) => watch(&w, &dir, &Source::Environment(args.push.clone()), None),
        Err(err) => {
            output::failure(json, "watch", &err);
            err.exit_code()
        }
    }
}

/// `watch --all`: every session of the manifest watched at once, each in its own tree against its
/// own lease with its own inputs, on a thread of its own; one that ends (stale, say) stops only
/// itself. Returns the exit code by the manifest's rule: 0 when every session's watch ended well,
/// else the first failing session's, in the manifest's order.
pub fn run_all(args: &WatchArgs, owner: &Owner, json: bool, quiet: bool) -> u8 {
    let push_url = args.push.push_url.is_some();
    let started = super::sessions::read_all(&args.all, push_url)
        .and_then(|sessions| Ok((Watching::new(args, owner, json, quiet)?, sessions)));
    let (w, sessions) = match started {
        Ok(started) => started,
        Err(err) => {
            output::failure(json, "watch", &err);
            return err.exit_code();
        }
    };
    crate::progress::lines_only();
    let codes: Vec<u8> = std::thread::scope(|scope| {
        let threads: Vec<_> = sessions
            .into_iter()
            .map(|s| {
                let w = &w;
                scope.spawn(move || watch_session(w, Arc::new(s)))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or(1)).collect()
    });
    codes.into_iter().find(|c| *c != 0).unwrap_or(0)
}

/// One session of `watch --all`: checked as a single watch is, then watched; its end is said on
/// its own line.
fn watch_session(w: &Watching, s: Arc<manifest::Session>) -> u8 {
    output::in_session(Some(s.index));
    let dir = s.dir.clone();
    let label = dir.display().to_string();
    let given = Given::Manifest(&s);
    let checked = Session::open(&dir, given.branch().as_deref()).and_then(|_| given.push());
    let code = match checked {
        Ok(_) => watch(w, &dir, &Source::Manifest(s.clone()), Some(&label)),
        Err(err) => {
            output::failure_in(w.json, "watch", Some(&label), &err);
            err.exit_code()
        }
    };
    if code != 0 {
        let others = if w.stop.load(Ordering::SeqCst) {
            ""
        } else {
            "; the other sessions are watched on"
        };
        redact::Stderr::line(&format!(
            "{}: no longer watched (exit {code}){others}",
            crate::text::terminal(&label)
        ));
    }
    code
}

/// The loop of one session in `dir`; `label` names it on each line (`watch --all`). Returns its
/// exit code.
fn watch(w: &Watching, dir: &Path, source: &Source, label: Option<&str>) -> u8 {
    let branch = source.given().branch();
    let branch = branch.as_deref();
    tracing::info!("watching {} every {:?}", dir.display(), w.every);
    let mut refused = 0;
    let mut next = Instant::now() + w.every;
    // Set once SIGTERM/SIGINT came: what is pending must be pushed by then.
    let mut deadline: Option<Instant> = None;
    loop {
        while Instant::now() < next && !w.stop.load(Ordering::SeqCst) {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
        if w.stop.load(Ordering::SeqCst) && deadline.is_none() {
            deadline = Some(Instant::now() + Duration::from_secs(FINAL_SAVE_SECS));
        }
        next = Instant::now() + w.every;
        let newest = match pending(dir, branch) {
            Ok(Pending::Nothing) if deadline.is_some() => return 0,
            Ok(Pending::Nothing) => continue,
            Ok(Pending::Work(newest)) => newest,
            // The save reports it the way it reports everything.
            Err(_) => None,
        };
        if deadline.is_none()
            && let Some(newest) = newest
            && let Ok(age) = SystemTime::now().duration_since(newest)
            && age < w.quiet_for
        {
            // A file is being written: look again once it has been quiet long enough.
            next = next.min(Instant::now() + (w.quiet_for - age));
            continue;
        }
        match save_within(w, dir, source, &mut deadline) {
            Ok(success) => {
                refused = 0;
                output::success_in(w.json, w.quiet, label, success);
                // Stopping: the next round returns 0 when nothing is left, else saves again
                // within what is left of the deadline.
            }
            Err(err) => {
                output::failure_in(w.json, "save", label, &err);
                let code = err.exit_code();
                if deadline.is_some() {
                    return code;
                }
                match code {
                    4 => {
                        refused += 1;
                        if refused >= AUTH_REFUSALS {
                            return 4;
                        }
                    }
                    5..=7 | 9 | 10 => refused = 0,
                    other => return other,
                }
            }
        }
    }
}

/// One save, in a thread, while watching for SIGTERM/SIGINT: once one came (`deadline` is set
/// then, [`FINAL_SAVE_SECS`] after it), a save still running when the deadline passes is given up
/// on — a sandbox being stopped waits no longer, whatever retries the save was in.
fn save_within(
    w: &Watching,
    dir: &Path,
    source: &Source,
    deadline: &mut Option<Instant>,
) -> Result<output::Success> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (args, dir, owner, source) = (
        w.save.clone(),
        dir.to_owned(),
        w.owner.clone(),
        source.clone(),
    );
    std::thread::spawn(move || {
        output::in_session(source.index());
        let _ = tx.send(super::save::run(&args, dir, &owner, source.given()));
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(saved) => return saved,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::Internal("the save ended without a result".into()));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if w.stop.load(Ordering::SeqCst) && deadline.is_none() {
            *deadline = Some(Instant::now() + Duration::from_secs(FINAL_SAVE_SECS));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::Network(format!(
                "the save did not finish within {FINAL_SAVE_SECS} s of the signal: local commits \
                 are kept, a later {} pushes them",
                Hint::Save
            )));
        }
    }
}

/// Whether there is work to save: a changed file (as `save` finds them) or commits ahead of the
/// lease.
fn pending(dir: &Path, branch: Option<&str>) -> Result<Pending> {
    let session = Session::open(dir, branch)?;
    let repo = crate::repo::open(&session.git_dir)?;
    let record = &session.record;
    let head = repo
        .head_id()
        .ok()
        .map(|id| crate::types::FullSha::from_id(id.detach()));
    let ledger = crate::repo::lease::Ledger::new(&session.git_dir);
    let lease =
        crate::repo::lease::known_lease(&repo, &ledger, record.lease, &record.branch, head)?;
    let base = if lease.is_zero() { record.tip } else { lease };
    let ahead = super::status::commits_ahead(&repo, head, base);
    let changes = match crate::save::pending_changes(&session.workdir, &record.branch) {
        Ok(p) => p.changes,
        // A stopped merge or HEAD off the branch: the save says so (exit 7), every tick.
        Err(Error::Conflict(_)) => return Ok(Pending::Work(None)),
        Err(e) => return Err(e),
    };
    if changes.is_empty() && ahead == 0 {
        return Ok(Pending::Nothing);
    }
    let newest = changes
        .iter()
        .filter_map(|c| std::fs::symlink_metadata(session.workdir.join(&c.path)).ok())
        .filter_map(|m| m.modified().ok())
        .max();
    Ok(Pending::Work(newest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_digits_and_a_unit_within_their_range() {
        for (text, ms) in [
            ("300ms", 300),
            ("30s", 30_000),
            ("1m30s", 90_000),
            ("24h", 86_400_000),
        ] {
            assert_eq!(
                duration("--every", text, MIN_EVERY).unwrap().as_millis(),
                ms,
                "{text}"
            );
        }
        assert_eq!(
            duration("--quiet-for", "0s", Duration::ZERO).unwrap(),
            Duration::ZERO
        );
        for bad in [
            "",
            "5",
            "+5s",
            " 5s",
            "5s ",
            "5 s",
            "0x10s",
            "1.5s",
            "-1s",
            "5sec",
            "1d",
            "0s",
            "99ms",
            "24h1ms",
            "18446744073709551615h",
        ] {
            let err = duration("--every", bad, MIN_EVERY).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}");
            assert!(err.to_string().contains("from 100ms to 24h"), "{err}");
        }
    }
}
