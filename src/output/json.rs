//! The `--json` objects as types: [`super::success`] and [`super::failure`] serialise them, and
//! `git-session schema` describes them (JSON Schema draft 2020-12, derived with schemars from the
//! same types), so the schema cannot drift from what is printed.

use schemars::JsonSchema;
use serde::Serialize;

use crate::types::{FullSha, Owner};

/// A command's successful result (exit 0).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("unevaluatedProperties" = false))]
pub struct Succeeded {
    /// Always `true`.
    #[schemars(extend("const" = true))]
    pub ok: bool,
    /// `watch --all`: the work tree, absolute, of the session this line is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// The command and its own fields.
    #[serde(flatten)]
    pub result: CommandResult,
    /// The session branch (without `refs/heads/`); `null` for `bake` (a template has none).
    pub branch: Option<String>,
    /// What the user should know; the command still succeeded.
    pub warnings: Vec<String>,
    /// Who owns the session, as `GIT_SESSION_SANDBOX`, `_AGENT`, `_PERSON` set it.
    pub owner: Owner,
}

/// The command that ran, with the fields only it has.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum CommandResult {
    /// `git-session restore`.
    Restore(Restored),
    /// `git-session bake`.
    Bake(Baked),
    /// `git-session save`.
    Save(Pushed),
    /// `git-session push`.
    Push(Pushed),
    /// `git-session status`.
    Status(Status),
    /// `git-session manpage`.
    Manpage(Pages),
    /// `git-session agent add`.
    AgentAdd(AgentAdded),
    /// `git-session agent list`.
    AgentList(AgentList),
    /// `git-session agent remove`.
    AgentRemove(AgentRemoved),
}

impl CommandResult {
    /// The command's name, as `"command"` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            CommandResult::Restore(_) => "restore",
            CommandResult::Bake(_) => "bake",
            CommandResult::Save(_) => "save",
            CommandResult::Push(_) => "push",
            CommandResult::Status(_) => "status",
            CommandResult::Manpage(_) => "manpage",
            CommandResult::AgentAdd(_) => "agent_add",
            CommandResult::AgentList(_) => "agent_list",
            CommandResult::AgentRemove(_) => "agent_remove",
        }
    }
}

/// `manpage`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Pages {
    /// The pages written, one path each.
    pub pages: Vec<String>,
}

/// `agent add`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentAdded {
    /// The agent's name.
    pub name: String,
    /// The agent's work tree (a linked work tree of the session's repository).
    pub dir: String,
    /// The agent's session branch (without `refs/heads/`).
    pub agent_branch: String,
    /// The commit the agent's branch starts at.
    pub start: FullSha,
    /// The agent's lease: the zero id (its branch is new on the server).
    pub lease: FullSha,
    /// Files copied from the main tree's checkout (clean there).
    pub copied: u64,
    /// Files written from the object store.
    pub written: u64,
    /// Of the files copied (and LFS objects taken from the shared store), those the file system
    /// cloned (copy-on-write, `FICLONE`: XFS with reflink, Btrfs): no bytes written.
    pub cloned: u64,
}

/// One agent, as `agent list` shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentEntry {
    /// The agent's name.
    pub name: String,
    /// Its work tree; `null` when it is gone.
    pub dir: Option<String>,
    /// Its session branch.
    pub agent_branch: String,
    /// Its lease (the zero id until its first push).
    pub lease: FullSha,
    /// The commit its branch is at; `null` when unreadable.
    pub head: Option<FullSha>,
    /// Commits on its branch not pushed yet (not reachable from the lease or its start).
    pub ahead: u64,
    /// Files changed in its tree (what its next `save` would commit).
    pub changed: u64,
}

/// `agent list`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentList {
    /// The session's agents, by name.
    pub agents: Vec<AgentEntry>,
}

