//! Step 3b of the boot: the switch's writes through the tree's handle: files removed, files
//! written (a changed file rewritten in place, the parts that differ only), then the stat data
//! the index records for them.

use super::super::options::RestoreOptions;
use crate::error::{Error, Result};
use crate::fs::tree::Tree;
use gix::bstr::{BStr, BString, ByteSlice as _};
use std::collections::HashMap;
use std::path::PathBuf;

/// Remove the files `TIP_SHA` no longer has, and the folders that leaves empty.
pub(super) fn remove_files(tree: &Tree, paths: &[PathBuf]) -> Result<()> {
    for rel in paths {
        match tree.remove_file(rel) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::io(
                    format!("removing {}", tree.shown(rel).display()),
                    e,
                ));
            }
        }
        let mut dir = rel.parent();
        while let Some(d) = dir {
            if d.as_os_str().is_empty() || tree.remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
    Ok(())
}

/// The repository's objects through a store of their own, replaced every few MiB read
/// ([`crate::pack::ReleasingObjects`]): the switch reads blobs from all over the packs (every
/// blob of `TIP_SHA`'s tree on a cache boot, the changed files' deltas and their bases at the
/// new pack's end on a baked boot), and the repository's own store keeps every page a read made
/// resident until the boot ends (the bench's cache boot: 25 MiB of the template's pack and
/// 12 MiB of the new one; its baked boot: 11 MiB of the new one). `in_order`: the reads follow
/// the tree, as the template's pack does (the files a cache boot writes: every file of the
/// tree), not scattered (the changed files a baked boot rewrites and the trees it reads, whose
/// deltas and bases are apart in the new pack: counted as in order, they left all 11 MiB of it
/// resident).
pub(super) fn releasing(
    repo: &gix::Repository,
    in_order: bool,
) -> Result<crate::pack::ReleasingObjects> {
    let dir = repo.objects.store_ref().path().to_owned();
    let (format, at) = (repo.object_hash(), dir.clone());
    let opened = if in_order {
        crate::pack::ReleasingObjects::in_pack_order(at, format)
    } else {
        crate::pack::ReleasingObjects::at(at, format)
    };
    opened.map_err(|e| Error::io(format!("opening the objects of {}", dir.display()), e))
}

/// Write `paths` (entries of `index`) through the tree's handle — symlinks, exec bits,
/// `.gitattributes` conversions as `TIP_SHA`'s tree asks, never through a symlink — and return
/// the index of what was written, with its new stat data (`None`: nothing to write).
/// `attributes` (`.gitattributes` files already as `TIP_SHA` has them) are written again too.
pub(super) fn write_files(
    repo: &gix::Repository,
    tree: &Tree,
    index: &gix::index::File,
    paths: &[BString],
    attributes: &[BString],
) -> Result<Option<gix::index::File>> {
    if paths.is_empty() {
        return Ok(None);
    }
    let wanted: std::collections::HashSet<&BStr> =
        paths.iter().chain(attributes).map(|p| p.as_ref()).collect();
    let mut part = gix::index::State::new(repo.object_hash());
    for entry in index.entries() {
        let path = entry.path(index);
        if wanted.contains(path) {
            part.dangerously_push_entry(
                Default::default(),
                entry.id,
                gix::index::entry::Flags::empty(),
                entry.mode,
                path,
            );
        }
    }
    let mut part = gix::index::File::from_state(part, repo.index_path());
    let mut form = super::super::write::WorktreeForm::new(repo, index)?;
    let mut writer =
        super::super::write::Writer::new(tree, super::super::write::Overwrite { files: true });
    let own = releasing(repo, true)?;
    writer.write_entries(&mut part, &super::super::verify::Verified(&own), &mut form)?;
    Ok(Some(part))
}

/// Rewrite, in place, the files of `paths` that exist as regular files with one link and whose
/// blobs are under the big-object threshold: opened without truncation, written from the start,
/// cut to the new length, exec bit set as the entry's mode says. On ext4 this reuses the file's
/// blocks, where truncating or unlinking first frees them (measured here: about 20 µs a file
/// against 350–450 µs). Their stat data goes into `stats`; returns the paths left for the
/// checkout (new files, symlinks, big blobs, and hard-linked files, removed first so the
/// checkout never writes through the link).
pub(super) fn write_in_place(
    opts: &RestoreOptions,
    tree: &Tree,
    repo: &gix::Repository,
    index: &gix::index::File,
    paths: &[BString],
    stats: &mut HashMap<BString, gix::index::entry::Stat>,
) -> Result<Vec<BString>> {
    let wanted: std::collections::HashSet<&BStr> = paths.iter().map(|p| p.as_ref()).collect();
    let entries: Vec<&gix::index::Entry> = index
        .entries()
        .iter()
        .filter(|e| wanted.contains(e.path(index)))
        .collect();
    // Inflating and writing is CPU work the fetch's server has finished with: a few threads,
    // each on a contiguous run of the index, so the paths left keep the index's order.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let chunk = entries.len().div_ceil(threads).max(256);
    let parts: Vec<Result<InPlace>> = std::thread::scope(|scope| {
        let handles: Vec<_> = entries
            .chunks(chunk)
            .map(|part| {
                let repo = repo.clone();
                scope.spawn(move || write_in_place_part(opts, tree, &repo, index, part))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("a writing thread panicked".into())))
            })
            .collect()
    });
    let mut rest = Vec::new();
    for part in parts {
        let part = part?;
        rest.extend(part.rest);
        stats.extend(part.stats);
    }
    Ok(rest)
}

