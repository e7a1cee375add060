//! `git-session agent add|list|remove`: several agents in one repository, each in a linked work
//! tree of its own (git's layout, so plain git works there) on its own session branch, with its
//! own record, lease, ledger and write lock in `<common>/worktrees/<NAME>`.
//!
//! `add` writes in an order a kill anywhere leaves redoable: the empty folder, the linked git dir
//! and branch ([`crate::repo::worktree::write_agent_git_dir`]), the folder's `.git` file, the
//! files and index ([`crate::restore::agent::materialise`]), the agent's session record last: its
//! presence marks a finished add. A rerun of an unfinished one removes what it made (only when
//! its `.git` links both ways with `worktrees/<NAME>`) and starts again.

use std::path::{Path, PathBuf};

use crate::cli::{AgentAddArgs, AgentCommand, AgentRemoveArgs};
use crate::error::{Error, Refusal, Result};
use crate::hint::Hint;
use crate::output::Success;
use crate::output::json::{self, CommandResult};
use crate::repo::session::{Session, SessionRecord};
use crate::repo::worktree::{self, GitDirs};
use crate::types::{AgentName, FullSha, SessionBranch};

/// Run `agent add`, `list` or `remove` in the session's main tree `dir`.
///
/// # Errors
/// See each command.
pub fn run(command: &AgentCommand, dir: PathBuf) -> Result<Success> {
    match command {
        AgentCommand::Add(args) => add(args, &dir),
        AgentCommand::List => list(&dir),
        AgentCommand::Remove(args) => remove(args, &dir),
    }
}

/// The session of the main tree; an agent's tree is refused (agents are added from the main one).
fn main_session(dir: &Path) -> Result<Session> {
    let session = Session::open(dir, None)?;
    if session.record.agent.is_some() {
        return Err(Error::Usage(
            Refusal::NotASessionFolder,
            format!(
                "{} is an agent's tree: agents are added, listed and removed in the session's \
                 main tree ({}), e.g. with -C",
                session.workdir.display(),
                session
                    .common_dir
                    .parent()
                    .unwrap_or(&session.common_dir)
                    .display()
            ),
        ));
    }
    Ok(session)
}

fn name(raw: &str) -> Result<AgentName> {
    raw.parse()
        .map_err(|e| Error::Usage(Refusal::Invalid, format!("{e}")))
}

/// The inputs of `agent add`, parsed and checked before anything is written.
struct AddPlan {
    name: AgentName,
    branch: SessionBranch,
    start: FullSha,
    dir: PathBuf,
}

/// `agent add NAME`: the agent's linked work tree; prints its folder.
///
/// # Errors
/// [`Error::Usage`] (exit 2) for a bad or taken name, branch or start, a folder that is not empty,
/// or a main tree this build cannot copy yet (sparse, submodules, history not attached);
/// [`Error::LocalIo`] when a file cannot be written (the parent folder not writable included).
fn add(args: &AgentAddArgs, dir: &Path) -> Result<Success> {
    let session = main_session(dir)?;
    super::check_hooks(&session);
    not_yet(&session)?;
    // One add or remove at a time, and none while the main tree saves: they edit the shared
    // config and the list of agents.
    let _lock = crate::repo::lease::WriteLock::acquire(session.own_dir())?;
    let plan = plan(args, &session)?;
    let repo = crate::repo::open(&session.git_dir)?;
    let start_tree = repo
        .find_commit(plan.start.id())
        .and_then(|c| c.tree_id())
        .map_err(|e| Error::from_chain(format!("reading the tree of {}", plan.start), &e))?
        .detach();
    let main_index = repo
        .index_or_empty()
        .map_err(|e| Error::from_chain("reading the main tree's index", &e))?;
    let made = make_folder(&plan)?;
    let git_dir = worktree::write_agent_git_dir(
        &session.common_dir,
        &plan.name,
        &made,
        &plan.branch,
        plan.start,
    )?;
    crate::fs::write_atomic(
        &made.join(".git"),
        format!("gitdir: {}\n", git_dir.display()).as_bytes(),
    )?;
    crate::failpoint::hit("agent-layout-written");
    let agent_repo = crate::repo::open(&git_dir)?;
    let main_tree = crate::fs::tree::Tree::open(&session.workdir)
        .map_err(|e| Error::io(format!("opening {}", session.workdir.display()), e))?;
    let to = crate::fs::tree::Tree::open(&made)
        .map_err(|e| Error::io(format!("opening {}", made.display()), e))?;
    let main = crate::restore::agent::MainCheckout {
        tree: &main_tree,
        index: &main_index,
    };
    let done = crate::restore::agent::materialise(&agent_repo, &main, &to, start_tree)?;
    let record = SessionRecord {
        branch: plan.branch.clone(),
        tip: plan.start,
        lease: FullSha::zero(plan.start.format()),
        restored_at: crate::fs::now_rfc3339(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        agent: Some(plan.name.to_string()),
        ..session.record.clone()
    };
    record.write(&git_dir)?;
    crate::fs::sync_dir(&git_dir);
    let shown = made.display().to_string();
    Ok(Success {
        result: CommandResult::AgentAdd(json::AgentAdded {
            name: plan.name.to_string(),
            dir: shown.clone(),
            agent_branch: plan.branch.to_string(),
            start: plan.start,
            lease: record.lease,
            copied: done.copied,
            cloned: done.cloned,
            written: done.written,
        }),
        branch: plan.branch.to_string(),
        warnings: Vec::new(),
        human: shown,
    })
}

/// What this build does not copy into an agent's tree yet: exit 2, nothing written.
fn not_yet(session: &Session) -> Result<()> {
    let why = if session.own_dir().join("info/sparse-checkout").exists() {
        Some("a sparse checkout")
    } else if session.objects_dir().join("modules").exists() {
        Some("submodules checked out")
    } else if session
        .own_dir()
        .join(crate::repo::HISTORY_PROMISED)
        .exists()
    {
        Some("no history yet (restored from an archive without READ_URL)")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::Usage(
            Refusal::Unsupported,
            format!(
                "the session's tree has {why}: agent add does not copy that into an agent's tree \
                 yet; nothing was written (restore the session without it for agents)"
            ),
        )),
    }
}

