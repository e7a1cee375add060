//! `restore`: put the tree of one exact commit into the session directory (SPEC "Commands",
//! rules 1, 2, 6, 8, 9).
//!
//! Every restore works the same way, whatever the source:
//! 1. inspect the target: a finished restore of this session is a no-op; another session's tree is
//!    exit 2; another repository or other content is exit 7 unless `--force`;
//! 2. build the git dir in a staging folder inside the target (`.git-session-restore/`), with an
//!    intent file naming the branch and commit;
//! 3. fill it (`fetch`), check the tree out, write the index;
//! 4. write the session record, then rename the staging folder to `.git`: only a finished restore
//!    has a `.git`. A kill before that leaves the staging folder, which the next run (same branch and
//!    commit) discards and redoes, overwriting the files it had written.
//!
//! Where each step lives: the inputs are `options`; step 1 is `target` (and `intent`, what
//! an interrupted run left); the decision (no-op, restore, resume, boot from a template) is
//! `plan`; step 2 and the final rename are `staging`; step 3 is the source's own flow,
//! `git` (with `boot` for a baked template, `cache`, `verify` and `probe`) or
//! `archive`, which both check out through `checkout`, `early` and `write`, then add
//! `lfs`, `submodules` and `sparse`; what comes back is `report`.

pub mod archive;
mod boot;
mod cache;
pub mod checkout;
pub(crate) mod early;
mod git;
mod intent;
mod lfs;
mod options;
mod plan;
mod probe;
mod report;
pub mod sparse;
mod staging;
pub(crate) mod submodules;
mod target;
mod verify;
mod write;

pub use git::restore_git;
pub use intent::CutShort;
pub use lfs::LfsMode;
pub use options::{RestoreOptions, TEMPLATE_BRANCH};
pub use report::{Extras, RestoreReport};
pub use submodules::SubmoduleMode;

pub use crate::names::STAGING_DIR;
