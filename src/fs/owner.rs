//! SPEC rule 9: run as root on a folder that someone else owns, git-session becomes that user
//! (uid, gid and groups) before it touches the tree, for every command. Everything it creates is
//! then the owner's without a chown, and a folder the owner swaps for a symlink mid-run can only
//! lead where the owner could write anyway: the race cannot reach outside the owner's rights.
//!
//! Run as root on a folder root owns, nothing changes, but the folders above the target must not
//! be writable by anyone but root (or the owner): otherwise another user could move the target
//! away under us.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result};

/// Who this process works as in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// The bound on `/etc/passwd` and `/etc/group` read to find the owner's groups.
const ACCOUNT_FILE_LIMIT: u64 = 16 << 20;

/// When running as root on a target (or, before it exists, the nearest existing folder above it)
/// that another user owns, become that user; returns who we became. Before that, with root, the
/// folders above are checked: none may be writable by a user other than root and the owner.
///
/// Must run before any thread is started (the identity change is process-wide through libc, but a
/// thread spawned before it would keep root).
///
/// # Errors
/// [`Error::Usage`] naming the folder above that others can write to; [`Error::LocalIo`] when
/// the change of identity fails.
pub fn become_owner(given: &Path, target: &Path) -> Result<Option<Identity>> {
    if sys::euid() != 0 {
        return Ok(None);
    }
    let (base, meta) = reached(given, target)?;
    check_chain(&base, meta.uid())?;
    check_symlinks(given, meta.uid(), &base, base == target)?;
    if meta.uid() == 0 {
        return Ok(None);
    }
    let (identity, home) = identity_of(meta.uid(), meta.gid());
    sys::become_user(&identity).map_err(|e| {
        Error::io(
            format!(
                "becoming {}'s owner (uid {}, gid {}) to work in it",
                base.display(),
                identity.uid,
                identity.gid
            ),
            e,
        )
    })?;
    owner_can_pass(target, &identity)?;
    // An account without a home field is as one without an account: no home of its own.
    keep_config_reachable(home.as_deref().filter(|h| !h.as_os_str().is_empty()));
    tracing::debug!(
        "running as uid {} gid {} groups {:?}, the owner of {}",
        identity.uid,
        identity.gid,
        identity.groups,
        base.display()
    );
    Ok(Some(identity))
}

/// Whether the owner (the process is running as them now) can pass every folder down to
/// `target`: root could, so a folder above it closed to them (`/root` at 0700) would fail later as
/// "creating <target>: permission denied" although the target exists. Names the folder instead.
fn owner_can_pass(target: &Path, identity: &Identity) -> Result<()> {
    let mut path = PathBuf::from("/");
    for part in target.components().skip(1) {
        // stat of `P/.` needs search permission on `P` itself.
        if let Err(e) = std::fs::metadata(path.join("."))
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            return Err(Error::LocalIo(crate::error::LocalIo {
                context: format!(
                    "{}'s owner (uid {}), whom root works as there, cannot pass {} above it \
                     (chmod o+x {} lets them; or restore into a folder they can reach)",
                    target.display(),
                    identity.uid,
                    path.display(),
                    path.display()
                ),
                cause: e.to_string(),
                kind: std::io::ErrorKind::PermissionDenied,
            }));
        }
        path.push(part);
        if !path.exists() {
            break;
        }
    }
    Ok(())
}

/// The folder the given path reaches, resolved once: opened, and every decision made from what
/// was opened, so an owner swapping a name for a symlink between two lookups is caught (the
/// folder reached must be `target`, the one the rest of the run names). A target that does not
/// exist yet: the nearest existing folder above it, which no one but root may be able to write
/// to (else someone could put a folder or a symlink of theirs there before root creates it).
fn reached(given: &Path, target: &Path) -> Result<(PathBuf, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(given);
    let folder = match opened {
        Ok(folder) => folder,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return not_yet_there(target),
        Err(e) => return Err(Error::io(format!("opening {}", given.display()), e)),
    };
    let meta = folder
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", given.display()), e))?;
    // Where the opened folder is, as the kernel names it: no second lookup of `given` (a name
    // swapped between two lookups made `canonicalize` and a `stat` agree on different folders).
    // Without /proc: the path resolved again, kept only if it leads to the opened folder.
    use std::os::fd::AsRawFd as _;
    let same = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    };
    let base = match std::fs::read_link(format!("/proc/self/fd/{}", folder.as_raw_fd())) {
        Ok(path) => Some(path),
        Err(_) => std::fs::canonicalize(given).ok().filter(|b| same(b)),
    };
    match base {
        Some(base) if base == target => Ok((base, meta)),
        _ => Err(changed(given)),
    }
}

