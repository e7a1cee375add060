//! `restore --cache DIR` (`GIT_SESSION_CACHE`): a restore into an empty folder seeded from a
//! baked template elsewhere (DIR, or its `.git`). The template's packs (checked against their
//! own checksums) and its `shallow` file are copied into a new git dir in the target, marked as a
//! template with no files; the boot ([`super::boot`]) then fetches only what changed since the
//! template's base and writes every file.
//!
//! The restored repository never depends on DIR: its packs are copied, or hard-linked only when
//! they already belong to the target's owner (a hard link cannot be handed to another user,
//! SPEC rule 9). Nothing about the cache fails a restore: an unreadable, corrupt or foreign cache
//! is named in a warning and the restore fetches everything.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use super::{RestoreOptions, STAGING_DIR};
use crate::repo::template::TemplateRecord;

/// Seed `opts.dir` (empty) from the template at `cache`: on success the target holds a `.git`
/// that is a template with no files, and its record is returned; on failure nothing is left in
/// the target and the reason is returned (for the warning).
pub fn seed(opts: &RestoreOptions, cache: &Path) -> Result<TemplateRecord, String> {
    let cache_git = if cache.join(".git").is_dir() {
        cache.join(".git")
    } else {
        cache.to_path_buf()
    };
    let template = match TemplateRecord::read(&cache_git) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Err(format!(
                "{} is not a baked template (no {})",
                cache.display(),
                crate::repo::template::TEMPLATE_FILE
            ));
        }
        Err(e) => return Err(e.to_string()),
    };
    let staging = opts.dir.join(STAGING_DIR);
    let result = fill(opts, &cache_git, &template, &staging);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result.map(|()| template)
}

/// Build the template's git dir in `staging`, then move it to `.git`.
fn fill(
    opts: &RestoreOptions,
    cache_git: &Path,
    template: &TemplateRecord,
    staging: &Path,
) -> Result<(), String> {
    std::fs::create_dir_all(&opts.dir)
        .map_err(|e| format!("creating {}: {e}", opts.dir.display()))?;
    if staging.exists() {
        std::fs::remove_dir_all(staging)
            .map_err(|e| format!("removing the stale {}: {e}", staging.display()))?;
    }
    crate::repo::layout::init_template(staging, template.base).map_err(|e| e.to_string())?;
    let owner = std::fs::metadata(&opts.dir)
        .map_err(|e| format!("reading {}: {e}", opts.dir.display()))?
        .uid();
    let packs = verified_packs(&cache_git.join("objects/pack"))?;
    if packs.is_empty() {
        return Err(format!("{} holds no packs", cache_git.display()));
    }
    for (pack, index) in packs {
        for from in [pack, index] {
            let name = from.file_name().expect("a file in a folder");
            place(&from, &staging.join("objects/pack").join(name), owner)?;
        }
    }
    let shallow = cache_git.join("shallow");
    if shallow.exists() {
        std::fs::copy(&shallow, staging.join("shallow"))
            .map_err(|e| format!("copying {}: {e}", shallow.display()))?;
    }
    template.write(staging).map_err(|e| e.to_string())?;
    let git_dir = opts.dir.join(".git");
    std::fs::rename(staging, &git_dir)
        .map_err(|e| format!("moving {} into place: {e}", git_dir.display()))?;
    crate::fs::sync_dir(&opts.dir);
    Ok(())
}

/// The `(pack, index)` pairs in `pack_dir`, each checked against its own trailing checksum and
/// the index against its pack, so a damaged cache is refused before anything of it is used.
fn verified_packs(pack_dir: &Path) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    let entries =
        std::fs::read_dir(pack_dir).map_err(|e| format!("reading {}: {e}", pack_dir.display()))?;
    let mut out = Vec::new();
    let interrupt = std::sync::atomic::AtomicBool::new(false);
    for entry in entries.flatten() {
        let pack = entry.path();
        if pack.extension().is_none_or(|x| x != "pack") {
            continue;
        }
        let index = pack.with_extension("idx");
        let damaged = |what: &str| format!("{} is damaged ({what})", pack.display());
        let data = gix::odb::pack::data::File::at(&pack, gix::hash::Kind::Sha1)
            .map_err(|e| damaged(&crate::error::chain(&e)))?;
        let idx = gix::odb::pack::index::File::at(&index, gix::hash::Kind::Sha1)
            .map_err(|e| damaged(&crate::error::chain(&e)))?;
        data.verify_checksum(&mut gix::progress::Discard, &interrupt)
            .map_err(|e| damaged(&crate::error::chain(&e)))?;
        idx.verify_checksum(&mut gix::progress::Discard, &interrupt)
            .map_err(|e| damaged(&crate::error::chain(&e)))?;
        if idx.pack_checksum() != data.checksum() {
            return Err(damaged("its index belongs to another pack"));
        }
        out.push((pack, index));
    }
    Ok(out)
}

/// Hard-link `from` to `to` when it already belongs to `owner` (falling back to a copy, e.g.
/// across file systems), else copy it.
fn place(from: &Path, to: &Path, owner: u32) -> Result<(), String> {
    let same_owner = std::fs::metadata(from).is_ok_and(|m| m.uid() == owner);
    if same_owner && std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copying {}: {e}", from.display()))
}
