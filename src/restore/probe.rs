//! What the work tree of a baked template holds at each path the boot may touch: by size and
//! mtime against the template's index when they match, else by reading the file (see
//! [`super::boot`]). The stat calls of the whole index are made while the fetch waits on the
//! server ([`Survey`]): they depend on the template alone, not on `TIP_SHA`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice as _};

use super::checkout;
use crate::error::{Error, Result};

/// What the work tree holds at a path, as far as the switch needs to know.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Local {
    /// Nothing there.
    Missing,
    /// The content of this blob (with this mode).
    Blob(gix::ObjectId),
    /// A folder (tracked files below it are judged on their own).
    Dir,
    /// Something else (a local change).
    Other,
}

/// The first leading folder of `rel` that is not a real folder (a symlink or a file), if any.
pub(super) fn leading_blocker(workdir: &Path, rel: &Path, folders: &Folders) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    let mut components = rel.components().peekable();
    while let Some(c) = components.next() {
        // The last component is the path itself, not a leading folder.
        components.peek()?;
        prefix.push(c);
        let known = folders.0.borrow().get(&prefix).copied();
        let kind = known.unwrap_or_else(|| {
            let kind = match std::fs::symlink_metadata(workdir.join(&prefix)) {
                Ok(m) if m.is_dir() => Some(true),
                Ok(_) => Some(false),
                Err(_) => None,
            };
            folders.0.borrow_mut().insert(prefix.clone(), kind);
            kind
        });
        match kind {
            Some(true) => {}
            Some(false) => return Some(prefix),
            None => return None,
        }
    }
    None
}

/// What each leading folder of the paths is (a folder, something else, or nothing), looked up once
/// per plan: the plan reads every path of the tree, and most share their folders.
#[derive(Default)]
pub(super) struct Folders(std::cell::RefCell<HashMap<PathBuf, Option<bool>>>);

/// Reads what the work tree holds at a path: by size and mtime against the template's index when
/// they match, else by comparing the file with the blobs it may hold, in their work-tree form.
pub(super) struct Probe<'repo> {
    repo: &'repo gix::Repository,
    workdir: PathBuf,
    tip_form: super::write::WorktreeForm<'repo>,
    base_form: super::write::WorktreeForm<'repo>,
    tip: HashMap<BString, (gix::ObjectId, gix::index::entry::Mode)>,
    pub(super) folders: Folders,
    survey: HashMap<BString, Seen>,
    /// The metadata `local` read last, for `mode_differs` on the same path.
    last: Option<(BString, std::fs::Metadata)>,
    /// The template index's own mtime: an entry whose file was modified at or after it is
    /// racily clean (git's rule), so its stat data proves nothing.
    index_time: (i64, u32),
}

impl<'repo> Probe<'repo> {
    /// A probe of `workdir` for the switch from `base` (the template's index) to `tip`, answering
    /// from `survey` for the paths it read.
    pub(super) fn new(
        repo: &'repo gix::Repository,
        workdir: &Path,
        tip: &gix::index::File,
        base: &gix::index::File,
        survey: Survey,
    ) -> Result<Self> {
        Ok(Probe {
            repo,
            workdir: workdir.to_owned(),
            tip_form: super::write::WorktreeForm::new(repo, tip)?,
            base_form: super::write::WorktreeForm::new(repo, base)?,
            tip: tip
                .entries()
                .iter()
                .map(|e| (e.path(tip).to_owned(), (e.id, e.mode)))
                .collect(),
            folders: survey.folders,
            survey: survey.seen,
            last: None,
            index_time: {
                let t = base.timestamp();
                (t.unix_seconds(), t.nanoseconds())
            },
        })
    }

    /// Whether the file at `path` is of another kind or exec bit than `mode`.
    pub(super) fn mode_differs(&self, path: &BStr, mode: gix::index::entry::Mode) -> bool {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = match &self.last {
            Some((last, meta)) if last == path => meta.clone(),
            _ => match std::fs::symlink_metadata(self.workdir.join(path.to_path_lossy())) {
                Ok(meta) => meta,
                Err(_) => return true,
            },
        };
        let is_link = meta.file_type().is_symlink();
        match mode {
            gix::index::entry::Mode::SYMLINK => !is_link,
            gix::index::entry::Mode::FILE_EXECUTABLE => {
                is_link || meta.permissions().mode() & 0o100 == 0
            }
            gix::index::entry::Mode::FILE => is_link || meta.permissions().mode() & 0o100 != 0,
            _ => false,
        }
    }

