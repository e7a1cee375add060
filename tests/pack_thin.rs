//! `pack::receive_thin`: thin packs made by the real `git pack-objects --thin`, received into a
//! repository that holds only the base commit's objects, judged by the git CLI (`verify-pack`,
//! `fsck`, `cat-file`) and against `git index-pack --fix-thin` and our own `pack::receive`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use git_session::pack::{self, PackLimits, ReceiveError, Received};

use crate::support::World;

/// The limits of a real run (not the environment's test knob).
const LIMITS: PackLimits = PackLimits {
    max_object_bytes: pack::DEFAULT_MAX_OBJECT_BYTES,
    big_object_bytes: pack::DEFAULT_BIG_OBJECT_BYTES,
    max_tree_entries: pack::DEFAULT_MAX_TREE_ENTRIES,
};

/// A scratch repository with three commits on `main`, each commit also a branch of its name:
/// - `base`: two large text files, `keep.txt` (a smaller text) and two small files;
/// - `mid`: edits lines of `big.txt` and deletes `keep.txt`;
/// - `tip`: edits `big.txt` again and `other.txt` and `src/lib.rs`, restores `keep.txt` as it was
///   in `base` and adds `keep2.txt` (`keep.txt` less one line: git 2.47's `pack-objects` makes it
///   a delta against `keep.txt`, not the other way round as it does for some other names).
struct Thin {
    w: World,
    scratch: PathBuf,
    base: String,
    mid: String,
    tip: String,
    /// The large file's content at `tip`.
    big_at_tip: String,
}

/// Line `i` of a large file `name`.
fn line(name: &str, i: usize) -> String {
    format!(
        "{name} {i:05}: the quick brown fox jumps over the lazy dog, {}\n",
        i * 7919 % 1000
    )
}

/// `n` lines of `name`, those in `edited` replaced.
fn text(name: &str, n: usize, edited: &[usize]) -> String {
    (0..n)
        .map(|i| match edited.contains(&i) {
            true => format!("{name}: edited line {i}\n"),
            false => line(name, i),
        })
        .collect()
}

impl Thin {
    fn new() -> Self {
        let w = World::new();
        let scratch = w.scratch("scratch");
        let write = |path: &str, content: &str| {
            let p = scratch.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        };
        let keep = text("keep", 300, &[]);
        write("big.txt", &text("big", 2000, &[]));
        write("other.txt", &text("other", 1500, &[]));
        write("keep.txt", &keep);
        write("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n");
        write("README.md", "# scratch\n\nA test repository.\n");
        let base = w.commit_all(&scratch, "base");
        write("big.txt", &text("big", 2000, &[10, 1000]));
        std::fs::remove_file(scratch.join("keep.txt")).unwrap();
        let mid = w.commit_all(&scratch, "mid");
        let big_at_tip = text("big", 2000, &[10, 1000, 1500, 1999]);
        write("big.txt", &big_at_tip);
        write("other.txt", &text("other", 1500, &[700]));
        write("keep.txt", &keep);
        write("keep2.txt", &keep.replacen(&line("keep", 150), "", 1));
        write("src/lib.rs", "pub fn answer() -> u32 {\n    43\n}\n");
        let tip = w.commit_all(&scratch, "tip");
        for (name, id) in [("base", &base), ("mid", &mid)] {
            w.git(&scratch, &["branch", name, id]);
        }
        Thin {
            w,
            scratch,
            base,
            mid,
            tip,
            big_at_tip,
        }
    }

    /// `git pack-objects --stdout --revs` of `revs` (one per line), with `flags`.
    fn pack(&self, flags: &[&str], revs: &str) -> Vec<u8> {
        let mut args = vec!["pack-objects", "-q", "--stdout", "--revs"];
        args.extend_from_slice(flags);
        self.w
            .git_stdin_bytes(&self.scratch, &args, revs.as_bytes())
    }

