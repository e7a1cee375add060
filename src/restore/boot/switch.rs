//! Step 3 of the boot: the switch from the template's base to `TIP_SHA` in the work tree (only
//! the files the two commits disagree on), then the LFS files it wrote.

use super::super::checkout;
use super::super::options::RestoreOptions;
use super::super::probe::{Local, Probe, Survey, leading_blocker};
use super::intent::BootIntent;
use crate::error::{Error, Result};
use crate::fs::tree::Tree;
use crate::repo::template::TemplateRecord;
use crate::wire::http::Http;
use gix::bstr::{BStr, BString, ByteSlice as _};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

/// What [`switch`] did.
pub(super) struct Switched {
    /// Files written or removed.
    pub(super) files: usize,
    /// One for each local change kept.
    pub(super) warnings: Vec<String>,
}

/// What the switch will do, path by path, decided before anything is written.
#[derive(Default)]
pub(super) struct Moves {
    /// Paths to write from `TIP_SHA`.
    to_write: Vec<BString>,
    /// Files to remove (`TIP_SHA` has none there).
    to_remove: Vec<PathBuf>,
    /// Gitlink folders `TIP_SHA` no longer has (removed when empty).
    gitlinks_gone: Vec<PathBuf>,
    /// Gitlink folders `TIP_SHA` has that are missing here (created empty, as git does).
    gitlinks_new: Vec<PathBuf>,
    /// `.gitattributes` files already as `TIP_SHA` has them (read by the checkout).
    attributes: Vec<BString>,
    /// Local changes `TIP_SHA` leaves alone: kept.
    kept: Vec<String>,
    /// Local changes `TIP_SHA` changes too.
    conflicts: Vec<String>,
    /// Stat data of files known to hold their entry's content.
    stats: HashMap<BString, gix::index::entry::Stat>,
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
    // Every object read from the template's packs is checked against its id.
    let objects = super::super::verify::Verified(&repo.objects);
    let tip_tree = super::super::verify::commit(&objects, opts.tip)?;
    let mut index =
        checkout::index_from_tree(repo, &objects, tip_tree, opts.limits.max_tree_entries)?;
    tracing::debug!("switch: the index of {} built after {} ms", opts.tip, ms());
    let gitlinks =
        checkout::require_blobs(&index, |id| gix::objs::Exists::exists(&repo.objects, id))?;
    let on_disk = repo
        .index_or_empty()
        .map_err(|e| Error::internal("reading the template's index", crate::error::chain(&e)))?;
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
    remove_files(&tree, &moves.to_remove)?;
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
    checkout::write_index(&mut index)?;
    tracing::debug!("switch: the index written after {} ms", ms());
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
    warnings.extend(checkout::gitlink_warning(&gitlinks));
    Ok(Switched {
        files: moves.to_write.len() + moves.to_remove.len(),
        warnings,
    })
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
) -> Result<usize> {
    let mut index = repo
        .open_index()
        .map_err(|e| Error::internal("reading the index", crate::error::chain(&e)))?;
    let mut plan = super::super::lfs::find(repo, &index, opts.lfs, &mut |id| {
        let mut buf = Vec::new();
        let data = gix::objs::Find::try_find(&repo.objects, id, &mut buf).ok()??;
        (data.data.len() as u64 <= crate::wire::lfs::MAX_POINTER_BYTES).then(|| data.data.to_vec())
    })?;
    let tree = Tree::open(&opts.dir)
        .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
    plan.files.retain(|f| {
        let rel = Path::new(std::ffi::OsStr::from_bytes(&f.path));
        // Only a file of a pointer's size is read: content baked in is never read whole.
        tree.symlink_metadata(rel)
            .is_ok_and(|m| m.is_file() && m.len() <= crate::wire::lfs::MAX_POINTER_BYTES)
            && tree
                .read(rel, false)
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

/// One warning per local change the switch kept.
pub(super) fn kept_warnings(opts: &RestoreOptions, kept: &[String]) -> Vec<String> {
    kept.iter()
        .map(|p| {
            format!(
                "'{p}' was changed in the template after the bake and {} leaves it as the base \
                 had it: kept as a local change",
                opts.tip
            )
        })
        .collect()
}

/// Decide every path: `index` is `TIP_SHA`'s, `old` the template's (the base's, with the stat
/// data of the files as the bake wrote them); `cut_short` the paths an interrupted run of this
/// boot was writing.
pub(super) fn plan_moves(
    opts: &RestoreOptions,
    repo: &gix::Repository,
    index: &gix::index::File,
    old: &gix::index::File,
    cut_short: &std::collections::HashSet<&str>,
    survey: Survey,
) -> Result<Moves> {
    let old_entries: HashMap<&BStr, &gix::index::Entry> =
        old.entries().iter().map(|e| (e.path(old), e)).collect();
    let mut probe = Probe::new(repo, &opts.dir, index, old, survey)?;
    let mut moves = Moves::default();
    // Changed conversions change the work-tree form of files whose blobs did not change: those
    // are written again, as a fresh checkout writes them.
    let attributes_changed = index
        .entries()
        .iter()
        .filter(|e| e.path(index).ends_with(b".gitattributes"))
        .map(|e| (e.path(index), e.id))
        .collect::<std::collections::BTreeSet<_>>()
        != old
            .entries()
            .iter()
            .filter(|e| e.path(old).ends_with(b".gitattributes"))
            .map(|e| (e.path(old), e.id))
            .collect::<std::collections::BTreeSet<_>>();
    for entry in index.entries() {
        let path = entry.path(index);
        let base = old_entries.get(path).copied();
        if entry.mode == gix::index::entry::Mode::COMMIT {
            // A gitlink (submodule) is an empty folder here; its content is another repository's.
            let rel = path.to_path_lossy().into_owned();
            if !opts.dir.join(&rel).exists() {
                moves.gitlinks_new.push(rel);
            }
            continue;
        }
        let local = probe.local(path, base)?;
        let unchanged_by_tip = base.is_some_and(|b| b.id == entry.id && b.mode == entry.mode);
        // A changed exec bit (or kind) is a local change too, as git counts it.
        let local = match (local, base) {
            (Local::Blob(id), Some(b)) if id == b.id && probe.mode_differs(path, b.mode) => {
                Local::Other
            }
            _ => local,
        };
        if unchanged_by_tip {
            if local != Local::Blob(entry.id) {
                moves.kept.push(path.to_string());
            } else if attributes_changed && entry.mode != gix::index::entry::Mode::SYMLINK {
                moves.to_write.push(path.to_owned());
                continue;
            } else if let Some(b) = base {
                moves.stats.insert(path.to_owned(), b.stat);
            }
        } else if local == Local::Blob(entry.id) && !probe.mode_differs(path, entry.mode) {
            // As `TIP_SHA` has it already: an earlier, killed boot wrote it.
        } else if local == base.map_or(Local::Missing, |b| Local::Blob(b.id))
            || base.is_none() && local == Local::Dir
            || opts.force
            || cut_short.contains(path.to_str_lossy().as_ref())
        {
            moves.to_write.push(path.to_owned());
            continue;
        } else {
            moves.conflicts.push(path.to_string());
        }
        if path.ends_with(b".gitattributes") && local == Local::Blob(entry.id) {
            // Read by the checkout for the conversions; rewriting it as it is changes nothing.
            moves.attributes.push(path.to_owned());
        }
    }
    let new_paths: std::collections::HashSet<&BStr> =
        index.entries().iter().map(|e| e.path(index)).collect();
    for (path, base) in &old_entries {
        if new_paths.contains(path) {
            continue;
        }
        let rel = path.to_path_lossy().into_owned();
        if base.mode == gix::index::entry::Mode::COMMIT {
            moves.gitlinks_gone.push(rel);
            continue;
        }
        match probe.local(path, Some(*base))? {
            Local::Missing => {}
            Local::Blob(id) if id == base.id => moves.to_remove.push(rel),
            // A folder where the base had a file is the user's: never removed.
            Local::Dir => moves.conflicts.push(path.to_string()),
            _ if opts.force => moves.to_remove.push(rel),
            _ => moves.conflicts.push(path.to_string()),
        }
    }
    refuse_what_is_in_the_way(&opts.dir, &mut moves, &probe)?;
    Ok(moves)
}

/// Untracked content in the way of a file `TIP_SHA` adds — a file or symlink where it has a
/// folder, a folder with anything in it that is not a tracked file being removed — is exit 7,
/// `--force` or not (as for a plain restore): the switch never deletes what it does not track.
pub(super) fn refuse_what_is_in_the_way(
    workdir: &Path,
    moves: &mut Moves,
    probe: &Probe,
) -> Result<()> {
    let removed: std::collections::HashSet<&Path> =
        moves.to_remove.iter().map(PathBuf::as_path).collect();
    let mut in_the_way = Vec::new();
    for path in &moves.to_write {
        let rel = path.to_path_lossy();
        if let Some(blocker) = leading_blocker(workdir, &rel, &probe.folders)
            && !removed.contains(blocker.as_path())
        {
            in_the_way.push(blocker.display().to_string());
            continue;
        }
        if probe.is_dir(path.as_bstr()) && !only_removed_files_below(workdir, &rel, &removed) {
            in_the_way.push(rel.display().to_string());
        }
    }
    if in_the_way.is_empty() {
        return Ok(());
    }
    in_the_way.sort();
    in_the_way.dedup();
    Err(Error::conflict(format!(
        "untracked content is in the way of files the commit adds: {}; nothing was changed \
         (move it aside and rerun; --force does not delete what git-session does not track)",
        in_the_way.join(", ")
    )))
}

/// Whether everything below the folder `rel` is a file in `removed` (or an empty folder).
pub(super) fn only_removed_files_below(
    workdir: &Path,
    rel: &Path,
    removed: &std::collections::HashSet<&Path>,
) -> bool {
    let Ok(entries) = std::fs::read_dir(workdir.join(rel)) else {
        return false;
    };
    entries.flatten().all(|e| {
        let child = rel.join(e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() => only_removed_files_below(workdir, &child, removed),
            Ok(_) => removed.contains(child.as_path()),
            Err(_) => false,
        }
    })
}

/// Exit 7, nothing changed, when a local change meets a change of `TIP_SHA`'s.
pub(super) fn refuse_conflicts(
    opts: &RestoreOptions,
    template: &TemplateRecord,
    conflicts: &mut [String],
) -> Result<()> {
    if conflicts.is_empty() {
        return Ok(());
    }
    conflicts.sort();
    let shown: Vec<_> = conflicts.iter().take(5).cloned().collect();
    Err(Error::conflict(format!(
        "files changed in the template since it was baked at {} are also changed by {}: {}{}; \
         nothing was changed (pass --force to take {}'s version)",
        template.base,
        opts.tip,
        shown.join(", "),
        if conflicts.len() > 5 { ", …" } else { "" },
        opts.tip
    )))
}

/// Remove the files `TIP_SHA` no longer has, and the folders that leaves empty.
pub(super) fn remove_files(tree: &Tree, paths: &[PathBuf]) -> Result<()> {
    for rel in paths {
        match tree.remove_file(rel) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::io(
                    format!("removing {}", tree.shown(rel).display()),
                    e,
                ));
            }
        }
        let mut dir = rel.parent();
        while let Some(d) = dir {
            if d.as_os_str().is_empty() || tree.remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
    Ok(())
}

/// Write `paths` (entries of `index`) through the tree's handle — symlinks, exec bits,
/// `.gitattributes` conversions as `TIP_SHA`'s tree asks, never through a symlink — and return
/// the index of what was written, with its new stat data (`None`: nothing to write).
/// `attributes` (`.gitattributes` files already as `TIP_SHA` has them) are written again too.
pub(super) fn write_files(
    repo: &gix::Repository,
    tree: &Tree,
    index: &gix::index::File,
    paths: &[BString],
    attributes: &[BString],
) -> Result<Option<gix::index::File>> {
    if paths.is_empty() {
        return Ok(None);
    }
    let wanted: std::collections::HashSet<&BStr> =
        paths.iter().chain(attributes).map(|p| p.as_ref()).collect();
    let mut part = gix::index::State::new(gix::hash::Kind::Sha1);
    for entry in index.entries() {
        let path = entry.path(index);
        if wanted.contains(path) {
            part.dangerously_push_entry(
                Default::default(),
                entry.id,
                gix::index::entry::Flags::empty(),
                entry.mode,
                path,
            );
        }
    }
    let mut part = gix::index::File::from_state(part, repo.index_path());
    let mut form = super::super::write::WorktreeForm::new(repo, index)?;
    let mut writer =
        super::super::write::Writer::new(tree, super::super::write::Overwrite { files: true });
    writer.write_entries(
        &mut part,
        &super::super::verify::Verified(&repo.objects),
        &mut form,
    )?;
    Ok(Some(part))
}

/// Rewrite, in place, the files of `paths` that exist as regular files with one link and whose
/// blobs are under the big-object threshold: opened without truncation, written from the start,
/// cut to the new length, exec bit set as the entry's mode says. On ext4 this reuses the file's
/// blocks, where truncating or unlinking first frees them (measured here: about 20 µs a file
/// against 350–450 µs). Their stat data goes into `stats`; returns the paths left for the
/// checkout (new files, symlinks, big blobs, and hard-linked files, removed first so the
/// checkout never writes through the link).
pub(super) fn write_in_place(
    opts: &RestoreOptions,
    tree: &Tree,
    repo: &gix::Repository,
    index: &gix::index::File,
    paths: &[BString],
    stats: &mut HashMap<BString, gix::index::entry::Stat>,
) -> Result<Vec<BString>> {
    let wanted: std::collections::HashSet<&BStr> = paths.iter().map(|p| p.as_ref()).collect();
    let entries: Vec<&gix::index::Entry> = index
        .entries()
        .iter()
        .filter(|e| wanted.contains(e.path(index)))
        .collect();
    // Inflating and writing is CPU work the fetch's server has finished with: a few threads,
    // each on a contiguous run of the index, so the paths left keep the index's order.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let chunk = entries.len().div_ceil(threads).max(256);
    let parts: Vec<Result<InPlace>> = std::thread::scope(|scope| {
        let handles: Vec<_> = entries
            .chunks(chunk)
            .map(|part| {
                let repo = repo.clone();
                scope.spawn(move || write_in_place_part(opts, tree, &repo, index, part))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("a writing thread panicked".into())))
            })
            .collect()
    });
    let mut rest = Vec::new();
    for part in parts {
        let part = part?;
        rest.extend(part.rest);
        stats.extend(part.stats);
    }
    Ok(rest)
}

