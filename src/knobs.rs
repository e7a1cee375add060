//! The tuning knobs from the environment (`GIT_SESSION_*` timeouts, bounds, LFS selection and
//! the fetch protocol),
//! parsed once into [`Knobs`] before a command does any work.
//!
//! A value that is not digits only (no sign, space, unit or base), or is outside its range, is
//! exit 2 naming the variable, its range and its default: never a silent default, never a value
//! the code cannot hold (an `Instant` plus `u64::MAX` milliseconds panics), and never one that
//! cannot do what the knob says (a wait under [`MIN_WAIT_MS`] fails every restore).

use std::sync::OnceLock;
use std::time::Duration;

use crate::error::{Error, Refusal, Result};

/// Objects over this many bytes are never held in memory whole (git's `core.bigFileThreshold`):
/// 512 MiB, unless `GIT_SESSION_BIG_OBJECT_BYTES` says otherwise.
pub const DEFAULT_BIG_OBJECT_BYTES: u64 = 512 << 20;

/// The longest wait a knob may ask for: one day.
const MAX_WAIT_MS: u64 = 24 * 60 * 60 * 1000;

/// The shortest wait or timeout a knob may ask for: less times out a healthy local server's
/// answer (`GIT_SESSION_FIRST_BYTE_WAIT_MS=0` failed every restore).
pub const MIN_WAIT_MS: u64 = 100;

/// The smallest `GIT_SESSION_BIG_OBJECT_BYTES`: under 1 MiB, ordinary deltas against a base
/// over it are refused (`1` refused a valid pack as exit 6).
pub const MIN_BIG_OBJECT_BYTES: u64 = 1 << 20;

/// The largest `GIT_SESSION_LOW_SPEED_LIMIT`: a floor no link reaches (1 GiB/s) would call every
/// transfer stalled.
const MAX_LOW_SPEED_LIMIT: u64 = 1 << 30;

/// Which upload-pack protocol a fetch speaks (`GIT_SESSION_PROTOCOL`, `gitprotocol-v2`,
/// `gitprotocol-pack`): v2 when the server answers `version 2`, else v0/v1; or one forced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Ask for v2 (`Git-Protocol: version=2`) and speak what the server answers.
    Auto,
    /// Ask for nothing: the ref advertisement of v0/v1.
    V0,
    /// v2 only: a server answering v0/v1 is refused.
    V2,
}

impl Protocol {
    /// `GIT_SESSION_PROTOCOL`: unset or empty is [`Protocol::Auto`], `0` or `1` is v0, `2` v2.
    fn read(raw: Option<String>) -> Result<Self> {
        // As the numbers: exactly the value, no space around it.
        match raw.as_deref() {
            None | Some("") => Ok(Protocol::Auto),
            Some("0" | "1") => Ok(Protocol::V0),
            Some("2") => Ok(Protocol::V2),
            Some(_) => Err(Error::Usage(
                Refusal::Invalid,
                format!(
                    "GIT_SESSION_PROTOCOL is '{}': it must be 0 (protocol v0/v1), 2 (v2) or unset \
                     (v2 when the server speaks it)",
                    raw.unwrap_or_default().escape_debug()
                ),
            )),
        }
    }
}

/// The knobs, with their defaults when unset or empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// `GIT_SESSION_CONNECT_TIMEOUT_MS` (10 s; SPEC "Network behaviour").
    pub connect_timeout: Duration,
    /// `GIT_SESSION_READ_TIMEOUT_MS`: a read (or the wait for a response head) stalling this
    /// long fails (60 s).
    pub read_timeout: Duration,
    /// `GIT_SESSION_RETRY_BASE_MS`: the first backoff delay (1 s; at most 60 s).
    pub retry_base: Duration,
    /// `GIT_SESSION_LOW_SPEED_LIMIT`: bytes per second below which a transfer is stalled (1024;
    /// 0: no limit), as git's `http.lowSpeedLimit`.
    pub low_speed_limit: u64,
    /// `GIT_SESSION_LOW_SPEED_TIME_MS`: for how long (60 s), as git's `http.lowSpeedTime`.
    pub low_speed_time: Duration,
    /// `GIT_SESSION_FIRST_BYTE_WAIT_MS`: how long a pack may take to start (10 min).
    pub first_byte_wait: Duration,
    /// `GIT_SESSION_SECTION_WAIT_MS`: each pkt-line section before the pack whole within this
    /// (60 s), keep-alives or not.
    pub section_wait: Duration,
    /// `GIT_SESSION_RETRY_TOTAL_MS`: every attempt of one operation, and the waits between
    /// them, within this (90 s, SPEC "Network behaviour"); data flowing starts it again.
    pub retry_total: Duration,
    /// `GIT_SESSION_LOCK_WAIT_S`: how long a write waits for the tree's lock (10 min).
    pub lock_wait: Duration,
    /// `GIT_SESSION_LFS_CONCURRENCY`: LFS downloads at once (8, git-lfs's
    /// `lfs.concurrenttransfers`).
    pub lfs_concurrency: usize,
    /// `GIT_SESSION_LFS_INCLUDE`: comma-separated patterns (git-lfs's `lfs.fetchinclude`).
    pub lfs_include: Vec<String>,
    /// `GIT_SESSION_LFS_EXCLUDE`: comma-separated patterns (git-lfs's `lfs.fetchexclude`).
    pub lfs_exclude: Vec<String>,
    /// `GIT_SESSION_MAX_SUBMODULES`: the most submodules one restore fetches, nested ones
    /// counted (256).
    pub max_submodules: usize,
    /// `GIT_SESSION_BIG_OBJECT_BYTES`: objects over this are streamed, never held whole
    /// (512 MiB, git's `core.bigFileThreshold`).
    pub big_object_bytes: u64,
    /// `GIT_SESSION_PROTOCOL`: the fetch protocol.
    pub protocol: Protocol,
    /// `GIT_SESSION_SESSIONS_CONCURRENCY`: sessions of a manifest restored at once (4).
    pub sessions_concurrency: usize,
}