    /// The thin pack of `tip` against `against` (a commit the receiver has).
    fn thin_pack(&self, flags: &[&str], against: &str) -> Vec<u8> {
        let mut all = vec!["--thin"];
        all.extend_from_slice(flags);
        self.pack(&all, &format!("{}\n^{against}\n", self.tip))
    }

    /// A bare repository `name` holding exactly the objects of `branch` and its history (fetched
    /// from the scratch repository), or nothing when `branch` is `None`.
    fn local(&self, name: &str, branch: Option<&str>) -> PathBuf {
        let git_dir = self.w.path(name);
        let dir = git_dir.to_str().unwrap();
        self.w
            .git(self.w.tmp.path(), &["init", "-q", "--bare", dir]);
        if let Some(branch) = branch {
            let from = self.scratch.to_str().unwrap();
            let refspec = format!("refs/heads/{branch}:refs/heads/main");
            self.w.git(&git_dir, &["fetch", "-q", from, &refspec]);
        }
        git_dir
    }

    /// The id of `path` in commit `commit`.
    fn blob(&self, commit: &str, path: &str) -> String {
        self.w
            .git(&self.scratch, &["rev-parse", &format!("{commit}:{path}")])
    }
}

/// `receive_thin` of `bytes` into `git_dir`'s `objects/pack`, its objects the local database.
fn receive_thin(
    git_dir: &Path,
    bytes: &[u8],
    limits: PackLimits,
) -> Result<Received, ReceiveError> {
    let repo = gix::open_opts(git_dir, gix::open::Options::isolated()).unwrap();
    pack::receive_thin(
        &mut &bytes[..],
        &git_dir.join("objects/pack"),
        &repo.objects,
        Some(2),
        limits,
        &AtomicBool::new(false),
        repo.object_hash(),
    )
}

/// Our plain `receive` of `bytes` into `git_dir`'s `objects/pack`.
fn receive(git_dir: &Path, bytes: &[u8]) -> Received {
    pack::receive(
        &mut &bytes[..],
        &git_dir.join("objects/pack"),
        Some(2),
        LIMITS,
        &AtomicBool::new(false),
        None,
        crate::support::gix_format(),
    )
    .unwrap_or_else(|e| panic!("receive: {e:?}"))
}