fn changed(given: &Path) -> Error {
    Error::Usage(
        Refusal::UnsafeAsRoot,
        format!(
            "refusing to work as root in {}: the path led to different folders while it was being \
         checked (a symlink on it is being swapped); name a folder no other user can change, or \
         run as the folder's owner",
            given.display()
        ),
    )
}

/// The nearest existing folder above a target that does not exist yet, refused when a user
/// other than root could create the target there first.
fn not_yet_there(target: &Path) -> Result<(PathBuf, std::fs::Metadata)> {
    for dir in target.ancestors().skip(1) {
        match std::fs::metadata(dir) {
            Ok(meta) => {
                let others_write =
                    meta.mode() & 0o002 != 0 || (meta.mode() & 0o020 != 0 && meta.gid() != 0);
                if meta.uid() == 0 && others_write {
                    return Err(Error::Usage(
                        Refusal::UnsafeAsRoot,
                        format!(
                            "refusing to create {} as root: other users can write to {}, so one \
                         could put a folder or a symlink of theirs there first; create {} \
                         first (owned by the user it is for), or choose a folder only root can \
                         create entries in",
                            target.display(),
                            dir.display(),
                            target.display()
                        ),
                    ));
                }
                return Ok((dir.to_path_buf(), meta));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("reading {}", dir.display()), e)),
        }
    }
    Err(Error::Usage(
        Refusal::NotASessionFolder,
        format!("no folder of {} exists", target.display()),
    ))
}

