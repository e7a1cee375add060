//! `git-session push`: push the session branch's local commits, fast-forward only, against the
//! lease (SPEC rule 3).

use crate::output::json::{CommandResult, Pushed};

use crate::cli::PushArgs;
use crate::error::{Error, Refusal, Result};
use crate::output::Success;
use crate::push::{PushOutcome, push};
use crate::repo::lease::WriteLock;
use crate::repo::session::Session;
use crate::types::FullSha;
use crate::wire::http::UrlSource;
use zeroize::Zeroizing;

/// Run `push` in `dir`, with the session's inputs from `given`.
///
/// # Errors
/// Those of [`push`].
pub fn run(dir: std::path::PathBuf, given: super::Given) -> Result<Success> {
    let branch = given.branch();
    let session = Session::open(&dir, branch.as_deref())?;
    let source = given.push()?;
    let signing = crate::signing::for_push()?;
    let (session, _lock) = lock_session(session, branch.as_deref())?;
    let check_was_off = super::check_hooks(&session);
    let attached = ensure_history(&session, given)?;
    let pushed = push_session(
        session,
        &source,
        "nothing local was touched",
        &signing,
        given,
    )
    .map_err(|e| match e {
        Error::Stale { .. } if check_was_off => e.with_note(super::CHECK_WAS_OFF),
        Error::Stale { .. } => e,
        other => other.with_note("Local commits are kept"),
    })?;
    Ok(Success {
        result: CommandResult::Push(pushed.fields(None)),
        branch: pushed.branch.to_string(),
        warnings: [attached, pushed.warnings.clone()].concat(),
        human: pushed.human(),
    })
}

/// Take the tree's write lock (one `save`/`push`/checked `git push` at a time) and open the
/// session again under it: a writer that held the lock may have moved the lease.
///
/// # Errors
/// Those of [`WriteLock::acquire`] and [`Session::open`].
pub fn lock_session(session: Session, branch: Option<&str>) -> Result<(Session, WriteLock)> {
    let lock = WriteLock::acquire(session.own_dir())?;
    let session = Session::open(&session.workdir, branch)?;
    Ok((session, lock))
}

/// Attach history to an archive-restored tree before its first save or push (fetch `TIP_SHA` at
/// depth 1 with `READ_URL`).
///
/// # Errors
/// [`Error::Usage`] when the tree needs history and no `READ_URL` is set; those of the fetch.
pub fn ensure_history(session: &Session, given: super::Given) -> Result<Vec<String>> {
    if !crate::restore::archive::attach::needs_history(session)? {
        return Ok(Vec::new());
    }
    let read = given.read()?.ok_or_else(|| {
        Error::Usage(Refusal::Missing,
            "this tree was restored from an archive and has no history yet: set READ_URL (or READ_URL_FILE) \
             so that TIP_SHA can be fetched before the first save or push"
                .into(),
        )
    })?;
    crate::restore::archive::attach::attach_history(session, &read)
}

/// The push URL from `--push-url`, `PUSH_URL_FILE` or `PUSH_URL`.
///
/// # Errors
/// [`Error::Usage`] when none is set or it is invalid.
pub fn push_source(args: &PushArgs) -> Result<UrlSource> {
    super::Given::environment(args).push()
}

/// The secret forms of the session's URLs (push, and read from `given`), and of the private
/// key of `SIGNING_KEY_FILE` (in `signing`), for the scans of `save` and `push`.
///
/// # Errors
/// [`Error::Usage`] when a URL variable is set but invalid.
pub fn secret_forms(
    push: Option<&UrlSource>,
    signing: &crate::signing::SigningSetup,
    given: super::Given,
) -> Result<Zeroizing<Vec<String>>> {
    let mut forms = Zeroizing::new(Vec::new());
    forms.extend(signing.secret_forms().iter().cloned());
    if let Some(p) = push {
        forms.extend(p.load()?.secret_forms());
    }
    if let Some(r) = given.read()? {
        forms.extend(r.load()?.secret_forms());
    }
    // And every other secret of the environment (ARCHIVE_URL, a proxy's credentials).
    forms.extend(crate::redact::known());
    forms.sort();
    forms.dedup();
    Ok(forms)
}

/// Push the session and record the new lease; `kept` says in a stale error what became of local
/// work. With `SIGNING_REQUIRED=1` (in `signing`), every commit to upload must be signed by the
/// expected key; the private key of `SIGNING_KEY_FILE`, like the tokens, is never uploaded.
///
/// # Errors
/// Those of [`push`]; [`Error::Signing`] (11) for a required key that cannot be read.
pub fn push_session(
    mut session: Session,
    source: &UrlSource,
    kept: &str,
    signing: &crate::signing::SigningSetup,
    given: super::Given,
) -> Result<PushOutcome> {
    let url = source.load()?;
    let required = crate::repo::signed::required_key(signing, &session.record)?;
    let secrets = secret_forms(Some(source), signing, given)?;
    // Another repository behind PUSH_URL shows up only as a confusing stale (3) or missing-objects
    // (9) error: say so whatever the outcome (on stderr and in --json's warnings, failure too).
    let elsewhere = session
        .record
        .push_url
        .as_ref()
        .filter(|recorded| **recorded != url.public())
        .map(|recorded| {
            format!(
                "PUSH_URL points at {}, but this tree was restored to push to {recorded}: \
                 check that it names the same repository",
                url.public()
            )
        });
    if let Some(w) = elsewhere {
        crate::output::warn_early(w);
    }
    let mut outcome = push(&mut session, source, &secrets, kept, required.as_ref())?;
    outcome
        .warnings
        .extend(super::expiry_warnings([("PUSH_URL", &url)]));
    Ok(outcome)
}

impl PushOutcome {
    /// The human line.
    pub fn human(&self) -> String {
        if self.pushed {
            format!(
                "pushed {} to {} (was {})",
                self.tip, self.branch, self.previous_tip
            )
        } else {
            format!("{} is up to date at {}", self.branch, self.tip)
        }
    }

    /// The JSON fields of a save (which made `commit`) or push.
    pub fn fields(&self, commit: Option<FullSha>) -> Pushed {
        Pushed {
            committed: commit.is_some(),
            commit,
            pushed: self.pushed,
            tip: self.tip,
            previous_tip: self.previous_tip,
            signed: false,
            signing_key: None,
        }
    }
}
