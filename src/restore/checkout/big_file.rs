//! One file over the big-object threshold, streamed from the pack into the work tree, never held
//! whole; the `mid-big-file` failpoint halfway through.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use super::super::write::Writer;
use super::set_aside::BigFile;
use crate::error::{Error, Result};
use crate::failpoint;

/// Write one big file by streaming it from the pack through `writer` (its folders made, a file
/// or symlink in its place replaced when allowed, never written through); returns its stat.
///
/// # Errors
/// [`Error::Conflict`] for a file in the way without `overwrite`, or a file where a folder goes;
/// [`Error::LocalIo`] for I/O failures.
pub(super) fn write_big_file(
    writer: &mut Writer<'_>,
    file: &BigFile,
    objects: &crate::pack::PackObjects,
) -> Result<gix::index::entry::Stat> {
    let rel = Path::new(std::ffi::OsStr::from_bytes(&file.path));
    let exec = file.mode == gix::index::entry::Mode::FILE_EXECUTABLE;
    let shown = writer.shown(rel).display().to_string();
    let out = writer.open_new(rel, exec)?;
    let mut out = HalfwayFailpoint {
        inner: std::io::BufWriter::with_capacity(256 << 10, out),
        written: 0,
        half: file.blob.size() / 2,
    };
    objects
        .stream_big(file.blob, &mut out)
        .and_then(|_| std::io::Write::flush(&mut out))
        .map_err(|e| Error::io(format!("writing {shown}"), e))?;
    let out = out
        .inner
        .into_inner()
        .map_err(|e| Error::io(format!("writing {shown}"), e.into_error()))?;
    let meta = gix::index::fs::Metadata::from_file(&out)
        .map_err(|e| Error::io(format!("reading {shown}"), e))?;
    gix::index::entry::Stat::from_fs(&meta)
        .map_err(|e| Error::from_chain(format!("reading {shown}"), &e))
}

/// A writer that aborts the process once half of a big file is written (flushed to the file):
/// the `mid-big-file` failpoint.
struct HalfwayFailpoint<W: std::io::Write> {
    inner: std::io::BufWriter<W>,
    written: u64,
    half: u64,
}

impl<W: std::io::Write> std::io::Write for HalfwayFailpoint<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        if self.written > self.half && failpoint::armed("mid-big-file") {
            self.inner.flush()?;
            failpoint::hit("mid-big-file");
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
