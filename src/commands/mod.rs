//! One file per command: each validates its inputs, runs its data flow and returns an
//! [`output::Success`](crate::output::Success).

pub mod agent;
pub mod bake;
pub mod credential;
pub mod hook;
pub mod manpage;
pub mod push;
pub mod restore;
pub mod save;
pub mod sessions;
pub mod sign;
pub mod ssh_keygen;
pub mod status;
pub mod watch;

/// Warnings for session URLs whose JWT expires within 5 minutes (or has expired), by variable name.
pub fn expiry_warnings<'a>(
    urls: impl IntoIterator<Item = (&'a str, &'a crate::types::RemoteUrl)>,
) -> Vec<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    urls.into_iter()
        .filter_map(|(name, url)| {
            let exp = url.jwt_expiry()?;
            let at = humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(exp),
            );
            if exp <= now {
                Some(format!("the {name} token expired at {at}: mint a new URL"))
            } else if exp - now < 300 {
                Some(format!(
                    "the {name} token expires in {} s (at {at}): mint a new URL soon",
                    exp - now
                ))
            } else {
                None
            }
        })
        .collect()
}

/// Verify that plain `git push` is still routed through the lease check (a hook manager may have
/// replaced it) and re-install it; its warnings are shown with the command's result, success or
/// failure ([`crate::output::warn_early`]). Returns whether the check had been off.
pub fn check_hooks(session: &crate::repo::session::Session) -> bool {
    let warnings = crate::repo::prepush::ensure(session.hooks_dir()).unwrap_or_else(|e| {
        vec![format!(
            "could not verify git-session's check of plain git push ({e}): a plain push from \
             this tree may not be held to the lease"
        )]
    });
    let was_off = !warnings.is_empty();
    // A branch a plain `git push` created: fetch exactly it from now on.
    let branch = &session.record.branch;
    if session.refs_dir().join(branch.tracking_ref()).exists()
        && let Err(e) = crate::repo::layout::settle_origin(session.config_dir(), branch)
    {
        tracing::warn!("could not set the session branch's upstream: {e}");
    }
    for w in warnings {
        crate::output::warn_early(w);
    }
    was_off
}

/// The note a stale error gets when the check of plain `git push` had been off in this tree.
pub const CHECK_WAS_OFF: &str = "git-session's check of plain git push was off in this tree \
    until now (see the warning): a plain push made from here meanwhile was not recorded as this \
    tree's, so it counts as another sandbox's";

/// Where one session's inputs come from: the environment (and the flags) for a single command, or
/// its manifest entry with `--all`, so a session's credentials reach only its own URLs.
#[derive(Debug, Clone, Copy)]
pub enum Given<'a> {
    /// `PUSH_URL`, `READ_URL` (or their `_FILE` forms), `--push-url`, `--session-branch`.
    Environment {
        /// `--push-url`.
        push_url: Option<&'a str>,
        /// `--session-branch` (or `SESSION_BRANCH`).
        branch: Option<&'a str>,
    },
    /// One entry of a sessions manifest.
    Manifest(&'a crate::manifest::Session),
}

impl<'a> Given<'a> {
    /// A single command's inputs, from its flags and the environment.
    pub fn environment(args: &'a crate::cli::PushArgs) -> Self {
        Given::Environment {
            push_url: args.push_url.as_deref(),
            branch: args.session_branch.as_deref(),
        }
    }

    /// The session branch the tree must hold, when given.
    pub fn branch(&self) -> Option<String> {
        match self {
            Given::Environment { branch, .. } => branch.map(str::to_owned),
            Given::Manifest(s) => Some(s.branch.to_string()),
        }
    }

    /// The push URL.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] when none is given or it is invalid.
    pub fn push(&self) -> crate::Result<crate::wire::http::UrlSource> {
        use crate::error::{Error, Refusal};
        match self {
            Given::Environment { push_url, .. } => {
                crate::inputs::url(*push_url, "PUSH_URL", "PUSH_URL_FILE")?.ok_or_else(|| {
                    Error::Usage(Refusal::Missing, "PUSH_URL is not set: put the write URL in PUSH_URL or PUSH_URL_FILE (--push-url takes only a URL without credentials)".into())
                })
            }
            Given::Manifest(s) => s.push.clone().ok_or_else(|| {
                Error::Usage(
                    Refusal::Missing,
                    format!(
                        "{}: the sessions manifest gives it no push_url: add push_url or \
                         push_url_file to its entry",
                        s.name()
                    ),
                )
            }),
        }
    }

    /// The read URL, when given.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] when it is invalid.
    pub fn read(&self) -> crate::Result<Option<crate::wire::http::UrlSource>> {
        match self {
            Given::Environment { .. } => crate::inputs::url(None, "READ_URL", "READ_URL_FILE"),
            Given::Manifest(s) => Ok(s.read.clone()),
        }
    }
}