/// One numeric knob: its variable, unit (for messages), range and default.
struct Number {
    var: &'static str,
    unit: &'static str,
    min: u64,
    max: u64,
    default: u64,
}

const CONNECT_TIMEOUT: Number = Number::ms("GIT_SESSION_CONNECT_TIMEOUT_MS", 10_000);
const READ_TIMEOUT: Number = Number::ms("GIT_SESSION_READ_TIMEOUT_MS", 60_000);
// A backoff, not a timeout: 0 (retry at once) does what it says.
const RETRY_BASE: Number = Number {
    min: 0,
    max: 60_000,
    ..Number::ms("GIT_SESSION_RETRY_BASE_MS", 1_000)
};
const LOW_SPEED_LIMIT: Number = Number {
    var: "GIT_SESSION_LOW_SPEED_LIMIT",
    unit: "bytes per second",
    min: 0,
    max: MAX_LOW_SPEED_LIMIT,
    default: 1024,
};
const LOW_SPEED_TIME: Number = Number::ms("GIT_SESSION_LOW_SPEED_TIME_MS", 60_000);
const FIRST_BYTE_WAIT: Number = Number::ms("GIT_SESSION_FIRST_BYTE_WAIT_MS", 600_000);
const SECTION_WAIT: Number = Number::ms("GIT_SESSION_SECTION_WAIT_MS", 60_000);
const RETRY_TOTAL: Number = Number::ms("GIT_SESSION_RETRY_TOTAL_MS", 90_000);
// 0: take the lock or fail at once (a caller that would rather not wait).
const LOCK_WAIT: Number = Number {
    var: "GIT_SESSION_LOCK_WAIT_S",
    unit: "seconds",
    min: 0,
    max: MAX_WAIT_MS / 1000,
    default: 600,
};
const LFS_CONCURRENCY: Number = Number {
    var: "GIT_SESSION_LFS_CONCURRENCY",
    unit: "downloads",
    min: 1,
    max: 64,
    default: 8,
};
const SESSIONS_CONCURRENCY: Number = Number {
    var: "GIT_SESSION_SESSIONS_CONCURRENCY",
    unit: "sessions",
    min: 1,
    // A manifest's most sessions (`manifest::MAX_SESSIONS`).
    max: 64,
    default: 4,
};
const MAX_SUBMODULES: Number = Number {
    var: "GIT_SESSION_MAX_SUBMODULES",
    unit: "submodules",
    min: 1,
    max: 100_000,
    default: 256,
};
const BIG_OBJECT_BYTES: Number = Number {
    var: "GIT_SESSION_BIG_OBJECT_BYTES",
    unit: "bytes",
    min: MIN_BIG_OBJECT_BYTES,
    max: u64::MAX,
    default: DEFAULT_BIG_OBJECT_BYTES,
};

impl Number {
    const fn ms(var: &'static str, default: u64) -> Self {
        Number {
            var,
            unit: "milliseconds",
            min: MIN_WAIT_MS,
            max: MAX_WAIT_MS,
            default,
        }
    }

