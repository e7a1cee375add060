//! Step 2: where the session branch is on the remote (`gitprotocol-v2` "ls-refs"), one ref asked
//! for and nothing else kept. Over v0/v1 the answer is already in the advertisement of step 1.

use std::io::Read;

use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::StreamingPeekableIter;

use super::handshake::{Capabilities, Server};
use super::lines::{for_each_line, pkt_err};
use super::request::{command_body, v2_headers};
use crate::error::{Error, Result};
use crate::types::{Format, FullSha, RemoteUrl, SessionBranch};
use crate::wire::http::{Http, Request};

/// The most bytes (pkt-line prefixes included) of an `ls-refs` answer read (`gitprotocol-v2`
/// "ls-refs"; line by line, nothing kept but the one ref asked for): a server sending more is
/// refused with [`Error::Protocol`] (exit 5).
pub const MAX_LS_REFS_BYTES: usize = 64 << 20;

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
        Server::V2(caps) | Server::Assumed { caps, .. } => caps,
        // v0/v1 advertised every ref in the first answer.
        Server::V0 { refs, branch } if *branch == full => return Ok(refs.tip),
        Server::V0 { branch, .. } => {
            return Err(Error::internal(
                "looking up a branch",
                format!("the advertisement was read for {branch}, not {full}"),
            ));
        }
    };
    let resp = http.send(url, ls_refs_request(caps, &full)?)?;
    read_ls_refs(url, resp, &full, server.format())
}

/// The `ls-refs` of `full` alone (`ref-prefix`), as a `POST git-upload-pack` of protocol v2
/// with `caps`' `object-format`: what [`ls_ref`] and the posted lookup send.
///
/// # Errors
/// As [`command_body`].
pub(super) fn ls_refs_request(caps: &Capabilities, full: &str) -> Result<Request<'static>> {
    let body = command_body(caps, "ls-refs", &[format!("ref-prefix {full}")])?;
    Ok(Request {
        endpoint: "git-upload-pack",
        headers: v2_headers(true),
        body: Some(body.into()),
    })
}

/// Parse an `ls-refs` response (`gitprotocol-v2` "ls-refs": `<oid> <refname>` lines up to a
/// flush) for the id of `full_ref`, reading at most [`MAX_LS_REFS_BYTES`] and keeping nothing
/// else; every line's object id must be one of `format`. `url` is for messages only.
///
/// # Errors
/// As [`ls_ref`], but for the HTTP ones.
pub(crate) fn read_ls_refs(
    url: &RemoteUrl,
    body: impl Read,
    full_ref: &str,
    format: Format,
) -> Result<Option<FullSha>> {
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    let mut found = None;
    for_each_line(url, &mut lines, MAX_LS_REFS_BYTES, |line| {
        let mut parts = line.split(|b| *b == b' ');
        let (Some(oid), Some(name)) = (parts.next(), parts.next()) else {
            return Err(pkt_err(url, "ls-refs line without a ref name"));
        };
        // Every line, not only the one asked for: a v0 advertisement (`# service=…`, a NUL
        // before the capabilities) or lines of the other object format are no v2 answer for
        // this repository, and must not read as "no such branch".
        let id = FullSha::from_wire_in(format, oid)
            .ok_or_else(|| pkt_err(url, "ls-refs line with a malformed object id"))?;
        if name.contains(&0) {
            return Err(pkt_err(url, "ls-refs line with a NUL in its ref name"));
        }
        if name == full_ref.as_bytes() && found.is_none() {
            found = Some(id);
        }
        Ok(())
    })?;
    // A delimiter or response-end packet where the flush belongs ends no ls-refs answer.
    if lines.stopped_at() != Some(PacketLineRef::Flush) {
        return Err(pkt_err(url, "ls-refs answer not ended by a flush packet"));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::http::Protocol;
    use crate::wire::testing::{
        BAD_PREFIXES, BRANCH, COMMIT2, COMMIT3, Endless, V0_ADVERTISEMENT, assert_err, cuts, pkt,
        url, with_first_prefix,
    };
    use crate::wire::upload_pack::handshake::read_advertisement;

    const LS_REFS_BRANCH: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/ls-refs-branch.response");
    const LS_REFS_NONE: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/ls-refs-none.response");

    #[test]
    fn a_v0_branch_is_looked_up_in_the_advertisement() {
        let server = read_advertisement(&url(), V0_ADVERTISEMENT, Protocol::Auto, BRANCH).unwrap();
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
    fn ls_refs_finds_the_branch_or_nothing() {
        let found = read_ls_refs(&url(), LS_REFS_BRANCH, BRANCH, Format::Sha1).unwrap();
        assert_eq!(found.map(|id| id.to_string()).as_deref(), Some(COMMIT2));
        // Only the exact name counts, not a prefix of it.
        let prefix = &BRANCH[..BRANCH.len() - 1];
        assert_eq!(
            read_ls_refs(&url(), LS_REFS_BRANCH, prefix, Format::Sha1).unwrap(),
            None
        );
        assert_eq!(
            read_ls_refs(&url(), LS_REFS_NONE, BRANCH, Format::Sha1).unwrap(),
            None
        );
    }

    #[test]
    fn ls_refs_cut_off_anywhere_is_a_network_failure() {
        for cut in cuts(LS_REFS_BRANCH, 0).chain(cuts(LS_REFS_NONE, 0)) {
            assert_err!(
                read_ls_refs(&url(), cut, BRANCH, Format::Sha1),
                Error::Network(_)
            );
        }
    }

    #[test]
    fn ls_refs_with_a_bad_line_is_refused() {
        for prefix in BAD_PREFIXES {
            let body = with_first_prefix(LS_REFS_BRANCH, prefix);
            assert_err!(
                read_ls_refs(&url(), body.as_slice(), BRANCH, Format::Sha1),
                Error::Protocol(_)
            );
        }
        let no_name = [&pkt(format!("{COMMIT2}\n").as_bytes())[..], b"0000"].concat();
        let bad_id = [
            &pkt(format!("{COMMIT2}x {BRANCH}\n").as_bytes())[..],
            b"0000",
        ]
        .concat();
        // Lines for other refs are checked too: a v0 advertisement, an id of the other format.
        let other_format = [
            &pkt(format!("{} refs/heads/other\n", "ab".repeat(32)).as_bytes())[..],
            b"0000",
        ]
        .concat();
        let nul = [
            &pkt(format!("{COMMIT3} HEAD\0multi_ack\n").as_bytes())[..],
            b"0000",
        ]
        .concat();
        for body in [
            no_name,
            bad_id,
            pkt(b"ERR ls-refs failed"),
            V0_ADVERTISEMENT.to_vec(),
            other_format,
            nul,
            b"0001".to_vec(),
            b"0002".to_vec(),
        ] {
            assert_err!(
                read_ls_refs(&url(), body.as_slice(), BRANCH, Format::Sha1),
                Error::Protocol(_)
            );
        }
    }

    #[test]
    fn ls_refs_without_end_is_refused_at_the_bound() {
        let line = format!("{COMMIT3} refs/heads/{}\n", "x".repeat(60_000));
        let body = Endless::new(Vec::new(), pkt(line.as_bytes()), MAX_LS_REFS_BYTES);
        assert_err!(
            read_ls_refs(&url(), body, BRANCH, Format::Sha1),
            Error::Protocol(_)
        );
    }
}
