//! [`FullSha`]: a full object id, 40 hex digits in a SHA-1 repository and 64 in a SHA-256 one,
//! the only form of `TIP_SHA` the contract accepts (SPEC rule 1); [`Format`], the repository's
//! object format.

use std::fmt;
use std::str::FromStr;

/// A repository's object format: [`Format::Sha1`] (40 hex digits) or [`Format::Sha256`] (64). It is
/// what the server announces (`object-format` in its capabilities; absent = SHA-1).
pub type Format = gix::hash::Kind;

/// A full, non-zero object id: exactly 40 (SHA-1) or 64 (SHA-256) hex digits, normalised to lower
/// case. Which length the repository uses is known only after the capability exchange:
/// [`FullSha::check_format`] then refuses the other one.
///
/// Parsing refuses — before any network I/O — abbreviations, revision expressions (`HEAD`, `abc^`),
/// ref names (`main`, `v1.0`), surrounding whitespace, a byte-order mark, non-hex text, the zero id
/// and any other length, with a [`ShaError`] that says which it was.
///
/// The zero id is representable only through [`FullSha::zero`], where it means "no such ref" (the
/// lease of a branch that does not exist yet, see gitprotocol-pack "Reference Update Request").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FullSha(gix::ObjectId);

/// Why a string is not a [`FullSha`]. Each message names the rule that was broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShaError {
    /// The value is empty.
    #[error("the object id is empty: a full commit id (40 hex digits, 64 for SHA-256) is required")]
    Empty,
    /// The value starts with a UTF-8 byte-order mark.
    #[error(
        "the object id starts with a byte-order mark (U+FEFF): pass exactly 40 hex digits (64 for SHA-256)"
    )]
    ByteOrderMark,
    /// Leading or trailing whitespace (including a newline).
    #[error(
        "the object id has surrounding whitespace (a trailing newline?): pass exactly 40 hex digits (64 for SHA-256)"
    )]
    Whitespace,
    /// Fewer than 40 hex digits, or between 40 and 64: a prefix of a full id.
    #[error(
        "abbreviated object id ({0} hex digits): a full commit id of 40 hex digits (64 in a SHA-256 repository) is required, abbreviations are ambiguous"
    )]
    Abbreviated(usize),
    /// More hex digits than any object id has.
    #[error(
        "the object id has {0} hex digits: a full commit id has exactly 40 (SHA-1) or 64 (SHA-256)"
    )]
    TooLong(usize),
    /// A revision expression such as `HEAD`, `abc^`, `main~2` or `@{u}`.
    #[error(
        "'{0}' is a revision expression, not an object id: pass the full commit id (40 hex digits, 64 for SHA-256)"
    )]
    RevisionExpression(String),
    /// A branch or tag name such as `main` or `v1.0`.
    #[error(
        "'{0}' looks like a branch or tag name, not an object id: pass the full commit id (40 hex digits, 64 for SHA-256)"
    )]
    RefName(String),
    /// 40 or 64 characters, but not all hex digits.
    #[error("the object id has {0} characters but is not hexadecimal")]
    NotHex(usize),
    /// Other text that is neither hex nor a ref name.
    #[error("the object id is not hexadecimal: pass exactly 40 hex digits (64 for SHA-256)")]
    Invalid,
    /// The all-zero id, which names no object.
    #[error("the zero object id names no commit: pass the full id of the commit to restore")]
    Zero,
}

/// A full id of one format given for a repository of the other (SPEC rule 1): a 40-hex id for a
/// SHA-256 repository is an abbreviation, a 64-hex id for a SHA-1 one names nothing there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", wrong_format_text(*.id_format, *.repository))]
pub struct WrongFormat {
    /// The format the id's length implies.
    pub id_format: Format,
    /// The repository's format, as the server announced it.
    pub repository: Format,
}

fn wrong_format_text(id: Format, repository: Format) -> String {
    match repository {
        Format::Sha256 => format!(
            "a {}-digit id for a SHA-256 repository: give all 64 digits (a {}-digit id is an \
             abbreviation there)",
            id.len_in_hex(),
            id.len_in_hex()
        ),
        _ => format!(
            "a {}-digit (SHA-256) id for a SHA-1 repository: give the commit's 40-digit id",
            id.len_in_hex()
        ),
    }
}

/// The lower-case name of a format as git spells it in `extensions.objectFormat` and
/// `object-format=`: `sha1` or `sha256`.
pub fn format_name(format: Format) -> &'static str {
    match format {
        Format::Sha256 => "sha256",
        _ => "sha1",
    }
}

/// How a format is written in prose: `SHA-1` or `SHA-256`.
pub fn format_title(format: Format) -> &'static str {
    match format {
        Format::Sha256 => "SHA-256",
        _ => "SHA-1",
    }
}

/// The format a server announces with `object-format=<value>` (absent = SHA-1); `None` for a value
/// this build does not know.
pub fn format_from_name(value: Option<&str>) -> Option<Format> {
    match value {
        None | Some("sha1") => Some(Format::Sha1),
        Some("sha256") => Some(Format::Sha256),
        Some(_) => None,
    }
}

/// Serde of a [`Format`] as git names it: write `sha1` or `sha256`.
///
/// # Errors
/// The serializer's.
pub fn serialize_format<S: serde::Serializer>(format: &Format, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(format_name(*format))
}

