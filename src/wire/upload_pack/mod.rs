//! A smart-HTTP upload-pack client: one ref looked up, one commit fetched, over protocol v2 or,
//! from a server that speaks nothing newer, v0/v1 ([`v0`]).
//!
//! Follows git's `gitprotocol-http` ("Smart Clients": `GET $GIT_URL/info/refs?service=git-upload-pack`
//! with `Git-Protocol: version=2`, then `POST $GIT_URL/git-upload-pack`) and `gitprotocol-v2`
//! (`ls-refs` with `ref-prefix`, `fetch` with `want`, `deepen`, `done`; response sections
//! `shallow-info` and `packfile` with side-band). A server that answers the first request with a
//! ref advertisement instead of `version 2` speaks v0/v1: the branch comes from that
//! advertisement and the fetch is one stateless request ([`v0`]). Pkt-lines are read and written
//! with gix-packetline; the pack is indexed as it streams in ([`crate::pack::receive()`], on
//! gix-pack).

mod lines;
pub mod v0;

use std::io::Read;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::{StreamingPeekableIter, encode};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};

pub use self::lines::MAX_SECTION_BYTES;
use self::lines::{AGENT, for_each_line, pkt_err, read_section, upload_pack_error};
use crate::error::{Error, Refusal, Result};
use crate::types::{FullSha, RemoteUrl, SessionBranch};
use crate::wire::advertisement::{self, Advertised, Service};
use crate::wire::http::{Http, Protocol, Request, body_error};

/// The capabilities a protocol v2 server advertised (`gitprotocol-v2` "Capability
/// Advertisement"): gix's own, one capability a line, `name` or `name=value`.
pub use gix::protocol::transport::client::Capabilities;

/// What the server answered the first request with: protocol v2's capabilities, or a v0/v1 ref
/// advertisement (its capabilities, the session branch, the tipped ids).
#[derive(Debug)]
pub enum Server {
    /// `version 2` and its capabilities.
    V2(Capabilities),
    /// A ref advertisement, read for `branch` (a full ref name).
    V0 {
        /// What it advertised.
        refs: Advertised,
        /// The ref whose id [`Advertised::tip`] holds.
        branch: String,
    },
}

impl Server {
    /// The protocol version spoken: 2, or 0 for v0/v1.
    pub fn version(&self) -> u8 {
        match self {
            Server::V2(_) => 2,
            Server::V0 { .. } => 0,
        }
    }
}

/// Whether the server's fetch takes `feature` (e.g. `shallow` or `filter`): v2's `fetch=<feature>`,
/// v0's capability of that name.
pub fn fetch_supports(server: &Server, feature: &str) -> bool {
    match server {
        Server::V2(caps) => fetch_supports_v2(caps, feature),
        Server::V0 { refs, .. } => refs.has(feature),
    }
}

fn fetch_supports_v2(caps: &Capabilities, feature: &str) -> bool {
    caps.capability("fetch")
        .and_then(|fetch| fetch.supports(feature))
        .unwrap_or(false)
}

fn v2_headers(post: bool) -> Vec<(HeaderName, HeaderValue)> {
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

/// The most bytes (pkt-line prefixes included) of an `ls-refs` answer read (`gitprotocol-v2`
/// "ls-refs"; line by line, nothing kept but the one ref asked for): a server sending more is
/// refused with [`Error::Protocol`] (exit 5).
pub const MAX_LS_REFS_BYTES: usize = 64 << 20;

/// Step 1: `GET info/refs?service=git-upload-pack` (`gitprotocol-http` "Smart Clients"), with
/// `Git-Protocol: version=2` unless [`Http::protocol`] is [`Protocol::V0`]. A `version 2` answer
/// gives its capabilities (at most [`MAX_SECTION_BYTES`]; `gitprotocol-v2` "Capability
/// Advertisement"); a ref advertisement (`gitprotocol-pack` "Reference Discovery") gives
/// [`Server::V0`] with `branch`'s id, read as [`advertisement::parse_refs`] does. Requires SHA-1.
///
/// # Errors
/// [`Error::Protocol`] (exit 5, not retried) for a server that is not smart HTTP (another
/// Content-Type), one that answers another protocol than `GIT_SESSION_PROTOCOL` forces, malformed
/// pkt-lines, an `ERR` line or an advertisement over its bound; [`Error::Network`] (exit 5,
/// retried) when the body breaks off; [`Error::Usage`] (exit 2) for `object-format=sha256`; HTTP
/// errors as [`Http::check_status`].
pub fn handshake(http: &Http, url: &RemoteUrl, branch: &SessionBranch) -> Result<Server> {
    let headers = match http.protocol {
        Protocol::V0 => Vec::new(),
        Protocol::Auto | Protocol::V2 => v2_headers(false),
    };
    let resp = http.advertisement(url, "git-upload-pack", headers)?;
    read_advertisement(url, resp, http.protocol, &branch.full_ref())
}

/// Parse the body of `GET info/refs?service=git-upload-pack`: an optional `# service=` section,
/// then `version 2` and the capabilities up to a flush (`gitprotocol-v2` "Capability
/// Advertisement"), or the refs of protocol v0/v1, of which `full_ref`'s id is kept. `url` is
/// for messages only.
///
/// # Errors
/// As [`handshake`], but for the HTTP ones and the Content-Type.
pub(crate) fn read_advertisement(
    url: &RemoteUrl,
    body: impl Read,
    protocol: Protocol,
    full_ref: &str,
) -> Result<Server> {
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    advertisement::skip_service_line(url, &mut lines, Service::UploadPack)?;
    let v2 = match lines.peek_line() {
        Some(Ok(Ok(line))) => line
            .as_slice()
            .is_some_and(|d| d.strip_suffix(b"\n").unwrap_or(d) == b"version 2"),
        _ => false,
    };
    if !v2 {
        if protocol == Protocol::V2 {
            return Err(Error::Protocol(format!(
                "{url} does not speak git protocol v2 (it answered with protocol v0/v1), which \
                 GIT_SESSION_PROTOCOL=2 asks for: unset it to fetch over v0/v1"
            )));
        }
        let refs = advertisement::parse_refs(url, &mut lines, Service::UploadPack, full_ref)?;
        return Ok(Server::V0 {
            refs,
            branch: full_ref.to_owned(),
        });
    }
    if protocol == Protocol::V0 {
        return Err(Error::Protocol(format!(
            "{url} answered with protocol v2 where GIT_SESSION_PROTOCOL=0 asked for v0/v1"
        )));
    }
    let first = read_section(url, &mut lines)?;
    // The section is bounded above; gix parses what it holds.
    let caps = Capabilities::from_lines(first.join(&b'\n').into()).map_err(|e| pkt_err(url, e))?;
    if let Some(fmt) = caps
        .capability("object-format")
        .map(|c| c.value().unwrap_or_default())
        && fmt != "sha1"
    {
        return Err(Error::Usage(
            Refusal::Unsupported,
            format!(
                "SHA-256 repositories are not supported yet (the remote announces object-format={fmt})"
            ),
        ));
    }
    Ok(Server::V2(caps))
}

fn command_body(caps: &Capabilities, command: &str, args: &[String]) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(256);
    let io = |e| Error::io("encoding a pkt-line", e);
    encode::text_to_write(format!("command={command}").as_bytes(), &mut body).map_err(io)?;
    if caps.contains("agent") {
        encode::text_to_write(format!("agent={AGENT}").as_bytes(), &mut body).map_err(io)?;
    }
    if caps.contains("object-format") {
        encode::text_to_write(b"object-format=sha1", &mut body).map_err(io)?;
    }
    encode::delim_to_write(&mut body).map_err(io)?;
    for a in args {
        encode::text_to_write(a.as_bytes(), &mut body).map_err(io)?;
    }
    encode::flush_to_write(&mut body).map_err(io)?;
    Ok(body)
}

