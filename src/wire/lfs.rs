//! Git LFS over HTTP, as a client: pointers (git-lfs `docs/spec.md`), the batch API
//! (`docs/api/batch.md`: `POST {endpoint}/objects/batch`) and the basic transfer of one object
//! (`docs/api/basic-transfers.md`), its size and SHA-256 checked while it streams.
//!
//! # Security
//! The endpoint carries the session URL's credentials only when it has the session URL's origin
//! ([`RemoteUrl::lend_credentials`]). An action's `href` and `header` come from the server: the
//! headers go only to the `href`'s own origin, a redirect to another origin is followed without
//! any of them, and neither the `href` (whose query may hold a token) nor a header value is ever
//! shown: messages name the origin and the object id.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;

use super::http::{Http, Payload, Request};
use super::streaming::{self, Streaming};
use crate::error::{Error, Result};
use crate::types::RemoteUrl;
pub use crate::types::lfs::{MAX_POINTER_BYTES, Oid, Pointer};

/// Objects per batch request (git-lfs's `lfs.transfer.batchSize` default).
pub const BATCH_SIZE: usize = 100;

/// The most a batch response may hold: about 1 KiB per object is usual; 64 KiB each is plenty.
const MAX_BATCH_RESPONSE: u64 = (BATCH_SIZE as u64) << 16;

/// Redirects followed for one object (git-lfs follows 3).
const MAX_REDIRECTS: usize = 3;

const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";

/// An LFS server: the URL below which `objects/batch` lives.
#[derive(Debug, Clone)]
pub struct Endpoint(RemoteUrl);

impl Endpoint {
    /// git-lfs's default for a remote: `<url>.git/info/lfs` (`.git` added when the URL's path
    /// does not end so).
    pub fn of_remote(remote: &RemoteUrl) -> Endpoint {
        let suffix = if remote.path().ends_with(".git") {
            "/info/lfs"
        } else {
            ".git/info/lfs"
        };
        Endpoint(remote.with_path_suffix(suffix))
    }

    /// `url` (an `lfs.url` from the tree's `.lfsconfig`), with `remote`'s credentials only when
    /// it has `remote`'s origin.
    ///
    /// # Errors
    /// [`Error::Integrity`] (exit 6: the repository says something wrong, which no retry
    /// changes) for a URL that is not http(s) (the message does not repeat it).
    pub fn configured(url: &str, remote: &RemoteUrl) -> Result<Endpoint> {
        let parsed = RemoteUrl::parse(url).map_err(|e| {
            Error::Integrity(format!(
                "the LFS URL (lfs.url) in the tree's .lfsconfig is not one git-session uses: \
                 {e}; make lfs.url an http(s) URL in .lfsconfig (a restore can skip LFS with \
                 --lfs=never)"
            ))
        })?;
        Ok(Endpoint(remote.lend_credentials(parsed)))
    }

    /// The endpoint's URL (credential-free when shown).
    pub fn url(&self) -> &RemoteUrl {
        &self.0
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The transfer the server offered for one object.
pub struct Action {
    href: url::Url,
    header: HeaderMap,
}

impl Action {
    /// Where the transfer goes.
    pub fn href(&self) -> &url::Url {
        &self.href
    }
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Action({})", origin_of(&self.href))
    }
}

/// Which way a batch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Objects to fetch.
    Download,
    /// Objects to send.
    Upload,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Download => "download",
            Operation::Upload => "upload",
        }
    }
}

/// The server's answer for one object of a batch.
#[derive(Debug)]
pub enum Answer {
    /// Transfer it with this action (for an upload, then verify with the second, if any).
    Transfer(Box<Action>, Option<Box<Action>>),
    /// Nothing to do (an upload the server already has).
    Done,
}

#[derive(Deserialize)]
struct BatchResponse {
    #[serde(default)]
    transfer: Option<String>,
    objects: Vec<ObjectResponse>,
}

#[derive(Deserialize)]
struct ObjectResponse {
    oid: String,
    size: u64,
    #[serde(default)]
    actions: Option<BTreeMap<String, RawAction>>,
    #[serde(default)]
    error: Option<ObjectError>,
}

