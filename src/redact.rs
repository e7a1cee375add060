//! Redaction of the session's secrets from every text that leaves the process (SPEC rules 5
//! and 7): results, warnings, errors and logs at any verbosity. A server may echo the request's
//! credentials in an `ERR` line, a side-band message or a report; whatever it sends, the text is
//! shown with every encoding of the secret the token scan knows
//! ([`RemoteUrl::secret_forms`]) replaced by `<redacted>`, and each of them percent-encoded in
//! any spelling too (some bytes escaped, in either case), as the scan of `save` finds them.
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

/// Every secret form learned so far (the token scan of `save` and `push` refuses them all).
pub fn known() -> Vec<String> {
    SECRETS.lock().map(|k| k.clone()).unwrap_or_default()
}

/// git-session's inputs that hold no URL, where one pasted by mistake would be echoed.
const INPUT_VARS: [&str; 8] = [
    "SESSION_BRANCH",
    "TIP_SHA",
    "SESSION_DIR",
    "GIT_SESSION_SANDBOX",
    "GIT_SESSION_AGENT",
    "GIT_SESSION_PERSON",
    "SIGNING_KEY_FILE",
    "SIGNING_PUBLIC_KEY",
];

/// Learn the secrets of every session URL in the environment, whichever of a variable and its
/// `_FILE` wins: both may hold a token a server could echo; and those of the proxies' URLs.
pub fn learn_environment() {
    for var in ["READ_URL", "PUSH_URL", "ARCHIVE_URL", "SIGNING_URL"] {
        let file_var = format!("{var}_FILE");
        let mut texts: Vec<String> = std::env::var(var).into_iter().collect();
        let content = std::env::var(&file_var).map(|p| crate::types::read_url_file(p.as_ref()));
        if let Ok(Ok(content)) = content {
            texts.push(content);
        }
        for t in texts {
            if let Ok(url) = RemoteUrl::parse(t.trim()) {
                learn(&url);
            }
        }
    }
    // A credentialed URL in another of git-session's inputs, on the command line or in the
    // environment (given as SESSION_BRANCH or TIP_SHA by mistake): whatever echoes an input value
    // cannot show it. Only git-session's own inputs: what is learned is also refused by save's
    // scan, and another program's variable (a DATABASE_URL's password) is none of its business.
    let elsewhere = INPUT_VARS
        .iter()
        .filter_map(std::env::var_os)
        .chain(std::env::args_os().skip(1));
    for value in elsewhere {
        let Some(value) = value.to_str() else {
            continue;
        };
        for word in value.split_whitespace().filter(|w| w.contains("://")) {
            if let Ok(url) = RemoteUrl::parse(word.trim_matches(['\'', '"'])) {
                learn(&url);
            }
        }
    }
    // A proxy's credentials (`crate::wire::proxy`), also in a value without a scheme.
    for var in [
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        let Ok(value) = std::env::var(var) else {
            continue;
        };
        let value = value.trim();
        let with_scheme = if value.contains("://") {
            value.to_owned()
        } else {
            format!("http://{value}")
        };
        if let Ok(url) = RemoteUrl::parse(&with_scheme) {
            learn(&url);
        }
    }
}

/// `text` with every known secret form replaced by [`MARK`].
pub fn text(text: &str) -> String {
    let Ok(known) = SECRETS.lock() else {
        return text.to_owned();
    };
    if known.is_empty() {
        return text.to_owned();
    }
    redact_joined(&[text.to_owned()], &known).concat()
}

/// Lines of text from a server (side-band progress, hook output) redacted as one stream: a secret
/// split over two lines (`remote: tok3n-` then `remote: Sekr1t`) or over two packets is found in
/// the lines joined, and each part of it is replaced by [`MARK`]. A line is released only once
/// the lines after it hold as many characters as the longest secret form, so no secret can start
/// in a released line and end in one still to come.
#[derive(Debug, Default)]
pub struct Lines {
    /// A line not ended yet (text after the last line break).
    partial: String,
    /// Ended lines not released yet.
    held: std::collections::VecDeque<String>,
}

impl Lines {
    /// Feed `text` as it arrived (any part of a line, or several lines); returns the lines now
    /// released, redacted, trimmed, empty ones left out.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        // Control characters go first (git's sideband does the same for ESC unless colour is
        // allowed): a terminal would hide them and show what they split (`sec\x1b[0mret`, `sec\0ret`)
        // whole, and they could drive the terminal.
        self.partial.extend(
            text.chars()
                .filter(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t')),
        );
        while let Some(end) = self.partial.find(['\n', '\r']) {
            let line = self.partial[..end].trim().to_owned();
            self.partial.drain(..=end);
            if !line.is_empty() {
                self.held.push_back(line);
            }
        }
        // An endless line: released whole past a bound (still redacted).
        if self.partial.len() > MAX_HELD_LINE {
            let line = std::mem::take(&mut self.partial);
            self.held.push_back(line.trim().to_owned());
        }
        self.release(false)
    }

