//! The archive path of `restore`: stream a tar.gz of `TIP_SHA` — from a URL, a file or stdin —
//! through gzip (every member) and tar into a staging folder inside the target, check it whole
//! (containment, the commit id `git archive` records), then move the entries into place (SPEC
//! "Commands" → restore, rule 7). With `READ_URL` the commit's history is fetched beside the
//! extraction and the tree is a git tree; without it `.git` holds the session record, the branch
//! unborn.
//!
//! The steps, in order: `options` (where the stream comes from, its bounds); `unpack` (download,
//! inflate within gzip's overhead, and extract: `tar_stream` reads the members, `extract` writes
//! them contained, `blobs` hashes their ids beside it), and beside it the commit's fetch
//! ([`attach`]); the commit id checked; `place` (everything in the way found first, then the
//! entries moved into the target); `index` (the index and cache tree from those ids). Without
//! `READ_URL`, the first `save`, `push` or `status` given it attaches history ([`attach`],
//! [`replay`]).

pub mod attach;
mod blobs;
pub(crate) mod extract;
mod index;
mod options;
mod place;
mod replay;
mod tar_stream;
mod unpack;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub use blobs::Hash;
pub use extract::Strip;
pub use options::{ArchiveOptions, ArchiveSource};
pub use tar_stream::Limits;
pub(crate) use unpack::{unpack, unpack_tar};

use super::options::RestoreOptions;
use super::plan::Plan;
use super::report::RestoreReport;
use super::source::{Prepared as Next, Source};
use crate::error::{Error, Refusal, Result};
use crate::fs::tree::Tree;
use crate::repo::layout::{self, OriginConfig};
use crate::repo::session::{self, SessionRecord, now_rfc3339};
use crate::repo::template::TemplateRecord;
use crate::types::FullSha;
use crate::wire::http::Http;
use crate::wire::upload_pack as fetch;
use place::{TREE_DIR, tree_rel};
use unpack::{download, fresh_dir};

/// The archive source of a restore: a tar.gz of `opts.tip`, checked whole, then moved into place.
///
/// # Errors
/// Auth (4) and network (5) for a URL source; integrity (6) for an unsafe entry, a corrupt or
/// truncated stream, or a commit id that is not `TIP_SHA`; a template in the target is usage (2).
pub struct Archive<'a> {
    options: &'a ArchiveOptions,
    /// What [`Source::prepare`] found: the client, the lease, whether the remote's `fetch` takes
    /// `filter`, the archive file, and the warnings so far.
    prepared: Option<Prepared>,
    /// Entries have begun to move into the target.
    moving: bool,
}

struct Prepared {
    http: Http,
    lease: FullSha,
    filter: bool,
    file: Option<std::fs::File>,
    warnings: Vec<String>,
}

impl<'a> Archive<'a> {
    /// The source that reads the archive as `options` say.
    pub fn new(options: &'a ArchiveOptions) -> Self {
        Archive {
            options,
            prepared: None,
            moving: false,
        }
    }
}

impl Source for Archive<'_> {
    fn boot(&mut self, opts: &RestoreOptions, template: &TemplateRecord) -> Result<RestoreReport> {
        Err(Error::Usage(
            Refusal::NotASessionFolder,
            format!(
                "{} holds a template baked at {}: boot it with a git restore (no --from archive)",
                opts.dir.display(),
                template.base
            ),
        ))
    }

    fn prepare(&mut self, opts: &RestoreOptions, _plan: &Plan) -> Result<Next> {
        let mut warnings = Vec::new();
        let http = Http::new()?;
        let (lease, filter) = look_up_lease(&http, opts, &mut warnings)?;
        // A file source is opened before anything is created: a wrong path changes nothing.
        let file = match &self.options.source {
            // Without waiting for a FIFO's writer to appear: the reads wait, under their bounds.
            ArchiveSource::File(path) => Some(open_nonblocking(path).map_err(|e| {
                Error::Usage(
                    Refusal::Invalid,
                    format!("cannot open the archive {}: {e}", path.display()),
                )
            })?),
            _ => None,
        };
        self.prepared = Some(Prepared {
            http,
            lease,
            filter,
            file,
            warnings,
        });
        Ok(Next::Restore)
    }

    fn fill(
        &mut self,
        opts: &RestoreOptions,
        plan: &Plan,
        staging: &Path,
    ) -> Result<(SessionRecord, RestoreReport)> {
        let Some(Prepared {
            http,
            lease,
            filter,
            file,
            warnings,
            ..
        }) = self.prepared.take()
        else {
            return Err(Error::Internal(
                "an archive restore filled before it was prepared".into(),
            ));
        };
        let mut run = Staged {
            opts,
            archive: self.options,
            plan,
            staging,
            http: &http,
            lease,
            filter,
            warnings,
            moving: false,
        };
        let result = run.restore(file);
        // A failure while moving entries (local I/O) keeps the staging folder, with its intent,
        // so that the next run completes the move.
        self.moving = run.moving;
        result
    }

    fn wrote_into_target(&self) -> bool {
        self.moving
    }
}

