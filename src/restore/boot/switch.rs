//! Step 3 of the boot: the switch from the template's base to `TIP_SHA` in the work tree (only
//! the files the two commits disagree on), then the LFS files it wrote.

use super::super::checkout;
use super::super::options::RestoreOptions;
use super::super::probe::Survey;
use super::files::{apply_stats, remove_files, write_files, write_in_place};
use super::intent::BootIntent;
use super::moves::{kept_warnings, plan_moves, refuse_conflicts};
use crate::error::{Error, Result};
use crate::fs::tree::Tree;
use crate::repo::template::TemplateRecord;
use crate::wire::http::Http;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// What [`switch`] did.
pub(super) struct Switched {
    /// Files written or removed.
    pub(super) files: usize,
    /// One for each local change kept.
    pub(super) warnings: Vec<String>,
}

/// Step 3: move the work tree from the base's tree to `TIP_SHA`'s, then write the index.
pub(super) fn switch(
    opts: &RestoreOptions,
    template: &TemplateRecord,
    repo: &gix::Repository,
    mut intent: BootIntent,
    mut survey: Survey,
) -> Result<Switched> {
    let started = std::time::Instant::now();
    let ms = || started.elapsed().as_millis();
    // Every object read from the template's packs is checked against its id. The trees (and
    // below, the blobs) are read through stores of the switch's own, replaced every few MiB and
    // dropped when done: a cache boot reads every object of `TIP_SHA`'s tree from all over the
    // template's pack and the new one, whose every page would stay resident in the
    // repository's mapping that read them.
    let own = super::files::releasing(repo, false)?;
    let objects = super::super::verify::Verified(&own);
    let tip_tree = super::super::verify::commit(&objects, opts.tip)?;
    let mut index =
        checkout::index_from_tree(repo, &objects, tip_tree, opts.limits.max_tree_entries)?;
    drop(own);
    tracing::debug!("switch: the index of {} built after {} ms", opts.tip, ms());
    let gitlinks =
        checkout::require_blobs(&index, |id| gix::objs::Exists::exists(&repo.objects, id))?;
    let on_disk = repo
        .index_or_empty()
        .map_err(|e| Error::from_chain("reading the template's index", &e))?;
    // The template's index counts only when it holds exactly the base's tree (see `Survey`).
    let base_index = survey.base_index.take();
    let old: &gix::index::File = base_index.as_ref().unwrap_or(&on_disk);
    let cut_short: std::collections::HashSet<&str> =
        intent.writing.iter().map(String::as_str).collect();
    let mut moves = plan_moves(opts, repo, &index, old, &cut_short, survey)?;
    tracing::debug!(
        "switch: {} to write, {} to remove, {} kept, planned after {} ms",
        moves.to_write.len(),
        moves.to_remove.len(),
        moves.kept.len(),
        ms()
    );
    refuse_conflicts(opts, template, &mut moves.conflicts)?;
    // Before the first file is written: a kill from here on may cut any of them short.
    intent.writing = moves.to_write.iter().map(|p| p.to_string()).collect();
    intent.write(repo.git_dir())?;
    // The one handle every write into the tree goes through (SPEC rule 7).
    let tree = Tree::open(&opts.dir)
        .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
    remove_files_and_folders(&tree, &moves)?;
    crate::failpoint::hit("mid-switch");
    tracing::debug!("switch: removed after {} ms", ms());
    let rest = write_in_place(opts, &tree, repo, &index, &moves.to_write, &mut moves.stats)?;
    tracing::debug!(
        "switch: {} files rewritten in place after {} ms",
        moves.to_write.len() - rest.len(),
        ms()
    );
    let mut written = write_files(repo, &tree, &index, &rest, &moves.attributes)?;
    tracing::debug!("switch: written after {} ms", ms());
    if let Some(part) = written.as_mut() {
        moves.stats.extend(
            part.entries()
                .iter()
                .map(|e| (e.path(part).to_owned(), e.stat)),
        );
    }
    apply_stats(&mut index, &moves.stats);
    let wrote = checkout::write_index_if_changed(&mut index)?;
    tracing::debug!("switch: the index (written: {wrote}) after {} ms", ms());
    moves.kept.sort();
    let mut warnings = kept_warnings(opts, &moves.kept);
    if base_index.is_some() {
        warnings.push(format!(
            "the template's index {} does not hold the tree of its base {} (changed after the \
             bake): not used, every file was compared by content",
            repo.index_path().display(),
            template.base
        ));
    }
    warnings.extend(checkout::gitlink_warning(
        &gitlinks,
        &opts.with_submodules(),
    ));
    Ok(Switched {
        files: moves.to_write.len() + moves.to_remove.len(),
        warnings,
    })
}

