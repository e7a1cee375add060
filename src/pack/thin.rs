//! Thin packs completed, as `git index-pack --fix-thin` does: a fetch with `thin-pack` into a
//! repository that already holds some objects may receive `REF_DELTA` entries against bases the
//! pack does not contain (`gitformat-pack`, "Deltified representation"; `gitprotocol-capabilities`,
//! "thin-pack"). The bases are copied from the local object database to the end of the pack as
//! whole objects, the header's object count and the trailing SHA-1 are rewritten, and the
//! completed pack goes through [`receive()`](super::receive()) like any other.
//!
//! Memory stays bounded as in [`super::receive()`]: the stream is parsed by our own
//! [`EntryStream`] (every size checked against [`PackLimits`] before it is allocated) while it is
//! written to a temporary file, and the file is hashed by streaming it.

use std::collections::BTreeSet;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use gix::ObjectId;
use gix::odb::pack as gix_pack;
use gix_pack::data::entry::Header;

use super::entries::EntryStream;
use super::limits::{PackLimits, ReceiveError};
use super::receive::{Received, receive};
use super::receive::{Tee, local_io, refuse_data_after_the_pack, temporary_pack};

/// How many bytes are read or written at a time.
const CHUNK: usize = 64 * 1024;

/// Read a version 2 pack from `input` (the bytes of the `packfile` section, side-band removed),
/// complete it when it is thin, and leave `pack-<hash>.pack` and `pack-<hash>.idx` in `pack_dir`
/// (the `objects/pack` folder of the repository `local` reads), as `git index-pack --fix-thin`
/// does. `thread_limit`, `limits` and `interrupt` mean what they mean for
/// [`receive()`](super::receive()), which indexes the completed pack.
///
/// - The stream is written to a temporary `tmp_pack_*` file in `pack_dir` as its entries are
///   parsed; bytes after the pack's checksum are refused, as `git index-pack` does. The file is
///   removed when this returns, whatever the outcome.
/// - A base named by a `REF_DELTA` entry is *external* when `local` has it and no object of the
///   pack has its id. External bases are appended, each as a whole object (type-and-size
///   header, zlib data), in the order the pack first names them; the header's count grows by their
///   number and
///   the trailing SHA-1 is recomputed over the whole file. The result's `num_objects` counts them.
/// - A pack with no `REF_DELTA` against an object `local` has (an empty pack, a pack that is not
///   thin) is indexed as it came: the result is what [`receive()`](super::receive()) gives.
///
/// Whether a base `local` has is also in the pack is decided by a first indexing of the pack
/// completed with all such bases, in a temporary folder in `pack_dir`: an id the index lists at an
/// offset before the appended bases is the pack's own. When none is (the usual case for a thin
/// pack), that indexing is the result, moved into `pack_dir`; otherwise the pack is completed
/// again without them and indexed once more.
///
/// # Errors
/// - [`ReceiveError::TooLarge`] for an entry over `limits` (as [`receive()`](super::receive())),
///   and for a base in `local` over `limits.big_object_bytes`: gix's object database hands out
///   only whole objects, so such a base is refused before it is read rather than held in memory
///   (git's `pack-objects` never deltifies against objects over `core.bigFileThreshold`).
/// - [`ReceiveError::Corrupt`] for a stream that is not a valid pack, truncated or followed by
///   more data, and for a `REF_DELTA` whose base is neither in the pack nor in `local` (the
///   server sent a delta against an object we do not have): the message names the id.
/// - [`ReceiveError::Local`] when the file system refuses the files, or `local` fails to read a
///   base.
pub fn receive_thin(
    input: &mut dyn BufRead,
    pack_dir: &Path,
    local: &impl gix::objs::FindObjectOrHeader,
    thread_limit: Option<usize>,
    limits: PackLimits,
    interrupt: &AtomicBool,
    format: gix::hash::Kind,
) -> Result<Received, ReceiveError> {
    let started = std::time::Instant::now();
    let spooled = Spooled::read(input, pack_dir, limits, format, local)?;
    let (mut external, missing) = spooled.partition_bases(local, limits)?;
    tracing::debug!(
        "thin pack: received after {} ms, {} delta bases",
        started.elapsed().as_millis(),
        spooled.bases.len()
    );
    let index = |into: &Path| {
        spooled
            .index(into, thread_limit, limits, interrupt)
            .map_err(|e| name_missing(e, &missing))
    };
    if external.is_empty() {
        return index(pack_dir);
    }
    spooled.complete(&external, local)?;
    tracing::debug!(
        "thin pack: {} bases appended after {} ms",
        external.len(),
        started.elapsed().as_millis()
    );
    let probe_dir = tempfile::Builder::new()
        .prefix("tmp_thin_")
        .tempdir_in(pack_dir)
        .map_err(|e| local_io(pack_dir, "creating a temporary folder", e))?;
    let probe = index(probe_dir.path())?;
    let in_pack = spooled.own_objects(&probe, &external)?;
    if in_pack.is_empty() {
        return move_into(probe, pack_dir);
    }
    tracing::debug!(
        "thin pack: {} of {} delta bases are in the pack itself",
        in_pack.len(),
        external.len()
    );
    drop(probe_dir);
    external.retain(|id| !in_pack.contains(id));
    spooled.complete(&external, local)?;
    index(pack_dir)
}

