//! The manifest of several sessions (`GIT_SESSION_SESSIONS_FILE`, `restore --sessions FILE`),
//! parsed once into types before any request: each entry's fields are the single session's
//! variables in lower case, checked by the same rules ([`FullSha`], [`SessionBranch`],
//! [`RemoteUrl`]). A bad manifest is exit 2 naming the entry (its index and `dir`) and the field.
//!
//! The JSON is walked by hand rather than by serde's derive: serde's messages quote the values
//! they refuse, and a value here may be a credentialed URL. [`Document`] is the schema only, and a
//! test holds its fields to [`FIELDS`].

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::error::{Error, Refusal, Result};
use crate::inputs::UrlSource;
use crate::restore::sparse::Cone;
use crate::restore::{LfsMode, SubmoduleMode};
use crate::types::{FullSha, RemoteUrl, SessionBranch};

/// The largest manifest read: 1 MiB.
pub const MAX_BYTES: u64 = 1 << 20;

/// The most sessions one manifest may name.
pub const MAX_SESSIONS: usize = 64;

/// git's largest depth, as `--depth` takes it.
const MAX_DEPTH: u64 = i32::MAX as u64;

/// Every field an entry may hold.
pub const FIELDS: [&str; 14] = [
    "dir",
    "read_url",
    "read_url_file",
    "push_url",
    "push_url_file",
    "archive_url",
    "archive_url_file",
    "session_branch",
    "tip_sha",
    "depth",
    "sparse",
    "submodules",
    "lfs",
    "cache",
];

/// One session of the manifest, every field validated.
#[derive(Debug)]
pub struct Session {
    /// Its place in the manifest, from 0.
    pub index: usize,
    /// The work tree, absolute (relative `dir`s are joined to the manifest's folder), resolved as
    /// `-C` is.
    pub dir: PathBuf,
    /// The work tree as given (joined to the manifest's folder, its symlinks not resolved), whose
    /// symlinks a root run checks ([`crate::fs::owner::become_owner`]).
    pub given: PathBuf,
    /// `read_url` or `read_url_file`.
    pub read: Option<UrlSource>,
    /// `push_url` or `push_url_file`.
    pub push: Option<UrlSource>,
    /// `archive_url` or `archive_url_file`: restore from a tar.gz instead of fetching.
    pub archive: Option<UrlSource>,
    /// `session_branch`.
    pub branch: SessionBranch,
    /// `tip_sha`.
    pub tip: FullSha,
    /// `depth` (default 1; 0: the whole history).
    pub depth: u32,
    /// `sparse`: the folders of a sparse restore.
    pub sparse: Option<Cone>,
    /// `submodules`.
    pub submodules: SubmoduleMode,
    /// `lfs`.
    pub lfs: LfsMode,
    /// `cache` (`GIT_SESSION_CACHE`): a baked template to boot from.
    pub cache: Option<PathBuf>,
}

impl Session {
    /// How messages name it: `session 2 (/work/api)`.
    pub fn name(&self) -> String {
        format!("session {} ({})", self.index, self.dir.display())
    }
}

/// The manifest's document, for `git-session schema` (the parser is [`read`]).
#[derive(Debug, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "git-session sessions manifest (GIT_SESSION_SESSIONS_FILE)")]
pub struct Document {
    /// The sessions, 1 to 64; no two with the same `dir` or one inside another.
    #[schemars(length(min = 1, max = 64))]
    pub sessions: Vec<Entry>,
}

/// One entry of [`Document`]: the single session's variables, in lower case.
#[derive(Debug, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The work tree (`SESSION_DIR`): absolute, or relative to the manifest's folder.
    pub dir: String,
    /// `READ_URL` (may carry credentials, as in the environment); required unless an archive
    /// URL is given.
    pub read_url: Option<String>,
    /// `READ_URL_FILE`: a file holding it, re-read at every use (relative to the manifest's
    /// folder); not with `read_url`.
    pub read_url_file: Option<String>,
    /// `PUSH_URL`.
    pub push_url: Option<String>,
    /// `PUSH_URL_FILE`; not with `push_url`.
    pub push_url_file: Option<String>,
    /// `ARCHIVE_URL`: restore from a tar.gz of the tip.
    pub archive_url: Option<String>,
    /// `ARCHIVE_URL_FILE`; not with `archive_url`.
    pub archive_url_file: Option<String>,
    /// `SESSION_BRANCH`.
    pub session_branch: String,
    /// `TIP_SHA`: the full object id.
    pub tip_sha: String,
    /// `--depth` (default 1; 0: the whole history).
    #[schemars(range(min = 0, max = 2147483647))]
    pub depth: Option<u64>,
    /// `--sparse`: the folders to check out.
    pub sparse: Option<Vec<String>>,
    /// `--submodules`.
    #[schemars(extend("enum" = ["none", "shallow", "recursive"]))]
    pub submodules: Option<String>,
    /// `--lfs`.
    #[schemars(extend("enum" = ["auto", "always", "never"]))]
    pub lfs: Option<String>,
    /// `--cache` (`GIT_SESSION_CACHE`): a baked template whose objects seed the restore
    /// (relative to the manifest's folder).
    pub cache: Option<String>,
}