/// Step 2: where the session branch is on the remote, asking for that one ref only
/// (`POST git-upload-pack` with `command=ls-refs` and `ref-prefix refs/heads/<branch>`, then an
/// exact match of the `<oid> <refname>` lines: `gitprotocol-v2` "ls-refs").
///
/// Returns the branch's commit, `None` when the remote has no such branch.
///
/// # Errors
/// [`Error::Protocol`] (exit 5) for malformed lines, an `ERR` line or an answer over
/// [`MAX_LS_REFS_BYTES`]; [`Error::Network`] (exit 5, retried) when the body breaks off; HTTP
/// errors as [`Http::check_status`].
pub fn ls_ref(
    http: &Http,
    url: &RemoteUrl,
    server: &Server,
    branch: &SessionBranch,
) -> Result<Option<FullSha>> {
    let full = branch.full_ref();
    let caps = match server {
        Server::V2(caps) => caps,
        // v0/v1 advertised every ref in the first answer.
        Server::V0 { refs, branch } if *branch == full => return Ok(refs.tip),
        Server::V0 { branch, .. } => {
            return Err(Error::internal(
                "looking up a branch",
                format!("the advertisement was read for {branch}, not {full}"),
            ));
        }
    };
    let body = command_body(caps, "ls-refs", &[format!("ref-prefix {full}")])?;
    let resp = http.send(
        url,
        Request {
            endpoint: "git-upload-pack",
            headers: v2_headers(true),
            body: Some(body.into()),
        },
    )?;
    read_ls_refs(url, resp, &full)
}

/// Parse an `ls-refs` response (`gitprotocol-v2` "ls-refs": `<oid> <refname>` lines up to a
/// flush) for the id of `full_ref`, reading at most [`MAX_LS_REFS_BYTES`] and keeping nothing
/// else. `url` is for messages only.
///
/// # Errors
/// As [`ls_ref`], but for the HTTP ones.
pub(crate) fn read_ls_refs(
    url: &RemoteUrl,
    body: impl Read,
    full_ref: &str,
) -> Result<Option<FullSha>> {
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    let mut found = None;
    for_each_line(url, &mut lines, MAX_LS_REFS_BYTES, |line| {
        let mut parts = line.split(|b| *b == b' ');
        let (Some(oid), Some(name)) = (parts.next(), parts.next()) else {
            return Err(pkt_err(url, "ls-refs line without a ref name"));
        };
        if name == full_ref.as_bytes() && found.is_none() {
            let id = FullSha::from_wire(oid)
                .ok_or_else(|| pkt_err(url, "ls-refs line with a malformed object id"))?;
            found = Some(id);
        }
        Ok(())
    })?;
    Ok(found)
}

/// What a fetch brought: the `shallow-info` section's `shallow` ids and the `packfile` section's
/// pack, indexed (`gitprotocol-v2` "fetch", output).
#[derive(Debug)]
pub struct Fetched {
    /// The commits the server marked `shallow` (their parents were not sent).
    pub shallow: Vec<gix::ObjectId>,
    /// The pack's data file, or `None` if the server sent no pack.
    pub pack_path: Option<std::path::PathBuf>,
    /// The number of objects the pack held.
    pub objects: u32,
    /// The objects over the big-object threshold.
    pub big: Vec<gix::ObjectId>,
}

/// What the local repository already holds, for a fetch of only the difference: a shallow
/// repository (a baked template) sends every shallow commit (`shallow <id>`), its commits as
/// `have`, and asks for a thin pack (`gitprotocol-v2` "fetch"), which is completed from `local`
/// before it is stored, as `git index-pack --fix-thin` does.
#[derive(Clone, Copy)]
pub struct Base<'a> {
    /// The commits in `.git/shallow`.
    pub shallow: &'a [gix::ObjectId],
    /// Commits the repository has, with their trees and blobs.
    pub haves: &'a [gix::ObjectId],
    /// The repository's objects: the bases of the thin pack's deltas.
    pub local: &'a gix::OdbHandle,
}

impl std::fmt::Debug for Base<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Base")
            .field("shallow", &self.shallow)
            .field("haves", &self.haves)
            .finish_non_exhaustive()
    }
}

