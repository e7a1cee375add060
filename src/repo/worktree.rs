//! Linked work trees (`git worktree add`'s layout), which `git-session agent add` makes for
//! agents: which git dir holds what, the agents of a repository, and who owns each session branch.
//!
//! A work tree's own git dir (the main tree's `.git`, an agent's `<common>/worktrees/<NAME>`)
//! holds `HEAD`, the index, the session record, the ledger, the write lock and
//! `info/sparse-checkout`; the common dir (the main tree's `.git`) holds what every work tree
//! shares: objects, refs, packed-refs, config, hooks, shallow and the LFS store.
//!
//! # Security
//! A `.git` file is followed only when the link holds both ways: it names
//! `<common>/worktrees/<NAME>` (a real folder, no symlink on the way there below the common dir),
//! whose `gitdir` file names this tree's `.git` again. Anything else is not an agent's tree.

use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result};
use crate::repo::session::SessionRecord;
use crate::types::{AgentName, FullSha, SessionBranch};

pub use super::dirs::{GitDirs, WORKTREES, workdir_of};
use super::dirs::{back_link, linked, read_link};

/// One agent of a repository, as its record says.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Its name (`<common>/worktrees/<NAME>`).
    pub name: String,
    /// Its git dir.
    pub git_dir: PathBuf,
    /// Its work tree, as its `gitdir` file names it (`None` when that is gone or does not lead
    /// back).
    pub workdir: Option<PathBuf>,
    /// Its session record.
    pub record: SessionRecord,
}

