//! The signing set-up from the environment (`SIGNING_*`, SPEC "Inputs"), read once per command
//! into types; the key file itself is read at each use.

use std::path::PathBuf;

use crate::error::{Error, Refusal, Result};
use crate::inputs::{UrlSource, current_dir, env_nonempty, url};

/// How commits are signed (SPEC "Inputs": `SIGNING_*`), read from the environment once per
/// command. The key file itself is read at each use, like the `_FILE` URLs.
#[derive(Debug, Clone)]
pub struct SigningSetup {
    /// What signs, when signing is set up.
    pub source: Option<SignatureSource>,
    /// `SIGNING_REQUIRED=1`: no unsigned commit, or one signed by another key, is uploaded.
    pub required: bool,
}

/// Where signatures come from.
#[derive(Debug, Clone)]
pub enum SignatureSource {
    /// `SIGNING_KEY_FILE`: an OpenSSH private key, read at each use (absolute path).
    KeyFile(PathBuf),
    /// `SIGNING_URL` or `SIGNING_URL_FILE`: a signing service whose every answer is verified
    /// against `SIGNING_PUBLIC_KEY`.
    Service {
        /// The service's URL (its `_FILE` re-read at every use, for rotation).
        url: UrlSource,
        /// The key its signatures must verify against.
        public: Box<super::public::PublicKey>,
    },
}

impl SigningSetup {
    /// Whether anything about signing is set (a source or the requirement).
    pub fn is_set(&self) -> bool {
        self.source.is_some() || self.required
    }

    /// The forms in which the private key of `SIGNING_KEY_FILE` must never be committed or
    /// pushed (none without a key file, or when it holds no key that can be read): see
    /// `secrets.rs`.
    pub fn secret_forms(&self) -> zeroize::Zeroizing<Vec<String>> {
        match &self.source {
            Some(SignatureSource::KeyFile(path)) => super::secrets::key_file_forms(path),
            _ => zeroize::Zeroizing::new(Vec::new()),
        }
    }

    /// With `SIGNING_REQUIRED=1`, the key every commit to upload must be signed by: the key
    /// file's public half (the file read now), or `SIGNING_PUBLIC_KEY` with a service; `None`
    /// when signatures are not required.
    ///
    /// # Errors
    /// [`Error::Signing`] (exit 11) for a key file that cannot be read as a key.
    pub fn required_key(&self) -> Result<Option<super::public::PublicKey>> {
        if !self.required {
            return Ok(None);
        }
        match &self.source {
            Some(SignatureSource::KeyFile(path)) => Ok(Some(
                super::key::SigningKey::from_file(path, "SIGNING_KEY_FILE")?.public_key(),
            )),
            Some(SignatureSource::Service { public, .. }) => Ok(Some((**public).clone())),
            None => Err(Error::signing(
                crate::error::SigningCause::NothingToCheckAgainst,
                "SIGNING_REQUIRED",
                None,
                "",
            )),
        }
    }
}

/// The signing set-up as a push (`push`, the pre-push check of plain `git push`) needs it: with
/// `SIGNING_REQUIRED` set, [`signing`] whole (a set-up that cannot check refuses the push);
/// without, what can be read of it — a set-up that could not sign is `save`'s refusal, not a
/// push's, but the key file's private key is still kept out of what is pushed.
///
/// # Errors
/// Those of [`signing`], when `SIGNING_REQUIRED` is set.
pub fn for_push() -> Result<SigningSetup> {
    match signing() {
        Err(e) if env_nonempty("SIGNING_REQUIRED").is_some_and(|v| v != "0") => Err(e),
        Err(_) => Ok(SigningSetup {
            source: key_file()?.map(SignatureSource::KeyFile),
            required: false,
        }),
        setup => setup,
    }
}

/// Whether the environment sets `SIGNING_REQUIRED` (to anything): it then decides, over what
/// restore recorded.
pub fn required_in_environment() -> bool {
    env_nonempty("SIGNING_REQUIRED").is_some()
}

/// `SIGNING_REQUIRED`'s value: `1` true, `0` or unset false.
///
/// # Errors
/// [`Error::Usage`] for any other value.
pub fn required_value() -> Result<bool> {
    match env_nonempty("SIGNING_REQUIRED").as_deref() {
        None | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(_) => Err(Error::Usage(
            Refusal::Invalid,
            "SIGNING_REQUIRED must be 1 (signatures required) or 0".into(),
        )),
    }
}

/// `SIGNING_KEY_FILE`, made absolute.
fn key_file() -> Result<Option<PathBuf>> {
    let Some(path) = env_nonempty("SIGNING_KEY_FILE").map(PathBuf::from) else {
        return Ok(None);
    };
    Ok(Some(if path.is_absolute() {
        path
    } else {
        current_dir()?.join(path)
    }))
}

/// The signing set-up from `SIGNING_KEY_FILE`, `SIGNING_URL(_FILE)`, `SIGNING_PUBLIC_KEY` and
/// `SIGNING_REQUIRED`.
///
/// # Errors
/// [`Error::Signing`] (exit 11, nothing done) for a set-up that cannot sign: a key file and a
/// service both given, a service without `SIGNING_PUBLIC_KEY`, a malformed public key,
/// `SIGNING_REQUIRED` with nothing to check against; [`Error::Usage`] for a `SIGNING_REQUIRED`
/// other than `0` or `1`, or a service URL that is not one.
pub fn signing() -> Result<SigningSetup> {
    use crate::error::SigningCause;
    let required = required_value()?;
    let key_file = key_file()?;
    let url = url(None, "SIGNING_URL", "SIGNING_URL_FILE")?;
    let public = env_nonempty("SIGNING_PUBLIC_KEY")
        .map(|text| super::public::PublicKey::parse(&text, "SIGNING_PUBLIC_KEY"))
        .transpose()?;
    let source = match (key_file, url) {
        (Some(_), Some(_)) => {
            return Err(Error::signing(
                SigningCause::TwoSources,
                "SIGNING_KEY_FILE",
                None,
                "",
            ));
        }
        (Some(path), None) => Some(SignatureSource::KeyFile(path)),
        (None, Some(url)) => {
            let public = public.ok_or_else(|| {
                Error::signing(
                    SigningCause::PublicKeyMissing,
                    "SIGNING_PUBLIC_KEY",
                    None,
                    "",
                )
            })?;
            Some(SignatureSource::Service {
                url,
                public: Box::new(public),
            })
        }
        (None, None) => None,
    };
    if required && source.is_none() {
        return Err(Error::signing(
            SigningCause::NothingToCheckAgainst,
            "SIGNING_REQUIRED",
            None,
            "",
        ));
    }
    Ok(SigningSetup { source, required })
}
