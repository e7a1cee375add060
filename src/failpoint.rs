//! Named failpoints for crash tests: `GIT_SESSION_FAILPOINT=<name>` aborts the process (no cleanup,
//! like `kill -9`) when execution reaches the point of that name.
//!
//! Save's points: `index-lock-made` (the lock's file made and recorded, not yet `index.lock`),
//! `index-lock-taken` (`index.lock` held), `index-lock-ref-recording` and `index-lock-ref-ended`
//! (mid-way through rewriting the lock's record before and after the branch moves). Restore's points, in order: `after-staging`, `after-fetch` (archive: `after-extract`, `mid-publish`), `after-sparse-fetch` (a sparse restore's second pack, the cone's
//! blobs, received), `mid-early-checkout` (the third file written
//! during the transfer half written; no early checkout runs when `mid-checkout` is armed), `mid-checkout` (once half of the files
//! are written), `mid-big-file` (half of a file over the big-object threshold written), `mid-lfs` (an LFS
//! object stored whole), `mid-smudge` (half of the LFS files written with their content),
//! `mid-submodules` (a submodule checked out), `mid-index` (the new index written into `index.lock`, not yet renamed over the index), `before-record`, `boot-recorded` (a boot's session record written, the template's record not yet removed), `after-publish`. Push's: `after-push` (the server reported `ok`,
//! the lease is not recorded yet). `agent add`'s: `agent-layout-written` (the folder, the linked git dir,
//! the branch and the `.git` file written; no file yet), `mid-agent-checkout` (half of the agent's
//! files written). Any edit of the shared config's: `config-lock-taken` (`config.lock` held, the
//! config read, not yet written). Barriers (see [`barrier`]): `hold-mid-checkout` (restore, once half of
//! the files after the transfer are read; no early checkout runs), `hold-mid-extract` (an archive
//! restore, once ten files are extracted), `before-lock` (restore, and `save`,
//! `push` and the pre-push check before the tree's write lock), `after-lease-check` (`push`, and
//! the pre-push check once it let a plain `git push` through), `hold-save-hash` (`save`, each
//! file between its lstat and its open), `hold-agent-copy` (`agent add`, each clean main-tree file
//! between its check and its copy) and `hold-config-edit` (the shared config read under
//! `config.lock`, not yet written).

/// The variable that names the failpoint to trigger.
pub const VAR: &str = "GIT_SESSION_FAILPOINT";

/// Whether the failpoint `name` is armed in this process.
pub fn armed(name: &str) -> bool {
    std::env::var(VAR).is_ok_and(|v| v == name)
}

/// Abort the process here if the failpoint `name` is armed.
pub fn hit(name: &str) {
    if armed(name) {
        crate::redact::Stderr::line(&format!(
            "git-session: failpoint '{name}' reached; aborting"
        ));
        std::process::abort();
    }
}

/// Hold here, if the failpoint `name` is armed, until `GIT_SESSION_BARRIER_COUNT` processes
/// (default 2) have reached it: each drops a marker file into `GIT_SESSION_BARRIER_DIR` and waits
/// for the others (at most 60 s). Race tests use it to make two pushers pass their lease checks
/// before either uploads, so both really reach the server's compare-and-swap.
pub fn barrier(name: &str) {
    if !armed(name) {
        return;
    }
    let Ok(dir) = std::env::var("GIT_SESSION_BARRIER_DIR") else {
        return;
    };
    let want: usize = std::env::var("GIT_SESSION_BARRIER_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    // One marker per thread: the sessions of a manifest restore on threads of one process.
    let marker = format!("{}-{:?}", std::process::id(), std::thread::current().id());
    let _ = std::fs::write(
        dir.join(marker.replace(|c: char| !c.is_ascii_alphanumeric(), "-")),
        b"",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let n = std::fs::read_dir(&dir).map(|rd| rd.count()).unwrap_or(0);
        if n >= want {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    crate::redact::Stderr::line(&format!("git-session: barrier '{name}' timed out"));
}