    /// The stat data of the file at `path` (`None` unless [`Probe::local`] read it last, and it
    /// is still the file it read): for the index entry of a file judged by its content.
    pub(super) fn last_stat(&self, path: &BStr) -> Option<gix::index::entry::Stat> {
        use std::os::unix::fs::MetadataExt as _;
        let (last, read) = self.last.as_ref()?;
        if last != path {
            return None;
        }
        let full = self.workdir.join(path.to_path_lossy());
        let meta = gix::index::fs::Metadata::from_path_no_follow(&full).ok()?;
        let same = meta.ino() == read.ino()
            && meta.len() == read.size()
            && meta.modified() == read.modified().ok();
        same.then(|| gix::index::entry::Stat::from_fs(&meta).ok())
            .flatten()
    }

    /// Whether a real folder is at `path` (from the survey when it read the path).
    pub(super) fn is_dir(&self, path: &BStr) -> bool {
        match self.survey.get(path) {
            Some(Seen::Found(meta)) => meta.is_dir(),
            Some(Seen::Missing) => false,
            None => std::fs::symlink_metadata(self.workdir.join(path.to_path_lossy()))
                .is_ok_and(|m| m.is_dir()),
        }
    }

    /// The longest form of `path`'s blobs (`TIP_SHA`'s and the base's) a file can be compared
    /// with: twice a blob's size (a conversion to CRLF at most doubles it), and the base's size
    /// as the template wrote it.
    fn longest_form(&self, path: &BStr, base: Option<&gix::index::Entry>) -> u64 {
        let tip = self.tip.get(path).map(|(id, _)| *id);
        let blobs = tip.into_iter().chain(base.map(|b| b.id)).map(|id| {
            gix::odb::Header::try_header(&self.repo.objects, &id)
                .ok()
                .flatten()
                .map_or(0, |h| h.size().saturating_mul(2))
        });
        blobs
            .chain(base.map(|b| u64::from(b.stat.size)))
            .max()
            .unwrap_or(0)
    }

    /// What is at `path`, whose entry in the template's index is `base`.
    pub(super) fn local(&mut self, path: &BStr, base: Option<&gix::index::Entry>) -> Result<Local> {
        let rel = path.to_path_lossy();
        let full = self.workdir.join(&rel);
        let meta = match self.survey.get(path) {
            Some(Seen::Missing) => return Ok(Local::Missing),
            Some(Seen::Found(meta)) => meta.clone(),
            None => match look(&self.workdir, &rel, &self.folders) {
                Ok(Seen::Missing) => return Ok(Local::Missing),
                Ok(Seen::Found(meta)) => meta,
                Err(e) => return Err(Error::io(format!("reading {}", full.display()), e)),
            },
        };
        if meta.is_dir() {
            return Ok(Local::Dir);
        }
        self.last = Some((path.to_owned(), meta.clone()));
        if let Some(b) = base
            && same_size_and_mtime(&b.stat, &meta)
            && !racily_clean(&b.stat, self.index_time)
            && !never_stated(b)
        {
            return Ok(Local::Blob(b.id));
        }
        let on_disk = if meta.file_type().is_symlink() {
            std::fs::read_link(&full).map(|t| t.into_os_string().into_encoded_bytes())
        } else if meta.file_type().is_file() {
            // Longer than every form it is compared with below: none of them, and never read
            // (its size is the folder owner's).
            match crate::fs::read_regular(&full, false, self.longest_form(path, base)) {
                Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => return Ok(Local::Other),
                read => read,
            }
        } else {
            // A FIFO, socket or device: never opened (a FIFO would hold the boot forever).
            return Ok(Local::Other);
        }
        .map_err(|e| Error::io(format!("reading {}", full.display()), e))?;
        let candidates = [
            self.tip.get(path).map(|(id, mode)| (*id, *mode, true)),
            base.map(|b| (b.id, b.mode, false)),
        ];
        // The bytes as they are, hashed as git would store them: the base's blob when they are
        // its (git's status, which normalises what it reads, finds such a file unchanged), and it
        // needs no object (a damaged baked pack may have lost the base's). Not so for `TIP_SHA`'s
        // alone: its checkout writes its blob converted, so a file holding the blob as it is was
        // not written by a killed boot when a conversion applies (a local edit: git's checkout
        // refuses it) — the loop below compares with its form.
        let ids = || candidates.iter().flatten().map(|(id, _, _)| *id);
        let base_id = candidates[1].map(|(id, _, _)| id);
        if let Some(kind) = ids().next().map(|id| id.kind())
            && let Ok(stored) = gix::objs::compute_hash(kind, gix::objs::Kind::Blob, &on_disk)
            && base_id == Some(stored)
        {
            return Ok(Local::Blob(stored));
        }
        for (id, mode, is_tip) in candidates.into_iter().flatten() {
            let mut buf = Vec::new();
            let objects = super::verify::Verified(&self.repo.objects);
            let Ok(Some(blob)) = gix::objs::Find::try_find(&objects, &id, &mut buf) else {
                continue;
            };
            let blob = blob.data.to_vec();
            let form = if mode == gix::index::entry::Mode::SYMLINK {
                blob
            } else if is_tip {
                self.tip_form.convert(blob, path)?
            } else {
                self.base_form.convert(blob, path)?
            };
            if form == on_disk {
                return Ok(Local::Blob(id));
            }
        }
        Ok(Local::Other)
    }
}

