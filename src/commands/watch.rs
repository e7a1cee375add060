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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::cli::{SaveArgs, WatchArgs};
use crate::error::{Error, Refusal, Result};
use crate::hint::Hint;
use crate::output;
use crate::repo::session::Session;
use crate::types::Owner;

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

/// Run the loop in `dir`; returns the exit code. Every outcome is printed here.
pub fn run(args: &WatchArgs, dir: PathBuf, owner: &Owner, json: bool, quiet: bool) -> u8 {
    match watch(args, dir, owner, json, quiet) {
        Ok(code) => code,
        Err(err) => {
            output::failure(json, "watch", &err);
            err.exit_code()
        }
    }
}

fn watch(args: &WatchArgs, dir: PathBuf, owner: &Owner, json: bool, quiet: bool) -> Result<u8> {
    let every = duration("--every", &args.every, MIN_EVERY)?;
    let quiet_for = duration("--quiet-for", &args.quiet_for, Duration::ZERO)?;
    let branch = args.push.session_branch.as_deref();
    // Refuse at once what every save would refuse: no session here, no PUSH_URL.
    Session::open(&dir, branch)?;
    super::push::push_source(&args.push)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())
            .map_err(|e| Error::io("installing the signal handlers", e))?;
    }
    let save_args = SaveArgs {
        message: args.message.clone(),
        no_push: false,
        push: args.push.clone(),
        all: crate::cli::AllArgs {
            all: false,
            sessions: None,
        },
    };
    tracing::info!("watching {} every {:?}", dir.display(), every);
    let mut refused = 0;
    let mut next = Instant::now() + every;
    // Set once SIGTERM/SIGINT came: what is pending must be pushed by then.
    let mut deadline: Option<Instant> = None;
    loop {
        while Instant::now() < next && !stop.load(Ordering::SeqCst) {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
        if stop.load(Ordering::SeqCst) && deadline.is_none() {
            deadline = Some(Instant::now() + Duration::from_secs(FINAL_SAVE_SECS));
        }
        next = Instant::now() + every;
        let newest = match pending(&dir, branch) {
            Ok(Pending::Nothing) if deadline.is_some() => return Ok(0),
            Ok(Pending::Nothing) => continue,
            Ok(Pending::Work(newest)) => newest,
            // The save reports it the way it reports everything.
            Err(_) => None,
        };
        if deadline.is_none()
            && let Some(newest) = newest
            && let Ok(age) = SystemTime::now().duration_since(newest)
            && age < quiet_for
        {
            // A file is being written: look again once it has been quiet long enough.
            next = next.min(Instant::now() + (quiet_for - age));
            continue;
        }
        match save_within(&save_args, &dir, owner, &stop, &mut deadline) {
            Ok(success) => {
                refused = 0;
                output::success(json, quiet, success);
                // Stopping: the next round returns 0 when nothing is left, else saves again
                // within what is left of the deadline.
            }
            Err(err) => {
                output::failure(json, "save", &err);
                let code = err.exit_code();
                if deadline.is_some() {
                    return Ok(code);
                }
                match code {
                    4 => {
                        refused += 1;
                        if refused >= AUTH_REFUSALS {
                            return Ok(4);
                        }
                    }
                    5..=7 | 9 | 10 => refused = 0,
                    other => return Ok(other),
                }
            }
        }
    }
}

/// One save, in a thread, while watching for SIGTERM/SIGINT: once one came (`deadline` is set
/// then, [`FINAL_SAVE_SECS`] after it), a save still running when the deadline passes is given up
/// on — a sandbox being stopped waits no longer, whatever retries the save was in.
fn save_within(
    args: &SaveArgs,
    dir: &Path,
    owner: &Owner,
    stop: &AtomicBool,
    deadline: &mut Option<Instant>,
) -> Result<output::Success> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (args, dir, owner) = (args.clone(), dir.to_owned(), owner.clone());
    std::thread::spawn(move || {
        let _ = tx.send(super::save::run(
            &args,
            dir,
            &owner,
            super::Given::environment(&args.push),
        ));
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(saved) => return saved,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::Internal("the save ended without a result".into()));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if stop.load(Ordering::SeqCst) && deadline.is_none() {
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
