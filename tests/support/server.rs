//! A real git smart-HTTP server for tests, demos and benchmarks: `git http-backend` (CGI) behind a
//! small hyper server on 127.0.0.1, with optional Basic token auth, TLS with a test CA, a request log,
//! and fault injection (fail the first k requests, drop protocol v2, refuse chunked bodies). A
//! static-file mode ([`GitServer::serve_files`]) serves archives at `/files/<name>` with the same
//! auth and faults, and can cut a body after N bytes.
//!
//! Shared by the integration tests (`tests/support`), `examples/serve.rs` (demo, bench).

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// One request the server answered.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// `GET` or `POST`.
    pub method: String,
    /// The path below the server root, e.g. `/repo.git/info/refs`.
    pub path: String,
    /// The query string.
    pub query: String,
    /// The status sent.
    pub status: u16,
    /// The `Git-Protocol` header, if any.
    pub git_protocol: Option<String>,
    /// The request body's size.
    pub body_len: usize,
    /// Whether the request body came chunked.
    pub chunked: bool,
    /// The request body when it is small (protocol requests), else empty.
    pub body: Vec<u8>,
    /// The `Authorization` header as sent, if any (which credential reached this server).
    pub authorization: Option<String>,
    /// When the request arrived.
    pub at: std::time::Instant,
}

/// Fault injection and auth, changeable while the server runs.
#[derive(Default)]
pub struct Knobs {
    /// Bytes of response bodies `git http-backend` sent through the normal path, all requests.
    pub sent_bytes: std::sync::atomic::AtomicU64,
    /// Requests still to fail with 503 before answering normally.
    pub fail_next: AtomicUsize,
    /// Ignore `Git-Protocol` (behave like a v0-only server).
    pub v0_only: AtomicBool,
    /// Answer chunked POSTs with 411 Length Required.
    pub refuse_chunked: AtomicBool,
    /// Requests still to answer with 401 even with a good token.
    pub unauthorized_next: AtomicUsize,
    /// Requests still to hold for 30 s before answering (a stalled server).
    pub stall_next: AtomicUsize,
    /// Cut POST response bodies after this many bytes (responses no longer than this pass whole).
    pub cut_post_after: AtomicUsize,
    /// How many more POST responses to cut.
    pub cut_posts: AtomicUsize,
    /// POSTs still to answer with 401 (GETs pass): a token without write permission.
    pub unauthorized_posts: AtomicUsize,
    /// When set, receive-pack POSTs get HTTP 200 with this body and the repository is not touched.
    pub receive_pack_reply: Mutex<Option<Vec<u8>>>,
    /// Static-file mode: when set, `GET /files/<name>` answers with the file `<name>` of this folder
    /// (same token auth and fault knobs as the git endpoints; 404 when it is missing).
    pub files_dir: Mutex<Option<PathBuf>>,
    /// Cut static-file bodies after this many bytes (files no longer than this pass whole).
    pub cut_get_after: AtomicUsize,
    /// How many more static-file bodies to cut.
    pub cut_gets: AtomicUsize,
    /// When set, these bytes are appended to the last side-band-1 packet of upload-pack responses:
    /// data after the pack's checksum, in the packet that ends the pack.
    pub pack_junk: Mutex<Option<Vec<u8>>>,
    /// Send `pack_junk` as a packet of its own after that last packet instead.
    pub pack_junk_own_packet: AtomicBool,
    /// Add `no-thin` to the capabilities of receive-pack's ref advertisement (git's receive-pack
    /// never advertises it; a server that does must get whole objects).
    pub advertise_no_thin: AtomicBool,
    /// When non-zero, request bodies are read slowly: this many milliseconds of pause after every
    /// 64 KiB (a slow link, or a busy server that keeps reading).
    pub slow_body_ms: std::sync::atomic::AtomicU64,
    /// Upload-pack responses still to damage: one byte in the middle of the first side-band-1
    /// packet of the pack is inverted (the framing stays intact, as a bad proxy or disk would).
    pub pack_flips: AtomicUsize,
    /// Scripted answers of a hostile server, in place of `git http-backend` for the requests they
    /// name (the first matching one with answers left is used).
    pub scripted: Mutex<Vec<Scripted>>,
    /// When non-zero, every `ls-refs` is answered only after this many milliseconds (a slow ref
    /// lookup): what a client sends meanwhile shows what it did not wait for.
    pub hold_ls_refs_ms: std::sync::atomic::AtomicU64,
    /// When set, appended to the Content-Type of every `git http-backend` answer (`; charset=…`:
    /// parameters some servers and proxies add).
    pub content_type_params: Mutex<Option<String>>,
}

