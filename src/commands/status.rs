//! `git session status`: where this session stands — branch, lease, `HEAD`, commits ahead, changed
//! files, and with `--remote` the remote tip; the expiry of a JWT in the session URLs; the signing
//! state.

use crate::output::json;

use crate::cli::StatusArgs;
use crate::error::Result;
use crate::hint::Hint;
use crate::inputs;
use crate::output::Success;
use crate::repo::lease::{Ledger, RemoteTip, known_lease};
use crate::repo::open as open_repo;
use crate::repo::session::Session;
use crate::save::PendingChange;
use crate::types::FullSha;
use crate::wire::http::{Http, UrlSource};
use crate::wire::upload_pack as fetch;

/// Run `status` in `dir`, with the session's inputs from `given` (`--session-branch` from `args`
/// for a single status).
///
/// # Errors
/// [`crate::Error::Usage`] outside a restored session; network errors with `--remote`.
pub fn run(args: &StatusArgs, dir: std::path::PathBuf, given: super::Given) -> Result<Success> {
    let session = Session::open(&dir, given.branch().as_deref())?;
    let urls = Urls::read(&session, given)?;
    let local = Local::gather(&session, &urls, given)?;
    let remote_tip = if args.remote {
        Some(ask_remote(&urls, &session)?)
    } else {
        None
    };
    let found = Classified::of(&local, remote_tip)?;
    let (signing, signing_warnings) = signing_state(&local);
    let record = &session.record;
    let mut human = human_lines(&local, &found);
    human.push(signing_line(&signing, local.base));
    Ok(Success {
        result: json::CommandResult::Status(json_fields(&local, &found, signing)),
        branch: record.branch.to_string(),
        human: human.join("\n"),
        warnings: [local.warnings, signing_warnings].concat(),
    })
}

/// The signing state, from `SIGNING_*` or what restore recorded, as `save` reads it: a set-up that cannot sign
/// is described (`problem`), never an error of `status`. With `SIGNING_REQUIRED=1`, the commits
/// of the session branch since the lease are checked as a push checks them.
fn signing_state(local: &Local) -> (json::SigningState, Vec<String>) {
    use crate::signing::SignatureSource;
    let mut state = json::SigningState {
        source: "none",
        key_file: None,
        url: None,
        key_type: None,
        fingerprint: None,
        problem: None,
        required: false,
        unsigned: None,
    };
    let setup = match super::sign::setup_in(&local.session.record) {
        Ok(setup) => setup,
        Err(e) => {
            state.source = "invalid";
            state.problem = Some(e.to_string());
            return (state, Vec::new());
        }
    };
    let key = match &setup.source {
        None => None,
        Some(SignatureSource::KeyFile(path)) => {
            state.source = "key_file";
            state.key_file = Some(path.display().to_string());
            crate::signing::SigningKey::from_file(path, "SIGNING_KEY_FILE")
                .map(|k| k.public_key())
                .map_err(|e| state.problem = Some(e.to_string()))
                .ok()
        }
        Some(SignatureSource::Service { url, public }) => {
            state.source = "service";
            match url.load() {
                Ok(url) => state.url = Some(url.public()),
                Err(e) => state.problem = Some(e.to_string()),
            }
            Some((**public).clone())
        }
    };
    if let Some(key) = key {
        let d = key.describe();
        state.key_type = Some(d.key_type);
        state.fingerprint = Some(d.fingerprint);
    }
    // Required by the environment, or by what restore recorded, as a push decides.
    let key = match crate::repo::signed::required_key(&setup, &local.session.record) {
        Ok(key) => key,
        Err(e) => {
            state.problem.get_or_insert(e.to_string());
            None
        }
    };
    state.required = key.is_some() || setup.required;
    let mut warnings = Vec::new();
    if let (Some(key), Some(tip)) = (key, local.branch_tip) {
        match crate::repo::signed::check(&local.repo, local.base, tip, &key) {
            Ok(checked) => {
                state.unsigned = Some(checked.refused.len());
                if checked.over_cap {
                    warnings.push(format!(
                        "more than {} commits since the lease: those past it were not checked, \
                         and a push refuses them all",
                        crate::repo::signed::MAX_COMMITS_CHECKED
                    ));
                }
            }
            Err(e) => state.problem = Some(e.to_string()),
        }
    }
    (state, warnings)
}

