//! The entries of a pack as it streams in (`gitformat-pack`: the 12-byte header, entries of a
//! type-and-size header and zlib data, the 20-byte SHA-1 trailer), for gix-pack's index writer —
//! in bounded memory, whatever the pack holds.
//!
//! gix-pack's own `BytesToEntriesIter` keeps each entry's compressed bytes in a buffer (an
//! incompressible 1 GiB blob holds 1 GiB), and its index writer inflates every base object whole
//! to hash it. Here nothing is buffered: compressed bytes go through the CRC-32, the pack's
//! SHA-1 and zlib as they pass, 64 KiB at a time. An object bigger than the big-object threshold
//! (512 MiB by default, git's `core.bigFileThreshold`) is hashed here as it streams and held back
//! from gix-pack (see [`BigObject`]): it is never in memory whole, here or at the checkout. A
//! delta whose result would be that big, or whose base is such an object, is refused (exit 6):
//! git's `pack-objects` never makes one (objects over `core.bigFileThreshold` are not deltified).

use std::cell::RefCell;
use std::io::{self, BufRead, Read};
use std::rc::Rc;

use gix::odb::pack as gix_pack;
use gix_pack::data::entry::Header;
use gix_pack::data::input::Entry;

use super::delta::Walk;
use super::limits::{PackLimits, ReceiveError};

/// The most entries [`EntryStream`]'s size hint promises, whatever the pack's header claims: an
/// ordinary pack has its delta tree reserved whole (no regrowth), a claim of billions reserves
/// what 65,536 would (about 4 MiB, untouched until entries arrive).
pub const HINTED_ENTRIES: usize = 1 << 16;

/// An object held back from gix-pack's index writer: hashed as it streamed in, written into the
/// index by [`super::receive()`], checked out by streaming it from the pack.
#[derive(Debug, Clone)]
pub struct BigObject {
    /// Its id.
    pub id: gix::ObjectId,
    /// Where its entry starts in the pack.
    pub pack_offset: u64,
    /// The CRC-32 of its whole entry (header and compressed data), for the index.
    pub crc32: u32,
}

/// Sees the inflated data of entries as the pack streams in (the early checkout of `restore`),
/// and may name the object of every entry, so that [`super::receive()`] writes the pack's index
/// from those ids instead of resolving the deltas again with gix-pack. Called on the thread
/// reading the stream: an observer may hold it back only as long as it takes to queue the data.
pub trait EntryObserver: std::fmt::Debug {
    /// A pack begins (a retried fetch starts over): offsets seen before mean nothing now.
    fn begin(&self);
    /// Right after [`EntryObserver::begin`], where the entries that passed can be read again
    /// (a delta whose base the observer no longer holds).
    fn pack_so_far(&self, _pack: super::so_far::PackSoFar) {}
    /// Whether it wants the inflated data of an entry of `size` bytes (an object's content, or a
    /// delta's instructions): only such entries are collected, so this bounds the memory.
    fn wants(&self, size: u64) -> bool;
    /// The entry at `pack_offset` (`gitformat-pack`): its header (an object kind, or a delta and
    /// its base) and its inflated data, verified against the header's size. Not yet against the
    /// pack's checksum: an observer must hash what it uses.
    fn entry(&self, pack_offset: u64, header: Header, data: Vec<u8>);
    /// A whole object at `pack_offset` it did not want, hashed by the stream: `id`.
    fn hashed(&self, pack_offset: u64, id: gix::ObjectId);
    /// After the last entry: the object id of every entry it saw or was told of, by offset, once
    /// it knows them all (`None`: some were not resolved, gix-pack indexes the pack).
    fn ids(&self) -> Option<Vec<(u64, gix::ObjectId)>>;
}

/// What the stream learned besides the entries it yields.
#[derive(Debug, Default)]
pub struct Learned {
    /// The objects held back.
    pub big: Vec<BigObject>,
    /// Where the last entry ends: the 20-byte checksum follows, and nothing else may.
    pub entries_end: u64,
    /// The pack's checksum, verified against the bytes.
    pub trailer: Option<gix::ObjectId>,
    /// Why the stream stopped early, when it did (gix-pack sees only a generic error).
    pub failure: Option<ReceiveError>,
}

