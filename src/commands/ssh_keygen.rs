//! git-session as git's `ssh-keygen`: restore sets `gpg.ssh.program` to this binary when signing
//! is set up, so plain `git commit` (`--amend`, `rebase`, `merge`, `cherry-pick`) signs with the
//! key or service of `SIGNING_*` with no `ssh-keygen` or ssh-agent in the image.
//!
//! git runs `<program> -Y sign -n git -f <key> -U <payload>` (gpg-interface.c `sign_buffer_ssh`;
//! `-U` because `user.signingKey` is `key::…`, which git writes to a temporary file) and reads the
//! signature from `<payload>.sig`; a failure shows our stderr as `error: …` and makes no commit.
//! Signing comes from the environment's `SIGNING_*`, else from the session record (restore's
//! set-up: git's environment, an agent's shell, may lack `SIGNING_*`). To check signatures git
//! runs `-Y find-principals`, `-Y verify` (an allowed-signers file, whose rules git-session does
//! not reimplement) and `-Y check-novalidate`: those go to `ssh-keygen` on `PATH`; without one,
//! git-session answers `check-novalidate` itself and says what the others need.
//!
//! # Security
//! The key is read from its file at each signature and never written anywhere; only
//! `<payload>.sig` is written. Messages go through `redact::Stderr`.

use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result, SigningCause};
use crate::inputs::UrlSource;
use crate::repo::layout::GitSigning;
use crate::repo::session::{SessionRecord, SigningRecord};
use crate::signing::{NAMESPACE, PublicKey, SignatureSource, SigningKey, SigningSetup};

/// The most git-session signs at once: the largest commit it accepts, the one `SIGNING_REQUIRED`'s
/// check reads ([`crate::repo::signed::MAX_COMMIT_BYTES`], 1 MiB). git signs a commit's (or a
/// tag's) headers and message, a few KiB; a larger one could not be pushed where signatures are
/// required. The payload is read whole (hashed, or sent to a signing service), so it is bounded.
pub const MAX_PAYLOAD: u64 = crate::repo::signed::MAX_COMMIT_BYTES;

/// Whether `args` (argv without the program) is git running its `ssh-keygen`: `-Y <operation>`.
pub fn is_call(args: &[OsString]) -> bool {
    args.first().is_some_and(|a| a == "-Y")
}

/// Answer git's `ssh-keygen -Y …` call `args`; the process's exit code.
pub fn run(args: &[OsString]) -> u8 {
    crate::redact::learn_environment();
    let call = match Call::parse(args) {
        Ok(call) => call,
        Err(err) => {
            crate::redact::Stderr::line(&format!("git-session (as ssh-keygen): {err}"));
            return err.exit_code();
        }
    };
    let result = match call.operation.as_str() {
        "sign" => sign(&call).map(|()| 0),
        op => match real_ssh_keygen() {
            Some(program) => Err(exec(&program, args)),
            None if op == "check-novalidate" => check_novalidate(&call).map(|()| 0),
            None => Err(Error::Usage(
                Refusal::Missing,
                "checking a signature against an allowed-signers file \
                 (gpg.ssh.allowedSignersFile) needs OpenSSH's ssh-keygen, which is not on PATH: \
                 git-session signs without it, but leaves allowed-signers files to it (install \
                 openssh-client to verify here)"
                    .to_owned(),
            )),
        },
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            let what = if call.operation == "sign" {
                "could not sign".to_owned()
            } else {
                format!("(as ssh-keygen -Y {})", call.operation)
            };
            crate::redact::Stderr::line(&format!("git-session {what}: {err}"));
            err.exit_code()
        }
    }
}

/// An `ssh-keygen -Y` command line, as git writes them.
#[derive(Debug, Default)]
struct Call {
    /// `-Y`: `sign`, `check-novalidate`, `find-principals`, `verify`…
    operation: String,
    /// `-n`: the namespace (`git`).
    namespace: Option<String>,
    /// `-f`: the key (`sign`), the allowed-signers file (`verify`, `find-principals`).
    key_file: Option<PathBuf>,
    /// `-U`: the `-f` file holds a public key (git's `key::` signing key).
    public_key_file: bool,
    /// `-s`: the signature to check.
    signature: Option<PathBuf>,
    /// The files to sign.
    files: Vec<PathBuf>,
}

