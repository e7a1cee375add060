//! The command line: every flag in one place (clap derive). Values stay raw strings here; they are
//! validated once into types by the commands, so that every failure is reported the same way
//! (exit code, JSON).

use std::path::PathBuf;

use crate::restore::{LfsMode, SubmoduleMode};

use clap::{Parser, Subcommand, ValueEnum};

/// Restore one exact commit into a sandbox and push its work back, fast-forward only.
///
/// Installed on PATH as `git-session`, git also runs it as `git session …`.
#[derive(Debug, Parser)]
#[command(
    name = "git-session",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_long_help = environment_help()
)]
pub struct Cli {
    /// The work tree [env: SESSION_DIR; default: the current directory]
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Print the result as JSON on stdout: exactly one object, success or failure (watch: one per
    /// line, one per save)
    #[arg(long, global = true)]
    pub json: bool,

    /// More logging on stderr (-v info, -vv debug); RUST_LOG overrides
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Only errors on stderr
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Restore the tree of TIP_SHA on the session branch into the work tree
    #[command(after_long_help = network_help())]
    Restore(RestoreArgs),
    /// Bake the tree of a base commit into a template (no session yet); a later restore there
    /// fetches and writes only what changed since that commit
    #[command(after_long_help = network_help())]
    Bake(BakeArgs),
    /// Stage everything, commit (signed when SIGNING_* set signing up), and push to the session
    /// branch (fast-forward only)
    #[command(after_long_help = network_help())]
    Save(SaveArgs),
    /// Push the session branch's local commits (fast-forward only, against the lease)
    #[command(after_long_help = network_help())]
    Push(PushCommandArgs),
    /// Save (commit and push) every interval while there is work, until SIGTERM or SIGINT (--all:
    /// every session of a manifest)
    #[command(after_long_help = network_help())]
    Watch(WatchArgs),
    /// Show the session: branch, lease, HEAD, commits ahead, changed files, the signing state
    #[command(after_long_help = network_help())]
    Status(StatusArgs),
    /// Several agents in one repository: a linked work tree per agent, each on its own session
    /// branch with its own lease (add, list, remove)
    #[command(subcommand)]
    Agent(AgentCommand),
    /// A git credential helper answering from the environment (configured by restore)
    Credential(CredentialArgs),
    /// The check git runs before a plain `git push` (installed by restore as a pre-push hook)
    #[command(hide = true)]
    Hook(HookArgs),
    /// Print the JSON Schema (draft 2020-12) of every command's --json output
    Schema,
    /// Print shell completions for SHELL (bash, zsh, fish, elvish, powershell)
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages, one per command (git-session.1, git-session-restore.1, …), into DIR
    Manpage {
        /// The folder to write them to, e.g. /usr/local/share/man/man1
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

impl Command {
    /// The command's name as the JSON output spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Restore(_) => "restore",
            Command::Bake(_) => "bake",
            Command::Save(_) => "save",
            Command::Push(_) => "push",
            Command::Watch(_) => "watch",
            Command::Status(_) => "status",
            Command::Agent(AgentCommand::Add(_)) => "agent_add",
            Command::Agent(AgentCommand::List) => "agent_list",
            Command::Agent(AgentCommand::Remove(_)) => "agent_remove",
            Command::Credential(_) => "credential",
            Command::Hook(_) => "hook",
            Command::Schema => "schema",
            Command::Completions { .. } => "completions",
            Command::Manpage { .. } => "manpage",
        }
    }
}

/// A whole number from `min` to `max`, digits only: `+5`, ` 5`, `0x10` or `5k` are refused (exit 2
/// naming the flag and this range), not read as someone else would read them.
fn number(text: &str, min: u64, max: u64) -> Result<u64, String> {
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse::<u64>().ok())
        .flatten()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("it must be a whole number from {min} to {max}, digits only"))
}

/// git's largest depth: `git clone --depth 2147483648` is refused before any request.
const MAX_DEPTH: u64 = i32::MAX as u64;

/// Deeper than any path: one of `PATH_MAX` (4096) bytes has fewer components.
const MAX_STRIP_COMPONENTS: u64 = 4096;

/// The smallest header bound that holds one tar block (512 bytes), which every pax header fills.
const MIN_HEADER_BYTES: u64 = 512;

