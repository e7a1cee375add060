//! The HTTP client shared by every data flow: TLS roots, timeouts, bounded retries, status mapping.
//!
//! Follows the SPEC's "Network behaviour": connect timeout 10 s, a read that stalls 60 s fails,
//! transient failures (connect errors, resets, timeouts, HTTP 5xx/429) retried up to 4 attempts with
//! exponential backoff and jitter within about 60 s; 4xx not retried, except one retry after a 401
//! when a `_FILE` held the URL (re-read first).
//!
//! Test knobs (environment): `GIT_SESSION_RETRY_BASE_MS` (first backoff delay, default 1000),
//! `GIT_SESSION_READ_TIMEOUT_MS` (default 60000), `GIT_SESSION_CONNECT_TIMEOUT_MS` (default 10000).
//!
//! # Security
//! Requests carry credentials only as a sensitive `Authorization` header built from
//! [`RemoteUrl::authorization`]; the URLs given to reqwest carry no userinfo, and reqwest errors are
//! stripped of their URL before they become messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, StatusCode};

use super::{proxy, tls, watch};
use crate::error::{Error, Result};
use crate::types::RemoteUrl;

pub use super::payload::Payload;
pub use crate::inputs::UrlSource;

/// The slowest upload speed that is still not a stall, in bytes per second (16 KiB/s): see
/// [`Http::send_upload`].
pub const MIN_UPLOAD_BYTES_PER_SEC: u64 = 16 * 1024;

/// At most this many attempts of one operation (SPEC "Network behaviour").
const MAX_ATTEMPTS: u32 = 4;

pub use crate::knobs::Protocol;

fn client_builder(tls: rustls::ClientConfig, connect_timeout: Duration) -> reqwest::ClientBuilder {
    let builder = reqwest::ClientBuilder::new()
        .connect_timeout(connect_timeout)
        .user_agent(concat!(
            "git/2.47-compatible git-session/",
            env!("CARGO_PKG_VERSION")
        ))
        .redirect(reqwest::redirect::Policy::none())
        .tls_backend_preconfigured(tls);
    // The proxy chosen here is the one errors name ([`proxy::for_target`]), never reqwest's own
    // reading of the environment.
    match proxy::get() {
        Ok(proxies) if !proxies.is_empty() => builder.proxy(reqwest::Proxy::custom(|target| {
            proxy::for_target(target).map(|p| p.url().clone())
        })),
        _ => builder.no_proxy(),
    }
}

/// One HTTP client for the whole process, with the retry policy. Its connections run on one
/// runtime thread; a caller waits for each response head and body chunk under the clock of
/// [`super::watch`], so no wait is bounded only by the server.
pub struct Http {
    client: Client,
    runtime: Arc<tokio::runtime::Runtime>,
    /// What [`Http::builder`] makes another client from.
    tls: rustls::ClientConfig,
    connect_timeout: Duration,
    /// The upload-pack protocol to speak (`GIT_SESSION_PROTOCOL`).
    pub protocol: Protocol,
    /// How long a read may stall (`GIT_SESSION_READ_TIMEOUT_MS`, 60 s).
    read_timeout: Duration,
    retry_base: Duration,
    retry_total: Duration,
    succeeded_once: AtomicBool,
}

/// A request to a smart-HTTP endpoint below the repository URL.
pub struct Request<'a> {
    /// The endpoint below the repository, e.g. `info/refs?service=git-upload-pack`.
    pub endpoint: &'a str,
    /// Extra headers (`Git-Protocol`, `Content-Type`, `Accept`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The POST body; `None` sends a GET. A body without a known length goes out chunked.
    pub body: Option<Payload>,
}

/// Why a request got no response: the transport's error, or a wait that ran out.
#[derive(Debug)]
pub enum Failure {
    /// Connecting, sending or receiving failed.
    Transport(reqwest::Error),
    /// No response head within the bound.
    Stalled(watch::Stall),
}

impl Failure {
    /// In a few words, without the URL.
    pub fn describe(&self) -> String {
        match self {
            Failure::Transport(e) => described(e),
            Failure::Stalled(stall) => stall.describe(),
        }
    }
}

