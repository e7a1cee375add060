//! The pack as far as it has streamed in: the objects of entries already written to the
//! temporary pack file, for an [`EntryObserver`](super::EntryObserver) whose cache no longer
//! holds a delta's base. Decoding such a delta while the rest of the pack is on the wire keeps it
//! out of the time after the last byte (a far delta used to be decoded twice there: to name it
//! for the index, then to check its file out).

use std::io::Write as _;
use std::path::PathBuf;

use gix::odb::pack as gix_pack;

/// The temporary pack file as [`receive`](super::receive()) writes it, shared with the stream's
/// reader (`receive::Tee`).
pub(super) type PackWriter = std::sync::Arc<std::sync::Mutex<std::io::BufWriter<std::fs::File>>>;

/// The longest chain of offset deltas [`PackSoFar::object_at`] follows, and how many objects one
/// pack may have decoded through it: past either, the observer leaves the entry unnamed as before
/// (a hostile pack of far deltas costs bounded work during the transfer).
const MAX_CHAIN: usize = 64;
const MAX_DECODES: usize = 256;

/// The temporary pack file of one [`receive`](super::receive()), readable while it is written.
pub struct PackSoFar {
    writer: PackWriter,
    /// Only a name for gix-pack's messages: the file is read through `writer`'s handle.
    path: PathBuf,
    format: gix::hash::Kind,
    decodes: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for PackSoFar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackSoFar")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl PackSoFar {
    pub(super) fn new(writer: PackWriter, path: PathBuf, format: gix::hash::Kind) -> Self {
        PackSoFar {
            writer,
            path,
            format,
            decodes: Default::default(),
        }
    }

    /// The kind and data of the object of the entry at `offset`, which the stream has passed,
    /// when every link of its chain of offset deltas is at most `max_bytes` (inflated, and what
    /// each delta makes) and the chain at most [`MAX_CHAIN`] long. `None` otherwise, for a
    /// reference delta (a thin pack's base is not in it), or for bytes that do not decode. Not
    /// verified: the caller hashes what it uses.
    pub fn object_at(&self, offset: u64, max_bytes: u64) -> Option<(gix::objs::Kind, Vec<u8>)> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.decodes.fetch_add(1, Relaxed) >= MAX_DECODES {
            return None;
        }
        let map = {
            // What the stream passed may still sit in the writer's buffer.
            let mut writer = self.writer.lock().ok()?;
            writer.flush().ok()?;
            // The file this process writes, through its own handle (never its path, which the
            // work folder's owner could swap).
            // SAFETY: the file is only appended to: the bytes mapped here never change, and those
            // written later lie past the mapping's end.
            #[allow(unsafe_code)]
            let map = unsafe { memmap2::Mmap::map(writer.get_ref()) };
            map.ok()?
        };
        let limit = usize::try_from(max_bytes.saturating_mul(4)).unwrap_or(usize::MAX);
        let pack = gix_pack::data::File::from_data(map, self.path.clone(), self.format)
            .ok()?
            .with_alloc_limit_bytes(Some(limit));
        let entry = pack.entry(offset).ok()?;
        let mut link = entry.clone();
        for depth in 0..=MAX_CHAIN {
            if link.decompressed_size > max_bytes {
                return None;
            }
            match link.header {
                gix_pack::data::entry::Header::OfsDelta { base_distance } if depth < MAX_CHAIN => {
                    // A distance past the pack's start is the server's lie, not a bug here.
                    link = pack
                        .entry(link.checked_base_pack_offset(base_distance)?)
                        .ok()?;
                }
                gix_pack::data::entry::Header::OfsDelta { .. }
                | gix_pack::data::entry::Header::RefDelta { .. } => return None,
                _ => break,
            }
        }
        let mut out = Vec::new();
        let decoded = pack
            .decode_entry(
                entry,
                &mut out,
                &mut gix::zlib::Inflate::default(),
                &|_, _| Ok(None),
                &mut gix_pack::cache::Never,
            )
            .ok()?;
        (out.len() as u64 <= max_bytes).then_some((decoded.kind, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufWriter;
    use std::sync::{Arc, Mutex};

    fn varint(mut n: usize, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push(0x80 | (n & 0x7f) as u8);
            n >>= 7;
        }
        out.push(n as u8);
    }

    fn deflated(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    /// An entry's header (`gitformat-pack`): its type and inflated size.
    fn header(kind: u8, size: usize, out: &mut Vec<u8>) {
        let mut byte = (kind << 4) | (size & 0x0f) as u8;
        let mut rest = size >> 4;
        while rest > 0 {
            out.push(byte | 0x80);
            byte = (rest & 0x7f) as u8;
            rest >>= 7;
        }
        out.push(byte);
    }

    /// A pack of one blob `text` and `links` offset deltas, each the one before it with a byte
    /// added (a chain `links` deep), then a reference delta; each entry's offset and object id.
    /// Its bytes are held by the returned writer, none flushed to the file yet.
    fn chain(
        dir: &std::path::Path,
        text: &[u8],
        links: usize,
    ) -> (PackSoFar, Vec<(u64, gix::ObjectId)>) {
        let mut pack = b"PACK\0\0\0\x02".to_vec();
        pack.extend(u32::try_from(links + 2).unwrap().to_be_bytes());
        let mut entries = Vec::new();
        let id = |data: &[u8]| {
            gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, data).unwrap()
        };
        let mut object = text.to_vec();
        entries.push((pack.len() as u64, id(&object)));
        header(3, object.len(), &mut pack);
        pack.extend(deflated(&object));
        for _ in 0..=links {
            let mut delta = Vec::new();
            varint(object.len(), &mut delta);
            varint(object.len() + 1, &mut delta);
            // Copy the whole base (offset 0, a 3-byte size), insert one byte.
            delta.push(0x80 | 0x10 | 0x20 | 0x40);
            delta.extend(&(object.len() as u32).to_le_bytes()[..3]);
            delta.extend([1, b'+']);
            object.push(b'+');
            let (offset, base) = (pack.len() as u64, entries.last().unwrap().0);
            if entries.len() == links + 1 {
                header(7, delta.len(), &mut pack);
                pack.extend(entries.last().unwrap().1.as_slice());
            } else {
                header(6, delta.len(), &mut pack);
                let mut distance = offset - base;
                let mut encoded = vec![(distance & 0x7f) as u8];
                while distance >> 7 > 0 {
                    distance = (distance >> 7) - 1;
                    encoded.insert(0, 0x80 | (distance & 0x7f) as u8);
                }
                pack.extend(encoded);
            }
            pack.extend(deflated(&delta));
            entries.push((offset, id(&object)));
        }
        let path = dir.join("tmp_pack");
        // Readable as well, as `receive`'s temporary file is.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        writer.write_all(&pack).unwrap();
        let writer = Arc::new(Mutex::new(writer));
        (PackSoFar::new(writer, path, gix::hash::Kind::Sha1), entries)
    }

    fn hashed((kind, data): (gix::objs::Kind, Vec<u8>)) -> gix::ObjectId {
        gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data).unwrap()
    }

