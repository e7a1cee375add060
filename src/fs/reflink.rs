//! A file's bytes into a new file by copy-on-write where the file system offers it (`FICLONE`:
//! XFS with reflink, Btrfs, bcachefs), else by `copy_file_range` (the kernel copies, NFS and
//! overlay may still share), else by reading and writing. An agent's work tree takes its clean
//! files from the main tree's checkout this way (issue 42: about 0.9 GB per tree dropping to 0).
//!
//! Every path copies exactly `len` bytes: a source that grows while it is copied stops at `len`
//! (never copies forever), one shorter than `len` is an error.

use std::fs::File;
use std::io::{Error, ErrorKind, Result};
use std::os::unix::fs::FileExt as _;

/// How [`clone_into`] got the bytes into the new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    /// The file system shares the source's extents (`FICLONE`): no data written.
    Cloned,
    /// The bytes were copied (`copy_file_range`, or read and written).
    Copied,
}

/// Put the first `len` bytes of `src` into `dst`, a new empty file opened for writing (it may be
/// left with part of the bytes on error; the caller removes it).
///
/// # Errors
/// [`ErrorKind::UnexpectedEof`] when `src` holds fewer than `len` bytes; any other I/O error of
/// the clone or copy (the ones that only mean "not here" fall through to the next way).
pub fn clone_into(src: &File, dst: &File, len: u64) -> Result<Copied> {
    if len > 0 && clone_whole(src, dst)? {
        let got = dst.metadata()?.len();
        if got < len {
            return Err(short(got, len));
        }
        if got > len {
            // The source grew before the clone: keep what was asked for.
            dst.set_len(len)?;
        }
        return Ok(Copied::Cloned);
    }
    let done = copy_range(src, dst, 0, len)?;
    read_write(src, dst, done, len)?;
    Ok(Copied::Copied)
}

