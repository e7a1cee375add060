//! [`SessionBranch`]: the session branch name, checked with git's ref-name rules.

use std::fmt;
use std::str::FromStr;

/// A session branch name without the `refs/heads/` prefix, e.g. `sessions/4f1c…`.
///
/// Parsing accepts `x` and `refs/heads/x` (normalised to `x`) and applies git's ref-name rules
/// (git-check-ref-format(1), through `gix::validate::reference::branch_name`) to `refs/heads/x`, plus the
/// branch-only rules of `git check-ref-format --branch`: no leading `-`, not `HEAD`; and an `x` that
/// itself starts with `refs/heads/` is refused, so the short name always parses back to itself.
/// It never holds an invalid name, so every ref, refspec and config key built from it is well-formed.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SessionBranch(String);

/// Why a string is not a valid session branch name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid session branch name '{shown}': {reason} (see git-check-ref-format(1))")]
pub struct BranchError {
    shown: String,
    reason: String,
}

impl SessionBranch {
    /// The short name, e.g. `sessions/abc`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The full ref name, e.g. `refs/heads/sessions/abc`.
    pub fn full_ref(&self) -> String {
        format!("refs/heads/{}", self.0)
    }

    /// The remote-tracking ref of `origin`, e.g. `refs/remotes/origin/sessions/abc`.
    pub fn tracking_ref(&self) -> String {
        format!("refs/remotes/origin/{}", self.0)
    }
}

impl FromStr for SessionBranch {
    type Err = BranchError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| BranchError {
            shown: s
                .chars()
                .take(200)
                .collect::<String>()
                .escape_debug()
                .to_string(),
            reason: reason.to_owned(),
        };
        let short = s.strip_prefix("refs/heads/").unwrap_or(s);
        if short.is_empty() {
            return Err(err("the name is empty"));
        }
        // Stored and read back as the short name: one that still starts with `refs/heads/` would
        // come back as another branch.
        if short.starts_with("refs/heads/") {
            return Err(err(
                "the short name would start with refs/heads/ (pass the name once, with or without                  refs/heads/)",
            ));
        }
        if short.starts_with('-') {
            return Err(err("a branch name cannot start with '-'"));
        }
        if short == "HEAD" || short == "@" {
            return Err(err("the name is reserved"));
        }
        let full = format!("refs/heads/{short}");
        gix::validate::reference::branch_name(full.as_str().into())
            .map_err(|e| err(&e.to_string().to_lowercase()))?;
        Ok(SessionBranch(short.to_owned()))
    }
}

impl fmt::Display for SessionBranch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SessionBranch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionBranch({:?})", self.0)
    }
}

impl serde::Serialize for SessionBranch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for SessionBranch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_full_ref() {
        let b: SessionBranch = "refs/heads/sessions/4f1c".parse().unwrap();
        assert_eq!(b.as_str(), "sessions/4f1c");
        assert_eq!(b.full_ref(), "refs/heads/sessions/4f1c");
    }

    /// Every name git's `check-ref-format --branch` refuses (the list `tests/inputs.rs` checks
    /// git against), and a full ref given twice, which git would take as `refs/heads/refs/heads/a`.
    #[test]
    fn refuses_invalid() {
        let git_refuses: Vec<String> = serde_json::from_str(include_str!(
            "../../tests/fixtures/invalid-branch-names.json"
        ))
        .unwrap();
        let ours = ["refs/heads/refs/heads/a".to_owned()];
        for bad in git_refuses.iter().chain(&ours) {
            assert!(
                bad.parse::<SessionBranch>().is_err(),
                "{bad:?} was accepted"
            );
        }
    }
}
