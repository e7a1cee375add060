//! The early checkout: files written while the pack is still on the wire. A server that holds the
//! last bytes of the pack back (a real `git pack-objects` pack, the rest sent at once) shows what
//! the work tree holds before the transfer ends; the results are judged by the git CLI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::wire::{
    band, delta_size, entry_header, ofs_distance, pack_of, pack_of_with, pkt, zlib,
};
use crate::support::{Endpoint, GitServer, Scripted, World, all_files, assert_no_secret};

/// How long the server holds the end of the pack.
const HOLD_MS: u64 = 8000;
const STAGING: &str = ".git-session-restore";

/// One commit served whole, its pack's end held back by [`HOLD_MS`].
struct Held {
    w: World,
    srv: GitServer,
    tip: String,
}

impl Held {
    fn new(files: &[(&str, Option<&str>)]) -> Self {
        Self::with_pack_options(files, &[])
    }

    /// [`Held::new`], its pack made with these `git pack-objects` options.
    fn with_pack_options(files: &[(&str, Option<&str>)], options: &[&str]) -> Self {
        let w = World::new();
        let tip = w.repo("repo.git", &[files]).remove(0);
        let srv = GitServer::start(&w.srv(), None);
        let held = Held { w, srv, tip };
        held.hold_next_fetch(options);
        held
    }

    fn bare(&self) -> PathBuf {
        self.w.srv().join("repo.git")
    }

    /// The next fetch gets the commit's pack (`git pack-objects`, with deltas between its
    /// objects), all but its last 64 bytes (the checksum, the flush) at once, the rest after
    /// [`HOLD_MS`].
    fn hold_next_fetch(&self, options: &[&str]) {
        let listed = self.w.git(
            &self.bare(),
            &["rev-list", "--objects", "--no-walk", &self.tip],
        );
        let ids: Vec<&str> = listed
            .lines()
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let pack = pack_of_with(&self.w, &self.bare(), &ids, options);
        self.srv
            .knobs
            .scripted
            .lock()
            .unwrap()
            .push(held_answer(&pack, HOLD_MS));
    }

