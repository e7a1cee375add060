//! Step 3a of the boot: what the switch will do, path by path, decided before anything is written:
//! the files to write and to remove, the local changes kept, and what refuses the switch (a
//! local change `TIP_SHA` changes too, content in the way of a file it adds).

use super::super::options::RestoreOptions;
use super::super::probe::{Local, Probe, Survey, leading_blocker};
use crate::error::{Error, Result};
use crate::repo::template::TemplateRecord;
use gix::bstr::{BStr, BString, ByteSlice as _};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What the switch will do, path by path, decided before anything is written.
#[derive(Default)]
pub(super) struct Moves {
    /// Paths to write from `TIP_SHA`.
    pub(super) to_write: Vec<BString>,
    /// Files to remove (`TIP_SHA` has none there).
    pub(super) to_remove: Vec<PathBuf>,
    /// Gitlink folders `TIP_SHA` no longer has (removed when empty).
    pub(super) gitlinks_gone: Vec<PathBuf>,
    /// Gitlink folders `TIP_SHA` has that are missing here (created empty, as git does).
    pub(super) gitlinks_new: Vec<PathBuf>,
    /// `.gitattributes` files already as `TIP_SHA` has them (read by the checkout).
    pub(super) attributes: Vec<BString>,
    /// Local changes `TIP_SHA` leaves alone: kept.
    pub(super) kept: Vec<String>,
    /// Local changes `TIP_SHA` changes too.
    pub(super) conflicts: Vec<String>,
    /// Stat data of files known to hold their entry's content.
    pub(super) stats: HashMap<BString, gix::index::entry::Stat>,
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
    mut survey: Survey,
) -> Result<Moves> {
    let old_entries: HashMap<&BStr, &gix::index::Entry> =
        old.entries().iter().map(|e| (e.path(old), e)).collect();
    // A template without an index: its files are judged by content against the base's tree.
    let by_content = survey.by_content.take();
    let content_entries: HashMap<&BStr, &gix::index::Entry> = by_content
        .iter()
        .flat_map(|c| c.entries().iter().map(move |e| (e.path(c), e)))
        .collect();
    let base_index = by_content.as_ref().unwrap_or(old);
    let mut probe = Probe::new(repo, &opts.dir, index, base_index, survey)?;
    let mut moves = Moves::default();
    // Changed conversions change the work-tree form of files whose blobs did not change: those
    // are written again, as a fresh checkout writes them.
    let attributes_changed = attributes_differ(index, base_index);
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
        // Known by content only: a file as the base had it is written, a missing one too.
        let base_content = base.is_none().then(|| content_entries.get(path)).flatten();
        let local = probe.local(path, base.or(base_content.copied()))?;
        let unchanged_by_tip = base.is_some_and(|b| b.id == entry.id && b.mode == entry.mode);
        // A changed exec bit (or kind) is a local change too, as git counts it.
        let local = match (local, base.or(base_content.copied())) {
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
            // As `TIP_SHA` has it (a killed boot wrote it, or a template without an index holds
            // it: then written again if its conversions changed, as `unchanged_by_tip` above).
            if attributes_changed
                && base_content.is_some_and(|b| b.id == entry.id)
                && entry.mode != gix::index::entry::Mode::SYMLINK
            {
                moves.to_write.push(path.to_owned());
                continue;
            }
            // Read whole: its stat data is the entry's.
            if let Some(stat) = probe.last_stat(path) {
                moves.stats.insert(path.to_owned(), stat);
            }
        } else if local == base.map_or(Local::Missing, |b| Local::Blob(b.id))
            || base_content.is_some_and(|b| local == Local::Blob(b.id))
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
    plan_removals(
        opts,
        &new_paths,
        &old_entries,
        &content_entries,
        &mut probe,
        &mut moves,
    )?;
    refuse_what_is_in_the_way(&opts.dir, &mut moves, &probe)?;
    Ok(moves)
}

/// Whether `index` and `old` hold different `.gitattributes` (a path or an id).
fn attributes_differ(index: &gix::index::File, old: &gix::index::File) -> bool {
    let of = |f: &gix::index::File| {
        f.entries()
            .iter()
            .filter(|e| e.path(f).ends_with(b".gitattributes"))
            .map(|e| (e.path(f).to_owned(), e.id))
            .collect::<std::collections::BTreeSet<_>>()
    };
    of(index) != of(old)
}

/// The base's files `TIP_SHA` no longer has (`new_paths`): removed when still as the base had
/// them; a local change there is a conflict (`--force`: removed), a gitlink's folder removed
/// when empty. `content` is the base's tree when the template has no index (`old` empty).
fn plan_removals(
    opts: &RestoreOptions,
    new_paths: &std::collections::HashSet<&BStr>,
    old_entries: &HashMap<&BStr, &gix::index::Entry>,
    content_entries: &HashMap<&BStr, &gix::index::Entry>,
    probe: &mut Probe,
    moves: &mut Moves,
) -> Result<()> {
    // Without an index, a file of the base's tree is the base's only while its content is:
    // anything else there is untracked, as git sees it, and left alone.
    for (path, base) in content_entries {
        if !new_paths.contains(path)
            && !old_entries.contains_key(path)
            && base.mode != gix::index::entry::Mode::COMMIT
            && probe.local(path, Some(*base))? == Local::Blob(base.id)
            && !probe.mode_differs(path, base.mode)
        {
            moves.to_remove.push(path.to_path_lossy().into_owned());
        }
    }
    for (path, base) in old_entries {
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
    Ok(())
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
