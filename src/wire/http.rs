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
use std::time::Duration;

use backon::{BlockingRetryable as _, ExponentialBuilder};
use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::error::{Error, Result};
use crate::types::RemoteUrl;

pub use crate::inputs::UrlSource;

/// The slowest upload speed that is still not a stall, in bytes per second (16 KiB/s): see
/// [`Http::send_upload`].
pub const MIN_UPLOAD_BYTES_PER_SEC: u64 = 16 * 1024;

pub use crate::knobs::Protocol;

fn client_builder(tls: rustls::ClientConfig, connect_timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::ClientBuilder::new()
        .connect_timeout(connect_timeout)
        .user_agent(concat!(
            "git/2.47-compatible git-session/",
            env!("CARGO_PKG_VERSION")
        ))
        .redirect(reqwest::redirect::Policy::none())
        .tls_backend_preconfigured(tls)
}

/// One HTTP client for the whole process, with the retry policy.
pub struct Http {
    client: Client,
    /// What [`Http::builder`] makes another client from (the blocking one's settings).
    tls: rustls::ClientConfig,
    connect_timeout: Duration,
    /// The upload-pack protocol to speak (`GIT_SESSION_PROTOCOL`).
    pub protocol: Protocol,
    /// How long a read may stall (`GIT_SESSION_READ_TIMEOUT_MS`, 60 s).
    read_timeout: Duration,
    retry: ExponentialBuilder,
    succeeded_once: AtomicBool,
}

/// A request to a smart-HTTP endpoint below the repository URL.
pub struct Request<'a> {
    /// The endpoint below the repository, e.g. `info/refs?service=git-upload-pack`.
    pub endpoint: &'a str,
    /// Extra headers (`Git-Protocol`, `Content-Type`, `Accept`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The POST body; `None` sends a GET. A body without a known length goes out chunked.
    pub body: Option<reqwest::blocking::Body>,
}