/// What [`write_in_place_part`] did: the paths left for the checkout, the stat data of the files
/// written.
pub(super) struct InPlace {
    rest: Vec<BString>,
    stats: Vec<(BString, gix::index::entry::Stat)>,
}

/// [`write_in_place`] for the entries of one thread.
pub(super) fn write_in_place_part(
    opts: &RestoreOptions,
    tree: &Tree,
    repo: &gix::Repository,
    index: &gix::index::File,
    entries: &[&gix::index::Entry],
) -> Result<InPlace> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let mut form = super::super::write::WorktreeForm::new(repo, index)?;
    let mut done = InPlace {
        rest: Vec::new(),
        stats: Vec::with_capacity(entries.len()),
    };
    let rest = &mut done.rest;
    let mut buf = Vec::new();
    for entry in entries {
        let path = entry.path(index);
        let exec = match entry.mode {
            gix::index::entry::Mode::FILE => false,
            gix::index::entry::Mode::FILE_EXECUTABLE => true,
            _ => {
                rest.push(path.to_owned());
                continue;
            }
        };
        let rel = path.to_path_lossy();
        let full = tree.shown(&rel);
        let small = gix::objs::FindHeader::try_header(&repo.objects, &entry.id)
            .ok()
            .flatten()
            .is_some_and(|h| h.size < opts.limits.big_object_bytes);
        let file = tree
            .open_existing(&rel)
            .ok()
            .and_then(|f| f.metadata().ok().map(|m| (f, m)))
            .filter(|(_, m)| m.is_file());
        let file = match file {
            Some((file, meta)) if meta.nlink() == 1 && small => file,
            Some((_, meta)) if meta.nlink() > 1 => {
                // Another name of the same file (a template's hard link) keeps its content:
                // the checkout writes a new file here, never through the link.
                tree.remove_file(&rel)
                    .map_err(|e| Error::io(format!("removing {}", full.display()), e))?;
                rest.push(path.to_owned());
                continue;
            }
            _ => {
                rest.push(path.to_owned());
                continue;
            }
        };
        let mut file = file;
        let blob = gix::objs::Find::try_find(
            &super::super::verify::Verified(&repo.objects),
            &entry.id,
            &mut buf,
        )
        .map_err(|e| Error::internal(format!("reading {}", entry.id), e))?
        .ok_or_else(|| Error::Integrity(format!("blob {} of '{path}' is missing", entry.id)))?
        .data
        .to_vec();
        let data = form.convert(blob, path)?;
        let io = |e| Error::io(format!("writing {}", full.display()), e);
        std::io::Write::write_all(&mut file, &data).map_err(io)?;
        file.set_len(data.len() as u64).map_err(io)?;
        let mode = file.metadata().map_err(io)?.permissions().mode();
        let want = if exec {
            mode | (mode & 0o444) >> 2
        } else {
            mode & !0o111
        };
        if want != mode {
            file.set_permissions(std::fs::Permissions::from_mode(want))
                .map_err(io)?;
        }
        let meta = gix::index::fs::Metadata::from_file(&file).map_err(io)?;
        let stat = gix::index::entry::Stat::from_fs(&meta)
            .map_err(|e| Error::internal(format!("reading {}", full.display()), e))?;
        done.stats.push((path.to_owned(), stat));
    }
    Ok(done)
}

/// Put the stat data of files known to hold their entry's content into `index`, so `git status`
/// re-reads none of them.
pub(super) fn apply_stats(
    index: &mut gix::index::File,
    stats: &HashMap<BString, gix::index::entry::Stat>,
) {
    let (entries, backing) = index.entries_mut_and_pathbacking();
    for entry in entries {
        if let Some(stat) = stats.get(entry.path_in(backing)) {
            entry.stat = *stat;
        }
    }
}
