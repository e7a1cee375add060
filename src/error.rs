//! The one error type of git-session, its rendering and its mapping to the exit codes of the
//! SPEC's table.
//!
//! Every failure that reaches `main` is an [`Error`]. Variants that callers decide on carry
//! fields ([`Stale`], [`Auth`], [`Conflict`], [`LocalIo`]); every message is rendered from them
//! here, in [`Error`]'s `Display`, and no caller reads message text to decide. [`Error::exit_code`]
//! and [`Error::kind`] are exhaustive matches, so a new variant does not compile until it has a
//! code and a JSON `kind`.

use std::fmt;

use crate::hint::Hint;
use crate::types::{FullSha, SessionBranch};

/// A failure of a command: what happened and what to do.
///
/// # Security
/// Messages are built from redacted values only: URLs are shown through
/// [`RemoteUrl`](crate::types::RemoteUrl)'s `Display`, which never shows userinfo; text from the
/// remote goes through [`crate::redact`] before it is shown.
#[derive(Debug)]
pub enum Error {
    /// Exit 2, `usage`: input refused before anything was done, for one of the [`Refusal`]s.
    Usage(Refusal, String),
    /// Exit 3, `stale`: the session branch on the remote is not at the lease.
    Stale(Box<Stale>),
    /// Exit 4, `auth`: credentials refused (HTTP 401/403).
    Auth(Box<Auth>),
    /// Exit 5, `network`: the remote is unreachable or unusable after bounded retries
    /// (also TLS failures and servers without protocol v2). Retried.
    Network(String),
    /// Exit 5, `network`: the remote answered something that breaks the protocol (not retried).
    Protocol(String),
    /// Exit 6, `integrity`: wrong object, unsafe tree entry, corrupt or truncated stream.
    Integrity(String),
    /// Exit 7, `conflict`: other content or uncommitted work in the way.
    Conflict(Conflict),
    /// Exit 8, `not_found`: the commit or the repository does not exist on the remote.
    NotFound(String),
    /// Exit 9, `rejected`: the remote refused the update for its own reasons.
    Rejected(String),
    /// Exit 10, `io`: the local file system refused (no space left, a read-only file system,
    /// permission denied).
    LocalIo(LocalIo),
    /// Exit 11, `signing`: signing was asked for and could not be done (a key that cannot sign,
    /// a signature that does not verify), for one of the [`SigningCause`]s.
    Signing(Box<Signing>),
    /// Exit 1, `internal`: an unexpected failure (a bug in git-session); a local fault is
    /// [`Error::LocalIo`] (10) or [`Error::Conflict`] (7).
    Internal(String),
    /// Another error with a sentence about what became of local work added; its code and kind.
    Noted {
        /// The error.
        error: Box<Error>,
        /// The sentence added.
        note: String,
    },
}

/// Why input was refused (exit 2). Each cause is a phrase of the exit-code table
/// ([`exit_table`]), which README, CONTRACT and the man pages print: a new cause is listed there
/// or the table test fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A required variable or flag is not set.
    Missing,
    /// A value is malformed: an abbreviated or invalid SHA, a bad branch name, URL, date or
    /// duration, an empty message, an owner value with a line break, an unknown argument.
    Invalid,
    /// A URL with credentials on the command line, where every process would see it.
    CredentialsOnArgv,
    /// `-C` or `SESSION_DIR` does not name a session's folder: not a directory, gone, not
    /// restored by git-session, a baked template, a linked work tree.
    NotASessionFolder,
    /// The tree belongs to another session branch.
    AnotherSession,
    /// Something this build does not support: a record of a newer git-session, a submodule of
    /// another object format than its superproject.
    Unsupported,
    /// Run as root where another user could redirect the write.
    UnsafeAsRoot,
}

impl Refusal {
    /// Every cause, in the table's order.
    pub const ALL: [Refusal; 7] = [
        Refusal::Missing,
        Refusal::Invalid,
        Refusal::CredentialsOnArgv,
        Refusal::NotASessionFolder,
        Refusal::AnotherSession,
        Refusal::Unsupported,
        Refusal::UnsafeAsRoot,
    ];

