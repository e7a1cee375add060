//! [`AgentName`]: the name of one agent's linked work tree (`git-session agent add NAME`).

use std::fmt;
use std::str::FromStr;

/// An agent's name: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`, not ending `.lock`. It names a folder
/// (`<common dir>/worktrees/<NAME>`, the default `<tree>-<NAME>`) and a branch suffix, so no
/// `/`, `..` at the start, control character or space can reach a path or a ref.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentName(String);

/// Why a string is not an agent name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid agent name '{shown}': {reason} (1 to 64 of A-Z a-z 0-9 . _ -, starting with a \
     letter or digit, no '..', not ending .lock)"
)]
pub struct AgentNameError {
    shown: String,
    reason: &'static str,
}

/// The longest agent name.
pub const MAX_AGENT_NAME: usize = 64;

impl AgentName {
    /// `agent`: the name a hint suggests.
    pub fn agent() -> Self {
        AgentName("agent".to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for AgentName {
    type Err = AgentNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| AgentNameError {
            shown: s
                .chars()
                .take(80)
                .collect::<String>()
                .escape_debug()
                .to_string(),
            reason,
        };
        let first = s.bytes().next().ok_or_else(|| err("the name is empty"))?;
        if !first.is_ascii_alphanumeric() {
            return Err(err("it must start with a letter or digit"));
        }
        if s.len() > MAX_AGENT_NAME {
            return Err(err("it is longer than 64 characters"));
        }
        if !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(err("it holds a character other than A-Z a-z 0-9 . _ -"));
        }
        if s.contains("..") {
            return Err(err("it holds '..'"));
        }
        if s.ends_with(".lock") {
            return Err(err("it ends with .lock"));
        }
        Ok(AgentName(s.to_owned()))
    }
}

impl fmt::Display for AgentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "reviewer", "B-2", "x.y_z", &"a".repeat(64)] {
            assert_eq!(ok.parse::<AgentName>().unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "-a",
            ".a",
            "a/b",
            "..",
            "a..b",
            "a..b/c",
            "a b",
            "a\u{1}",
            "x.lock",
            "é",
            &"a".repeat(65),
        ] {
            assert!(bad.parse::<AgentName>().is_err(), "{bad:?}");
        }
    }
}
