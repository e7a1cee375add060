//! The received pack: written to `objects/pack` as it streams in, indexed, and read back for the
//! checkout, with its pages handed back to the kernel as they are used.
//!
//! This is gix-pack's `Bundle::write_to_directory` (stream → `BytesToEntriesIter` → temporary pack
//! file → `index::write_data_iter_to_stream` → `pack-<hash>.{pack,idx}`, as git's `index-pack`
//! leaves them), with one change: the pack is mapped through a [`ReleasingMap`], so the pages of a
//! large pack do not all stay in the resident set while its deltas are resolved and its blobs are
//! checked out. The file stays in the page cache; only this process's mapping of it is bounded.

use std::io::{self, BufRead, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gix::odb::pack as gix_pack;

/// How many bytes of the pack (compressed, while indexing) or of objects (decoded, while checking
/// out) may be served before the mapping's pages are released again.
const RELEASE_EVERY: usize = 4 << 20;

/// A read-only mapping of a pack file whose resident pages are dropped (`madvise(MADV_DONTNEED)`)
/// after every [`RELEASE_EVERY`] bytes served; later reads fault them back in from the page cache.
pub struct ReleasingMap {
    map: memmap2::Mmap,
    served: AtomicUsize,
}

impl ReleasingMap {
    /// Map `file` read-only.
    ///
    /// # Errors
    /// The `mmap` error.
    pub fn new(file: &std::fs::File) -> io::Result<Self> {
        // SAFETY: the pack file is written by this process only, and never after it is mapped.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(ReleasingMap {
            map,
            served: AtomicUsize::new(0),
        })
    }

    /// Count `bytes` as served, and release the resident pages once enough were.
    pub fn note(&self, bytes: usize) {
        if self.served.fetch_add(bytes, Ordering::Relaxed) + bytes >= RELEASE_EVERY {
            self.served.store(0, Ordering::Relaxed);
            // SAFETY: the mapping is alive (borrowed from `self`), read-only and backed by a file that
            // no longer changes: dropping its page-table entries loses nothing, and a later read of
            // any byte (including by another thread holding a slice) faults the same content back in.
            #[allow(unsafe_code)]
            let _ = unsafe {
                self.map
                    .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
            };
        }
    }
}

/// A shared [`ReleasingMap`] as the byte slice gix-pack reads its pack data from.
#[derive(Clone)]
pub struct SharedMap(Arc<ReleasingMap>);

impl std::ops::Deref for SharedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0.map
    }
}

/// The default of `--max-object-bytes`: 4 GiB.
pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 4 << 30;

/// Objects over this many bytes are never held in memory whole (git's `core.bigFileThreshold`):
/// 512 MiB.
pub const DEFAULT_BIG_OBJECT_BYTES: u64 = 512 << 20;

/// Bounds on what a received pack may make this process hold (SPEC rule 7: every size the
/// remote decides is bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackLimits {
    /// The largest object or delta result, in bytes: a larger one is refused (exit 6) before it
    /// is allocated.
    pub max_object_bytes: u64,
    /// Objects larger than this are hashed as they stream in and checked out by streaming from
    /// the pack, never held whole; a delta with a result this large is refused. Test knob:
    /// `GIT_SESSION_BIG_OBJECT_BYTES`.
    pub big_object_bytes: u64,
}

impl Default for PackLimits {
    fn default() -> Self {
        PackLimits {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            big_object_bytes: std::env::var("GIT_SESSION_BIG_OBJECT_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_BIG_OBJECT_BYTES),
        }
    }
}

impl PackLimits {
    fn alloc_limit(&self) -> Option<usize> {
        Some(usize::try_from(self.max_object_bytes).unwrap_or(usize::MAX))
    }
}

/// What [`receive`] wrote.
#[derive(Debug)]
pub struct Received {
    /// `objects/pack/pack-<hash>.pack`, or `None` for an empty pack (nothing is written then).
    pub data_path: Option<PathBuf>,
    /// The number of objects in the pack.
    pub num_objects: u32,
    /// The objects over the big-object threshold (see [`PackObjects::open`]).
    pub big: Vec<gix::ObjectId>,
}

/// Copies what the pack parser reads into the pack file.
struct Tee<R> {
    reader: R,
    file: Arc<Mutex<BufWriter<std::fs::File>>>,
    last_read: Arc<Mutex<std::time::Instant>>,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.reader.read(buf)?;
        self.file
            .lock()
            .map_err(|_| io::Error::other("pack writer poisoned"))?
            .write_all(&buf[..n])?;
        if let Ok(mut last) = self.last_read.lock() {
            *last = std::time::Instant::now();
        }
        Ok(n)
    }
}

