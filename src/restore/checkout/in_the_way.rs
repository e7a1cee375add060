//! Step 2 of the checkout, before one that may replace files (`--force`, or completing an
//! interrupted restore): refuse what it would delete or must not overwrite (SPEC rule 6).

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use super::super::intent::CutShort;
use super::super::write::WorktreeForm;
use crate::error::{Error, Result};

/// Before a checkout that may replace files (`--force`, or completing an interrupted restore),
/// refuse what it would delete or must not overwrite (SPEC rule 6: other files are left in place,
/// nothing is deleted):
/// - a file or a symlink where the commit has a folder (one of an entry's leading components):
///   replacing it would delete what the commit does not track;
/// - a non-empty folder where the commit has a file;
/// - when completing an interrupted restore (`resume` given), a file or symlink whose content is
///   not the commit's, unless [`CutShort`] judges it a file the killed checkout cut short:
///   content the interrupted restore did not write.
///
/// # Errors
/// [`Error::Conflict`] (exit 7) naming the path, before anything is written.
pub fn refuse_what_is_in_the_way(
    repo: &gix::Repository,
    workdir: &Path,
    index: &gix::index::File,
    objects: &crate::pack::PackObjects,
    resume: Option<CutShort>,
) -> Result<()> {
    let mut judge = InTheWay {
        workdir,
        resume_only: resume.is_some(),
        cut: resume,
        // The checkout writes what the tree's `.gitattributes` make of a blob (`eol=crlf`,
        // `ident`, `working-tree-encoding`): that is what the killed run left, so that is what is
        // compared.
        to_worktree: None,
        folders_seen: Default::default(),
    };
    if judge.resume_only {
        judge.to_worktree = Some(WorktreeForm::new(repo, index)?);
    }
    for entry in index.entries() {
        let rel = Path::new(std::ffi::OsStr::from_bytes(entry.path(index)));
        judge.leading_folders(rel)?;
        if entry.mode == gix::index::entry::Mode::COMMIT {
            // A submodule's folder: what the killed run checked out in it is redone in place.
            continue;
        }
        let path = workdir.join(rel);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let empty = std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none());
            if !empty {
                return Err(judge.conflict(&path, "is a folder where the commit has a file"));
            }
            continue;
        }
        if judge.resume_only {
            judge.resumed_file(entry, index, objects, &path, &meta)?;
        }
    }
    if let Some(path) = judge.cut.as_ref().and_then(|c| c.first_foreign()) {
        return Err(judge.conflict(path, NOT_WRITTEN_BY_THE_RESTORE));
    }
    Ok(())
}

const NOT_WRITTEN_BY_THE_RESTORE: &str =
    "holds content the interrupted restore did not write (changed since?)";

/// The state of [`refuse_what_is_in_the_way`]'s walk.
struct InTheWay<'a> {
    workdir: &'a Path,
    resume_only: bool,
    cut: Option<CutShort>,
    to_worktree: Option<WorktreeForm<'a>>,
    folders_seen: std::collections::HashSet<std::path::PathBuf>,
}

impl InTheWay<'_> {
    fn conflict(&self, path: &Path, what: &str) -> Error {
        Error::conflict(format!(
            "{} {what}: nothing was changed (move it aside{})",
            path.display(),
            if self.resume_only {
                ", or pass --force to overwrite the files the commit tracks"
            } else {
                ""
            }
        ))
    }

    /// Refuse a file or a symlink where the commit has one of `rel`'s leading folders: the commit
    /// does not track it, so even `--force` may not delete it (SPEC rule 6).
    fn leading_folders(&mut self, rel: &Path) -> Result<()> {
        let mut parent = std::path::PathBuf::new();
        let mut components = rel.components().peekable();
        while let Some(component) = components.next() {
            if components.peek().is_none() {
                break;
            }
            parent.push(component);
            if !self.folders_seen.insert(parent.clone()) {
                continue;
            }
            if let Ok(meta) = std::fs::symlink_metadata(self.workdir.join(&parent))
                && !meta.is_dir()
            {
                return Err(self.conflict(
                    &self.workdir.join(&parent),
                    if meta.file_type().is_symlink() {
                        "is a symlink where the commit has a folder"
                    } else {
                        "is a file where the commit has a folder"
                    },
                ));
            }
        }
        Ok(())
    }

    /// Completing an interrupted restore: the file at `path` must hold the commit's content, or
    /// a prefix of it that the killed checkout cut short.
    fn resumed_file(
        &mut self,
        entry: &gix::index::Entry,
        index: &gix::index::File,
        objects: &crate::pack::PackObjects,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<()> {
        use crate::pack::Compared;
        let mtime = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        let symlink = meta.file_type().is_symlink();
        let compared = if let Some(big) = objects.big(&entry.id) {
            // Compared a chunk at a time: it is never held whole.
            if meta.is_file() {
                objects
                    .compare_big(big, path)
                    .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
            } else {
                Compared::Other
            }
        } else {
            let mut buf = Vec::new();
            let blob = gix::objs::Find::try_find(objects, &entry.id, &mut buf)
                .ok()
                .flatten()
                .map(|d| d.data.to_vec())
                .unwrap_or_default();
            let blob = match &mut self.to_worktree {
                Some(form) if entry.mode != gix::index::entry::Mode::SYMLINK => {
                    form.convert(blob, entry.path(index))?
                }
                _ => blob,
            };
            // An LFS file the killed run had already replaced by its object (never read whole).
            let lfs_done = !symlink && is_lfs_content(&blob, path);
            let on_disk = if lfs_done {
                None
            } else if symlink {
                std::fs::read_link(path)
                    .map(|t| t.into_os_string().into_encoded_bytes())
                    .ok()
            } else {
                // No longer than the blob: a longer file is neither it nor a start of it.
                crate::fs::read_regular(path, false, blob.len() as u64).ok()
            };
            let same_kind = symlink == (entry.mode == gix::index::entry::Mode::SYMLINK);
            match on_disk {
                _ if lfs_done => Compared::Same,
                Some(d) if same_kind && d == blob => Compared::Same,
                Some(d) if same_kind && !symlink && blob.starts_with(&d) => Compared::Prefix,
                _ => Compared::Other,
            }
        };
        match (&mut self.cut, compared) {
            (Some(cut), Compared::Same) => cut.whole(mtime),
            (Some(cut), Compared::Prefix) => cut.prefix(path.to_owned(), mtime),
            _ => return Err(self.conflict(path, NOT_WRITTEN_BY_THE_RESTORE)),
        }
        Ok(())
    }
}

/// Whether the file at `path` holds the object of the LFS pointer `blob`.
fn is_lfs_content(blob: &[u8], path: &Path) -> bool {
    crate::wire::lfs::Pointer::parse(blob)
        .is_some_and(|pointer| crate::repo::lfs::file_holds(path, &pointer))
}
