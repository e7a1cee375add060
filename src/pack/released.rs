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
        })
    }

    /// Count `bytes` read, replacing the store once enough were (keeping it when a new one does
    /// not open: its pages stay, nothing else changes).
    fn note(&self, bytes: usize) {
        let served = self.served.get() + bytes + WINDOW;
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