    /// The cause as the exit-code table lists it.
    pub fn phrase(self) -> &'static str {
        match self {
            Refusal::Missing => "a missing variable or flag",
            Refusal::Invalid => {
                "a malformed value (an abbreviated SHA, a 40-hex id for a SHA-256 repository \
                 included, a bad branch name, URL, date or duration, an owner value with a line break, a commit message with a control character \
                 other than a line break or tab, a URL whose user name or password decodes to a \
                 line break or NUL)"
            }
            Refusal::CredentialsOnArgv => "credentials on argv",
            Refusal::NotASessionFolder => {
                "a -C or SESSION_DIR that is not a session's folder (not a directory, not restored \
                 by git-session, a template, a linked work tree no agent add made)"
            }
            Refusal::AnotherSession => {
                "another session's tree, or a push to a branch another session of the repository \
                 holds (an agent's, the main session's)"
            }
            Refusal::Unsupported => {
                "a newer git-session's record, a submodule of another object format than its \
                 superproject, an agent of a sparse tree or of one with submodules (not yet)"
            }
            Refusal::UnsafeAsRoot => {
                "run as root below a folder another user could change, through a path being \
                 swapped, or to create a target in a folder others can write to"
            }
        }
    }
}

/// One row of the exit-code table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitRow {
    /// The process exit code.
    pub code: u8,
    /// The JSON `error.kind` (empty for 0).
    pub kind: &'static str,
    /// What it means and what to do.
    pub meaning: String,
}

/// The exit-code table: README, CONTRACT, every man page's EXIT STATUS and the schema's `kind`
/// say exactly this (a test compares them).
pub fn exit_table() -> Vec<ExitRow> {
    let usage = Refusal::ALL.map(Refusal::phrase).join(", ");
    [
        (
            0,
            "",
            "success, including \"nothing to commit\" and an idempotent no-op".to_owned(),
        ),
        (
            1,
            "internal",
            "unexpected internal error (a panic exits 1 too)".to_owned(),
        ),
        (2, "usage", format!("invalid input, nothing done: {usage}")),
        (
            3,
            "stale",
            "the session branch is not at the lease: another sandbox owns the session; stop"
                .to_owned(),
        ),
        (
            4,
            "auth",
            "credentials refused (an expired or under-scoped URL): mint a new URL".to_owned(),
        ),
        (
            5,
            "network",
            "remote unavailable after bounded retries, TLS failure, a server that cannot serve the \
             request (a commit no ref tips, over v0/v1): retry later, or see Servers"
                .to_owned(),
        ),
        (
            6,
            "integrity",
            "wrong object, unsafe entry, corrupt or truncated stream, a token in what would be \
             committed"
                .to_owned(),
        ),
        (
            7,
            "conflict",
            "local content in the way (a symlink, FIFO or oversized file in place of a record \
             git-session wrote among it; `HEAD`, `objects/` or `refs/` gone from the git dir), a \
             merge in progress, a locked index, history not \
             descending from the lease, unpushed work in an agent's tree to remove"
                .to_owned(),
        ),
        (
            8,
            "not_found",
            "the commit or the repository does not exist on the remote".to_owned(),
        ),
        (
            9,
            "rejected",
            "the remote refused the update (a hook declined, a protected branch)".to_owned(),
        ),
        (
            10,
            "io",
            "the local file system refused (no space, read-only): fix it and rerun; restore \
             completes"
                .to_owned(),
        ),
        (
            11,
            "signing",
            "signing was asked for and could not be done: nothing was committed (fix the key or \
             the service)"
                .to_owned(),
        ),
    ]
    .into_iter()
    .map(|(code, kind, meaning)| ExitRow {
        code,
        kind,
        meaning,
    })
    .collect()
}

