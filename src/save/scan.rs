//! The secret scan (SPEC rule 5: `save` refuses to commit a file that contains a session token).
//!
//! Content is fed in chunks; the scanner keeps the last `longest secret - 1` bytes of the previous
//! chunk so a secret split across two chunks is still found. Nothing about the secrets is ever
//! reported, only whether one was found.

use gix::bstr::ByteSlice;

/// Looks for any of a set of byte strings in a stream of chunks.
pub struct Scanner<'a> {
    secrets: Vec<&'a [u8]>,
    /// The tail of the data seen so far (at most `longest - 1` bytes).
    carry: Vec<u8>,
    /// A window buffer: `carry` followed by the current chunk.
    window: Vec<u8>,
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
        let keep = self.longest - 1;
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
        let tail = &hay[hay.len().saturating_sub(keep)..];
        let tail = tail.to_vec();
        self.carry = tail;
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
        let clean = b"tok3n-Sekr1 ab c tok3nSekr1t";
        for chunk in 1..clean.len() + 2 {
            assert!(
                !s.scan_all(clean, chunk),
                "false positive with chunk size {chunk}"
            );
        }
        assert!(s.scan_all(b"..ab", 1) == false);
        assert!(s.scan_all(b"..abc", 1));
    }

    #[test]
    fn no_secrets_finds_nothing() {
        let none: Vec<String> = vec![String::new()];
        let mut s = Scanner::new(&none);
        assert!(!s.is_active());
        assert!(!s.scan_all(b"anything", 3));
    }
}
