//! [`RemoteUrl`]: a smart-HTTP(S) repository URL whose credentials never show.

use std::fmt;

use base64::Engine as _;
use zeroize::Zeroize as _;

/// A secret string (a token or password). Its `Debug` and `Display` print `<redacted>`, and its
/// bytes are overwritten when it is dropped.
///
/// # Security
/// The only ways to the value are [`Secret::expose`] and the encodings in [`RemoteUrl::authorization`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself. Call only to put it on the wire or compare it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Every byte of the buffer (its spare capacity too), by writes the optimiser keeps.
        self.0.zeroize();
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The userinfo of a URL, percent-decoded.
#[derive(Clone)]
pub struct Credentials {
    /// The user name (often a fixed word like `t` or `x-access-token`, sometimes the token itself).
    pub username: Secret,
    /// The password or token; empty when the URL had `user@` only.
    pub password: Secret,
}

/// A smart-HTTP(S) repository URL (`http://` or `https://`), split into a credential-free base and
/// optional [`Credentials`] taken from its userinfo.
///
/// The latest JWT `exp` taken as an expiry: 9999-12-31T23:59:59Z, the last second RFC 3339 can
/// write (Unix seconds).
pub const MAX_JWT_EXPIRY: u64 = 253_402_300_799;

/// `Display` and `Debug` show the credential-free URL only (no userinfo, no query string, which some
/// backends use for signatures). This is also the form written to `.git/config`.
///
/// # Security
/// Credentials leave this type only as an `Authorization` header value marked sensitive, or through
/// [`RemoteUrl::credentials`] for the credential helper and the secret scan.
#[derive(Clone)]
pub struct RemoteUrl {
    base: url::Url,
    credentials: Option<Credentials>,
}

/// Why a string is not a usable repository URL. Never contains the input (it may hold a token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not parseable as a URL.
    #[error("not a valid URL ({0})")]
    Parse(String),
    /// A scheme other than http or https.
    #[error(
        "unsupported URL scheme '{0}': only smart HTTP(S) remotes (http://, https://) are supported"
    )]
    Scheme(String),
    /// No `scheme://` at its start (`host/r.git`, `user:token@host/r.git`, scp's `host:path`):
    /// what precedes a colon there may be a user name, so it is never shown.
    #[error(
        "the URL has no scheme: give it whole, as https://host/path/repo.git (or http://); \
         only smart HTTP(S) remotes are supported"
    )]
    NoScheme,
    /// No host.
    #[error("the URL has no host")]
    NoHost,
    /// A control character (a line break, a tab) inside it, which URL parsing would silently drop.
    #[error(
        "the URL holds a control character (a line break or tab inside it): one URL on one line is expected"
    )]
    ControlCharacter,
    /// A percent-escape in the user name or password decoding to CR, LF or NUL: git's credential
    /// protocol is one `key=value` per line, so such a value would add lines of its own
    /// (`quit=1`, a second `host=`); git refuses such URLs too.
    #[error(
        "the URL's user name or password decodes to a line break or NUL (%0A, %0D or %00): \
         credentials are one line of text; remove the escape"
    )]
    DecodedLineBreak,
}

impl RemoteUrl {
    /// Parse `s`, separating its userinfo.
    ///
    /// # Errors
    /// [`UrlError`] for unparseable input, a scheme other than http/https, a missing host, or a
    /// control character inside (surrounding whitespace and a leading byte-order mark are
    /// trimmed); the error never repeats the input.
    pub fn parse(s: &str) -> Result<Self, UrlError> {
        // A byte-order mark some editors put at the start of a URL file is not part of the URL.
        let s = s.trim().trim_start_matches('\u{feff}').trim();
        if s.chars().any(char::is_control) {
            return Err(UrlError::ControlCharacter);
        }
        let scheme_given = s.split_once("://").is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
        if !scheme_given {
            return Err(UrlError::NoScheme);
        }
        let mut url = url::Url::parse(s).map_err(|e| UrlError::Parse(e.to_string()))?;
        match url.scheme() {
            "http" | "https" => {}
            other => return Err(UrlError::Scheme(other.chars().take(20).collect())),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(UrlError::NoHost);
        }
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let credentials = if !url.username().is_empty() || url.password().is_some() {
            let c = Credentials {
                username: Secret(decode(url.username())),
                password: Secret(decode(url.password().unwrap_or(""))),
            };
            if [&c.username, &c.password]
                .iter()
                .any(|s| s.expose().contains(['\r', '\n', '\0']))
            {
                return Err(UrlError::DecodedLineBreak);
            }
            Some(c)
        } else {
            None
        };
        let _ = url.set_username("");
        let _ = url.set_password(None);
        url.set_fragment(None);
        let trimmed = url.path().trim_end_matches('/').to_owned();
        url.set_path(&trimmed);
        Ok(RemoteUrl {
            base: url,
            credentials,
        })
    }

