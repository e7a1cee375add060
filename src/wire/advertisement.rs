//! The protocol v0/v1 ref advertisement (`gitprotocol-http` "Smart Clients", `gitprotocol-pack`
//! "Reference Discovery"), read as a stream: receive-pack's (every push), and upload-pack's from a
//! server that speaks no protocol v2. Kept: the session branch, the capabilities, and for
//! upload-pack the ids the refs tip (whether a `want` names an advertised tip).

use std::io::Read;

use gix::bstr::BStr;
use gix::protocol::transport::client::Capabilities;
use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::StreamingPeekableIter;

use crate::error::{Error, Result};
use crate::types::{Format, FullSha, RemoteUrl, SessionBranch, format_from_name, format_title};
use crate::wire::http::{Http, body_error};

/// The most bytes (pkt-line prefixes included) of a ref advertisement read (line by line; only
/// the session branch and the capabilities are kept): a million refs take about 60 MiB. A server
/// sending more is refused with [`Error::Protocol`] (exit 5).
pub const MAX_ADVERTISEMENT_BYTES: usize = 256 << 20;

/// The most bytes of an upload-pack ref advertisement read (a v0/v1 server's; the same bound as
/// a protocol v2 `ls-refs` answer): every tipped id is kept, 20 bytes a ref, so a million refs
/// hold about 20 MiB. More is refused with [`Error::Protocol`] (exit 5).
pub const MAX_UPLOAD_PACK_ADVERTISEMENT_BYTES: usize = 64 << 20;

impl Service {
    /// The most bytes of its advertisement read.
    fn limit(self) -> usize {
        match self {
            Service::UploadPack => MAX_UPLOAD_PACK_ADVERTISEMENT_BYTES,
            Service::ReceivePack => MAX_ADVERTISEMENT_BYTES,
        }
    }
}

/// Which service advertised: what the messages say and what is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `git-upload-pack` (a fetch): the tipped ids are kept.
    UploadPack,
    /// `git-receive-pack` (a push).
    ReceivePack,
}

/// What the server advertised (`gitprotocol-pack` "Reference Discovery"): the session branch's
/// id, the capabilities of the first ref line (`gitprotocol-capabilities`, parsed by gix), and
/// for upload-pack the ids every ref (and peeled tag) tips.
#[derive(Debug)]
pub struct Advertised {
    /// Where the session branch is (`None`: absent).
    pub tip: Option<FullSha>,
    /// The repository's object format (`object-format` among the capabilities; absent = SHA-1).
    pub format: Format,
    /// The capabilities after the NUL of the first ref line (`None`: none there).
    caps: Option<Capabilities>,
    /// Upload-pack only: the advertised ids, sorted (20 bytes a ref, under the byte bound).
    tips: Vec<gix::ObjectId>,
}

impl Advertised {
    /// Whether capability `name` was advertised.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The value of capability `name` (empty for a bare one), if advertised.
    pub fn get(&self, name: &str) -> Option<&BStr> {
        let cap = self.caps.as_ref()?.capability(name)?;
        Some(cap.value().unwrap_or_default())
    }

    /// Whether a ref (or a peeled tag) of an upload-pack advertisement tips `id`.
    pub fn tips(&self, id: FullSha) -> bool {
        self.tips.binary_search(&id.id()).is_ok()
    }
}

/// A server announcing an object format this build does not know: exit 5.
pub(crate) fn unknown_format(url: &RemoteUrl, value: &str) -> Error {
    Error::Protocol(format!(
        "{url} announces object-format={}, which git-session does not know (it knows sha1 and \
         sha256): refused, nothing was fetched",
        crate::text::line(value.as_bytes())
    ))
}

fn pkt_err(url: &RemoteUrl, service: Service, e: impl std::fmt::Display) -> Error {
    let name = match service {
        Service::UploadPack => "upload-pack",
        Service::ReceivePack => "receive-pack",
    };
    Error::Protocol(format!("malformed {name} advertisement from {url}: {e}"))
}

