//! The one writer of standard output. A reader that went away (`git-session schema | head -c
//! 600`) ends the process as it ends git: killed by SIGPIPE, silently, never as an internal error.
//! Any other refusal (a full disk behind a redirect) is exit 10 with the system's words.

use std::io::Write as _;

/// Write `bytes` to stdout and flush: at once, in one piece.
pub fn print(bytes: &[u8]) {
    #[allow(clippy::disallowed_methods)] // the one place that writes to stdout
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        refused(&e);
    }
}

/// Whether standard output is a terminal (styles only then).
pub fn is_terminal() -> bool {
    #[allow(clippy::disallowed_methods)] // only asks, writes nothing
    std::io::IsTerminal::is_terminal(&std::io::stdout())
}

/// Write `line` and a line break.
pub fn line(line: &str) {
    print(format!("{line}\n").as_bytes());
}

fn refused(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // git's way: SIGPIPE's default action (Rust ignores the signal, so the write failed instead).
        let _ = signal_hook::low_level::emulate_default_handler(libc::SIGPIPE);
    }
    // Whatever the kind, the system refused, not git-session: exit 10, never 1.
    let err = crate::Error::LocalIo(crate::error::LocalIo {
        context: "writing to standard output".to_owned(),
        cause: e.to_string(),
        kind: e.kind(),
    });
    crate::redact::Stderr::line(&format!("error: {err}"));
    std::process::exit(i32::from(err.exit_code()));
}