fn depth(text: &str) -> Result<u32, String> {
    number(text, 0, MAX_DEPTH).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

fn strip_components(text: &str) -> Result<usize, String> {
    number(text, 0, MAX_STRIP_COMPONENTS).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn header_bytes(text: &str) -> Result<u64, String> {
    number(text, MIN_HEADER_BYTES, u64::MAX)
}

fn entries(text: &str) -> Result<u64, String> {
    number(text, 1, u64::MAX)
}

fn bytes(text: &str) -> Result<u64, String> {
    number(text, 1, u64::MAX)
}

/// Where a restore takes the tree from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum From {
    /// Fetch the commit over git's smart HTTP (protocol v2, or v0/v1 when the server has no v2)
    Git,
    /// Extract a tar.gz archive of the commit
    Archive,
}

/// `restore` flags. Without flags everything comes from the environment.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// Smart-HTTP(S) URL to read from, without credentials [env: READ_URL_FILE, READ_URL]
    #[arg(long, value_name = "URL")]
    pub read_url: Option<String>,

    /// Smart-HTTP(S) URL to push to, without credentials [env: PUSH_URL_FILE, PUSH_URL]
    #[arg(long, value_name = "URL")]
    pub push_url: Option<String>,

    /// The session branch, e.g. sessions/4f1c… (refs/heads/… accepted)
    #[arg(
        long,
        env = "SESSION_BRANCH",
        hide_env_values = true,
        value_name = "BRANCH"
    )]
    pub session_branch: Option<String>,

    /// The full id of the commit to restore: 40 hex digits (64 in a SHA-256 repository)
    #[arg(long, env = "TIP_SHA", hide_env_values = true, value_name = "SHA")]
    pub tip_sha: Option<String>,

    /// Commits of history to fetch, 1 to 2147483647 as git takes them (0: the whole history)
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = depth)]
    pub depth: u32,

    /// Overwrite files the commit tracks in a non-empty directory (others are left in place)
    #[arg(long)]
    pub force: bool,

    /// Where to take the tree from [default: archive when an archive source is given, else git]
    #[arg(long, value_enum, value_name = "SOURCE")]
    pub from: Option<From>,

    /// URL of a tar.gz of TIP_SHA, without credentials [env: ARCHIVE_URL, or a file: ARCHIVE_URL_FILE]
    #[arg(long, value_name = "URL", conflicts_with = "archive")]
    pub archive_url: Option<String>,

    /// A tar.gz of TIP_SHA to extract; `-` reads standard input
    #[arg(long, value_name = "FILE")]
    pub archive: Option<std::path::PathBuf>,

    /// Strip N leading path components [default: one top-level folder whose name holds TIP_SHA's
    /// first 7 hex digits]
    #[arg(long, value_name = "N", value_parser = strip_components)]
    pub strip_components: Option<usize>,

    /// Refuse an archive that does not record its commit id (else: a warning)
    #[arg(long)]
    pub require_commit_id: bool,

    /// Largest pax or long-name header, in bytes
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES", value_parser = header_bytes)]
    pub max_header_bytes: u64,

    /// Most members an archive may hold, or files and folders a fetched commit's tree may expand
    /// to; more is refused (exit 6) before the index is built
    #[arg(long, default_value_t = crate::pack::DEFAULT_MAX_TREE_ENTRIES, value_name = "N",
          value_parser = entries)]
    pub max_entries: u64,

    /// Most bytes of file data an archive may hold
    #[arg(long, default_value_t = 64 << 30, value_name = "BYTES", value_parser = bytes)]
    pub max_bytes: u64,

    /// Largest object (or delta result) a fetched pack may hold, in bytes; larger is refused
    /// (exit 6) before anything that size is allocated
    #[arg(long, default_value_t = crate::pack::DEFAULT_MAX_OBJECT_BYTES, value_name = "BYTES",
          value_parser = bytes)]
    pub max_object_bytes: u64,

    /// When to fetch Git LFS objects for the tree's pointer files: auto (paths the tree's
    /// .gitattributes mark filter=lfs), always (every pointer file), never. Patterns in
    /// GIT_SESSION_LFS_INCLUDE / GIT_SESSION_LFS_EXCLUDE (comma-separated) narrow it
    #[arg(long, value_enum, default_value_t = LfsMode::Auto, value_name = "WHEN")]
    pub lfs: LfsMode,

    /// Check out only these folders (and the files at the top and in the folders leading to
    /// them), as `git sparse-checkout set --cone`; with a server that offers it, blobs outside
    /// are not fetched (a partial clone). One folder per line in GIT_SESSION_SPARSE_FILE works too
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub sparse: Vec<String>,

    /// Which submodules to fetch, each at its exact commit, depth 1: none (each stays an empty
    /// folder, with a warning), shallow (the tree's own), recursive (theirs too). URLs from
    /// .gitmodules (relative ones against READ_URL); GIT_SESSION_SUBMODULE_URL_<name> or a line
    /// `<name> <url>` of GIT_SESSION_SUBMODULE_URLS_FILE overrides one. Into a tree that already
    /// holds the session, it fetches the submodules left empty
    #[arg(long, value_enum, default_value_t = SubmoduleMode::None, value_name = "WHICH")]
    pub submodules: SubmoduleMode,

    /// A baked template (`git-session bake`) whose objects seed a restore into an empty folder:
    /// only what changed since its base is fetched; the result does not depend on DIR
    #[arg(
        long,
        env = "GIT_SESSION_CACHE",
        hide_env_values = true,
        value_name = "DIR"
    )]
    pub cache: Option<PathBuf>,

    /// A JSON manifest of several sessions, each restored as a single restore would be, several
    /// at once (GIT_SESSION_SESSIONS_CONCURRENCY): {"sessions": [{"dir", "read_url" or
    /// "read_url_file", "push_url" or "push_url_file", "session_branch", "tip_sha", optional
    /// "archive_url" or "archive_url_file", "depth", "sparse", "submodules", "lfs", "cache"}, …]}.
    /// The exit code: 0 when every session was restored, else that of the first one that failed.
    /// [env: GIT_SESSION_SESSIONS_FILE]
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["read_url", "push_url", "archive_url", "archive", "sparse", "from",
                              "depth", "lfs", "submodules"]
    )]
    pub sessions: Option<PathBuf>,
}

