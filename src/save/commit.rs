//! The commit itself, once the edits are staged: the message cleaned like `git commit -m` with
//! the owners' trailers, the author and committer, the new tree (`HEAD^{tree}` with the edits),
//! the commit object, and the session branch moved to it through `HEAD` (both reflogs).

use super::base::fail;
use super::{config, stage};
use crate::error::{Error, Refusal, Result};
use crate::types::SessionBranch;

/// What to commit with.
pub struct CommitOptions<'a> {
    /// The commit message.
    pub message: &'a str,
    /// Strings that must not be committed (the session tokens in their encodings, see
    /// [`RemoteUrl::secret_forms`](crate::types::RemoteUrl::secret_forms)).
    pub secrets: &'a [String],
    /// Who owns the session: added to the message as trailers (`Session-Sandbox:`, …).
    pub owner: &'a crate::types::Owner,
    /// What signs the commit, when signing is set up: a failure to sign commits nothing.
    pub signer: Option<&'a dyn crate::signing::Sign>,
}

/// The commit message, cleaned like `git commit -m` does, with the owners' trailers.
///
/// # Errors
/// [`Error::Usage`] when nothing is left of it; [`Error::Integrity`] when it or an owner holds a
/// secret.
pub(super) fn commit_message(opts: &CommitOptions<'_>) -> Result<String> {
    let message = clean_message(opts.message)
        .ok_or_else(|| Error::Usage(Refusal::Invalid, "the commit message is empty".into()))?;
    if opts.secrets.iter().any(|s| message.contains(s.as_str())) {
        return Err(Error::Integrity(
            "the commit message contains a session token: nothing was committed; write the message \
             without it"
                .into(),
        ));
    }
    if let Some(var) = opts.owner.holding_secret(opts.secrets) {
        return Err(Error::Integrity(format!(
            "{var} contains a session token: nothing was committed; set it without the token"
        )));
    }
    Ok(opts.owner.add_trailers(&message))
}

/// The author and the committer of the new commit, dated now unless the environment says otherwise.
///
/// # Errors
/// [`Error::Usage`] for a malformed `GIT_<ROLE>_DATE`; [`Error::Integrity`] when a name or email
/// holds a secret.
pub(super) fn identities(
    user: &config::UserConfig,
    env: &dyn config::Env,
    secrets: &[String],
) -> Result<(gix::actor::Signature, gix::actor::Signature)> {
    let now = gix::date::Time::now_local_or_utc();
    let author = config::signature(config::Role::Author, user, env, now)?;
    let committer = config::signature(config::Role::Committer, user, env, now)?;
    for (role, who) in [("author", &author), ("committer", &committer)] {
        if secrets.iter().any(|s| {
            who.name.to_string().contains(s.as_str()) || who.email.to_string().contains(s.as_str())
        }) {
            return Err(Error::Integrity(format!(
                "the {role} name or email contains a session token: nothing was committed; set \
                 GIT_{}_NAME/EMAIL or user.name/user.email without it",
                role.to_uppercase()
            )));
        }
    }
    Ok((author, committer))
}

