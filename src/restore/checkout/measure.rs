//! Before the index of a commit's tree is built ([`super::index`]), what the tree expands to is
//! measured, each distinct tree read once: a tree that repeats its subtrees names millions of paths
//! from a pack of a few KiB. Refused: two entries of one name, more files and folders than
//! `--max-entries`, over [`MAX_TREE_PATH_BYTES`] of paths, folders nested over [`MAX_TREE_DEPTH`].

use crate::error::{Error, Result, chain};

/// The most folders a commit's tree may nest (git's `core.maxTreeDepth`, 4096 by default).
pub const MAX_TREE_DEPTH: usize = 4096;

/// The most bytes of paths the index of a commit's tree may hold (each file's full path): the
/// index holds them all in memory.
pub const MAX_TREE_PATH_BYTES: u64 = 256 << 20;

/// What a tree holds once expanded: files (every index entry: blobs, symlinks, submodules),
/// folders, and the bytes of the files' paths relative to it.
#[derive(Debug, Clone, Copy, Default)]
struct Expanded {
    files: u64,
    folders: u64,
    path_bytes: u64,
}

/// A tree being measured: its subtrees (id, name) and how far they are added up.
struct Frame {
    id: gix::ObjectId,
    path: gix::bstr::BString,
    subtrees: Vec<(gix::ObjectId, gix::bstr::BString)>,
    next: usize,
    sum: Expanded,
}

/// Measure what `tree` expands to before anything that size exists, each distinct tree read once
/// (a tree that repeats the same subtrees names millions of paths from a pack of a few KiB), in
/// memory bounded by `max_entries`: refuse a folder holding two entries of one name (file and
/// file, file and folder, folder and symlink: a checkout could not hold both, and git's fsck
/// refuses them as `duplicateEntries`), more than `max_entries` files and folders
/// (`--max-entries`), over [`MAX_TREE_PATH_BYTES`] of paths, or folders nested over
/// [`MAX_TREE_DEPTH`] deep.
///
/// # Errors
/// [`Error::Integrity`] (exit 6) naming what was refused.
pub fn measure_tree(
    objects: &impl gix::objs::Find,
    tree: gix::ObjectId,
    max_entries: u64,
) -> Result<()> {
    let mut measured: std::collections::HashMap<gix::ObjectId, Expanded> = Default::default();
    // Entries read from distinct trees: each is expanded at least once, so this many is refused
    // before the sum is known, and bounds what the frames hold.
    let mut read = 0u64;
    let mut buf = Vec::new();
    let mut stack = vec![read_frame(
        objects,
        tree,
        Default::default(),
        &mut buf,
        &mut read,
    )?];
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            break;
        };
        if read > max_entries {
            return Err(too_many(max_entries));
        }
        let Some((id, name)) = top.subtrees.get(top.next) else {
            let done = stack.pop().expect("a frame");
            measured.insert(done.id, done.sum);
            let Some(parent) = stack.last_mut() else {
                break;
            };
            let name_len = parent.subtrees[parent.next].1.len();
            add(&mut parent.sum, done.sum, name_len);
            parent.next += 1;
            check_sum(&parent.sum, max_entries)?;
            continue;
        };
        if let Some(sum) = measured.get(id).copied() {
            add(&mut top.sum, sum, name.len());
            top.next += 1;
            check_sum(&top.sum, max_entries)?;
            continue;
        }
        if depth >= MAX_TREE_DEPTH {
            return Err(Error::Integrity(format!(
                "the commit's tree nests folders over {MAX_TREE_DEPTH} deep (at '{}'): refused, \
                 nothing was written",
                top.path
            )));
        }
        let mut path = top.path.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        let frame = read_frame(objects, *id, path, &mut buf, &mut read)?;
        stack.push(frame);
    }
    Ok(())
}

/// Add a subtree's expansion, named `name_len` bytes, to its parent's.
fn add(sum: &mut Expanded, sub: Expanded, name_len: usize) {
    sum.files = sum.files.saturating_add(sub.files);
    sum.folders = sum.folders.saturating_add(sub.folders).saturating_add(1);
    sum.path_bytes = sum
        .path_bytes
        .saturating_add(sub.path_bytes)
        .saturating_add(sub.files.saturating_mul(name_len as u64 + 1));
}