/// The files the switch removes, the folders of submodules gone, the (empty) folders of new ones.
fn remove_files_and_folders(tree: &Tree, moves: &super::moves::Moves) -> Result<()> {
    remove_files(tree, &moves.to_remove)?;
    for dir in &moves.gitlinks_gone {
        let _ = tree.remove_dir(dir);
    }
    for rel in &moves.gitlinks_new {
        let in_the_way = tree
            .create_dirs(rel, 0, &mut Vec::new())
            .map_err(|e| Error::io(format!("creating {}", tree.shown(rel).display()), e))?;
        if let Some(blocker) = in_the_way {
            return Err(Error::conflict(format!(
                "{} is in the way of the submodule folder {}",
                tree.shown(&blocker).display(),
                rel.display()
            )));
        }
    }
    Ok(())
}

/// After the switch: the LFS files whose file holds their pointer (written by the switch, or
/// baked so) get their content, as a git restore gives it (see [`super::super::lfs`]); files that hold
/// anything else (the content baked in, or a local change) are left. Returns how many.
///
/// # Errors
/// Those of the LFS fetch and of writing the files and the index.
pub(super) fn lfs_after_switch(
    opts: &RestoreOptions,
    repo: &gix::Repository,
    http: &Http,
    read_url: &crate::types::RemoteUrl,
    warnings: &mut Vec<String>,
) -> Result<usize> {
    let mut index = repo
        .open_index()
        .map_err(|e| Error::from_chain("reading the index", &e))?;
    let mut plan = super::super::lfs::find(repo, &index, opts.lfs, &mut |id| {
        let mut buf = Vec::new();
        let data = gix::objs::Find::try_find(&repo.objects, id, &mut buf).ok()??;
        (data.data.len() as u64 <= crate::wire::lfs::MAX_POINTER_BYTES).then(|| data.data.to_vec())
    })?;
    warnings.append(&mut plan.notes);
    let tree = Tree::open(&opts.dir)
        .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
    plan.files.retain(|f| {
        let rel = Path::new(std::ffi::OsStr::from_bytes(&f.path));
        // Only a file of a pointer's size is read: content baked in is never read whole.
        tree.symlink_metadata(rel)
            .is_ok_and(|m| m.is_file() && m.len() <= crate::wire::lfs::MAX_POINTER_BYTES)
            && tree
                .read(rel, false, crate::wire::lfs::MAX_POINTER_BYTES)
                .is_ok_and(|b| b == f.pointer.encode().as_bytes())
    });
    if plan.files.is_empty() {
        return Ok(0);
    }
    // The template's LFS store is the template's: an object there is used only if its content
    // is what its name says (a tampered one is fetched again).
    for f in &plan.files {
        let stored = crate::repo::lfs::object_path(repo.git_dir(), &f.pointer);
        if stored.exists() && !crate::repo::lfs::file_holds(&stored, &f.pointer) {
            std::fs::remove_file(&stored)
                .map_err(|e| Error::io(format!("removing {}", stored.display()), e))?;
        }
    }
    let endpoint = match &plan.configured_url {
        Some(url) => crate::wire::lfs::Endpoint::configured(url, read_url)?,
        None => crate::wire::lfs::Endpoint::of_remote(read_url),
    };
    super::super::lfs::fetch(http, &endpoint, repo.git_dir(), &plan.files)?;
    super::super::lfs::smudge(
        &tree,
        Path::new(".git"),
        repo.git_dir(),
        &mut index,
        &plan.files,
    )?;
    checkout::write_index(&mut index)?;
    Ok(plan.files.len())
}
