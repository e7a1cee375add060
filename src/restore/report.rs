//! What a restore reports: its result, warnings and the extras of the JSON output.

use super::options::RestoreOptions;
use crate::repo::session::Source;
use crate::types::{FullSha, SessionBranch};

/// The result of a restore.
#[derive(Debug)]
pub struct RestoreReport {
    /// The session branch.
    pub branch: SessionBranch,
    /// The commit restored.
    pub tip: FullSha,
    /// The recorded lease.
    pub lease: FullSha,
    /// Where the tree came from.
    pub source: Source,
    /// `true` when the tree already held this session and nothing was touched.
    pub noop: bool,
    /// Files written.
    pub files: usize,
    /// Warnings for the user (also in the JSON output).
    pub warnings: Vec<String>,
    /// What LFS, submodules and a sparse cone added.
    pub extras: Extras,
}

/// What a restore did beyond the tree's own files.
#[derive(Debug, Default)]
pub struct Extras {
    /// Git LFS files written with their content.
    pub lfs_files: usize,
    /// Submodules restored, by path.
    pub submodules: Vec<String>,
    /// The cone's folders of a sparse restore.
    pub sparse: Option<Vec<String>>,
    /// The server answered the fetch posted without the capability advertisement as protocol
    /// v2 (a bake records it in the template: [`crate::repo::template::TemplateRecord`]).
    pub posted_v2: bool,
}

impl RestoreReport {
    /// A git restore of `opts.tip` that wrote `files` files.
    pub(super) fn of_git(
        opts: &RestoreOptions,
        lease: FullSha,
        files: usize,
        warnings: Vec<String>,
    ) -> Self {
        RestoreReport {
            branch: opts.branch.clone(),
            tip: opts.tip,
            lease,
            source: Source::Git,
            noop: false,
            files,
            warnings,
            extras: Default::default(),
        }
    }
}
