//! What git and OpenSSH fix: the namespace of commit signatures, the key types git-session signs
//! with, and a key as `ssh-keygen -l` describes it.

use std::fmt;

/// The SSHSIG namespace git signs commits and tags in.
pub const NAMESPACE: &str = "git";

/// A key as `ssh-keygen -l` prints it: `256 SHA256:… comment (ED25519)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDescription {
    /// The key's size in bits (the modulus for RSA, the curve for ECDSA, 256 for Ed25519).
    pub bits: u32,
    /// `SHA256:` and the unpadded base64 of the SHA-256 of the public key blob.
    pub fingerprint: String,
    /// The key's comment (`user@host` by default), empty when it has none.
    pub comment: String,
    /// The type as `ssh-keygen -l` names it: `ED25519`, `ECDSA`, `RSA`…
    pub key_type: &'static str,
}

impl KeyDescription {
    pub(super) fn of(key: &ssh_key::PublicKey) -> Self {
        use ssh_key::public::KeyData;
        let (bits, key_type) = match key.key_data() {
            KeyData::Ed25519(_) => (256, "ED25519"),
            KeyData::Ecdsa(k) => (curve_bits(k.curve()), "ECDSA"),
            KeyData::Rsa(k) => (mpint_bits(&k.n), "RSA"),
            KeyData::Dsa(k) => (mpint_bits(&k.p), "DSA"),
            KeyData::SkEd25519(_) => (256, "ED25519-SK"),
            KeyData::SkEcdsaSha2NistP256(_) => (256, "ECDSA-SK"),
            _ => (0, "UNKNOWN"),
        };
        KeyDescription {
            bits,
            fingerprint: key.fingerprint(ssh_key::HashAlg::Sha256).to_string(),
            comment: key.comment().to_owned(),
            key_type,
        }
    }
}

impl fmt::Display for KeyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let comment = if self.comment.is_empty() {
            "no comment"
        } else {
            &self.comment
        };
        write!(
            f,
            "{} {} {comment} ({})",
            self.bits, self.fingerprint, self.key_type
        )
    }
}

fn curve_bits(curve: ssh_key::EcdsaCurve) -> u32 {
    match curve {
        ssh_key::EcdsaCurve::NistP256 => 256,
        ssh_key::EcdsaCurve::NistP384 => 384,
        ssh_key::EcdsaCurve::NistP521 => 521,
    }
}

/// The size in bits of a positive multiple-precision integer (an RSA modulus).
fn mpint_bits(n: &ssh_key::Mpint) -> u32 {
    let bytes = n.as_positive_bytes().unwrap_or_default();
    match bytes.first() {
        Some(first) => (bytes.len() as u32) * 8 - first.leading_zeros(),
        None => 0,
    }
}

/// The smallest RSA modulus `ssh-key` verifies signatures of (and GitHub accepts).
pub const MIN_RSA_BITS: u32 = 2048;

/// Whether git-session signs with (and checks signatures of) keys like `key`: Ed25519, ECDSA
/// P-256, RSA of at least [`MIN_RSA_BITS`]; else what the key is, for the refusal.
pub(super) fn supported(key: &ssh_key::public::KeyData) -> Result<(), String> {
    use ssh_key::public::KeyData;
    match key {
        KeyData::Ed25519(_) => Ok(()),
        KeyData::Ecdsa(k) if k.curve() == ssh_key::EcdsaCurve::NistP256 => Ok(()),
        // A smaller one signs, but its signatures verify nowhere (`ssh-key`, GitHub).
        KeyData::Rsa(k) if mpint_bits(&k.n) < MIN_RSA_BITS => Err(format!(
            "a {}-bit RSA key (RSA keys need at least {MIN_RSA_BITS} bits)",
            mpint_bits(&k.n)
        )),
        KeyData::Rsa(_) => Ok(()),
        other => Err(format!("a key of type {}", other.algorithm())),
    }
}
