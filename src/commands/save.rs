//! `git-session save`: stage everything, commit, push (SPEC "Commands").

use crate::cli::SaveArgs;
use crate::error::{Error, Result};
use crate::hint::Hint;
use crate::output::Success;
use crate::output::json::{CommandResult, Pushed};
use crate::repo::session::Session;
use crate::save::{CommitOptions, stage_and_commit};
use crate::types::Owner;

/// Run `save` in `dir`, with the session's inputs from `given`.
///
/// # Errors
/// Those of [`stage_and_commit`] and [`crate::commands::push::push_session`].
pub fn run(
    args: &SaveArgs,
    dir: std::path::PathBuf,
    owner: &Owner,
    given: super::Given,
) -> Result<Success> {
    let branch = given.branch();
    let session = Session::open(&dir, branch.as_deref())?;
    let signing = super::sign::setup_in(&session.record)?;
    let signer = super::sign::signer(&signing);
    let push_source = if args.no_push {
        None
    } else {
        Some(given.push()?)
    };
    // With --no-push a PUSH_URL in the environment still names a token that must not be committed.
    let scan_only = if args.no_push {
        given.push().ok()
    } else {
        None
    };
    let secrets =
        super::push::secret_forms(push_source.as_ref().or(scan_only.as_ref()), &signing, given)?;
    let (session, _lock) = super::push::lock_session(session, branch.as_deref())?;
    let check_was_off = super::check_hooks(&session);
    let attached = super::push::ensure_history(&session, given)?;
    let committed = stage_and_commit(
        &session.workdir,
        &session.record.branch,
        &CommitOptions {
            message: args.message.as_str(),
            secrets: &secrets,
            owner,
            signer: signer.as_deref(),
        },
    )?;
    let (signing_key, human_commit) = described(&committed);
    let mut warnings = [attached, committed.warnings].concat();
    let Some(source) = push_source else {
        return Ok(Success {
            result: CommandResult::Save(Pushed {
                committed: committed.commit.is_some(),
                commit: committed.commit,
                pushed: false,
                tip: session.record.lease,
                previous_tip: session.record.lease,
                signed: committed.signed,
                signing_key,
            }),
            branch: session.record.branch.to_string(),
            warnings,
            human: format!("{human_commit} on {} (not pushed)", session.record.branch),
        });
    };
    // What became of this save's work when the push fails: committed locally, kept.
    let kept = match committed.commit {
        Some(c) => format!("the commit {c} this save made is kept locally"),
        None => "nothing local was touched".to_owned(),
    };
    let pushed =
        super::push::push_session(session, &source, &kept, &signing, given).map_err(|e| {
            // What the commit warned of (an index it could not rewrite, and how to repair it) is
            // shown with the push's failure too.
            for w in &warnings {
                crate::output::warn_early(w.clone());
            }
            match e {
                // The stale error already says what became of local work, and a rerun does not help.
                Error::Stale { .. } if check_was_off => e.with_note(super::CHECK_WAS_OFF),
                Error::Stale { .. } => e,
                other => {
                    let n = failed_push_note(committed.commit, &other);
                    other.with_note(&n)
                }
            }
        })?;
    warnings.extend(pushed.warnings.iter().cloned());
    let human = format!("{human_commit}; {}", pushed.human());
    let mut fields = pushed.fields(committed.commit);
    fields.signed = committed.signed;
    fields.signing_key = signing_key;
    Ok(Success {
        result: CommandResult::Save(fields),
        branch: pushed.branch.to_string(),
        warnings,
        human,
    })
}

/// What a failed push's error adds: what became of the commit `commit` this save made, and how
/// to push it.
fn failed_push_note(commit: Option<crate::types::FullSha>, e: &Error) -> String {
    let what = match commit {
        Some(c) => format!("This save committed {c} locally, and it is kept"),
        None => "Local commits are kept".to_owned(),
    };
    match e {
        Error::Network(_) | Error::Protocol(_) => {
            format!("{what}: rerunning {} pushes it", Hint::Save)
        }
        Error::Auth(_) => {
            format!(
                "{what}: rerunning {} with a valid PUSH_URL pushes it",
                Hint::Save
            )
        }
        _ => what,
    }
}

/// The key that signed the commit made, as `--json` names it (`ED25519 SHA256:…`), and the
/// human words for the commit.
fn described(committed: &crate::save::Committed) -> (Option<String>, String) {
    let key = committed
        .signing_key
        .as_ref()
        .map(|k| format!("{} {}", k.key_type, k.fingerprint));
    let words = match (committed.commit, &key) {
        (Some(c), Some(key)) => format!("committed {c} (signed by {key})"),
        (Some(c), None) => format!("committed {c}"),
        (None, _) => "nothing to commit".to_owned(),
    };
    (key, words)
}