/// `FICLONE`: true when `dst` now shares all of `src`'s extents, false when this file system (or
/// this pair of file systems) cannot clone.
fn clone_whole(src: &File, dst: &File) -> Result<bool> {
    match rustix::fs::ioctl_ficlone(dst, src) {
        Ok(()) => Ok(true),
        Err(e) if cannot(e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The errors that mean "this way is not available here", not "the copy failed".
fn cannot(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    [
        Errno::OPNOTSUPP,
        Errno::XDEV,
        Errno::INVAL,
        Errno::NOTTY,
        Errno::NOSYS,
        Errno::PERM,
        Errno::BADF,
    ]
    .contains(&e)
}

/// `copy_file_range` from `from` up to `len`; returns how far it got. Stops early (for
/// [`read_write`] to finish) when the kernel cannot copy between these files, or when it copies
/// nothing at the very start (some file systems report size 0 for files that have bytes).
fn copy_range(src: &File, dst: &File, from: u64, len: u64) -> Result<u64> {
    let mut off = from;
    while off < len {
        let want = usize::try_from(len - off)
            .unwrap_or(usize::MAX)
            .min(1 << 30);
        let (mut off_in, mut off_out) = (off, off);
        match rustix::fs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want) {
            Ok(0) if off == 0 => return Ok(off),
            Ok(0) => return Err(short(off, len)),
            Ok(n) => off += n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) if cannot(e) => return Ok(off),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(off)
}

/// Read and write from `from` up to `len`, by offset (neither file's position is used).
fn read_write(src: &File, dst: &File, from: u64, len: u64) -> Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut off = from;
    while off < len {
        let want = usize::try_from(len - off)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = match src.read_at(&mut buf[..want], off) {
            Ok(0) => return Err(short(off, len)),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        dst.write_all_at(&buf[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

fn short(got: u64, len: u64) -> Error {
    Error::new(
        ErrorKind::UnexpectedEof,
        format!("the source holds {got} bytes, {len} expected"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn pair(bytes: &[u8]) -> (tempfile::TempDir, File, File) {
        let dir = tempfile::tempdir().unwrap();
        let mut src = File::create(dir.path().join("src")).unwrap();
        src.write_all(bytes).unwrap();
        let src = crate::fs::open_regular(&dir.path().join("src"), false).unwrap();
        let dst = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("dst"))
            .unwrap();
        (dir, src, dst)
    }

    /// Whether `f` is on ext4 or tmpfs, which cannot clone (the no-clone tests' premise);
    /// else the test says it was skipped.
    #[allow(clippy::disallowed_macros)] // for the person running the tests, as in tests/
    fn on_a_file_system_that_cannot_clone(f: &File) -> bool {
        let kind = rustix::fs::fstatfs(f).unwrap().f_type as i64;
        let known = [0xEF53, 0x0102_1994].contains(&kind);
        if !known {
            eprintln!("skipped: the temporary folder is not on ext4 or tmpfs (f_type {kind:#x})");
        }
        known
    }

    fn content(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn read(dir: &tempfile::TempDir) -> Vec<u8> {
        crate::fs::read_regular(&dir.path().join("dst"), false, 1 << 30).unwrap()
    }

    #[test]
    fn copies_where_nothing_clones() {
        // The unit tests run on ext4 or tmpfs: FICLONE is refused, the bytes are copied.
        let bytes = content(3 << 20);
        let (dir, src, dst) = pair(&bytes);
        if !on_a_file_system_that_cannot_clone(&src) {
            return;
        }
        assert_eq!(
            clone_into(&src, &dst, bytes.len() as u64).unwrap(),
            Copied::Copied
        );
        assert_eq!(read(&dir), bytes);
    }

    #[test]
    fn ficlone_refused_here_means_not_available() {
        let (_dir, src, dst) = pair(b"abc");
        if !on_a_file_system_that_cannot_clone(&src) {
            return;
        }
        assert!(!clone_whole(&src, &dst).unwrap());
    }

    #[test]
    fn copy_file_range_alone_copies_all() {
        let bytes = content(1 << 20 | 17);
        let (dir, src, dst) = pair(&bytes);
        assert_eq!(
            copy_range(&src, &dst, 0, bytes.len() as u64).unwrap(),
            bytes.len() as u64
        );
        assert_eq!(read(&dir), bytes);
    }

    #[test]
    fn read_write_alone_copies_all_and_finishes_a_partial_copy() {
        let bytes = content(600_001);
        let (dir, src, dst) = pair(&bytes);
        read_write(&src, &dst, 0, bytes.len() as u64).unwrap();
        assert_eq!(read(&dir), bytes);
        let (dir, src, dst) = pair(&bytes);
        assert_eq!(copy_range(&src, &dst, 0, 1000).unwrap(), 1000);
        read_write(&src, &dst, 1000, bytes.len() as u64).unwrap();
        assert_eq!(read(&dir), bytes);
    }

    #[test]
    fn a_longer_source_stops_at_len() {
        // A file that grows while it is copied: only `len` bytes, by every way.
        let bytes = content(100_000);
        let (dir, src, dst) = pair(&bytes);
        assert_eq!(clone_into(&src, &dst, 4096).unwrap(), Copied::Copied);
        assert_eq!(read(&dir), &bytes[..4096]);
        let (dir, src, dst) = pair(&bytes);
        read_write(&src, &dst, 0, 5000).unwrap();
        assert_eq!(read(&dir), &bytes[..5000]);
    }

    #[test]
    fn a_shorter_source_is_an_error_by_every_way() {
        let bytes = content(10_000);
        let (_dir, src, dst) = pair(&bytes);
        let e = clone_into(&src, &dst, 10_001).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{e}");
        let (_dir, src, dst) = pair(&bytes);
        let e = copy_range(&src, &dst, 0, 20_000).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{e}");
        let (_dir, src, dst) = pair(&bytes);
        let e = read_write(&src, &dst, 0, 20_000).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{e}");
    }

    #[test]
    fn an_empty_file_copies_nothing() {
        let (dir, src, dst) = pair(b"");
        assert_eq!(clone_into(&src, &dst, 0).unwrap(), Copied::Copied);
        assert!(read(&dir).is_empty());
        let (_dir, src, dst) = pair(b"");
        let e = clone_into(&src, &dst, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{e}");
    }

    #[test]
    fn a_source_growing_during_the_copy_still_ends() {
        // A writer appends as fast as it can while the copy runs: the copy stops at `len`.
        let bytes = content(1 << 20);
        let (dir, src, dst) = pair(&bytes);
        let path = dir.path().join("src");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut f = File::options().append(true).open(path).unwrap();
                let chunk = vec![b'x'; 64 * 1024];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    f.write_all(&chunk).unwrap();
                    if f.metadata().unwrap().len() > 64 << 20 {
                        break;
                    }
                }
            })
        };
        let got = clone_into(&src, &dst, bytes.len() as u64);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        assert_eq!(got.unwrap(), Copied::Copied);
        assert_eq!(read(&dir), bytes);
    }
}
