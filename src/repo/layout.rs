//! Writing and reading the plain-file parts of a git dir that restore creates: layout, `config`,
//! loose refs, `HEAD`, `shallow` (gitrepository-layout(5)).
//!
//! Written directly rather than through `gix::init` so that nothing but what git needs appears, and
//! nothing from user or system config (templates, hooks) is copied in (SPEC rule 8).

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, Result};
use crate::fs::{write_atomic, write_atomic_if_changed};
use crate::types::{Format, FullSha, RemoteUrl, SessionBranch};

/// The remote settings restore writes: credential-free URLs only.
pub struct OriginConfig<'a> {
    /// The fetch URL (`remote.origin.url`), credential-free: the user name is
    /// [`READ_USER`], so the credential helper knows the direction.
    pub url: Option<&'a RemoteUrl>,
    /// The push URL (`remote.origin.pushurl`; `url` when `None`), with the user name
    /// [`PUSH_USER`].
    pub push_url: Option<&'a RemoteUrl>,
    /// The session branch: the only one `origin` fetches, and the upstream of the local branch.
    pub branch: &'a SessionBranch,
    /// Whether the branch exists on the remote. A new session's branch gets no upstream yet (git
    /// would call it "gone") and a fetch refspec that is no error while it matches nothing; the
    /// first push creates it and sets the upstream (`push.autoSetupRemote` for plain git).
    pub on_remote: bool,
    /// Whether `origin` is a promisor remote (a partial clone's, `blob:none`): an archive restore
    /// has its files and index but not yet the commit's objects, which plain git then fetches
    /// from `origin` when it needs them (gitrepository-layout(5) `extensions.partialClone`).
    pub promisor: bool,
    /// With `promisor`: the server takes `filter`, so plain git fetches the commit with its
    /// trees and each blob when it needs it (`partialclonefilter = blob:none`); without it git
    /// would warn "filtering not recognized by server" on each fetch and fetch whole trees.
    pub promisor_filter: bool,
    /// The repository's object format (`extensions.objectFormat = sha256` for SHA-256).
    pub format: Format,
    /// Plain git signs commits through git-session (`SIGNING_*` set at restore).
    pub signing: Option<&'a GitSigning>,
}

/// What makes plain git sign its commits through git-session: git runs `gpg.ssh.program` as it
/// would run `ssh-keygen -Y sign`, with the public key `user.signingKey` names (`key::`: git
/// writes it to a temporary file and passes `-U`), and git-session signs with the key or service
/// the record names (gpg-interface.c `sign_buffer_ssh`; git-config(1) `gpg.*`).
#[derive(Debug, Clone)]
pub struct GitSigning {
    /// What the session record keeps: where signatures come from, and the public key.
    pub record: crate::repo::session::SigningRecord,
    /// This binary's absolute path, which git runs as its `ssh-keygen`.
    pub program: String,
}

impl GitSigning {
    /// The set-up for `record`, git running this binary.
    ///
    /// # Errors
    /// [`Error::Internal`] when this binary's path cannot be known or written into a config
    /// value (not UTF-8, or a line break in it).
    pub fn new(record: crate::repo::session::SigningRecord) -> Result<Self> {
        let exe = std::env::current_exe().map_err(|e| {
            Error::internal("finding git-session's own path for gpg.ssh.program", e)
        })?;
        let program = exe
            .to_str()
            .filter(|p| !p.contains(['\n', '\r', '\0']))
            .ok_or_else(|| {
                Error::Internal(format!(
                    "git-session's own path {} cannot be gpg.ssh.program (not UTF-8, or a line \
                     break in it): plain git could not sign through it",
                    crate::text::line(exe.as_os_str().as_encoded_bytes())
                ))
            })?
            .to_owned();
        Ok(GitSigning { record, program })
    }

