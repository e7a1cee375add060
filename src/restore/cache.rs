//! `restore --cache DIR` (`GIT_SESSION_CACHE`): a restore into an empty folder seeded from a
//! baked template elsewhere (DIR, or its `.git`). The template's packs and its `shallow` file are copied into a new git dir in the target, marked as a
//! template with no files; the boot ([`super::boot`]) then fetches only what changed since the
//! template's base and writes every file.
//!
//! The restored repository never depends on DIR: its packs are copied by indexing them afresh
//! (every object's id computed from its bytes, the trailer checked), never linked, and the
//! cache's own indexes are not read. Nothing about the cache fails a restore: an unreadable,
//! corrupt or foreign cache is named in a warning and the restore fetches everything.

use std::path::Path;

use super::options::RestoreOptions;
use crate::names::STAGING_DIR;
use crate::repo::template::TemplateRecord;
use crate::types::FullSha;

/// Seed `opts.dir` (empty) from the template at `cache`: on success the target holds a `.git`
/// that is a template with no files, and its record is returned; on failure nothing is left in
/// the target and the reason is returned (for the warning).
pub fn seed(opts: &RestoreOptions, cache: &Path) -> Result<TemplateRecord, String> {
    // Say what is wrong with the path itself before judging what it holds.
    match std::fs::metadata(cache) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{} does not exist", cache.display()));
        }
        Err(e) => return Err(format!("{} cannot be read: {e}", cache.display())),
        Ok(m) if !m.is_dir() => return Err(format!("{} is not a folder", cache.display())),
        Ok(_) => {}
    }
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
    if template.object_format != opts.tip.format() {
        // Formats are never converted: its objects cannot serve TIP_SHA's repository.
        return Err(format!(
            "it was baked from a {} repository, and TIP_SHA is a {} id",
            crate::types::format_title(template.object_format),
            crate::types::format_title(opts.tip.format())
        ));
    }
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
    let packs = reindexed_packs(
        opts,
        &cache_git.join("objects/pack"),
        staging,
        template.object_format,
    )?;
    if packs == 0 {
        return Err(format!("{} holds no packs", cache_git.display()));
    }
    // Read as a record (a regular file, capped), never followed to a device that never ends.
    let shallow = cache_git.join("shallow");
    let fix = "the cache is skipped; rebuild it";
    if let Some(ids) = crate::fs::state::read(&shallow, 1 << 20, fix).map_err(|e| e.to_string())? {
        // Each line the boot sends as a `shallow` line: a full id of the template's format.
        let malformed = ids.split(|&b| b == b'\n').find(|line| {
            !line.is_empty() && FullSha::from_wire_in(template.object_format, line).is_none()
        });
        if let Some(line) = malformed {
            return Err(format!(
                "{} holds a malformed line '{}' (not a {} id)",
                shallow.display(),
                crate::text::line(&line[..line.len().min(80)]),
                crate::types::format_title(template.object_format)
            ));
        }
        std::fs::write(staging.join("shallow"), ids)
            .map_err(|e| format!("copying {}: {e}", shallow.display()))?;
    }
    template.write(staging).map_err(|e| e.to_string())?;
    let git_dir = opts.dir.join(".git");
    std::fs::rename(staging, &git_dir)
        .map_err(|e| format!("moving {} into place: {e}", git_dir.display()))?;
    crate::fs::sync_dir(&opts.dir);
    Ok(())
}

/// Copy every pack of `pack_dir` into the staging git dir by indexing it afresh, as git's
/// `index-pack` would: its trailer is checked and every object's id is computed from its bytes,
/// so a damaged pack (cut short, a byte changed) or a changed index (an id naming another
/// object's offset, its checksum recomputed) cannot reach the checkout: the cache's own indexes
/// are never read. The packs are read in the template's `format`. Returns how many packs were
/// copied.
fn reindexed_packs(
    opts: &RestoreOptions,
    pack_dir: &Path,
    staging: &Path,
    format: crate::types::Format,
) -> Result<usize, String> {
    let entries =
        std::fs::read_dir(pack_dir).map_err(|e| format!("reading {}: {e}", pack_dir.display()))?;
    let interrupt = std::sync::atomic::AtomicBool::new(false);
    let into = staging.join("objects/pack");
    let mut count = 0;
    for entry in entries.flatten() {
        let pack = entry.path();
        if pack.extension().is_none_or(|x| x != "pack")
            || entry.file_name().as_encoded_bytes().starts_with(b"tmp_")
        {
            continue;
        }
        let file = crate::fs::open_regular(&pack, true)
            .map_err(|e| format!("reading {}: {e}", pack.display()))?;
        let mut input = std::io::BufReader::with_capacity(256 << 10, file);
        crate::pack::receive(
            &mut input,
            &into,
            None,
            opts.limits,
            &interrupt,
            None,
            format,
        )
        .map_err(|e| match e {
            crate::pack::ReceiveError::Local(e) => e.to_string(),
            crate::pack::ReceiveError::TooLarge(why) | crate::pack::ReceiveError::Corrupt(why) => {
                format!("{} is damaged ({why})", pack.display())
            }
        })?;
        count += 1;
    }
    Ok(count)
}
