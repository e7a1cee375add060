//! Set-up and checks shared by the push, save, handoff, lease, bake and root tests.

use crate::support::GitServer;
use crate::support::server::LogEntry;

/// The receive-pack POSTs the server has logged (the pushes' uploads), in order.
pub fn receive_pack_posts(srv: &GitServer) -> Vec<LogEntry> {
    srv.log()
        .into_iter()
        .filter(|e| e.method == "POST" && e.path.ends_with("git-receive-pack"))
        .collect()
}

/// The bytes uploaded by all receive-pack POSTs the server has logged.
pub fn receive_pack_bytes(srv: &GitServer) -> usize {
    receive_pack_posts(srv).iter().map(|e| e.body_len).sum()
}
