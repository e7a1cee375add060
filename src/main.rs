//! The `git-session` binary: parse, run, exit with the SPEC's code. A panic exits 1, never 101.

use clap::Parser as _;

/// The test allocator (see `git_session::alloc_limit`): only with the `alloc-limit` feature.
#[cfg(feature = "alloc-limit")]
#[global_allocator]
static ALLOC: git_session::alloc_limit::Limited = git_session::alloc_limit::Limited::new();

/// The command named in argv (for the JSON failure), read without assuming UTF-8: the first
/// argument that names one of clap's subcommands.
fn command_arg() -> String {
    let cli = <git_session::cli::Cli as clap::CommandFactory>::command();
    std::env::args_os()
        .skip(1)
        .filter_map(|a| a.into_string().ok())
        .find(|a| cli.find_subcommand(a).is_some())
        .unwrap_or_default()
}

/// Whether `--json` is in argv (an argument that is not UTF-8 is not it).
fn json_arg() -> bool {
    std::env::args_os().any(|a| a == "--json")
}

/// clap's error for an argument that is not UTF-8, naming it (escaped).
fn not_utf8() -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let shown = std::env::args_os()
        .skip(1)
        .find(|a| a.to_str().is_none())
        .map(|a| git_session::text::line(a.as_bytes()))
        .unwrap_or_default();
    format!(
        "error: the argument '{shown}' is not UTF-8 (such bytes shown as \\xNN): only paths \
         may hold them; pass the value in UTF-8"
    )
}

/// clap's text with a line naming, escaped, each argument that holds control characters: clap
/// drops escape sequences from what it echoes, so "invalid value '1'" would name a value that
/// was not given.
fn with_controls_shown(text: String) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let shown: Vec<String> = std::env::args_os()
        .skip(1)
        .filter_map(|a| {
            let escaped = git_session::text::line(a.as_bytes());
            (escaped.as_bytes() != a.as_bytes()).then(|| format!("'{escaped}'"))
        })
        .collect();
    if shown.is_empty() {
        return text;
    }
    format!(
        "{}\n(as given, with control characters and bytes that are not UTF-8 shown escaped: {})",
        text.trim_end(),
        shown.join(", ")
    )
}

/// `pow` (what `f64::powf` calls: tokio's scheduler statistics, indicatif) from the `libm` crate,
/// not the system's libm.so.6: it was the only symbol taken from that library, and loading it (its
/// code, tables and relocations) cost about 0.6 MiB of every run's resident memory. Not in the
/// static build, whose libm.a is linked only for what is undefined.
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(target_feature = "crt-static")
))]
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// One malloc arena for all threads. glibc gives each new thread that allocates an arena of its
/// own (up to 8 per core), each with its own free lists and top chunk, so memory one thread frees
/// is not reused by another: the sparse restore (main thread, tokio's and the checkout's
/// workers) had two arenas at its peak, 0.8 MiB more resident than with one (median of 10 runs
/// each, MALLOC_ARENA_MAX=1). Set before any thread starts; the environment's MALLOC_ARENA_MAX,
/// read by glibc earlier, is overridden.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    // SAFETY: mallopt only sets a parameter of glibc's allocator; no other thread exists yet.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}

fn main() -> std::process::ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    one_malloc_arena();
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let err =
            git_session::Error::Internal(format!("internal error (a bug in git-session): {msg}"));
        git_session::output::failure(json_arg(), &command_arg(), &err);
        // Exit 1 here, before any unwinding or abort: never 101 (unwind) or 134 (abort).
        std::process::exit(1);
    }));
    // git running its `ssh-keygen` (restore sets `gpg.ssh.program` to this binary for signing).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if git_session::commands::ssh_keygen::is_call(&args) {
        return std::process::ExitCode::from(git_session::commands::ssh_keygen::run(&args));
    }
    let json = json_arg();
    let cli = match git_session::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            use clap::error::ErrorKind;
            if !err.use_stderr() {
                // Help and version, on stdout: our own text, styled only for a terminal.
                let styled = err.render();
                let text = if git_session::output::stdout::is_terminal() {
                    styled.ansi().to_string()
                } else {
                    styled.to_string()
                };
                git_session::output::stdout::print(text.as_bytes());
                return std::process::ExitCode::from(0);
            }
            // clap's words echo argv: through the one writer of stderr (the terminal rule).
            let text = match err.kind() {
                ErrorKind::InvalidUtf8 => not_utf8(),
                _ => with_controls_shown(err.render().to_string()),
            };
            if !json || err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                git_session::redact::Stderr::line(text.trim_end());
                return std::process::ExitCode::from(2);
            }
            // All of clap's words (which argument, which values are valid, the usage line).
            let whole = text.trim().trim_start_matches("error: ").to_owned();
            let refusal = match err.kind() {
                ErrorKind::MissingRequiredArgument | ErrorKind::MissingSubcommand => {
                    git_session::error::Refusal::Missing
                }
                _ => git_session::error::Refusal::Invalid,
            };
            git_session::output::failure(
                true,
                &command_arg(),
                &git_session::Error::Usage(refusal, whole),
            );
            return std::process::ExitCode::from(2);
        }
    };
    match std::panic::catch_unwind(|| git_session::run(cli)) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(_) => std::process::ExitCode::from(1),
    }
}
