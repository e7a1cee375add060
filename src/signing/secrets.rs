//! The forms in which the private key of a key file must never be committed or pushed: what the
//! secret scan of `save` and `push` looks for besides the session tokens.
//!
//! An OpenSSH private key file is the base64 of a container (`PROTOCOL.key` in OpenSSH): a magic
//! string, the cipher, the KDF, the public key, then a private section — two check numbers, the
//! key type, the public key again, the private key, a comment, padding. The lines of the file
//! that encode only the container's start and the public key are the same in every key of the
//! type (or public anyway), so they are no secret. The secrets are: each line of the file that
//! encodes bytes of the private key itself, and those bytes (the Ed25519 seed; the ECDSA scalar;
//! the RSA `d`, `iqmp`, `p`, `q`) in hex and in base64 at each of the three alignments (so the
//! key's text found pasted anywhere, wrapped otherwise, indented, or its raw bytes encoded again,
//! is found). For a passphrase-protected key the whole private section counts.

use zeroize::Zeroizing;

use super::key::read_key_file;

/// A line shorter than this (the file's last one, often) is no form of its own: too short to be
/// told from other text.
const MIN_LINE: usize = 16;

/// The secret forms of the private key in the file at `path`; none when it holds no OpenSSH
/// private key that can be read (no file, another kind of key).
pub fn key_file_forms(path: &std::path::Path) -> Zeroizing<Vec<String>> {
    let mut forms = Zeroizing::new(Vec::new());
    let Ok(bytes) = read_key_file(path, "SIGNING_KEY_FILE") else {
        return forms;
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return forms;
    };
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| *l != "-----BEGIN OPENSSH PRIVATE KEY-----")
        .skip(1)
        .take_while(|l| !l.starts_with("-----END "))
        .filter(|l| !l.is_empty())
        .collect();
    let body = Zeroizing::new(lines.concat());
    use base64::Engine as _;
    let Ok(blob) = base64::engine::general_purpose::STANDARD.decode(body.as_bytes()) else {
        return forms;
    };
    let blob = Zeroizing::new(blob);
    let ranges = private_ranges(&blob).unwrap_or_default();
    // Each line that encodes a bit of the private key: base64 character `i` holds bits 6i to
    // 6i+5 of the blob.
    let mut at = 0;
    for line in &lines {
        let (first, last) = (at * 6 / 8, ((at + line.len()) * 6).saturating_sub(1) / 8);
        at += line.len();
        if line.len() >= MIN_LINE && ranges.iter().any(|r| first < r.end && last >= r.start) {
            forms.push((*line).to_owned());
        }
    }
    for range in &ranges {
        let raw = &blob[range.clone()];
        // An mpint's leading zero bytes are no part of the number.
        let start = raw.iter().position(|b| *b != 0).unwrap_or(raw.len());
        encodings(&raw[start..], &mut forms);
    }
    forms
}

/// `secret` in hex (both cases) and its base64 cores (see
/// [`crate::types::RemoteUrl::secret_forms`]: the characters that hold only its bits, at each of
/// the three alignments, in both alphabets), every buffer zeroed.
fn encodings(secret: &[u8], forms: &mut Vec<String>) {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    if secret.len() < 8 {
        return;
    }
    for upper in [false, true] {
        let mut hex = String::with_capacity(secret.len() * 2);
        for b in secret {
            for nibble in [b >> 4, b & 0xf] {
                let c = char::from_digit(u32::from(nibble), 16).unwrap_or('0');
                hex.push(if upper { c.to_ascii_uppercase() } else { c });
            }
        }
        forms.push(hex);
    }
    for align in 0..3 {
        let mut data = Zeroizing::new(vec![0u8; align]);
        data.extend_from_slice(secret);
        let skip = [0, 2, 3][align];
        let end_in_group = data.len() % 3 != 0;
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let text = Zeroizing::new(engine.encode(data.as_slice()));
            let end = text.len() - usize::from(end_in_group);
            if end > skip {
                forms.push(text[skip..end].to_owned());
            }
        }
    }
}

/// Reads the container's length-prefixed fields.
struct Fields<'a> {
    blob: &'a [u8],
    at: usize,
}

