//! The private key of a key file (`SIGNING_KEY_FILE`): read, recognised, and signing with.

use std::fmt;
use std::io::Read as _;
use std::path::Path;

use zeroize::Zeroizing;

use super::format::{self, KeyDescription, NAMESPACE};
use super::public::PublicKey;
use super::rsa_sign;
use crate::error::{Error, Result, SigningCause};

/// The largest key file read: an OpenSSH RSA key of 16384 bits takes about 12 KiB.
pub const MAX_KEY_FILE: usize = 64 * 1024;

/// An unencrypted OpenSSH private key of a type git-session signs with (Ed25519, ECDSA P-256,
/// RSA). Its secret is zeroed when it is dropped (`ssh-key` does it); `Debug` shows only its type
/// and fingerprint.
pub struct SigningKey {
    key: ssh_key::PrivateKey,
    /// The variable that named its file, for messages.
    variable: &'static str,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.describe();
        f.debug_struct("SigningKey")
            .field("type", &d.key_type)
            .field("fingerprint", &d.fingerprint)
            .finish_non_exhaustive()
    }
}

/// Why a key file's content is not a key to sign with, and the particulars.
type Refused = (SigningCause, String);

impl SigningKey {
    /// The key in the file at `path`, named by `variable` (`SIGNING_KEY_FILE`), read afresh;
    /// symlinks are followed (a mounted secret is one).
    ///
    /// # Errors
    /// [`Error::Signing`] naming `variable` and the path: the file missing, empty, unreadable or
    /// too big, or holding an encrypted key, a key of another type or format, a public key, or no
    /// key at all.
    pub fn from_file(path: &Path, variable: &'static str) -> Result<SigningKey> {
        let bytes = read_key_file(path, variable)?;
        let key = Self::from_bytes(&bytes)
            .map_err(|(cause, detail)| Error::signing(cause, variable, Some(path), detail))?;
        Ok(SigningKey { key, variable })
    }

    /// The key in `bytes`, the content of a key file.
    ///
    /// # Errors
    /// As [`SigningKey::from_file`], without the file's own failures.
    fn from_bytes(bytes: &[u8]) -> Result<ssh_key::PrivateKey, Refused> {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Err((
                SigningCause::KeyMalformed,
                "bytes that are not text".to_owned(),
            ));
        };
        let text = text.trim();
        if text.is_empty() {
            return Err((SigningCause::KeyEmpty, String::new()));
        }
        match pem_label(text) {
            Some("OPENSSH PRIVATE KEY") => openssh(text),
            Some(label) => Err(other_pem(label, text)),
            None => Err(not_pem(text)),
        }
    }

    /// A signature of `payload` as `ssh-keygen -Y sign -n git` writes it (what git puts in a
    /// commit's `gpgsig` header): armored, namespace `git`, SHA-512.
    ///
    /// # Errors
    /// [`Error::Signing`] ([`SigningCause::SignFailed`]) when the key cannot sign.
    pub fn sign(&self, payload: &[u8]) -> Result<String> {
        let failed =
            |detail: String| Error::signing(SigningCause::SignFailed, self.variable, None, detail);
        let signature = match self.key.key_data() {
            ssh_key::private::KeypairData::Rsa(keypair) => rsa_sign::sign(keypair, payload),
            _ => self
                .key
                .sign(NAMESPACE, ssh_key::HashAlg::Sha512, payload)
                .map_err(|e| e.to_string()),
        }
        .map_err(failed)?;
        let armored = signature
            .to_pem(ssh_key::LineEnding::LF)
            .map_err(|e| failed(e.to_string()))?;
        // Checked before it is used: a signature that does not verify never reaches a commit. A
        // key file whose public half was altered loads, signs with its private half, and lands
        // here (the fuzzer found one).
        self.public_key()
            .verify(payload, armored.as_bytes())
            .map_err(|e| {
                Error::signing(
                    SigningCause::KeyMalformed,
                    self.variable,
                    None,
                    format!(
                        "its public half does not match its private half, so its signatures do \
                         not verify ({e}): a damaged key file"
                    ),
                )
            })?;
        Ok(armored)
    }

    /// The public half, which checks this key's signatures.
    pub fn public_key(&self) -> PublicKey {
        PublicKey::new(self.key.public_key().clone(), self.variable)
    }

    /// The key's type, size, fingerprint and comment, as `ssh-keygen -l` prints them.
    pub fn describe(&self) -> KeyDescription {
        KeyDescription::of(self.key.public_key())
    }
}

