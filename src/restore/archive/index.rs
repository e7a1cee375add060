//! The index of an archive-restored tree, from the blob ids hashed during the extraction
//! ([`super::blobs`]) and each file's stat data once it is in place: plain git sees a clean tree
//! from the first command, and `git diff` shows only the person's edits.
//!
//! The tree ids are computed from the same entries (git's tree format) and written as the index's
//! cache-tree extension (`TREE`): `git commit` then reuses every folder it did not touch instead
//! of checking each blob (which, before history is attached, would fetch it). The root tree id is
//! returned, to be checked against the commit's tree once history is attached.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use gix::index::entry::Mode;

use super::blobs::{Blob, IdHasher};
use crate::error::{Error, Result};
use crate::fs::tree::Tree;
use crate::types::Format;

/// Write `git_dir/index` for `blobs` (the whole tree, ids of `format`), with stat data read from
/// `tree`; returns the root tree's id.
///
/// # Errors
/// [`Error::LocalIo`] when the index cannot be written.
pub fn write(
    git_dir: &Path,
    tree: &Tree,
    mut blobs: Vec<Blob>,
    format: Format,
) -> Result<gix::ObjectId> {
    // Full-path byte order is both the index's order and git's tree order.
    // A path twice in the archive: the later copy is on disk (as tar does), so it is indexed.
    // The sort is stable; the kept slot takes the later one's data.
    blobs.sort_by(|a, b| a.path.cmp(&b.path));
    blobs.dedup_by(|later, kept| {
        let same = later.path == kept.path;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
    let mut state = gix::index::State::new(format);
    for blob in &blobs {
        let rel = Path::new(std::ffi::OsStr::from_bytes(&blob.path));
        // A file at the top was renamed into place itself, which changes its ctime; one below
        // moved with its folder and keeps the stat data read as it was written (one renamed
        // into an existing folder is hashed again by git, as a file whose stat changed is). A
        // file that cannot be looked at keeps empty stat data: git hashes it again.
        let stat = match blob.stat {
            Some(stat) if blob.path.contains(&b'/') => stat,
            _ => tree.stat(rel).unwrap_or_default(),
        };
        state.dangerously_push_entry(
            stat,
            blob.id,
            gix::index::entry::Flags::empty(),
            blob.mode,
            blob.path.as_slice().into(),
        );
    }
    state.sort_entries();
    let (root, cache_tree) = build_tree(&blobs, 0, b"", format);
    let mut bytes = Vec::new();
    state
        .write_to(&mut bytes, gix::index::write::Options::default())
        .map_err(|e| Error::from_chain("writing the index", &e))?;
    let mut ext = Vec::new();
    encode_cache_tree(&cache_tree, &mut ext);
    bytes.extend_from_slice(b"TREE");
    bytes.extend_from_slice(&u32::try_from(ext.len()).unwrap_or(u32::MAX).to_be_bytes());
    bytes.extend_from_slice(&ext);
    // The trailer is the format's hash of everything before it.
    let mut checksum = IdHasher::new(format);
    checksum.update(&bytes);
    bytes.extend_from_slice(checksum.finish().as_slice());
    crate::fs::write_atomic(&git_dir.join("index"), &bytes)?;
    Ok(root)
}

/// A folder of the cache tree: its name, id, the entries below it and its sub-folders.
struct Node {
    name: Vec<u8>,
    id: gix::ObjectId,
    entries: usize,
    children: Vec<Node>,
}

/// The tree object of the folder holding `blobs` (all below it, `skip` bytes of their paths being
/// the folder's own prefix), and its cache-tree node.
fn build_tree(blobs: &[Blob], skip: usize, name: &[u8], format: Format) -> (gix::ObjectId, Node) {
    let mut body = Vec::new();
    let mut children = Vec::new();
    let mut i = 0;
    while i < blobs.len() {
        let rest = &blobs[i].path[skip..];
        match rest.iter().position(|b| *b == b'/') {
            Some(slash) => {
                let dir = &rest[..slash];
                let inside = |b: &Blob| {
                    let r = &b.path[skip..];
                    r.len() > slash && &r[..slash] == dir && r[slash] == b'/'
                };
                let end = i + blobs[i..].iter().take_while(|b| inside(b)).count();
                let (id, node) = build_tree(&blobs[i..end], skip + slash + 1, dir, format);
                push_entry(&mut body, b"40000", dir, &id);
                children.push(node);
                i = end;
            }
            None => {
                let mode: &[u8] = match blobs[i].mode {
                    Mode::FILE_EXECUTABLE => b"100755",
                    Mode::SYMLINK => b"120000",
                    _ => b"100644",
                };
                push_entry(&mut body, mode, rest, &blobs[i].id);
                i += 1;
            }
        }
    }
    let id = gix::objs::compute_hash(format, gix::objs::Kind::Tree, &body)
        .unwrap_or_else(|_| gix::ObjectId::empty_tree(format));
    let node = Node {
        name: name.to_vec(),
        id,
        entries: blobs.len(),
        children,
    };
    (id, node)
}

fn push_entry(body: &mut Vec<u8>, mode: &[u8], name: &[u8], id: &gix::ObjectId) {
    body.extend_from_slice(mode);
    body.push(b' ');
    body.extend_from_slice(name);
    body.push(0);
    body.extend_from_slice(id.as_bytes());
}

/// git's `TREE` extension: each node as `name NUL entries SP subtrees LF id`, parents first.
fn encode_cache_tree(node: &Node, out: &mut Vec<u8>) {
    out.extend_from_slice(&node.name);
    out.push(0);
    out.extend_from_slice(format!("{} {}\n", node.entries, node.children.len()).as_bytes());
    out.extend_from_slice(node.id.as_bytes());
    for child in &node.children {
        encode_cache_tree(child, out);
    }
}
