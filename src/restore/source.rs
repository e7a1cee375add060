//! What a source of the tree (git, or an archive) does inside the restore flow of
//! [`super::restore`]: the steps that differ between them.

use std::path::Path;

use super::options::RestoreOptions;
use super::plan::Plan;
use super::report::RestoreReport;
use crate::error::Result;
use crate::repo::session::SessionRecord;
use crate::repo::template::TemplateRecord;

/// What [`Source::prepare`] found.
pub(crate) enum Prepared {
    /// Go on: stage, fill, publish.
    Restore,
    /// Boot from this template instead (a seeded cache).
    Boot(TemplateRecord),
}

/// A source of the commit's tree: git over smart HTTP, or an archive.
pub(crate) trait Source {
    /// The target holds a baked template: boot the session from it, or refuse.
    fn boot(&mut self, opts: &RestoreOptions, template: &TemplateRecord) -> Result<RestoreReport>;

    /// Everything that can fail before the target is touched: connect, open the archive, look up
    /// the lease. A refusal here leaves the target as it was.
    fn prepare(&mut self, opts: &RestoreOptions, plan: &Plan) -> Result<Prepared>;

    /// Fetch or extract into `staging`, check the tree out; the record to publish and the report.
    fn fill(
        &mut self,
        opts: &RestoreOptions,
        plan: &Plan,
        staging: &Path,
    ) -> Result<(SessionRecord, RestoreReport)>;

    /// Whether this run wrote into the target: a failure then keeps the staging folder and its
    /// intent, so that the next run completes the restore.
    fn wrote_into_target(&self) -> bool;
}