/// The received pack in its temporary file, and what its entries said.
struct Spooled {
    file: tempfile::NamedTempFile,
    version: gix_pack::data::Version,
    /// The count in the pack's header as received.
    num_objects: u32,
    /// Where the received entries end (the received checksum followed).
    entries_end: u64,
    /// Every base a `REF_DELTA` entry names.
    bases: BTreeSet<ObjectId>,
    /// The bases `local` had, read and written as whole entries while the stream arrived.
    prepared: Option<Prepared>,
    pack_dir: std::path::PathBuf,
    /// The repository's object format.
    format: gix::hash::Kind,
}

impl Spooled {
    /// Write `input` into a temporary file in `pack_dir` while its entries are parsed, collecting
    /// the `REF_DELTA` bases; refuse data after the checksum.
    fn read(
        input: &mut dyn BufRead,
        pack_dir: &Path,
        limits: PackLimits,
        format: gix::hash::Kind,
        local: &impl gix::objs::FindObjectOrHeader,
    ) -> Result<Self, ReceiveError> {
        let (file, writer) = temporary_pack(pack_dir)?;
        let mut prepared = Prepared::new(pack_dir);
        let tee = Tee {
            reader: &mut *input,
            file: writer.clone(),
            last_read: Arc::new(Mutex::new(std::time::Instant::now())),
        };
        let (mut entries, learned) = EntryStream::new(
            BufReader::with_capacity(CHUNK, tee),
            limits,
            pack_dir,
            format,
        )?;
        let (version, num_objects) = (entries.version(), entries.num_objects());
        let mut bases = BTreeSet::new();
        for entry in &mut entries {
            let entry = entry.map_err(|e| {
                learned.borrow_mut().failure.take().unwrap_or_else(|| {
                    ReceiveError::Corrupt(format!("reading the pack: {}", crate::error::chain(&e)))
                })
            })?;
            if let Header::RefDelta { base_id } = entry.header
                && bases.insert(base_id)
                && let Some(p) = prepared.as_mut()
                && p.add(base_id, local, limits).is_err()
            {
                // The file system refused the side file: complete the pack as before.
                prepared = None;
            }
        }
        drop(entries);
        let entries_end = learned
            .borrow()
            .entries_end
            .max(gix_pack::data::header::SIZE as u64);
        refuse_data_after_the_pack(input, &writer, entries_end, pack_dir, format)?;
        Ok(Spooled {
            file,
            version,
            num_objects,
            entries_end,
            bases,
            prepared: prepared.and_then(Prepared::finish),
            pack_dir: pack_dir.to_owned(),
            format,
        })
    }

    /// The bases `local` has (candidates for appending, their sizes checked), and those it lacks
    /// (the pack must hold them itself).
    fn partition_bases(
        &self,
        local: &impl gix::objs::FindHeader,
        limits: PackLimits,
    ) -> Result<(Vec<ObjectId>, Vec<ObjectId>), ReceiveError> {
        let (mut found, mut missing) = (Vec::new(), Vec::new());
        for id in &self.bases {
            let header = local
                .try_header(id)
                .map_err(|e| read_base_error(id, &e, &self.pack_dir))?;
            let Some(header) = header else {
                missing.push(*id);
                continue;
            };
            if header.size > limits.big_object_bytes {
                return Err(ReceiveError::TooLarge(format!(
                    "the pack holds a delta against {id}, a {} of {} bytes in the local \
                     repository, over {}: git never deltifies objects that big \
                     (core.bigFileThreshold), and the base would have to be held in memory whole",
                    header.kind, header.size, limits.big_object_bytes
                )));
            }
            found.push(*id);
        }
        Ok((found, missing))
    }