    /// The config values, as `(section, subsection, key, value)`.
    fn values(&self) -> [(&'static str, Option<&'static str>, &'static str, String); 4] {
        [
            ("gpg", None, "format", "ssh".to_owned()),
            ("gpg", Some("ssh"), "program", self.program.clone()),
            ("commit", None, "gpgSign", "true".to_owned()),
            (
                "user",
                None,
                "signingKey",
                format!("key::{}", self.record.public_key()),
            ),
        ]
    }
}

/// The made-up, secret-free user name of `remote.origin.url`: git's credential request carries no
/// direction, but it carries the user name, and the helper answers it with `READ_URL`'s
/// credentials (git-credential(1): a helper's `username=` replaces the URL's).
pub const READ_USER: &str = "git-session-read";
/// The made-up user name of `remote.origin.pushurl`, answered with `PUSH_URL`'s credentials.
pub const PUSH_USER: &str = "git-session-push";

/// The `credential.helper` value that runs this binary's `credential` command (git-credential(1)
/// "CUSTOM HELPERS": a value starting with `!` is a shell command).
pub fn credential_helper() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.to_str()?;
    Some(format!("!'{}' credential", exe.replace('\'', "'\\''")))
}

/// Quote a config value or subsection name as git-config(1) reads it: in double quotes, with `"`
/// and `\` escaped. Callers pass values without newlines (URLs and ref names cannot hold them).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Create the layout of a fresh non-bare git dir at `git_dir` (`HEAD` → the session branch, unborn).
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn init(git_dir: &Path, origin: &OriginConfig<'_>) -> Result<()> {
    create_folders(git_dir)?;
    write_atomic(
        &git_dir.join("HEAD"),
        format!("ref: {}\n", origin.branch.full_ref()).as_bytes(),
    )?;
    write_config(git_dir, origin)
}

/// Create the layout of a template's git dir (`git-session bake`): `HEAD` detached at `base`,
/// a config with no remote (the image must not carry the read URL) and no credential helper.
///
/// # Errors
/// [`Error::LocalIo`] on I/O failure.
pub fn init_template(git_dir: &Path, base: FullSha) -> Result<()> {
    create_folders(git_dir)?;
    write_atomic(&git_dir.join("HEAD"), format!("{base}\n").as_bytes())?;
    let config = core_section(base.format(), false) + &extensions_section(base.format(), false);
    write_atomic(&git_dir.join("config"), config.as_bytes())
}

/// The `[core]` section every git dir restore builds starts with.
const CORE_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";

/// The `[core]` section for a repository of `format`: format version 1 where an extension is
/// set (gitrepository-layout(5) "extensions"), a SHA-256 repository's or a partial clone's.
fn core_section(format: Format, partial_clone: bool) -> String {
    if partial_clone || format != Format::Sha1 {
        CORE_CONFIG.replace("repositoryformatversion = 0", "repositoryformatversion = 1")
    } else {
        CORE_CONFIG.to_owned()
    }
}

/// The `[extensions]` section (empty when none is set): `objectFormat = sha256` for a SHA-256
/// repository, `partialClone = origin` for a partial clone.
fn extensions_section(format: Format, partial_clone: bool) -> String {
    let mut c = String::new();
    if format != Format::Sha1 {
        let _ = writeln!(c, "\tobjectFormat = {}", crate::types::format_name(format));
    }
    if partial_clone {
        c.push_str("\tpartialClone = origin\n");
    }
    if c.is_empty() {
        c
    } else {
        format!("[extensions]\n{c}")
    }
}

fn create_folders(git_dir: &Path) -> Result<()> {
    for sub in [
        "objects/pack",
        "objects/info",
        "refs/heads",
        "refs/tags",
        "info",
    ] {
        std::fs::create_dir_all(git_dir.join(sub))
            .map_err(|e| Error::io(format!("creating {}", git_dir.join(sub).display()), e))?;
    }
    Ok(())
}

/// Write the whole `config` of a git dir restore is building (see [`OriginConfig`]).
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn write_config(git_dir: &Path, origin: &OriginConfig<'_>) -> Result<()> {
    write_atomic_if_changed(&git_dir.join("config"), config_text(origin).as_bytes()).map(|_| ())
}

