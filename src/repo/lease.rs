//! The lease decision (SPEC rule 3, "The recorded tip (the lease)"): may this tree write the
//! session branch, given where the remote branch is now?
//!
//! One decision for every push from the sandbox's repository — `save`, `push`, and plain
//! `git push` through the pre-push check ([`crate::repo::prepush`]):
//! - the remote branch at the lease → a fast-forward from the lease may go;
//! - at a commit this tree itself let through (the [`Ledger`]) that descends from the lease → the
//!   lease advances to it, and a fast-forward from it may go;
//! - anywhere else — another sandbox's commit, also one that merely reached the local history by
//!   a pull or reset, or one pushed from here around the check (`git push --no-verify`) — or
//!   deleted → stale (exit 3), nothing uploaded;
//! - at the lease or at this tree's own commit, but local history no longer contains it (an amend
//!   or rebase of pushed work) → rewritten (exit 7).
//!
//! "This tree's own" comes from git-session's own records only, never from git's reflog: the
//! ledger `.git/git-session-pushed` lists every commit this tree let through, written (and
//! fsynced) before any upload and never removed, so a push whose outcome was lost — a killed
//! `save`, a cut connection, a plain `git push` — is recognised by every later command.
//!
//! Writers of one tree are serialised by [`WriteLock`]: two `save`s at once push one after the
//! other, never against each other.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::types::{FullSha, SessionBranch};

/// Where the remote branch is, for this tree: what a push decides before uploading, and what
/// `status --remote` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteTip {
    /// At the lease: a fast-forward from it may go.
    Lease,
    /// At a commit this tree let through (recorded in the [`Ledger`]) that descends from the
    /// lease, and that local history contains: the lease advances to it.
    Own,
    /// At a commit this tree let through that descends from the lease and from the local tip
    /// (pushed from another branch, say): the lease advances to it, nothing is left to push, and
    /// the local branch can fast-forward to it.
    Ahead,
    /// At the lease or at this tree's own commit, but local history no longer contains it
    /// (rewritten, e.g. by an amend or a rebase): refused with exit 7.
    Rewritten,
    /// Elsewhere: another sandbox wrote, or a push went around the check: refused with exit 3.
    Moved,
    /// Gone while the lease names a commit: refused with exit 3.
    Deleted,
}

impl RemoteTip {
    /// The `remote_state` word of `status --json`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RemoteTip::Lease => "lease",
            RemoteTip::Own | RemoteTip::Ahead => "own",
            RemoteTip::Rewritten => "rewritten",
            RemoteTip::Moved => "moved",
            RemoteTip::Deleted => "deleted",
        }
    }

    /// Whether a fast-forward from the remote tip may be pushed.
    pub fn may_push(&self) -> bool {
        matches!(self, RemoteTip::Lease | RemoteTip::Own | RemoteTip::Ahead)
    }
}

/// Classify the remote branch's `remote` tip (zero id: absent) against `lease` and the local tip
/// `local` (`None`: no local commit yet), with `ledger` telling this tree's own commits.
///
/// # Errors
/// [`Error::Internal`] when local history cannot be read.
pub fn classify(
    repo: &gix::Repository,
    ledger: &Ledger,
    lease: FullSha,
    local: Option<FullSha>,
    remote: FullSha,
) -> Result<RemoteTip> {
    let descends = |a: FullSha, b: FullSha| crate::repo::descends_from(repo, a.id(), b.id());
    if remote == lease {
        if let Some(l) = local
            && !lease.is_zero()
            && !descends(l, lease)?
        {
            return Ok(RemoteTip::Rewritten);
        }
        return Ok(RemoteTip::Lease);
    }
    if remote.is_zero() {
        return Ok(RemoteTip::Deleted);
    }
    if !ledger.contains(remote)?
        || !repo.has_object(remote.id())
        || !(lease.is_zero() || descends(remote, lease)?)
    {
        return Ok(RemoteTip::Moved);
    }
    match local {
        Some(l) if descends(l, remote)? => Ok(RemoteTip::Own),
        Some(l) if descends(remote, l)? => Ok(RemoteTip::Ahead),
        _ => Ok(RemoteTip::Rewritten),
    }
}