/// The `Signing:` line: what signs, with which key (or why it cannot), and what a push with
/// `SIGNING_REQUIRED=1` would refuse.
fn signing_line(state: &json::SigningState, base: FullSha) -> String {
    let key = match (state.key_type, &state.fingerprint) {
        (Some(t), Some(f)) => format!("{t} {f}"),
        _ => String::new(),
    };
    let problem = state.problem.as_deref().unwrap_or_default();
    let source = match (state.source, &state.problem) {
        ("none", _) => "off".to_owned(),
        ("invalid", _) => format!("not set up: {problem}"),
        ("key_file", None) => format!(
            "with SIGNING_KEY_FILE ({}), {key}",
            state.key_file.as_deref().unwrap_or_default()
        ),
        ("key_file", Some(_)) => format!("cannot sign, save exits 11: {problem}"),
        (_, None) => format!(
            "with the signing service {}, checked against SIGNING_PUBLIC_KEY ({key})",
            state.url.as_deref().unwrap_or_default()
        ),
        (_, Some(_)) => format!("with a signing service: {problem}"),
    };
    let required = match (state.required, state.unsigned) {
        (false, _) => "signatures not required".to_owned(),
        (true, Some(0)) => {
            "signatures required: every commit since the lease is signed by the key".to_owned()
        }
        (true, Some(n)) => format!(
            "signatures required: {n} commit(s) since the lease are not signed by the key, and a \
             push refuses them ({} signs them again)",
            Hint::Resign(base)
        ),
        (true, None) => "signatures required (SIGNING_REQUIRED=1)".to_owned(),
    };
    format!("Signing: {source}; {required}")
}

/// The session URLs as given, loaded: an unreadable URL file fails status before anything else.
struct Urls {
    read: Option<UrlSource>,
    push: Option<UrlSource>,
    /// The earliest JWT expiry among them, shown to the user.
    expires: Option<u64>,
    /// Tokens about to expire.
    warnings: Vec<String>,
}

impl Urls {
    fn read(session: &Session, given: super::Given) -> Result<Self> {
        let read = given.read()?;
        // A missing push URL is no error of status.
        let push = match given {
            super::Given::Environment { .. } => inputs::url(None, "PUSH_URL", "PUSH_URL_FILE")?,
            super::Given::Manifest(s) => s.push.clone(),
        };
        super::check_hooks(session);
        let mut urls = Vec::new();
        for (name, source) in [("READ_URL", &read), ("PUSH_URL", &push)] {
            if let Some(s) = source {
                urls.push((name, s.load()?));
            }
        }
        let warnings = super::expiry_warnings(urls.iter().map(|(n, u)| (*n, u)));
        let expires = urls.iter().filter_map(|(_, u)| u.jwt_expiry()).min();
        Ok(Urls {
            read,
            push,
            expires,
            warnings,
        })
    }
}

/// What status reads from the tree, before any remote is asked.
struct Local<'a> {
    session: &'a Session,
    repo: gix::Repository,
    head: Option<FullSha>,
    /// The lease as git knows it (advanced by a plain `git push` that landed).
    lease: FullSha,
    /// What `HEAD` is counted from: the lease, or `TIP_SHA` for a new branch.
    base: FullSha,
    ahead: usize,
    changes: Changes,
    on_branch: bool,
    /// What a push would send: the session branch, wherever `HEAD` is.
    branch_tip: Option<FullSha>,
    expires: Option<u64>,
    warnings: Vec<String>,
}

