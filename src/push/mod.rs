//! The receive-pack client: a fast-forward-only push of the session branch against the lease
//! (SPEC rules 3 and 4, "The recorded tip (the lease)").
//!
//! gitoxide has no push (GitoxideLabs/gitoxide#306); this is ours, built on gix's pieces:
//! gix-packetline for pkt-lines and side-band, gix-pack for the pack, gix's rev-walk for the commits.
//! Wire format: git's `gitprotocol-http` ("Smart Service git-receive-pack") and `gitprotocol-pack`
//! ("Pushing Data To a Server", "Reference Update Request and Packfile Transfer", "Report Status").
//!
//! One attempt, in order:
//! 1. read the remote branch from the receive-pack advertisement;
//! 2. compare it with the lease: at the lease → go on; the commit this tree began uploading
//!    (recorded in `.git/git-session-sending` before the first request) → success (an earlier
//!    attempt landed); a commit of our own history that descends from the lease → the lease
//!    advances (plain git pushed from this tree); anything else, including a tip that merely
//!    reached the local history (`git pull`, `git reset`) → exit 3 before uploading, naming both ids;
//! 3. check locally that the new commit descends from the lease (and from `TIP_SHA`) → else exit 7;
//! 4. send `<lease> <new> refs/heads/<branch>` with report-status (and side-band-64k when offered),
//!    then a pack of exactly the objects between the two, spooled to a temporary file;
//! 5. succeed only on `unpack ok` plus `ok <ref>`.
//!
//! Transient failures repeat the whole attempt, so every retry re-reads the remote tip first.

mod advertisement;
mod pack;
mod report;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};

use crate::error::{Error, Result};
use crate::http::{Http, Request, UrlSource};
use crate::session::Session;
use crate::types::{FullSha, RemoteUrl, SessionBranch};

/// Request bodies up to this size go out in one piece with a Content-Length; larger ones are
/// streamed after an authentication probe.
const SMALL_BODY: u64 = 64 * 1024;

/// What a push did.
#[derive(Debug, Clone)]
pub struct PushOutcome {
    /// The session branch.
    pub branch: SessionBranch,
    /// The remote tip now (the new lease): what the backend stores as the session's current tip.
    pub tip: FullSha,
    /// The remote tip before (the lease the push was made against).
    pub previous_tip: FullSha,
    /// Whether this call moved the remote ref.
    pub pushed: bool,
    /// Warnings for the user.
    pub warnings: Vec<String>,
}

/// Push the local commits of the session branch to `source`, against the recorded lease, and
/// record the new lease.
///
/// # Errors
/// [`Error::Stale`] (3) when the remote branch is not at the lease; [`Error::Auth`] (4);
/// [`Error::Network`] (5) after bounded retries, or for a missing report; [`Error::Conflict`] (7)
/// when local history does not descend from the lease; [`Error::Rejected`] (9) when the remote
/// declines (a hook, a protected branch).
#[tracing::instrument(skip_all, fields(branch = %session.record.branch))]
pub fn push(session: &mut Session, source: &UrlSource, secrets: &[String]) -> Result<PushOutcome> {
    let repo = crate::restore::open_repo(&session.git_dir)?;
    let branch = session.record.branch.clone();
    // Mid-rebase the branch still names the old commits: pushing them would leave the rebased
    // ones unpushable (fast-forward only).
    if let Some((what, dir, finish)) = crate::save::stopped_operation(&session.git_dir) {
        return Err(Error::Conflict(format!(
            "{what} is in progress (.git/{dir}): finish it with {finish}, then push again; \
             nothing was uploaded"
        )));
    }
    let local = local_tip(&repo, &branch)?;
    let http = Http::new()?;
    let lease = session.record.lease;
    let spool = std::cell::RefCell::new(None::<pack::Spooled>);

    let outcome = http
        .with_retries(source, "pushing", |url| {
            attempt(&http, url, &repo, session, lease, local, &spool, secrets)
        })
        .inspect_err(|e| {
            // Only a network failure leaves the upload's fate unknown; after any other the record
            // of it would be stale.
            if !matches!(e, Error::Network(_)) {
                let _ = std::fs::remove_file(session.git_dir.join(SENDING_FILE));
            }
        })
        .map_err(|e| match e {
            // No credentials at all: http's message says so; "expired" would mislead.
            Error::Auth(msg) if source.load().is_ok_and(|u| !u.has_credentials()) => {
                Error::Auth(format!("the write URL was refused: {msg}"))
            }
            Error::Auth(msg) => Error::Auth(format!(
                "the write URL was refused — it may have expired; mint a new one{} ({} from {})",
                source
                    .load()
                    .ok()
                    .and_then(|u| u.jwt_expiry())
                    .map(expiry_phrase)
                    .unwrap_or_default(),
                if msg.contains("HTTP 403") {
                    "HTTP 403"
                } else {
                    "HTTP 401"
                },
                source.load().map(|u| u.to_string()).unwrap_or_default()
            )),
            other => other,
        })?;
    let mut outcome = outcome;
    if let Some(head) = crate::save::commits_off_branch(&repo, &branch) {
        outcome.warnings.push(format!(
            "HEAD ({head}) holds commits that {} lacks, and they were not pushed: switch back \
             (`git switch {branch}`), bring them over (`git merge {head}`) and push again",
            branch.full_ref()
        ));
    }
    if outcome.tip != session.record.lease {
        session.record.lease = outcome.tip;
        session.record.write(&session.git_dir)?;
    }
    crate::gitdir::write_ref(&session.git_dir, &branch.tracking_ref(), outcome.tip)?;
    let _ = std::fs::remove_file(session.git_dir.join(SENDING_FILE));
    Ok(outcome)
}

