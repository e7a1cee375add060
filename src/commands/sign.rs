//! The signer a command signs commits with, from the signing set-up (`SIGNING_*`): the key file's
//! key, or the signing service's answer checked against `SIGNING_PUBLIC_KEY`.

use crate::error::{Error, Refusal, Result, SigningCause};
use crate::inputs::{UrlSource, env_nonempty};
use crate::repo::session::{SessionRecord, SigningRecord};
use crate::signing::{KeyFileSigner, PublicKey, Sign};
use crate::signing::{SignatureSource, SigningSetup};
use crate::wire::http::Http;
use crate::wire::signing as service;

/// The variables that name where signatures come from.
const SOURCE_VARS: [&str; 3] = ["SIGNING_KEY_FILE", "SIGNING_URL", "SIGNING_URL_FILE"];

/// Whether the environment names where signatures come from (it then wins over the record).
pub fn source_in_environment() -> bool {
    SOURCE_VARS.iter().any(|v| env_nonempty(v).is_some())
}

/// The signing set-up of a command in the session of `record`: the environment's `SIGNING_*`
/// when one names a source, else the source restore recorded, so `save` in an agent's shell that
/// lacks `SIGNING_*` signs as plain `git commit` there does (never an unsigned commit where
/// restore set signing up).
///
/// # Errors
/// Those of [`crate::signing::signing`] and [`setup_of`].
pub fn setup_in(record: &SessionRecord) -> Result<SigningSetup> {
    match &record.signing {
        // What restore recorded requires signatures itself (`repo::signed::required_key`).
        Some(recorded) if !source_in_environment() => Ok(SigningSetup {
            required: crate::signing::required_value()?,
            ..setup_of(recorded)?
        }),
        _ => crate::signing::signing(),
    }
}

/// The signer of `setup`, `None` when signing is not set up.
pub fn signer(setup: &SigningSetup) -> Option<Box<dyn Sign>> {
    match setup.source.as_ref()? {
        SignatureSource::KeyFile(path) => Some(Box::new(KeyFileSigner {
            path: path.clone(),
            variable: "SIGNING_KEY_FILE",
        })),
        SignatureSource::Service { url, public } => Some(Box::new(ServiceSigner {
            url: url.clone(),
            public: (**public).clone(),
        })),
    }
}

/// Signs through the signing service (CONTRACT "Signing service"): one request per signature,
/// its answer used only once it verifies against the public key.
struct ServiceSigner {
    url: UrlSource,
    public: PublicKey,
}

impl ServiceSigner {
    /// The variable that gave the URL, as failures name it.
    fn variable(&self) -> &'static str {
        match &self.url {
            UrlSource::File { var, .. } => var,
            UrlSource::Fixed(_) => "SIGNING_URL",
        }
    }
}

impl Sign for ServiceSigner {
    fn sign(&self, payload: &[u8]) -> Result<String> {
        let variable = self.variable();
        let http = Http::new()?;
        let key = self.public.key_line();
        let ask = service::Ask {
            payload,
            namespace: crate::signing::NAMESPACE,
            public_key: &key,
        };
        let answer = service::sign(&http, &self.url, &ask).map_err(|e| {
            Error::signing(SigningCause::ServiceFailed, variable, None, e.to_string())
        })?;
        // A service that signs other bytes, with another key or not at all is caught here,
        // before the commit exists.
        self.public.verified(payload, &answer).map_err(|e| {
            e.with_note(&format!(
                "The signature is the signing service's answer ({variable}), which must verify \
                 against SIGNING_PUBLIC_KEY; nothing was committed"
            ))
        })
    }
}

/// The set-up a session record names.
pub fn setup_of(record: &SigningRecord) -> Result<SigningSetup> {
    let source = match record {
        SigningRecord::KeyFile { key_file, .. } => SignatureSource::KeyFile(key_file.into()),
        SigningRecord::Service {
            url_file,
            url,
            public_key,
            ..
        } => {
            let url = match (url_file, url) {
                (Some(path), _) => UrlSource::File {
                    path: path.into(),
                    var: "SIGNING_URL_FILE",
                },
                (None, Some(url)) => UrlSource::Fixed(
                    crate::types::RemoteUrl::parse(url)
                        .map_err(|e| Error::Usage(Refusal::Invalid, format!("SIGNING_URL: {e}")))?,
                ),
                (None, None) => {
                    return Err(Error::signing(
                        SigningCause::ServiceFailed,
                        "SIGNING_URL",
                        None,
                        "is not in git's environment: restore never writes down a URL that \
                         carries credentials, so plain git signs only where SIGNING_URL is set \
                         (export it in the shell that runs git, or restore with \
                         SIGNING_URL_FILE, whose path is recorded)",
                    ));
                }
            };
            SignatureSource::Service {
                url,
                public: Box::new(PublicKey::parse(public_key, "SIGNING_PUBLIC_KEY")?),
            }
        }
    };
    Ok(SigningSetup {
        source: Some(source),
        required: false,
    })
}