/// `agent remove`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentRemoved {
    /// The agent's name.
    pub name: String,
    /// The work tree removed.
    pub dir: Option<String>,
    /// Whether the local branch was kept (it held commits not pushed, removed with `--force`).
    pub branch_kept: bool,
}

/// `restore`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Restored {
    /// The commit restored (`TIP_SHA`).
    pub tip: FullSha,
    /// The lease recorded: the remote session branch's tip at restore (the zero id: the branch
    /// did not exist, the first push creates it).
    pub lease: FullSha,
    /// Where the tree came from.
    #[schemars(extend("enum" = ["git", "archive"]))]
    pub source: &'static str,
    /// `true` when the tree already held this session and nothing was touched.
    pub noop: bool,
    /// Files written (or removed, for a boot of a baked template).
    pub files: usize,
    /// Git LFS files whose content was fetched in place of their pointers.
    pub lfs_files: usize,
    /// The submodules restored (`--submodules`), by path: the tree's own (with `recursive`,
    /// theirs are restored inside them).
    pub submodules: Vec<String>,
    /// The folders of a sparse restore (`--sparse`); `null`: the whole tree.
    pub sparse: Option<Vec<String>>,
    /// The repository's object format: `sha1` (ids of 40 hex digits) or `sha256` (64).
    #[schemars(extend("enum" = ["sha1", "sha256"]))]
    pub object_format: &'static str,
}

/// `bake`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Baked {
    /// The base commit baked in.
    pub base: FullSha,
    /// `true` when the folder already held a template baked at this base.
    pub noop: bool,
    /// Files written.
    pub files: usize,
    /// The repository's object format: `sha1` (ids of 40 hex digits) or `sha256` (64).
    #[schemars(extend("enum" = ["sha1", "sha256"]))]
    pub object_format: &'static str,
}

/// `save`'s and `push`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Pushed {
    /// Whether this command made a commit (`push` never does).
    pub committed: bool,
    /// The commit made, or `null`.
    pub commit: Option<FullSha>,
    /// Whether the remote session branch moved.
    pub pushed: bool,
    /// The remote session branch's tip now (with `--no-push`: the lease).
    pub tip: FullSha,
    /// Its tip before (the lease).
    pub previous_tip: FullSha,
    /// Whether the commit this command made is signed (`false` when it made none; `push` makes
    /// none).
    pub signed: bool,
    /// The key that signed it, `<type> SHA256:<fingerprint>` as `ssh-keygen -l` prints them
    /// (`ED25519 SHA256:…`); only when `signed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<String>,
}

/// `status`'s fields.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Status {
    /// The lease: the remote tip a push must find.
    pub lease: FullSha,
    /// `HEAD`, or `null` when it cannot be read.
    pub head: Option<FullSha>,
    /// The commit the session was restored at.
    pub tip: FullSha,
    /// Where the tree came from.
    #[schemars(extend("enum" = ["git", "archive"]))]
    pub source: &'static str,
    /// Commits on the session branch that the remote does not have.
    pub ahead: usize,
    /// What `save` would commit (`null` when it cannot be known, the warnings say why).
    pub changed: Option<Vec<PendingChange>>,
    /// With `--remote`: the remote session branch's tip (the zero id when it is absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_tip: Option<FullSha>,
    /// With `--remote`: what a push would meet — `lease` (fast-forwards), `own` (this tree pushed
    /// it), `rewritten` (refused, exit 7), `moved` or `deleted` (refused, exit 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["lease", "own", "rewritten", "moved", "deleted"]))]
    pub remote_state: Option<&'static str>,
    /// The earliest expiry of a JWT in the session URLs (RFC 3339), or `null`.
    pub url_expires_at: Option<String>,
    /// Git LFS objects `save` stored that the next push uploads first.
    pub lfs_pending: usize,
    /// The folders of a sparse checkout (`.git/info/sparse-checkout` in cone mode), or `null`.
    pub sparse: Option<Vec<String>>,
    /// The repository's object format: `sha1` (ids of 40 hex digits) or `sha256` (64).
    #[schemars(extend("enum" = ["sha1", "sha256"]))]
    pub object_format: &'static str,
    /// How commits are signed (`SIGNING_*`) and whether signatures are required.
    pub signing: Box<SigningState>,
}

