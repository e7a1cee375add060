//! The terminal rule: text another party chose (a server's `ERR` line, side-band message, `ng`
//! reason or report, an LFS server's message, an environment variable, an argument) reaches a
//! terminal with its control characters shown escaped (`\x1b`, `\r`, `\u{9b}`), never raw, so it
//! cannot move the cursor, rewrite lines already shown, ring the bell or set the window title (the
//! class of git's CVE-2024-52005 for side-band text).
//!
//! Two forms: [`terminal`] keeps line breaks and tabs (the writer of standard error,
//! [`crate::redact::Stderr`], applies it to everything, so no text can skip it), and [`line`]
//! escapes them too, for a peer's words set inside one of our messages, where a line break would
//! let the peer write a line that looks like ours. Bidirectional-override characters (U+202A–E,
//! U+2066–9) are escaped as well: they reorder what a terminal shows.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is never shown raw: C0 controls, DEL, C1 controls, bidirectional overrides, and
/// the Unicode line and paragraph separators (U+2028, U+2029), which some terminals break lines at.
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| escaped(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escaped(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` as a terminal may show it: every control character but the line break and the tab shown
/// escaped (CR, ESC, BEL, DEL, C1 included).
pub fn terminal(s: &str) -> Cow<'_, str> {
    escape(s, |c| matches!(c, '\n' | '\t'))
}

/// `s` shown on one line: every control character escaped, line breaks and tabs too.
pub fn line_str(s: &str) -> Cow<'_, str> {
    escape(s, |_| false)
}

/// Bytes a peer sent, shown on one line: as [`line_str`], and each byte that is not UTF-8 shown as
/// `\xNN` (never silently replaced, never raw).
pub fn line(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&line_str(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped_never_raw() {
        assert_eq!(
            terminal("a\x1b[2Jb\x07c\rd\ne\tf\x7f\u{9b}g\u{202e}h\0"),
            "a\\x1b[2Jb\\x07c\\rd\ne\tf\\x7f\\u{9b}g\\u{202e}h\\x00"
        );
        assert_eq!(line_str("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(
            line(b"ok \xff\x1b]0;t\x07 \xc3\xa9"),
            "ok \\xff\\x1b]0;t\\x07 é"
        );
        assert!(matches!(terminal("plain é text\n"), Cow::Borrowed(_)));
        // Line and paragraph separators: a line break to some terminals (a SESSION_BRANCH held
        // U+2028 raw in messages before).
        assert_eq!(terminal("a\u{2028}b\u{2029}c"), "a\\u{2028}b\\u{2029}c");
    }
}