/// The consumed bytes of a [`BufRead`], fed to the pack's SHA-1 and the current entry's CRC-32.
struct Tap<R> {
    inner: R,
    offset: u64,
    sha1: Option<Checksum>,
    crc: crc32fast::Hasher,
}

/// The pack's checksum as it streams (its trailer: `gitformat-pack`). For SHA-1 through the `sha1`
/// crate (SHA-NI where the CPU has it), without git's collision detection: the trailer guards
/// against a damaged transfer, not against a forged object (every object id is still hashed with
/// detection), as `restore::verify` checks trailers too. With detection, the 13.6 MB of git/git's
/// pack took about 2.5 % of a restore's CPU.
enum Checksum {
    Sha1(sha1::Sha1),
    Other(gix::hash::Hasher),
}

impl Checksum {
    fn new(format: gix::hash::Kind) -> Self {
        match format {
            gix::hash::Kind::Sha1 => Checksum::Sha1(sha1::Digest::new()),
            other => Checksum::Other(gix::hash::hasher(other)),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Checksum::Sha1(h) => sha1::Digest::update(h, bytes),
            Checksum::Other(h) => h.update(bytes),
        }
    }

    fn finish(self) -> Result<gix::ObjectId, String> {
        match self {
            Checksum::Sha1(h) => Ok(gix::ObjectId::from_bytes_or_panic(
                sha1::Digest::finalize(h).as_slice(),
            )),
            Checksum::Other(h) => h.try_finalize().map_err(|e| e.to_string()),
        }
    }
}

impl<R: BufRead> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Tap<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let used = &buf[..n.min(buf.len())];
            if let Some(h) = self.sha1.as_mut() {
                h.update(used);
            }
            self.crc.update(used);
        }
        self.offset += n as u64;
        self.inner.consume(n);
    }
}

/// The pack's entries for `gix_pack::index::write_data_iter_to_stream` (with `crc32` set), the
/// big objects left out.
pub struct EntryStream<'o, R> {
    tap: Tap<R>,
    observer: Option<&'o dyn EntryObserver>,
    objects_left: u32,
    num_objects: u32,
    version: gix_pack::data::Version,
    limits: PackLimits,
    big_offsets: std::collections::HashSet<u64>,
    /// One entry held back, so the last one yielded can carry the trailer even when the pack's
    /// last entry is a big one.
    held: Option<Entry>,
    learned: Rc<RefCell<Learned>>,
    done: bool,
    scratch: Vec<u8>,
    /// Where the tee writes the pack, for messages about a refusing disk.
    pack_dir: std::path::PathBuf,
    /// The repository's object format: the length of ids, of `REF_DELTA` bases and of the trailer.
    format: gix::hash::Kind,
}

impl<'o, R: BufRead> EntryStream<'o, R> {
    /// Read the pack's header from `input`.
    ///
    /// # Errors
    /// [`ReceiveError::Corrupt`] for a stream that does not start with a version 2 or 3 pack header.
    pub fn new(
        input: R,
        limits: PackLimits,
        pack_dir: &std::path::Path,
        format: gix::hash::Kind,
    ) -> Result<(Self, Rc<RefCell<Learned>>), ReceiveError> {
        let mut tap = Tap {
            inner: input,
            offset: 0,
            sha1: Some(Checksum::new(format)),
            crc: crc32fast::Hasher::new(),
        };
        let mut header = [0u8; gix_pack::data::header::SIZE];
        tap.read_exact(&mut header)
            .map_err(|e| stream_error("reading the pack header", e, pack_dir))?;
        let (version, num_objects) = gix_pack::data::header::decode(&header)
            .map_err(|e| ReceiveError::Corrupt(crate::error::chain(&e)))?;
        let learned = Rc::new(RefCell::new(Learned::default()));
        Ok((
            EntryStream {
                tap,
                observer: None,
                objects_left: num_objects,
                num_objects,
                version,
                limits,
                big_offsets: Default::default(),
                held: None,
                learned: learned.clone(),
                done: false,
                scratch: vec![0; 64 * 1024],
                pack_dir: pack_dir.to_owned(),
                format,
            },
            learned,
        ))
    }