/// Refuse a symlink on the path as given (`-C`, `SESSION_DIR`) that someone other than root and
/// `owner` made, or that sits in a folder someone else can change: whoever can point it
/// elsewhere chooses where root works (a folder of root's, found through the owner's symlink,
/// would be written as root).
fn check_symlinks(given: &Path, owner: u32, base: &Path, exists: bool) -> Result<()> {
    let mut prefix = PathBuf::new();
    let mut seen = false;
    for part in given.components() {
        prefix.push(part);
        let Ok(meta) = std::fs::symlink_metadata(&prefix) else {
            break;
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        seen = true;
        if meta.uid() != 0 && meta.uid() != owner {
            return Err(Error::Usage(
                Refusal::UnsafeAsRoot,
                format!(
                    "refusing to work as root through {}: it is a symlink that uid {} can point \
                 elsewhere; name the folder itself (-C or SESSION_DIR), or run as its owner",
                    prefix.display(),
                    meta.uid()
                ),
            ));
        }
        check_chain(&prefix, owner)?;
    }
    // The folder reached (or, for a target not there yet, the nearest one above it) differs from
    // what the path's own text names only through a symlink: none found now means one was there
    // when the path was resolved, and is gone.
    let named = lexical(given);
    let as_named = if exists {
        named == base
    } else {
        named.starts_with(base) && named != base
    };
    if !seen && !as_named {
        return Err(changed(given));
    }
    Ok(())
}

/// `path` with `.` and `..` resolved by its text alone (what it names when no symlink is on it).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// After the change of identity, git config and ignore files are read below `HOME`: root's home
/// (a boot's usual `HOME=/root`) cannot be read by the owner, and a failed read is an error to
/// gix. Then `HOME` becomes the owner's own, as `su` makes it, and `XDG_CONFIG_HOME` goes; an
/// owner with no home (a uid no account names) gets neither, as git runs without `HOME`: no
/// global config or ignore file is read. A home that is missing reads as empty.
fn keep_config_reachable(home: Option<&Path>) {
    let unreadable =
        |var: &str| std::env::var_os(var).is_some_and(|dir| std::fs::read_dir(dir).is_err());
    if unreadable("HOME") || unreadable("XDG_CONFIG_HOME") {
        sys::set_home(home);
    }
}

/// Refuse a folder above `base` that a user other than root and `owner` could change: one it
/// owns, a group-writable one of a group other than root's, or a world-writable one without the
/// sticky bit (with it, as `/tmp` has, others cannot move or remove what they do not own).
fn check_chain(base: &Path, owner: u32) -> Result<()> {
    for dir in base.ancestors().skip(1) {
        let meta = std::fs::symlink_metadata(dir)
            .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        let mode = meta.mode();
        let sticky = mode & 0o1000 != 0;
        let who = if meta.uid() != 0 && meta.uid() != owner {
            Some(format!("it belongs to uid {}", meta.uid()))
        } else if mode & 0o020 != 0 && meta.gid() != 0 && !sticky {
            Some(format!("group {} can write to it", meta.gid()))
        } else if mode & 0o002 != 0 && !sticky {
            Some("everyone can write to it".to_owned())
        } else {
            None
        };
        if let Some(who) = who {
            return Err(Error::Usage(
                Refusal::UnsafeAsRoot,
                format!(
                    "refusing to work as root below {}: {who}, so another user could move {} away \
                 mid-run; make it root's and not writable by others (e.g. chmod go-w), or run \
                 as the folder's owner",
                    dir.display(),
                    base.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The user's primary group, groups and home folder from the account files; a uid without an
/// account keeps the folder's group alone (and no home).
fn identity_of(uid: u32, dir_gid: u32) -> (Identity, Option<PathBuf>) {
    let passwd = read_bounded("/etc/passwd");
    let account = passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 6 && f[2].parse() == Ok(uid))
            .then(|| (f[0].to_owned(), f[3].parse().ok(), PathBuf::from(f[5])))
    });
    let Some((name, Some(gid), home)) = account else {
        let alone = Identity {
            uid,
            gid: dir_gid,
            groups: vec![dir_gid],
        };
        return (alone, None);
    };
    let mut groups = vec![gid];
    for line in read_bounded("/etc/group").lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() >= 4
            && f[3].split(',').any(|m| m == name)
            && let Ok(g) = f[2].parse::<u32>()
            && !groups.contains(&g)
        {
            groups.push(g);
        }
    }
    (Identity { uid, gid, groups }, Some(home))
}

fn read_bounded(path: &str) -> String {
    use std::io::Read as _;
    let mut text = String::new();
    if let Ok(f) = super::open_regular(Path::new(path), true) {
        let _ = f.take(ACCOUNT_FILE_LIMIT).read_to_string(&mut text);
    }
    text
}

/// The only unsafe code here: libc's identity calls, which have no safe wrapper in our crates.
#[allow(unsafe_code)]
mod sys {
    use super::Identity;

    pub fn euid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    /// Groups first, then the group, then the user (after it, the others are no longer allowed);
    /// then check that root cannot be taken back.
    pub fn become_user(id: &Identity) -> std::io::Result<()> {
        let groups: Vec<libc::gid_t> = id.groups.clone();
        // SAFETY: the pointer and length describe `groups`, alive for the call.
        if unsafe { libc::setgroups(groups.len(), groups.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: plain system calls on integers (glibc applies them to every thread).
        if unsafe { libc::setresgid(id.gid, id.gid, id.gid) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::setresuid(id.uid, id.uid, id.uid) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above; succeeding here would mean root was kept.
        if unsafe { libc::setuid(0) } == 0 {
            return Err(std::io::Error::other("root could be taken back"));
        }
        Ok(())
    }

    /// `HOME` set to `home`, or removed without one; `XDG_CONFIG_HOME` removed.
    pub fn set_home(home: Option<&std::path::Path>) {
        // SAFETY: called once, right after the change of identity and before any thread starts
        // (`become_owner`'s contract), so nothing reads the environment meanwhile.
        unsafe {
            match home {
                Some(home) => std::env::set_var("HOME", home),
                None => std::env::remove_var("HOME"),
            }
            std::env::remove_var("XDG_CONFIG_HOME");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_without_an_account_keeps_the_folders_group() {
        let (id, home) = identity_of(4_000_000_123, 777);
        assert_eq!(home, None);
        assert_eq!(
            id,
            Identity {
                uid: 4_000_000_123,
                gid: 777,
                groups: vec![777]
            }
        );
    }

    #[test]
    fn a_folder_above_that_others_can_write_to_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        let target = open.join("work");
        std::fs::create_dir_all(&target).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_chain(&target, 0).unwrap_err().to_string();
        assert!(err.contains(&open.display().to_string()), "{err}");
        assert!(err.contains("everyone can write"), "{err}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_chain(&target, 0).unwrap();
    }
}