/// Which request a [`Scripted`] answer replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET info/refs?service=git-upload-pack` (the protocol v2 capability advertisement).
    UploadPackAdvertisement,
    /// `POST git-upload-pack` with `command=ls-refs`.
    LsRefs,
    /// `POST git-upload-pack` with `command=fetch`.
    Fetch,
    /// `POST git-upload-pack` of protocol v0/v1: `want` lines, no `command=`.
    FetchV0,
    /// `GET info/refs?service=git-receive-pack`.
    ReceivePackAdvertisement,
    /// `POST git-receive-pack`.
    ReceivePack,
}

/// A hostile server's answer: `head`, then `repeat` again and again until the client goes (an
/// endless answer), every chunk of `drip_bytes` after a pause of `drip_ms` (a drip).
#[derive(Debug, Clone)]
pub struct Scripted {
    /// The request it answers.
    pub on: Endpoint,
    /// The HTTP status.
    pub status: u16,
    /// The Content-Type.
    pub content_type: &'static str,
    /// The bytes sent first.
    pub head: Vec<u8>,
    /// Sent after `head`, forever; empty: the answer ends after `head`.
    pub repeat: Vec<u8>,
    /// Pause before each chunk (milliseconds); 0: none.
    pub drip_ms: u64,
    /// Chunk size while dripping (bytes); 0 with a drip: one byte.
    pub drip_bytes: usize,
    /// When non-zero, only this many first bytes are dripped; the rest goes at full speed (a
    /// server that takes a while to start, sending keep-alives).
    pub drip_first: usize,
    /// When non-zero, the last this many bytes of `head` are sent only after a pause of
    /// `hold_ms` (a pack whose end is still on the wire).
    pub hold_last: usize,
    /// That pause (milliseconds).
    pub hold_ms: u64,
    /// How many more requests to answer this way.
    pub times: usize,
}

impl Scripted {
    /// One answer of `body` with HTTP 200 and the Content-Type git uses for `on`.
    pub fn once(on: Endpoint, body: Vec<u8>) -> Self {
        Scripted {
            on,
            status: 200,
            content_type: match on {
                Endpoint::UploadPackAdvertisement => "application/x-git-upload-pack-advertisement",
                Endpoint::LsRefs | Endpoint::Fetch | Endpoint::FetchV0 => {
                    "application/x-git-upload-pack-result"
                }
                Endpoint::ReceivePackAdvertisement => {
                    "application/x-git-receive-pack-advertisement"
                }
                Endpoint::ReceivePack => "application/x-git-receive-pack-result",
            },
            head: body,
            repeat: Vec::new(),
            drip_ms: 0,
            drip_bytes: 0,
            drip_first: 0,
            hold_last: 0,
            hold_ms: 0,
            times: 1,
        }
    }
}

/// The endpoint a request is for, from its method, path, query and (POST) body.
fn endpoint_of(method: &str, path: &str, query: &str, body: &[u8]) -> Option<Endpoint> {
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    match method {
        "GET" if path.ends_with("/info/refs") && query.contains("service=git-upload-pack") => {
            Some(Endpoint::UploadPackAdvertisement)
        }
        "GET" if path.ends_with("/info/refs") && query.contains("service=git-receive-pack") => {
            Some(Endpoint::ReceivePackAdvertisement)
        }
        "POST" if path.ends_with("/git-upload-pack") && has(b"command=ls-refs") => {
            Some(Endpoint::LsRefs)
        }
        "POST" if path.ends_with("/git-upload-pack") && has(b"command=fetch") => {
            Some(Endpoint::Fetch)
        }
        "POST" if path.ends_with("/git-upload-pack") && !has(b"command=") && has(b"want ") => {
            Some(Endpoint::FetchV0)
        }
        "POST" if path.ends_with("/git-receive-pack") => Some(Endpoint::ReceivePack),
        _ => None,
    }
}