/// A refusal of the manifest as a whole.
fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::Usage(
        Refusal::Invalid,
        format!("the sessions manifest {}: {why}", path.display()),
    )
}

/// Read and check the manifest at `path` (relative to the current directory).
///
/// # Errors
/// [`Error::Usage`] (exit 2) for an unreadable, oversized or malformed manifest, naming the entry
/// and the field.
pub fn read(path: &Path) -> Result<Vec<Session>> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        crate::inputs::current_dir()?.join(path)
    };
    let bytes = read_bounded(&path)?;
    let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    parse(&path, &base, &bytes)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let unreadable = |e: std::io::Error| bad(path, format!("cannot be read: {e}"));
    let file = crate::fs::open_regular(path, true).map_err(unreadable)?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(bad(path, format!("it is over {MAX_BYTES} bytes")));
    }
    Ok(bytes)
}

/// Parse the manifest's bytes; `base` is the folder relative paths start from.
///
/// # Errors
/// As [`read`].
pub fn parse(path: &Path, base: &Path, bytes: &[u8]) -> Result<Vec<Session>> {
    // serde_json's syntax errors name a line and column, never a value.
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| bad(path, format!("it is not JSON: {}", syntax(&e))))?;
    let shape = r#"it must be a JSON object {"sessions": [{"dir": …, "read_url": …, "session_branch": …, "tip_sha": …}, …]}"#;
    let Value::Object(top) = value else {
        return Err(bad(path, shape));
    };
    if let Some(key) = top.keys().find(|k| *k != "sessions") {
        return Err(bad(
            path,
            format!("unknown field {}: {shape}", key_name(key)),
        ));
    }
    let Some(Value::Array(entries)) = top.get("sessions") else {
        return Err(bad(path, shape));
    };
    if entries.is_empty() || entries.len() > MAX_SESSIONS {
        return Err(bad(
            path,
            format!(
                "it names {} sessions: give 1 to {MAX_SESSIONS}",
                entries.len()
            ),
        ));
    }
    let sessions = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| Field::entry(path, base, index, entry))
        .collect::<Result<Vec<_>>>()?;
    overlaps(path, &sessions)?;
    Ok(sessions)
}

fn syntax(e: &serde_json::Error) -> String {
    format!(
        "{:?} at line {} column {}",
        e.classify(),
        e.line(),
        e.column()
    )
}

/// A field's name as a message shows it: only a plain name is echoed (a key is the file's text,
/// and could be anything).
fn key_name(key: &str) -> String {
    if !key.is_empty()
        && key.len() <= 40
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        format!("\"{key}\"")
    } else {
        "(a name not shown)".into()
    }
}

