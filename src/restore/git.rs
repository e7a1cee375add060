//! The git path of `restore`: look up the session branch (the lease), fetch exactly `TIP_SHA`, verify
//! it, check it out, configure `origin`, record the session.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::checkout;
use super::early::EarlyCheckout;
use super::options::RestoreOptions;
use super::plan::Plan;
use super::report::RestoreReport;
use super::source::{Prepared, Source};
use crate::error::{Error, Refusal, Result};
use crate::fs::tree::Tree;
use crate::repo::layout::{self, OriginConfig};
use crate::repo::session::SessionRecord;
use crate::repo::template::TemplateRecord;
use crate::types::FullSha;
use crate::wire::http::Http;
use crate::wire::lfs::Endpoint;
use crate::wire::upload_pack as fetch;

/// The git source of a restore: `opts.tip` fetched from `opts.read` over smart HTTP (protocol v2,
/// v0 where the server has no v2), verified and checked out.
///
/// # Errors
/// Usage (2) for a SHA-256 remote; auth (4); network (5); integrity (6) for a wrong object or an
/// unsafe tree entry; not found (8); io (10) when the disk refuses.
#[derive(Default)]
pub struct Git {
    /// The client and the server's capabilities (and the session branch when the posted
    /// `ls-refs` found it), once connected.
    connected: Option<(Http, fetch::Connected)>,
    /// Why the cache was not used.
    cache_warning: Option<String>,
    /// Whether anything was written into the target.
    written_any: std::cell::Cell<bool>,
}

impl Source for Git {
    fn boot(&mut self, opts: &RestoreOptions, template: &TemplateRecord) -> Result<RestoreReport> {
        super::boot::boot(opts, template)
    }

    fn prepare(&mut self, opts: &RestoreOptions, plan: &Plan) -> Result<Prepared> {
        if let Some(cache) = opts
            .cache
            .as_deref()
            .filter(|_| plan.empty && !opts.template)
        {
            match super::cache::seed(opts, cache) {
                Ok(template) => return Ok(Prepared::Boot(template)),
                Err(why) => {
                    self.cache_warning = Some(format!(
                        "the cache {} was not used ({why}): the whole commit is fetched",
                        cache.display()
                    ));
                }
            }
        }
        let read = read_source(opts)?;
        let http = Http::new()?;
        // A sparse restore asks for the advertisement: whether the server filters (`filter`)
        // decides its fetch.
        let connected = super::connect::connect(&http, read, opts, opts.sparse.is_none())?;
        self.connected = Some((http, connected));
        Ok(Prepared::Restore)
    }

    fn fill(
        &mut self,
        opts: &RestoreOptions,
        plan: &Plan,
        staging: &Path,
    ) -> Result<(SessionRecord, RestoreReport)> {
        let read = read_source(opts)?;
        let (http, connected) = self
            .connected
            .as_ref()
            .ok_or_else(|| Error::Internal("a git restore filled before it connected".into()))?;
        let caps = &connected.server;
        // The one handle every write into the tree goes through (SPEC rule 7).
        let tree = Tree::open(&opts.dir)
            .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
        let run = Run {
            tree: &tree,
            opts,
            plan,
            read,
            http,
            caps,
            remote_tip: connected.tip,
            staging,
            read_url: read.load()?,
            push_url: opts.push.as_ref().map(|p| p.load()).transpose()?,
            written_any: &self.written_any,
            lfs_files: std::cell::Cell::new(0),
            notes: Default::default(),
            // A sparse restore is a partial clone where the server can make one (v2 `filter`).
            filtered: opts.sparse.is_some()
                && matches!(caps, fetch::Server::V2(_))
                && fetch::fetch_supports(caps, "filter"),
        };
        let mut result = run.restore();
        if let Ok((_, report)) = &mut result {
            report.warnings.extend(self.cache_warning.take());
        }
        result
    }

    fn wrote_into_target(&self) -> bool {
        self.written_any.get()
    }
}

fn read_source(opts: &RestoreOptions) -> Result<&crate::wire::http::UrlSource> {
    opts.read.as_ref().ok_or_else(|| {
        Error::Usage(Refusal::Missing, "READ_URL is not set: put the read URL in READ_URL or READ_URL_FILE (--read-url takes only a URL without credentials)".into())
    })
}

/// One git restore once the target is planned and the staging folder begun.
struct Run<'a> {
    opts: &'a RestoreOptions,
    plan: &'a Plan,
    read: &'a crate::wire::http::UrlSource,
    http: &'a Http,
    caps: &'a fetch::Server,
    /// The session branch's commit, when the posted `ls-refs` found it.
    remote_tip: Option<Option<FullSha>>,
    staging: &'a Path,
    tree: &'a Tree,
    read_url: crate::types::RemoteUrl,
    push_url: Option<crate::types::RemoteUrl>,
    /// Whether anything was written into the target: a failure then keeps the intent.
    written_any: &'a std::cell::Cell<bool>,
    /// The commit is fetched without blobs (a sparse restore's partial clone).
    filtered: bool,
    /// LFS files written with their content.
    lfs_files: std::cell::Cell<usize>,
    /// Warnings found on the way (a sparse folder the tree lacks).
    notes: std::cell::RefCell<Vec<String>>,
}

