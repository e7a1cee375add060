//! One file per command: each validates its inputs, runs its data flow and returns an
//! [`output::Success`](crate::output::Success).

pub mod credential;
pub mod hook;
pub mod push;
pub mod restore;
pub mod save;
pub mod status;

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
/// replaced it) and re-install it; its warnings, or one saying it could not.
pub fn check_hooks(session: &crate::session::Session) -> Vec<String> {
    crate::prepush::ensure(&session.git_dir).unwrap_or_else(|e| {
        vec![format!(
            "could not verify git-session's check of plain `git push` ({e}): a plain push from \
             this tree may not be held to the lease"
        )]
    })
}
