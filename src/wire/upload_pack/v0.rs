//! Protocol v0/v1 upload-pack over smart HTTP, stateless (`gitprotocol-pack` "Packfile
//! Negotiation", `gitprotocol-http` "Smart Service git-upload-pack"): one request holds the
//! `want` with its capabilities, the `shallow` and `deepen` lines, a flush, the `have`s and
//! `done`; the answer holds the `shallow`/`unshallow` lines, the ACKs or NAK, then the pack.

use std::io::Read;

use gix_packetline::blocking_io::{StreamingPeekableIter, encode};

use super::lines::{AGENT, pkt_err, upload_pack_error};
use crate::error::{Error, Result};
use crate::types::{FullSha, RemoteUrl};
use crate::wire::advertisement::Advertised;

/// The most pkt-lines read before the pack starts: a `shallow`/`unshallow` line per shallow
/// commit, an ACK per `have`, a few flushes. git sends a handful; a server sending more is
/// refused, so an endless negotiation stays bounded.
pub const MAX_NEGOTIATION_LINES: usize = 1 << 16;

/// What one stateless request asks for.
pub struct Ask<'a> {
    /// The commit.
    pub commit: FullSha,
    /// Its history, in commits (`None`: all).
    pub depth: Option<u32>,
    /// The local shallow commits (a baked template's), sent as `shallow <id>`.
    pub shallow: &'a [gix::ObjectId],
    /// The commits the repository has, sent as `have <id>`; a thin pack is asked for with them.
    pub haves: &'a [gix::ObjectId],
}

/// How the pack comes: in side-band channel 1 (`side-band-64k` or `side-band`) or raw.
pub fn side_band(adv: &Advertised) -> bool {
    adv.has("side-band-64k") || adv.has("side-band")
}

/// The capabilities asked for on the `want` line: those of git's own fetch that the server
/// offers (`gitprotocol-capabilities`).
fn capabilities(adv: &Advertised, ask: &Ask<'_>) -> Vec<String> {
    let mut caps = Vec::new();
    for name in ["multi_ack_detailed", "no-done"] {
        if adv.has(name) {
            caps.push(name.to_owned());
        }
    }
    if adv.has("side-band-64k") {
        caps.push("side-band-64k".to_owned());
    } else if adv.has("side-band") {
        caps.push("side-band".to_owned());
    }
    // thin-pack even without haves, as git asks: with none the pack has no base to leave out,
    // and Dulwich refuses a client without it.
    let mut wanted = vec!["ofs-delta", "no-progress", "thin-pack"];
    if ask.depth.is_some() || !ask.shallow.is_empty() {
        wanted.push("shallow");
    }
    caps.extend(wanted.into_iter().filter(|c| adv.has(c)).map(str::to_owned));
    if adv.has("agent") {
        caps.push(format!("agent={AGENT}"));
    }
    if adv.has("object-format") {
        caps.push("object-format=sha1".to_owned());
    }
    caps
}

/// The request body: `want <id> <capabilities>`, a `shallow <id>` per local shallow commit,
/// `deepen <depth>`, a flush, a `have <id>` per local commit, `done`.
///
/// # Errors
/// [`Error::Protocol`] (exit 5) when a depth or a shallow base needs `shallow` and the server
/// lacks it.
pub fn request(url: &RemoteUrl, adv: &Advertised, ask: &Ask<'_>) -> Result<Vec<u8>> {
    if (ask.depth.is_some() || !ask.shallow.is_empty()) && !adv.has("shallow") {
        return Err(Error::Protocol(format!(
            "{url} does not support shallow fetches (the shallow capability), needed for --depth"
        )));
    }
    let mut body = Vec::with_capacity(256 + 50 * (ask.shallow.len() + ask.haves.len()));
    let io = |e| Error::io("encoding a pkt-line", e);
    let line = |text: String, body: &mut Vec<u8>| {
        encode::text_to_write(text.as_bytes(), body)
            .map(|_| ())
            .map_err(io)
    };
    let caps = capabilities(adv, ask).join(" ");
    line(format!("want {} {caps}", ask.commit), &mut body)?;
    for id in ask.shallow {
        line(format!("shallow {id}"), &mut body)?;
    }
    if let Some(depth) = ask.depth {
        line(format!("deepen {depth}"), &mut body)?;
    }
    encode::flush_to_write(&mut body).map_err(io)?;
    for id in ask.haves {
        line(format!("have {id}"), &mut body)?;
    }
    line("done".to_owned(), &mut body)?;
    Ok(body)
}