impl Run<'_> {
    fn origin(&self, on_remote: bool) -> OriginConfig<'_> {
        OriginConfig {
            url: Some(&self.read_url),
            push_url: self.push_url.as_ref(),
            branch: &self.opts.branch,
            on_remote,
            promisor: self.filtered,
            promisor_filter: self.filtered,
            format: self.opts.tip.format(),
            signing: self.opts.signing.as_ref(),
        }
    }

    fn restore(&self) -> Result<(SessionRecord, RestoreReport)> {
        let opts = self.opts;
        if opts.template {
            layout::init_template(self.staging, opts.tip)?;
        } else {
            layout::init(self.staging, &self.origin(true))?;
        }
        let early = self.early_checkout();
        let fetched = self.fetch(early.as_ref());
        let early = early.map(EarlyCheckout::finish).unwrap_or_default();
        let result = fetched.and_then(|fetched| self.finish(fetched, &early.files));
        let wrote_early = !early.made.is_empty();
        if result.is_err() && wrote_early && !self.written_any.get() {
            // Nothing else was written yet: the files written early go too.
            if let Err(e) = self.tree.undo(&early.made) {
                tracing::warn!("could not remove the files written early: {e}");
                self.written_any.set(true);
            }
        }
        result
    }

    /// The early checkout (see [`super::early`]), when the target was empty: files written as
    /// the pack streams in.
    fn early_checkout(&self) -> Option<EarlyCheckout> {
        let (opts, plan) = (self.opts, self.plan);
        // The `mid-checkout` failpoint kills the checkout after the transfer half-way: it must
        // have files to write.
        if !plan.empty
            || plan.overwrite
            || opts.sparse.is_some()
            || crate::failpoint::armed("mid-checkout")
            || crate::failpoint::armed("hold-mid-checkout")
        {
            return None;
        }
        let staging = self.staging.to_owned();
        Some(EarlyCheckout::start(super::early::Target {
            tree: self.tree.try_clone().ok()?,
            tip: opts.tip.id(),
            before_first_file: Box::new(move || super::staging::note_checkout_began(&staging)),
        }))
    }

    /// After the fetch: configure, check out; the record to publish.
    fn finish(
        &self,
        (lease, fetched, mut warnings): (FullSha, fetch::Fetched, Vec<String>),
        early: &[super::early::Written],
    ) -> Result<(SessionRecord, RestoreReport)> {
        let opts = self.opts;
        tracing::info!("received {} objects", fetched.objects);
        crate::failpoint::hit("after-fetch");
        if !opts.template {
            if lease.is_zero() {
                layout::write_config(self.staging, &self.origin(false))?;
            }
            crate::repo::prepush::install(self.staging)?;
        }
        let (files, gitlinks, subs) = self.check_out(lease, &fetched, early)?;
        let extras = super::report::Extras {
            lfs_files: self.lfs_files.get(),
            submodules: subs.0.iter().map(|s| s.path.clone()).collect(),
            sparse: opts.sparse.as_ref().map(|c| c.dirs().to_vec()),
            posted_v2: fetched.posted,
        };
        if let Some(cone) = &opts.sparse {
            layout::add_sparse_config(self.staging, &cone.patterns())?;
        }
        if self.filtered {
            layout::mark_promisor_packs(self.staging)?;
        }
        if opts.submodules == super::submodules::SubmoduleMode::None {
            warnings.extend(checkout::gitlink_warning(
                &gitlinks,
                &opts.with_submodules(),
            ));
        } else {
            warnings.extend(self.restore_submodules(subs)?);
        }
        let record = SessionRecord::of_git_restore(
            opts.branch.clone(),
            opts.tip,
            lease,
            &self.read_url,
            self.push_url.as_ref(),
            opts.depth,
        );
        warnings.extend(self.notes.take());
        let mut report = RestoreReport::of_git(opts, lease, files, warnings);
        report.extras = extras;
        Ok((record, report))
    }

    /// Fetch the commit, and beside it look up the session branch (one ref: neither needs the
    /// other's answer); returns the lease, the pack, and a warning when the branch is elsewhere.
    fn fetch(
        &self,
        early: Option<&EarlyCheckout>,
    ) -> Result<(FullSha, fetch::Fetched, Vec<String>)> {
        let (opts, http, read, caps) = (self.opts, self.http, self.read, self.caps);
        let remote_tip = self.remote_tip;
        let interrupt = AtomicBool::new(false);
        let pack_dir = self.staging.join("objects/pack");
        let (remote_tip, fetched) = std::thread::scope(|scope| {
            let lookup = scope.spawn(|| {
                if opts.template {
                    // A template has no session branch, hence no lease.
                    return Ok(None);
                }
                if let Some(tip) = remote_tip {
                    return Ok(tip);
                }
                http.with_retries(read, "looking up the session branch", |url| {
                    fetch::ls_ref(http, url, caps, &opts.branch)
                })
            });
            let fetched = http.with_retries(read, "fetching the commit", |url| {
                fetch::fetch_pack(
                    http,
                    url,
                    caps,
                    fetch::Want {
                        commit: opts.tip,
                        depth: opts.depth,
                        pack_dir: &pack_dir,
                        limits: opts.limits,
                        base: None,
                        observer: early.map(|e| e as &dyn crate::pack::EntryObserver),
                        filter: self.filtered.then_some("blob:none"),
                        more: &[],
                    },
                    &interrupt,
                )
            });
            let remote_tip = lookup
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the lease lookup panicked".into())));
            (remote_tip, fetched)
        });
        let (remote_tip, fetched) = (remote_tip?, fetched?);
        let mut warnings = Vec::new();
        let lease = super::plan::lease_from(&opts.branch, opts.tip, remote_tip, &mut warnings);
        Ok((lease, fetched, warnings))
    }

    /// Verify the commit, build the index from its tree (refusing unsafe entries and what is in
    /// the way), check the files out and write the index; returns the number of files and the
    /// submodules left empty.
    fn check_out(
        &self,
        lease: FullSha,
        fetched: &fetch::Fetched,
        early: &[super::early::Written],
    ) -> Result<(usize, Vec<String>, Planned)> {
        let (opts, plan, staging) = (self.opts, self.plan, self.staging);
        let repo = crate::repo::open(staging)?;
        let pack_path = fetched.pack_path.as_deref().ok_or_else(|| {
            Error::Integrity(format!("the remote sent an empty pack for {}", opts.tip))
        })?;
        let objects =
            crate::pack::PackObjects::open(pack_path, opts.limits, &fetched.big, opts.tip.format())
                .map_err(|e| Error::internal("opening the received pack", e))?;
        let tree = super::verify::commit(&objects, opts.tip)?;
        layout::write_shallow(staging, &fetched.shallow)?;
        if !opts.template {
            layout::write_ref(staging, &opts.branch.full_ref(), opts.tip)?;
        }
        if lease == opts.tip && !opts.template {
            layout::write_ref(staging, &opts.branch.tracking_ref(), opts.tip)?;
        }
        let started = std::time::Instant::now();
        let mut index =
            checkout::index_from_tree(&repo, &objects, tree, opts.limits.max_tree_entries)?;
        let objects = self.sparse(&mut index, objects)?;
        tracing::debug!(
            "index built from the tree in {} ms",
            started.elapsed().as_millis()
        );
        let gitlinks = checkout::require_blobs(&index, |id| objects.contains(id))?;
        let subs = match opts.submodules {
            super::submodules::SubmoduleMode::None => Planned::default(),
            _ => {
                let gitmodules = super::submodules::gitmodules_of(&index, &objects);
                super::submodules::plan(gitmodules.as_deref(), &index, &self.read_url)?
            }
        };
        let mut lfs = super::lfs::find(&repo, &index, opts.lfs, &mut |id| {
            objects.small_blob(id, crate::wire::lfs::MAX_POINTER_BYTES)
        })?;
        self.notes.borrow_mut().append(&mut lfs.notes);
        if plan.overwrite {
            let resume = plan.resume_only.then(|| {
                super::intent::CutShort::new(plan.cut_short_since)
                    .writing(plan.cut_short_big.as_ref().map(|p| opts.dir.join(p)))
            });
            checkout::refuse_what_is_in_the_way(&repo, &opts.dir, &index, &objects, resume)?;
        }
        self.written_any.set(true);
        // LFS objects stream in while the files are written.
        let (files, lfs_fetched) = std::thread::scope(|scope| {
            let (http, read_url) = (self.http, &self.read_url);
            let lfs_fetch = (!lfs.files.is_empty())
                .then(|| scope.spawn(|| fetch_lfs(http, read_url, staging, &lfs)));
            let files = checkout::checkout(
                &repo,
                objects,
                &mut index,
                checkout::Destination {
                    tree: self.tree,
                    overwrite: plan.overwrite,
                    early,
                },
                &|rel| super::staging::note_big_file(staging, rel),
            );
            let fetched = lfs_fetch.map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(Error::Internal("the LFS fetch panicked".into())))
            });
            (files, fetched)
        });
        let files = files?;
        tracing::debug!(
            "{files} files checked out after {} ms",
            started.elapsed().as_millis()
        );
        if let Some(fetched) = lfs_fetched {
            fetched?;
            self.smudge_lfs(&mut index, &lfs)?;
        }
        checkout::write_index(&mut index)?;
        tracing::debug!("index written after {} ms", started.elapsed().as_millis());
        Ok((files, gitlinks, subs))
    }
}

