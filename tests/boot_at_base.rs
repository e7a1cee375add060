//! What a boot does not do (issue 43, "where the time goes"): over plain `http://` it reads no
//! CA file; what it would write unchanged it leaves alone (same inode, same mtime); and the
//! stat data it trusts never hides a file rewritten after the bake within the index's second
//! (git's racy-clean rule).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::bake::Baked;
use crate::support::{GitServer, TOKEN, TestCa};

/// A file whose access time is set two days before its mtime: relatime updates it on the next
/// read (atime older than mtime), so a changed atime means someone read the file.
struct Watched(PathBuf);

impl Watched {
    fn new(path: PathBuf, pem: &str) -> Self {
        std::fs::write(&path, pem).unwrap();
        let w = Watched(path);
        w.arm();
        w
    }

    fn arm(&self) {
        let mtime = std::fs::metadata(&self.0).unwrap().modified().unwrap();
        let times = std::fs::FileTimes::new()
            .set_accessed(mtime - Duration::from_secs(2 * 86_400))
            .set_modified(mtime);
        std::fs::File::options()
            .write(true)
            .open(&self.0)
            .unwrap()
            .set_times(times)
            .unwrap();
    }

    fn read_since_armed(&self) -> bool {
        let m = std::fs::metadata(&self.0).unwrap();
        m.accessed().unwrap() >= m.modified().unwrap()
    }
}

/// A boot at the base over plain `http://` opens no CA file, not even those `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` name; over `https://` the bundle is read (the watch works), and the folder
/// only when the bundle lacks the issuer.
#[test]
fn a_plain_http_boot_reads_no_ca_file() {
    let b = Baked::new();
    let w = &b.w;
    let dir = b.baked_tree("t");
    let ca = TestCa::new();
    let certs = w.tmp.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let bundle = Watched::new(w.tmp.path().join("bundle.pem"), &ca.ca_pem);
    let single = Watched::new(certs.join("ca.pem"), &ca.ca_pem);
    let (file_var, dir_var) = (bundle.0.display().to_string(), certs.display().to_string());
    let tls_vars = [
        ("SSL_CERT_FILE", file_var.as_str()),
        ("SSL_CERT_DIR", dir_var.as_str()),
    ];
    let mut vars = vec![("TIP_SHA", b.base())];
    vars.extend(tls_vars);
    b.boot(&dir, &vars, &[]).assert_code(0);
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), b.base());
    assert!(
        !bundle.read_since_armed() && !single.read_since_armed(),
        "a plain http:// boot read the CA files"
    );

    // Over TLS the same files are what the server is checked against: read.
    let srv = GitServer::start_tls(&w.srv(), Some(TOKEN), &ca);
    let url = srv.url("repo.git", Some(&crate::support::userinfo()));
    let mut vars = vec![("READ_URL", url.as_str()), ("TIP_SHA", b.base())];
    vars.extend(tls_vars);
    w.run(&w.path("tls"), &["bake"], &vars).assert_code(0);
    assert!(
        bundle.read_since_armed(),
        "SSL_CERT_FILE was not read for https://"
    );
    // The bundle holds the server's issuer: the folder (the same certificates, one a file) is
    // not read as well.
    assert!(
        !single.read_since_armed(),
        "SSL_CERT_DIR read besides the bundle"
    );
}

/// (inode, mtime) of each file.
fn stamps(dir: &Path, files: &[&str]) -> Vec<(String, u64, i64, i64)> {
    files
        .iter()
        .map(|f| {
            let m = std::fs::metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            (f.to_string(), m.ino(), m.mtime(), m.mtime_nsec())
        })
        .collect()
}

/// What a boot would write as it is already is left alone: at the base, the index and
/// `shallow`; a boot at the base killed before its record and run again finds the config,
/// `HEAD`, the branch, the index, the hook and `shallow` as the first run wrote them, and
/// rewrites none of them.
#[test]
fn a_boot_that_changes_nothing_rewrites_nothing() {
    let b = Baked::new();
    let dir = b.baked_tree("t");
    let kept = [".git/index", ".git/shallow"];
    let before = stamps(&dir, &kept);
    // A second apart at least: a rewrite shows in the mtime even if the inode were reused.
    std::thread::sleep(Duration::from_millis(1100));
    b.boot(&dir, &[("TIP_SHA", b.base())], &[]).assert_code(0);
    assert_eq!(
        stamps(&dir, &kept),
        before,
        "rewritten by a boot at the base"
    );
    assert_eq!(
        b.w.git(&dir, &["status", "--porcelain"]),
        "?? node_modules/"
    );

    let dir = b.baked_tree("k");
    let at_base = ("TIP_SHA", b.base());
    let run = b.boot(
        &dir,
        &[at_base, ("GIT_SESSION_FAILPOINT", "before-record")],
        &[],
    );
    assert!(
        run.stderr.contains("failpoint 'before-record'"),
        "{}",
        run.stderr
    );
    let files = [
        ".git/config",
        ".git/HEAD",
        ".git/refs/heads/sessions/baked",
        ".git/index",
        ".git/hooks/pre-push",
        ".git/shallow",
    ];
    let before = stamps(&dir, &files);
    std::thread::sleep(Duration::from_millis(1100));
    b.boot(&dir, &[at_base], &[]).assert_code(0);
    assert_eq!(stamps(&dir, &files), before, "rewritten by the rerun");
    assert_eq!(b.w.git(&dir, &["rev-parse", "HEAD"]), b.base());
    assert_eq!(
        b.w.git(&dir, &["status", "--porcelain"]),
        "?? node_modules/"
    );
}

