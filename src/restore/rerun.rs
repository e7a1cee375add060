//! A restore into a tree that already holds the session is a no-op, but for what the first one
//! left out on request: with `--submodules`, the submodules left empty are fetched now (the
//! warning about them suggests this rerun); with `SIGNING_*`, plain git signs as they say now.

use super::options::RestoreOptions;
use super::report::RestoreReport;
use super::submodules::{Fetcher, Level, MAX_GITMODULES, Submodule, SubmoduleMode, plan};
use crate::error::{Error, Result};
use crate::fs::tree::Tree;
use crate::wire::http::Http;

/// A restore with `--submodules` into a tree that already holds the session: fetch the submodules
/// its index names that were left empty (by a restore without `--submodules`, or a boot), as the
/// warning about them says; `done` is the no-op report, which then lists them.
///
/// # Errors
/// Those of [`plan`] and [`Fetcher::restore_all`].
pub(super) fn complete(opts: &RestoreOptions, mut done: RestoreReport) -> Result<RestoreReport> {
    sign_as_now(opts)?;
    let Some(read) = opts
        .read
        .as_ref()
        .filter(|_| opts.submodules != SubmoduleMode::None)
    else {
        return Ok(done);
    };
    let git_dir = opts.dir.join(".git");
    let repo = crate::repo::open(&git_dir)?;
    let index = repo
        .index_or_empty()
        .map_err(|e| Error::from_chain("reading the index", &e))?;
    let gitmodules = index
        .entries()
        .iter()
        .find(|e| e.path(&index) == ".gitmodules" && e.mode == gix::index::entry::Mode::FILE)
        .and_then(|e| repo.find_object(e.id).ok())
        .filter(|o| o.kind == gix::object::Kind::Blob && o.data.len() as u64 <= MAX_GITMODULES)
        .map(|o| o.data.clone());
    let read_url = read.load()?;
    let (subs, warning) = plan(gitmodules.as_deref(), &index, &read_url)?;
    // Those restored already have their git dir.
    let missing: Vec<Submodule> = subs
        .into_iter()
        .filter(|s| !git_dir.join("modules").join(&s.name).exists())
        .collect();
    if missing.is_empty() {
        return Ok(done);
    }
    let http = Http::new()?;
    let tree = Tree::open(&opts.dir)
        .map_err(|e| Error::io(format!("opening {}", opts.dir.display()), e))?;
    let fetcher = Fetcher {
        http: &http,
        limits: opts.limits,
        mode: opts.submodules,
        branch: &opts.branch,
        overwrite: false,
        begun: Default::default(),
    };
    let level = Level {
        git_dir: &git_dir,
        git_dir_final: &git_dir,
        tree: &tree,
        tree_final: &opts.dir,
        nesting: 0,
    };
    done.warnings.extend(warning);
    done.warnings.extend(fetcher.restore_all(&level, &missing)?);
    done.noop = false;
    done.extras.submodules = missing.into_iter().map(|s| s.path).collect();
    Ok(done)
}

/// With `SIGNING_*` set, plain git in the finished tree signs as they say (a rotated key, a
/// service instead of a key file). Without, what the first restore set up is kept: the shell an
/// agent reruns restore in may lack `SIGNING_*`, and that must not turn signing off.
fn sign_as_now(opts: &RestoreOptions) -> Result<()> {
    use crate::repo::session::SessionRecord;
    let Some(signing) = &opts.signing else {
        return Ok(());
    };
    let git_dir = opts.dir.join(".git");
    crate::repo::layout::set_signing(&git_dir, signing)?;
    if let Some(mut record) = SessionRecord::read(&git_dir)?
        && record.signing.as_ref() != Some(&signing.record)
    {
        record.signing = Some(signing.record.clone());
        record.write(&git_dir)?;
    }
    Ok(())
}
