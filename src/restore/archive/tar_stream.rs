//! A bounded, streaming reader of tar members (POSIX.1-2001 pax, ustar, GNU long names), built on
//! the `tar` crate's 512-byte [`tar::Header`] parsing.
//!
//! The stream logic is ours so that every limit of SPEC rule 7 holds before memory is spent: pax
//! and GNU long-name data are bounded per header, the number of members and the total data are
//! bounded, and a pax `size` overrides the header's size for both the data and the position of the
//! next header (git archive writes pax headers; see POSIX `pax` "pax Extended Header").
//! The `tar` crate's own entry iterator reads such headers whole and unbounded, so it is not used.

use std::io::{self, Read};

use crate::error::{Error, Result};

const BLOCK: u64 = 512;

/// Most bytes of zero padding accepted after the end-of-archive marker (tar pads to its record
/// size: 10 KiB by default, rarely more than a few hundred KiB).
pub const MAX_TRAILER: u64 = 1 << 20;

/// Bounds on what an archive may hold (SPEC rule 7 defaults: 1 MiB per header, 1 million members,
/// 64 GiB of data).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of one pax or GNU long-name header's data.
    pub header_bytes: u64,
    /// Members (files, directories, links, pax headers included).
    pub entries: u64,
    /// Bytes of member data in total.
    pub total_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_bytes: 1 << 20,
            entries: 1_000_000,
            total_bytes: 64 << 30,
        }
    }
}

/// Bytes of extension headers (pax, GNU long names) an archive may hold in all.
const EXTENSION_TOTAL: u64 = 256 << 20;

/// The kind of a member, from its type flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file (`0`, `\0`, `7`); `exec` when any execute bit is set.
    File {
        /// Any of the mode's execute bits is set.
        exec: bool,
    },
    /// A directory (`5`).
    Dir,
    /// A symbolic link (`2`) with its target.
    Symlink(Vec<u8>),
    /// Anything else (hard link `1`, devices `3`/`4`, FIFO `6`, sparse, unknown), refused by the caller.
    Other(u8),
}

/// One member: the file-system entries, with pax and GNU long names applied.
#[derive(Debug)]
pub struct Member {
    /// The full path as recorded (pax `path` > GNU long name > ustar prefix/name), raw bytes.
    pub path: Vec<u8>,
    /// What it is.
    pub kind: Kind,
}

/// Reads members one by one; the data of the current member must be read (or skipped) through
/// [`TarStream::data`] before the next call to [`TarStream::next_member`].
pub struct TarStream<R> {
    inner: R,
    limits: Limits,
    entries: u64,
    total: u64,
    /// Bytes of pax and GNU long-name headers' data.
    headers: u64,
    /// Data of the current member not yet read, and its padding.
    pending: u64,
    padding: u64,
    /// The commit id `git archive` writes in a pax global header (`comment`).
    pub commit_id: Option<String>,
    /// The end-of-archive marker was read.
    ended: bool,
}

/// What pax and GNU long-name headers said about the member that follows them.
#[derive(Default)]
struct Extensions {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    size: Option<u64>,
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
}

impl Extensions {
    fn is_empty(&self) -> bool {
        self.path.is_none()
            && self.link.is_none()
            && self.size.is_none()
            && self.long_name.is_none()
            && self.long_link.is_none()
    }
}

fn corrupt(msg: impl std::fmt::Display) -> Error {
    Error::Integrity(format!("the archive is corrupt or unsafe: {msg}"))
}

/// Map an I/O error of the decompressed stream: a cut transport is a network failure (retried), a
/// truncated or corrupt gzip is an integrity failure.
pub fn read_error(e: io::Error) -> Error {
    if let Some(inner) = e.get_ref()
        && let Some(Error::Network(msg)) = inner.downcast_ref::<Error>()
    {
        return Error::Network(msg.clone());
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof => corrupt("the stream ends early (truncated)"),
        _ => corrupt(e),
    }
}

impl<R: Read> TarStream<R> {
    /// Read members from `inner` (already decompressed) within `limits`.
    pub fn new(inner: R, limits: Limits) -> Self {
        TarStream {
            inner,
            limits,
            entries: 0,
            total: 0,
            headers: 0,
            pending: 0,
            padding: 0,
            commit_id: None,
            ended: false,
        }
    }

    fn skip(&mut self, mut n: u64) -> Result<()> {
        let mut buf = [0u8; 8192];
        while n > 0 {
            let want = n.min(buf.len() as u64) as usize;
            self.inner
                .read_exact(&mut buf[..want])
                .map_err(read_error)?;
            n -= want as u64;
        }
        Ok(())
    }

    fn finish_member(&mut self) -> Result<()> {
        let rest = self.pending + self.padding;
        self.pending = 0;
        self.padding = 0;
        self.skip(rest)
    }

