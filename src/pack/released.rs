//! A repository's objects read through an object store opened afresh whenever enough was read:
//! the pages of the packs the reads made resident go with each store dropped.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;

/// How many bytes of objects (decoded, plus a fault-around window each: see
/// [`ReleasingMap`](super::ReleasingMap)) are read through one store before it is replaced: the bench's baked
/// boot (3,217 bases) peaks as low with 8 MiB as with 4, with half as many stores opened.
const RELEASE_EVERY: usize = 8 << 20;
/// The bytes the kernel maps around a read fault of a file mapping (64 KiB by default).
const WINDOW: usize = 64 << 10;

/// The objects of one `objects` folder, for a pass that reads objects scattered over a large pack
/// once (a thin pack's delta bases): gix's store maps each pack whole and never lets go of a page
/// a read made resident, so reading 3,217 bases spread over a template's 25 MiB pack made all of
/// it resident. This store is replaced by a fresh one (its packs mapped again, their pages
/// faulted back from the page cache when read) after every [`RELEASE_EVERY`] bytes read.
pub struct ReleasingObjects {
    dir: PathBuf,
    format: gix::hash::Kind,
    store: RefCell<gix::OdbHandle>,
    served: Cell<usize>,
    /// What each read is counted as beyond its bytes: [`WINDOW`] for reads scattered over a pack,
    /// a page for reads in the pack's order.
    window: usize,
}

impl ReleasingObjects {
    /// The objects in the folder `dir` (a repository's `objects`), of `format`.
    ///
    /// # Errors
    /// The store's failure to open.
    pub fn at(dir: PathBuf, format: gix::hash::Kind) -> std::io::Result<Self> {
        let store = open(&dir, format)?;
        Ok(ReleasingObjects {
            dir,
            format,
            store: RefCell::new(store),
            served: Cell::new(0),
            window: WINDOW,
        })
    }

    /// [`ReleasingObjects::at`], for reads mostly in the order of the pack (a checkout of every
    /// file of a tree, from a pack written in the tree's order as `pack-objects` writes it): each
    /// read is counted as its bytes and a page, not a fault-around window, as most reads land in
    /// the window the previous one faulted in. Counted as scattered, the bench's cache boot
    /// (24,141 files) opened a store every ~120 files, 200 in all: user+sys 1.44-1.52 s, against
    /// 1.41-1.47 s counted in order and 1.42-1.47 s through the repository's own store. Reads
    /// scattered after all may leave a fault-around window per read resident before the store
    /// is replaced: never more than the packs they read, as the repository's own store does.
    ///
    /// # Errors
    /// The store's failure to open.
    pub fn in_pack_order(dir: PathBuf, format: gix::hash::Kind) -> std::io::Result<Self> {
        Ok(ReleasingObjects {
            window: 4 << 10,
            ..Self::at(dir, format)?
        })
    }

    /// Count `bytes` read, replacing the store once enough were (keeping it when a new one does
    /// not open: its pages stay, nothing else changes).
    fn note(&self, bytes: usize) {
        let served = self.served.get() + bytes + self.window;
        if served < RELEASE_EVERY {
            self.served.set(served);
            return;
        }
        self.served.set(0);
        if let Ok(fresh) = open(&self.dir, self.format) {
            *self.store.borrow_mut() = fresh;
        }
    }
}

fn open(dir: &std::path::Path, format: gix::hash::Kind) -> std::io::Result<gix::OdbHandle> {
    let store = gix::odb::at(dir, format)?;
    Ok(gix::odb::memory::Proxy::new(store, format))
}

impl gix::objs::Find for ReleasingObjects {
    fn try_find<'a>(
        &self,
        id: &gix::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::error::Result<Option<gix::objs::Data<'a>>> {
        let found = self.store.borrow().try_find(id, buffer)?;
        self.note(found.as_ref().map_or(0, |d| d.data.len()));
        Ok(found)
    }
}

impl gix::objs::FindHeader for ReleasingObjects {
    fn try_header(&self, id: &gix::oid) -> gix::error::Result<Option<gix::objs::Header>> {
        let header = self.store.borrow().try_header(id)?;
        self.note(0);
        Ok(header)
    }
}

/// What the tests of a pass that reads a large pack measure: a pack of 40 MiB and how much of it
/// is resident.
#[cfg(test)]
// A test reads /proc and its own fixture, not a work tree's files.
#[allow(clippy::disallowed_methods)]
pub(crate) mod fixture {
    use std::path::{Path, PathBuf};