impl Fields<'_> {
    /// The next `uint32`.
    fn u32(&mut self) -> Option<usize> {
        let bytes = self.blob.get(self.at..self.at + 4)?;
        self.at += 4;
        Some(u32::from_be_bytes(bytes.try_into().ok()?) as usize)
    }

    /// The next `string` (or `mpint`): where its content lies in the blob.
    fn string(&mut self) -> Option<std::ops::Range<usize>> {
        let len = self.u32()?;
        let range = self.at..self.at.checked_add(len)?;
        self.blob.get(range.clone())?;
        self.at = range.end;
        Some(range)
    }
}

/// Where the private key's bytes lie in the decoded container `blob`.
fn private_ranges(blob: &[u8]) -> Option<Vec<std::ops::Range<usize>>> {
    const MAGIC: &[u8] = b"openssh-key-v1\0";
    if !blob.starts_with(MAGIC) {
        return None;
    }
    let mut f = Fields {
        blob,
        at: MAGIC.len(),
    };
    let cipher = f.string()?;
    let _kdf = f.string()?;
    let _kdf_options = f.string()?;
    if f.u32()? != 1 {
        return None;
    }
    let _public = f.string()?;
    let section = f.string()?;
    if &blob[cipher] != b"none" {
        // Encrypted: the whole private section is the secret.
        return Some(vec![section]);
    }
    f.at = section.start + 8; // the two check numbers
    let key_type = f.string()?;
    Some(match &blob[key_type] {
        b"ssh-ed25519" => {
            let _public = f.string()?;
            let pair = f.string()?;
            // The seed; the public key follows it.
            vec![pair.start..pair.start + (pair.len() / 2)]
        }
        t if t.starts_with(b"ecdsa-sha2-") => {
            let _curve = f.string()?;
            let _point = f.string()?;
            vec![f.string()?]
        }
        b"ssh-rsa" => {
            let _n = f.string()?;
            let _e = f.string()?;
            vec![f.string()?, f.string()?, f.string()?, f.string()?]
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new key of `kind` made by `ssh-keygen` in `dir`: its file's text and its public line.
    fn keygen(dir: &std::path::Path, kind: &str) -> (std::path::PathBuf, String, String) {
        let path = dir.join(kind);
        let out = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", kind, "-N", "", "-C", "test@local", "-f"])
            .arg(&path)
            .output()
            .expect("ssh-keygen (openssh-client) must be installed");
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
        (path, text, public)
    }

    /// The private key's own bytes, as `ssh-key` reads them.
    fn private_bytes(text: &str) -> Vec<Vec<u8>> {
        use ssh_key::private::KeypairData;
        let key = ssh_key::PrivateKey::from_openssh(text).unwrap();
        let positive = |m: &ssh_key::Mpint| m.as_positive_bytes().unwrap().to_vec();
        match key.key_data() {
            KeypairData::Ed25519(k) => vec![k.private.to_bytes().to_vec()],
            KeypairData::Ecdsa(k) => vec![k.private_key_bytes().to_vec()],
            KeypairData::Rsa(k) => vec![
                positive(&k.private.d),
                positive(&k.private.iqmp),
                positive(&k.private.p),
                positive(&k.private.q),
            ],
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_lines_and_encodings_of_the_private_key_are_secret_and_nothing_public() {
        let dir = tempfile::tempdir().unwrap();
        for kind in ["ed25519", "ecdsa", "rsa"] {
            let (path, text, public) = keygen(dir.path(), kind);
            let forms = key_file_forms(&path);
            let lines: Vec<&str> = text.lines().collect();
            let body: String = lines[1..lines.len() - 1].concat();
            // The container's start (the same in every key) and the public key hold none.
            assert!(!forms.iter().any(|f| f == lines[1]), "{kind}");
            assert!(
                !forms.iter().any(|f| public.contains(f.as_str())),
                "{kind}: a form is in the public key's line"
            );
            // Some line of the file, and the private bytes in hex and in base64 as the file
            // holds them (whatever its wrapping).
            assert!(lines.iter().any(|l| forms.iter().any(|f| f == l)), "{kind}");
            for secret in private_bytes(&text) {
                let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
                assert!(forms.contains(&hex), "{kind}");
                assert!(forms.contains(&hex.to_uppercase()), "{kind}");
            }
            assert!(
                forms
                    .iter()
                    .any(|f| f.len() > 30 && body.contains(f.as_str())),
                "{kind}"
            );
        }
    }

    #[test]
    fn no_key_no_forms() {
        assert!(key_file_forms(std::path::Path::new("/nonexistent/key")).is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "hello\n").unwrap();
        assert!(key_file_forms(&path).is_empty());
    }
}