/// `bake` flags. Without flags everything comes from the environment.
#[derive(Debug, clap::Args)]
pub struct BakeArgs {
    /// Smart-HTTP(S) URL to read from, without credentials [env: READ_URL_FILE, READ_URL]
    #[arg(long, value_name = "URL")]
    pub read_url: Option<String>,

    /// The full id of the base commit to bake in: 40 hex digits (64 in a SHA-256 repository)
    #[arg(long, env = "TIP_SHA", hide_env_values = true, value_name = "SHA")]
    pub tip_sha: Option<String>,

    /// Largest object (or delta result) a fetched pack may hold, in bytes; larger is refused
    /// (exit 6) before anything that size is allocated
    #[arg(long, default_value_t = crate::pack::DEFAULT_MAX_OBJECT_BYTES, value_name = "BYTES",
          value_parser = bytes)]
    pub max_object_bytes: u64,
}

/// `save` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SaveArgs {
    /// The commit message
    #[arg(
        short,
        long,
        default_value = "Save from git-session",
        value_name = "MESSAGE"
    )]
    pub message: crate::types::CommitMessage,

    /// Commit only; do not push
    #[arg(long)]
    pub no_push: bool,

    /// Push flags.
    #[command(flatten)]
    pub push: PushArgs,

    /// `--all`.
    #[command(flatten)]
    pub all: AllArgs,
}

/// `push`'s flags: those `save` shares, and `--all`.
#[derive(Debug, Clone, clap::Args)]
pub struct PushCommandArgs {
    /// Push flags.
    #[command(flatten)]
    pub push: PushArgs,

    /// `--all`.
    #[command(flatten)]
    pub all: AllArgs,
}

/// `--all` of `save`, `push`, `status` and `watch`: the command in every session of a manifest.
#[derive(Debug, Clone, clap::Args)]
pub struct AllArgs {
    /// Run the command in every session of the sessions manifest (--sessions FILE, else
    /// GIT_SESSION_SESSIONS_FILE), as restore reads it: each in its own dir, against its own lease,
    /// with its own push_url (or push_url_file) and read_url, several at once
    /// (GIT_SESSION_SESSIONS_CONCURRENCY; watch: every session at once, in one process); one
    /// failing stops only itself. One result per session (watch: each line names its dir); the
    /// exit code: 0 when every session succeeded, else that of the first one that failed, in the
    /// manifest's order
    #[arg(long)]
    pub all: bool,

    /// The sessions manifest --all reads [env: GIT_SESSION_SESSIONS_FILE]
    #[arg(long, value_name = "FILE", requires = "all")]
    pub sessions: Option<PathBuf>,
}

/// `watch` flags.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// How often to look for work to save, e.g. 30s, 2m, 500ms
    #[arg(long, value_name = "DURATION")]
    pub every: String,

    /// Save only once no changed file was modified for this long, so a file being written is not
    /// caught half-way (e.g. 5s) [default: 0s]
    #[arg(
        long = "quiet-for",
        value_name = "DURATION",
        default_value = "0s",
        hide_default_value = true
    )]
    pub quiet_for: String,

    /// The commit message of each checkpoint
    #[arg(
        short,
        long,
        default_value = "Checkpoint from git-session watch",
        value_name = "MESSAGE"
    )]
    pub message: crate::types::CommitMessage,

    /// Push flags.
    #[command(flatten)]
    pub push: PushArgs,

    /// `--all`.
    #[command(flatten)]
    pub all: AllArgs,
}

