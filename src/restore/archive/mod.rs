//! The archive path of `restore`: stream a tar.gz of `TIP_SHA` — from a URL, a file or stdin —
//! through gzip (every member) and tar into a staging folder inside the target, check it whole
//! (containment, the commit id `git archive` records), then move the entries into place and leave
//! a `.git` holding only the session record, the branch unborn (SPEC "Commands" → restore, rule 7).
//!
//! The first `save`, `push` or `status` that needs history attaches it ([`attach`]).

pub mod attach;
mod blobs;
pub(crate) mod extract;
mod index;
mod tar_stream;

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

pub use extract::Strip;
pub use tar_stream::Limits;

use super::options::RestoreOptions;
use super::plan::Plan;
use super::report::RestoreReport;
use super::source::{Prepared as Next, Source};
use crate::error::{Error, Refusal, Result};
use crate::fs::tree::{Kind, Tree};
use crate::repo::layout::{self, OriginConfig};
use crate::repo::session::{self, SessionRecord, now_rfc3339};
use crate::repo::template::TemplateRecord;
use crate::types::FullSha;
use crate::types::RemoteUrl;
use crate::wire::http::{Http, Request, UrlSource};
use crate::wire::upload_pack as fetch;

/// Where the archive comes from.
#[derive(Debug)]
pub enum ArchiveSource {
    /// `ARCHIVE_URL` / `--archive-url`: fetched with the SPEC's retries (a cut restarts the stream).
    Url(UrlSource),
    /// `--archive FILE`.
    File(PathBuf),
    /// `--archive -`: standard input (a backend piping the stream in).
    Stdin,
}

/// How to read the archive.
#[derive(Debug)]
pub struct ArchiveOptions {
    /// Where it comes from.
    pub source: ArchiveSource,
    /// Leading components to strip.
    pub strip: Strip,
    /// Refuse an archive without the pax commit id (else: a warning).
    pub require_commit_id: bool,
    /// Size bounds.
    pub limits: Limits,
}

