//! Entry points for the fuzz targets in `fuzz/` and for the replay of their committed corpus
//! (`tests/fuzz_corpus.rs`): one function per target, each driving the crate's own parser on
//! arbitrary bytes and asserting what must hold whatever the bytes are. A panic is a finding.
//!
//! Not part of the product's interface: hidden from the docs, called by tests and fuzzers only.
#![allow(clippy::disallowed_methods)] // reads what the fuzz target itself just wrote

use std::path::Path;
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, ByteSlice as _};

use crate::error::Error;
use crate::types::{FullSha, Owner, RemoteUrl, SessionBranch};
use crate::wire::http::Protocol;

/// A target's function: it panics when an invariant does not hold for the input.
pub type Target = fn(&[u8]);

/// Every target: its name (the folder of its corpus under `fuzz/corpus/`) and its function.
pub const TARGETS: &[(&str, Target)] = &[
    ("upload_pack", upload_pack),
    ("receive_pack", receive_pack),
    ("pack", pack),
    ("delta", delta),
    ("tree", tree),
    ("names", names),
    ("tar", tar),
    ("state", state),
    ("inputs", inputs),
    ("lfs", lfs),
    ("gitmodules", gitmodules),
    ("credential", credential),
    ("prepush", prepush),
    ("terminal", terminal),
    ("signing", signing),
    ("manifest", manifest),
];

/// The URL the wire parsers' messages name.
fn url() -> RemoteUrl {
    RemoteUrl::parse("http://127.0.0.1:1/repo.git").expect("a valid URL")
}

/// The session branch the wire parsers look for (the one of `tests/fixtures/wire`).
const BRANCH: &str = "sessions/abc";