impl Http {
    /// Build the client: rustls with the ring provider, roots from `SSL_CERT_FILE`/`SSL_CERT_DIR` or the
    /// system store, bundled Mozilla roots when neither has any; proxies from `HTTPS_PROXY`/`NO_PROXY`.
    ///
    /// # Errors
    /// [`Error::Internal`] when the TLS configuration or client cannot be built; [`Error::Usage`]
    /// for a `GIT_SESSION_PROTOCOL` that is not one.
    pub fn new() -> Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for cert in native.certs {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            tracing::debug!("no system CA roots found; using the bundled Mozilla roots");
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::internal("TLS configuration", e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];

        let knobs = crate::knobs::get();
        let connect_timeout = knobs.connect_timeout;
        let builder = client_builder(tls.clone(), connect_timeout);
        // The blocking client applies this to the wait for the response head and to every single
        // read of the body: a read that stalls this long fails (async `read_timeout` needs a runtime
        // on the reading thread, which the blocking body does not have).
        let read_timeout = knobs.read_timeout;
        let client = reqwest::blocking::ClientBuilder::from(builder)
            .timeout(read_timeout)
            .build()
            .map_err(|e| Error::internal("building the HTTP client", e.without_url()))?;
        let base = knobs.retry_base;
        let retry = ExponentialBuilder::default()
            .with_min_delay(base)
            .with_max_delay(base * 16)
            .with_factor(2.0)
            .with_max_times(3)
            .with_total_delay(Some(Duration::from_secs(60)))
            .with_jitter();
        Ok(Http {
            client,
            tls,
            connect_timeout,
            protocol: knobs.protocol,
            read_timeout,
            retry,
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
    /// ([`Error::is_transient`]), for requests to URLs that are not a session URL (an LFS
    /// server's).
    ///
    /// # Errors
    /// The last attempt's error.
    pub fn retrying<T>(&self, what: &str, attempt: impl FnMut() -> Result<T>) -> Result<T> {
        let mut attempts = 1;
        let out = attempt
            .retry(self.retry)
            .sleep(std::thread::sleep)
            .when(Error::is_transient)
            .notify(|err, delay| {
                attempts += 1;
                tracing::warn!("{what} failed ({err}); retrying in {delay:.1?}");
            })
            .call();
        match out {
            Err(Error::Network(msg)) if attempts > 1 => Err(Error::Network(format!(
                "{msg} (gave up after {attempts} attempts)"
            ))),
            other => other,
        }
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
        let ctype = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
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
        Ok(Body::new(self.check_status(url, resp)?))
    }

    /// A request to any URL (an LFS server's action `href`), with no credentials added: the
    /// caller sets the headers it means to send.
    pub fn request(&self, method: reqwest::Method, url: url::Url) -> RequestBuilder {
        self.client.request(method, url)
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

    /// Send one request and return the response whatever its status.
    ///
    /// # Errors
    /// Connect errors, timeouts and resets are [`Error::Network`].
    pub fn send_unchecked(&self, url: &RemoteUrl, req: Request<'_>) -> Result<Response> {
        self.send_with_timeout(url, req, None)
    }

    /// Send an upload of `len` bytes and return the response whatever its status. The blocking
    /// client's timeout runs from the start of the request to the response head, so it covers the
    /// whole upload: it is stretched to the read timeout plus one second per
    /// [`MIN_UPLOAD_BYTES_PER_SEC`] bytes, so a large body on a slow link is not cut off while the
    /// server is still reading it (as `git`'s `http.lowSpeedLimit` judges throughput, not total
    /// time).
    ///
    /// # Errors
    /// Connect errors, timeouts and resets are [`Error::Network`].
    pub fn send_upload(&self, url: &RemoteUrl, req: Request<'_>, len: u64) -> Result<Response> {
        let allowance = Duration::from_secs(len.div_ceil(MIN_UPLOAD_BYTES_PER_SEC));
        self.send_with_timeout(url, req, Some(self.read_timeout + allowance))
    }

    fn send_with_timeout(
        &self,
        url: &RemoteUrl,
        req: Request<'_>,
        timeout: Option<Duration>,
    ) -> Result<Response> {
        let target = url.endpoint(req.endpoint);
        let mut headers = HeaderMap::new();
        for (k, v) in req.headers {
            headers.insert(k, v);
        }
        if let Some(auth) = url.authorization() {
            headers.insert(reqwest::header::AUTHORIZATION, auth);
        }
        let builder = match req.body {
            Some(body) => self.client.post(target).body(body),
            None => self.client.get(target),
        };
        tracing::debug!(
            "{} {url}/{}",
            if builder_is_post(&headers) {
                "POST"
            } else {
                "GET"
            },
            req.endpoint.split('?').next().unwrap_or_default()
        );
        let builder = match timeout {
            Some(t) => builder.timeout(t),
            None => builder,
        };
        builder
            .headers(headers)
            .send()
            .map_err(|e| transport_error(url, e))
    }

    /// Map an HTTP status to the SPEC's exit codes: 2xx passes; 401/403 → [`Error::Auth`];
    /// 404 → [`Error::NotFound`]; 5xx and 429 → [`Error::Network`] (retried); redirects and other
    /// 4xx → [`Error::Protocol`] (exit 5, not retried).
    ///
    /// # Errors
    /// As above.
    pub fn check_status(&self, url: &RemoteUrl, resp: Response) -> Result<Response> {
        let status = resp.status();
        if status.is_success() {
            self.succeeded_once.store(true, Ordering::Relaxed);
            return Ok(resp);
        }
        Err(match status {
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
/// failure (exit 5, retried).
///
/// Test knobs: `GIT_SESSION_LOW_SPEED_LIMIT` (bytes per second, default 1024),
/// `GIT_SESSION_LOW_SPEED_TIME_MS` (default 60000) and `GIT_SESSION_FIRST_BYTE_WAIT_MS` (how long
/// a pack may take to start, default 600000, see [`LowSpeed::for_pack`]).
#[derive(Debug, Clone)]
pub struct LowSpeed {
    limit: u64,
    time: Duration,
    /// Where the current measuring window began (`None`: at the first byte).
    window: Option<std::time::Instant>,
    bytes: u64,
    /// Before the first byte, the wait ends here (`None`: no bound but the read timeout's).
    first_byte_by: Option<std::time::Instant>,
}

impl LowSpeed {
    /// Measured from now.
    pub fn now() -> Self {
        LowSpeed {
            window: Some(std::time::Instant::now()),
            ..LowSpeed::after_first_byte()
        }
    }

    /// Measured from the first byte on: the wait for a push's report while the server applies
    /// the push (its hooks, its index-pack) is not a slow transfer.
    pub fn after_first_byte() -> Self {
        LowSpeed {
            limit: crate::knobs::get().low_speed_limit,
            time: crate::knobs::get().low_speed_time,
            window: None,
            bytes: 0,
            first_byte_by: None,
        }
    }

    /// For a pack's bytes: measured from its first byte, which may take the server a while
    /// (upload-pack counts and compresses objects first, sending only keep-alives), but at most
    /// `GIT_SESSION_FIRST_BYTE_WAIT_MS` (10 minutes).
    pub fn for_pack() -> Self {
        let wait = crate::knobs::get().first_byte_wait;
        LowSpeed {
            first_byte_by: Some(std::time::Instant::now() + wait),
            ..LowSpeed::after_first_byte()
        }
    }

    /// Count a read of `n` bytes.
    ///
    /// # Errors
    /// [`std::io::ErrorKind::TimedOut`] when the rule is broken.
    pub fn count(&mut self, n: usize) -> std::io::Result<()> {
        let now = std::time::Instant::now();
        if self.window.is_none() && n == 0 {
            return Ok(());
        }
        if self.window.is_none()
            && let Some(by) = self.first_byte_by
            && now > by
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the server sent no pack data within the time a pack may take to start \
                 (GIT_SESSION_FIRST_BYTE_WAIT_MS)",
            ));
        }
        let start = *self.window.get_or_insert(now);
        self.bytes += n as u64;
        let elapsed = now.duration_since(start);
        if n > 0 && elapsed >= self.time {
            let wanted = self.limit.saturating_mul(elapsed.as_millis() as u64) / 1000;
            if self.bytes < wanted {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the transfer stayed below {} bytes/s for {} s ({} bytes in {:.1} s), \
                         as git's http.lowSpeedLimit/lowSpeedTime judge a stalled server",
                        self.limit,
                        self.time.as_secs(),
                        self.bytes,
                        elapsed.as_secs_f64()
                    ),
                ));
            }
            self.window = Some(now);
            self.bytes = 0;
        }
        Ok(())
    }
}

/// A reader (or buffered reader) whose bytes are held to a [`LowSpeed`] rule.
pub struct Measured<R> {
    inner: R,
    rule: LowSpeed,
    gave_up: bool,
}

impl<R> Measured<R> {
    /// `inner` under `rule`.
    pub fn new(inner: R, rule: LowSpeed) -> Self {
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
}

impl<R: std::io::Read> std::io::Read for Measured<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Err(e) = self.rule.count(n) {
            self.gave_up = true;
            return Err(e);
        }
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for Measured<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        // A broken rule shows at the next read: `consume` cannot fail.
        if self.rule.count(n).is_err() {
            self.gave_up = true;
        }
        self.inner.consume(n);
    }
}

/// A response body, read under a [`LowSpeed`] rule (or none, when its payload is measured
/// instead: a fetch's pack, see [`Body::unmeasured`]).
pub struct Body {
    inner: Response,
    rule: Option<LowSpeed>,
}

impl Body {
    /// Measured from now.
    pub fn new(inner: Response) -> Self {
        Body {
            inner,
            rule: Some(LowSpeed::now()),
        }
    }