/// A stale write (SPEC rule 3): the remote branch is not at the lease, nor at this tree's own
/// commit.
#[derive(Debug)]
pub struct Stale {
    /// The session branch.
    pub branch: SessionBranch,
    /// The recorded tip this sandbox expected on the remote (zero id: absent).
    pub lease: FullSha,
    /// The tip the remote has now (zero id: absent).
    pub remote_tip: FullSha,
    /// What became of local work, completing "the remote branch was not changed; …".
    pub local: String,
    /// Where the work is, for the commands that go on from the remote tip.
    pub work: LocalWork,
    /// The server's own words, when its compare-and-swap refused (an `ng` reason).
    pub remote_says: Option<String>,
}

/// This tree's work, for the way on after a stale write: the commits `base..head` of `workdir`.
#[derive(Debug)]
pub struct LocalWork {
    /// The work tree.
    pub workdir: std::path::PathBuf,
    /// The commit local work starts from: the lease, or `TIP_SHA` for a new session.
    pub base: FullSha,
    /// The local commit the push was for.
    pub head: FullSha,
}

/// Why credentials were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthCause {
    /// The URL carries none, and the remote requires them.
    NoCredentials,
    /// Refused (401) or not enough (403).
    Refused,
    /// Refused after earlier requests of this process succeeded: the URL expired meanwhile.
    RefusedAfterSuccess,
}

/// Credentials refused by the remote (exit 4).
#[derive(Debug)]
pub struct Auth {
    /// The credential-free URL.
    pub url: String,
    /// The HTTP status: 401 or 403.
    pub status: u16,
    /// Why.
    pub cause: AuthCause,
    /// When the URL's token (a JWT) expires or expired, Unix seconds.
    pub expires_at: Option<u64>,
    /// The write URL (`PUSH_URL`) was refused, not the read URL.
    pub write: bool,
}

/// A local conflict (exit 7): the problem, and whether it is one `save` refuses until the user
/// acts (then the message ends by saying to save again; `status` shows the problem alone).
#[derive(Debug)]
pub struct Conflict {
    /// What is in the way and how to clear it.
    pub problem: String,
    /// A refusal of `save`: nothing was committed, save again once cleared.
    pub save_again: bool,
}

/// A refusal of the local file system (exit 10).
#[derive(Debug)]
pub struct LocalIo {
    /// What was being done, naming the path.
    pub context: String,
    /// The system's words, with their causes.
    pub cause: String,
    /// The kind, which decides what to do.
    pub kind: std::io::ErrorKind,
}

/// Why signing could not be done (exit 11). The key's bytes are never part of an error: what is
/// shown is the cause, the variable, the file's path and words chosen here or by the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningCause {
    /// The key file does not exist.
    KeyMissing,
    /// The key file is empty (0 bytes, or only white space).
    KeyEmpty,
    /// The key file cannot be read: permission denied, a folder or a device in its place.
    KeyUnreadable,
    /// The key is protected by a passphrase.
    KeyEncrypted,
    /// A key type or a key format git-session does not sign with (DSA, ECDSA P-384 or P-521, a
    /// security key, a PEM or PKCS#8 private key).
    KeyUnsupported,
    /// A public key (or certificate) where the private key belongs.
    KeyIsPublic,
    /// Not a key at all, or an OpenSSH private key that does not decode (truncated, corrupt).
    KeyMalformed,
    /// The public key to verify against is not an OpenSSH public key.
    PublicKeyMalformed,
    /// The signature is not an armored SSH signature.
    SignatureMalformed,
    /// The signature was made by another key than the one expected.
    SignatureByAnotherKey,
    /// The signature does not verify: other bytes, another namespace, altered.
    SignatureInvalid,
    /// The key could not make a signature.
    SignFailed,
    /// `SIGNING_KEY_FILE` and a signing service both given: which one signs is not clear.
    TwoSources,
    /// A signing service without `SIGNING_PUBLIC_KEY`, which its answers are checked against.
    PublicKeyMissing,
    /// `SIGNING_REQUIRED=1` with neither a key file nor a service to check signatures against.
    NothingToCheckAgainst,
    /// The signing service failed: unreachable, an HTTP error, a stall, an answer too big.
    ServiceFailed,
    /// git asked git-session to sign with another key than the one signing is set up with
    /// (`user.signingKey` not the key of `SIGNING_KEY_FILE` or `SIGNING_PUBLIC_KEY`).
    OtherKeyAsked,
    /// `SIGNING_REQUIRED=1` and commits to upload that are unsigned, signed by another key, or
    /// whose signature does not verify (or too many, or too big, to check): nothing is uploaded.
    UnsignedCommits,
}

