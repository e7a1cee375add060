//! The `git-session` binary: parse, run, exit with the SPEC's code. A panic exits 1, never 101.

use clap::Parser as _;

/// The test allocator (see `git_session::alloc_limit`): only with the `alloc-limit` feature.
#[cfg(feature = "alloc-limit")]
#[global_allocator]
static ALLOC: git_session::alloc_limit::Limited = git_session::alloc_limit::Limited::new();

fn main() -> std::process::ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let err =
            git_session::Error::Internal(format!("internal error (a bug in git-session): {msg}"));
        let json = std::env::args().any(|a| a == "--json");
        let command = std::env::args()
            .skip(1)
            .find(|a| ["restore", "bake", "save", "push", "watch", "status"].contains(&a.as_str()))
            .unwrap_or_default();
        git_session::output::failure(json, &command, &err);
        // Exit 1 here, before any unwinding or abort: never 101 (unwind) or 134 (abort).
        std::process::exit(1);
    }));
    let json = std::env::args().any(|a| a == "--json");
    let cli = match git_session::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            use clap::error::ErrorKind;
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) || !json
            {
                let _ = err.print();
                return std::process::ExitCode::from(if err.use_stderr() { 2 } else { 0 });
            }
            let text = err.render().to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .to_owned();
            let command = std::env::args()
                .skip(1)
                .find(|a| {
                    ["restore", "bake", "save", "push", "watch", "status"].contains(&a.as_str())
                })
                .unwrap_or_default();
            git_session::output::failure(
                true,
                &command,
                &git_session::Error::Usage(git_session::error::Refusal::Invalid, first),
            );
            return std::process::ExitCode::from(2);
        }
    };
    match std::panic::catch_unwind(|| git_session::run(cli)) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(_) => std::process::ExitCode::from(1),
    }
}
