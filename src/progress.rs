//! Progress on stderr, only for a person at a terminal: never with `--json` or `-q`, never when
//! stderr is not a TTY (SPEC "Output": progress on a TTY only).

use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Several restores run at once (a sessions manifest): their bars would draw over each other, so
/// there are none, and one line per finished session instead ([`finished`]).
static LINES_ONLY: AtomicBool = AtomicBool::new(false);

/// No bars from now on: one line per finished session ([`finished`]).
pub fn lines_only() {
    LINES_ONLY.store(true, Ordering::Relaxed);
}

/// A line saying that one of several sessions finished, when progress is on.
pub fn finished(line: &str) {
    if ENABLED.load(Ordering::Relaxed) {
        crate::redact::Stderr::line(line);
    }
}

/// Turn progress on when stderr is a terminal and the output is for a person.
pub fn enable(json: bool, quiet: bool) {
    let tty = crate::redact::Stderr::is_terminal();
    ENABLED.store(tty && !json && !quiet, Ordering::Relaxed);
}

/// A spinner with a byte or item count; does nothing when progress is off.
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    /// A byte counter labelled `label` (e.g. "receiving objects").
    pub fn bytes(label: &str) -> Self {
        Self::with_template(label, "{spinner} {msg}: {bytes} ({bytes_per_sec})")
    }

    /// A spinner labelled `label` without a count.
    pub fn spinner(label: &str) -> Self {
        Self::with_template(label, "{spinner} {msg}")
    }

    fn with_template(label: &str, template: &str) -> Self {
        if !ENABLED.load(Ordering::Relaxed) || LINES_ONLY.load(Ordering::Relaxed) {
            return Progress(None);
        }
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(label.to_owned());
        // Draw at once: a short step still shows what it did.
        bar.tick();
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Progress(Some(bar))
    }

    /// Count `n` more bytes or items.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

/// A reader that counts what passes through it on a [`Progress`].
pub struct Counted<R> {
    /// The reader.
    pub inner: R,
    /// The counter.
    pub progress: Progress,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }
}
