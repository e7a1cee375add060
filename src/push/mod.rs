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
//! 2. ask [`crate::repo::lease::classify`] about it: at the lease → go on; at this tree's own commit
//!    (the ledger) → the lease advances, and if it is the local tip the push already landed;
//!    anywhere else → exit 3 before uploading, naming both ids; rewritten → exit 7;
//! 3. check locally that the new commit descends from the lease (and from `TIP_SHA`) → else exit 7;
//!    with `SIGNING_REQUIRED=1`, that every commit to send is signed by the expected key
//!    ([`crate::repo::signed`]) → else exit 11 (and before the LFS objects go, when there are);
//! 4. record `<old> <new>` in the ledger, then send `<old> <new> refs/heads/<branch>` with
//!    report-status (and side-band-64k when offered) and a pack of exactly the objects between
//!    the two, spooled to a temporary file;
//! 5. succeed only on `unpack ok` plus `ok <ref>`. An `ng` because the ref moved re-reads it: at
//!    the new commit (an earlier attempt, or a killed save's, landed meanwhile) → success; at
//!    another commit of this tree's → a new attempt from there; else exit 3.
//!
//! Transient failures repeat the whole attempt, so every retry re-reads the remote tip first.

mod lfs;

use crate::error::{Error, Refusal, Result};
use crate::hint::Hint;
use crate::pack::generate as pack;
use crate::repo::lease::{Ledger, RemoteTip, classify, known_lease, stale};
use crate::repo::session::Session;
use crate::repo::signed::refuse_unsigned;
use crate::types::{Format, FullSha, RemoteUrl, SessionBranch, format_name, format_title};
use crate::wire::advertisement;
use crate::wire::http::{Http, UrlSource};
use crate::wire::receive_pack::{self, report};

/// What a push refused before upload says of it.
const NOTHING_SENT: &str = "nothing was uploaded";

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
/// record the new lease. `kept` completes the stale error's "the remote branch was not changed;
/// …" with what became of local work (e.g. "nothing local was touched").
///
/// The caller holds the tree's [`WriteLock`](crate::repo::lease::WriteLock) and opened `session` under it.
///
/// # Errors
/// [`Error::Stale`] (3) when the remote branch is not at the lease; [`Error::Auth`] (4);
/// [`Error::Network`] (5) after bounded retries, or for a missing report; [`Error::Conflict`] (7)
/// when local history does not descend from the lease; [`Error::Rejected`] (9) when the remote
/// declines (a hook, a protected branch); [`Error::Signing`] (11) when `required` names a key and
/// a commit to send is not signed by it.
#[tracing::instrument(skip_all, fields(branch = %session.record.branch))]
pub fn push(
    session: &mut Session,
    source: &UrlSource,
    secrets: &[String],
    kept: &str,
    required: Option<&crate::signing::PublicKey>,
) -> Result<PushOutcome> {
    let repo = crate::repo::open(&session.git_dir)?;
    let branch = session.record.branch.clone();
    // Mid-rebase the branch still names the old commits: pushing them would leave the rebased
    // ones unpushable (fast-forward only).
    if let Some((what, dir, finish)) = crate::repo::operations::stopped_operation(&session.git_dir)
    {
        return Err(Error::conflict(format!(
            "{what} is in progress (.git/{dir}): finish it with {finish}, then push again; \
             nothing was uploaded"
        )));
    }
    // The record names the branch; another session of this repository (an agent, the main
    // tree) holding it too would be pushed over.
    crate::repo::worktree::refuse_foreign_branch(
        &session.dirs(),
        &branch.full_ref(),
        NOTHING_SENT,
    )?;
    let local = local_tip(&repo, &branch)?;
    // A plain `git push` that git saw land moved the lease: recorded, so no warning follows.
    let known = known_lease(
        &repo,
        &Ledger::new(session.own_dir()),
        session.record.lease,
        &branch,
        Some(local),
    )?;
    if known != session.record.lease {
        tracing::info!("git saw this tree's push of {known} land: the lease advances to it");
        session.record.lease = known;
        session.record.write(session.own_dir())?;
    }
    // The LFS objects go before the commits: unsigned work sends neither.
    if let Some(key) = required
        && !crate::repo::lfs::pending(session.own_dir())?.is_empty()
    {
        let base = if known.is_zero() {
            session.record.tip
        } else {
            known
        };
        refuse_unsigned(&repo, (base, local), key, NOTHING_SENT, &Hint::Push)?;
    }
    let http = Http::new()?;
    lfs::upload_pending(&http, session, &source.load()?)?;
    let attempt = Attempt {
        http: &http,
        repo: &repo,
        session: &*session,
        ledger: Ledger::new(session.own_dir()),
        local,
        spool: std::cell::RefCell::new(None),
        secrets,
        kept,
        required,
    };
    let outcome = http.with_retries(source, "pushing", |url| attempt.run(url));
    drop(attempt);
    // The write URL, refused: the message says so (and that it may have expired).
    let outcome = outcome.map_err(|e| match e {
        Error::Auth(mut a) => {
            a.write = true;
            Error::Auth(a)
        }
        other => other,
    })?;
    let mut outcome = outcome;
    if let Some(head) = crate::repo::operations::commits_off_branch(&repo, &branch) {
        outcome.warnings.push(format!(
            "HEAD ({head}) holds commits that {} lacks, and they were not pushed: switch back \
             ({}), bring them over ({}) and push again",
            branch.full_ref(),
            Hint::Switch(branch.clone()),
            Hint::Merge(FullSha::from_id(head))
        ));
    }
    if outcome.tip != session.record.lease {
        session.record.lease = outcome.tip;
        session.record.write(session.own_dir())?;
    }
    crate::repo::layout::write_ref(session.refs_dir(), &branch.tracking_ref(), outcome.tip)?;
    if !outcome.tip.is_zero() {
        crate::repo::layout::settle_origin(session.config_dir(), &branch)?;
    }
    Ok(outcome)
}