/// A fresh temporary folder; the fuzzers run with a working file system.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary folder")
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("listing a scratch folder")
        .map(|e| {
            e.expect("a folder entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// The object format a fuzz input picks with bit 2 of its first byte: both are fed alike.
fn format_of(which: u8) -> gix::hash::Kind {
    if which & 4 == 0 {
        gix::hash::Kind::Sha1
    } else {
        gix::hash::Kind::Sha256
    }
}

/// The protocol v2 responses of upload-pack (pkt-lines, side-band): the first byte picks the
/// parser (capability advertisement, `ls-refs`, `fetch` with its pack), the rest is the body.
/// Errors are the wire's kinds only; a fetch leaves its pack and index, or nothing.
pub fn upload_pack(data: &[u8]) {
    use crate::wire::upload_pack as up;
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let url = url();
    match which % 4 {
        0 => match up::read_advertisement(&url, body, Protocol::Auto, BRANCH_REF) {
            Ok(server @ up::Server::V2(_)) => {
                let up::Server::V2(caps) = &server else {
                    unreachable!()
                };
                let announced = caps.capability("object-format").map(|c| c.value());
                let announced = announced.map(|v| v.unwrap_or_default().to_string());
                assert_eq!(
                    crate::types::format_from_name(announced.as_deref()),
                    Some(server.format())
                );
            }
            Ok(server @ up::Server::V0 { .. }) => {
                let up::Server::V0 { refs, .. } = &server else {
                    unreachable!()
                };
                let announced = refs.get("object-format").map(|v| v.to_string());
                assert_eq!(
                    crate::types::format_from_name(announced.as_deref()),
                    Some(server.format())
                );
                if let Some(tip) = refs.tip {
                    assert_eq!(tip.format(), server.format());
                }
            }
            Ok(up::Server::Assumed { .. }) => unreachable!("never read from an answer"),
            Err(e) => assert!(
                matches!(e, Error::Protocol(_) | Error::Network(_) | Error::Usage(..)),
                "{e:?}"
            ),
        },
        1 => {
            let full = format!("refs/heads/{BRANCH}");
            let format = format_of(which);
            match up::read_ls_refs(&url, body, &full, format) {
                Ok(Some(id)) => {
                    assert_eq!(id.format(), format);
                    let line = format!("{id} {full}");
                    assert!(body.to_ascii_lowercase().find(line.as_bytes()).is_some());
                }
                Ok(None) => {}
                Err(e) => assert!(
                    matches!(
                        e,
                        Error::Protocol(_) | Error::Network(_) | Error::NotFound(_)
                    ),
                    "{e:?}"
                ),
            }
        }
        2 => fetch(&url, body, None, format_of(which)),
        _ => fetch(&url, body, Some(v0_server()), format_of(which)),
    }
}

const BRANCH_REF: &str = "refs/heads/sessions/abc";

/// The commit a SHA-256 fetch asks for (`fuzz/seeds.py` writes a pack holding it).
const SHA256_COMMIT: &str = "516c254a478a140b6edc3edf04ca4aeab6e38545c3c7a00d432a3a700c6089dc";

/// A protocol v0 server as git's http-backend advertises itself (side-band-64k, shallow).
fn v0_server() -> crate::wire::upload_pack::Server {
    let adv = include_bytes!("../tests/fixtures/wire/v0-advertisement.response");
    crate::wire::upload_pack::read_advertisement(&url(), &adv[..], Protocol::Auto, BRANCH_REF)
        .expect("the recorded v0 advertisement")
}

fn fetch(
    url: &RemoteUrl,
    body: &[u8],
    v0: Option<crate::wire::upload_pack::Server>,
    format: gix::hash::Kind,
) {
    use crate::wire::upload_pack as up;
    let dir = scratch();
    let commit = match format {
        gix::hash::Kind::Sha256 => SHA256_COMMIT,
        _ => "9286c450ac867c0b3f83878bc15e185905286280",
    };
    let commit = commit.parse().expect("a full id");
    let want = up::Want::depth_one(commit, dir.path(), Default::default());
    let fetched = match &v0 {
        Some(up::Server::V0 { refs, .. }) => {
            up::read_fetch_v0(url, body, refs, want, &AtomicBool::new(false))
        }
        _ => up::read_fetch(url, body, want, &AtomicBool::new(false)),
    };
    match fetched {
        Ok(fetched) => {
            let left = names_in(dir.path());
            match &fetched.pack_path {
                Some(pack) => {
                    assert_eq!(pack.parent(), Some(dir.path()));
                    let name = pack.file_name().unwrap().to_string_lossy().into_owned();
                    let idx = name.replace(".pack", ".idx");
                    let mut both = vec![idx, name];
                    both.sort();
                    assert_eq!(left, both);
                }
                None => assert!(left.is_empty(), "{left:?}"),
            }
        }
        Err(e) => {
            assert!(
                matches!(
                    e,
                    Error::Protocol(_)
                        | Error::Network(_)
                        | Error::NotFound(_)
                        | Error::Integrity(_)
                ),
                "{e:?}"
            );
            assert!(names_in(dir.path()).is_empty(), "a failed fetch left files");
        }
    }
}

/// The receive-pack answers: the first byte picks the ref advertisement, the report-status in
/// side-band or the plain one. A push counts as done only on `unpack ok` and `ok <branch>`.
pub fn receive_pack(data: &[u8]) {
    use crate::wire::{advertisement, receive_pack::report};
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let url = url();
    let branch: SessionBranch = BRANCH.parse().expect("a valid branch");
    if which % 3 == 0 {
        if let Err(e) = advertisement::parse(&url, body, &branch.full_ref()) {
            assert!(
                matches!(e, Error::Protocol(_) | Error::Network(_) | Error::Usage(..)),
                "{e:?}"
            );
        }
        return;
    }
    let report = match report::parse(&url, body, which % 3 == 1) {
        Ok(report) => report,
        Err(e) => {
            assert!(matches!(e, Error::Protocol(_) | Error::Network(_)), "{e:?}");
            return;
        }
    };
    assert!(report.remote_text.len() <= 20);
    let confirmed = report.fatal.is_none()
        && report.unpack.as_deref() == Some("ok")
        && report
            .refs
            .iter()
            .find(|(name, _)| *name == branch.full_ref())
            .is_some_and(|(_, ng)| ng.is_none());
    let mut stale = false;
    let result = report.into_result(&url, &branch, |_| {
        stale = true;
        Err(Error::Internal("stale".into()))
    });
    match result {
        Ok(()) => assert!(confirmed),
        Err(Error::Internal(_)) => assert!(stale && !confirmed),
        Err(e) => assert!(
            !confirmed && matches!(e, Error::Protocol(_) | Error::Rejected(_)),
            "{e:?}"
        ),
    }
}

/// The commits stored whole in a pack, in order (the early checkout's `TIP_SHA` is the first), and
/// whether a delta names its base by id.
#[derive(Debug)]
struct Commits(
    std::cell::RefCell<(Vec<gix::ObjectId>, bool)>,
    gix::hash::Kind,
);

impl crate::pack::EntryObserver for Commits {
    fn begin(&self) {}
    fn wants(&self, size: u64) -> bool {
        size <= 1 << 20
    }
    fn entry(&self, _: u64, header: gix::odb::pack::data::entry::Header, data: Vec<u8>) {
        let mut seen = self.0.borrow_mut();
        seen.1 |= matches!(header, gix::odb::pack::data::entry::Header::RefDelta { .. });
        if header.as_kind() == Some(gix::objs::Kind::Commit)
            && let Ok(id) = gix::objs::compute_hash(self.1, gix::objs::Kind::Commit, &data)
        {
            seen.0.push(id);
        }
    }
    fn hashed(&self, _: u64, _: gix::ObjectId) {}
    fn ids(&self) -> Option<Vec<(u64, gix::ObjectId)>> {
        None
    }
}

/// The pack's first whole commit, and whether a delta in it names its base by id.
fn first_commit(
    data: &[u8],
    pack_dir: &Path,
    format: gix::hash::Kind,
) -> (Option<gix::ObjectId>, bool) {
    let commits = Commits(Default::default(), format);
    let limits = crate::pack::PackLimits::default();
    if let Ok((stream, _)) = crate::pack::entries::EntryStream::new(data, limits, pack_dir, format)
    {
        for entry in stream.observed(Some(&commits)) {
            if entry.is_err() {
                break;
            }
        }
    }
    let (commits, ref_deltas) = commits.0.into_inner();
    (commits.first().copied(), ref_deltas)
}

/// A pack as it streams in, indexed, with the early checkout's resolver and writer watching it
/// (`TIP_SHA`: the pack's first whole commit). The index names each object by its true id; every
/// file written early lies inside the work tree under a safe name and holds its blob; the roll
/// back leaves the work tree empty; nothing is left beside the pack and its index.
pub fn pack(data: &[u8]) {
    use crate::restore::early::{EarlyCheckout, Target};
    // A leading '2' picks SHA-256 (ids, bases and trailer of 32 bytes); a pack starts with "PACK".
    let (format, data) = match data.split_first() {
        Some((b'2', rest)) => (gix::hash::Kind::Sha256, rest),
        _ => (gix::hash::Kind::Sha1, data),
    };
    let dir = scratch();
    let objects = dir.path().join("objects");
    let pack_dir = objects.join("pack");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&pack_dir).expect("a scratch folder");
    std::fs::create_dir(&work).expect("a scratch folder");
    let (tip, ref_deltas) = first_commit(data, &pack_dir, format);
    let tip = tip.unwrap_or_else(|| gix::ObjectId::null(format));
    let tree = crate::fs::tree::Tree::open(&work).expect("a scratch folder");
    let early = EarlyCheckout::start(Target {
        tree: tree.try_clone().expect("a second handle"),
        tip,
        before_first_file: Box::new(|| Ok(())),
    });
    let limits = crate::pack::PackLimits::default();
    let mut input = data;
    let received = crate::pack::receive(
        &mut input,
        &pack_dir,
        Some(1),
        limits,
        &AtomicBool::new(false),
        Some(&early),
        format,
    );
    let outcome = early.finish();
    for file in &outcome.files {
        assert_written(&work, file);
    }
    match received {
        Ok(received) => {
            if let Some(data_path) = &received.data_path {
                let ids = check_index(data_path, limits, &received.big, ref_deltas, format);
                for file in &outcome.files {
                    assert!(ids.contains(&file.id), "{} is not in the pack", file.id);
                }
            }
            let left = names_in(&pack_dir);
            assert!(
                left.len() == 2 * usize::from(received.data_path.is_some()),
                "{left:?}"
            );
        }
        Err(e) => {
            assert!(!matches!(e, crate::pack::ReceiveError::Local(_)), "{e:?}");
            assert!(
                names_in(&pack_dir).is_empty(),
                "a failed receive left files"
            );
        }
    }
    tree.undo(&outcome.made).expect("the roll back");
    assert!(
        names_in(&work).is_empty(),
        "the roll back left {:?}",
        names_in(&work)
    );
    assert_eq!(names_in(dir.path()), ["objects", "work"]);
}

/// A file of the early checkout: a safe path inside `work`, a regular file holding its blob.
fn assert_written(work: &Path, file: &crate::restore::early::Written) {
    use std::os::unix::ffi::OsStrExt as _;
    assert_safe_path(file.path.as_ref());
    assert_ne!(
        file.path.split_str("/").next(),
        Some(crate::restore::STAGING_DIR.as_bytes())
    );
    let full = work.join(std::ffi::OsStr::from_bytes(&file.path));
    let meta = std::fs::symlink_metadata(&full).expect("a written file");
    assert!(meta.is_file(), "{} is not a regular file", full.display());
    let content = std::fs::read(&full).expect("a written file");
    let id =
        gix::objs::compute_hash(file.id.kind(), gix::objs::Kind::Blob, &content).expect("hashing");
    assert_eq!(id, file.id, "{} does not hold its blob", full.display());
}

/// Every component of `path` passes git's path protections as the restore applies them.
fn assert_safe_path(path: &BStr) {
    for component in path.split_str("/") {
        assert!(
            gix::validate::path::component(
                component.as_bstr(),
                None,
                crate::restore::checkout::protections()
            )
            .is_ok(),
            "unsafe component {:?} in {path:?}",
            component.as_bstr()
        );
    }
}

/// Every object of the pack at `data_path`, as its index names them, decodes to content that
/// hashes to that id. Returns the ids.
fn check_index(
    data_path: &Path,
    limits: crate::pack::PackLimits,
    big: &[gix::ObjectId],
    ref_deltas: bool,
    format: gix::hash::Kind,
) -> Vec<gix::ObjectId> {
    use gix::objs::Find as _;
    let objects =
        crate::pack::PackObjects::open(data_path, limits, big, format).expect("the pack opens");
    let index = gix::odb::pack::index::File::at(data_path.with_extension("idx"), format)
        .expect("the index opens");
    let mut ids = Vec::new();
    let mut buf = Vec::new();
    for entry in index.iter() {
        let object = match objects.try_find(&entry.oid, &mut buf) {
            Ok(object) => object.expect("an indexed object is found"),
            // Known: the checkout's reader follows no delta whose base is named by id (git's
            // upload-pack sends none when asked for ofs-delta, as the fetch does).
            Err(_) if ref_deltas => continue,
            Err(e) => panic!("the indexed object {} does not decode: {e}", entry.oid),
        };
        let id = gix::objs::compute_hash(format, object.kind, object.data).expect("hashing");
        assert_eq!(id, entry.oid, "the index names an object by a wrong id");
        ids.push(entry.oid);
    }
    ids
}

/// Delta application: the first two bytes give the base's length; the base follows, then the
/// delta. A result respects the limit and the size the delta claims; the encoder's delta of the
/// base into the rest applies back to the rest.
pub fn delta(data: &[u8]) {
    use crate::pack::delta;
    if data.len() < 2 {
        return;
    }
    let n = (usize::from(u16::from_le_bytes([data[0], data[1]]))).min(data.len() - 2);
    let (base, rest) = data[2..].split_at(n);
    const LIMIT: usize = 1 << 20;
    if let Some(out) = delta::apply(base, rest, LIMIT) {
        assert!(out.len() <= LIMIT);
    }
    if let Some(encoded) = delta::encode(base, rest, LIMIT) {
        assert_eq!(delta::apply(base, &encoded, LIMIT).as_deref(), Some(rest));
    }
}

/// Trees: two-byte little-endian lengths, each followed by that many bytes of one tree object;
/// the first is the root. An entry whose id's first byte is `k` names the `k`-th tree (and only
/// a later one, so they form no cycle). The index built with the restore's path protections holds
/// safe paths only, each below its folder.
pub fn tree(data: &[u8]) {
    // A leading '2' picks SHA-256 (32-byte ids in the entries).
    let (format, data) = match data.split_first() {
        Some((b'2', rest)) => (gix::hash::Kind::Sha256, rest),
        _ => (gix::hash::Kind::Sha1, data),
    };
    let trees = split_chunks(data);
    if trees.is_empty() || expanded_entries(&trees, format).is_none_or(|n| n > 100_000) {
        return;
    }
    let objects = Trees(trees, format);
    let root = tree_id(0, format);
    let state =
        gix::index::State::from_tree(&root, &objects, crate::restore::checkout::protections());
    let Ok(state) = state else { return };
    // Two entries of one path (`a` twice, `a` and `a/x`) are possible here: gix does not refuse
    // them, the checkout does. Each path on its own must be safe.
    for entry in state.entries() {
        let path = entry.path(&state);
        assert!(!path.is_empty() && !path.starts_with(b"/") && !path.ends_with(b"/"));
        assert_safe_path(path);
    }
}

/// The id standing for the `k`-th tree of [`tree`]'s input.
fn tree_id(k: usize, format: gix::hash::Kind) -> gix::ObjectId {
    let mut bytes = [0u8; 32];
    let bytes = &mut bytes[..format.len_in_bytes()];
    bytes[0] = k as u8;
    bytes[bytes.len() - 1] = 0xee;
    gix::ObjectId::from_bytes_or_panic(bytes)
}

fn split_chunks(mut data: &[u8]) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    while data.len() >= 2 && chunks.len() < 255 {
        let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
        chunks.push(&data[2..2 + n]);
        data = &data[2 + n..];
    }
    chunks
}

/// How many index entries the trees expand to, or `None` when one names itself or an earlier one.
fn expanded_entries(trees: &[&[u8]], format: gix::hash::Kind) -> Option<u64> {
    let mut counts = vec![0u64; trees.len()];
    for k in (0..trees.len()).rev() {
        let mut n = 0u64;
        for entry in gix::objs::TreeRefIter::from_bytes(trees[k], format) {
            let Ok(entry) = entry else { break };
            if entry.mode.is_tree() {
                let j = usize::from(entry.oid.as_bytes()[0]);
                if j <= k {
                    return None;
                }
                n = n.saturating_add(counts.get(j).copied().unwrap_or(0));
            } else {
                n += 1;
            }
        }
        counts[k] = n;
    }
    Some(counts[0])
}

struct Trees<'a>(Vec<&'a [u8]>, gix::hash::Kind);