/// The sorted object ids of a pack index (`git show-index`, run in the repository `git_dir`).
fn index_ids(w: &World, git_dir: &Path, idx: &Path) -> Vec<String> {
    let bytes = std::fs::read(idx).unwrap();
    let listing = w.git_stdin(git_dir, &["show-index"], &bytes);
    let mut ids: Vec<String> = listing
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// The names in `pack_dir`, sorted.
fn names_in(pack_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(pack_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The object count in a pack's header.
fn header_count(pack: &[u8]) -> u32 {
    u32::from_be_bytes(pack[8..12].try_into().unwrap())
}

/// The ids listed once in an index: none may be listed twice.
fn assert_no_duplicates(ids: &[String]) {
    let mut unique = ids.to_vec();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "an object is in the pack twice");
}

/// Receive `thin` into a repository holding `has` (a branch), and judge it with the git CLI and
/// against `git index-pack --fix-thin` of the same bytes; returns the receiving repository and
/// the pack written.
fn completes_from_the_local_base(t: &Thin, thin: &[u8], has: &str) -> (PathBuf, PathBuf) {
    let local = t.local(&format!("local-{has}.git"), Some(has));
    let pack_dir = local.join("objects/pack");
    let before = names_in(&pack_dir);
    let got = receive_thin(&local, thin, LIMITS).unwrap_or_else(|e| panic!("{e:?}"));
    let data_path = got.data_path.clone().expect("a pack was written");
    assert_eq!(data_path.parent().unwrap(), pack_dir);

    // git's own completion of the same bytes, in a second repository holding the same.
    let by_git = t.local(&format!("by-git-{has}.git"), Some(has));
    let out =
        t.w.git_stdin(&by_git, &["index-pack", "--stdin", "--fix-thin"], thin);
    let git_idx = by_git.join(format!(
        "objects/pack/pack-{}.idx",
        out.trim_start_matches("pack\t")
    ));
    let git_ids = index_ids(&t.w, &by_git, &git_idx);
    let ids = index_ids(&t.w, &local, &data_path.with_extension("idx"));
    assert_no_duplicates(&ids);
    assert_eq!(
        ids, git_ids,
        "the same objects as git index-pack --fix-thin"
    );
    assert_eq!(got.num_objects as usize, git_ids.len());
    assert!(
        got.num_objects > header_count(thin),
        "the pack was thin: {} objects received, as many after completion",
        header_count(thin),
    );
    assert!(got.big.is_empty());
    // Nothing left behind but the new pack and its index.
    let mut expected = before;
    for p in [&data_path, &data_path.with_extension("idx")] {
        expected.push(p.file_name().unwrap().to_string_lossy().into_owned());
    }
    expected.sort();
    assert_eq!(names_in(&pack_dir), expected);

    let verify =
        t.w.git(&local, &["verify-pack", "-v", data_path.to_str().unwrap()]);
    assert!(
        verify.contains(&format!("{}: ok", data_path.display())),
        "{verify}"
    );
    assert!(verify.contains(&t.blob(&t.tip, "big.txt")), "{verify}");
    t.w.git(&local, &["update-ref", "refs/heads/main", &t.tip]);
    t.w.git(&local, &["fsck", "--no-progress", "--strict"]);
    let at_tip =
        t.w.git(&local, &["cat-file", "-p", &format!("{}:big.txt", t.tip)]);
    assert_eq!(format!("{at_tip}\n"), t.big_at_tip);
    assert_eq!(
        t.w.git(
            &local,
            &["cat-file", "-p", &format!("{}:src/lib.rs", t.tip)]
        ),
        "pub fn answer() -> u32 {\n    43\n}"
    );
    (local, data_path)
}

/// The `verify-pack -v` line of `id` in `pack`, split in words: id, type, size, size in pack,
/// offset and, for a delta, depth and base (`verify-pack` names a base by id, both kinds).
fn verify_line(w: &World, git_dir: &Path, pack: &Path, id: &str) -> Vec<String> {
    let verify = w.git(git_dir, &["verify-pack", "-v", pack.to_str().unwrap()]);
    let line = verify.lines().find(|l| l.starts_with(id));
    let line = line.unwrap_or_else(|| panic!("{id} is not in {}:\n{verify}", pack.display()));
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn thin_pack_with_offset_deltas_is_completed_from_the_local_base() {
    let t = Thin::new();
    let thin = t.thin_pack(&["--delta-base-offset"], &t.base);
    completes_from_the_local_base(&t, &thin, "base");
}

#[test]
fn thin_pack_with_ref_deltas_only_is_completed_from_the_local_base() {
    // Without --delta-base-offset every delta names its base by id, in the pack (`mid`'s
    // big.txt, which the receiver lacks) or not (`base`'s files).
    let t = Thin::new();
    let thin = t.thin_pack(&[], &t.base);
    completes_from_the_local_base(&t, &thin, "base");
}

#[test]
fn thin_pack_whose_delta_base_is_also_in_the_pack_appends_only_the_missing_ones() {
    // Against `mid`: the pack holds `keep.txt` again (deleted in `mid`, so not excluded) and
    // `keep2.txt` as a REF_DELTA against it; the receiver has `keep.txt` too (from `base`),
    // yet it must not be appended a second time; `mid`'s big.txt and other.txt must be.
    let t = Thin::new();
    let thin = t.thin_pack(&[], &t.mid);
    let keep = t.blob(&t.tip, "keep.txt");
    let has_mid = t.local("has-mid.git", Some("mid"));
    t.w.git(&has_mid, &["cat-file", "-e", &keep]);
    let (local, pack) = completes_from_the_local_base(&t, &thin, "mid");
    let copy = verify_line(&t.w, &local, &pack, &t.blob(&t.tip, "keep2.txt"));
    assert_eq!(
        copy[6], keep,
        "keep2.txt is a delta against keep.txt: {copy:?}"
    );
}

#[test]
fn thin_pack_against_a_base_the_repository_lacks_is_corrupt_naming_it() {
    let t = Thin::new();
    let thin = t.thin_pack(&["--delta-base-offset"], &t.base);
    let empty = t.local("empty.git", None);
    let pack_dir = empty.join("objects/pack");
    let before = names_in(&pack_dir);
    let err = receive_thin(&empty, &thin, LIMITS).unwrap_err();
    let ReceiveError::Corrupt(msg) = err else {
        panic!("expected Corrupt, got {err:?}");
    };
    let base_blob = t.blob(&t.base, "big.txt");
    assert!(msg.contains(&base_blob), "{msg}");
    assert!(
        msg.contains("a delta against an object we do not have"),
        "{msg}"
    );
    assert_eq!(names_in(&pack_dir), before, "nothing is left behind");
}

/// `receive_thin` of a pack that is not thin gives what `receive` gives: the same file names and
/// the same bytes, into a repository holding `has` (or nothing).
fn same_as_receive(t: &Thin, bytes: &[u8], has: Option<&str>, name: &str) {
    let local = t.local(&format!("{name}-thin.git"), has);
    let plain = t.local(&format!("{name}-plain.git"), has);
    let got = receive_thin(&local, bytes, LIMITS).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let want = receive(&plain, bytes);
    assert_eq!(got.num_objects, want.num_objects, "{name}");
    assert_eq!(got.num_objects, header_count(bytes), "{name}");
    assert_eq!(got.big, want.big, "{name}");
    assert_eq!(
        names_in(&local.join("objects/pack")),
        names_in(&plain.join("objects/pack")),
        "{name}"
    );
    match (&got.data_path, &want.data_path) {
        (Some(g), Some(w)) => {
            assert_eq!(g.file_name(), w.file_name(), "{name}");
            assert_eq!(
                std::fs::read(g).unwrap(),
                bytes,
                "{name}: the pack is kept as it came"
            );
            let (gi, wi) = (g.with_extension("idx"), w.with_extension("idx"));
            assert_eq!(
                std::fs::read(gi).unwrap(),
                std::fs::read(wi).unwrap(),
                "{name}"
            );
            t.w.git(&local, &["verify-pack", g.to_str().unwrap()]);
        }
        (None, None) => {}
        other => panic!("{name}: data paths differ: {other:?}"),
    }
}

#[test]
fn pack_that_is_not_thin_is_received_as_receive_does() {
    let t = Thin::new();
    // Without --delta-base-offset: REF_DELTAs against bases the pack holds, which the receiver
    // holds too (they must not be appended a second time) or not.
    let full_ref = t.pack(&[], &format!("{}\n", t.tip));
    same_as_receive(&t, &full_ref, Some("base"), "ref-with-base");
    same_as_receive(&t, &full_ref, None, "ref-empty");
    let full_ofs = t.pack(&["--delta-base-offset"], &format!("{}\n", t.tip));
    same_as_receive(&t, &full_ofs, Some("base"), "ofs-with-base");
    // Only the tip's new objects, without --thin: no delta names a base outside the pack.
    let new_only = t.pack(&[], &format!("{}\n^{}\n", t.tip, t.base));
    same_as_receive(&t, &new_only, Some("base"), "new-only");
}

#[test]
fn empty_pack_is_received_as_receive_does() {
    let t = Thin::new();
    let empty = t.pack(&["--thin"], &format!("{}\n^{}\n", t.base, t.base));
    assert_eq!(header_count(&empty), 0);
    same_as_receive(&t, &empty, Some("base"), "empty");
    let local = t.local("empty-again.git", Some("base"));
    let got = receive_thin(&local, &empty, LIMITS).unwrap();
    assert_eq!((got.data_path, got.num_objects), (None, 0));
}

#[test]
fn truncated_or_extended_thin_pack_is_corrupt() {
    let t = Thin::new();
    let thin = t.thin_pack(&["--delta-base-offset"], &t.base);
    let mut extended = thin.clone();
    extended.extend_from_slice(b"more");
    let after = format!("data after the end of the pack ({} bytes)", thin.len());
    for (case, bytes, words) in [
        ("half", &thin[..thin.len() / 2], "inflating an entry"),
        (
            "no checksum",
            &thin[..thin.len() - 20],
            "reading the pack's checksum",
        ),
        (
            "last byte cut",
            &thin[..thin.len() - 1],
            "reading the pack's checksum",
        ),
        ("data after", &extended[..], after.as_str()),
    ] {
        let local = t.local(&format!("{}.git", case.replace(' ', "-")), Some("base"));
        let pack_dir = local.join("objects/pack");
        let before = names_in(&pack_dir);
        match receive_thin(&local, bytes, LIMITS) {
            Err(ReceiveError::Corrupt(msg)) => assert!(msg.contains(words), "{case}: {msg}"),
            other => panic!("{case}: expected Corrupt, got {other:?}"),
        }
        assert_eq!(
            names_in(&pack_dir),
            before,
            "{case}: nothing is left behind"
        );
    }
}

#[test]
fn base_over_the_big_object_threshold_is_refused_before_it_is_read() {
    let t = Thin::new();
    // A branch from `base` keeping the first 400 lines of big.txt (about 25 KB of 125 KB): a
    // delta with a small result against a base over the threshold.
    t.w.git(&t.scratch, &["checkout", "-q", "-b", "cut", &t.base]);
    std::fs::write(t.scratch.join("big.txt"), text("big", 400, &[])).unwrap();
    let cut = t.w.commit_all(&t.scratch, "cut");
    let thin = t.pack(
        &["--thin", "--delta-base-offset"],
        &format!("{cut}\n^{}\n", t.base),
    );
    let local = t.local("local.git", Some("base"));
    let limits = PackLimits {
        big_object_bytes: 64 * 1024,
        ..LIMITS
    };
    match receive_thin(&local, &thin, limits) {
        Err(ReceiveError::TooLarge(msg)) => {
            assert!(msg.contains(&t.blob(&t.base, "big.txt")), "{msg}");
            assert!(msg.contains("65536"), "{msg}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

/// A thin pack cut at every byte (its header, an entry's header, a base id, the deltas, the
/// checksum) is refused as corrupt, never taken, never a panic or a local fault, and leaves
/// nothing in the pack folder (the side file of local bases included); the whole pack is then
/// received into the same repository.
#[test]
fn thin_pack_cut_at_every_byte_is_corrupt_and_leaves_nothing() {
    let t = Thin::new();
    let thin = t.thin_pack(&[], &t.base);
    let local = t.local("cut.git", Some("base"));
    let pack_dir = local.join("objects/pack");
    let before = names_in(&pack_dir);
    for len in 0..thin.len() {
        match receive_thin(&local, &thin[..len], LIMITS) {
            Err(ReceiveError::Corrupt(_)) => {}
            other => panic!(
                "cut at {len} of {}: expected Corrupt, got {other:?}",
                thin.len()
            ),
        }
        assert_eq!(names_in(&pack_dir), before, "cut at {len}: left behind");
    }
    let got = receive_thin(&local, &thin, LIMITS).unwrap();
    assert!(got.num_objects > 0);
    t.w.git(&local, &["fsck", "--no-progress", "--no-dangling"]);
}

/// A `REF_DELTA` entry of `data` (a delta) against `base` (a full id, hex).
fn ref_delta(base: &str, delta: &[u8]) -> Vec<u8> {
    use crate::support::wire::{entry_header, zlib};
    let mut e = entry_header(7, delta.len() as u64);
    e.extend_from_slice(gix::ObjectId::from_hex(base.as_bytes()).unwrap().as_bytes());
    e.extend_from_slice(&zlib(delta));
    e
}

/// A delta from a base of `base_len` bytes: all of it copied, then `tail` inserted.
fn copy_then_insert(base_len: usize, tail: &[u8]) -> Vec<u8> {
    use crate::support::wire::delta_size;
    assert!(base_len > 0 && base_len < 1 << 16 && !tail.is_empty() && tail.len() < 128);
    let mut d = delta_size(base_len as u64);
    d.extend(delta_size((base_len + tail.len()) as u64));
    // Copy: offset 0, size in two bytes (flags 0x10 | 0x20).
    d.extend([
        0x80 | 0x10 | 0x20,
        (base_len & 0xff) as u8,
        (base_len >> 8) as u8,
    ]);
    d.push(tail.len() as u8);
    d.extend_from_slice(tail);
    d
}

/// The id git gives a blob of `data`.
fn blob_id(data: &[u8]) -> String {
    gix::objs::compute_hash(crate::support::gix_format(), gix::objs::Kind::Blob, data)
        .unwrap()
        .to_string()
}

/// Two entries deltas against one local base: the base is appended once, both objects are
/// there, and git finds the pack sound.
#[test]
fn thin_pack_naming_one_base_several_times_appends_it_once() {
    let t = Thin::new();
    let local = t.local("repeated.git", Some("base"));
    let readme = t.blob(&t.base, "README.md");
    let content =
        t.w.git_stdin_bytes(&local, &["cat-file", "blob", &readme], b"");
    let one = copy_then_insert(content.len(), b"one\n");
    let two = copy_then_insert(content.len(), b"two\n");
    let pack =
        crate::support::wire::raw_pack(&[ref_delta(&readme, &one), ref_delta(&readme, &two)]);
    let got = receive_thin(&local, &pack, LIMITS).unwrap();
    assert_eq!(got.num_objects, 3, "two entries and the base once");
    for tail in [&b"one\n"[..], b"two\n"] {
        let id = blob_id(&[content.as_slice(), tail].concat());
        t.w.git(&local, &["cat-file", "-e", &id]);
    }
    t.w.git(&local, &["fsck", "--no-progress", "--no-dangling"]);
}

/// A chain of 3000 `REF_DELTA` entries, each against the one before and the first against a
/// local base (a chain git would never send, 3000 deep): received within bounds, or refused as
/// corrupt or too large; never a crash (a recursion per link would overflow the stack).
#[test]
fn thin_pack_with_a_very_deep_delta_chain_is_bounded() {
    let t = Thin::new();
    let local = t.local("deep.git", Some("base"));
    let readme = t.blob(&t.base, "README.md");
    let mut content =
        t.w.git_stdin_bytes(&local, &["cat-file", "blob", &readme], b"");
    let (mut entries, mut base) = (Vec::new(), readme);
    for i in 0..3000 {
        let tail = format!("{i}\n");
        entries.push(ref_delta(
            &base,
            &copy_then_insert(content.len(), tail.as_bytes()),
        ));
        content.extend_from_slice(tail.as_bytes());
        base = blob_id(&content);
        if content.len() > 60_000 {
            break;
        }
    }
    let pack = crate::support::wire::raw_pack(&entries);
    let started = std::time::Instant::now();
    match receive_thin(&local, &pack, LIMITS) {
        Ok(got) => {
            assert_eq!(got.num_objects as usize, entries.len() + 1);
            t.w.git(&local, &["cat-file", "-e", &base]);
        }
        Err(ReceiveError::Corrupt(_) | ReceiveError::TooLarge(_)) => {}
        Err(e) => panic!("expected a bounded refusal, got {e:?}"),
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}