    /// Show every entry's inflated data to `observer` as it passes (see [`EntryObserver`]).
    pub fn observed(mut self, observer: Option<&'o dyn EntryObserver>) -> Self {
        if let Some(o) = observer {
            o.begin();
        }
        self.observer = observer;
        self
    }

    /// The pack's version.
    pub fn version(&self) -> gix_pack::data::Version {
        self.version
    }

    /// The number of objects the pack's header claims.
    pub fn num_objects(&self) -> u32 {
        self.num_objects
    }

    /// Read the next entry; `Ok(None)` for one held back (big).
    fn next_entry(&mut self) -> Result<Option<Entry>, ReceiveError> {
        self.objects_left -= 1;
        let pack_offset = self.tap.offset;
        self.tap.crc = crc32fast::Hasher::new();
        let header = gix_pack::data::Entry::from_read(
            &mut self.tap,
            pack_offset,
            self.format.len_in_bytes(),
        )
        .map_err(|e| stream_error("reading an entry header", e, &self.pack_dir))?;
        let header_size = self.tap.offset - pack_offset;
        let size = header.decompressed_size;
        self.check_claims(pack_offset, &header)?;
        let big = size > self.limits.big_object_bytes;
        let kind = header.header.as_kind();
        let observed = self
            .observer
            .filter(|o| !big && o.wants(size))
            .map(|o| (o, header.header, Vec::with_capacity(size as usize)));
        // A whole object the observer does not take is hashed here, so it still learns its id.
        let hash = big || (self.observer.is_some() && observed.is_none());
        let hasher = match (hash, kind) {
            (true, Some(kind)) => {
                let mut h = gix::hash::hasher(self.format);
                h.update(&gix::objs::encode::loose_header(kind, size));
                Some(h)
            }
            _ => None,
        };
        let data_start = self.tap.offset;
        let hasher = self.inflate(pack_offset, size, kind.is_none(), hasher, observed)?;
        let compressed_size = self.tap.offset - data_start;
        let crc32 = self.tap.crc.clone().finalize();
        self.learned.borrow_mut().entries_end = self.tap.offset;
        if let Some(h) = hasher {
            let id = h
                .try_finalize()
                .map_err(|e| ReceiveError::Corrupt(format!("hashing an object: {e}")))?;
            if !big {
                if let Some(o) = self.observer {
                    o.hashed(pack_offset, id);
                }
            } else {
                self.big_offsets.insert(pack_offset);
                self.learned.borrow_mut().big.push(BigObject {
                    id,
                    pack_offset,
                    crc32,
                });
                return Ok(None);
            }
        }
        if big {
            return Err(ReceiveError::TooLarge(format!(
                "the pack holds a delta (at offset {pack_offset}) of {size} bytes of \
                 instructions, over {}: it would have to be held in memory whole",
                self.limits.big_object_bytes
            )));
        }
        Ok(Some(Entry {
            header: header.header,
            header_size: header_size as u16,
            pack_offset,
            compressed: None,
            compressed_size,
            crc32: Some(crc32),
            decompressed_size: size,
            trailer: None,
        }))
    }

    /// Refuse what an entry's header claims before anything that size exists: an object over
    /// the object limit, a delta against a big object.
    fn check_claims(
        &self,
        pack_offset: u64,
        header: &gix_pack::data::Entry,
    ) -> Result<(), ReceiveError> {
        let size = header.decompressed_size;
        if size > self.limits.max_object_bytes {
            return Err(ReceiveError::TooLarge(format!(
                "an entry at offset {pack_offset} of the pack claims {size} bytes, over the \
                 limit of {} (--max-object-bytes raises it)",
                self.limits.max_object_bytes
            )));
        }
        if let Header::OfsDelta { base_distance } = header.header
            && pack_offset
                .checked_sub(base_distance)
                .is_some_and(|b| self.big_offsets.contains(&b))
        {
            return Err(ReceiveError::TooLarge(format!(
                "the pack holds a delta (at offset {pack_offset}) against an object over {} \
                 bytes: git never makes one (core.bigFileThreshold), and it would have to be held \
                 in memory whole",
                self.limits.big_object_bytes
            )));
        }
        Ok(())
    }