/// The lease: asked of the remote when a READ_URL is known, else `TIP_SHA`; and whether the
/// remote's `fetch` takes `filter`.
fn look_up_lease(
    http: &Http,
    opts: &RestoreOptions,
    warnings: &mut Vec<String>,
) -> Result<(FullSha, bool)> {
    let Some(read) = &opts.read else {
        return Ok((opts.tip, false));
    };
    let (remote, filter) = http.with_retries(read, "looking up the session branch", |url| {
        let caps = fetch::handshake(http, url, &opts.branch)?;
        caps.check_tip(url, "TIP_SHA", opts.tip)?;
        // Our v0 requests carry no filter: only v2's is used.
        let filter = matches!(caps, fetch::Server::V2(_)) && fetch::fetch_supports(&caps, "filter");
        Ok((fetch::ls_ref(http, url, &caps, &opts.branch)?, filter))
    })?;
    let lease = match remote {
        None => FullSha::zero(opts.tip.format()),
        Some(t) if t == opts.tip => opts.tip,
        Some(other) => {
            warnings.push(super::plan::stale_tip_warning(
                &opts.branch,
                other,
                opts.tip,
            ));
            opts.tip
        }
    };
    Ok((lease, filter))
}

/// One archive restore from the staging folder on.
struct Staged<'a> {
    opts: &'a RestoreOptions,
    archive: &'a ArchiveOptions,
    plan: &'a Plan,
    staging: &'a Path,
    http: &'a Http,
    lease: FullSha,
    /// The remote's `fetch` takes `filter` (for the promisor remote).
    filter: bool,
    warnings: Vec<String>,
    /// Entries have begun to move into the target: a failure from then on keeps the staging folder.
    moving: bool,
}