/// A signing failure (exit 11).
#[derive(Debug)]
pub struct Signing {
    /// Why.
    pub cause: SigningCause,
    /// The variable that set signing up (`SIGNING_KEY_FILE`, `SIGNING_PUBLIC_KEY`…).
    pub variable: &'static str,
    /// The file the variable names, when it names one.
    pub path: Option<std::path::PathBuf>,
    /// The particulars (a key type, the system's or the parser's words), never key material.
    pub detail: String,
}

impl fmt::Display for Signing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let var = self.variable;
        let source = match &self.path {
            Some(p) => format!(
                "{var} ({})",
                crate::text::line_str(&p.display().to_string())
            ),
            None => var.to_owned(),
        };
        let detail = crate::text::line_str(&self.detail);
        match self.cause {
            SigningCause::KeyMissing => write!(
                f,
                "{source} does not exist: it must name the OpenSSH private key to sign with"
            ),
            SigningCause::KeyEmpty => write!(
                f,
                "{source} is empty: it must hold the OpenSSH private key to sign with (was the \
                 key written into it?)"
            ),
            SigningCause::KeyUnreadable => write!(f, "cannot read {source}: {detail}"),
            SigningCause::KeyEncrypted => write!(
                f,
                "{source} holds a passphrase-protected key: git-session signs with unencrypted \
                 keys only (give it the key without a passphrase, or use a signing service)"
            ),
            SigningCause::KeyUnsupported => write!(
                f,
                "{source} holds {detail}, which git-session does not sign with: give it an \
                 Ed25519, ECDSA P-256 or RSA (2048 bits or more) private key in OpenSSH \
                 format"
            ),
            SigningCause::KeyIsPublic => write!(
                f,
                "{source} holds a public key ({detail}), not the private key: it must name the \
                 private key's file"
            ),
            SigningCause::KeyMalformed => write!(
                f,
                "{source} does not hold an OpenSSH private key ({detail})"
            ),
            SigningCause::PublicKeyMalformed => write!(
                f,
                "{source} is not an OpenSSH public key (\"ssh-ed25519 AAAA…\"): {detail}"
            ),
            SigningCause::SignatureMalformed => write!(
                f,
                "the signature to check against {source} is not an SSH signature: {detail}"
            ),
            SigningCause::SignatureByAnotherKey => write!(
                f,
                "the signature was made by another key ({detail}) than {source}'s"
            ),
            SigningCause::SignatureInvalid => write!(
                f,
                "the signature does not verify against {source}: {detail}"
            ),
            SigningCause::SignFailed => write!(f, "the key of {source} could not sign: {detail}"),
            SigningCause::TwoSources => write!(
                f,
                "SIGNING_KEY_FILE and SIGNING_URL (or SIGNING_URL_FILE) are both set: set one, \
                 the key file or the signing service"
            ),
            SigningCause::PublicKeyMissing => write!(
                f,
                "a signing service (SIGNING_URL or SIGNING_URL_FILE) needs {source}, the public \
                 key its signatures are checked against: set it to the service key's one-line \
                 OpenSSH form"
            ),
            SigningCause::NothingToCheckAgainst => write!(
                f,
                "{source}=1 needs the key signatures are checked against: set SIGNING_KEY_FILE, \
                 or SIGNING_URL with SIGNING_PUBLIC_KEY"
            ),
            SigningCause::ServiceFailed => write!(f, "the signing service ({source}) {detail}"),
            SigningCause::OtherKeyAsked => write!(
                f,
                "{source} is another key than the one git asks to sign with: {detail}; a restore \
                 with SIGNING_* set writes user.signingKey afresh"
            ),
            SigningCause::UnsignedCommits => write!(f, "{source}=1: {detail}"),
        }
    }
}

