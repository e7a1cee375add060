//! Redaction of the session's secrets from every text that leaves the process (SPEC rules 5
//! and 7): results, warnings, errors and logs at any verbosity. A server may echo the request's
//! credentials in an `ERR` line, a side-band message or a report; whatever it sends, the text is
//! shown with every encoding of the secret the token scan knows
//! ([`RemoteUrl::secret_forms`]) replaced by `<redacted>`.
//!
//! The secrets are learned from every session URL the process loads ([`learn`], called by
//! [`UrlSource::load`](crate::wire::http::UrlSource::load) and the inputs), so a rotated `_FILE` is
//! covered too.

use std::sync::Mutex;

use crate::types::RemoteUrl;

/// What a secret is replaced by.
pub const MARK: &str = "<redacted>";

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Remember the secret forms of `url` (nothing when it carries none).
pub fn learn(url: &RemoteUrl) {
    let forms = url.secret_forms();
    if forms.is_empty() {
        return;
    }
    if let Ok(mut known) = SECRETS.lock() {
        for f in forms {
            if !known.contains(&f) {
                known.push(f);
            }
        }
        // Longest first, so a form that contains another is replaced whole.
        known.sort_by_key(|f| std::cmp::Reverse(f.len()));
    }
}

/// Learn the secrets of every session URL in the environment, whichever of a variable and its
/// `_FILE` wins: both may hold a token a server could echo.
pub fn learn_environment() {
    for var in ["READ_URL", "PUSH_URL", "ARCHIVE_URL"] {
        let file_var = format!("{var}_FILE");
        let mut texts: Vec<String> = std::env::var(var).into_iter().collect();
        if let Ok(path) = std::env::var(&file_var)
            && let Ok(content) = std::fs::read_to_string(path)
        {
            texts.push(content);
        }
        for t in texts {
            if let Ok(url) = RemoteUrl::parse(t.trim()) {
                learn(&url);
            }
        }
    }
}

/// `text` with every known secret form replaced by [`MARK`].
pub fn text(text: &str) -> String {
    let Ok(known) = SECRETS.lock() else {
        return text.to_owned();
    };
    let mut out = text.to_owned();
    for form in known.iter() {
        if out.contains(form.as_str()) {
            out = out.replace(form.as_str(), MARK);
        }
    }
    out
}

/// A JSON value with every string in it redacted.
pub fn json(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(text(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(json).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, json(v))).collect()),
        other => other,
    }
}

/// Standard error through [`text`]: the writer of the log subscriber. Each log event arrives as
/// one write of its whole line, so a secret is never split between two writes.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stderr;

impl std::io::Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let shown = text(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all(shown.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;
    fn make_writer(&'a self) -> Self::Writer {
        Stderr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_of_a_learned_secret_is_replaced() {
        let url = RemoteUrl::parse("https://user:s3cr3t-T0ken+%2Fx@git.example.com/r.git").unwrap();
        learn(&url);
        for form in url.secret_forms() {
            let shown = text(&format!("ERR bad token '{form}' from you"));
            assert!(!shown.contains(&form), "{shown}");
            assert!(shown.contains(MARK), "{shown}");
        }
        assert_eq!(text("nothing secret"), "nothing secret");
        let v = json(serde_json::json!({"m": ["x s3cr3t-T0ken+/x y"]}));
        assert_eq!(v["m"][0], format!("x {MARK} y"));
    }

    #[test]
    fn the_token_inside_any_base64_is_hidden() {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let url =
            RemoteUrl::parse("https://t:b64-T0ken%2B%2FsEcret@git.example.com/r.git").unwrap();
        learn(&url);
        for plain in [
            "t:b64-T0ken+/sEcret",
            "x-access-token:b64-T0ken+/sEcret",
            "oauth2:b64-T0ken+/sEcret",
            "ab64-T0ken+/sEcret\n",
        ] {
            for encoded in [STANDARD.encode(plain), URL_SAFE_NO_PAD.encode(plain)] {
                let shown = text(&format!("remote: Authorization: Basic {encoded}"));
                assert!(shown.contains(MARK), "{plain}: {shown}");
                // What is left of the encoding, decoded, no longer holds the token.
                let left = shown.rsplit(' ').next().unwrap().replace(MARK, "");
                assert!(!left.contains("b64-T0ken"), "{shown}");
            }
        }
    }
}
