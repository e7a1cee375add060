//! The receive-pack response: report-status (`gitprotocol-pack` "Report Status"), inside side-band
//! channel 1 when side-band-64k was asked for, with channel 2 (progress, hook output) and channel 3
//! (fatal errors) beside it (`gitprotocol-pack` "Packfile Data", `gitprotocol-capabilities`
//! "side-band, side-band-64k").
//!
//! SPEC rule 4: success is `unpack ok` plus `ok <ref>` and nothing less — a missing report, a side-band
//! error or an HTTP error is a failure; HTTP 200 alone proves nothing.

use std::io::Read;

use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::StreamingPeekableIter;

use crate::error::{Error, Result};
use crate::types::{RemoteUrl, SessionBranch};
use crate::wire::http::body_error;

/// What the server reported (`gitprotocol-pack` "Report Status"; side-band channels 2 and 3 as
/// `gitprotocol-capabilities` "side-band, side-band-64k").
#[derive(Debug, Default)]
pub struct Report {
    /// The `unpack` status (`ok` or an error), if any was sent.
    pub unpack: Option<String>,
    /// `(ref, None)` for `ok <ref>`, `(ref, Some(reason))` for `ng <ref> <reason>`.
    pub refs: Vec<(String, Option<String>)>,
    /// Text from side-band channel 2 (hook output, progress), last lines kept.
    pub remote_text: Vec<String>,
    /// A side-band channel 3 error.
    pub fatal: Option<String>,
}

/// Cap on the `remote:` lines kept for messages.
const MAX_REMOTE_LINES: usize = 20;

/// The most bytes of report kept: a report is a few lines; a server streaming more than this is
/// not sending one.
const MAX_REPORT_BYTES: usize = 1 << 20;

/// Read the response body of `POST git-receive-pack`: the report-status pkt-lines, inside
/// side-band channel 1 when `side_band` (at most 1 MiB of it is read; what follows is left
/// unread, so a report that does not end there counts as none), else as the body itself. The
/// low-speed rule runs from the first byte (the wait before it is the server applying the push).
/// Deciding what the report means is [`Report::into_result`]'s.
///
/// # Errors
/// [`Error::Network`] (exit 5, retried) when the body breaks off, and with `side_band` for
/// malformed pkt-lines or an `ERR` line too (the side-band reader reports them as I/O errors);
/// [`Error::Protocol`] (exit 5) for malformed pkt-lines without side-band.
pub fn read(url: &RemoteUrl, resp: crate::wire::http::Body, side_band: bool) -> Result<Report> {
    // The wait for the first byte is the server applying the push, not a slow transfer.
    parse(url, resp.for_report(), side_band)
}

/// Parse a receive-pack response body: the report-status pkt-lines (`unpack <status>`, then
/// `ok <ref>` or `ng <ref> <reason>`), inside side-band channel 1 when `side_band`, with channel
/// 2's text kept (its last [`MAX_REMOTE_LINES`] lines) and a channel 3 error in
/// [`Report::fatal`]. `url` is for messages only.
///
/// # Errors
/// As [`read`].
pub(crate) fn parse(url: &RemoteUrl, body: impl Read, side_band: bool) -> Result<Report> {
    let mut report = Report::default();
    let mut lines = StreamingPeekableIter::new(body, &[PacketLineRef::Flush], false);
    let status_bytes = if side_band {
        read_side_band(url, &mut lines, &mut report)?
    } else {
        read_plain(url, &mut lines)?
    };
    let mut inner =
        StreamingPeekableIter::new(status_bytes.as_slice(), &[PacketLineRef::Flush], false);
    while let Some(line) = inner.read_line() {
        let Ok(Ok(line)) = line else { break };
        let Some(d) = line.as_slice() else { break };
        let text = crate::text::line(d.strip_suffix(b"\n").unwrap_or(d));
        if let Some(rest) = text.strip_prefix("unpack ") {
            report.unpack = Some(rest.to_owned());
        } else if let Some(rest) = text.strip_prefix("ok ") {
            report.refs.push((rest.to_owned(), None));
        } else if let Some(rest) = text.strip_prefix("ng ") {
            let (name, reason) = rest.split_once(' ').unwrap_or((rest, ""));
            report.refs.push((name.to_owned(), Some(reason.to_owned())));
        }
    }
    Ok(report)
}