    /// Whether the URL carried userinfo.
    pub fn has_credentials(&self) -> bool {
        self.credentials.is_some()
    }

    /// The credentials from the URL's userinfo, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// The forms in which this URL's secret could appear in a file: the token itself (the password,
    /// or the user name when there is no password), its percent-encodings (RFC 3986 unreserved
    /// characters kept or all non-alphanumerics encoded; upper- and lower-case hex), and its base64
    /// ([`base64_cores`]: standard and URL-safe, at each of the three alignments, so the token is
    /// found inside the base64 of anything that holds it: `user:token`, `x-access-token:token`, a
    /// Basic header). Secrets under 8 characters are not scanned for (they would match ordinary
    /// text). Used by `save` and `push` to refuse a token, and by redaction (SPEC rule 5).
    pub fn secret_forms(&self) -> Vec<String> {
        let mut secrets = Vec::new();
        if let Some(c) = &self.credentials {
            secrets.push(if c.password.expose().is_empty() {
                c.username.expose().to_owned()
            } else {
                c.password.expose().to_owned()
            });
        }
        // A presigned URL's signature (or a `?token=`) is in its query: each value is a secret.
        secrets.extend(self.base.query_pairs().map(|(_, v)| v.into_owned()));
        let mut forms: Vec<String> = secrets
            .iter()
            .filter(|s| s.chars().count() >= 8)
            .flat_map(|s| forms_of(s))
            .collect();
        forms.sort();
        forms.dedup();
        forms
    }

    /// Whether a query string is part of it (where presigned URLs carry their signature).
    pub fn has_query(&self) -> bool {
        self.base.query().is_some_and(|q| !q.is_empty())
    }

    /// The `exp` claim (Unix seconds) when the password (or a password-less user name) is a JWT,
    /// and at most [`MAX_JWT_EXPIRY`] (a later one counts as none). No signature is checked: the
    /// value only phrases warnings and errors.
    pub fn jwt_expiry(&self) -> Option<u64> {
        let c = self.credentials.as_ref()?;
        let token = if c.password.expose().is_empty() {
            c.username.expose()
        } else {
            c.password.expose()
        };
        let mut parts = token.split('.');
        let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()?;
        let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let exp = &claims["exp"];
        exp.as_u64()
            .or_else(|| exp.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            // Past 9999-12-31T23:59:59Z the token does not expire in any sense that matters, and
            // RFC 3339 cannot write the time.
            .filter(|&e| e <= MAX_JWT_EXPIRY)
    }

    /// The URL of a smart-HTTP endpoint below the repository, e.g. `info/refs?service=git-upload-pack`
    /// or `git-upload-pack` (gitprotocol-http "Smart Clients"); `""` is the URL itself (an archive).
    /// Carries no userinfo; keeps the query.
    pub fn endpoint(&self, suffix: &str) -> url::Url {
        let (path, query) = suffix.split_once('?').unwrap_or((suffix, ""));
        let mut url = self.base.clone();
        if !path.is_empty() {
            url.set_path(&format!("{}/{}", self.base.path(), path));
        }
        let mut q: Vec<String> = self
            .base
            .query()
            .map(|q| vec![q.to_owned()])
            .unwrap_or_default();
        if !query.is_empty() {
            q.push(query.to_owned());
        }
        url.set_query((!q.is_empty()).then(|| q.join("&")).as_deref());
        url
    }

    /// The credential-free URL as a string, without query: what `.git/config` and messages show.
    pub fn public(&self) -> String {
        let mut url = self.base.clone();
        url.set_query(None);
        url.to_string()
    }

    /// [`public`](Self::public) with the made-up, secret-free user name `user` (what
    /// `remote.origin.url`/`pushurl` hold, so that git's credential request says which URL it
    /// is for).
    pub fn public_as(&self, user: &str) -> String {
        let mut url = self.base.clone();
        url.set_query(None);
        let _ = url.set_username(user);
        url.to_string()
    }

    /// `scheme`, `host` and `path` (no leading slash) as git's credential protocol names them.
    pub fn credential_parts(&self) -> (String, String, String) {
        let host = match self.base.port() {
            Some(p) => format!("{}:{p}", self.base.host_str().unwrap_or_default()),
            None => self.base.host_str().unwrap_or_default().to_owned(),
        };
        (
            self.base.scheme().to_owned(),
            host,
            self.base.path().trim_start_matches('/').to_owned(),
        )
    }

    /// The `Authorization: Basic …` header value for the URL's userinfo, marked sensitive so that
    /// HTTP libraries never log it.
    pub fn authorization(&self) -> Option<reqwest::header::HeaderValue> {
        let c = self.credentials.as_ref()?;
        let raw = format!("{}:{}", c.username.expose(), c.password.expose());
        let encoded = base64::engine::general_purpose::STANDARD.encode(raw.as_bytes());
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// This URL with `suffix` appended to its path, its credentials kept (git-lfs's endpoint
    /// `<repository>.git/info/lfs` is built so).
    pub fn with_path_suffix(&self, suffix: &str) -> RemoteUrl {
        let mut base = self.base.clone();
        base.set_path(&format!("{}{suffix}", self.base.path()));
        RemoteUrl {
            base,
            credentials: self.credentials.clone(),
        }
    }

    /// This URL with its path replaced by `path` (query dropped), its credentials kept: the same
    /// origin (a submodule's relative URL is resolved so).
    pub fn with_path(&self, path: &str) -> RemoteUrl {
        let mut base = self.base.clone();
        base.set_path(path);
        base.set_query(None);
        RemoteUrl {
            base,
            credentials: self.credentials.clone(),
        }
    }

    /// The URL's path (percent-encoded, no query).
    pub fn path(&self) -> &str {
        self.base.path()
    }

    /// Whether `url` has this URL's scheme, host and port: only there may its credentials go.
    pub fn same_origin(&self, url: &url::Url) -> bool {
        self.base.origin() == url.origin()
    }

    /// `other` with this URL's credentials when it has the same origin (and none of its own),
    /// else `other` as it is: credentials never go to another host.
    pub fn lend_credentials(&self, mut other: RemoteUrl) -> RemoteUrl {
        if other.credentials.is_none() && self.same_origin(&other.base) {
            other.credentials = self.credentials.clone();
        }
        other
    }

    /// Whether two URLs name the same host and path (used to pair `READ_URL` with `PUSH_URL`).
    pub fn same_repository(&self, other: &RemoteUrl) -> bool {
        self.public() == other.public()
    }
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.public())
    }
}