/// The tail of a refusal of `save` ([`Conflict::save_again`]).
const SAVE_AGAIN: &str = ", then save again; nothing was committed";

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(_, m)
            | Error::Network(m)
            | Error::Protocol(m)
            | Error::Integrity(m)
            | Error::NotFound(m)
            | Error::Rejected(m)
            | Error::Internal(m) => f.write_str(m),
            Error::Stale(s) => s.fmt(f),
            Error::Auth(a) => a.fmt(f),
            Error::Signing(s) => s.fmt(f),
            Error::Conflict(c) => {
                f.write_str(&c.problem)?;
                if c.save_again {
                    f.write_str(SAVE_AGAIN)?;
                }
                Ok(())
            }
            Error::LocalIo(l) => write!(
                f,
                "{}: {} — {}",
                l.context,
                l.cause,
                local_io_hint(l.kind).unwrap_or(
                    "the system refused as it says (a failing disk, too many open files…): fix \
                     that, then run the command again"
                )
            ),
            Error::Noted { error, note } => write!(f, "{error}. {note}"),
        }
    }
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let branch = &self.branch;
        let now = if self.remote_tip.is_zero() {
            format!("the remote branch '{branch}' does not exist (it was deleted)")
        } else {
            format!("the remote branch '{branch}' is at {}", self.remote_tip)
        };
        let expected = if self.lease.is_zero() {
            "this sandbox expected to create it (its lease is the zero id)".to_owned()
        } else {
            format!("this sandbox's lease is {}", self.lease)
        };
        write!(
            f,
            "stale session: {now}, but {expected}; another sandbox owns the session now (or a \
             push from this tree went around git-session's check, e.g. git push --no-verify, \
             which does not count as this tree's) — the remote branch was not changed; {}. {}",
            self.local,
            self.go_on()
        )?;
        if let Some(says) = &self.remote_says {
            write!(f, " (remote: {says})")?;
        }
        Ok(())
    }
}

impl Stale {
    /// How to go on from the remote tip: restore it into a new folder (beside this tree, named
    /// after the tip), replay this tree's commits there — a fetch from this shallow tree would
    /// be refused — and save there.
    fn go_on(&self) -> String {
        let work = &self.work;
        // The branch deleted: the session starts again from where this tree's work starts.
        let tip = if self.remote_tip.is_zero() {
            work.base
        } else {
            self.remote_tip
        };
        let mut name = work.workdir.file_name().unwrap_or_default().to_owned();
        name.push(format!("-{}", &tip.to_string()[..12]));
        let dir = work.workdir.with_file_name(name);
        let restore = Hint::RestoreAt {
            dir: dir.clone(),
            branch: self.branch.clone(),
            tip,
            submodules: false,
        };
        let save = Hint::SaveIn(dir.clone());
        if work.head == work.base {
            return format!(
                "To go on, restore the session's current tip into a new folder (with READ_URL and \
                 PUSH_URL as for this tree): {restore}, then work and save there: {save}"
            );
        }
        let bring = Hint::BringCommitsOver {
            base: work.base,
            head: work.head,
            dir,
        };
        format!(
            "To go on, restore the session's current tip into a new folder (with READ_URL and \
             PUSH_URL as for this tree): {restore}; bring this tree's commits over: {bring}; then \
             save there: {save}"
        )
    }
}