    /// The lines still held, the unended one included, redacted.
    pub fn finish(mut self) -> Vec<String> {
        let line = std::mem::take(&mut self.partial);
        if !line.trim().is_empty() {
            self.held.push_back(line.trim().to_owned());
        }
        self.release(true)
    }

    fn release(&mut self, all: bool) -> Vec<String> {
        let known = SECRETS.lock().map(|k| k.clone()).unwrap_or_default();
        // Percent-encoded, a form takes up to three times its length.
        let keep = 3 * known.iter().map(String::len).max().unwrap_or(0);
        // Held lines keep their redacted form: the rest of a secret found across a released line
        // and a held one is hidden when the held one is released.
        self.held = redact_joined(self.held.make_contiguous(), &known).into();
        let mut after: usize = self.held.iter().map(String::len).sum();
        let mut n = 0;
        for line in &self.held {
            after -= line.len();
            if !all && after < keep {
                break;
            }
            n += 1;
        }
        self.held.drain(..n).collect()
    }
}

/// The longest unended line held back, in bytes.
const MAX_HELD_LINE: usize = 64 << 10;

/// `lines` with every secret form in their concatenation replaced: each line's part of a match
/// becomes [`MARK`].
fn redact_joined(lines: &[String], known: &[String]) -> Vec<String> {
    let joined: String = lines.concat();
    let covered = covered(&joined, known);
    let mut start = 0;
    lines
        .iter()
        .map(|line| {
            let cov = &covered[start..start + line.len()];
            start += line.len();
            let mut shown = String::new();
            let mut i = 0;
            while i < line.len() {
                if cov[i] {
                    while i < line.len() && cov[i] {
                        i += 1;
                    }
                    shown.push_str(MARK);
                } else {
                    let next = cov[i..]
                        .iter()
                        .position(|c| *c)
                        .map_or(line.len(), |n| i + n);
                    shown.push_str(&line[i..next]);
                    i = next;
                }
            }
            shown
        })
        .collect()
}

/// Which bytes of `hay` belong to a known form, found as it is or percent-decoded (each decoded
/// match covers the escapes it came from); widened to whole characters.
fn covered(hay: &str, known: &[String]) -> Vec<bool> {
    let mut covered = vec![false; hay.len()];
    let mut cover = |from: usize, to: usize| covered[from..to].iter_mut().for_each(|c| *c = true);
    for form in known {
        for (at, _) in hay.match_indices(form.as_str()) {
            cover(at, at + form.len());
        }
    }
    if hay.contains('%') {
        let (decoded, starts) = percent_decoded(hay.as_bytes());
        for form in known.iter().map(String::as_bytes).filter(|f| !f.is_empty()) {
            let mut from = 0;
            while let Some(at) = find(&decoded[from..], form) {
                let at = from + at;
                cover(starts[at], starts[at + form.len()]);
                from = at + 1;
            }
        }
    }
    // A match that began or ended inside a character (a lone escaped byte of it) takes it whole.
    for i in 1..hay.len() {
        if !hay.is_char_boundary(i) && (covered[i - 1] || covered[i]) {
            covered[i - 1] = true;
            covered[i] = true;
        }
    }
    for i in (1..hay.len()).rev() {
        if !hay.is_char_boundary(i) && covered[i] {
            covered[i - 1] = true;
        }
    }
    covered
}

