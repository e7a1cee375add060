//! `git-session credential`: a git credential helper (git-credential(1), "CUSTOM HELPERS") that
//! answers `get` from the environment, so plain `git fetch`/`git push` in the sandbox shell work with
//! no secret on disk.
//!
//! Fetches get `READ_URL`'s credentials and pushes `PUSH_URL`'s (each from its `_FILE`, re-read on
//! every call, or the variable), also when both URLs share host and path. git's request carries no
//! direction — only protocol, host, path and user name — so restore writes made-up user names into
//! `remote.origin.url` ([`READ_USER`]) and `pushurl` ([`PUSH_USER`]), and the helper answers each
//! with its own URL's real user name and password (a helper's `username=` replaces the URL's).
//! A push with no `PUSH_URL` is answered `quit=1`: git stops at once, with no prompt and no other
//! helper, after the helper said on stderr what is missing.
//!
//! A request with any other user name (a URL a person typed) carries no direction either: it is
//! answered with `PUSH_URL`'s credentials when they match its scheme, host and path (they can
//! fetch and push), never with `READ_URL`'s.
//! `store` and `erase` do nothing.
//!
//! # Security
//! stdout carries only `username=`/`password=`/`quit=` lines (git reads it as credentials); every
//! message goes to stderr. Nothing is written anywhere. An answer is only given for the host and
//! path of the URL it comes from.

use std::io::BufRead;

use crate::error::{Error, Refusal, Result};
use crate::inputs;
use crate::redact::Stderr;
use crate::repo::layout::{PUSH_USER, READ_USER};
use crate::types::RemoteUrl;

/// What git asked for.
#[derive(Debug, Default)]
struct Request {
    protocol: String,
    host: String,
    path: String,
    username: Option<String>,
}

impl Request {
    /// git's request: `key=value` lines up to an empty line or the end, read as bytes (a value
    /// that is not UTF-8 matches nothing), each at most [`MAX_REQUEST_LINE`] bytes.
    fn read(mut input: impl BufRead) -> Result<Self> {
        let mut req = Request::default();
        let mut bytes = Vec::new();
        loop {
            bytes.clear();
            std::io::Read::take(&mut input, MAX_REQUEST_LINE as u64 + 1)
                .read_until(b'\n', &mut bytes)
                .map_err(|e| Error::io("reading the credential request", e))?;
            if bytes.len() > MAX_REQUEST_LINE {
                return Err(Error::Usage(
                    Refusal::Invalid,
                    format!(
                        "git's credential request holds a line over {MAX_REQUEST_LINE} bytes: \
                         nothing was answered"
                    ),
                ));
            }
            let line = String::from_utf8_lossy(bytes.strip_suffix(b"\n").unwrap_or(&bytes));
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once('=') {
                match k {
                    "protocol" => req.protocol = v.to_owned(),
                    "host" => req.host = v.to_owned(),
                    "path" => req.path = v.trim_matches('/').to_owned(),
                    "username" => req.username = Some(v.to_owned()),
                    _ => {}
                }
            }
        }
        Ok(req)
    }

    fn matches(&self, url: &RemoteUrl) -> bool {
        let (p, h, pa) = url.credential_parts();
        p == self.protocol
            && h == self.host
            && (self.path.is_empty() || pa.trim_matches('/') == self.path)
    }

    fn shown(&self) -> String {
        format!("{}://{}/{}", self.protocol, self.host, self.path)
    }
}

/// The longest line of git's request read (git's own are a URL's parts).
const MAX_REQUEST_LINE: usize = 64 << 10;

/// What the helper answers.
#[derive(Debug)]
enum Answer {
    /// These credentials.
    Use(RemoteUrl),
    /// Nothing: git may ask other helpers or the person.
    Pass(String),
    /// `quit=1`: git stops, no prompt, no other helper.
    Quit(String),
}

/// Run the helper for `operation` (`get`, `store`, `erase`), reading the request from stdin.
///
/// # Errors
/// [`Error::Usage`] for an unknown operation; a URL variable that is set but invalid.
pub fn run(operation: &str) -> Result<()> {
    if operation != "get" {
        return match operation {
            "store" | "erase" => Ok(()),
            other => Err(Error::Usage(
                Refusal::Invalid,
                format!("unknown credential operation '{other}' (git calls get, store, erase)"),
            )),
        };
    }
    // The URLs first: one git's protocol cannot carry is exit 2 before anything is read.
    let read = inputs::url(None, "READ_URL", "READ_URL_FILE")?
        .map(|s| s.load())
        .transpose()?;
    let push = inputs::url(None, "PUSH_URL", "PUSH_URL_FILE")?
        .map(|s| s.load())
        .transpose()?;
    let (answer_bytes, said) = respond(std::io::stdin().lock(), read, push)?;
    if let Some(why) = said {
        Stderr::line(&format!("git-session credential: {why}"));
    }
    crate::output::stdout::print(&answer_bytes);
    Ok(())
}

