//! The objects of a received pack, read back for the checkout through a [`ReleasingMap`] whose
//! pages are handed back as they are used; objects over the big-object threshold only ever
//! streamed.

use std::io::{self, BufRead, Read, Write};
use std::path::Path;
use std::sync::Arc;

use gix::odb::pack as gix_pack;

use super::limits::PackLimits;
use super::map::{ReleasingMap, SharedMap};

/// The objects of one received pack, read through a [`ReleasingMap`]: the object source of the
/// checkout. Cloning shares the mapping.
#[derive(Clone)]
pub struct PackObjects {
    pack: Arc<gix_pack::data::File<SharedMap>>,
    index: Arc<gix_pack::index::File>,
    map: Arc<ReleasingMap>,
    limits: PackLimits,
    /// The objects [`receive`] found over the big-object threshold: known without reading the
    /// pack (a look at every entry's header would make the whole mapping resident).
    big: Arc<std::collections::HashSet<gix::ObjectId>>,
    /// Recently decoded delta bases, so that objects deltified against each other (a server's
    /// pack of related blobs) do not each decode the whole chain again.
    cache: DeltaCache,
}

/// The most a [`DeltaCache`] holds.
const DELTA_CACHE_BYTES: usize = 16 << 20;

/// A bounded cache of delta bases; each clone of a [`PackObjects`] (one per thread) has its own.
struct DeltaCache(std::sync::Mutex<gix_pack::cache::lru::StaticLinkedList<64>>);

impl Default for DeltaCache {
    fn default() -> Self {
        DeltaCache(std::sync::Mutex::new(
            gix_pack::cache::lru::StaticLinkedList::new(DELTA_CACHE_BYTES),
        ))
    }
}

impl Clone for DeltaCache {
    fn clone(&self) -> Self {
        DeltaCache::default()
    }
}

/// A stored (not deltified) object over the big-object threshold: read by streaming only.
#[derive(Debug, Clone, Copy)]
pub struct BigBlob {
    data_offset: u64,
    size: u64,
}

impl BigBlob {
    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// How a file on disk compares with an object's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    /// The same bytes.
    Same,
    /// A strict prefix of the content (a write cut short).
    Prefix,
    /// Anything else.
    Other,
}

impl PackObjects {
    /// Open `pack-<hash>.pack` at `data_path` and its `.idx` beside it; `big` names the objects
    /// over the big-object threshold ([`Received::big`](super::Received::big)), which are only ever streamed.
    ///
    /// # Errors
    /// A message when either file cannot be opened or read.
    pub fn open(
        data_path: &Path,
        limits: PackLimits,
        big: &[gix::ObjectId],
        format: gix::hash::Kind,
    ) -> Result<Self, String> {
        let file = crate::fs::open_regular(data_path, true)
            .map_err(|e| format!("opening {}: {e}", data_path.display()))?;
        let map = Arc::new(
            ReleasingMap::new(&file)
                .map_err(|e| format!("mapping {}: {e}", data_path.display()))?,
        );
        let pack =
            gix_pack::data::File::from_data(SharedMap(map.clone()), data_path.to_owned(), format)
                .map_err(|e| crate::error::chain(&e))?
                .with_alloc_limit_bytes(limits.alloc_limit());
        let index = gix_pack::index::File::at(data_path.with_extension("idx"), format)
            .map_err(|e| crate::error::chain(&e))?;
        Ok(PackObjects {
            pack: Arc::new(pack),
            index: Arc::new(index),
            map,
            limits,
            big: Arc::new(big.iter().copied().collect()),
            cache: DeltaCache::default(),
        })
    }
}

impl PackObjects {
    /// Whether the pack holds the object `id`.
    pub fn contains(&self, id: &gix::oid) -> bool {
        self.index.lookup(id).is_some()
    }

    /// The blob `id` when it holds at most `max` bytes (a Git LFS pointer's bound); `None` for a
    /// bigger one, another kind, or one the pack lacks.
    pub fn small_blob(&self, id: &gix::oid, max: u64) -> Option<Vec<u8>> {
        if self.big.contains(id) {
            return None;
        }
        let mut buf = Vec::new();
        let data = gix::objs::Find::try_find(self, id, &mut buf).ok()??;
        (data.kind == gix::objs::Kind::Blob && data.data.len() as u64 <= max)
            .then(|| data.data.to_vec())
    }