#[derive(Deserialize)]
struct RawAction {
    href: String,
    #[serde(default)]
    header: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct ObjectError {
    code: i64,
    #[serde(default)]
    message: String,
}

/// Ask `endpoint` how to move `objects` (at most [`BATCH_SIZE`]); one answer per object, in order.
///
/// # Errors
/// [`Error::NotFound`] (exit 8) when the server lacks an object to download, or has no LFS API;
/// [`Error::Auth`] for 401/403; [`Error::Network`] for 5xx and transport failures (retried by the
/// caller); [`Error::Protocol`] for an answer that is not the batch API's.
pub fn batch(
    http: &Http,
    endpoint: &Endpoint,
    operation: Operation,
    objects: &[Pointer],
) -> Result<Vec<Answer>> {
    let request = serde_json::json!({
        "operation": operation.as_str(),
        "transfers": ["basic"],
        "objects": objects.iter().map(|p| serde_json::json!({"oid": p.oid.to_string(), "size": p.size})).collect::<Vec<_>>(),
    });
    let body = serde_json::to_vec(&request).map_err(|e| Error::internal("encoding a batch", e))?;
    let url = endpoint.url();
    let resp = http.send_unchecked(
        url,
        Request {
            endpoint: "objects/batch",
            headers: vec![
                (
                    reqwest::header::ACCEPT,
                    HeaderValue::from_static(MEDIA_TYPE),
                ),
                (
                    reqwest::header::CONTENT_TYPE,
                    HeaderValue::from_static(MEDIA_TYPE),
                ),
            ],
            body: Some(body.into()),
        },
    )?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        return Err(Error::NotFound(format!(
            "{url} has no Git LFS API (objects/batch answered HTTP 404): set lfs.url in the tree's .lfsconfig, or restore with --lfs=never"
        )));
    }
    let resp = http.check_status(url, resp)?;
    let mut text = Vec::new();
    resp.take(MAX_BATCH_RESPONSE + 1)
        .read_to_end(&mut text)
        .map_err(|e| super::http::body_error(url, e))?;
    if text.len() as u64 > MAX_BATCH_RESPONSE {
        return Err(Error::Protocol(format!(
            "the LFS batch answer from {url} is over {MAX_BATCH_RESPONSE} bytes: refused"
        )));
    }
    parse_batch(url, operation, objects, &text)
}

/// The answers for `objects` in the batch response `text` from `url`.
///
/// # Errors
/// As [`batch`], for what the answer says.
pub fn parse_batch(
    url: &RemoteUrl,
    operation: Operation,
    objects: &[Pointer],
    text: &[u8],
) -> Result<Vec<Answer>> {
    let parsed: BatchResponse = serde_json::from_slice(text).map_err(|e| {
        Error::Protocol(format!(
            "{url} did not answer the LFS batch request with its JSON ({e})"
        ))
    })?;
    if parsed.transfer.as_deref().is_some_and(|t| t != "basic") {
        return Err(Error::Protocol(format!(
            "{url} chose an LFS transfer other than basic: refused"
        )));
    }
    objects
        .iter()
        .map(|p| answer_for(url, operation, p, &parsed.objects))
        .collect()
}

/// The answer for `pointer` among `objects`.
fn answer_for(
    url: &RemoteUrl,
    operation: Operation,
    pointer: &Pointer,
    objects: &[ObjectResponse],
) -> Result<Answer> {
    let oid = pointer.oid.to_string();
    let Some(o) = objects.iter().find(|o| o.oid == oid) else {
        return Err(Error::Protocol(format!(
            "{url} left LFS object {oid} ({} bytes) out of its batch answer",
            pointer.size
        )));
    };
    if o.size != pointer.size {
        // The pointer names the object by its SHA-256 and size: another size is another object,
        // and asking again gets the same answer.
        return Err(Error::Integrity(format!(
            "the LFS server {url} answered for object {oid} with a size of {} bytes where the \
             pointer says {}: the server's answer is wrong, retrying cannot help; ask its \
             administrator to check the object, or restore with --lfs=never",
            o.size, pointer.size
        )));
    }
    if let Some(e) = &o.error {
        // The server's words, bounded, redacted, and with control characters escaped (no fake
        // log lines, no terminal escapes).
        let msg = crate::text::line_str(&crate::redact::text(
            &e.message.chars().take(200).collect::<String>(),
        ))
        .into_owned();
        return Err(match e.code {
            404 | 410 => Error::NotFound(format!(
                "the LFS server {url} does not have object {oid} ({} bytes): {msg}; push it from a clone that has it (git lfs push --all)",
                pointer.size
            )),
            _ => Error::Protocol(format!(
                "the LFS server {url} refused object {oid} (code {}): {msg}",
                e.code
            )),
        });
    }
    let mut actions = o.actions.as_ref().map(|a| a.iter()).into_iter().flatten();
    let main = actions
        .clone()
        .find(|(k, _)| k.as_str() == operation.as_str());
    let verify = actions.find(|(k, _)| k.as_str() == "verify");
    match (main, operation) {
        (None, Operation::Upload) => Ok(Answer::Done),
        (None, Operation::Download) => Err(Error::Protocol(format!(
            "the LFS server {url} gave no download for object {oid}"
        ))),
        (Some((_, a)), _) => Ok(Answer::Transfer(
            Box::new(action(url, a)?),
            verify
                .map(|(_, v)| action(url, v).map(Box::new))
                .transpose()?,
        )),
    }
}

