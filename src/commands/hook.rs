//! `git-session hook pre-push`: the check git runs before a plain `git push` (installed by
//! restore; see [`crate::repo::prepush`]). Hidden: git calls it, people do not.

use crate::error::{Error, Refusal, Result};

/// Run the hook named `name`; only `pre-push` exists.
///
/// # Errors
/// [`Error::Usage`] for another name; those of [`crate::repo::prepush::run_hook`].
pub fn run(name: &str) -> Result<()> {
    match name {
        "pre-push" => crate::repo::prepush::run_hook(),
        other => Err(Error::Usage(
            Refusal::Invalid,
            format!("unknown hook '{other}': git-session installs only pre-push"),
        )),
    }
}