    fn read_small(&mut self, size: u64, what: &str) -> Result<Vec<u8>> {
        if size > self.limits.header_bytes {
            return Err(corrupt(format!(
                "a {what} header of {size} bytes exceeds the limit of {} bytes (--max-header-bytes)",
                self.limits.header_bytes
            )));
        }
        // Headers are data too: a flood of them (a million of 1 MiB each) is bounded like files,
        // and by far less in all (git archive writes a few hundred bytes per long path).
        self.headers = self.headers.saturating_add(size);
        self.total = self.total.saturating_add(size);
        let cap = EXTENSION_TOTAL.max(self.limits.header_bytes);
        if self.headers > cap || self.total > self.limits.total_bytes {
            return Err(corrupt(format!(
                "more than {} bytes of extension headers, or of data with them (--max-bytes)",
                cap.min(self.limits.total_bytes)
            )));
        }
        // Grown as the bytes arrive: the size is the header's claim, and the limit may be raised.
        let mut data = Vec::new();
        (&mut self.inner)
            .take(size)
            .read_to_end(&mut data)
            .map_err(read_error)?;
        if data.len() as u64 != size {
            return Err(corrupt("the stream ends early (truncated)"));
        }
        self.skip(padding(size))?;
        Ok(data)
    }

    fn count_entry(&mut self) -> Result<()> {
        self.entries += 1;
        if self.entries > self.limits.entries {
            return Err(corrupt(format!(
                "more than {} members (--max-entries)",
                self.limits.entries
            )));
        }
        Ok(())
    }

    /// The next file-system member, or `None` at the end of the archive.
    ///
    /// # Errors
    /// [`Error::Integrity`] for a bad checksum, malformed numbers or pax records, exceeded limits, a
    /// truncated stream; [`Error::Network`] when the transport broke.
    pub fn next_member(&mut self) -> Result<Option<Member>> {
        self.finish_member()?;
        let mut ext = Extensions::default();
        loop {
            let mut block = [0u8; 512];
            if !read_block(&mut self.inner, &mut block)? {
                // A tar stream ends with zero blocks: without them it was cut, perhaps at a member
                // boundary that a multi-member gzip stream would not notice.
                return Err(corrupt(
                    "the stream ends without the end-of-archive marker (truncated)",
                ));
            }
            if block.iter().all(|b| *b == 0) {
                if !ext.is_empty() {
                    return Err(corrupt(
                        "extension headers without the member they describe",
                    ));
                }
                // End of archive (two zero blocks; one is enough to stop, see `finish`).
                self.ended = true;
                return Ok(None);
            }
            let header = tar::Header::from_byte_slice(&block);
            verify_checksum(&block)?;
            self.count_entry()?;
            let size = header.entry_size().map_err(corrupt)?;
            match header.entry_type().as_byte() {
                flag @ (b'x' | b'g') => self.read_pax(size, flag == b'g', &mut ext)?,
                flag @ (b'L' | b'K') => {
                    let mut data = self.read_small(size, "GNU long name")?;
                    while data.last() == Some(&0) {
                        data.pop();
                    }
                    if flag == b'L' {
                        ext.long_name = Some(data);
                    } else {
                        ext.long_link = Some(data);
                    }
                }
                _ => return self.member(header, size, ext).map(Some),
            }
        }
    }