/// The commit `refs/heads/<branch>` points at.
fn local_tip(repo: &gix::Repository, branch: &SessionBranch) -> Result<FullSha> {
    let full = branch.full_ref();
    let mut r = repo.find_reference(full.as_str()).map_err(|e| {
        Error::conflict(format!(
            "the session branch {full} has no commit to push: {e}"
        ))
    })?;
    let id = r
        .peel_to_id()
        .map_err(|e| Error::from_chain(format!("resolving {full}"), &e))?;
    Ok(FullSha::from_id(id.detach()))
}

/// One push, its inputs gathered once; [`Attempt::run`] is repeated by the retries.
struct Attempt<'a> {
    http: &'a Http,
    repo: &'a gix::Repository,
    session: &'a Session,
    ledger: Ledger,
    local: FullSha,
    /// The request spooled by an earlier attempt, reused when `old..new` is the same.
    spool: std::cell::RefCell<Option<pack::Spooled>>,
    secrets: &'a [String],
    kept: &'a str,
    /// With `SIGNING_REQUIRED=1`: the key every commit to upload is signed by.
    required: Option<&'a crate::signing::PublicKey>,
}

/// What step 2 decided.
enum LeaseCheck {
    /// Nothing to send: the remote is at `tip` already.
    Done(PushOutcome),
    /// Send `old..local`.
    Send { old: FullSha, warnings: Vec<String> },
}

