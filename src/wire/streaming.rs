//! A client that reads response bodies on the calling thread, for many large downloads at once
//! (LFS objects).
//!
//! The blocking client runs every connection on one background thread and hands each body frame
//! to the reading thread: several futex calls per frame. A server that sends small chunks
//! (giftless's are 1.2 KB: 870 frames per MiB) then costs more in wake-ups than in bytes. Here
//! each transfer thread owns a single-threaded runtime and its own connections, and reads a whole
//! body in one `block_on`.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::{Method, Response};

use super::http::{Http, LowSpeed};
use super::watch;
use crate::error::{Error, Result};

/// One thread's client: its runtime, its connections.
pub struct Streaming<'a> {
    http: &'a Http,
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    read_timeout: Duration,
}

/// A response whose body is read through [`Streaming::each_chunk`].
pub struct Body {
    inner: Response,
    rule: LowSpeed,
}

impl Body {
    /// The status.
    pub fn status(&self) -> reqwest::StatusCode {
        self.inner.status()
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }
}

impl<'a> Streaming<'a> {
    /// A client with `http`'s settings, for this thread.
    ///
    /// # Errors
    /// [`Error::Internal`] when the runtime or client cannot be made.
    pub fn new(http: &'a Http) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the HTTP runtime", e))?;
        // The client's timers belong to the runtime it is made in.
        let in_runtime = runtime.enter();
        let client = http
            .builder()
            .build()
            .map_err(|e| Error::internal("building the HTTP client", e.without_url()))?;
        drop(in_runtime);
        Ok(Streaming {
            http,
            runtime,
            client,
            read_timeout: http.read_timeout(),
        })
    }

    /// The process's client (retries, `note_success`).
    pub fn http(&self) -> &Http {
        self.http
    }

    /// Send `method` to `url` with `headers`; the response head within the read timeout (and
    /// the retry budget, [`watch::bound`]).
    ///
    /// # Errors
    /// What went wrong ([`super::http::Failure`]): the caller words it.
    pub fn send(
        &self,
        method: Method,
        url: url::Url,
        headers: HeaderMap,
    ) -> std::result::Result<Body, super::http::Failure> {
        // Not the request's own `timeout`: that one bounds the whole body too.
        let send = self.client.request(method, url).headers(headers).send();
        watch::head();
        let stall = watch::bound(Some(self.read_timeout), Duration::ZERO);
        let until = tokio::time::Instant::from_std(stall.until);
        // The timer is made inside the runtime: it belongs to it.
        let inner = match self.runtime.block_on(async move {
            // This runtime runs only inside `block_on`, so a connection the server closed while
            // the thread was idle is noticed only now: one turn of its task first, so the pool
            // drops it instead of sending on it (a failed attempt, found by a helper's trial).
            tokio::task::yield_now().await;
            tokio::time::timeout_at(until, send).await
        }) {
            Err(_) => return Err(super::http::Failure::Stalled(stall)),
            Ok(Err(e)) => return Err(super::http::Failure::Transport(e)),
            Ok(Ok(inner)) => inner,
        };
        // An object's bytes are data from the first: none for the low-speed time fails. Only a
        // byte that comes restarts the retry budget (headers and then nothing are no progress).
        watch::headers();
        Ok(Body {
            inner,
            rule: LowSpeed::now(),
        })
    }

    /// Hand each piece of `body` to `each` until the end, or until `each` returns false.
    ///
    /// # Errors
    /// [`std::io::ErrorKind::TimedOut`] for a read that stalls past its bound ([`watch::bound`])
    /// or a transfer below the low-speed rule; another kind for a broken transfer.
    pub fn each_chunk(
        &self,
        body: &mut Body,
        mut each: impl FnMut(&[u8]) -> bool,
    ) -> std::io::Result<()> {
        let wait = self.read_timeout;
        self.runtime.block_on(async {
            loop {
                let stall = watch::bound(Some(wait), Duration::ZERO);
                let until = tokio::time::Instant::from_std(stall.until);
                let piece = match tokio::time::timeout_at(until, body.inner.chunk()).await {
                    Err(_) => return Err(stall.into_io()),
                    Ok(Err(e)) => return Err(std::io::Error::other(super::http::failure_kind(&e))),
                    Ok(Ok(piece)) => piece,
                };
                let n = piece.as_ref().map_or(0, Bytes::len);
                if n > 0 {
                    watch::data();
                }
                body.rule.count(n)?;
                match piece {
                    Some(piece) if each(&piece) => {}
                    _ => return Ok(()),
                }
            }
        })
    }
}
