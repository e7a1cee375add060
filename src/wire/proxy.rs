//! Proxies from the environment, read as curl reads them for plain git: `https_proxy` (or
//! `HTTPS_PROXY`) for https URLs, `http_proxy` (or `HTTP_PROXY`) for http URLs, `all_proxy` (or
//! `ALL_PROXY`) for either when its own is unset, and `no_proxy` (or `NO_PROXY`) for the hosts
//! reached directly. A value without a scheme is an `http://` proxy; an `https://` proxy is reached
//! over TLS, verified with the same roots as every server.
//!
//! One decision ([`Proxies::for_target`]) feeds the client and words its errors, so a failure
//! names the proxy the request went through.
//!
//! # Security
//! A proxy's userinfo is its credentials: they go to the proxy only, as a Basic
//! `Proxy-Authorization`; [`Proxy`] shows the URL without them, and
//! [`crate::redact::learn_environment`] learns them so that no echo shows them either.

use std::net::IpAddr;
use std::sync::OnceLock;

use crate::error::{Error, Refusal, Result};

/// A proxy from one variable.
pub struct Proxy {
    /// The URL as given, credentials included: what the client connects with.
    url: url::Url,
    /// The variable it came from.
    var: &'static str,
}

impl Proxy {
    /// Whether the URL carries credentials.
    pub fn has_credentials(&self) -> bool {
        !self.url.username().is_empty() || self.url.password().is_some()
    }

    /// The URL to give the client (with its credentials).
    pub(crate) fn url(&self) -> &url::Url {
        &self.url
    }
}

impl std::fmt::Display for Proxy {
    /// `scheme://host:port (from VAR)`: never the credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = self.url.host_str().unwrap_or_default();
        let port = self.url.port_or_known_default().unwrap_or_default();
        write!(
            f,
            "{}://{host}:{port} (from {})",
            self.url.scheme(),
            self.var
        )
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// The proxies of the environment.
#[derive(Debug, Default)]
pub struct Proxies {
    http: Option<Proxy>,
    https: Option<Proxy>,
    /// `no_proxy`'s entries, lower-case, without a leading dot; `*` bypasses every host.
    direct: Vec<String>,
}

impl Proxies {
    /// Read the variables through `var` (empty values count as unset).
    ///
    /// # Errors
    /// [`Error::Usage`] naming the variable (never its value, which may hold credentials) when a
    /// value is not an http(s) proxy URL with a host.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let first = |names: [&'static str; 2]| -> Result<Option<Proxy>> {
            for name in names {
                if let Some(value) = var(name).filter(|v| !v.trim().is_empty()) {
                    return parse(name, &value).map(Some);
                }
            }
            Ok(None)
        };
        let all = first(["all_proxy", "ALL_PROXY"])?;
        let http = first(["http_proxy", "HTTP_PROXY"])?;
        let https = first(["https_proxy", "HTTPS_PROXY"])?;
        let or_all = |own: Option<Proxy>| {
            own.or_else(|| {
                all.as_ref().map(|p| Proxy {
                    url: p.url.clone(),
                    var: p.var,
                })
            })
        };
        let direct = ["no_proxy", "NO_PROXY"]
            .into_iter()
            .find_map(|name| var(name).filter(|v| !v.trim().is_empty()))
            .unwrap_or_default()
            .split([',', ' ', '\t'])
            .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
            .filter(|e| !e.is_empty())
            .collect();
        Ok(Proxies {
            http: or_all(http),
            https: or_all(https),
            direct,
        })
    }

    /// Whether no proxy is set at all.
    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// The proxy a request to `target` goes through, if any.
    pub fn for_target(&self, target: &url::Url) -> Option<&Proxy> {
        let proxy = match target.scheme() {
            "https" => self.https.as_ref(),
            "http" => self.http.as_ref(),
            _ => None,
        }?;
        let host = target.host_str()?;
        (!self.bypasses(host)).then_some(proxy)
    }

    /// `no_proxy`'s rule (curl's): `*`, the host itself or a domain above it, an IP address, or
    /// an address block (`10.0.0.0/8`).
    fn bypasses(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        self.direct.iter().any(|entry| {
            let entry = entry.trim_start_matches('[').trim_end_matches(']');
            if entry == "*" || *entry == host {
                return true;
            }
            match (ip, entry.split_once('/')) {
                (Some(ip), Some((net, bits))) => in_block(ip, net, bits),
                (Some(_), None) => false,
                (None, _) => host
                    .strip_suffix(entry)
                    .is_some_and(|above| above.ends_with('.')),
            }
        })
    }
}

