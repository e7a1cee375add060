//! The pre-push check: plain `git push` from the sandbox's repository is held to the same lease as
//! `save` and `push` (SPEC rule 3), so a stale sandbox cannot take the session with
//! `git pull && git push`.
//!
//! # Mechanism: a `pre-push` hook of git-session's own
//! Restore writes `.git/hooks/pre-push`, in git's default hooks folder (no `core.hooksPath`: the
//! check then follows the tree when it is moved, covers linked work trees, which run the common
//! dir's hooks, and leaves room for hook managers that refuse a set `core.hooksPath`). git runs
//! the hook after it has read the remote's ref advertisement, with one line per ref on standard
//! input — `<local ref> <local id> <remote ref> <remote id>` (githooks(5) "pre-push") — and pushes
//! nothing when it fails. For every push to the session branch's name, whatever the URL (the same
//! server has many spellings), the hook asks [`crate::repo::lease::classify`] about the remote id,
//! refuses a stale push (exit 3's words), a deletion, or anything but a fast-forward from the lease
//! (a force push), with `SIGNING_REQUIRED=1` every commit it would upload that is not signed by
//! the expected key ([`crate::repo::signed`]), and — for a push to the session's own repository
//! (`origin`, or a URL naming the recorded read or push URL's scheme, host, port and path; a host
//! by any name that resolves to
//! the same address) — records the new commit in the ledger before git uploads. A push elsewhere
//! (a mirror still at the lease) is checked but never recorded: it would make another sandbox's
//! commit this tree's own. The race between
//! the advertisement and the update is closed by receive-pack itself: git sends the advertised id
//! as the old value, and receive-pack refuses the update if the ref moved.
//!
//! Why not git's remote-helper mechanism (`url = git-session::https://…`): it covers only pushes
//! to a configured remote — `git push "$PUSH_URL" HEAD:refs/heads/…` bypasses it — and would put
//! every fetch through our code too. The hook sees pushes to a remote and to a URL alike; what it
//! cannot see is a push that skips hooks (`git push --no-verify`, `-c core.hooksPath=…`, or a
//! user-level `core.hooksPath`, which git-session does not read: SPEC rule 8), which the next
//! command calls "moved" (not this tree's). The hook is git-session's own code, not the remote's:
//! rule 8 still holds.
//!
//! # Hook managers
//! husky sets `core.hooksPath` to its own folder; lefthook and pre-commit rewrite `pre-push`.
//! Every git-session command calls [`ensure`], which re-installs the check with a warning and
//! keeps what it replaced running: a foreign `pre-push` moves to `pre-push.chained` and runs after
//! the check; a `core.hooksPath` set in the repository's (or a work tree's) config is removed and
//! remembered (`gitSession.chainedHooksPath`), its `pre-push` runs after the check and each of its
//! other hooks through a shim (which does nothing once that folder is gone).
//!
//! # Security
//! The URL git passes to the hook is the one the person typed (it may carry credentials): the
//! hook script hands it to git-session in the environment, never in argv, and git-session only
//! compares it, never prints or stores it.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice as _;

use crate::error::{Error, Refusal, Result};
use crate::hint::Hint;
use crate::repo::lease::{Ledger, RemoteTip, WriteLock};
use crate::repo::session::SessionRecord;
use crate::types::FullSha;

/// The line that marks a hook script as git-session's own.
const MARKER: &str = "# git-session pre-push check";
/// The line that marks a shim running a chained hook folder's hook.
const SHIM_MARKER: &str = "# git-session shim";
/// Where a foreign `pre-push` found in our hooks folder is kept and run after the check.
const CHAINED_HOOK: &str = "pre-push.chained";
/// The most of a hook read to see whether it is ours (ours are a few hundred bytes; the folder's
/// owner decides the size of what is there).
const HOOK_CAP: u64 = 1 << 20;
/// The config key remembering the hooks folder a hook manager had set.
const CHAINED_KEY: &str = "gitSession.chainedHooksPath";
/// Set by the hook for the hooks it chains, so our own script run again (pre-commit's
/// `pre-push.legacy` copy of it) does nothing the second time.
const ACTIVE_VAR: &str = "GIT_SESSION_HOOK_ACTIVE";
/// The remote name (or URL) git passed as `$1`, handed over by the hook script.
pub const REMOTE_VAR: &str = "GIT_SESSION_HOOK_REMOTE";
/// The URL git passed as `$2`, handed over by the hook script.
pub const URL_VAR: &str = "GIT_SESSION_HOOK_URL";

/// Install the check into a git dir being built at `git_dir` (restore builds it in a staging
/// folder and renames it: nothing written depends on the final path).
///
/// # Errors
/// [`Error::Internal`] when the hook cannot be written.
pub fn install(git_dir: &Path) -> Result<()> {
    ensure_in(git_dir, true).map(|_| ())
}

/// Verify that the check is in effect in the repository at `git_dir` and re-install it where it
/// is not; returns a warning for each thing put back.
///
/// # Errors
/// [`Error::Internal`] when the hook or the config cannot be written.
pub fn ensure(git_dir: &Path) -> Result<Vec<String>> {
    ensure_in(git_dir, false)
}