impl Call {
    /// Read argv as ssh-keygen's options: `-X value` or `-Xvalue`; empty arguments (git's unset
    /// `-Overify-time`) skipped.
    fn parse(args: &[OsString]) -> Result<Call> {
        use std::os::unix::ffi::OsStrExt as _;
        let mut call = Call::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let bytes = arg.as_bytes();
            if bytes.is_empty() {
                continue;
            }
            if bytes.len() < 2 || bytes[0] != b'-' {
                call.files.push(PathBuf::from(arg));
                continue;
            }
            let flag = bytes[1];
            if matches!(flag, b'U' | b'q' | b'v') && bytes.len() == 2 {
                call.public_key_file |= flag == b'U';
                continue;
            }
            if !matches!(flag, b'Y' | b'n' | b'f' | b's' | b'I' | b'O' | b'r') {
                return Err(Error::Usage(
                    Refusal::Invalid,
                    format!(
                        "the option {} is not one git passes to ssh-keygen",
                        crate::text::line(bytes)
                    ),
                ));
            }
            let value = if bytes.len() > 2 {
                OsStr::from_bytes(&bytes[2..]).to_owned()
            } else {
                args.next().cloned().ok_or_else(|| {
                    Error::Usage(
                        Refusal::Missing,
                        format!("the option -{} needs a value", flag as char),
                    )
                })?
            };
            let text = || value.to_string_lossy().into_owned();
            match flag {
                b'Y' => call.operation = text(),
                b'n' => call.namespace = Some(text()),
                b'f' => call.key_file = Some(PathBuf::from(&value)),
                b's' => call.signature = Some(PathBuf::from(&value)),
                // `-I`, `-O`, `-r` matter to the operations ssh-keygen answers.
                _ => {}
            }
        }
        Ok(call)
    }

    /// The namespace, which must be git's.
    fn git_namespace(&self) -> Result<()> {
        match self.namespace.as_deref() {
            Some(NAMESPACE) => Ok(()),
            other => Err(Error::Usage(
                Refusal::Invalid,
                format!(
                    "git-session signs and checks in the namespace \"{NAMESPACE}\" only (git's), \
                     not {}",
                    other.map_or("none (no -n)".to_owned(), |n| format!(
                        "\"{}\"",
                        crate::text::line_str(n)
                    ))
                ),
            )),
        }
    }
}

/// `-Y sign`: sign each file with the set-up's key or service, as the key git asks for, into
/// `<file>.sig`.
fn sign(call: &Call) -> Result<()> {
    call.git_namespace()?;
    let key_file = call
        .key_file
        .as_deref()
        .ok_or_else(|| Error::Usage(Refusal::Missing, "no key to sign with (-f)".to_owned()))?;
    if call.files.is_empty() {
        return Err(Error::Usage(
            Refusal::Missing,
            "no file to sign: git names the file holding the commit".to_owned(),
        ));
    }
    let asked = asked_key(key_file, call.public_key_file)?;
    let (setup, recorded) = setup_now()?;
    let noted = |err: Error| match &recorded {
        Some(git_dir) => Error::Noted {
            error: Box::new(err),
            note: format!(
                "git's environment has no SIGNING_*, so signing is set up as restore recorded it \
                 in {}",
                SessionRecord::path(git_dir).display()
            ),
        },
        None => err,
    };
    let (expected, variable, path) = public_of(&setup).map_err(noted)?;
    let (a, e) = (asked.describe(), expected.describe());
    if a.fingerprint != e.fingerprint {
        return Err(noted(Error::signing(
            SigningCause::OtherKeyAsked,
            variable,
            path,
            format!(
                "git asks for {} {} (user.signingKey), {variable} holds {} {}",
                a.key_type, a.fingerprint, e.key_type, e.fingerprint
            ),
        )));
    }
    let signer = super::sign::signer(&setup).ok_or_else(|| noted(not_set_up()))?;
    for file in &call.files {
        let payload = read_bounded(file, MAX_PAYLOAD, "the data to sign")?;
        let armored = signer.sign(&payload).map_err(noted)?;
        // What git puts in the commit is a signature by the key it asked for, whatever signed.
        asked.verify(&payload, armored.as_bytes())?;
        write_signature(file, armored.as_bytes())?;
    }
    Ok(())
}

/// The key git asks to sign with: the public key in `path` (`-U`: git's `key::` value), else
/// the public half of the private key there.
fn asked_key(path: &Path, public: bool) -> Result<PublicKey> {
    const NAME: &str = "user.signingKey";
    let bytes = read_bounded(
        path,
        crate::signing::MAX_KEY_FILE as u64,
        "the key git names",
    )?;
    let text = String::from_utf8_lossy(&bytes);
    match PublicKey::parse(&text, NAME) {
        Ok(key) => Ok(key),
        Err(err) if public => Err(err),
        Err(_) => Ok(SigningKey::from_file(path, NAME)?.public_key()),
    }
}

