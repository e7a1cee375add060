//! `SIGNING_REQUIRED=1`: the commits a push would upload (`base..tip`: those the server does not
//! have), each checked for a signature by the expected key as git checks one (`git
//! verify-commit`: the signature from the `gpgsig` header, `gpgsig-sha256` in a SHA-256
//! repository, over the commit without it), before anything is uploaded. Used by `push` (and so
//! `save`) and by the pre-push check of plain `git push`; `status` counts what it would refuse.
//!
//! Bounded: at most [`MAX_COMMITS_CHECKED`] commits, each object at most [`MAX_COMMIT_BYTES`]
//! (its size read from its header before it is read); beyond either, the push is refused, as a
//! commit that is not checked is not let through.

use std::path::Path;

use crate::error::{Error, Result, SigningCause};
use crate::hint::Hint;
use crate::repo::session::{SessionRecord, SigningRecord};
use crate::signing::{PublicKey, SigningKey, SigningSetup, header_name, split_commit};
use crate::types::FullSha;

/// The most commits one push has checked: beyond it the push is refused (push them in parts).
pub const MAX_COMMITS_CHECKED: usize = 10_000;

/// The largest commit object checked (1 MiB: a commit is its headers and message); a larger one
/// is refused unread.
pub const MAX_COMMIT_BYTES: u64 = 1 << 20;

/// How many refused commits a message names; the rest are counted.
const SHOWN: usize = 5;

/// The key every commit a push uploads must be signed by, `None` when signatures are not
/// required: `SIGNING_REQUIRED` of the environment (`env`, read by
/// [`for_push`](crate::signing::for_push)) when it is set; else what restore recorded (git's
/// environment in an agent's shell may lack `SIGNING_*`), the key being the environment's
/// source when it names one, else the recorded one: the key file's public half (the file read
/// now), or the service's public key.
///
/// # Errors
/// [`Error::Signing`] (11) for a key that cannot be read.
pub fn required_key(env: &SigningSetup, record: &SessionRecord) -> Result<Option<PublicKey>> {
    if crate::signing::required_in_environment() {
        return env.required_key();
    }
    match &record.signing {
        Some(recorded) if recorded.required() => {
            if env.source.is_some() {
                let setup = SigningSetup {
                    source: env.source.clone(),
                    required: true,
                };
                return setup.required_key();
            }
            Ok(Some(match recorded {
                SigningRecord::KeyFile { key_file, .. } => {
                    SigningKey::from_file(Path::new(key_file), "SIGNING_KEY_FILE")?.public_key()
                }
                SigningRecord::Service { public_key, .. } => {
                    PublicKey::parse(public_key, "SIGNING_PUBLIC_KEY")?
                }
            }))
        }
        _ => Ok(None),
    }
}

/// Why a commit is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No signature header (for this repository's format).
    Unsigned,
    /// Signed by another key: its type and fingerprint.
    AnotherKey(String),
    /// A signature that is no SSH signature (an OpenPGP one, garbage).
    NotSsh,
    /// An SSH signature by the key that does not verify (other bytes, another namespace).
    DoesNotVerify,
    /// An object over [`MAX_COMMIT_BYTES`], not read: its size.
    TooBig(u64),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Unsigned => f.write_str("unsigned"),
            Refused::AnotherKey(key) => write!(f, "signed by another key, {key}"),
            Refused::NotSsh => f.write_str("its signature is no SSH signature"),
            Refused::DoesNotVerify => f.write_str("its signature does not verify"),
            Refused::TooBig(size) => write!(
                f,
                "{size} bytes, over the {} MiB checked",
                MAX_COMMIT_BYTES >> 20
            ),
        }
    }
}

/// What the check of `base..tip` found.
#[derive(Debug, Default)]
pub struct Checked {
    /// The commits refused, in the walk's order (newest first).
    pub refused: Vec<(FullSha, Refused)>,
    /// More than [`MAX_COMMITS_CHECKED`] commits: those past it were not checked.
    pub over_cap: bool,
}

/// Check every commit of `base..tip` (all of `tip`'s history when `base` is the zero id) against
/// `key`.
///
/// # Errors
/// [`Error::Internal`] when the walk or an object read fails.
pub fn check(
    repo: &gix::Repository,
    base: FullSha,
    tip: FullSha,
    key: &PublicKey,
) -> Result<Checked> {
    check_hiding(repo, &[base], tip, key)
}

/// Check every commit of `tip`'s history that none of `hidden` reaches (the zero id, and ids not
/// in this repository, hide nothing) against `key`.
///
/// # Errors
/// As [`check`].
pub fn check_hiding(
    repo: &gix::Repository,
    hidden: &[FullSha],
    tip: FullSha,
    key: &PublicKey,
) -> Result<Checked> {
    let walk_err = |e: &(dyn std::error::Error + 'static)| {
        Error::from_chain("walking the commits to check for signatures", e)
    };
    let mut peeled = Vec::new();
    // What is not here hides nothing (the server's tip of a ref this tree never fetched).
    for id in hidden
        .iter()
        .filter(|id| !id.is_zero() && repo.has_object(id.id()))
    {
        peeled.extend(peeled_commit(repo, *id)?);
    }
    let Some(tip) = peeled_commit(repo, tip)? else {
        return Ok(Checked::default());
    };
    let walk = repo
        .rev_walk([tip])
        .with_hidden(peeled)
        .all()
        .map_err(|e| walk_err(&e))?;
    let header = header_name(repo.object_hash());
    let mut checked = Checked::default();
    for (n, info) in walk.enumerate() {
        let id = info.map_err(|e| walk_err(&e))?.id;
        if n == MAX_COMMITS_CHECKED {
            checked.over_cap = true;
            break;
        }
        if let Some(why) = check_one(repo, id, header, key)? {
            checked.refused.push((FullSha::from_id(id), why));
        }
    }
    Ok(checked)
}

