//! The only place that prints results: one short human line, or exactly one JSON object, on stdout;
//! errors and warnings on stderr (SPEC "Output").

use std::io::Write;

use serde_json::{Map, Value, json};

use crate::error::Error;

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
pub fn success(json_mode: bool, quiet: bool, s: Success) {
    if !quiet {
        for w in &s.warnings {
            eprintln!("warning: {w}");
        }
    }
    let mut out = std::io::stdout().lock();
    if json_mode {
        let mut obj = Map::new();
        obj.insert("ok".into(), Value::Bool(true));
        obj.insert("command".into(), Value::String(s.command.into()));
        obj.insert("branch".into(), Value::String(s.branch));
        obj.insert("warnings".into(), json!(s.warnings));
        obj.extend(s.fields);
        let _ = writeln!(out, "{}", Value::Object(obj));
    } else {
        let _ = writeln!(out, "{}", s.human);
    }
}

/// Print a failure: the message on stderr; with `--json` also the JSON object on stdout.
pub fn failure(json_mode: bool, command: &str, err: &Error) {
    eprintln!("error: {err}");
    if json_mode {
        let mut error = Map::new();
        error.insert("kind".into(), Value::String(err.kind().into()));
        error.insert("message".into(), Value::String(err.to_string()));
        let mut obj = Map::new();
        obj.insert("ok".into(), Value::Bool(false));
        obj.insert("command".into(), Value::String(command.into()));
        obj.insert("exit_code".into(), json!(err.exit_code()));
        obj.insert("error".into(), Value::Object(error));
        if let Error::Stale {
            lease, remote_tip, ..
        } = err
        {
            obj.insert("lease".into(), Value::String(lease.to_string()));
            obj.insert("remote_tip".into(), Value::String(remote_tip.to_string()));
        }
        let _ = writeln!(std::io::stdout().lock(), "{}", Value::Object(obj));
    }
}