impl Attempt<'_> {
    fn branch(&self) -> &SessionBranch {
        &self.session.record.branch
    }

    fn outcome(&self, previous: FullSha, pushed: bool, warnings: Vec<String>) -> PushOutcome {
        self.outcome_at(self.local, previous, pushed, warnings)
    }

    fn outcome_at(
        &self,
        tip: FullSha,
        previous: FullSha,
        pushed: bool,
        warnings: Vec<String>,
    ) -> PushOutcome {
        PushOutcome {
            branch: self.branch().clone(),
            tip,
            previous_tip: previous,
            pushed,
            warnings,
        }
    }

    fn run(&self, url: &RemoteUrl) -> Result<PushOutcome> {
        let adv = advertisement::read(self.http, url, self.branch())?;
        check_format(url, adv.format, self.repo.object_hash())?;
        let remote = adv.tip.unwrap_or_else(|| FullSha::zero(adv.format));
        let (old, warnings) = match self.check_lease(remote)? {
            LeaseCheck::Done(outcome) => return Ok(outcome),
            LeaseCheck::Send { old, warnings } => (old, warnings),
        };
        crate::failpoint::barrier("after-lease-check");
        if old == self.local {
            return Ok(self.outcome(old, false, warnings));
        }
        self.check_fast_forward(old)?;
        if let Some(key) = self.required {
            refuse_unsigned(
                self.repo,
                (self.base(old), self.local),
                key,
                NOTHING_SENT,
                &Hint::Push,
            )?;
        }
        let caps = request_capabilities(url, &adv)?;
        self.spool_request(&adv, &caps, old)?;
        self.ledger.record(old, self.local, "push")?;
        let resp = self.send(url)?;
        let report = report::read(url, resp, adv.has("side-band-64k"))?;
        report.into_result(url, self.branch(), |reason| {
            self.moved_meanwhile(url, old, reason)
        })?;
        crate::failpoint::hit("after-push");
        Ok(self.outcome(old, true, warnings))
    }

    /// Step 2: the lease.
    fn check_lease(&self, remote: FullSha) -> Result<LeaseCheck> {
        let lease = self.session.record.lease;
        let branch = self.branch();
        if remote == lease {
            if let RemoteTip::Rewritten =
                classify(self.repo, &self.ledger, lease, Some(self.local), remote)?
            {
                return Err(self.rewritten(remote));
            }
            return Ok(LeaseCheck::Send {
                old: lease,
                warnings: Vec::new(),
            });
        }
        let record = &self.session.record;
        if remote.is_zero() && record.lease_assumed() {
            // Never asked: the session is new, and this push creates it (`old` = the zero id,
            // which receive-pack refuses if another sandbox created it meanwhile).
            return Ok(LeaseCheck::Send {
                old: remote,
                warnings: Vec::new(),
            });
        }
        match classify(self.repo, &self.ledger, lease, Some(self.local), remote)? {
            RemoteTip::Own if remote == self.local => {
                tracing::info!("the remote already has {remote}: an earlier push landed");
                let pushed = self.spool.borrow().is_some();
                let warnings = if pushed {
                    Vec::new()
                } else {
                    vec![format!(
                        "an earlier push of {remote} from this tree landed: the lease advances \
                         from {lease} to it"
                    )]
                };
                Ok(LeaseCheck::Done(self.outcome(lease, pushed, warnings)))
            }
            RemoteTip::Own => Ok(LeaseCheck::Send {
                old: remote,
                warnings: vec![format!(
                    "the remote branch moved from {lease} to {remote}, which this tree pushed \
                     earlier (a plain git push, or a push whose answer was lost): the lease \
                     advances to it"
                )],
            }),
            RemoteTip::Ahead => Ok(LeaseCheck::Done(self.outcome_at(
                remote,
                lease,
                false,
                vec![format!(
                    "the remote branch is at {remote}, which this tree pushed (from another \
                     branch?) and which is ahead of local {} ({}): nothing to push; the lease \
                     advances to it — bring the branch up to it with {}",
                    branch.full_ref(),
                    self.local,
                    Hint::MergeFfOnly(remote)
                )],
            ))),
            RemoteTip::Rewritten => Err(self.rewritten(remote)),
            RemoteTip::Lease | RemoteTip::Moved | RemoteTip::Deleted => Err(stale(
                branch,
                (lease, remote),
                self.kept,
                self.work(lease, remote),
            )),
        }
    }

    fn rewritten(&self, remote: FullSha) -> Error {
        Error::conflict(format!(
            "the remote branch '{}' is at {remote}, which this tree pushed, but local {} ({}) no \
             longer contains it: history was rewritten after the push (e.g. an amend or a \
             rebase); nothing was uploaded (git-session pushes fast-forward only) — to keep \
             your changes as a new commit on top of it: {}, then {} again",
            self.branch(),
            self.branch().full_ref(),
            self.local,
            Hint::ResetSoft(remote),
            Hint::Save
        ))
    }

    /// Step 3: fast-forward only, from `old` (or from `TIP_SHA` for a new branch).
    fn check_fast_forward(&self, old: FullSha) -> Result<()> {
        let base = self.base(old);
        if crate::repo::descends_from(self.repo, self.local.id(), base.id())? {
            return Ok(());
        }
        Err(Error::conflict(format!(
            "local {} ({}) does not descend from {} {base}: history was rewritten; nothing was \
             uploaded (git-session pushes fast-forward only) — to keep your changes as a new \
             commit on top of it: {}, then {} again",
            self.branch().full_ref(),
            self.local,
            if old.is_zero() {
                "the restored TIP_SHA"
            } else {
                "the lease"
            },
            Hint::ResetSoft(base),
            Hint::Save,
        )))
    }

    /// This tree's work, for the stale error's way on.
    fn work(&self, lease: FullSha, remote: FullSha) -> crate::error::LocalWork {
        crate::error::LocalWork {
            workdir: self.session.workdir.clone(),
            base: crate::repo::lease::work_base(
                self.repo,
                self.branch(),
                self.local,
                self.base(lease),
                remote,
            ),
            head: self.local,
        }
    }

    fn base(&self, old: FullSha) -> FullSha {
        if old.is_zero() {
            self.session.record.tip
        } else {
            old
        }
    }

    /// Step 4, first half: the request, spooled once and reused by retries.
    fn spool_request(
        &self,
        adv: &advertisement::Advertised,
        caps: &[String],
        old: FullSha,
    ) -> Result<()> {
        let mut spooled = self.spool.borrow_mut();
        if spooled
            .as_ref()
            .is_some_and(|s| s.old == old && s.new == self.local)
        {
            return Ok(());
        }
        let refname = self.branch().full_ref();
        let update = pack::Update {
            old,
            new: self.local,
            base: self.base(old),
            refname: &refname,
            caps,
            thin: !adv.has("no-thin"),
        };
        *spooled = Some(pack::spool(self.repo, &update, self.secrets)?);
        Ok(())
    }

    /// Step 4, second half: send the spooled request.
    fn send(&self, url: &RemoteUrl) -> Result<crate::wire::http::Body> {
        let spooled = self.spool.borrow();
        let body = spooled.as_ref().expect("spooled before sending");
        tracing::info!(
            "sending {} objects ({} bytes) for {}..{}",
            body.objects,
            body.len,
            body.old,
            body.new
        );
        receive_pack::send(self.http, url, body)
    }

    /// Step 5 for an `ng` because the ref was not at `old` any more: where is it now?
    fn moved_meanwhile(&self, url: &RemoteUrl, old: FullSha, reason: &str) -> Result<()> {
        let now = advertisement::read(self.http, url, self.branch())
            .map(|a| a.tip.unwrap_or_else(|| FullSha::zero(old.format())))
            .unwrap_or(old);
        let lease = self.session.record.lease;
        match classify(self.repo, &self.ledger, lease, Some(self.local), now)? {
            // A push of this very commit landed while this one was on its way (a killed save's,
            // still being applied by the server when the rerun looked).
            RemoteTip::Own if now == self.local => {
                tracing::info!("the remote moved to {now} meanwhile: this tree's push landed");
                Ok(())
            }
            // Another commit of this tree's (a plain `git push` meanwhile): the retry, which
            // re-reads the tip, pushes on top of it.
            RemoteTip::Own => Err(Error::Network(format!(
                "the remote branch moved to {now}, this tree's own commit, during the push \
                 ({reason}): pushing again from there"
            ))),
            _ => {
                let mut e = stale(self.branch(), (old, now), self.kept, self.work(old, now));
                if let Error::Stale(s) = &mut e {
                    s.remote_says = Some(reason.to_owned());
                }
                Err(e)
            }
        }
    }
}