/// Remove from a baked template's git dir everything but git-session's own check that git could
/// run later: every other hook (a template built after the bake may have added some) and the
/// work tree's `config.worktree` (a `core.hooksPath` there would be chained), so that nothing of
/// the template runs (SPEC rule 8) and a boot leaves what a restore seeded from a cache leaves.
/// A `hooks` that is not a real folder (a symlink) is removed itself, never followed. Returns a
/// warning naming what was removed.
///
/// # Errors
/// [`Error::LocalIo`] when something cannot be removed.
pub fn remove_template_hooks(git_dir: &Path) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let remove = |path: &Path, dir: bool| {
        if dir {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        }
        .map_err(|e| Error::io(format!("removing {}", path.display()), e))
    };
    let worktree_config = git_dir.join("config.worktree");
    if let Ok(meta) = std::fs::symlink_metadata(&worktree_config) {
        remove(&worktree_config, meta.is_dir())?;
        removed.push("config.worktree".to_owned());
    }
    let hooks = git_dir.join("hooks");
    match std::fs::symlink_metadata(&hooks) {
        Ok(meta) if meta.is_dir() => {
            let entries = std::fs::read_dir(&hooks)
                .map_err(|e| Error::io(format!("listing {}", hooks.display()), e))?;
            for entry in entries.flatten() {
                let path = entry.path();
                let meta = std::fs::symlink_metadata(&path)
                    .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
                let ours = entry.file_name() == "pre-push"
                    && meta.is_file()
                    && crate::fs::read_regular(&path, true, HOOK_CAP)
                        .is_ok_and(|text| text.find(MARKER).is_some());
                if !ours {
                    remove(&path, meta.is_dir())?;
                    removed.push(format!("hooks/{}", entry.file_name().to_string_lossy()));
                }
            }
        }
        Ok(_) => {
            remove(&hooks, false)?;
            removed.push("hooks".to_owned());
        }
        Err(_) => {}
    }
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    removed.sort();
    Ok(vec![format!(
        "the template's git dir held {} (added after the bake): removed, as nothing of a template \
         runs; git-session's own pre-push check is the only hook",
        removed.join(", ")
    )])
}

/// The hooks run from git's own default place, `$GIT_DIR/hooks`: no `core.hooksPath` is set, so
/// the check follows the tree when it is moved, covers linked work trees (they run the common
/// dir's hooks), and lets hook managers that refuse a set `core.hooksPath` (pre-commit) install.
fn ensure_in(git_dir: &Path, fresh: bool) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    let hooks = git_dir.join("hooks");
    let chained = take_back_hooks_path(git_dir, &mut warnings)?;
    std::fs::create_dir_all(&hooks)
        .map_err(|e| Error::io(format!("creating {}", hooks.display()), e))?;
    put_the_hook_back(&hooks, &script(chained.as_deref()), fresh, &mut warnings)?;
    if let Some(dir) = &chained {
        shim_chained_hooks(&hooks, git_dir.parent().unwrap_or(git_dir), dir)?;
    }
    Ok(warnings)
}

/// A `core.hooksPath` a hook manager set — in the repository's config or a work tree's — turns
/// the check off: remove it, remember it (`gitSession.chainedHooksPath`), and return the folder
/// whose hooks now run through the check (also one remembered earlier).
fn take_back_hooks_path(git_dir: &Path, warnings: &mut Vec<String>) -> Result<Option<String>> {
    let read = |path: &Path| {
        gix::config::File::from_path_no_includes(path.to_owned(), gix::config::Source::Local)
            .map_err(|e| Error::internal(format!("reading {}", path.display()), e))
    };
    let main = git_dir.join("config");
    let mut chained = read(&main)?.string(CHAINED_KEY).map(|v| v.to_string());
    let workdir = git_dir.parent().unwrap_or(git_dir);
    for name in ["config", "config.worktree"] {
        let path = git_dir.join(name);
        if !path.is_file() {
            continue;
        }
        let mut config = read(&path)?;
        let Some(theirs) = config.string("core.hooksPath").map(|v| v.to_string()) else {
            continue;
        };
        if resolve_hooks_path(theirs.as_str().into(), workdir)
            == resolve_hooks_path(b".git/hooks".into(), workdir)
        {
            continue;
        }
        warnings.push(format!(
            "core.hooksPath was set to {theirs} (by a hook manager?), which turned off \
             git-session's check of plain git push: the check is back, and the hooks of \
             {theirs} still run through it"
        ));
        let ids: Vec<_> = config
            .sections_and_ids_by_name("core")
            .map(|it| it.map(|(_, id)| id).collect())
            .unwrap_or_default();
        for id in ids {
            if let Some(mut section) = config.section_mut_by_id(id) {
                while section.remove("hooksPath").is_some() {}
            }
        }
        write_config(&path, &config)?;
        let mut remembered = read(&main)?;
        set(&mut remembered, CHAINED_KEY, theirs.as_bytes())?;
        write_config(&main, &remembered)?;
        chained = Some(theirs);
    }
    Ok(chained)
}

