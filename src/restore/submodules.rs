//! Submodules in a restore (`--submodules shallow|recursive`): each gitlink's exact commit is
//! fetched at depth 1 from the URL `.gitmodules` gives it (a relative one resolved against the
//! superproject's URL, as git does), in parallel, and checked out in place, with its git dir at
//! `.git/modules/<name>` and a `.git` file pointing there, as `git submodule update --init`
//! lays it out; the superproject's config records it as initialised.
//!
//! # Security
//! `.gitmodules` is the remote's: it is checked before anything is written, as git checks it
//! (CVE-2018-11235, CVE-2017-1000117, CVE-2018-17456, CVE-2020-5260): a name with a `..`
//! component, a URL or path starting with `-`, a URL with a control character, or one that is not
//! smart HTTP(S) (`file://`, `ssh://`, `git://`, `ext::`) is refused (exit 6). No `update`
//! command is ever run. The session's credentials go only to URLs of `READ_URL`'s origin; other
//! hosts get the credentials of their own override (`GIT_SESSION_SUBMODULE_URL_<name>` or a
//! line of `GIT_SESSION_SUBMODULE_URLS_FILE`), or none.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, ByteSlice as _};

use super::checkout;
use crate::error::{Error, Result};
use crate::fs::tree::Tree;
use crate::pack::PackLimits;
use crate::repo::layout;
use crate::types::{FullSha, RemoteUrl, SessionBranch};
use crate::wire::http::Http;
use crate::wire::upload_pack as fetch;

pub use super::options::SubmoduleMode;

/// The deepest submodule nesting followed (a repository that names itself would never end).
pub const MAX_NESTING: usize = 8;
// `--help` says "down to 8 levels" (a doc comment cannot name the constant: clap shows it raw).
const _: () = assert!(MAX_NESTING == 8);

/// The largest `.gitmodules` read.
pub const MAX_GITMODULES: u64 = 1 << 20;

/// Submodules fetched at once.
const PARALLEL: usize = 4;

/// One submodule to restore.
#[derive(Debug, Clone)]
pub struct Submodule {
    /// Its name in `.gitmodules`.
    pub name: String,
    /// Its path in the superproject's tree.
    pub path: String,
    /// The gitlink's commit.
    pub commit: FullSha,
    /// Where it is fetched from.
    pub url: RemoteUrl,
}

/// Pair each gitlink of `index` with its `.gitmodules` entry (`gitmodules`: the tree's file), its
/// URL resolved against `base`; returns them and a warning for gitlinks `.gitmodules` does not
/// name.
///
/// # Errors
/// [`Error::Integrity`] (exit 6) for a `.gitmodules` git would refuse (see the module's
/// "Security").
pub fn plan(
    gitmodules: Option<&[u8]>,
    index: &gix::index::File,
    base: &RemoteUrl,
) -> Result<(Vec<Submodule>, Option<String>)> {
    let gitlinks: Vec<(&BStr, gix::ObjectId)> = index
        .entries()
        .iter()
        .filter(|e| e.mode == gix::index::entry::Mode::COMMIT && !super::sparse::skipped(e))
        .map(|e| (e.path(index), e.id))
        .collect();
    if gitlinks.is_empty() {
        return Ok((Vec::new(), None));
    }
    let entries = parse(gitmodules.unwrap_or_default())?;
    let mut subs = Vec::new();
    let mut unnamed = Vec::new();
    for (path, id) in gitlinks {
        let Some(entry) = entries
            .iter()
            .find(|e| e.path.as_bytes() == path.as_bytes())
        else {
            unnamed.push(path.to_string());
            continue;
        };
        subs.push(Submodule {
            name: entry.name.clone(),
            path: entry.path.clone(),
            commit: FullSha::from_id(id),
            url: resolve(&entry.name, &entry.url, base)?,
        });
    }
    let warning = (!unnamed.is_empty()).then(|| {
        format!(
            "{} gitlink(s) have no entry in .gitmodules and were left as empty folders: {}",
            unnamed.len(),
            unnamed.join(", ")
        )
    });
    Ok((subs, warning))
}