    /// Inflate the entry's data as it passes, 64 KiB at a time, into `hasher` when it is a big
    /// object's; a delta's result size is checked as soon as its header is read. Returns the
    /// hasher.
    fn inflate(
        &mut self,
        pack_offset: u64,
        size: u64,
        is_delta: bool,
        mut hasher: Option<gix::hash::Hasher>,
        mut observed: Option<(&dyn EntryObserver, Header, Vec<u8>)>,
    ) -> Result<Option<gix::hash::Hasher>, ReceiveError> {
        // Handed over as soon as the last byte is inflated: the read that finds the zlib stream's
        // end waits for more input, which for the pack's last entry is the checksum.
        let hand_over = |observed: &mut Option<(&dyn EntryObserver, Header, Vec<u8>)>| {
            if let Some((o, header, data)) = observed.take() {
                o.entry(pack_offset, header, data);
            }
        };
        // A delta's instructions, followed as they inflate: what they make must be what it claims.
        let mut walk = is_delta.then(Walk::default);
        if size == 0 {
            if let Some(w) = walk.as_ref() {
                w.finish().map_err(|e| delta_error(pack_offset, e))?;
            }
            hand_over(&mut observed);
        }
        let mut inflated = 0u64;
        let mut z = flate2::bufread::ZlibDecoder::new(&mut self.tap);
        loop {
            let n = match z.read(&mut self.scratch) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return Err(stream_error("inflating an entry", e, &self.pack_dir)),
            };
            if let Some(w) = walk.as_mut() {
                let known = w.result();
                w.feed(&self.scratch[..n.min((size - inflated.min(size)) as usize)])
                    .map_err(|e| delta_error(pack_offset, e))?;
                if let (None, Some(result)) = (known, w.result()) {
                    self.limits.check_delta_result(pack_offset, result)?;
                }
            }
            if let Some(h) = hasher.as_mut() {
                h.update(&self.scratch[..n]);
            }
            if let Some((_, _, data)) = observed.as_mut()
                && inflated + n as u64 <= size
            {
                data.extend_from_slice(&self.scratch[..n]);
            }
            inflated += n as u64;
            if inflated == size {
                if let Some(w) = walk.as_ref() {
                    w.finish().map_err(|e| delta_error(pack_offset, e))?;
                }
                hand_over(&mut observed);
            }
            if inflated > size {
                break;
            }
        }
        if inflated != size {
            return Err(ReceiveError::Corrupt(format!(
                "pack entry at offset {pack_offset} inflates to {inflated} bytes, but its header \
                 says {size}"
            )));
        }
        Ok(hasher)
    }

    /// After the last entry: the trailer, checked against the SHA-1 of everything before it.
    fn read_trailer(&mut self) -> Result<gix::ObjectId, ReceiveError> {
        let sha1 = self.tap.sha1.take().expect("hashing until the trailer");
        let mut trailer = [0u8; 32];
        let trailer = &mut trailer[..self.format.len_in_bytes()];
        let what = format!(
            "reading the pack's checksum ({} bytes: {})",
            self.format.len_in_bytes(),
            crate::types::format_title(self.format)
        );
        self.tap
            .read_exact(trailer)
            .map_err(|e| stream_error(&what, e, &self.pack_dir))?;
        let expected = gix::ObjectId::from_bytes_or_panic(trailer);
        let actual = sha1
            .finish()
            .map_err(|e| ReceiveError::Corrupt(format!("hashing the pack: {e}")))?;
        if actual != expected {
            return Err(ReceiveError::Corrupt(format!(
                "the pack's checksum is {expected}, but its bytes hash to {actual}"
            )));
        }
        Ok(expected)
    }

    fn step(&mut self) -> Result<Option<Entry>, ReceiveError> {
        while self.objects_left > 0 {
            let index = self.num_objects - self.objects_left + 1;
            let entry = self.next_entry().map_err(|e| match e {
                // The count is the header's claim: name it, the entries may have run out.
                ReceiveError::Corrupt(msg) => ReceiveError::Corrupt(format!(
                    "{msg} (entry {index} of the {} the pack's header claims)",
                    self.num_objects
                )),
                other => other,
            })?;
            let Some(entry) = entry else {
                continue;
            };
            if let Some(prev) = self.held.replace(entry) {
                return Ok(Some(prev));
            }
        }
        if self.done {
            return Ok(None);
        }
        self.done = true;
        let trailer = self.read_trailer()?;
        self.learned.borrow_mut().trailer = Some(trailer);
        Ok(self.held.take().map(|mut last| {
            last.trailer = Some(trailer);
            last
        }))
    }
}