    /// Make the file the received pack followed by `bases` (read from `local`) as whole objects,
    /// with the header's count and the trailing SHA-1 to match.
    fn complete(
        &self,
        bases: &[ObjectId],
        local: &impl gix::objs::Find,
    ) -> Result<(), ReceiveError> {
        let io_err = |what: &str, e: io::Error| local_io(&self.pack_dir, what, e);
        let count = u32::try_from(bases.len())
            .ok()
            .and_then(|n| self.num_objects.checked_add(n))
            .ok_or_else(|| {
                ReceiveError::Corrupt(format!(
                    "the pack's {} objects and {} delta bases are more than a pack can hold",
                    self.num_objects,
                    bases.len()
                ))
            })?;
        let file = self.file.as_file();
        file.set_len(self.entries_end)
            .map_err(|e| io_err("cutting the received checksum off the pack", e))?;
        let mut out = BufWriter::with_capacity(CHUNK, file);
        out.seek(io::SeekFrom::Start(self.entries_end))
            .map_err(|e| io_err("appending the delta bases to the pack", e))?;
        let mut buf = Vec::new();
        // Used once at most: the copy frees it. A second completion (some bases turned out to be
        // the pack's own) has fewer bases, so it reads them from `local` again.
        let ready = self.prepared.as_ref().filter(|p| p.holds_exactly(bases));
        if let Some(p) = ready {
            copy_freeing(&p.file, &mut out)
                .map_err(|e| io_err("appending the delta bases to the pack", e))?;
        }
        for id in bases.iter().filter(|_| ready.is_none()) {
            let object = local
                .try_find(id, &mut buf)
                .map_err(|e| read_base_error(id, &e, &self.pack_dir))?
                .ok_or_else(|| {
                    ReceiveError::Local(crate::Error::conflict(format!(
                        "the delta base {id} left the local repository while the pack was read \
                         (another git ran in it?): run the command again"
                    )))
                })?;
            write_whole_entry(&mut out, object.kind, object.data)
                .map_err(|e| io_err("appending the delta bases to the pack", e))?;
        }
        let end = out
            .stream_position()
            .and_then(|end| out.flush().map(|()| end))
            .map_err(|e| io_err("appending the delta bases to the pack", e))?;
        drop(out);
        file.write_all_at(&gix_pack::data::header::encode(self.version, count), 0)
            .map_err(|e| io_err("rewriting the pack header", e))?;
        let checksum = sha1_of_prefix(file, end, self.format)
            .map_err(|e| io_err("hashing the completed pack", e))?;
        file.write_all_at(checksum.as_slice(), end)
            .map_err(|e| io_err("writing the completed pack's checksum", e))
    }

    /// Index the file as it now is into `dir`, through [`receive()`].
    fn index(
        &self,
        dir: &Path,
        thread_limit: Option<usize>,
        limits: PackLimits,
        interrupt: &AtomicBool,
    ) -> Result<Received, ReceiveError> {
        let file = self
            .file
            .reopen()
            .map_err(|e| local_io(&self.pack_dir, "reopening the temporary pack file", e))?;
        let mut input = BufReader::with_capacity(CHUNK, file);
        receive(
            &mut input,
            dir,
            thread_limit,
            limits,
            interrupt,
            None,
            self.format,
        )
    }

    /// Those of `appended` that the pack indexed as `probe` also holds among its own entries
    /// (before the appended ones).
    fn own_objects(
        &self,
        probe: &Received,
        appended: &[ObjectId],
    ) -> Result<BTreeSet<ObjectId>, ReceiveError> {
        let Some(data_path) = &probe.data_path else {
            return Ok(BTreeSet::new());
        };
        let index = gix_pack::index::File::at(data_path.with_extension("idx"), self.format)
            .map_err(|e| {
                ReceiveError::Local(crate::Error::from_chain(
                    format!("reading the index {} just written", data_path.display()),
                    &e,
                ))
            })?;
        Ok(index
            .iter()
            .filter(|e| e.pack_offset < self.entries_end && appended.binary_search(&e.oid).is_ok())
            .map(|e| e.oid)
            .collect())
    }
}

/// The delta bases the local repository has, each read and written as a whole pack entry to a
/// temporary file beside the pack as soon as the stream first names it: done while the server is
/// still sending, the completion after the last byte is one copy.
struct Prepared {
    file: std::fs::File,
    out: BufWriter<std::fs::File>,
    /// The bases written, in their order in the file.
    ids: Vec<ObjectId>,
    buf: Vec<u8>,
}

impl Prepared {
    /// A side file in `pack_dir`, unnamed (removed when closed); `None` when the file system
    /// refuses it.
    fn new(pack_dir: &Path) -> Option<Self> {
        let file = tempfile::tempfile_in(pack_dir).ok()?;
        let out = BufWriter::with_capacity(CHUNK, file.try_clone().ok()?);
        Some(Prepared {
            file,
            out,
            ids: Vec::new(),
            buf: Vec::new(),
        })
    }