/// Why [`receive`] failed.
#[derive(Debug)]
pub enum ReceiveError {
    /// The local file system refused to hold the pack or its index (no space, read-only,
    /// permission denied), or another local I/O failure: the stream may be fine.
    Local(crate::Error),
    /// The pack claims an object or delta result larger than the limit (exit 6, before it is
    /// allocated).
    TooLarge(String),
    /// The stream is not a valid pack (or was cut: the caller knows whether the connection was).
    Corrupt(String),
}

impl ReceiveError {
    /// A failure of gix-pack reading the stream or writing the files: local when a file-system
    /// refusal is among its causes (the tee into the pack file, the index writer), too large when
    /// gix-pack's allocation limit refused a size, else corrupt.
    fn from_gix(
        context: &str,
        err: &(dyn std::error::Error + 'static),
        limits: PackLimits,
    ) -> Self {
        if crate::error::local_io_kind(err)
            .and_then(crate::error::local_io_hint)
            .is_some()
        {
            return ReceiveError::Local(crate::Error::from_chain(context, err));
        }
        if gix::error::classify(err).is_resource_exhausted() {
            return ReceiveError::TooLarge(format!(
                "the pack claims an object or delta result over {} bytes (--max-object-bytes \
                 raises the limit): refused before allocating it ({})",
                limits.max_object_bytes,
                super::checkout::chain(err)
            ));
        }
        ReceiveError::Corrupt(super::checkout::chain(err))
    }
}

/// Read a version 2 pack from `input` (the bytes of the `packfile` section, side-band removed),
/// verify every entry, resolve its deltas with up to `thread_limit` threads (`None`: one per core),
/// and leave `pack-<hash>.pack` and `pack-<hash>.idx` in `pack_dir`. Follows `gitformat-pack`
/// (pack and index version 2).
///
/// # Errors
/// A message for a corrupt or truncated pack (the caller decides whether a cut stream caused it),
/// or an I/O failure writing the files.
pub fn receive(
    input: &mut dyn BufRead,
    pack_dir: &Path,
    thread_limit: Option<usize>,
    limits: PackLimits,
    interrupt: &AtomicBool,
) -> Result<Received, ReceiveError> {
    let io_err = |what: &str, e: io::Error| {
        ReceiveError::Local(crate::Error::io(
            format!("{what} in {}", pack_dir.display()),
            e,
        ))
    };
    let data_tmp = tempfile::Builder::new()
        .prefix("tmp_pack_")
        .tempfile_in(pack_dir)
        .map_err(|e| io_err("creating the temporary pack file", e))?;
    let writer = data_tmp
        .as_file()
        .try_clone()
        .map_err(|e| io_err("opening the temporary pack file", e))?;
    let writer = Arc::new(Mutex::new(BufWriter::with_capacity(64 * 1024, writer)));
    let started = std::time::Instant::now();
    let last_read = Arc::new(Mutex::new(started));
    let tee = Tee {
        reader: &mut *input,
        file: writer.clone(),
        last_read: last_read.clone(),
    };
    let (mut entries, learned) = super::entries::EntryStream::new(
        io::BufReader::with_capacity(64 * 1024, tee),
        limits,
        pack_dir,
    )?;
    let pack_version = entries.version();

    let mut index_tmp = tempfile::Builder::new()
        .prefix("tmp_idx_")
        .tempfile_in(pack_dir)
        .map_err(|e| io_err("creating the temporary index file", e))?;
    let outcome = {
        let mut out = BufWriter::new(index_tmp.as_file_mut());
        let outcome = gix_pack::index::write_data_iter_to_stream(
            gix_pack::index::Version::V2,
            || {
                let mut file = writer
                    .lock()
                    .map_err(|_| io::Error::other("pack writer poisoned"))?;
                file.flush()?;
                let map = ReleasingMap::new(file.get_ref())?;
                Ok((resolve_entry, map))
            },
            &mut entries,
            thread_limit,
            &mut gix::progress::Discard,
            &mut out,
            interrupt,
            gix::hash::Kind::Sha1,
            limits.alloc_limit(),
            pack_version,
        )
        .map_err(|e| {
            // The stream's own failure, when it stopped gix-pack; else gix-pack's.
            learned.borrow_mut().failure.take().unwrap_or_else(|| {
                ReceiveError::from_gix(
                    &format!("writing the received pack into {}", pack_dir.display()),
                    &e,
                    limits,
                )
            })
        });
        let outcome = match outcome {
            Ok(o) => o,
            // gix-pack refuses a pack it got no entry of; every object of this one was big.
            Err(_) if learned.borrow().trailer.is_some() && !learned.borrow().big.is_empty() => {
                gix_pack::index::write::Outcome {
                    index_version: gix_pack::index::Version::V2,
                    index_hash: gix::hash::Kind::Sha1.null(),
                    data_hash: learned.borrow().trailer.expect("checked"),
                    num_objects: 0,
                }
            }
            Err(e) => return Err(e),
        };
        out.flush()
            .map_err(|e| io_err("writing the pack index", e))?;
        outcome
    };
    drop(entries);
    let learned = std::mem::take(&mut *learned.borrow_mut());
    let entries_end = learned.entries_end.max(gix_pack::data::header::SIZE as u64);
    // Objects held back from gix-pack (over the big-object threshold) go into the index too.
    let outcome = if learned.big.is_empty() {
        outcome
    } else {
        merge_big_objects(&mut index_tmp, outcome, &learned.big)?
    };
    if let Ok(last) = last_read.lock() {
        tracing::debug!(
            "pack: {} objects; stream ended after {} ms, deltas resolved and indexed after {} ms",
            outcome.num_objects,
            last.duration_since(started).as_millis(),
            started.elapsed().as_millis()
        );
    }
    // Bytes after the checksum are refused, as `git index-pack` does: in the last side-band packet
    // the parser's buffer has already copied them into the file; in a later packet they wait unread.
    let written = {
        let mut file = writer
            .lock()
            .map_err(|_| ReceiveError::Corrupt("pack writer poisoned".to_owned()))?;
        file.flush().map_err(|e| io_err("writing the pack", e))?;
        file.get_ref()
            .metadata()
            .map_err(|e| io_err("reading the pack's size", e))?
            .len()
    };
    let pack_len = entries_end + gix::hash::Kind::Sha1.len_in_bytes() as u64;
    let mut more = [0u8; 1];
    let unread = input
        .read(&mut more)
        .map_err(|e| ReceiveError::Corrupt(format!("reading after the pack: {e}")))?;
    if written > pack_len || unread > 0 {
        return Err(ReceiveError::Corrupt(format!(
            "the server sent data after the end of the pack ({pack_len} bytes): refused, as git does"
        )));
    }
    if outcome.num_objects == 0 {
        return Ok(Received {
            data_path: None,
            num_objects: 0,
            big: Vec::new(),
        });
    }
    let data_path = pack_dir.join(format!("pack-{}.pack", outcome.data_hash.to_hex()));
    let index_path = data_path.with_extension("idx");
    // Read-only, as `git index-pack` leaves them.
    for file in [data_tmp.as_file(), index_tmp.as_file()] {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o444))
            .map_err(|e| io_err("making the pack read-only", e))?;
    }
    // The pack first: an index without its pack would make the directory unreadable.
    data_tmp
        .persist(&data_path)
        .map_err(|e| io_err("moving the pack into place", e.error))?;
    index_tmp
        .persist(&index_path)
        .map_err(|e| io_err("moving the pack index into place", e.error))?;
    Ok(Received {
        data_path: Some(data_path),
        num_objects: outcome.num_objects,
        big: learned.big.iter().map(|b| b.id).collect(),
    })
}