fn config_text(origin: &OriginConfig<'_>) -> String {
    let b = origin.branch;
    let promisor = origin.promisor && origin.url.is_some();
    let mut c = core_section(origin.format, promisor);
    c.push_str(&extensions_section(origin.format, promisor));
    if let Some(signing) = origin.signing {
        for (section, sub, key, value) in signing.values() {
            let sub = sub.map(|s| format!(" {}", quote(s))).unwrap_or_default();
            let _ = write!(c, "[{section}{sub}]\n\t{key} = {}\n", quote(&value));
        }
    }
    // Without a read URL (an archive restore given only PUSH_URL), the push URL names the same
    // repository: `origin` fetches from it too, so plain git has a remote at all.
    if let Some(url) = origin.url.or(origin.push_url) {
        let _ = write!(
            c,
            "[remote \"origin\"]\n\turl = {}\n",
            quote(&url.public_as(READ_USER))
        );
        // Both, as the SPEC says, also when they are the same URL (no PUSH_URL: the read URL).
        let push = origin.push_url.unwrap_or(url);
        let _ = writeln!(c, "\tpushurl = {}", quote(&push.public_as(PUSH_USER)));
        let refspec = if origin.on_remote {
            exact_refspec(b)
        } else {
            pending_refspec(b)
        };
        let _ = writeln!(c, "\tfetch = {}\n\ttagOpt = --no-tags", quote(&refspec));
        if promisor {
            c.push_str("\tpromisor = true\n");
            if origin.promisor_filter {
                c.push_str("\tpartialclonefilter = blob:none\n");
            }
        }
        if origin.on_remote {
            let _ = write!(
                c,
                "[branch {}]\n\tremote = origin\n\tmerge = {}\n",
                quote(b.as_str()),
                quote(&b.full_ref())
            );
        }
        // The first plain `git push` of a new session creates the branch and sets its upstream.
        c.push_str("[push]\n\tautoSetupRemote = true\n");
        // Plain git's own fetches (a partial clone's lazy ones too) give up on a stalled server
        // as git-session does; git has no option for the wait before the first byte.
        let knobs = crate::knobs::get();
        if knobs.low_speed_limit > 0 {
            let _ = write!(
                c,
                "[http]\n\tlowSpeedLimit = {}\n\tlowSpeedTime = {}\n",
                knobs.low_speed_limit,
                knobs.low_speed_time.as_secs().max(1)
            );
        }
        // Plain git in the shell gets credentials from the environment through git-session; the
        // empty entry first drops any other helper, so none stores what ours hands out.
        if let Some(helper) = credential_helper() {
            let _ = write!(
                c,
                "[credential]\n\thelper = \"\"\n\thelper = {}\n\tuseHttpPath = true\n",
                quote(&helper)
            );
        }
    }
    c
}

/// Make plain git in `git_dir` sign as `signing` says, the rest of its config kept (a restore of
/// a finished tree given `SIGNING_*`: a new key replaces the old); returns whether anything
/// changed.
///
/// # Errors
/// [`Error::Internal`] when the config cannot be read or written.
pub fn set_signing(git_dir: &Path, signing: &GitSigning) -> Result<bool> {
    let path = git_dir.join("config");
    let mut config =
        gix::config::File::from_path_no_includes(path.clone(), gix::config::Source::Local)
            .map_err(|e| Error::from_chain(format!("reading {}", path.display()), &e))?;
    let mut changed = false;
    for (section, sub, key, value) in signing.values() {
        let current = config.raw_value_by(section, sub.map(Into::into), key).ok();
        if current.as_ref().is_some_and(|v| *v == value.as_str()) {
            continue;
        }
        config
            .set_raw_value_by(section, sub.map(Into::into), key, value.as_str())
            .map_err(|e| Error::internal(format!("editing {}", path.display()), e))?;
        changed = true;
    }
    if !changed {
        return Ok(false);
    }
    let mut bytes = Vec::new();
    config
        .write_to(&mut bytes)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    write_atomic(&path, &bytes)?;
    Ok(true)
}

