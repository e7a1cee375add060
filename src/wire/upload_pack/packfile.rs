//! Receiving the packfile, over either protocol: its bytes (side-band channel 1, or raw from a
//! v0/v1 server without side-band) streamed into [`crate::pack::receive()`] under the low-speed
//! rule, the server's progress and errors on the other channels, and a failure told apart as a cut
//! connection (retried) or a corrupt pack (exit 6).

use std::io::Read;
use std::sync::atomic::AtomicBool;

use gix_packetline::blocking_io::StreamingPeekableIter;

use super::lines::upload_pack_error;
use super::want::{Fetched, Want};
use crate::error::{Error, Result};
use crate::types::RemoteUrl;

/// Stream the `packfile` section's channel 1 into [`crate::pack::receive()`]; progress (channel 2)
/// goes to the debug log, an error on channel 3 ends the transfer and is returned as the
/// server's error. `cut` tells whether the body broke off (see [`pack_error`]).
pub(super) fn receive_packfile<R: Read>(
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
            if is_err {
                remote_error = Some(crate::text::line(text.trim_ascii()));
                std::ops::ControlFlow::Break(())
            } else {
                // A packet ends its line (gix strips its final newline).
                let text = String::from_utf8_lossy(text);
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

/// The answer's `shallow` ids (v2's `shallow-info`, v0's `shallow` lines) and the pack it
/// brought, checked alike for both protocols: each id must name a commit the pack holds, and at
/// depth 1 the commit asked for (its parents were not sent). Recorded in `.git/shallow`, any other
/// id would cut history the repository has, or name nothing (`git fsck`: a broken link).
///
/// # Errors
/// [`Error::Integrity`] (exit 6) for another id; the pack is removed first.
pub(super) fn checked(
    url: &RemoteUrl,
    want: &Want<'_>,
    shallow: Vec<gix::ObjectId>,
    received: crate::pack::Received,
) -> Result<Fetched> {
    let index = received.data_path.as_ref().and_then(|p| {
        gix::odb::pack::index::File::at(p.with_extension("idx"), want.commit.format()).ok()
    });
    let wrong = shallow.iter().find(|id| {
        let in_pack = index.as_ref().is_some_and(|i| i.lookup(id).is_some());
        !in_pack || (want.depth == Some(1) && **id != want.commit.id())
    });
    if let Some(id) = wrong {
        let asked = match want.depth {
            Some(1) => format!("only {} was asked for at depth 1", want.commit),
            _ => "it is not in the pack".to_owned(),
        };
        if let Some(pack) = &received.data_path {
            for ext in ["idx", "pack"] {
                let _ = std::fs::remove_file(pack.with_extension(ext));
            }
        }
        return Err(Error::Integrity(format!(
            "{url} marked {id} as a shallow commit, but {asked}: the server answered wrongly \
             (nothing of its answer was kept); ask its administrator, or fetch from another \
             server"
        )));
    }
    Ok(Fetched {
        shallow,
        pack_path: received.data_path,
        objects: received.num_objects,
        big: received.big,
        posted: false,
    })
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
        crate::wire::http::Measured::new(reader, crate::wire::http::LowSpeed::after_first_byte());
    let received = match want.base {
        Some(base) => crate::pack::receive_thin(
            &mut reader,
            want.pack_dir,
            base.local,
            None,
            want.limits,
            interrupt,
            want.commit.format(),
        ),
        None => crate::pack::receive(
            &mut reader,
            want.pack_dir,
            None,
            want.limits,
            interrupt,
            want.observer,
            want.commit.format(),
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
pub(super) struct CutDetector<R> {
    pub(super) inner: R,
    pub(super) cut: std::sync::Arc<AtomicBool>,
}

impl<R> CutDetector<R> {
    /// `inner` watched, and the flag it sets when the stream ends or fails.
    pub(super) fn wrap(inner: R) -> (Self, std::sync::Arc<AtomicBool>) {
        let cut = std::sync::Arc::new(AtomicBool::new(false));
        let wrapped = CutDetector {
            inner,
            cut: cut.clone(),
        };
        (wrapped, cut)
    }
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
