//! A smart-HTTP protocol v2 upload-pack client: one ref looked up, one commit fetched.
//!
//! Follows git's `gitprotocol-http` ("Smart Clients": `GET $GIT_URL/info/refs?service=git-upload-pack`
//! with `Git-Protocol: version=2`, then `POST $GIT_URL/git-upload-pack`) and `gitprotocol-v2`
//! (`ls-refs` with `ref-prefix`, `fetch` with `want`, `deepen`, `done`; response sections
//! `shallow-info` and `packfile` with side-band). Pkt-lines are read and written with gix-packetline;
//! the pack is indexed as it streams in ([`crate::pack::receive`], on gix-pack).

use std::io::Read;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::{StreamingPeekableIter, encode};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};

use crate::error::{Error, Result};
use crate::types::{FullSha, RemoteUrl, SessionBranch};
use crate::wire::http::{Http, Request, body_error};

const AGENT: &str = concat!("git-session/", env!("CARGO_PKG_VERSION"));

/// The capabilities a protocol v2 server advertised (`gitprotocol-v2` "Capability Advertisement").
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    lines: Vec<String>,
}

impl Capabilities {
    /// The value of capability `name` (`""` for a bare capability), if advertised.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.lines.iter().find_map(|l| match l.split_once('=') {
            Some((k, v)) if k == name => Some(v),
            None if l == name => Some(""),
            _ => None,
        })
    }

    /// Whether the `fetch` command supports the feature `feature` (e.g. `shallow`).
    pub fn fetch_supports(&self, feature: &str) -> bool {
        self.get("fetch")
            .is_some_and(|v| v.split(' ').any(|f| f == feature))
    }
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

fn pkt_err(url: &RemoteUrl, e: impl std::fmt::Display) -> Error {
    Error::Protocol(format!("malformed pkt-line from {url}: {e}"))
}

/// The most bytes of one pkt-line section kept in memory: the capability advertisement and the
/// sections of a fetch response before the pack (`acknowledgments`, `shallow-info`). git's are a
/// few KiB; a server sending more is refused (exit 5), whatever it sends memory stays bounded.
pub const MAX_SECTION_BYTES: usize = 1 << 20;

/// The most bytes of an `ls-refs` answer read (line by line, nothing kept but the one ref asked
/// for): a server sending more is refused (exit 5).
pub const MAX_LS_REFS_BYTES: usize = 64 << 20;

/// Call `each` with the data lines until a flush (or a delimiter, as `lines` was set up), mapping
/// `ERR` lines, and refusing more than `limit` bytes.
fn for_each_line<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
    limit: usize,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut seen = 0usize;
    while let Some(line) = lines.read_line() {
        let line = line
            .map_err(|e| body_error(url, e))?
            .map_err(|e| pkt_err(url, e))?;
        if let Some(err) = line.check_error() {
            return Err(upload_pack_error(url, &String::from_utf8_lossy(err.0)));
        }
        let Some(data) = line.as_slice() else { break };
        seen += data.len() + 4;
        if seen > limit {
            return Err(Error::Protocol(format!(
                "{url} sent a pkt-line section over {limit} bytes where git sends a few KiB: \
                 refused (a misbehaving server)"
            )));
        }
        each(data.strip_suffix(b"\n").unwrap_or(data))?;
    }
    Ok(())
}

/// Read data lines until a flush (or a delimiter if `lines` stops there), at most
/// [`MAX_SECTION_BYTES`] of them.
fn read_section<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for_each_line(url, lines, MAX_SECTION_BYTES, |data| {
        out.push(data.to_vec());
        Ok(())
    })?;
    Ok(out)
}

fn upload_pack_error(url: &RemoteUrl, msg: &str) -> Error {
    // git prefixes its own errors with the program name; ours add it once.
    let msg = msg.trim();
    let msg = msg.strip_prefix("upload-pack: ").unwrap_or(msg);
    if msg.contains("not our ref") || msg.contains("no such remote ref") {
        Error::NotFound(format!(
            "commit not found on the remote {url} (upload-pack: {msg}): check TIP_SHA"
        ))
    } else {
        Error::Protocol(format!("{url} reported an error: {msg}"))
    }
}