/// Create the git dir of a submodule (`.git/modules/<name>`, as `git submodule update` lays it
/// out): `HEAD` detached at `commit`, `core.worktree` pointing back at its work tree
/// (`worktree`, relative to `git_dir`), `origin` at the credential-free `url`.
///
/// # Errors
/// [`Error::LocalIo`] on I/O failure.
pub fn init_submodule(
    git_dir: &Path,
    commit: FullSha,
    worktree: &str,
    url: &RemoteUrl,
) -> Result<()> {
    create_folders(git_dir)?;
    write_atomic(&git_dir.join("HEAD"), format!("{commit}\n").as_bytes())?;
    let mut c = core_section(commit.format(), false);
    let _ = writeln!(c, "\tworktree = {}", quote(worktree));
    c.push_str(&extensions_section(commit.format(), false));
    let _ = write!(
        c,
        "[remote \"origin\"]\n\turl = {}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
        quote(&url.public())
    );
    write_atomic(&git_dir.join("config"), c.as_bytes())
}

/// Record in `git_dir`'s config that the submodule `name` is initialised from `url`, as
/// `git submodule init` does (`submodule.<name>.url`, `.active`).
///
/// # Errors
/// [`Error::LocalIo`] on I/O failure.
pub fn add_submodule_config(git_dir: &Path, name: &str, url: &RemoteUrl) -> Result<()> {
    let path = git_dir.join("config");
    let mut text =
        crate::fs::state::read(&path, crate::fs::state::RECORD_CAP, "")?.unwrap_or_default();
    let section = format!(
        "[submodule {}]\n\tactive = true\n\turl = {}\n",
        quote(name),
        quote(&url.public())
    );
    text.extend_from_slice(section.as_bytes());
    write_atomic(&path, &text)
}

/// Make `git_dir` a sparse checkout of the cone `patterns` (`info/sparse-checkout`), as
/// `git sparse-checkout set --cone` does (`core.sparseCheckout`, `core.sparseCheckoutCone`).
///
/// # Errors
/// [`Error::LocalIo`] on I/O failure.
pub fn add_sparse_config(git_dir: &Path, patterns: &str) -> Result<()> {
    write_atomic(&git_dir.join("info/sparse-checkout"), patterns.as_bytes())?;
    let path = git_dir.join("config");
    let mut text =
        crate::fs::state::read(&path, crate::fs::state::RECORD_CAP, "")?.unwrap_or_default();
    text.extend_from_slice(b"[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n");
    write_atomic(&path, &text)
}

/// The folders of `git_dir`'s cone-mode sparse checkout (`info/sparse-checkout`: the `/dir/`
/// patterns that are not a parent's, which `!/dir/*/` follows), or `None` when it has none.
pub fn sparse_dirs(git_dir: &Path) -> Option<Vec<String>> {
    let bytes = crate::fs::state::read(
        &git_dir.join("info/sparse-checkout"),
        crate::fs::state::RECORD_CAP,
        "",
    )
    .ok()??;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let dirs: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix('/')?.strip_suffix('/'))
        .filter(|d| !d.is_empty() && !lines.contains(&format!("!/{d}/*/").as_str()))
        .map(str::to_owned)
        .collect();
    (!dirs.is_empty()).then_some(dirs)
}

/// Mark every pack in `git_dir` as a promisor pack (`pack-<hash>.promisor`, as a partial clone's
/// fetch leaves it): objects they refer to but lack are the promisor remote's to give.
///
/// # Errors
/// [`Error::LocalIo`] on I/O failure.
pub fn mark_promisor_packs(git_dir: &Path) -> Result<()> {
    let dir = git_dir.join("objects/pack");
    let entries =
        std::fs::read_dir(&dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "pack") {
            write_atomic(&path.with_extension("promisor"), b"")?;
        }
    }
    Ok(())
}

/// Add to `git_dir`'s config what `git lfs install --local` writes, so that plain git with
/// git-lfs installed reads the restored LFS files as clean and fetches others itself. Nothing is
/// run by git-session from it.
///
/// # Errors
/// [`Error::LocalIo`] on I/O failure.
pub fn add_lfs_config(git_dir: &Path) -> Result<()> {
    let path = git_dir.join("config");
    let mut text =
        crate::fs::state::read(&path, crate::fs::state::RECORD_CAP, "")?.unwrap_or_default();
    if text.windows(14).any(|w| w == b"[filter \"lfs\"]") {
        return Ok(());
    }
    text.extend_from_slice(LFS_CONFIG.as_bytes());
    write_atomic(&path, &text)
}