impl Http {
    /// Build the client: the TLS configuration of [`tls`] (its CA roots read on the first
    /// handshake, so a plain `http://` run reads none), the proxies of [`proxy`].
    ///
    /// # Errors
    /// [`Error::Usage`] for an unusable proxy variable (a git CA variable naming an unusable
    /// file is refused on the first handshake, [`tls::refusal`]); [`Error::Internal`] when the
    /// TLS configuration, the runtime or the client cannot be built.
    pub fn new() -> Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        proxy::get()?;
        let tls = tls::client_config()?;

        let knobs = crate::knobs::get();
        // One worker: connections (and an upload's body) make progress while the caller is
        // between reads, as the blocking client's background thread did.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("git-session-http")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the HTTP runtime", e))?;
        let in_runtime = runtime.enter();
        let client = client_builder(tls.clone(), knobs.connect_timeout)
            .build()
            .map_err(|e| Error::internal("building the HTTP client", e.without_url()))?;
        drop(in_runtime);
        Ok(Http {
            client,
            runtime: Arc::new(runtime),
            tls,
            connect_timeout: knobs.connect_timeout,
            protocol: knobs.protocol,
            read_timeout: knobs.read_timeout,
            retry_base: knobs.retry_base,
            retry_total: knobs.retry_total,
            succeeded_once: AtomicBool::new(false),
        })
    }

    /// Run `op` against the URL from `source` with the SPEC's bounded retries: transient failures
    /// ([`Error::is_transient`]) are retried; a 401 is retried once after re-reading a `_FILE`.
    /// `op` should do the whole exchange (send and consume the body) so a cut stream is retried too.
    ///
    /// # Errors
    /// The last attempt's error.
    pub fn with_retries<T>(
        &self,
        source: &UrlSource,
        what: &str,
        mut op: impl FnMut(&RemoteUrl) -> Result<T>,
    ) -> Result<T> {
        let mut reread_after_401 = source.rereadable();
        let attempt = || -> Result<T> {
            let url = source.load()?;
            match op(&url) {
                Err(Error::Auth(a)) if reread_after_401 && a.status == 401 => {
                    reread_after_401 = false;
                    tracing::info!("{what}: HTTP 401; re-reading the URL file once");
                    let url = source.load()?;
                    op(&url)
                }
                other => other,
            }
        };
        self.retrying(what, attempt)
    }

    /// Run `attempt` with the SPEC's bounded retries of transient failures
    /// ([`Error::is_transient`]): at most [`MAX_ATTEMPTS`], every wait of every attempt and the
    /// backoff between them within `GIT_SESSION_RETRY_TOTAL_MS` (90 s) of the first; an attempt
    /// in which data flowed starts that budget again. Inside another's budget, the earlier end
    /// holds.
    ///
    /// # Errors
    /// The last attempt's error.
    pub fn retrying<T>(&self, what: &str, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
        let total = self.retry_total;
        let started = Instant::now();
        let mut end = started + total;
        if let Some(outer) = watch::budget_end() {
            end = end.min(outer);
        }
        let mut tries = 1;
        loop {
            let saved = watch::begin_attempt(end, total);
            let out = attempt();
            let flowed = watch::end_attempt(saved);
            let err = match out {
                Err(e) if e.is_transient() => e,
                other => return other,
            };
            if flowed && watch::budget_end().is_none() {
                end = Instant::now() + total;
            }
            let delay = self.backoff(tries);
            if tries >= MAX_ATTEMPTS || Instant::now() + delay >= end {
                return Err(gave_up(err, tries, started.elapsed()));
            }
            tracing::warn!("{what} failed ({err}); retrying in {delay:.1?}");
            std::thread::sleep(delay);
            tries += 1;
        }
    }

    /// The wait before attempt `tries + 1`: the base doubled each time (at most 16 times it),
    /// plus up to half again of jitter.
    fn backoff(&self, tries: u32) -> Duration {
        let delay = self.retry_base * 2u32.pow((tries - 1).min(4));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        delay + delay.mul_f64(f64::from(nanos % 1000) / 2000.0)
    }

    /// `GET info/refs?service=<service>` (`gitprotocol-http` "Smart Clients"), with `headers`;
    /// returns the body once its Content-Type is `application/x-<service>-advertisement`.
    ///
    /// # Errors
    /// As [`Http::send`]; [`Error::Protocol`] for another Content-Type (not a smart server).
    pub fn advertisement(
        &self,
        url: &RemoteUrl,
        service: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Body> {
        let endpoint = format!("info/refs?service={service}");
        let resp = self.send(
            url,
            Request {
                endpoint: &endpoint,
                headers,
                body: None,
            },
        )?;
        let ctype = resp.media_type();
        if ctype != format!("application/x-{service}-advertisement") {
            return Err(Error::Protocol(format!(
                "{url} is not a smart-HTTP git server for {service} (Content-Type '{ctype}')"
            )));
        }
        Ok(resp)
    }

    /// Send one request and return the response if its status is 2xx, its body read under the
    /// low-speed rule ([`Body`]).
    ///
    /// # Errors
    /// See [`Http::check_status`]; connect errors, timeouts and resets are [`Error::Network`].
    pub fn send(&self, url: &RemoteUrl, req: Request<'_>) -> Result<Body> {
        let resp = self.send_unchecked(url, req)?;
        self.check_status(url, resp)
    }

    /// A request to any URL (an LFS server's action `href`), with no credentials added: the
    /// caller sets the headers it means to send. The response head within the read timeout (or
    /// `upload`'s allowance for a body of that many bytes), the phase's and the budget's bounds.
    ///
    /// # Errors
    /// What failed, in a few words ([`Failure::describe`]); the caller words it.
    pub fn exchange(
        &self,
        method: reqwest::Method,
        target: url::Url,
        headers: HeaderMap,
        body: Option<Payload>,
    ) -> std::result::Result<Body, Failure> {
        let upload = body.as_ref().and_then(Payload::known_len).unwrap_or(0);
        // The upload is part of the wait for the head: a body on a slow link is given time
        // (as git's http.lowSpeedLimit judges throughput, not the total time).
        let allowance = Duration::from_secs(upload.div_ceil(MIN_UPLOAD_BYTES_PER_SEC));
        let mut builder = self.client.request(method, target).headers(headers);
        if let Some(body) = body {
            builder = builder.body(body.into_body());
        }
        watch::head();
        let stall = watch::bound(Some(self.read_timeout + allowance), allowance);
        let until = tokio::time::Instant::from_std(stall.until);
        let sent = self
            .runtime
            .block_on(async move { tokio::time::timeout_at(until, builder.send()).await });
        match sent {
            Err(_) => Err(Failure::Stalled(stall)),
            Ok(Err(e)) => Err(Failure::Transport(e)),
            Ok(Ok(inner)) => {
                watch::response();
                Ok(Body {
                    inner,
                    runtime: self.runtime.clone(),
                    read_timeout: self.read_timeout,
                    pending: bytes::Bytes::new(),
                    ended: false,
                    rule: Some(LowSpeed::now()),
                })
            }
        }
    }

    /// An async client with this one's settings (TLS, timeouts, user agent, no redirects), for
    /// [`super::streaming::Streaming`].
    pub(crate) fn builder(&self) -> reqwest::ClientBuilder {
        client_builder(self.tls.clone(), self.connect_timeout)
    }

    /// How long a read may stall.
    pub(crate) fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// Record that a request succeeded (a later 401 then reads as a revoked credential).
    pub fn note_success(&self) {
        self.succeeded_once.store(true, Ordering::Relaxed);
    }

    /// Send one request and return the response whatever its status. A body's upload is given
    /// time by its length ([`Http::exchange`]).
    ///
    /// # Errors
    /// Connect errors, timeouts and resets are [`Error::Network`].
    pub fn send_unchecked(&self, url: &RemoteUrl, req: Request<'_>) -> Result<Body> {
        let target = url.endpoint(req.endpoint);
        let mut headers = HeaderMap::new();
        for (k, v) in req.headers {
            headers.insert(k, v);
        }
        if let Some(auth) = url.authorization() {
            headers.insert(reqwest::header::AUTHORIZATION, auth);
        }
        let method = if req.body.is_some() {
            reqwest::Method::POST
        } else {
            reqwest::Method::GET
        };
        tracing::debug!(
            "{method} {url}/{}",
            req.endpoint.split('?').next().unwrap_or_default()
        );
        let via = via_proxy(&target);
        self.exchange(method, target, headers, req.body)
            .map_err(|f| match f {
                // A git CA variable the handshake found unusable: exit 2, naming it.
                Failure::Transport(e) => tls::refusal().unwrap_or_else(|| transport_error(url, e)),
                Failure::Stalled(stall) => {
                    Error::Network(format!("{url}: {}{via}", stall.describe()))
                }
            })
    }

    /// Map an HTTP status to the SPEC's exit codes: 2xx passes; 407 → [`proxy_refused`];
    /// 401/403 → [`Error::Auth`];
    /// 404 → [`Error::NotFound`]; 5xx and 429 → [`Error::Network`] (retried); redirects and other
    /// 4xx → [`Error::Protocol`] (exit 5, not retried).
    ///
    /// # Errors
    /// As above.
    pub fn check_status(&self, url: &RemoteUrl, resp: Body) -> Result<Body> {
        let status = resp.status();
        if status.is_success() {
            self.succeeded_once.store(true, Ordering::Relaxed);
            return Ok(resp);
        }
        Err(match status {
            StatusCode::PROXY_AUTHENTICATION_REQUIRED => {
                proxy_refused(&url.endpoint(""), &url.to_string())
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                use crate::error::AuthCause;
                let cause = if !url.has_credentials() {
                    AuthCause::NoCredentials
                } else if status == StatusCode::UNAUTHORIZED
                    && self.succeeded_once.load(Ordering::Relaxed)
                {
                    AuthCause::RefusedAfterSuccess
                } else {
                    AuthCause::Refused
                };
                Error::Auth(Box::new(crate::error::Auth {
                    url: url.to_string(),
                    status: status.as_u16(),
                    cause,
                    expires_at: url.jwt_expiry(),
                    write: false,
                }))
            }
            StatusCode::NOT_FOUND => {
                Error::NotFound(format!("repository not found at {url} (HTTP 404)"))
            }
            s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => {
                Error::Network(format!("{url} answered HTTP {s}"))
            }
            s if s.is_redirection() => Error::Protocol(format!(
                "{url} answered HTTP {s} (a redirect): git-session does not follow redirects; use the final URL"
            )),
            // Other 4xx: the request itself is refused; retrying cannot help.
            s => Error::Protocol(format!("{url} answered HTTP {s}")),
        })
    }
}

