//! Step 1 of a fetch: `GET info/refs?service=git-upload-pack`, and what the server answered it
//! with ([`Server`]): protocol v2's capabilities, or a v0/v1 ref advertisement. Every later step
//! ([`super::ls_refs`], [`super::fetch`]) takes that answer.

use std::io::Read;

use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::StreamingPeekableIter;

use super::lines::{pkt_err, read_section};
use super::request::v2_headers;
use crate::error::{Error, Refusal, Result};
use crate::types::{
    Format, FullSha, RemoteUrl, SessionBranch, format_from_name, format_name, format_title,
};
use crate::wire::advertisement::{self, Advertised, Service};
use crate::wire::http::{Http, Protocol};

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
    /// Protocol v2 taken for granted, without the capability advertisement: a posted `ls-refs`
    /// was answered ([`super::connect`]). A fetch the server refuses with these capabilities
    /// falls back to the handshake.
    Assumed {
        /// What a v2 server is assumed to offer ([`super::assumed`]).
        caps: Capabilities,
        /// The session branch, for the handshake of a fallback.
        branch: SessionBranch,
        /// Whether the server answered a posted `ls-refs` as v2 (else nothing was asked yet: a
        /// template's fetch, and an `ERR` line in answer to it may be a v0/v1 server's).
        confirmed: bool,
    },
}

impl Server {
    /// The protocol version spoken: 2, or 0 for v0/v1.
    pub fn version(&self) -> u8 {
        match self {
            Server::V2(_) | Server::Assumed { .. } => 2,
            Server::V0 { .. } => 0,
        }
    }

    /// The repository's object format, as the server announced it (`object-format`; absent =
    /// SHA-1; an unknown value was refused by the handshake).
    pub fn format(&self) -> Format {
        match self {
            Server::V2(caps) | Server::Assumed { caps, .. } => {
                v2_format(caps).unwrap_or(Format::Sha1)
            }
            Server::V0 { refs, .. } => refs.format,
        }
    }

    /// Refuse `tip` (exit 2) when its length is not the repository's (SPEC rule 1): after the
    /// capability exchange, before any object is asked for.
    ///
    /// # Errors
    /// [`Error::Usage`] naming both formats.
    pub fn check_tip(&self, url: &RemoteUrl, what: &str, tip: FullSha) -> Result<()> {
        tip.check_format(self.format()).map_err(|e| {
            Error::Usage(
                Refusal::Invalid,
                format!(
                    "{what} {tip} does not fit {url}, which serves a {} repository (object-format={}): {e}",
                    format_title(self.format()),
                    format_name(self.format())
                ),
            )
        })
    }
}

/// The format a v2 server announces (`None`: one this build does not know).
fn v2_format(caps: &Capabilities) -> Option<Format> {
    let value = caps
        .capability("object-format")
        .map(|c| c.value().unwrap_or_default().to_string());
    format_from_name(value.as_deref())
}

/// Whether the server's fetch takes `feature` (e.g. `shallow` or `filter`): v2's `fetch=<feature>`,
/// v0's capability of that name.
pub fn fetch_supports(server: &Server, feature: &str) -> bool {
    match server {
        Server::V2(caps) | Server::Assumed { caps, .. } => fetch_supports_v2(caps, feature),
        Server::V0 { refs, .. } => refs.has(feature),
    }
}

pub(super) fn fetch_supports_v2(caps: &Capabilities, feature: &str) -> bool {
    caps.capability("fetch")
        .and_then(|fetch| fetch.supports(feature))
        .unwrap_or(false)
}

/// Step 1: `GET info/refs?service=git-upload-pack` (`gitprotocol-http` "Smart Clients"), with
/// `Git-Protocol: version=2` unless [`Http::protocol`] is [`Protocol::V0`]. A `version 2` answer
/// gives its capabilities (at most [`MAX_SECTION_BYTES`](super::MAX_SECTION_BYTES);
/// `gitprotocol-v2` "Capability Advertisement"); a ref advertisement (`gitprotocol-pack`
/// "Reference Discovery") gives [`Server::V0`] with `branch`'s id, read as
/// [`advertisement::parse_refs`] does. Requires SHA-1.
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
        // A body that stalls or breaks off is the network's, never a v0/v1 answer.
        Some(Err(e)) => return Err(crate::wire::http::body_error(url, e)),
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
    if v2_format(&caps).is_none() {
        return Err(advertisement::unknown_format(
            url,
            &caps
                .capability("object-format")
                .map(|c| c.value().unwrap_or_default().to_string())
                .unwrap_or_default(),
        ));
    }
    Ok(Server::V2(caps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::{
        BAD_PREFIXES, BRANCH, COMMIT2, COMMIT3, Endless, V0_ADVERTISEMENT, assert_err, cuts, pkt,
        url, with_first_prefix,
    };
    use crate::wire::upload_pack::lines::MAX_SECTION_BYTES;

    const ADVERTISEMENT: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/v2-advertisement.response");

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
    }

    #[test]
    fn a_stalled_advertisement_is_a_stall_not_a_v0_answer() {
        struct Stalled;
        impl Read for Stalled {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the server sent headers and then nothing for 2 s",
                ))
            }
        }
        for protocol in [Protocol::V2, Protocol::Auto] {
            let err = read_advertisement(&url(), Stalled, protocol, BRANCH).unwrap_err();
            assert!(
                matches!(&err, Error::Network(m) if m.contains("headers and then nothing")),
                "{protocol:?}: {err:?}"
            );
        }
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
    fn advertisement_gives_the_object_format_and_refuses_an_unknown_one() {
        let body = |format: &[u8]| {
            [
                &pkt(b"version 2\n")[..],
                &pkt(&[b"object-format=", format, b"\n"].concat()),
                b"0000",
            ]
            .concat()
        };
        assert_eq!(
            adv(body(b"sha256").as_slice()).unwrap().format(),
            Format::Sha256
        );
        assert_eq!(
            adv(body(b"sha1").as_slice()).unwrap().format(),
            Format::Sha1
        );
        assert_err!(adv(body(b"sha3").as_slice()), Error::Protocol(_));
        let server = adv(body(b"sha256").as_slice()).unwrap();
        let sha1: FullSha = COMMIT3.parse().unwrap();
        assert_err!(server.check_tip(&url(), "TIP_SHA", sha1), Error::Usage(..));
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
}
