//! Steps 1 and 2 in one request: over protocol v2 the capability advertisement can be skipped
//! (`gitprotocol-http` "Smart Clients" lets a stateless client send a v2 command with
//! `Git-Protocol: version=2` straight to `POST git-upload-pack`). [`connect`] posts the `ls-refs`
//! of the session branch that way, taking for granted what every v2 upload-pack offers
//! ([`assumed`]); only when the answer is not a v2 `ls-refs` answer (a v0/v1 server answers the
//! v2 command with an empty body, JGit with an `ERR` line, others with an error status) does it
//! fall back to [`handshake`]'s `GET info/refs`: one extra request, never a failed boot. A
//! 401/403 is not a fallback: it is the credential's, reported as the handshake would; nor is a
//! transient failure (5xx, a stall, an answer cut short): the caller's retries post it again.
//!
//! A [`Server::Assumed`] fetches with the assumed capabilities; one the server refuses (git's
//! upload-pack ends the answer before its first byte: "unexpected line") is sent again after the
//! handshake, with what the server advertised ([`super::fetch`]).

use std::cell::Cell;
use std::io::{BufRead as _, BufReader};

use super::handshake::{Capabilities, Server, handshake};
use super::ls_refs::read_ls_refs;
use crate::error::{Error, Result};
use crate::types::{Format, FullSha, RemoteUrl, SessionBranch, format_name};
use crate::wire::http::{Http, Protocol, body_error};

/// What [`connect`] learned: the server, and where the session branch is when the posted
/// `ls-refs` answered it (`Some(None)`: the remote has no such branch; `None`: not looked up yet,
/// [`super::ls_ref`] does it).
#[derive(Debug)]
pub struct Connected {
    /// What the later steps take.
    pub server: Server,
    /// The session branch's commit, when the posted `ls-refs` was answered.
    pub tip: Option<Option<FullSha>>,
}

/// What a posted request takes for granted of a protocol v2 upload-pack (`gitprotocol-v2`
/// "Capability Advertisement"; git advertises all of them unconditionally): `agent`, `ls-refs`,
/// `fetch=shallow` (`deepen`), and `object-format` only for SHA-256 (a v2 server takes a request
/// without one as SHA-1, and one older than `object-format` refuses it by name).
pub fn assumed(format: Format, branch: &SessionBranch) -> Server {
    let mut lines = b"version 2\nagent=git/2\nls-refs\nfetch=shallow\n".to_vec();
    if format != Format::Sha1 {
        lines.extend_from_slice(format!("object-format={}\n", format_name(format)).as_bytes());
    }
    let caps = Capabilities::from_lines(lines.into())
        .expect("the assumed capabilities are a well-formed advertisement");
    Server::Assumed {
        caps,
        branch: branch.clone(),
        confirmed: false,
    }
}

/// Steps 1 and 2: post the `ls-refs` of `branch` straight to upload-pack (protocol v2, the
/// capabilities of [`assumed`] for `format`, the format of `TIP_SHA`); when the server does not
/// answer it as v2 (`post` is then set false, for the retries), or with `post` false (a caller that needs the advertised capabilities, e.g.
/// `filter`) or `GIT_SESSION_PROTOCOL=0`, the [`handshake`] instead. One request against a v2
/// server, one more than the handshake alone against any other.
///
/// # Errors
/// [`Error::Auth`] (exit 4) when the posted request is refused for its credential; else as
/// [`handshake`].
pub fn connect(
    http: &Http,
    url: &RemoteUrl,
    branch: &SessionBranch,
    format: Format,
    post: &Cell<bool>,
) -> Result<Connected> {
    if post.get() && http.protocol != Protocol::V0 {
        let mut server = assumed(format, branch);
        match posted_ls_ref(http, url, &server, branch) {
            Ok(Some(tip)) => {
                if let Server::Assumed { confirmed, .. } = &mut server {
                    *confirmed = true;
                }
                return Ok(Connected {
                    server,
                    tip: Some(tip),
                });
            }
            // The credential's, or the network's (retried as it is).
            Err(e) if matches!(e, Error::Auth(_)) || e.is_transient() => return Err(e),
            Ok(None) => tracing::info!(
                "{url} answered the ls-refs posted without the capability advertisement with \
                 nothing (not protocol v2): asking for its capabilities"
            ),
            Err(e) => tracing::info!(
                "{url} did not answer the ls-refs posted without the capability advertisement \
                 as protocol v2 ({e}): asking for its capabilities"
            ),
        }
        // Its retries go to the handshake.
        post.set(false);
    }
    Ok(Connected {
        server: handshake(http, url, branch)?,
        tip: None,
    })
}