/// One `[submodule "name"]` of `.gitmodules`.
#[derive(Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) url: String,
}

fn refuse(what: String) -> Error {
    Error::Integrity(format!(
        "{what}: refused as git refuses it; fix .gitmodules in the commit, or restore with \
         --submodules none"
    ))
}

/// Longest submodule name taken: one folder name's limit on Linux, and a bound on the paths
/// `.git/modules/<name>` makes.
const MAX_NAME_COMPONENT: usize = 255;
const MAX_NAME: usize = 1024;

/// Whether `name` is safe as `.git/modules/<name>`: git's own rule (no `..`), and a relative
/// path of plain components (not `/lib`, which `join` would take as absolute, nor `.`, an empty
/// component, `.git`, a backslash or a control character), each within the file system's limit.
fn name_is_plain(name: &str) -> bool {
    gix::validate::submodule::name(name.as_bytes().as_bstr()).is_ok()
        && crate::names::check_path(name.as_bytes().as_bstr(), false).is_ok()
        && !name.contains('\\')
        && !name.chars().any(char::is_control)
        && name.len() <= MAX_NAME
        && name.split('/').all(|c| c.len() <= MAX_NAME_COMPONENT)
}

/// Whether the git dirs of submodules `a` and `b` would be one folder or nest, on a file system
/// that folds case too.
fn share_git_dir(a: &str, b: &str) -> bool {
    let (a, b) = (a.to_lowercase(), b.to_lowercase());
    a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
}

/// The entries of `.gitmodules`, checked as git's fsck checks them.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<Entry>> {
    if bytes.len() as u64 > MAX_GITMODULES {
        return Err(refuse(format!(
            ".gitmodules is over {MAX_GITMODULES} bytes"
        )));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| refuse(".gitmodules is not UTF-8".into()))?;
    let file: gix::config::File = text
        .parse()
        .map_err(|e| refuse(format!(".gitmodules cannot be read ({e})")))?;
    let mut out = Vec::new();
    for section in file.sections_by_name("submodule").into_iter().flatten() {
        let Some(name) = section.header().subsection_name() else {
            continue;
        };
        let mut name = name.to_str_lossy().into_owned();
        // git folds the old spelling `[submodule.Name]` to lower case; `[submodule "Name"]` keeps it.
        if section.header().is_legacy() {
            name = name.to_lowercase();
        }
        if !name_is_plain(&name) {
            return Err(refuse(format!(
                "the submodule name '{}' in .gitmodules is not a plain relative folder name \
                 (it becomes .git/modules/<name>)",
                name.escape_debug()
            )));
        }
        let (Some(path), Some(url)) = (section.value("path"), section.value("url")) else {
            continue;
        };
        let (path, url) = (
            path.to_str_lossy().into_owned(),
            url.to_str_lossy().into_owned(),
        );
        if path.starts_with('-') || url.starts_with('-') {
            return Err(refuse(format!(
                "submodule '{}' has a path or URL starting with '-' (read as an option)",
                name.escape_debug()
            )));
        }
        if url.chars().any(char::is_control) || path.chars().any(char::is_control) {
            return Err(refuse(format!(
                "submodule '{}' has a URL or path holding a control character",
                name.escape_debug()
            )));
        }
        if let Some(other) = out.iter().find(|e: &&Entry| share_git_dir(&e.name, &name)) {
            return Err(refuse(format!(
                "the submodule names '{}' and '{}' in .gitmodules share a git dir",
                other.name.escape_debug(),
                name.escape_debug()
            )));
        }
        out.push(Entry { name, path, url });
    }
    Ok(out)
}

