//! The only place that prints results: one short human line, or exactly one JSON object, on stdout;
//! errors and warnings on stderr (SPEC "Output").

use serde_json::Value;

use crate::error::Error;
use crate::redact;

pub mod json;
pub mod stdout;

/// Warnings found before a command's outcome is known (see [`warn_early`]), each with the
/// session it is about ([`in_session`]).
static EARLY: std::sync::Mutex<Vec<(Option<usize>, String)>> = std::sync::Mutex::new(Vec::new());

std::thread_local! {
    /// The manifest session this thread works for (`watch --all`); `None`: the process's only one.
    static SESSION: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Mark this thread as working for session `index` of a manifest: the warnings it keeps
/// ([`warn_early`]) are shown only with that session's results, whichever session prints first.
pub fn in_session(index: Option<usize>) {
    SESSION.with(|s| s.set(index));
}

/// Keep a warning to show with the command's result, whether it succeeds or fails: a failure's
/// cause may be what the warning names (the pre-push check found turned off, say).
pub fn warn_early(warning: String) {
    let entry = (SESSION.with(std::cell::Cell::get), warning);
    if let Ok(mut early) = EARLY.lock()
        && !early.contains(&entry)
    {
        early.push(entry);
    }
}

/// The session's owners ([`crate::types::Owner`]), read once at start; every result carries them.
static OWNER: std::sync::OnceLock<crate::types::Owner> = std::sync::OnceLock::new();

/// Record the owners every result shows as `"owner"` (set once; `{}` until then).
pub fn set_owner(owner: crate::types::Owner) {
    let _ = OWNER.set(owner);
}

fn owner() -> crate::types::Owner {
    OWNER.get().cloned().unwrap_or_default()
}

/// The kept warnings of this thread's session ([`in_session`]), taken.
fn take_early() -> Vec<String> {
    let session = SESSION.with(std::cell::Cell::get);
    let Ok(mut early) = EARLY.lock() else {
        return Vec::new();
    };
    let (mine, rest) = std::mem::take(&mut *early)
        .into_iter()
        .partition(|(s, _)| *s == session);
    *early = rest;
    mine.into_iter().map(|(_, w)| w).collect()
}

/// A command's successful result.
pub struct Success {
    /// The command and its JSON fields.
    pub result: json::CommandResult,
    /// The session branch (empty for a template).
    pub branch: String,
    /// Warnings for the user.
    pub warnings: Vec<String>,
    /// The human line.
    pub human: String,
}

/// Print a success: warnings to stderr (unless quiet), then the result to stdout.
///
/// # Security
/// Every text goes through [`redact`] first: a server's words may hold the session's secret.
pub fn success(json_mode: bool, quiet: bool, s: Success) {
    success_in(json_mode, quiet, None, s);
}

/// [`success`] of one session of several (`watch --all`): `dir` names it on each line.
pub fn success_in(json_mode: bool, quiet: bool, dir: Option<&str>, mut s: Success) {
    let mut warnings = take_early();
    warnings.retain(|w| !s.warnings.contains(w));
    warnings.append(&mut s.warnings);
    s.warnings = warnings;
    if !quiet {
        for w in &s.warnings {
            redact::Stderr::line(&format!("warning: {}{w}", prefix(dir)));
        }
    }
    if json_mode {
        let obj = json::Succeeded {
            ok: true,
            dir: dir.map(str::to_owned),
            result: s.result,
            // A template (bake) has no session branch.
            branch: (!s.branch.is_empty()).then_some(s.branch),
            warnings: s.warnings,
            owner: owner(),
        };
        let value = serde_json::to_value(obj).unwrap_or(Value::Null);
        stdout::line(&redact::json(value).to_string());
    } else {
        // Values in it (paths, names) may come from others: the terminal rule, as on stderr.
        let human = format!("{}{}", prefix(dir), s.human);
        stdout::line(&crate::text::terminal(&redact::text(&human)));
    }
}

/// `DIR: `, or nothing for a single session.
fn prefix(dir: Option<&str>) -> String {
    dir.map(|d| format!("{d}: ")).unwrap_or_default()
}

/// Print a failure: the message on stderr; with `--json` also the JSON object on stdout.
pub fn failure(json_mode: bool, command: &str, err: &Error) {
    failure_in(json_mode, command, None, err);
}

/// [`failure`] of one session of several (`watch --all`): `dir` names it on each line.
pub fn failure_in(json_mode: bool, command: &str, dir: Option<&str>, err: &Error) {
    let warnings: Vec<String> = take_early().iter().map(|w| redact::text(w)).collect();
    for w in &warnings {
        redact::Stderr::line(&format!("warning: {}{w}", prefix(dir)));
    }
    let message = redact::text(&err.to_string());
    redact::Stderr::line(&format!("error: {}{message}", prefix(dir)));
    if json_mode {
        let stale = match err.root() {
            Error::Stale(s) => Some((s.lease, s.remote_tip)),
            _ => None,
        };
        let obj = json::Failed {
            ok: false,
            dir: dir.map(str::to_owned),
            command: command.to_owned(),
            exit_code: err.exit_code(),
            error: json::ErrorReport {
                kind: err.kind(),
                message,
            },
            warnings,
            owner: owner(),
            lease: stale.map(|s| s.0),
            remote_tip: stale.map(|s| s.1),
        };
        let value = serde_json::to_value(obj).unwrap_or(Value::Null);
        stdout::line(&redact::json(value).to_string());
    }
}

/// One session's line for a person: the result's, or its failure's.
pub struct SessionLine {
    /// The session's result for `--json`.
    pub result: json::SessionRestored,
    /// The human line (a success's, or the failure's message).
    pub human: String,
}

/// Print `command` run over a sessions manifest: each failure and warning on stderr (warnings unless
/// quiet), then one line per session on stdout, or the one JSON object. Returns the exit code:
/// 0 when every session succeeded, else the first failing session's, in the manifest's order.
///
/// # Security
/// As [`success`]: every text goes through [`redact`].
pub fn sessions(
    json_mode: bool,
    quiet: bool,
    command: &'static str,
    lines: Vec<SessionLine>,
) -> u8 {
    let warnings: Vec<String> = take_early().iter().map(|w| redact::text(w)).collect();
    let exit_code = lines
        .iter()
        .map(|l| l.result.exit_code)
        .find(|code| *code != 0)
        .unwrap_or(0);
    if !quiet {
        for w in &warnings {
            redact::Stderr::line(&format!("warning: {w}"));
        }
    }
    for line in &lines {
        let r = &line.result;
        if !quiet {
            for w in &r.warnings {
                redact::Stderr::line(&format!("warning: {}: {}", r.dir, redact::text(w)));
            }
        }
        if let Some(message) = &r.message {
            redact::Stderr::line(&format!("error: {}: {}", r.dir, redact::text(message)));
        }
    }
    if json_mode {
        let obj = json::SessionsRestored {
            ok: exit_code == 0,
            command,
            exit_code,
            sessions: lines.into_iter().map(|l| l.result).collect(),
            warnings,
            owner: owner(),
        };
        let value = serde_json::to_value(obj).unwrap_or(Value::Null);
        stdout::line(&redact::json(value).to_string());
    } else {
        for line in &lines {
            stdout::line(&crate::text::terminal(&redact::text(&line.human)));
        }
    }
    exit_code
}