/// Read the answer up to the pack: `shallow`/`unshallow` lines and their flush, then ACK lines
/// up to the last (`ACK <id>` without a status, or `NAK`), at most [`MAX_NEGOTIATION_LINES`].
/// Returns the `shallow` ids. `lines` stops at flushes.
///
/// # Errors
/// [`Error::Network`] when the body breaks off; [`Error::NotFound`]/[`Error::Protocol`] for an
/// `ERR` line (as [`upload_pack_error`]); [`Error::Protocol`] for any other line or too many.
pub fn read_negotiation<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
) -> Result<Vec<gix::ObjectId>> {
    let mut shallow = Vec::new();
    for _ in 0..MAX_NEGOTIATION_LINES {
        let Some(line) = lines.read_line() else {
            // A flush ends the shallow lines; the ACKs follow.
            if lines.stopped_at().is_none() {
                return Err(Error::Network(format!(
                    "{url} ended the fetch response without a pack"
                )));
            }
            lines.reset();
            continue;
        };
        let line = line
            .map_err(|e| crate::wire::http::body_error(url, e))?
            .map_err(|e| pkt_err(url, e))?;
        if let Some(err) = line.check_error() {
            return Err(upload_pack_error(url, &String::from_utf8_lossy(err.0)));
        }
        let Some(data) = line.as_slice() else {
            continue;
        };
        let data = data.strip_suffix(b"\n").unwrap_or(data);
        match negotiation_line(url, data)? {
            Negotiation::Shallow(id) => shallow.push(id),
            Negotiation::Other => {}
            Negotiation::Last => return Ok(shallow),
        }
    }
    Err(Error::Protocol(format!(
        "{url} sent over {MAX_NEGOTIATION_LINES} lines before the pack: refused (a misbehaving \
         server)"
    )))
}

enum Negotiation {
    Shallow(gix::ObjectId),
    Other,
    Last,
}

/// One line before the pack (`gitprotocol-pack` "Packfile Negotiation"): `shallow <id>`,
/// `unshallow <id>`, `ACK <id> common|ready|continue`, and the last: `ACK <id>` or `NAK`.
fn negotiation_line(url: &RemoteUrl, data: &[u8]) -> Result<Negotiation> {
    let id = |hex: &[u8]| {
        FullSha::from_wire(hex)
            .map(|id| id.id())
            .ok_or_else(|| pkt_err(url, "a malformed object id before the pack"))
    };
    if let Some(hex) = data.strip_prefix(b"shallow ") {
        return Ok(Negotiation::Shallow(id(hex)?));
    }
    if let Some(hex) = data.strip_prefix(b"unshallow ") {
        id(hex)?;
        return Ok(Negotiation::Other);
    }
    if data == b"NAK" {
        return Ok(Negotiation::Last);
    }
    if let Some(rest) = data.strip_prefix(b"ACK ") {
        let (hex, status) = match rest.iter().position(|b| *b == b' ') {
            Some(sp) => (&rest[..sp], Some(&rest[sp + 1..])),
            None => (rest, None),
        };
        id(hex)?;
        return match status {
            None => Ok(Negotiation::Last),
            Some(b"common" | b"ready" | b"continue") => Ok(Negotiation::Other),
            Some(_) => Err(pkt_err(url, "an ACK with an unknown status")),
        };
    }
    Err(pkt_err(
        url,
        format!(
            "an unexpected line before the pack: '{}'",
            String::from_utf8_lossy(&data[..data.len().min(80)])
        ),
    ))
}
