//! The signing service's exchange, as a client (CONTRACT "Signing service"): one
//! `POST <SIGNING_URL>` whose body is the bytes to sign, answered by `200` and the armored SSH
//! signature (at most [`MAX_ANSWER`] bytes). The answer is returned unchecked: the caller verifies
//! it against the public key it expects before anything uses it.
//!
//! Retries as every request: 5xx, 429, stalls and transport failures within the one budget of
//! [`Http::retrying`]; a 401 or 403 re-reads a `_FILE` once and tries again (a rotated token).
//! Every failure is a [`ServiceError`] saying what happened, never the URL's credentials.

use std::fmt;
use std::io::Read as _;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::http::{self, Http, UrlSource};
use crate::error::Error;
use crate::types::RemoteUrl;

/// The most an answer may hold: an SSH signature is under 2 KiB (an RSA-4096 one), so anything
/// near this is not one.
pub const MAX_ANSWER: u64 = 64 * 1024;

/// The header naming the SSHSIG namespace to sign in (always `git`).
pub const NAMESPACE_HEADER: &str = "git-session-namespace";

/// The header naming the key to sign with, `<type> <base64>`, for a service holding several.
pub const PUBLIC_KEY_HEADER: &str = "git-session-public-key";

/// How many bytes of a refusal's body are shown (its first line, escaped and redacted).
const WORDS_SHOWN: usize = 200;

/// Why the service gave no signature, after every attempt allowed.
#[derive(Debug)]
pub struct ServiceError {
    /// What happened last.
    pub fault: Fault,
    /// The requests made.
    pub requests: u32,
    /// From the first request to the end.
    pub took: Duration,
}

/// What went wrong with one request.
#[derive(Debug)]
pub enum Fault {
    /// The URL's file could not be read, or holds no URL.
    Url(Error),
    /// An answer other than `200`: its status, and the first words of its body (escaped).
    Status {
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// The body's first line, at most [`WORDS_SHOWN`] bytes, or nothing.
        words: String,
    },
    /// Connecting, sending or receiving failed (the transport's words, never the URL).
    Transport(String),
    /// The service's TLS certificate was refused (what to say of it): the same one would be.
    Certificate(String),
    /// A wait ran out (which one, in words).
    Stalled(String),
    /// The answer is over [`MAX_ANSWER`] bytes.
    TooBig,
    /// The request cannot be made: a header value that is not one (what, in words).
    Unsendable(&'static str),
}

impl Fault {
    /// Whether another attempt may get an answer (as [`Error::is_transient`] judges requests).
    fn transient(&self) -> bool {
        match self {
            Fault::Transport(_) | Fault::Stalled(_) => true,
            Fault::Status { status, .. } => {
                status.is_server_error() || *status == reqwest::StatusCode::TOO_MANY_REQUESTS
            }
            Fault::Url(_) | Fault::Certificate(_) | Fault::TooBig | Fault::Unsendable(_) => false,
        }
    }