/// The lease as git itself knows it: `lease`, moved on to the commit git's remote-tracking ref
/// (`refs/remotes/origin/<branch>`) names when that is a commit this tree let through (the
/// [`Ledger`]) that descends from the lease. git moves that ref only on seeing the remote there
/// — a push to `origin` that succeeded, or a fetch — so the commit reached the remote and is
/// this tree's own: a plain `git push` advanced the lease, and every command says so plainly.
/// Only when the local branch tip `local` contains it: a commit pushed from another branch, ahead
/// of the session branch, is left to [`classify`] ([`RemoteTip::Ahead`], with its warning). Where
/// the remote went since is still asked of the remote by every push.
///
/// # Errors
/// [`Error::Internal`] when the ledger or local history cannot be read.
pub fn known_lease(
    repo: &gix::Repository,
    ledger: &Ledger,
    lease: FullSha,
    branch: &SessionBranch,
    local: Option<FullSha>,
) -> Result<FullSha> {
    let Some(tracked) = repo
        .try_find_reference(branch.tracking_ref().as_str())
        .ok()
        .flatten()
        .and_then(|mut r| r.peel_to_id().ok())
        .map(|id| FullSha::from_id(id.detach()))
    else {
        return Ok(lease);
    };
    let descends = |a: FullSha, b: FullSha| crate::repo::descends_from(repo, a.id(), b.id());
    let Some(local) = local else {
        return Ok(lease);
    };
    let advanced = tracked != lease
        && ledger.contains(tracked)?
        && repo.has_object(tracked.id())
        && (lease.is_zero() || descends(tracked, lease)?)
        && descends(local, tracked)?;
    Ok(if advanced { tracked } else { lease })
}

/// The ledger file's name in the git dir.
pub const LEDGER_FILE: &str = "git-session-ledger";
/// The in-flight record of git-session 0.1 builds before the ledger: its commit counts as own.
const LEGACY_SENDING_FILE: &str = "git-session-sending";

/// The commits this tree let through to the session branch: one line `<old> <new> <by>` per
/// push that passed the lease check (`by`: `save`, `push` or `git-push`), appended and fsynced
/// before the upload begins, never removed.
///
/// A commit in the ledger whose push failed is harmless: the remote can only come to hold it by
/// a push of this tree's work.
#[derive(Debug, Clone)]
pub struct Ledger {
    git_dir: PathBuf,
}

impl Ledger {
    /// The ledger of the repository at `git_dir`.
    pub fn new(git_dir: &Path) -> Self {
        Ledger {
            git_dir: git_dir.to_path_buf(),
        }
    }

