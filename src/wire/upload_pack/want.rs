//! What a fetch asks for ([`Want`], with a [`Base`] for a fetch of only the difference) and what
//! it brings ([`Fetched`]), over either protocol: the input and output of step 3,
//! [`super::fetch_pack`].

use std::path::Path;

use crate::types::FullSha;

/// What a fetch brought: the `shallow-info` section's `shallow` ids and the `packfile` section's
/// pack, indexed (`gitprotocol-v2` "fetch", output).
#[derive(Debug)]
pub struct Fetched {
    /// The commits the server marked `shallow` (their parents were not sent).
    pub shallow: Vec<gix::ObjectId>,
    /// The pack's data file, or `None` if the server sent no pack.
    pub pack_path: Option<std::path::PathBuf>,
    /// The number of objects the pack held.
    pub objects: u32,
    /// The objects over the big-object threshold.
    pub big: Vec<gix::ObjectId>,
    /// Whether the server answered the fetch as protocol v2 posted without the capability
    /// advertisement ([`super::Server::Assumed`]): what a bake records for the boots.
    pub posted: bool,
}

/// What the local repository already holds, for a fetch of only the difference: a shallow
/// repository (a baked template) sends every shallow commit (`shallow <id>`), its commits as
/// `have`, and asks for a thin pack (`gitprotocol-v2` "fetch"), which is completed from `local`
/// before it is stored, as `git index-pack --fix-thin` does.
#[derive(Clone, Copy)]
pub struct Base<'a> {
    /// The commits in `.git/shallow`.
    pub shallow: &'a [gix::ObjectId],
    /// Commits the repository has, with their trees and blobs.
    pub haves: &'a [gix::ObjectId],
    /// The repository's objects: the bases of the thin pack's deltas.
    pub local: &'a crate::pack::ReleasingObjects,
}

impl std::fmt::Debug for Base<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Base")
            .field("shallow", &self.shallow)
            .field("haves", &self.haves)
            .finish_non_exhaustive()
    }
}

/// What to fetch, and where to put it.
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    /// The commit.
    pub commit: FullSha,
    /// Its history, in commits (`None`: all).
    pub depth: Option<u32>,
    /// Where the pack and its index go (`objects/pack`).
    pub pack_dir: &'a Path,
    /// Bounds on what the pack may make this process hold.
    pub limits: crate::pack::PackLimits,
    /// What the repository holds already (`None`: nothing, a whole depth-limited pack).
    pub base: Option<Base<'a>>,
    /// Sees each entry's inflated data as the pack streams in (a whole pack only, not a thin one).
    pub observer: Option<&'a dyn crate::pack::EntryObserver>,
    /// A filter (`filter blob:none`: a partial clone's trees without blobs); protocol v2 only,
    /// when the server's `fetch` offers `filter`.
    pub filter: Option<&'a str>,
    /// More objects wanted besides `commit` (the blobs of a sparse checkout, after a filtered
    /// fetch); protocol v2 only, which serves any object the server has.
    pub more: &'a [gix::ObjectId],
}

impl<'a> Want<'a> {
    /// `commit` alone at depth 1, a whole pack with nothing else asked: what most fetches want;
    /// the others change a field or two.
    pub fn depth_one(commit: FullSha, pack_dir: &'a Path, limits: crate::pack::PackLimits) -> Self {
        Want {
            commit,
            depth: Some(1),
            pack_dir,
            limits,
            base: None,
            observer: None,
            filter: None,
            more: &[],
        }
    }
}
