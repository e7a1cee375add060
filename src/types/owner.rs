//! Who owns a session: the sandbox, the agent and the person the backend handed it to (the seeds'
//! handoff ends with "Record which person, agent, and sandbox own the session"). Read once from
//! `GIT_SESSION_SANDBOX`, `GIT_SESSION_AGENT`, `GIT_SESSION_PERSON` (any subset); every commit
//! git-session makes carries them as git trailers (`git interpret-trailers`), and every `--json`
//! result as `"owner"`.

use serde::Serialize;

/// Longest value accepted, in bytes: a trailer is one line of a commit message.
pub const MAX_OWNER_BYTES: usize = 256;

/// The environment variables, their trailer keys and their JSON names, in trailer order.
pub const OWNER_FIELDS: [(&str, &str, &str); 3] = [
    ("GIT_SESSION_SANDBOX", "Session-Sandbox", "sandbox"),
    ("GIT_SESSION_AGENT", "Session-Agent", "agent"),
    ("GIT_SESSION_PERSON", "Session-Person", "person"),
];

/// The owners as set; an unset or empty variable is `None` (and left out of the JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    /// `GIT_SESSION_SANDBOX`: the sandbox's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// `GIT_SESSION_AGENT`: the agent working in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// `GIT_SESSION_PERSON`: the person the agent works for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
}

/// Why an owner value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// A line break, a control, separator or format character: it would end the trailer, forge
    /// another, or hide part of the value from whoever reads it (`git log` shows no U+200B).
    #[error(
        "{var} holds {} (U+{:04X}) at byte {at}: a trailer is one line of visible text; set it \
         to a single line without it",
        forbidden_kind(*ch).unwrap_or("a forbidden character"),
        u32::from(*ch)
    )]
    ControlCharacter {
        /// The variable.
        var: &'static str,
        /// The byte offset of the first such character.
        at: usize,
        /// The character.
        ch: char,
    },
    /// Longer than [`MAX_OWNER_BYTES`].
    #[error("{var} is {len} bytes long: at most {max} are accepted")]
    TooLong {
        /// The variable.
        var: &'static str,
        /// Its length in bytes.
        len: usize,
        /// [`MAX_OWNER_BYTES`].
        max: usize,
    },
    /// Not valid UTF-8.
    #[error("{var} is not valid UTF-8")]
    NotUtf8 {
        /// The variable.
        var: &'static str,
    },
}

impl Owner {
    /// The owners from the process environment.
    ///
    /// # Errors
    /// [`OwnerError`] for a value with a control character (line breaks included), over
    /// [`MAX_OWNER_BYTES`], or not UTF-8.
    pub fn from_env() -> Result<Owner, OwnerError> {
        Owner::from_vars(|var| std::env::var_os(var))
    }

    /// The owners from `get` (an environment).
    ///
    /// # Errors
    /// As [`Owner::from_env`].
    pub fn from_vars(
        get: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Owner, OwnerError> {
        let mut owner = Owner::default();
        for (var, _, _) in OWNER_FIELDS {
            let Some(raw) = get(var) else { continue };
            let value = raw.into_string().map_err(|_| OwnerError::NotUtf8 { var })?;
            let value = value.trim_matches(' ').to_owned();
            if let Some((at, ch)) = value
                .char_indices()
                .find(|(_, c)| forbidden_kind(*c).is_some())
            {
                return Err(OwnerError::ControlCharacter { var, at, ch });
            }
            if value.len() > MAX_OWNER_BYTES {
                return Err(OwnerError::TooLong {
                    var,
                    len: value.len(),
                    max: MAX_OWNER_BYTES,
                });
            }
            if !value.is_empty() {
                *owner.slot(var) = Some(value);
            }
        }
        Ok(owner)
    }

    fn slot(&mut self, var: &str) -> &mut Option<String> {
        match var {
            "GIT_SESSION_SANDBOX" => &mut self.sandbox,
            "GIT_SESSION_AGENT" => &mut self.agent,
            _ => &mut self.person,
        }
    }

    /// `(trailer key, value)` for each owner set, in [`OWNER_FIELDS`] order.
    pub fn trailers(&self) -> Vec<(&'static str, &str)> {
        [&self.sandbox, &self.agent, &self.person]
            .into_iter()
            .zip(OWNER_FIELDS)
            .filter_map(|(v, (_, key, _))| v.as_deref().map(|v| (key, v)))
            .collect()
    }

    /// Whether no owner is set.
    pub fn is_empty(&self) -> bool {
        self.trailers().is_empty()
    }

    /// The variable whose value holds one of `secrets` (a session token in one of its encodings).
    pub fn holding_secret(&self, secrets: &[String]) -> Option<&'static str> {
        [&self.sandbox, &self.agent, &self.person]
            .into_iter()
            .zip(OWNER_FIELDS)
            .find(|(v, _)| {
                v.as_deref()
                    .is_some_and(|v| secrets.iter().any(|s| v.contains(s.as_str())))
            })
            .map(|(_, (var, _, _))| var)
    }