/// The content of the key file at `path`, at most [`MAX_KEY_FILE`] bytes, in a buffer that is
/// never reallocated (no copy of the key is left behind) and zeroed when dropped.
pub(super) fn read_key_file(path: &Path, variable: &'static str) -> Result<Zeroizing<Vec<u8>>> {
    use std::io::ErrorKind;
    let fail = |cause, detail: String| Error::signing(cause, variable, Some(path), detail);
    let unreadable = |e: std::io::Error| match e.kind() {
        ErrorKind::NotFound => fail(SigningCause::KeyMissing, String::new()),
        _ => fail(SigningCause::KeyUnreadable, e.to_string()),
    };
    let mut file = crate::fs::open_regular(path, true).map_err(unreadable)?;
    let mut buf = Zeroizing::new(vec![0u8; MAX_KEY_FILE + 1]);
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(unreadable(e)),
        }
    }
    if len > MAX_KEY_FILE {
        return Err(fail(
            SigningCause::KeyMalformed,
            format!("over {} KiB, more than any key", MAX_KEY_FILE / 1024),
        ));
    }
    // Shortening keeps the allocation: the bytes past `len` are zeroed with the rest.
    buf.truncate(len);
    Ok(buf)
}

/// The label of the PEM block `text` starts with (`OPENSSH PRIVATE KEY`), when it starts with one
/// whose label is a plain one (capitals, digits, spaces: a label made of anything else is not
/// shown).
fn pem_label(text: &str) -> Option<&str> {
    let first = text.lines().next()?.trim_end();
    let label = first.strip_prefix("-----BEGIN ")?.strip_suffix("-----")?;
    let plain = label.len() <= 40
        && label
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ');
    Some(if plain { label } else { "" })
}

/// The OpenSSH private key `text`, when it is one git-session signs with.
fn openssh(text: &str) -> Result<ssh_key::PrivateKey, Refused> {
    let key = ssh_key::PrivateKey::from_openssh(text).map_err(|e| {
        // ssh-key decodes only the types it signs with: one in 256 P-384 keys (a private scalar
        // with a leading zero) fails as "length invalid" instead of naming its type.
        match envelope_algorithm(text).filter(|a| !SIGNED_WITH.contains(&a.as_str())) {
            Some(algorithm) => (
                SigningCause::KeyUnsupported,
                format!("a key of type {algorithm}"),
            ),
            None => (
                SigningCause::KeyMalformed,
                format!("an OpenSSH private key that does not decode: {e}"),
            ),
        }
    })?;
    if key.is_encrypted() {
        return Err((SigningCause::KeyEncrypted, String::new()));
    }
    format::supported(key.public_key().key_data())
        .map_err(|detail| (SigningCause::KeyUnsupported, detail))?;
    Ok(key)
}

/// The algorithms of the keys git-session signs with ([`format::supported`]), as OpenSSH names them.
const SIGNED_WITH: [&str; 3] = ["ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"];