    /// Write `id` as a whole entry if `local` has it within `limits` (else leave it to the
    /// completion, which refuses or reports it). Errors are the side file's only.
    fn add(
        &mut self,
        id: ObjectId,
        local: &impl gix::objs::FindObjectOrHeader,
        limits: PackLimits,
    ) -> io::Result<()> {
        let small = local
            .try_header(&id)
            .ok()
            .flatten()
            .is_some_and(|h| h.size <= limits.big_object_bytes);
        if !small {
            return Ok(());
        }
        let Ok(Some(object)) = local.try_find(&id, &mut self.buf) else {
            return Ok(());
        };
        write_whole_entry(&mut self.out, object.kind, object.data)?;
        self.ids.push(id);
        Ok(())
    }

    /// The side file flushed, `None` when that fails.
    fn finish(mut self) -> Option<Self> {
        self.out.flush().ok()?;
        self.buf = Vec::new();
        Some(self)
    }

    /// Whether the file holds exactly the entries of `bases` (sorted, as the completion lists them).
    fn holds_exactly(&self, bases: &[ObjectId]) -> bool {
        let mut ids = self.ids.clone();
        ids.sort_unstable();
        ids == bases
    }
}

/// Copy the whole of `side` (the side file of local bases) to `out`, each part freed in `side` once
/// copied (`FALLOC_FL_PUNCH_HOLE`): the bases, stored whole, would otherwise be on the disk twice
/// at the copy's end (20 bases of 40 KB on a nearly full disk: the boot needed 1.6 MB free where
/// the pack grew by 0.8 MB). A file system that punches no holes keeps them until the side file
/// is closed, as before.
fn copy_freeing(side: &std::fs::File, out: &mut impl Write) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    use std::os::unix::fs::FileExt as _;
    let mut buf = vec![0u8; 16 * CHUNK];
    let mut at = 0u64;
    loop {
        let n = side.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n])?;
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        let _ = rustix::fs::fallocate(side, flags, at, n as u64);
        at += n as u64;
    }
}

/// One pack entry holding `data` whole: the type-and-size header, then `data` as a zlib stream.
fn write_whole_entry(out: &mut dyn Write, kind: gix::objs::Kind, data: &[u8]) -> io::Result<()> {
    use gix::objs::Kind;
    let header = match kind {
        Kind::Blob => Header::Blob,
        Kind::Tree => Header::Tree,
        Kind::Commit => Header::Commit,
        Kind::Tag => Header::Tag,
    };
    header.write_to(data.len() as u64, out)?;
    write_stored_zlib(out, data)
}

/// The largest stored deflate block (RFC 1951 3.2.4: LEN is 16 bits).
const STORED_BLOCK: usize = 0xffff;

/// `data` as a zlib stream of stored (uncompressed) deflate blocks (RFC 1950, RFC 1951 3.2.4), as
/// `index-pack --fix-thin` writes with `core.compression=0`. The pack stays on this machine and
/// the bases are on the boot's path after the pack's last byte: deflating them (even at the fast
/// level, whose every stream zeroes a fresh 200 KiB state) cost more than the whole rest of the
/// completion, and every later read of a base (the indexing just after, the switch's files)
/// inflated them again. Stored, each costs a copy and an Adler-32 both ways; the pack is larger
/// by the bases' compression (the received deltas stay as the server compressed them).
fn write_stored_zlib(out: &mut dyn Write, data: &[u8]) -> io::Result<()> {
    // CMF 0x78 (deflate, 32 KiB window), FLG 0x01: no dictionary, level "fastest", and
    // 0x7801 a multiple of 31 (FCHECK).
    out.write_all(&[0x78, 0x01])?;
    let mut blocks = data.chunks(STORED_BLOCK).peekable();
    if blocks.peek().is_none() {
        // An empty object: one final, empty stored block.
        out.write_all(&[0x01, 0x00, 0x00, 0xff, 0xff])?;
    }
    while let Some(block) = blocks.next() {
        let last = u8::from(blocks.peek().is_none());
        let len = u16::try_from(block.len()).expect("a stored block is at most 0xffff bytes");
        // BFINAL and BTYPE 00 in the first three bits, the rest of the byte padding.
        out.write_all(&[last])?;
        out.write_all(&len.to_le_bytes())?;
        out.write_all(&(!len).to_le_bytes())?;
        out.write_all(block)?;
    }
    out.write_all(&adler32(data).to_be_bytes())
}

