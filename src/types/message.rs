//! [`CommitMessage`]: the message `save -m` and `watch -m` commit, free of control characters.

use std::fmt;
use std::str::FromStr;

/// A commit message as given: any text but control characters other than the line break and the
/// tab. A message is read later by `git log` on a terminal, by review tools and by other
/// sandboxes: an ESC, CR or BEL in it would drive those terminals, so it is refused at the flag
/// (exit 2), before anything is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMessage(String);

/// Why a message was refused. Shows the character escaped, never raw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the commit message holds the control character {shown} (character {at}): only line breaks \
     and tabs may be in it; write the message without it"
)]
pub struct MessageError {
    shown: String,
    at: usize,
}

impl CommitMessage {
    /// The message as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for CommitMessage {
    type Err = MessageError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s
            .chars()
            .enumerate()
            .find(|(_, c)| c.is_control() && !matches!(c, '\n' | '\t'))
        {
            Some((at, c)) => Err(MessageError {
                shown: crate::text::line_str(&c.to_string()).into_owned(),
                at: at + 1,
            }),
            None => Ok(CommitMessage(s.to_owned())),
        }
    }
}

impl fmt::Display for CommitMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_but_line_breaks_and_tabs_are_refused() {
        assert!(
            "subject\n\nbody\twith tab é"
                .parse::<CommitMessage>()
                .is_ok()
        );
        for (bad, shown) in [
            ("a\x1b[31mred", "\\x1b"),
            ("a\rb", "\\r"),
            ("bell\x07", "\\x07"),
            ("nul\0", "\\x00"),
            ("c1\u{9b}", "\\u{9b}"),
            ("del\x7f", "\\x7f"),
        ] {
            let err = bad.parse::<CommitMessage>().unwrap_err();
            let text = err.to_string();
            assert!(text.contains(shown), "{text}");
            assert!(!text.chars().any(char::is_control), "{text:?}");
        }
    }
}