/// Refuse a push to a repository of another object format than the session's (`server`, as
/// receive-pack announced it; `ours`, the local repository's): its ids and pack would be
/// meaningless there, and git-session never converts between formats (git's
/// `compatObjectFormat` is not supported).
///
/// # Errors
/// [`Error::Usage`] (exit 2) before anything is uploaded.
fn check_format(url: &RemoteUrl, server: Format, ours: Format) -> Result<()> {
    if server == ours {
        return Ok(());
    }
    Err(Error::Usage(
        Refusal::Invalid,
        format!(
            "{url} serves a {} repository (object-format={}), but this session's repository is \
             a {} one: git-session never converts between object formats, so nothing was \
             uploaded (PUSH_URL must name a {} repository: the session's own)",
            format_title(server),
            format_name(server),
            format_title(ours),
            format_title(ours),
        ),
    ))
}

/// The capabilities a push asks for, from what receive-pack advertised
/// (`gitprotocol-capabilities`): `report-status` (required: an unconfirmed push is never made;
/// `report-status-v2` alone is not enough, as git's client too asks for the first),
/// `side-band-64k` when offered (else the report comes as plain pkt-lines), the object format
/// when announced, our agent. Never `atomic` (one ref), `push-options`, `quiet` (nothing is
/// shown of the server's progress but its messages) or a delete.
///
/// # Errors
/// [`Error::Protocol`] (exit 5) for a server without `report-status`.
fn request_capabilities(url: &RemoteUrl, adv: &advertisement::Advertised) -> Result<Vec<String>> {
    if !adv.has("report-status") {
        return Err(Error::Protocol(format!(
            "{url} does not offer report-status: a push could not be confirmed, so none is made"
        )));
    }
    let mut caps = vec!["report-status".to_owned()];
    if adv.has("side-band-64k") {
        caps.push("side-band-64k".into());
    }
    // The format receive-pack announced, as this build names it (the value was checked when the
    // advertisement was read): git's receive-pack reads the pack in it.
    if adv.has("object-format") {
        caps.push(format!("object-format={}", format_name(adv.format)));
    }
    caps.push(format!("agent=git-session/{}", env!("CARGO_PKG_VERSION")));
    Ok(caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps_for(recorded: &[u8]) -> Result<Vec<String>> {
        let url = RemoteUrl::parse("http://127.0.0.1:1/repo.git").unwrap();
        let adv = advertisement::parse(&url, recorded, "refs/heads/main").unwrap();
        request_capabilities(&url, &adv)
    }

    /// Each server's recorded receive-pack advertisement (`tests/fixtures/wire/`), and what a
    /// push asks of it.
    #[test]
    fn a_push_asks_each_server_for_what_it_offers() {
        let agent = format!("agent=git-session/{}", env!("CARGO_PKG_VERSION"));
        let cases: [(&str, &[u8], &[&str]); 3] = [
            (
                "git 2.47",
                include_bytes!("../../tests/fixtures/wire/receive-pack-advertisement.response"),
                &["report-status", "side-band-64k", "object-format=sha1"],
            ),
            (
                "JGit 4.11 (no object-format)",
                include_bytes!(
                    "../../tests/fixtures/wire/jgit-receive-pack-advertisement.response"
                ),
                &["report-status", "side-band-64k"],
            ),
            (
                "Dulwich 1.2.21",
                include_bytes!(
                    "../../tests/fixtures/wire/dulwich-receive-pack-advertisement.response"
                ),
                &["report-status", "side-band-64k", "object-format=sha1"],
            ),
        ];
        for (server, recorded, expected) in cases {
            let mut expected: Vec<String> = expected.iter().map(|c| c.to_string()).collect();
            expected.push(agent.clone());
            assert_eq!(caps_for(recorded).unwrap(), expected, "{server}");
        }
    }

    /// A SHA-256 receive-pack is asked for `object-format=sha256`; a push of one format to a
    /// repository of the other is exit 2, naming both.
    #[test]
    fn a_sha256_server_is_asked_in_its_format_and_the_other_format_refused() {
        let id = "9286c450ac867c0b3f83878bc15e185905286280".repeat(2);
        let line = format!(
            "{} refs/heads/main\0report-status side-band-64k object-format=sha256\n",
            &id[..64]
        );
        let mut body = Vec::new();
        gix_packetline::blocking_io::encode::data_to_write(line.as_bytes(), &mut body).unwrap();
        body.extend_from_slice(b"0000");
        let caps = caps_for(&body).unwrap();
        assert!(
            caps.contains(&"object-format=sha256".to_owned()),
            "{caps:?}"
        );
        let url = RemoteUrl::parse("http://127.0.0.1:1/repo.git").unwrap();
        assert!(check_format(&url, Format::Sha256, Format::Sha256).is_ok());
        for (server, ours) in [
            (Format::Sha256, Format::Sha1),
            (Format::Sha1, Format::Sha256),
        ] {
            let err = check_format(&url, server, ours).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("a {} repository", format_title(server)))
                    && text.contains(&format!("a {} one", format_title(ours))),
                "{text}"
            );
        }
    }

    #[test]
    fn a_server_without_report_status_or_side_band_is_asked_accordingly() {
        let adv = |caps: &str| {
            let line = format!(
                "{} refs/heads/main\0{caps}\n",
                "9286c450ac867c0b3f83878bc15e185905286280"
            );
            let mut body = Vec::new();
            gix_packetline::blocking_io::encode::data_to_write(line.as_bytes(), &mut body).unwrap();
            body.extend_from_slice(b"0000");
            body
        };
        let err = caps_for(&adv("report-status-v2 side-band-64k atomic")).unwrap_err();
        assert!(matches!(err, Error::Protocol(m) if m.contains("report-status")));
        let plain = caps_for(&adv("report-status delete-refs")).unwrap();
        assert_eq!(plain[0], "report-status");
        assert!(!plain.iter().any(|c| c.starts_with("side-band")));
    }
}
