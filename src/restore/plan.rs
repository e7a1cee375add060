//! Step 2: decide what the restore does: a no-op, a fresh restore, a resumed one or a boot from a
//! baked template; and what the remote branch says about the lease.

use super::intent::checkout_began;
use super::options::RestoreOptions;
use super::report::RestoreReport;
use super::target::{Target, inspect};
use crate::error::{Error, Refusal, Result};
use crate::names::STAGING_DIR;
use crate::repo::session::{SessionRecord, Source};
use crate::types::{FullSha, SessionBranch};
use std::path::{Path, PathBuf};

/// How restore may write into the target, decided from its state.
pub(crate) struct Plan {
    /// Files the commit tracks may be overwritten.
    pub(super) overwrite: bool,
    /// Only what an interrupted restore of this commit left may be replaced (`overwrite` without
    /// `--force`): files holding the commit's content, or a prefix of it cut by the kill.
    pub(super) resume_only: bool,
    /// When the interrupted run was a git restore that got as far as its checkout: when that
    /// checkout began (the newest pack index in its staging folder). Only such a run can have left
    /// a file cut short (see [`CutShort`]).
    pub(super) cut_short_since: Option<std::time::SystemTime>,
    /// The big file the interrupted checkout was writing, relative to the target.
    pub(super) cut_short_big: Option<PathBuf>,
    /// The target held nothing (faster checkout).
    pub(super) empty: bool,
    /// The target holds an interrupted restore of this session: a failure keeps its staging
    /// folder and intent, so that the next run still completes it.
    pub(super) interrupted: bool,
}

/// What [`plan`] decided.
pub(super) enum Decision {
    /// Restore, writing as the plan says.
    Restore(Plan),
    /// Boot a session from the baked template in the target ([`boot`]).
    Boot(crate::repo::template::TemplateRecord),
    /// The target already holds this session: a no-op success.
    Done(Box<RestoreReport>),
}

/// Decide what to do with the target: restore it, or finish early (a no-op).
pub(super) fn decide(opts: &RestoreOptions) -> Result<Decision> {
    match inspect(&opts.dir)? {
        Target::Template(template) => plan_template(opts, template),
        Target::Session(record) if opts.template => Err(Error::conflict(format!(
            "{} holds session '{}', not a template: bake into an empty directory",
            opts.dir.display(),
            record.branch
        ))),
        Target::Empty => Ok(Decision::Restore(Plan {
            overwrite: opts.force,
            empty: true,
            resume_only: false,
            cut_short_since: None,
            cut_short_big: None,
            interrupted: false,
        })),
        Target::Session(record) => plan_session(opts, &record),
        Target::Interrupted(intent) => {
            if intent.branch == opts.branch && intent.tip == opts.tip || opts.force {
                tracing::info!("resuming an interrupted restore of {}", intent.tip);
                Ok(Decision::Restore(Plan {
                    overwrite: true,
                    empty: false,
                    resume_only: !opts.force,
                    cut_short_since: intent
                        .checkout_began_ms
                        .map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
                        .or_else(|| checkout_began(&opts.dir.join(STAGING_DIR))),
                    cut_short_big: intent.big_file.clone(),
                    interrupted: true,
                }))
            } else {
                Err(Error::conflict(format!(
                    "{} holds an interrupted restore of '{}' at {}: rerun that restore, or pass --force",
                    opts.dir.display(),
                    intent.branch,
                    intent.tip
                )))
            }
        }
        Target::ForeignRepository => Err(Error::conflict(format!(
            "{} already holds a git repository that git-session did not restore: nothing was changed",
            opts.dir.display()
        ))),
        Target::Occupied(names) => {
            if opts.force {
                Ok(Decision::Restore(Plan {
                    overwrite: true,
                    empty: false,
                    resume_only: false,
                    cut_short_since: None,
                    cut_short_big: None,
                    interrupted: false,
                }))
            } else {
                let shown: Vec<_> = names.iter().take(5).cloned().collect();
                let hint = if opts.template {
                    "bake into an empty folder"
                } else {
                    "pass --force to overwrite the files the commit tracks and keep the others"
                };
                Err(Error::conflict(format!(
                    "{} is not empty ({}{}): restore would mix the commit with other content; {hint}",
                    opts.dir.display(),
                    shown.join(", "),
                    if names.len() > 5 { ", …" } else { "" }
                )))
            }
        }
    }
}