/// Parse and check `agent add`'s inputs against the repository's sessions.
fn plan(args: &AgentAddArgs, session: &Session) -> Result<AddPlan> {
    let name = name(&args.name)?;
    let owners = worktree::owners(&session.common_dir)?;
    if let Some(taken) = owners
        .iter()
        .find(|o| o.agent.as_deref() == Some(name.as_str()))
    {
        return Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "agent {name} exists already ({}): choose another name, or remove it first with \
                 git-session agent remove {name}",
                taken.workdir.display()
            ),
        ));
    }
    let branch: SessionBranch = match &args.branch {
        Some(raw) => raw
            .parse()
            .map_err(|e| Error::Usage(Refusal::Invalid, format!("--branch: {e}")))?,
        None => format!("{}-{name}", session.record.branch)
            .parse()
            .map_err(|e| Error::Usage(Refusal::Invalid, format!("{e}")))?,
    };
    if let Some(owner) = owners.iter().find(|o| o.branch == branch) {
        return Err(Error::Usage(
            Refusal::AnotherSession,
            format!(
                "{}: an agent's session branch is its own; give --branch another name",
                owner.describe()
            ),
        ));
    }
    let start = start(args.at.as_deref(), session)?;
    let local = session.refs_dir().join(branch.full_ref());
    if let Ok(bytes) = crate::fs::read_regular(&local, false, crate::fs::state::RECORD_CAP)
        && bytes.trim_ascii() != start.to_string().as_bytes()
    {
        return Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "the local branch {branch} exists already at another commit: give --branch \
                 another name"
            ),
        ));
    }
    let dir = agent_dir(args.folder.as_deref(), &session.workdir, &name)?;
    worktree::check_agent_slot(&session.common_dir, &name, &dir)?;
    Ok(AddPlan {
        name,
        branch,
        start,
        dir,
    })
}

/// `--dir DIR` (absolute from the current folder), else `<main tree>-<NAME>` beside the main
/// tree; its parent made canonical (it must exist), so the link git keeps is one path.
fn agent_dir(given: Option<&Path>, main: &Path, name: &AgentName) -> Result<PathBuf> {
    let dir = match given {
        Some(d) => crate::inputs::current_dir()?.join(d),
        None => {
            let base = main.file_name().unwrap_or_default().to_string_lossy();
            main.with_file_name(format!("{base}-{name}"))
        }
    };
    let (Some(parent), Some(leaf)) = (dir.parent(), dir.file_name()) else {
        return Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "{} names no folder: choose one with --dir DIR",
                dir.display()
            ),
        ));
    };
    let parent = parent.canonicalize().map_err(|e| {
        Error::Usage(
            Refusal::Invalid,
            format!(
                "the folder {} cannot be used for the agent's tree ({e}): choose one with --dir \
                 DIR",
                parent.display()
            ),
        )
    })?;
    Ok(parent.join(leaf))
}