/// Step 1: the capability advertisement. Requires protocol v2 and SHA-1.
///
/// # Errors
/// [`Error::Network`] (exit 5) for a server without protocol v2 or one that is not smart HTTP;
/// [`Error::Usage`] (exit 2) for `object-format=sha256`; HTTP errors as [`Http::check_status`].
pub fn handshake(http: &Http, url: &RemoteUrl) -> Result<Capabilities> {
    let resp = http.send(
        url,
        Request {
            endpoint: "info/refs?service=git-upload-pack",
            headers: v2_headers(false),
            body: None,
        },
    )?;
    let ctype = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if ctype != "application/x-git-upload-pack-advertisement" {
        return Err(Error::Protocol(format!(
            "{url} is not a smart-HTTP git server (Content-Type '{ctype}')"
        )));
    }
    read_advertisement(url, resp)
}

/// Parse the body of `GET info/refs?service=git-upload-pack`: an optional `# service=` section,
/// then `version 2` and the capabilities up to a flush (`gitprotocol-v2` "Capability
/// Advertisement"). `url` is for messages only.
///
/// # Errors
/// As [`handshake`], but for the HTTP ones: [`Error::Protocol`] for a v0/v1 answer, malformed
/// pkt-lines, an `ERR` line or a section over [`MAX_SECTION_BYTES`]; [`Error::Network`] for a
/// body that breaks off; [`Error::Usage`] for `object-format=sha256`.
fn read_advertisement(url: &RemoteUrl, body: impl Read) -> Result<Capabilities> {
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    let mut first = read_section(url, &mut lines)?;
    if first.first().is_some_and(|l| l.starts_with(b"# service=")) {
        lines.reset();
        first = read_section(url, &mut lines)?;
    }
    let mut it = first
        .into_iter()
        .map(|l| String::from_utf8_lossy(&l).into_owned());
    match it.next() {
        Some(v) if v == "version 2" => {}
        _ => {
            return Err(Error::Protocol(format!(
                "{url} does not speak git protocol v2 (it answered with protocol v0/v1); \
                 git-session needs v2 to fetch one commit by id (git ≥ 2.18 with protocol.version=2)"
            )));
        }
    }
    let caps = Capabilities {
        lines: it.collect(),
    };
    if let Some(fmt) = caps.get("object-format")
        && fmt != "sha1"
    {
        return Err(Error::Usage(format!(
            "SHA-256 repositories are not supported yet (the remote announces object-format={fmt})"
        )));
    }
    Ok(caps)
}