    fn spawn(&self, dir: &Path, extra: &[(&str, &str)]) -> Child {
        std::fs::create_dir_all(dir).unwrap();
        Command::new(env!("CARGO_BIN_EXE_git-session"))
            .args(["restore", "--json"])
            .current_dir(dir)
            .env_clear()
            .envs(self.w.env())
            .env("READ_URL", self.srv.url("repo.git", None))
            .env("SESSION_BRANCH", "s")
            .env("TIP_SHA", &self.tip)
            .envs(extra.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Wait for `child`; its exit code, and its stdout and stderr.
    fn wait(&self, child: Child) -> (Option<i32>, String) {
        let out = child.wait_with_output().unwrap();
        assert_no_secret("stdout", &out.stdout);
        assert_no_secret("stderr", &out.stderr);
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.code(), text)
    }

    /// The files of `dir` (relative, staging folder left out) once `ready` says so, polled while
    /// `child` runs and the pack's end is held; panics when the transfer ended first.
    fn during_the_hold(
        &self,
        dir: &Path,
        child: &mut Child,
        ready: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let started = Instant::now();
        loop {
            let files = work_tree_files(dir);
            if ready(&files) {
                assert!(child.try_wait().unwrap().is_none(), "restore ended already");
                assert!(
                    started.elapsed() < Duration::from_millis(HOLD_MS - 500),
                    "seen only after {:?}: not during the hold",
                    started.elapsed()
                );
                assert!(!dir.join(".git").exists(), ".git before the pack ended");
                return files;
            }
            assert!(
                started.elapsed() < Duration::from_millis(HOLD_MS - 500),
                "nothing written during the hold; the work tree held {files:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The restore is complete and exactly the commit (git's own judgement).
    fn assert_restored(&self, dir: &Path) {
        let w = &self.w;
        assert_eq!(w.git(dir, &["rev-parse", "HEAD"]), self.tip);
        assert_eq!(
            w.git(dir, &["status", "--porcelain", "--untracked-files=all"]),
            ""
        );
        w.git(dir, &["fsck", "--no-progress"]);
        assert_eq!(
            w.git(dir, &["ls-files"]),
            w.git(dir, &["ls-tree", "-r", "--name-only", &self.tip])
        );
        assert!(!dir.join(STAGING).exists(), "staging folder left behind");
    }
}

/// A `fetch` answer carrying `pack` in side-band packets of 512 bytes (`upload-pack` relays what
/// `pack-objects` writes, a few KiB at a time) with its checksum (20 bytes, 32 for SHA-256) in a
/// packet of its own, which is held back `hold_ms` with the flush: every entry has arrived, the
/// pack has not ended.
fn held_answer(pack: &[u8], hold_ms: u64) -> Scripted {
    let trailer = crate::support::gix_format().len_in_bytes();
    let (entries, checksum) = pack.split_at(pack.len() - trailer);
    let mut body = pkt("packfile\n").into_bytes();
    for chunk in entries.chunks(512) {
        body.extend_from_slice(&band(1, chunk));
    }
    let tail = [band(1, checksum), b"0000".to_vec()].concat();
    let mut s = Scripted::once(Endpoint::Fetch, [body, tail.clone()].concat());
    s.hold_last = tail.len();
    s.hold_ms = hold_ms;
    s
}

/// Every file and symlink below `dir`, relative, the staging folder left out.
fn work_tree_files(dir: &Path) -> Vec<String> {
    if !dir.exists() {
        return Vec::new();
    }
    let mut files: Vec<String> = all_files(dir)
        .iter()
        .filter(|p| !p.starts_with(dir.join(STAGING)) && !p.starts_with(dir.join(".git")))
        .map(|p| p.strip_prefix(dir).unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    files
}

impl Held {
    /// [`Held::new`] of `files` as `(path, content)` pairs, any deltas as offset deltas, as
    /// `upload-pack` sends them to git-session (it asks for `ofs-delta`): which blobs `git
    /// pack-objects` makes deltas of differs between the object formats, and a `REF_DELTA` is
    /// left to the checkout after the transfer.
    fn of(files: &[(String, String)]) -> Self {
        let list: Vec<(&str, Option<&str>)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), Some(c.as_str())))
            .collect();
        Held::with_pack_options(&list, &["--delta-base-offset"])
    }
}

fn numbered(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("d{}/f{i:02}.txt", i % 3),
                format!("file {i}\n").repeat(i + 1),
            )
        })
        .collect()
}

/// The files of a commit are written as their blobs arrive: while the server still holds the
/// end of the pack, every regular file is in place with its exact content and mode, the
/// symlink is not (it waits for the checkout after the transfer), and no `.git` exists yet.
/// Afterwards the restore is exact.
#[test]
fn files_are_written_while_the_pack_is_still_on_the_wire() {
    let mut files = numbered(40);
    files.push(("run.sh".into(), "#!/bin/sh\necho hi\n".into()));
    files.push(("link".into(), "->d0/f00.txt".into()));
    let h = Held::of(&files);
    let dir = h.w.path("s");
    let mut child = h.spawn(&dir, &[]);
    // Ready once every regular file holds its whole content (a file is created, then written).
    let complete = |_: &[String]| {
        files
            .iter()
            .filter(|(p, _)| p != "link")
            .all(|(path, content)| {
                std::fs::read_to_string(dir.join(path)).is_ok_and(|got| got == *content)
            })
    };
    let seen = h.during_the_hold(&dir, &mut child, complete);
    assert!(!seen.contains(&"link".to_owned()), "{seen:?}");
    for (path, content) in files.iter().filter(|(p, _)| p != "link") {
        assert_eq!(
            std::fs::read_to_string(dir.join(path)).unwrap(),
            *content,
            "{path}"
        );
    }
    let mode = crate::support::mode_of(&dir.join("run.sh"));
    assert!(mode & 0o100 != 0, "run.sh is not executable: {mode:o}");
    let (code, stderr) = h.wait(child);
    assert_eq!(code, Some(0), "{stderr}");
    h.assert_restored(&dir);
    assert_eq!(
        std::fs::read_link(dir.join("link")).unwrap(),
        Path::new("d0/f00.txt")
    );
}