/// The key signatures are made with, the variable that names it and its file: the key file's
/// public half (the file read now: a broken key fails here), or `SIGNING_PUBLIC_KEY`.
fn public_of(setup: &SigningSetup) -> Result<(PublicKey, &'static str, Option<&Path>)> {
    match &setup.source {
        Some(SignatureSource::KeyFile(path)) => Ok((
            SigningKey::from_file(path, "SIGNING_KEY_FILE")?.public_key(),
            "SIGNING_KEY_FILE",
            Some(path),
        )),
        Some(SignatureSource::Service { public, .. }) => {
            Ok(((**public).clone(), "SIGNING_PUBLIC_KEY", None))
        }
        None => Err(not_set_up()),
    }
}

/// The signing set-up now: the environment's `SIGNING_*` when one names a source, else the
/// session record's (with the git dir it was read from).
fn setup_now() -> Result<(SigningSetup, Option<PathBuf>)> {
    if super::sign::source_in_environment() {
        return Ok((crate::signing::signing()?, None));
    }
    // git runs its signer in the work tree's top folder (`GIT_DIR` set in a linked work tree).
    let cwd = crate::inputs::current_dir()?;
    let git_dir = crate::repo::prepush::common_git_dir(&cwd);
    let record = SessionRecord::read(&git_dir)?
        .and_then(|r| r.signing)
        .ok_or_else(not_set_up)?;
    Ok((super::sign::setup_of(&record)?, Some(git_dir)))
}

/// Signing asked for where none is set up.
fn not_set_up() -> Error {
    Error::Usage(
        Refusal::Missing,
        "git asked git-session to sign, but signing is not set up here: neither SIGNING_KEY_FILE \
         nor a signing service (SIGNING_URL or SIGNING_URL_FILE with SIGNING_PUBLIC_KEY) is set, \
         and the session record names none (restore with them set)"
            .to_owned(),
    )
}

/// The content of the regular file at `path`, at most `cap` bytes.
fn read_bounded(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>> {
    let shown = || crate::text::line(path.as_os_str().as_encoded_bytes());
    let file = crate::fs::open_regular(path, true)
        .map_err(|e| Error::io(format!("reading {what} ({})", shown()), e))?;
    read_capped(file, cap, &format!("{what} ({})", shown()))
}

/// At most `cap` bytes from `from`; more is refused.
fn read_capped(from: impl std::io::Read, cap: u64, what: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    from.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(format!("reading {what}"), e))?;
    if bytes.len() as u64 > cap {
        return Err(Error::Usage(
            Refusal::Invalid,
            format!(
                "{what} is over {}, more than git-session signs or checks",
                if cap >= 1 << 20 {
                    format!("{} MiB", cap >> 20)
                } else {
                    format!("{cap} bytes")
                }
            ),
        ));
    }
    Ok(bytes)
}

/// Write `armored` to `<file>.sig`, where git reads it: mode 0644 as ssh-keygen writes it, in
/// place at once (a temporary file beside it renamed), nothing else left.
fn write_signature(file: &Path, armored: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let mut name = file.as_os_str().to_owned();
    name.push(".sig");
    let path = PathBuf::from(name);
    let shown = crate::text::line(path.as_os_str().as_encoded_bytes());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fail = |e: std::io::Error| Error::io(format!("writing the signature {shown}"), e);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(fail)?;
    tmp.write_all(armored)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(fail)?;
    tmp.persist(&path).map_err(|e| fail(e.error))?;
    Ok(())
}

/// `-Y check-novalidate` without `ssh-keygen`: the signature in `-s` checked over standard input
/// against the key it names, as ssh-keygen prints it (git shows the line).
fn check_novalidate(call: &Call) -> Result<()> {
    call.git_namespace()?;
    let path = call
        .signature
        .as_deref()
        .ok_or_else(|| Error::Usage(Refusal::Missing, "no signature to check (-s)".to_owned()))?;
    let armored = read_bounded(path, crate::signing::MAX_KEY_FILE as u64, "the signature")?;
    let payload = read_capped(std::io::stdin().lock(), MAX_PAYLOAD, "the signed data")?;
    let key = PublicKey::of_signature(&armored, "the signature's own key")?;
    key.verify(&payload, &armored)?;
    let d = key.describe();
    crate::output::stdout::line(&format!(
        "Good \"{NAMESPACE}\" signature with {} key {}",
        d.key_type, d.fingerprint
    ));
    Ok(())
}

/// OpenSSH's `ssh-keygen` on `PATH`, never this binary (a link to it named so).
fn real_ssh_keygen() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let me = std::env::current_exe().ok()?.canonicalize().ok();
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("ssh-keygen"))
        .filter(|p| p.is_absolute())
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                && p.canonicalize().ok() != me
        })
}