    /// Resident KiB of this process's mappings of files whose name ends with `suffix` (give the
    /// whole path: tests running at once make packs of the same content, so of the same name).
    pub(crate) fn resident_kib(suffix: &str) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (mut ours, mut kib) = (false, 0);
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or_default();
            if !first.ends_with(':') {
                // A mapping's header: `start-end perms offset dev inode [path]`.
                ours = line.ends_with(suffix);
            } else if ours && first == "Rss:" {
                let n = line.split_whitespace().nth(1).unwrap_or_default();
                kib += n.parse::<u64>().unwrap();
            }
        }
        kib
    }

    /// A large pack made by `git fast-import`.
    pub(crate) struct BigPack {
        /// The repository's `objects` folder.
        pub(crate) objects: PathBuf,
        /// The pack's file name.
        pub(crate) pack: String,
        /// The blobs' ids.
        pub(crate) blobs: Vec<gix::ObjectId>,
        /// A commit whose tree holds every blob, as `f1` to `f320`.
        pub(crate) commit: gix::ObjectId,
    }

    impl BigPack {
        /// The pack's whole path, as the process's mappings name it.
        pub(crate) fn path(&self) -> String {
            self.objects
                .join("pack")
                .join(&self.pack)
                .display()
                .to_string()
        }
    }

    /// A pack of 40 MiB of incompressible blobs (320 of 128 KiB) and a commit of them all, in a
    /// repository at `dir` (`bare`, or with its git dir in `.git` and no files).
    pub(crate) fn big_pack(dir: &Path, bare: bool) -> BigPack {
        let git = |args: &[&str], input: Option<&[u8]>| {
            use std::io::Write as _;
            let mut child = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            if let Some(input) = input {
                child.stdin.take().unwrap().write_all(input).unwrap();
            }
            drop(child.stdin.take());
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "git {args:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let (init, marks): (&[&str], _) = if bare {
            (&["init", "-q", "--bare", "."], "marks")
        } else {
            (&["init", "-q", "."], ".git/marks")
        };
        git(init, None);
        const BLOBS: usize = 320;
        let mut stream = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for mark in 1..=BLOBS {
            let mut blob = vec![0u8; 128 << 10];
            for chunk in blob.chunks_mut(8) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                chunk.copy_from_slice(&seed.to_le_bytes()[..chunk.len()]);
            }
            stream
                .extend_from_slice(format!("blob\nmark :{mark}\ndata {}\n", blob.len()).as_bytes());
            stream.extend_from_slice(&blob);
            stream.push(b'\n');
        }
        stream.extend_from_slice(
            format!(
                "commit refs/heads/main\nmark :{}\ncommitter A <a@b.invalid> 1600000000 +0000\n\
                 data 4\nbig\n",
                BLOBS + 1
            )
            .as_bytes(),
        );
        for mark in 1..=BLOBS {
            stream.extend_from_slice(format!("M 100644 :{mark} f{mark}\n").as_bytes());
        }
        stream.push(b'\n');
        git(
            &["fast-import", "--quiet", &format!("--export-marks={marks}")],
            Some(&stream),
        );
        let mut ids = vec![gix::ObjectId::null(gix::hash::Kind::Sha1); BLOBS + 1];
        for line in std::fs::read_to_string(dir.join(marks)).unwrap().lines() {
            let (mark, id) = line.split_once(' ').unwrap();
            let mark: usize = mark.trim_start_matches(':').parse().unwrap();
            ids[mark - 1] = gix::ObjectId::from_hex(id.as_bytes()).unwrap();
        }
        let commit = ids.pop().unwrap();
        let objects = dir.join(if bare { "objects" } else { ".git/objects" });
        let pack = std::fs::read_dir(objects.join("pack"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.ends_with(".pack"))
            .unwrap();
        BigPack {
            objects,
            pack,
            blobs: ids,
            commit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::released::fixture::{big_pack, resident_kib};

    /// Reading 40 MiB of objects scattered over a pack leaves at most about one store's share of
    /// it resident (gix's own store keeps every page a read touched: the baked boot's 24 of the
    /// template's 25 MiB, which this store is for). The plain store's figure is measured too, so
    /// that the test shows what it guards against.
    #[test]
    fn objects_read_leave_at_most_one_stores_share_of_the_pack_resident() {
        let tmp = tempfile::tempdir().unwrap();
        let big = big_pack(tmp.path(), true);
        let pack = big.path();
        let crate::pack::released::fixture::BigPack {
            objects,
            blobs: ids,
            ..
        } = big;
        let mut buf = Vec::new();
        {
            use gix::objs::Find as _;
            let plain = open(&objects, gix::hash::Kind::Sha1).unwrap();
            for id in &ids {
                assert!(plain.try_find(id, &mut buf).unwrap().is_some());
            }
            let kib = resident_kib(&pack);
            assert!(kib > 30 << 10, "gix's store left only {kib} KiB resident");
        }
        let releasing = ReleasingObjects::at(objects, gix::hash::Kind::Sha1).unwrap();
        let mut most = 0;
        for id in &ids {
            use gix::objs::Find as _;
            assert!(releasing.try_find(id, &mut buf).unwrap().is_some());
            most = most.max(resident_kib(&pack));
        }
        let bound = (RELEASE_EVERY + 2 * WINDOW + (256 << 10)) as u64 >> 10;
        assert!(
            most <= bound,
            "{most} KiB of the pack resident (at most {bound})"
        );
    }
}