/// A target holding a session: this one at `TIP_SHA` (or descending from it) is done already.
pub(super) fn plan_session(opts: &RestoreOptions, record: &SessionRecord) -> Result<Decision> {
    if record.branch != opts.branch {
        return Err(Error::Usage(
            Refusal::AnotherSession,
            format!(
                "{} belongs to another session (branch '{}', not '{}'): restore into an empty directory",
                opts.dir.display(),
                record.branch,
                opts.branch
            ),
        ));
    }
    if let Some(at) = holds_tip(&opts.dir, record, opts.tip)? {
        return Ok(Decision::Done(Box::new(RestoreReport {
            branch: record.branch.clone(),
            // Where the tree is, which may be past an older TIP_SHA given again.
            tip: at,
            lease: record.lease,
            source: record.source,
            noop: true,
            files: 0,
            warnings: Vec::new(),
            extras: Default::default(),
        })));
    }
    Err(Error::conflict(format!(
        "{} already holds session '{}' at a commit that does not descend from {}: \
         nothing was changed (move the tree aside to restore afresh)",
        opts.dir.display(),
        record.branch,
        opts.tip
    )))
}

/// A target holding a template: a bake of the same base is done already; a restore boots it.
pub(super) fn plan_template(
    opts: &RestoreOptions,
    template: crate::repo::template::TemplateRecord,
) -> Result<Decision> {
    if !opts.template {
        // Formats are never converted: the template's objects, index and config are of its own.
        if let Err(wrong) = opts.tip.check_format(template.object_format) {
            return Err(Error::Usage(
                Refusal::Invalid,
                format!(
                    "TIP_SHA: {wrong}; the template in {} was baked from a {} repository: boot \
                     it with a commit of that repository, or bake a template of TIP_SHA's",
                    opts.dir.display(),
                    crate::types::format_title(template.object_format)
                ),
            ));
        }
        return Ok(Decision::Boot(template));
    }
    if template.base == opts.tip {
        return Ok(Decision::Done(Box::new(RestoreReport {
            branch: opts.branch.clone(),
            tip: opts.tip,
            lease: FullSha::zero(opts.tip.format()),
            source: Source::Git,
            noop: true,
            files: 0,
            warnings: Vec::new(),
            extras: Default::default(),
        })));
    }
    Err(Error::conflict(format!(
        "{} already holds a template baked at {}, not {}: bake into an empty directory",
        opts.dir.display(),
        template.base,
        opts.tip
    )))
}

/// The commit the finished restore in `dir` is at, when its `HEAD` is at `tip` or descends
/// from it (`None`: it does not).
pub(super) fn holds_tip(
    dir: &Path,
    record: &SessionRecord,
    tip: FullSha,
) -> Result<Option<FullSha>> {
    if record.tip == tip && record.source == Source::Archive {
        // An archive restore has no history yet: the record is the proof.
        return Ok(Some(tip));
    }
    let repo = crate::repo::open(&dir.join(".git"))?;
    let Ok(head) = repo.head_id() else {
        return Ok((record.tip == tip).then_some(tip));
    };
    let head = head.detach();
    Ok(crate::repo::descends_from(&repo, head, tip.id())?.then(|| FullSha::from_id(head)))
}

/// The lease from where ls-refs found the session branch (`None`: not there, a new session): the
/// zero id, or `TIP_SHA`, with a warning when the branch is elsewhere.
pub(super) fn lease_from(
    branch: &SessionBranch,
    tip: FullSha,
    remote_tip: Option<FullSha>,
    warnings: &mut Vec<String>,
) -> FullSha {
    match remote_tip {
        None => FullSha::zero(tip.format()),
        Some(t) if t == tip => tip,
        Some(other) => {
            warnings.push(stale_tip_warning(branch, other, tip));
            tip
        }
    }
}

/// The warning for a remote branch that is not at `TIP_SHA`: the backend handed out a stale tip.
pub(super) fn stale_tip_warning(
    branch: &crate::types::SessionBranch,
    remote: FullSha,
    tip: FullSha,
) -> String {
    format!(
        "the remote branch '{branch}' is at {remote}, not at TIP_SHA {tip}: the backend handed out a stale tip; \
         the tree of {tip} is restored, but a push from it will be refused (exit 3)"
    )
}
