//! Step 2 of the boot: fetch only the objects between the template's base and `TIP_SHA` (a thin
//! pack completed from the tree's own objects).

use super::super::options::RestoreOptions;
use crate::error::{Error, Result};
use crate::repo::template::TemplateRecord;
use crate::types::FullSha;
use crate::wire::http::Http;
use crate::wire::upload_pack as fetch;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// What the fetch leaves: the lease, warnings, and the shallow commits afterwards.
pub(super) type Fetched = (FullSha, Vec<String>, Vec<gix::ObjectId>);

/// Step 2, on the template's packs once they are checked ([`super::super::verify`]): the cheap checks
/// before the fetch, the checksum of every byte beside it. Packs that fail are removed and the
/// whole commit is fetched instead, with a warning naming why — never a failed boot.
pub(super) fn fetch_checked(
    opts: &RestoreOptions,
    template: &TemplateRecord,
    repo: &mut gix::Repository,
    http: &Http,
    read: &crate::wire::http::UrlSource,
    connected: &fetch::Connected,
) -> Result<Fetched> {
    let git_dir = repo.git_dir().to_owned();
    let pack_dir = git_dir.join("objects/pack");
    let packs = super::super::verify::list(&pack_dir);
    let format = template.object_format;
    let mut damaged = super::super::verify::quick(&packs, format).err();
    if damaged.is_some() {
        super::super::verify::set_aside(&packs)?;
        // Opened afresh: the handle may know the packs just set aside.
        *repo = crate::repo::open(&git_dir)?;
    }
    let full = {
        let packs = if damaged.is_some() { Vec::new() } else { packs };
        std::thread::spawn(move || super::super::verify::full(&packs, format))
    };
    let first = fetch_difference(
        opts,
        template,
        repo,
        (http, read, connected),
        damaged.is_none(),
    );
    let checked = full
        .join()
        .unwrap_or_else(|_| Err("the check of the template's packs panicked".into()));
    let (lease, mut warnings, shallow) = match (first, checked) {
        (Ok(fetched), Ok(())) => fetched,
        (Err(e), Ok(())) => return Err(e),
        (_, Err(why)) => {
            // The thin pack was completed from damaged objects: it goes too.
            super::super::verify::set_aside(&super::super::verify::list(&pack_dir))?;
            damaged = Some(why);
            *repo = crate::repo::open(&git_dir)?;
            fetch_difference(opts, template, repo, (http, read, connected), false)?
        }
    };
    if let Some(why) = damaged {
        warnings.insert(
            0,
            format!(
                "{why}: the template's objects were not used, the whole commit was fetched \
                 instead (bake the template again)"
            ),
        );
    }
    Ok((lease, warnings, shallow))
}