/// The response of a [`Scripted`] answer, streamed.
fn scripted_response(script: Scripted) -> Response<Body> {
    let status = StatusCode::from_u16(script.status).unwrap_or(StatusCode::OK);
    let content_type = hyper::header::HeaderValue::from_static(script.content_type);
    let chunk = match (script.drip_ms, script.drip_bytes) {
        (0, _) => 64 * 1024,
        (_, 0) => 1,
        (_, n) => n,
    };
    let stream =
        futures_util::stream::unfold((script, 0usize), move |(script, mut at)| async move {
            let total_head = script.head.len();
            if at >= total_head && script.repeat.is_empty() {
                return None;
            }
            let held_from = total_head.saturating_sub(script.hold_last);
            if script.hold_last > 0 && at == held_from {
                tokio::time::sleep(std::time::Duration::from_millis(script.hold_ms)).await;
            }
            let dripping = script.drip_ms > 0 && (script.drip_first == 0 || at < script.drip_first);
            if dripping {
                tokio::time::sleep(std::time::Duration::from_millis(script.drip_ms)).await;
            }
            let chunk = if dripping && script.drip_first > 0 {
                chunk.min(script.drip_first - at)
            } else if script.drip_first > 0 {
                64 * 1024
            } else {
                chunk
            };
            let chunk = if script.hold_last > 0 && at < held_from {
                chunk.min(held_from - at)
            } else {
                chunk
            };
            let mut out = Vec::with_capacity(chunk);
            while out.len() < chunk {
                if at < total_head {
                    let take = (total_head - at).min(chunk - out.len());
                    out.extend_from_slice(&script.head[at..at + take]);
                    at += take;
                } else if script.repeat.is_empty() {
                    break;
                } else {
                    let r = &script.repeat;
                    let off = (at - total_head) % r.len();
                    let take = (r.len() - off).min(chunk - out.len());
                    out.extend_from_slice(&r[off..off + take]);
                    at += take;
                }
            }
            Some((
                Ok::<_, std::io::Error>(Frame::data(Bytes::from(out))),
                (script, at),
            ))
        });
    let mut resp = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, content_type);
    resp
}

/// Append `junk` inside the last side-band-1 pkt-line of `body` (its length prefix adjusted), or
/// as a side-band-1 pkt-line of its own right after it.
/// `body` (pkt-lines) with `capability` added to the capability list of its first line that has
/// one (after the NUL of the first ref line), the line's length fixed.
fn with_capability(body: &[u8], capability: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + capability.len() + 1);
    let (mut at, mut done) = (0, false);
    while at + 4 <= body.len() {
        let len = std::str::from_utf8(&body[at..at + 4])
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .unwrap_or(0);
        if len < 4 {
            out.extend_from_slice(&body[at..at + 4]);
            at += 4;
            continue;
        }
        let line = &body[at + 4..at + len];
        if !done && line.contains(&0) {
            let mut new = line.strip_suffix(b"\n").unwrap_or(line).to_vec();
            new.push(b' ');
            new.extend_from_slice(capability);
            new.push(b'\n');
            out.extend_from_slice(format!("{:04x}", new.len() + 4).as_bytes());
            out.extend_from_slice(&new);
            done = true;
        } else {
            out.extend_from_slice(&body[at..at + len]);
        }
        at += len;
    }
    out.extend_from_slice(&body[at..]);
    out
}

fn append_to_last_band1(body: &[u8], junk: &[u8], own_packet: bool) -> Vec<u8> {
    let (mut at, mut last) = (0, None);
    while at + 4 <= body.len() {
        let len = std::str::from_utf8(&body[at..at + 4])
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .unwrap_or(0);
        if len > 4 && body.get(at + 4) == Some(&1) {
            last = Some((at, len));
        }
        at += len.max(4);
    }
    let Some((at, len)) = last else {
        return body.to_vec();
    };
    let mut out = body[..at].to_vec();
    if own_packet {
        out.extend_from_slice(&body[at..at + len]);
        out.extend_from_slice(format!("{:04x}\x01", junk.len() + 5).as_bytes());
    } else {
        out.extend_from_slice(format!("{:04x}", len + junk.len()).as_bytes());
        out.extend_from_slice(&body[at + 4..at + len]);
    }
    out.extend_from_slice(junk);
    out.extend_from_slice(&body[at + len..]);
    out
}