/// The commit `refs/heads/<branch>` points at.
fn local_tip(repo: &gix::Repository, branch: &SessionBranch) -> Result<FullSha> {
    let full = branch.full_ref();
    let mut r = repo.find_reference(full.as_str()).map_err(|e| {
        Error::Conflict(format!(
            "the session branch {full} has no commit to push: {e}"
        ))
    })?;
    let id = r
        .peel_to_id()
        .map_err(|e| Error::internal(format!("resolving {full}"), e))?;
    Ok(FullSha::from_id(id.detach()))
}

#[allow(clippy::too_many_arguments)]
fn attempt(
    http: &Http,
    url: &RemoteUrl,
    repo: &gix::Repository,
    session: &Session,
    lease: FullSha,
    local: FullSha,
    spool: &std::cell::RefCell<Option<pack::Spooled>>,
    secrets: &[String],
) -> Result<PushOutcome> {
    let branch = &session.record.branch;
    let adv = advertisement::read(http, url, branch)?;
    let remote = adv.tip.unwrap_or_else(FullSha::zero);
    let mut warnings = Vec::new();
    let done = |tip: FullSha, previous: FullSha, pushed: bool, warnings: Vec<String>| PushOutcome {
        branch: branch.clone(),
        tip,
        previous_tip: previous,
        pushed,
        warnings,
    };

    // Step 2: the lease.
    let mut old = lease;
    if remote != lease {
        let landed = match classify(repo, &session.git_dir, branch, lease, Some(local), remote)? {
            RemoteTip::Own { landed } => landed,
            RemoteTip::Rewritten => {
                return Err(Error::Conflict(format!(
                    "the remote branch '{branch}' is at {remote}, which this tree pushed, but local \
                     {} ({local}) no longer contains it: history was rewritten after the push \
                     (e.g. an amend); nothing was uploaded (git-session pushes fast-forward only) \
                     — rebuild your work on top of {remote}",
                    branch.full_ref()
                )));
            }
            RemoteTip::Lease | RemoteTip::Moved | RemoteTip::Deleted => {
                return Err(stale(branch, lease, remote));
            }
        };
        if landed && remote == local {
            tracing::info!("the remote already has {local}: an earlier attempt landed");
            let pushed = spool.borrow().is_some();
            return Ok(done(local, lease, pushed, warnings));
        }
        warnings.push(if landed {
            format!(
                "an earlier push of {remote} from this tree landed after all: the lease advances \
                 from {lease} to it"
            )
        } else {
            format!(
                "the remote branch moved from {lease} to {remote}, a commit of this tree's own \
                 history (pushed from here with plain git): the lease advances to it"
            )
        });
        old = remote;
    }
    crate::failpoint::barrier("after-lease-check");
    if old == local {
        return Ok(done(local, old, false, warnings));
    }

    // Step 3: fast-forward only.
    let base = if old.is_zero() {
        session.record.tip
    } else {
        old
    };
    if !crate::gitdir::descends_from(repo, local.id(), base.id())? {
        return Err(Error::Conflict(format!(
            "local {} ({local}) does not descend from {} {base}: history was rewritten; \
             nothing was uploaded (git-session pushes fast-forward only)",
            branch.full_ref(),
            if old.is_zero() {
                "the restored TIP_SHA"
            } else {
                "the lease"
            },
        )));
    }
    if !adv.has("report-status") {
        return Err(Error::Protocol(format!(
            "{url} does not offer report-status: a push could not be confirmed, so none is made"
        )));
    }

    // Step 4: the request, spooled once and reused by retries.
    let mut spooled = spool.borrow_mut();
    if spooled
        .as_ref()
        .is_none_or(|s| s.old != old || s.new != local)
    {
        let mut caps = vec!["report-status".to_owned()];
        if adv.has("side-band-64k") {
            caps.push("side-band-64k".into());
        }
        if let Some(fmt) = adv.get("object-format") {
            caps.push(format!("object-format={fmt}"));
        }
        caps.push(format!("agent=git-session/{}", env!("CARGO_PKG_VERSION")));
        *spooled = Some(pack::spool(
            repo,
            old,
            local,
            base,
            &branch.full_ref(),
            &caps,
            secrets,
        )?);
    }
    let body = spooled.as_mut().expect("spooled above");
    if !sent_from_here(&session.git_dir, local) {
        crate::session::write_atomic(
            &session.git_dir.join(SENDING_FILE),
            format!("{old} {local}\n").as_bytes(),
        )?;
    }
    tracing::info!(
        "sending {} objects ({} bytes) for {old}..{local}",
        body.objects,
        body.len
    );
    let headers = || {
        vec![
            (
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-git-receive-pack-request"),
            ),
            (
                ACCEPT,
                HeaderValue::from_static("application/x-git-receive-pack-result"),
            ),
        ]
    };
    // Each send is given time for the whole body, not only the read timeout (see `send_upload`).
    let send_len = |payload: reqwest::blocking::Body, len: u64| {
        http.send_upload(
            url,
            Request {
                endpoint: "git-receive-pack",
                headers: headers(),
                body: Some(payload),
            },
            len,
        )
    };
    let send = |payload: reqwest::blocking::Body| send_len(payload, body.len);
    let resp = if body.len <= SMALL_BODY {
        // Small: in one piece with Content-Length, so an early refusal (401) is read, not cut off.
        let mut bytes = Vec::with_capacity(body.len as usize);
        std::io::Read::read_to_end(&mut body.reader(), &mut bytes)
            .map_err(|e| Error::io("reading the spooled pack", e))?;
        send(bytes.into())?
    } else {
        // Large: first a probe (an empty request, as git's `probe_rpc`) so that authentication
        // fails before the upload, then the body streamed from the file, chunked; a server that
        // wants a length (411) gets it on a second try.
        let probe = send_len(b"0000".to_vec().into(), 4)?;
        http.check_status(url, probe)?;
        let sized = || -> Result<reqwest::blocking::Response> {
            send(reqwest::blocking::Body::sized(body.reader(), body.len))
        };
        if body.sized.get() {
            sized()?
        } else {
            let resp = send(reqwest::blocking::Body::new(body.reader())).inspect_err(|_| {
                // A server that answers before reading a chunked body (411) can look like a cut
                // connection: the retry, which re-reads the tip first, sends a length instead.
                body.sized.set(true);
            })?;
            if resp.status() == reqwest::StatusCode::LENGTH_REQUIRED {
                tracing::info!(
                    "the server refused a chunked body (411): resending with Content-Length"
                );
                body.sized.set(true);
                sized()?
            } else {
                resp
            }
        }
    };
    let resp = http.check_status(url, resp)?;

    // Step 5: the report.
    let report = report::read(url, resp, adv.has("side-band-64k"))?;
    report.into_result(url, branch, |reason| {
        // The server's own compare-and-swap refused: read where the branch is now.
        let now = advertisement::read(http, url, branch)
            .map(|a| a.tip.unwrap_or_else(FullSha::zero))
            .unwrap_or(remote);
        let mut e = stale(branch, old, now);
        if let Error::Stale { message, .. } = &mut e {
            message.push_str(&format!(" (remote: {reason})"));
        }
        e
    })?;
    crate::failpoint::hit("after-push");
    Ok(done(local, old, true, warnings))
}