impl<R: BufRead> Iterator for EntryStream<'_, R> {
    type Item = gix::Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.learned.borrow().failure.is_some() {
            return None;
        }
        match self.step() {
            Ok(entry) => entry.map(Ok),
            Err(e) => {
                self.learned.borrow_mut().failure = Some(e);
                // gix-pack needs an error of its own kind; the real one is in `Learned`.
                use gix::error::ErrorExt as _;
                Some(Err(io::Error::other("the pack stream failed").raise()))
            }
        }
    }

    /// No more than [`HINTED_ENTRIES`]: the count is the pack header's claim, and gix-pack
    /// reserves its delta tree by this hint (2^32 - 1 claimed objects reserved 64 GiB). Past it
    /// the true count is known only as entries arrive, and what holds them grows as they do.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.objects_left as usize + usize::from(self.held.is_some());
        (left.min(HINTED_ENTRIES), None)
    }
}

impl PackLimits {
    /// Refuse a delta whose header claims a result over the big-object threshold (gitformat-pack
    /// "Deltified representation": the base's size, then the result's), before gix-pack allocates
    /// it.
    fn check_delta_result(&self, pack_offset: u64, result: u64) -> Result<(), ReceiveError> {
        if result <= self.big_object_bytes {
            return Ok(());
        }
        let (limit, why) = if result > self.max_object_bytes {
            (
                self.max_object_bytes,
                "over the object limit (--max-object-bytes raises it)",
            )
        } else {
            (
                self.big_object_bytes,
                "git never deltifies objects that big (core.bigFileThreshold), and the result \
                 would have to be held in memory whole",
            )
        };
        Err(ReceiveError::TooLarge(format!(
            "the pack holds a delta (at offset {pack_offset}) whose result claims {result} bytes, \
             over {limit}: {why}"
        )))
    }
}

/// A delta whose instructions do not make what it claims.
fn delta_error(pack_offset: u64, why: String) -> ReceiveError {
    ReceiveError::Corrupt(format!(
        "the delta at offset {pack_offset} of the pack is invalid: {why}"
    ))
}

/// A failure reading the stream: local (the tee into the pack file refused: the disk is full) or
/// a broken or corrupt stream, named with its causes ("unexpected EOF during chunk size line").
fn stream_error(what: &str, e: io::Error, pack_dir: &std::path::Path) -> ReceiveError {
    if crate::error::local_io_hint(e.kind()).is_some() {
        ReceiveError::Local(crate::Error::io(
            format!(
                "writing the received pack into {} ({what})",
                pack_dir.display()
            ),
            e,
        ))
    } else {
        ReceiveError::Corrupt(format!("{what}: {}", crate::error::chain(&e)))
    }
}