/// Invert one byte in the middle of the payload of the side-band-1 packet that starts the pack.
fn flip_in_pack(body: &mut [u8]) -> bool {
    let mut at = 0;
    while at + 4 <= body.len() {
        let len = std::str::from_utf8(&body[at..at + 4])
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .unwrap_or(0);
        if len > 5 + 12 && body.get(at + 4) == Some(&1) && body[at + 5..].starts_with(b"PACK") {
            // After the 12-byte pack header, before the packet's end.
            let payload = at + 5 + 12..at + len;
            let i = payload.start + (payload.end - payload.start) / 2;
            body[i] = !body[i];
            return true;
        }
        at += len.max(4);
    }
    false
}

fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

struct State {
    root: PathBuf,
    token: Option<String>,
    knobs: Arc<Knobs>,
    log: Mutex<Vec<LogEntry>>,
    home: PathBuf,
}

/// TLS material made with a fresh test CA.
pub struct TestCa {
    /// The CA certificate, PEM (for `SSL_CERT_FILE`).
    pub ca_pem: String,
    /// The server's chain, DER.
    pub chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The server's key, DER.
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
    /// The server's certificate, PEM (for a server that reads files: squid).
    pub leaf_pem: String,
    /// The server's key, PEM.
    pub key_pem: String,
}

impl TestCa {
    /// A CA and a leaf for `localhost` and `127.0.0.1` signed by it.
    pub fn new() -> Self {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "git-session test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
        TestCa {
            ca_pem: ca.pem(),
            chain: vec![leaf.der().clone(), ca.der().clone()],
            key: rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            leaf_pem: leaf.pem(),
            key_pem: leaf_key.serialize_pem(),
        }
    }
}