/// `POST git-upload-pack` with `command=ls-refs` and `ref-prefix refs/heads/<branch>`, no
/// handshake before it; the answer read as [`super::ls_ref`] reads it, and a Content-Type other
/// than upload-pack's result refused. `None`: an empty answer (not protocol v2).
///
/// # Errors
/// As [`super::ls_ref`]; an answer that is not a v2 `ls-refs` answer is [`Error::Protocol`].
fn posted_ls_ref(
    http: &Http,
    url: &RemoteUrl,
    server: &Server,
    branch: &SessionBranch,
) -> Result<Option<Option<FullSha>>> {
    let Server::Assumed { caps, .. } = server else {
        return Err(Error::internal(
            "posting ls-refs",
            "not with assumed capabilities",
        ));
    };
    let full = branch.full_ref();
    let resp = http.send_unchecked(url, super::ls_refs::ls_refs_request(caps, &full)?)?;
    let resp = super::request::refused_status(http, url, resp)?;
    let ctype = resp.media_type();
    if ctype != "application/x-git-upload-pack-result" {
        return Err(Error::Protocol(format!(
            "{url} answered git-upload-pack with Content-Type '{ctype}'"
        )));
    }
    let mut resp = BufReader::new(resp);
    if resp.fill_buf().map_err(|e| body_error(url, e))?.is_empty() {
        // git's upload-pack of v0/v1 ends the answer to a v2 command before its first byte.
        return Ok(None);
    }
    match read_ls_refs(url, resp, &full, server.format()) {
        Ok(tip) => Ok(Some(tip)),
        // An answer cut short is the network's; anything else is not a v2 ls-refs answer.
        Err(e) if e.is_transient() => Err(e),
        Err(e) => Err(Error::Protocol(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::url;
    use crate::wire::upload_pack::handshake::fetch_supports;
    use crate::wire::upload_pack::request::command_body;

    #[test]
    fn the_assumed_capabilities_are_v2_with_shallow_and_the_tip_s_format() {
        let branch: SessionBranch = "sessions/abc".parse().unwrap();
        for format in [Format::Sha1, Format::Sha256] {
            let server = assumed(format, &branch);
            assert_eq!(server.version(), 2);
            assert_eq!(server.format(), format);
            assert!(fetch_supports(&server, "shallow"));
            assert!(
                !fetch_supports(&server, "filter"),
                "asked for only when advertised"
            );
            let Server::Assumed {
                caps, confirmed, ..
            } = &server
            else {
                unreachable!()
            };
            assert!(!confirmed);
            let body = command_body(caps, "ls-refs", &["ref-prefix x".into()]).unwrap();
            let body = String::from_utf8_lossy(&body);
            // SHA-1 is what a v2 server takes a request without `object-format` for.
            assert_eq!(
                body.contains("object-format=sha256"),
                format == Format::Sha256,
                "{body}"
            );
            assert_eq!(body.contains("object-format"), format == Format::Sha256);
            assert!(body.contains("agent=git-session/"), "{body}");
            let other = if format == Format::Sha1 {
                "0123456789012345678901234567890123456789012345678901234567890123"
            } else {
                "0123456789012345678901234567890123456789"
            };
            let other: FullSha = other.parse().unwrap();
            assert!(server.check_tip(&url(), "TIP_SHA", other).is_err());
        }
    }
}