/// git's low-speed rule (`http.lowSpeedLimit`/`lowSpeedTime`, curl's
/// `CURLOPT_LOW_SPEED_LIMIT`/`_TIME`): a transfer that stays below 1 KiB/s for 60 s fails, even
/// when each single read comes in under the read timeout (a server dripping one byte at a time).
/// A failing read is [`std::io::ErrorKind::TimedOut`], which the callers report as a network
/// failure (exit 5, retried). Waits with no byte at all are [`super::watch`]'s.
///
/// Test knobs: `GIT_SESSION_LOW_SPEED_LIMIT` (bytes per second, default 1024),
/// `GIT_SESSION_LOW_SPEED_TIME_MS` (default 60000).
#[derive(Debug, Clone)]
pub struct LowSpeed {
    limit: u64,
    time: Duration,
    /// Where the current measuring window began (`None`: at the first byte).
    window: Option<Instant>,
    bytes: u64,
}

impl LowSpeed {
    /// Measured from now.
    pub fn now() -> Self {
        LowSpeed {
            window: Some(Instant::now()),
            ..LowSpeed::after_first_byte()
        }
    }

    /// Measured from the first byte on: the wait before it (a pack being prepared, a push being
    /// applied) is not a slow transfer, and is bounded by [`super::watch`].
    pub fn after_first_byte() -> Self {
        LowSpeed {
            limit: crate::knobs::get().low_speed_limit,
            time: crate::knobs::get().low_speed_time,
            window: None,
            bytes: 0,
        }
    }

