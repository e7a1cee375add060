//! One clock for every wait of an HTTP exchange: what the thread is waiting for (the phase), until
//! when, and why that bound.
//!
//! Every read of a response body ([`super::http::Body`]) waits at most until the earliest of:
//! the read timeout (a stall), the phase's deadline, and the retry budget's end. The phases:
//! - a section before the pack (a v2 capability advertisement, `ls-refs`, `acknowledgments`,
//!   `shallow-info`; a v0 advertisement, its shallow and ACK/NAK lines): whole within
//!   `GIT_SESSION_SECTION_WAIT_MS`, however many keep-alives or progress packets come;
//! - the pack's start: its first data byte within `GIT_SESSION_FIRST_BYTE_WAIT_MS`;
//! - the pack flowing: no data for `GIT_SESSION_LOW_SPEED_TIME_MS` fails (keep-alives and progress
//!   are not data; a drip of data is [`super::http::LowSpeed`]'s);
//! - a push's report or an archive's first byte: the server works (hooks, `git archive`) before
//!   its first byte, bounded by `GIT_SESSION_FIRST_BYTE_WAIT_MS` alone.
//!
//! The budget (`GIT_SESSION_RETRY_TOTAL_MS`) bounds every attempt of one retried operation
//! together ([`super::http::Http::retrying`]); pack data flowing restarts it.
//!
//! The state is the calling thread's: an exchange is read on the thread that sent it, and the
//! parsers that know the phase (generic over their reader) need not carry a handle.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// What the thread waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The response head, after the request was sent.
    Head,
    /// A pkt-line section before the pack (its name, for messages).
    Section(&'static str),
    /// The packfile section begun, no pack data yet.
    PackStart,
    /// A response head came for a body that is data from its first byte (an LFS object), no
    /// byte of it yet.
    Headers,
    /// Pack or body data arriving.
    Flowing,
    /// The server working before its first byte (a push's report, an archive).
    Working,
}

#[derive(Debug, Clone, Copy)]
struct State {
    phase: Phase,
    /// The phase's own deadline, and the knob that set it.
    deadline: Option<(Instant, &'static str, Duration)>,
    /// The end of the retry budget, and its length.
    budget: Option<(Instant, Duration)>,
    /// Whether data flowed in this attempt (pack data restarts the budget).
    flowed: bool,
}

thread_local! {
    static STATE: Cell<State> = const {
        Cell::new(State { phase: Phase::Head, deadline: None, budget: None, flowed: false })
    };
}

fn update(f: impl FnOnce(&mut State)) {
    STATE.with(|s| {
        let mut state = s.get();
        f(&mut state);
        s.set(state);
    });
}

fn knobs() -> &'static crate::knobs::Knobs {
    crate::knobs::get()
}

/// A request is on its way: its response head is awaited.
pub fn head() {
    update(|s| {
        s.phase = Phase::Head;
        s.deadline = None;
    });
}

/// A response head arrived: its body is a section until a parser says otherwise.
pub fn response() {
    section("response");
}

/// A byte of a response's body came: a stall from now on is "too little", not "nothing" (the
/// phase's deadline stays).
pub fn body_began() {
    update(|s| {
        if s.phase == Phase::Section("response") {
            s.phase = Phase::Section("response body");
        }
    });
}

/// A section before the pack begins: it must be whole within `GIT_SESSION_SECTION_WAIT_MS`.
pub fn section(name: &'static str) {
    enter(
        Phase::Section(name),
        knobs().section_wait,
        "GIT_SESSION_SECTION_WAIT_MS",
    );
}

/// Enter `phase`, which must end within `wait` (the knob `knob`) from now.
fn enter(phase: Phase, wait: Duration, knob: &'static str) {
    update(|s| {
        s.phase = phase;
        s.deadline = Some((Instant::now() + wait, knob, wait));
    });
}

/// The packfile section begins: its first data byte within `GIT_SESSION_FIRST_BYTE_WAIT_MS`.
pub fn pack_start() {
    enter(
        Phase::PackStart,
        knobs().first_byte_wait,
        "GIT_SESSION_FIRST_BYTE_WAIT_MS",
    );
}

/// The server works before its first byte (a push's report, an archive): bounded by
/// `GIT_SESSION_FIRST_BYTE_WAIT_MS` alone, not by the read timeout.
pub fn working() {
    enter(
        Phase::Working,
        knobs().first_byte_wait,
        "GIT_SESSION_FIRST_BYTE_WAIT_MS",
    );
}

