//! What to restore and where: the validated inputs of every restore.

use super::lfs::LfsMode;
use crate::types::{FullSha, SessionBranch};
use crate::wire::http::UrlSource;
use std::path::PathBuf;

/// What to restore, and where: everything validated.
#[derive(Debug)]
pub struct RestoreOptions {
    /// The work tree (created if missing).
    pub dir: PathBuf,
    /// The session branch.
    pub branch: SessionBranch,
    /// The commit to restore.
    pub tip: FullSha,
    /// Where to read from (required for git; for an archive, used to look the lease up).
    pub read: Option<UrlSource>,
    /// Where pushes go, if known (only its credential-free form is written).
    pub push: Option<UrlSource>,
    /// History depth; `None` fetches the whole history.
    pub depth: Option<u32>,
    /// Overwrite files the commit tracks; leave other files in place.
    pub force: bool,
    /// Bounds on the fetched pack.
    pub limits: crate::pack::PackLimits,
    /// When to fetch Git LFS objects (`--lfs`).
    pub lfs: LfsMode,
    /// Which submodules to fetch (`--submodules`).
    pub submodules: SubmoduleMode,
    /// The folders of a sparse checkout (`--sparse`); `None`: the whole tree.
    pub sparse: Option<super::sparse::Cone>,
    /// Bake a template (`git-session bake`): `tip` is the base; no lease is looked up, `HEAD` is
    /// left detached and a template record is written instead of a session record. `branch` is
    /// then [`TEMPLATE_BRANCH`], which only names the bake in its intent.
    pub template: bool,
    /// A baked template (or its git dir) whose objects seed a restore into an empty folder
    /// (`--cache`, see [`cache`]).
    pub cache: Option<PathBuf>,
    /// Plain git signs commits through git-session (`SIGNING_*` set): written into `.git/config`
    /// and the session record.
    pub signing: Option<crate::repo::layout::GitSigning>,
}

/// The branch name a bake's intent carries (a bake has no session branch).
pub const TEMPLATE_BRANCH: &str = "git-session-template";

impl RestoreOptions {
    /// The same restore again with `--submodules shallow`, as a warning about submodules left
    /// empty suggests it: the rerun fetches them into this tree.
    pub fn with_submodules(&self) -> crate::hint::Hint {
        crate::hint::Hint::RestoreAt {
            dir: self.dir.clone(),
            branch: self.branch.clone(),
            tip: self.tip,
            submodules: true,
        }
    }
}

/// Which submodules a restore fetches (`--submodules`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SubmoduleMode {
    /// None: each stays an empty folder, with a warning naming them.
    #[default]
    None,
    /// The superproject's own submodules.
    Shallow,
    /// Those, and theirs, down to 8 levels
    Recursive,
}