/// `push` flags (also used by `save`).
#[derive(Debug, Clone, clap::Args)]
pub struct PushArgs {
    /// Smart-HTTP(S) URL to push to, without credentials [env: PUSH_URL_FILE, PUSH_URL]
    #[arg(long, value_name = "URL")]
    pub push_url: Option<String>,

    /// The session branch; must match the session record
    #[arg(
        long,
        env = "SESSION_BRANCH",
        hide_env_values = true,
        value_name = "BRANCH"
    )]
    pub session_branch: Option<String>,
}

/// `status` flags.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Also ask the remote where the session branch is (one ref)
    #[arg(long)]
    pub remote: bool,

    /// The session branch; must match the session record
    #[arg(
        long,
        env = "SESSION_BRANCH",
        hide_env_values = true,
        value_name = "BRANCH"
    )]
    pub session_branch: Option<String>,

    /// `--all`.
    #[command(flatten)]
    pub all: AllArgs,
}

/// `agent`'s commands, run in the session's main tree (or with -C).
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Make a linked work tree for agent NAME on its own session branch, sharing the object
    /// store; prints its folder
    Add(AgentAddArgs),
    /// List the session's agents: folder, branch, lease, head, unpushed commits, changed files
    List,
    /// Remove agent NAME's tree (refused while it holds unpushed commits or changes, unless
    /// --force)
    Remove(AgentRemoveArgs),
}

/// `agent add` arguments.
#[derive(Debug, clap::Args)]
pub struct AgentAddArgs {
    /// The agent's name: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit
    pub name: String,
    /// The agent's session branch [default: <session branch>-<NAME>]
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,
    /// The full commit id the agent starts at [default: the session's tip: its lease, else the
    /// restored TIP_SHA]
    #[arg(long, value_name = "SHA")]
    pub at: Option<String>,
    /// The agent's folder, new or empty [default: <main tree>-<NAME> beside the main tree]
    // Its own id: `dir` is the global -C's, which clap would fill this from.
    #[arg(long = "dir", id = "agent_dir", value_name = "DIR")]
    pub folder: Option<PathBuf>,
}

/// `agent remove` arguments.
#[derive(Debug, clap::Args)]
pub struct AgentRemoveArgs {
    /// The agent's name
    pub name: String,
    /// Remove it even with unpushed commits or uncommitted changes (they are lost; its local
    /// branch is kept, so its commits stay reachable)
    #[arg(long)]
    pub force: bool,
}

/// `credential` arguments (git passes the operation).
#[derive(Debug, clap::Args)]
pub struct CredentialArgs {
    /// `get`, `store` or `erase`
    pub operation: String,
}

/// `hook` arguments (git runs the hook script, which passes the hook's name).
#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// `pre-push`
    pub name: String,
}

