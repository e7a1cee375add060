//! The session record: what restore wrote into the git dir, and what `save`, `push` and `status`
//! work from afterwards (SPEC "The recorded tip (the lease)").
//!
//! Stored as JSON at `.git/git-session.json`, written atomically (temporary file, fsync, rename).
//! Its presence marks a finished restore: it is written last.
//!
//! # Security
//! Holds credential-free URLs only ([`RemoteUrl::public`](crate::types::RemoteUrl::public)).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Refusal, Result};
use crate::hint::Hint;
use crate::repo::dirs::GitDirs;
use crate::types::{FullSha, SessionBranch};

/// The file name of the record inside the git dir.
pub const RECORD_FILE: &str = "git-session.json";

/// Where the tree came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Fetched over git's smart HTTP.
    Git,
    /// Extracted from a tar.gz archive.
    Archive,
}

impl Source {
    /// `"git"` or `"archive"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Git => "git",
            Source::Archive => "archive",
        }
    }
}

/// The session record (format version 1).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Format version, currently `1`.
    pub version: u32,
    /// The session branch (short name).
    pub branch: SessionBranch,
    /// The commit restored (`TIP_SHA`).
    pub tip: FullSha,
    /// The value the remote branch must have when this sandbox pushes; the zero id when the branch
    /// did not exist on the remote.
    pub lease: FullSha,
    /// Where the tree came from.
    pub source: Source,
    /// When the restore finished, RFC 3339 UTC.
    pub restored_at: String,
    /// The git-session version that wrote the record.
    pub tool_version: String,
    /// The credential-free read URL, if known.
    #[serde(default)]
    pub read_url: Option<String>,
    /// The credential-free push URL, if known.
    #[serde(default)]
    pub push_url: Option<String>,
    /// The history depth fetched (`None`: the whole history).
    #[serde(default)]
    pub depth: Option<u32>,
    /// The repository's object format (`sha1` or `sha256`), which `tip` and `lease` are in.
    #[serde(
        serialize_with = "crate::types::sha::serialize_format",
        deserialize_with = "crate::types::sha::deserialize_format",
        default = "crate::types::sha::sha1_format"
    )]
    pub object_format: crate::types::Format,
    /// How plain git signs commits in this tree (restore's `SIGNING_*`), for git-session answering
    /// git's `ssh-keygen -Y sign` where git's environment lacks `SIGNING_*`; `None`: no signing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing: Option<SigningRecord>,
    /// The agent whose linked work tree this is (`git-session agent add NAME`); `None` for the
    /// main tree's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// Where plain git's signatures come from, as restore found it in `SIGNING_*`: paths and public
/// keys only, never a key's private half or a URL that carries credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum SigningRecord {
    /// `SIGNING_KEY_FILE`: the key file, read at each signature.
    KeyFile {
        /// The key file's absolute path.
        key_file: String,
        /// Its public half, `type base64` (what `user.signingkey` names).
        public_key: String,
        /// `SIGNING_REQUIRED=1` at restore: pushes refuse commits not signed by the key.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        required: bool,
    },
    /// A signing service, its answers checked against `SIGNING_PUBLIC_KEY`.
    Service {
        /// `SIGNING_URL_FILE`'s absolute path, re-read at each signature.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url_file: Option<String>,
        /// `SIGNING_URL` when it carries no credentials (no user name, password or query).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// `SIGNING_PUBLIC_KEY`, `type base64`.
        public_key: String,
        /// `SIGNING_REQUIRED=1` at restore: pushes refuse commits not signed by the key.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        required: bool,
    },
}

impl SigningRecord {
    /// The public key signatures are made with, `type base64`.
    pub fn public_key(&self) -> &str {
        match self {
            SigningRecord::KeyFile { public_key, .. }
            | SigningRecord::Service { public_key, .. } => public_key,
        }
    }

    /// Whether restore found `SIGNING_REQUIRED=1`: what a push goes by where its environment
    /// does not set `SIGNING_REQUIRED` (git's, in an agent's shell).
    pub fn required(&self) -> bool {
        match self {
            SigningRecord::KeyFile { required, .. } | SigningRecord::Service { required, .. } => {
                *required
            }
        }
    }
}

impl SessionRecord {
    /// The lease was taken for `TIP_SHA` without asking the remote (an archive restore without
    /// `READ_URL`, and no push since): a remote without the branch is then a new session, not a
    /// deleted one.
    pub fn lease_assumed(&self) -> bool {
        self.source == Source::Archive && self.read_url.is_none() && self.lease == self.tip
    }
}