impl gix::objs::Find for Trees<'_> {
    fn try_find<'a>(
        &self,
        id: &gix::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        let k = usize::from(id.as_bytes()[0]);
        if id != tree_id(k, self.1).as_ref() || k >= self.0.len() {
            return Ok(None);
        }
        buffer.clear();
        buffer.extend_from_slice(self.0[k]);
        Ok(Some(gix::objs::Data::new(
            buffer,
            gix::objs::Kind::Tree,
            self.1,
        )))
    }
}

/// One rule for names (issue 23): a path `save` would commit, each component passing the rules
/// it applies, is one `restore` checks out (its path protections, the staging folder at the top).
pub fn names(data: &[u8]) {
    let path = data.as_bstr();
    if crate::names::check_path(path, false).is_err() {
        return;
    }
    // What restore applies: gix's component check with the protections while it builds the
    // index, and the staging folder at the top.
    let restored = path.split_str("/").all(|c| {
        gix::validate::path::component(c.as_bstr(), None, crate::restore::checkout::protections())
            .is_ok()
    }) && !crate::names::in_staging_dir(path);
    assert!(restored, "save commits {path:?}, which restore refuses");
}

/// An LFS batch answer (for three pointers, one of them `data`'s own if it is one): any answer
/// is refused or gives one answer per object, each transfer to an http(s) URL; a pointer that
/// parses encodes to a pointer that parses to the same.
pub fn lfs(data: &[u8]) {
    use crate::types::lfs::{Oid, Pointer};
    use crate::wire::lfs::{Answer, Operation, parse_batch};
    if let Some(p) = Pointer::parse(data) {
        assert_eq!(Pointer::parse(p.encode().as_bytes()), Some(p));
    }
    let objects = [
        Pointer {
            oid: Oid::of(b"a"),
            size: 1,
        },
        Pointer {
            oid: Oid::of(b""),
            size: 0,
        },
        Pointer {
            oid: Oid::of(data),
            size: data.len() as u64,
        },
    ];
    for op in [Operation::Download, Operation::Upload] {
        if let Ok(answers) = parse_batch(&url(), op, &objects, data) {
            assert_eq!(answers.len(), objects.len());
            for a in answers {
                if let Answer::Transfer(action, verify) = a {
                    for href in
                        std::iter::once(action.href()).chain(verify.as_deref().map(|v| v.href()))
                    {
                        assert!(matches!(href.scheme(), "http" | "https"), "{href}");
                    }
                }
            }
        }
    }
}