    /// `message` (cleaned, ending in a newline) with the owners' trailers added, as
    /// `git interpret-trailers` reads them: to a final paragraph of trailers already there
    /// (`Signed-off-by:`, …), else as a new paragraph after a blank line. A key already present
    /// with the same value is not added again.
    pub fn add_trailers(&self, message: &str) -> String {
        let trailers = self.trailers();
        if trailers.is_empty() {
            return message.to_owned();
        }
        let body = message.trim_end_matches('\n');
        let last = body.rsplit("\n\n").next().unwrap_or(body);
        let has_trailer_block = body.contains("\n\n") && is_trailer_block(last);
        let mut out = body.to_owned();
        out.push_str(if has_trailer_block { "\n" } else { "\n\n" });
        for (key, value) in trailers {
            let line = format!("{key}: {value}");
            if has_trailer_block && last.lines().any(|l| l == line) {
                continue;
            }
            out.push_str(&line);
            out.push('\n');
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out
    }
}

/// What `c` is when an owner value may not hold it: a control character (line breaks, U+0085
/// included), a line or paragraph separator (U+2028, U+2029), or a format character (Unicode
/// category Cf: zero-width and direction marks, U+FEFF, the soft hyphen…), which no reader of
/// `git log` sees.
fn forbidden_kind(c: char) -> Option<&'static str> {
    use unicode_general_category::{GeneralCategory, get_general_category};
    match get_general_category(c) {
        GeneralCategory::Control if c == '\n' || c == '\r' || c == '\u{85}' => Some("a line break"),
        GeneralCategory::Control => Some("a control character"),
        GeneralCategory::LineSeparator => Some("a line separator"),
        GeneralCategory::ParagraphSeparator => Some("a paragraph separator"),
        GeneralCategory::Format => Some("an invisible format character"),
        _ => None,
    }
}

/// Whether git reads `paragraph` (a message's last) as its trailers, by `git interpret-trailers`'
/// rule: every line a trailer or a continuation (leading whitespace) of one; or at least a
/// quarter of the lines trailers with one of them git's own (`Signed-off-by:`, `(cherry picked
/// from commit …)`).
fn is_trailer_block(paragraph: &str) -> bool {
    let (mut trailers, mut others, mut gits_own, mut after_trailer) = (0, 0, false, false);
    for line in paragraph.lines() {
        if after_trailer && line.starts_with([' ', '\t']) {
            continue;
        }
        if is_trailer_line(line) {
            trailers += 1;
            gits_own |= line.starts_with("Signed-off-by: ");
            after_trailer = true;
        } else {
            gits_own |= line.starts_with("(cherry picked from commit ");
            others += 1;
            after_trailer = false;
        }
    }
    trailers > 0 && (others == 0 || gits_own && trailers * 3 >= others)
}

