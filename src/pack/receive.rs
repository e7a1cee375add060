//! The received pack: written to `objects/pack` as it streams in and indexed, as git's
//! `index-pack` leaves it (`pack-<hash>.pack` and `.idx`).
//!
//! This is gix-pack's `Bundle::write_to_directory` (stream → entries → temporary pack file →
//! `index::write_data_iter_to_stream` → `pack-<hash>.{pack,idx}`) with three changes: the entries
//! come from our own stream ([`super::entries`], which buffers nothing and holds big objects
//! back), big objects are merged into the index afterwards, and the pack is mapped through a
//! [`ReleasingMap`], so the pages of a large pack do not all stay in the resident set while its
//! deltas are resolved. The file stays in the page cache; only this process's mapping is bounded.

use std::io::{self, BufRead, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use gix::odb::pack as gix_pack;

use super::limits::{PackLimits, ReceiveError};
use super::map::ReleasingMap;

/// What [`receive`] wrote.
#[derive(Debug)]
pub struct Received {
    /// `objects/pack/pack-<hash>.pack`, or `None` for an empty pack (nothing is written then).
    pub data_path: Option<PathBuf>,
    /// The number of objects in the pack.
    pub num_objects: u32,
    /// The objects over the big-object threshold (see [`PackObjects::open`](super::PackObjects::open)).
    pub big: Vec<gix::ObjectId>,
}

/// Copies what the pack parser reads into the pack file.
pub(super) struct Tee<R> {
    pub(super) reader: R,
    pub(super) file: PackWriter,
    /// When the last bytes arrived.
    pub(super) last_read: Arc<Mutex<std::time::Instant>>,
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

/// Read a version 2 pack from `input` (the bytes of the `packfile` section, side-band removed),
/// verify every entry, resolve its deltas with up to `thread_limit` threads (`None`: one per core),
/// and leave `pack-<hash>.pack` and `pack-<hash>.idx` in `pack_dir`. Follows `gitformat-pack`
/// (pack and index version 2). `observer` sees each entry's inflated data as it streams in.
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
    observer: Option<&dyn super::entries::EntryObserver>,
    format: gix::hash::Kind,
) -> Result<Received, ReceiveError> {
    let io_err = |what: &str, e: io::Error| local_io(pack_dir, what, e);
    let (data_tmp, writer) = temporary_pack(pack_dir)?;
    let started = std::time::Instant::now();
    let last_read = Arc::new(Mutex::new(started));
    let tee = Tee {
        reader: &mut *input,
        file: writer.clone(),
        last_read: last_read.clone(),
    };
    let mut index_tmp = tempfile::Builder::new()
        .prefix("tmp_idx_")
        .tempfile_in(pack_dir)
        .map_err(|e| io_err("creating the temporary index file", e))?;
    let stream = io::BufReader::with_capacity(64 * 1024, tee);
    let (outcome, learned) = match observer {
        Some(observer) => index_observed(
            stream,
            &writer,
            &data_tmp,
            &mut index_tmp,
            pack_dir,
            thread_limit,
            limits,
            interrupt,
            observer,
            format,
        )?,
        None => index(
            stream,
            &writer,
            &mut index_tmp,
            pack_dir,
            thread_limit,
            limits,
            interrupt,
            format,
        )?,
    };
    if let Ok(last) = last_read.lock() {
        tracing::debug!(
            "pack: {} objects; stream ended after {} ms, deltas resolved and indexed after {} ms",
            outcome.num_objects,
            last.duration_since(started).as_millis(),
            started.elapsed().as_millis()
        );
    }
    refuse_data_after_the_pack(input, &writer, learned.entries_end, pack_dir, format)?;
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

/// A temporary `tmp_pack_*` file in `pack_dir` (removed when dropped), and a buffered writer
/// into it.
pub(super) fn temporary_pack(
    pack_dir: &Path,
) -> Result<(tempfile::NamedTempFile, PackWriter), ReceiveError> {
    let io_err = |what: &str, e: io::Error| local_io(pack_dir, what, e);
    let file = tempfile::Builder::new()
        .prefix("tmp_pack_")
        .tempfile_in(pack_dir)
        .map_err(|e| io_err("creating the temporary pack file", e))?;
    let writer = file
        .as_file()
        .try_clone()
        .map_err(|e| io_err("opening the temporary pack file", e))?;
    let writer = Arc::new(Mutex::new(BufWriter::with_capacity(64 * 1024, writer)));
    Ok((file, writer))
}

/// A local I/O failure around the pack files in `pack_dir`.
pub(super) fn local_io(pack_dir: &Path, what: &str, e: io::Error) -> ReceiveError {
    ReceiveError::Local(crate::Error::io(
        format!("{what} in {}", pack_dir.display()),
        e,
    ))
}

pub(super) use super::so_far::PackWriter;

/// Stream the pack's entries from `stream` into gix-pack's index writer, which resolves the
/// deltas through a [`ReleasingMap`] of the pack file `writer` fills; big objects held back by
/// the stream are merged into the index afterwards.
#[allow(clippy::too_many_arguments)]
fn index(
    stream: impl BufRead,
    writer: &PackWriter,
    index_tmp: &mut tempfile::NamedTempFile,
    pack_dir: &Path,
    thread_limit: Option<usize>,
    limits: PackLimits,
    interrupt: &AtomicBool,
    format: gix::hash::Kind,
) -> Result<(gix_pack::index::write::Outcome, super::entries::Learned), ReceiveError> {
    let (mut entries, learned) =
        super::entries::EntryStream::new(stream, limits, pack_dir, format)?;
    let pack_version = entries.version();
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
        format,
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
                index_hash: format.null(),
                data_hash: learned.borrow().trailer.expect("checked"),
                num_objects: 0,
            }
        }
        Err(e) => return Err(e),
    };
    out.flush()
        .map_err(|e| local_io(pack_dir, "writing the pack index", e))?;
    drop(out);
    drop(entries);
    tracing::debug!("pack: every entry read");
    let learned = std::mem::take(&mut *learned.borrow_mut());
    // Objects held back from gix-pack (over the big-object threshold) go into the index too.
    let outcome = if learned.big.is_empty() {
        outcome
    } else {
        merge_big_objects(index_tmp, outcome, &learned.big)?
    };
    Ok((outcome, learned))
}

