//! The last step of an archive restore before publishing: move the checked extraction from the
//! staging folder into the target, replacing only what the plan allows (nothing, what an
//! interrupted run left, or with `--force` the files the commit tracks), never deleting other
//! content (SPEC rule 6).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::tree::{Kind, Tree};
use crate::restore::intent::CutShort;
use crate::restore::options::RestoreOptions;
use crate::restore::plan::Plan;

/// The folder inside the staging git dir that receives the extracted tree.
pub(super) const TREE_DIR: &str = "tree";

/// The extraction folder's path relative to the target.
pub(super) fn tree_rel(opts: &RestoreOptions, tree: &Path) -> PathBuf {
    tree.strip_prefix(&opts.dir).map_or_else(
        |_| Path::new(crate::names::STAGING_DIR).join(TREE_DIR),
        Path::to_path_buf,
    )
}

/// Move the extracted `tree` into the target. Everything in the way is found before the first
/// entry moves: a conflict leaves the target as it was. `moving` is set once entries begin to move
/// (a failure from then on keeps the staging folder for the rerun).
pub(super) fn move_into_place(
    opts: &RestoreOptions,
    plan: &Plan,
    tree: &Path,
    moving: &mut bool,
) -> Result<()> {
    let replace = match (plan.overwrite, plan.resume_only) {
        (false, _) => Replace::Nothing,
        (true, true) => Replace::Identical,
        (true, false) => Replace::Any,
    };
    let mut cut = CutShort::new(plan.cut_short_since)
        .writing(plan.cut_short_big.as_ref().map(|p| opts.dir.join(p)));
    // Both ends through their handles (SPEC rule 7).
    // The extracted tree is reached from the target's handle through real folders only.
    let to = Tree::open(&opts.dir)
        .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
    let from = to
        .subtree(&tree_rel(opts, tree))
        .map_err(|e| Error::io(format!("opening {}", tree.display()), e))?;
    into_place(
        &from,
        &to,
        Path::new(""),
        replace,
        Pass::Check,
        &mut cut,
        &Default::default(),
    )?;
    if let Some(path) = cut.first_foreign() {
        return Err(Error::conflict(format!(
            "{} is in the way of the restore: nothing was changed (it holds content the \
             interrupted restore did not write: move it aside, or pass --force to overwrite \
             the files the commit tracks)",
            path.display()
        )));
    }
    let accepted = cut.accepted();
    *moving = true;
    into_place(
        &from,
        &to,
        Path::new(""),
        replace,
        Pass::Move,
        &mut cut,
        &accepted,
    )
}

/// Whether [`into_place`] only looks for conflicts or moves entries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Find what would stop the move before anything moves.
    Check,
    /// Move.
    Move,
}

/// Which existing files [`into_place`] may replace with the archive's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Replace {
    /// None: anything in the way is a conflict.
    Nothing,
    /// Completing an interrupted restore: only files identical to the archive's (moved into place
    /// by the interrupted run; each move is a rename, so none is cut short).
    Identical,
    /// `--force`: every file the archive has.
    Any,
}