impl fmt::Display for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = &self.url;
        let status = self.status;
        let expiry = self.expires_at.map(expiry_phrase).unwrap_or_default();
        match (self.write, self.cause) {
            (_, AuthCause::NoCredentials) => write!(
                f,
                "{}credentials rejected by {url} (HTTP {status}): the URL carries no \
                 credentials; the remote requires them",
                if self.write {
                    "the write URL was refused: "
                } else {
                    ""
                }
            ),
            (true, _) => write!(
                f,
                "the write URL was refused — it may have expired; mint a new one{expiry} (HTTP \
                 {status} from {url})"
            ),
            (false, AuthCause::RefusedAfterSuccess) => write!(
                f,
                "credentials rejected by {url} (HTTP {status}) after earlier requests succeeded: \
                 the URL has likely expired and must be re-minted{expiry}"
            ),
            (false, _) if status == 403 => write!(
                f,
                "access denied by {url} (HTTP 403): the URL lacks the permission for this \
                 operation, or has expired{expiry}"
            ),
            (false, _) => write!(
                f,
                "credentials rejected by {url} (HTTP {status}) — the URL may have expired; mint \
                 a new one{expiry}"
            ),
        }
    }
}

/// " — its token expired at …" or " — its token expires at …" for a JWT `exp` in Unix seconds.
pub fn expiry_phrase(exp: u64) -> String {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(exp);
    let stamp = humantime::format_rfc3339_seconds(when);
    if when <= std::time::SystemTime::now() {
        format!(" — its token expired at {stamp}")
    } else {
        format!(" — its token expires at {stamp}")
    }
}

impl std::error::Error for Error {}

/// The result type of git-session's fallible operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error below any notes.
    pub fn root(&self) -> &Error {
        match self {
            Error::Noted { error, .. } => error.root(),
            other => other,
        }
    }

    /// The process exit code of the SPEC's table (`1`–`11`).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Internal(_) => 1,
            Error::Usage(..) => 2,
            Error::Stale(_) => 3,
            Error::Auth(_) => 4,
            Error::Network(_) | Error::Protocol(_) => 5,
            Error::Integrity(_) => 6,
            Error::Conflict(_) => 7,
            Error::NotFound(_) => 8,
            Error::Rejected(_) => 9,
            Error::LocalIo(_) => 10,
            Error::Signing(_) => 11,
            Error::Noted { error, .. } => error.exit_code(),
        }
    }

    /// The `error.kind` of the JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Internal(_) => "internal",
            Error::Usage(..) => "usage",
            Error::Stale(_) => "stale",
            Error::Auth(_) => "auth",
            Error::Network(_) | Error::Protocol(_) => "network",
            Error::Integrity(_) => "integrity",
            Error::Conflict(_) => "conflict",
            Error::NotFound(_) => "not_found",
            Error::Rejected(_) => "rejected",
            Error::LocalIo(_) => "io",
            Error::Signing(_) => "signing",
            Error::Noted { error, .. } => error.kind(),
        }
    }

    /// Whether a retry of the same request may succeed (connect errors, resets, timeouts, 5xx, 429).
    pub fn is_transient(&self) -> bool {
        matches!(self.root(), Error::Network(_))
    }

    /// A conflict (exit 7) that is not a refusal of `save`.
    pub fn conflict(problem: impl Into<String>) -> Self {
        Error::Conflict(Conflict {
            problem: problem.into(),
            save_again: false,
        })
    }

    /// A refusal of `save` (exit 7) the user can clear: the message ends "then save again;
    /// nothing was committed".
    pub fn save_refused(problem: impl Into<String>) -> Self {
        Error::Conflict(Conflict {
            problem: problem.into(),
            save_again: true,
        })
    }

    /// The same error with `note` added as a new sentence (what became of local work, say); the
    /// kind and the exit code stay.
    pub fn with_note(self, note: &str) -> Self {
        Error::Noted {
            error: Box::new(self),
            note: note.to_owned(),
        }
    }

    /// A local I/O failure, naming what was being done: [`Error::LocalIo`] (exit 10, with what to
    /// do) when the system refused — no space, a quota, a read-only file system, permission
    /// denied, a folder in the way, any error number the kernel gave — else [`Error::Internal`]
    /// (only what a wrong call gets: a bug).
    pub fn io(context: impl fmt::Display, err: std::io::Error) -> Self {
        if is_local_fault(&err) {
            Error::LocalIo(LocalIo {
                context: context.to_string(),
                cause: err.to_string(),
                kind: err.kind(),
            })
        } else {
            Error::Internal(format!("{context}: {err}"))
        }
    }

    /// Like [`Error::internal`], but [`Error::LocalIo`] when an [`std::io::Error`] the file system
    /// refused (see [`Error::io`]) is among the causes of `err` (gix and gix-pack wrap them).
    pub fn from_chain(context: impl fmt::Display, err: &(dyn std::error::Error + 'static)) -> Self {
        let text = chain(err);
        match local_io_error(err).filter(|e| is_local_fault(e)) {
            Some(io) => Error::LocalIo(LocalIo {
                context: context.to_string(),
                cause: text,
                kind: io.kind(),
            }),
            None => Error::Internal(format!("{context}: {text}")),
        }
    }

    /// A signing failure (exit 11) of `cause`, set up by `variable`, about the file `path`.
    pub fn signing(
        cause: SigningCause,
        variable: &'static str,
        path: Option<&std::path::Path>,
        detail: impl Into<String>,
    ) -> Self {
        Error::Signing(Box::new(Signing {
            cause,
            variable,
            path: path.map(std::path::Path::to_path_buf),
            detail: detail.into(),
        }))
    }

    /// An internal error wrapping any lower-level error with context.
    pub fn internal(context: impl fmt::Display, err: impl fmt::Display) -> Self {
        Error::Internal(format!("{context}: {err}"))
    }
}