/// A `.gitmodules`: each entry accepted has a name without a `..` component, a URL and a path
/// not starting with `-`; its URL resolves to http(s), with the session's credentials only on
/// the session's own origin, and never with a `..` in a relative one's path.
pub fn gitmodules(data: &[u8]) {
    use crate::restore::submodules::{parse, resolve};
    let Ok(entries) = parse(data) else {
        return;
    };
    let base = RemoteUrl::parse("https://t:fuzz-secret-token@h.example/org/repo.git").expect("url");
    for e in entries {
        assert!(
            gix::validate::submodule::name(e.name.as_bytes().as_bstr()).is_ok(),
            "{:?}",
            e.name
        );
        assert!(!e.url.starts_with('-') && !e.path.starts_with('-'));
        let Ok(url) = resolve(&e.name, &e.url, &base) else {
            continue;
        };
        let public = url.public();
        assert!(
            public.starts_with("http://") || public.starts_with("https://"),
            "{public}"
        );
        // A URL may carry userinfo of its own (the repository's author's to give); the
        // session's token goes only to the session's origin.
        let session_token = url
            .credentials()
            .is_some_and(|c| c.password.expose() == "fuzz-secret-token");
        if session_token {
            assert!(
                public.starts_with("https://h.example/"),
                "the token sent to {public}"
            );
        }
        if e.url.starts_with("./") || e.url.starts_with("../") {
            assert!(!url.path().split('/').any(|c| c == ".."), "{public}");
        }
    }
}