/// Move every entry of `from` into `to` (with [`Pass::Check`] first, so a conflict is found before
/// anything moves): missing paths are renamed into place; directories present on both sides merge;
/// an existing file or symlink is replaced as `replace` allows. Never replaced, as that would
/// delete other content (SPEC rule 6): a directory where the archive has a file, or a file or a
/// symlink where it has a directory (even with `--force`: the commit does not track it).
///
/// When completing an interrupted restore, a file that a killed git checkout cut short is noted in
/// `cut` during [`Pass::Check`] (and judged by the caller); those it accepted are replaced during
/// [`Pass::Move`].
fn into_place(
    from: &Tree,
    to: &Tree,
    rel: &Path,
    replace: Replace,
    pass: Pass,
    cut: &mut CutShort,
    accepted: &std::collections::HashSet<std::path::PathBuf>,
) -> Result<()> {
    let entries = from
        .entries(rel)
        .map_err(|e| Error::io(format!("reading {}", from.shown(rel).display()), e))?;
    for (name, kind) in entries {
        let rel = rel.join(name);
        let shown = to.shown(&rel);
        let src_is_dir = kind == Kind::Dir;
        match to.symlink_metadata(&rel) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("reading {}", shown.display()), e)),
            Ok(meta) if meta.is_dir() && src_is_dir => {
                into_place(from, to, &rel, replace, pass, cut, accepted)?;
                continue;
            }
            // An empty folder holds nothing to lose: replaced, as the git path does.
            Ok(meta)
                if meta.is_dir()
                    && replace != Replace::Nothing
                    && to.entries(&rel).is_ok_and(|e| e.is_empty()) =>
            {
                if pass == Pass::Move {
                    to.remove_dir(&rel)
                        .map_err(|e| Error::io(format!("replacing {}", shown.display()), e))?;
                }
            }
            Ok(meta) if meta.is_dir() => {
                return Err(Error::conflict(format!(
                    "{} is a directory where the commit has a file: nothing was changed",
                    shown.display()
                )));
            }
            Ok(meta) if src_is_dir => {
                return Err(Error::conflict(format!(
                    "{} is a {} where the commit has a directory: nothing was changed",
                    shown.display(),
                    if meta.file_type().is_symlink() {
                        "symlink"
                    } else {
                        "file"
                    }
                )));
            }
            Ok(meta)
                if replace == Replace::Any
                    || replace == Replace::Identical
                        && left_by_the_killed_run((from, to, &rel), &meta, pass, cut, accepted) =>
            {
                if pass == Pass::Move {
                    to.remove_file(&rel)
                        .map_err(|e| Error::io(format!("replacing {}", shown.display()), e))?;
                }
            }
            Ok(_) => {
                return Err(Error::conflict(format!(
                    "{} is in the way of the restore: nothing was changed{}",
                    shown.display(),
                    if replace == Replace::Identical {
                        " (it holds content the interrupted restore did not write: move it \
                         aside, or pass --force to overwrite the files the commit tracks)"
                    } else {
                        ""
                    }
                )));
            }
        }
        if pass == Pass::Move {
            from.rename_to(&rel, to, &rel)
                .map_err(|e| Error::io(format!("moving {} into place", shown.display()), e))?;
            crate::failpoint::hit("mid-publish");
        }
    }
    Ok(())
}

/// Whether `rel` in `to` is what an interrupted restore left: the same entry as the staged one in
/// `from`, or (noted in `cut` while checking, looked up in `accepted` while moving) a file a
/// killed git checkout cut short.
fn left_by_the_killed_run(
    (from, to, rel): (&Tree, &Tree, &Path),
    meta: &cap_std::fs::Metadata,
    pass: Pass,
    cut: &mut CutShort,
    accepted: &std::collections::HashSet<std::path::PathBuf>,
) -> bool {
    let mtime = meta
        .modified()
        .map_or(std::time::UNIX_EPOCH, cap_std::time::SystemTime::into_std);
    if same_entry(from, to, rel, meta) {
        cut.whole(mtime);
        return true;
    }
    let dst = to.shown(rel);
    match pass {
        Pass::Move => accepted.contains(&dst),
        Pass::Check => {
            let src_meta = from.symlink_metadata(rel).ok();
            let regular = meta.file_type().is_file()
                && src_meta.as_ref().is_some_and(|m| m.file_type().is_file());
            let src_len = src_meta.map_or(0, |m| m.len());
            let prefix = regular
                && meta.len() < src_len
                && matches!((from.read(rel, false, src_len), to.read(rel, false, meta.len())), (Ok(a), Ok(b)) if a.starts_with(&b));
            if prefix {
                cut.prefix(dst, mtime);
            }
            prefix
        }
    }
}

/// Whether `rel` in `to` (with metadata `meta`) is the same file or symlink as in `from`.
fn same_entry(from: &Tree, to: &Tree, rel: &Path, meta: &cap_std::fs::Metadata) -> bool {
    let Ok(src_meta) = from.symlink_metadata(rel) else {
        return false;
    };
    let link = src_meta.file_type().is_symlink();
    if link || meta.file_type().is_symlink() {
        return link
            && meta.file_type().is_symlink()
            && matches!((from.read(rel, true, 0), to.read(rel, true, 0)), (Ok(a), Ok(b)) if a == b);
    }
    src_meta.len() == meta.len()
        && matches!((from.read(rel, false, meta.len()), to.read(rel, false, meta.len())), (Ok(a), Ok(b)) if a == b)
}