/// Serde of a [`Format`]: read `sha1` or `sha256`.
///
/// # Errors
/// Any other value.
pub fn deserialize_format<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Format, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    format_from_name(Some(&s))
        .ok_or_else(|| serde::de::Error::custom(format!("unknown object format {s:?}")))
}

/// SHA-1: the format of a record written before records said it.
pub fn sha1_format() -> Format {
    Format::Sha1
}

impl FullSha {
    /// The all-zero id of `format`: "the ref does not exist" in ref updates and leases.
    pub fn zero(format: Format) -> Self {
        FullSha(gix::ObjectId::null(format))
    }

    /// Whether this is the zero id.
    pub fn is_zero(&self) -> bool {
        self.0.is_null()
    }

    /// The object id.
    pub fn id(&self) -> gix::ObjectId {
        self.0
    }

    /// The object format this id's length belongs to.
    pub fn format(&self) -> Format {
        self.0.kind()
    }

    /// Refuse this id for a repository of another format ([`WrongFormat`]).
    ///
    /// # Errors
    /// [`WrongFormat`] when the lengths differ.
    pub fn check_format(&self, repository: Format) -> Result<(), WrongFormat> {
        if self.format() == repository {
            Ok(())
        } else {
            Err(WrongFormat {
                id_format: self.format(),
                repository,
            })
        }
    }

    /// Wrap an object id read from a trusted source (the local object database or the wire).
    pub fn from_id(id: gix::ObjectId) -> Self {
        FullSha(id)
    }

    /// Parse a hex id of either length sent by a server or read from a record, where the zero id
    /// is allowed ("absent").
    pub fn from_wire(hex: &[u8]) -> Option<Self> {
        if hex.len() != 40 && hex.len() != 64 {
            return None;
        }
        gix::ObjectId::from_hex(hex).ok().map(FullSha)
    }

    /// [`FullSha::from_wire`] for a repository of `format`: an id of the other length is `None`.
    pub fn from_wire_in(format: Format, hex: &[u8]) -> Option<Self> {
        Self::from_wire(hex).filter(|id| id.format() == format)
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
                40 | 64 => {
                    let id = gix::ObjectId::from_hex(s.to_ascii_lowercase().as_bytes())
                        .map_err(|_| ShaError::NotHex(s.len()))?;
                    if id.is_null() {
                        Err(ShaError::Zero)
                    } else {
                        Ok(FullSha(id))
                    }
                }
                n if n < 64 => Err(ShaError::Abbreviated(n)),
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
        if s.len() == 40 || s.len() == 64 {
            return Err(ShaError::NotHex(s.len()));
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
            .ok_or_else(|| serde::de::Error::custom("not a 40- or 64-hex object id"))
    }
}

/// In the `--json` output: 40 lowercase hex digits in a SHA-1 repository, 64 in a SHA-256 one (the
/// zero id for "no branch yet").
impl schemars::JsonSchema for FullSha {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ObjectId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A full object id: 40 lowercase hex digits in a SHA-1 repository, 64 in a SHA-256 one (the session's `object_format`; all zeros: none yet).",
            "type": "string",
            "pattern": "^([0-9a-f]{40}|[0-9a-f]{64})$"
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
    fn accepts_both_lengths_and_knows_the_format() {
        let a: FullSha = "a".repeat(40).parse().unwrap();
        let b: FullSha = "B".repeat(64).parse().unwrap();
        assert_eq!(a.format(), Format::Sha1);
        assert_eq!(b.format(), Format::Sha256);
        assert_eq!(b.to_string(), "b".repeat(64));
        assert!(a.check_format(Format::Sha1).is_ok());
        let e = a.check_format(Format::Sha256).unwrap_err().to_string();
        assert!(
            e.contains("a 40-digit id for a SHA-256 repository: give all 64 digits"),
            "{e}"
        );
        let e = b.check_format(Format::Sha1).unwrap_err().to_string();
        assert!(
            e.contains("64-digit (SHA-256) id for a SHA-1 repository"),
            "{e}"
        );
        assert_eq!(
            FullSha::from_wire_in(Format::Sha256, "a".repeat(40).as_bytes()),
            None
        );
        assert_eq!(FullSha::from_wire(&[b'a'; 41]), None);
        assert_eq!(format_from_name(Some("sha256")), Some(Format::Sha256));
        assert_eq!(format_from_name(None), Some(Format::Sha1));
        assert_eq!(format_from_name(Some("sha3")), None);
    }

    #[test]
    fn refuses_each_kind_with_its_reason() {
        let cases: &[(&str, ShaError)] = &[
            ("", ShaError::Empty),
            ("abcdef0", ShaError::Abbreviated(7)),
            (&"a".repeat(39), ShaError::Abbreviated(39)),
            (&"a".repeat(41), ShaError::Abbreviated(41)),
            (&"a".repeat(63), ShaError::Abbreviated(63)),
            (&"a".repeat(65), ShaError::TooLong(65)),
            ("HEAD", ShaError::RevisionExpression("HEAD".into())),
            ("abc^", ShaError::RevisionExpression("abc^".into())),
            ("main", ShaError::RefName("main".into())),
            ("v1.0", ShaError::RefName("v1.0".into())),
            (&"g".repeat(40), ShaError::NotHex(40)),
            (&"g".repeat(64), ShaError::NotHex(64)),
            (&"0".repeat(64), ShaError::Zero),
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