/// Make `hooks/pre-push` the check's `script` again: a foreign hook found there is kept as
/// `pre-push.chained` and runs after the check.
fn put_the_hook_back(
    hooks: &Path,
    script: &str,
    fresh: bool,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let hook = hooks.join("pre-push");
    // A hook over the cap is not ours: someone else's, moved aside as any other.
    let existing = crate::fs::read_regular(&hook, true, HOOK_CAP).or_else(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            Ok(Vec::new())
        } else {
            Err(e)
        }
    });
    match existing {
        Ok(existing) if existing == script.as_bytes() => {}
        Ok(existing) if existing.starts_with(b"#!/bin/sh\n") && existing.find(MARKER).is_some() => {
            // An earlier version of ours (another binary path): rewritten quietly.
            write_script(&hook, script)?;
        }
        Ok(_) => {
            let keep = hooks.join(CHAINED_HOOK);
            if keep.exists() {
                let older = hooks.join(format!("{CHAINED_HOOK}.old"));
                std::fs::rename(&keep, &older)
                    .map_err(|e| Error::io(format!("moving {} aside", keep.display()), e))?;
            }
            std::fs::rename(&hook, &keep)
                .map_err(|e| Error::io(format!("moving {} aside", hook.display()), e))?;
            write_script(&hook, script)?;
            // pre-commit keeps the hook it replaced as `pre-push.legacy` and runs it: ours, so
            // the check ran all along; the replacement now runs after it instead.
            let ran_ours = crate::fs::read_regular(&hooks.join("pre-push.legacy"), true, HOOK_CAP)
                .is_ok_and(|legacy| legacy.find(MARKER).is_some());
            if !ran_ours {
                warnings.push(format!(
                    "{} was replaced (by a hook manager?), which turned off git-session's check \
                     of plain git push: the check is back, and the replacement, kept as {}, \
                     runs after it",
                    hook.display(),
                    keep.display()
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !fresh {
                warnings.push(format!(
                    "{} was missing, so plain git push was not checked against the lease: \
                     re-installed",
                    hook.display()
                ));
            }
            write_script(&hook, script)?;
        }
        Err(e) => return Err(Error::io(format!("reading {}", hook.display()), e)),
    }
    Ok(())
}

/// git's reading of a `core.hooksPath` value: `~/` from `HOME`, relative to the work tree.
fn resolve_hooks_path(value: &gix::bstr::BStr, workdir: &Path) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = gix::config::Path::from(std::borrow::Cow::Borrowed(value))
        .interpolate(gix::config::path::interpolate::Context {
            home_dir: home.as_deref(),
            ..Default::default()
        })
        .unwrap_or_else(|_| PathBuf::from(value.to_os_str_lossy().into_owned()));
    let path = workdir.join(path);
    path.canonicalize().unwrap_or(path)
}

/// A chained hooks folder as the hook script and the shims name it: `~/` made absolute (git's
/// reading); a relative one stays relative, as git runs hooks in the work tree's root.
fn chained_dir_text(value: &str) -> String {
    match value.strip_prefix("~/") {
        Some(rest) => std::env::var("HOME")
            .map(|home| format!("{home}/{rest}"))
            .unwrap_or_else(|_| value.to_owned()),
        None => value.to_owned(),
    }
}

fn set(config: &mut gix::config::File, key: &str, value: &[u8]) -> Result<()> {
    config
        .set_raw_value(key, gix::bstr::BStr::new(value))
        .map(|_| ())
        .map_err(|e| Error::internal(format!("setting {key}"), e))
}

/// Write a config file under git's own lock (`config.lock`), as `git config` does.
fn write_config(path: &Path, config: &gix::config::File) -> Result<()> {
    let mut lock = gix::lock::File::acquire_to_update_resource(
        path,
        gix::lock::acquire::Fail::AfterDurationWithBackoff(std::time::Duration::from_secs(2)),
        None,
        0,
    )
    .map_err(|e| Error::internal(format!("locking {}", path.display()), e))?;
    config
        .write_to(&mut lock)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    lock.commit()
        .map_err(|e| Error::io(format!("writing {}", path.display()), e.error))?;
    Ok(())
}

fn write_script(path: &Path, text: &str) -> Result<()> {
    crate::fs::write_atomic(path, text.as_bytes())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io(format!("making {} executable", path.display()), e))
}

/// Quote `s` for a POSIX shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The hook script. It reads git's ref lines once, hands them to `git-session hook pre-push`
/// (remote and URL in the environment), then to each chained hook with git's own arguments: the
/// foreign `pre-push` kept beside it, and the `pre-push` of a hook manager's folder.
fn script(chained: Option<&str>) -> String {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(str::to_owned))
        .unwrap_or_else(|| "git-session".into());
    let mut then = vec![format!("\"$(dirname \"$0\")\"/{CHAINED_HOOK}")];
    if let Some(dir) = chained {
        then.push(format!("{}/pre-push", sh_quote(&chained_dir_text(dir))));
    }
    format!(
        "#!/bin/sh\n\
         {MARKER}: holds plain git push to the session branch to the lease (SPEC rule 3).\n\
         # Written by git-session; every git-session command re-installs it if it is replaced.\n\
         # Hooks it replaced run after the check with git's own arguments.\n\
         if [ -n \"${ACTIVE_VAR}\" ]; then cat >/dev/null; exit 0; fi\n\
         exe={exe}\n\
         [ -x \"$exe\" ] || exe=git-session\n\
         refs=$(cat)\n\
         printf '%s' \"$refs${{refs:+\n}}\" | {REMOTE_VAR}=$1 {URL_VAR}=$2 \"$exe\" hook pre-push || exit\n\
         for hook in {then}; do\n\
         \tif [ -x \"$hook\" ]; then\n\
         \t\tprintf '%s' \"$refs${{refs:+\n}}\" | {ACTIVE_VAR}=1 \"$hook\" \"$@\" || exit\n\
         \tfi\n\
         done\n",
        exe = sh_quote(&exe),
        then = then.join(" "),
    )
}