/// The commit id the tar target's archives were made from (`tests/fixtures/archive/CASES.md`).
const ARCHIVE_TIP: &str = "3f2a9c5e8b7d6a1f0e4c2b9a8d7e6f5a4b3c2d1e";

/// A tar stream (gzip-compressed when it starts with gzip's magic bytes) extracted as restore
/// does it, into an empty folder beside another: nothing lands outside it, only files, folders and
/// symlinks are made, no file keeps a set-id bit, every name is safe, and a success counts
/// what it made.
pub fn tar(data: &[u8]) {
    use crate::restore::archive::{ArchiveOptions, ArchiveSource, Hash, Limits, Strip, unpack};
    let dir = scratch();
    let root = dir.path().join("tree");
    std::fs::create_dir(&root).expect("a scratch folder");
    let options = ArchiveOptions {
        source: ArchiveSource::Stdin,
        strip: Strip::Auto,
        require_commit_id: false,
        limits: Limits {
            header_bytes: 64 << 10,
            entries: 10_000,
            total_bytes: 64 << 20,
        },
    };
    // A leading byte 2 picks SHA-256 (`TIP_SHA` and the ids hashed): a tar starts with a name.
    let (tip, ids, data) = match data.split_first() {
        Some((2, rest)) => (SHA256_COMMIT, Hash::Ids(gix::hash::Kind::Sha256), rest),
        _ => (ARCHIVE_TIP, Hash::Ids(gix::hash::Kind::Sha1), data),
    };
    let result = if data.starts_with(&[0x1f, 0x8b]) {
        unpack(data, &root, &options, tip, ids)
    } else {
        // Raw tar: what the fuzzer mutates best; the same reader behind the gzip layer.
        crate::restore::archive::unpack_tar(data, &root, &options, tip, ids)
    };
    assert_eq!(
        names_in(dir.path()),
        ["tree"],
        "something landed beside the target"
    );
    let made = walk(&root, &root);
    match result {
        Ok((extracted, _)) => assert_eq!(
            (made.files, made.dirs, made.symlinks),
            (extracted.files, extracted.dirs, extracted.symlinks)
        ),
        Err(e) => assert!(
            matches!(e, Error::Integrity(_) | Error::Network(_)),
            "{e:?}"
        ),
    }
}

#[derive(Default)]
struct Made {
    files: usize,
    dirs: usize,
    symlinks: usize,
}

/// Count what is below `dir`, checking each entry's kind, mode and name.
fn walk(root: &Path, dir: &Path) -> Made {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    let mut made = Made::default();
    for entry in std::fs::read_dir(dir).expect("listing the extraction") {
        let entry = entry.expect("a folder entry");
        let rel = entry.path();
        let rel = rel.strip_prefix(root).expect("below the root");
        assert_safe_path(rel.as_os_str().as_bytes().as_bstr());
        let meta = std::fs::symlink_metadata(entry.path()).expect("an entry");
        let kind = meta.file_type();
        if kind.is_dir() {
            let below = walk(root, &entry.path());
            made.dirs += 1 + below.dirs;
            made.files += below.files;
            made.symlinks += below.symlinks;
        } else if kind.is_file() {
            assert_eq!(
                meta.permissions().mode() & 0o7000,
                0,
                "{rel:?} keeps a set-id bit"
            );
            made.files += 1;
        } else {
            assert!(
                kind.is_symlink(),
                "{rel:?} is neither a file, a folder nor a symlink"
            );
            made.symlinks += 1;
        }
    }
    made
}

