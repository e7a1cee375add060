//! The template record: what `git-session bake` leaves in a baked tree's git dir, and what the
//! boot (`restore` into that tree) starts from.
//!
//! Stored as JSON at `.git/git-session-template.json`, written atomically and last, like the
//! session record. A baked tree has this record and no session record: no session branch, no
//! lease, `HEAD` detached at the base. The boot writes the session record, then removes this one.
//!
//! # Security
//! Holds no URL at all: the template image must not carry the read URL.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Refusal, Result};
use crate::types::FullSha;

/// The file name of the record inside the git dir.
pub const TEMPLATE_FILE: &str = "git-session-template.json";

/// The template record (format version 1).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TemplateRecord {
    /// Format version, currently `1`.
    pub version: u32,
    /// The commit baked in (the base every boot fetches the difference from).
    pub base: FullSha,
    /// When the bake finished, RFC 3339 UTC.
    pub baked_at: String,
    /// The git-session version that baked it.
    pub tool_version: String,
    /// The repository's object format (`sha1` or `sha256`), which `base` is in: a boot or a
    /// `--cache` of the other format cannot use the template.
    #[serde(
        serialize_with = "crate::types::sha::serialize_format",
        deserialize_with = "crate::types::sha::deserialize_format",
        default = "crate::types::sha::sha1_format"
    )]
    pub object_format: crate::types::Format,
    /// Whether the server answered the bake's fetch as protocol v2 posted straight to
    /// upload-pack, without the capability advertisement: a boot then posts its `ls-refs` and
    /// its fetch at once (two connections), as neither needs the other's answer. Absent (a
    /// template baked before, or against a server that needed the handshake): one after the
    /// other, as before.
    #[serde(default)]
    pub posted_v2: bool,
}

impl TemplateRecord {
    /// The record's path inside `git_dir`.
    pub fn path(git_dir: &Path) -> PathBuf {
        git_dir.join(TEMPLATE_FILE)
    }

    /// Read the record from `git_dir`, `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`Error::Conflict`] for a malformed record (bake again); [`Error::Usage`] for a version
    /// other than 1; [`Error::LocalIo`] when it cannot be read.
    pub fn read(git_dir: &Path) -> Result<Option<Self>> {
        let path = Self::path(git_dir);
        let fix = "bake the template again";
        match crate::fs::state::read(&path, crate::fs::state::RECORD_CAP, fix)? {
            Some(bytes) => {
                let record: Self = serde_json::from_slice(&bytes).map_err(|e| {
                    Error::conflict(format!(
                        "the template record {} is malformed ({e}): bake the template again",
                        path.display()
                    ))
                })?;
                if record.version != 1 {
                    return Err(Error::Usage(
                        Refusal::Unsupported,
                        format!(
                            "the template record {} has version {}, which this git-session ({}) does \
                         not know: use the git-session that baked it",
                            path.display(),
                            record.version,
                            env!("CARGO_PKG_VERSION")
                        ),
                    ));
                }
                if record.base.format() != record.object_format {
                    return Err(Error::conflict(format!(
                        "the template record {} is malformed (its base is not a {} id): bake the \
                         template again",
                        path.display(),
                        crate::types::format_title(record.object_format)
                    )));
                }
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    /// Write the record into `git_dir` atomically.
    ///
    /// # Errors
    /// [`Error::LocalIo`] or [`Error::Internal`] on I/O failure.
    pub fn write(&self, git_dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::internal("encoding the template record", e))?;
        crate::fs::write_atomic(&Self::path(git_dir), &json)
    }
}
