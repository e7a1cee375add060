//! The only place that prints results: one short human line, or exactly one JSON object, on stdout;
//! errors and warnings on stderr (SPEC "Output").

use std::io::Write;

use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::redact;

/// Warnings found before a command's outcome is known (see [`warn_early`]).
static EARLY: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Keep a warning to show with the command's result, whether it succeeds or fails: a failure's
/// cause may be what the warning names (the pre-push check found turned off, say).
pub fn warn_early(warning: String) {
    if let Ok(mut early) = EARLY.lock()
        && !early.contains(&warning)
    {
        early.push(warning);
    }
}

fn take_early() -> Vec<String> {
    EARLY
        .lock()
        .map(|mut e| std::mem::take(&mut *e))
        .unwrap_or_default()
}

/// A command's successful result.
pub struct Success {
    /// The command name (`restore`, …).
    pub command: &'static str,
    /// The session branch.
    pub branch: String,
    /// Warnings for the user.
    pub warnings: Vec<String>,
    /// Command-specific JSON fields (`tip`, `lease`, `source`, …).
    pub fields: Map<String, Value>,
    /// The human line.
    pub human: String,
}

/// Print a success: warnings to stderr (unless quiet), then the result to stdout.
///
/// # Security
/// Every text goes through [`redact`] first: a server's words may hold the session's secret.
pub fn success(json_mode: bool, quiet: bool, mut s: Success) {
    let mut warnings = take_early();
    warnings.retain(|w| !s.warnings.contains(w));
    warnings.append(&mut s.warnings);
    s.warnings = warnings;
    if !quiet {
        for w in &s.warnings {
            eprintln!("warning: {}", redact::text(w));
        }
    }
    let mut out = std::io::stdout().lock();
    if json_mode {
        let mut obj = Map::new();
        obj.insert("ok".into(), Value::Bool(true));
        obj.insert("command".into(), Value::String(s.command.into()));
        // A template (bake) has no session branch.
        let branch = if s.branch.is_empty() {
            Value::Null
        } else {
            Value::String(s.branch)
        };
        obj.insert("branch".into(), branch);
        obj.insert("warnings".into(), json!(s.warnings));
        obj.extend(s.fields);
        let _ = writeln!(out, "{}", redact::json(Value::Object(obj)));
    } else {
        let _ = writeln!(out, "{}", redact::text(&s.human));
    }
}

/// Print a failure: the message on stderr; with `--json` also the JSON object on stdout.
pub fn failure(json_mode: bool, command: &str, err: &Error) {
    let warnings: Vec<String> = take_early().iter().map(|w| redact::text(w)).collect();
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let message = redact::text(&err.to_string());
    eprintln!("error: {message}");
    if json_mode {
        let mut error = Map::new();
        error.insert("kind".into(), Value::String(err.kind().into()));
        error.insert("message".into(), Value::String(message));
        let mut obj = Map::new();
        obj.insert("ok".into(), Value::Bool(false));
        obj.insert("command".into(), Value::String(command.into()));
        obj.insert("exit_code".into(), json!(err.exit_code()));
        obj.insert("error".into(), Value::Object(error));
        obj.insert("warnings".into(), json!(warnings));
        if let Error::Stale(s) = err.root() {
            obj.insert("lease".into(), Value::String(s.lease.to_string()));
            obj.insert("remote_tip".into(), Value::String(s.remote_tip.to_string()));
        }
        let _ = writeln!(std::io::stdout().lock(), "{}", Value::Object(obj));
    }
}