    /// Count a read of `n` bytes.
    ///
    /// # Errors
    /// [`std::io::ErrorKind::TimedOut`] when the rule is broken.
    pub fn count(&mut self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let start = *self.window.get_or_insert(now);
        self.bytes += n as u64;
        let elapsed = now.duration_since(start);
        if elapsed >= self.time {
            let wanted = self.limit.saturating_mul(elapsed.as_millis() as u64) / 1000;
            if self.bytes < wanted {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the transfer stayed below {} bytes/s for {:.1} s ({} bytes; \
                         GIT_SESSION_LOW_SPEED_LIMIT and GIT_SESSION_LOW_SPEED_TIME_MS, as git's \
                         http.lowSpeedLimit/lowSpeedTime)",
                        self.limit,
                        elapsed.as_secs_f64(),
                        self.bytes,
                    ),
                ));
            }
            self.window = Some(now);
            self.bytes = 0;
        }
        Ok(())
    }
}

/// A reader of pack data held to a [`LowSpeed`] rule; each read with data tells
/// [`super::watch::data`] (keep-alives and progress never reach it).
pub struct Measured<R> {
    inner: R,
    rule: LowSpeed,
    gave_up: bool,
}

impl<R> Measured<R> {
    /// `inner` under `rule`, its first byte awaited as a pack's ([`super::watch::pack_start`]).
    pub fn new(inner: R, rule: LowSpeed) -> Self {
        watch::pack_start();
        Measured {
            inner,
            rule,
            gave_up: false,
        }
    }