/// The folder inside the staging git dir that receives the extracted tree.
const TREE_DIR: &str = "tree";

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
            ArchiveSource::File(path) => Some(std::fs::File::open(path).map_err(|e| {
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
        let filter = fetch::fetch_supports(&caps, "filter");
        Ok((fetch::ls_ref(http, url, &caps, &opts.branch)?, filter))
    })?;
    let lease = match remote {
        None => FullSha::zero(),
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
        let (extracted, commit_id) = self.extract(&tree, file, &tip_hex)?;
        self.check_recorded_commit(commit_id, &tip_hex)?;
        if extracted.files + extracted.symlinks == 0 {
            self.warnings.push(format!(
                "the archive held no files{}: the tree is empty, and a save would commit the \
                 deletion of every file of {}",
                match self.archive.strip {
                    Strip::Components(n) => format!(" below --strip-components {n}"),
                    Strip::Auto => String::new(),
                },
                opts.tip
            ));
        }
        crate::failpoint::hit("after-extract");

        self.move_into_place(&tree)?;
        let target = Tree::open(&opts.dir)
            .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
        target
            .remove_all(&tree_rel(opts, &tree))
            .map_err(|e| Error::io(format!("removing {}", tree.display()), e))?;
        let mut lfs_files = 0;
        if opts.read.is_some() {
            self.promise_history(&target, extracted.blobs, &extracted.links)?;
            lfs_files = self.fetch_lfs(&target)?;
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
    fn fetch_lfs(&self, target: &Tree) -> Result<usize> {
        let opts = self.opts;
        let Some(read) = opts.read.as_ref() else {
            return Ok(0);
        };
        let index_path = self.staging.join("index");
        let mut index = gix::index::File::at(
            &index_path,
            gix::hash::Kind::Sha1,
            false,
            Default::default(),
        )
        .map_err(|e| Error::from_chain("reading the index", &e))?;
        let plan = super::lfs::find_in_tree(target, &index, opts.lfs)?;
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
            Path::new(super::STAGING_DIR),
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
                on_remote: !self.lease.is_zero(),
                promisor: true,
                promisor_filter: self.filter,
            },
        )?;
        crate::repo::prepush::install(self.staging)?;
        Ok((
            read_url.as_ref().map(|u| u.public()),
            push_url.as_ref().map(|u| u.public()),
        ))
    }

    /// Make the tree a git tree from the first command, before its history is here: the index
    /// from the blob ids hashed during the extraction (stat data from the files in place), the
    /// branch at `TIP_SHA`, shallow there, and `origin` a promisor remote from which plain git
    /// fetches the commit's objects when it needs them. The archive's root tree id is kept for
    /// the check once history is attached ([`attach`]).
    fn promise_history(
        &self,
        target: &Tree,
        blobs: Vec<blobs::Blob>,
        links: &[Vec<u8>],
    ) -> Result<()> {
        let opts = self.opts;
        let root = index::write(self.staging, target, blobs)?;
        let objects = self.staging.join("objects");
        let store = gix::odb::loose::Store::at(&objects, gix::hash::Kind::Sha1);
        for link in links {
            gix::objs::Write::write_buf(&store, gix::objs::Kind::Blob, link).map_err(|e| {
                Error::from_chain(format!("writing a blob into {}", objects.display()), &e)
            })?;
        }
        layout::write_shallow(self.staging, &[opts.tip.id()])?;
        if self.lease == opts.tip {
            layout::write_ref(self.staging, &opts.branch.tracking_ref(), opts.tip)?;
        }
        layout::write_ref(self.staging, &opts.branch.full_ref(), opts.tip)?;
        attach::promise(self.staging, root)
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
        // The index is written when history can be promised (see `promise_history`).
        let hash = self.opts.read.is_some();
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
                unpack(file, tree, archive, tip_hex, hash)
            }
            ArchiveSource::Stdin => {
                fresh_dir(tree)?;
                unpack(std::io::stdin().lock(), tree, archive, tip_hex, hash)
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

    /// Everything in the way is found before the first entry moves: a conflict leaves the target
    /// as it was.
    fn move_into_place(&mut self, tree: &Path) -> Result<()> {
        let (opts, plan) = (self.opts, self.plan);
        let replace = match (plan.overwrite, plan.resume_only) {
            (false, _) => Replace::Nothing,
            (true, true) => Replace::Identical,
            (true, false) => Replace::Any,
        };
        let mut cut = super::intent::CutShort::new(plan.cut_short_since)
            .writing(plan.cut_short_big.as_ref().map(|p| opts.dir.join(p)));
        // Both ends through their handles (SPEC rule 7).
        // The extracted tree is reached from the target's handle through real folders only.
        let to = Tree::open(&opts.dir)
            .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
        let from = to
            .subtree(&tree_rel(opts, tree))
            .map_err(|e| Error::io(format!("opening {}", tree.display()), e))?;
        into_place(
            &from,
            &to,
            Path::new(""),
            replace,
            Pass::Check,
            &mut cut,
            &Default::default(),
        )?;
        if let Some(path) = cut.first_foreign() {
            return Err(Error::conflict(format!(
                "{} is in the way of the restore: nothing was changed (it holds content the \
                 interrupted restore did not write: move it aside, or pass --force to overwrite \
                 the files the commit tracks)",
                path.display()
            )));
        }
        let accepted = cut.accepted();
        self.moving = true;
        into_place(
            &from,
            &to,
            Path::new(""),
            replace,
            Pass::Move,
            &mut cut,
            &accepted,
        )
    }
}

/// The extraction folder's path relative to the target.
fn tree_rel(opts: &RestoreOptions, tree: &Path) -> PathBuf {
    tree.strip_prefix(&opts.dir).map_or_else(
        |_| Path::new(super::STAGING_DIR).join(TREE_DIR),
        Path::to_path_buf,
    )
}

/// GET the archive; a 404 names the archive.
fn download(http: &Http, url: &RemoteUrl) -> Result<impl Read> {
    let resp = http
        .send(
            url,
            Request {
                endpoint: "",
                headers: Vec::new(),
                body: None,
            },
        )
        .map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(format!("no archive at {url} (HTTP 404)")),
            other => other,
        })?;
    Ok(crate::progress::Counted {
        inner: NetBody {
            inner: resp,
            url: url.to_string(),
        },
        progress: crate::progress::Progress::bytes("downloading the archive"),
    })
}

fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| Error::io(format!("clearing {}", dir.display()), e))?;
    }
    std::fs::create_dir(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))
}