/// The Adler-32 checksum of `data` (RFC 1950 8.2).
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    // The most bytes summed before `b` could overflow 32 bits (zlib's NMAX).
    const NMAX: usize = 5552;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(NMAX) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// The hash (`format`'s) of the first `len` bytes of `file`, read `CHUNK` bytes at a time.
fn sha1_of_prefix(file: &std::fs::File, len: u64, format: gix::hash::Kind) -> io::Result<ObjectId> {
    let mut hasher = gix::hash::hasher(format);
    let mut reader = BufReader::with_capacity(CHUNK, file).take(len);
    let mut hashed = 0u64;
    reader.get_mut().seek(io::SeekFrom::Start(0))?;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        hasher.update(chunk);
        let n = chunk.len();
        hashed += n as u64;
        reader.consume(n);
    }
    if hashed != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the pack file ends after {hashed} of {len} bytes"),
        ));
    }
    hasher
        .try_finalize()
        .map_err(|e| io::Error::other(format!("hashing the pack: {e}")))
}

/// Move the pack and index `probe` wrote (in a temporary folder) into `pack_dir`: the pack first,
/// as [`receive()`] does, for an index without its pack would make the folder unreadable.
fn move_into(probe: Received, pack_dir: &Path) -> Result<Received, ReceiveError> {
    let Some(from) = &probe.data_path else {
        return Ok(probe);
    };
    let name = from.file_name().expect("pack-<hash>.pack");
    let data_path = pack_dir.join(name);
    for (from, to) in [
        (from.clone(), data_path.clone()),
        (from.with_extension("idx"), data_path.with_extension("idx")),
    ] {
        std::fs::rename(&from, &to)
            .map_err(|e| local_io(pack_dir, "moving the completed pack into place", e))?;
    }
    Ok(Received {
        data_path: Some(data_path),
        ..probe
    })
}

/// A failure of `local` reading the base `id`.
fn read_base_error(id: &ObjectId, e: &gix::Error, pack_dir: &Path) -> ReceiveError {
    ReceiveError::Local(crate::Error::from_chain(
        format!(
            "reading the delta base {id} from the repository of {}",
            pack_dir.display()
        ),
        e,
    ))
}

/// A corrupt pack's message, with the delta bases the local repository lacks (so the pack had to
/// hold them): a delta against one the pack does not hold is one against an object we do not have.
fn name_missing(err: ReceiveError, missing: &[ObjectId]) -> ReceiveError {
    const SHOWN: usize = 5;
    match err {
        ReceiveError::Corrupt(msg) if !missing.is_empty() => {
            let mut ids: Vec<String> = missing
                .iter()
                .take(SHOWN)
                .map(|id| id.to_string())
                .collect();
            if missing.len() > SHOWN {
                ids.push("…".to_owned());
            }
            ReceiveError::Corrupt(format!(
                "the local repository lacks {} of the pack's delta bases ({}), so the pack had to \
                 hold them, and a delta against one it does not hold is a delta against an object \
                 we do not have: {msg}",
                missing.len(),
                ids.join(", ")
            ))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflated(stream: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(stream), &mut out)
            .expect("a valid zlib stream");
        out
    }

    #[test]
    fn stored_zlib_streams_inflate_to_their_data_at_every_block_boundary() {
        let big: Vec<u8> = (0..3 * STORED_BLOCK + 17)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        for len in [
            0,
            1,
            100,
            STORED_BLOCK - 1,
            STORED_BLOCK,
            STORED_BLOCK + 1,
            big.len(),
        ] {
            let data = &big[..len];
            let mut stream = Vec::new();
            write_stored_zlib(&mut stream, data).unwrap();
            assert_eq!(inflated(&stream), data, "{len} bytes");
            let blocks = len.div_ceil(STORED_BLOCK).max(1);
            assert_eq!(stream.len(), 2 + 5 * blocks + len + 4, "{len} bytes");
        }
    }

    #[test]
    fn adler32_is_zlibs() {
        // RFC 1950's example value for "Wikipedia", and the checksum of nothing.
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
        // Past NMAX bytes of 0xff, where an unreduced sum would overflow.
        let ff = vec![0xffu8; 100_000];
        let mut z = flate2::Compress::new(flate2::Compression::fast(), true);
        let mut out = Vec::with_capacity(200_000);
        z.compress_vec(&ff, &mut out, flate2::FlushCompress::Finish)
            .unwrap();
        let tail: [u8; 4] = out[out.len() - 4..].try_into().unwrap();
        assert_eq!(adler32(&ff), u32::from_be_bytes(tail));
    }
}