/// `%XX` escapes (either case) decoded, with where each decoded byte began in `input` (one more
/// entry at the end: `input.len()`).
fn percent_decoded(input: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let hex = |b: u8| (b as char).to_digit(16);
    let (mut out, mut starts) = (
        Vec::with_capacity(input.len()),
        Vec::with_capacity(input.len() + 1),
    );
    let mut i = 0;
    while i < input.len() {
        starts.push(i);
        if input[i] == b'%'
            && let (Some(h), Some(l)) = (
                input.get(i + 1).copied().and_then(hex),
                input.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h << 4 | l) as u8);
            i += 3;
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
    starts.push(input.len());
    (out, starts)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
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

/// Standard error, the only way to it: every text is redacted ([`text`]) and then shown under the
/// terminal rule ([`crate::text::terminal`]: control characters escaped, never raw), whoever chose
/// it. `eprintln!` and `std::io::stderr` are refused by `clippy.toml` everywhere else. Also the
/// writer of the log subscriber: each log event arrives as one write of its whole line, so a secret
/// is never split between two writes.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stderr;

impl Stderr {
    /// Write `line` and a line break, in one write (errors writing to stderr are ignored: there
    /// is nowhere left to report them).
    pub fn line(line: &str) {
        let _ = std::io::Write::write_all(&mut Stderr, format!("{line}\n").as_bytes());
    }

    /// Whether standard error is a terminal.
    pub fn is_terminal() -> bool {
        #[allow(clippy::disallowed_methods)] // only asks, writes nothing
        std::io::IsTerminal::is_terminal(&std::io::stderr())
    }
}

impl std::io::Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let redacted = text(&String::from_utf8_lossy(buf));
        let shown = crate::text::terminal(&redacted);
        #[allow(clippy::disallowed_methods)] // the one place that writes to stderr
        std::io::stderr().write_all(shown.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        #[allow(clippy::disallowed_methods)]
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
    fn a_secret_percent_encoded_in_any_spelling_is_hidden() {
        let url = RemoteUrl::parse("https://t:m1xed-Sp%2Bell1ng@git.example.com/r.git").unwrap();
        learn(&url);
        for echoed in [
            "m1%78ed-Sp+ell1ng",
            "m1xed%2dSp%2Bell1ng",
            "%6D%31%78%65%64%2D%53%70%2B%65%6C%6C%31%6E%67",
            "m1xed-Sp%2bell1ng",
        ] {
            let shown = text(&format!("ERR you sent {echoed}, é after"));
            assert_eq!(shown, format!("ERR you sent {MARK}, é after"), "{echoed}");
        }
        // Split over two lines, in a mixed spelling.
        let mut lines = Lines::default();
        let mut out = lines.push("hook: m1x%65d-S\n");
        out.extend(lines.push("p%2Bell1ng done\n"));
        out.extend(lines.finish());
        assert_eq!(out, [format!("hook: {MARK}"), format!("{MARK} done")]);
        // An escape of a byte inside a character takes the character whole, never half of it.
        assert_eq!(text("x %C3%A9 é %"), "x %C3%A9 é %");
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

    #[test]
    fn a_secret_split_over_lines_or_packets_is_hidden() {
        let url = RemoteUrl::parse("https://t:spl1t-Acr0ss-L1nes@git.example.com/r.git").unwrap();
        learn(&url);
        let feed = |parts: &[&str]| {
            let mut lines = Lines::default();
            let mut out = Vec::new();
            for p in parts {
                out.extend(lines.push(p));
            }
            out.extend(lines.finish());
            out
        };
        // Two lines, two packets per line, a packet per character.
        let cases: [&[&str]; 4] = [
            &["hook: spl1t-Acr\n", "0ss-L1nes\n", "done\n"],
            &["hook: spl1t-Acr", "0ss-L1nes and more\n"],
            &["spl1t-\n", "Acr0ss-\n", "L1nes\n"],
            &["a\n", "b\n"],
        ];
        for parts in cases {
            let shown = feed(parts);
            let joined = shown.concat();
            assert!(!joined.contains("spl1t-Acr0ss-L1nes"), "{shown:?}");
            assert!(
                !joined.contains("Acr") && !joined.contains("L1nes"),
                "{shown:?}"
            );
        }
        let per_char: Vec<String> = "x spl1t-Acr0ss-L1nes y\n"
            .chars()
            .map(String::from)
            .collect();
        let per_char: Vec<&str> = per_char.iter().map(String::as_str).collect();
        assert_eq!(feed(&per_char), [format!("x {MARK} y")]);
        assert_eq!(
            feed(&["spl1t-\n", "Acr0ss-\n", "L1nes\n"]),
            [MARK, MARK, MARK]
        );
        assert_eq!(feed(&["a\n", "b\n"]), ["a", "b"]);
        // Control characters inside it (a terminal shows the secret whole) are dropped first.
        for split in ["spl1t-\x1b[0mAcr0ss-L1nes", "spl1t-\0Acr0ss-\x08L1nes"] {
            let shown = feed(&[&format!("hook: {split}\n")]).concat();
            assert!(!shown.chars().any(char::is_control), "{shown:?}");
            assert!(!shown.contains("spl1t-Acr0ss-L1nes"), "{shown:?}");
        }
        // Lines are released once enough text follows them, not only at the end.
        let mut lines = Lines::default();
        let long = "z".repeat(1000);
        assert!(lines.push("first line\n").is_empty());
        assert_eq!(lines.push(&format!("{long}\n")), ["first line"]);
    }
}