/// The whole answer to the request read from `input`, as the bytes to write at once (git never
/// reads half of one), and what to say to the person (on stderr) when it gives no credentials.
///
/// # Errors
/// [`Error::Usage`] for a request line over [`MAX_REQUEST_LINE`] bytes or a credential holding
/// CR, LF or NUL (which [`RemoteUrl::parse`] already refuses); [`Error::LocalIo`] when the
/// request cannot be read.
pub fn respond(
    input: impl BufRead,
    read: Option<RemoteUrl>,
    push: Option<RemoteUrl>,
) -> Result<(zeroize::Zeroizing<Vec<u8>>, Option<String>)> {
    let req = Request::read(input)?;
    let mut answer_bytes = zeroize::Zeroizing::new(Vec::new());
    let said = match answer(&req, read, push) {
        Answer::Use(url) => {
            let c = url.credentials().expect("answered with credentials only");
            for (key, value) in [("username", &c.username), ("password", &c.password)] {
                // RemoteUrl::parse refuses these; checked again here, at the sink.
                if value.expose().contains(['\r', '\n', '\0']) {
                    return Err(Error::Usage(
                        Refusal::Invalid,
                        format!("the {key} holds a line break or NUL: nothing was answered"),
                    ));
                }
                answer_bytes.extend_from_slice(format!("{key}=").as_bytes());
                answer_bytes.extend_from_slice(value.expose().as_bytes());
                answer_bytes.push(b'\n');
            }
            None
        }
        Answer::Pass(why) => Some(why),
        Answer::Quit(why) => {
            answer_bytes.extend_from_slice(b"quit=1\n");
            Some(why)
        }
    };
    Ok((answer_bytes, said))
}

/// Decide the answer to `req` from the session URLs in the environment.
fn answer(req: &Request, read: Option<RemoteUrl>, push: Option<RemoteUrl>) -> Answer {
    let for_request =
        |url: Option<RemoteUrl>, var: &str| -> std::result::Result<RemoteUrl, String> {
            let url = url.ok_or_else(|| {
                format!(
                    "{var} is not set in this shell: export {var} (or {var}_FILE) to let git use it"
                )
            })?;
            if !req.matches(&url) {
                return Err(format!(
                    "{var} names {url}, not {}: git asked for another repository",
                    req.shown()
                ));
            }
            if !url.has_credentials() {
                return Err(format!("{var} ({url}) carries no credentials"));
            }
            Ok(url)
        };
    match req.username.as_deref() {
        Some(PUSH_USER) => match for_request(push, "PUSH_URL") {
            Ok(url) => Answer::Use(url),
            Err(why) => Answer::Quit(format!("a push needs PUSH_URL's credentials: {why}")),
        },
        // No READ_URL (an archive restore given only PUSH_URL): the write URL can read too.
        Some(READ_USER) => match for_request(read.clone(), "READ_URL") {
            Ok(url) => Answer::Use(url),
            Err(_) if read.is_none() && push.is_some() => match for_request(push, "PUSH_URL") {
                Ok(url) => Answer::Use(url),
                Err(why) => Answer::Quit(format!("a fetch needs READ_URL's credentials: {why}")),
            },
            Err(why) => Answer::Quit(format!("a fetch needs READ_URL's credentials: {why}")),
        },
        // A URL typed by hand: git does not say whether it fetches or pushes, so only PUSH_URL
        // (which can do both) is given; READ_URL's token never goes to a push (SPEC "credential").
        _ => match push.filter(|u| req.matches(u) && u.has_credentials()) {
            Some(url) => Answer::Use(url),
            None => Answer::Pass(format!(
                "no PUSH_URL in the environment matches {}: for a URL typed by hand git does not \
                 say whether it fetches or pushes, so only PUSH_URL is given (fetch from `origin` \
                 to use READ_URL)",
                req.shown()
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(user: Option<&str>) -> Request {
        Request {
            protocol: "https".into(),
            host: "git.example.com".into(),
            path: "org/repo.git".into(),
            username: user.map(str::to_owned),
        }
    }

    fn url(s: &str) -> Option<RemoteUrl> {
        Some(RemoteUrl::parse(s).unwrap())
    }

    fn password(a: Answer) -> String {
        match a {
            Answer::Use(u) => u.credentials().unwrap().password.expose().to_owned(),
            other => panic!("expected credentials, got {other:?}"),
        }
    }

    #[test]
    fn each_direction_gets_its_own_url_on_the_same_host_and_path() {
        let read = url("https://r:READTOK@git.example.com/org/repo.git");
        let push = url("https://p:PUSHTOK@git.example.com/org/repo.git");
        assert_eq!(
            password(answer(&req(Some(READ_USER)), read.clone(), push.clone())),
            "READTOK"
        );
        assert_eq!(
            password(answer(&req(Some(PUSH_USER)), read.clone(), push.clone())),
            "PUSHTOK"
        );
        // A URL typed by hand (no direction known): PUSH_URL only, never READ_URL's token.
        assert_eq!(
            password(answer(&req(Some("r")), read.clone(), push.clone())),
            "PUSHTOK"
        );
        assert_eq!(password(answer(&req(None), read.clone(), push)), "PUSHTOK");
        assert!(matches!(answer(&req(None), read, None), Answer::Pass(_)));
    }

    #[test]
    fn a_push_without_push_url_quits_and_never_falls_back_to_the_read_token() {
        let read = url("https://r:READTOK@git.example.com/org/repo.git");
        match answer(&req(Some(PUSH_USER)), read, None) {
            Answer::Quit(why) => assert!(why.contains("PUSH_URL"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_fetch_without_read_url_uses_the_push_url_of_the_same_repository() {
        let push = url("https://p:PUSHTOK@git.example.com/org/repo.git");
        assert_eq!(
            password(answer(&req(Some(READ_USER)), None, push)),
            "PUSHTOK"
        );
        let elsewhere = url("https://p:PUSHTOK@other.example.com/org/repo.git");
        assert!(matches!(
            answer(&req(Some(READ_USER)), None, elsewhere),
            Answer::Quit(_)
        ));
    }
}