/// Write the commit of `tree` on top of `head`, signed by `signer` when there is one: the
/// signature is made over the commit as it would be without it (what git hands `ssh-keygen`) and
/// goes in the header git reads it from, so a signing failure leaves no commit at all. Returns
/// the commit and the key that signed it.
pub(super) fn write_commit(
    repo: &gix::Repository,
    tree: gix::ObjectId,
    head: gix::ObjectId,
    (author, committer): (gix::actor::Signature, gix::actor::Signature),
    message: &str,
    signer: Option<&dyn crate::signing::Sign>,
) -> Result<(gix::ObjectId, Option<crate::signing::KeyDescription>)> {
    use gix::objs::WriteTo as _;
    let mut commit = gix::objs::Commit {
        tree,
        parents: std::iter::once(head).collect(),
        author,
        committer,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    let mut signed_by = None;
    if let Some(signer) = signer {
        let mut payload = Vec::new();
        commit
            .write_to(&mut payload)
            .map_err(|e| fail("encoding the commit to sign", e))?;
        let signature = signer.sign(&payload)?;
        signed_by = crate::signing::signed_by(&signature);
        let header = crate::signing::header_name(repo.object_hash());
        commit.extra_headers.push((header.into(), signature.into()));
    }
    let id = repo
        .write_object(&commit)
        .map_err(|e| fail("writing the commit", e))?
        .detach();
    Ok((id, signed_by))
}

/// The tree of the new commit, `None` when the edits leave `HEAD^{tree}` as it is.
pub(super) fn new_tree(
    repo: &gix::Repository,
    head_tree: gix::ObjectId,
    staged: &stage::Staged,
) -> Result<Option<gix::ObjectId>> {
    if staged.removals.is_empty() && staged.upserts.is_empty() {
        return Ok(None);
    }
    let tree = write_tree(repo, head_tree, staged)?;
    Ok((tree != head_tree).then_some(tree))
}

/// Apply the edits to `HEAD^{tree}` and write the changed trees.
fn write_tree(
    repo: &gix::Repository,
    head_tree: gix::ObjectId,
    staged: &stage::Staged,
) -> Result<gix::ObjectId> {
    let err = |e: gix::Error| fail("building the new tree", e);
    let mut editor = repo.edit_tree(head_tree).map_err(err)?;
    // Removals first: a file replaced by a directory (or the reverse) is a removal and additions.
    for path in &staged.removals {
        editor.remove(path).map_err(err)?;
    }
    for (path, kind, id) in &staged.upserts {
        editor.upsert(path, *kind, *id).map_err(err)?;
    }
    Ok(editor.write().map_err(err)?.detach())
}

/// Move the session branch from `old` to `new` (through `HEAD`, so both reflogs get the entry), only
/// if it is still at `old`.
pub(super) fn update_branch(
    repo: &gix::Repository,
    branch: &SessionBranch,
    old: gix::ObjectId,
    new: gix::ObjectId,
    committer: &gix::actor::Signature,
    message: &str,
) -> Result<()> {
    use gix::refs::Target;
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
    let subject = message.lines().next().unwrap_or_default();
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: format!("commit: {subject}").into(),
            },
            expected: PreviousValue::MustExistAndMatch(Target::Object(old)),
            new: Target::Object(new),
        },
        name: "HEAD".try_into().map_err(|e| fail("naming HEAD", e))?,
        deref: true,
    };
    let mut time = gix::date::parse::TimeBuf::default();
    let edits = repo
        .edit_references_as([edit], Some(committer.to_ref(&mut time)))
        .map_err(|e| {
            Error::conflict(format!(
                "could not move {} from {old} to the new commit {new}: {}",
                branch.full_ref(),
                crate::error::chain(&e)
            ))
        })?;
    let full = branch.full_ref();
    if !edits.iter().any(|e| e.name.as_bstr() == full.as_str()) {
        return Err(Error::conflict(format!(
            "HEAD moved away from {full} while saving (another git ran in the tree?); the commit \
             {new} is not on the branch: check out {full} and save again"
        )));
    }
    Ok(())
}

/// git's `--cleanup=whitespace` (the default for `commit -m`): trailing whitespace and leading,
/// trailing and repeated blank lines removed, a final newline. `None` when nothing is left.
fn clean_message(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut blank = false;
    for line in raw.lines() {
        let line = line.trim_end_matches([' ', '\t', '\r', '\x0b', '\x0c']);
        if line.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cleaned_like_git_commit_m() {
        assert_eq!(clean_message("Save").as_deref(), Some("Save\n"));
        assert_eq!(
            clean_message("\n\n  subject  \n\n\n\nbody \t\r\nmore\n\n").as_deref(),
            Some("  subject\n\nbody\nmore\n")
        );
        assert_eq!(clean_message(" \n\t\n"), None);
        assert_eq!(clean_message(""), None);
    }
}