fn check_sum(sum: &Expanded, max_entries: u64) -> Result<()> {
    if sum.files.saturating_add(sum.folders) > max_entries {
        return Err(too_many(max_entries));
    }
    if sum.path_bytes > MAX_TREE_PATH_BYTES {
        return Err(Error::Integrity(format!(
            "the commit's tree expands to over {MAX_TREE_PATH_BYTES} bytes of paths (a tree that \
             repeats its subtrees?): refused before building the index, nothing was written"
        )));
    }
    Ok(())
}

fn too_many(max_entries: u64) -> Error {
    Error::Integrity(format!(
        "the commit's tree expands to over {max_entries} files and folders (a tree that repeats \
         its subtrees?): refused before building the index, nothing was written \
         (--max-entries raises the limit)"
    ))
}

/// Read the tree `id` (at `path`, for messages): its files counted, its subtrees listed, two
/// entries of one name refused.
fn read_frame(
    objects: &impl gix::objs::Find,
    id: gix::ObjectId,
    path: gix::bstr::BString,
    buf: &mut Vec<u8>,
    read: &mut u64,
) -> Result<Frame> {
    let unreadable = |why: String| {
        Error::Integrity(format!(
            "the commit's tree holds an unsafe or unreadable entry, nothing was written: the \
             tree {id} at '{path}' {why}"
        ))
    };
    let data = objects
        .try_find(&id, buf)
        .map_err(|e| unreadable(format!("cannot be read: {}", chain(&e))))?
        .ok_or_else(|| unreadable("is not in the pack".to_owned()))?;
    if data.kind != gix::objs::Kind::Tree {
        return Err(unreadable(format!("is a {}", data.kind)));
    }
    let mut names: Vec<(&[u8], gix::objs::tree::EntryKind)> = Vec::new();
    let mut frame = Frame {
        id,
        path: Default::default(),
        subtrees: Vec::new(),
        next: 0,
        sum: Expanded::default(),
    };
    for entry in gix::objs::TreeRefIter::from_bytes(data.data, id.kind()) {
        let entry = entry.map_err(|e| unreadable(format!("is malformed: {e}")))?;
        *read += 1;
        names.push((entry.filename.as_ref(), entry.mode.kind()));
        if entry.mode.is_tree() {
            frame
                .subtrees
                .push((entry.oid.to_owned(), entry.filename.to_owned()));
        } else {
            frame.sum.files += 1;
            frame.sum.path_bytes += entry.filename.len() as u64;
        }
    }
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|p| p[0].0 == p[1].0) {
        use gix::objs::tree::EntryKind;
        let kind = |kind: EntryKind| match kind {
            EntryKind::Tree => "a folder",
            EntryKind::Blob | EntryKind::BlobExecutable => "a file",
            EntryKind::Link => "a symlink",
            EntryKind::Commit => "a submodule",
        };
        return Err(Error::Integrity(format!(
            "the commit's tree holds two entries named '{}' in '{}' ({} and {}): git refuses \
             such a tree (fsck: duplicateEntries), and a checkout cannot hold both; nothing was \
             written",
            gix::bstr::BStr::new(pair[0].0),
            path,
            kind(pair[0].1),
            kind(pair[1].1)
        )));
    }
    frame.path = path;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both object formats: the tree's ids are 20 or 32 bytes.
    const FORMATS: [gix::hash::Kind; 2] = [gix::hash::Kind::Sha1, gix::hash::Kind::Sha256];

    /// Trees in memory, by id, in one object format, and how many times one was read.
    struct Trees(
        std::collections::HashMap<gix::ObjectId, Vec<u8>>,
        std::cell::Cell<usize>,
        gix::hash::Kind,
    );

    /// A blob id of `format` (never read: only trees are).
    fn blob(format: gix::hash::Kind) -> gix::ObjectId {
        let hex = "0123456789".repeat(7);
        gix::ObjectId::from_hex(&hex.as_bytes()[..format.len_in_hex()]).unwrap()
    }

    impl Trees {
        fn new(format: gix::hash::Kind) -> Self {
            Trees(Default::default(), Default::default(), format)
        }

        /// Store a tree of `entries` (mode, name, id) as written; returns its id.
        fn put(&mut self, entries: &[(&str, &str, gix::ObjectId)]) -> gix::ObjectId {
            let mut data = Vec::new();
            for (mode, name, id) in entries {
                data.extend_from_slice(format!("{mode} {name}\0").as_bytes());
                data.extend_from_slice(id.as_slice());
            }
            let id = gix::objs::compute_hash(self.2, gix::objs::Kind::Tree, &data).unwrap();
            self.0.insert(id, data);
            id
        }

        /// A tree of `n` entries named `d00`… of `mode`, each `id`.
        fn of(&mut self, n: usize, mode: &str, id: gix::ObjectId) -> gix::ObjectId {
            let names: Vec<String> = (0..n).map(|i| format!("d{i:02}")).collect();
            let entries: Vec<_> = names.iter().map(|n| (mode, n.as_str(), id)).collect();
            self.put(&entries)
        }
    }

    impl gix::objs::Find for Trees {
        fn try_find<'a>(
            &self,
            id: &gix::oid,
            buffer: &'a mut Vec<u8>,
        ) -> gix::Result<Option<gix::objs::Data<'a>>> {
            self.1.set(self.1.get() + 1);
            let Some(data) = self.0.get(id) else {
                return Ok(None);
            };
            buffer.clear();
            buffer.extend_from_slice(data);
            Ok(Some(gix::objs::Data::new(
                buffer,
                gix::objs::Kind::Tree,
                self.2,
            )))
        }
    }

    fn refused(trees: &Trees, root: gix::ObjectId, max: u64) -> String {
        match measure_tree(trees, root, max) {
            Err(Error::Integrity(msg)) => msg,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_tree_is_measured_exactly_and_each_distinct_tree_read_once() {
        FORMATS.into_iter().for_each(measured_exactly);
    }

    fn measured_exactly(format: gix::hash::Kind) {
        let blob = blob(format);
        let mut t = Trees::new(format);
        // 16 folders of 16 folders of 16 files: 4096 files and 272 folders.
        let leaf = t.of(16, "100644", blob);
        let mid = t.of(16, "40000", leaf);
        let root = t.of(16, "40000", mid);
        measure_tree(&t, root, 4096 + 272).unwrap();
        assert_eq!(t.1.replace(0), 3);
        assert!(refused(&t, root, 4096 + 271).contains("over 4367 files and folders"));
        // 16 levels of 16 folders: 16^16 files, refused at once.
        let mut bomb = leaf;
        for _ in 0..15 {
            bomb = t.of(16, "40000", bomb);
        }
        assert!(refused(&t, bomb, 1_000_000).contains("--max-entries"));
        // A chain of folders deeper than git's core.maxTreeDepth.
        let mut deep = leaf;
        for _ in 0..MAX_TREE_DEPTH {
            deep = t.of(1, "40000", deep);
        }
        assert!(refused(&t, deep, u64::MAX).contains("over 4096 deep"));
    }

    #[test]
    fn two_entries_of_one_name_are_refused_even_when_not_adjacent() {
        FORMATS.into_iter().for_each(two_entries_refused);
    }

    fn two_entries_refused(format: gix::hash::Kind) {
        let blob = blob(format);
        let mut t = Trees::new(format);
        let sub = t.of(2, "100644", blob);
        // Git's order puts `a.b` between the file `a` and the folder `a` (sorted as `a/`).
        let root = t.put(&[
            ("100644", "a", blob),
            ("100644", "a.b", blob),
            ("40000", "a", sub),
        ]);
        let msg = refused(&t, root, 100);
        assert!(msg.contains("two entries named 'a' in ''"), "{msg}");
        assert!(msg.contains("(a folder and a file)"), "{msg}");
        let nested = t.put(&[("120000", "x", blob), ("40000", "x", sub)]);
        let root = t.put(&[("40000", "top", nested)]);
        let msg = refused(&t, root, 100);
        assert!(
            msg.contains("named 'x' in 'top' (a folder and a symlink)"),
            "{msg}"
        );
        // A subtree the objects lack.
        let root = t.put(&[("40000", "gone", blob)]);
        assert!(refused(&t, root, 100).contains("is not in the pack"));
    }
}
