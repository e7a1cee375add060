//! The boot: `restore` into a baked template (`git-session bake`). Only the objects between the
//! template's base and `TIP_SHA` are fetched (a thin pack, completed from the tree's own objects),
//! and only the files that differ between the two commits are written or removed; untracked and
//! ignored files (what the template build installed) are kept.
//!
//! In order, each step safe to repeat, so a kill anywhere is completed by the rerun:
//! 1. the boot intent (`.git/git-session-boot.json`: branch and tip) is written;
//! 2. the fetch: `want TIP_SHA`, a `shallow` line for every shallow commit, the base as `have`,
//!    `thin-pack`, `deepen 1` (`gitprotocol-v2` "fetch"); skipped when `TIP_SHA` is already here;
//!    failpoint `after-fetch`;
//! 3. the switch: every path the two trees disagree on is classified against the work tree
//!    (size and mtime against the index first; a file is read only when they differ or the
//!    commit changes it): a file still as the base had it is written or removed; one already as
//!    `TIP_SHA` has it (an earlier, killed boot) is left; a local change `TIP_SHA` leaves alone is
//!    kept with a warning; a local change `TIP_SHA` also changes is a conflict (exit 7, nothing
//!    changed; `--force` takes `TIP_SHA`'s version). Failpoint `mid-switch` after the removals;
//! 4. the index of `TIP_SHA` (stat data kept for the files not written), refs, `shallow`, config,
//!    the pre-push check; failpoint `before-record`;
//! 5. the session record, then the template record and the intent are removed.
//!
//! Step 1 is `intent.rs`, step 2 `difference.rs`, step 3 `switch.rs` (with the LFS files after it:
//! `moves.rs` decides path by path before anything is written, `files.rs` writes); this file runs
//! them in order and does steps 4 and 5.

mod difference;
mod files;
mod intent;
mod moves;
mod switch;

use super::options::RestoreOptions;
use super::probe::Survey;
use super::report::RestoreReport;
use crate::error::{Error, Refusal, Result};
use crate::repo::layout::{self, OriginConfig};
use crate::repo::session::SessionRecord;
use crate::repo::template::TemplateRecord;
use crate::wire::http::Http;
use difference::{fetch_checked, parents_here};
use intent::begin;
use switch::{Switched, lfs_after_switch, switch};

/// A boot refused for what the server sent (exit 6: a commit whose objects are not all there, an
/// object that is not what its id says) takes out the packs it fetched: kept, they would make the
/// next boot skip the fetch (`TIP_SHA` is here) and fail the same way against a healthy server.
fn forget_refused_pack(
    e: Error,
    pack_dir: &std::path::Path,
    before: &[std::path::PathBuf],
) -> Error {
    if e.exit_code() != 6 {
        return e;
    }
    let fetched: Vec<_> = super::verify::list(pack_dir)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    match super::verify::set_aside(&fetched) {
        Ok(()) => e,
        Err(removing) => Error::Noted {
            error: Box::new(e),
            note: format!(
                "the pack it fetched could not be removed ({removing}): bake the template again \
                 before the next boot"
            ),
        },
    }
}