/// A running server; stopped when dropped.
pub struct GitServer {
    /// The listening address.
    pub addr: SocketAddr,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// Fault injection.
    pub knobs: Arc<Knobs>,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GitServer {
    /// Serve the bare repositories under `root` over plain HTTP.
    pub fn start(root: &Path, token: Option<&str>) -> Self {
        Self::start_with(root, token, None, 0)
    }

    /// Serve over HTTPS with the given test CA's leaf.
    pub fn start_tls(root: &Path, token: Option<&str>, ca: &TestCa) -> Self {
        Self::start_with(root, token, Some(ca), 0)
    }

    /// Serve on `port` (0: any free port), over TLS if `ca` is given.
    pub fn start_with(root: &Path, token: Option<&str>, ca: Option<&TestCa>, port: u16) -> Self {
        let home = root.join(".server-home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".gitconfig"), "").unwrap();
        let knobs = Arc::new(Knobs::default());
        let state = Arc::new(State {
            root: root.to_path_buf(),
            token: token.map(str::to_owned),
            knobs: knobs.clone(),
            log: Mutex::new(Vec::new()),
            home,
        });
        let tls = ca.map(|ca| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(ca.chain.clone(), ca.key.clone_key())
            .unwrap();
            tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
        });
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut rx => break,
                        accepted = listener.accept() => {
                            let Ok((stream, _)) = accepted else { continue };
                            let st = st.clone();
                            let tls = tls.clone();
                            tokio::spawn(async move {
                                let svc = hyper::service::service_fn(move |req| handle(st.clone(), req));
                                let builder = hyper::server::conn::http1::Builder::new();
                                match tls {
                                    Some(acceptor) => {
                                        if let Ok(s) = acceptor.accept(stream).await {
                                            let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(s), svc).await;
                                        }
                                    }
                                    None => {
                                        let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
                                    }
                                }
                            });
                        }
                    }
                }
            });
            rt.shutdown_background();
        });
        GitServer {
            addr,
            scheme: if ca.is_some() { "https" } else { "http" },
            knobs,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// The URL of repository `name` (e.g. `repo.git`), with `userinfo` (e.g. `t:TOKEN`) if given.
    pub fn url(&self, name: &str, userinfo: Option<&str>) -> String {
        let host = if self.scheme == "https" {
            format!("localhost:{}", self.addr.port())
        } else {
            self.addr.to_string()
        };
        match userinfo {
            Some(u) => format!("{}://{u}@{host}/{name}", self.scheme),
            None => format!("{}://{host}/{name}", self.scheme),
        }
    }

    /// Turn on the static-file mode: `GET /files/<name>` serves `dir/<name>`.
    pub fn serve_files(&self, dir: &Path) {
        *self.knobs.files_dir.lock().unwrap() = Some(dir.to_path_buf());
    }

    /// The URL of static file `name` (see [`GitServer::serve_files`]), with `userinfo` if given.
    pub fn file_url(&self, name: &str, userinfo: Option<&str>) -> String {
        self.url(&format!("files/{name}"), userinfo)
    }

    /// Every request answered so far.
    pub fn log(&self) -> Vec<LogEntry> {
        self.state.log.lock().unwrap().clone()
    }

    /// Forget the request log.
    pub fn clear_log(&self) {
        self.state.log.lock().unwrap().clear();
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

fn full(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(text.to_owned()))
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r
}

fn authorized(state: &State, req: &Request<Incoming>) -> bool {
    let Some(token) = &state.token else {
        return true;
    };
    let Some(value) = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(b64) = value.strip_prefix("Basic ") else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return false;
    };
    let decoded = String::from_utf8_lossy(&decoded).into_owned();
    let (user, pass) = decoded.split_once(':').unwrap_or((&decoded, ""));
    pass == token || (pass.is_empty() && user == token)
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let git_protocol = req
        .headers()
        .get("git-protocol")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let chunked = req
        .headers()
        .get(hyper::header::TRANSFER_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"chunked"));
    let mut entry = LogEntry {
        method: method.clone(),
        path: path.clone(),
        query: query.clone(),
        status: 0,
        git_protocol: git_protocol.clone(),
        body_len: 0,
        chunked,
        body: Vec::new(),
        authorization: req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        at: std::time::Instant::now(),
    };
    let respond = |state: &State, mut entry: LogEntry, resp: Response<Body>| {
        entry.status = resp.status().as_u16();
        state.log.lock().unwrap().push(entry);
        Ok(resp)
    };

    if state
        .knobs
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return respond(
            &state,
            entry,
            full(StatusCode::SERVICE_UNAVAILABLE, "injected failure\n"),
        );
    }
    if take_one(&state.knobs.stall_next) {
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    }
    let forced_401 = state
        .knobs
        .unauthorized_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let post_401 = method == "POST" && take_one(&state.knobs.unauthorized_posts);
    if forced_401 || post_401 || !authorized(&state, &req) {
        let mut r = full(StatusCode::UNAUTHORIZED, "authentication required\n");
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Basic realm=\"git\""),
        );
        return respond(&state, entry, r);
    }
    if method == "GET"
        && let Some(name) = path.strip_prefix("/files/")
        && let Some(dir) = state.knobs.files_dir.lock().unwrap().clone()
    {
        let resp = static_file(&state.knobs, &dir, name);
        return respond(&state, entry, resp);
    }
    if method == "POST" && chunked && state.knobs.refuse_chunked.load(Ordering::SeqCst) {
        return respond(
            &state,
            entry,
            full(StatusCode::LENGTH_REQUIRED, "length required\n"),
        );
    }
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let content_encoding = req
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let slow = state.knobs.slow_body_ms.load(Ordering::SeqCst);
    let body = if slow > 0 {
        let mut incoming = req.into_body();
        let (mut buf, mut paused_at) = (Vec::new(), 0);
        loop {
            match incoming.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        buf.extend_from_slice(&data);
                    }
                    while buf.len() >= paused_at + 64 * 1024 {
                        paused_at += 64 * 1024;
                        tokio::time::sleep(std::time::Duration::from_millis(slow)).await;
                    }
                }
                Some(Err(_)) => {
                    return respond(&state, entry, full(StatusCode::BAD_REQUEST, "bad body\n"));
                }
                None => break,
            }
        }
        Bytes::from(buf)
    } else {
        match req.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return respond(&state, entry, full(StatusCode::BAD_REQUEST, "bad body\n")),
        }
    };
    entry.body_len = body.len();
    if body.len() <= 64 * 1024 {
        entry.body = body.to_vec();
    }
    if let Some(on) = endpoint_of(&method, &path, &query, &body) {
        let hold = state.knobs.hold_ls_refs_ms.load(Ordering::SeqCst);
        if on == Endpoint::LsRefs && hold > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(hold)).await;
        }
        let script = {
            let mut scripts = state.knobs.scripted.lock().unwrap();
            scripts
                .iter_mut()
                .find(|s| s.on == on && s.times > 0)
                .map(|s| {
                    s.times -= 1;
                    s.clone()
                })
        };
        if let Some(script) = script {
            return respond(&state, entry, scripted_response(script));
        }
    }
    if method == "POST"
        && path.ends_with("/git-receive-pack")
        && let Some(reply) = state.knobs.receive_pack_reply.lock().unwrap().clone()
    {
        let mut r = full(StatusCode::OK, "");
        *r.body_mut() = Full::new(Bytes::from(reply))
            .map_err(|never: Infallible| match never {})
            .boxed();
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/x-git-receive-pack-result"),
        );
        return respond(&state, entry, r);
    }

    let mut env: HashMap<&str, String> = HashMap::new();
    env.insert("GIT_PROJECT_ROOT", state.root.display().to_string());
    env.insert("GIT_HTTP_EXPORT_ALL", "1".into());
    env.insert("PATH_INFO", path.clone());
    env.insert("QUERY_STRING", query.clone());
    env.insert("REQUEST_METHOD", method.clone());
    env.insert("CONTENT_TYPE", content_type);
    env.insert("CONTENT_LENGTH", body.len().to_string());
    env.insert("REMOTE_USER", "tester".into());
    env.insert("REMOTE_ADDR", "127.0.0.1".into());
    env.insert("HOME", state.home.display().to_string());
    env.insert("GIT_CONFIG_NOSYSTEM", "1".into());
    env.insert("GIT_HTTP_MAX_REQUEST_BUFFER", "1000M".into());
    if !content_encoding.is_empty() {
        env.insert("HTTP_CONTENT_ENCODING", content_encoding);
    }
    if let Some(p) = git_protocol.filter(|_| !state.knobs.v0_only.load(Ordering::SeqCst)) {
        env.insert("GIT_PROTOCOL", p);
    }
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return respond(
                &state,
                entry,
                full(StatusCode::INTERNAL_SERVER_ERROR, &format!("spawn: {e}\n")),
            );
        }
    };
    let mut stdin = child.stdin.take().unwrap();
    tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
        let _ = stdin.shutdown().await;
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut status = StatusCode::OK;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if stdout.read_line(&mut line).await.unwrap_or(0) == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().to_owned();
            if k.eq_ignore_ascii_case("status") {
                let code = v
                    .split(' ')
                    .next()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(500);
                status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            } else if k.eq_ignore_ascii_case("content-type") {
                let params = state.knobs.content_type_params.lock().unwrap().clone();
                headers.push((k.to_owned(), v + params.as_deref().unwrap_or_default()));
            } else {
                headers.push((k.to_owned(), v));
            }
        }
    }
    let cut_after = if method == "POST" && state.knobs.cut_posts.load(Ordering::SeqCst) > 0 {
        state.knobs.cut_post_after.load(Ordering::SeqCst)
    } else {
        usize::MAX
    };
    let junk = if method == "POST" {
        state.knobs.pack_junk.lock().unwrap().clone()
    } else {
        None
    };
    let flip = method == "POST" && state.knobs.pack_flips.load(Ordering::SeqCst) > 0;
    let no_thin = method == "GET"
        && query.contains("service=git-receive-pack")
        && state.knobs.advertise_no_thin.load(Ordering::SeqCst);
    if cut_after != usize::MAX || junk.is_some() || flip || no_thin {
        // Let the backend finish (a push lands) before the connection is cut, as a cut after the
        // server's work would be.
        let mut all = Vec::new();
        let _ = stdout.read_to_end(&mut all).await;
        let _ = child.wait().await;
        if no_thin {
            all = with_capability(&all, b"no-thin");
        }
        if let Some(junk) = &junk {
            let own = state.knobs.pack_junk_own_packet.load(Ordering::SeqCst);
            all = append_to_last_band1(&all, junk, own);
        }
        // Only responses holding a pack are damaged, and only those count.
        if flip && all.windows(5).any(|w| w == b"\x01PACK") && take_one(&state.knobs.pack_flips) {
            assert!(flip_in_pack(&mut all), "no pack packet to damage");
        }
        // Only responses longer than the cut are cut, and only those count.
        let cut = all.len() > cut_after && take_one(&state.knobs.cut_posts);
        if cut {
            all.truncate(cut_after);
        }
        // The cut comes a moment after the data, so the client has read the headers and the
        // bytes before it (an immediate error would close the connection before the response).
        let tail = futures_util::stream::once(async move {
            if cut {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                Err(std::io::Error::other("injected cut"))
            } else {
                Ok(Frame::data(Bytes::new()))
            }
        });
        let frames = futures_util::StreamExt::chain(
            futures_util::stream::iter([Ok::<_, std::io::Error>(Frame::data(Bytes::from(all)))]),
            tail,
        );
        let mut resp = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        *resp.status_mut() = status;
        for (k, v) in headers {
            if let (Ok(k), Ok(v)) = (
                hyper::header::HeaderName::from_bytes(k.as_bytes()),
                hyper::header::HeaderValue::from_str(&v),
            ) {
                resp.headers_mut().append(k, v);
            }
        }
        return respond(&state, entry, resp);
    }
    let knobs = state.knobs.clone();
    let stream = futures_util::stream::unfold((stdout, child), move |(mut out, child)| {
        let knobs = knobs.clone();
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            match out.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    knobs.sent_bytes.fetch_add(n as u64, Ordering::SeqCst);
                    buf.truncate(n);
                    Some((Ok(Frame::data(Bytes::from(buf))), (out, child)))
                }
                Err(e) => Some((Err(e), (out, child))),
            }
        }
    });
    let mut resp = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    *resp.status_mut() = status;
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            hyper::header::HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().append(k, v);
        }
    }
    respond(&state, entry, resp)
}