/// The bytes of side-band channel 1 (at most 1 MiB), with channel 2's text and channel 3's
/// error put in `report`.
fn read_side_band<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
    report: &mut Report,
) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    let mut texts = Vec::new();
    let mut fatal = None;
    // Redacted as one stream: a token split over two lines or two packets is still found.
    let mut remote = crate::redact::Lines::default();
    let keep_last = |texts: &mut Vec<String>| {
        if texts.len() > MAX_REMOTE_LINES {
            let excess = texts.len() - MAX_REMOTE_LINES;
            texts.drain(..excess);
        }
    };
    {
        let mut reader = lines.as_read_with_sidebands(|is_err, text: &[u8]| {
            if is_err {
                fatal = Some(crate::text::line(text.trim_ascii()));
                std::ops::ControlFlow::Break(())
            } else {
                // gix strips the packet's final newline, so a packet is taken as ending its
                // line (as before); a secret split at a packet or a line is still found.
                let text = String::from_utf8_lossy(text);
                texts.extend(remote.push(&format!("{text}\n")));
                keep_last(&mut texts);
                std::ops::ControlFlow::Continue(())
            }
        });
        let res = (&mut reader)
            .take(MAX_REPORT_BYTES as u64)
            .read_to_end(&mut data);
        drop(reader);
        if let Err(e) = res
            && fatal.is_none()
        {
            return Err(body_error(url, e));
        }
    }
    texts.extend(remote.finish());
    keep_last(&mut texts);
    report.remote_text = texts;
    report.fatal = fatal;
    Ok(data)
}

/// The report's pkt-lines up to a flush (at most [`MAX_REPORT_BYTES`]), re-encoded with the
/// flush, when no side-band was asked for.
///
/// # Errors
/// [`Error::Protocol`] for malformed lines or a report over the bound.
fn read_plain<R: Read>(url: &RemoteUrl, lines: &mut StreamingPeekableIter<R>) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    while let Some(line) = lines.read_line() {
        if data.len() > MAX_REPORT_BYTES {
            return Err(Error::Protocol(format!(
                "the push report from {url} is over {MAX_REPORT_BYTES} bytes: not a report"
            )));
        }
        let line = line
            .map_err(|e| body_error(url, e))?
            .map_err(|e| Error::Protocol(format!("malformed report from {url}: {e}")))?;
        if let Some(d) = line.as_slice() {
            gix_packetline::blocking_io::encode::data_to_write(d, &mut data)
                .map_err(|e| Error::io("buffering the report", e))?;
        }
    }
    gix_packetline::blocking_io::encode::flush_to_write(&mut data)
        .map_err(|e| Error::io("buffering the report", e))?;
    Ok(data)
}

impl Report {
    fn remote_says(&self) -> String {
        if self.remote_text.is_empty() {
            String::new()
        } else {
            format!("\nremote: {}", self.remote_text.join("\nremote: "))
        }
    }