/// What to fetch, and where to put it.
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    /// The commit.
    pub commit: FullSha,
    /// Its history, in commits (`None`: all).
    pub depth: Option<u32>,
    /// Where the pack and its index go (`objects/pack`).
    pub pack_dir: &'a Path,
    /// Bounds on what the pack may make this process hold.
    pub limits: crate::pack::PackLimits,
    /// What the repository holds already (`None`: nothing, a whole depth-limited pack).
    pub base: Option<Base<'a>>,
    /// Sees each entry's inflated data as the pack streams in (a whole pack only, not a thin one).
    pub observer: Option<&'a dyn crate::pack::EntryObserver>,
    /// A filter (`filter blob:none`: a partial clone's trees without blobs); protocol v2 only,
    /// when the server's `fetch` offers `filter`.
    pub filter: Option<&'a str>,
    /// More objects wanted besides `commit` (the blobs of a sparse checkout, after a filtered
    /// fetch); protocol v2 only, which serves any object the server has.
    pub more: &'a [gix::ObjectId],
}

/// Step 3: fetch `want.commit` (and its history up to `want.depth` commits) into `want.pack_dir`,
/// no tags, no other refs, and index the pack as it streams in (`POST git-upload-pack` with
/// `command=fetch`: `gitprotocol-v2` "fetch"; the pack in side-band channel 1, read under
/// [`crate::wire::http::LowSpeed::for_pack`]).
///
/// # Errors
/// [`Error::NotFound`] (exit 8) when the server does not have the commit (an `ERR` line or a
/// side-band error saying so); [`Error::Network`] (exit 5, retried) for a stream that breaks off,
/// before or inside the pack; [`Error::Protocol`] (exit 5) for a server without
/// `fetch=shallow` when a depth is asked for, malformed pkt-lines, an unknown section, a section
/// over [`MAX_SECTION_BYTES`], another `ERR` line or side-band error; [`Error::Integrity`]
/// (exit 6) for a corrupt pack or one over `want.limits`; [`Error::LocalIo`] when the disk
/// refuses the pack.
pub fn fetch_pack(
    http: &Http,
    url: &RemoteUrl,
    server: &Server,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let caps = match server {
        Server::V2(caps) => caps,
        Server::V0 { refs, .. } => return fetch_pack_v0(http, url, refs, want, interrupt),
    };
    let body = fetch_request(url, caps, &want)?;
    let resp = send_fetch(http, url, v2_headers(true), body)?;
    read_fetch(url, resp, want, interrupt)
}

/// `POST git-upload-pack` with a fetch request; the answer's bytes counted for the progress.
fn send_fetch(
    http: &Http,
    url: &RemoteUrl,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Vec<u8>,
) -> Result<impl Read> {
    let resp = http
        .send(
            url,
            Request {
                endpoint: "git-upload-pack",
                headers,
                body: Some(body.into()),
            },
        )?
        // The pack's bytes are measured instead (in receive_packfile): keep-alives come before them.
        .unmeasured();
    Ok(crate::progress::Counted {
        inner: resp,
        progress: crate::progress::Progress::bytes("receiving objects"),
    })
}

/// [`fetch_pack`] over protocol v0/v1: one stateless request ([`v0::request`]), its answer read
/// by [`read_fetch_v0`]; a refusal of a commit no ref tips is said as [`refused_want`] says it.
fn fetch_pack_v0(
    http: &Http,
    url: &RemoteUrl,
    refs: &Advertised,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let body = v0::request(url, refs, &v0_ask(&want))?;
    let mut headers = v2_headers(true);
    headers.retain(|(name, _)| name.as_str() != "git-protocol");
    let resp =
        send_fetch(http, url, headers, body).map_err(|e| failed_want(refs, want.commit, e))?;
    read_fetch_v0(url, resp, refs, want, interrupt)
        .map_err(|e| refused_want(url, refs, want.commit, e))
}

fn v0_ask<'a>(want: &Want<'a>) -> v0::Ask<'a> {
    v0::Ask {
        commit: want.commit,
        depth: want.depth,
        shallow: want.base.map_or(&[], |b| b.shallow),
        haves: want.base.map_or(&[], |b| b.haves),
    }
}

/// A v0/v1 server's refusal of a `want` no ref it advertised tips, from the answer's `ERR` line
/// (`NotFound` here): git and JGit serve any commit a ref reaches, others (git with only
/// `uploadpack.allowTipSHA1InWant`) the advertised tips alone. Unless the server announced that
/// it serves any reachable or any commit (`allow-reachable-sha1-in-want`,
/// `allow-any-sha1-in-want`: then the commit is not there, exit 8 as over v2), the error says what
/// the server needs, exit 5 (the server cannot serve this request). Other errors pass unchanged.
fn refused_want(url: &RemoteUrl, refs: &Advertised, commit: FullSha, err: Error) -> Error {
    match err {
        Error::NotFound(msg) if !serves_any(refs, commit) => Error::Protocol(format!(
            "{url} (protocol v0/v1) refused to send {commit}, which no ref it advertises tips \
             ({msg}). {}",
            needs_tip_hint()
        )),
        other => other,
    }
}

/// A failed request for a commit no ref tips, on a v0/v1 server that did not say it serves such
/// commits: Dulwich answers such a `want` with HTTP 500 (a network failure, retried), so the
/// failure says what the server may need, whatever it was.
fn failed_want(refs: &Advertised, commit: FullSha, err: Error) -> Error {
    match err {
        Error::Network(msg) if !serves_any(refs, commit) => Error::Network(format!(
            "{msg}. If the server refuses {commit} because no ref it advertises tips it (Dulwich \
             answers so): {}",
            needs_tip_hint()
        )),
        other => other,
    }
}

fn serves_any(refs: &Advertised, commit: FullSha) -> bool {
    refs.tips(commit)
        || refs.has("allow-reachable-sha1-in-want")
        || refs.has("allow-any-sha1-in-want")
}

fn needs_tip_hint() -> &'static str {
    "the commit must be reachable from a ref the server advertises (keep an ephemeral ref on \
     it), or the server must serve commits by id (uploadpack.allowReachableSHA1InWant on git or \
     JGit, or protocol v2); if the commit does not exist there, check TIP_SHA"
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