/// The URL of submodule `name`: an override from the environment, else `url` from
/// `.gitmodules`, relative ones (`./`, `../`) resolved against `base` as git's `relative_url`
/// does; `base`'s credentials only for its own origin.
pub(crate) fn resolve(name: &str, url: &str, base: &RemoteUrl) -> Result<RemoteUrl> {
    if let Some(given) = override_for(name)? {
        return Ok(given);
    }
    let resolved = if url.starts_with("./") || url.starts_with("../") {
        let mut path: Vec<&str> = base.path().trim_end_matches('/').split('/').collect();
        let mut rest = url;
        loop {
            if let Some(r) = rest.strip_prefix("./") {
                rest = r;
            } else if let Some(r) = rest.strip_prefix("../") {
                // The leading "" (the root) stays: a URL may not climb above its host.
                if path.len() <= 1 {
                    return Err(refuse(format!(
                        "submodule '{}' has a relative URL climbing above the server's root",
                        name.escape_debug()
                    )));
                }
                path.pop();
                rest = r;
            } else {
                break;
            }
        }
        if rest.split('/').any(|c| c == "..") {
            return Err(refuse(format!(
                "submodule '{}' has '..' inside its URL",
                name.escape_debug()
            )));
        }
        path.push(rest.trim_end_matches('/'));
        base.with_path(&path.join("/"))
    } else {
        let parsed = RemoteUrl::parse(url).map_err(|e| {
            refuse(format!(
                "submodule '{}' has a URL git-session cannot fetch ({e})",
                name.escape_debug()
            ))
        })?;
        base.lend_credentials(parsed)
    };
    Ok(resolved)
}

/// `GIT_SESSION_SUBMODULE_URL_<name>` (each byte of the name that is not a letter, digit or `_`
/// written as `_`), else a `<name> <url>` line of the file `GIT_SESSION_SUBMODULE_URLS_FILE`.
fn override_for(name: &str) -> Result<Option<RemoteUrl>> {
    let var: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut given = std::env::var(format!("GIT_SESSION_SUBMODULE_URL_{var}")).ok();
    if given.is_none()
        && let Ok(file) = std::env::var("GIT_SESSION_SUBMODULE_URLS_FILE")
    {
        let fix = "give one `<name> <url>` per line";
        let bytes =
            crate::fs::state::read(Path::new(&file), MAX_GITMODULES, fix)?.unwrap_or_default();
        given = String::from_utf8_lossy(&bytes).lines().find_map(|l| {
            let (n, u) = l.trim().split_once(char::is_whitespace)?;
            (n == name).then(|| u.trim().to_owned())
        });
    }
    let Some(given) = given else {
        return Ok(None);
    };
    let url = RemoteUrl::parse(&given).map_err(|e| {
        Error::Usage(
            crate::error::Refusal::Invalid,
            format!(
                "the URL given for submodule '{}' is not usable: {e}",
                name.escape_debug()
            ),
        )
    })?;
    crate::redact::learn(&url);
    Ok(Some(url))
}

/// What every submodule of a restore shares.
pub struct Fetcher<'a> {
    /// The HTTP client.
    pub http: &'a Http,
    /// Bounds on each pack.
    pub limits: PackLimits,
    /// Shallow or recursive.
    pub mode: SubmoduleMode,
    /// The session branch (a v0 server's advertisement is read for it).
    pub branch: &'a SessionBranch,
    /// Files the commits track may be replaced (completing an interrupted restore).
    pub overwrite: bool,
    /// Submodules begun so far, nested ones counted: at most [`max_submodules`].
    pub begun: std::sync::atomic::AtomicUsize,
}

/// The most submodules one restore fetches, nested ones counted (`GIT_SESSION_MAX_SUBMODULES`,
/// default 256): a tree whose submodules fan out level after level is refused, not followed.
pub fn max_submodules() -> usize {
    crate::knobs::get().max_submodules
}

/// Where one level's git dir is now and will be once published, and its work tree.
pub struct Level<'a> {
    /// The superproject's git dir as it is being built (the staging folder, or below it).
    pub git_dir: &'a Path,
    /// The same git dir once published (`<target>/.git`, or below it).
    pub git_dir_final: &'a Path,
    /// The superproject's work tree (the target's handle, or a submodule's folder).
    pub tree: &'a Tree,
    /// Its path once published.
    pub tree_final: &'a Path,
    /// How deep this level is (0: the restored repository).
    pub nesting: usize,
}