fn action(url: &RemoteUrl, raw: &RawAction) -> Result<Action> {
    let href = url::Url::parse(&raw.href)
        .ok()
        .filter(|h| matches!(h.scheme(), "http" | "https") && h.host_str().is_some())
        .ok_or_else(|| {
            Error::Protocol(format!(
                "the LFS server {url} gave an href that is not an http(s) URL"
            ))
        })?;
    let mut header = HeaderMap::new();
    for (k, v) in &raw.header {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            Error::Protocol(format!("the LFS server {url} gave a malformed header name"))
        })?;
        let mut value = HeaderValue::from_str(v).map_err(|_| {
            Error::Protocol(format!(
                "the LFS server {url} gave a malformed header value"
            ))
        })?;
        value.set_sensitive(true);
        header.insert(name, value);
    }
    Ok(Action { href, header })
}

/// Download the object `pointer` names by `action` into `out`, checking its size and SHA-256 as
/// it streams; `endpoint`'s credentials go along only to its own origin, when the action sets no
/// `Authorization` itself.
///
/// # Errors
/// [`Error::Integrity`] (exit 6) for more bytes than the pointer's size or content with another
/// SHA-256; [`Error::Network`] for fewer bytes, transport failures and 5xx (retried);
/// [`Error::Protocol`] for a redirect loop or another status.
pub fn download(
    stream: &Streaming<'_>,
    endpoint: &Endpoint,
    action: &Action,
    pointer: &Pointer,
    out: &mut dyn Write,
) -> Result<()> {
    let mut body = follow(
        stream,
        action.href.clone(),
        headers_for(endpoint, action),
        pointer,
    )?;
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut got = 0u64;
    let shown = origin_of(&action.href);
    let mut stopped = None;
    let read = stream.each_chunk(&mut body, |piece| {
        got += piece.len() as u64;
        if got > pointer.size {
            stopped = Some(Error::Integrity(format!(
                "{shown} sent more than the {} bytes of LFS object {}: refused",
                pointer.size, pointer.oid
            )));
            return false;
        }
        digest.update(piece);
        if let Err(e) = out.write_all(piece) {
            stopped = Some(Error::io(format!("writing LFS object {}", pointer.oid), e));
            return false;
        }
        true
    });
    if let Some(e) = stopped {
        return Err(e);
    }
    read.map_err(|e| {
        Error::Network(format!(
            "the transfer of LFS object {} from {shown} broke off: {e}",
            pointer.oid
        ))
    })?;
    if got < pointer.size {
        return Err(Error::Network(format!(
            "{shown} sent {got} of the {} bytes of LFS object {}",
            pointer.size, pointer.oid
        )));
    }
    let actual = Oid::of_digest(&digest.finish());
    if actual != pointer.oid {
        return Err(Error::Integrity(format!(
            "{shown} sent content with SHA-256 {actual} for LFS object {}: refused, nothing was written",
            pointer.oid
        )));
    }
    Ok(())
}

/// Upload `file` (the object `pointer` names) by `action` (a `PUT` of its bytes), then, when the
/// server asked for it, confirm it by `verify` (`POST {oid, size}`). `endpoint`'s credentials go
/// along only to its own origin, when the action sets no `Authorization` itself.
///
/// # Errors
/// [`Error::Network`] for transport failures and 5xx (retried by the caller);
/// [`Error::Rejected`] when the server refuses the object or its verification.
pub fn upload(
    http: &Http,
    endpoint: &Endpoint,
    (action, verify): (&Action, Option<&Action>),
    pointer: &Pointer,
    file: std::fs::File,
) -> Result<()> {
    let mut headers = headers_for(endpoint, action);
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    let put = http
        .exchange(
            reqwest::Method::PUT,
            action.href.clone(),
            headers,
            Some(Payload::sized(file, pointer.size)),
        )
        .map_err(|e| transfer_error(&action.href, &e))?;
    refuse_status(&action.href, put.status(), pointer, "upload")?;
    let Some(verify) = verify else {
        return Ok(());
    };
    let body = serde_json::json!({"oid": pointer.oid.to_string(), "size": pointer.size});
    let mut headers = headers_for(endpoint, verify);
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        HeaderValue::from_static(MEDIA_TYPE),
    );
    headers.insert(
        reqwest::header::ACCEPT,
        HeaderValue::from_static(MEDIA_TYPE),
    );
    let resp = http
        .exchange(
            reqwest::Method::POST,
            verify.href.clone(),
            headers,
            Some(serde_json::to_vec(&body).unwrap_or_default().into()),
        )
        .map_err(|e| transfer_error(&verify.href, &e))?;
    refuse_status(&verify.href, resp.status(), pointer, "verification")
}