/// The algorithm the public key of the OpenSSH private key `text` names (`PROTOCOL.key`: the
/// `openssh-key-v1` envelope holds the public key in the clear, before the private part), when it
/// is a plain name (printable ASCII, at most 64 bytes: it is shown).
fn envelope_algorithm(text: &str) -> Option<String> {
    use base64::Engine as _;
    let body: Zeroizing<String> = Zeroizing::new(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("-----"))
            .collect(),
    );
    let mut bytes = Zeroizing::new(vec![0u8; body.len()]);
    let len = base64::engine::general_purpose::STANDARD
        .decode_slice(body.as_bytes(), &mut bytes)
        .ok()?;
    let mut at = bytes[..len].strip_prefix(b"openssh-key-v1\0")?;
    let string = |at: &mut &[u8]| -> Option<Vec<u8>> {
        let (n, rest) = at.split_first_chunk::<4>()?;
        let (s, rest) = rest.split_at_checked(u32::from_be_bytes(*n) as usize)?;
        *at = rest;
        Some(s.to_vec())
    };
    // The cipher, the key derivation and its options, then the number of keys.
    for _ in 0..3 {
        string(&mut at)?;
    }
    at = at.get(4..)?;
    let public = string(&mut at)?;
    let algorithm = string(&mut public.as_slice())?;
    let plain = algorithm.len() <= 64 && algorithm.iter().all(u8::is_ascii_graphic);
    plain.then(|| String::from_utf8(algorithm).ok()).flatten()
}

/// Why a PEM block labelled `label` is not a key to sign with.
fn other_pem(label: &str, text: &str) -> Refused {
    match label {
        "SSH2 PUBLIC KEY" | "PUBLIC KEY" | "RSA PUBLIC KEY" => (
            SigningCause::KeyIsPublic,
            format!("a PEM block labelled {label}"),
        ),
        "ENCRYPTED PRIVATE KEY" => (SigningCause::KeyEncrypted, String::new()),
        // OpenSSL's PEM form of an encrypted key says so in a header.
        _ if label.ends_with("PRIVATE KEY") && text.contains("Proc-Type: 4,ENCRYPTED") => {
            (SigningCause::KeyEncrypted, String::new())
        }
        _ if label.ends_with("PRIVATE KEY") => (
            SigningCause::KeyUnsupported,
            format!("a private key in PEM form ({label}) rather than OpenSSH's"),
        ),
        "" => (
            SigningCause::KeyMalformed,
            "a PEM block of another kind".to_owned(),
        ),
        _ => (
            SigningCause::KeyMalformed,
            format!("a PEM block labelled {label}"),
        ),
    }
}