/// What [`write_in_place_part`] did: the paths left for the checkout, the stat data of the files
/// written.
pub(super) struct InPlace {
    rest: Vec<BString>,
    stats: Vec<(BString, gix::index::entry::Stat)>,
}

/// [`write_in_place`] for the entries of one thread.
pub(super) fn write_in_place_part(
    opts: &RestoreOptions,
    tree: &Tree,
    repo: &gix::Repository,
    index: &gix::index::File,
    entries: &[&gix::index::Entry],
) -> Result<InPlace> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let mut form = super::super::write::WorktreeForm::new(repo, index)?;
    let own = releasing(repo, false)?;
    let mut done = InPlace {
        rest: Vec::new(),
        stats: Vec::with_capacity(entries.len()),
    };
    let rest = &mut done.rest;
    let mut buf = Vec::new();
    for entry in entries {
        let path = entry.path(index);
        let exec = match entry.mode {
            gix::index::entry::Mode::FILE => false,
            gix::index::entry::Mode::FILE_EXECUTABLE => true,
            _ => {
                rest.push(path.to_owned());
                continue;
            }
        };
        let rel = path.to_path_lossy();
        let full = tree.shown(&rel);
        // Looked up only for a file that is there: a cache boot's work tree has none, and each
        // header read faults in pages of the pack.
        let small = || {
            gix::objs::FindHeader::try_header(&own, &entry.id)
                .ok()
                .flatten()
                .is_some_and(|h| h.size < opts.limits.big_object_bytes)
        };
        let file = tree
            .open_existing(&rel)
            .ok()
            .and_then(|f| f.metadata().ok().map(|m| (f, m)))
            .filter(|(_, m)| m.is_file());
        let (mut file, before) = match file {
            Some((file, meta)) if meta.nlink() == 1 && small() => (file, meta),
            Some((_, meta)) if meta.nlink() > 1 => {
                // Another name of the same file (a template's hard link) keeps its content:
                // the checkout writes a new file here, never through the link.
                tree.remove_file(&rel)
                    .map_err(|e| Error::io(format!("removing {}", full.display()), e))?;
                rest.push(path.to_owned());
                continue;
            }
            _ => {
                rest.push(path.to_owned());
                continue;
            }
        };
        let blob =
            gix::objs::Find::try_find(&super::super::verify::Verified(&own), &entry.id, &mut buf)
                .map_err(|e| Error::from_chain(format!("reading {}", entry.id), &e))?
                .ok_or_else(|| {
                    Error::Integrity(format!("blob {} of '{path}' is missing", entry.id))
                })?
                .data
                .to_vec();
        let data = form.convert(blob, path)?;
        let io = |e| Error::io(format!("writing {}", full.display()), e);
        std::io::Write::write_all(&mut file, &data).map_err(io)?;
        // Cut only a file that was longer: writing from the start already set a length at least
        // the old one's (one `ftruncate` a file saved on most of a switch's files).
        if before.len() > data.len() as u64 {
            file.set_len(data.len() as u64).map_err(io)?;
        }
        // Writing changes no permission bits: the mode read when the file was opened holds.
        let mode = before.permissions().mode();
        let want = if exec {
            mode | (mode & 0o444) >> 2
        } else {
            mode & !0o111
        };
        if want != mode {
            file.set_permissions(std::fs::Permissions::from_mode(want))
                .map_err(io)?;
        }
        let meta = gix::index::fs::Metadata::from_file(&file).map_err(io)?;
        let stat = gix::index::entry::Stat::from_fs(&meta)
            .map_err(|e| Error::from_chain(format!("reading {}", full.display()), &e))?;
        done.stats.push((path.to_owned(), stat));
    }
    Ok(done)
}

/// Put the stat data of files known to hold their entry's content into `index`, so `git status`
/// re-reads none of them.
pub(super) fn apply_stats(
    index: &mut gix::index::File,
    stats: &HashMap<BString, gix::index::entry::Stat>,
) {
    let (entries, backing) = index.entries_mut_and_pathbacking();
    for entry in entries {
        if let Some(stat) = stats.get(entry.path_in(backing)) {
            entry.stat = *stat;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::fixture::{big_pack, resident_kib};

    /// The switch's writes of a cache boot read every blob of `TIP_SHA`'s tree: done, they leave
    /// none of the pack they read resident (through the repository's own store, every page a
    /// read touched stayed resident for the rest of the boot: here all 40 MiB).
    #[test]
    fn writing_every_file_leaves_the_pack_not_resident() {
        let tmp = tempfile::tempdir().unwrap();
        let big = big_pack(tmp.path(), false);
        let repo = crate::repo::open(&tmp.path().join(".git")).unwrap();
        let objects = super::super::super::verify::Verified(&repo.objects);
        let tree = repo
            .find_commit(big.commit)
            .unwrap()
            .tree_id()
            .unwrap()
            .detach();
        let index = super::super::super::checkout::index_from_tree(&repo, &objects, tree, u64::MAX)
            .unwrap();
        let paths: Vec<BString> = index
            .entries()
            .iter()
            .map(|e| e.path(&index).to_owned())
            .collect();
        assert_eq!(paths.len(), big.blobs.len());
        let before = resident_kib(&big.path());
        let work = Tree::open(tmp.path()).unwrap();
        let written = write_files(&repo, &work, &index, &paths, &[]).unwrap();
        assert_eq!(written.map(|w| w.entries().len()), Some(paths.len()));
        let len = std::fs::metadata(tmp.path().join("f320")).unwrap().len();
        assert_eq!(len, 128 << 10);
        let after = resident_kib(&big.path());
        assert!(
            after <= before + 1024,
            "{after} KiB of the pack resident after the writes ({before} before)"
        );
    }
}
