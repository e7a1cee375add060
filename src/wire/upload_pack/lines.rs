//! What both protocols' upload-pack readers share: pkt-line sections read under a byte bound,
//! and the server's errors mapped to ours.

use std::io::Read;

use gix_packetline::blocking_io::StreamingPeekableIter;

use crate::error::{Error, Result};
use crate::types::RemoteUrl;
use crate::wire::http::body_error;

/// How git-session names itself to the server (`agent`, `gitprotocol-capabilities`).
pub(super) const AGENT: &str = concat!("git-session/", env!("CARGO_PKG_VERSION"));

pub(super) fn pkt_err(url: &RemoteUrl, e: impl std::fmt::Display) -> Error {
    Error::Protocol(format!("malformed pkt-line from {url}: {e}"))
}

/// The most bytes (pkt-line prefixes included) of one pkt-line section kept in memory: the
/// capability advertisement (`gitprotocol-v2` "Capability Advertisement") and the sections of a
/// fetch response before the pack (`gitprotocol-v2` "fetch": `acknowledgments`, `shallow-info`,
/// `wanted-refs`). git's are a few KiB; a server sending more is refused with
/// [`Error::Protocol`] (exit 5), so whatever it sends memory stays bounded.
pub const MAX_SECTION_BYTES: usize = 1 << 20;

/// Call `each` with the data lines until a flush (or a delimiter, as `lines` was set up), mapping
/// `ERR` lines, and refusing more than `limit` bytes.
pub(super) fn for_each_line<R: Read>(
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
            return Err(upload_pack_error(url, &crate::text::line(err.0)));
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
pub(super) fn read_section<R: Read>(
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

pub(super) fn upload_pack_error(url: &RemoteUrl, msg: &str) -> Error {
    // git prefixes its own errors with the program name; ours add it once.
    let msg = msg.trim();
    let msg = msg.strip_prefix("upload-pack: ").unwrap_or(msg);
    // git: "not our ref <id>"; JGit: "want <id> not valid".
    if msg.contains("not our ref")
        || msg.contains("no such remote ref")
        || msg.ends_with("not valid")
    {
        Error::NotFound(format!(
            "commit not found on the remote {url} (upload-pack: {msg}): check TIP_SHA"
        ))
    } else {
        Error::Protocol(format!("{url} reported an error: {msg}"))
    }
}