/// `git lfs install --local`'s configuration.
const LFS_CONFIG: &str = "[lfs]\n\trepositoryformatversion = 0\n[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tsmudge = git-lfs smudge -- %f\n\tprocess = git-lfs filter-process\n\trequired = true\n";

/// `origin`'s fetch refspec once the session branch exists: exactly that branch.
fn exact_refspec(b: &SessionBranch) -> String {
    format!("+{}:{}", b.full_ref(), b.tracking_ref())
}

/// `origin`'s fetch refspec while the session branch does not exist yet: a pattern whose `*` may
/// match nothing, so `git fetch` is no error while the branch is absent (an exact refspec fails
/// with "couldn't find remote ref"). The `*` sits inside the last component, between its halves:
/// a pattern `P*S` matches only names that start with `P` and end with `S`, so other sessions'
/// branches (`sessions/new-old`, `sessions/newer`) are not fetched, and ls-refs is still asked for
/// the prefix `P` only.
fn pending_refspec(b: &SessionBranch) -> String {
    let name = b.as_str();
    let last = name.rsplit('/').next().unwrap_or(name);
    // At a character boundary near the middle of the last component, after its first character
    // (so ls-refs is never asked for a whole folder of branches).
    let mut at = name.len() - last.len() + (last.len() / 2).max(1);
    while !name.is_char_boundary(at) {
        at += 1;
    }
    let (head, tail) = name.split_at(at);
    format!("+refs/heads/{head}*{tail}:refs/remotes/origin/{head}*{tail}")
}

/// Once the session branch exists on the remote (after the push that created it, by git-session
/// or plain git): fetch exactly it, and make it the local branch's upstream (what a clone would
/// have), unless the upstream is already set. Nothing changes when both already hold.
///
/// # Errors
/// [`Error::Internal`] when the config cannot be read or written.
pub fn settle_origin(git_dir: &Path, b: &SessionBranch) -> Result<()> {
    edit_config(git_dir, |config, path| {
        let err =
            |e: &dyn std::fmt::Display| Error::internal(format!("editing {}", path.display()), e);
        let mut changed = false;
        let pending = pending_refspec(b);
        // `origin` fetches the main session's branch and each agent's (one `fetch` line each): the
        // line of `b`'s pattern becomes exact, the others stay as they are, in their order.
        if let Ok(mut origin) = config.section_mut("remote", Some("origin".into()))
            && origin.values("fetch").iter().any(|v| v == pending.as_str())
        {
            // Normalised (unquoted): `push` quotes each again as it needs.
            let lines = origin.values("fetch");
            while origin.remove("fetch").is_some() {}
            for line in lines {
                let line = if line == pending.as_str() {
                    changed = true;
                    exact_refspec(b).into()
                } else {
                    line
                };
                origin
                    .push("fetch", Some(line.as_ref()))
                    .map_err(|e| err(&e))?;
            }
        }
        let merge_key = format!("branch.{}.merge", b.as_str());
        if config.string(merge_key.as_str()).is_none() {
            config
                .set_raw_value_by("branch", Some(b.as_str().into()), "remote", "origin")
                .map_err(|e| err(&e))?;
            config
                .set_raw_value_by(
                    "branch",
                    Some(b.as_str().into()),
                    "merge",
                    b.full_ref().as_str(),
                )
                .map_err(|e| err(&e))?;
            changed = true;
        }
        Ok(changed)
    })
}

