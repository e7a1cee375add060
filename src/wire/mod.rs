//! The wire: git's smart HTTP, as a client (`gitprotocol-http`, `gitprotocol-v2`,
//! `gitprotocol-pack`). [`http`] is the client (TLS, timeouts, the low-speed rule, bounded
//! retries, status mapping); [`upload_pack`] fetches (protocol v2: the capability advertisement,
//! `ls-refs`, `fetch`); [`receive_pack`] pushes (the ref advertisement, the request, the report);
//! [`signing`] asks a signing service for a commit's signature (its answer checked above).
//!
//! The wire knows no commands and no local repository: it moves bytes and parses what the
//! server sends, every size bounded, every text from the server shown only through
//! [`crate::redact`].

pub mod advertisement;
pub mod http;
pub mod lfs;
pub mod payload;
pub mod proxy;
pub mod receive_pack;
pub mod signing;
pub mod streaming;
pub mod tls;
pub mod upload_pack;
pub mod watch;

#[cfg(test)]
mod testing;