/// Boot the session `opts.branch` at `opts.tip` from the template in `opts.dir`.
///
/// # Errors
/// Usage (2) without `READ_URL`; auth (4); network (5); integrity (6) for a wrong or incomplete
/// pack; conflict (7) for a local change that `TIP_SHA` also changes, or another interrupted
/// boot; not found (8); io (10).
pub fn boot(opts: &RestoreOptions, template: &TemplateRecord) -> Result<RestoreReport> {
    let git_dir = opts.dir.join(".git");
    let intent = begin(opts, &git_dir)?;
    let read = opts.read.as_ref().ok_or_else(|| {
        Error::Usage(
            Refusal::Missing,
            "READ_URL is not set: put the read URL in READ_URL or READ_URL_FILE".into(),
        )
    })?;
    let read_url = read.load()?;
    let push_url = opts.push.as_ref().map(|p| p.load()).transpose()?;
    // The repository is opened once (`HEAD`, `commondir`, `config` read once) and that handle
    // serves the survey, the fetch and the switch alike: a pack the fetch adds is found by the
    // object store's refresh on its first miss.
    let mut repo = crate::repo::open(&git_dir)?;
    // The stat calls of the switch's plan depend on the template alone: made while the server
    // computes the pack.
    let survey = std::thread::spawn({
        let (workdir, repo) = (opts.dir.clone(), repo.clone().into_sync());
        let (base, max_entries) = (template.base, opts.limits.max_tree_entries);
        move || Survey::of(&workdir, &repo.to_thread_local(), base, max_entries)
    });
    let http = Http::new()?;
    // The ls-refs and the fetch at once where the bake found the server taking both posted
    // (`posted_v2`), else the ls-refs first.
    let connected = match super::connect::at_once(&http, opts, template.posted_v2) {
        Some(connected) => connected,
        None => super::connect::connect(&http, read, opts, true)?,
    };
    let pack_dir = git_dir.join("objects/pack");
    let before = super::verify::list(&pack_dir);
    let (lease, mut warnings, mut shallow) =
        fetch_checked(opts, template, &mut repo, &http, read, &connected)?;
    crate::failpoint::hit("after-fetch");

    let switched = (|| {
        if !shallow.contains(&opts.tip.id()) && !parents_here(&repo, opts.tip)? {
            // The fetch was skipped (an earlier, killed boot made it) or its shallow-info is gone.
            shallow.push(opts.tip.id());
        }
        switch(
            opts,
            template,
            &repo,
            intent,
            survey.join().unwrap_or_default(),
        )
    })();
    let Switched {
        files,
        warnings: kept,
    } = switched.map_err(|e| forget_refused_pack(e, &pack_dir, &before))?;
    warnings.extend(kept);
    let lfs_files = lfs_after_switch(opts, &repo, &http, &read_url, &mut warnings)?;
    drop(repo);

    warnings.extend(write_state(
        opts,
        &git_dir,
        (&read_url, push_url.as_ref()),
        lease,
        &shallow,
        lfs_files,
    )?);
    crate::failpoint::hit("before-record");
    let mut record = SessionRecord::of_git_restore(
        opts.branch.clone(),
        opts.tip,
        lease,
        &read_url,
        push_url.as_ref(),
        opts.depth,
    );
    record.signing = opts.signing.as_ref().map(|s| s.record.clone());
    // Its own batch: durable only after everything it vouches for is.
    crate::fs::durable_batch(|| record.write(&git_dir))?;
    crate::failpoint::hit("boot-recorded");
    super::intent::forget_template(&git_dir);
    Ok(RestoreReport::of_git(opts, lease, files, warnings))
}

/// Step 4's state files: `shallow`, the branch (and its tracking ref when the lease is the tip),
/// `HEAD`, the config, the hook; their fsyncs batched (one journal commit: the session record
/// written after them vouches for them all, and a rerun after a crash before it writes them
/// again). Returns a warning for each template hook removed.
fn write_state(
    opts: &RestoreOptions,
    git_dir: &std::path::Path,
    (read_url, push_url): (&crate::types::RemoteUrl, Option<&crate::types::RemoteUrl>),
    lease: crate::types::FullSha,
    shallow: &[gix::ObjectId],
    lfs_files: usize,
) -> Result<Vec<String>> {
    crate::fs::durable_batch(|| {
        let origin = OriginConfig {
            url: Some(read_url),
            push_url,
            branch: &opts.branch,
            on_remote: !lease.is_zero(),
            promisor: false,
            promisor_filter: false,
            format: opts.tip.format(),
            signing: opts.signing.as_ref(),
        };
        layout::write_shallow(git_dir, shallow)?;
        layout::write_ref(git_dir, &opts.branch.full_ref(), opts.tip)?;
        if lease == opts.tip {
            layout::write_ref(git_dir, &opts.branch.tracking_ref(), opts.tip)?;
        }
        crate::fs::write_atomic_if_changed(
            &git_dir.join("HEAD"),
            format!("ref: {}\n", opts.branch.full_ref()).as_bytes(),
        )?;
        layout::write_config(git_dir, &origin)?;
        if lfs_files > 0 || git_dir.join("lfs/objects").is_dir() {
            layout::add_lfs_config(git_dir)?;
        }
        let removed = crate::repo::prepush::remove_template_hooks(git_dir)?;
        crate::repo::prepush::install(git_dir)?;
        Ok(removed)
    })
}
