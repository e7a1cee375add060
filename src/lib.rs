//! git-session: restore one exact commit into a sandbox and push its work back, fast-forward only.
//!
//! The product contract is `SPEC.md` (shared with the backend). This crate is the sandbox side of the
//! handoff: `restore` (git over smart HTTP protocol v2, or a tar.gz archive), `save`, `push`, `status`.
//!
//! Layout (drawn in `ARCHITECTURE.md`): [`cli`] (flags), [`inputs`] (flags and environment into
//! [`types`]), [`knobs`] (the tuning variables, parsed once), [`commands`] (one file per command); the read path [`restore`], the write path
//! [`save`] then [`push`]; the local repository [`repo`]; the wire [`wire`] and the pack format
//! [`pack`]; [`fs`] at the bottom; [`error`] (the one error type and the exit codes), [`output`]
//! (the only printing of results), [`redact`], [`signing`] (SSH signatures of commits).

#![deny(missing_docs)]
#![deny(unsafe_code)] // exceptions: `pack` maps the received pack; `alloc_limit`, a test allocator

pub mod alloc_limit;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod error;
pub mod failpoint;
pub mod fs;
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod hint;
pub mod inputs;
pub mod knobs;
pub mod manifest;
pub mod names;
pub mod output;
pub mod pack;
pub mod progress;
pub mod push;
pub mod redact;
pub mod repo;
pub mod restore;
pub mod save;
pub mod scan;
pub mod signing;
pub mod text;
pub mod types;
pub mod wire;

use cli::{Cli, Command};
pub use error::{Error, Result};

/// The commands that need no session folder and print something other than a result object
/// (`None`: the command is not one of them).
fn run_without_a_session(cli: &Cli) -> Option<u8> {
    match &cli.command {
        Command::Credential(args) => Some(match commands::credential::run(&args.operation) {
            Ok(()) => 0,
            Err(err) => {
                redact::Stderr::line(&format!("git-session credential: {err}"));
                err.exit_code()
            }
        }),
        Command::Hook(args) => {
            Some(
                match knobs::init().and_then(|_| commands::hook::run(&args.name)) {
                    Ok(()) => 0,
                    Err(err) => {
                        // git shows the hook's stderr above its own "failed to push some refs".
                        redact::Stderr::line(&format!("git-session: {err}"));
                        err.exit_code()
                    }
                },
            )
        }
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            // Made whole first: clap_complete panics when its writer fails.
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "git-session", &mut script);
            output::stdout::print(&script);
            Some(0)
        }
        Command::Schema => {
            output::stdout::line(&output::json::schema_with::<manifest::Document>());
            Some(0)
        }
        Command::Manpage { out } => {
            let cmd = <Cli as clap::CommandFactory>::command();
            Some(match commands::manpage::write_pages(cmd, out) {
                Ok(pages) => {
                    let pages: Vec<String> =
                        pages.iter().map(|p| p.display().to_string()).collect();
                    let human = pages.join("\n");
                    let result =
                        output::json::CommandResult::Manpage(output::json::Pages { pages });
                    let success = output::Success {
                        result,
                        branch: String::new(),
                        warnings: Vec::new(),
                        human,
                    };
                    // `-q` prints nothing on success, as before; `--json` always the object.
                    if cli.json || !cli.quiet {
                        output::success(cli.json, cli.quiet, success);
                    }
                    0
                }
                Err(err) => {
                    output::failure(cli.json, "manpage", &err);
                    err.exit_code()
                }
            })
        }
        _ => None,
    }
}