    /// A refused credential, which a re-read `_FILE` may have replaced.
    fn refused_credentials(&self) -> bool {
        matches!(self, Fault::Status { status, .. } if matches!(status.as_u16(), 401 | 403))
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Url(e) => write!(f, "could not be asked: {e}"),
            Fault::Status { status, words } => {
                write!(f, "answered HTTP {status}")?;
                if matches!(status.as_u16(), 401 | 403) {
                    f.write_str(" (its URL's credentials were refused)")?;
                } else if status.is_redirection() {
                    f.write_str(" (a redirect, which is not followed: give the final URL)")?;
                }
                if words.is_empty() {
                    Ok(())
                } else {
                    write!(f, ": {words}")
                }
            }
            Fault::Transport(words) => write!(f, "could not be reached: {words}"),
            Fault::Certificate(words) => write!(f, "could not be reached: {words}"),
            Fault::Stalled(words) => write!(f, "gave no signature in time: {words}"),
            Fault::TooBig => write!(
                f,
                "answered more than {MAX_ANSWER} bytes, which is no SSH signature: refused \
                 before reading the rest"
            ),
            Fault::Unsendable(what) => write!(f, "could not be asked: {what}"),
        }
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fault.fmt(f)?;
        if self.requests > 1 {
            write!(
                f,
                " ({} requests in {:.1} s)",
                self.requests,
                self.took.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

/// What to ask the service for.
pub struct Ask<'a> {
    /// The bytes to sign.
    pub payload: &'a [u8],
    /// The SSHSIG namespace (`git`).
    pub namespace: &'static str,
    /// The key to sign with, `<type> <base64>`.
    pub public_key: &'a str,
}

/// Ask the service at `source` for a signature of `ask.payload`: the answer's bytes, at most
/// [`MAX_ANSWER`], not yet checked.
///
/// # Errors
/// A [`ServiceError`] once no attempt allowed got a `200` answer of a bearable size.
pub fn sign(http: &Http, source: &UrlSource, ask: &Ask<'_>) -> Result<Vec<u8>, ServiceError> {
    let started = Instant::now();
    let failed = |fault, requests| ServiceError {
        fault,
        requests,
        took: started.elapsed(),
    };
    let headers = headers(ask).map_err(|f| failed(f, 0))?;
    let mut requests = 0;
    let mut last = None;
    let mut reread = source.rereadable();
    let out = http.retrying("asking the signing service for a signature", || {
        let once = |requests: &mut u32| {
            let url = source.load().map_err(Fault::Url)?;
            *requests += 1;
            request(http, &url, headers.clone(), ask.payload)
        };
        let mut answer = once(&mut requests);
        if reread && answer.as_ref().is_err_and(Fault::refused_credentials) {
            reread = false;
            tracing::info!("the signing service refused its URL's credentials; re-reading it once");
            answer = once(&mut requests);
        }
        answer.map_err(|fault| {
            // The retries judge (and log) it as a request's error; the fault is what is told.
            let error = if fault.transient() {
                Error::Network(fault.to_string())
            } else {
                Error::Protocol(fault.to_string())
            };
            last = Some(fault);
            error
        })
    });
    out.map_err(|_| {
        let fault = last.unwrap_or(Fault::Transport("no request was made".to_owned()));
        failed(fault, requests)
    })
}

/// One request: the answer's bytes when it is a `200` of at most [`MAX_ANSWER`] bytes.
fn request(
    http: &Http,
    url: &RemoteUrl,
    mut headers: HeaderMap,
    payload: &[u8],
) -> Result<Vec<u8>, Fault> {
    let target = url.endpoint("");
    let via = http::via_proxy(&target);
    if let Some(auth) = url.authorization() {
        headers.insert(reqwest::header::AUTHORIZATION, auth);
    }
    tracing::debug!("POST {url} (the signing service)");
    let resp = http
        .exchange(
            reqwest::Method::POST,
            target,
            headers,
            Some(payload.to_vec().into()),
        )
        .map_err(|f| match f {
            http::Failure::Transport(e) => {
                match http::certificate_refusal(
                    &url.endpoint("").origin().ascii_serialization(),
                    &e,
                ) {
                    Some(words) => Fault::Certificate(words),
                    None => Fault::Transport(http::described(&e)),
                }
            }
            http::Failure::Stalled(stall) => Fault::Stalled(format!("{}{via}", stall.describe())),
        })?;
    let status = resp.status();
    if status != reqwest::StatusCode::OK {
        return Err(Fault::Status {
            status,
            words: first_words(resp),
        });
    }
    let declared = resp
        .headers()
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_ANSWER) {
        return Err(Fault::TooBig);
    }
    let mut answer = Vec::new();
    resp.take(MAX_ANSWER + 1)
        .read_to_end(&mut answer)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::TimedOut => Fault::Stalled(format!("{e}{via}")),
            _ => Fault::Transport(format!("the answer broke off: {e}")),
        })?;
    if answer.len() as u64 > MAX_ANSWER {
        return Err(Fault::TooBig);
    }
    Ok(answer)
}

/// The request's headers but the credentials: the body's type, the namespace, the key.
fn headers(ask: &Ask<'_>) -> Result<HeaderMap, Fault> {
    let value = |text: &str, what| HeaderValue::from_str(text).map_err(|_| Fault::Unsendable(what));
    let mut headers = HeaderMap::new();
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(
        HeaderName::from_static(NAMESPACE_HEADER),
        value(ask.namespace, "the namespace is no header value")?,
    );
    headers.insert(
        HeaderName::from_static(PUBLIC_KEY_HEADER),
        value(ask.public_key, "the public key is no header value")?,
    );
    Ok(headers)
}

/// The first line of a refusal's body, at most [`WORDS_SHOWN`] bytes, with its control
/// characters escaped and the session's secrets redacted; nothing when it cannot be read.
fn first_words(resp: http::Body) -> String {
    let mut head = Vec::new();
    // A refusal that stalls or breaks off is told by its status alone.
    let _ = resp.take(WORDS_SHOWN as u64).read_to_end(&mut head);
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or_default().trim();
    crate::text::line_str(&crate::redact::text(line)).into_owned()
}