impl SessionRecord {
    /// The record of a git restore (format version 1, restored now by this git-session).
    pub fn of_git_restore(
        branch: SessionBranch,
        tip: FullSha,
        lease: FullSha,
        read_url: &crate::types::RemoteUrl,
        push_url: Option<&crate::types::RemoteUrl>,
        depth: Option<u32>,
    ) -> Self {
        SessionRecord {
            version: 1,
            branch,
            tip,
            lease,
            source: Source::Git,
            restored_at: now_rfc3339(),
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            read_url: Some(read_url.public()),
            push_url: push_url.map(|u| u.public()),
            depth,
            object_format: tip.format(),
            signing: None,
            agent: None,
        }
    }

    /// The record's path inside `git_dir`.
    pub fn path(git_dir: &Path) -> PathBuf {
        git_dir.join(RECORD_FILE)
    }

    /// Read the record from `git_dir`, `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`Error::Conflict`] (exit 7) for malformed records (saying how to recover);
    /// [`Error::Usage`] for a record version other than 1 (a newer git-session wrote it).
    pub fn read(git_dir: &Path) -> Result<Option<Self>> {
        let path = Self::path(git_dir);
        let fix = "restore the session again into a new folder (this tree's files are left as \
                   they are; copy your changes over)";
        match crate::fs::state::read(&path, crate::fs::state::RECORD_CAP, fix)? {
            Some(bytes) => {
                let malformed = |e: serde_json::Error| {
                    Error::conflict(format!(
                        "the session record {} is malformed ({e}): restore the session again into \
                         a new folder (this tree's files are left as they are; copy your changes \
                         over)",
                        path.display()
                    ))
                };
                // The version first: a newer record may lack fields this one needs.
                let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(malformed)?;
                match value.get("version").and_then(serde_json::Value::as_u64) {
                    Some(1) => {}
                    Some(other) => {
                        return Err(Error::Usage(
                            Refusal::Unsupported,
                            format!(
                                "the session record {} has version {other}, which this git-session \
                             ({}) does not know: use the git-session that wrote it",
                                path.display(),
                                env!("CARGO_PKG_VERSION")
                            ),
                        ));
                    }
                    None => {}
                }
                let record: Self = serde_json::from_value(value).map_err(malformed)?;
                if record.tip.format() != record.object_format
                    || record.lease.format() != record.object_format
                {
                    return Err(malformed(serde::de::Error::custom(format!(
                        "its ids are not {} ids",
                        crate::types::format_title(record.object_format)
                    ))));
                }
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    /// Write the record into `git_dir` atomically.
    ///
    /// # Errors
    /// [`Error::Internal`] on I/O failure; the previous record (if any) is left intact.
    pub fn write(&self, git_dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::internal("encoding the session record", e))?;
        crate::fs::write_atomic_if_changed(&Self::path(git_dir), &json).map(|_| ())
    }
}

/// A restored tree: its work tree, git dir and session record, as `save`, `push` and `status` find it.
#[derive(Debug)]
pub struct Session {
    /// The work tree.
    pub workdir: PathBuf,
    /// Its own git dir: `.git`, or an agent's `<common>/worktrees/<NAME>` (HEAD, index, the
    /// record, the ledger, the write lock).
    pub git_dir: PathBuf,
    /// The git dir every work tree of the repository shares (objects, refs, config, hooks, the LFS
    /// store): `git_dir` in the main tree.
    pub common_dir: PathBuf,
    /// The session record.
    pub record: SessionRecord,
}

/// The refusal of a linked work tree (`git worktree add`): the session lives in the main tree,
/// named when its `.git` file and `commondir` lead there.
fn linked_work_tree(linked: &Path) -> Error {
    let read = |p: &Path| {
        crate::fs::read_regular(p, true, crate::fs::state::RECORD_CAP)
            .ok()
            .map(|t| String::from_utf8_lossy(&t).into_owned())
    };
    let main = read(&linked.join(".git"))
        .and_then(|t| {
            t.trim()
                .strip_prefix("gitdir:")
                .map(|p| linked.join(p.trim()))
        })
        .and_then(|dir| {
            let common = read(&dir.join("commondir"))?;
            let common = dir.join(common.trim()).canonicalize().ok()?;
            common.parent().map(Path::to_path_buf)
        });
    Error::Usage(
        Refusal::NotASessionFolder,
        match main {
            Some(main) => format!(
                "{} is a linked work tree (git worktree add) of {}, not an agent's: the session \
                 lives there — run git-session in it (or with -C {}); {} there makes a tree of \
                 its own for another agent",
                linked.display(),
                main.display(),
                main.display(),
                Hint::AgentAdd {
                    dir: main.clone(),
                    name: crate::types::AgentName::agent(),
                }
            ),
            None => format!(
                "{} is a linked work tree (git worktree add): run git-session in the main \
                 tree, where the session lives",
                linked.display()
            ),
        },
    )
}

impl Session {
    /// Open the session restored into `workdir`, checking `SESSION_BRANCH` (flag or environment)
    /// against the record when given.
    ///
    /// # Errors
    /// [`Error::Usage`] (exit 2) when `workdir` holds no restored session, or when `branch` names
    /// another session ("this tree belongs to another session").
    pub fn open(workdir: &Path, branch: Option<&str>) -> Result<Self> {
        // Like git, find the tree from any folder inside it; a linked work tree (`git worktree
        // add`, its `.git` a file) belongs to the main tree, where the session lives.
        let found = workdir
            .ancestors()
            .find(|d| Self::path_in(d).is_file() || d.join(".git").is_file());
        if let Some(linked) = found.filter(|d| d.join(".git").is_file()) {
            // An agent's tree (`agent add`): a linked work tree whose own git dir holds a record.
            return match GitDirs::of(linked).filter(GitDirs::is_linked) {
                Some(dirs) if SessionRecord::path(&dirs.git_dir).is_file() => {
                    Self::open_dirs(linked, dirs, branch)
                }
                _ => Err(linked_work_tree(linked)),
            };
        }
        let workdir = found.unwrap_or(workdir);
        let git_dir = workdir.join(".git");
        if found.is_none()
            && let Some(template) = crate::repo::template::TemplateRecord::read(&git_dir)?
        {
            return Err(Error::Usage(
                Refusal::NotASessionFolder,
                format!(
                    "{} is a template baked at {} (by git-session bake), not a session yet: {} \
                     (with READ_URL, SESSION_BRANCH and TIP_SHA set) boots one",
                    workdir.display(),
                    template.base,
                    Hint::Restore(workdir.to_owned())
                ),
            ));
        }
        let staging = workdir.join(crate::names::STAGING_DIR);
        if found.is_none() && std::fs::symlink_metadata(&staging).is_ok_and(|m| m.is_dir()) {
            return Err(Error::Usage(
                Refusal::NotASessionFolder,
                format!(
                    "{} holds an interrupted restore ({} is where it was building the git dir): \
                     run {} again, with the same inputs (READ_URL, SESSION_BRANCH, TIP_SHA), to \
                     complete it",
                    workdir.display(),
                    crate::names::STAGING_DIR,
                    Hint::Restore(workdir.to_owned())
                ),
            ));
        }
        Self::open_dirs(workdir, GitDirs::main(workdir), branch)
    }

    /// Open the session of the work tree `workdir` whose git dirs are `dirs`.
    fn open_dirs(workdir: &Path, dirs: GitDirs, branch: Option<&str>) -> Result<Self> {
        let GitDirs {
            git_dir,
            common_dir,
        } = dirs;
        let record = SessionRecord::read(&git_dir)?.ok_or_else(|| {
            Error::Usage(Refusal::NotASessionFolder, format!(
                "{} is not inside a tree restored by git-session (no .git/{RECORD_FILE} there or \
                 above): cd into the session's tree, or name it with -C DIR (or SESSION_DIR); \
                 {} (with READ_URL, SESSION_BRANCH and TIP_SHA set) makes one",
                workdir.display(),
                Hint::Restore(workdir.to_owned()),
            ))
        })?;
        if let Some(raw) = branch {
            let wanted: SessionBranch = raw
                .parse()
                .map_err(|e| Error::Usage(Refusal::Invalid, format!("{e}")))?;
            if wanted != record.branch {
                return Err(Error::Usage(
                    Refusal::AnotherSession,
                    format!(
                        "this tree belongs to another session: it holds '{}', SESSION_BRANCH says '{wanted}'",
                        record.branch
                    ),
                ));
            }
        }
        // Before anything (the pre-push check's config, gix) reads the git dir's files whole.
        super::check_read_files(&git_dir)?;
        super::check_read_files(&common_dir)?;
        let refs = [record.branch.full_ref(), record.branch.tracking_ref()];
        super::check_regular_files(&common_dir, refs.iter().map(String::as_str))?;
        Ok(Session {
            workdir: workdir.to_path_buf(),
            git_dir,
            common_dir,
            record,
        })
    }
}

impl Session {
    /// [`GitDirs::refs_dir`].
    pub fn refs_dir(&self) -> &Path {
        &self.common_dir
    }

    /// [`GitDirs::config_dir`].
    pub fn config_dir(&self) -> &Path {
        &self.common_dir
    }

    /// [`GitDirs::hooks_dir`].
    pub fn hooks_dir(&self) -> &Path {
        &self.common_dir
    }

    /// [`GitDirs::objects_dir`].
    pub fn objects_dir(&self) -> &Path {
        &self.common_dir
    }

    /// [`GitDirs::own_dir`].
    pub fn own_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Its git dirs.
    pub fn dirs(&self) -> GitDirs {
        GitDirs {
            git_dir: self.git_dir.clone(),
            common_dir: self.common_dir.clone(),
        }
    }

    fn path_in(dir: &Path) -> PathBuf {
        SessionRecord::path(&dir.join(".git"))
    }
}

pub use crate::fs::{now_rfc3339, sync_dir, write_atomic};