/// A tracked file rewritten after the bake within the second the index was written, at the same
/// size and with the same mtime (git's racily clean entry), is still seen as changed: the tip
/// changes it too, so the boot refuses (exit 7) and the edit is kept.
#[test]
fn a_racily_clean_edit_after_the_bake_is_still_seen() {
    let b = Baked::new();
    let dir = b.baked_tree("t");
    let edit = dir.join("edit.txt");
    let mtime = std::fs::metadata(&edit).unwrap().modified().unwrap();
    let mine = "one\nt_o\nthree\n";
    assert_eq!(mine.len(), "one\ntwo\nthree\n".len());
    std::fs::write(&edit, mine).unwrap();
    set_mtime(&edit, mtime);
    // The index written in that same second (as a fast bake writes it).
    set_mtime(&dir.join(".git/index"), mtime);
    let run = b.boot(&dir, &[], &[]);
    run.assert_code(7);
    assert!(run.stderr.contains("edit.txt"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&edit).unwrap(), mine);

    // Not racy (the index written a second later): the stat data is trusted, and a file the
    // bake left is judged without being read.
    let dir = b.baked_tree("u");
    let index_time = std::fs::metadata(dir.join(".git/index"))
        .unwrap()
        .modified()
        .unwrap();
    set_mtime(&dir.join(".git/index"), index_time + Duration::from_secs(2));
    b.boot(&dir, &[], &[]).assert_code(0);
    b.assert_booted(&dir);
}

/// A tracked file grown after the bake to 2 GiB (sparse: the folder's owner decides a file's
/// size) is a local change found without reading it whole: the tip changes it too, so the boot
/// refuses (exit 7) naming it, and the file is kept. Before, the probe read it whole to hash it
/// (an allocation of 2 GiB: the alloc-limit build's abort, exit 134).
#[test]
fn a_tracked_file_grown_huge_is_a_local_change_never_read_whole() {
    let b = Baked::new();
    let dir = b.baked_tree("t");
    let edit = dir.join("edit.txt");
    let file = std::fs::OpenOptions::new().write(true).open(&edit).unwrap();
    file.set_len(2 << 30).unwrap();
    drop(file);
    let run = b.boot(&dir, &[], &[]);
    run.assert_code(7);
    assert!(run.stderr.contains("edit.txt"), "{}", run.stderr);
    assert_eq!(std::fs::metadata(&edit).unwrap().len(), 2 << 30);
}

/// An index entry git never measured against its file (stat size 0 for a blob that is not
/// empty: `git read-tree`, `update-index --cacheinfo`) proves nothing, as git's "racily
/// smudged" rule says: a tracked file emptied after the bake, its mtime reset to the epoch (an
/// image exported with `SOURCE_DATE_EPOCH=0`), is a local change that `TIP_SHA` also changes
/// (exit 7, the file kept). It was judged unchanged by its stat data and overwritten.
#[test]
fn an_entry_git_never_measured_proves_nothing() {
    let b = Baked::new();
    let dir = b.baked_tree("t");
    // The base's tree again, every entry's stat data zero.
    b.w.git(&dir, &["read-tree", "HEAD"]);
    let edit = dir.join("edit.txt");
    std::fs::write(&edit, "").unwrap();
    set_mtime(&edit, SystemTime::UNIX_EPOCH);
    let run = b.boot(&dir, &[], &[]);
    run.assert_code(7);
    assert!(run.stderr.contains("edit.txt"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&edit).unwrap(), "");
}

/// A template whose `.git/HEAD` is gone (removed as the refusal of a FIFO in its place
/// suggests: "remove it if git can do without it") is a local fault named as one, exit 7, not an
/// internal error (exit 1, "does not appear to be a git repository"); so is a session tree's.
#[test]
fn a_git_dir_without_head_is_a_conflict_not_an_internal_error() {
    let b = Baked::new();
    let dir = b.baked_tree("t");
    std::fs::remove_file(dir.join(".git/HEAD")).unwrap();
    let run = b.boot(&dir, &[], &[]);
    run.assert_code(7);
    let msg = run.error_message();
    assert!(msg.contains(".git/HEAD"), "{msg}");
}

