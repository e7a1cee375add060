//! What the requests to upload-pack share: the headers (`Git-Protocol: version=2`, the content
//! types), a protocol v2 command's body (`gitprotocol-v2` "Command Request"), and the POST of a
//! fetch, over either protocol, whose answer is counted as it arrives.

use std::io::Read;

use gix::protocol::transport::client::Capabilities;
use gix_packetline::blocking_io::encode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};

use super::lines::AGENT;
use crate::error::{Error, Result};
use crate::types::RemoteUrl;
use crate::wire::http::{Http, Request};

/// `Git-Protocol: version=2`, and for a POST the content types of upload-pack's request and
/// result.
pub(super) fn v2_headers(post: bool) -> Vec<(HeaderName, HeaderValue)> {
    let mut h = vec![(
        HeaderName::from_static("git-protocol"),
        HeaderValue::from_static("version=2"),
    )];
    if post {
        h.push((
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-git-upload-pack-request"),
        ));
        h.push((
            ACCEPT,
            HeaderValue::from_static("application/x-git-upload-pack-result"),
        ));
    }
    h
}

/// A v2 command's body: `command=<command>`, `agent` and `object-format` where the server lists
/// them, a delimiter, `args` a line each, a flush.
pub(super) fn command_body(caps: &Capabilities, command: &str, args: &[String]) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(256);
    let io = |e| Error::io("encoding a pkt-line", e);
    encode::text_to_write(format!("command={command}").as_bytes(), &mut body).map_err(io)?;
    if caps.contains("agent") {
        encode::text_to_write(format!("agent={AGENT}").as_bytes(), &mut body).map_err(io)?;
    }
    if let Some(cap) = caps.capability("object-format") {
        // The one the server announced (the handshake refused any other value).
        let format = format!("object-format={}", cap.value().unwrap_or_default());
        encode::text_to_write(format.as_bytes(), &mut body).map_err(io)?;
    }
    encode::delim_to_write(&mut body).map_err(io)?;
    for a in args {
        encode::text_to_write(a.as_bytes(), &mut body).map_err(io)?;
    }
    encode::flush_to_write(&mut body).map_err(io)?;
    Ok(body)
}

/// `POST git-upload-pack` with a fetch request; the answer's bytes counted for the progress.
///
/// `posted`: sent without the handshake, an error status other than the credential's is
/// [`Error::Protocol`] ([`refused_status`]).
pub(super) fn send_fetch(
    http: &Http,
    url: &RemoteUrl,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Vec<u8>,
    posted: bool,
) -> Result<impl Read> {
    let resp = http.send_unchecked(
        url,
        Request {
            endpoint: "git-upload-pack",
            headers,
            body: Some(body.into()),
        },
    )?;
    let resp = if posted {
        refused_status(http, url, resp)?
    } else {
        http.check_status(url, resp)?
    };
    let resp = resp
        // The pack's bytes are measured instead (in receive_packfile): keep-alives come before them.
        .unmeasured();
    Ok(crate::progress::Counted {
        inner: resp,
        progress: crate::progress::Progress::bytes("receiving objects"),
    })
}

/// The status of an answer to a request posted without the handshake: 2xx passes; 401, 403 and
/// 407 are the credential's, 429, 502, 503 and 504 an overloaded server's or proxy's (retried,
/// posted again after the backoff) ([`Http::check_status`]); any other is a server that does not
/// take the request (Dulwich answers a v2 command with HTTP 500): [`Error::Protocol`], which the
/// caller falls back from.
///
/// # Errors
/// As above.
pub(super) fn refused_status(
    http: &Http,
    url: &RemoteUrl,
    resp: crate::wire::http::Body,
) -> Result<crate::wire::http::Body> {
    let status = resp.status();
    if status.is_success() || matches!(status.as_u16(), 401 | 403 | 407 | 429 | 502 | 503 | 504) {
        return http.check_status(url, resp);
    }
    Err(Error::Protocol(format!("{url} answered HTTP {status}")))
}