    /// Whether this tree let `id` through.
    ///
    /// # Errors
    /// [`Error::Internal`] when the ledger is not a regular file of git-session's (a symlink, too
    /// big) or holds a line it never writes.
    pub fn contains(&self, id: FullSha) -> Result<bool> {
        for (name, legacy) in [(LEDGER_FILE, false), (LEGACY_SENDING_FILE, true)] {
            if self.pushed(name, legacy)?.contains(&id) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The new side of every line of the ledger file `name` (`<old> <new> <by>`; the legacy
    /// in-flight record: `<old> <new>`), and the length of its whole lines. A last line without
    /// its newline was cut short before its fsync, so nothing was uploaded after it: left out.
    fn pushed(&self, name: &str, legacy: bool) -> Result<Vec<FullSha>> {
        self.read(name, legacy).map(|(ids, _)| ids)
    }

    fn read(&self, name: &str, legacy: bool) -> Result<(Vec<FullSha>, u64)> {
        let path = self.git_dir.join(name);
        let Some(bytes) = crate::fs::state::read(&path, crate::fs::state::LEDGER_CAP, LEDGER_FIX)?
        else {
            return Ok((Vec::new(), 0));
        };
        let whole = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |end| end + 1);
        let ids = bytes[..whole]
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| {
                parse_line(line, legacy).ok_or_else(|| {
                    Error::conflict(format!(
                        "{} holds a line git-session never writes ('{}'): {LEDGER_FIX}",
                        path.display(),
                        String::from_utf8_lossy(&line[..line.len().min(120)]).escape_debug()
                    ))
                })
            })
            .collect::<Result<_>>()?;
        Ok((ids, whole as u64))
    }

    /// Record that this tree lets the push `old..new` through (`by` names who pushes), durably,
    /// before anything is uploaded.
    ///
    /// # Errors
    /// [`Error::Internal`] when the ledger cannot be written: nothing may be uploaded then.
    pub fn record(&self, old: FullSha, new: FullSha, by: &str) -> Result<()> {
        if self.pushed(LEGACY_SENDING_FILE, true)?.contains(&new) {
            return Ok(());
        }
        let (ids, whole) = self.read(LEDGER_FILE, false)?;
        if ids.contains(&new) {
            return Ok(());
        }
        let path = self.git_dir.join(LEDGER_FILE);
        let mut file = crate::fs::state::open_append(&path, LEDGER_FIX)?;
        let written = |e: std::io::Error| Error::io(format!("writing {}", path.display()), e);
        // A line cut short (a crash before its fsync) is dropped: the new one starts whole.
        if file.metadata().map_err(written)?.len() != whole {
            file.set_len(whole).map_err(written)?;
        }
        file.write_all(format!("{old} {new} {by}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(written)?;
        Ok(())
    }
}

/// What to do about a ledger git-session cannot read.
const LEDGER_FIX: &str = "it lists the commits this tree pushed; put back the file git-session \
                          wrote, or remove it (the next push from this tree is then refused as \
                          another sandbox's until a new restore)";

/// One ledger line's new commit, `None` unless the line is exactly as git-session writes it.
fn parse_line(line: &[u8], legacy: bool) -> Option<FullSha> {
    let line = std::str::from_utf8(line).ok()?;
    let fields: Vec<&str> = line.split(' ').collect();
    let shape = match fields.as_slice() {
        [_, _, "save" | "push" | "git-push"] => true,
        [_, _] | [_, _, _] => legacy,
        _ => false,
    };
    if !shape {
        return None;
    }
    FullSha::from_wire(fields[0].as_bytes())?;
    FullSha::from_wire(fields[1].as_bytes())
}

/// One writer of the session branch per tree at a time: `save`, `push` and the pre-push check
/// hold an exclusive `flock` on the git dir itself (so nothing is created in it, and the kernel
/// releases it when the holder dies: a killed save never blocks the next). Dropping it releases
/// it.
#[derive(Debug)]
pub struct WriteLock {
    _file: std::fs::File,
}

impl WriteLock {
    /// Take the lock of the repository at `git_dir`, waiting for another holder at most
    /// `GIT_SESSION_LOCK_WAIT_S` seconds (default 600).
    ///
    /// # Errors
    /// [`Error::Conflict`] (exit 7) when another writer holds it longer; [`Error::Internal`] when
    /// the git dir cannot be opened.
    pub fn acquire(git_dir: &Path) -> Result<Self> {
        crate::failpoint::barrier("before-lock");
        let path = git_dir;
        let file = crate::fs::open_dir(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        crate::clock::lock(
            &file,
            path,
            "another git-session save or push (or a plain git push) from this tree",
        )?;
        Ok(WriteLock { _file: file })
    }
}

/// Where this tree's own work starts, for the way on after a stale write: the newest of the remote
/// tip and the branch's remote-tracking ref that `head` already holds and that descends from
/// `base` (a `git pull` brought the other sandbox's commits in: replaying from the lease would
/// replay those too), else `base` (the lease, or `TIP_SHA`).
pub fn work_base(
    repo: &gix::Repository,
    branch: &SessionBranch,
    head: FullSha,
    base: FullSha,
    remote: FullSha,
) -> FullSha {
    let tracking = repo
        .find_reference(branch.tracking_ref().as_str())
        .ok()
        .and_then(|mut r| r.peel_to_id().ok())
        .map(|id| FullSha::from_id(id.detach()));
    let descends = |from: FullSha, to: FullSha| {
        crate::repo::descends_from(repo, from.id(), to.id()).unwrap_or(false)
    };
    [Some(remote), tracking]
        .into_iter()
        .flatten()
        .filter(|c| !c.is_zero() && *c != base && repo.has_object(c.id()))
        .find(|c| descends(head, *c) && descends(*c, base))
        .unwrap_or(base)
}

/// The stale-write error (exit 3), naming both ids; `local` says what happened to local work and
/// completes the sentence "the remote branch was not changed; …" (rendered by
/// [`crate::error::Stale`]).
pub fn stale(
    branch: &SessionBranch,
    (lease, remote): (FullSha, FullSha),
    local: &str,
    work: crate::error::LocalWork,
) -> Error {
    Error::Stale(Box::new(crate::error::Stale {
        branch: branch.clone(),
        lease,
        remote_tip: remote,
        local: local.to_owned(),
        work,
        remote_says: None,
    }))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn id(n: u8) -> FullSha {
        format!("{:040x}", n).parse().unwrap()
    }

    #[test]
    fn the_ledger_records_once_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        assert!(!ledger.contains(id(2)).unwrap());
        ledger.record(id(1), id(2), "save").unwrap();
        ledger.record(id(1), id(2), "save").unwrap();
        ledger.record(id(2), id(3), "git-push").unwrap();
        let reopened = Ledger::new(dir.path());
        assert!(reopened.contains(id(2)).unwrap() && reopened.contains(id(3)).unwrap());
        // The old side of a line is not this tree's work.
        assert!(!reopened.contains(id(1)).unwrap());
        let text = std::fs::read_to_string(dir.path().join(LEDGER_FILE)).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn a_ledger_replaced_by_a_symlink_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "not the ledger\n").unwrap();
        let git_dir = dir.path().join("git");
        std::fs::create_dir(&git_dir).unwrap();
        std::os::unix::fs::symlink(&outside, git_dir.join(LEDGER_FILE)).unwrap();
        let ledger = Ledger::new(&git_dir);
        let err = ledger.record(id(1), id(2), "save").unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(ledger.contains(id(2)).is_err());
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "not the ledger\n"
        );
    }

    #[test]
    fn a_ledger_holding_garbage_is_an_error_and_a_line_cut_short_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEDGER_FILE);
        std::fs::write(&path, format!("{} {} save\nrm -rf /\n", id(1), id(2))).unwrap();
        let err = Ledger::new(dir.path()).contains(id(2)).unwrap_err();
        assert!(err.to_string().contains("never writes"), "{err}");
        std::fs::write(
            &path,
            format!("{} {} save\n{} {}", id(1), id(2), id(2), id(3)),
        )
        .unwrap();
        let ledger = Ledger::new(dir.path());
        assert!(ledger.contains(id(2)).unwrap());
        assert!(
            !ledger.contains(id(3)).unwrap(),
            "not fsynced, so never uploaded"
        );
        ledger.record(id(2), id(4), "push").unwrap();
        assert!(ledger.contains(id(4)).unwrap());
        assert!(!ledger.contains(id(3)).unwrap());
    }

    #[test]
    fn the_legacy_in_flight_record_counts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(LEGACY_SENDING_FILE),
            format!("{} {}\n", id(1), id(9)),
        )
        .unwrap();
        assert!(Ledger::new(dir.path()).contains(id(9)).unwrap());
    }

    #[test]
    fn the_lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let held = WriteLock::acquire(dir.path()).unwrap();
        let other = std::fs::File::open(dir.path()).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(held);
        other.try_lock().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