/// For each hook of the chained folder `dir` (but `pre-push`, which the check runs), a shim in
/// `ours` that runs it if it is still there, so a hook manager's other hooks keep working (and a
/// removed folder breaks nothing, as git without the hook).
fn shim_chained_hooks(ours: &Path, workdir: &Path, dir: &str) -> Result<()> {
    let text_dir = chained_dir_text(dir);
    let Ok(entries) = std::fs::read_dir(workdir.join(&text_dir)) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // Hook names are lower-case words joined by '-' (githooks(5)).
        if name == "pre-push"
            || name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
        {
            continue;
        }
        if !entry
            .path()
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        {
            continue;
        }
        let shim = ours.join(name);
        let target = sh_quote(&format!("{text_dir}/{name}"));
        let text = format!(
            "#!/bin/sh\n{SHIM_MARKER}: runs the hook of the folder core.hooksPath named before \
             git-session's check was put back (nothing when it is gone).\n\
             [ -x {target} ] || exit 0\nexec {target} \"$@\"\n"
        );
        match crate::fs::read_regular(&shim, true, HOOK_CAP) {
            Ok(existing) if existing == text.as_bytes() => {}
            Ok(existing) if existing.find(SHIM_MARKER).is_none() => {} // the person's own hook
            _ => write_script(&shim, &text)?,
        }
    }
    Ok(())
}

/// Run the check for one `git push` from the work tree `cwd` (git runs hooks in the work tree's
/// root): `stdin` holds git's ref lines, `remote` and `url` are git's `$1` and `$2`.
///
/// # Errors
/// [`Error::Stale`] (3) when the remote branch is not at the lease or at this tree's own commit;
/// [`Error::Conflict`] (7) for a push that is not a fast-forward from it or that deletes the
/// session branch; [`Error::Usage`] (2) when the session record cannot be found;
/// [`Error::Signing`] (11) with `SIGNING_REQUIRED=1` for a commit to upload not signed by the
/// expected key.
pub fn check(cwd: &Path, remote: &str, url: &str, stdin: impl std::io::BufRead) -> Result<()> {
    let dirs = hook_dirs(cwd);
    let git_dir = dirs.git_dir.clone();
    let record = SessionRecord::read(&git_dir)?.ok_or_else(|| {
        Error::Usage(
            Refusal::NotASessionFolder,
            format!(
                "{} holds no git-session record, but git-session's pre-push check is installed: \
             git pushed nothing (if this tree is no longer a session, remove the check with \
             {})",
                git_dir.display(),
                Hint::Remove(git_dir.join("hooks/pre-push"))
            ),
        )
    })?;
    // Every push to the session branch's name is checked, whatever the URL says: the same server
    // can be spelled in many ways (`localhost`, another DNS name, `/./`).
    let elsewhere = !targets_session(&record, remote, url);
    let RefUpdates {
        session: updates,
        other,
        other_refs,
    } = ref_updates(stdin, record.branch.full_ref().as_bytes())?;
    // Another session of this repository (an agent's, the main tree's) holds its branch alone.
    for name in other_refs
        .iter()
        .filter_map(|r| std::str::from_utf8(r).ok())
    {
        crate::repo::worktree::refuse_foreign_branch(&dirs, name, "git pushed nothing")?;
    }
    if updates.is_empty() {
        return other_refs_signed(&git_dir, &record, &other);
    }
    // Git LFS objects `save` stored are uploaded by git-session's own push; plain git would push
    // commits whose pointers the LFS server lacks.
    let pending = crate::repo::lfs::pending(&git_dir)?;
    if !pending.is_empty() {
        return Err(Error::conflict(format!(
            "{} Git LFS object(s) saved by git-session are not on the LFS server yet (the first: \
             {}): git pushed nothing; run {}, which uploads them first",
            pending.len(),
            pending[0].oid,
            Hint::Push
        )));
    }
    let signing = crate::signing::for_push()?;
    let _lock = WriteLock::acquire(&git_dir)?;
    // The record as of now: a save that held the lock may have moved the lease.
    let record = &SessionRecord::read(&git_dir)?.unwrap_or(record);
    // `SIGNING_REQUIRED=1`: the key every commit git uploads must be signed by.
    let required = crate::repo::signed::required_key(&signing, record)?;
    let repo = crate::repo::open(&git_dir)?;
    let ledger = Ledger::new(&git_dir);
    let kept = "git pushed nothing, and your local commits are kept";
    let nothing = if !elsewhere {
        kept.to_owned()
    } else if is_remote_name(remote) {
        let copy = Hint::PushElsewhere {
            remote: remote.to_owned(),
            name: format!("{}-copy", record.branch),
        };
        format!(
            "{kept} (every push to this branch name is checked, whatever the URL: to push it to \
             another repository, give it another name, e.g. {copy})"
        )
    } else {
        // A URL may hold credentials: never shown, so no command to copy either.
        format!(
            "{kept} (every push to this branch name is checked, whatever the URL: to push it to \
             another repository, push it under another branch name)"
        )
    };
    if let Some(key) = &required {
        other_refs_checked(&repo, record, &other, key, kept)?;
    }
    // Only a push to the session's own repository is recorded as this tree's: one to another
    // repository (a mirror, a `file://` copy) still at the lease would otherwise let a stale tree
    // record another sandbox's commit as its own, and take the session with its next save.
    for (local, remote_tip) in updates {
        same_format(&repo, [local, remote_tip], &nothing)?;
        check_update(
            &repo,
            &ledger,
            record,
            (local, remote_tip),
            (!elsewhere, required.as_ref()),
            &nothing,
        )?;
    }
    Ok(())
}

