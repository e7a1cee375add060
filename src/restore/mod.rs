//! `restore`: put the tree of one exact commit into the session directory (SPEC "Commands",
//! rules 1, 2, 6, 8, 9).
//!
//! Every restore works the same way, whatever the source:
//! 1. inspect the target (`target`, `intent`: what an interrupted run left);
//! 2. plan (`plan`): a finished restore of this session is a no-op (but with `--submodules`, which
//!    fetches the submodules left empty); another session's tree is exit
//!    2; another repository or other content is exit 7 unless `--force`; a baked template boots;
//! 3. stage (`staging`): the git dir is built in a staging folder inside the target
//!    (`.git-session-restore/`), with an intent file naming the branch and commit;
//! 4. fetch (`git`) or extract (`archive`) into it;
//! 5. check the tree out, write the index (`checkout`);
//! 6. publish (`staging`): write the session record, then rename the staging folder to `.git`: only
//!    a finished restore has a `.git`. A kill before that leaves the staging folder, which the next
//!    run (same branch and commit) completes, replacing only the files the killed run wrote.
//!
//! [`restore`] below is that flow; each step is the module it names. The source of the tree (git,
//! with `boot` for a baked template, `cache`, `verify` and `probe`; or `archive`) fills the staging
//! folder and checks out through `checkout`, `early` and `write`, then adds `lfs`, `submodules` and
//! `sparse`; what comes back is `report`.

pub mod agent;
pub mod archive;
mod boot;
mod cache;
pub mod checkout;
mod connect;
pub(crate) mod early;
mod git;
mod intent;
mod lfs;
mod lfs_select;
mod options;
mod plan;
mod probe;
mod report;
mod rerun;
mod source;
pub mod sparse;
mod staging;
pub(crate) mod submodules;
mod target;
mod verify;
mod write;

pub use archive::Archive;
pub use git::Git;
pub use intent::CutShort;
pub use lfs::LfsMode;
pub use lfs_select::LfsPattern;
pub use options::{RestoreOptions, TEMPLATE_BRANCH};
pub use report::{Extras, RestoreReport};
pub use submodules::SubmoduleMode;

pub use crate::names::STAGING_DIR;

use crate::error::Result;
use plan::Decision;
use source::{Prepared, Source};

/// Restore `opts.tip` from `source` into `opts.dir`, step by step as the contract says.
///
/// # Errors
/// Usage (2) for another session's tree; conflict (7) for content in the way; the source's own
/// errors (auth 4, network 5, integrity 6, not found 8, io 10).
#[tracing::instrument(skip_all, fields(branch = %opts.branch, tip = %opts.tip))]
pub(crate) fn restore(opts: &RestoreOptions, source: &mut impl Source) -> Result<RestoreReport> {
    let created_dir = !opts.dir.exists();
    // 1. Inspect the target, under its lock.
    let _lock = target::lock_target(&opts.dir)?;
    // 2. Plan: a no-op, a boot from a baked template, or a restore (fresh, forced or resumed).
    let plan = match plan::decide(opts)? {
        // A rerun with `--submodules` fetches those left empty (the warning's hint).
        Decision::Done(noop) => return rerun::complete(opts, *noop),
        Decision::Boot(template) => return source.boot(opts, &template),
        Decision::Restore(plan) => plan,
    };
    // What can fail before anything is written: connect, open the archive, look up the lease.
    if let Prepared::Boot(template) = source.prepare(opts, &plan)? {
        // Seeded from a cache into an empty folder: a boot that fails before writing a file
        // takes the seeded `.git` with it, so the folder is as it was.
        let booted = source.boot(opts, &template);
        if booted.is_err() && plan.empty {
            target::unseed(&opts.dir, created_dir);
        }
        return booted;
    }
    // 3. Stage: the git dir is built in the staging folder, with an intent file.
    let staging = staging::begin_staging(opts, &plan)?;
    // 4. Fetch or extract, and 5. check out.
    let result = source
        .fill(opts, &plan, &staging)
        // 6. Publish: the session record, then the rename to `.git`.
        .and_then(|(mut record, report)| {
            record.signing = opts.signing.as_ref().map(|s| s.record.clone());
            staging::publish(opts, &staging, &record, report.extras.posted_v2)?;
            Ok(report)
        });
    if result.is_err() && !source.wrote_into_target() && !plan.interrupted {
        // Nothing reached the target: it is as it was. Completing an interrupted restore keeps
        // the staging folder and its intent for the next run.
        staging::abandon(&staging);
        if created_dir {
            // Only if empty: `remove_dir` never deletes content.
            let _ = std::fs::remove_dir(&opts.dir);
        }
    }
    result
}