/// Run a parsed command line; returns the process exit code (0–11).
pub fn run(cli: Cli) -> u8 {
    redact::learn_environment();
    init_logging(cli.verbose, cli.quiet);
    progress::enable(cli.json, cli.quiet);
    if failpoint::armed("panic") {
        panic!("failpoint 'panic' reached");
    }
    if let Some(code) = run_without_a_session(&cli) {
        return code;
    }
    let command = cli.command.name();
    // Read once, before anything is written: a bad value is exit 2 whatever the command.
    let owner = types::Owner::from_env()
        .map_err(|e| Error::Usage(crate::error::Refusal::Invalid, e.to_string()))
        .and_then(|owner| knobs::init().map(|_| owner));
    if let Ok(owner) = &owner {
        output::set_owner(owner.clone());
    }
    // Before anything touches the tree (and before any thread starts): root becomes the owner of
    // another user's tree (SPEC rule 9).
    let result = owner.and_then(|owner| {
        let (dir, given) = inputs::session_dirs(cli.dir.as_deref())?;
        fs::owner::become_owner(&given, &dir)?;
        Ok((dir, owner))
    });
    if let (Command::Watch(args), Ok((_, owner))) = (&cli.command, &result)
        && args.all.all
    {
        return commands::watch::run_all(args, owner, cli.json, cli.quiet);
    }
    if let (Command::Watch(args), Ok((dir, owner))) = (&cli.command, &result) {
        return commands::watch::run(args, dir.clone(), owner, cli.json, cli.quiet);
    }
    if let (Command::Restore(args), Ok(_)) = (&cli.command, &result)
        && let Some(manifest) = commands::sessions::manifest(args)
    {
        return commands::sessions::run(args, &manifest, cli.json, cli.quiet);
    }
    if let Ok((_, owner)) = &result
        && let Some((each, all, push_url)) = every_session(&cli.command, owner)
    {
        return commands::sessions::run_all(each, all, push_url, cli.json, cli.quiet);
    }
    let result = result.and_then(|(dir, owner)| match &cli.command {
        Command::Restore(args) => commands::restore::run(args, dir),
        Command::Bake(args) => commands::bake::run(args, dir),
        Command::Save(args) => {
            commands::save::run(args, dir, &owner, commands::Given::environment(&args.push))
        }
        Command::Push(args) => commands::push::run(dir, commands::Given::environment(&args.push)),
        Command::Status(args) => {
            let given = commands::Given::Environment {
                push_url: None,
                branch: args.session_branch.as_deref(),
            };
            commands::status::run(args, dir, given)
        }
        Command::Agent(command) => commands::agent::run(command, dir),
        Command::Credential(_)
        | Command::Watch(_)
        | Command::Hook(_)
        | Command::Schema
        | Command::Completions { .. }
        | Command::Manpage { .. } => {
            unreachable!("handled before the session directory")
        }
    });
    match result {
        Ok(success) => {
            output::success(cli.json, cli.quiet, success);
            0
        }
        Err(err) => {
            output::failure(cli.json, command, &err);
            err.exit_code()
        }
    }
}

/// `save`, `push` or `status` with `--all`: the command for each session, its `--all` flags, and
/// whether `--push-url` was given too.
fn every_session<'a>(
    command: &'a Command,
    owner: &'a types::Owner,
) -> Option<(commands::sessions::Each<'a>, &'a cli::AllArgs, bool)> {
    use commands::sessions::Each;
    let (each, all, push_url) = match command {
        Command::Save(args) => (Each::Save(args, owner), &args.all, &args.push.push_url),
        Command::Push(args) => (Each::Push, &args.all, &args.push.push_url),
        Command::Status(args) => (Each::Status(args), &args.all, &None),
        _ => return None,
    };
    all.all.then_some((each, all, push_url.is_some()))
}

fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "git_session=info,warn",
        (false, _) => "git_session=debug,info",
    };
    // `RUST_LOG`'s `target=level` directives (span and field filters are not read: `Targets`
    // needs no regex engine, which an `EnvFilter` would add to the binary); one that does not
    // parse leaves the default.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(|| default.parse().unwrap_or_default());
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(redact::Stderr)
        .with_target(false)
        // No colours: the terminal rule shows every escape sequence escaped.
        .with_ansi(false)
        .without_time();
    let _ = tracing_subscriber::registry()
        .with(layer)
        .with(filter)
        .try_init();
}