impl Fetcher<'_> {
    /// Restore `subs` of `level`, [`PARALLEL`] at once, and record them as initialised in its
    /// config; returns warnings.
    ///
    /// # Errors
    /// Those of the fetch and the checkout of each (the first failure).
    pub fn restore_all(&self, level: &Level<'_>, subs: &[Submodule]) -> Result<Vec<String>> {
        // The whole level is counted before any of it is fetched: a bound met half-way would
        // have fetched for nothing.
        let max = max_submodules();
        let begun = self
            .begun
            .fetch_add(subs.len(), std::sync::atomic::Ordering::SeqCst);
        if begun.saturating_add(subs.len()) > max {
            return Err(Error::Integrity(format!(
                "the tree's submodules, nested ones counted, are more than {max}: refused \
                 before fetching them (GIT_SESSION_MAX_SUBMODULES raises the bound)"
            )));
        }
        let work = std::sync::Mutex::new(subs.iter());
        let results: std::sync::Mutex<Vec<Result<Vec<String>>>> = Default::default();
        std::thread::scope(|scope| {
            for _ in 0..PARALLEL.min(subs.len()) {
                scope.spawn(|| {
                    while let Some(sub) = work.lock().ok().and_then(|mut w| w.next()) {
                        let r = self.restore_one(level, sub);
                        let failed = r.is_err();
                        if let Ok(mut all) = results.lock() {
                            all.push(r);
                        }
                        if failed {
                            return;
                        }
                    }
                });
            }
        });
        let mut warnings = Vec::new();
        for r in results.into_inner().unwrap_or_default() {
            warnings.extend(r?);
        }
        for sub in subs {
            layout::add_submodule_config(level.git_dir, &sub.name, &sub.url)?;
        }
        Ok(warnings)
    }

    /// Fetch `sub`'s commit into `.git/modules/<name>` of `level` and check it out in its folder.
    fn restore_one(&self, level: &Level<'_>, sub: &Submodule) -> Result<Vec<String>> {
        // `parse` let only plain relative components through; checked again where it counts.
        if !Path::new(&sub.name)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(refuse(format!(
                "the submodule name '{}' leaves .git/modules",
                sub.name.escape_debug()
            )));
        }
        let git_dir = level.git_dir.join("modules").join(&sub.name);
        let git_dir_final = level.git_dir_final.join("modules").join(&sub.name);
        let tree_final = level.tree_final.join(&sub.path);
        layout::init_submodule(
            &git_dir,
            sub.commit,
            &relative(&git_dir_final, &tree_final),
            &sub.url,
        )?;
        let (objects, fetched) = self.fetch(sub, &git_dir)?;
        layout::write_shallow(&git_dir, &fetched.shallow)?;
        let repo = crate::repo::open(&git_dir)?;
        let tree_id = super::verify::commit(&objects, sub.commit)?;
        let mut index =
            checkout::index_from_tree(&repo, &objects, tree_id, self.limits.max_tree_entries)?;
        checkout::require_blobs(&index, |id| objects.contains(id))?;
        let nested = match self.mode {
            SubmoduleMode::Recursive => {
                let gitmodules = gitmodules_of(&index, &objects);
                plan(gitmodules.as_deref(), &index, &sub.url)?
            }
            _ => (Vec::new(), None),
        };
        let rel = Path::new(&sub.path);
        let folder = level
            .tree
            .subtree(rel)
            .map_err(|e| Error::io(format!("opening {}", level.tree.shown(rel).display()), e))?;
        checkout::checkout(
            &repo,
            objects,
            &mut index,
            checkout::Destination {
                tree: &folder,
                overwrite: self.overwrite,
                early: &[],
            },
            &|_| Ok(()),
        )?;
        checkout::write_index(&mut index)?;
        self.write_gitfile(&folder, &tree_final, &git_dir_final)?;
        crate::failpoint::hit("mid-submodules");
        let mut warnings: Vec<String> = nested.1.into_iter().collect();
        if nested.0.is_empty() {
            return Ok(warnings);
        }
        if level.nesting + 1 >= MAX_NESTING {
            warnings.push(format!(
                "submodules nested deeper than {MAX_NESTING} levels in {} were left as empty folders",
                sub.path
            ));
            return Ok(warnings);
        }
        let inner = Level {
            git_dir: &git_dir,
            git_dir_final: &git_dir_final,
            tree: &folder,
            tree_final: &tree_final,
            nesting: level.nesting + 1,
        };
        warnings.extend(self.restore_all(&inner, &nested.0)?);
        Ok(warnings)
    }

    /// Fetch `sub`'s commit at depth 1 into `git_dir`'s pack folder.
    fn fetch(
        &self,
        sub: &Submodule,
        git_dir: &Path,
    ) -> Result<(crate::pack::PackObjects, fetch::Fetched)> {
        let http = self.http;
        let what = format!("fetching submodule {}", sub.path);
        let server = http.retrying(&what, || fetch::handshake(http, &sub.url, self.branch))?;
        if server.format() != sub.commit.format() {
            return Err(Error::Usage(
                crate::error::Refusal::Unsupported,
                format!(
                    "submodule {} ({}) is a {} repository, but its superproject is {}: git \
                     cannot mix object formats in one tree, so it is refused (nothing of it was \
                     fetched); restore without --submodules, or convert one of them",
                    sub.path,
                    sub.url,
                    crate::types::format_title(server.format()),
                    crate::types::format_title(sub.commit.format())
                ),
            ));
        }
        let pack_dir = git_dir.join("objects/pack");
        let interrupt = AtomicBool::new(false);
        let fetched = http.retrying(&what, || {
            let want = fetch::Want::depth_one(sub.commit, &pack_dir, self.limits);
            fetch::fetch_pack(http, &sub.url, &server, want, &interrupt)
        })?;
        let pack_path = fetched.pack_path.as_deref().ok_or_else(|| {
            Error::Integrity(format!(
                "{} sent an empty pack for submodule {} at {}",
                sub.url, sub.path, sub.commit
            ))
        })?;
        let objects = crate::pack::PackObjects::open(
            pack_path,
            self.limits,
            &fetched.big,
            sub.commit.format(),
        )
        .map_err(|e| Error::internal("opening a submodule's pack", e))?;
        Ok((objects, fetched))
    }

    /// The `.git` file of a submodule's folder: `gitdir: <its git dir, relative>`.
    fn write_gitfile(&self, folder: &Tree, tree_final: &Path, git_dir_final: &Path) -> Result<()> {
        let text = format!("gitdir: {}\n", relative(tree_final, git_dir_final));
        let mut writer = super::write::Writer::new(
            folder,
            super::write::Overwrite {
                files: self.overwrite,
            },
        );
        writer.file(Path::new(".git"), false, text.as_bytes())?;
        Ok(())
    }
}