/// Files a `.gitattributes` may convert on the way out (`eol=crlf`, `ident`) are not written
/// early: during the hold only the others are there, a file with a name no macro defines
/// (`windows`: git ignores it) among them. Afterwards every file is exactly what `git clone`
/// writes.
#[test]
fn files_the_attributes_may_convert_wait_for_the_checkout_after_the_transfer() {
    let files: &[(&str, Option<&str>)] = &[
        (
            ".gitattributes",
            Some("*.crlf eol=crlf\n*.id ident\n*.win windows\n*.lf text eol=lf\n"),
        ),
        ("a.crlf", Some("l1\nl2\n")),
        ("b.id", Some("$Id$\n")),
        ("c.win", Some("w1\nw2\n")),
        ("d.lf", Some("x\n")),
        ("plain.txt", Some("p\n")),
        ("sub/.gitattributes", Some("*.txt eol=crlf\n")),
        ("sub/e.txt", Some("e1\ne2\n")),
        ("sub/f.md", Some("f\n")),
    ];
    let h = Held::new(files);
    let dir = h.w.path("s");
    let mut child = h.spawn(&dir, &[]);
    let plain = ["c.win", "d.lf", "plain.txt", "sub/f.md"];
    let seen = h.during_the_hold(&dir, &mut child, |f| {
        plain.iter().all(|p| f.contains(&(*p).to_owned()))
    });
    // The attributes files wait too: the checkout after the transfer reads them from its index.
    for converted in [
        "a.crlf",
        "b.id",
        "sub/e.txt",
        ".gitattributes",
        "sub/.gitattributes",
    ] {
        assert!(
            !seen.contains(&converted.to_owned()),
            "{converted} in {seen:?}"
        );
    }
    let (code, stderr) = h.wait(child);
    assert_eq!(code, Some(0), "{stderr}");
    h.assert_restored(&dir);
    let clone = h.w.path("clone");
    h.w.git(
        &h.w.path(""),
        &[
            "clone",
            "-q",
            h.bare().to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    // gix expands `$Id$` as `$Id: <id>$`, git as `$Id: <id> $` (both collapse to the same blob):
    // that file is compared by what git reads back instead.
    assert_eq!(h.w.git(&dir, &["diff", "--stat", "HEAD", "--", "b.id"]), "");
    for (path, _) in files.iter().filter(|(p, _)| *p != "b.id") {
        assert_eq!(
            std::fs::read(dir.join(path)).unwrap(),
            std::fs::read(clone.join(path)).unwrap(),
            "{path} differs from git's checkout"
        );
    }
    assert_eq!(std::fs::read(dir.join("a.crlf")).unwrap(), b"l1\r\nl2\r\n");
}

/// A kill while files are written early — the pack not even complete, so no pack index exists —
/// leaves a file cut short; the rerun knows it as the killed run's own (the intent recorded
/// when writing began) and completes the restore.
#[test]
fn a_kill_during_the_early_checkout_is_completed_by_the_rerun() {
    let files = numbered(12);
    let h = Held::of(&files);
    let dir = h.w.path("s");
    let child = h.spawn(&dir, &[("GIT_SESSION_FAILPOINT", "mid-early-checkout")]);
    let started = Instant::now();
    let (code, stderr) = h.wait(child);
    assert!(
        code.is_none() || code == Some(134),
        "not killed: {code:?} {stderr}"
    );
    assert!(
        stderr.contains("failpoint 'mid-early-checkout'"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(HOLD_MS),
        "killed only after the pack ended"
    );
    let pack_dir = dir.join(STAGING).join("objects/pack");
    let indexes = std::fs::read_dir(&pack_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "idx")
        })
        .count();
    assert_eq!(indexes, 0, "the pack was indexed before the kill");
    let written = work_tree_files(&dir);
    assert_eq!(written.len(), 3, "{written:?}");
    let cut: Vec<_> = files
        .iter()
        .filter(|(p, c)| std::fs::read(dir.join(p)).is_ok_and(|got| got.len() < c.len()))
        .collect();
    assert_eq!(cut.len(), 1, "one file cut short: {cut:?}");
    // The rerun: the real server this time.
    let run = h.w.run(
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL", &h.srv.url("repo.git", None)),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &h.tip),
        ],
    );
    run.assert_code(0);
    h.assert_restored(&dir);
}

