//! Commit signing: the SSH signature (SSHSIG) git writes into a commit's `gpgsig` header for
//! `gpg.format = ssh`, made and checked with RustCrypto's `ssh-key` (no cryptography here).
//!
//! [`SigningKey`] is an OpenSSH private key read from a file (`SIGNING_KEY_FILE`) at each use; it
//! signs a payload as `ssh-keygen -Y sign -n git` does (namespace `git`, SHA-512). [`PublicKey`]
//! checks such a signature against one key (a signing service's answer against
//! `SIGNING_PUBLIC_KEY`). `setup` reads the `SIGNING_*` variables into a [`SigningSetup`]; the
//! rest reads no environment, its callers name the variable.
//! Every failure is an [`Error::Signing`](crate::error::Error::Signing) (exit 11) naming its
//! [`SigningCause`](crate::error::SigningCause) and the variable; the key's bytes are zeroed
//! after use and never reach a message or a `Debug`.

mod commit;
mod format;
mod key;
mod public;
mod rsa_sign;
mod secrets;
mod setup;

pub use commit::split_commit;
pub use format::{KeyDescription, NAMESPACE};
pub use key::{MAX_KEY_FILE, SigningKey};
pub use public::PublicKey;
pub use setup::{
    SignatureSource, SigningSetup, for_push, required_in_environment, required_value, signing,
};

use crate::error::Result;

/// What signs a commit: the payload (the commit object without its signature header) in, the
/// armored SSH signature out, verified before it is returned.
pub trait Sign {
    /// The armored signature of `payload` (`-----BEGIN SSH SIGNATURE-----` …), namespace `git`.
    ///
    /// # Errors
    /// [`Error::Signing`](crate::error::Error::Signing) (exit 11) when no verified signature
    /// can be had.
    fn sign(&self, payload: &[u8]) -> Result<String>;
}

/// Signs with the key in a file, read afresh at each signature (a rotated key is used at once).
#[derive(Debug, Clone)]
pub struct KeyFileSigner {
    /// The key file's path.
    pub path: std::path::PathBuf,
    /// The variable that named it (`SIGNING_KEY_FILE`).
    pub variable: &'static str,
}

impl Sign for KeyFileSigner {
    fn sign(&self, payload: &[u8]) -> Result<String> {
        SigningKey::from_file(&self.path, self.variable)?.sign(payload)
    }
}

/// The key that made the armored signature `armored`, as `ssh-keygen -l` describes it; `None`
/// when it is not an SSH signature.
pub fn signed_by(armored: &str) -> Option<KeyDescription> {
    let signature = ssh_key::SshSig::from_pem(armored).ok()?;
    let key = ssh_key::PublicKey::from(signature.public_key().clone());
    Some(KeyDescription::of(&key))
}

/// The header a signature goes in: `gpgsig` in a SHA-1 repository, `gpgsig-sha256` in a
/// SHA-256 one (as git writes them).
pub fn header_name(format: crate::types::Format) -> &'static str {
    match format {
        crate::types::Format::Sha256 => "gpgsig-sha256",
        _ => "gpgsig",
    }
}
