//! What `restore --archive`/`--archive-url` reads, and how: the source of the stream and its bounds.

use std::path::PathBuf;

use super::extract::Strip;
use super::tar_stream::Limits;
use crate::wire::http::UrlSource;

/// Where the archive comes from.
#[derive(Debug)]
pub enum ArchiveSource {
    /// `ARCHIVE_URL` / `--archive-url`: fetched with the SPEC's retries (a cut restarts the stream).
    Url(UrlSource),
    /// `--archive FILE`.
    File(PathBuf),
    /// `--archive -`: standard input (a backend piping the stream in).
    Stdin,
}

/// How to read the archive.
#[derive(Debug)]
pub struct ArchiveOptions {
    /// Where it comes from.
    pub source: ArchiveSource,
    /// Leading components to strip.
    pub strip: Strip,
    /// Refuse an archive without the pax commit id (else: a warning).
    pub require_commit_id: bool,
    /// Size bounds.
    pub limits: Limits,
}