pub(crate) fn unpack(
    raw: impl Read,
    tree: &Path,
    archive: &ArchiveOptions,
    tip_hex: &str,
    hash: bool,
) -> Result<(extract::Extracted, Option<String>)> {
    let inflated = std::rc::Rc::new(std::cell::Cell::new(0));
    let input = Deflated {
        inner: raw,
        read: 0,
        inflated: inflated.clone(),
    };
    let gz = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(64 * 1024, input));
    let tar = Inflating { gz, inflated };
    unpack_tar(tar, tree, archive, tip_hex, hash)
}

/// Compressed bytes a gzip stream may read beyond what they inflate to, besides a quarter of
/// them (fixed Huffman codes spend 9 bits on half the byte values: random data at
/// `gzip -1` grows 5%): headers and the decoder's read-ahead. A stream of empty gzip members
/// or empty deflate blocks inflates to nothing, endlessly, so no limit on the output would ever
/// stop it.
const GZIP_SLACK: u64 = 256 << 10;

/// The compressed side of [`unpack`]: counts what it reads and refuses to read on once that
/// outruns what came out of the decoder ([`Inflating`]) by more than gzip's overhead.
struct Deflated<R> {
    inner: R,
    read: u64,
    inflated: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Deflated<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let out = self.inflated.get();
        if self.read > out + out / 4 + GZIP_SLACK {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} compressed bytes inflated to {out}: a gzip stream of empty members or \
                     blocks, which could go on forever",
                    self.read
                ),
            ));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// The decoder's side of [`unpack`]: counts what it inflates, for [`Deflated`].
struct Inflating<R: Read> {
    gz: flate2::read::MultiGzDecoder<BufReader<Deflated<R>>>,
    inflated: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Inflating<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.gz.read(buf)?;
        self.inflated.set(self.inflated.get() + n as u64);
        Ok(n)
    }
}

/// [`unpack`] of a tar stream decompressed already; `hash`: compute every file's blob id beside the
/// extraction (for the index).
pub(crate) fn unpack_tar(
    tar: impl Read,
    tree: &Path,
    archive: &ArchiveOptions,
    tip_hex: &str,
    hash: bool,
) -> Result<(extract::Extracted, Option<String>)> {
    let mut stream = tar_stream::TarStream::new(tar, archive.limits);
    // Every member is written through one handle on the fresh folder (SPEC rule 7).
    let tree = crate::fs::tree::Tree::open(tree)
        .map_err(|e| Error::io(format!("opening {}", tree.display()), e))?;
    let extracted = extract::extract(&mut stream, &tree, archive.strip, tip_hex, hash)?;
    let commit = stream.commit_id.clone();
    // Read the rest (end-of-archive padding, later gzip members) so truncation and corruption show.
    stream.finish()?;
    Ok((extracted, commit))
}

/// Whether [`into_place`] only looks for conflicts or moves entries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Find what would stop the move before anything moves.
    Check,
    /// Move.
    Move,
}

/// Which existing files [`into_place`] may replace with the archive's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Replace {
    /// None: anything in the way is a conflict.
    Nothing,
    /// Completing an interrupted restore: only files identical to the archive's (moved into place
    /// by the interrupted run; each move is a rename, so none is cut short).
    Identical,
    /// `--force`: every file the archive has.
    Any,
}

