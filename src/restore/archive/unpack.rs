//! Read the archive: download it (a cut restarts the stream from an empty folder), inflate every
//! gzip member within gzip's own overhead, and extract the tar stream into the staging folder.

use std::io::{BufReader, Read};
use std::path::Path;

use super::extract;
use super::options::ArchiveOptions;
use super::tar_stream;
use crate::error::{Error, Result};
use crate::types::RemoteUrl;
use crate::wire::http::{Http, Request};

/// GET the archive; a 404 names the archive.
pub(super) fn download(http: &Http, url: &RemoteUrl) -> Result<impl Read> {
    let resp = http
        .send(
            url,
            Request {
                endpoint: "",
                headers: Vec::new(),
                body: None,
            },
        )
        .map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(format!("no archive at {url} (HTTP 404)")),
            other => other,
        })?;
    Ok(crate::progress::Counted {
        inner: NetBody {
            // The server may make the archive on the fly: its first byte is awaited as long as
            // GIT_SESSION_FIRST_BYTE_WAIT_MS allows, then the low-speed rule holds.
            inner: resp.streaming(),
            url: url.to_string(),
        },
        progress: crate::progress::Progress::bytes("downloading the archive"),
    })
}

pub(super) fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| Error::io(format!("clearing {}", dir.display()), e))?;
    }
    std::fs::create_dir(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))
}

pub(crate) fn unpack(
    raw: impl Read,
    tree: &Path,
    archive: &ArchiveOptions,
    tip_hex: &str,
    hash: super::blobs::Hash<'_>,
) -> Result<(extract::Extracted, Option<String>)> {
    let inflated = std::rc::Rc::new(std::cell::Cell::new(0));
    let input = Deflated {
        inner: raw,
        read: 0,
        inflated: inflated.clone(),
    };
    let gz = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(64 * 1024, input));
    let tar = Inflating { gz, inflated };
    unpack_tar(tar, tree, archive, tip_hex, hash)
}

/// Compressed bytes a gzip stream may read beyond what they inflate to, besides a quarter of
/// them (fixed Huffman codes spend 9 bits on half the byte values: random data at
/// `gzip -1` grows 5%): headers and the decoder's read-ahead. A stream of empty gzip members
/// or empty deflate blocks inflates to nothing, endlessly, so no limit on the output would ever
/// stop it.
const GZIP_SLACK: u64 = 256 << 10;

/// The compressed side of [`unpack`]: counts what it reads and refuses to read on once that
/// outruns what came out of the decoder ([`Inflating`]) by more than gzip's overhead.
struct Deflated<R> {
    inner: R,
    read: u64,
    inflated: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Deflated<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let out = self.inflated.get();
        if self.read > out + out / 4 + GZIP_SLACK {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} compressed bytes inflated to {out}: a gzip stream of empty members or \
                     blocks, which could go on forever",
                    self.read
                ),
            ));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// The decoder's side of [`unpack`]: counts what it inflates, for [`Deflated`].
struct Inflating<R: Read> {
    gz: flate2::read::MultiGzDecoder<BufReader<Deflated<R>>>,
    inflated: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Inflating<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.gz.read(buf)?;
        self.inflated.set(self.inflated.get() + n as u64);
        Ok(n)
    }
}

/// [`unpack`] of a tar stream decompressed already; `hash`: compute every file's blob id beside the
/// extraction (for the index).
pub(crate) fn unpack_tar(
    tar: impl Read,
    tree: &Path,
    archive: &ArchiveOptions,
    tip_hex: &str,
    hash: super::blobs::Hash<'_>,
) -> Result<(extract::Extracted, Option<String>)> {
    let mut stream = tar_stream::TarStream::new(tar, archive.limits);
    // Every member is written through one handle on the fresh folder (SPEC rule 7).
    let tree = crate::fs::tree::Tree::open(tree)
        .map_err(|e| Error::io(format!("opening {}", tree.display()), e))?;
    let extracted = extract::extract(&mut stream, &tree, archive.strip, tip_hex, hash)?;
    let commit = stream.commit_id.clone();
    // Read the rest (end-of-archive padding, later gzip members) so truncation and corruption show.
    stream.finish()?;
    Ok((extracted, commit))
}

/// An HTTP response body whose transport failures surface as [`Error::Network`] (retried), not as
/// a corrupt archive.
struct NetBody {
    inner: crate::wire::http::Body,
    url: String,
}

impl Read for NetBody {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            std::io::Error::other(Error::Network(format!(
                "the archive download from {} broke off: {e}",
                self.url
            )))
        })
    }
}