/// A template whose `.git/index` is gone (removed as the refusal of a FIFO in its place
/// suggests) still holds the base's files: each is compared by content with the base's and
/// `TIP_SHA`'s blobs, and those the bake left as they were are no local change (before: an empty
/// index made the probe compare with `TIP_SHA`'s blob only, so every file `TIP_SHA` changes was
/// "changed in the template since it was baked", exit 7). A file whose content is neither is
/// still a local change: a conflict where `TIP_SHA` changes it, left alone (untracked, as git
/// sees a file no index names) where `TIP_SHA` removes it. The cache seeding (an empty folder,
/// no index) relies on a missing file meaning "write it": so it does here too.
#[test]
fn a_template_without_its_index_boots_by_content() {
    let b = Baked::new();
    let dir = b.baked_tree("t");
    std::fs::remove_file(dir.join(".git/index")).unwrap();
    b.boot(&dir, &[], &[]).assert_code(0);
    // The entry of a file judged by its content has its file's stat data (size 0 would make git
    // read it again on every status), before any git command refreshes the index.
    let debug = b.w.git(&dir, &["ls-files", "--debug", "keep.txt"]);
    assert!(debug.contains("size: 5\t"), "{debug}");
    b.assert_booted(&dir);

    let dir = b.baked_tree("changed");
    std::fs::remove_file(dir.join(".git/index")).unwrap();
    std::fs::write(dir.join("edit.txt"), "mine\n").unwrap();
    let run = b.boot(&dir, &[], &[]);
    run.assert_code(7);
    assert!(
        run.error_message().contains("edit.txt"),
        "{}",
        run.error_message()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("edit.txt")).unwrap(),
        "mine\n"
    );

    std::fs::write(dir.join("edit.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(dir.join("gone.txt"), "mine\n").unwrap();
    std::fs::remove_file(dir.join("lib/f03.txt")).unwrap();
    b.boot(&dir, &[], &[]).assert_code(0);
    assert_eq!(
        std::fs::read_to_string(dir.join("gone.txt")).unwrap(),
        "mine\n"
    );
    assert!(!dir.join("sub/gone2.txt").exists());
    assert!(
        dir.join("lib/f03.txt").is_file(),
        "a missing file is written"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("edit.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
}

fn set_mtime(path: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_modified(t))
        .unwrap();
}

/// A local edit after the bake that makes a file hold `TIP_SHA`'s blob as it is, where
/// `TIP_SHA`'s `.gitattributes` convert it (`eol=crlf`): not "as `TIP_SHA` has it" (its checkout
/// writes CRLF), but a local change `TIP_SHA` also changes, as git's checkout refuses it (exit 7,
/// kept); `--force` writes `TIP_SHA`'s form, byte for byte git's. Before, the file's bytes hashed
/// to the tip's blob were taken as the tip's: exit 0, the file left with LF endings.
#[test]
fn a_local_edit_equal_to_the_tip_s_unconverted_blob_is_a_local_change() {
    let b = Baked::of(&[
        &[("seed.txt", Some("seed\n"))],
        &[("x.txt", Some("old\n")), ("keep.txt", Some("keep\n"))],
        &[("seed.txt", Some("seed 2\n"))],
        &[
            (".gitattributes", Some("*.txt eol=crlf\n")),
            ("x.txt", Some("new\n")),
        ],
    ]);
    let dir = b.w.path("t");
    b.bake(&dir).assert_code(0);
    std::fs::write(dir.join("x.txt"), "new\n").unwrap();
    let run = b.boot(&dir, &[], &[]);
    run.assert_code(7);
    assert!(
        run.error_message().contains("x.txt"),
        "{}",
        run.error_message()
    );
    assert_eq!(std::fs::read(dir.join("x.txt")).unwrap(), b"new\n");
    b.boot(&dir, &[], &["--force"]).assert_code(0);
    assert_eq!(std::fs::read(dir.join("x.txt")).unwrap(), b"new\r\n");
    assert_eq!(std::fs::read(dir.join("keep.txt")).unwrap(), b"keep\r\n");
    assert_eq!(b.w.git(&dir, &["status", "--porcelain"]), "");
}

/// A template without its index, booted to a commit whose `.gitattributes` now convert files the
/// commit does not change (`eol=crlf`): those are written again in their new form, as with an
/// index and as git's checkout writes them.
#[test]
fn a_template_without_its_index_takes_the_tip_s_new_conversions() {
    let b = Baked::of(&[
        &[("seed.txt", Some("seed\n"))],
        &[("x.txt", Some("a\nb\n")), ("y.txt", Some("y\n"))],
        &[("seed.txt", Some("seed 2\n"))],
        &[
            (".gitattributes", Some("*.txt eol=crlf\n")),
            ("y.txt", Some("y2\n")),
        ],
    ]);
    let dir = b.w.path("t");
    b.bake(&dir).assert_code(0);
    std::fs::remove_file(dir.join(".git/index")).unwrap();
    b.boot(&dir, &[], &[]).assert_code(0);
    assert_eq!(std::fs::read(dir.join("x.txt")).unwrap(), b"a\r\nb\r\n");
    assert_eq!(std::fs::read(dir.join("y.txt")).unwrap(), b"y2\r\n");
    assert_eq!(std::fs::read(dir.join("seed.txt")).unwrap(), b"seed 2\r\n");
    assert_eq!(b.w.git(&dir, &["status", "--porcelain"]), "");
}