/// The state files in the git dir: the first byte picks the session record, the template record
/// or the ledger; the rest is the file's content. A record read is written and read back the
/// same; a push recorded in any ledger is found in it afterwards, what was there kept before it.
pub fn state(data: &[u8]) {
    use crate::repo::lease::{LEDGER_FILE, Ledger};
    use crate::repo::session::SessionRecord;
    use crate::repo::template::TemplateRecord;
    let Some((&which, content)) = data.split_first() else {
        return;
    };
    let git_dir = scratch();
    let again = scratch();
    match which % 3 {
        0 => {
            std::fs::write(SessionRecord::path(git_dir.path()), content).expect("writing");
            if let Ok(Some(record)) = SessionRecord::read(git_dir.path()) {
                record.write(again.path()).expect("writing the record");
                let back = SessionRecord::read(again.path()).expect("reading it back");
                let json = |r: &SessionRecord| serde_json::to_value(r).expect("encoding");
                assert_eq!(back.as_ref().map(json), Some(json(&record)));
            }
        }
        1 => {
            std::fs::write(TemplateRecord::path(git_dir.path()), content).expect("writing");
            if let Ok(Some(record)) = TemplateRecord::read(git_dir.path()) {
                record.write(again.path()).expect("writing the record");
                let back = TemplateRecord::read(again.path()).expect("reading it back");
                assert_eq!(back, Some(record));
            }
        }
        _ => {
            let path = git_dir.path().join(LEDGER_FILE);
            std::fs::write(&path, content).expect("writing");
            let ledger = Ledger::new(git_dir.path());
            // Bit 2 of the first byte picks SHA-256 ids.
            let format = format_of(which);
            let old = FullSha::zero(format);
            let new: FullSha = match format {
                gix::hash::Kind::Sha256 => SHA256_COMMIT,
                _ => "9286c450ac867c0b3f83878bc15e185905286280",
            }
            .parse()
            .expect("a full id");
            let _ = ledger.contains(old);
            if ledger.record(old, new, "save").is_ok() {
                assert!(
                    ledger.contains(new).is_ok_and(|found| found),
                    "a recorded push is not found"
                );
                // Whole lines are kept; a last line cut short (never fsynced, so nothing was
                // uploaded after it) is dropped.
                let whole = content
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |end| end + 1);
                let after = std::fs::read(&path).expect("reading the ledger");
                assert!(
                    after.starts_with(&content[..whole]),
                    "the ledger lost what it held"
                );
            }
        }
    }
}

/// What the session's inputs are parsed from (`TIP_SHA`, `SESSION_BRANCH`, the URLs, the owner
/// variables): what parses renders back to a form that parses to the same value, and a URL's
/// public forms carry no credentials.
pub fn inputs(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let s = text.as_ref();
    if let Ok(sha) = s.parse::<FullSha>() {
        assert_eq!(sha.to_string(), s.to_ascii_lowercase());
        assert_eq!(FullSha::from_wire(s.as_bytes()), Some(sha));
        assert!(crate::inputs::tip(Some(s)).is_ok());
    } else {
        assert!(matches!(crate::inputs::tip(Some(s)), Err(Error::Usage(..))));
    }
    if let Some(sha) = FullSha::from_wire(data) {
        assert_eq!(sha.to_string().as_bytes(), data.to_ascii_lowercase());
    }
    if let Ok(branch) = s.parse::<SessionBranch>() {
        assert_eq!(
            branch.as_str().parse::<SessionBranch>().as_ref(),
            Ok(&branch)
        );
        assert_eq!(
            branch.full_ref().parse::<SessionBranch>().as_ref(),
            Ok(&branch)
        );
        assert!(gix::validate::reference::name(branch.tracking_ref().as_str().into()).is_ok());
    } else {
        assert!(matches!(
            crate::inputs::branch(Some(s)),
            Err(Error::Usage(..))
        ));
    }
    remote_url(s);
    owner(s);
    knob(s);
    patterns(s);
}

/// A number knob takes digits only, whatever else the text holds; nothing panics.
fn knob(s: &str) {
    for var in [
        "GIT_SESSION_READ_TIMEOUT_MS",
        "GIT_SESSION_BIG_OBJECT_BYTES",
        "GIT_SESSION_LOW_SPEED_LIMIT",
        "GIT_SESSION_PROTOCOL",
        "GIT_SESSION_LFS_INCLUDE",
    ] {
        let knobs = crate::knobs::Knobs::from_vars(|v| (v == var).then(|| s.to_owned()));
        if knobs.is_ok() && !s.is_empty() && var != "GIT_SESSION_LFS_INCLUDE" {
            assert!(s.bytes().all(|b| b.is_ascii_digit()), "{var}={s:?} taken");
        }
        if let Err(e) = knobs {
            assert_eq!(e.exit_code(), 2, "{var}={s:?}");
        }
    }
}