/// A template copied layer by layer keeps sizes and mtimes, not inodes or ctimes: only those two
/// are compared, and the nanoseconds only when the file still has them (an image layer's export
/// may keep whole seconds only).
pub(super) fn same_size_and_mtime(
    stat: &gix::index::entry::Stat,
    meta: &std::fs::Metadata,
) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    u64::from(stat.size) == (meta.size() & 0xffff_ffff)
        && i64::from(stat.mtime.secs) == meta.mtime()
        && (meta.mtime_nsec() == 0 || i64::from(stat.mtime.nsecs) == meta.mtime_nsec())
}

/// Git's racy-clean rule, to the nanosecond (as git built with `USE_NSEC` compares, and as an
/// agent's copy judges the main tree): an entry whose file was modified at or after the moment
/// its index was written (`index_time`, seconds and nanoseconds) may have been changed again
/// within the file system's timestamp granularity at the same size, so its stat data cannot
/// tell and the file is read. An index whose mtime lost its nanoseconds makes its whole second
/// racy.
pub(super) fn racily_clean(entry: &gix::index::entry::Stat, index_time: (i64, u32)) -> bool {
    (i64::from(entry.mtime.secs), entry.mtime.nsecs) >= index_time
}

/// Git's "racily smudged" rule (`ce_match_stat_basic`): an entry whose stat size is 0 for a
/// blob that is not empty was never measured against its file (`git read-tree`,
/// `update-index --cacheinfo`, an index built from a tree) or was smudged by git, so its stat
/// data proves nothing (an emptied file whose mtime was reset to the epoch, as an image's
/// `SOURCE_DATE_EPOCH=0` export leaves it, matched it).
pub(super) fn never_stated(entry: &gix::index::Entry) -> bool {
    entry.stat.size == 0 && entry.id != gix::ObjectId::empty_blob(entry.id.kind())
}

/// What [`look`] found at a path.
enum Seen {
    /// Nothing of the work tree's own: no file, or a leading folder that is a symlink or a file.
    Missing,
    /// The path's own metadata (not followed).
    Found(std::fs::Metadata),
}