/// The files `save` would commit, when they can be known.
enum Changes {
    Listed {
        changes: Vec<PendingChange>,
        /// `save` would refuse until what the warning names is done.
        blocked: bool,
    },
    /// Why they cannot be known.
    Unknown(&'static str),
}

impl<'a> Local<'a> {
    fn gather(session: &'a Session, urls: &Urls, given: super::Given) -> Result<Self> {
        let attached = if urls.read.is_some() {
            super::push::ensure_history(session, given)?
        } else {
            Vec::new()
        };
        let record = &session.record;
        let has_history = !crate::restore::archive::attach::needs_history(session)?;
        let repo = open_repo(&session.git_dir)?;
        let head = repo.head_id().ok().map(|id| FullSha::from_id(id.detach()));
        let branch_tip = repo
            .try_find_reference(record.branch.full_ref().as_str())
            .ok()
            .flatten()
            .and_then(|mut r| r.peel_to_id().ok())
            .map(|id| FullSha::from_id(id.detach()));
        let ledger = Ledger::new(&session.git_dir);
        let lease = known_lease(&repo, &ledger, record.lease, &record.branch, branch_tip)?;
        let base = if lease.is_zero() { record.tip } else { lease };
        let ahead = commits_ahead(&repo, head, base);
        let mut warnings = [attached, urls.warnings.clone()].concat();
        let changes = if has_history {
            pending_changes(session, &mut warnings)?
        } else {
            Changes::Unknown("until history is attached (set READ_URL)")
        };
        let on_branch = repo
            .head_name()
            .ok()
            .flatten()
            .is_some_and(|name| name.as_bstr() == record.branch.full_ref().as_str());
        Ok(Local {
            session,
            repo,
            head,
            lease,
            base,
            ahead,
            changes,
            on_branch,
            branch_tip,
            expires: urls.expires,
            warnings,
        })
    }
}

/// Commits in `HEAD` that `base` does not have (0 when they cannot be counted).
pub(super) fn commits_ahead(repo: &gix::Repository, head: Option<FullSha>, base: FullSha) -> usize {
    match head {
        Some(h) if h != base => repo
            .rev_walk([h.id()])
            .with_hidden([base.id()])
            .all()
            .map(|walk| walk.filter_map(Result::ok).count())
            .unwrap_or(0),
        _ => 0,
    }
}

/// When save would refuse (exit 7: HEAD off the session branch, a merge or rebase stopped midway),
/// status still reports the rest, with save's reason as a warning.
fn pending_changes(session: &Session, warnings: &mut Vec<String>) -> Result<Changes> {
    let save_refuses = |problem: String| {
        format!("save would refuse (exit 7): {problem}; nothing is committed until then")
    };
    match crate::save::pending_changes(&session.workdir, &session.record.branch) {
        Ok(pending) => {
            let blocked = pending.blocked.is_some();
            if let Some(msg) = pending.blocked {
                warnings.push(save_refuses(msg));
            }
            Ok(Changes::Listed {
                changes: pending.changes,
                blocked,
            })
        }
        Err(crate::Error::Conflict(c)) => {
            warnings.push(save_refuses(c.problem));
            Ok(Changes::Unknown(
                "(HEAD is not on the session branch: see the warning)",
            ))
        }
        Err(e) => Err(e),
    }
}

/// The session branch's tip on the remote (zero: absent), asked of READ_URL (else PUSH_URL).
fn ask_remote(urls: &Urls, session: &Session) -> Result<FullSha> {
    let source = urls.read.as_ref().or(urls.push.as_ref()).ok_or_else(|| {
        crate::Error::Usage(
            crate::error::Refusal::Missing,
            "status --remote needs READ_URL or PUSH_URL (or their _FILE forms) to ask the remote"
                .into(),
        )
    })?;
    let http = Http::new()?;
    let tip = http.with_retries(source, "looking up the session branch", |url| {
        let caps = fetch::handshake(&http, url, &session.record.branch)?;
        caps.check_tip(url, "the session's commit", session.record.tip)?;
        fetch::ls_ref(&http, url, &caps, &session.record.branch)
    })?;
    Ok(tip.unwrap_or_else(|| FullSha::zero(session.record.tip.format())))
}

/// Where `HEAD` and the remote tip stand against the lease.
struct Classified {
    head: HeadState,
    /// With `--remote`: the remote tip and what a push would make of it.
    remote: Option<(FullSha, RemoteTip)>,
}

enum HeadState {
    /// At or after the base.
    Descends(FullSha),
    /// History was rewritten: a push is refused.
    Rewritten(FullSha),
    /// No commit yet (an archive restore).
    Unborn,
}

impl Classified {
    fn of(local: &Local, remote_tip: Option<FullSha>) -> Result<Self> {
        let (repo, base) = (&local.repo, local.base);
        let head = match local.head {
            Some(h) if h == base || crate::repo::descends_from(repo, h.id(), base.id())? => {
                HeadState::Descends(h)
            }
            Some(h) => HeadState::Rewritten(h),
            None => HeadState::Unborn,
        };
        let remote = match remote_tip {
            Some(rt) => {
                // The same question as a push's step 2: a tip that merely reached HEAD (a pull or
                // reset to another sandbox's work) is still someone else's session.
                let ledger = Ledger::new(&local.session.git_dir);
                let state = if rt.is_zero() && local.session.record.lease_assumed() {
                    // Never asked (an archive restore without READ_URL): a new session, as the
                    // push decides.
                    RemoteTip::Lease
                } else {
                    crate::repo::lease::classify(repo, &ledger, local.lease, local.branch_tip, rt)?
                };
                Some((rt, state))
            }
            None => None,
        };
        Ok(Classified { head, remote })
    }
}

/// The human report, a line each.
fn human_lines(local: &Local, found: &Classified) -> Vec<String> {
    let record = &local.session.record;
    let mut human = vec![
        if local.on_branch {
            format!("On session branch {}", record.branch)
        } else {
            format!(
                "Session branch {} (HEAD is not on it: see the warning)",
                record.branch
            )
        },
        format!(
            "Restored {} from {} at {}",
            record.tip,
            record.source.as_str(),
            record.restored_at
        ),
        if local.lease.is_zero() {
            "Lease: none — the session branch is new; the first push creates it (and fails if \
             another sandbox created it first)"
                .to_owned()
        } else if local.lease != record.lease {
            format!(
                "Lease: {} (this tree's git push landed there; the remote branch must still be \
                 there when this tree pushes)",
                local.lease
            )
        } else {
            format!(
                "Lease: {} (the remote branch must still be there when this tree pushes)",
                local.lease
            )
        },
    ];
    if let Ok(pending) = crate::repo::lfs::pending(&local.session.git_dir)
        && !pending.is_empty()
    {
        human.push(format!(
            "LFS: {} object(s) saved here, uploaded by the next push",
            pending.len()
        ));
    }
    if let Some(dirs) = crate::repo::layout::sparse_dirs(&local.session.git_dir) {
        human.push(format!("Sparse checkout: {}", dirs.join(", ")));
    }
    human.push(match found.head {
        HeadState::Descends(h) => {
            format!("HEAD: {h}, {} commit(s) ahead of the lease", local.ahead)
        }
        HeadState::Rewritten(h) => format!(
            "HEAD: {h}, which does not descend from {} (history was rewritten): a push will \
             be refused (exit 7)",
            local.base
        ),
        HeadState::Unborn => {
            "HEAD: no commit yet (restored from an archive; history is fetched on the first save)"
                .into()
        }
    });
    if let Some((rt, state)) = found.remote {
        human.push(remote_line(rt, state));
    }
    match &local.changes {
        Changes::Listed { changes, .. } if changes.is_empty() => human.push("Changes: none".into()),
        Changes::Listed { changes, blocked } => {
            human.push(if *blocked {
                format!(
                    "Changes ({}), not committed until what the warning names is done:",
                    changes.len()
                )
            } else {
                format!("Changes ({}), committed by {}:", changes.len(), Hint::Save)
            });
            human.extend(
                changes
                    .iter()
                    .map(|ch| format!("  {} {}", ch.status, ch.path)),
            );
        }
        Changes::Unknown(why) => human.push(format!("Changes: unknown {why}")),
    }
    if let Some(exp) = local.expires {
        human.push(format!("URL token expires at {}", rfc3339(exp)));
    }
    human
}

/// The `Remote:` line: the tip and what a push from here would do.
fn remote_line(rt: FullSha, state: RemoteTip) -> String {
    let ahead = format!(
        "a commit this tree pushed, ahead of the local branch: the next push takes it as the \
         lease ({} brings the branch up to it)",
        Hint::MergeFfOnly(rt)
    );
    let (shown, what) = match state {
        RemoteTip::Lease => (
            if rt.is_zero() {
                "none (a new branch)".to_owned()
            } else {
                rt.to_string()
            },
            "at the lease: a push will fast-forward",
        ),
        RemoteTip::Own => (
            rt.to_string(),
            "a commit this tree pushed: the next push takes it as the lease",
        ),
        RemoteTip::Ahead => (rt.to_string(), ahead.as_str()),
        RemoteTip::Rewritten => (
            rt.to_string(),
            "local history no longer contains it (rewritten, e.g. by an amend or a rebase): \
             a push will be refused (exit 7)",
        ),
        RemoteTip::Deleted => (
            "absent".to_owned(),
            "deleted: a push from here will be refused (exit 3)",
        ),
        RemoteTip::Moved => (
            rt.to_string(),
            "moved: another sandbox wrote (or a push from here went around git-session's \
             check, e.g. git push --no-verify); a push from here will be refused (exit 3)",
        ),
    };
    format!("Remote: {shown} ({what})")
}

/// The JSON report's fields.
fn json_fields(local: &Local, found: &Classified, signing: json::SigningState) -> json::Status {
    let record = &local.session.record;
    let changed = match &local.changes {
        Changes::Listed { changes, .. } => Some(changes),
        Changes::Unknown(_) => None,
    };
    json::Status {
        lease: local.lease,
        head: local.head,
        tip: record.tip,
        source: record.source.as_str(),
        ahead: local.ahead,
        changed: changed.cloned(),
        remote_tip: found.remote.map(|(rt, _)| rt),
        remote_state: found.remote.map(|(_, state)| state.as_str()),
        url_expires_at: local.expires.map(rfc3339),
        lfs_pending: crate::repo::lfs::pending(&local.session.git_dir)
            .map(|p| p.len())
            .unwrap_or(0),
        sparse: crate::repo::layout::sparse_dirs(&local.session.git_dir),
        object_format: crate::types::format_name(record.object_format),
        signing: Box::new(signing),
    }
}

/// A Unix time as RFC 3339, to the second.
fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}