/// Sparse folders (one a line) come out normalised as git normalises them, or are refused;
/// an LFS pattern matches or not, never panics.
fn patterns(s: &str) {
    let lines: Vec<String> = s.lines().map(str::to_owned).collect();
    match crate::restore::sparse::Cone::new(&lines) {
        Ok(cone) => {
            for d in cone.dirs() {
                assert!(
                    !d.is_empty()
                        && !d.starts_with('/')
                        && !d.contains("//")
                        && d.split('/').all(|c| c != "." && c != ".."),
                    "{d:?} from {lines:?}"
                );
                assert!(cone.contains(format!("{d}/f").as_str().into()), "{d:?}");
            }
            let _ = cone.patterns();
        }
        Err(e) => assert_eq!(e.exit_code(), 2),
    }
    let pattern = crate::restore::LfsPattern::new(s);
    let _ = pattern.matches(s.as_bytes().as_bstr());
}

fn remote_url(s: &str) {
    let Ok(url) = RemoteUrl::parse(s) else {
        assert!(matches!(
            crate::inputs::url(Some(s), "READ_URL", "READ_URL_FILE"),
            Err(Error::Usage(..))
        ));
        return;
    };
    let public = url.public();
    let reparsed = RemoteUrl::parse(&public).expect("the public form parses");
    assert!(
        !reparsed.has_credentials(),
        "the public form carries credentials"
    );
    assert_eq!(reparsed.public(), public);
    assert!(url.same_repository(&reparsed));
    let named = RemoteUrl::parse(&url.public_as("git-session")).expect("the named form parses");
    assert_eq!(named.public(), public);
    let endpoint = url.endpoint("info/refs?service=git-upload-pack");
    assert!(endpoint.username().is_empty() && endpoint.password().is_none());
    let shown = format!("{url} {url:?}");
    if let Some(c) = url.credentials() {
        let secret = c.password.expose();
        if secret.len() >= 8 && !public.contains(secret) {
            assert!(!shown.contains(secret), "the URL shows its password");
        }
        assert!(url.authorization().is_some_and(|v| v.is_sensitive()));
    }
    let forms = url.secret_forms();
    assert!(forms.iter().all(|f| f.len() >= 8) || forms.is_empty());
    assert!(
        url.jwt_expiry()
            .is_none_or(|e| e <= crate::types::MAX_JWT_EXPIRY)
    );
    let has = crate::inputs::url(Some(s), "READ_URL", "READ_URL_FILE");
    // Credentials on argv: userinfo, or a query (where presigned URLs sign).
    assert_eq!(has.is_ok(), !url.has_credentials() && !url.has_query());
}

fn owner(s: &str) {
    let mut values = s.splitn(4, '\u{0}');
    let vars: Vec<Option<String>> = (0..3).map(|_| values.next().map(str::to_owned)).collect();
    let message = values.next().unwrap_or("work");
    let get = |var: &str| {
        let i = [
            "GIT_SESSION_SANDBOX",
            "GIT_SESSION_AGENT",
            "GIT_SESSION_PERSON",
        ]
        .iter()
        .position(|v| *v == var)?;
        vars[i].clone().map(std::ffi::OsString::from)
    };
    let Ok(owner) = Owner::from_vars(get) else {
        return;
    };
    let out = owner.add_trailers(message);
    for (key, value) in owner.trailers() {
        assert!(
            !value.contains(['\n', '\r']),
            "a trailer value holds a line break"
        );
        let line = format!("{key}: {value}");
        assert!(
            out.lines().any(|l| l == line),
            "{line:?} is not a line of {out:?}"
        );
    }
}

/// The credential helper's input: the first line is taken as `READ_URL` and `PUSH_URL` (when it
/// parses), the rest as git's request. Whatever the bytes, the answer is nothing, `quit=1`, or
/// exactly one `username=` and one `password=` line with no CR or NUL in them (no line of the
/// answer git could read as another key), and the answer is never given for another host.
pub fn credential(data: &[u8]) {
    let (first, request) = match data.iter().position(|b| *b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let url = RemoteUrl::parse(&String::from_utf8_lossy(first)).ok();
    if let Some(u) = &url
        && let Some(c) = u.credentials()
    {
        for v in [&c.username, &c.password] {
            assert!(
                !v.expose().contains(['\r', '\n', '\0']),
                "a decoded line break"
            );
        }
    }
    let Ok((answer, said)) =
        crate::commands::credential::respond(request, url.clone(), url.clone())
    else {
        return;
    };
    let answer: &[u8] = &answer;
    if answer.is_empty() {
        assert!(said.is_some(), "no answer and no word why");
        return;
    }
    if answer == b"quit=1\n" {
        return;
    }
    assert!(
        !answer.contains(&b'\r') && !answer.contains(&0),
        "CR or NUL in the answer"
    );
    let lines: Vec<&[u8]> = answer
        .strip_suffix(b"\n")
        .expect("ended")
        .split(|b| *b == b'\n')
        .collect();
    assert_eq!(lines.len(), 2, "an answer of other lines");
    assert!(lines[0].starts_with(b"username=") && lines[1].starts_with(b"password="));
    let url = url.expect("credentials only from a URL");
    let (_, host, _) = url.credential_parts();
    let asked_host = request
        .split(|b| *b == b'\n')
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix(b"host="))
        .last();
    assert_eq!(
        asked_host,
        Some(host.as_bytes()),
        "credentials for another host"
    );
}

