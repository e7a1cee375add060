//! Session inputs from flags and the environment (SPEC "Inputs"), parsed once into types.
//!
//! Precedence: a flag, then `X_FILE`, then `X`. A URL with credentials on the command line is
//! refused (argv is visible to every process in the sandbox).

use std::path::PathBuf;

use crate::error::{Error, Refusal, Result};
use crate::types::{FullSha, RemoteUrl, SessionBranch};

pub(crate) fn env_nonempty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Resolve a URL from `flag`, `<var>_FILE` or `<var>`; `Ok(None)` when none is set.
///
/// # Errors
/// [`Error::Usage`] (exit 2) for a credentialed URL on argv, an unreadable `_FILE`, or an invalid URL.
pub fn url(
    flag: Option<&str>,
    var: &'static str,
    file_var: &'static str,
) -> Result<Option<UrlSource>> {
    let flag_name = format!("--{}", var.to_ascii_lowercase().replace('_', "-"));
    if let Some(raw) = flag {
        let url = RemoteUrl::parse(raw)
            .map_err(|e| Error::Usage(Refusal::Invalid, format!("{flag_name}: {e}")))?;
        if url.has_credentials() || url.has_query() {
            return Err(Error::Usage(
                Refusal::CredentialsOnArgv,
                format!(
                    "{flag_name} carries credentials (a user name, password or query string: \
                     presigned URLs sign in the query), which the command line would show to \
                     every process in the sandbox: put the URL in {var} or {file_var} instead"
                ),
            ));
        }
        return Ok(Some(UrlSource::Fixed(url)));
    }
    if let Some(path) = env_nonempty(file_var) {
        // Made absolute now: the current directory may be left later (see `session_dir`).
        let path = PathBuf::from(path);
        let path = if path.is_absolute() {
            path
        } else {
            current_dir()
                .map_err(|e| {
                    Error::Usage(
                        Refusal::Invalid,
                        format!("{file_var} ({}) is relative: {e}", path.display()),
                    )
                })?
                .join(path)
        };
        let source = UrlSource::File {
            path,
            var: file_var,
        };
        source.load()?;
        return Ok(Some(source));
    }
    if let Some(raw) = env_nonempty(var) {
        let url = RemoteUrl::parse(&raw)
            .map_err(|e| Error::Usage(Refusal::Invalid, format!("{var}: {e}")))?;
        return Ok(Some(UrlSource::Fixed(url)));
    }
    Ok(None)
}

/// Parse the session branch from a flag or `SESSION_BRANCH` (clap already merged the two).
///
/// # Errors
/// [`Error::Usage`] when missing or invalid.
pub fn branch(value: Option<&str>) -> Result<SessionBranch> {
    let raw = value.ok_or_else(|| {
        Error::Usage(
            Refusal::Missing,
            "SESSION_BRANCH is not set (or pass --session-branch)".into(),
        )
    })?;
    raw.parse()
        .map_err(|e| Error::Usage(Refusal::Invalid, format!("{e}")))
}

/// Parse `TIP_SHA` from a flag or the environment.
///
/// # Errors
/// [`Error::Usage`] when missing, not a full SHA-1 id, or SHA-256 (SPEC rule 1).
pub fn tip(value: Option<&str>) -> Result<FullSha> {
    let raw = value.ok_or_else(|| {
        Error::Usage(
            Refusal::Missing,
            "TIP_SHA is not set (or pass --tip-sha)".into(),
        )
    })?;
    raw.parse()
        .map_err(|e| Error::Usage(Refusal::Invalid, format!("TIP_SHA: {e}")))
}

/// Set once `session_dir` left a deleted current directory for `/`: relative paths no longer mean
/// what the user meant.
static CURRENT_DIR_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

const CURRENT_DIR_GONE_HINT: &str = "the current directory no longer exists (it was deleted): cd \
     into an existing folder, or use absolute paths (-C or SESSION_DIR, and any _FILE)";

/// The current directory, which relative work-tree paths are joined to.
///
/// # Errors
/// [`Error::Usage`] when it was deleted; [`Error::Internal`] when it cannot be read otherwise.
pub(crate) fn current_dir() -> Result<PathBuf> {
    if CURRENT_DIR_GONE.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(Error::Usage(
            Refusal::NotASessionFolder,
            CURRENT_DIR_GONE_HINT.into(),
        ));
    }
    std::env::current_dir().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::Usage(Refusal::NotASessionFolder, CURRENT_DIR_GONE_HINT.into())
        } else {
            Error::io("reading the current directory", e)
        }
    })
}

/// The work tree: `-C DIR`, else `SESSION_DIR`, else the current directory.
///
/// # Errors
/// [`Error::Usage`] when a file (anything but a folder) is in its place, or the current directory
/// it depends on was deleted; [`Error::Internal`] when the current directory cannot be read.
pub fn session_dir(flag: Option<&std::path::Path>) -> Result<PathBuf> {
    session_dirs(flag).map(|(dir, _)| dir)
}

