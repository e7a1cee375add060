//! The signer a command signs commits with, from the signing set-up (`SIGNING_*`): the key file's
//! key, or the signing service's answer checked against `SIGNING_PUBLIC_KEY`.

use crate::error::{Error, Result, SigningCause};
use crate::inputs::UrlSource;
use crate::signing::{KeyFileSigner, PublicKey, Sign};
use crate::signing::{SignatureSource, SigningSetup};
use crate::wire::http::Http;
use crate::wire::signing as service;

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
