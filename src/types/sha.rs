//! [`FullSha`]: a full SHA-1 object id, the only form of `TIP_SHA` the contract accepts (SPEC rule 1).

use std::fmt;
use std::str::FromStr;

/// A full, non-zero SHA-1 object id: exactly 40 hex digits, normalised to lower case.
///
/// Parsing refuses — before any network I/O — abbreviations, revision expressions (`HEAD`, `abc^`),
/// ref names (`main`, `v1.0`), surrounding whitespace, a byte-order mark, non-hex text, the zero id,
/// and 64-hex (SHA-256) ids, with a [`ShaError`] that says which it was.
///
/// The zero id is representable only through [`FullSha::zero`], where it means "no such ref" (the
/// lease of a branch that does not exist yet, see gitprotocol-pack "Reference Update Request").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FullSha(gix::ObjectId);

/// Why a string is not a [`FullSha`]. Each message names the rule that was broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShaError {
    /// The value is empty.
    #[error("the object id is empty: a full 40-hex-digit commit id is required")]
    Empty,
    /// The value starts with a UTF-8 byte-order mark.
    #[error("the object id starts with a byte-order mark (U+FEFF): pass exactly 40 hex digits")]
    ByteOrderMark,
    /// Leading or trailing whitespace (including a newline).
    #[error(
        "the object id has surrounding whitespace (a trailing newline?): pass exactly 40 hex digits"
    )]
    Whitespace,
    /// Fewer than 40 hex digits.
    #[error(
        "abbreviated object id ({0} hex digits): a full 40-hex-digit commit id is required, abbreviations are ambiguous"
    )]
    Abbreviated(usize),
    /// 64 hex digits: a SHA-256 id.
    #[error("SHA-256 repositories are not supported yet (the object id has 64 hex digits)")]
    Sha256,
    /// More hex digits than any object id has.
    #[error("the object id has {0} hex digits: a full SHA-1 commit id has exactly 40")]
    TooLong(usize),
    /// A revision expression such as `HEAD`, `abc^`, `main~2` or `@{u}`.
    #[error(
        "'{0}' is a revision expression, not an object id: pass the full 40-hex-digit commit id"
    )]
    RevisionExpression(String),
    /// A branch or tag name such as `main` or `v1.0`.
    #[error(
        "'{0}' looks like a branch or tag name, not an object id: pass the full 40-hex-digit commit id"
    )]
    RefName(String),
    /// 40 characters, but not all hex digits.
    #[error("the object id has 40 characters but is not hexadecimal")]
    NotHex,
    /// Other text that is neither hex nor a ref name.
    #[error("the object id is not hexadecimal: pass exactly 40 hex digits")]
    Invalid,
    /// The all-zero id, which names no object.
    #[error("the zero object id names no commit: pass the full id of the commit to restore")]
    Zero,
}

impl FullSha {
    /// The all-zero id: "the ref does not exist" in ref updates and leases.
    pub fn zero() -> Self {
        FullSha(gix::ObjectId::null(gix::hash::Kind::Sha1))
    }

    /// Whether this is the zero id.
    pub fn is_zero(&self) -> bool {
        self.0.is_null()
    }

    /// The object id.
    pub fn id(&self) -> gix::ObjectId {
        self.0
    }

    /// Wrap an object id read from a trusted source (the local object database or the wire).
    pub fn from_id(id: gix::ObjectId) -> Self {
        FullSha(id)
    }

    /// Parse a hex id sent by a server, where the zero id is allowed ("absent").
    pub fn from_wire(hex: &[u8]) -> Option<Self> {
        if hex.len() != 40 {
            return None;
        }
        gix::ObjectId::from_hex(hex).ok().map(FullSha)
    }
}

impl FromStr for FullSha {
    type Err = ShaError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(ShaError::Empty);
        }
        if s.starts_with('\u{feff}') {
            return Err(ShaError::ByteOrderMark);
        }
        if s.trim() != s {
            return Err(ShaError::Whitespace);
        }
        let all_hex = s.bytes().all(|b| b.is_ascii_hexdigit());
        if all_hex {
            return match s.len() {
                40 => {
                    let id = gix::ObjectId::from_hex(s.to_ascii_lowercase().as_bytes())
                        .map_err(|_| ShaError::NotHex)?;
                    if id.is_null() {
                        Err(ShaError::Zero)
                    } else {
                        Ok(FullSha(id))
                    }
                }
                64 => Err(ShaError::Sha256),
                n if n < 40 => Err(ShaError::Abbreviated(n)),
                n => Err(ShaError::TooLong(n)),
            };
        }
        let shown: String = s.chars().take(64).collect();
        if s == "HEAD"
            || s == "@"
            || s.ends_with("HEAD")
            || s.contains(['^', '~', ':', '@', '{', '}'])
        {
            return Err(ShaError::RevisionExpression(shown));
        }
        if s.len() == 40 {
            return Err(ShaError::NotHex);
        }
        if s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
        {
            return Err(ShaError::RefName(shown));
        }
        Err(ShaError::Invalid)
    }
}

impl fmt::Display for FullSha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for FullSha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FullSha({})", self.0)
    }
}

impl serde::Serialize for FullSha {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FullSha {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        FullSha::from_wire(s.as_bytes())
            .ok_or_else(|| serde::de::Error::custom("not a 40-hex object id"))
    }
}

/// In the `--json` output: 40 lowercase hex digits (the zero id for "no branch yet").
impl schemars::JsonSchema for FullSha {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ObjectId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A full SHA-1 object id: 40 lowercase hex digits (all zeros: none yet).",
            "type": "string",
            "pattern": "^[0-9a-f]{40}$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_full_and_normalises_case() {
        let s = "ABCDEF0123456789ABCDEF0123456789ABCDEF01";
        assert_eq!(
            s.parse::<FullSha>().unwrap().to_string(),
            s.to_ascii_lowercase()
        );
    }

    #[test]
    fn refuses_each_kind_with_its_reason() {
        let cases: &[(&str, ShaError)] = &[
            ("", ShaError::Empty),
            ("abcdef0", ShaError::Abbreviated(7)),
            (&"a".repeat(39), ShaError::Abbreviated(39)),
            (&"a".repeat(64), ShaError::Sha256),
            (&"a".repeat(41), ShaError::TooLong(41)),
            ("HEAD", ShaError::RevisionExpression("HEAD".into())),
            ("abc^", ShaError::RevisionExpression("abc^".into())),
            ("main", ShaError::RefName("main".into())),
            ("v1.0", ShaError::RefName("v1.0".into())),
            (&"g".repeat(40), ShaError::NotHex),
            (&format!("{}\n", "a".repeat(40)), ShaError::Whitespace),
            (
                &format!("\u{feff}{}", "a".repeat(40)),
                ShaError::ByteOrderMark,
            ),
            (&"0".repeat(40), ShaError::Zero),
        ];
        for (input, want) in cases {
            assert_eq!(input.parse::<FullSha>().unwrap_err(), *want, "{input:?}");
        }
    }
}