    /// Read a pax header: a global one (`g`) may carry the commit id, an extended one (`x`) the
    /// path, link target and size of the member that follows.
    fn read_pax(&mut self, size: u64, global: bool, ext: &mut Extensions) -> Result<()> {
        let data = self.read_small(size, "pax")?;
        for (key, value) in parse_pax(&data)? {
            if global {
                if key == b"comment" {
                    self.commit_id = Some(String::from_utf8_lossy(&value).into_owned());
                }
                continue;
            }
            match key.as_slice() {
                b"path" => ext.path = Some(value),
                b"linkpath" => ext.link = Some(value),
                b"size" => {
                    let s = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or_else(|| corrupt("a pax size that is not a number"))?;
                    ext.size = Some(s);
                }
                k if k.starts_with(b"GNU.sparse.") => {
                    return Err(corrupt(
                        "a sparse file (GNU.sparse pax records): git archive never writes them",
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The member `header` describes, with what its extension headers said; its data is next.
    fn member(&mut self, header: &tar::Header, size: u64, ext: Extensions) -> Result<Member> {
        let size = ext.size.unwrap_or(size);
        self.total = self.total.saturating_add(size);
        if self.total > self.limits.total_bytes {
            return Err(corrupt(format!(
                "more than {} bytes of data (--max-bytes)",
                self.limits.total_bytes
            )));
        }
        let path = ext
            .path
            .or(ext.long_name)
            .unwrap_or_else(|| header.path_bytes().into_owned());
        let kind = match header.entry_type().as_byte() {
            b'0' | 0 | b'7' => {
                let mode = header.mode().map_err(corrupt)?;
                Kind::File {
                    exec: mode & 0o111 != 0,
                }
            }
            b'5' => Kind::Dir,
            b'2' => {
                let target = ext
                    .link
                    .or(ext.long_link)
                    .or_else(|| header.link_name_bytes().map(|c| c.into_owned()))
                    .unwrap_or_default();
                Kind::Symlink(target)
            }
            other => Kind::Other(other),
        };
        self.pending = size;
        self.padding = padding(size);
        Ok(Member { path, kind })
    }

    /// Read what follows the end-of-archive marker to the end of the stream, so that a truncated or
    /// corrupt compressed stream shows (its checksum is only at the end). Only zero padding may
    /// follow (git archive pads to a 10 KiB record), at most [`MAX_TRAILER`] bytes of it, so a
    /// stream of zeros cannot run forever; anything else — a second archive appended, which tar would
    /// ignore and so lose files silently — is refused.
    ///
    /// # Errors
    /// [`Error::Integrity`] for data after the marker, a truncated or corrupt stream, or more than
    /// [`MAX_TRAILER`] bytes of padding; [`Error::Network`] when the transport broke.
    pub fn finish(mut self) -> Result<()> {
        if !self.ended {
            return Err(corrupt("the archive was not read to its end"));
        }
        let mut buf = [0u8; 8192];
        let mut trailer = 0u64;
        loop {
            let n = match self.inner.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            if buf[..n].iter().any(|b| *b != 0) {
                return Err(corrupt(
                    "data after the end-of-archive marker (a second archive appended?)",
                ));
            }
            trailer += n as u64;
            if trailer > MAX_TRAILER {
                return Err(corrupt(format!(
                    "more than {MAX_TRAILER} bytes of padding after the end-of-archive marker"
                )));
            }
        }
    }

    /// The size of the current member's data not read yet (all of it before the first read).
    pub fn data_len(&self) -> u64 {
        self.pending
    }

    /// A reader of the current member's data (exactly its size).
    pub fn data(&mut self) -> MemberData<'_, R> {
        MemberData { stream: self }
    }
}

/// The data of the current member.
pub struct MemberData<'a, R> {
    stream: &'a mut TarStream<R>,
}

impl<R: Read> Read for MemberData<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stream.pending == 0 {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(self.stream.pending) as usize;
        let n = self.stream.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "member data ends early",
            ));
        }
        self.stream.pending -= n as u64;
        Ok(n)
    }
}

fn padding(size: u64) -> u64 {
    (BLOCK - size % BLOCK) % BLOCK
}

/// Read one block; `false` at a clean end of input before any byte of it.
fn read_block(r: &mut impl Read, block: &mut [u8; 512]) -> Result<bool> {
    let mut filled = 0;
    while filled < block.len() {
        match r.read(&mut block[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(corrupt("the stream ends inside a header (truncated)")),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(e)),
        }
    }
    Ok(true)
}

fn verify_checksum(block: &[u8; 512]) -> Result<()> {
    let header = tar::Header::from_byte_slice(block);
    let stored = header.cksum().map_err(corrupt)?;
    let sum: u32 = block[..148]
        .iter()
        .chain(&block[156..])
        .map(|b| u32::from(*b))
        .sum::<u32>()
        + 8 * u32::from(b' ');
    if sum != stored {
        return Err(corrupt("a header checksum does not match"));
    }
    Ok(())
}

/// Parse pax records `"<len> <key>=<value>\n"`.
fn parse_pax(mut data: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        if data.iter().all(|b| *b == 0) {
            break;
        }
        let sp = data
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| corrupt("a pax record without a length"))?;
        let len: usize = std::str::from_utf8(&data[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| corrupt("a pax record length that is not a number"))?;
        if len <= sp + 1 || len > data.len() || data[len - 1] != b'\n' {
            return Err(corrupt("a pax record with a wrong length"));
        }
        let record = &data[sp + 1..len - 1];
        let eq = record
            .iter()
            .position(|b| *b == b'=')
            .ok_or_else(|| corrupt("a pax record without '='"))?;
        out.push((record[..eq].to_vec(), record[eq + 1..].to_vec()));
        data = &data[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_records_parse_and_reject_bad_lengths() {
        let recs = parse_pax(b"29 path=a/very/long/name.txt\n11 size=42\n").unwrap();
        assert_eq!(
            recs[0],
            (b"path".to_vec(), b"a/very/long/name.txt".to_vec())
        );
        assert_eq!(recs[1], (b"size".to_vec(), b"42".to_vec()));
        assert!(parse_pax(b"99 path=x\n").is_err());
        assert!(parse_pax(b"x path=x\n").is_err());
    }
}
