//! A pack of whole blobs written as their bytes stream past (no deltas), with its index: an
//! archive restore keeps the archive's blobs this way, so git has every object a git restore
//! would have without fetching the blobs again (`gitformat-pack`, version 2).
//!
//! The object count heads the pack and is known only at the end: 12 bytes are kept free, written
//! last, and the file read back once for its checksum. A blob met twice (the same content at two
//! paths) is cut off again: git's index holds each id once.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Read as _, Seek as _, SeekFrom, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::ZlibEncoder;

/// The pack's temporary name in its folder, until it is whole.
const TMP: &str = "tmp-blob-pack";

/// A file that counts and CRC-32s what passes through it.
struct Counted {
    out: BufWriter<File>,
    at: u64,
    crc: crc32fast::Hasher,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.at += n as u64;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The pack being written.
pub struct BlobPack {
    dir: PathBuf,
    /// `None` between blobs; the compressor of the current one.
    current: Option<(u64, ZlibEncoder<Counted>)>,
    idle: Option<Counted>,
    entries: Vec<(gix::ObjectId, u64, u32)>,
    seen: HashSet<gix::ObjectId>,
    /// The repository's object format: the blobs' ids and the pack's checksum.
    format: gix::hash::Kind,
}

impl BlobPack {
    /// Start a pack in `dir` (an `objects/pack` folder) of a repository of `format`.
    ///
    /// # Errors
    /// The I/O error of creating it.
    pub fn create(dir: &Path, format: gix::hash::Kind) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        // A new file (a symlink or hard link left in its place is removed, never written
        // through); read back at the end for the checksum.
        let path = dir.join(TMP);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)?;
        let mut out = Counted {
            out: BufWriter::with_capacity(256 << 10, file),
            at: 0,
            crc: crc32fast::Hasher::new(),
        };
        out.write_all(&[0u8; 12])?;
        Ok(BlobPack {
            dir: dir.to_owned(),
            current: None,
            idle: Some(out),
            entries: Vec::new(),
            seen: HashSet::new(),
            format,
        })
    }

    /// A blob of `size` bytes begins.
    ///
    /// # Errors
    /// The I/O error of writing.
    pub fn begin(&mut self, size: u64) -> io::Result<()> {
        let Some(mut out) = self.idle.take() else {
            return Err(io::Error::other("a blob began before the last one ended"));
        };
        out.crc = crc32fast::Hasher::new();
        let start = out.at;
        // Type 3 (blob) and the size, 4 bits then 7 a byte, low first.
        let mut byte = 0x30 | (size & 0x0f) as u8;
        let mut rest = size >> 4;
        while rest > 0 {
            out.write_all(&[byte | 0x80])?;
            byte = (rest & 0x7f) as u8;
            rest >>= 7;
        }
        out.write_all(&[byte])?;
        self.current = Some((start, ZlibEncoder::new(out, Compression::fast())));
        Ok(())
    }

    /// The next bytes of the current blob.
    ///
    /// # Errors
    /// The I/O error of writing.
    pub fn data(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.current {
            Some((_, z)) => z.write_all(bytes),
            None => Err(io::Error::other("blob data outside a blob")),
        }
    }

    /// The current blob, whose id is `id`, is whole.
    ///
    /// # Errors
    /// The I/O error of writing.
    pub fn end(&mut self, id: gix::ObjectId) -> io::Result<()> {
        let Some((start, z)) = self.current.take() else {
            return Err(io::Error::other("a blob ended that had not begun"));
        };
        if id.kind() != self.format {
            return Err(io::Error::other("a blob id of another object format"));
        }
        let mut out = z.finish()?;
        if self.seen.insert(id) {
            self.entries.push((id, start, out.crc.clone().finalize()));
        } else {
            out.out.flush()?;
            out.out.get_mut().set_len(start)?;
            out.out.get_mut().seek(SeekFrom::Start(start))?;
            out.at = start;
        }
        self.idle = Some(out);
        Ok(())
    }

    /// Remove the unfinished pack.
    pub fn abandon(self) {
        let _ = std::fs::remove_file(self.dir.join(TMP));
    }

    /// Write the count and the checksum, and the index beside the pack; returns the pack's path
    /// (`pack-<checksum>.pack`).
    ///
    /// # Errors
    /// The I/O error of writing or reading back.
    pub fn finish(mut self) -> io::Result<PathBuf> {
        let Some(out) = self.idle.take() else {
            return Err(io::Error::other("the pack ended inside a blob"));
        };
        let mut file = out
            .out
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        let count = u32::try_from(self.entries.len())
            .map_err(|_| io::Error::other("too many blobs for one pack"))?;
        let mut header = Vec::with_capacity(12);
        header.extend_from_slice(b"PACK");
        header.extend_from_slice(&2u32.to_be_bytes());
        header.extend_from_slice(&count.to_be_bytes());
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header)?;
        file.seek(SeekFrom::Start(0))?;
        let mut hasher = gix::hash::hasher(self.format);
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let checksum = hasher
            .try_finalize()
            .map_err(|e| io::Error::other(format!("hashing the pack: {e}")))?;
        file.write_all(checksum.as_slice())?;
        file.sync_all()?;
        let name = format!("pack-{checksum}");
        let idx_tmp = self.dir.join(format!("{TMP}.idx"));
        let mut idx = BufWriter::new(File::create(&idx_tmp)?);
        super::entries::write_index(std::mem::take(&mut self.entries), &checksum, &mut idx)?;
        idx.into_inner()
            .map_err(io::IntoInnerError::into_error)?
            .sync_all()?;
        let pack = self.dir.join(format!("{name}.pack"));
        std::fs::rename(self.dir.join(TMP), &pack)?;
        std::fs::rename(idx_tmp, self.dir.join(format!("{name}.idx")))?;
        Ok(pack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symlink (or hard link) where the temporary pack goes is removed, never written through.
    #[test]
    fn a_link_in_the_temporary_packs_place_is_not_written_through() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "theirs\n").unwrap();
        let dir = tmp.path().join("objects/pack");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join(TMP)).unwrap();
        BlobPack::create(&dir, gix::hash::Kind::Sha1)
            .unwrap()
            .abandon();
        std::fs::hard_link(&outside, dir.join(TMP)).unwrap();
        BlobPack::create(&dir, gix::hash::Kind::Sha1)
            .unwrap()
            .abandon();
        assert_eq!(
            crate::fs::read_regular(&outside, false, 64).unwrap(),
            b"theirs\n"
        );
    }

    #[test]
    fn a_pack_of_blobs_is_read_back_by_gix() {
        for format in [gix::hash::Kind::Sha1, gix::hash::Kind::Sha256] {
            read_back(format);
        }
    }

    fn read_back(format: gix::hash::Kind) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("objects/pack");
        std::fs::create_dir_all(&dir).unwrap();
        let mut pack = BlobPack::create(&dir, format).unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let blobs = [&b"hello\n"[..], &big, b"", b"hello\n"];
        let mut ids = Vec::new();
        for bytes in blobs {
            let id = gix::objs::compute_hash(format, gix::objs::Kind::Blob, bytes).unwrap();
            pack.begin(bytes.len() as u64).unwrap();
            for chunk in bytes.chunks(65536) {
                pack.data(chunk).unwrap();
            }
            pack.end(id).unwrap();
            ids.push(id);
        }
        let path = pack.finish().unwrap();
        // The trailer, and the name, are the format's hash of the rest.
        let bytes = crate::fs::read_regular(&path, false, 1 << 30).unwrap();
        let (body, trailer) = bytes.split_at(bytes.len() - format.len_in_bytes());
        let mut hasher = gix::hash::hasher(format);
        hasher.update(body);
        let sum = hasher.try_finalize().unwrap();
        assert_eq!(trailer, sum.as_slice());
        assert_eq!(path.file_name().unwrap(), &*format!("pack-{sum}.pack"));
        let index = gix_pack::index::File::at(path.with_extension("idx"), format).unwrap();
        assert_eq!(index.num_objects(), 3, "the second hello is kept once");
        let odb = gix::odb::at(tmp.path().join("objects"), format).unwrap();
        let mut buf = Vec::new();
        for (id, want) in ids.iter().zip(blobs) {
            let data = gix::objs::Find::try_find(&odb, id, &mut buf)
                .unwrap()
                .unwrap();
            assert_eq!(data.kind, gix::objs::Kind::Blob);
            assert_eq!(data.data, want);
        }
    }
}
