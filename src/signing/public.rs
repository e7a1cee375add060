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
        // `ssh-keygen -Y verify` checks every signature over an empty reserved field, whatever
        // the blob holds; `ssh-key` checks it over the blob's: one that is not empty would pass
        // here and fail in git (an "Unverified" commit).
        if !signature.reserved().is_empty() {
            return Err(fail(
                SigningCause::SignatureMalformed,
                "its reserved field is not empty, so ssh-keygen and git never verify it".to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::signature::Signer as _;
    use ssh_key::sha2::{Digest as _, Sha512};

    /// `bytes` as an SSH string: its length (4 bytes, big-endian), then itself.
    fn string(bytes: &[u8]) -> Vec<u8> {
        [&(bytes.len() as u32).to_be_bytes()[..], bytes].concat()
    }

    /// An armored SSHSIG of `payload` in namespace `git` whose reserved field holds `reserved`,
    /// made over that field as `ssh-key` checks it (OpenSSH signs and checks with it empty).
    fn signature_with_reserved(key: &ssh_key::private::Ed25519Keypair, reserved: &[u8]) -> String {
        use base64::Engine as _;
        let hash = Sha512::digest(PAYLOAD);
        let signed = [
            &b"SSHSIG"[..],
            &string(NAMESPACE.as_bytes()),
            &string(reserved),
            &string(b"sha512"),
            &string(&hash),
        ]
        .concat();
        let signature = key.sign(&signed);
        let public = [string(b"ssh-ed25519"), string(key.public.as_ref())].concat();
        let sig = [string(b"ssh-ed25519"), string(signature.as_bytes())].concat();
        let blob = [
            &b"SSHSIG"[..],
            &1u32.to_be_bytes(),
            &string(&public),
            &string(NAMESPACE.as_bytes()),
            &string(reserved),
            &string(b"sha512"),
            &string(&sig),
        ]
        .concat();
        let body = base64::engine::general_purpose::STANDARD.encode(blob);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(70)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN SSH SIGNATURE-----\n{}\n-----END SSH SIGNATURE-----\n",
            lines.join("\n")
        )
    }

    const PAYLOAD: &[u8] = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nmessage\n";

    #[test]
    fn a_signature_with_a_reserved_field_is_refused_as_ssh_keygen_refuses_it() {
        let key = ssh_key::private::Ed25519Keypair::from_seed(&[7; 32]);
        let public = PublicKey::new(
            ssh_key::PublicKey::from(ssh_key::public::KeyData::from(key.public)),
            "SIGNING_PUBLIC_KEY",
        );
        // Built right: with the field empty, as OpenSSH writes it, the signature verifies.
        let plain = signature_with_reserved(&key, b"");
        public.verify(PAYLOAD, plain.as_bytes()).unwrap();
        // ssh-keygen -Y verify (so git, GitHub) checks the signature over an empty field
        // whatever the blob holds: one made over anything else never verifies there.
        let reserved = signature_with_reserved(&key, b"x");
        let err = public.verify(PAYLOAD, reserved.as_bytes()).unwrap_err();
        assert!(
            matches!(&err, Error::Signing(s) if s.cause == SigningCause::SignatureMalformed),
            "{err:?}"
        );
    }
}