impl fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteUrl")
            .field("url", &self.public())
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// The forms of one secret (see [`RemoteUrl::secret_forms`]).
fn forms_of(secret: &str) -> Vec<String> {
    let encode = |keep: &dyn Fn(u8) -> bool, upper: bool| -> String {
        secret
            .bytes()
            .map(|b| match (keep(b), upper) {
                (true, _) => (b as char).to_string(),
                (false, true) => format!("%{b:02X}"),
                (false, false) => format!("%{b:02x}"),
            })
            .collect()
    };
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || b"-._~".contains(&b);
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let mut forms = vec![
        secret.to_owned(),
        encode(&unreserved, true),
        encode(&unreserved, false),
        encode(&alnum, true),
        encode(&alnum, false),
    ];
    forms.extend(base64_cores(secret.as_bytes()));
    forms
}

/// The base64 text that `secret` yields wherever it sits in the encoded data, in both alphabets
/// (standard and URL-safe): base64 turns each 3 bytes into 4 characters, so the token starts at one
/// of three alignments, and the characters that hold only its bits are the same whatever comes
/// before or after it (the first group, shared with the bytes before, and the last, shared with
/// the bytes after, are left out). Padding or its absence does not matter.
pub fn base64_cores(secret: &[u8]) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let mut cores = Vec::new();
    for align in 0..3 {
        let mut data = vec![0u8; align];
        data.extend_from_slice(secret);
        // Characters whose 6 bits all come from `secret`: skip those holding the `align` bytes
        // before it; drop the last one when the token ends inside a group.
        let skip = [0, 2, 3][align];
        let end_in_group = data.len() % 3 != 0;
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let text = engine.encode(&data);
            let end = text.len() - usize::from(end_in_group);
            if end > skip {
                cores.push(text[skip..end].to_owned());
            }
        }
    }
    cores
}

/// The most a URL file is read: no URL is longer (a presigned one is a few KiB).
pub const MAX_URL_FILE: u64 = 64 * 1024;

