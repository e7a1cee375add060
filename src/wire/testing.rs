//! What the wire parsers' unit tests share: the ids of the repository the recordings in
//! `tests/fixtures/wire/` were made from (see its README and `capture.py`), and the broken copies
//! of a recording the tests feed the parsers.

use std::io::Read;

use crate::types::RemoteUrl;

/// The second commit: `refs/heads/sessions/abc` when the fixtures were recorded, and the one the
/// depth-1 fetch asked for.
pub const COMMIT2: &str = "9286c450ac867c0b3f83878bc15e185905286280";
/// The third commit: `refs/heads/main`.
pub const COMMIT3: &str = "8bb771ef0d78962c9c09d236a436f1180b7638be";
/// The session branch of the recordings.
pub const BRANCH: &str = "refs/heads/sessions/abc";
/// The `ERR` line git's upload-pack sends for a commit it does not have.
pub const NOT_OUR_REF: &[u8] =
    b"ERR upload-pack: not our ref 1111111111111111111111111111111111111111";

/// upload-pack's v0 advertisement of the recorded repository (git's http-backend: side-band-64k,
/// shallow).
pub const V0_ADVERTISEMENT: &[u8] =
    include_bytes!("../../tests/fixtures/wire/v0-advertisement.response");
/// The objects of the recorded depth-1 fetches (v2 and v0) as `git verify-pack` lists them:
/// commit2, its tree, its blob, in id order.
pub const PACK_OBJECTS: [&str; 3] = [
    "7efcb40c074ff29c8533aa9d58e5adb80c7aaecb",
    COMMIT2,
    "f719efd430d52bcfc8566a43b2eb655688d38871",
];
/// Length prefixes that are not one: not hex, the invalid length 3, longer than a pkt-line.
pub const BAD_PREFIXES: [&[u8; 4]; 3] = [b"00x0", b"0003", b"ffff"];

/// The URL the messages name.
pub fn url() -> RemoteUrl {
    RemoteUrl::parse("http://127.0.0.1:1/repo.git").expect("a valid URL")
}

/// `data` as one pkt-line (length prefix and `data`, nothing added).
pub fn pkt(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    gix_packetline::blocking_io::encode::data_to_write(data, &mut out).expect("fits a pkt-line");
    out
}

/// Every proper prefix of `body` that ends at or after `from`: the body cut off at each byte.
pub fn cuts(body: &[u8], from: usize) -> impl Iterator<Item = &[u8]> {
    (from..body.len()).map(|n| &body[..n])
}

/// `body` with its first length prefix replaced by `prefix`.
pub fn with_first_prefix(body: &[u8], prefix: &[u8; 4]) -> Vec<u8> {
    let mut out = body.to_vec();
    out[..4].copy_from_slice(prefix);
    out
}

/// A body that sends `head`, then `line` again and again: a server that never ends a section.
/// Nothing is allocated but the two. A parser that keeps reading past `bound` (the bound, the line
/// that crosses it and one more pkt-line of read-ahead) gets an I/O error, so that a parser
/// without its bound fails its test rather than running forever.
pub struct Endless {
    head: Vec<u8>,
    line: Vec<u8>,
    at: usize,
    cap: usize,
}

impl Endless {
    /// `head`, then `line` until well past `bound`.
    pub fn new(head: Vec<u8>, line: Vec<u8>, bound: usize) -> Self {
        let cap = bound + head.len() + 2 * 65520;
        Endless {
            head,
            line,
            at: 0,
            cap,
        }
    }
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at > self.cap {
            return Err(std::io::Error::other("read past the bound of the section"));
        }
        let (src, at) = if self.at < self.head.len() {
            (&self.head, self.at)
        } else {
            (&self.line, (self.at - self.head.len()) % self.line.len())
        };
        let n = buf.len().min(src.len() - at);
        buf[..n].copy_from_slice(&src[at..at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Assert that `$result` is `Err` matching `$pattern` (and the guard, if given), showing what it
/// was otherwise.
macro_rules! assert_err {
    ($result:expr, $pattern:pat $(if $guard:expr)?) => {
        match $result {
            Err($pattern) $(if $guard)? => {}
            other => panic!("expected Err({}), got {other:?}", stringify!($pattern)),
        }
    };
}
pub(crate) use assert_err;