/// Read the advertisement: `GET info/refs?service=git-receive-pack` (`gitprotocol-http` "Smart
/// Clients"), a `# service=git-receive-pack` section, then the refs up to a flush
/// (`gitprotocol-pack` "Reference Discovery"), at most [`MAX_ADVERTISEMENT_BYTES`] of them.
///
/// # Errors
/// HTTP errors as [`Http::check_status`]; [`Error::Protocol`] (exit 5) for a server that is not
/// smart HTTP (another Content-Type), malformed lines, an `ERR` line or an advertisement over
/// [`MAX_ADVERTISEMENT_BYTES`]; [`Error::Network`] (exit 5, retried) when the body breaks off;
/// [`Error::Usage`] (exit 2) for a SHA-256 repository.
pub fn read(http: &Http, url: &RemoteUrl, branch: &SessionBranch) -> Result<Advertised> {
    let resp = http.advertisement(url, "git-receive-pack", Vec::new())?;
    parse(url, resp, &branch.full_ref())
}

/// Parse a receive-pack ref advertisement (`gitprotocol-pack` "Reference Discovery": the
/// `# service=git-receive-pack` section, then `<oid> <refname>` lines, the first with the
/// capabilities after a NUL, up to a flush), keeping the id of `full_ref` and the capabilities,
/// reading at most [`MAX_ADVERTISEMENT_BYTES`]. `url` is for messages only.
///
/// # Errors
/// As [`read`], but for the HTTP ones and the Content-Type.
pub(crate) fn parse(url: &RemoteUrl, body: impl Read, full_ref: &str) -> Result<Advertised> {
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    skip_service_line(url, &mut lines, Service::ReceivePack)?;
    parse_refs(url, &mut lines, Service::ReceivePack, full_ref)
}

/// Skip the `# service=<name>` line and its flush that open a smart-HTTP advertisement
/// (`gitprotocol-http` "Smart Clients"), if the body starts with one.
///
/// # Errors
/// [`Error::Protocol`] when that section holds another line; [`Error::Network`] when the body
/// breaks off.
pub(crate) fn skip_service_line<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
    service: Service,
) -> Result<()> {
    let is_service = match lines.peek_line() {
        Some(Ok(Ok(line))) => line
            .as_slice()
            .is_some_and(|d| d.starts_with(b"# service=")),
        _ => false,
    };
    if is_service {
        lines.read_line();
        if let Some(line) = lines.read_line() {
            line.map_err(|e| body_error(url, e))?
                .map_err(|e| pkt_err(url, service, e))?;
            return Err(pkt_err(
                url,
                service,
                "a second line in the service section",
            ));
        }
        lines.reset();
    }
    Ok(())
}

/// Read the ref lines of an advertisement up to their flush (`<oid> <refname>`, the first with
/// the capabilities after a NUL; a `version 1` line before them is skipped), at most
/// [`MAX_ADVERTISEMENT_BYTES`] of them ([`MAX_UPLOAD_PACK_ADVERTISEMENT_BYTES`] for upload-pack),
/// keeping the id of `full_ref`, the capabilities and for
/// upload-pack every tipped id. `url` is for messages only.
///
/// # Errors
/// [`Error::Protocol`] (exit 5) for malformed lines, an `ERR` line or more than the bound;
/// [`Error::Network`] (exit 5, retried) when the body breaks off; [`Error::Usage`] (exit 2) for a
/// SHA-256 repository.
pub(crate) fn parse_refs<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
    service: Service,
    full_ref: &str,
) -> Result<Advertised> {
    let mut out = Advertised {
        tip: None,
        format: Format::Sha1,
        caps: None,
        tips: Vec::new(),
    };
    let mut first = true;
    let mut seen = 0usize;
    while let Some(line) = lines.read_line() {
        let line = line
            .map_err(|e| body_error(url, e))?
            .map_err(|e| pkt_err(url, service, e))?;
        if let Some(err) = line.check_error() {
            let err = crate::text::line(err.0);
            return Err(Error::Protocol(match service {
                Service::ReceivePack => format!("{url} refused the push: {}", err.trim()),
                Service::UploadPack => format!("{url} reported an error: {}", err.trim()),
            }));
        }
        let Some(data) = line.as_slice() else {
            continue;
        };
        seen += data.len() + 4;
        if seen > service.limit() {
            return Err(Error::Protocol(format!(
                "{url} sent a ref advertisement over {} bytes: refused (a misbehaving server)",
                service.limit()
            )));
        }
        let data = data.strip_suffix(b"\n").unwrap_or(data);
        if first && data == b"version 1" {
            continue;
        }
        ref_line(
            url,
            service,
            data,
            std::mem::take(&mut first),
            full_ref,
            &mut out,
        )?;
    }
    if service == Service::UploadPack {
        out.tips.sort_unstable();
        out.tips.dedup();
    }
    Ok(out)
}