/// Move every entry of `from` into `to` (with [`Pass::Check`] first, so a conflict is found before
/// anything moves): missing paths are renamed into place; directories present on both sides merge;
/// an existing file or symlink is replaced as `replace` allows. Never replaced, as that would
/// delete other content (SPEC rule 6): a directory where the archive has a file, or a file or a
/// symlink where it has a directory (even with `--force`: the commit does not track it).
///
/// When completing an interrupted restore, a file that a killed git checkout cut short is noted in
/// `cut` during [`Pass::Check`] (and judged by the caller); those it accepted are replaced during
/// [`Pass::Move`].
fn into_place(
    from: &Tree,
    to: &Tree,
    rel: &Path,
    replace: Replace,
    pass: Pass,
    cut: &mut super::intent::CutShort,
    accepted: &std::collections::HashSet<std::path::PathBuf>,
) -> Result<()> {
    let entries = from
        .entries(rel)
        .map_err(|e| Error::io(format!("reading {}", from.shown(rel).display()), e))?;
    for (name, kind) in entries {
        let rel = rel.join(name);
        let shown = to.shown(&rel);
        let src_is_dir = kind == Kind::Dir;
        match to.symlink_metadata(&rel) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("reading {}", shown.display()), e)),
            Ok(meta) if meta.is_dir() && src_is_dir => {
                into_place(from, to, &rel, replace, pass, cut, accepted)?;
                continue;
            }
            // An empty folder holds nothing to lose: replaced, as the git path does.
            Ok(meta)
                if meta.is_dir()
                    && replace != Replace::Nothing
                    && to.entries(&rel).is_ok_and(|e| e.is_empty()) =>
            {
                if pass == Pass::Move {
                    to.remove_dir(&rel)
                        .map_err(|e| Error::io(format!("replacing {}", shown.display()), e))?;
                }
            }
            Ok(meta) if meta.is_dir() => {
                return Err(Error::conflict(format!(
                    "{} is a directory where the commit has a file: nothing was changed",
                    shown.display()
                )));
            }
            Ok(meta) if src_is_dir => {
                return Err(Error::conflict(format!(
                    "{} is a {} where the commit has a directory: nothing was changed",
                    shown.display(),
                    if meta.file_type().is_symlink() {
                        "symlink"
                    } else {
                        "file"
                    }
                )));
            }
            Ok(meta)
                if replace == Replace::Any
                    || replace == Replace::Identical
                        && left_by_the_killed_run((from, to, &rel), &meta, pass, cut, accepted) =>
            {
                if pass == Pass::Move {
                    to.remove_file(&rel)
                        .map_err(|e| Error::io(format!("replacing {}", shown.display()), e))?;
                }
            }
            Ok(_) => {
                return Err(Error::conflict(format!(
                    "{} is in the way of the restore: nothing was changed{}",
                    shown.display(),
                    if replace == Replace::Identical {
                        " (it holds content the interrupted restore did not write: move it \
                         aside, or pass --force to overwrite the files the commit tracks)"
                    } else {
                        ""
                    }
                )));
            }
        }
        if pass == Pass::Move {
            from.rename_to(&rel, to, &rel)
                .map_err(|e| Error::io(format!("moving {} into place", shown.display()), e))?;
            crate::failpoint::hit("mid-publish");
        }
    }
    Ok(())
}

/// Whether `rel` in `to` is what an interrupted restore left: the same entry as the staged one in
/// `from`, or (noted in `cut` while checking, looked up in `accepted` while moving) a file a
/// killed git checkout cut short.
fn left_by_the_killed_run(
    (from, to, rel): (&Tree, &Tree, &Path),
    meta: &cap_std::fs::Metadata,
    pass: Pass,
    cut: &mut super::intent::CutShort,
    accepted: &std::collections::HashSet<std::path::PathBuf>,
) -> bool {
    let mtime = meta
        .modified()
        .map_or(std::time::UNIX_EPOCH, cap_std::time::SystemTime::into_std);
    if same_entry(from, to, rel, meta) {
        cut.whole(mtime);
        return true;
    }
    let dst = to.shown(rel);
    match pass {
        Pass::Move => accepted.contains(&dst),
        Pass::Check => {
            let src_meta = from.symlink_metadata(rel).ok();
            let regular = meta.file_type().is_file()
                && src_meta.as_ref().is_some_and(|m| m.file_type().is_file());
            let prefix = regular
                && meta.len() < src_meta.map_or(0, |m| m.len())
                && matches!((from.read(rel, false), to.read(rel, false)), (Ok(a), Ok(b)) if a.starts_with(&b));
            if prefix {
                cut.prefix(dst, mtime);
            }
            prefix
        }
    }
}

/// Whether `rel` in `to` (with metadata `meta`) is the same file or symlink as in `from`.
fn same_entry(from: &Tree, to: &Tree, rel: &Path, meta: &cap_std::fs::Metadata) -> bool {
    let Ok(src_meta) = from.symlink_metadata(rel) else {
        return false;
    };
    let link = src_meta.file_type().is_symlink();
    if link || meta.file_type().is_symlink() {
        return link
            && meta.file_type().is_symlink()
            && matches!((from.read(rel, true), to.read(rel, true)), (Ok(a), Ok(b)) if a == b);
    }
    src_meta.len() == meta.len()
        && matches!((from.read(rel, false), to.read(rel, false)), (Ok(a), Ok(b)) if a == b)
}

/// An HTTP response body whose transport failures surface as [`Error::Network`] (retried), not as
/// a corrupt archive.
struct NetBody {
    inner: crate::wire::http::Body,
    url: String,
}

impl Read for NetBody {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            std::io::Error::other(Error::Network(format!(
                "the archive download from {} broke off: {e}",
                self.url
            )))
        })
    }
}