/// A push of refs other than the session branch (other branches, tags): git's business, but for
/// `SIGNING_REQUIRED=1`, which holds for every commit uploaded under any name.
fn other_refs_signed(
    git_dir: &Path,
    record: &SessionRecord,
    other: &[(FullSha, FullSha)],
) -> Result<()> {
    if other.is_empty() {
        return Ok(());
    }
    let signing = crate::signing::for_push()?;
    match crate::repo::signed::required_key(&signing, record)? {
        None => Ok(()),
        Some(key) => {
            let repo = crate::repo::open(git_dir)?;
            let kept = "git pushed nothing, and your local commits are kept";
            other_refs_checked(&repo, record, other, &key, kept)
        }
    }
}

/// Every commit the updates `other` (`local`, `remote`) upload — each local tip's history but
/// what the server has: the restored tip, the lease, the ref's remote tip — signed by `key`.
fn other_refs_checked(
    repo: &gix::Repository,
    record: &SessionRecord,
    other: &[(FullSha, FullSha)],
    key: &crate::signing::PublicKey,
    nothing: &str,
) -> Result<()> {
    for &(local, remote_tip) in other {
        crate::repo::signed::refuse_unsigned_hiding(
            repo,
            (record.tip, local),
            &[record.lease, remote_tip],
            key,
            nothing,
            &Hint::GitPush,
        )?;
    }
    Ok(())
}