impl Run<'_> {
    /// For a sparse restore, mark the entries outside the cone skip-worktree, and after a
    /// filtered fetch get the blobs inside it (a second pack); returns where the checkout reads
    /// blobs from.
    fn sparse(
        &self,
        index: &mut gix::index::File,
        objects: crate::pack::PackObjects,
    ) -> Result<crate::pack::PackObjects> {
        let Some(cone) = &self.opts.sparse else {
            return Ok(objects);
        };
        cone.refuse_files(index)?;
        let missing = cone.missing_in(index);
        if !missing.is_empty() {
            self.notes.borrow_mut().push(format!(
                "the tree has no folder {} (--sparse): nothing is checked out for it",
                missing.join(", ")
            ));
        }
        let blobs = super::sparse::mark(index, cone);
        let Some((first, more)) = blobs.split_first().filter(|_| self.filtered) else {
            return Ok(objects);
        };
        let pack_dir = self.staging.join("objects/pack");
        let interrupt = AtomicBool::new(false);
        let fetched =
            self.http
                .with_retries(self.read, "fetching the sparse checkout's blobs", |url| {
                    let want = fetch::Want {
                        commit: FullSha::from_id(*first),
                        depth: None,
                        pack_dir: &pack_dir,
                        limits: self.opts.limits,
                        base: None,
                        observer: None,
                        filter: None,
                        more,
                    };
                    fetch::fetch_pack(self.http, url, self.caps, want, &interrupt)
                })?;
        tracing::info!("{} blobs of the cone received", fetched.objects);
        // Killed here, the staging folder holds both packs and no index: the rerun starts over.
        crate::failpoint::hit("after-sparse-fetch");
        let pack_path = fetched.pack_path.as_deref().ok_or_else(|| {
            Error::Integrity("the remote sent no pack for the sparse checkout's blobs".into())
        })?;
        crate::pack::PackObjects::open(
            pack_path,
            self.opts.limits,
            &fetched.big,
            self.opts.tip.format(),
        )
        .map_err(|e| Error::internal("opening the received pack", e))
    }
}