/// Make `origin`'s `b` the upstream of the local branch `b` (`branch.<b>.remote`/`merge`, what a
/// clone has), unless one is set, and have `origin` fetch it (a `fetch` line of its own, the
/// pattern of a branch not on the server yet, so plain git's pushes to it move its remote-tracking
/// ref): an agent's branch gets both at `agent add`.
///
/// # Errors
/// [`Error::Internal`] when the config cannot be read or written.
pub fn track_branch(git_dir: &Path, b: &SessionBranch) -> Result<()> {
    edit_config(git_dir, |config, path| {
        let err =
            |e: &dyn std::fmt::Display| Error::internal(format!("editing {}", path.display()), e);
        let mut changed = false;
        let fetched = [pending_refspec(b), exact_refspec(b)];
        if let Ok(mut origin) = config.section_mut("remote", Some("origin".into()))
            && !origin
                .values("fetch")
                .iter()
                .any(|v| fetched.iter().any(|f| v == f.as_str()))
        {
            origin
                .push("fetch", Some(fetched[0].as_str().into()))
                .map_err(|e| err(&e))?;
            changed = true;
        }
        if config
            .string(format!("branch.{}.merge", b.as_str()).as_str())
            .is_none()
        {
            let sub = Some(b.as_str().into());
            config
                .set_raw_value_by("branch", sub, "remote", "origin")
                .map_err(|e| err(&e))?;
            config
                .set_raw_value_by("branch", sub, "merge", b.full_ref().as_str())
                .map_err(|e| err(&e))?;
            changed = true;
        }
        Ok(changed)
    })
}

/// Write the loose ref `name` (e.g. `refs/heads/x`) to point at `id`.
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn write_ref(git_dir: &Path, name: &str, id: FullSha) -> Result<()> {
    let path = git_dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
    }
    write_atomic_if_changed(&path, format!("{id}\n").as_bytes()).map(|_| ())
}

/// Write `shallow` with the given commits (gitrepository-layout(5) "shallow"); none removes it.
///
/// # Errors
/// [`Error::Internal`] on I/O failure.
pub fn write_shallow(git_dir: &Path, ids: &[gix::ObjectId]) -> Result<()> {
    let path = git_dir.join("shallow");
    if ids.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("removing {}", path.display()), e))
            }
            _ => Ok(()),
        };
    }
    let mut sorted: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    sorted.sort();
    sorted.dedup();
    write_atomic_if_changed(&path, (sorted.join("\n") + "\n").as_bytes()).map(|_| ())
}

/// Edit `<git_dir>/config` as git does: `config.lock` made (`O_EXCL`; waited for while another
/// process holds it, up to `GIT_SESSION_LOCK_WAIT_S`), the config read, `edit` run on it (it
/// returns whether it changed anything), the result written into the lock and renamed over the
/// config. The agents of a repository edit its one config from processes of their own (a save's
/// fetch line, `agent add`'s upstream): none loses another's edit, nor a plain `git config`'s.
/// Barrier `hold-config-edit`: the config read, not yet written.
///
/// # Errors
/// [`Error::Conflict`] when the lock stays taken; [`Error::Internal`] when the config cannot be
/// read or written; those of `edit`.
fn edit_config(
    git_dir: &Path,
    edit: impl FnOnce(&mut gix::config::File, &Path) -> Result<bool>,
) -> Result<()> {
    let path = git_dir.join("config");
    let lock = super::file_lock::FileLock::take(&path, super::file_lock::Locked::Config)?;
    let mut config =
        gix::config::File::from_path_no_includes(path.clone(), gix::config::Source::Local)
            .map_err(|e| Error::from_chain(format!("reading {}", path.display()), &e))?;
    crate::failpoint::barrier("hold-config-edit");
    crate::failpoint::hit("config-lock-taken");
    if !edit(&mut config, &path)? {
        return Ok(());
    }
    let mut bytes = Vec::new();
    config
        .write_to(&mut bytes)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    lock.commit(&path, &bytes, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_sessions_pattern_matches_the_branch_and_few_others() {
        let b: SessionBranch = "sessions/new".parse().unwrap();
        assert_eq!(
            pending_refspec(&b),
            "+refs/heads/sessions/n*ew:refs/remotes/origin/sessions/n*ew"
        );
        let b: SessionBranch = "sessions/4f1c9a".parse().unwrap();
        assert_eq!(
            pending_refspec(&b),
            "+refs/heads/sessions/4f1*c9a:refs/remotes/origin/sessions/4f1*c9a"
        );
        let b: SessionBranch = "x".parse().unwrap();
        assert_eq!(pending_refspec(&b), "+refs/heads/x*:refs/remotes/origin/x*");
    }
}
