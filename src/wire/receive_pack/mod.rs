//! The receive-pack client's wire half (`gitprotocol-http` "Smart Service git-receive-pack",
//! `gitprotocol-pack` "Pushing Data To a Server"): read the ref advertisement ([`crate::wire::advertisement`]),
//! send the request — the ref update and the pack — ([`send`]), read the report ([`report`]).
//! Deciding what to push is the write path's ([`crate::push`]).

pub mod report;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};

use crate::error::{Error, Result};
use crate::pack::generate::Spooled;
use crate::types::RemoteUrl;
use crate::wire::http::{Body, Http, Payload, Request};

/// Request bodies up to this size go out in one piece with a Content-Length; larger ones are
/// streamed after an authentication probe.
const SMALL_BODY: u64 = 64 * 1024;

/// Send the spooled request `body` to `url`'s `git-receive-pack`; the response's status is
/// checked, its body (the report) is the caller's to read.
///
/// Small bodies go out in one piece with a Content-Length (so an early refusal, a 401, is read,
/// not cut off). Large ones follow a probe — an empty request, as git's `probe_rpc` — so that
/// authentication fails before the upload, then stream from the spool, chunked; a server that
/// wants a length (411) gets it on a second try. Each send is given time for its whole body (see
/// [`Http::exchange`]).
///
/// # Errors
/// Those of [`Http::send_unchecked`] and [`Http::check_status`]; [`Error::LocalIo`] when the spool
/// cannot be read.
pub fn send(http: &Http, url: &RemoteUrl, body: &Spooled) -> Result<Body> {
    let headers = || {
        vec![
            (
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-git-receive-pack-request"),
            ),
            (
                ACCEPT,
                HeaderValue::from_static("application/x-git-receive-pack-result"),
            ),
        ]
    };
    let send = |payload: Payload| {
        http.send_unchecked(
            url,
            Request {
                endpoint: "git-receive-pack",
                headers: headers(),
                body: Some(payload),
            },
        )
    };
    let resp = if body.len <= SMALL_BODY {
        let mut bytes = Vec::with_capacity(body.len as usize);
        std::io::Read::read_to_end(&mut body.reader(), &mut bytes)
            .map_err(|e| Error::io("reading the spooled pack", e))?;
        send(bytes.into())?
    } else {
        let probe = send(b"0000".to_vec().into())?;
        http.check_status(url, probe)?;
        let sized = || -> Result<Body> { send(Payload::sized(body.reader(), body.len)) };
        if body.sized.get() {
            sized()?
        } else {
            let resp = send(Payload::chunked(body.reader())).inspect_err(|_| {
                // A server that answers before reading a chunked body (411) can look like a cut
                // connection: the retry, which re-reads the tip first, sends a length instead.
                body.sized.set(true);
            })?;
            if resp.status() == reqwest::StatusCode::LENGTH_REQUIRED {
                tracing::info!(
                    "the server refused a chunked body (411): resending with Content-Length"
                );
                body.sized.set(true);
                sized()?
            } else {
                resp
            }
        }
    };
    http.check_status(url, resp)
}