/// Whether `ip` lies in the block `net/bits`.
fn in_block(ip: IpAddr, net: &str, bits: &str) -> bool {
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    let prefix = |a: u128, b: u128, width: u32| {
        let bits = bits.min(width);
        bits == 0 || (a ^ b) >> (width - bits) == 0
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => prefix(u32::from(a).into(), u32::from(b).into(), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => prefix(u128::from(a), u128::from(b), 128),
        _ => false,
    }
}

fn parse(var: &'static str, value: &str) -> Result<Proxy> {
    let value = value.trim();
    let with_scheme = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    let refuse = |why: &str| {
        Error::Usage(
            Refusal::Invalid,
            format!("{var} is not a proxy git-session can use: {why}"),
        )
    };
    let url = url::Url::parse(&with_scheme).map_err(|_| refuse("not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse("only http:// and https:// proxies are supported"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refuse("no host"));
    }
    Ok(Proxy { url, var })
}

/// The environment's proxies, or why a variable is unusable.
static PROXIES: OnceLock<std::result::Result<Proxies, String>> = OnceLock::new();

/// The environment's proxies, read once.
///
/// # Errors
/// As [`Proxies::from_vars`].
pub fn get() -> Result<&'static Proxies> {
    PROXIES
        .get_or_init(|| {
            Proxies::from_vars(|name| std::env::var(name).ok()).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|why| Error::Usage(Refusal::Invalid, why.clone()))
}

/// The proxy a request to `target` goes through (none when the environment's are unusable: the
/// client was not built then).
pub fn for_target(target: &url::Url) -> Option<&'static Proxy> {
    get().ok()?.for_target(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(pairs: &[(&str, &str)]) -> Proxies {
        Proxies::from_vars(|name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
        .expect("valid")
    }

    fn through(p: &Proxies, target: &str) -> Option<String> {
        p.for_target(&url::Url::parse(target).expect("url"))
            .map(ToString::to_string)
    }

    #[test]
    fn each_scheme_has_its_variable_and_all_proxy_fills_in() {
        let p = proxies(&[
            ("HTTPS_PROXY", "http://u:secret@proxy:3128"),
            ("all_proxy", "other:8080"),
        ]);
        assert_eq!(
            through(&p, "https://h/r.git").as_deref(),
            Some("http://proxy:3128 (from HTTPS_PROXY)")
        );
        assert_eq!(
            through(&p, "http://h/r.git").as_deref(),
            Some("http://other:8080 (from all_proxy)")
        );
        // The lower-case spelling wins, as in curl.
        let p = proxies(&[
            ("https_proxy", "https://a:1"),
            ("HTTPS_PROXY", "http://b:2"),
        ]);
        assert_eq!(
            through(&p, "https://h/").as_deref(),
            Some("https://a:1 (from https_proxy)")
        );
        assert!(proxies(&[]).is_empty());
    }

    #[test]
    fn no_proxy_follows_curls_rules() {
        let p = proxies(&[
            ("https_proxy", "http://proxy:3128"),
            ("NO_PROXY", ".example.com, 10.0.0.0/8 ::1,localhost"),
        ]);
        for direct in [
            "https://example.com/r",
            "https://git.example.com/r",
            "https://10.1.2.3/r",
            "https://[::1]:8443/r",
            "https://LOCALHOST/r",
        ] {
            assert_eq!(through(&p, direct), None, "{direct}");
        }
        for proxied in [
            "https://notexample.com/r",
            "https://11.0.0.1/r",
            "https://127.0.0.1/r",
        ] {
            assert!(through(&p, proxied).is_some(), "{proxied}");
        }
        let all = proxies(&[("https_proxy", "http://proxy:3128"), ("no_proxy", "*")]);
        assert_eq!(through(&all, "https://h/"), None);
    }

    #[test]
    fn an_unusable_value_is_refused_without_showing_it() {
        for value in [
            "socks5://u:secret@h:1080",
            "http://u:secret@:1",
            "http://[u:secret",
        ] {
            let err = Proxies::from_vars(|name| (name == "HTTPS_PROXY").then(|| value.to_owned()))
                .expect_err(value);
            let msg = err.to_string();
            assert!(msg.contains("HTTPS_PROXY"), "{msg}");
            assert!(!msg.contains("secret"), "{msg}");
        }
    }
}