fn refuse_status(
    at: &url::Url,
    status: reqwest::StatusCode,
    pointer: &Pointer,
    what: &str,
) -> Result<()> {
    if status.is_success() {
        return Ok(());
    }
    let shown = origin_of(at);
    Err(match status.as_u16() {
        407 => super::http::proxy_refused(at, &shown),
        s if s >= 500 || s == 429 => Error::Network(format!(
            "{shown} answered HTTP {status} to the {what} of LFS object {}",
            pointer.oid
        )),
        _ => Error::Rejected(format!(
            "{shown} refused the {what} of LFS object {} ({} bytes) with HTTP {status}",
            pointer.oid, pointer.size
        )),
    })
}

/// An action's headers, with `endpoint`'s credentials when it sets none and has its origin.
fn headers_for(endpoint: &Endpoint, action: &Action) -> HeaderMap {
    let mut headers = action.header.clone();
    if !headers.contains_key(reqwest::header::AUTHORIZATION)
        && endpoint.url().same_origin(&action.href)
        && let Some(auth) = endpoint.url().authorization()
    {
        headers.insert(reqwest::header::AUTHORIZATION, auth);
    }
    headers
}

/// GET `href`, following up to [`MAX_REDIRECTS`] redirects; every header is dropped for good
/// once a redirect leaves `href`'s origin.
fn follow(
    stream: &Streaming<'_>,
    href: url::Url,
    mut headers: HeaderMap,
    pointer: &Pointer,
) -> Result<streaming::Body> {
    let first = href.origin();
    let mut at = href;
    for _ in 0..=MAX_REDIRECTS {
        let resp = stream
            .send(reqwest::Method::GET, at.clone(), headers.clone())
            .map_err(|failure| transfer_error(&at, &failure))?;
        let status = resp.status();
        if status.is_success() {
            stream.http().note_success();
            return Ok(resp);
        }
        if status.is_redirection()
            && let Some(next) = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| at.join(l).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
        {
            if next.origin() != first {
                headers.clear();
            }
            tracing::debug!(
                "LFS object {} redirected to {}",
                pointer.oid,
                origin_of(&next)
            );
            at = next;
            continue;
        }
        return Err(status_error(&at, status, pointer));
    }
    Err(Error::Protocol(format!(
        "{} redirected LFS object {} more than {MAX_REDIRECTS} times",
        origin_of(&at),
        pointer.oid
    )))
}

fn status_error(at: &url::Url, status: reqwest::StatusCode, pointer: &Pointer) -> Error {
    let shown = origin_of(at);
    let oid = pointer.oid;
    match status.as_u16() {
        407 => super::http::proxy_refused(at, &shown),
        404 | 410 => Error::NotFound(format!(
            "{shown} does not have LFS object {oid} (HTTP {status})"
        )),
        401 | 403 => Error::Protocol(format!(
            "{shown} refused the transfer of LFS object {oid} (HTTP {status}): the LFS server's link may have expired; run again"
        )),
        s if s >= 500 || s == 429 => Error::Network(format!(
            "{shown} answered HTTP {status} for LFS object {oid}"
        )),
        _ => Error::Protocol(format!(
            "{shown} answered HTTP {status} for LFS object {oid}"
        )),
    }
}

fn transfer_error(at: &url::Url, failure: &super::http::Failure) -> Error {
    if let super::http::Failure::Transport(e) = failure
        && let Some(words) = super::http::certificate_refusal(&origin_of(at), e)
    {
        return Error::Protocol(words);
    }
    let kind = match failure {
        super::http::Failure::Transport(e) => super::http::failure_kind(e),
        super::http::Failure::Stalled(stall) => {
            format!("{}{}", stall.describe(), super::http::via_proxy(at))
        }
    };
    Error::Network(format!("{kind}: {}", origin_of(at)))
}

/// `scheme://host:port` of `url`: what messages show of a server's link (its path and query may
/// hold a token).
pub fn origin_of(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_endpoint_is_git_lfs_s() {
        let u = |s: &str| RemoteUrl::parse(s).expect("url");
        assert_eq!(
            Endpoint::of_remote(&u("http://h/r.git")).to_string(),
            "http://h/r.git/info/lfs"
        );
        assert_eq!(
            Endpoint::of_remote(&u("https://h/o/r")).to_string(),
            "https://h/o/r.git/info/lfs"
        );
    }

    #[test]
    fn credentials_go_only_to_the_same_origin() {
        let read = RemoteUrl::parse("http://t:secret-token@h:1/r.git").expect("url");
        let same = Endpoint::configured("http://h:1/lfs", &read).expect("ok");
        assert!(same.url().has_credentials());
        for other in ["http://h:2/lfs", "https://h:1/lfs", "http://evil:1/lfs"] {
            let e = Endpoint::configured(other, &read).expect("ok");
            assert!(!e.url().has_credentials(), "{other}");
        }
        assert!(Endpoint::configured("file:///etc", &read).is_err());
    }
}
