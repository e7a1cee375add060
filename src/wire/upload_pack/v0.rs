//! Protocol v0/v1 upload-pack over smart HTTP, stateless (`gitprotocol-pack` "Packfile
//! Negotiation", `gitprotocol-http` "Smart Service git-upload-pack"): one request holds the
//! `want` with its capabilities, the `shallow` and `deepen` lines, a flush, the `have`s and
//! `done`; the answer holds the `shallow`/`unshallow` lines, the ACKs or NAK, then the pack (read
//! by `packfile`, as v2's is). A server that refuses a commit no ref tips is told apart here,
//! with what it needs (`refused_want`).

use std::io::Read;
use std::sync::atomic::AtomicBool;

use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::{StreamingPeekableIter, encode};

use super::lines::{AGENT, pkt_err, upload_pack_error};
use super::packfile::{CutDetector, receive_packfile};
use super::request::{send_fetch, v2_headers};
use super::want::{Fetched, Want};
use crate::error::{Error, Result};
use crate::types::{Format, FullSha, RemoteUrl, format_name};
use crate::wire::advertisement::Advertised;
use crate::wire::http::Http;

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

/// [`fetch_pack`](super::fetch_pack) over protocol v0/v1: one stateless request ([`request`]), its
/// answer read by [`read_fetch_v0`]; a refusal of a commit no ref tips is said as [`refused_want`]
/// says it.
pub(super) fn fetch_pack_v0(
    http: &Http,
    url: &RemoteUrl,
    refs: &Advertised,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let body = request(url, refs, &v0_ask(&want))?;
    let mut headers = v2_headers(true);
    headers.retain(|(name, _)| name.as_str() != "git-protocol");
    let resp = send_fetch(http, url, headers, body, false)
        .map_err(|e| failed_want(refs, want.commit, e))?;
    read_fetch_v0(url, resp, refs, want, interrupt)
        .map_err(|e| refused_want(url, refs, want.commit, e))
}

fn v0_ask<'a>(want: &Want<'a>) -> Ask<'a> {
    Ask {
        commit: want.commit,
        depth: want.depth,
        shallow: want.base.map_or(&[], |b| b.shallow),
        haves: want.base.map_or(&[], |b| b.haves),
    }
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
        caps.push(format!("object-format={}", format_name(adv.format)));
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

/// Parse a v0/v1 answer ([`read_negotiation`], then the pack in side-band channel 1 or raw,
/// as `refs` offered side-band) into [`crate::pack::receive()`] in `want.pack_dir`. `url` is for
/// messages only.
///
/// # Errors
/// As [`fetch_pack`](super::fetch_pack), but for the HTTP ones.
pub(crate) fn read_fetch_v0(
    url: &RemoteUrl,
    body: impl Read,
    refs: &Advertised,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let (body, cut) = CutDetector::wrap(body);
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    let shallow = read_negotiation(url, &mut lines, want.commit.format())?;
    let outcome = receive_packfile(url, &mut lines, want, interrupt, &cut, side_band(refs))?;
    super::packfile::checked(url, &want, shallow, outcome)
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
    format: Format,
) -> Result<Vec<gix::ObjectId>> {
    // The shallow and ACK/NAK lines together within one section's wait.
    crate::wire::watch::section("shallow and ACK/NAK lines");
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
            return Err(upload_pack_error(url, &crate::text::line(err.0)));
        }
        let Some(data) = line.as_slice() else {
            continue;
        };
        let data = data.strip_suffix(b"\n").unwrap_or(data);
        match negotiation_line(url, data, format)? {
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
fn negotiation_line(url: &RemoteUrl, data: &[u8], format: Format) -> Result<Negotiation> {
    let id = |hex: &[u8]| {
        FullSha::from_wire_in(format, hex)
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
            crate::text::line(&data[..data.len().min(80)])
        ),
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::http::Protocol;
    use crate::wire::testing::{
        BRANCH, COMMIT2, COMMIT3, Endless, NOT_OUR_REF, PACK_OBJECTS, V0_ADVERTISEMENT, assert_err,
        cuts, pkt, url,
    };
    use crate::wire::upload_pack::handshake::{Server, fetch_supports, read_advertisement};

    const V0_FETCH: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/fetch-v0-depth-1.response");

    fn adv(body: impl Read) -> Result<Server> {
        read_advertisement(&url(), body, Protocol::Auto, BRANCH)
    }

    fn v0_refs(body: &[u8]) -> Advertised {
        match adv(body).unwrap() {
            Server::V0 { refs, .. } => refs,
            other => panic!("not v0: {other:?}"),
        }
    }

    fn fetch_v0(body: impl Read, refs: &Advertised) -> (Result<Fetched>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let want = Want::depth_one(COMMIT2.parse().unwrap(), dir.path(), Default::default());
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
        assert!(side_band(&refs));
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
        assert!(!side_band(&refs));
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
        let body = Endless::new(Vec::new(), line, MAX_NEGOTIATION_LINES * 60);
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
        let ask = Ask {
            commit,
            depth: Some(1),
            shallow: &[have],
            haves: &[have],
        };
        let body = request(&url(), &refs, &ask).unwrap();
        let text = String::from_utf8_lossy(&body);
        let want = format!(
            "want {COMMIT2} multi_ack_detailed no-done side-band-64k ofs-delta no-progress \
             thin-pack shallow agent={} object-format=sha1\n",
            AGENT
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
            request(&url(), &v0_refs(&bare), &ask),
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
            let ask = Ask {
                commit: refs.tip.unwrap(),
                depth: Some(1),
                shallow: &[],
                haves: &[],
            };
            let body = request(&url(), &refs, &ask).unwrap();
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains(caps), "{text}");
        }
    }
}
