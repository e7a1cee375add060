//! Step 3: fetch one commit (`gitprotocol-v2` "fetch"): the request sent here, its answer read by
//! [`super::response`] into [`super::packfile`]; a v0/v1 server gets [`super::v0`]'s request.

use std::io::{BufRead as _, BufReader};
use std::sync::atomic::AtomicBool;

use super::handshake::{Capabilities, Server, fetch_supports_v2, handshake};
use super::request::{command_body, send_fetch, v2_headers};
use super::response::read_fetch;
use super::v0::fetch_pack_v0;
use super::want::{Fetched, Want};
use crate::error::{Error, Result};
use crate::types::{RemoteUrl, SessionBranch};
use crate::wire::http::{Http, body_error};

/// Step 3: fetch `want.commit` (and its history up to `want.depth` commits) into `want.pack_dir`,
/// no tags, no other refs, and index the pack as it streams in (`POST git-upload-pack` with
/// `command=fetch`: `gitprotocol-v2` "fetch"; the pack in side-band channel 1, read under
/// [`crate::wire::watch::pack_start`]).
///
/// # Errors
/// [`Error::NotFound`] (exit 8) when the server does not have the commit (an `ERR` line or a
/// side-band error saying so); [`Error::Network`] (exit 5, retried) for a stream that breaks off,
/// before or inside the pack; [`Error::Protocol`] (exit 5) for a server without
/// `fetch=shallow` when a depth is asked for, malformed pkt-lines, an unknown section, a section
/// over [`MAX_SECTION_BYTES`](super::MAX_SECTION_BYTES), another `ERR` line or side-band error;
/// [`Error::Integrity`] (exit 6) for a corrupt pack or one over `want.limits`; [`Error::LocalIo`]
/// when the disk refuses the pack.
pub fn fetch_pack(
    http: &Http,
    url: &RemoteUrl,
    server: &Server,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    // By construction: no object is asked for in another format than the repository's.
    server.check_tip(url, "the commit", want.commit)?;
    let caps = match server {
        Server::V2(caps) => caps,
        Server::V0 { refs, .. } => return fetch_pack_v0(http, url, refs, want, interrupt),
        Server::Assumed {
            caps,
            branch,
            confirmed,
        } => {
            return fetch_assumed(http, url, (caps, branch, *confirmed), want, interrupt);
        }
    };
    let body = fetch_request(url, caps, &want)?;
    let resp = send_fetch(http, url, v2_headers(true), body, false)?;
    read_fetch(url, resp, want, interrupt)
}

/// The fetch of a [`Server::Assumed`]: sent with the assumed capabilities; when they cannot
/// make it (a filter is asked for) or the server refuses it (its answer ends before the first
/// byte, as git's upload-pack ends it on an argument it does not take; from a server not yet
/// known to speak v2, an `ERR` line that is not "not found", as a v0/v1 JGit sends; or an error status other than 401/403 and the
/// retried ones), the handshake
/// (`GET info/refs`) and the fetch again with what the server advertised: one extra request,
/// and the error the handshake's path gives when the server cannot make the fetch at all.
fn fetch_assumed(
    http: &Http,
    url: &RemoteUrl,
    (caps, branch, confirmed): (&Capabilities, &SessionBranch, bool),
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let why = match fetch_request(url, caps, &want) {
        Ok(body) => match send_fetch(http, url, v2_headers(true), body, !confirmed) {
            Ok(resp) => {
                let mut resp = BufReader::new(resp);
                let first = resp.fill_buf().map_err(|e| body_error(url, e))?;
                // JGit answers a v2 command with `ERR expected 'want'`; git with nothing.
                let err_line = !confirmed && first.get(4..8) == Some(b"ERR ");
                if first.is_empty() {
                    "an empty answer".to_owned()
                } else {
                    match read_fetch(url, resp, want, interrupt) {
                        Err(Error::Protocol(why)) if err_line => why,
                        other => {
                            return other.map(|fetched| Fetched {
                                posted: true,
                                ..fetched
                            });
                        }
                    }
                }
            }
            Err(e) if matches!(e, Error::Auth(_)) || e.is_transient() => return Err(e),
            // An error status: the handshake's answer says what the server is.
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    };
    tracing::info!(
        "{url} refused the fetch sent without the capability advertisement ({why}): asking for \
         its capabilities"
    );
    let server = handshake(http, url, branch)?;
    fetch_pack(http, url, &server, want, interrupt)
}

/// The `fetch` request (`gitprotocol-v2` "fetch"): `ofs-delta`, `no-progress`, with a base
/// `thin-pack` and a `shallow <id>` per shallow commit, `deepen <depth>` when a depth is asked
/// for, `want <commit>`, with a base a `have <id>` per commit it holds, `done`.
///
/// # Errors
/// [`Error::Protocol`] when a depth is asked for and the server's `fetch` lacks `shallow`.
fn fetch_request(url: &RemoteUrl, caps: &Capabilities, want: &Want<'_>) -> Result<Vec<u8>> {
    let mut args = vec!["ofs-delta".to_owned(), "no-progress".to_owned()];
    if let Some(base) = want.base {
        args.push("thin-pack".to_owned());
        args.extend(base.shallow.iter().map(|id| format!("shallow {id}")));
    }
    if let Some(depth) = want.depth {
        if !fetch_supports_v2(caps, "shallow") {
            return Err(Error::Protocol(format!(
                "{url} does not support shallow fetches (fetch=shallow), needed for --depth"
            )));
        }
        args.push(format!("deepen {depth}"));
    }
    args.push(format!("want {}", want.commit));
    args.extend(want.more.iter().map(|id| format!("want {id}")));
    if let Some(filter) = want.filter {
        if !fetch_supports_v2(caps, "filter") {
            return Err(Error::Protocol(format!(
                "{url} does not support partial clones (fetch=filter)"
            )));
        }
        args.push(format!("filter {filter}"));
    }
    if let Some(base) = want.base {
        args.extend(base.haves.iter().map(|id| format!("have {id}")));
    }
    args.push("done".to_owned());
    command_body(caps, "fetch", &args)
}