/// What is at `rel`, reached through real folders only.
fn look(workdir: &Path, rel: &Path, folders: &Folders) -> std::io::Result<Seen> {
    if leading_blocker(workdir, rel, folders).is_some() {
        // Not reached through a symlink or a file: nothing of its own is there.
        return Ok(Seen::Missing);
    }
    match std::fs::symlink_metadata(workdir.join(rel)) {
        Ok(m) => Ok(Seen::Found(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Seen::Missing),
        Err(e) if e.raw_os_error() == Some(20) => Ok(Seen::Missing), // ENOTDIR
        Err(e) => Err(e),
    }
}

/// The metadata of every path in the template's index, read once before the switch (in a thread
/// beside the fetch). A path it could not read is left out: the probe reads it again and reports
/// the error.
#[derive(Default)]
pub(super) struct Survey {
    seen: HashMap<BString, Seen>,
    folders: Folders,
    /// The index of the base's tree, when the template's index (written earlier, by the bake)
    /// does not hold exactly that tree: its ids, modes and stat data are not to be trusted.
    pub(super) base_index: Option<gix::index::File>,
    /// The index of the base's tree when the template has no index but has files (its
    /// `.git/index` removed): nothing is known of them but their content, so a file is the
    /// base's when its bytes are the base's blob in its work-tree form, as `git status` would
    /// find by hashing it. `None` for a template with no files (seeded by `--cache`).
    pub(super) by_content: Option<gix::index::File>,
}

impl Survey {
    /// Read what `workdir` holds at every path of `repo`'s index, and check that index
    /// against the tree of `base`; an empty survey when the index cannot be read (the switch
    /// reads it again and reports why).
    pub(super) fn of(
        workdir: &Path,
        repo: &gix::Repository,
        base: crate::types::FullSha,
        max_entries: u64,
    ) -> Survey {
        let Ok(index) = repo.index_or_empty() else {
            return Survey::default();
        };
        let mut survey = Survey {
            base_index: base_index_unless_same(repo, &index, base, max_entries),
            by_content: (index.entries().is_empty() && holds_files(workdir))
                .then(|| base_tree_index(repo, base, max_entries))
                .flatten(),
            ..Survey::default()
        };
        let paths: Vec<&BStr> = index.entries().iter().map(|e| e.path(&index)).collect();
        let (seen, folders) = look_all(workdir, &paths);
        survey.seen = seen;
        survey.folders = Folders(std::cell::RefCell::new(folders));
        survey
    }
}

/// Below this many paths the survey is one thread's: a thread costs more than it saves.
const PATHS_PER_THREAD: usize = 1024;

/// [`look`] at every one of `paths`, split in runs (neighbours share their folders) over up to
/// four threads: the statx calls of a large tree are the survey's whole cost, and they wait on
/// the file system, not on each other. Returns what each path holds (those that could not be
/// read left out) and what each leading folder is.
fn look_all(
    workdir: &Path,
    paths: &[&BStr],
) -> (HashMap<BString, Seen>, HashMap<PathBuf, Option<bool>>) {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, 4)
        .min(paths.len().div_ceil(PATHS_PER_THREAD).max(1));
    let run = paths.len().div_ceil(threads).max(1);
    let look_run = |part: &[&BStr]| {
        let folders = Folders::default();
        let seen: Vec<(BString, Seen)> = part
            .iter()
            .filter_map(|p| {
                let seen = look(workdir, &p.to_path_lossy(), &folders).ok()?;
                Some(((*p).to_owned(), seen))
            })
            .collect();
        (seen, folders.0.into_inner())
    };
    let parts: Vec<_> = if threads == 1 {
        vec![look_run(paths)]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = paths
                .chunks(run)
                .map(|part| scope.spawn(move || look_run(part)))
                .collect();
            // A run whose thread failed is left out: the probe reads its paths itself.
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        })
    };
    let (mut seen, mut folders) = (HashMap::with_capacity(paths.len()), HashMap::new());
    for (part_seen, part_folders) in parts {
        seen.extend(part_seen);
        folders.extend(part_folders);
    }
    (seen, folders)
}

/// The index of `base`'s tree (its objects checked against their ids), unless `index` holds
/// exactly its paths, ids and modes or is empty (an empty index claims nothing: every file is
/// then compared by content); `None` too when the base cannot be read (its packs are damaged:
/// the boot fetches the whole commit, and the index is all there is).
fn base_index_unless_same(
    repo: &gix::Repository,
    index: &gix::index::File,
    base: crate::types::FullSha,
    max_entries: u64,
) -> Option<gix::index::File> {
    if index.entries().is_empty() {
        // No index (a template seeded from a cache, or its index removed): it claims nothing;
        // `Survey::by_content` is then the base's tree.
        return None;
    }
    let ours = base_tree_index(repo, base, max_entries)?;
    let same = index.entries().len() == ours.entries().len()
        && index.entries().iter().zip(ours.entries()).all(|(a, b)| {
            a.id == b.id && a.mode == b.mode && a.stage_raw() == 0 && a.path(index) == b.path(&ours)
        });
    (!same).then_some(ours)
}

/// The index of `base`'s tree, its objects checked against their ids (no stat data); `None` when
/// the base cannot be read. The base's trees are scattered over the template's pack: read through
/// a store replaced every few MiB, they do not leave all of its pages resident (24 of the 25 MiB
/// of the bench's generated repository) in the repository's mapping, for the rest of the boot.
fn base_tree_index(
    repo: &gix::Repository,
    base: crate::types::FullSha,
    max_entries: u64,
) -> Option<gix::index::File> {
    let dir = repo.objects.store_ref().path().to_owned();
    match crate::pack::ReleasingObjects::at(dir, repo.object_hash()) {
        Ok(own) => base_index(repo, &super::verify::Verified(&own), base, max_entries),
        Err(_) => base_index(
            repo,
            &super::verify::Verified(&repo.objects),
            base,
            max_entries,
        ),
    }
}

/// The index of `base`'s tree, read from `objects`.
fn base_index(
    repo: &gix::Repository,
    objects: &impl gix::objs::Find,
    base: crate::types::FullSha,
    max_entries: u64,
) -> Option<gix::index::File> {
    let tree = super::verify::commit(objects, base).ok()?;
    checkout::index_from_tree(repo, objects, tree, max_entries).ok()
}

/// Whether `workdir` holds anything but `.git` (a template seeded by `--cache` holds nothing).
fn holds_files(workdir: &Path) -> bool {
    std::fs::read_dir(workdir)
        .is_ok_and(|mut entries| entries.any(|e| e.is_ok_and(|e| e.file_name() != ".git")))
}