/// A `Key: value` line (git's trailer syntax: a token of letters, digits and dashes, a colon).
fn is_trailer_line(line: &str) -> bool {
    line.split_once(':').is_some_and(|(key, _)| {
        !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(vars: &[(&str, &str)]) -> Result<Owner, OwnerError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Owner::from_vars(|var| {
            vars.iter()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone().into())
        })
    }

    #[test]
    fn values_are_read_trimmed_and_empty_ones_dropped() {
        let o = owner(&[
            ("GIT_SESSION_AGENT", " claude-code "),
            ("GIT_SESSION_PERSON", ""),
        ])
        .unwrap();
        assert_eq!(o.agent.as_deref(), Some("claude-code"));
        assert_eq!(o.person, None);
        assert_eq!(o.trailers(), vec![("Session-Agent", "claude-code")]);
    }

    #[test]
    fn line_breaks_and_control_characters_are_refused() {
        for bad in ["a\nSigned-off-by: x", "a\rb", "tab\there", "nul\0"] {
            let err = owner(&[("GIT_SESSION_SANDBOX", bad)]).unwrap_err();
            assert!(matches!(
                err,
                OwnerError::ControlCharacter {
                    var: "GIT_SESSION_SANDBOX",
                    ..
                }
            ));
        }
        for (bad, ch) in [
            ("a\u{2028}Signed-off-by: x", '\u{2028}'),
            ("a\u{2029}b", '\u{2029}'),
            ("a\u{85}b", '\u{85}'),
            ("ad\u{200B}min", '\u{200B}'),
            ("\u{202E}nimda", '\u{202E}'),
            ("a\u{2060}b", '\u{2060}'),
            ("a\u{FEFF}", '\u{FEFF}'),
            ("so\u{AD}ft", '\u{AD}'),
        ] {
            let err = owner(&[("GIT_SESSION_AGENT", bad)]).unwrap_err();
            assert!(
                matches!(err, OwnerError::ControlCharacter { var: "GIT_SESSION_AGENT", ch: c, .. } if c == ch),
                "{bad:?}: {err:?}"
            );
            assert!(
                err.to_string()
                    .contains(&format!("U+{:04X}", u32::from(ch))),
                "{err}"
            );
        }
        // Letters of every script, and emoji, stay accepted.
        assert!(owner(&[("GIT_SESSION_PERSON", "Zoë 山田 🚀 Ада")]).is_ok());
        let long = "x".repeat(MAX_OWNER_BYTES + 1);
        assert!(matches!(
            owner(&[("GIT_SESSION_PERSON", &long)]).unwrap_err(),
            OwnerError::TooLong { .. }
        ));
    }

    #[test]
    fn trailers_go_in_a_paragraph_of_their_own_or_join_an_existing_one() {
        let o = owner(&[
            ("GIT_SESSION_SANDBOX", "sb-1"),
            ("GIT_SESSION_PERSON", "ada@example.com"),
        ])
        .unwrap();
        assert_eq!(
            o.add_trailers("Fix: the parser\n"),
            "Fix: the parser\n\nSession-Sandbox: sb-1\nSession-Person: ada@example.com\n"
        );
        assert_eq!(
            o.add_trailers("Subject\n\nBody text.\n"),
            "Subject\n\nBody text.\n\nSession-Sandbox: sb-1\nSession-Person: ada@example.com\n"
        );
        assert_eq!(
            o.add_trailers("Subject\n\nSigned-off-by: A <a@b>\nSession-Sandbox: sb-1\n"),
            "Subject\n\nSigned-off-by: A <a@b>\nSession-Sandbox: sb-1\nSession-Person: ada@example.com\n"
        );
        assert_eq!(Owner::default().add_trailers("Save\n"), "Save\n");
        // git's own rule: prose beside a Signed-off-by, and continuation lines, still trailers.
        assert_eq!(
            o.add_trailers("Subject\n\nSome prose here\nSigned-off-by: A <a@b>\n"),
            "Subject\n\nSome prose here\nSigned-off-by: A <a@b>\nSession-Sandbox: sb-1\nSession-Person: ada@example.com\n"
        );
        assert_eq!(
            o.add_trailers("Subject\n\nCo-authored-by: A <a@b>\n  continued\n"),
            "Subject\n\nCo-authored-by: A <a@b>\n  continued\nSession-Sandbox: sb-1\nSession-Person: ada@example.com\n"
        );
        // Prose without git's own trailer is not a trailer block.
        assert_eq!(
            o.add_trailers("Subject\n\nSome prose here\nSee-also: x\n"),
            "Subject\n\nSome prose here\nSee-also: x\n\nSession-Sandbox: sb-1\nSession-Person: ada@example.com\n"
        );
    }
}