/// A restore refused after files were written early (the pack lacks a blob the tree names;
/// the first file's blob came, the second's never does) removes what it wrote: the target is as
/// empty as before, as SPEC's "nothing was written" says.
#[test]
fn a_restore_refused_after_files_were_written_early_leaves_nothing() {
    let w = World::new();
    let ids = w.repo(
        "repo.git",
        &[&[("a/one.txt", Some("one\n")), ("b/two.txt", Some("two\n"))]],
    );
    let tip = &ids[0];
    let bare = w.srv().join("repo.git");
    let srv = GitServer::start(&w.srv(), None);
    let listed = w.git(&bare, &["rev-list", "--objects", "--no-walk", tip]);
    let kept: Vec<&str> = listed
        .lines()
        .filter(|l| !l.ends_with("b/two.txt"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let pack = pack_of(&w, &bare, &kept);
    srv.knobs
        .scripted
        .lock()
        .unwrap()
        .push(held_answer(&pack, 1500));
    let dir = w.path("s");
    std::fs::create_dir_all(&dir).unwrap();
    let h = Held {
        w,
        srv,
        tip: tip.clone(),
    };
    let mut child = h.spawn(&dir, &[]);
    let seen = h.during_the_hold(&dir, &mut child, |f| !f.is_empty());
    assert_eq!(seen, ["a/one.txt"]);
    let (code, stderr) = h.wait(child);
    assert_eq!(code, Some(6), "{stderr}");
    assert!(stderr.contains("b/two.txt"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A pack of deltas (`--delta-base-offset`, as upload-pack sends to a client asking for
/// `ofs-delta`): the files are rebuilt from their bases as they arrive, and the pack's index is
/// written from the ids the early checkout resolved (its debug log says so) — `git fsck` and
/// `git verify-pack` on the result check every object against that index.
#[test]
fn a_pack_of_deltas_is_checked_out_and_indexed_as_it_arrives() {
    let body = "a line that every version of the file shares, long enough to be worth a delta\n"
        .repeat(60);
    let files: Vec<(String, String)> = (0..30)
        .map(|i| (format!("v/f{i:02}.txt"), format!("{body}version {i}\n")))
        .collect();
    let list: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_str())))
        .collect();
    let h = Held::with_pack_options(&list, &["--delta-base-offset"]);
    let dir = h.w.path("s");
    let mut child = h.spawn(&dir, &[("RUST_LOG", "git_session=debug")]);
    h.during_the_hold(&dir, &mut child, |_| {
        files.iter().all(|(path, content)| {
            std::fs::read_to_string(dir.join(path)).is_ok_and(|got| got == *content)
        })
    });
    for (path, content) in &files {
        assert_eq!(
            &std::fs::read_to_string(dir.join(path)).unwrap(),
            content,
            "{path}"
        );
    }
    let (code, out) = h.wait(child);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("indexed from the 33 ids"), "{out}");
    h.assert_restored(&dir);
    let verified = verify_pack(&h.w, &dir);
    let deltas = verified
        .lines()
        .filter(|l| l.split_whitespace().count() == 7)
        .count();
    assert!(
        deltas >= 20,
        "only {deltas} deltas in the pack:\n{verified}"
    );
}

/// A restore into `s` whose fetch is answered with `pack` (at once, nothing held), with `env`:
/// the world, the folder, the exit code and the output.
fn restore_with_pack(
    h: Held,
    pack: &[u8],
    env: &[(&str, &str)],
) -> (Held, PathBuf, Option<i32>, String) {
    h.srv
        .knobs
        .scripted
        .lock()
        .unwrap()
        .push(held_answer(pack, 0));
    let dir = h.w.path("s");
    let (code, out) = h.wait(h.spawn(&dir, env));
    (h, dir, code, out)
}

/// A restore of `a.txt` (the base, `body` repeated `times` and a few lines more), five files of
/// random text (9.5 MB: more than the early checkout's 8 MiB cache of bases) and `z.txt` (a delta
/// of `a.txt`), in that order in the pack; its debug log. `git fsck` (`assert_restored`) and
/// `git verify-pack` check the tree and the index written.
fn restore_far_delta(times: usize) -> String {
    let body = "a line that both versions of the file share, long enough to be worth a delta\n"
        .repeat(times);
    let base = format!("{body}and a few more lines in the bigger one\n").repeat(2);
    let mut seed = 7u64;
    let mut filler = |n: usize| {
        let mut text = String::with_capacity(n);
        while text.len() < n {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            text.push_str(&format!("{:016x}\n", seed));
        }
        text
    };
    let mut files = vec![("a.txt".to_owned(), base), ("z.txt".to_owned(), body)];
    files.extend((0..5).map(|i| (format!("f{i}.txt"), filler(1_900_000))));
    let list: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_str())))
        .collect();
    let w = World::new();
    let tip = w.repo("repo.git", &[&list]).remove(0);
    let bare = w.srv().join("repo.git");
    let srv = GitServer::start(&w.srv(), None);
    // The base first, the fillers, the delta last: pack-objects writes them in this order.
    let mut ids = vec![
        tip.clone(),
        w.git(&bare, &["rev-parse", &format!("{tip}^{{tree}}")]),
    ];
    for path in [
        "a.txt", "f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt", "z.txt",
    ] {
        ids.push(w.git(&bare, &["rev-parse", &format!("{tip}:{path}")]));
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let pack = pack_of_with(&w, &bare, &ids, &["--delta-base-offset"]);
    let (h, dir, code, out) = restore_with_pack(
        Held { w, srv, tip },
        &pack,
        &[("RUST_LOG", "git_session=debug")],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("indexed from the 9 ids"), "{out}");
    h.assert_restored(&dir);
    let verified = verify_pack(&h.w, &dir);
    assert!(
        verified.contains("chain length = 1: 1 object"),
        "{verified}"
    );
    out
}

