//! The one bound on glob patterns: gix's wildmatch takes time exponential in the number of `*`
//! runs of a pattern (`**/**/…/**` twenty deep against a path twenty deep: 90 s; thirty: days),
//! and patterns come from a `.gitattributes` the server chose, or from `GIT_SESSION_LFS_*`. A
//! pattern with more than [`MAX_STAR_RUNS`] runs of `*` is never matched: the attributes of a tree
//! holding one are refused (exit 6), such a knob is exit 2. git's own patterns rarely hold three.

/// The most runs of `*` (`*`, `**`, `***` each count one) a pattern may hold.
pub const MAX_STAR_RUNS: usize = 8;

/// The runs of `*` in `pattern`; a `*` quoted by `\` is a character, not a run.
pub fn star_runs(pattern: &[u8]) -> usize {
    let mut runs = 0;
    let mut in_run = false;
    let mut quoted = false;
    for &b in pattern {
        let star = b == b'*' && !quoted;
        if star && !in_run {
            runs += 1;
        }
        in_run = star;
        quoted = b == b'\\' && !quoted;
    }
    runs
}

/// Whether `pattern` may be matched in bounded time.
pub fn bounded(pattern: &[u8]) -> bool {
    star_runs(pattern) <= MAX_STAR_RUNS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_stars_are_counted_once_and_quoted_ones_not_at_all() {
        assert_eq!(star_runs(b"*.bin"), 1);
        assert_eq!(star_runs(b"**/x/***/*.c"), 3);
        assert_eq!(star_runs(b"a\\*b"), 0);
        assert_eq!(star_runs(b"a\\\\*b"), 1);
        assert!(bounded(b"**/**/**/**/**/**/**/**"));
        assert!(!bounded(b"**/**/**/**/**/**/**/**/**"));
    }

    /// The bound is where matching stays fast: the worst pattern it lets through, against a
    /// path built to make it backtrack, matches in well under a second.
    #[test]
    fn the_worst_bounded_pattern_matches_quickly() {
        use gix::bstr::ByteSlice as _;
        let pattern = "h/".to_owned() + &"**/".repeat(MAX_STAR_RUNS - 1) + "**.t-";
        let deep = "h/".to_owned() + &"a/".repeat(40) + "x.t";
        // The fuzzer's find: the pattern against its own text (9 runs took 18 s over its prefixes).
        let itself = "h/".to_owned() + &"**//".repeat(MAX_STAR_RUNS - 1) + "**.t-";
        let started = std::time::Instant::now();
        for path in [deep, itself] {
            let _ = gix::glob::wildmatch(
                pattern.as_bytes().as_bstr(),
                path.as_bytes().as_bstr(),
                gix::glob::wildmatch::Mode::NO_MATCH_SLASH_LITERAL,
            );
        }
        assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    }
}