/// Whether git's `$1` names a configured remote (`origin`, `mirror`), not a URL.
fn is_remote_name(remote: &str) -> bool {
    !remote.is_empty()
        && !remote.starts_with('-')
        && remote
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// git passes ids in the repository's own format: one of the other length is refused, never
/// compared with the lease (which it could not equal) or recorded.
fn same_format(repo: &gix::Repository, ids: [FullSha; 2], nothing: &str) -> Result<()> {
    let format = repo.object_hash();
    match ids.into_iter().find(|id| id.format() != format) {
        None => Ok(()),
        Some(id) => Err(Error::conflict(format!(
            "git passed the pre-push check {id}, a {} id, for this {} repository: {nothing}",
            crate::types::format_title(id.format()),
            crate::types::format_title(format)
        ))),
    }
}

/// The check of one update of the session branch, `remote_tip` → `local`, as git passed it, to
/// the session's repository or not, with the key every commit must be signed by when
/// `SIGNING_REQUIRED=1`.
fn check_update(
    repo: &gix::Repository,
    ledger: &Ledger,
    record: &SessionRecord,
    (local, remote_tip): (FullSha, FullSha),
    (to_the_session, required): (bool, Option<&crate::signing::PublicKey>),
    nothing: &str,
) -> Result<()> {
    if local.is_zero() {
        return Err(Error::conflict(format!(
            "refused: this push would delete the session branch '{}' on the remote; \
             git-session never deletes it — {nothing}",
            record.branch
        )));
    }
    if local == remote_tip {
        return Ok(());
    }
    let state = if remote_tip.is_zero() && record.lease_assumed() {
        // Never asked (an archive restore without READ_URL): a new session, created here.
        RemoteTip::Lease
    } else {
        crate::repo::lease::classify(repo, ledger, record.lease, Some(local), remote_tip)?
    };
    let base = match state {
        RemoteTip::Lease | RemoteTip::Own if remote_tip.is_zero() => record.tip,
        RemoteTip::Lease | RemoteTip::Own | RemoteTip::Ahead => remote_tip,
        RemoteTip::Rewritten => remote_tip,
        // git read the remote before a push of this tree's own (a `save`, a `watch`
        // checkpoint) moved it on to the lease: git's view is old, not another sandbox's.
        RemoteTip::Moved
            if !remote_tip.is_zero()
                && !record.lease.is_zero()
                && crate::repo::descends_from(repo, record.lease.id(), remote_tip.id())? =>
        {
            return Err(Error::conflict(format!(
                "the session branch '{}' moved from {remote_tip} to {} while git was pushing, \
                 by this tree's own save: {nothing}; run {} again",
                record.branch,
                record.lease,
                Hint::GitPush
            )));
        }
        RemoteTip::Moved | RemoteTip::Deleted => {
            let base = if record.lease.is_zero() {
                record.tip
            } else {
                record.lease
            };
            let work = crate::error::LocalWork {
                workdir: repo.workdir().unwrap_or(repo.git_dir()).to_owned(),
                base: crate::repo::lease::work_base(repo, &record.branch, local, base, remote_tip),
                head: local,
            };
            return Err(crate::repo::lease::stale(
                &record.branch,
                (record.lease, remote_tip),
                nothing,
                work,
            ));
        }
    };
    if !crate::repo::descends_from(repo, local.id(), base.id())? {
        return Err(not_a_fast_forward(
            repo,
            record,
            (local, remote_tip),
            base,
            nothing,
        ));
    }
    if let Some(key) = required {
        crate::repo::signed::refuse_unsigned(repo, (base, local), key, nothing, &Hint::GitPush)?;
    }
    if to_the_session {
        ledger.record(remote_tip, local, "git-push")?;
    }
    // Race tests hold a plain push here, past its check, against another sandbox's push.
    crate::failpoint::barrier("after-lease-check");
    tracing::info!(
        "git push of {local} to {} let through (lease {})",
        record.branch.full_ref(),
        record.lease
    );
    Ok(())
}

/// The refusal of an update `remote_tip` → `local` that does not descend from `base`.
fn not_a_fast_forward(
    repo: &gix::Repository,
    record: &SessionRecord,
    (local, remote_tip): (FullSha, FullSha),
    base: FullSha,
    nothing: &str,
) -> Error {
    if repo.git_dir().join(crate::repo::HISTORY_PROMISED).exists() {
        // Restored from an archive alone: the commits are the person's, TIP_SHA is not here.
        return Error::conflict(format!(
            "refused: this tree was restored from an archive without READ_URL and has no \
             history yet, so {local} does not descend from the restored TIP_SHA {}: run \
             {} with READ_URL set (it fetches TIP_SHA and moves your commits onto it), then \
             push again — {nothing}",
            record.tip,
            crate::hint::Hint::Status
        ));
    }
    Error::conflict(format!(
        "refused: {local} is not a fast-forward from {} {base} (a force push, or history \
         rewritten after a push): git-session lets only fast-forwards through to the \
         session branch '{}' — {nothing}; rebuild your work on top of {base}",
        if remote_tip.is_zero() {
            "the restored TIP_SHA"
        } else {
            "the remote tip"
        },
        record.branch
    ))
}

/// Whether a push to `remote` (git's `$1`) at `url` (`$2`) visibly goes to the session's
/// repository: `origin`, or a URL naming the recorded read or push URL's scheme, host, port and
/// path (user names and passwords ignored). Only the messages use it: every push to the session
/// branch's name is checked.
fn targets_session(record: &SessionRecord, remote: &str, url: &str) -> bool {
    if remote == "origin" {
        return true;
    }
    let Some(dest) = Endpoint::of(url) else {
        return false;
    };
    [&record.read_url, &record.push_url]
        .into_iter()
        .flatten()
        .filter_map(|recorded| Endpoint::of(recorded))
        .any(|recorded| recorded.same_as(&dest))
}

/// A URL's repository as a push reaches it: scheme, host, port and path (user names and
/// passwords ignored, empty path segments dropped; `url` resolves `.` and `..`).
struct Endpoint {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: Vec<String>,
}

impl Endpoint {
    fn of(s: &str) -> Option<Self> {
        let u = url::Url::parse(s).ok()?;
        Some(Endpoint {
            scheme: u.scheme().to_owned(),
            host: u.host_str()?.to_ascii_lowercase(),
            port: u.port_or_known_default(),
            path: u
                .path()
                .split('/')
                .filter(|part| !part.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }

    /// The same repository: all equal, the hosts by name or by an address both resolve to
    /// (`localhost` and `127.0.0.1`), looked up only when all else is equal.
    fn same_as(&self, other: &Endpoint) -> bool {
        if (&self.scheme, self.port, &self.path) != (&other.scheme, other.port, &other.path) {
            return false;
        }
        if self.host == other.host {
            return true;
        }
        let addrs = |host: &str| -> Vec<std::net::IpAddr> {
            use std::net::ToSocketAddrs as _;
            (host.trim_matches(['[', ']']), self.port.unwrap_or(0))
                .to_socket_addrs()
                .map(|a| a.map(|a| a.ip()).collect())
                .unwrap_or_default()
        };
        let theirs = addrs(&other.host);
        addrs(&self.host).iter().any(|ip| theirs.contains(ip))
    }
}

/// The git dir holding the session record for a hook run in `cwd`: `GIT_DIR` when git set it,
/// else `cwd/.git`; a linked work tree's `.git` file leads to its common dir.
pub(crate) fn common_git_dir(cwd: &Path) -> PathBuf {
    common_of(own_git_dir(cwd))
}

/// The git dirs whose session a hook run in `cwd` checks against: an agent's tree's own git dir
/// when it holds a record (`agent add`), else the common dir's session for both (the main tree,
/// a plain `git worktree add` tree).
pub(crate) fn hook_dirs(cwd: &Path) -> crate::repo::worktree::GitDirs {
    let own = own_git_dir(cwd);
    let common_dir = common_of(own.clone());
    let git_dir = if own != common_dir && SessionRecord::path(&own).is_file() {
        own.canonicalize().unwrap_or(own)
    } else {
        common_dir.clone()
    };
    crate::repo::worktree::GitDirs {
        git_dir,
        common_dir,
    }
}

/// The work tree's own git dir for a hook run in `cwd`: `GIT_DIR` when git set it, else
/// `cwd/.git`, a `.git` file followed.
fn own_git_dir(cwd: &Path) -> PathBuf {
    let dot_git = std::env::var_os("GIT_DIR")
        .map(|d| cwd.join(d))
        .unwrap_or_else(|| cwd.join(".git"));
    if dot_git.is_file() {
        crate::fs::read_regular(&dot_git, true, crate::fs::state::RECORD_CAP)
            .ok()
            .and_then(|t| String::from_utf8(t).ok())
            .and_then(|t| {
                t.trim()
                    .strip_prefix("gitdir:")
                    .map(|p| p.trim().to_owned())
            })
            .map(|p| cwd.join(p))
            .unwrap_or(dot_git)
    } else {
        dot_git
    }
}

/// The common dir of the git dir `git_dir` (itself unless it has a `commondir`).
fn common_of(git_dir: PathBuf) -> PathBuf {
    match crate::fs::read_regular(
        &git_dir.join("commondir"),
        true,
        crate::fs::state::RECORD_CAP,
    ) {
        Ok(common) => {
            let common = String::from_utf8_lossy(&common);
            let common = git_dir.join(common.trim());
            common.canonicalize().unwrap_or(common)
        }
        Err(_) => git_dir,
    }
}

/// The longest ref line the check reads (a local ref is what the person typed, argv-sized): a
/// longer one refuses the push, never skips the line.
pub const MAX_REF_LINE: usize = 1 << 20;

/// The updates of the ref `full` among git's pre-push lines read from `input`, streamed, every
/// line of it, as bytes (a ref name need not be UTF-8): `<local ref> SP <local id> SP <remote
/// ref> SP <remote id> LF` (githooks(5); git writes them with `"%s %s %s %s\n"`). The local ref
/// is what the person typed (`HEAD@{1 minute ago}` holds spaces), so the fields are taken from
/// the right; the remote ref is a full ref name, which holds no space, compared byte for byte.
///
/// # Errors
/// [`Error::Conflict`] (7: nothing pushed) for a line over [`MAX_REF_LINE`] and for a malformed
/// id in a line naming `full`; [`Error::LocalIo`] when stdin cannot be read.
pub fn session_updates(
    input: impl std::io::BufRead,
    full: &[u8],
) -> Result<Vec<(FullSha, FullSha)>> {
    ref_updates(input, full).map(|u| u.session)
}

/// git's pre-push lines as [`session_updates`] reads them: the session branch's updates, and
/// those of every other ref whose line holds two ids (`SIGNING_REQUIRED` checks what they
/// upload; a line that does not is skipped, as it was before).
#[derive(Debug, Default)]
pub struct RefUpdates {
    /// The updates (`local`, `remote`) of the session branch.
    pub session: Vec<(FullSha, FullSha)>,
    /// The updates of other refs.
    pub other: Vec<(FullSha, FullSha)>,
    /// The remote refs of the other lines, as git named them.
    pub other_refs: Vec<Vec<u8>>,
}

/// [`RefUpdates`] from git's lines in `input`, `full` being the session branch's ref.
///
/// # Errors
/// As [`session_updates`].
pub fn ref_updates(mut input: impl std::io::BufRead, full: &[u8]) -> Result<RefUpdates> {
    use std::io::BufRead as _;
    let mut updates = RefUpdates::default();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        std::io::Read::take(&mut input, MAX_REF_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io("reading git's ref lines", e))?;
        if line.is_empty() {
            break;
        }
        let refuse = |what: &str| {
            Error::conflict(format!(
                "git passed the pre-push check a ref line it cannot read (line {number}: {what}): \
                 git pushed nothing; push each ref by its own name"
            ))
        };
        let Some(text) = line.strip_suffix(b"\n") else {
            if line.len() > MAX_REF_LINE {
                return Err(refuse(&format!("over {MAX_REF_LINE} bytes")));
            }
            // The last line, unended.
            parse_ref_line(&line, full, &mut updates).map_err(|why| refuse(&why))?;
            break;
        };
        if text.is_empty() {
            continue;
        }
        parse_ref_line(text, full, &mut updates).map_err(|why| refuse(&why))?;
    }
    Ok(updates)
}

/// One ref line (without its line break): the update it names when its remote ref is `full`.
fn parse_ref_line(
    line: &[u8],
    full: &[u8],
    updates: &mut RefUpdates,
) -> std::result::Result<(), String> {
    let mut fields = line.rsplitn(4, |b| *b == b' ');
    let (Some(remote_id), Some(remote_ref), Some(local_id), Some(_local_ref)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        // Part of a local ref typed with a line break in it (`HEAD^{/a<LF>b}`): the line that
        // ends it carries the fields.
        return Ok(());
    };
    if remote_ref != full {
        updates.other_refs.push(remote_ref.to_vec());
        if let (Some(local), Some(remote)) =
            (FullSha::from_wire(local_id), FullSha::from_wire(remote_id))
        {
            updates.other.push((local, remote));
        }
        return Ok(());
    }
    let id = |s: &[u8]| {
        FullSha::from_wire(s)
            .ok_or_else(|| format!("a malformed object id '{}'", crate::text::line(s)))
    };
    updates.session.push((id(local_id)?, id(remote_id)?));
    Ok(())
}

/// `git-session hook pre-push`: read git's ref lines from stdin and run [`check`].
///
/// # Errors
/// Those of [`check`].
pub fn run_hook() -> Result<()> {
    let remote = std::env::var(REMOTE_VAR).unwrap_or_default();
    let url = std::env::var(URL_VAR).unwrap_or_default();
    let cwd = std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
    check(&cwd, &remote, &url, std::io::stdin().lock())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn record(read: Option<&str>, push: Option<&str>) -> SessionRecord {
        SessionRecord {
            version: 1,
            branch: "sessions/x".parse().unwrap(),
            tip: FullSha::zero(gix::hash::Kind::Sha1),
            lease: FullSha::zero(gix::hash::Kind::Sha1),
            source: crate::repo::session::Source::Git,
            restored_at: String::new(),
            tool_version: String::new(),
            read_url: read.map(str::to_owned),
            push_url: push.map(str::to_owned),
            depth: Some(1),
            object_format: gix::hash::Kind::Sha1,
            signing: None,
            agent: None,
        }
    }

    #[test]
    fn pushes_to_origin_or_to_the_session_url_are_checked_others_are_not() {
        let r = record(
            Some("https://git.example.com/org/repo.git"),
            Some("https://push.example.com/org/repo.git"),
        );
        assert!(targets_session(&r, "origin", "https://elsewhere/x.git"));
        assert!(targets_session(
            &r,
            "https://t:secret@git.example.com/org/repo.git",
            "https://t:secret@git.example.com/org/repo.git"
        ));
        assert!(targets_session(
            &r,
            "upstream",
            "https://git-session-push@PUSH.example.com:443/org/repo.git/"
        ));
        assert!(!targets_session(
            &r,
            "fork",
            "https://git.example.com/someone/repo.git"
        ));
        assert!(!targets_session(&r, "fork", "git@github.com:org/repo.git"));
        // The same server by another name: the same repository; another path or a local copy:
        // not (pushes there are checked, never recorded as this tree's).
        let r = record(Some("http://127.0.0.1:8080/r.git"), None);
        assert!(targets_session(&r, "x", "http://u@localhost:8080//r.git"));
        assert!(targets_session(&r, "x", "http://127.0.0.1:8080/a/../r.git"));
        assert!(!targets_session(&r, "x", "http://localhost:8080/p2.git"));
        assert!(!targets_session(&r, "x", "http://localhost:8081/r.git"));
        assert!(!targets_session(&r, "x", "file:///srv/r.git"));
        assert!(!targets_session(&r, "x", "/srv/r.git"));
    }

    #[test]
    fn every_ref_line_is_read_as_bytes_fields_from_the_right() {
        let (a, b) = ("1".repeat(40), "2".repeat(40));
        let full = b"refs/heads/sessions/x";
        let session = |local: &[u8]| {
            [
                local,
                format!(" {a} refs/heads/sessions/x {b}\n").as_bytes(),
            ]
            .concat()
        };
        let parse = |input: &[u8]| session_updates(input, full);
        // Spaces, U+00A0 and bytes that are not UTF-8 in the local ref; an unended last line.
        for local in [
            &b"HEAD@{1 minute ago}"[..],
            "a\u{a0}b".as_bytes(),
            b"caf\xe9",
        ] {
            assert_eq!(parse(&session(local)).unwrap().len(), 1, "{local:?}");
        }
        let unended = session(b"x");
        assert_eq!(parse(&unended[..unended.len() - 1]).unwrap().len(), 1);
        // Another branch (its name not UTF-8) is no update of the session's; one padded with
        // U+00A0 or spelled with a trailing space is not either (git writes no such line).
        let other = format!("refs/heads/caf\u{e9} {a} refs/heads/other {b}\n");
        assert!(parse(other.as_bytes()).unwrap().is_empty());
        // Past 16 MiB of other lines (where the reading used to stop), the session's is found.
        let mut many = Vec::new();
        while many.len() <= 17 << 20 {
            many.extend_from_slice(other.as_bytes());
        }
        many.extend_from_slice(&session(b"late"));
        assert_eq!(parse(&many).unwrap().len(), 1);
        // A line over the bound refuses the push, never skips the line.
        let long = session(&vec![b'x'; MAX_REF_LINE]);
        assert!(matches!(parse(&long), Err(Error::Conflict(..))));
        let bad = format!("x {a} refs/heads/sessions/x 123\n");
        assert!(matches!(parse(bad.as_bytes()), Err(Error::Conflict(..))));
        // A SHA-256 repository's line: 64-digit ids, read as such; 41 to 63 digits are refused.
        let (c, d) = ("3".repeat(64), "0".repeat(64));
        let line = format!("HEAD {c} refs/heads/sessions/x {d}\n");
        let updates = parse(line.as_bytes()).unwrap();
        assert_eq!(updates[0].0.to_string(), c);
        assert_eq!(updates[0].1.format(), crate::types::Format::Sha256);
        assert!(updates[0].1.is_zero());
        let cut = format!("HEAD {} refs/heads/sessions/x {d}\n", &c[..63]);
        assert!(matches!(parse(cut.as_bytes()), Err(Error::Conflict(..))));
    }

    #[test]
    fn the_script_passes_no_url_in_argv_and_quotes_paths() {
        let s = script(Some(".hus'ky/_"));
        assert!(s.contains(MARKER));
        assert!(s.contains("\"$(dirname \"$0\")\"/pre-push.chained"), "{s}");
        assert!(s.contains("'.hus'\\''ky/_'/pre-push"), "{s}");
        assert!(s.contains("\"$exe\" hook pre-push ||"), "{s}");
        assert!(!s.contains("hook pre-push \"$"), "{s}");
    }
}