/// The commit `id` names, through any tags (`None`: the zero id, or a tag of a tree or blob: no
/// commit).
///
/// # Errors
/// [`Error::Internal`] when an object is not here or cannot be read.
fn peeled_commit(repo: &gix::Repository, id: FullSha) -> Result<Option<gix::ObjectId>> {
    if id.is_zero() {
        return Ok(None);
    }
    let fail = |e: &(dyn std::error::Error + 'static)| {
        Error::from_chain(format!("reading {id} to check its commits' signatures"), e)
    };
    let object = repo.find_object(id.id()).map_err(|e| fail(&e))?;
    let object = object.peel_tags_to_end().map_err(|e| fail(&e))?;
    Ok((object.kind == gix::object::Kind::Commit).then_some(object.id))
}

/// Why the commit `id` is refused, `None` when it is signed by `key`.
fn check_one(
    repo: &gix::Repository,
    id: gix::ObjectId,
    header: &str,
    key: &PublicKey,
) -> Result<Option<Refused>> {
    let fail = |e: &(dyn std::error::Error + 'static)| {
        Error::from_chain(format!("reading the commit {id} to check its signature"), e)
    };
    let size = repo.find_header(id).map_err(|e| fail(&e))?.size();
    if size > MAX_COMMIT_BYTES {
        return Ok(Some(Refused::TooBig(size)));
    }
    let object = repo.find_object(id).map_err(|e| fail(&e))?;
    let (payload, signature) = split_commit(&object.data, header);
    let Some(signature) = signature else {
        return Ok(Some(Refused::Unsigned));
    };
    Ok(match key.verify(&payload, &signature) {
        Ok(()) => None,
        Err(Error::Signing(s)) => Some(match s.cause {
            SigningCause::SignatureByAnotherKey => Refused::AnotherKey(s.detail),
            SigningCause::SignatureMalformed => Refused::NotSsh,
            _ => Refused::DoesNotVerify,
        }),
        Err(other) => return Err(other),
    })
}

/// Refuse (exit 11) when a commit of `base..tip` is not signed by `key`. `nothing` says what
/// became of the push ("nothing was uploaded"); `again` is the push to run once the commits
/// are signed again.
///
/// # Errors
/// [`Error::Signing`] ([`SigningCause::UnsignedCommits`]) naming the commits and why each;
/// those of [`check`].
pub fn refuse_unsigned(
    repo: &gix::Repository,
    (base, tip): (FullSha, FullSha),
    key: &PublicKey,
    nothing: &str,
    again: &Hint,
) -> Result<()> {
    refuse_unsigned_hiding(repo, (base, tip), &[], key, nothing, again)
}

/// [`refuse_unsigned`] of `base..tip` less what `also_hidden` reaches too (the commits a push
/// under another name than the session branch's would upload: the server has the restored
/// history and the ref's own tip).
///
/// # Errors
/// As [`refuse_unsigned`].
pub fn refuse_unsigned_hiding(
    repo: &gix::Repository,
    (base, tip): (FullSha, FullSha),
    also_hidden: &[FullSha],
    key: &PublicKey,
    nothing: &str,
    again: &Hint,
) -> Result<()> {
    let hidden: Vec<FullSha> = std::iter::once(base)
        .chain(also_hidden.iter().copied())
        .collect();
    let checked = check_hiding(repo, &hidden, tip, key)?;
    let d = key.describe();
    let whose = format!(
        "the key of {} ({} {})",
        key.variable(),
        d.key_type,
        d.fingerprint
    );
    let detail = if checked.over_cap {
        format!(
            "more than {MAX_COMMITS_CHECKED} commits to upload, more than one push checks: \
             {nothing}; push them in parts of at most {MAX_COMMITS_CHECKED} commits"
        )
    } else if checked.refused.is_empty() {
        return Ok(());
    } else {
        let n = checked.refused.len();
        let mut shown: Vec<String> = checked
            .refused
            .iter()
            .take(SHOWN)
            .map(|(id, why)| format!("{id} ({why})"))
            .collect();
        if n > SHOWN {
            shown.push(format!("{} more", n - SHOWN));
        }
        format!(
            "{n} commit(s) to upload {} not signed by {whose}: {}; {nothing} — sign them again \
             with {}, then {}",
            if n == 1 { "is" } else { "are" },
            shown.join(", "),
            Hint::Resign(base),
            again
        )
    };
    Err(Error::signing(
        SigningCause::UnsignedCommits,
        "SIGNING_REQUIRED",
        None,
        detail,
    ))
}