    /// Whether the rule was broken: a read failed because the transfer was too slow (a network
    /// failure, whatever the reader above made of the failed read).
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    fn count(&mut self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            watch::data();
        }
        self.rule.count(n).inspect_err(|_| self.gave_up = true)
    }
}

impl<R: std::io::Read> std::io::Read for Measured<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf).inspect_err(|e| {
            if e.kind() == std::io::ErrorKind::TimedOut {
                self.gave_up = true;
            }
        })?;
        self.count(n)?;
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for Measured<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        let gave_up = &mut self.gave_up;
        self.inner.fill_buf().inspect_err(|e| {
            if e.kind() == std::io::ErrorKind::TimedOut {
                *gave_up = true;
            }
        })
    }

    fn consume(&mut self, n: usize) {
        // A broken rule shows at the next read: `consume` cannot fail.
        let _ = self.count(n);
        self.inner.consume(n);
    }
}

/// A response: its status and headers, and its body read chunk by chunk, each wait bounded by
/// [`super::watch::bound`] (the read timeout, the phase, the budget), the bytes under a
/// [`LowSpeed`] rule (or none, when the payload is measured instead: a fetch's pack, see
/// [`Body::unmeasured`]).
pub struct Body {
    inner: reqwest::Response,
    runtime: Arc<tokio::runtime::Runtime>,
    read_timeout: Duration,
    pending: bytes::Bytes,
    ended: bool,
    rule: Option<LowSpeed>,
}

impl Body {
    /// Not measured here: the caller measures the payload (a fetch's pack bytes, between which
    /// upload-pack sends keep-alives while it prepares the pack).
    pub fn unmeasured(mut self) -> Self {
        self.rule = None;
        self
    }

    /// A push's report: the server applies the push (its hooks, its index-pack) before the first
    /// byte, bounded by `GIT_SESSION_FIRST_BYTE_WAIT_MS` alone; the report is small.
    pub fn for_report(mut self) -> Self {
        watch::working();
        self.rule = None;
        self
    }

    /// A download the server may take a while to start (an archive it makes on the fly): the
    /// first byte as [`Body::for_report`], then the low-speed rule.
    pub fn streaming(mut self) -> Self {
        watch::working();
        self.rule = Some(LowSpeed::after_first_byte());
        self
    }

    /// The response's media type: its Content-Type without parameters (`; charset=…`), in lower
    /// case, as git compares it (RFC 9110 8.3.1: the type is case-insensitive); empty when absent
    /// or not visible ASCII.
    pub fn media_type(&self) -> String {
        media_type(self.headers().get(reqwest::header::CONTENT_TYPE))
    }

