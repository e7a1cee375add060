//! Git LFS pointers (git-lfs `docs/spec.md`): what a pointer file names, and its object id.

/// The largest pointer file git-lfs reads as one (`spec.md`: "< 1024 bytes").
pub const MAX_POINTER_BYTES: u64 = 1023;

/// An LFS object id: the SHA-256 of the content.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oid([u8; 32]);

impl Oid {
    /// 64 lower-case hex digits, as pointers write them; anything else is `None`.
    pub fn from_hex(hex: &str) -> Option<Oid> {
        let b = hex.as_bytes();
        if b.len() != 64 || !b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in b.chunks(2).enumerate() {
            let nib = |c: u8| if c <= b'9' { c - b'0' } else { c - b'a' + 10 };
            out[i] = nib(pair[0]) << 4 | nib(pair[1]);
        }
        Some(Oid(out))
    }

    /// The id of `data`.
    pub fn of(data: &[u8]) -> Oid {
        Oid::of_digest(&ring::digest::digest(&ring::digest::SHA256, data))
    }

    /// The id of a finished SHA-256 digest.
    pub fn of_digest(digest: &ring::digest::Digest) -> Oid {
        let mut out = [0u8; 32];
        out.copy_from_slice(digest.as_ref());
        Oid(out)
    }
}

impl std::fmt::Display for Oid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Oid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Oid({self})")
    }
}

/// What an LFS pointer file names: the object's id and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pointer {
    /// The SHA-256 of the content.
    pub oid: Oid,
    /// The content's size in bytes.
    pub size: u64,
}

impl Pointer {
    /// Parse a pointer file as git-lfs writes it: the version line, `oid sha256:…`, `size …`, each
    /// ending in a line feed, and nothing else. A pointer with extensions (`ext-…` lines, which
    /// run programs) or in another form is not one: the file is left as it is.
    pub fn parse(data: &[u8]) -> Option<Pointer> {
        if data.len() as u64 > MAX_POINTER_BYTES {
            return None;
        }
        let text = std::str::from_utf8(data).ok()?.strip_suffix('\n')?;
        let mut lines = text.split('\n');
        let version = lines.next()?;
        if version != "version https://git-lfs.github.com/spec/v1"
            && version != "version https://hawser.github.com/spec/v1"
        {
            return None;
        }
        let oid = Oid::from_hex(lines.next()?.strip_prefix("oid sha256:")?)?;
        let size = lines.next()?.strip_prefix("size ")?;
        if lines.next().is_some() || size.is_empty() || !size.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        Some(Pointer {
            oid,
            size: size.parse().ok()?,
        })
    }

    /// The pointer file for this object, as git-lfs writes it.
    pub fn encode(&self) -> String {
        format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
            self.oid, self.size
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OID: &str = "baee8baa2261aabb4f9dbc35e1bd31a865134836ccf7edf4638c035cfe12e77e";

    #[test]
    fn a_pointer_is_read_only_in_git_lfs_s_form() {
        let text =
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{OID}\nsize 3000\n");
        let p = Pointer::parse(text.as_bytes()).expect("a pointer");
        assert_eq!((p.oid.to_string().as_str(), p.size), (OID, 3000));
        assert_eq!(p.encode(), text);
        for bad in [
            text.trim_end().to_owned(),
            text.replace("size 3000", "size +3000"),
            text.replace("size 3000", "size "),
            text.replace("sha256:b", "sha256:B"),
            text.replace("sha256:", "sha1:"),
            format!("{text}x\n"),
            text.replace("version https://git-lfs", "version http://git-lfs"),
            format!(
                "version https://git-lfs.github.com/spec/v1\next-0-foo sha256:{OID}\noid sha256:{OID}\nsize 3\n"
            ),
        ] {
            assert_eq!(Pointer::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