/// The lease (ls-refs) and the objects between the base and `TIP_SHA`, beside each other; with
/// `use_base` false (the template's objects are gone) the whole commit.
pub(super) fn fetch_difference(
    opts: &RestoreOptions,
    template: &TemplateRecord,
    repo: &gix::Repository,
    (http, read, connected): (&Http, &crate::wire::http::UrlSource, &fetch::Connected),
    use_base: bool,
) -> Result<Fetched> {
    let caps = &connected.server;
    let git_dir = repo.git_dir();
    let mut shallow = if use_base {
        read_shallow(git_dir, template.object_format)?
    } else {
        Vec::new()
    };
    let have_tip = gix::objs::Exists::exists(&repo.objects, &opts.tip.id());
    let interrupt = AtomicBool::new(false);
    let pack_dir = git_dir.join("objects/pack");
    let before = pack_indexes(&pack_dir, template.object_format)?;
    let mut warnings = Vec::new();
    // The thin pack's delta bases (3,217 on the bench's generated repository, 30 commits apart)
    // are read from all over the template's pack, whose every page would stay resident in the
    // mapping that read them: read through stores of their own, replaced every few MiB and
    // dropped when this returns, they are neither all resident at once nor carried into the
    // switch.
    let local = (use_base && !have_tip)
        .then(|| {
            let dir = repo.objects.store_ref().path().to_owned();
            crate::pack::ReleasingObjects::at(dir.clone(), repo.object_hash())
                .map_err(|e| Error::io(format!("opening the objects of {}", dir.display()), e))
        })
        .transpose()?;
    let (remote_tip, fetched) = std::thread::scope(|scope| {
        let lookup = scope.spawn(|| remote_tip(opts, http, read, connected));
        let fetched = if have_tip {
            tracing::info!("{} is here already (an earlier boot fetched it)", opts.tip);
            Ok(None)
        } else {
            let thin = local
                .as_ref()
                .map(|local| (template, shallow.as_slice(), local));
            let get = (http, read, caps, &interrupt);
            fetch_objects(opts, &pack_dir, get, thin, &mut warnings).map(Some)
        };
        let remote_tip = lookup
            .join()
            .unwrap_or_else(|_| Err(Error::Internal("the lease lookup panicked".into())));
        (remote_tip, fetched)
    });
    let (remote_tip, fetched) = (remote_tip?, fetched?);
    if let Some(fetched) = fetched {
        tracing::info!("received {} objects", fetched.objects);
        if let Some(pack) = &fetched.pack_path {
            warn_if_the_base_was_not_used(pack, &before, template, fetched.objects, &mut warnings)?;
        }
        shallow.extend(fetched.shallow);
    }
    let lease = super::super::plan::lease_from(&opts.branch, opts.tip, remote_tip, &mut warnings);
    Ok((lease, warnings, shallow))
}

/// The session branch's value on the remote (the lease), beside the fetch.
fn remote_tip(
    opts: &RestoreOptions,
    http: &Http,
    read: &crate::wire::http::UrlSource,
    connected: &fetch::Connected,
) -> Result<Option<FullSha>> {
    let caps = &connected.server;
    match connected.tip {
        // The posted ls-refs answered it.
        Some(tip) => Ok(tip),
        // Nothing asked yet (`connect::at_once`): the ls-refs goes beside the fetch.
        None if matches!(
            caps,
            fetch::Server::Assumed {
                confirmed: false,
                ..
            }
        ) =>
        {
            super::super::connect::lease(http, read, opts)
        }
        None => http.with_retries(read, "looking up the session branch", |url| {
            fetch::ls_ref(http, url, caps, &opts.branch)
        }),
    }
}

/// The fetch of `TIP_SHA`: thin against the template's base when `thin` gives it (its shallow
/// commits and local objects), else the whole commit; a thin fetch the server fails is followed
/// by the whole commit, with a warning (the cache must never fail a boot).
fn fetch_objects(
    opts: &RestoreOptions,
    pack_dir: &Path,
    (http, read, caps, interrupt): (
        &Http,
        &crate::wire::http::UrlSource,
        &fetch::Server,
        &AtomicBool,
    ),
    thin: Option<(
        &TemplateRecord,
        &[gix::ObjectId],
        &crate::pack::ReleasingObjects,
    )>,
    warnings: &mut Vec<String>,
) -> Result<fetch::Fetched> {
    let whole = || {
        http.with_retries(read, "fetching the commit", |url| {
            fetch::fetch_pack(http, url, caps, want(opts, pack_dir, None), interrupt)
        })
    };
    let Some((template, shallow, local)) = thin else {
        return whole();
    };
    let haves = [template.base.id()];
    let base = fetch::Base {
        shallow,
        haves: &haves,
        local,
    };
    match http.with_retries(read, "fetching the commit", |url| {
        fetch::fetch_pack(http, url, caps, want(opts, pack_dir, Some(base)), interrupt)
    }) {
        Err(e) if e.exit_code() == 6 => {
            warnings.push(format!(
                "the fetch of what changed since the template's base {} failed ({e}): \
                 fetched the whole commit instead",
                template.base
            ));
            whole()
        }
        other => other,
    }
}