/// The text of a `_FILE` holding a URL, at most [`MAX_URL_FILE`] bytes: `/dev/zero` or an endless
/// pipe in its place is refused, not read forever.
///
/// # Errors
/// The system's, or [`std::io::ErrorKind::InvalidData`] for a file over the bound or not UTF-8.
pub fn read_url_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    // The caller's own file, which may be a pipe (`READ_URL_FILE=<(…)`).
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_URL_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_URL_FILE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("over {} KiB, longer than any URL", MAX_URL_FILE / 1024),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_break_or_tab_inside_is_refused() {
        for bad in [
            "https://example.com/repo.git\nsecond-line",
            "https://example.com/re\tpo.git",
            "https://example.com/\r\nrepo.git",
        ] {
            assert!(
                matches!(RemoteUrl::parse(bad), Err(UrlError::ControlCharacter)),
                "{bad:?}"
            );
        }
        assert!(RemoteUrl::parse("  https://example.com/repo.git\n").is_ok());
        assert_eq!(
            RemoteUrl::parse("\u{feff}https://example.com/repo.git\n")
                .unwrap()
                .public(),
            "https://example.com/repo.git"
        );
    }

    #[test]
    fn credentials_decoding_to_a_line_break_or_nul_are_refused() {
        for bad in [
            "http://t:TOK%0Aquit=1@host/r.git",
            "http://t:TOK%0d%0ahost=evil@host/r.git",
            "http://t%00x:TOK@host/r.git",
            "http://TOK%0A@host/r.git",
        ] {
            assert_eq!(
                RemoteUrl::parse(bad).err(),
                Some(UrlError::DecodedLineBreak),
                "{bad}"
            );
        }
        // Escapes elsewhere stay escaped (the path is never decoded), and other bytes decode.
        let u = RemoteUrl::parse("http://t:a%09b%25@host/r%0A.git").unwrap();
        assert_eq!(u.credentials().unwrap().password.expose(), "a\tb%");
        assert_eq!(u.credential_parts().2, "r%0A.git");
    }

    #[test]
    fn jwt_expiry_beyond_year_9999_counts_as_none() {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let url = |claims: &str| {
            let jwt = format!(
                "{}.{}.sig",
                b64.encode(r#"{"alg":"HS256"}"#),
                b64.encode(claims)
            );
            RemoteUrl::parse(&format!("https://t:{jwt}@example.com/r.git")).unwrap()
        };
        assert_eq!(
            url(r#"{"exp":1700000000}"#).jwt_expiry(),
            Some(1_700_000_000)
        );
        assert_eq!(
            url(r#"{"exp":253402300799}"#).jwt_expiry(),
            Some(MAX_JWT_EXPIRY)
        );
        for far in ["253402300800", "18446744073709551615", "1e30", "1.5e300"] {
            assert_eq!(
                url(&format!(r#"{{"exp":{far}}}"#)).jwt_expiry(),
                None,
                "{far}"
            );
        }
        // The largest accepted one formats (humantime refuses years past 9999).
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(MAX_JWT_EXPIRY);
        assert_eq!(
            humantime::format_rfc3339_seconds(at).to_string(),
            "9999-12-31T23:59:59Z"
        );
    }

    #[test]
    fn userinfo_never_shows() {
        let u =
            RemoteUrl::parse("https://t:s3cr%40t@example.com:8443/org/repo.git/?sig=zzz").unwrap();
        for shown in [u.to_string(), format!("{u:?}"), u.public()] {
            assert!(!shown.contains("s3cr"), "{shown}");
            assert!(!shown.contains("zzz"), "{shown}");
        }
        assert_eq!(u.public(), "https://example.com:8443/org/repo.git");
        assert_eq!(u.credentials().unwrap().password.expose(), "s3cr@t");
        assert_eq!(
            u.endpoint("info/refs?service=git-upload-pack").as_str(),
            "https://example.com:8443/org/repo.git/info/refs?sig=zzz&service=git-upload-pack"
        );
    }

    #[test]
    fn refuses_other_schemes_without_echo() {
        let e = RemoteUrl::parse("ssh://tok@host/x").unwrap_err();
        assert!(!e.to_string().contains("tok"));
        assert!(RemoteUrl::parse("not a url").is_err());
    }

    /// Without `scheme://`, what precedes a colon is a user name (or scp's host), not a scheme:
    /// the message says the scheme is missing and shows none of it.
    #[test]
    fn a_url_without_a_scheme_says_so_and_echoes_nothing() {
        for input in [
            "t:TOKSECRET@host.example/r.git",
            "host.example/r.git",
            "git@host.example:org/r.git",
            "://host.example/r.git",
        ] {
            let e = RemoteUrl::parse(input).unwrap_err();
            assert_eq!(e, UrlError::NoScheme, "{input}");
            let shown = e.to_string();
            assert!(shown.contains("no scheme"), "{shown}");
            assert!(!shown.contains("'t'") && !shown.contains("TOK"), "{shown}");
        }
        assert_eq!(
            RemoteUrl::parse("ftp://host.example/r.git").unwrap_err(),
            UrlError::Scheme("ftp".into())
        );
    }
}