/// Why `text`, no PEM block, is not a key to sign with: a public key's line, or not a key.
fn not_pem(text: &str) -> Refused {
    let first = text.lines().next().unwrap_or_default().trim();
    if let Ok(public) = ssh_key::PublicKey::from_openssh(first) {
        let d = KeyDescription::of(&public);
        return (
            SigningCause::KeyIsPublic,
            format!("{} {}", d.key_type, d.fingerprint),
        );
    }
    let algorithm = first.split_ascii_whitespace().next().unwrap_or_default();
    if algorithm.ends_with("-cert-v01@openssh.com") {
        return (SigningCause::KeyIsPublic, "a certificate".to_owned());
    }
    // RFC 4716's form, which `ssh-keygen -e` writes.
    if first == "---- BEGIN SSH2 PUBLIC KEY ----" {
        return (SigningCause::KeyIsPublic, "RFC 4716's form".to_owned());
    }
    (
        SigningCause::KeyMalformed,
        "text that is no key: an OpenSSH private key begins \"-----BEGIN OPENSSH PRIVATE \
         KEY-----\""
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(text: &str) -> SigningCause {
        SigningKey::from_bytes(text.as_bytes()).unwrap_err().0
    }

    /// An `openssh-key-v1` envelope whose public key names `algorithm`, its private part garbage.
    fn envelope(algorithm: &str) -> String {
        use base64::Engine as _;
        let string = |s: &[u8]| [&(s.len() as u32).to_be_bytes()[..], s].concat();
        let public = string(&[string(algorithm.as_bytes()), string(b"public bytes")].concat());
        let bytes = [
            &b"openssh-key-v1\0"[..],
            &string(b"none"),
            &string(b"none"),
            &string(b""),
            &1u32.to_be_bytes(),
            &public,
            &string(b"not a private part"),
        ]
        .concat();
        let body = base64::engine::general_purpose::STANDARD.encode(bytes);
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n")
    }

    #[test]
    fn a_key_that_does_not_decode_is_named_by_its_type_when_it_is_no_type_signed_with() {
        let refused =
            |algorithm| SigningKey::from_bytes(envelope(algorithm).as_bytes()).unwrap_err();
        let (cause, detail) = refused("ecdsa-sha2-nistp384");
        assert_eq!(cause, SigningCause::KeyUnsupported);
        assert_eq!(detail, "a key of type ecdsa-sha2-nistp384");
        for algorithm in SIGNED_WITH
            .into_iter()
            .chain(["\x1b[31mred", &"x".repeat(65)])
        {
            let (cause, detail) = refused(algorithm);
            assert_eq!(cause, SigningCause::KeyMalformed, "{algorithm}: {detail}");
            assert!(detail.contains("does not decode"), "{detail}");
        }
    }

    #[test]
    fn text_that_is_no_private_key_is_refused_for_its_cause() {
        use SigningCause::*;
        assert_eq!(cause(""), KeyEmpty);
        assert_eq!(cause(" \n\t\r\n"), KeyEmpty);
        assert_eq!(
            SigningKey::from_bytes(b"\xff\xfe").unwrap_err().0,
            KeyMalformed
        );
        assert_eq!(cause("hello"), KeyMalformed);
        assert_eq!(cause("-----BEGIN OPENSSH PRIVATE KEY-----"), KeyMalformed);
        assert_eq!(
            cause("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"),
            KeyMalformed
        );
        assert_eq!(
            cause("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----"),
            KeyUnsupported
        );
        assert_eq!(
            cause("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"),
            KeyUnsupported
        );
        assert_eq!(
            cause(
                "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END RSA \
                 PRIVATE KEY-----"
            ),
            KeyEncrypted
        );
        assert_eq!(
            cause(
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----"
            ),
            KeyEncrypted
        );
        assert_eq!(
            cause("---- BEGIN SSH2 PUBLIC KEY ----\nAAAA\n---- END SSH2 PUBLIC KEY ----"),
            KeyIsPublic
        );
        assert_eq!(
            cause("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"),
            KeyIsPublic
        );
        assert_eq!(
            cause("ssh-ed25519-cert-v01@openssh.com AAAA… x"),
            KeyIsPublic
        );
    }

    #[test]
    fn a_public_key_line_is_named_by_its_type_and_fingerprint() {
        let line =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDFy+VJcbUYVfhpwcPBEenhvDwnKjU9KlEIFdkQ85WGl me@x";
        let (cause, detail) = SigningKey::from_bytes(line.as_bytes()).unwrap_err();
        assert_eq!(cause, SigningCause::KeyIsPublic);
        // As `ssh-keygen -l` prints it.
        assert_eq!(
            detail,
            "ED25519 SHA256:qyVD2fKaBxNoEO5Iy6BB38uYHzR8LA76I7+tBOaQRkA"
        );
    }

    #[test]
    fn a_pem_label_is_shown_only_when_plain() {
        assert_eq!(
            pem_label("-----BEGIN OPENSSH PRIVATE KEY-----\nx"),
            Some("OPENSSH PRIVATE KEY")
        );
        assert_eq!(pem_label("-----BEGIN a\x1b[2J-----\nx"), Some(""));
        assert_eq!(
            pem_label(&format!("-----BEGIN {}-----", "A".repeat(41))),
            Some("")
        );
        assert_eq!(pem_label("BEGIN X"), None);
        let (_, detail) = other_pem("", "");
        assert!(!detail.contains('\x1b'));
    }
}