    /// Measured from the first byte on (see [`LowSpeed::after_first_byte`]).
    pub fn after_first_byte(inner: Response) -> Self {
        Body {
            inner,
            rule: Some(LowSpeed::after_first_byte()),
        }
    }

    /// Not measured here: the caller measures the payload (a fetch's pack bytes, between which
    /// upload-pack sends keep-alives while it prepares the pack).
    pub fn unmeasured(mut self) -> Self {
        self.rule = None;
        self
    }

    /// The response's headers.
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }

    /// The response's status.
    pub fn status(&self) -> StatusCode {
        self.inner.status()
    }
}

impl std::io::Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(rule) = self.rule.as_mut() {
            rule.count(n)?;
        }
        Ok(n)
    }
}

fn builder_is_post(headers: &HeaderMap) -> bool {
    headers.contains_key(reqwest::header::CONTENT_TYPE)
}

/// What went wrong with a request, in a few words (never the URL).
pub fn failure_kind(err: &reqwest::Error) -> &'static str {
    if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "transfer failed"
    }
}

/// Turn a reqwest error into a message without the URL (and so without any query secret).
pub fn transport_error(url: &RemoteUrl, err: reqwest::Error) -> Error {
    let mut msg = format!("{}: {url}", failure_kind(&err));
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(&err);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    Error::Network(msg)
}

/// Map an I/O error that happened while reading a response body.
pub fn body_error(url: &RemoteUrl, err: std::io::Error) -> Error {
    Error::Network(format!("the transfer from {url} broke off: {err}"))
}