/// A delta whose base came more than the early checkout's cache of bases before it: the base is
/// read back from the pack written so far while the rest is on the wire, so the delta's file is
/// written early like the others and nothing is left to decode after the last byte (it used to be
/// decoded twice there: to name it for the index, then to check it out).
#[test]
fn a_delta_far_from_its_base_is_resolved_while_the_pack_streams_in() {
    let out = restore_far_delta(60);
    assert!(
        out.contains("(1 bases read back from the pack), 0 without their base at hand"),
        "{out}"
    );
    assert!(out.contains("early checkout: 7 files written"), "{out}");
    assert!(!out.contains("could not name"), "{out}");
}

/// A delta whose base is over what the early checkout collects (2 MiB): never held, not read
/// back either, so that one entry is decoded from the pack after the last byte instead of
/// gix-pack indexing the whole pack again (the debug log says which).
#[test]
fn a_delta_whose_base_the_observer_never_held_is_named_from_the_pack() {
    let out = restore_far_delta(16_000);
    assert!(
        out.contains("(0 bases read back from the pack), 1 without their base at hand"),
        "{out}"
    );
    assert!(
        out.contains("1 entries the observer could not name decoded from the pack"),
        "{out}"
    );
}

/// A delta whose base would lie before the pack's start (a lie of the server), left unnamed by
/// the early checkout: refused as a corrupt pack (exit 6), never a crash (gix-pack's
/// `base_pack_offset` panics on it; it was "an internal error", exit 1), nothing left behind.
#[test]
fn a_delta_whose_base_lies_before_the_pack_s_start_is_refused_not_a_crash() {
    let w = World::new();
    let tip = w
        .repo("repo.git", &[&[("a.txt", Some("a file\n"))]])
        .remove(0);
    let bare = w.srv().join("repo.git");
    let srv = GitServer::start(&w.srv(), None);
    let listed = w.git(&bare, &["rev-list", "--objects", "--no-walk", &tip]);
    let ids: Vec<&str> = listed
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let real = pack_of_with(&w, &bare, &ids, &[]);
    let format = crate::support::gix_format();
    let mut pack = real[..real.len() - format.len_in_bytes()].to_vec();
    let count = u32::from_be_bytes(pack[8..12].try_into().unwrap()) + 1;
    pack[8..12].copy_from_slice(&count.to_be_bytes());
    // "Copy 5 bytes from the base, insert '+'", against a base 1000 bytes before the pack.
    let delta = [delta_size(5), delta_size(6), vec![0x90, 5, 1, b'+']].concat();
    let at = pack.len() as u64;
    pack.extend(entry_header(6, delta.len() as u64));
    pack.extend(ofs_distance(at + 1000));
    pack.extend(zlib(&delta));
    let mut hasher = gix::hash::hasher(format);
    hasher.update(&pack);
    pack.extend(hasher.try_finalize().unwrap().as_slice());
    let (_h, dir, code, out) = restore_with_pack(Held { w, srv, tip }, &pack, &[]);
    assert!(!out.contains("a bug in git-session"), "{out}");
    assert_eq!(code, Some(6), "{out}");
    assert!(work_tree_files(&dir).is_empty(), "{out}");
    assert!(!dir.join(".git").exists());
}