    /// The object `id` when it is over the big-object threshold (and so never decoded whole).
    pub fn big(&self, id: &gix::oid) -> Option<BigBlob> {
        if !self.big.contains(id) {
            return None;
        }
        let i = self.index.lookup(id)?;
        let entry = self.pack.entry(self.index.pack_offset_at_index(i)).ok()?;
        (entry.header.as_kind().is_some() && entry.decompressed_size > self.limits.big_object_bytes)
            .then_some(BigBlob {
                data_offset: entry.data_offset,
                size: entry.decompressed_size,
            })
    }

    /// The content of `big`, inflated a chunk at a time from the pack.
    fn big_reader(&self, big: BigBlob) -> impl Read + '_ {
        let start = usize::try_from(big.data_offset).unwrap_or(usize::MAX);
        let data = self.map.map.get(start..).unwrap_or_default();
        let noted = Noted {
            data,
            map: &self.map,
        };
        flate2::bufread::ZlibDecoder::new(noted).take(big.size())
    }

    /// Write the content of `big` to `out` without holding it whole; returns the bytes written.
    ///
    /// # Errors
    /// The I/O error of `out`, or a corrupt stream (fewer bytes than the object's size).
    pub fn stream_big(&self, big: BigBlob, out: &mut dyn Write) -> io::Result<u64> {
        let n = io::copy(&mut self.big_reader(big), out)?;
        if n != big.size() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the object inflates to {n} bytes, not {}", big.size()),
            ));
        }
        Ok(n)
    }

    /// Compare the file at `path` with the content of `big`, a chunk at a time.
    ///
    /// # Errors
    /// The I/O error reading the file or the pack.
    pub fn compare_big(&self, big: BigBlob, path: &Path) -> io::Result<Compared> {
        let mut file = crate::fs::open_regular(path, false)?;
        let mut content = self.big_reader(big);
        let (mut a, mut b) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
        loop {
            let n = read_full(&mut file, &mut a)?;
            if n == 0 {
                let more = read_full(&mut content, &mut b[..1])?;
                return Ok(if more == 0 {
                    Compared::Same
                } else {
                    Compared::Prefix
                });
            }
            let m = read_full(&mut content, &mut b[..n])?;
            if m != n || a[..n] != b[..n] {
                return Ok(Compared::Other);
            }
        }
    }
}

/// Read until `buf` is full or the end.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The mapped pack from some offset on, counting what is read so the pages are released.
struct Noted<'a> {
    data: &'a [u8],
    map: &'a ReleasingMap,
}

impl Read for Noted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.data.len().min(buf.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Noted<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        Ok(&self.data[..self.data.len().min(64 << 10)])
    }

    fn consume(&mut self, n: usize) {
        self.data = &self.data[n..];
        self.map.note(n);
    }
}

impl gix::objs::Find for PackObjects {
    fn try_find<'a>(
        &self,
        id: &gix::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        let Some(i) = self.index.lookup(id) else {
            return Ok(None);
        };
        let entry = self.pack.entry(self.index.pack_offset_at_index(i))?;
        if entry.header.as_kind().is_some()
            && entry.decompressed_size > self.limits.big_object_bytes
        {
            use gix::error::ErrorExt as _;
            return Err(io::Error::other(format!(
                "object {id} is {} bytes, over the {} that are ever held in memory whole",
                entry.decompressed_size, self.limits.big_object_bytes
            ))
            .raise());
        }
        let mut inflate = gix::zlib::Inflate::default();
        let mut cache = self
            .cache
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A `REF_DELTA`'s base is found through the index, wherever it lies in the pack: Dulwich
        // sends such deltas, some with their base after them.
        let in_pack = |base: &gix::oid, _: &mut Vec<u8>| {
            let Some(i) = self.index.lookup(base) else {
                return Ok(None);
            };
            let base = self.pack.entry(self.index.pack_offset_at_index(i))?;
            Ok(Some(gix_pack::data::decode::entry::ResolvedBase::InPack(
                base,
            )))
        };
        let outcome = self
            .pack
            .decode_entry(entry, buffer, &mut inflate, &in_pack, &mut *cache)?;
        // Decoding an object reads its whole delta chain, scattered over the pack: count each
        // lookup as at least 64 KiB, so the pages are released at least every 64 objects.
        self.map.note(buffer.len().max(64 << 10));
        Ok(Some(gix::objs::Data::new(
            buffer,
            outcome.kind,
            self.pack.object_hash(),
        )))
    }
}