/// [`session_dir`], and the folder as given (absolute, its symlinks not resolved), whose
/// symlinks a root run checks ([`crate::fs::owner::become_owner`]).
///
/// # Errors
/// As [`session_dir`].
pub fn session_dirs(flag: Option<&std::path::Path>) -> Result<(PathBuf, PathBuf)> {
    let dir = match flag {
        Some(d) => d.to_path_buf(),
        None => match env_nonempty("SESSION_DIR") {
            Some(d) => PathBuf::from(d),
            None => current_dir()?,
        },
    };
    let dir = if dir.is_absolute() {
        dir
    } else {
        current_dir()?.join(dir)
    };
    // With the current directory deleted, an absolute work tree still works: move to the root so
    // that libraries which resolve paths against the current directory (gix) do not fail.
    if std::env::current_dir().is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        std::env::set_current_dir("/")
            .map_err(|e| Error::io("leaving the deleted current directory", e))?;
        CURRENT_DIR_GONE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // `..` and symlinks resolved as the file system does (as `git -C` does), so that the search
    // for the tree's root below starts from the folder meant, not from the text of the path.
    let given = dir.clone();
    // A symlink whose target is missing: restore would have to create a folder wherever it
    // points, which git-session never does through a symlink.
    if let Ok(target) = std::fs::read_link(&dir)
        && !dir.exists()
    {
        return Err(Error::Usage(
            Refusal::NotASessionFolder,
            format!(
                "{} is a symlink to {}, which does not exist: create that folder, or point -C or \
             SESSION_DIR at a folder (it may be missing: restore creates it)",
                dir.display(),
                target.display()
            ),
        ));
    }
    let dir = resolved(&dir);
    // A missing one is fine (restore creates it); a file in its place or on its path is bad input.
    if let Some(existing) = dir.ancestors().find(|a| a.exists())
        && !existing.is_dir()
    {
        return Err(Error::Usage(
            Refusal::NotASessionFolder,
            format!(
                "{} is not a directory: -C and SESSION_DIR name the work tree's folder",
                existing.display()
            ),
        ));
    }
    Ok((dir, given))
}

/// `dir` resolved as the file system does: its longest existing part canonicalized (`..` and
/// symlinks followed), the missing rest appended, where `..` can only undo a missing name (so
/// `-C ../new` names the folder `new` beside the current one, not a path through `..`).
fn resolved(dir: &std::path::Path) -> PathBuf {
    if let Ok(real) = dir.canonicalize() {
        return real;
    }
    let mut existing = dir.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name().map(ToOwned::to_owned) else {
            break;
        };
        rest.push(name);
        if !existing.pop() {
            break;
        }
    }
    // `file_name` skips a trailing `..`: the loop above stops at it, the canonical form resolves it.
    let mut out = existing.canonicalize().unwrap_or(existing);
    for name in rest.into_iter().rev() {
        match name.to_str() {
            Some(".") => {}
            Some("..") => {
                out.pop();
            }
            _ => out.push(name),
        }
    }
    out
}

/// Where a URL comes from: a value fixed for the process, or a `_FILE` re-read at every use so that a
/// backend can rotate short-lived URLs.
#[derive(Debug, Clone)]
pub enum UrlSource {
    /// A URL from a flag or a plain environment variable.
    Fixed(RemoteUrl),
    /// A file holding the URL (`READ_URL_FILE`, `PUSH_URL_FILE`), named by its variable for messages.
    File {
        /// The file's path.
        path: PathBuf,
        /// The variable that named it, e.g. `READ_URL_FILE`.
        var: &'static str,
    },
}

impl UrlSource {
    /// The URL now: the fixed one, or the file's content parsed afresh.
    ///
    /// # Errors
    /// [`Error::Usage`] when the file cannot be read or does not hold a valid URL.
    pub fn load(&self) -> Result<RemoteUrl> {
        let url = match self {
            UrlSource::Fixed(url) => url.clone(),
            UrlSource::File { path, var } => {
                let text = crate::types::read_url_file(path).map_err(|e| {
                    Error::Usage(
                        Refusal::Invalid,
                        format!("cannot read {var} ({}): {e}", path.display()),
                    )
                })?;
                RemoteUrl::parse(text.trim()).map_err(|e| {
                    Error::Usage(
                        Refusal::Invalid,
                        format!("{var} does not hold a valid URL: {e}"),
                    )
                })?
            }
        };
        // A rotated URL's secret is redacted from what the process shows from now on.
        crate::redact::learn(&url);
        Ok(url)
    }

    pub(crate) fn rereadable(&self) -> bool {
        matches!(self, UrlSource::File { .. })
    }
}