/// Every environment variable git-session reads (its libraries too: proxies, CA roots), as
/// `git-session --help` and the top manual page list them; README says the same (a test compares
/// this list with the names the code reads and with each document).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "READ_URL, READ_URL_FILE",
        "the smart-HTTP(S) URL to fetch from, credentials as userinfo (a _FILE is re-read at each use)",
    ),
    (
        "PUSH_URL, PUSH_URL_FILE",
        "the URL to push to (recorded without its credentials)",
    ),
    (
        "ARCHIVE_URL, ARCHIVE_URL_FILE",
        "a tar.gz of TIP_SHA to restore from instead of fetching",
    ),
    ("SESSION_BRANCH", "the session branch"),
    ("TIP_SHA", "the full commit id to restore"),
    (
        "SIGNING_KEY_FILE",
        "an OpenSSH private key (Ed25519, ECDSA P-256, RSA; unencrypted) every commit is signed with",
    ),
    (
        "SIGNING_URL, SIGNING_URL_FILE, SIGNING_PUBLIC_KEY",
        "a signing service instead of a key file; its signatures are checked against the public key",
    ),
    (
        "SIGNING_REQUIRED",
        "1: save, push and plain git push refuse, before upload, any commit since the lease that is unsigned, signed by another key or not verifying (exit 11)",
    ),
    ("SESSION_DIR", "the work tree when -C is not given"),
    (
        "GIT_SESSION_SANDBOX, GIT_SESSION_AGENT, GIT_SESSION_PERSON",
        "the session's owners, recorded in every commit's trailers and every --json result",
    ),
    (
        "GIT_SESSION_SESSIONS_FILE, GIT_SESSION_SESSIONS_CONCURRENCY",
        "a JSON manifest of several sessions restore restores together (as --sessions), and save, \
         push and status --all act on, and how many at once (4; 1 to 64)",
    ),
    (
        "GIT_SESSION_CACHE",
        "a baked template whose objects seed a restore into an empty folder (as --cache)",
    ),
    (
        "GIT_SESSION_SPARSE_FILE",
        "the folders of a sparse restore, one per line (as --sparse)",
    ),
    (
        "GIT_SESSION_SUBMODULE_URL_<name>, GIT_SESSION_SUBMODULE_URLS_FILE",
        "a submodule's URL in place of its .gitmodules one",
    ),
    (
        "GIT_SESSION_LFS_INCLUDE, GIT_SESSION_LFS_EXCLUDE, GIT_SESSION_LFS_CONCURRENCY",
        "which Git LFS files restore fetches (git-lfs's patterns), and how many at once (8; 1 to 64)",
    ),
    (
        "GIT_SESSION_PROTOCOL",
        "unset: v2 when the server answers it, else v0/v1; 0: v0/v1 only; 2: v2 only",
    ),
    (
        "HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY",
        "proxies, lower-case forms too (they win), as curl reads them for plain git; credentials in \
         the proxy URL, a secret never shown; a proxy that cannot be reached or refuses is named",
    ),
    (
        "SSL_CERT_FILE, SSL_CERT_DIR",
        "CA roots (else the system's, else bundled Mozilla roots)",
    ),
    (
        "GIT_SSL_CAINFO, GIT_PROXY_SSL_CAINFO",
        "git's CA files, added to the roots: the file a template sets for plain git serves \
         git-session too (one without a certificate is exit 2)",
    ),
    (
        "GIT_SESSION_CONNECT_TIMEOUT_MS, GIT_SESSION_READ_TIMEOUT_MS, GIT_SESSION_SECTION_WAIT_MS, \
         GIT_SESSION_FIRST_BYTE_WAIT_MS, GIT_SESSION_LOW_SPEED_LIMIT, GIT_SESSION_LOW_SPEED_TIME_MS, \
         GIT_SESSION_RETRY_BASE_MS, GIT_SESSION_RETRY_TOTAL_MS, GIT_SESSION_LOCK_WAIT_S",
        "the bounds of every wait (README, \"Environment and flags\"); digits only, in range, or exit 2",
    ),
    (
        "GIT_SESSION_BIG_OBJECT_BYTES, GIT_SESSION_MAX_SUBMODULES",
        "objects held whole at most (512 MiB), submodules one restore fetches at most (256)",
    ),
    (
        "GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_AUTHOR_DATE, GIT_COMMITTER_NAME, \
         GIT_COMMITTER_EMAIL, GIT_COMMITTER_DATE, EMAIL",
        "the identities and dates of save's commits, as git reads them",
    ),
    (
        "HOME, XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM, GIT_CONFIG_NOSYSTEM",
        "where save reads user.name, user.email and core.excludesFile, as git does",
    ),
    (
        "GIT_DIR, GIT_SESSION_HOOK_REMOTE, GIT_SESSION_HOOK_URL, GIT_SESSION_HOOK_ACTIVE",
        "set by git and by the pre-push hook restore installs, for its check of plain git push",
    ),
    (
        "PATH",
        "where git-session, run by git as its ssh-keygen, finds OpenSSH's ssh-keygen to check \
         signatures against an allowed-signers file (signing needs none)",
    ),
    (
        "RUST_LOG",
        "the log filter on stderr (overrides -v), e.g. git_session=debug",
    ),
    (
        "GIT_SESSION_FAILPOINT, GIT_SESSION_BARRIER_DIR, GIT_SESSION_BARRIER_COUNT",
        "for tests only: stop or hold the process at a named point",
    ),
];

/// The rows of [`ENVIRONMENT`] about the network (proxies, CA roots), as the help of each command
/// that talks to a server shows them after its options.
pub fn network_help() -> String {
    let mut out = String::from("Network (environment):\n");
    let network = ENVIRONMENT.iter().filter(|(names, _)| {
        let names = names.to_ascii_lowercase();
        names.contains("proxy") || names.contains("ssl_")
    });
    for (names, what) in network {
        out.push_str(&format!("  {names}\n          {what}\n"));
    }
    out
}

/// [`ENVIRONMENT`] as `--help` shows it after the options.
pub fn environment_help() -> String {
    let mut out = String::from("Environment:\n");
    for (names, what) in ENVIRONMENT {
        out.push_str(&format!("  {names}\n          {what}\n"));
    }
    out
}
