//! Named failpoints for crash tests: `GIT_SESSION_FAILPOINT=<name>` aborts the process (no cleanup,
//! like `kill -9`) when execution reaches the point of that name.
//!
//! Restore's points, in order: `after-staging`, `after-fetch`, `mid-checkout` (once half of the files
//! are written), `before-record`, `after-publish`.

/// The variable that names the failpoint to trigger.
pub const VAR: &str = "GIT_SESSION_FAILPOINT";

/// Whether the failpoint `name` is armed in this process.
pub fn armed(name: &str) -> bool {
    std::env::var(VAR).is_ok_and(|v| v == name)
}

/// Abort the process here if the failpoint `name` is armed.
pub fn hit(name: &str) {
    if armed(name) {
        eprintln!("git-session: failpoint '{name}' reached; aborting");
        std::process::abort();
    }
}