    fn read(&self, lookup: &impl Fn(&str) -> Option<String>) -> Result<u64> {
        let Some(raw) = lookup(self.var).filter(|v| !v.is_empty()) else {
            return Ok(self.default);
        };
        // Digits only: `+5`, ` 5`, `0x10` or `5ms` would be read differently by someone else.
        let number = raw
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| raw.parse::<u64>().ok())
            .flatten();
        match number {
            Some(n) if (self.min..=self.max).contains(&n) => Ok(n),
            _ => Err(Error::Usage(
                Refusal::Invalid,
                format!(
                    "{} is '{}': it must be a whole number of {} from {} to {}, digits only; \
                     unset it for the default, {}",
                    self.var,
                    raw.escape_debug(),
                    self.unit,
                    self.min,
                    self.max,
                    self.default
                ),
            )),
        }
    }

    fn millis(&self, lookup: &impl Fn(&str) -> Option<String>) -> Result<Duration> {
        self.read(lookup).map(Duration::from_millis)
    }
}

/// Comma-separated patterns, each trimmed of spaces, empty ones dropped, as git-lfs reads
/// `-I`/`lfs.fetchinclude`; their `/` mean what git-lfs says ([`crate::restore::LfsPattern`]).
fn patterns(var: &str, raw: Option<String>) -> Result<Vec<String>> {
    let patterns: Vec<String> = raw
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(p) = patterns
        .iter()
        .find(|p| !crate::glob::bounded(p.as_bytes()))
    {
        return Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "{var}: the pattern '{}' holds more than {} runs of '*' (matching such a \
                 pattern can take exponential time): use fewer",
                crate::text::line_str(p),
                crate::glob::MAX_STAR_RUNS
            ),
        ));
    }
    Ok(patterns)
}

impl Knobs {
    /// Every knob from `lookup` (a variable's value, `None` when unset).
    ///
    /// # Errors
    /// [`Error::Usage`] (exit 2) for the first malformed or out-of-range value.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        Ok(Knobs {
            connect_timeout: CONNECT_TIMEOUT.millis(&lookup)?,
            read_timeout: READ_TIMEOUT.millis(&lookup)?,
            retry_base: RETRY_BASE.millis(&lookup)?,
            low_speed_limit: LOW_SPEED_LIMIT.read(&lookup)?,
            low_speed_time: LOW_SPEED_TIME.millis(&lookup)?,
            first_byte_wait: FIRST_BYTE_WAIT.millis(&lookup)?,
            section_wait: SECTION_WAIT.millis(&lookup)?,
            retry_total: RETRY_TOTAL.millis(&lookup)?,
            lock_wait: Duration::from_secs(LOCK_WAIT.read(&lookup)?),
            lfs_concurrency: usize::try_from(LFS_CONCURRENCY.read(&lookup)?).unwrap_or(1),
            lfs_include: patterns("GIT_SESSION_LFS_INCLUDE", lookup("GIT_SESSION_LFS_INCLUDE"))?,
            lfs_exclude: patterns("GIT_SESSION_LFS_EXCLUDE", lookup("GIT_SESSION_LFS_EXCLUDE"))?,
            max_submodules: usize::try_from(MAX_SUBMODULES.read(&lookup)?).unwrap_or(usize::MAX),
            big_object_bytes: BIG_OBJECT_BYTES.read(&lookup)?,
            protocol: Protocol::read(lookup("GIT_SESSION_PROTOCOL"))?,
            sessions_concurrency: usize::try_from(SESSIONS_CONCURRENCY.read(&lookup)?).unwrap_or(1),
        })
    }

    /// Every knob from the process's environment.
    ///
    /// # Errors
    /// As [`Knobs::from_vars`].
    pub fn from_env() -> Result<Self> {
        Knobs::from_vars(|var| std::env::var(var).ok())
    }
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs::from_vars(|_| None).expect("the defaults are in range")
    }
}

static KNOBS: OnceLock<Knobs> = OnceLock::new();

/// Parse the environment's knobs once, before any work: the binary calls this first.
///
/// # Errors
/// As [`Knobs::from_vars`].
pub fn init() -> Result<&'static Knobs> {
    if let Some(knobs) = KNOBS.get() {
        return Ok(knobs);
    }
    let knobs = Knobs::from_env()?;
    Ok(KNOBS.get_or_init(|| knobs))
}