/// Data arrived (pack bytes, not keep-alives): the next must come within
/// `GIT_SESSION_LOW_SPEED_TIME_MS`, and the retry budget starts again for a later attempt.
pub fn data() {
    let wait = knobs().low_speed_time;
    update(|s| {
        s.phase = Phase::Flowing;
        s.deadline = Some((Instant::now() + wait, "GIT_SESSION_LOW_SPEED_TIME_MS", wait));
        s.flowed = true;
        s.budget = None;
    });
}

/// The head of a response whose body is data from its first byte (an LFS object) came: that
/// byte within `GIT_SESSION_LOW_SPEED_TIME_MS`. Only a byte that comes restarts the retry budget
/// ([`data`]): a server that sends headers and then nothing is not progress.
pub fn headers() {
    let wait = knobs().low_speed_time;
    update(|s| {
        s.phase = Phase::Headers;
        s.deadline = Some((Instant::now() + wait, "GIT_SESSION_LOW_SPEED_TIME_MS", wait));
    });
}

/// The phase now.
pub fn phase() -> Phase {
    STATE.with(|s| s.get().phase)
}

/// Start an attempt within the budget ending at `end` (of `total`): returns the state to put back
/// with [`end_attempt`].
pub(crate) fn begin_attempt(end: Instant, total: Duration) -> Saved {
    let saved = Saved(STATE.with(Cell::get));
    update(|s| {
        s.phase = Phase::Head;
        s.deadline = None;
        s.budget = Some((end, total));
        s.flowed = false;
    });
    saved
}

/// What [`begin_attempt`] replaced.
pub(crate) struct Saved(State);

/// End an attempt: whether data flowed in it; the state before it is back.
pub(crate) fn end_attempt(saved: Saved) -> bool {
    let flowed = STATE.with(|s| s.get().flowed);
    STATE.with(|s| s.set(saved.0));
    flowed
}

/// The end of the current retry budget, if any.
pub fn budget_end() -> Option<Instant> {
    STATE.with(|s| s.get().budget.map(|(end, _)| end))
}

/// Why a wait ended: the message of a timed-out read or head.
#[derive(Debug, Clone)]
pub struct Stall {
    /// The bound that ran out.
    pub until: Instant,
    why: Why,
    phase: Phase,
}