/// The submodules to restore, and a warning about gitlinks `.gitmodules` does not name.
type Planned = (Vec<super::submodules::Submodule>, Option<String>);

impl Run<'_> {
    /// Restore the submodules `subs` planned before the checkout; returns warnings.
    fn restore_submodules(&self, (subs, warning): Planned) -> Result<Vec<String>> {
        let opts = self.opts;
        let fetcher = super::submodules::Fetcher {
            http: self.http,
            limits: opts.limits,
            mode: opts.submodules,
            branch: &opts.branch,
            overwrite: self.plan.overwrite,
            begun: Default::default(),
        };
        let level = super::submodules::Level {
            git_dir: self.staging,
            git_dir_final: &opts.dir.join(".git"),
            tree: self.tree,
            tree_final: &opts.dir,
            nesting: 0,
        };
        let mut warnings: Vec<String> = warning.into_iter().collect();
        warnings.extend(fetcher.restore_all(&level, &subs)?);
        Ok(warnings)
    }

    /// Write the LFS files of `lfs` with their content (fetched by [`fetch_lfs`]).
    fn smudge_lfs(&self, index: &mut gix::index::File, lfs: &super::lfs::LfsPlan) -> Result<()> {
        self.lfs_files.set(lfs.files.len());
        super::lfs::smudge(
            self.tree,
            std::path::Path::new(crate::names::STAGING_DIR),
            self.staging,
            index,
            &lfs.files,
        )?;
        if !self.opts.template {
            layout::add_lfs_config(self.staging)?;
        }
        Ok(())
    }
}

/// Fetch the LFS objects of `lfs` into the staging git dir `staging` (while the checkout runs),
/// from the LFS server of `.lfsconfig` or of `read_url`.
fn fetch_lfs(
    http: &Http,
    read_url: &crate::types::RemoteUrl,
    staging: &std::path::Path,
    lfs: &super::lfs::LfsPlan,
) -> Result<()> {
    let endpoint = match &lfs.configured_url {
        Some(url) => Endpoint::configured(url, read_url)?,
        None => Endpoint::of_remote(read_url),
    };
    let fetched = super::lfs::fetch(http, &endpoint, staging, &lfs.files)?;
    tracing::info!(
        "{} LFS files, {fetched} objects fetched from {endpoint}",
        lfs.files.len()
    );
    Ok(())
}
