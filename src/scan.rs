//! The secret scan (SPEC rule 5: `save` refuses to commit, and `push` to send, content that holds
//! a session token; and the private key of `SIGNING_KEY_FILE`, in the forms `signing` gives).
//!
//! Content is fed in chunks; the scanner keeps the tail of the previous chunk so a secret split
//! across two chunks is still found. Besides the literal forms it is given, it also finds them
//! percent-encoded in any spelling (`%2D` or `-`, `%2b` or `%2B`): where a chunk holds a `%`, the
//! percent-decoded text is searched too; and where it holds whitespace, the text without it, so a
//! base64 form wrapped over lines (`base64` at 76 columns, PEM at 64 with CRLF, indented in YAML)
//! is found. Nothing about the secrets is ever reported, only whether one was found.

use gix::bstr::ByteSlice;

/// Looks for any of a set of byte strings in a stream of chunks.
pub struct Scanner<'a> {
    secrets: Vec<&'a [u8]>,
    /// The tail of the data seen so far (enough for a secret written fully percent-encoded).
    carry: Vec<u8>,
    /// A window buffer: `carry` followed by the current chunk.
    window: Vec<u8>,
    /// The percent-decoded window, or the window without whitespace.
    decoded: Vec<u8>,
    longest: usize,
    found: bool,
}

impl<'a> Scanner<'a> {
    /// A scanner for `secrets` (empty strings are ignored).
    pub fn new(secrets: &'a [String]) -> Self {
        let secrets: Vec<&[u8]> = secrets
            .iter()
            .map(|s| s.as_bytes())
            .filter(|s| !s.is_empty())
            .collect();
        let longest = secrets.iter().map(|s| s.len()).max().unwrap_or(0);
        Scanner {
            secrets,
            carry: Vec::new(),
            window: Vec::new(),
            decoded: Vec::new(),
            longest,
            found: false,
        }
    }

    /// Whether there is anything to look for.
    pub fn is_active(&self) -> bool {
        !self.secrets.is_empty()
    }

    /// Feed the next chunk of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.found || !self.is_active() || chunk.is_empty() {
            return;
        }
        // A secret of n bytes takes at most 3n bytes percent-encoded (and as much wrapped over
        // lines, unless every line is shorter than its break and indentation).
        let keep = 3 * self.longest - 1;
        let hay: &[u8] = if self.carry.is_empty() {
            chunk
        } else {
            self.window.clear();
            self.window.extend_from_slice(&self.carry);
            self.window.extend_from_slice(chunk);
            &self.window
        };
        if self.secrets.iter().any(|s| hay.find(s).is_some()) {
            self.found = true;
            return;
        }
        if hay.contains(&b'%') {
            percent_decode(hay, &mut self.decoded);
            if self.secrets.iter().any(|s| self.decoded.find(s).is_some()) {
                self.found = true;
                return;
            }
        }
        if hay.iter().any(u8::is_ascii_whitespace) {
            self.decoded.clear();
            self.decoded
                .extend(hay.iter().filter(|b| !b.is_ascii_whitespace()));
            if self.secrets.iter().any(|s| self.decoded.find(s).is_some()) {
                self.found = true;
                return;
            }
        }
        let tail = hay[hay.len().saturating_sub(keep)..].to_vec();
        self.carry = tail;
    }

    /// Whether a secret was found in what was fed since the last reset.
    pub fn found(&self) -> bool {
        self.found
    }

    /// Start over for a new stream.
    pub fn reset(&mut self) {
        self.carry.clear();
        self.found = false;
    }

    /// Scan one whole buffer in chunks of `chunk` bytes (the overlap logic applies between them).
    pub fn scan_all(&mut self, data: &[u8], chunk: usize) -> bool {
        self.reset();
        for part in data.chunks(chunk.max(1)) {
            self.feed(part);
            if self.found {
                break;
            }
        }
        self.found
    }
}

/// Decode `%XX` escapes (either case); everything else is copied.
fn percent_decode(input: &[u8], out: &mut Vec<u8>) {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    out.clear();
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%'
            && let (Some(h), Some(l)) = (
                input.get(i + 1).copied().and_then(hex),
                input.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(input[i]);
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_secrets_across_chunk_boundaries() {
        let secrets = vec!["tok3n-Sekr1t".to_owned(), "abc".to_owned(), String::new()];
        let mut s = Scanner::new(&secrets);
        let data = b"xxxxxxxxxxxxxxxxxxxtok3n-Sekr1tyyyyyyyyyyyy";
        for chunk in 1..data.len() + 2 {
            assert!(s.scan_all(data, chunk), "missed with chunk size {chunk}");
        }
        let clean = b"tok3n-Sekr1 ab-c tok3nSekr1t";
        for chunk in 1..clean.len() + 2 {
            assert!(
                !s.scan_all(clean, chunk),
                "false positive with chunk size {chunk}"
            );
        }
        assert!(!s.scan_all(b"..ab", 1));
        assert!(s.scan_all(b"..abc", 1));
    }

    #[test]
    fn finds_any_percent_encoding() {
        let secrets = vec!["tok3n-Sekr1t+/=Zq".to_owned()];
        let mut s = Scanner::new(&secrets);
        for form in [
            "tok3n%2DSekr1t%2B%2F%3DZq",
            "tok3n-Sekr1t%2B%2F%3DZq",
            "tok3n-Sekr1t%2b%2f%3dZq",
            "%74%6F%6B%33%6E%2D%53%65%6B%72%31%74%2B%2F%3D%5A%71",
        ] {
            let data = format!("url=https://t:{form}@host/x\n");
            for chunk in 1..data.len() + 2 {
                assert!(
                    s.scan_all(data.as_bytes(), chunk),
                    "missed {form} with chunk size {chunk}"
                );
            }
        }
        assert!(!s.scan_all(b"tok3n%2DSekr1t%2B%2F%3DZ", 4));
    }

    #[test]
    fn finds_a_form_wrapped_over_lines() {
        let secrets = vec!["dG9rM24tU2VrcjF0Ky89WnE".to_owned()];
        let mut s = Scanner::new(&secrets);
        for form in [
            "a2tra2tr dG9rM24t\nU2VrcjF0Ky89WnE=",
            "dG9rM24tU2Vr\r\nc\r\njF0Ky89WnE=",
            "key: |\n    dG9rM24tU2VrcjF0\n    Ky89WnE=\n",
        ] {
            for chunk in 1..form.len() + 2 {
                assert!(
                    s.scan_all(form.as_bytes(), chunk),
                    "missed {form:?} with chunk size {chunk}"
                );
            }
        }
        assert!(!s.scan_all(b"dG9rM24tU2Vr\nc\njF0Ky89WnF=", 5));
    }

    #[test]
    fn no_secrets_finds_nothing() {
        let none: Vec<String> = vec![String::new()];
        let mut s = Scanner::new(&none);
        assert!(!s.is_active());
        assert!(!s.scan_all(b"anything", 3));
    }
}