/// Answer a static-file GET: the file streamed in 64 KiB frames with a `Content-Length`, cut after
/// `cut_get_after` bytes (the connection aborted) while `cut_gets` lasts.
fn static_file(knobs: &Knobs, dir: &Path, name: &str) -> Response<Body> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return full(StatusCode::NOT_FOUND, "not found\n");
    }
    let Ok(file) = std::fs::File::open(dir.join(name)) else {
        return full(StatusCode::NOT_FOUND, "not found\n");
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let cut_after = knobs.cut_get_after.load(Ordering::SeqCst) as u64;
    let limit = if len > cut_after && take_one(&knobs.cut_gets) {
        Some(cut_after)
    } else {
        None
    };
    let stream = futures_util::stream::unfold(
        (file, 0u64, false),
        move |(mut file, sent, done)| async move {
            use std::io::Read as _;
            if done {
                return None;
            }
            let room = limit.map_or(u64::MAX, |l| l - sent);
            if room == 0 {
                return Some((
                    Err(std::io::Error::other("injected cut")),
                    (file, sent, true),
                ));
            }
            let mut buf = vec![0u8; 64 * 1024];
            let want = (buf.len() as u64).min(room) as usize;
            match file.read(&mut buf[..want]) {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((
                        Ok(Frame::data(Bytes::from(buf))),
                        (file, sent + n as u64, false),
                    ))
                }
                Err(e) => Some((Err(e), (file, sent, true))),
            }
        },
    );
    let mut resp = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/gzip"),
    );
    resp.headers_mut().insert(
        hyper::header::CONTENT_LENGTH,
        hyper::header::HeaderValue::from(len),
    );
    resp
}