/// Render an error with its sources, like `a: b: c`.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    msg
}

/// The kind of the first [`std::io::Error`] among `err` and its causes.
pub fn local_io_kind(err: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    local_io_error(err).map(std::io::Error::kind)
}

/// The first [`std::io::Error`] among `err` and its causes.
fn local_io_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        // gix's own error keeps its causes in a tree that `source()` does not walk.
        if let Some(io) = e
            .downcast_ref::<gix::Error>()
            .and_then(|g| g.downcast_any_ref::<std::io::Error>())
        {
            return Some(io);
        }
        next = e.source();
    }
    None
}

/// Whether `err` is the local system refusing (exit 10), not a bug of ours: a kind with a hint,
/// or any error number the kernel gave (EIO, EMFILE, ELOOP…), but those that only a wrong call
/// gets (EINVAL, EINTR, EAGAIN).
fn is_local_fault(err: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    local_io_hint(err.kind()).is_some()
        || (err.raw_os_error().is_some()
            && !matches!(err.kind(), K::InvalidInput | K::Interrupted | K::WouldBlock))
}

/// What to do about a local file-system refusal of `kind`, or `None` when it is not one.
pub fn local_io_hint(kind: std::io::ErrorKind) -> Option<&'static str> {
    use std::io::ErrorKind as K;
    Some(match kind {
        K::StorageFull | K::QuotaExceeded | K::FileTooLarge => {
            "the disk is full: free some space, then run the command again (an interrupted restore \
             is completed by the rerun)"
        }
        K::ReadOnlyFilesystem => {
            "the file system is read-only: make it writable (or use another folder), then run the \
             command again"
        }
        K::NotADirectory => {
            "something that is not a folder stands on the path: remove it (or move it aside), then \
             run the command again"
        }
        K::PermissionDenied => {
            "permission denied: fix the folder's permissions (or run as its owner), then run the \
             command again"
        }
        K::IsADirectory => {
            "a folder stands where a file is expected: remove it (or move it aside), then run the \
             command again"
        }
        K::DirectoryNotEmpty | K::AlreadyExists => {
            "something is already on the path: move it aside, then run the command again"
        }
        K::NotFound => {
            "a file or folder on the path is gone (removed while the command ran?): check the \
             folder, then run the command again"
        }
        K::InvalidFilename => {
            "the file system cannot hold this name (too long, or a byte it refuses): use a \
             shorter path or another file system"
        }
        K::ResourceBusy | K::ExecutableFileBusy => {
            "the file is in use by another process: let it finish, then run the command again"
        }
        K::CrossesDevices => {
            "the path crosses file systems where git-session renames: keep the folder on one file \
             system"
        }
        K::StaleNetworkFileHandle => {
            "the network file system lost the file: mount it again, then run the command again"
        }
        _ => return None,
    })
}

