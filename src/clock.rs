//! The ground floor of the time model: every lock a command takes waits on one clock,
//! `GIT_SESSION_LOCK_WAIT_S` (10 minutes), then fails with exit 7 naming the holder and the knob.
//! (The network's waits are [`crate::wire::watch`]'s.)

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How often a held lock is tried again.
const POLL: Duration = Duration::from_millis(20);

/// Take the exclusive `flock` of `file` (opened from `path`), waiting while `holder` (who else
/// takes it, in words: "another restore of this folder") holds it, at most
/// `GIT_SESSION_LOCK_WAIT_S`.
///
/// # Errors
/// [`Error::Conflict`] (exit 7) when it is still held after the wait; [`Error::LocalIo`] when it
/// cannot be taken at all.
pub fn lock(file: &std::fs::File, path: &Path, holder: &str) -> Result<()> {
    let wait = crate::knobs::get().lock_wait;
    let deadline = Instant::now() + wait;
    let mut told = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::io(format!("locking {}", path.display()), e));
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::conflict(format!(
                "{holder} has held the lock on {} for over {} s (GIT_SESSION_LOCK_WAIT_S): wait \
                 for it to end, then run this again; nothing was done",
                path.display(),
                wait.as_secs(),
            )));
        }
        if !told {
            tracing::warn!(
                "{holder} holds the lock on {}: waiting for it",
                path.display()
            );
            told = true;
        }
        std::thread::sleep(POLL);
    }
}

/// A pipe, FIFO or terminal read under the network's bounds (an archive streamed through stdin
/// or a FIFO by whatever downloads it): the first byte within `GIT_SESSION_FIRST_BYTE_WAIT_MS`,
/// then no read waits longer than `GIT_SESSION_READ_TIMEOUT_MS`. A stall is exit 5, as a
/// server's would be. A regular file is always ready: nothing changes for it.
pub struct Patient {
    file: std::fs::File,
    /// What is read, for messages ("the archive on stdin").
    what: String,
    started: bool,
}

impl Patient {
    /// `file` (unbuffered: a buffered reader could hold bytes the wait would not see), read as
    /// `what`.
    pub fn new(file: std::fs::File, what: impl Into<String>) -> Self {
        Patient {
            file,
            what: what.into(),
            started: false,
        }
    }

    /// Standard input, unbuffered.
    ///
    /// # Errors
    /// [`Error::LocalIo`] when it cannot be duplicated.
    pub fn stdin(what: impl Into<String>) -> Result<Self> {
        use std::os::fd::AsFd as _;
        let fd = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("reading standard input", e))?;
        Ok(Patient::new(std::fs::File::from(fd), what))
    }

    /// Wait until a read would not block, at most `wait`; false when the wait ran out.
    fn ready(&self, wait: Duration) -> std::io::Result<bool> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [PollFd::new(&self.file, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => return Ok(false),
                Ok(_) => return Ok(true),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl std::io::Read for Patient {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let knobs = crate::knobs::get();
        let (wait, knob) = if self.started {
            (knobs.read_timeout, "GIT_SESSION_READ_TIMEOUT_MS")
        } else {
            (knobs.first_byte_wait, "GIT_SESSION_FIRST_BYTE_WAIT_MS")
        };
        if !self.ready(wait)? {
            let what = if self.started {
                "stopped sending"
            } else {
                "sent nothing"
            };
            return Err(std::io::Error::other(Error::Network(format!(
                "{} {what} for {} s ({knob}): nothing was restored; rerun restore once it \
                 can deliver the archive",
                self.what,
                wait.as_secs_f64()
            ))));
        }
        let n = self.file.read(buf)?;
        self.started |= n > 0;
        Ok(n)
    }
}