/// `--at SHA` (full, in the repository's format, present locally), else the session's tip: its
/// lease when not the zero id and present, else the restored tip.
fn start(at: Option<&str>, session: &Session) -> Result<FullSha> {
    let repo = crate::repo::open(&session.git_dir)?;
    let present = |id: FullSha| repo.find_commit(id.id()).is_ok();
    let Some(raw) = at else {
        let lease = session.record.lease;
        return Ok(if !lease.is_zero() && present(lease) {
            lease
        } else {
            session.record.tip
        });
    };
    let id: FullSha = raw
        .parse()
        .map_err(|e| Error::Usage(Refusal::Invalid, format!("--at: {e}")))?;
    if id.format() != session.record.object_format {
        return Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "--at: {id} is not a {} id, as this repository's are",
                crate::types::format_title(session.record.object_format)
            ),
        ));
    }
    if !present(id) {
        return Err(Error::Usage(
            Refusal::Invalid,
            format!("--at: the commit {id} is not in this repository"),
        ));
    }
    Ok(id)
}

/// Make the agent's folder (its parent canonical), empty; an unfinished add's folder of the same
/// agent is removed first. Returns it.
fn make_folder(plan: &AddPlan) -> Result<PathBuf> {
    let dir = &plan.dir;
    let parent = dir.parent().unwrap_or(dir);
    let leaf = dir.file_name().map(Path::new).ok_or_else(|| {
        Error::Usage(
            Refusal::Invalid,
            format!("{} names no folder", dir.display()),
        )
    })?;
    let parent_tree = crate::fs::tree::Tree::open(parent).map_err(|e| {
        Error::Usage(
            Refusal::Invalid,
            format!(
                "the folder {} cannot be opened ({e}): choose the agent's folder with --dir DIR",
                parent.display()
            ),
        )
    })?;
    if let Ok(Some(kind)) = parent_tree.kind(leaf) {
        if kind != crate::fs::tree::Kind::Dir {
            return Err(Error::Usage(
                Refusal::Invalid,
                format!(
                    "{} exists and is not a folder (a file or a symlink): choose the agent's \
                     folder with --dir DIR (a new or empty one)",
                    dir.display()
                ),
            ));
        }
        let unfinished = GitDirs::of(dir).filter(|d| {
            d.is_linked()
                && d.git_dir.file_name() == Some(plan.name.as_str().as_ref())
                && !SessionRecord::path(&d.git_dir).exists()
        });
        if unfinished.is_some() {
            parent_tree
                .remove_all(leaf)
                .map_err(|e| Error::io(format!("removing {}", dir.display()), e))?;
        } else if std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
            return Err(Error::Usage(
                Refusal::Invalid,
                format!(
                    "{} exists and is not an empty folder: choose the agent's folder with --dir \
                     DIR (a new or empty one)",
                    dir.display()
                ),
            ));
        }
    }
    match parent_tree.create_dir(leaf) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Error::io(
                format!(
                    "creating {} (choose a folder you can write with --dir DIR)",
                    dir.display()
                ),
                e,
            ));
        }
    }
    // A real folder (made here, or checked above) below a canonical parent: canonical itself.
    Ok(dir.clone())
}

/// `agent list`: every agent of the session, with what is unpushed and changed in its tree.
///
/// # Errors
/// Those of [`worktree::agents`].
fn list(dir: &Path) -> Result<Success> {
    let session = main_session(dir)?;
    let repo = crate::repo::open(&session.git_dir)?;
    let mut entries = Vec::new();
    let mut human = Vec::new();
    for agent in worktree::agents(&session.common_dir)? {
        let entry = describe(&repo, &agent);
        human.push(format!(
            "{}\t{}\t{}\tlease {}\thead {}\t{} ahead\t{} changed",
            entry.name,
            entry.dir.as_deref().unwrap_or("(gone)"),
            entry.agent_branch,
            entry.lease,
            entry.head.map_or("?".to_owned(), |h| h.to_string()),
            entry.ahead,
            entry.changed
        ));
        entries.push(entry);
    }
    if human.is_empty() {
        human.push("no agents".to_owned());
    }
    Ok(Success {
        result: CommandResult::AgentList(json::AgentList { agents: entries }),
        branch: session.record.branch.to_string(),
        warnings: Vec::new(),
        human: human.join("\n"),
    })
}