impl GitServer {
    /// The receive-pack POSTs the server has logged (the pushes' uploads), in order.
    pub fn receive_pack_posts(&self) -> Vec<LogEntry> {
        self.log()
            .into_iter()
            .filter(|e| e.method == "POST" && e.path.ends_with("git-receive-pack"))
            .collect()
    }

    /// The bytes uploaded by all receive-pack POSTs the server has logged.
    pub fn receive_pack_bytes(&self) -> usize {
        self.receive_pack_posts().iter().map(|e| e.body_len).sum()
    }

    /// The requests the server has logged, in order, each in a word: `info/refs` (upload-pack's
    /// advertisement), `ls-refs`, `fetch` (v2), `fetch v0`, else the method and path.
    pub fn requests(&self) -> Vec<String> {
        self.log()
            .into_iter()
            .map(
                |e| match endpoint_of(&e.method, &e.path, &e.query, &e.body) {
                    Some(Endpoint::UploadPackAdvertisement) => "info/refs".to_owned(),
                    Some(Endpoint::LsRefs) => "ls-refs".to_owned(),
                    Some(Endpoint::Fetch) => "fetch".to_owned(),
                    Some(Endpoint::FetchV0) => "fetch v0".to_owned(),
                    _ => format!("{} {}", e.method, e.path),
                },
            )
            .collect()
    }
}