fn command_body(caps: &Capabilities, command: &str, args: &[String]) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(256);
    let io = |e| Error::io("encoding a pkt-line", e);
    encode::text_to_write(format!("command={command}").as_bytes(), &mut body).map_err(io)?;
    if caps.get("agent").is_some() {
        encode::text_to_write(format!("agent={AGENT}").as_bytes(), &mut body).map_err(io)?;
    }
    if caps.get("object-format").is_some() {
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
/// (`ls-refs` with `ref-prefix refs/heads/<branch>`, then an exact match).
///
/// Returns `None` when the remote has no such branch.
///
/// # Errors
/// HTTP and protocol errors as in [`handshake`].
pub fn ls_ref(
    http: &Http,
    url: &RemoteUrl,
    caps: &Capabilities,
    branch: &SessionBranch,
) -> Result<Option<FullSha>> {
    let full = branch.full_ref();
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
/// [`Error::Protocol`] for malformed lines, an `ERR` line or an answer over the bound;
/// [`Error::Network`] for a body that breaks off.
fn read_ls_refs(url: &RemoteUrl, body: impl Read, full_ref: &str) -> Result<Option<FullSha>> {
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

/// What a fetch brought.
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
}

/// Step 3: fetch `want.commit` (and its history up to `want.depth` commits) into `want.pack_dir`,
/// no tags, no other refs, and index the pack as it streams in.
///
/// # Errors
/// [`Error::NotFound`] (exit 8) when the server does not have the commit; [`Error::Network`] for a
/// broken stream (retryable) or a side-band error; [`Error::Integrity`] for a corrupt pack or one
/// over the limits; [`Error::LocalIo`] when the disk refuses the pack.
pub fn fetch_pack(
    http: &Http,
    url: &RemoteUrl,
    caps: &Capabilities,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let body = fetch_request(url, caps, want.commit, want.depth)?;
    let resp = http
        .send(
            url,
            Request {
                endpoint: "git-upload-pack",
                headers: v2_headers(true),
                body: Some(body.into()),
            },
        )?
        // The pack's bytes are measured instead (in receive_packfile): keep-alives come before them.
        .unmeasured();
    let body = crate::progress::Counted {
        inner: resp,
        progress: crate::progress::Progress::bytes("receiving objects"),
    };
    read_fetch(url, body, want, interrupt)
}

/// The `fetch` request (`gitprotocol-v2` "fetch"): `ofs-delta`, `no-progress`, `deepen <depth>`
/// when a depth is asked for, `want <commit>`, `done`.
///
/// # Errors
/// [`Error::Protocol`] when a depth is asked for and the server's `fetch` lacks `shallow`.
fn fetch_request(
    url: &RemoteUrl,
    caps: &Capabilities,
    commit: FullSha,
    depth: Option<u32>,
) -> Result<Vec<u8>> {
    let mut args = vec!["ofs-delta".to_owned(), "no-progress".to_owned()];
    if let Some(depth) = depth {
        if !caps.fetch_supports("shallow") {
            return Err(Error::Protocol(format!(
                "{url} does not support shallow fetches (fetch=shallow), needed for --depth"
            )));
        }
        args.push(format!("deepen {depth}"));
    }
    args.push(format!("want {commit}"));
    args.push("done".to_owned());
    command_body(caps, "fetch", &args)
}

/// Parse a `fetch` response (`gitprotocol-v2` "fetch" "output"): the sections before the pack
/// (`acknowledgments`, `shallow-info`, `wanted-refs`, each at most [`MAX_SECTION_BYTES`]), then
/// the `packfile` section, whose side-band channel 1 streams into [`crate::pack::receive`] in
/// `want.pack_dir`. `url` is for messages only.
///
/// # Errors
/// As [`fetch_pack`], but for the HTTP ones: [`Error::Network`] also for a body that breaks off
/// before the pack; [`Error::Protocol`] for malformed pkt-lines, an unknown section, an `ERR`
/// line or a side-band error (channel 3) — [`Error::NotFound`] when either says the commit is
/// not the server's.
fn read_fetch(
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
    let outcome = receive_packfile(url, &mut lines, want, interrupt, &cut)?;
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

/// Stream the `packfile` section's channel 1 into [`crate::pack::receive`]; progress (channel 2)
/// goes to the debug log, an error on channel 3 ends the transfer and is returned as the
/// server's error. `cut` tells whether the body broke off (see [`pack_error`]).
fn receive_packfile<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
    want: Want<'_>,
    interrupt: &AtomicBool,
    cut: &AtomicBool,
) -> Result<crate::pack::Received> {
    let mut remote_error: Option<String> = None;
    let outcome = {
        let mut reader = lines.as_read_with_sidebands(|is_err, text: &[u8]| {
            let text = String::from_utf8_lossy(text).trim().to_owned();
            if is_err {
                remote_error = Some(text);
                std::ops::ControlFlow::Break(())
            } else {
                tracing::debug!("remote: {text}");
                std::ops::ControlFlow::Continue(())
            }
        });
        let mut reader =
            crate::wire::http::Measured::new(&mut reader, crate::wire::http::LowSpeed::for_pack());
        crate::pack::receive(&mut reader, want.pack_dir, None, want.limits, interrupt)
    };
    if let Some(msg) = remote_error {
        return Err(upload_pack_error(url, &msg));
    }
    outcome.map_err(|e| pack_error(url, e, cut.load(std::sync::atomic::Ordering::Relaxed)))
}

/// Map a failure of [`crate::pack::receive`]: a corrupt pack from a connection that was `cut` is
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