    /// The response's headers.
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }

    /// The response's status.
    pub fn status(&self) -> StatusCode {
        self.inner.status()
    }

    /// The next chunk into `pending`; false at the end.
    fn next_chunk(&mut self) -> std::io::Result<bool> {
        while self.pending.is_empty() {
            if self.ended {
                return Ok(false);
            }
            let stall = watch::bound(Some(self.read_timeout), Duration::ZERO);
            let until = tokio::time::Instant::from_std(stall.until);
            let inner = &mut self.inner;
            let chunk = self
                .runtime
                .block_on(async move { tokio::time::timeout_at(until, inner.chunk()).await });
            match chunk {
                Err(_) => return Err(stall.into_io()),
                Ok(Err(e)) => return Err(std::io::Error::other(described(&e))),
                Ok(Ok(None)) => self.ended = true,
                Ok(Ok(Some(piece))) => {
                    // A body measured here (an archive) renews the data wait with every piece;
                    // a fetch's pack is measured above it, where keep-alives are told apart.
                    let carries_data = match watch::phase() {
                        watch::Phase::Working => true,
                        watch::Phase::Flowing => self.rule.is_some(),
                        _ => false,
                    };
                    if !piece.is_empty() {
                        watch::body_began();
                    }
                    if !piece.is_empty() && carries_data {
                        watch::data();
                    }
                    self.pending = piece;
                }
            }
        }
        Ok(true)
    }
}

impl std::io::Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() || !self.next_chunk()? {
            return Ok(0);
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        if let Some(rule) = self.rule.as_mut() {
            rule.count(n)?;
        }
        Ok(n)
    }
}

/// A Content-Type's media type (see [`Body::media_type`]).
fn media_type(value: Option<&HeaderValue>) -> String {
    let text = value.and_then(|v| v.to_str().ok()).unwrap_or_default();
    let kind = text.split_once(';').map_or(text, |(kind, _)| kind);
    kind.trim().to_ascii_lowercase()
}

/// The last attempt's error, saying how many were made and for how long.
fn gave_up(err: Error, tries: u32, took: Duration) -> Error {
    match err {
        Error::Network(msg) if tries > 1 => Error::Network(format!(
            "{msg} (gave up after {tries} attempts in {:.1} s)",
            took.as_secs_f64()
        )),
        other => other,
    }
}

/// What went wrong with a request, in a few words (never the URL), naming the proxy it went
/// through: "could not connect to the proxy …" when the proxy itself could not be reached.
pub fn failure_kind(err: &reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "transfer failed"
    };
    match through_proxy(err) {
        Some(p) if proxy_unreachable(err) => format!("could not connect to the proxy {p}"),
        Some(p) => format!("{kind} through the proxy {p}"),
        None => kind.to_owned(),
    }
}

/// An HTTP 407 to a request for `target` (`shown`: how messages show it): the proxy wants
/// credentials, or others. Not retried: the same request would be refused again.
pub fn proxy_refused(target: &url::Url, shown: &str) -> Error {
    Error::Protocol(match proxy::for_target(target) {
        Some(p) if p.has_credentials() => format!(
            "the proxy {p} refused its credentials (HTTP 407) for {shown}: check the user and \
             password in that variable's URL"
        ),
        Some(p) => format!(
            "the proxy {p} asks for credentials (HTTP 407) for {shown}: give them in that \
             variable's URL (http://USER:PASSWORD@HOST:PORT)"
        ),
        None => format!("{shown} answered HTTP 407 (proxy authentication required)"),
    })
}

/// ` (through the proxy …)` when a request to `target` goes through one, else nothing: for a
/// failure the proxy may be the cause of (a stalled answer).
pub fn via_proxy(target: &url::Url) -> String {
    proxy::for_target(target).map_or_else(String::new, |p| format!(" (through the proxy {p})"))
}

/// The proxy `err`'s request went through, if any.
fn through_proxy(err: &reqwest::Error) -> Option<&'static proxy::Proxy> {
    err.url().and_then(proxy::for_target)
}