    #[test]
    fn objects_are_read_back_through_the_unflushed_writer_within_the_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let (pack, entries) = chain(dir.path(), b"a blob's text", MAX_CHAIN + 3);
        let (ref_delta, offset_deltas) = entries.split_last().unwrap();
        for (depth, &(offset, id)) in offset_deltas.iter().enumerate() {
            let object = pack.object_at(offset, 1 << 20);
            match depth <= MAX_CHAIN {
                true => assert_eq!(object.map(hashed), Some(id), "at depth {depth}"),
                false => assert!(object.is_none(), "at depth {depth}: past the bound"),
            }
        }
        assert!(
            pack.object_at(ref_delta.0, 1 << 20).is_none(),
            "a reference delta"
        );
        // Every link counts against the size: the whole object at the chain's end too.
        let (pack, entries) = chain(dir.path(), &[b'x'; 5000], 2);
        assert!(pack.object_at(entries[1].0, 6000).is_some());
        assert!(pack.object_at(entries[1].0, 4999).is_none());
    }

    #[test]
    fn the_pack_is_read_through_its_handle_never_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let (pack, entries) = chain(dir.path(), b"a blob's text", 2);
        // Another file in its place (the work folder's owner can rename files in `.git`).
        let path = dir.path().join("tmp_pack");
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        std::fs::write(&path, b"PACK\0\0\0\x02\0\0\0\x03 other bytes entirely").unwrap();
        for &(offset, id) in &entries[..3] {
            assert_eq!(pack.object_at(offset, 1 << 20).map(hashed), Some(id));
        }
    }

    /// An offset delta whose base would lie before the pack's start is a lie of the server:
    /// read back as nothing (gix-pack's `base_pack_offset` panics on it), also as a chain's link.
    #[test]
    fn a_base_before_the_pack_s_start_is_nothing_to_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut pack = b"PACK\0\0\0\x02\0\0\0\x02".to_vec();
        let delta = [5, 6, 0x90, 5, 1, b'+'];
        let liar = pack.len() as u64;
        header(6, delta.len(), &mut pack);
        pack.push(0x7f); // 127 bytes back from offset 12
        pack.extend(deflated(&delta));
        let follower = pack.len() as u64;
        header(6, delta.len(), &mut pack);
        pack.push((follower - liar) as u8);
        pack.extend(deflated(&delta));
        let path = dir.path().join("tmp_pack");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        let mut writer = BufWriter::new(file);
        writer.write_all(&pack).unwrap();
        let pack = PackSoFar::new(Arc::new(Mutex::new(writer)), path, gix::hash::Kind::Sha1);
        assert!(pack.object_at(liar, 1 << 20).is_none());
        assert!(pack.object_at(follower, 1 << 20).is_none());
    }

    #[test]
    fn a_pack_reads_back_at_most_its_quota_of_objects() {
        let dir = tempfile::tempdir().unwrap();
        let (pack, entries) = chain(dir.path(), b"a blob's text", 2);
        for _ in 0..MAX_DECODES {
            assert!(pack.object_at(entries[2].0, 1 << 20).is_some());
        }
        assert!(pack.object_at(entries[2].0, 1 << 20).is_none());
    }
}