/// One agent's line: its branch's commits past the lease (or its start), its changed files.
fn describe(repo: &gix::Repository, agent: &worktree::Agent) -> json::AgentEntry {
    let record = &agent.record;
    let head = repo
        .try_find_reference(record.branch.full_ref().as_str())
        .ok()
        .flatten()
        .and_then(|mut r| r.peel_to_id().ok())
        .map(|id| FullSha::from_id(id.detach()));
    // A plain `git push` of the agent's that git saw land counts as pushed, as for `status`.
    let ledger = crate::repo::lease::Ledger::new(&agent.git_dir);
    let lease = crate::repo::lease::known_lease(repo, &ledger, record.lease, &record.branch, head)
        .unwrap_or(record.lease);
    let base = if lease.is_zero() { record.tip } else { lease };
    let ahead = super::status::commits_ahead(repo, head, base) as u64;
    let changed = agent
        .workdir
        .as_deref()
        .and_then(|w| crate::save::pending_changes(w, &record.branch).ok())
        .map_or(0, |p| p.changes.len() as u64);
    json::AgentEntry {
        name: agent.name.clone(),
        dir: agent.workdir.as_ref().map(|w| w.display().to_string()),
        agent_branch: record.branch.to_string(),
        lease,
        head,
        ahead,
        changed,
    }
}

/// `agent remove NAME`: its folder, its linked git dir, and its local branch when all of it is
/// pushed; refused while it holds unpushed commits or changes, unless `--force` (the branch is
/// then kept, so the commits stay reachable).
///
/// # Errors
/// [`Error::Usage`] (exit 2) for an unknown agent; [`Error::Conflict`] (exit 7) for unpushed
/// work without `--force`.
fn remove(args: &AgentRemoveArgs, dir: &Path) -> Result<Success> {
    let session = main_session(dir)?;
    let name = name(&args.name)?;
    let _main_lock = crate::repo::lease::WriteLock::acquire(session.own_dir())?;
    let find = || {
        worktree::agents(&session.common_dir)?
            .into_iter()
            .find(|a| a.name == name.as_str())
            .ok_or_else(|| {
                Error::Usage(
                    Refusal::Invalid,
                    format!("there is no agent {name} in this session (git-session agent list)"),
                )
            })
    };
    // What is unpushed is decided holding the agent's lock, from its record as of then: a save
    // of the agent's under way meanwhile (it holds that lock) commits before this looks.
    let _lock = crate::repo::lease::WriteLock::acquire(&find()?.git_dir)?;
    let agent = find()?;
    let repo = crate::repo::open(&session.git_dir)?;
    let entry = describe(&repo, &agent);
    let unpushed = entry.ahead > 0 || entry.changed > 0;
    if unpushed && !args.force {
        let shown = entry.dir.clone().unwrap_or_default();
        return Err(Error::conflict(format!(
            "agent {name}'s tree {shown} holds {} unpushed commit(s) and {} changed file(s): \
             nothing was removed; save them with {}, or drop them with {}",
            entry.ahead,
            entry.changed,
            Hint::SaveIn(PathBuf::from(&shown)),
            Hint::AgentRemoveForce(name.clone())
        )));
    }
    if let Some(workdir) = &agent.workdir {
        remove_tree(workdir)?;
    }
    std::fs::remove_dir_all(&agent.git_dir)
        .map_err(|e| Error::io(format!("removing {}", agent.git_dir.display()), e))?;
    let branch_kept = unpushed;
    if !branch_kept {
        let local = session.refs_dir().join(agent.record.branch.full_ref());
        let _ = std::fs::remove_file(local);
    }
    Ok(Success {
        result: CommandResult::AgentRemove(json::AgentRemoved {
            name: name.to_string(),
            dir: entry.dir.clone(),
            branch_kept,
        }),
        branch: agent.record.branch.to_string(),
        warnings: Vec::new(),
        human: format!(
            "removed agent {name}{}",
            if branch_kept {
                format!(" (its branch {} is kept)", agent.record.branch)
            } else {
                String::new()
            }
        ),
    })
}

/// Remove an agent's folder through a handle on its parent: nothing is followed out of it.
fn remove_tree(workdir: &Path) -> Result<()> {
    let (Some(parent), Some(leaf)) = (workdir.parent(), workdir.file_name()) else {
        return Ok(());
    };
    let tree = crate::fs::tree::Tree::open(parent)
        .map_err(|e| Error::io(format!("opening {}", parent.display()), e))?;
    let leaf = Path::new(leaf);
    // A symlink put in the folder's place goes itself; what it points to is not the agent's.
    let removed = match tree.kind(leaf) {
        Ok(Some(crate::fs::tree::Kind::Dir)) => tree.remove_all(leaf),
        Ok(Some(_)) => tree.remove_file(leaf),
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("removing {}", workdir.display()), e))
        }
        _ => Ok(()),
    }
}