/// Whether a request through a proxy failed to reach the proxy itself: a connection refused or
/// unroutable. Through a proxy the only connection made is the one to the proxy (the proxy
/// connects to the server), so such an error is the proxy's; a failure after it (a refused
/// tunnel, the server's TLS) is not.
fn proxy_unreachable(err: &reqwest::Error) -> bool {
    use std::io::ErrorKind;
    err.is_connect()
        && causes(err).any(|e| {
            e.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    ErrorKind::ConnectionRefused
                        | ErrorKind::HostUnreachable
                        | ErrorKind::NetworkUnreachable
                        | ErrorKind::AddrNotAvailable
                )
            })
        })
}

/// The causes of `err`, outermost first (`err` itself not included).
fn causes(err: &reqwest::Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(err), |e| e.source())
}

/// The certificate error among `err`'s causes (an unknown issuer, another name, expired…), if
/// any. rustls's error sits inside `io::Error`s (one in another), whose `source` skips it.
fn certificate_refused(err: &reqwest::Error) -> Option<String> {
    causes(err).find_map(|cause| {
        let mut e: &(dyn std::error::Error + 'static) = cause;
        // Bounded: the nesting is the connectors' (two deep today).
        for _ in 0..8 {
            if let Some(rustls::Error::InvalidCertificate(c)) = e.downcast_ref::<rustls::Error>() {
                return Some(format!("{c:?}"));
            }
            match e
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
            {
                Some(inner) => e = inner,
                None => return None,
            }
        }
        None
    })
}

/// When `err` is the refusal of a server's TLS certificate: what to say of it, the server shown
/// as `shown`. Such a failure is never retried (git's requests, LFS transfers, the signing
/// service): the same certificate is refused on every attempt.
pub fn certificate_refusal(shown: &str, err: &reqwest::Error) -> Option<String> {
    let cert = certificate_refused(err)?;
    Some(format!(
        "the TLS certificate of {shown} was refused ({cert}){}: give the CA it chains to in \
         GIT_SSL_CAINFO (or SSL_CERT_FILE), or fix the server's certificate",
        through_proxy(err).map_or_else(String::new, |p| format!(" (through the proxy {p})"))
    ))
}

/// `: cause: cause…` of `err` (never the URL).
fn cause_text(err: &reqwest::Error) -> String {
    causes(err).map(|s| format!(": {s}")).collect()
}

/// What went wrong, with its causes (never the URL).
pub fn described(err: &reqwest::Error) -> String {
    format!("{}{}", failure_kind(err), cause_text(err))
}

/// Turn a reqwest error into a message without the URL's secrets (and so without any query
/// secret); a proxy the request went through is named.
pub fn transport_error(url: &RemoteUrl, err: reqwest::Error) -> Error {
    let causes = cause_text(&err);
    if let Some(words) = certificate_refusal(&url.to_string(), &err) {
        return Error::Protocol(words);
    }
    Error::Network(match through_proxy(&err) {
        Some(p) if proxy_unreachable(&err) => {
            format!("could not connect to the proxy {p} to reach {url}{causes}")
        }
        _ => format!("{}: {url}{causes}", failure_kind(&err)),
    })
}

/// Map an I/O error that happened while reading a response body.
pub fn body_error(url: &RemoteUrl, err: std::io::Error) -> Error {
    if err.kind() == std::io::ErrorKind::TimedOut {
        return Error::Network(format!("{url}: {err}"));
    }
    Error::Network(format!("the transfer from {url} broke off: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_media_type_is_compared_without_parameters_or_case() {
        let v = |s: &'static str| media_type(Some(&HeaderValue::from_static(s)));
        let t = "application/x-git-upload-pack-result";
        assert_eq!(v(t), t);
        assert_eq!(v("Application/X-Git-Upload-Pack-Result ; charset=UTF-8"), t);
        assert_eq!(v("application/x-git-upload-pack-result;q"), t);
        assert_eq!(media_type(None), "");
        assert_eq!(v("text/plain"), "text/plain");
    }
}