/// The knobs [`init`] parsed. Library callers that never called it (unit tests, fuzzing) get the
/// environment's values, or the defaults when one is malformed.
pub fn get() -> &'static Knobs {
    KNOBS.get_or_init(|| Knobs::from_env().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<Knobs> {
        Knobs::from_vars(|var| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn unset_and_empty_are_the_defaults() {
        let knobs = with(&[("GIT_SESSION_READ_TIMEOUT_MS", "")]).unwrap();
        assert_eq!(knobs.read_timeout, Duration::from_secs(60));
        assert_eq!(knobs.connect_timeout, Duration::from_secs(10));
        assert_eq!(knobs.lock_wait, Duration::from_secs(600));
        assert_eq!(knobs.lfs_concurrency, 8);
        assert_eq!(knobs.max_submodules, 256);
        assert_eq!(knobs.big_object_bytes, 512 << 20);
        assert_eq!(knobs.sessions_concurrency, 4);
        assert_eq!(knobs, Knobs::default());
    }

    #[test]
    fn values_in_range_are_taken() {
        let knobs = with(&[
            ("GIT_SESSION_READ_TIMEOUT_MS", "500"),
            ("GIT_SESSION_FIRST_BYTE_WAIT_MS", "100"),
            ("GIT_SESSION_LOW_SPEED_LIMIT", "0"),
            ("GIT_SESSION_RETRY_BASE_MS", "0"),
            ("GIT_SESSION_LOCK_WAIT_S", "0"),
            ("GIT_SESSION_MAX_SUBMODULES", "1"),
            ("GIT_SESSION_SESSIONS_CONCURRENCY", "64"),
            ("GIT_SESSION_BIG_OBJECT_BYTES", "01048576"),
            ("GIT_SESSION_LFS_INCLUDE", " /assets/ ,, docs"),
        ])
        .unwrap();
        assert_eq!(knobs.read_timeout, Duration::from_millis(500));
        assert_eq!(knobs.first_byte_wait, Duration::from_millis(100));
        assert_eq!(knobs.low_speed_limit, 0);
        assert_eq!(knobs.retry_base, Duration::ZERO);
        assert_eq!(knobs.lock_wait, Duration::ZERO);
        assert_eq!(knobs.max_submodules, 1);
        assert_eq!(knobs.sessions_concurrency, 64);
        assert_eq!(knobs.big_object_bytes, 1 << 20);
        // Spaces around a pattern go, as git-lfs drops them; its slashes mean something.
        assert_eq!(knobs.lfs_include, ["/assets/", "docs"]);
    }

    #[test]
    fn malformed_or_out_of_range_values_are_refused_with_the_range() {
        for (var, value) in [
            ("GIT_SESSION_READ_TIMEOUT_MS", "0"),
            ("GIT_SESSION_CONNECT_TIMEOUT_MS", "ten"),
            ("GIT_SESSION_RETRY_BASE_MS", "18446744073709551615"),
            ("GIT_SESSION_LOCK_WAIT_S", "-1"),
            ("GIT_SESSION_LFS_CONCURRENCY", "0"),
            ("GIT_SESSION_FIRST_BYTE_WAIT_MS", "1e3"),
            ("GIT_SESSION_BIG_OBJECT_BYTES", "18446744073709551616"),
            ("GIT_SESSION_PROTOCOL", "v2"),
            // Digits only: a sign, spaces, a base or a unit are someone else's syntax.
            ("GIT_SESSION_READ_TIMEOUT_MS", "+5000"),
            ("GIT_SESSION_READ_TIMEOUT_MS", " 5000"),
            ("GIT_SESSION_READ_TIMEOUT_MS", "5000 "),
            ("GIT_SESSION_READ_TIMEOUT_MS", "0x1000"),
            ("GIT_SESSION_READ_TIMEOUT_MS", "5000ms"),
            ("GIT_SESSION_PROTOCOL", " 2"),
            // A range that does what the knob says.
            ("GIT_SESSION_FIRST_BYTE_WAIT_MS", "0"),
            ("GIT_SESSION_FIRST_BYTE_WAIT_MS", "99"),
            ("GIT_SESSION_SECTION_WAIT_MS", "1"),
            ("GIT_SESSION_RETRY_TOTAL_MS", "99"),
            ("GIT_SESSION_CONNECT_TIMEOUT_MS", "1"),
            ("GIT_SESSION_LOW_SPEED_TIME_MS", "1"),
            ("GIT_SESSION_LOW_SPEED_LIMIT", "1073741825"),
            ("GIT_SESSION_BIG_OBJECT_BYTES", "1048575"),
            ("GIT_SESSION_MAX_SUBMODULES", "0"),
            ("GIT_SESSION_SESSIONS_CONCURRENCY", "0"),
            ("GIT_SESSION_SESSIONS_CONCURRENCY", "65"),
            ("GIT_SESSION_SESSIONS_CONCURRENCY", "4 "),
        ] {
            let err = with(&[(var, value)]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{var}={value}");
            let text = err.to_string();
            assert!(text.contains(var), "{text}");
        }
    }
}