/// Rewrite the index gix-pack wrote into `index_tmp` with the `big` objects added.
fn merge_big_objects(
    index_tmp: &mut tempfile::NamedTempFile,
    outcome: gix_pack::index::write::Outcome,
    big: &[super::entries::BigObject],
) -> Result<gix_pack::index::write::Outcome, ReceiveError> {
    let local = |what: &str, e: io::Error| ReceiveError::Local(crate::Error::io(what, e));
    let mut entries: Vec<(gix::ObjectId, u64, u32)> = Vec::new();
    if outcome.num_objects > 0 {
        let index = gix_pack::index::File::at(index_tmp.path(), gix::hash::Kind::Sha1)
            .map_err(|e| ReceiveError::Corrupt(super::checkout::chain(&e)))?;
        entries.extend(
            index
                .iter()
                .map(|e| (e.oid, e.pack_offset, e.crc32.unwrap_or_default())),
        );
    }
    entries.extend(big.iter().map(|b| (b.id, b.pack_offset, b.crc32)));
    let num_objects = entries.len() as u32;
    let file = index_tmp.as_file_mut();
    file.set_len(0)
        .and_then(|()| io::Seek::seek(file, io::SeekFrom::Start(0)).map(|_| ()))
        .map_err(|e| local("rewriting the pack index", e))?;
    let mut out = BufWriter::new(&mut *file);
    let index_hash = super::entries::write_index(entries, &outcome.data_hash, &mut out)
        .and_then(|id| out.flush().map(|()| id))
        .map_err(|e| local("writing the pack index", e))?;
    Ok(gix_pack::index::write::Outcome {
        index_hash,
        num_objects,
        ..outcome
    })
}