/// Where the remote branch is, for this tree: what step 2 of a push decides, and what
/// `status --remote` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteTip {
    /// At the lease: a push fast-forwards it.
    Lease,
    /// At this tree's own work, which a push takes as the new lease: the commit this tree began
    /// uploading (`landed`), or one it made and pushed with plain git.
    Own {
        /// Recorded in `.git/git-session-sending`: an upload of git-session's own.
        landed: bool,
    },
    /// At the lease or at this tree's own pushed work, but local history no longer contains it
    /// (rewritten, e.g. by an amend or a rebase): a push is refused with exit 7.
    Rewritten,
    /// Elsewhere: another sandbox wrote (or the tip merely reached the local history by a pull,
    /// reset or fast-forward): a push is refused with exit 3.
    Moved,
    /// Gone while the lease names a commit: a push is refused with exit 3.
    Deleted,
}

/// Classify the remote branch's `remote` tip against `lease` and the local tip `local` (`None`:
/// no local commit yet).
///
/// # Errors
/// [`Error::Internal`] when local history cannot be read.
pub fn classify(
    repo: &gix::Repository,
    git_dir: &std::path::Path,
    branch: &SessionBranch,
    lease: FullSha,
    local: Option<FullSha>,
    remote: FullSha,
) -> Result<RemoteTip> {
    if remote == lease {
        // At the lease, but local history may have left it (an amend or rebase of pushed work).
        if let Some(l) = local
            && !lease.is_zero()
            && !crate::gitdir::descends_from(repo, l.id(), lease.id())?
        {
            return Ok(RemoteTip::Rewritten);
        }
        return Ok(RemoteTip::Lease);
    }
    if remote.is_zero() {
        return Ok(RemoteTip::Deleted);
    }
    let landed = sent_from_here(git_dir, remote);
    let own = landed
        || (pushed_from_here(git_dir, branch, remote) && created_here(git_dir, branch, remote));
    if !own
        || !repo.has_object(remote.id())
        || !(lease.is_zero() || crate::gitdir::descends_from(repo, remote.id(), lease.id())?)
    {
        return Ok(RemoteTip::Moved);
    }
    match local {
        Some(l) if crate::gitdir::descends_from(repo, l.id(), remote.id())? => {
            Ok(RemoteTip::Own { landed })
        }
        _ => Ok(RemoteTip::Rewritten),
    }
}

