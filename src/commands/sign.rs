//! The signer a command signs commits with, from the signing set-up (`SIGNING_*`): the key file's
//! key, or the signing service's answer checked against `SIGNING_PUBLIC_KEY`.

use crate::error::{Error, Result, SigningCause};
use crate::signing::{KeyFileSigner, Sign};
use crate::signing::{SignatureSource, SigningSetup};

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

/// Signs through the signing service; every answer is checked against the public key.
struct ServiceSigner {
    #[allow(dead_code)]
    url: crate::inputs::UrlSource,
    #[allow(dead_code)]
    public: crate::signing::PublicKey,
}

impl Sign for ServiceSigner {
    fn sign(&self, _payload: &[u8]) -> Result<String> {
        // The HTTP exchange is the next increment; until then a service set up refuses to sign.
        Err(Error::signing(
            SigningCause::ServiceFailed,
            "SIGNING_URL",
            None,
            "is not supported by this build yet",
        ))
    }
}
