//! Checks of what a restore reads before it trusts it: the commit a pack brought ([`commit`]), and
//! the packs a baked template holds, checked before the boot uses them: they were written
//! earlier, and the template image may have been cut short or changed since (SPEC, `bake`: a cache
//! that cannot help falls back to a full fetch with a warning, never a failed boot).
//!
//! Two steps, so that the boot's hot path pays only for the cheap one: [`quick`] before the fetch
//! (every pack has its index, the index's own checksum holds, the pack's header counts the
//! index's objects, its trailer is the checksum the index names and every offset lies inside it:
//! a truncated or swapped pack fails here); [`full`] in a thread while the server computes the
//! pack (the pack's checksum over all its bytes: a flipped byte fails here). Objects read from a
//! pack that passed both are the bytes the bake wrote; their ids are checked as git's own reads do.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::odb::pack as gix_pack;

use crate::error::{Error, Result};
use crate::types::FullSha;

/// The packs in `pack_dir` (`.pack` paths; none when it cannot be listed), but the temporary
/// files of a fetch.
pub(super) fn list(pack_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(pack_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"tmp_"))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect()
}

/// The cheap checks of every pack of `packs` and its index.
///
/// # Errors
/// A sentence naming the damaged file and what is wrong with it.
pub(super) fn quick(packs: &[PathBuf], format: gix::hash::Kind) -> Result<(), String> {
    packs.iter().try_for_each(|p| check_pair(p, format))
}

/// The cheap checks of one pack and its index.
fn check_pair(pack: &Path, format: gix::hash::Kind) -> Result<(), String> {
    let damaged = |what: String| format!("{} is damaged ({what})", pack.display());
    let chain = |e: &(dyn std::error::Error + 'static)| crate::error::chain(e);
    let index = pack.with_extension("idx");
    let idx = gix_pack::index::File::at(&index, format)
        .map_err(|e| damaged(format!("its index: {}", chain(&e))))?;
    let interrupt = AtomicBool::new(false);
    idx.verify_checksum(&mut gix::progress::Discard, &interrupt)
        .map_err(|e| damaged(format!("its index: {}", chain(&e))))?;
    let data = gix_pack::data::File::at(pack, format).map_err(|e| damaged(chain(&e)))?;
    if data.num_objects() != idx.num_objects() {
        return Err(damaged(format!(
            "it counts {} objects, its index {}",
            data.num_objects(),
            idx.num_objects()
        )));
    }
    if data.checksum() != idx.pack_checksum() {
        return Err(damaged(
            "cut short or replaced: its trailer is not the checksum its index names".into(),
        ));
    }
    let end = data.data_len().saturating_sub(format.len_in_bytes()) as u64;
    if let Some(bad) = idx
        .iter()
        .map(|e| e.pack_offset)
        .find(|&o| o < 12 || o >= end)
    {
        return Err(damaged(format!("its index names offset {bad}, outside it")));
    }
    Ok(())
}

/// The checksum of every pack in `packs` over all its bytes.
///
/// The trailer is a checksum, not an object's id: a SHA-1 pack is hashed with the plain SHA-1
/// (SHA-NI where the CPU has it), not the collision-detecting one object ids need, as git does
/// for every file checksum since 2.49 (`csum-file.c`: `hashfile_checksum_valid` takes
/// `unsafe_hash_algo`). It finds a flipped or missing byte all the same, faster: on git/git's
/// depth-1 pack (13 MB) the check's thread took 26 ms instead of 58 (loaded cores).
///
/// # Errors
/// A sentence naming the first damaged pack.
pub(super) fn full(packs: &[PathBuf], format: gix::hash::Kind) -> Result<(), String> {
    let interrupt = AtomicBool::new(false);
    for pack in packs {
        let damaged = |e: &(dyn std::error::Error + 'static)| {
            format!("{} is damaged ({})", pack.display(), crate::error::chain(e))
        };
        if format == gix::hash::Kind::Sha1 {
            trailer_sha1(pack).map_err(|e| damaged(&e))?;
            continue;
        }
        let data = gix_pack::data::File::at(pack, format).map_err(|e| damaged(&e))?;
        data.verify_checksum(&mut gix::progress::Discard, &interrupt)
            .map_err(|e| damaged(&e))?;
    }
    Ok(())
}

/// The SHA-1 of the bytes of `pack` before its last 20, against those 20 (its trailer); read in
/// 1 MiB pieces, never held whole.
fn trailer_sha1(pack: &Path) -> std::io::Result<()> {
    use sha1::Digest as _;
    use std::io::Read as _;
    const TRAILER: u64 = 20;
    // Followed, as gix's own check opened it; a FIFO or folder in its place is refused.
    let mut file = crate::fs::open_regular(pack, true)?;
    let len = file.metadata()?.len();
    let Some(body) = len.checked_sub(TRAILER).filter(|&n| n >= 12) else {
        return Err(std::io::Error::other(format!(
            "{len} bytes: too short for a pack"
        )));
    };
    let mut hasher = sha1::Sha1::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = body;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        file.read_exact(&mut buf[..want])?;
        hasher.update(&buf[..want]);
        left -= want as u64;
    }
    let mut trailer = [0u8; TRAILER as usize];
    file.read_exact(&mut trailer)?;
    if hasher.finalize().as_slice() != trailer {
        return Err(std::io::Error::other(
            "its checksum does not match its bytes: a byte was changed",
        ));
    }
    Ok(())
}

