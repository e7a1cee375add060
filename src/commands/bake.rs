//! `git-session bake`: restore the tree of a base commit as a template — no session branch, no
//! lease, `HEAD` detached at the base — for a sandbox image built once and booted many times. A
//! later `restore` in the baked tree fetches and writes only what changed since the base.

use crate::output::json::{Baked, CommandResult};

use crate::cli::BakeArgs;
use crate::error::{Error, Refusal, Result};
use crate::inputs;
use crate::output::Success;
use crate::restore::{Git, RestoreOptions, TEMPLATE_BRANCH, restore};
use crate::types::SessionBranch;

/// Run `bake` in `dir` (already resolved from `-C`/`SESSION_DIR`).
///
/// # Errors
/// Usage (2) for missing or invalid inputs, before any network I/O; then as `restore` (auth 4,
/// network 5, integrity 6, conflict 7 for a non-empty folder or another template, not found 8,
/// io 10).
pub fn run(args: &BakeArgs, dir: std::path::PathBuf) -> Result<Success> {
    let tip = inputs::tip(args.tip_sha.as_deref())?;
    let read =
        inputs::url(args.read_url.as_deref(), "READ_URL", "READ_URL_FILE")?.ok_or_else(|| {
            Error::Usage(
                Refusal::Missing,
                "READ_URL is not set: put the read URL in READ_URL or READ_URL_FILE (for an image \
                 build, a build secret: READ_URL_FILE=/run/secrets/read_url)"
                    .into(),
            )
        })?;
    let opts = RestoreOptions {
        dir,
        branch: TEMPLATE_BRANCH
            .parse::<SessionBranch>()
            .expect("a valid branch name"),
        tip,
        read: Some(read),
        push: None,
        depth: Some(1),
        force: false,
        limits: crate::pack::PackLimits {
            max_object_bytes: args.max_object_bytes,
            ..Default::default()
        },
        lfs: crate::restore::LfsMode::Auto,
        submodules: crate::restore::SubmoduleMode::None,
        sparse: None,
        template: true,
        cache: None,
        // An image carries no signing set-up: each session's boot writes its own.
        signing: None,
    };
    let report = restore(&opts, &mut Git::default())?;
    let human = if report.noop {
        format!(
            "{} already holds a template baked at {tip}; nothing to do",
            opts.dir.display()
        )
    } else {
        format!(
            "baked {tip} into {} ({} files): a restore there fetches only what changed since this base",
            opts.dir.display(),
            report.files
        )
    };
    Ok(Success {
        result: CommandResult::Bake(Baked {
            base: report.tip,
            noop: report.noop,
            files: report.files,
            object_format: crate::types::format_name(report.tip.format()),
        }),
        branch: String::new(),
        warnings: report.warnings,
        human,
    })
}