/// Parse a `fetch` response (`gitprotocol-v2` "fetch" "output"): the sections before the pack
/// (`acknowledgments`, `shallow-info`, `wanted-refs`, each at most [`MAX_SECTION_BYTES`]), then
/// the `packfile` section, whose side-band channel 1 streams into [`crate::pack::receive()`] in
/// `want.pack_dir`. `url` is for messages only.
///
/// # Errors
/// As [`fetch_pack`], but for the HTTP ones and the missing `fetch=shallow`.
pub(crate) fn read_fetch(
    url: &RemoteUrl,
    body: impl Read,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let cut = std::sync::Arc::new(AtomicBool::new(false));
    let body = CutDetector {
        inner: body,
        cut: cut.clone(),
    };
    let mut lines = StreamingPeekableIter::new(
        body,
        &[PacketLineRef::Flush, PacketLineRef::Delimiter],
        false,
    );
    let shallow = read_sections_before_pack(url, &mut lines)?;
    lines.reset_with(&[PacketLineRef::Flush]);
    let outcome = receive_packfile(url, &mut lines, want, interrupt, &cut, true)?;
    Ok(Fetched {
        shallow,
        pack_path: outcome.data_path,
        objects: outcome.num_objects,
        big: outcome.big,
    })
}

/// Parse a v0/v1 answer ([`v0::read_negotiation`], then the pack in side-band channel 1 or raw,
/// as `refs` offered side-band) into [`crate::pack::receive()`] in `want.pack_dir`. `url` is for
/// messages only.
///
/// # Errors
/// As [`fetch_pack`], but for the HTTP ones.
pub(crate) fn read_fetch_v0(
    url: &RemoteUrl,
    body: impl Read,
    refs: &Advertised,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let cut = std::sync::Arc::new(AtomicBool::new(false));
    let body = CutDetector {
        inner: body,
        cut: cut.clone(),
    };
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    let shallow = v0::read_negotiation(url, &mut lines)?;
    let outcome = receive_packfile(url, &mut lines, want, interrupt, &cut, v0::side_band(refs))?;
    Ok(Fetched {
        shallow,
        pack_path: outcome.data_path,
        objects: outcome.num_objects,
        big: outcome.big,
    })
}

/// Read the sections of a fetch response up to the `packfile` header, returning the
/// `shallow-info` ids.
fn read_sections_before_pack<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
) -> Result<Vec<gix::ObjectId>> {
    let mut shallow = Vec::new();
    loop {
        let name = match lines.read_line() {
            Some(line) => {
                let line = line
                    .map_err(|e| body_error(url, e))?
                    .map_err(|e| pkt_err(url, e))?;
                if let Some(err) = line.check_error() {
                    return Err(upload_pack_error(url, &String::from_utf8_lossy(err.0)));
                }
                line.as_slice()
                    .map(|d| d.strip_suffix(b"\n").unwrap_or(d).to_vec())
            }
            None => None,
        };
        let Some(name) = name else {
            return Err(Error::Network(format!(
                "{url} ended the fetch response without a pack"
            )));
        };
        match name.as_slice() {
            b"packfile" => return Ok(shallow),
            b"shallow-info" => {
                for l in read_section(url, lines)? {
                    if let Some(hex) = l.strip_prefix(b"shallow ") {
                        let id = FullSha::from_wire(hex)
                            .ok_or_else(|| pkt_err(url, "malformed shallow line"))?;
                        shallow.push(id.id());
                    }
                }
                lines.reset();
            }
            b"acknowledgments" | b"wanted-refs" => {
                read_section(url, lines)?;
                lines.reset();
            }
            other => {
                return Err(pkt_err(
                    url,
                    format!("unknown section '{}'", String::from_utf8_lossy(other)),
                ));
            }
        }
    }
}

/// Stream the `packfile` section's channel 1 into [`crate::pack::receive()`]; progress (channel 2)
/// goes to the debug log, an error on channel 3 ends the transfer and is returned as the
/// server's error. `cut` tells whether the body broke off (see [`pack_error`]).
fn receive_packfile<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
    want: Want<'_>,
    interrupt: &AtomicBool,
    cut: &AtomicBool,
    side_band: bool,
) -> Result<crate::pack::Received> {
    let mut remote_error: Option<String> = None;
    // Redacted as one stream: a token split over two lines or two packets is still found.
    let mut progress = crate::redact::Lines::default();
    let outcome = if side_band {
        let mut reader = lines.as_read_with_sidebands(|is_err, text: &[u8]| {
            let text = String::from_utf8_lossy(text);
            if is_err {
                remote_error = Some(text.trim().to_owned());
                std::ops::ControlFlow::Break(())
            } else {
                // A packet ends its line (gix strips its final newline).
                for line in progress.push(&format!("{text}\n")) {
                    tracing::debug!("remote: {line}");
                }
                std::ops::ControlFlow::Continue(())
            }
        });
        receive_from(&mut reader, want, interrupt, cut)
    } else {
        // Without side-band the pack follows the last ACK/NAK line as it is.
        let mut reader = std::io::BufReader::with_capacity(64 << 10, lines.inner_mut());
        receive_from(&mut reader, want, interrupt, cut)
    };
    for line in progress.finish() {
        tracing::debug!("remote: {line}");
    }
    if let Some(msg) = remote_error {
        return Err(upload_pack_error(url, &msg));
    }
    outcome.map_err(|e| pack_error(url, e, cut.load(std::sync::atomic::Ordering::Relaxed)))
}