#[derive(Debug, Clone, Copy)]
enum Why {
    /// Nothing for the read timeout.
    Read(Duration),
    /// The phase's deadline.
    Phase(&'static str, Duration),
    /// The retry budget.
    Budget(Duration),
}

/// The earliest bound of a wait beginning now: the read timeout (`read`: `None` for a head whose
/// request still uploads, where the caller gives its own), the phase's deadline, the budget.
/// `budget_extra` stretches the budget for an upload's own time.
pub fn bound(read: Option<Duration>, budget_extra: Duration) -> Stall {
    let state = STATE.with(Cell::get);
    let now = Instant::now();
    // The server works before its first byte: only the phase's deadline bounds that wait.
    let read = if state.phase == Phase::Working {
        None
    } else {
        read
    };
    let mut best: Option<(Instant, Why)> = read.map(|r| (now + r, Why::Read(r)));
    let mut consider = |at: Instant, why: Why| {
        if best.is_none_or(|(b, _)| at < b) {
            best = Some((at, why));
        }
    };
    if let Some((at, knob, wait)) = state.deadline {
        consider(at, Why::Phase(knob, wait));
    }
    // A server working before its first byte (hooks, an archive being made) is answering: the
    // budget is for servers that do not.
    if let Some((at, total)) = state.budget.filter(|_| state.phase != Phase::Working) {
        consider(at + budget_extra, Why::Budget(total));
    }
    let (until, why) =
        best.unwrap_or((now + Duration::from_secs(86_400), Why::Read(Duration::ZERO)));
    Stall {
        until,
        why,
        phase: state.phase,
    }
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

impl Stall {
    /// What stalled, in words (no URL): "the server sent headers and then nothing for 60 s".
    pub fn describe(&self) -> String {
        let during = match self.phase {
            Phase::Head => "no response head came".to_owned(),
            Phase::Section("response") => "the server sent headers and then nothing".to_owned(),
            Phase::Section("response body") => {
                "the server sent headers and then too little".to_owned()
            }
            Phase::Section(name) => format!("the server did not finish its {name}"),
            Phase::Headers => "the server sent headers and then nothing".to_owned(),
            Phase::PackStart => "the server sent no pack data".to_owned(),
            Phase::Flowing => "the server stopped sending data".to_owned(),
            Phase::Working => "the server sent no answer".to_owned(),
        };
        match self.why {
            Why::Read(t) | Why::Phase(_, t) if self.phase == Phase::Headers => {
                let knob = match self.why {
                    Why::Phase(knob, _) => knob,
                    _ => "GIT_SESSION_READ_TIMEOUT_MS",
                };
                format!(
                    "the server sent headers and then nothing for {} ({knob})",
                    secs(t)
                )
            }
            Why::Phase(knob, t) if self.phase == Phase::Section("response") => format!(
                "the server sent headers and then nothing for {} ({knob})",
                secs(t)
            ),
            Why::Read(t) if self.phase == Phase::Section("response") => {
                format!(
                    "the server sent headers and then nothing for {} (GIT_SESSION_READ_TIMEOUT_MS)",
                    secs(t)
                )
            }
            Why::Read(t) => format!(
                "{during}: nothing came for {} (GIT_SESSION_READ_TIMEOUT_MS)",
                secs(t)
            ),
            Why::Phase(knob, t) => format!(
                "{during} within {} ({knob}; keep-alives and progress messages do not count)",
                secs(t)
            ),
            Why::Budget(t) => format!(
                "{during}, and the time for all attempts ran out ({}, GIT_SESSION_RETRY_TOTAL_MS)",
                secs(t)
            ),
        }
    }

    /// As an I/O error of kind `TimedOut`.
    pub fn into_io(self) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_bound_wins_and_says_why() {
        let total = Duration::from_millis(1500);
        let saved = begin_attempt(Instant::now() + total, total);
        head();
        let stall = bound(Some(Duration::from_secs(60)), Duration::ZERO);
        assert!(stall.until <= Instant::now() + total);
        assert!(
            stall.describe().contains("GIT_SESSION_RETRY_TOTAL_MS"),
            "{}",
            stall.describe()
        );
        // An upload's time stretches the budget.
        let stretched = bound(Some(Duration::from_secs(60)), Duration::from_secs(5));
        assert!(stretched.until > Instant::now() + total);

        // A server working before its first byte: neither the read timeout nor the budget.
        working();
        let stall = bound(Some(Duration::from_millis(10)), Duration::ZERO);
        assert!(stall.until > Instant::now() + total);
        assert!(stall.describe().contains("GIT_SESSION_FIRST_BYTE_WAIT_MS"));

        // Pack data: the budget is gone, the next data is awaited for the low-speed time.
        data();
        assert_eq!(phase(), Phase::Flowing);
        assert_eq!(budget_end(), None);
        let stall = bound(Some(Duration::from_millis(10)), Duration::ZERO);
        assert!(
            stall.describe().contains("GIT_SESSION_READ_TIMEOUT_MS"),
            "{}",
            stall.describe()
        );
        assert!(end_attempt(saved), "data flowed");
        assert_eq!(budget_end(), None);
    }

    #[test]
    fn headers_and_then_nothing_keep_the_budget_and_say_so() {
        let total = Duration::from_millis(1500);
        let saved = begin_attempt(Instant::now() + total, total);
        headers();
        let stall = bound(Some(Duration::from_secs(60)), Duration::ZERO);
        assert_eq!(
            budget_end().map(|_| ()),
            Some(()),
            "no data came: the budget holds"
        );
        assert!(stall.until <= Instant::now() + total);
        assert!(
            stall
                .describe()
                .starts_with("the server sent headers and then nothing"),
            "{}",
            stall.describe()
        );
        assert!(!end_attempt(saved), "no data flowed");
    }

    #[test]
    fn a_response_says_whether_anything_came_after_its_headers() {
        response();
        let nothing = bound(None, Duration::ZERO);
        assert!(
            nothing
                .describe()
                .starts_with("the server sent headers and then nothing for"),
            "{}",
            nothing.describe()
        );
        body_began();
        let little = bound(None, Duration::ZERO);
        assert_eq!(little.until, nothing.until, "the deadline stays");
        assert!(
            little
                .describe()
                .starts_with("the server sent headers and then too little"),
            "{}",
            little.describe()
        );
    }

    #[test]
    fn a_section_keeps_its_deadline_however_often_it_is_read() {
        section("acknowledgments section");
        let first = bound(None, Duration::ZERO).until;
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(bound(None, Duration::ZERO).until, first);
        assert!(
            bound(None, Duration::ZERO)
                .describe()
                .contains("did not finish its acknowledgments section")
        );
    }
}