/// The bytes of one pack entry, for the delta resolution of [`receive`].
fn resolve_entry(range: gix_pack::data::EntryRange, map: &ReleasingMap) -> Option<&[u8]> {
    map.note((range.end - range.start) as usize);
    map.map.get(range.start as usize..range.end as usize)
}

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
    /// over the big-object threshold ([`Received::big`]), which are only ever streamed.
    ///
    /// # Errors
    /// A message when either file cannot be opened or read.
    pub fn open(
        data_path: &Path,
        limits: PackLimits,
        big: &[gix::ObjectId],
    ) -> Result<Self, String> {
        let file = std::fs::File::open(data_path)
            .map_err(|e| format!("opening {}: {e}", data_path.display()))?;
        let map = Arc::new(
            ReleasingMap::new(&file)
                .map_err(|e| format!("mapping {}: {e}", data_path.display()))?,
        );
        let pack = gix_pack::data::File::from_data(
            SharedMap(map.clone()),
            data_path.to_owned(),
            gix::hash::Kind::Sha1,
        )
        .map_err(|e| super::checkout::chain(&e))?
        .with_alloc_limit_bytes(limits.alloc_limit());
        let index =
            gix_pack::index::File::at(data_path.with_extension("idx"), gix::hash::Kind::Sha1)
                .map_err(|e| super::checkout::chain(&e))?;
        Ok(PackObjects {
            pack: Arc::new(pack),
            index: Arc::new(index),
            map,
            limits,
            big: Arc::new(big.iter().copied().collect()),
        })
    }
}

impl PackObjects {
    /// Whether the pack holds the object `id`.
    pub fn contains(&self, id: &gix::oid) -> bool {
        self.index.lookup(id).is_some()
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
        let mut file = std::fs::File::open(path)?;
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
        let outcome = self.pack.decode_entry(
            entry,
            buffer,
            &mut inflate,
            &|_, _| Ok(None),
            &mut gix_pack::cache::Never,
        )?;
        // Decoding an object reads its whole delta chain, scattered over the pack: count each
        // lookup as at least 64 KiB, so the pages are released at least every 64 objects.
        self.map.note(buffer.len().max(64 << 10));
        Ok(Some(gix::objs::Data::new(
            buffer,
            outcome.kind,
            gix::hash::Kind::Sha1,
        )))
    }
}