/// `status`'s signing state: what signs commits, with which key, and what a push with
/// `SIGNING_REQUIRED=1` would refuse. A set-up that cannot sign is shown here, not an error.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SigningState {
    /// What signs commits: `none`, `key_file` (`SIGNING_KEY_FILE`), `service` (`SIGNING_URL` or
    /// `SIGNING_URL_FILE`), or `invalid` (the variables make no set-up: `problem` says why).
    #[schemars(extend("enum" = ["none", "key_file", "service", "invalid"]))]
    pub source: &'static str,
    /// The key file's path (with `key_file`), else `null`.
    pub key_file: Option<String>,
    /// The signing service's URL without its credentials or query (with `service`), else `null`.
    pub url: Option<String>,
    /// The key's type as `ssh-keygen -l` names it (`ED25519`, `ECDSA`, `RSA`): the key file's,
    /// or `SIGNING_PUBLIC_KEY`'s with a service; `null` when there is none or it cannot be read.
    pub key_type: Option<&'static str>,
    /// The key's fingerprint as `ssh-keygen -l` prints it (`SHA256:…`), or `null`.
    pub fingerprint: Option<String>,
    /// Why commits cannot be signed or checked (the key file cannot be read as a key, the
    /// variables make no set-up): what `save` would exit 11 (or 2) with; `null` when they can.
    pub problem: Option<String>,
    /// Whether `SIGNING_REQUIRED=1` is in effect: `save`, `push` and plain `git push` refuse
    /// commits that are not signed by the key.
    pub required: bool,
    /// With `required`: how many commits of the session branch since the lease a push would
    /// refuse (unsigned, signed by another key, not verifying); `null` otherwise or when they
    /// cannot be checked (`problem`).
    pub unsigned: Option<usize>,
}

/// A command's failure (exit 1–11).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("unevaluatedProperties" = false))]
pub struct Failed {
    /// Always `false`.
    #[schemars(extend("const" = false))]
    pub ok: bool,
    /// `watch --all`: the work tree, absolute, of the session this line is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// The command that failed (empty when the command line named none).
    pub command: String,
    /// The process's exit code.
    #[schemars(range(min = 1, max = 11))]
    pub exit_code: u8,
    /// What failed.
    pub error: ErrorReport,
    /// What the user should know besides.
    pub warnings: Vec<String>,
    /// Who owns the session (`{}` when unset or refused).
    pub owner: Owner,
    /// For `stale` (exit 3): the lease this tree holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<FullSha>,
    /// For `stale` (exit 3): the remote tip another sandbox left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_tip: Option<FullSha>,
}

/// The error of a [`Failed`].
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorReport {
    /// The kind, one per exit code: internal 1, usage 2, stale 3, auth 4, network 5,
    /// integrity 6, conflict 7, not_found 8, rejected 9, io 10, signing 11.
    #[schemars(extend("enum" = ["internal", "usage", "stale", "auth", "network", "integrity", "conflict", "not_found", "rejected", "io", "signing"]))]
    pub kind: &'static str,
    /// What happened and what to do, for a person.
    pub message: String,
}

/// `restore` of a sessions manifest (`GIT_SESSION_SESSIONS_FILE`), or `save`, `push`, `status`
/// with `--all`: one result per session.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(extend("unevaluatedProperties" = false))]
pub struct SessionsRestored {
    /// `true` when every session succeeded.
    pub ok: bool,
    /// The command run in each session.
    #[schemars(extend("enum" = ["restore", "save", "push", "status"]))]
    pub command: &'static str,
    /// The process's exit code: 0 when every session succeeded, else the exit code of the
    /// first session that failed, in the manifest's order.
    #[schemars(range(max = 11))]
    pub exit_code: u8,
    /// Each session's result, in the manifest's order.
    pub sessions: Vec<SessionRestored>,
    /// What the user should know of the run as a whole.
    pub warnings: Vec<String>,
    /// Who owns the sessions, as `GIT_SESSION_SANDBOX`, `_AGENT`, `_PERSON` set it.
    pub owner: Owner,
}