/// [`index`] for an observed stream: the entries are read here (CRC-32 and offset of each), the
/// observer names every object, and the index is written from those ids — the deltas are not
/// resolved a second time. When the observer does not know every object (an entry it could not
/// resolve, a duplicate), gix-pack indexes the pack from the file, as [`index`] does.
#[allow(clippy::too_many_arguments)]
fn index_observed(
    stream: impl BufRead,
    writer: &PackWriter,
    data_tmp: &tempfile::NamedTempFile,
    index_tmp: &mut tempfile::NamedTempFile,
    pack_dir: &Path,
    thread_limit: Option<usize>,
    limits: PackLimits,
    interrupt: &AtomicBool,
    observer: &dyn super::entries::EntryObserver,
    format: gix::hash::Kind,
) -> Result<(gix_pack::index::write::Outcome, super::entries::Learned), ReceiveError> {
    let (entries, learned) = super::entries::EntryStream::new(stream, limits, pack_dir, format)?;
    let mut entries = entries.observed(Some(observer));
    observer.pack_so_far(super::so_far::PackSoFar::new(
        writer.clone(),
        data_tmp.path().to_owned(),
        format,
    ));
    // Grown as entries arrive: the header's count is only a claim.
    let mut crcs: Vec<(u64, u32)> = Vec::new();
    for entry in &mut entries {
        if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(ReceiveError::Corrupt("interrupted".to_owned()));
        }
        match entry {
            Ok(e) => crcs.push((e.pack_offset, e.crc32.unwrap_or_default())),
            Err(e) => {
                return Err(learned
                    .borrow_mut()
                    .failure
                    .take()
                    .unwrap_or_else(|| ReceiveError::Corrupt(crate::error::chain(&e))));
            }
        }
    }
    drop(entries);
    tracing::debug!("pack: every entry read");
    let learned = std::mem::take(&mut *learned.borrow_mut());
    let trailer = learned
        .trailer
        .ok_or_else(|| ReceiveError::Corrupt("the pack has no checksum".to_owned()))?;
    writer
        .lock()
        .map_err(|_| ReceiveError::Corrupt("pack writer poisoned".to_owned()))?
        .flush()
        .map_err(|e| local_io(pack_dir, "writing the pack", e))?;
    if let Some(listed) = observer
        .ids()
        // Ids of another length than the pack's (an observer hashing with another format)
        // would make an index git cannot read: gix indexes the pack instead.
        .filter(|ids| ids.iter().all(|(_, id)| id.kind() == format))
        .and_then(|ids| name_the_rest(data_tmp.path(), &crcs, ids, limits, format))
        .and_then(|ids| listed_entries(&crcs, ids, &learned.big))
    {
        let num_objects = listed.len() as u32;
        let file = index_tmp.as_file_mut();
        let mut out = BufWriter::new(&mut *file);
        let index_hash = super::entries::write_index(listed, &trailer, &mut out)
            .and_then(|id| out.flush().map(|()| id))
            .map_err(|e| local_io(pack_dir, "writing the pack index", e))?;
        tracing::debug!("pack: indexed from the {num_objects} ids the stream's observer resolved");
        let outcome = gix_pack::index::write::Outcome {
            index_version: gix_pack::index::Version::V2,
            index_hash,
            data_hash: trailer,
            num_objects,
        };
        return Ok((outcome, learned));
    }
    tracing::debug!("pack: the observer did not resolve every object; gix-pack indexes the pack");
    let file = data_tmp
        .reopen()
        .map_err(|e| local_io(pack_dir, "reading the received pack", e))?;
    let (outcome, _) = index(
        io::BufReader::with_capacity(64 * 1024, file),
        writer,
        index_tmp,
        pack_dir,
        thread_limit,
        limits,
        interrupt,
        format,
    )?;
    Ok((outcome, learned))
}

