//! `git-session restore`: validate the inputs (before any network I/O), then run the restore.

use serde_json::{Value, json};

use crate::cli::{From, RestoreArgs};
use crate::error::{Error, Result};
use crate::inputs;
use crate::output::Success;
use crate::restore::archive::{ArchiveOptions, ArchiveSource, Limits, Strip, restore_archive};
use crate::restore::{RestoreOptions, restore_git};

/// Run `restore` in `dir` (already resolved from `-C`/`SESSION_DIR`).
///
/// # Errors
/// See [`restore_git`]; usage errors (exit 2) for invalid or missing inputs come first.
pub fn run(args: &RestoreArgs, dir: std::path::PathBuf) -> Result<Success> {
    let tip = inputs::tip(args.tip_sha.as_deref())?;
    let branch = inputs::branch(args.session_branch.as_deref())?;
    let push = inputs::url(args.push_url.as_deref(), "PUSH_URL", "PUSH_URL_FILE")?;
    let read = inputs::url(args.read_url.as_deref(), "READ_URL", "READ_URL_FILE")?;
    let archive_source = if let Some(path) = &args.archive {
        Some(if path.as_os_str() == "-" {
            ArchiveSource::Stdin
        } else {
            ArchiveSource::File(path.clone())
        })
    } else {
        inputs::url(
            args.archive_url.as_deref(),
            "ARCHIVE_URL",
            "ARCHIVE_URL_FILE",
        )?
        .map(ArchiveSource::Url)
    };
    let from = args.from.unwrap_or(if archive_source.is_some() {
        From::Archive
    } else {
        From::Git
    });
    if from == From::Git && read.is_none() {
        return Err(Error::Usage(
            "READ_URL is not set: put the read URL in READ_URL or READ_URL_FILE (--read-url takes only a URL without credentials)".into(),
        ));
    }
    let opts = RestoreOptions {
        dir,
        branch,
        tip,
        read,
        push,
        depth: (args.depth > 0).then_some(args.depth),
        force: args.force,
        limits: crate::pack::PackLimits {
            max_object_bytes: args.max_object_bytes,
            ..Default::default()
        },
    };
    let mut expiry = Vec::new();
    for (name, source) in [("READ_URL", &opts.read), ("PUSH_URL", &opts.push)] {
        if let Some(s) = source {
            let url = s.load()?;
            expiry.extend(super::expiry_warnings([(name, &url)]));
        }
    }
    let mut report = match from {
        From::Git => restore_git(&opts)?,
        From::Archive => {
            let source = archive_source.ok_or_else(|| {
                Error::Usage(
                    "restore --from archive needs ARCHIVE_URL, --archive-url or --archive FILE|-"
                        .into(),
                )
            })?;
            restore_archive(
                &opts,
                &ArchiveOptions {
                    source,
                    strip: args.strip_components.map_or(Strip::Auto, Strip::Components),
                    require_commit_id: args.require_commit_id,
                    limits: Limits {
                        header_bytes: args.max_header_bytes,
                        entries: args.max_entries,
                        total_bytes: args.max_bytes,
                    },
                },
            )?
        }
    };
    report.warnings.extend(expiry);
    if report.noop
        && let Ok(session) = crate::repo::session::Session::open(&opts.dir, None)
    {
        // A finished restore is left as it is, but plain `git push` must still be checked.
        super::check_hooks(&session);
    }
    let lease_text = if report.lease.is_zero() {
        "new branch".to_owned()
    } else {
        report.lease.to_string()
    };
    let human = if report.noop {
        format!(
            "{} already holds session {} at {}; nothing to do",
            opts.dir.display(),
            report.branch,
            report.tip
        )
    } else {
        format!(
            "restored {} at {} into {} ({} files; lease: {lease_text})",
            report.branch,
            report.tip,
            opts.dir.display(),
            report.files
        )
    };
    let mut fields = serde_json::Map::new();
    fields.insert("tip".into(), json!(report.tip));
    fields.insert("lease".into(), json!(report.lease));
    fields.insert(
        "source".into(),
        Value::String(report.source.as_str().into()),
    );
    fields.insert("noop".into(), Value::Bool(report.noop));
    fields.insert("files".into(), json!(report.files));
    Ok(Success {
        command: "restore",
        branch: report.branch.to_string(),
        warnings: report.warnings,
        fields,
        human,
    })
}