/// The tree's `.gitmodules` (at its root), when it is a regular file of a bounded size.
pub fn gitmodules_of(
    index: &gix::index::File,
    objects: &crate::pack::PackObjects,
) -> Option<Vec<u8>> {
    let entry = index
        .entries()
        .iter()
        .find(|e| e.path(index) == ".gitmodules" && e.mode == gix::index::entry::Mode::FILE)?;
    objects.small_blob(&entry.id, MAX_GITMODULES)
}

/// The path from the folder `from` to `to` (both absolute, normal), with `..` where needed.
fn relative(from: &Path, to: &Path) -> String {
    let a: Vec<Component<'_>> = from.components().collect();
    let b: Vec<Component<'_>> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    out.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RemoteUrl {
        RemoteUrl::parse("https://t:secret@h.example/org/repo.git").expect("url")
    }

    #[test]
    fn relative_urls_resolve_as_git_s_relative_url() {
        for (url, want) in [
            ("../lib.git", "https://h.example/org/lib.git"),
            ("../../other/lib", "https://h.example/other/lib"),
            ("./sub", "https://h.example/org/repo.git/sub"),
            (
                "https://elsewhere.example/x.git",
                "https://elsewhere.example/x.git",
            ),
        ] {
            let got = resolve("n", url, &base()).expect(url);
            assert_eq!(got.public(), want, "{url}");
            assert_eq!(
                got.has_credentials(),
                !url.starts_with("https://else"),
                "{url}"
            );
        }
        for url in [
            "../../../x",
            "../a/../../x",
            "file:///etc/passwd",
            "ssh://h/x",
            "ext::sh -c x",
            "git://h/x",
        ] {
            assert!(
                matches!(resolve("n", url, &base()), Err(Error::Integrity(_))),
                "{url}"
            );
        }
    }

    #[test]
    fn gitmodules_from_cve_reports_are_refused() {
        for text in [
            "[submodule \"../../modules/evil\"]\n\tpath = a\n\turl = ../a.git\n",
            "[submodule \"a\"]\n\tpath = a\n\turl = -oProxyCommand=touch%20/tmp/pwned\n",
            "[submodule \"a\"]\n\tpath = -a\n\turl = ../a.git\n",
            "[submodule \"a\\\\..\"]\n\tpath = a\n\turl = ../a.git\n",
            // An absolute name: `join` would put its git dir at /lib (found by a helper's trial).
            "[submodule \"/lib\"]\n\tpath = a\n\turl = ../a.git\n",
            "[submodule \".\"]\n\tpath = a\n\turl = ../a.git\n",
            "[submodule \"a//b\"]\n\tpath = a\n\turl = ../a.git\n",
            "[submodule \"a\\\\b\"]\n\tpath = a\n\turl = ../a.git\n",
            // Git dirs inside each other, or shared.
            "[submodule \"lib\"]\n\tpath = a\n\turl = ../a.git\n[submodule \"lib/objects\"]\n\tpath = b\n\turl = ../b.git\n",
            "[submodule \"lib/modules/x\"]\n\tpath = a\n\turl = ../a.git\n[submodule \"lib\"]\n\tpath = b\n\turl = ../b.git\n",
            "[submodule \"lib\"]\n\tpath = a\n\turl = ../a.git\n[submodule \"lib\"]\n\tpath = b\n\turl = ../b.git\n",
            // One git dir on a file system that folds case (found by a helper's trial).
            "[submodule \"Lib\"]\n\tpath = a\n\turl = ../a.git\n[submodule \"lib/x\"]\n\tpath = b\n\turl = ../b.git\n",
            "[submodule.Lib]\n\tpath = a\n\turl = ../a.git\n[submodule \"lib\"]\n\tpath = b\n\turl = ../b.git\n",
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::Integrity(_))),
                "{text}"
            );
        }
        // Past the file system's limit: refused as an integrity error, not a failed mkdir.
        let long = format!(
            "[submodule \"{}\"]\n\tpath = a\n\turl = ../a.git\n",
            "n".repeat(256)
        );
        assert!(matches!(parse(long.as_bytes()), Err(Error::Integrity(_))));
        // git folds the old spelling's name to lower case, and so does the git dir.
        let legacy = parse(b"[submodule.Libs]\n\tpath = Libs\n\turl = ../a.git\n").expect("ok");
        assert_eq!(legacy[0].name, "libs");
        let ok = parse(
            b"[submodule \"libs/a\"]\n\tpath = libs/a\n\turl = ../a.git\n\tupdate = !rm -rf /\n",
        )
        .expect("ok");
        assert_eq!(
            ok,
            vec![Entry {
                name: "libs/a".into(),
                path: "libs/a".into(),
                url: "../a.git".into()
            }]
        );
    }

    #[test]
    fn relative_paths_between_folders() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            relative(&p("/w/.git/modules/a"), &p("/w/libs/a")),
            "../../../libs/a"
        );
        assert_eq!(
            relative(&p("/w/libs/a"), &p("/w/.git/modules/a")),
            "../../.git/modules/a"
        );
    }
}