/// The most entries the observer may leave unnamed for [`name_the_rest`], and the longest delta
/// chain it follows for one; past either, gix-pack indexes the whole pack.
const REST_ENTRIES: usize = 64;
const REST_CHAIN: usize = 64;

/// `ids` with the entries the observer could not name (a delta whose base had left its cache)
/// decoded from the pack written and hashed here, when they are few and their chains short: one
/// far delta does not cost inflating and hashing the whole pack again. `None` past those bounds,
/// or for an entry that does not decode here (gix-pack then indexes the pack and says why).
fn name_the_rest(
    path: &Path,
    crcs: &[(u64, u32)],
    mut ids: Vec<(u64, gix::ObjectId)>,
    limits: PackLimits,
    format: gix::hash::Kind,
) -> Option<Vec<(u64, gix::ObjectId)>> {
    let known: std::collections::HashSet<u64> = ids.iter().map(|(offset, _)| *offset).collect();
    let missing: Vec<u64> = crcs
        .iter()
        .map(|(offset, _)| *offset)
        .filter(|offset| !known.contains(offset))
        .collect();
    if missing.is_empty() || missing.len() > REST_ENTRIES {
        return missing.is_empty().then_some(ids);
    }
    let pack = gix_pack::data::File::at(path, format)
        .ok()?
        .with_alloc_limit_bytes(limits.alloc_limit());
    let by_id: std::collections::HashMap<gix::ObjectId, u64> =
        ids.iter().map(|(offset, id)| (*id, *offset)).collect();
    let base_of = |entry: &gix_pack::data::Entry| match entry.header {
        // A distance past the pack's start (the server's lie): gix-pack indexes the pack and
        // says what is wrong with it.
        gix_pack::data::entry::Header::OfsDelta { base_distance } => {
            Some(Some(entry.checked_base_pack_offset(base_distance)?))
        }
        gix_pack::data::entry::Header::RefDelta { base_id } => {
            by_id.get(&base_id).map(|o| Some(*o))
        }
        _ => Some(None),
    };
    let in_pack = |base: &gix::oid, _: &mut Vec<u8>| {
        let Some(offset) = by_id.get(base) else {
            return Ok(None);
        };
        Ok(Some(gix_pack::data::decode::entry::ResolvedBase::InPack(
            pack.entry(*offset)?,
        )))
    };
    let (mut out, mut inflate) = (Vec::new(), gix::zlib::Inflate::default());
    for offset in missing {
        let entry = pack.entry(offset).ok()?;
        let mut link = entry.clone();
        for _ in 0..=REST_CHAIN {
            match base_of(&link)? {
                Some(base) => link = pack.entry(base).ok()?,
                None => break,
            }
        }
        base_of(&link)?.is_none().then_some(())?;
        let decoded = pack
            .decode_entry(
                entry,
                &mut out,
                &mut inflate,
                &in_pack,
                &mut gix_pack::cache::Never,
            )
            .ok()?;
        ids.push((
            offset,
            gix::objs::compute_hash(format, decoded.kind, &out).ok()?,
        ));
    }
    tracing::debug!(
        "pack: {} entries the observer could not name decoded from the pack",
        ids.len() - known.len()
    );
    Some(ids)
}