/// `.git/git-session-sending`: `<lease> <new>` of the upload in flight, written before the first
/// request and removed once the new lease is recorded. A landed push whose answer was lost (a cut
/// connection, a crash) is recognised by it, and only by it or by a plain `git push` from here.
const SENDING_FILE: &str = "git-session-sending";

/// Whether this tree began uploading `new` (and has not recorded the outcome yet).
fn sent_from_here(git_dir: &std::path::Path, new: FullSha) -> bool {
    std::fs::read_to_string(git_dir.join(SENDING_FILE))
        .is_ok_and(|text| text.split_whitespace().nth(1) == Some(new.to_string().as_str()))
}

/// " (its token expired at …)" or " (its token expires at …)" for a JWT `exp` in Unix seconds.
fn expiry_phrase(exp: u64) -> String {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(exp);
    let stamp = humantime::format_rfc3339_seconds(when);
    if when <= std::time::SystemTime::now() {
        format!(" — its token expired at {stamp}")
    } else {
        format!(" — its token expires at {stamp}")
    }
}

/// Whether plain git pushed `tip` from this tree: the remote-tracking ref's reflog (restore turns
/// `core.logAllRefUpdates` on) records it as "update by push". A commit that merely reached the
/// local history — `git pull` of another sandbox's work — does not count: the lease must not
/// advance to it.
fn pushed_from_here(git_dir: &std::path::Path, branch: &SessionBranch, tip: FullSha) -> bool {
    let log = git_dir.join("logs").join(branch.tracking_ref());
    let Ok(text) = std::fs::read_to_string(log) else {
        return false;
    };
    let tip = tip.to_string();
    text.lines().any(|line| {
        let mut fields = line.splitn(3, ' ');
        let (_old, new) = (fields.next(), fields.next());
        new == Some(tip.as_str())
            && line
                .split('\t')
                .nth(1)
                .is_some_and(|m| m.trim() == "update by push")
    })
}