crate::sha256_too!(
    files_are_written_while_the_pack_is_still_on_the_wire,
    files_the_attributes_may_convert_wait_for_the_checkout_after_the_transfer,
    a_kill_during_the_early_checkout_is_completed_by_the_rerun,
    a_restore_refused_after_files_were_written_early_leaves_nothing,
    a_pack_of_deltas_is_checked_out_and_indexed_as_it_arrives,
    a_delta_far_from_its_base_is_resolved_while_the_pack_streams_in,
    a_delta_whose_base_the_observer_never_held_is_named_from_the_pack,
    a_delta_whose_base_lies_before_the_pack_s_start_is_refused_not_a_crash,
);

/// `git verify-pack -v` of the restored tree's one pack (git checks it; its lines are returned).
fn verify_pack(w: &crate::support::World, dir: &std::path::Path) -> String {
    let idx = std::fs::read_dir(dir.join(".git/objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .unwrap();
    w.git(dir, &["verify-pack", "-v", idx.to_str().unwrap()])
}

/// The owner of the work folder swaps a folder the early checkout made for a symlink to a folder
/// outside while the pack's end is held (a file of it, converted by `eol=crlf`, still to be
/// written after the transfer): nothing is ever written, changed or removed outside (a file of
/// the same name as one written early stays as it was), the run ends with a typed refusal, and a
/// rerun once the folder is put back completes the restore exactly.
#[test]
fn a_folder_swapped_for_a_symlink_mid_restore_writes_nothing_outside() {
    let mut files = numbered(30);
    files.push((".gitattributes".into(), "*.crlf eol=crlf\n".into()));
    files.push(("d0/z.crlf".into(), "z1\nz2\n".into()));
    let h = Held::of(&files);
    let dir = h.w.path("s");
    let outside = h.w.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("f00.txt"), "outside\n").unwrap();
    let mut child = h.spawn(&dir, &[]);
    let early = |_: &[String]| {
        std::fs::read_to_string(dir.join("d0/f00.txt")).is_ok_and(|s| s == files[0].1)
    };
    h.during_the_hold(&dir, &mut child, early);
    std::fs::rename(dir.join("d0"), h.w.path("d0-moved")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("d0")).unwrap();
    let (code, text) = h.wait(child);
    let outside_files = work_tree_files(&outside);
    assert_eq!(outside_files, vec!["f00.txt".to_owned()], "written outside");
    assert_eq!(
        std::fs::read_to_string(outside.join("f00.txt")).unwrap(),
        "outside\n"
    );
    assert!(
        matches!(code, Some(7 | 10)),
        "expected a typed refusal (7 or 10), got {code:?}: {text}"
    );
    std::fs::remove_file(dir.join("d0")).unwrap();
    let run = h.w.run(
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL", &h.srv.url("repo.git", None)),
            ("SESSION_BRANCH", "s"),
            ("TIP_SHA", &h.tip),
        ],
    );
    run.assert_code(0);
    h.assert_restored(&dir);
    assert_eq!(work_tree_files(&outside), vec!["f00.txt".to_owned()]);
}