/// The agents of the repository whose common dir is `common_dir`: each linked work tree with a
/// session record (a plain `git worktree add` tree has none and is not listed).
///
/// # Errors
/// Those of [`SessionRecord::read`] for a record that is not git-session's (exit 7 naming it).
pub fn agents(common_dir: &Path) -> Result<Vec<Agent>> {
    let worktrees = common_dir.join(WORKTREES);
    let Ok(entries) = std::fs::read_dir(&worktrees) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let git_dir = entry.path();
        if !std::fs::symlink_metadata(&git_dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let Some(record) = SessionRecord::read(&git_dir)? else {
            continue;
        };
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let real = git_dir.canonicalize().ok();
        let workdir = back_link(&git_dir)
            .filter(|w| linked(w).is_some_and(|d| Some(&d.git_dir) == real.as_ref()));
        out.push(Agent {
            name,
            git_dir,
            workdir,
            record,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Who holds a session branch in this repository: the main session or an agent.
#[derive(Debug, Clone)]
pub struct BranchOwner {
    /// The branch.
    pub branch: SessionBranch,
    /// The agent's name; `None` for the main session.
    pub agent: Option<String>,
    /// The owner's work tree.
    pub workdir: PathBuf,
    /// The owner's git dir.
    pub git_dir: PathBuf,
}

impl BranchOwner {
    /// "agent b's session branch (/work/repo-b)", "the main session's branch (/work/repo)".
    pub fn describe(&self) -> String {
        match &self.agent {
            Some(name) => format!(
                "{} is agent {name}'s session branch ({})",
                self.branch,
                self.workdir.display()
            ),
            None => format!(
                "{} is the main session's branch ({})",
                self.branch,
                self.workdir.display()
            ),
        }
    }
}

/// Every session branch of the repository whose common dir is `common_dir` and who holds it: the
/// main record's, then each agent's. The one list the pre-push check, `agent add` and `push`
/// decide by.
///
/// # Errors
/// Those of [`agents`] and [`SessionRecord::read`].
pub fn owners(common_dir: &Path) -> Result<Vec<BranchOwner>> {
    let mut out = Vec::new();
    if let Some(main) = SessionRecord::read(common_dir)? {
        out.push(BranchOwner {
            branch: main.branch,
            agent: None,
            workdir: common_dir.parent().unwrap_or(common_dir).to_path_buf(),
            git_dir: common_dir.to_path_buf(),
        });
    }
    for agent in agents(common_dir)? {
        out.push(BranchOwner {
            branch: agent.record.branch,
            workdir: agent.workdir.unwrap_or_else(|| agent.git_dir.clone()),
            agent: Some(agent.name),
            git_dir: agent.git_dir,
        });
    }
    Ok(out)
}

/// Refuse a push from the work tree whose own git dir is `git_dir` to `full_ref` when another
/// session of the repository (the main one, an agent) holds that branch.
///
/// # Errors
/// [`Error::Usage`] ([`Refusal::AnotherSession`], exit 2) naming the owner.
pub fn refuse_foreign_branch(dirs: &GitDirs, full_ref: &str, nothing: &str) -> Result<()> {
    let own = dirs.git_dir.canonicalize().unwrap_or(dirs.git_dir.clone());
    for owner in owners(&dirs.common_dir)? {
        if owner.branch.full_ref() != full_ref {
            continue;
        }
        let theirs = owner
            .git_dir
            .canonicalize()
            .unwrap_or(owner.git_dir.clone());
        if theirs != own {
            return Err(Error::Usage(
                Refusal::AnotherSession,
                format!(
                    "refused: {} — another session of this repository holds it, so no other \
                     tree pushes to it: {nothing}",
                    owner.describe()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuse to make agent `name`'s git dir for the work tree `workdir` when `<common>/worktrees` or
/// `<common>/worktrees/<NAME>` is there but not a real folder, or is another work tree's (a plain
/// `git worktree add` of that name). One left by an interrupted `agent add` into `workdir` passes.
///
/// # Errors
/// [`Error::Usage`] (exit 2) naming what is in the way.
pub fn check_agent_slot(common_dir: &Path, name: &AgentName, workdir: &Path) -> Result<()> {
    let worktrees = common_dir.join(WORKTREES);
    let git_dir = worktrees.join(name.as_str());
    for dir in [&worktrees, &git_dir] {
        if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
            return Err(Error::Usage(
                Refusal::Invalid,
                format!(
                    "{} is not a folder git made (a symlink or a file): remove it, then add the \
                     agent again",
                    dir.display()
                ),
            ));
        }
    }
    let dot_git = workdir.join(".git");
    match read_link(&git_dir.join("gitdir")) {
        Some(existing) if Path::new(&existing) != dot_git => Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "the linked work tree {name} exists already, for {existing}: choose another \
                 name (git worktree list shows them)"
            ),
        )),
        _ => Ok(()),
    }
}

/// Write an agent's linked git dir: `<common>/worktrees/<NAME>/{HEAD, commondir, gitdir}`, the
/// branch `branch` at `start` unless it is there already, and its upstream (`origin`). A git dir
/// of that name left by an interrupted `agent add` into the same folder is completed; one of
/// another work tree is refused. Returns the agent's git dir.
///
/// # Errors
/// [`Error::Usage`] (exit 2) for a `worktrees/<NAME>` of another tree or not a real folder;
/// [`Error::LocalIo`] on I/O failure.
pub fn write_agent_git_dir(
    common_dir: &Path,
    name: &AgentName,
    workdir: &Path,
    branch: &SessionBranch,
    start: FullSha,
) -> Result<PathBuf> {
    check_agent_slot(common_dir, name, workdir)?;
    let worktrees = common_dir.join(WORKTREES);
    let git_dir = worktrees.join(name.as_str());
    let refused = |what: &Path| {
        Error::Usage(
            Refusal::Invalid,
            format!(
                "{} is not a folder git made (a symlink or a file): remove it, then add the \
                 agent again",
                what.display()
            ),
        )
    };
    for dir in [&worktrees, &git_dir] {
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
                    return Err(refused(dir));
                }
            }
            Err(e) => return Err(Error::io(format!("creating {}", dir.display()), e)),
        }
    }
    let gitdir_text = format!("{}\n", workdir.join(".git").display());
    let write = crate::fs::write_atomic;
    write(&git_dir.join("commondir"), b"../..\n")?;
    write(&git_dir.join("gitdir"), gitdir_text.as_bytes())?;
    write(
        &git_dir.join("HEAD"),
        format!("ref: {}\n", branch.full_ref()).as_bytes(),
    )?;
    if !common_dir.join(branch.full_ref()).exists() {
        crate::repo::layout::write_ref(common_dir, &branch.full_ref(), start)?;
    }
    crate::repo::layout::track_branch(common_dir, branch)?;
    Ok(git_dir)
}