/// Write a version 2 pack index (`gitformat-pack` "Version 2 pack-*.idx files") of `entries`
/// (id, offset, CRC-32) for the pack whose checksum is `pack_hash`; returns the index's checksum.
///
/// # Errors
/// The I/O error of `out`; an error, with nothing written, for an id of another format than
/// `pack_hash`'s (an index git could not read).
pub fn write_index(
    mut entries: Vec<(gix::ObjectId, u64, u32)>,
    pack_hash: &gix::oid,
    out: &mut dyn io::Write,
) -> io::Result<gix::ObjectId> {
    if entries.iter().any(|e| e.0.kind() != pack_hash.kind()) {
        return Err(io::Error::other(
            "an object id of another format than the pack's: no index written",
        ));
    }
    entries.sort_by_key(|e| e.0);
    let mut bytes = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    bytes.extend_from_slice(b"\xfftOc");
    bytes.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for (id, _, _) in &entries {
        fanout[id.as_slice()[0] as usize] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        bytes.extend_from_slice(&total.to_be_bytes());
    }
    for (id, _, _) in &entries {
        bytes.extend_from_slice(id.as_slice());
    }
    for (_, _, crc) in &entries {
        bytes.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for (_, offset, _) in &entries {
        if *offset < 0x8000_0000 {
            bytes.extend_from_slice(&(*offset as u32).to_be_bytes());
        } else {
            bytes.extend_from_slice(&(0x8000_0000u32 | large.len() as u32).to_be_bytes());
            large.push(*offset);
        }
    }
    for offset in large {
        bytes.extend_from_slice(&offset.to_be_bytes());
    }
    bytes.extend_from_slice(pack_hash.as_bytes());
    let mut h = gix::hash::hasher(pack_hash.kind());
    h.update(&bytes);
    let id = h
        .try_finalize()
        .map_err(|e| io::Error::other(format!("hashing the index: {e}")))?;
    bytes.extend_from_slice(id.as_slice());
    out.write_all(&bytes)?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    /// The fuzz seed of a SHA-256 pack made the early checkout's observer, hashing with SHA-1,
    /// hand 20-byte ids to an index of a 32-byte pack hash: "Pack index references large offset
    /// 1955641963" when read. Ids of another format are refused, nothing written.
    #[test]
    fn an_index_of_ids_of_another_format_is_refused() {
        let sha1 = gix::ObjectId::empty_blob(gix::hash::Kind::Sha1);
        let sha256 = gix::ObjectId::empty_blob(gix::hash::Kind::Sha256);
        let mut out = Vec::new();
        assert!(crate::pack::entries::write_index(vec![(sha1, 12, 0)], &sha256, &mut out).is_err());
        assert!(out.is_empty());
        crate::pack::entries::write_index(vec![(sha256, 12, 0)], &sha256, &mut out).unwrap();
        assert_eq!(out.len(), 8 + 1024 + 32 + 4 + 4 + 32 + 32);
    }

    /// A one-blob SHA-1 pack, its trailer made with `trailer`.
    fn one_blob_pack(trailer: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
        use std::io::Write as _;
        let mut pack = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
        pack.push(0x32); // a blob of 2 bytes
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"hi").unwrap();
        pack.extend(z.finish().unwrap());
        let t = trailer(&pack);
        pack.extend(t);
        pack
    }

    /// The pack's checksum (now hashed by the `sha1` crate, without collision detection) is still
    /// checked: the right one passes, one flipped bit is refused naming both.
    #[test]
    fn the_pack_checksum_is_checked() {
        use sha1::Digest as _;
        let dir = tempfile::tempdir().unwrap();
        let entries = |pack: &[u8]| {
            let (stream, learned) = crate::pack::entries::EntryStream::new(
                pack,
                crate::pack::limits::PackLimits::default(),
                dir.path(),
                gix::hash::Kind::Sha1,
            )
            .map_err(|e| format!("{e:?}"))?;
            let n = stream.count();
            let failure = learned.borrow_mut().failure.take();
            match failure {
                Some(e) => Err(format!("{e:?}")),
                None => Ok((n, learned.borrow().trailer)),
            }
        };
        let good = one_blob_pack(|b| sha1::Sha1::digest(b).to_vec());
        let (n, trailer) = entries(&good).unwrap();
        assert_eq!(n, 1);
        assert_eq!(trailer.unwrap().as_slice(), &good[good.len() - 20..]);
        let bad = one_blob_pack(|b| {
            let mut t = sha1::Sha1::digest(b).to_vec();
            t[0] ^= 1;
            t
        });
        let e = entries(&bad).unwrap_err();
        assert!(e.contains("bytes hash to"), "{e}");
    }
}