/// The index's entries (id, offset, CRC-32) from the observer's `ids`, when they name every entry
/// read (`crcs`) exactly once and no id twice; the big objects added.
fn listed_entries(
    crcs: &[(u64, u32)],
    ids: Vec<(u64, gix::ObjectId)>,
    big: &[super::entries::BigObject],
) -> Option<Vec<(gix::ObjectId, u64, u32)>> {
    let ids: std::collections::HashMap<u64, gix::ObjectId> = ids.into_iter().collect();
    let mut listed: Vec<(gix::ObjectId, u64, u32)> = crcs
        .iter()
        .map(|&(offset, crc)| ids.get(&offset).map(|id| (*id, offset, crc)))
        .collect::<Option<_>>()?;
    listed.extend(big.iter().map(|b| (b.id, b.pack_offset, b.crc32)));
    let mut unique: Vec<&gix::ObjectId> = listed.iter().map(|e| &e.0).collect();
    unique.sort_unstable();
    unique.dedup();
    (unique.len() == listed.len()).then_some(listed)
}

/// Bytes after the checksum are refused, as `git index-pack` does: in the last side-band packet
/// the parser's buffer has already copied them into the file; in a later packet they wait unread.
pub(super) fn refuse_data_after_the_pack(
    input: &mut dyn BufRead,
    writer: &PackWriter,
    entries_end: u64,
    pack_dir: &Path,
    format: gix::hash::Kind,
) -> Result<(), ReceiveError> {
    let written = {
        let mut file = writer
            .lock()
            .map_err(|_| ReceiveError::Corrupt("pack writer poisoned".to_owned()))?;
        file.flush()
            .map_err(|e| local_io(pack_dir, "writing the pack", e))?;
        file.get_ref()
            .metadata()
            .map_err(|e| local_io(pack_dir, "reading the pack's size", e))?
            .len()
    };
    let entries_end = entries_end.max(gix_pack::data::header::SIZE as u64);
    let pack_len = entries_end + format.len_in_bytes() as u64;
    let mut more = [0u8; 1];
    let unread = input
        .read(&mut more)
        .map_err(|e| ReceiveError::Corrupt(format!("reading after the pack: {e}")))?;
    if written > pack_len || unread > 0 {
        return Err(ReceiveError::Corrupt(format!(
            "the server sent data after the end of the pack ({pack_len} bytes): refused, as git does"
        )));
    }
    Ok(())
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
        let index = gix_pack::index::File::at(index_tmp.path(), outcome.data_hash.kind())
            .map_err(|e| ReceiveError::Corrupt(crate::error::chain(&e)))?;
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
    map.note_at(range.start as usize, (range.end - range.start) as usize);
    map.map.get(range.start as usize..range.end as usize)
}