/// The exit-code table as README and CONTRACT print it (Markdown).
pub fn exit_table_markdown() -> String {
    let mut out = String::from("| code | kind | meaning |\n| --- | --- | --- |\n");
    for row in exit_table() {
        let kind = if row.kind.is_empty() {
            " ".to_owned()
        } else {
            format!(" `{}` ", row.kind)
        };
        out.push_str(&format!("| {} |{kind}| {} |\n", row.code, row.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of every variant and every refusal. The match below fails to compile when a
    /// variant is added, until it is added here too.
    fn one_of_each() -> Vec<Error> {
        let m = || "m".to_owned();
        let stale = Stale {
            branch: "sessions/x".parse().unwrap(),
            lease: FullSha::zero(gix::hash::Kind::Sha1),
            remote_tip: FullSha::zero(gix::hash::Kind::Sha1),
            local: m(),
            work: LocalWork {
                workdir: "/w".into(),
                base: FullSha::zero(gix::hash::Kind::Sha1),
                head: FullSha::zero(gix::hash::Kind::Sha1),
            },
            remote_says: None,
        };
        let auth = Auth {
            url: m(),
            status: 401,
            cause: AuthCause::Refused,
            expires_at: None,
            write: false,
        };
        let mut all = vec![
            Error::Internal(m()),
            Error::Stale(Box::new(stale)),
            Error::Auth(Box::new(auth)),
            Error::Network(m()),
            Error::Protocol(m()),
            Error::Integrity(m()),
            Error::conflict(m()),
            Error::save_refused(m()),
            Error::NotFound(m()),
            Error::Rejected(m()),
            Error::io(m(), std::io::ErrorKind::StorageFull.into()),
            Error::Integrity(m()).with_note("n"),
            Error::signing(SigningCause::KeyEmpty, "V", None, m()),
        ];
        all.extend(Refusal::ALL.map(|r| Error::Usage(r, m())));
        for e in &all {
            match e {
                Error::Usage(..)
                | Error::Stale(_)
                | Error::Auth(_)
                | Error::Network(_)
                | Error::Protocol(_)
                | Error::Integrity(_)
                | Error::Conflict(_)
                | Error::NotFound(_)
                | Error::Rejected(_)
                | Error::LocalIo(_)
                | Error::Signing(_)
                | Error::Internal(_)
                | Error::Noted { .. } => {}
            }
        }
        all
    }

    #[test]
    fn every_error_a_command_can_give_is_a_row_of_the_table_and_every_doc_prints_it() {
        let table = exit_table();
        for e in one_of_each() {
            let row = table.iter().find(|r| r.code == e.exit_code());
            assert_eq!(row.map(|r| r.kind), Some(e.kind()), "{e:?}");
            if let Error::Usage(cause, _) = e {
                assert!(table[2].meaning.contains(cause.phrase()), "{cause:?}");
            }
        }
        let codes: Vec<u8> = table.iter().map(|r| r.code).collect();
        assert_eq!(codes, (0..=11).collect::<Vec<u8>>());
        let markdown = exit_table_markdown();
        for (doc, text) in [
            ("README.md", include_str!("../README.md")),
            ("docs/CONTRACT.md", include_str!("../docs/CONTRACT.md")),
        ] {
            assert!(
                text.contains(&markdown),
                "{doc}'s exit-code table is not the one git-session gives; it should be:\n{markdown}"
            );
        }
    }
}