/// Remove the packs `packs` (and the files beside each: index, reverse index, bitmap, keep) so
/// that nothing is read from them; a full fetch replaces what they held.
///
/// # Errors
/// [`crate::Error::LocalIo`] when one cannot be removed.
pub(super) fn set_aside(packs: &[PathBuf]) -> crate::Result<()> {
    for pack in packs {
        for ext in ["idx", "pack", "rev", "bitmap", "keep", "promisor", "mtimes"] {
            let path = pack.with_extension(ext);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(crate::Error::io(
                        format!("removing the damaged {}", path.display()),
                        e,
                    ));
                }
            }
        }
    }
    Ok(())
}

/// An object database whose every object is hashed as it is read and refused unless its id is
/// the one asked for: a pack index written earlier may name the wrong offset for an id (changed
/// with its checksum recomputed), and no file may then be written from the wrong blob.
#[derive(Clone)]
pub(crate) struct Verified<F>(pub(crate) F);

impl<F: gix::objs::Find> gix::objs::Find for Verified<F> {
    fn try_find<'a>(
        &self,
        id: &gix::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        let Some(data) = self.0.try_find(id, buffer)? else {
            return Ok(None);
        };
        let actual = gix::objs::compute_hash(id.kind(), data.kind, data.data)?;
        if actual != id {
            use gix::error::ErrorExt as _;
            return Err(std::io::Error::other(format!(
                "the object read as {id} is {actual}: the pack index that names it was changed \
                 (bake the template again)"
            ))
            .raise());
        }
        Ok(Some(data))
    }
}

impl<F: gix::objs::Exists> gix::objs::Exists for Verified<F> {
    fn exists(&self, id: &gix::oid) -> bool {
        self.0.exists(id)
    }
}

/// Check that `tip` arrived and is a commit; return its tree.
pub(super) fn commit(objects: &impl gix::objs::Find, tip: FullSha) -> Result<gix::ObjectId> {
    let mut buf = Vec::new();
    let data = objects
        .try_find(&tip.id(), &mut buf)
        .map_err(|e| Error::Integrity(format!("cannot read {tip} from the received pack: {e}")))?
        .ok_or_else(|| {
            Error::Integrity(format!("the remote's pack does not contain commit {tip}"))
        })?;
    if data.kind != gix::objs::Kind::Commit {
        return Err(Error::Integrity(format!(
            "{tip} is a {}, not a commit: TIP_SHA must name a commit",
            data.kind
        )));
    }
    gix::objs::CommitRefIter::from_bytes(data.data, tip.format())
        .tree_id()
        .map_err(|e| Error::Integrity(format!("commit {tip} is malformed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty pack (header, no object) with its trailer: what gix's own check takes.
    fn empty_pack(dir: &Path) -> PathBuf {
        use sha1::Digest as _;
        let mut bytes = b"PACK\0\0\0\x02\0\0\0\0".to_vec();
        let sum = sha1::Sha1::digest(&bytes);
        bytes.extend_from_slice(&sum);
        let path = dir.join("pack-x.pack");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn the_plain_sha1_trailer_check_agrees_with_gix_s() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = empty_pack(tmp.path());
        let gix_ok = |p: &Path| match gix_pack::data::File::at(p, gix::hash::Kind::Sha1) {
            Ok(d) => d
                .verify_checksum(&mut gix::progress::Discard, &AtomicBool::new(false))
                .is_ok(),
            Err(_) => false,
        };
        assert!(gix_ok(&pack));
        trailer_sha1(&pack).unwrap();
        full(std::slice::from_ref(&pack), gix::hash::Kind::Sha1).unwrap();

        let mut bytes = crate::fs::read_regular(&pack, false, 1 << 30).unwrap();
        bytes[9] ^= 0x01;
        std::fs::write(&pack, &bytes).unwrap();
        assert!(!gix_ok(&pack));
        let err = full(std::slice::from_ref(&pack), gix::hash::Kind::Sha1).unwrap_err();
        assert!(err.contains("is damaged"), "{err}");

        std::fs::write(&pack, &bytes[..25]).unwrap();
        assert!(trailer_sha1(&pack).is_err(), "too short");
    }
}