impl Staged<'_> {
    /// Build the git dir, extract and check the archive, move it into place; the record to
    /// publish.
    fn restore(&mut self, file: Option<std::fs::File>) -> Result<(SessionRecord, RestoreReport)> {
        let opts = self.opts;
        let (read_public, push_public) = self.init_git_dir()?;
        let tree = self.staging.join(TREE_DIR);
        let tip_hex = opts.tip.to_string();
        let (extracted, commit_id, fetched) = self.extract_and_fetch(&tree, file, &tip_hex)?;
        self.check_recorded_commit(commit_id, &tip_hex)?;
        if extracted.files + extracted.symlinks == 0 {
            self.no_files(extracted.shallowest)?;
        }
        crate::failpoint::hit("after-extract");

        place::move_into_place(opts, self.plan, &tree, &mut self.moving)?;
        let target = Tree::open(&opts.dir)
            .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
        target
            .remove_all(&tree_rel(opts, &tree))
            .map_err(|e| Error::io(format!("removing {}", tree.display()), e))?;
        let mut lfs_files = 0;
        if let Some(fetched) = fetched {
            self.attach_history(&target, extracted.blobs, &extracted.links, &fetched)?;
            lfs_files = self.fetch_lfs(&target)?;
        } else {
            attach::promise(self.staging, None)?;
            self.warnings.push(format!(
                "restored without READ_URL, so without history: until a save, push or status \
                 runs with READ_URL set, plain git sees every file as untracked; commits made \
                 meanwhile are then moved onto TIP_SHA {}",
                opts.tip
            ));
        }
        let record = SessionRecord {
            version: 1,
            branch: opts.branch.clone(),
            tip: opts.tip,
            lease: self.lease,
            source: session::Source::Archive,
            restored_at: now_rfc3339(),
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            read_url: read_public,
            push_url: push_public,
            depth: opts.depth,
            object_format: opts.tip.format(),
            signing: opts.signing.as_ref().map(|s| s.record.clone()),
            agent: None,
        };
        let report = RestoreReport {
            branch: opts.branch.clone(),
            tip: opts.tip,
            lease: self.lease,
            source: session::Source::Archive,
            noop: false,
            files: extracted.files + extracted.symlinks,
            warnings: std::mem::take(&mut self.warnings),
            extras: super::report::Extras {
                lfs_files,
                ..Default::default()
            },
        };
        Ok((record, report))
    }

    /// Replace the tree's Git LFS pointer files by their objects (see [`super::lfs`]), as a git
    /// restore does; the index gets their stat. Returns how many were written.
    fn fetch_lfs(&mut self, target: &Tree) -> Result<usize> {
        let opts = self.opts;
        let Some(read) = opts.read.as_ref() else {
            return Ok(0);
        };
        let index_path = self.staging.join("index");
        let mut index =
            gix::index::File::at(&index_path, opts.tip.format(), false, Default::default())
                .map_err(|e| Error::from_chain("reading the index", &e))?;
        let mut plan = super::lfs::find_in_tree(target, &index, opts.lfs)?;
        self.warnings.append(&mut plan.notes);
        if plan.files.is_empty() {
            return Ok(0);
        }
        let read_url = read.load()?;
        let endpoint = match &plan.configured_url {
            Some(url) => crate::wire::lfs::Endpoint::configured(url, &read_url)?,
            None => crate::wire::lfs::Endpoint::of_remote(&read_url),
        };
        super::lfs::fetch(self.http, &endpoint, self.staging, &plan.files)?;
        super::lfs::smudge(
            target,
            Path::new(crate::names::STAGING_DIR),
            self.staging,
            &mut index,
            &plan.files,
        )?;
        super::checkout::write_index(&mut index)?;
        layout::add_lfs_config(self.staging)?;
        Ok(plan.files.len())
    }

    /// The staging git dir with its remote and the check of plain `git push`; returns the URLs'
    /// credential-free forms for the record.
    fn init_git_dir(&self) -> Result<(Option<String>, Option<String>)> {
        let opts = self.opts;
        let read_url = opts.read.as_ref().map(|r| r.load()).transpose()?;
        let push_url = opts.push.as_ref().map(|p| p.load()).transpose()?;
        layout::init(
            self.staging,
            &OriginConfig {
                url: read_url.as_ref(),
                push_url: push_url.as_ref(),
                branch: &opts.branch,
                // Known only when the remote was asked: without READ_URL the lease is TIP_SHA by
                // assumption, and an upstream set then has no remote-tracking ref ("gone").
                on_remote: !self.lease.is_zero() && opts.read.is_some(),
                // Only a server that takes `filter` sent the commit without its blobs.
                promisor: self.filter,
                promisor_filter: self.filter,
                format: opts.tip.format(),
                signing: opts.signing.as_ref(),
            },
        )?;
        crate::repo::prepush::install(self.staging)?;
        Ok((
            read_url.as_ref().map(|u| u.public()),
            push_url.as_ref().map(|u| u.public()),
        ))
    }

    /// Make the tree a git tree that works offline: the index from the blob ids hashed during the
    /// extraction (stat data from the files in place), the branch at `TIP_SHA`, shallow there,
    /// with the commit and trees `fetched` beside the extraction; the archive's tree checked
    /// against the commit's. Blobs left out by `filter blob:none` are the promisor remote's.
    fn attach_history(
        &mut self,
        target: &Tree,
        blobs: Vec<blobs::Blob>,
        links: &[Vec<u8>],
        fetched: &fetch::Fetched,
    ) -> Result<()> {
        let opts = self.opts;
        let format = opts.tip.format();
        let root = index::write(self.staging, target, blobs, format)?;
        let objects = self.staging.join("objects");
        let store = gix::odb::loose::Store::at(&objects, format);
        for link in links {
            gix::objs::Write::write_buf(&store, gix::objs::Kind::Blob, link).map_err(|e| {
                Error::from_chain(format!("writing a blob into {}", objects.display()), &e)
            })?;
        }
        layout::write_shallow(self.staging, &fetched.shallow)?;
        if self.lease == opts.tip {
            layout::write_ref(self.staging, &opts.branch.tracking_ref(), opts.tip)?;
        }
        layout::write_ref(self.staging, &opts.branch.full_ref(), opts.tip)?;
        if self.filter {
            layout::mark_promisor_packs(self.staging)?;
        }
        let repo = crate::repo::open(self.staging)?;
        self.warnings
            .extend(attach::check_archive_tree(&repo, opts.tip, root)?);
        Ok(())
    }

    /// [`Self::extract`], and with a `READ_URL` beside it the commit's history
    /// ([`attach::fetch_commit`]).
    fn extract_and_fetch(
        &self,
        tree: &Path,
        file: Option<std::fs::File>,
        tip_hex: &str,
    ) -> Result<(extract::Extracted, Option<String>, Option<fetch::Fetched>)> {
        let opts = self.opts;
        let Some(read) = opts.read.as_ref() else {
            let (extracted, commit_id) = self.extract(tree, file, tip_hex)?;
            return Ok((extracted, commit_id, None));
        };
        let interrupt = AtomicBool::new(false);
        let pack_dir = self.staging.join("objects/pack");
        std::thread::scope(|scope| {
            let fetching = scope.spawn(|| {
                attach::fetch_commit(
                    self.http,
                    read,
                    &opts.branch,
                    opts.tip,
                    &pack_dir,
                    self.filter,
                    &interrupt,
                )
            });
            let extracted = self.extract(tree, file, tip_hex);
            if extracted.is_err() {
                interrupt.store(true, Ordering::Relaxed);
            }
            let fetched = fetching
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the history fetch panicked".into())));
            let (extracted, commit_id) = extracted?;
            Ok((extracted, commit_id, Some(fetched?)))
        })
    }

    /// Unpack the archive into a fresh `tree`; a download that breaks off starts again from
    /// an empty folder.
    fn extract(
        &self,
        tree: &Path,
        file: Option<std::fs::File>,
        tip_hex: &str,
    ) -> Result<(extract::Extracted, Option<String>)> {
        let archive = self.archive;
        // With history fetched beside the extraction, the index is written from the blob ids;
        // a fetch without blobs (`filter`) leaves them to the archive's, kept in a pack: git needs
        // them to commit and diff (see `attach_history`).
        let pack_dir = self.staging.join("objects/pack");
        let format = self.opts.tip.format();
        let hash = match (&self.opts.read, self.filter) {
            (Some(_), true) => Hash::IdsAndPack(&pack_dir, format),
            (Some(_), false) => Hash::Ids(format),
            (None, _) => Hash::Skip,
        };
        match &archive.source {
            ArchiveSource::Url(source) => {
                self.http
                    .with_retries(source, "downloading the archive", |url| {
                        fresh_dir(tree)?;
                        unpack(download(self.http, url)?, tree, archive, tip_hex, hash)
                    })
            }
            ArchiveSource::File(_) => {
                fresh_dir(tree)?;
                let file = file.expect("opened by restore_archive");
                let what = "the archive file (a pipe)";
                unpack(
                    crate::clock::Patient::new(file, what),
                    tree,
                    archive,
                    tip_hex,
                    hash,
                )
            }
            ArchiveSource::Stdin => {
                fresh_dir(tree)?;
                let stdin = crate::clock::Patient::stdin("the archive on standard input")?;
                unpack(stdin, tree, archive, tip_hex, hash)
            }
        }
    }

    /// The archive left no file in the tree. A `--strip-components` that cut every file is refused
    /// (an empty tree's next save would commit the deletion of every file), naming the depth that
    /// keeps them; an archive that holds no file at all is said in a warning.
    fn no_files(&mut self, shallowest: Option<usize>) -> Result<()> {
        let tip = self.opts.tip;
        match (self.archive.strip, shallowest) {
            (Strip::Components(n), Some(keep)) => {
                let depth = match keep {
                    0 => "at its top level".to_owned(),
                    1 => "in a top-level folder".to_owned(),
                    k => format!("{k} folders deep"),
                };
                let fix = match keep {
                    0 => "without --strip-components".to_owned(),
                    k => format!("with --strip-components {k} or less"),
                };
                Err(Error::Usage(
                    Refusal::Invalid,
                    format!(
                        "--strip-components {n} leaves no file of the archive of {tip} (its \
                         shallowest file lies {depth}): run restore again {fix}; nothing was \
                         restored"
                    ),
                ))
            }
            _ => {
                self.warnings.push(format!(
                    "the archive held no files: the tree is empty, and a save would commit the \
                     deletion of every file of {tip}"
                ));
                Ok(())
            }
        }
    }

    /// Without a recorded commit id the archive cannot be checked: refused with
    /// `--require-commit-id`, else a warning.
    fn check_recorded_commit(&mut self, commit_id: Option<String>, tip_hex: &str) -> Result<()> {
        match commit_id {
            Some(id) => extract::check_commit_id(&id, tip_hex),
            None if self.archive.require_commit_id => Err(Error::Integrity(
                "the archive records no commit id (git archive's pax global header) and \
                 --require-commit-id is set: nothing was restored"
                    .into(),
            )),
            None => {
                self.warnings.push(format!(
                    "the archive records no commit id (git archive's pax global header): it could not be \
                     checked against TIP_SHA {tip_hex}"
                ));
                Ok(())
            }
        }
    }
}

/// `path` opened for reading without waiting (a FIFO opens at once), then blocking again: the
/// reads wait under [`crate::clock::Patient`]'s bounds.
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty())?;
    Ok(file)
}