/// Become `program` with git's arguments; returns only when that fails.
fn exec(program: &Path, args: &[OsString]) -> Error {
    use std::os::unix::process::CommandExt as _;
    let err = std::process::Command::new(program).args(args).exec();
    Error::io(format!("running {}", program.display()), err)
}

/// What restore writes and records for plain git to sign, from `setup` (`None`: no signing set
/// up), with a warning when git's environment must carry `SIGNING_URL` itself. The key file is
/// read now for its public half: a key that cannot sign fails the restore before anything is
/// written (exit 11), rather than leaving a tree whose commits cannot be signed.
///
/// # Errors
/// [`Error::Signing`] for a key file that cannot sign; [`Error::Internal`] when this binary's
/// path cannot be `gpg.ssh.program`.
pub fn for_plain_git(setup: &SigningSetup) -> Result<(Option<GitSigning>, Option<String>)> {
    let utf8 = |path: &Path, var: &'static str| {
        path.to_str().map(str::to_owned).ok_or_else(|| {
            Error::Usage(
                Refusal::Invalid,
                format!(
                    "{var} ({}) is not UTF-8: its path cannot be recorded for plain git",
                    crate::text::line(path.as_os_str().as_encoded_bytes())
                ),
            )
        })
    };
    let mut warning = None;
    let record = match &setup.source {
        None => return Ok((None, None)),
        Some(SignatureSource::KeyFile(path)) => SigningRecord::KeyFile {
            key_file: utf8(path, "SIGNING_KEY_FILE")?,
            public_key: SigningKey::from_file(path, "SIGNING_KEY_FILE")?
                .public_key()
                .key_line(),
            required: setup.required,
        },
        Some(SignatureSource::Service { url, public }) => {
            let (url_file, url) = match url {
                UrlSource::File { path, var } => (Some(utf8(path, var)?), None),
                UrlSource::Fixed(u) if !u.has_credentials() && !u.has_query() => {
                    (None, Some(u.public()))
                }
                UrlSource::Fixed(_) => {
                    warning = Some(
                        "SIGNING_URL carries credentials, which are never written down: plain \
                         git commit signs only where SIGNING_URL is in its environment (put the \
                         URL in SIGNING_URL_FILE to have its path recorded)"
                            .to_owned(),
                    );
                    (None, None)
                }
            };
            SigningRecord::Service {
                url_file,
                url,
                public_key: public.key_line(),
                required: setup.required,
            }
        }
    };
    Ok((Some(GitSigning::new(record)?), warning))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn gits_command_lines_are_read_as_ssh_keygen_reads_them() {
        let call = Call::parse(&args(&[
            "-Y", "sign", "-n", "git", "-f", "/tmp/k", "-U", "/tmp/buf",
        ]))
        .unwrap();
        assert_eq!(call.operation, "sign");
        assert_eq!(call.namespace.as_deref(), Some("git"));
        assert_eq!(call.key_file.as_deref(), Some(Path::new("/tmp/k")));
        assert!(call.public_key_file);
        assert_eq!(call.files, vec![PathBuf::from("/tmp/buf")]);
        // find-principals with git's empty `-Overify-time` left out, and an attached value.
        let call = Call::parse(&args(&[
            "-Y",
            "check-novalidate",
            "-n",
            "git",
            "-s",
            "/tmp/sig",
            "",
            "-Overify-time=20260101000000",
        ]))
        .unwrap();
        assert_eq!(call.operation, "check-novalidate");
        assert_eq!(call.signature.as_deref(), Some(Path::new("/tmp/sig")));
        assert!(call.files.is_empty());
        assert!(Call::parse(&args(&["-Y", "sign", "-x"])).is_err());
        assert!(Call::parse(&args(&["-Y", "sign", "-n"])).is_err());
        assert!(is_call(&args(&["-Y", "sign"])));
        assert!(!is_call(&args(&["restore", "-Y"])));
    }

    #[test]
    fn a_payload_over_the_cap_is_refused() {
        let cap = 64;
        let read = |len: u64| read_capped(std::io::repeat(b'x').take(len), cap, "the data");
        assert_eq!(read(cap).unwrap().len(), 64);
        let err = read(cap + 1).unwrap_err();
        assert!(
            err.to_string().contains("the data is over 64 bytes"),
            "{err}"
        );
    }

    #[test]
    fn another_namespace_is_refused() {
        let call = Call::parse(&args(&["-Y", "sign", "-n", "file", "x"])).unwrap();
        assert!(call.git_namespace().is_err());
        let call = Call::parse(&args(&["-Y", "sign", "x"])).unwrap();
        assert!(call.git_namespace().is_err());
    }
}