/// The pre-push check's reading of git's ref lines: never a panic, and every line naming the
/// session branch with two full ids is among the updates (nothing skipped); a line over the
/// bound refuses.
pub fn prepush(data: &[u8]) {
    let full = format!("refs/heads/{BRANCH}");
    let Ok(updates) = crate::repo::prepush::session_updates(data, full.as_bytes()) else {
        return;
    };
    let expected = data
        .split(|b| *b == b'\n')
        .filter(|line| {
            let mut f = line.rsplitn(4, |b| *b == b' ');
            let (_, r) = (f.next(), f.next());
            r == Some(full.as_bytes()) && f.next().is_some() && f.next().is_some()
        })
        .count();
    assert_eq!(updates.len(), expected, "a session line skipped or added");
    assert!(
        data.split(|b| *b == b'\n')
            .all(|l| l.len() <= crate::repo::prepush::MAX_REF_LINE)
    );
}

/// The terminal rule: no control character but the line break and the tab survives
/// [`crate::text::terminal`], none at all [`crate::text::line`], and text without them is left
/// as it is.
pub fn terminal(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let shown = crate::text::terminal(&text);
    assert!(
        !shown
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\t')),
        "a raw control character"
    );
    if !text.chars().any(char::is_control)
        && !text.chars().any(|c| {
            ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c)
        })
    {
        assert_eq!(shown, text);
    }
    let one = crate::text::line(data);
    assert!(
        !one.chars().any(char::is_control),
        "a raw control character"
    );
    assert!(one.len() <= 10 * data.len());
    let redacted = crate::redact::text(&text);
    assert!(
        !crate::text::terminal(&redacted)
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    );
}

/// The signing module on arbitrary bytes; the first byte picks the part: 0, a key file's content
/// (refused for a typed cause, or a key whose own signature verifies); 1, a public key's text;
/// 2, an armored signature checked against a fixed key over a fixed payload, which verifies only
/// when it is that key's signature of those bytes.
pub fn signing(data: &[u8]) {
    use crate::signing::{PublicKey, SigningKey};
    const PAYLOAD: &[u8] = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nfuzz\n";
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let dir = scratch();
    let file = dir.path().join("key");
    match which % 3 {
        0 => {
            std::fs::write(&file, rest).expect("writing the key file");
            match SigningKey::from_file(&file, "SIGNING_KEY_FILE") {
                // A signature made is one that verifies; a key that cannot make one is refused.
                Ok(key) => match key.sign(PAYLOAD) {
                    Ok(signature) => key
                        .public_key()
                        .verify(PAYLOAD, signature.as_bytes())
                        .expect("its own signature verifies"),
                    Err(e) => assert!(matches!(e, Error::Signing(_)), "{e}"),
                },
                Err(e) => assert!(matches!(e, Error::Signing(_)), "{e}"),
            }
        }
        1 => {
            if let Err(e) = PublicKey::parse(&String::from_utf8_lossy(rest), "SIGNING_PUBLIC_KEY") {
                assert!(matches!(e, Error::Signing(_)), "{e}");
            }
        }
        _ => {
            let seed = ssh_key::private::Ed25519Keypair::from_seed(&[7; 32]);
            let text = ssh_key::PrivateKey::from(seed)
                .to_openssh(ssh_key::LineEnding::LF)
                .expect("encoding the fixed key");
            std::fs::write(&file, text.as_bytes()).expect("writing the key file");
            let key = SigningKey::from_file(&file, "SIGNING_KEY_FILE").expect("the fixed key");
            let ours = key.sign(PAYLOAD).expect("signing");
            if key.public_key().verify(PAYLOAD, rest).is_ok() {
                let theirs = ssh_key::SshSig::from_pem(rest).expect("a signature that verified");
                let mine = ssh_key::SshSig::from_pem(&ours).expect("our signature");
                assert_eq!(
                    theirs.signature_bytes(),
                    mine.signature_bytes(),
                    "another signature verified"
                );
            }
        }
    }
}

/// A sessions manifest (`GIT_SESSION_SESSIONS_FILE`): refused as bad input (exit 2), or sessions
/// within the bound, each in its own absolute folder, none inside another.
pub fn manifest(data: &[u8]) {
    let base = Path::new("/nonexistent-fuzz");
    match crate::manifest::parse(&base.join("sessions.json"), base, data) {
        Ok(sessions) => {
            assert!(!sessions.is_empty() && sessions.len() <= crate::manifest::MAX_SESSIONS);
            for (i, a) in sessions.iter().enumerate() {
                assert_eq!(a.index, i);
                assert!(a.dir.is_absolute(), "{}", a.dir.display());
                for b in &sessions[i + 1..] {
                    assert!(
                        !a.dir.starts_with(&b.dir) && !b.dir.starts_with(&a.dir),
                        "{} and {}",
                        a.dir.display(),
                        b.dir.display()
                    );
                }
            }
        }
        Err(e) => assert!(matches!(e, Error::Usage(..)), "{e}"),
    }
}