/// The pack of `tip` in `bare` made by hand in a hostile order: the commit, its trees, every
/// blob, and the `.gitattributes` blobs last (each object whole, no deltas).
fn attributes_last_pack(w: &World, bare: &Path, tip: &str) -> Vec<u8> {
    use crate::support::wire::{entry_header, raw_pack, zlib};
    let listed = w.git(bare, &["rev-list", "--objects", "--no-walk", tip]);
    let mut objects: Vec<(String, bool)> = listed
        .lines()
        .map(|l| {
            let (id, path) = l.split_once(' ').unwrap_or((l, ""));
            (id.to_owned(), path.ends_with(".gitattributes"))
        })
        .collect();
    objects.sort_by_key(|(_, attributes)| *attributes);
    let entries: Vec<Vec<u8>> = objects
        .iter()
        .map(|(id, _)| {
            let kind = w.git(bare, &["cat-file", "-t", id]);
            let data = w.git_stdin_bytes(bare, &["cat-file", &kind, id], b"");
            let code = match kind.as_str() {
                "commit" => 1,
                "tree" => 2,
                _ => 3,
            };
            [entry_header(code, data.len() as u64), zlib(&data)].concat()
        })
        .collect();
    raw_pack(&entries)
}

/// `.gitattributes` files that arrive last in the pack (after every file they convert) and mark
/// paths `text eol=crlf`, `filter=lfs` (a file that is no pointer), another filter (no driver
/// runs: written as it is) or a macro: every file is byte for byte what `git clone` writes, and
/// git finds the tree clean.
#[test]
fn attributes_arriving_after_the_files_they_convert_are_applied_as_git_applies_them() {
    let files: &[(&str, Option<&str>)] = &[
        (
            ".gitattributes",
            Some(
                "[attr]crlfy text eol=crlf\n*.txt text eol=crlf\n*.bin filter=lfs diff=lfs \
                 merge=lfs -text\n*.po filter=gettext\n*.w crlfy\n",
            ),
        ),
        ("a.txt", Some("a1\na2\n")),
        ("b.bin", Some("not a pointer\n")),
        ("c.po", Some("msgid \"x\"\n")),
        ("d.w", Some("w1\nw2\n")),
        ("plain.c", Some("int x;\n")),
        ("sub/.gitattributes", Some("*.md eol=crlf\n*.txt -text\n")),
        ("sub/e.md", Some("e1\ne2\n")),
        ("sub/f.txt", Some("f1\nf2\n")),
        ("sub/g.c", Some("g\n")),
    ];
    let w = World::new();
    let tip = w.repo("repo.git", &[files]).remove(0);
    let srv = GitServer::start(&w.srv(), None);
    let h = Held { w, srv, tip };
    let pack = attributes_last_pack(&h.w, &h.bare(), &h.tip);
    h.srv
        .knobs
        .scripted
        .lock()
        .unwrap()
        .push(held_answer(&pack, 2000));
    let dir = h.w.path("s");
    let child = h.spawn(&dir, &[]);
    let (code, text) = h.wait(child);
    assert_eq!(code, Some(0), "{text}");
    h.assert_restored(&dir);
    let clone = h.w.path("clone");
    h.w.git(
        &h.w.path(""),
        &[
            "clone",
            "-q",
            h.bare().to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    for (path, _) in files {
        assert_eq!(
            std::fs::read(dir.join(path)).unwrap(),
            std::fs::read(clone.join(path)).unwrap(),
            "{path} differs from git's checkout"
        );
    }
    assert_eq!(std::fs::read(dir.join("a.txt")).unwrap(), b"a1\r\na2\r\n");
}