/// Index the pack `reader` gives (completing a thin one from `want.base`) under the low-speed
/// rule; `cut` is set when that rule gave up.
fn receive_from(
    reader: &mut dyn std::io::BufRead,
    want: Want<'_>,
    interrupt: &AtomicBool,
    cut: &AtomicBool,
) -> std::result::Result<crate::pack::Received, crate::pack::ReceiveError> {
    let mut reader =
        crate::wire::http::Measured::new(reader, crate::wire::http::LowSpeed::for_pack());
    let received = match want.base {
        Some(base) => crate::pack::receive_thin(
            &mut reader,
            want.pack_dir,
            base.local,
            None,
            want.limits,
            interrupt,
        ),
        None => crate::pack::receive(
            &mut reader,
            want.pack_dir,
            None,
            want.limits,
            interrupt,
            want.observer,
        ),
    };
    // The low-speed rule giving up is a network failure (retried), not a corrupt pack.
    if reader.gave_up() {
        cut.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    received
}

/// Map a failure of [`crate::pack::receive()`]: a corrupt pack from a connection that was `cut` is
/// a network failure (retried), else corruption (exit 6).
fn pack_error(url: &RemoteUrl, err: crate::pack::ReceiveError, cut: bool) -> Error {
    match err {
        crate::pack::ReceiveError::Local(local) => local,
        crate::pack::ReceiveError::TooLarge(why) => {
            Error::Integrity(format!("the pack from {url} is refused: {why}"))
        }
        crate::pack::ReceiveError::Corrupt(e) if cut => {
            Error::Network(format!("the pack transfer from {url} broke off: {e}"))
        }
        crate::pack::ReceiveError::Corrupt(e) => {
            Error::Integrity(format!("the pack from {url} is corrupt: {e}"))
        }
    }
}

/// Records whether the response body failed or ended early, so that a pack error caused by a cut
/// connection is retried as a network failure rather than reported as corruption.
struct CutDetector<R> {
    inner: R,
    cut: std::sync::Arc<AtomicBool>,
}

impl<R: Read> Read for CutDetector<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let res = self.inner.read(buf);
        if matches!(res, Err(_) | Ok(0)) && !buf.is_empty() {
            self.cut.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::SessionBranch;
    use crate::wire::testing::{
        BRANCH, COMMIT2, COMMIT3, Endless, NOT_OUR_REF, assert_err, cuts, pkt, url,
        with_first_prefix,
    };

    const ADVERTISEMENT: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/v2-advertisement.response");
    const LS_REFS_BRANCH: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/ls-refs-branch.response");
    const LS_REFS_NONE: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/ls-refs-none.response");
    const FETCH: &[u8] = include_bytes!("../../../tests/fixtures/wire/fetch-depth-1.response");
    const V0_ADVERTISEMENT: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/v0-advertisement.response");
    const V0_FETCH: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/fetch-v0-depth-1.response");
    /// The id of the pack in [`FETCH`] (its trailer), and its objects as `git verify-pack` lists
    /// them: commit2, its tree, its blob, in id order.
    const PACK_ID: &str = "422f3fabcfc8ed43aa55c0a61ac13625cfa203c5";
    const PACK_OBJECTS: [&str; 3] = [
        "7efcb40c074ff29c8533aa9d58e5adb80c7aaecb",
        COMMIT2,
        "f719efd430d52bcfc8566a43b2eb655688d38871",
    ];
    /// Length prefixes that are not one: not hex, the invalid length 3, longer than a pkt-line.
    const BAD_PREFIXES: [&[u8; 4]; 3] = [b"00x0", b"0003", b"ffff"];

    fn value(caps: &Capabilities, name: &str) -> Option<String> {
        caps.capability(name)
            .map(|c| c.value().unwrap_or_default().to_string())
    }

    fn adv(body: impl Read) -> Result<Server> {
        read_advertisement(&url(), body, Protocol::Auto, BRANCH)
    }

    fn v2(body: impl Read) -> Capabilities {
        match adv(body).unwrap() {
            Server::V2(caps) => caps,
            other => panic!("not v2: {other:?}"),
        }
    }

    #[test]
    fn advertisement_gives_the_recorded_capabilities() {
        let server = adv(ADVERTISEMENT).unwrap();
        assert_eq!(server.version(), 2);
        assert!(fetch_supports(&server, "shallow") && fetch_supports(&server, "wait-for-done"));
        assert!(!fetch_supports(&server, "filter"));
        let caps = v2(ADVERTISEMENT);
        assert_eq!(value(&caps, "agent").as_deref(), Some("git/2.47.3"));
        assert_eq!(value(&caps, "ls-refs").as_deref(), Some("unborn"));
        assert_eq!(value(&caps, "object-format").as_deref(), Some("sha1"));
        assert_eq!(value(&caps, "server-option").as_deref(), Some(""));
        assert_eq!(value(&caps, "version"), None);
    }

    #[test]
    fn advertisement_after_a_service_section_is_read_too() {
        let body = [
            &pkt(b"# service=git-upload-pack\n")[..],
            b"0000",
            ADVERTISEMENT,
        ]
        .concat();
        let caps = v2(body.as_slice());
        assert_eq!(value(&caps, "agent").as_deref(), Some("git/2.47.3"));
    }

    #[test]
    fn a_v0_advertisement_gives_the_branch_the_capabilities_and_the_tips() {
        let server = adv(V0_ADVERTISEMENT).unwrap();
        assert_eq!(server.version(), 0);
        let Server::V0 { refs, branch } = &server else {
            unreachable!()
        };
        assert_eq!(branch, BRANCH);
        assert_eq!(refs.tip.map(|t| t.to_string()).as_deref(), Some(COMMIT2));
        assert!(refs.tips(COMMIT2.parse().unwrap()) && refs.tips(COMMIT3.parse().unwrap()));
        assert!(!refs.tips("2fac68e429bf0e8adce31465607d8086722559b7".parse().unwrap()));
        for cap in ["shallow", "no-done", "multi_ack_detailed", "side-band-64k"] {
            assert!(fetch_supports(&server, cap), "{cap}");
        }
        assert!(!fetch_supports(&server, "filter"));
        let http = Http::new().unwrap();
        let main: SessionBranch = "main".parse().unwrap();
        let other = ls_ref(&http, &url(), &server, &main).unwrap_err();
        assert!(matches!(other, Error::Internal(_)), "{other:?}");
        let abc: SessionBranch = "sessions/abc".parse().unwrap();
        assert_eq!(
            ls_ref(&http, &url(), &server, &abc)
                .unwrap()
                .map(|t| t.to_string())
                .as_deref(),
            Some(COMMIT2)
        );
    }

    #[test]
    fn a_forced_protocol_refuses_the_other_answer() {
        let err = read_advertisement(&url(), V0_ADVERTISEMENT, Protocol::V2, BRANCH).unwrap_err();
        assert!(
            matches!(&err, Error::Protocol(m) if m.contains("does not speak git protocol v2")),
            "{err:?}"
        );
        let err = read_advertisement(&url(), ADVERTISEMENT, Protocol::V0, BRANCH).unwrap_err();
        assert!(matches!(&err, Error::Protocol(m) if m.contains("GIT_SESSION_PROTOCOL=0")));
        let v0 = read_advertisement(&url(), V0_ADVERTISEMENT, Protocol::V0, BRANCH).unwrap();
        assert_eq!(v0.version(), 0);
    }

    #[test]
    fn a_v0_advertisement_cut_off_anywhere_is_a_network_failure() {
        // Past the service line: a cut inside it reads as no advertisement at all.
        for cut in cuts(V0_ADVERTISEMENT, 1) {
            assert_err!(adv(cut), Error::Network(_));
        }
    }

    #[test]
    fn advertisement_of_sha256_is_a_usage_error() {
        let body = [
            &pkt(b"version 2\n")[..],
            &pkt(b"object-format=sha256\n"),
            b"0000",
        ]
        .concat();
        assert_err!(adv(body.as_slice()), Error::Usage(..));
    }

    #[test]
    fn advertisement_cut_off_anywhere_is_a_network_failure() {
        for cut in cuts(ADVERTISEMENT, 0) {
            assert_err!(adv(cut), Error::Network(_));
        }
    }

    #[test]
    fn advertisement_with_a_bad_length_or_an_err_line_is_refused() {
        for prefix in BAD_PREFIXES {
            let body = with_first_prefix(ADVERTISEMENT, prefix);
            assert_err!(adv(body.as_slice()), Error::Protocol(_));
        }
        let err = pkt(b"ERR access denied");
        assert_err!(adv(err.as_slice()), Error::Protocol(_));
    }

    #[test]
    fn advertisement_without_end_is_refused_at_the_bound() {
        let body = Endless::new(pkt(b"version 2\n"), pkt(&[b'x'; 1000]), MAX_SECTION_BYTES);
        assert_err!(adv(body), Error::Protocol(_));
    }

    #[test]
    fn ls_refs_finds_the_branch_or_nothing() {
        let found = read_ls_refs(&url(), LS_REFS_BRANCH, BRANCH).unwrap();
        assert_eq!(found.map(|id| id.to_string()).as_deref(), Some(COMMIT2));
        // Only the exact name counts, not a prefix of it.
        let prefix = &BRANCH[..BRANCH.len() - 1];
        assert_eq!(read_ls_refs(&url(), LS_REFS_BRANCH, prefix).unwrap(), None);
        assert_eq!(read_ls_refs(&url(), LS_REFS_NONE, BRANCH).unwrap(), None);
    }

    #[test]
    fn ls_refs_cut_off_anywhere_is_a_network_failure() {
        for cut in cuts(LS_REFS_BRANCH, 0).chain(cuts(LS_REFS_NONE, 0)) {
            assert_err!(read_ls_refs(&url(), cut, BRANCH), Error::Network(_));
        }
    }

    #[test]
    fn ls_refs_with_a_bad_line_is_refused() {
        for prefix in BAD_PREFIXES {
            let body = with_first_prefix(LS_REFS_BRANCH, prefix);
            assert_err!(
                read_ls_refs(&url(), body.as_slice(), BRANCH),
                Error::Protocol(_)
            );
        }
        let no_name = [&pkt(format!("{COMMIT2}\n").as_bytes())[..], b"0000"].concat();
        let bad_id = [
            &pkt(format!("{COMMIT2}x {BRANCH}\n").as_bytes())[..],
            b"0000",
        ]
        .concat();
        for body in [no_name, bad_id, pkt(b"ERR ls-refs failed")] {
            assert_err!(
                read_ls_refs(&url(), body.as_slice(), BRANCH),
                Error::Protocol(_)
            );
        }
    }

    #[test]
    fn ls_refs_without_end_is_refused_at_the_bound() {
        let line = format!("{COMMIT3} refs/heads/{}\n", "x".repeat(60_000));
        let body = Endless::new(Vec::new(), pkt(line.as_bytes()), MAX_LS_REFS_BYTES);
        assert_err!(read_ls_refs(&url(), body, BRANCH), Error::Protocol(_));
    }

    /// [`read_fetch`] of `body` for commit2 at depth 1 into a new directory, kept with the result.
    fn fetch_with(
        body: impl Read,
        limits: crate::pack::PackLimits,
    ) -> (Result<Fetched>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let want = Want {
            commit: COMMIT2.parse().unwrap(),
            depth: Some(1),
            pack_dir: dir.path(),
            limits,
            base: None,
            observer: None,
            filter: None,
            more: &[],
        };
        (read_fetch(&url(), body, want, &AtomicBool::new(false)), dir)
    }

    fn fetch(body: impl Read) -> Result<Fetched> {
        fetch_with(body, crate::pack::PackLimits::default()).0
    }

    /// [`FETCH`] up to the end of the `packfile` header, then `rest`.
    fn packfile_then(rest: &[u8]) -> Vec<u8> {
        let header = FETCH.windows(9).position(|w| w == b"packfile\n").unwrap() + 9;
        [&FETCH[..header], rest].concat()
    }

    #[test]
    fn fetch_gives_the_shallow_commit_and_the_pack() {
        let (fetched, dir) = fetch_with(FETCH, crate::pack::PackLimits::default());
        let fetched = fetched.unwrap();
        assert_eq!(
            fetched.shallow,
            vec![COMMIT2.parse::<FullSha>().unwrap().id()]
        );
        assert_eq!(fetched.objects, 3);
        assert!(fetched.big.is_empty());
        let pack = dir.path().join(format!("pack-{PACK_ID}.pack"));
        assert_eq!(fetched.pack_path.as_deref(), Some(pack.as_path()));
        let index =
            gix_pack::index::File::at(pack.with_extension("idx"), gix::hash::Kind::Sha1).unwrap();
        let ids: Vec<String> = index.iter().map(|e| e.oid.to_string()).collect();
        assert_eq!(ids, PACK_OBJECTS);
    }

    #[test]
    fn fetch_cut_off_anywhere_is_a_network_failure() {
        for cut in cuts(FETCH, 0) {
            assert_err!(fetch(cut), Error::Network(_));
        }
        assert_err!(fetch(&b"0000"[..]), Error::Network(m) if m.contains("without a pack"));
    }

    #[test]
    fn fetch_with_a_corrupt_or_too_large_pack_is_an_integrity_failure() {
        // The pack's last byte, the end of its checksum, sits in the last side-band packet.
        let mut corrupt = FETCH.to_vec();
        let last = corrupt.len() - 5;
        corrupt[last] ^= 0xff;
        assert_err!(fetch(corrupt.as_slice()), Error::Integrity(_));
        let small = crate::pack::PackLimits {
            max_object_bytes: 100,
            big_object_bytes: 100,
            max_tree_entries: crate::pack::DEFAULT_MAX_TREE_ENTRIES,
        };
        assert_err!(fetch_with(FETCH, small).0, Error::Integrity(m) if m.contains("refused"));
    }

    #[test]
    fn fetch_with_a_bad_line_or_section_is_refused() {
        for prefix in BAD_PREFIXES {
            assert_err!(
                fetch(with_first_prefix(FETCH, prefix).as_slice()),
                Error::Protocol(_)
            );
        }
        let unknown = [&pkt(b"surprise\n")[..], b"0000"].concat();
        let bad_shallow = [&pkt(b"shallow-info\n")[..], &pkt(b"shallow 1234"), b"0001"].concat();
        for body in [unknown, bad_shallow, pkt(b"ERR fetch failed")] {
            assert_err!(fetch(body.as_slice()), Error::Protocol(_));
        }
    }

    fn v0_refs(body: &[u8]) -> Advertised {
        match adv(body).unwrap() {
            Server::V0 { refs, .. } => refs,
            other => panic!("not v0: {other:?}"),
        }
    }

    fn fetch_v0(body: impl Read, refs: &Advertised) -> (Result<Fetched>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let want = Want {
            commit: COMMIT2.parse().unwrap(),
            depth: Some(1),
            pack_dir: dir.path(),
            limits: crate::pack::PackLimits::default(),
            base: None,
            observer: None,
            filter: None,
            more: &[],
        };
        let fetched = read_fetch_v0(&url(), body, refs, want, &AtomicBool::new(false));
        (fetched, dir)
    }

    fn assert_the_recorded_pack(fetched: Result<Fetched>) {
        let fetched = fetched.unwrap();
        assert_eq!(
            fetched.shallow,
            vec![COMMIT2.parse::<FullSha>().unwrap().id()]
        );
        assert_eq!(fetched.objects, 3);
        let pack = fetched.pack_path.unwrap();
        let index =
            gix_pack::index::File::at(pack.with_extension("idx"), gix::hash::Kind::Sha1).unwrap();
        let ids: Vec<String> = index.iter().map(|e| e.oid.to_string()).collect();
        assert_eq!(ids, PACK_OBJECTS);
    }

    /// Where the pack's side-band packets start in [`V0_FETCH`] (after `NAK`).
    fn v0_pack_start() -> usize {
        V0_FETCH.windows(8).position(|w| w == b"0008NAK\n").unwrap() + 8
    }

    #[test]
    fn a_v0_fetch_gives_the_shallow_commit_and_the_pack_in_side_band() {
        let refs = v0_refs(V0_ADVERTISEMENT);
        assert!(v0::side_band(&refs));
        assert_the_recorded_pack(fetch_v0(V0_FETCH, &refs).0);
    }

    #[test]
    fn a_v0_fetch_without_side_band_reads_the_raw_pack() {
        let adv = [
            &pkt(format!("{COMMIT2} {BRANCH}\0shallow ofs-delta\n").as_bytes())[..],
            b"0000",
        ]
        .concat();
        let refs = v0_refs(&adv);
        assert!(!v0::side_band(&refs));
        // The recorded side-band packets, unwrapped: what such a server sends after NAK.
        let mut raw = V0_FETCH[..v0_pack_start()].to_vec();
        let mut at = v0_pack_start();
        while &V0_FETCH[at..at + 4] != b"0000" {
            let len =
                usize::from_str_radix(std::str::from_utf8(&V0_FETCH[at..at + 4]).unwrap(), 16)
                    .unwrap();
            assert_eq!(V0_FETCH[at + 4], 1, "only channel 1 in the recording");
            raw.extend_from_slice(&V0_FETCH[at + 5..at + len]);
            at += len;
        }
        assert_the_recorded_pack(fetch_v0(raw.as_slice(), &refs).0);
    }

    #[test]
    fn a_v0_fetch_cut_off_anywhere_is_a_network_failure() {
        let refs = v0_refs(V0_ADVERTISEMENT);
        for cut in cuts(V0_FETCH, 0) {
            let (fetched, dir) = fetch_v0(cut, &refs);
            assert_err!(fetched, Error::Network(_));
            assert_eq!(
                std::fs::read_dir(dir.path()).unwrap().count(),
                0,
                "left a file"
            );
        }
    }

    #[test]
    fn a_v0_negotiation_without_end_or_with_a_stray_line_is_refused() {
        let refs = v0_refs(V0_ADVERTISEMENT);
        let line = pkt(format!("ACK {COMMIT2} common\n").as_bytes());
        let body = Endless::new(Vec::new(), line, v0::MAX_NEGOTIATION_LINES * 60);
        assert_err!(fetch_v0(body, &refs).0, Error::Protocol(m) if m.contains("lines before the pack"));
        for stray in [
            format!("ACK {COMMIT2} maybe\n"),
            "shallow 1234\n".to_owned(),
            "PACK\n".to_owned(),
        ] {
            let body = pkt(stray.as_bytes());
            assert_err!(fetch_v0(body.as_slice(), &refs).0, Error::Protocol(_));
        }
        assert_err!(
            fetch_v0(pkt(NOT_OUR_REF).as_slice(), &refs).0,
            Error::NotFound(_)
        );
    }

    #[test]
    fn a_v0_refusal_of_an_untipped_commit_names_the_server_setting() {
        let refs = v0_refs(V0_ADVERTISEMENT);
        let not_found = || Error::NotFound("not our ref".into());
        let untipped: FullSha = "2fac68e429bf0e8adce31465607d8086722559b7".parse().unwrap();
        let err = refused_want(&url(), &refs, untipped, not_found());
        assert!(
            matches!(&err, Error::Protocol(m) if m.contains("uploadpack.allowReachableSHA1InWant")
                && m.contains("ephemeral ref") && m.contains("check TIP_SHA")),
            "{err:?}"
        );
        let tipped = COMMIT3.parse().unwrap();
        assert_err!(
            Err::<(), _>(refused_want(&url(), &refs, tipped, not_found())),
            Error::NotFound(_)
        );
        let allowing = [
            &pkt(format!("{COMMIT3} {BRANCH}\0shallow allow-reachable-sha1-in-want\n").as_bytes())
                [..],
            b"0000",
        ]
        .concat();
        let refs = v0_refs(&allowing);
        assert_err!(
            Err::<(), _>(refused_want(&url(), &refs, untipped, not_found())),
            Error::NotFound(_)
        );
        let network = refused_want(&url(), &refs, untipped, Error::Network("cut".into()));
        assert_err!(Err::<(), _>(network), Error::Network(_));
    }

    #[test]
    fn a_v0_request_asks_for_the_offered_capabilities_and_refuses_depth_without_shallow() {
        let refs = v0_refs(V0_ADVERTISEMENT);
        let commit: FullSha = COMMIT2.parse().unwrap();
        let have = COMMIT3.parse::<FullSha>().unwrap().id();
        let ask = v0::Ask {
            commit,
            depth: Some(1),
            shallow: &[have],
            haves: &[have],
        };
        let body = v0::request(&url(), &refs, &ask).unwrap();
        let text = String::from_utf8_lossy(&body);
        let want = format!(
            "want {COMMIT2} multi_ack_detailed no-done side-band-64k ofs-delta no-progress \
             thin-pack shallow agent={} object-format=sha1\n",
            lines::AGENT
        );
        let expected = [
            pkt(want.as_bytes()),
            pkt(format!("shallow {COMMIT3}\n").as_bytes()),
            pkt(b"deepen 1\n"),
            b"0000".to_vec(),
            pkt(format!("have {COMMIT3}\n").as_bytes()),
            pkt(b"done\n"),
        ]
        .concat();
        assert_eq!(text, String::from_utf8_lossy(&expected));
        let bare = [
            &pkt(format!("{COMMIT2} {BRANCH}\0ofs-delta\n").as_bytes())[..],
            b"0000",
        ]
        .concat();
        assert_err!(
            v0::request(&url(), &v0_refs(&bare), &ask),
            Error::Protocol(m) if m.contains("shallow")
        );
    }

    /// JGit's and Dulwich's recorded upload-pack advertisements (v0 only): the `want` asks for
    /// what each offers; Dulwich refuses a client without side-band-64k, thin-pack and ofs-delta.
    #[test]
    fn a_v0_want_asks_jgit_and_dulwich_for_what_they_offer() {
        let cases: [(&[u8], &str, bool); 2] = [
            (
                include_bytes!(
                    "../../../tests/fixtures/wire/jgit-upload-pack-advertisement.response"
                ),
                "multi_ack_detailed no-done side-band-64k ofs-delta no-progress thin-pack shallow agent=",
                false,
            ),
            (
                include_bytes!(
                    "../../../tests/fixtures/wire/dulwich-upload-pack-advertisement.response"
                ),
                "multi_ack_detailed no-done side-band-64k ofs-delta no-progress thin-pack shallow \
                 object-format=sha1\n",
                true,
            ),
        ];
        for (recorded, caps, filter) in cases {
            let server = read_advertisement(&url(), recorded, Protocol::Auto, "refs/heads/main");
            let offers_filter = server.as_ref().is_ok_and(|s| fetch_supports(s, "filter"));
            assert_eq!(offers_filter, filter, "filter offered");
            let Ok(Server::V0 { refs, .. }) = server else {
                panic!("{server:?}")
            };
            assert!(refs.tip.is_some(), "main is advertised");
            let ask = v0::Ask {
                commit: refs.tip.unwrap(),
                depth: Some(1),
                shallow: &[],
                haves: &[],
            };
            let body = v0::request(&url(), &refs, &ask).unwrap();
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains(caps), "{text}");
        }
    }

    #[test]
    fn fetch_of_a_commit_the_server_lacks_is_not_found() {
        assert_err!(fetch(pkt(NOT_OUR_REF).as_slice()), Error::NotFound(_));
        let mut on_channel_3 = b"\x03".to_vec();
        on_channel_3.extend_from_slice(&NOT_OUR_REF[4..]);
        let body = packfile_then(&pkt(&on_channel_3));
        assert_err!(fetch(body.as_slice()), Error::NotFound(_));
        let body = packfile_then(&pkt(b"\x03fatal: out of memory\n"));
        assert_err!(fetch(body.as_slice()), Error::Protocol(m) if m.contains("out of memory"));
    }

    #[test]
    fn fetch_section_without_end_is_refused_at_the_bound() {
        let line = pkt(format!("shallow {COMMIT2}").as_bytes());
        let body = Endless::new(pkt(b"shallow-info\n"), line, MAX_SECTION_BYTES);
        assert_err!(fetch(body), Error::Protocol(_));
    }
}