/// One `<oid> <refname>[\0<capabilities>]` line: the capabilities are read from the `first`
/// one; the id is kept when the name is `full_ref`.
fn ref_line(
    url: &RemoteUrl,
    service: Service,
    data: &[u8],
    first: bool,
    full_ref: &str,
    out: &mut Advertised,
) -> Result<()> {
    let (refline, caps) = match data.iter().position(|b| *b == 0) {
        Some(nul) => (&data[..nul], Some(&data[nul + 1..])),
        None => (data, None),
    };
    if first {
        if caps.is_some_and(|caps| !caps.is_empty()) {
            let (caps, _) = Capabilities::from_bytes(data).map_err(|e| pkt_err(url, service, e))?;
            out.caps = Some(caps);
        }
        let value = out.get("object-format").map(|v| v.to_string());
        out.format = format_from_name(value.as_deref())
            .ok_or_else(|| unknown_format(url, &value.unwrap_or_default()))?;
    }
    let Some(sp) = refline.iter().position(|b| *b == b' ') else {
        return Err(pkt_err(url, service, "a ref line without a name"));
    };
    let id = || {
        FullSha::from_wire_in(out.format, &refline[..sp]).ok_or_else(|| {
            pkt_err(
                url,
                service,
                format!(
                    "a malformed object id (not a {} id, the format it announced)",
                    format_title(out.format)
                ),
            )
        })
    };
    if &refline[sp + 1..] == full_ref.as_bytes() {
        out.tip = Some(id()?);
    }
    if service == Service::UploadPack {
        let id = id()?.id();
        // An empty repository advertises `<zero id> capabilities^{}`.
        if !id.is_null() {
            out.tips.push(id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::{
        BRANCH, COMMIT2, COMMIT3, Endless, assert_err, cuts, pkt, url, with_first_prefix,
    };

    const ADVERTISEMENT: &[u8] =
        include_bytes!("../../tests/fixtures/wire/receive-pack-advertisement.response");
    /// Where the `# service=git-receive-pack` section (and its flush) ends.
    const SERVICE_END: usize = 0x23;

    fn tip(adv: &Advertised) -> Option<String> {
        adv.tip.map(|id| id.to_string())
    }

    #[test]
    fn the_recorded_advertisement_gives_the_branch_and_the_capabilities() {
        let adv = parse(&url(), ADVERTISEMENT, BRANCH).unwrap();
        assert_eq!(tip(&adv).as_deref(), Some(COMMIT2));
        for cap in [
            "report-status",
            "report-status-v2",
            "side-band-64k",
            "quiet",
            "atomic",
        ] {
            assert!(adv.has(cap), "{cap}");
        }
        assert!(!adv.has("push-options") && !adv.has("side-band"));
        let value = |name| adv.get(name).map(|v| v.to_string());
        assert_eq!(value("object-format").as_deref(), Some("sha1"));
        assert_eq!(value("agent").as_deref(), Some("git/2.47.3"));
        assert_eq!(value("delete-refs").as_deref(), Some(""));
    }

    #[test]
    fn the_first_ref_is_found_behind_its_capabilities_and_an_absent_one_is_none() {
        let adv = parse(&url(), ADVERTISEMENT, "refs/heads/main").unwrap();
        assert_eq!(tip(&adv).as_deref(), Some(COMMIT3));
        let adv = parse(&url(), ADVERTISEMENT, "refs/heads/sessions/ab").unwrap();
        assert_eq!(adv.tip, None);
        assert!(adv.has("report-status"));
    }

    #[test]
    fn an_advertisement_without_the_service_section_is_read_too() {
        let adv = parse(&url(), &ADVERTISEMENT[SERVICE_END..], BRANCH).unwrap();
        assert_eq!(tip(&adv).as_deref(), Some(COMMIT2));
        assert!(adv.has("side-band-64k"));
    }

    #[test]
    fn an_advertisement_cut_off_anywhere_is_a_network_failure() {
        for cut in cuts(ADVERTISEMENT, 0) {
            assert_err!(parse(&url(), cut, BRANCH), Error::Network(_));
        }
    }

    #[test]
    fn malformed_lines_and_err_lines_are_refused() {
        for prefix in [b"00x0", b"0003", b"ffff"] {
            let body = with_first_prefix(ADVERTISEMENT, prefix);
            assert_err!(parse(&url(), body.as_slice(), BRANCH), Error::Protocol(_));
        }
        let refs = |line: String| [&pkt(line.as_bytes())[..], b"0000"].concat();
        for body in [
            refs(format!("{COMMIT3}\0report-status\n")),
            refs(format!("{COMMIT3}x {BRANCH}\0report-status\n")),
            pkt(b"ERR access denied"),
        ] {
            assert_err!(parse(&url(), body.as_slice(), BRANCH), Error::Protocol(_));
        }
        // A server announcing SHA-256 but sending SHA-1 ids, the reverse, an unknown format.
        let sha256 = refs(format!("{COMMIT3} {BRANCH}\0object-format=sha256\n"));
        assert_err!(parse(&url(), sha256.as_slice(), BRANCH), Error::Protocol(_));
        let long = format!("{COMMIT3}{}", &COMMIT3[..24]);
        let sha1 = refs(format!("{long} {BRANCH}\0object-format=sha1\n"));
        assert_err!(parse(&url(), sha1.as_slice(), BRANCH), Error::Protocol(_));
        let sha3 = refs(format!("{COMMIT3} {BRANCH}\0object-format=sha3\n"));
        assert_err!(parse(&url(), sha3.as_slice(), BRANCH), Error::Protocol(_));
    }

    #[test]
    fn a_sha256_advertisement_gives_its_format_and_64_digit_ids() {
        let refs = |line: String| [&pkt(line.as_bytes())[..], b"0000"].concat();
        let long = format!("{COMMIT3}{}", &COMMIT3[..24]);
        let body = refs(format!(
            "{long} {BRANCH}\0report-status object-format=sha256\n"
        ));
        let adv = parse(&url(), body.as_slice(), BRANCH).unwrap();
        assert_eq!(adv.format, Format::Sha256);
        assert_eq!(adv.tip.unwrap().to_string(), long);
    }

    #[test]
    fn an_advertisement_without_end_is_refused_at_the_bound() {
        let line = pkt(format!("{COMMIT3} refs/heads/{}\n", "x".repeat(60_000)).as_bytes());
        let body = Endless::new(
            ADVERTISEMENT[..SERVICE_END].to_vec(),
            line,
            MAX_ADVERTISEMENT_BYTES,
        );
        assert_err!(parse(&url(), body, BRANCH), Error::Protocol(_));
    }

    /// An upload-pack advertisement keeps every tipped id: refused at its own, lower bound.
    #[test]
    fn an_upload_pack_advertisement_without_end_is_refused_at_its_bound() {
        let line = pkt(format!("{COMMIT3} refs/heads/{}\n", "y".repeat(40)).as_bytes());
        let head = pkt(format!("{COMMIT2} {BRANCH}\0shallow\n").as_bytes());
        let body = Endless::new(head, line, MAX_UPLOAD_PACK_ADVERTISEMENT_BYTES);
        let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
        let err = parse_refs(&url(), &mut lines, Service::UploadPack, BRANCH).unwrap_err();
        assert!(
            matches!(&err, Error::Protocol(m) if m.contains("67108864")),
            "{err:?}"
        );
    }
}