    /// Decide (`gitprotocol-pack` "Report Status"): `Ok` only on `unpack ok` plus
    /// `ok refs/heads/<branch>`. An `ng` for a stale old value is answered by `on_stale(reason)`
    /// (which re-reads the tip: exit 3, or a push that landed after all); an `unpack` error and
    /// other `ng` reasons are [`Error::Rejected`] (exit 9) with the remote's words; a missing
    /// report, no status for the branch or a side-band error is [`Error::Protocol`] (exit 5).
    ///
    /// # Errors
    /// As above.
    pub fn into_result(
        self,
        url: &RemoteUrl,
        branch: &SessionBranch,
        on_stale: impl FnOnce(&str) -> Result<()>,
    ) -> Result<()> {
        let full = branch.full_ref();
        if let Some(fatal) = &self.fatal {
            return Err(Error::Protocol(format!(
                "{url} failed the push: {fatal}{}",
                self.remote_says()
            )));
        }
        match self.unpack.as_deref() {
            Some("ok") => {}
            Some(err) => {
                return Err(Error::Rejected(format!(
                    "{url} could not unpack the pushed objects: {err}{}",
                    self.remote_says()
                )));
            }
            None => {
                return Err(Error::Protocol(format!(
                    "{url} sent no report-status for the push: it cannot be confirmed, so it counts as failed{}",
                    self.remote_says()
                )));
            }
        }
        match self.refs.iter().find(|(name, _)| *name == full) {
            Some((_, None)) => Ok(()),
            Some((_, Some(reason))) => {
                let r = reason.to_ascii_lowercase();
                let is_stale = [
                    "failed to update ref",
                    "cannot lock ref",
                    "stale info",
                    "fetch first",
                    "non-fast-forward",
                    "but expected",
                    "reference already exists",
                ]
                .iter()
                .any(|k| r.contains(k));
                if is_stale {
                    on_stale(reason)
                } else {
                    Err(Error::Rejected(format!(
                        "{url} refused to update {full}: {reason}{}",
                        self.remote_says()
                    )))
                }
            }
            None => Err(Error::Protocol(format!(
                "{url} reported no status for {full}: the push cannot be confirmed, so it counts as failed{}",
                self.remote_says()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::{BRANCH, COMMIT2, COMMIT3, Endless, assert_err, cuts, pkt, url};

    const OK: &[u8] = include_bytes!("../../../tests/fixtures/wire/report-ok.response");
    const NG: &[u8] = include_bytes!("../../../tests/fixtures/wire/report-ng.response");
    const NG_HOOK: &[u8] = include_bytes!("../../../tests/fixtures/wire/report-ng-hook.response");
    const NG_PLAIN: &[u8] =
        include_bytes!("../../../tests/fixtures/wire/report-ng-no-side-band.response");

    fn branch() -> SessionBranch {
        BRANCH.strip_prefix("refs/heads/").unwrap().parse().unwrap()
    }

    /// What `report` decides, with the reason a stale answer was handed to `on_stale`.
    fn decide(report: Report) -> (Result<()>, Option<String>) {
        let mut stale = None;
        let result = report.into_result(&url(), &branch(), |reason| {
            stale = Some(reason.to_owned());
            Ok(())
        });
        (result, stale)
    }

    fn ng(reason: &str) -> Vec<(String, Option<String>)> {
        vec![(BRANCH.to_owned(), Some(reason.to_owned()))]
    }

    #[test]
    fn ok_is_success() {
        let report = parse(&url(), OK, true).unwrap();
        assert_eq!(report.unpack.as_deref(), Some("ok"));
        assert_eq!(report.refs, vec![(BRANCH.to_owned(), None)]);
        assert!(report.remote_text.is_empty() && report.fatal.is_none());
        let (result, stale) = decide(report);
        assert!(result.is_ok() && stale.is_none(), "{result:?}");
    }

    #[test]
    fn a_stale_ng_goes_to_on_stale_with_and_without_side_band() {
        let report = parse(&url(), NG, true).unwrap();
        assert_eq!(
            report.remote_text,
            [format!(
                "error: cannot lock ref '{BRANCH}': is at {COMMIT3} but expected {COMMIT2}"
            )]
        );
        let plain = parse(&url(), NG_PLAIN, false).unwrap();
        assert!(plain.remote_text.is_empty());
        for report in [report, plain] {
            assert_eq!(report.unpack.as_deref(), Some("ok"));
            assert_eq!(report.refs, ng("failed to update ref"));
            let (result, stale) = decide(report);
            assert!(result.is_ok(), "{result:?}");
            assert_eq!(stale.as_deref(), Some("failed to update ref"));
        }
    }

    #[test]
    fn a_hook_s_ng_is_rejected_with_its_words() {
        let report = parse(&url(), NG_HOOK, true).unwrap();
        assert_eq!(report.remote_text, ["hook: sessions are frozen"]);
        assert_eq!(report.refs, ng("pre-receive hook declined"));
        let (result, stale) = decide(report);
        assert!(stale.is_none());
        assert_err!(
            result,
            Error::Rejected(m) if m.contains("pre-receive hook declined")
                && m.contains("\nremote: hook: sessions are frozen")
        );
    }

    #[test]
    fn a_report_cut_off_anywhere_is_a_network_failure() {
        for (body, side_band) in [(OK, true), (NG, true), (NG_HOOK, true), (NG_PLAIN, false)] {
            for cut in cuts(body, 0) {
                assert_err!(parse(&url(), cut, side_band), Error::Network(_));
            }
        }
    }

    #[test]
    fn malformed_pkt_lines_are_refused() {
        let mut bad = NG_PLAIN.to_vec();
        bad[..4].copy_from_slice(b"00x0");
        assert_err!(parse(&url(), bad.as_slice(), false), Error::Protocol(_));
        // Inside side-band, the line reader's errors come as I/O errors.
        bad = OK.to_vec();
        bad[..4].copy_from_slice(b"00x0");
        assert_err!(parse(&url(), bad.as_slice(), true), Error::Network(_));
        let err = pkt(b"ERR no report");
        assert_err!(parse(&url(), err.as_slice(), true), Error::Network(_));
    }

    #[test]
    fn a_fatal_error_or_no_report_is_a_protocol_failure() {
        let body = [&pkt(b"\x03fatal: the disk is full\n")[..], OK].concat();
        let report = parse(&url(), body.as_slice(), true).unwrap();
        assert_eq!(report.fatal.as_deref(), Some("fatal: the disk is full"));
        assert_err!(decide(report).0, Error::Protocol(m) if m.contains("the disk is full"));
        let err = pkt(b"ERR no report");
        let report = parse(&url(), [&err[..], b"0000"].concat().as_slice(), false).unwrap();
        assert_eq!(report.unpack, None);
        assert_err!(decide(report).0, Error::Protocol(_));
    }

    #[test]
    fn only_the_last_remote_lines_are_kept() {
        let lines: Vec<u8> = (0..MAX_REMOTE_LINES + 5)
            .flat_map(|i| pkt(format!("\x02line {i}\n").as_bytes()))
            .collect();
        let report = parse(&url(), [&lines[..], OK].concat().as_slice(), true).unwrap();
        let kept: Vec<String> = (5..MAX_REMOTE_LINES + 5)
            .map(|i| format!("line {i}"))
            .collect();
        assert_eq!(report.remote_text, kept);
        assert_eq!(report.unpack.as_deref(), Some("ok"));
    }

    #[test]
    fn an_endless_side_band_is_read_up_to_its_bound_and_is_no_report() {
        let mut line = b"\x01".to_vec();
        line.extend_from_slice(&[b'x'; 60_000]);
        let body = Endless::new(Vec::new(), pkt(&line), 1 << 20);
        let report = parse(&url(), body, true).unwrap();
        assert_eq!(report.unpack, None);
        assert_err!(decide(report).0, Error::Protocol(_));
    }

    #[test]
    fn an_endless_plain_report_is_refused_at_its_bound() {
        let line = format!("ok refs/heads/{}\n", "x".repeat(60_000));
        let body = Endless::new(Vec::new(), pkt(line.as_bytes()), MAX_REPORT_BYTES);
        assert_err!(parse(&url(), body, false), Error::Protocol(m) if m.contains("over"));
    }
}
