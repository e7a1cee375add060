//! `git-session restore`: validate the inputs (before any network I/O), then run the restore.

use crate::output::json::{CommandResult, Restored};

use crate::cli::{From, RestoreArgs};
use crate::error::{Error, Refusal, Result};
use crate::inputs;
use crate::output::Success;
use crate::restore::archive::{ArchiveOptions, ArchiveSource, Limits, Strip};
use crate::restore::{Archive, Git, RestoreOptions, RestoreReport, restore};

/// Run `restore` in `dir` (already resolved from `-C`/`SESSION_DIR`).
///
/// # Errors
/// See [`restore`]; usage errors (exit 2) for invalid or missing inputs come first.
pub fn run(args: &RestoreArgs, dir: std::path::PathBuf) -> Result<Success> {
    let (opts, from, archive_source) = validate(args, dir)?;
    let archive = match from {
        From::Git => None,
        From::Archive => Some(archive_options(args, archive_source)?),
    };
    execute(opts, archive.as_ref())
}

/// The restore of validated inputs, from the archive when one is given, else by git: a single
/// restore, and each session of a manifest.
///
/// # Errors
/// See [`restore`].
pub(super) fn execute(
    mut opts: RestoreOptions,
    archive: Option<&ArchiveOptions>,
) -> Result<Success> {
    let mut expiry = expiry_warnings(&opts)?;
    // Plain git signs as save does: the key read now, so one that cannot sign fails here.
    let (signing, warning) = super::ssh_keygen::for_plain_git(&crate::signing::signing()?)?;
    opts.signing = signing;
    expiry.extend(warning);
    let mut report = match archive {
        None => restore(&opts, &mut Git::default())?,
        Some(options) => restore(&opts, &mut Archive::new(options))?,
    };
    report.warnings.extend(expiry);
    if report.noop
        && let Ok(session) = crate::repo::session::Session::open(&opts.dir, None)
    {
        // A finished restore is left as it is, but plain `git push` must still be checked.
        super::check_hooks(&session);
    }
    Ok(success(&opts, report))
}

/// Every input checked, and the source chosen, before any network I/O.
fn validate(
    args: &RestoreArgs,
    dir: std::path::PathBuf,
) -> Result<(RestoreOptions, From, Option<ArchiveSource>)> {
    let push = inputs::url(args.push_url.as_deref(), "PUSH_URL", "PUSH_URL_FILE")?;
    let read = inputs::url(args.read_url.as_deref(), "READ_URL", "READ_URL_FILE")?;
    let archive_source = archive_source(args)?;
    let from = args.from.unwrap_or(if archive_source.is_some() {
        From::Archive
    } else {
        From::Git
    });
    // Every missing input named at once, not one per run.
    let missing: Vec<&str> = [
        (args.tip_sha.is_none(), "TIP_SHA"),
        (args.session_branch.is_none(), "SESSION_BRANCH"),
        (from == From::Git && read.is_none(), "READ_URL"),
    ]
    .into_iter()
    .filter_map(|(gone, name)| gone.then_some(name))
    .collect();
    if missing.len() > 1 {
        return Err(Error::Usage(
            Refusal::Missing,
            format!(
                "{} are not set: export them (READ_URL may come from READ_URL_FILE; flags: \
             --tip-sha, --session-branch, --read-url)",
                missing.join(", ")
            ),
        ));
    }
    let tip = inputs::tip(args.tip_sha.as_deref())?;
    let branch = inputs::branch(args.session_branch.as_deref())?;
    if from == From::Git && read.is_none() {
        return Err(Error::Usage(Refusal::Missing,
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
        limits: pack_limits(args),
        lfs: args.lfs,
        submodules: args.submodules,
        sparse: crate::restore::sparse::Cone::from_inputs(&args.sparse)?,
        template: false,
        cache: args.cache.clone(),
        signing: None,
    };
    Ok((opts, from, archive_source))
}

/// `--archive` (a file, or `-` for stdin) wins over an archive URL.
fn archive_source(args: &RestoreArgs) -> Result<Option<ArchiveSource>> {
    if let Some(path) = &args.archive {
        return Ok(Some(if path.as_os_str() == "-" {
            ArchiveSource::Stdin
        } else {
            ArchiveSource::File(path.clone())
        }));
    }
    Ok(inputs::url(
        args.archive_url.as_deref(),
        "ARCHIVE_URL",
        "ARCHIVE_URL_FILE",
    )?
    .map(ArchiveSource::Url))
}

/// The URLs' warnings: an expiring token, a query string plain git will not get. Loading the URLs
/// also fails early on an unreadable URL file.
fn expiry_warnings(opts: &RestoreOptions) -> Result<Vec<String>> {
    let mut expiry = Vec::new();
    for (name, source) in [("READ_URL", &opts.read), ("PUSH_URL", &opts.push)] {
        if let Some(s) = source {
            let url = s.load()?;
            expiry.extend(super::expiry_warnings([(name, &url)]));
            // The query may hold a secret: never written to .git/config, so plain git goes without.
            if url.has_query() {
                expiry.push(format!(
                    "{name}'s query string is used by git-session but not written to .git/config \
                     (it may hold a secret): plain git in this tree reaches {} without it",
                    url.public()
                ));
            }
        }
    }
    Ok(expiry)
}

/// How to read the archive; `--from archive` without a source is a usage error.
pub(super) fn archive_options(
    args: &RestoreArgs,
    source: Option<ArchiveSource>,
) -> Result<ArchiveOptions> {
    let source = source.ok_or_else(|| {
        Error::Usage(
            Refusal::Missing,
            "restore --from archive needs ARCHIVE_URL, --archive-url or --archive FILE|-".into(),
        )
    })?;
    Ok(ArchiveOptions {
        source,
        strip: args.strip_components.map_or(Strip::Auto, Strip::Components),
        require_commit_id: args.require_commit_id,
        limits: Limits {
            header_bytes: args.max_header_bytes,
            entries: args.max_entries,
            total_bytes: args.max_bytes,
        },
    })
}

/// The report as the command's output.
fn success(opts: &RestoreOptions, report: RestoreReport) -> Success {
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
    Success {
        result: CommandResult::Restore(Restored {
            tip: report.tip,
            lease: report.lease,
            source: report.source.as_str(),
            noop: report.noop,
            files: report.files,
            lfs_files: report.extras.lfs_files,
            submodules: report.extras.submodules,
            sparse: report.extras.sparse,
            object_format: crate::types::format_name(report.tip.format()),
        }),
        branch: report.branch.to_string(),
        warnings: report.warnings,
        human,
    }
}

/// The pack bounds of the command line (`--max-object-bytes`, `--max-entries`), which a
/// manifest's every session gets too.
pub(super) fn pack_limits(args: &RestoreArgs) -> crate::pack::PackLimits {
    crate::pack::PackLimits {
        max_object_bytes: args.max_object_bytes,
        max_tree_entries: args.max_entries,
        ..Default::default()
    }
}