/// A thin pack holds only new objects, plus at most one appended delta base per delta; a server
/// that ignored the `have` sent the unchanged objects too: a warning says so.
fn warn_if_the_base_was_not_used(
    pack: &Path,
    before: &[gix::odb::pack::index::File],
    template: &TemplateRecord,
    objects: u32,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let known = already_here(pack, before, template.object_format)?;
    if known > 0 && u64::from(known) * 2 > u64::from(objects) {
        warnings.push(format!(
            "the server did not use the template's base {} ({known} of the {objects} objects it \
             sent were in the template already): this boot fetched the whole commit; bake the \
             template again at a commit the server has",
            template.base
        ));
    }
    Ok(())
}

/// The fetch of `TIP_SHA` into `pack_dir`, thin against `base` when given.
pub(super) fn want<'a>(
    opts: &RestoreOptions,
    pack_dir: &'a Path,
    base: Option<fetch::Base<'a>>,
) -> fetch::Want<'a> {
    fetch::Want {
        depth: Some(opts.depth.unwrap_or(1)),
        base,
        ..fetch::Want::depth_one(opts.tip, pack_dir, opts.limits)
    }
}

/// The indexes of the packs in `pack_dir` (the template's, before the fetch).
pub(super) fn pack_indexes(
    pack_dir: &Path,
    format: gix::hash::Kind,
) -> Result<Vec<gix::odb::pack::index::File>> {
    let entries = match std::fs::read_dir(pack_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("listing {}", pack_dir.display()), e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| Error::io(format!("listing {}", pack_dir.display()), e))?
            .path();
        if path.extension().is_some_and(|x| x == "idx") {
            // An unreadable index is the odb's to report; here it only counts nothing.
            if let Ok(idx) = gix::odb::pack::index::File::at(&path, format) {
                out.push(idx);
            }
        }
    }
    Ok(out)
}

/// How many objects of the pack at `pack` (its `.idx` beside it, in `format`) the indexes
/// `before` hold.
pub(super) fn already_here(
    pack: &Path,
    before: &[gix::odb::pack::index::File],
    format: crate::types::Format,
) -> Result<u32> {
    let idx = pack.with_extension("idx");
    let received = gix::odb::pack::index::File::at(&idx, format)
        .map_err(|e| Error::from_chain(format!("reading {}", idx.display()), &e))?;
    let known = received
        .iter()
        .filter(|e| before.iter().any(|b| b.lookup(e.oid).is_some()))
        .count();
    Ok(u32::try_from(known).unwrap_or(u32::MAX))
}

/// Whether every parent of `commit` is in the repository (else it is a shallow commit).
pub(super) fn parents_here(repo: &gix::Repository, commit: FullSha) -> Result<bool> {
    let mut buf = Vec::new();
    let objects = super::super::verify::Verified(&repo.objects);
    let data = gix::objs::Find::try_find(&objects, &commit.id(), &mut buf)
        .map_err(|e| Error::from_chain(format!("reading {commit}"), &e))?
        .ok_or_else(|| Error::Integrity(format!("the remote's pack does not contain {commit}")))?;
    let parents: Vec<_> = gix::objs::CommitRefIter::from_bytes(data.data, commit.format())
        .parent_ids()
        .collect();
    Ok(parents
        .iter()
        .all(|p| gix::objs::Exists::exists(&repo.objects, p)))
}

/// The commits listed in `.git/shallow`, each a full id of the template's `format`.
pub(super) fn read_shallow(
    git_dir: &Path,
    format: crate::types::Format,
) -> Result<Vec<gix::ObjectId>> {
    let path = git_dir.join("shallow");
    let text = match crate::fs::read_regular(&path, false, crate::fs::state::RECORD_CAP) {
        Ok(t) => String::from_utf8_lossy(&t).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            FullSha::from_wire_in(format, l.trim().as_bytes())
                .map(|id| id.id())
                .ok_or_else(|| {
                    Error::conflict(format!(
                        "{} holds a malformed line '{}' (not a {} id): bake the template again",
                        path.display(),
                        crate::text::line(&l.as_bytes()[..l.len().min(80)]),
                        crate::types::format_title(format)
                    ))
                })
        })
        .collect()
}