/// Whether `tip` was made in this tree: the reflog of `HEAD` (of the main or a linked work tree) or
/// of the session branch records it as the result of a commit, cherry-pick, revert, `am`, a rebase
/// step or a true merge — never a fast-forward. A `git push` that
/// found the remote already at a fetched commit still writes "update by push" for it (the
/// remote-tracking ref moves), so [`pushed_from_here`] alone would let a stale tree that fetched
/// another sandbox's tip, reset to it and ran `git push` take the session.
fn created_here(git_dir: &std::path::Path, branch: &SessionBranch, tip: FullSha) -> bool {
    let tip = tip.to_string();
    // git's reflog messages: "<action>: <subject or result>". Only git's own words decide: the
    // subject and branch names are the user's (a subject may well say "fast-forward").
    let creates = |message: &str| {
        let (action, rest) = message.split_once(": ").unwrap_or((message, ""));
        if action == "commit"
            || action.starts_with("commit (")
            || action == "am"
            || action == "revert"
        {
            return true;
        }
        if action == "cherry-pick" {
            return rest != "fast-forward";
        }
        if action.starts_with("rebase") || action.starts_with("pull --rebase") {
            return [
                "(pick)",
                "(continue)",
                "(reword)",
                "(squash)",
                "(fixup)",
                "(edit)",
                "(merge)",
            ]
            .iter()
            .any(|step| action.ends_with(step));
        }
        // "merge <branch>: Merge made by the 'ort' strategy." or "…: Fast-forward"; pulls alike.
        (action.starts_with("merge ") || action.starts_with("pull"))
            && message.contains(": Merge made by the '")
            && message.ends_with(" strategy.")
    };
    // HEAD of the main work tree and of every linked one (`git worktree add`), and the branch.
    let mut logs = vec![
        git_dir.join("logs/HEAD"),
        git_dir.join("logs").join(branch.full_ref()),
    ];
    if let Ok(worktrees) = std::fs::read_dir(git_dir.join("worktrees")) {
        logs.extend(worktrees.flatten().map(|w| w.path().join("logs/HEAD")));
    }
    logs.iter()
        .filter_map(|log| std::fs::read_to_string(log).ok())
        .any(|text| {
            text.lines().any(|line| {
                let (ids, message) = line.split_once('\t').unwrap_or((line, ""));
                ids.split(' ').nth(1) == Some(tip.as_str()) && creates(message.trim())
            })
        })
}

/// The stale-write error, naming both ids.
fn stale(branch: &SessionBranch, lease: FullSha, remote: FullSha) -> Error {
    let now = if remote.is_zero() {
        format!("the remote branch '{branch}' does not exist (it was deleted)")
    } else {
        format!("the remote branch '{branch}' is at {remote}")
    };
    let expected = if lease.is_zero() {
        "this sandbox expected to create it (its lease is the zero id)".to_owned()
    } else {
        format!("this sandbox's lease is {lease}")
    };
    Error::Stale {
        message: format!(
            "stale session: {now}, but {expected}; another sandbox owns the session now — the \
             remote branch was not changed, and nothing local was touched"
        ),
        lease,
        remote_tip: remote,
    }
}