/// One session of a [`SessionsRestored`].
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionRestored {
    /// Its work tree, absolute.
    pub dir: String,
    /// Whether the command succeeded in it (a restore: restored, or already held).
    pub ok: bool,
    /// What the single command in it would have exited with (0: success).
    #[schemars(range(max = 11))]
    pub exit_code: u8,
    /// The session branch (without `refs/heads/`).
    pub branch: String,
    /// On failure: the kind, as `error.kind` of a failed command names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["internal", "usage", "stale", "auth", "network", "integrity", "conflict", "not_found", "rejected", "io", "signing"]))]
    pub kind: Option<&'static str>,
    /// On failure: what happened and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For `stale` (exit 3): the lease this tree holds (as a failed command's `lease`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_lease: Option<FullSha>,
    /// For `stale` (exit 3): the remote tip another sandbox left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_remote_tip: Option<FullSha>,
    /// On success: what the single command's `--json` reports (restore: `tip`, `lease`, `noop`,
    /// …; save and push: `committed`, `pushed`, `tip`, …; status: `lease`, `head`, `ahead`, …).
    #[serde(flatten)]
    pub restored: Option<SessionFields>,
    /// What the user should know of this session.
    pub warnings: Vec<String>,
}

/// A session's own fields in a [`SessionRestored`]: the single command's.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SessionFields {
    /// `restore`.
    Restore(Restored),
    /// `save` or `push`.
    Pushed(Pushed),
    /// `status`.
    Status(Box<Status>),
}

/// Any one `--json` object.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
#[schemars(title = "git-session --json output")]
pub enum Output {
    /// Exit 0.
    Succeeded(Succeeded),
    /// Exit 1–11.
    Failed(Failed),
    /// `restore` of a sessions manifest, or `save`/`push`/`status --all`, whatever its exit code.
    Sessions(SessionsRestored),
}

/// The JSON Schema (draft 2020-12) of every `--json` object, pretty-printed.
pub fn schema() -> String {
    let schema = schemars::schema_for!(Output);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

/// [`schema`], its `$defs` also holding `T` (the sessions manifest `restore` reads, which lives
/// above this module).
pub fn schema_with<T: JsonSchema>() -> String {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let _ = generator.subschema_for::<T>();
    let schema = generator.into_root_schema_for::<Output>();
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_every_kind_of_the_table_and_its_codes() {
        let schema: serde_json::Value = serde_json::from_str(&schema()).unwrap();
        let defs = &schema["$defs"];
        let kinds: Vec<&str> = crate::error::exit_table()
            .iter()
            .skip(1)
            .map(|r| r.kind)
            .collect();
        let report = &defs["ErrorReport"]["properties"]["kind"];
        assert_eq!(report["enum"], serde_json::json!(kinds));
        let description = report["description"].as_str().unwrap().replace('\n', " ");
        for row in crate::error::exit_table().iter().skip(1) {
            let pair = format!("{} {}", row.kind, row.code);
            assert!(description.contains(&pair), "{pair} in {description}");
        }
        let code = &defs["Failed"]["properties"]["exit_code"];
        assert_eq!(
            (code["minimum"].as_u64(), code["maximum"].as_u64()),
            (Some(1), Some(11))
        );
    }
}

/// One path that `save` would commit, for `status`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PendingChange {
    /// `M` modified, `A` added, `D` deleted (relative to `HEAD`), as `git status --short` spells them.
    #[schemars(extend("enum" = ["M", "A", "D"]))]
    pub status: &'static str,
    /// The path, `/`-separated.
    pub path: String,
}
