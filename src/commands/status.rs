//! `git session status`: where this session stands — branch, lease, `HEAD`, commits ahead, changed
//! files, and with `--remote` the remote tip; the expiry of a JWT in the session URLs.

use serde_json::json;

use crate::cli::StatusArgs;
use crate::error::Result;
use crate::inputs;
use crate::output::Success;
use crate::repo::open as open_repo;
use crate::repo::session::Session;
use crate::types::FullSha;
use crate::wire::http::Http;
use crate::wire::upload_pack as fetch;

/// Run `status` in `dir`.
///
/// # Errors
/// [`crate::Error::Usage`] outside a restored session; network errors with `--remote`.
pub fn run(args: &StatusArgs, dir: std::path::PathBuf) -> Result<Success> {
    let session = Session::open(&dir, args.session_branch.as_deref())?;
    let _hand_back = session.hand_back_on_drop();
    let read = inputs::url(None, "READ_URL", "READ_URL_FILE")?;
    let push = inputs::url(None, "PUSH_URL", "PUSH_URL_FILE")?;
    super::check_hooks(&session);
    let mut warnings = Vec::new();
    let mut urls = Vec::new();
    for (name, source) in [("READ_URL", &read), ("PUSH_URL", &push)] {
        if let Some(s) = source {
            urls.push((name, s.load()?));
        }
    }
    warnings.extend(super::expiry_warnings(urls.iter().map(|(n, u)| (*n, u))));
    let expires = urls.iter().filter_map(|(_, u)| u.jwt_expiry()).min();

    if read.is_some() {
        super::push::ensure_history(&session)?;
    }
    let record = &session.record;
    let has_history = !crate::restore::archive::attach::needs_history(&session);
    let repo = open_repo(&session.git_dir)?;
    let head = repo.head_id().ok().map(|id| FullSha::from_id(id.detach()));
    let base = if record.lease.is_zero() {
        record.tip
    } else {
        record.lease
    };
    let ahead = match head {
        Some(h) if h != base => repo
            .rev_walk([h.id()])
            .with_hidden([base.id()])
            .all()
            .map(|walk| walk.filter_map(Result::ok).count())
            .unwrap_or(0),
        _ => 0,
    };
    // When save would refuse (exit 7: HEAD off the session branch, a merge or rebase stopped
    // midway), status still reports the rest, with save's reason as a warning.
    let save_refuses = |problem: String| {
        format!("save would refuse (exit 7): {problem}; nothing is committed until then")
    };
    let mut changes_unknown = None;
    let mut blocked = false;
    let changed = if has_history {
        match crate::save::pending_changes(&session.workdir, &record.branch) {
            Ok(pending) => {
                if let Some(msg) = pending.blocked {
                    warnings.push(save_refuses(msg));
                    blocked = true;
                }
                Some(pending.changes)
            }
            Err(crate::Error::Conflict(c)) => {
                warnings.push(save_refuses(c.problem));
                changes_unknown = Some("(HEAD is not on the session branch: see the warning)");
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        changes_unknown = Some("until history is attached (set READ_URL)");
        None
    };
    let on_branch = repo
        .head_name()
        .ok()
        .flatten()
        .is_some_and(|name| name.as_bstr() == record.branch.full_ref().as_str());
    // What a push would send: the session branch, wherever HEAD is.
    let branch_tip = repo
        .try_find_reference(record.branch.full_ref().as_str())
        .ok()
        .flatten()
        .and_then(|mut r| r.peel_to_id().ok())
        .map(|id| FullSha::from_id(id.detach()));
    let remote_tip = if args.remote {
        let source = read.as_ref().or(push.as_ref()).ok_or_else(|| {
            crate::Error::Usage("status --remote needs READ_URL (or READ_URL_FILE)".into())
        })?;
        let http = Http::new()?;
        let tip = http.with_retries(source, "looking up the session branch", |url| {
            let caps = fetch::handshake(&http, url)?;
            fetch::ls_ref(&http, url, &caps, &record.branch)
        })?;
        Some(tip.unwrap_or_else(FullSha::zero))
    } else {
        None
    };

    let show = |id: FullSha| {
        if id.is_zero() {
            "none (a new branch)".to_owned()
        } else {
            id.to_string()
        }
    };
    let mut human = vec![
        if on_branch {
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
        if record.lease.is_zero() {
            "Lease: none — the session branch is new; the first push creates it (and fails if \
             another sandbox created it first)"
                .to_owned()
        } else {
            format!(
                "Lease: {} (the remote branch must still be there when this tree pushes)",
                record.lease
            )
        },
    ];
    match head {
        Some(h) if h == base || crate::repo::descends_from(&repo, h.id(), base.id())? => {
            human.push(format!("HEAD: {h}, {ahead} commit(s) ahead of the lease"));
        }
        Some(h) => human.push(format!(
            "HEAD: {h}, which does not descend from {base} (history was rewritten): a push will \
             be refused (exit 7)"
        )),
        None => human.push(
            "HEAD: no commit yet (restored from an archive; history is fetched on the first save)"
                .into(),
        ),
    }
    let mut remote_state = None;
    if let Some(rt) = remote_tip {
        use crate::repo::lease::RemoteTip;
        // The same question as a push's step 2: a tip that merely reached HEAD (a pull or reset
        // to another sandbox's work) is still someone else's session.
        let ledger = crate::repo::lease::Ledger::new(&session.git_dir);
        let tip_state = crate::repo::lease::classify(&repo, &ledger, record.lease, branch_tip, rt)?;
        let (shown, state) = match tip_state {
            RemoteTip::Lease => (show(rt), "at the lease: a push will fast-forward"),
            RemoteTip::Own => (
                rt.to_string(),
                "a commit this tree pushed: the next push takes it as the lease",
            ),
            RemoteTip::Ahead => (
                rt.to_string(),
                "a commit this tree pushed, ahead of the local branch: the next push takes it \
                 as the lease (`git merge --ff-only` brings the branch up to it)",
            ),
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
                 check, e.g. `git push --no-verify`); a push from here will be refused (exit 3)",
            ),
        };
        let key = tip_state.as_str();
        remote_state = Some(key);
        human.push(format!("Remote: {shown} ({state})"));
    }
    match &changed {
        Some(c) if c.is_empty() => human.push("Changes: none".into()),
        Some(c) => {
            human.push(if blocked {
                format!(
                    "Changes ({}), not committed until what the warning names is done:",
                    c.len()
                )
            } else {
                format!("Changes ({}), committed by `git session save`:", c.len())
            });
            human.extend(c.iter().map(|ch| format!("  {} {}", ch.status, ch.path)));
        }
        None => human.push(format!(
            "Changes: unknown {}",
            changes_unknown.unwrap_or("")
        )),
    }
    if let Some(exp) = expires {
        human.push(format!(
            "URL token expires at {}",
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(exp)
            )
        ));
    }

    let mut fields = serde_json::Map::new();
    fields.insert("lease".into(), json!(record.lease));
    fields.insert("head".into(), json!(head));
    fields.insert("tip".into(), json!(record.tip));
    fields.insert("source".into(), json!(record.source.as_str()));
    fields.insert("ahead".into(), json!(ahead));
    fields.insert("changed".into(), json!(changed));
    if args.remote {
        fields.insert("remote_tip".into(), json!(remote_tip));
        // "lease" (a push fast-forwards), "own" (this tree pushed it), "rewritten" (refused with
        // exit 7), "moved" or "deleted" (refused with exit 3).
        fields.insert("remote_state".into(), json!(remote_state));
    }
    fields.insert(
        "url_expires_at".into(),
        json!(expires.map(|e| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(e),
            )
            .to_string()
        })),
    );
    Ok(Success {
        command: "status",
        branch: record.branch.to_string(),
        warnings,
        fields,
        human: human.join("\n"),
    })
}