/// No two sessions in the same folder, or one inside another's.
fn overlaps(path: &Path, sessions: &[Session]) -> Result<()> {
    for (i, a) in sessions.iter().enumerate() {
        for b in &sessions[i + 1..] {
            if a.dir.starts_with(&b.dir) || b.dir.starts_with(&a.dir) {
                let how = if a.dir == b.dir {
                    "the same folder"
                } else {
                    "one folder inside the other"
                };
                return Err(bad(
                    path,
                    format!(
                        "{}: dir: {} has {how}: every session needs a folder of its own",
                        b.name(),
                        a.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// One entry being read: where it is, for messages.
struct Field<'a> {
    path: &'a Path,
    base: &'a Path,
    /// `session 2 (api)`, or `session 2` before its `dir` is known.
    entry: String,
    map: &'a Map<String, Value>,
}

impl<'a> Field<'a> {
    fn entry(path: &'a Path, base: &'a Path, index: usize, value: &'a Value) -> Result<Session> {
        let mut field = Field {
            path,
            base,
            entry: format!("session {index}"),
            map: &Map::new(),
        };
        let Value::Object(map) = value else {
            return Err(field.refuse("", "it must be a JSON object"));
        };
        field.map = map;
        // Named by its folder as given until that is checked.
        if let Some(Value::String(dir)) = map.get("dir") {
            let given = crate::text::line_str(dir).into_owned();
            field.entry = format!("session {index} ({})", base.join(given).display());
        }
        if let Some(key) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(field.refuse(
                "",
                format!(
                    "unknown field {}: the fields are {}",
                    key_name(key),
                    FIELDS.join(", ")
                ),
            ));
        }
        let (dir, given) = field.dir()?;
        field.entry = format!("session {index} ({})", dir.display());
        let archive = field.url("archive_url", "archive_url_file")?;
        let read = field.url("read_url", "read_url_file")?;
        if read.is_none() && archive.is_none() {
            return Err(field.missing(
                "read_url",
                "give read_url or read_url_file (or an archive_url)",
            ));
        }
        Ok(Session {
            index,
            read,
            push: field.url("push_url", "push_url_file")?,
            archive,
            branch: field.parsed(
                "session_branch",
                "it is not a branch name by git's rules (git-check-ref-format(1))",
            )?,
            tip: field.parsed(
                "tip_sha",
                "it is not a full object id: 40 hex digits (64 in a SHA-256 repository)",
            )?,
            depth: field.depth()?,
            sparse: field.sparse()?,
            submodules: field.choice("submodules")?.unwrap_or_default(),
            lfs: field.choice("lfs")?.unwrap_or_default(),
            cache: field.cache()?,
            dir,
            given,
        })
    }

    fn refuse(&self, field: &str, why: impl std::fmt::Display) -> Error {
        let at = if field.is_empty() {
            self.entry.clone()
        } else {
            format!("{}: {field}", self.entry)
        };
        bad(self.path, format!("{at}: {why}"))
    }

    fn missing(&self, field: &str, why: &str) -> Error {
        let Error::Usage(_, text) = self.refuse(field, format!("missing: {why}")) else {
            unreachable!("refuse makes a usage error")
        };
        Error::Usage(Refusal::Missing, text)
    }

    /// The field's string, `None` when absent; another JSON type is refused.
    fn string(&self, field: &str) -> Result<Option<&'a str>> {
        match self.map.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.refuse(field, "it must be a string")),
        }
    }

    fn required(&self, field: &str) -> Result<&'a str> {
        self.string(field)?
            .ok_or_else(|| self.missing(field, "every session names it"))
    }

    /// A path given in the manifest: relative ones start at the manifest's folder.
    fn path(&self, field: &str, text: &str) -> Result<PathBuf> {
        if text.is_empty() || text.contains('\0') {
            return Err(self.refuse(field, "it must be a path, not empty"));
        }
        let p = Path::new(text);
        Ok(if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        })
    }

    fn dir(&self) -> Result<(PathBuf, PathBuf)> {
        let text = self.required("dir")?;
        let joined = self.path("dir", text)?;
        // Resolved as -C is: symlinks followed, a file in its place refused.
        crate::inputs::session_dirs(Some(&joined)).map_err(|e| self.refuse("dir", e))
    }

    /// A URL from `plain` or `file` (one of them at most), checked now.
    fn url(&self, plain: &'static str, file: &'static str) -> Result<Option<UrlSource>> {
        let source = match (self.string(plain)?, self.string(file)?) {
            (Some(_), Some(_)) => {
                return Err(self.refuse(file, format!("give {plain} or {file}, not both")));
            }
            (Some(raw), None) => {
                let url = RemoteUrl::parse(raw).map_err(|e| self.refuse(plain, e))?;
                UrlSource::Fixed(url)
            }
            (None, Some(path)) => UrlSource::File {
                path: self.path(file, path)?,
                var: file,
            },
            (None, None) => return Ok(None),
        };
        // Learns the secret for redaction, and reads a file once so a bad one fails now.
        source
            .load()
            .map_err(|e| self.refuse(file_or(plain, file, &source), e))?;
        Ok(Some(source))
    }

    /// The field parsed as its variable is; refused with `why`, not the parser's words, which
    /// quote the value (it may be a credentialed URL put in the wrong field).
    fn parsed<T: std::str::FromStr>(&self, field: &str, why: &str) -> Result<T> {
        self.required(field)?
            .parse()
            .map_err(|_| self.refuse(field, why))
    }

    fn depth(&self) -> Result<u32> {
        match self.map.get("depth") {
            None => Ok(1),
            Some(Value::Number(n)) => n
                .as_u64()
                .filter(|n| *n <= MAX_DEPTH)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| self.depth_refused()),
            Some(_) => Err(self.depth_refused()),
        }
    }

    fn depth_refused(&self) -> Error {
        self.refuse(
            "depth",
            format!("it must be a whole number from 0 (the whole history) to {MAX_DEPTH}"),
        )
    }

    fn sparse(&self) -> Result<Option<Cone>> {
        let Some(value) = self.map.get("sparse") else {
            return Ok(None);
        };
        let dirs = value
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<String>>>()
            })
            .ok_or_else(|| self.refuse("sparse", "it must be a list of folders (strings)"))?;
        if dirs.is_empty() {
            return Ok(None);
        }
        Cone::new(&dirs)
            .map(Some)
            .map_err(|e| self.refuse("sparse", e))
    }

    /// One of the values the flag of the same name takes.
    fn choice<T: clap::ValueEnum>(&self, field: &str) -> Result<Option<T>> {
        let Some(text) = self.string(field)? else {
            return Ok(None);
        };
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_owned()))
            .collect();
        T::from_str(text, false)
            .map(Some)
            .map_err(|_| self.refuse(field, format!("it must be one of {}", names.join(", "))))
    }

    fn cache(&self) -> Result<Option<PathBuf>> {
        self.string("cache")?
            .map(|p| self.path("cache", p))
            .transpose()
    }
}

fn file_or(plain: &'static str, file: &'static str, source: &UrlSource) -> &'static str {
    if source.rereadable() { file } else { plain }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_every_field_the_parser_reads() {
        let schema = schemars::schema_for!(Entry);
        let props: Vec<&str> = schema
            .as_object()
            .and_then(|o| o.get("properties"))
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(props, FIELDS);
    }
}
