//! A public key that checks SSH signatures: `SIGNING_PUBLIC_KEY` against a signing service's
//! answer, or a [`SigningKey`](super::SigningKey)'s own half.

use super::format::{self, KeyDescription, NAMESPACE};
use crate::error::{Error, Result, SigningCause};

/// An OpenSSH public key of a type git-session signs with, and the variable that gave it (named
/// by every failure).
#[derive(Debug, Clone)]
pub struct PublicKey {
    key: ssh_key::PublicKey,
    variable: &'static str,
}

impl PublicKey {
    pub(super) fn new(key: ssh_key::PublicKey, variable: &'static str) -> Self {
        PublicKey { key, variable }
    }

    /// The key in `text`, OpenSSH's one-line form (`ssh-ed25519 AAAA… comment`, as in a `.pub`
    /// file), given by `variable`.
    ///
    /// # Errors
    /// [`Error::Signing`] naming `variable`: [`SigningCause::PublicKeyMalformed`] for text that is
    /// not such a key, [`SigningCause::KeyUnsupported`] for a key of another type.
    pub fn parse(text: &str, variable: &'static str) -> Result<Self> {
        let fail = |cause, detail: String| Error::signing(cause, variable, None, detail);
        let key = ssh_key::PublicKey::from_openssh(text.trim())
            .map_err(|e| fail(SigningCause::PublicKeyMalformed, e.to_string()))?;
        format::supported(key.key_data())
            .map_err(|detail| fail(SigningCause::KeyUnsupported, detail))?;
        Ok(PublicKey::new(key, variable))
    }

    /// The key `armored` (`-----BEGIN SSH SIGNATURE-----` …) says made it, named `variable`;
    /// nothing is checked yet ([`PublicKey::verify`] does).
    ///
    /// # Errors
    /// [`Error::Signing`]: [`SigningCause::SignatureMalformed`] (not an armored SSH signature),
    /// [`SigningCause::KeyUnsupported`] for a key of another type.
    pub fn of_signature(armored: &[u8], variable: &'static str) -> Result<Self> {
        let fail = |cause, detail: String| Error::signing(cause, variable, None, detail);
        let signature = ssh_key::SshSig::from_pem(armored)
            .map_err(|e| fail(SigningCause::SignatureMalformed, e.to_string()))?;
        let key = ssh_key::PublicKey::from(signature.public_key().clone());
        format::supported(key.key_data())
            .map_err(|detail| fail(SigningCause::KeyUnsupported, detail))?;
        Ok(PublicKey::new(key, variable))
    }

    /// Check that `armored` (`-----BEGIN SSH SIGNATURE-----` …) is this key's signature of
    /// `payload` in namespace `git`, as `ssh-keygen -Y verify -n git` does.
    ///
    /// # Errors
    /// [`Error::Signing`] naming the variable: [`SigningCause::SignatureMalformed`] (not an
    /// armored SSH signature), [`SigningCause::SignatureByAnotherKey`],
    /// [`SigningCause::SignatureInvalid`] (another namespace, other bytes, altered).
    pub fn verify(&self, payload: &[u8], armored: &[u8]) -> Result<()> {
        let fail = |cause, detail: String| Error::signing(cause, self.variable, None, detail);
        let signature = ssh_key::SshSig::from_pem(armored)
            .map_err(|e| fail(SigningCause::SignatureMalformed, e.to_string()))?;
        if !canonical(armored, &signature) {
            return Err(fail(
                SigningCause::SignatureMalformed,
                "its bytes are not those of the signature they decode to (a wrong length)"
                    .to_owned(),
            ));
        }
        if signature.namespace() != NAMESPACE {
            return Err(fail(
                SigningCause::SignatureInvalid,
                format!(
                    "it was made for the namespace \"{}\", not \"{NAMESPACE}\"",
                    signature.namespace()
                ),
            ));
        }
        if signature.public_key() != self.key.key_data() {
            let other = ssh_key::PublicKey::from(signature.public_key().clone());
            let d = KeyDescription::of(&other);
            return Err(fail(
                SigningCause::SignatureByAnotherKey,
                format!("{} {}", d.key_type, d.fingerprint),
            ));
        }
        self.key
            .verify(NAMESPACE, payload, &signature)
            .map_err(|e| {
                fail(
                    SigningCause::SignatureInvalid,
                    format!("it is not a signature of these bytes ({e})"),
                )
            })
    }

    /// `armored` as [`PublicKey::verify`] checks it, re-armored as a key file's signature is (LF
    /// line ends): what goes in a commit, whatever line ends or wrapping it came with.
    ///
    /// # Errors
    /// As [`PublicKey::verify`].
    pub fn verified(&self, payload: &[u8], armored: &[u8]) -> Result<String> {
        self.verify(payload, armored)?;
        ssh_key::SshSig::from_pem(armored)
            .and_then(|s| s.to_pem(ssh_key::LineEnding::LF))
            .map_err(|e| {
                Error::signing(
                    SigningCause::SignatureMalformed,
                    self.variable,
                    None,
                    e.to_string(),
                )
            })
    }

    /// The key's type and base64, without its comment (`ssh-ed25519 AAAA…`): the key itself.
    pub fn key_line(&self) -> String {
        let line = self.to_openssh();
        line.split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The key in OpenSSH's one-line form, with its comment (what `user.signingkey` and an
    /// allowed-signers file hold).
    pub fn to_openssh(&self) -> String {
        // Encoding a key that decoded cannot fail; the fingerprint is never empty either way.
        self.key.to_openssh().unwrap_or_default()
    }

    /// The key's type, size, fingerprint and comment, as `ssh-keygen -l` prints them.
    pub fn describe(&self) -> KeyDescription {
        KeyDescription::of(&self.key)
    }

    /// The variable that gave the key (`SIGNING_PUBLIC_KEY`, or `SIGNING_KEY_FILE` for a key
    /// file's public half).
    pub fn variable(&self) -> &'static str {
        self.variable
    }
}

/// Whether `armored` is the one encoding of `signature`, as `ssh-keygen` requires: `ssh-key`
/// 0.6.7 reads a signature whose blob's length prefix is wrong, which `ssh-keygen -Y verify` and
/// so git refuse.
fn canonical(armored: &[u8], signature: &ssh_key::SshSig) -> bool {
    let Ok(ours) = signature.to_pem(ssh_key::LineEnding::LF) else {
        return false;
    };
    pem_body(armored).is_some_and(|b| Some(b) == pem_body(ours.as_bytes()))
}

/// The bytes of the PEM block `armored` (already read by `ssh-key`), however its lines are
/// wrapped.
fn pem_body(armored: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let text = std::str::from_utf8(armored).ok()?;
    let body: String = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}
