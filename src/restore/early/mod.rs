//! The early checkout: regular files written as their blobs stream in, while the rest of the pack
//! is still on the wire, so the checkout after the transfer has little left to do.
//!
//! git's `pack-objects` writes a fetch's pack as commits, then trees, then blobs, each delta after
//! its base (`compute_write_order` in git's `builtin/pack-objects.c`): the paths of most blobs are
//! known before the blobs arrive. Two threads see every entry the pack stream inflates
//! ([`EntryObserver`]):
//! - the **resolver** hashes it, resolves offset deltas against recent objects (a bounded cache),
//!   reads the commit `TIP_SHA` and the trees it names, and hands each blob whose path is known to
//!   the writer when nothing can make its checked-out form differ from the blob: a regular file
//!   (symlinks and submodules wait), no `.gitattributes` on its way that could convert it
//!   (`eol=crlf`, `ident`, `filter=lfs`, `working-tree-encoding`, macros: see `attributes`). The
//!   `.gitattributes` files wait too: gix's checkout reads them from the index it is given. It
//!   never drops an entry (the stream waits for it instead), so it names every object of the
//!   pack, and [`crate::pack::receive()`] writes the pack's index from those ids rather than
//!   resolving every delta again after the last byte;
//! - the **writer** creates the files; when it falls behind, files are left to the checkout
//!   after the transfer, which sets the files written here aside ([`Written`]) and writes the
//!   index of all of them.
//!
//! What keeps it as safe as the checkout after the transfer:
//! - only into an empty target (no `--force`, no resume) and for a whole (not thin) pack;
//! - an object is used only when its id, hashed here, is named by the commit `TIP_SHA` or by a tree
//!   used so, so nothing the server did not commit to is written;
//! - every name passes git's path protections ([`super::checkout::protections`]) and the staging
//!   folder's name is never used; folders are made one at a time and never followed through a
//!   symlink; files are created with `O_EXCL | O_NOFOLLOW`;
//! - the intent records when writing began before the first file, so a kill leaves files the
//!   rerun's judge ([`super::intent::CutShort`]) knows as this run's own, and completes;
//! - a failure of the restore removes every file and folder written here ([`Outcome::made`],
//!   [`crate::fs::tree::Tree::undo`]), so "nothing was written" still holds for an unsafe tree or
//!   an incomplete pack.
//!
//! The files: `resolver` and `writer`, the two threads; `attributes`, the rules that hold a file
//! back; `limits`, what it may hold in memory. [`EarlyCheckout`], below, starts both threads and
//! feeds the resolver.

mod attributes;
mod limits;
mod resolver;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use gix::odb::pack::data::entry::Header;

use crate::pack::EntryObserver;
use limits::{MAX_ENTRY_BYTES, QUEUE_BYTES};
use resolver::{Budget, Message, Resolver};
use writer::Writer;

pub use writer::{Outcome, Target, Written};

/// The early checkout of one restore: an [`EntryObserver`] for the fetch, and its threads —
/// the resolver (names every object: it never drops an entry, so the pack's index can be
/// written from its ids) and a few writers (write files, each those of some folders; when they
/// fall behind, files are left to the checkout after the transfer).
pub struct EarlyCheckout {
    tx: Option<mpsc::Sender<Message>>,
    budget: Arc<Budget>,
    resolver: Option<std::thread::JoinHandle<()>>,
    writers: Vec<std::thread::JoinHandle<Outcome>>,
}

impl std::fmt::Debug for EarlyCheckout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyCheckout").finish_non_exhaustive()
    }
}

/// How many writers: creating files is mostly the kernel's work, which a second core shares (and
/// on a busy machine, each thread gets its own share of the cores).
/// One only with the `mid-early-checkout` failpoint armed: it kills the run at the third file
/// written, which another writer must not pass meanwhile.
fn writers_wanted() -> usize {
    if crate::failpoint::armed("mid-early-checkout") {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(2, 4))
}

impl EarlyCheckout {
    /// Start the resolver and the writers for `target`.
    pub fn start(target: Target) -> Self {
        let (tx, rx) = mpsc::channel();
        let budget = Arc::new(Budget::default());
        let writing = Arc::new(AtomicUsize::new(0));
        let tip = target.tip;
        let gate = Arc::new(writer::Gate::new(target.before_first_file));
        let mut trees = vec![target.tree];
        while trees.len() < writers_wanted() {
            match trees[0].try_clone() {
                Ok(t) => trees.push(t),
                Err(_) => break,
            }
        }
        let (mut jobs, mut writers) = (Vec::new(), Vec::new());
        for (n, tree) in trees.into_iter().enumerate() {
            let (jobs_tx, jobs_rx) = mpsc::sync_channel(16 * 1024);
            let writer = Writer::new(tree, gate.clone(), writing.clone());
            if let Ok(handle) = std::thread::Builder::new()
                .name(format!("early-checkout-writer-{n}"))
                .spawn(move || writer.run(jobs_rx))
            {
                jobs.push(jobs_tx);
                writers.push(handle);
            }
        }
        let resolver = (!jobs.is_empty())
            .then(|| {
                let resolver = Resolver::new(tip, budget.clone(), jobs, writing);
                std::thread::Builder::new()
                    .name("early-checkout".into())
                    .spawn(move || resolver.run(rx))
                    .ok()
            })
            .flatten();
        EarlyCheckout {
            tx: resolver.is_some().then_some(tx),
            budget,
            resolver,
            writers,
        }
    }

    /// Wait for the threads to finish what they were given, and return what was written.
    pub fn finish(mut self) -> Outcome {
        self.tx = None;
        if let Some(r) = self.resolver.take() {
            let _ = r.join();
        }
        let outcomes = std::mem::take(&mut self.writers)
            .into_iter()
            .filter_map(|w| w.join().ok())
            .collect();
        let outcome = Outcome::merge(outcomes);
        tracing::debug!("early checkout: {} files written", outcome.files.len());
        outcome
    }
}

impl EntryObserver for EarlyCheckout {
    fn begin(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Message::Begin);
        }
    }

    fn pack_so_far(&self, pack: crate::pack::PackSoFar) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Message::Pack(pack));
        }
    }

    fn wants(&self, size: u64) -> bool {
        self.tx.is_some() && size <= MAX_ENTRY_BYTES
    }

    fn entry(&self, offset: u64, header: Header, data: Vec<u8>) {
        let Some(tx) = &self.tx else { return };
        let len = data.len();
        if let Ok(mut queued) = self.budget.queued.lock() {
            while *queued > 0
                && *queued + len > QUEUE_BYTES
                && !self.budget.gone.load(Ordering::Relaxed)
            {
                queued = match self.budget.room.wait(queued) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
            *queued += len;
        }
        let _ = tx.send(Message::Entry {
            offset,
            header,
            data,
        });
    }

    fn hashed(&self, offset: u64, id: gix::ObjectId) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Message::Hashed { offset, id });
        }
    }

    fn ids(&self) -> Option<Vec<(u64, gix::ObjectId)>> {
        let tx = self.tx.as_ref()?;
        let (reply, answer) = mpsc::channel();
        tx.send(Message::Ids(reply)).ok()?;
        answer.recv().ok()
    }
}
