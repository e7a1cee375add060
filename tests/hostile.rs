//! A hostile server, a full disk and interrupted restores (SPEC rules 5, 6, 7 and "Network
//! behaviour"): every size the wire decides is bounded, a local refusal is exit 10 and not a
//! "corrupt pack", the server's words are redacted of the session's secrets, a dripping server is
//! given up on, and the rerun completes what a kill or a full disk cut short.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::served_repo;
use crate::support::wire::{
    band, delta_size, entry_header, fetch_response, ofs_distance, pack_of, pkt, raw_pack, zlib,
};
use crate::support::{
    Endpoint, GitServer, Measured, Run, Scripted, TOKEN, Tmpfs, World, measure, userinfo,
};

/// A server with `repo.git` and the ids of its commits.
struct Hostile {
    w: World,
    srv: GitServer,
    ids: Vec<String>,
}

impl Hostile {
    fn new(commits: &[&[(&str, Option<&str>)]]) -> Self {
        let (w, srv, ids) = served_repo(commits);
        Hostile { w, srv, ids }
    }

    fn url(&self) -> String {
        self.srv.url("repo.git", Some(&userinfo()))
    }

    fn bare(&self) -> PathBuf {
        self.w.srv().join("repo.git")
    }

    /// Answer as `s` says. A scripted advertisement comes with an empty answer to the posted
    /// ls-refs before it (as git's v0/v1 upload-pack answers a v2 command), so that the client
    /// asks for the advertisement.
    fn script(&self, s: Scripted) {
        let mut scripts = self.srv.knobs.scripted.lock().unwrap();
        if s.on == Endpoint::UploadPackAdvertisement {
            let mut refused = Scripted::once(Endpoint::LsRefs, Vec::new());
            refused.times = s.times;
            scripts.push(refused);
        }
        scripts.push(s);
    }

    /// Answer the next fetches (up to 10, for the retries) with `pack`.
    fn serve_pack(&self, pack: &[u8]) {
        let mut s = Scripted::once(Endpoint::Fetch, fetch_response(pack, &[]));
        s.times = 10;
        self.script(s);
    }

    fn restore(&self, dir: &Path, tip: &str, extra: &[(&str, &str)]) -> Run {
        let url = self.url();
        let mut vars = vec![
            ("READ_URL", url.as_str()),
            ("SESSION_BRANCH", "sessions/h"),
            ("TIP_SHA", tip),
        ];
        vars.extend_from_slice(extra);
        self.w.run(dir, &["restore", "--json"], &vars)
    }

    /// The ids of `commit`'s tree and of every blob in it, by path.
    fn tree_of(&self, commit: &str) -> (String, Vec<(String, String)>) {
        let bare = self.bare();
        let tree = self
            .w
            .git(&bare, &["rev-parse", &format!("{commit}^{{tree}}")]);
        let blobs = self
            .w
            .git(&bare, &["ls-tree", "-r", commit])
            .lines()
            .map(|l| {
                let (meta, path) = l.split_once('\t').unwrap();
                (path.to_owned(), meta.split(' ').nth(2).unwrap().to_owned())
            })
            .collect();
        (tree, blobs)
    }
}

/// [`measure`] with the world's environment.
fn run_measured(
    w: &World,
    dir: &Path,
    args: &[&str],
    vars: &[(&str, &str)],
    limit: Duration,
) -> Measured {
    measure(w.env(), dir, args, vars, limit)
}

/// A pack that lacks a blob the tree names is an incomplete commit from the server: exit 6
/// (integrity), not an internal error, and nothing is written.
#[test]
fn a_pack_missing_a_blob_is_exit_6_and_nothing_is_written() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n")), ("b/c.txt", Some("c\n"))]]);
    let tip = h.ids[0].clone();
    let (tree, blobs) = h.tree_of(&tip);
    let sub = h.w.git(&h.bare(), &["rev-parse", &format!("{tip}:b")]);
    let a = &blobs.iter().find(|(p, _)| p == "a.txt").unwrap().1;
    let pack = pack_of(&h.w, &h.bare(), &[&tip, &tree, &sub, a]);
    h.script(Scripted::once(Endpoint::Fetch, fetch_response(&pack, &[])));
    let dir = h.w.path("s");
    let run = h.restore(&dir, &tip, &[]);
    run.assert_code(6);
    let j = run.json();
    assert_eq!(j["error"]["kind"], "integrity");
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(msg.contains("b/c.txt"), "{msg}");
    assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none());
}

/// A disk that fills while the pack is written, and one that fills mid-checkout (with files the
/// checkout converts, `eol=crlf`): exit 10, kind `io`, naming the path and what to do — not a
/// corrupt pack (6) or an internal error (1); once space is freed the rerun completes the
/// restore exactly.
#[test]
fn a_full_disk_is_exit_10_and_the_rerun_completes() {
    let mut seed = 7u64;
    let noise = crate::support::incompressible(3 << 20, &mut seed);
    let noise = noise.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let zeros = "0".repeat(4 << 20);
    let bat = "echo one\necho two\n";
    let h = Hostile::new(&[&[
        ("noise.txt", Some(noise.as_str())),
        ("zeros1.txt", Some(zeros.as_str())),
        ("zeros2.txt", Some(zeros.as_str())),
        (".gitattributes", Some("*.bat eol=crlf\n")),
        ("a.bat", Some(bat)),
        ("b.bat", Some(bat)),
    ]]);
    let tip = h.ids[0].clone();
    let mnt = h.w.tmp.path().join("mnt");
    // The pack (about 3 MiB, the noise compresses to half) does not fit.
    let Some(fs) = Tmpfs::mount(&mnt, "1m") else {
        return;
    };
    let dir = mnt.join("tree");
    let run = h.restore(&dir, &tip, &[]);
    run.assert_code(10);
    let j = run.json();
    assert_eq!(j["error"]["kind"], "io");
    crate::support::assert_matches_schema(&j);
    let msg = j["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&mnt.display().to_string()) && msg.contains("free some space"),
        "{msg}"
    );
    assert!(!msg.contains("corrupt"), "{msg}");
    // The pack fits, the checkout (14 MiB) does not.
    fs.resize("6m");
    let run = h.restore(&dir, &tip, &[]);
    run.assert_code(10);
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("free some space")
    );
    fs.resize("64m");
    h.restore(&dir, &tip, &[]).assert_code(0);
    assert_eq!(h.w.git(&dir, &["rev-parse", "HEAD"]), tip);
    assert_eq!(h.w.git(&dir, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read(dir.join("a.bat")).unwrap(),
        b"echo one\r\necho two\r\n"
    );
    h.w.git(&dir, &["fsck", "--no-progress"]);
}

/// A restore killed mid-checkout, in a tree whose `.gitattributes` converts files (`eol=crlf`,
/// as git/git has): the rerun recognises the converted files it wrote and completes the restore
/// (it compared them with the raw blobs and refused with exit 7).
#[test]
fn a_killed_checkout_of_converted_files_is_completed_by_the_rerun() {
    let files: Vec<(String, String)> = (0..40)
        .map(|i| (format!("win/f{i:02}.bat"), format!("echo {i}\necho done\n")))
        .collect();
    let mut commit: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_str())))
        .collect();
    commit.push((".gitattributes", Some("*.bat eol=crlf\n")));
    let h = Hostile::new(&[&commit]);
    let tip = h.ids[0].clone();
    let dir = h.w.path("s");
    let run = h.restore(&dir, &tip, &[("GIT_SESSION_FAILPOINT", "mid-checkout")]);
    assert!(
        run.stderr.contains("failpoint 'mid-checkout'"),
        "{}",
        run.stderr
    );
    let written = files
        .iter()
        .filter(|(p, _)| std::fs::read(dir.join(p)).is_ok_and(|b| b.contains(&b'\r')))
        .count();
    assert!(
        written > 0,
        "the kill came before any converted file was written"
    );
    h.restore(&dir, &tip, &[]).assert_code(0);
    assert_eq!(h.w.git(&dir, &["status", "--porcelain"]), "");
    for (p, c) in &files {
        assert_eq!(
            String::from_utf8(std::fs::read(dir.join(p)).unwrap()).unwrap(),
            c.replace('\n', "\r\n")
        );
    }
}

/// A pack of a one-byte blob and a delta on it that makes one byte but claims `claim` bytes of
/// result; under 256 bytes whatever the claim.
fn delta_claiming(claim: u64) -> Vec<u8> {
    let base = b"x".to_vec();
    let mut first = entry_header(3, base.len() as u64);
    first.extend_from_slice(&zlib(&base));
    let mut delta = delta_size(1);
    delta.extend_from_slice(&delta_size(claim));
    delta.extend_from_slice(&[0x01, b'y']);
    let mut second = entry_header(6, delta.len() as u64);
    second.extend_from_slice(&ofs_distance(first.len() as u64));
    second.extend_from_slice(&zlib(&delta));
    let pack = raw_pack(&[first, second]);
    assert!(pack.len() < 256, "{}", pack.len());
    pack
}

/// A 200-byte pack whose delta claims a 6 GiB result: exit 6 before anything that size is
/// allocated, in bounded memory (it grew past 6 GiB before); `--max-object-bytes` names the
/// limit.
#[test]
fn a_delta_claiming_a_huge_result_is_exit_6_in_bounded_memory() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    h.serve_pack(&delta_claiming(6 << 30));
    let url = h.url();
    let m = run_measured(
        &h.w,
        &h.w.path("s"),
        &["restore", "--json"],
        &[
            ("READ_URL", &url),
            ("SESSION_BRANCH", "sessions/h"),
            ("TIP_SHA", &tip),
        ],
        Duration::from_secs(120),
    );
    m.assert_refused("a 6 GiB delta result", 6, "max-object-bytes", 64);
}

/// Endless answers where git sends a few KiB — a capability advertisement, an `ls-refs` answer,
/// a receive-pack ref advertisement that never end — are refused (exit 5) in bounded memory
/// (the first two grew past 1 GiB in seconds before).
#[test]
fn endless_answers_are_refused_in_bounded_memory() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    let url = h.url();
    let vars = [
        ("READ_URL", url.as_str()),
        ("PUSH_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/h"),
        ("TIP_SHA", tip.as_str()),
    ];
    let endless = |on: Endpoint, head: Vec<u8>, unit: &str| {
        let mut s = Scripted::once(on, head);
        s.repeat = pkt(unit).into_bytes();
        s.times = 10;
        s
    };
    let service = |name: &str| format!("{}0000", pkt(&format!("# service={name}\n")));
    let cases = [
        endless(
            Endpoint::UploadPackAdvertisement,
            format!("{}{}", service("git-upload-pack"), pkt("version 2\n")).into_bytes(),
            "agent=git/2.47.3-endless-endless-endless\n",
        ),
        endless(
            Endpoint::LsRefs,
            Vec::new(),
            &format!("{} refs/heads/sessions/h-other-other-other\n", h.ids[0]),
        ),
    ];
    for (i, case) in cases.into_iter().enumerate() {
        h.srv.knobs.scripted.lock().unwrap().clear();
        h.script(case);
        let m = run_measured(
            &h.w,
            &h.w.path(&format!("s{i}")),
            &["restore", "--json"],
            &vars,
            Duration::from_secs(120),
        );
        m.assert_refused(&format!("case {i}"), 5, "pkt-line section over", 64);
    }
    // A push's ref advertisement that never ends.
    h.srv.knobs.scripted.lock().unwrap().clear();
    let dir = h.w.path("p");
    h.restore(&dir, &tip, &[]).assert_code(0);
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    h.w.git(&dir, &["add", "-A"]);
    h.w.git(&dir, &["commit", "-qm", "b"]);
    let first = format!(
        "{}{}",
        service("git-receive-pack"),
        pkt(&format!(
            "{} refs/heads/main\0report-status side-band-64k\n",
            h.ids[0]
        ))
    );
    h.script(endless(
        Endpoint::ReceivePackAdvertisement,
        first.into_bytes(),
        &format!(
            "{} refs/heads/endless-endless-endless-endless-endless\n",
            h.ids[0]
        ),
    ));
    let m = run_measured(
        &h.w,
        &dir,
        &["push", "--json"],
        &vars,
        Duration::from_secs(300),
    );
    m.assert_refused(
        "an endless ref advertisement",
        5,
        "ref advertisement over",
        64,
    );
}

/// A server that echoes the request's credentials — in an `ERR` line, in side-band progress and
/// error messages, in a push report's `ng` reason and its hook output — never gets them shown:
/// the harness checks every output (and the logs at `-vv`) for every encoding of the token.
#[test]
fn secrets_echoed_by_the_server_are_redacted() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("t:{TOKEN}"));
    let pct = crate::support::pct(TOKEN);
    // Percent-encoded as no encoder writes it, too: a `k` and the `-` escaped, in lower case.
    let mixed = TOKEN.replace('k', "%6b").replace('-', "%2d");
    let echo = format!("you sent token {TOKEN}, header {basic}, url t:{pct}, mixed {mixed}");
    // An ERR line in place of the fetch response.
    h.script(Scripted::once(
        Endpoint::Fetch,
        pkt(&format!("ERR upload-pack: {echo}\n")).into_bytes(),
    ));
    let run = h.restore(&h.w.path("s1"), &tip, &[("RUST_LOG", "debug")]);
    run.assert_code(5);
    assert!(run.stdout.contains("<redacted>"), "{}", run.stdout);
    // Side-band progress with the secret, then a side-band error with it.
    let mut body = pkt("packfile\n").into_bytes();
    body.extend_from_slice(&band(2, echo.as_bytes()));
    body.extend_from_slice(&band(3, echo.as_bytes()));
    body.extend_from_slice(b"0000");
    h.script(Scripted::once(Endpoint::Fetch, body));
    let run = h.restore(&h.w.path("s2"), &tip, &[("RUST_LOG", "debug")]);
    run.assert_code(5);
    assert!(run.stdout.contains("<redacted>"), "{}", run.stdout);
    // A push report whose ng reason and hook output echo the secret.
    let dir = h.w.path("p");
    h.restore(&dir, &tip, &[]).assert_code(0);
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    h.w.git(&dir, &["add", "-A"]);
    h.w.git(&dir, &["commit", "-qm", "b"]);
    let report = format!(
        "{}{}0000",
        pkt("unpack ok\n"),
        pkt(&format!("ng refs/heads/sessions/h hook declined: {echo}\n"))
    );
    let mut reply = band(2, format!("{echo}\n").as_bytes());
    reply.extend_from_slice(&band(1, report.as_bytes()));
    reply.extend_from_slice(b"0000");
    h.script(Scripted::once(Endpoint::ReceivePack, reply));
    let url = h.url();
    let run = h.w.run(
        &dir,
        &["-vv", "push", "--json"],
        &[("PUSH_URL", &url), ("RUST_LOG", "debug")],
    );
    run.assert_code(9);
    assert!(run.stdout.contains("<redacted>"), "{}", run.stdout);
}

/// A server that drips its answer (a byte at a time, each within the read timeout) is given up
/// on by the low-speed rule (exit 5, naming it), where before it was waited on forever; what does
/// not count: the keep-alives upload-pack sends while it prepares a pack (the rule measures the
/// pack's bytes from the first), and the wait for a push's report while the server applies it.
#[test]
fn a_dripping_server_is_given_up_on_but_a_slow_hook_is_waited_for() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    let mut drip = Scripted::once(
        Endpoint::UploadPackAdvertisement,
        format!(
            "{}0000{}",
            pkt("# service=git-upload-pack\n"),
            pkt("version 2\n")
        )
        .into_bytes(),
    );
    drip.repeat = pkt("agent=git/2.47.3\n").into_bytes();
    drip.drip_ms = 50;
    drip.times = 100;
    h.script(drip);
    let url = h.url();
    let knobs = [
        ("GIT_SESSION_READ_TIMEOUT_MS", "1000"),
        ("GIT_SESSION_LOW_SPEED_TIME_MS", "1500"),
        ("GIT_SESSION_LOW_SPEED_LIMIT", "1024"),
    ];
    let mut vars = vec![
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/h"),
        ("TIP_SHA", tip.as_str()),
    ];
    vars.extend_from_slice(&knobs);
    let m = run_measured(
        &h.w,
        &h.w.path("s"),
        &["restore", "--json"],
        &vars,
        Duration::from_secs(60),
    );
    assert_eq!(
        m.code,
        Some(5),
        "not given up on after {:?}: {}",
        m.wall,
        m.stderr
    );
    assert!(m.stderr.contains("bytes/s"), "{}", m.stderr);
    assert!(m.wall < Duration::from_secs(40), "{:?}", m.wall);

    // A fetch whose server sends only keep-alives for 3 s before the pack (upload-pack counting
    // and compressing): not a slow transfer, the pack's bytes are measured from the first.
    h.srv.knobs.scripted.lock().unwrap().clear();
    let (tree, blobs) = h.tree_of(&tip);
    let ids: Vec<&str> = std::iter::once(tip.as_str())
        .chain(std::iter::once(tree.as_str()))
        .chain(blobs.iter().map(|(_, id)| id.as_str()))
        .collect();
    let pack = pack_of(&h.w, &h.bare(), &ids);
    let keepalives: Vec<u8> = std::iter::repeat_n(b"0005\x01".as_slice(), 30)
        .flatten()
        .copied()
        .collect();
    let mut body = pkt("packfile\n").into_bytes();
    body.extend_from_slice(&keepalives);
    let rest = fetch_response(&pack, &[]);
    body.extend_from_slice(&rest[pkt("packfile\n").len()..]);
    let mut slow_start = Scripted::once(Endpoint::Fetch, body);
    slow_start.drip_ms = 100;
    slow_start.drip_bytes = 5;
    slow_start.drip_first = 13 + keepalives.len();
    h.script(slow_start);
    let mut vars = vec![
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/h"),
        ("TIP_SHA", tip.as_str()),
    ];
    vars.extend_from_slice(&knobs);
    let run =
        h.w.run(&h.w.path("slow-start"), &["restore", "--json"], &vars);
    run.assert_code(0);

    // A push whose server takes 3 s in its hook before the report: not a slow transfer.
    h.srv.knobs.scripted.lock().unwrap().clear();
    let dir = h.w.path("p");
    h.restore(&dir, &tip, &[]).assert_code(0);
    let hook = h.bare().join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\ncat >/dev/null\nsleep 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    h.w.git(&dir, &["add", "-A"]);
    h.w.git(&dir, &["commit", "-qm", "b"]);
    let mut vars = vec![("PUSH_URL", url.as_str())];
    vars.extend_from_slice(&knobs);
    vars.retain(|(k, _)| *k != "GIT_SESSION_READ_TIMEOUT_MS");
    let run = h.w.run(&dir, &["push", "--json"], &vars);
    run.assert_code(0);
    assert_eq!(run.json()["pushed"], true);
}

/// A 1 GiB blob of zeros (a 1 MiB pack) restores correctly in bounded memory: hashed as it
/// streams in and written by streaming from the pack, never held whole (it peaked at 1034 MiB).
#[test]
fn a_1_gib_blob_restores_in_bounded_memory() {
    let w = World::new();
    let scratch = w.scratch("big-seed");
    let big = std::fs::File::create(scratch.join("zeros.bin")).unwrap();
    big.set_len(1 << 30).unwrap();
    std::fs::write(scratch.join("small.txt"), "small\n").unwrap();
    let tip = w.commit_all(&scratch, "a big one");
    w.serve_scratch(&scratch, "repo.git");
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let dir = w.path("s");
    let m = run_measured(
        &w,
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL", &url),
            ("SESSION_BRANCH", "s/big"),
            ("TIP_SHA", &tip),
        ],
        Duration::from_secs(600),
    );
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert!(
        m.peak_mib < 64,
        "peak RSS {} MiB for a 1 GiB blob",
        m.peak_mib
    );
    assert_eq!(
        std::fs::metadata(dir.join("zeros.bin")).unwrap().len(),
        1 << 30
    );
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
    assert_eq!(
        w.git(&dir, &["rev-parse", "HEAD:zeros.bin"]),
        w.git(&dir, &["hash-object", "zeros.bin"])
    );
}

/// With the big-object threshold lowered (a test knob), an incompressible blob over it is never
/// buffered — not its compressed bytes while it streams in (gix-pack's reader kept them all), not
/// its content at the checkout — and a kill halfway through writing it is completed by the rerun
/// even when the file was written long after the others (outside the resume's time window); a
/// delta against such an object is refused (exit 6).
#[test]
fn big_objects_stream_and_a_killed_big_write_is_resumed() {
    let mut seed = 11u64;
    let noise = crate::support::incompressible(48 << 20, &mut seed);
    let w = World::new();
    let scratch = w.scratch("noise-seed");
    std::fs::write(scratch.join("noise.bin"), &noise).unwrap();
    std::fs::write(scratch.join("a.txt"), "a\n").unwrap();
    let tip = w.commit_all(&scratch, "noise");
    // Two near-copies of a 1.2 MB text: the server deltifies one against the other.
    let text: String = (0..50_000)
        .map(|i| format!("line {i:05} of the text\n"))
        .collect();
    std::fs::write(scratch.join("t1.txt"), &text).unwrap();
    std::fs::write(
        scratch.join("t2.txt"),
        text.replace("line 00007", "LINE 00007"),
    )
    .unwrap();
    let texts = w.commit_all(&scratch, "texts");
    w.serve_scratch(&scratch, "repo.git");
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let knob = ("GIT_SESSION_BIG_OBJECT_BYTES", "4194304");
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "s/noise"),
        ("TIP_SHA", tip.as_str()),
        knob,
    ];
    let m = run_measured(
        &w,
        &w.path("s"),
        &["restore", "--json"],
        &vars,
        Duration::from_secs(300),
    );
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert!(
        m.peak_mib < 40,
        "peak RSS {} MiB for a 48 MiB blob",
        m.peak_mib
    );
    assert_eq!(std::fs::read(w.path("s/noise.bin")).unwrap(), noise);
    w.git(&w.path("s"), &["fsck", "--no-progress"]);

    // Killed halfway through writing the big file; its mtime then far after the others'.
    let dir = w.path("k");
    let mut kill = vars.to_vec();
    kill.push(("GIT_SESSION_FAILPOINT", "mid-big-file"));
    let run = w.run(&dir, &["restore", "--json"], &kill);
    assert!(
        run.stderr.contains("failpoint 'mid-big-file'"),
        "{}",
        run.stderr
    );
    let cut = std::fs::metadata(dir.join("noise.bin")).unwrap().len();
    assert!(cut > 0 && cut < noise.len() as u64, "{cut}");
    let later = std::time::SystemTime::now() + Duration::from_secs(30);
    std::fs::File::options()
        .write(true)
        .open(dir.join("noise.bin"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    let run = w.run(&dir, &["restore", "--json"], &vars);
    run.assert_code(0);
    assert_eq!(std::fs::read(dir.join("noise.bin")).unwrap(), noise);
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");

    // A delta against an object over the threshold (1 MiB here, the least it may be): refused,
    // nothing written.
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "s/texts"),
        ("TIP_SHA", texts.as_str()),
        ("GIT_SESSION_BIG_OBJECT_BYTES", "1048576"),
    ];
    let run = w.run(&w.path("d"), &["restore", "--json"], &vars);
    run.assert_code(6);
    assert!(run.stdout.contains("delta"), "{}", run.stdout);
}

/// A pack that does not start within the time a pack may take to start is a network failure —
/// exit 5, retried, the staging folder gone — not a corrupt pack (it was exit 6). The server
/// holds a valid pack for 6 s behind its `packfile` line; the wait is 1 s (the shortest wait
/// is 100 ms: `0`, which this test used, failed every restore and is now refused).
#[test]
fn a_pack_that_never_starts_is_a_network_failure() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    let (tree, blobs) = h.tree_of(&tip);
    let mut ids = vec![tip.as_str(), tree.as_str()];
    ids.extend(blobs.iter().map(|(_, id)| id.as_str()));
    let response = fetch_response(&pack_of(&h.w, &h.bare(), &ids), &[]);
    let mut held = Scripted::once(Endpoint::Fetch, response.clone());
    held.hold_last = response.len() - pkt("packfile\n").len();
    held.hold_ms = 6_000;
    held.times = 10;
    h.script(held);
    let dir = h.w.path("s");
    h.srv.clear_log();
    let run = h.restore(
        &dir,
        &tip,
        &[
            ("GIT_SESSION_FIRST_BYTE_WAIT_MS", "1000"),
            ("GIT_SESSION_RETRY_BASE_MS", "100"),
        ],
    );
    run.assert_code(5);
    assert_eq!(run.json()["error"]["kind"], "network", "{}", run.stderr);
    let fetches = h
        .srv
        .log()
        .iter()
        .filter(|e| String::from_utf8_lossy(&e.body).contains("command=fetch"))
        .count();
    assert!(fetches > 1, "retried: {fetches} fetch requests");
    assert!(!dir.join(".git").exists());
}

/// [`raw_pack`]'s trailer recomputed after `pack`'s header was changed.
fn rehash(pack: &mut Vec<u8>) {
    pack.truncate(pack.len() - 20);
    let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
    h.update(pack);
    pack.extend_from_slice(h.try_finalize().unwrap().as_slice());
}

/// The restore of `tip` from `h`, measured, into `dir` (created empty first); then `dir` must
/// still be empty: no file written early, no staging folder.
fn refused_leaving_nothing(h: &Hostile, dir: &Path, tip: &str) -> Measured {
    refused_leaving_nothing_with(h, dir, tip, &[])
}

/// [`refused_leaving_nothing`] with more `args` (`--force`: no early checkout, so gix-pack
/// indexes the pack).
fn refused_leaving_nothing_with(h: &Hostile, dir: &Path, tip: &str, args: &[&str]) -> Measured {
    std::fs::create_dir_all(dir).unwrap();
    let url = h.url();
    let m = run_measured(
        &h.w,
        dir,
        &[&["restore", "--json"], args].concat(),
        &[
            ("READ_URL", &url),
            ("SESSION_BRANCH", "sessions/h"),
            ("TIP_SHA", tip),
        ],
        Duration::from_secs(300),
    );
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}\n{}", m.stderr);
    m
}

/// A pack whose header claims 2^24, 2^31 or 2^32 - 1 objects (it holds three): exit 6 once its
/// entries run out, in bounded memory, nothing written — reserving by the claim aborted the
/// process ("memory allocation of 68719476720 bytes failed", exit 134), or, with `--force` (no
/// early checkout: gix-pack indexes), reserved 2^23 delta-tree items (the test allocator refuses).
#[test]
fn a_pack_claiming_billions_of_objects_is_exit_6_in_bounded_memory() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    let (tree, blobs) = h.tree_of(&tip);
    let pack = pack_of(&h.w, &h.bare(), &[&tip, &tree, &blobs[0].1]);
    for (claim, args) in [1u32 << 24, 1 << 31, u32::MAX]
        .into_iter()
        .flat_map(|c| [(c, &[][..]), (c, &["--force"][..])])
    {
        let mut claimed = pack.clone();
        claimed[8..12].copy_from_slice(&claim.to_be_bytes());
        rehash(&mut claimed);
        h.srv.knobs.scripted.lock().unwrap().clear();
        h.serve_pack(&claimed);
        let dir = h.w.path(&format!("s-{claim}-{}", args.len()));
        let m = refused_leaving_nothing_with(&h, &dir, &tip, args);
        m.assert_refused(
            &format!("{claim} objects claimed"),
            6,
            &format!("(entry 4 of the {claim} the pack's header claims)"),
            64,
        );
    }
}

/// A 200-byte pack whose delta claims a 500 MiB result — under the 512 MiB big-object threshold,
/// so gix-pack reserved and zeroed it (500 MiB resident) — while its instructions make one byte:
/// exit 6 before anything that size exists.
#[test]
fn a_delta_claiming_more_than_it_makes_is_exit_6_in_bounded_memory() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    h.serve_pack(&delta_claiming(500 << 20));
    let m = refused_leaving_nothing(&h, &h.w.path("s"), &tip);
    m.assert_refused(
        "a delta claiming 500 MiB",
        6,
        "its instructions make 1 bytes, but it claims 524288000",
        64,
    );
}

/// A tree bomb: 16 folders holding the same 16 folders, 8 levels down to 16 files, 16^8 (4
/// billion) files from a pack of a few KiB. Refused (exit 6, naming `--max-entries`) under 64 MiB
/// of peak RSS, nothing written: the early checkout grew to 1 GiB naming its paths, and the index
/// would have held them all.
#[test]
fn a_tree_bomb_is_refused_in_bounded_memory() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let bare = h.bare();
    let blob =
        h.w.git_stdin(&bare, &["hash-object", "-w", "--stdin"], b"boom\n");
    let sixteen_of = |mode: &str, id: &str| {
        let names: Vec<String> = (0..16).map(|i| format!("d{i:02}")).collect();
        let entries: Vec<(&str, &[u8], &str)> =
            names.iter().map(|n| (mode, n.as_bytes(), id)).collect();
        h.w.literal_tree(&bare, &entries)
    };
    let mut tree = sixteen_of("100644", &blob);
    for _ in 0..7 {
        tree = sixteen_of("40000", &tree);
    }
    let tip = h.w.git(&bare, &["commit-tree", &tree, "-m", "bomb"]);
    h.w.git(&bare, &["update-ref", "refs/heads/bomb", &tip]);
    let m = refused_leaving_nothing(&h, &h.w.path("s"), &tip);
    m.assert_refused("a tree bomb", 6, "--max-entries", 64);
}

/// Trees with two entries of one name — file and file, file and folder, folder and symlink —
/// are refused (exit 6) with nothing written: the hundreds of files the early checkout wrote
/// while the pack streamed in are removed, and the staging folder too (both were left behind).
#[test]
fn two_entries_of_one_name_are_refused_and_nothing_is_written() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let bare = h.bare();
    let hash = |content: &[u8]| {
        h.w.git_stdin(&bare, &["hash-object", "-w", "--stdin"], content)
    };
    let (one, two, target) = (hash(b"one\n"), hash(b"two\n"), hash(b"elsewhere"));
    let files: Vec<(String, String)> = (0..320)
        .map(|i| {
            (
                format!("f{i:03}.txt"),
                hash(format!("file {i}\n").as_bytes()),
            )
        })
        .collect();
    let many = {
        let e: Vec<(&str, &[u8], &str)> = files
            .iter()
            .map(|(n, id)| ("100644", n.as_bytes(), id.as_str()))
            .collect();
        h.w.literal_tree(&bare, &e)
    };
    let folder = ("40000", &b"many"[..], many.as_str());
    type Entries<'a> = Vec<(&'a str, &'a [u8], &'a str)>;
    let cases: Vec<(&str, Entries)> = vec![
        (
            "file/file",
            vec![("100644", b"a", &one), ("100644", b"a", &two), folder],
        ),
        (
            "file/folder",
            vec![("100644", b"a", &one), ("40000", b"a", &many), folder],
        ),
        (
            "folder/symlink",
            vec![("40000", b"a", &many), ("120000", b"a", &target), folder],
        ),
    ];
    for (name, entries) in cases {
        let tip = h.w.literal_commit(
            "repo.git",
            &format!("dup/{}", name.replace('/', "-")),
            &entries,
        );
        let dir = h.w.path(&format!("s-{}", name.replace('/', "-")));
        let m = refused_leaving_nothing(&h, &dir, &tip);
        m.assert_refused(name, 6, "two entries named 'a'", 64);
    }
}

/// A file of the git dir that git reads whole, pointed at `/dev/zero` (or made a FIFO): every
/// command read it without end (24 GB of memory by `status`) or blocked. Refused at once with
/// exit 7 naming it; put back, the tree works again.
#[test]
fn a_git_dir_file_pointed_at_a_device_is_refused_not_read_forever() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let dir = h.w.path("s");
    h.restore(&dir, &h.ids[0], &[]).assert_code(0);
    std::fs::create_dir_all(dir.join(".git/objects/info")).unwrap();
    std::fs::create_dir_all(dir.join(".git/info")).unwrap();
    for name in [
        "shallow",
        "packed-refs",
        "HEAD",
        "config",
        "config.worktree",
        "index",
        "objects/info/alternates",
        "info/exclude",
        "info/attributes",
        "hooks/pre-push",
        "refs/heads/sessions/h",
        "refs/remotes/origin/sessions/h",
    ] {
        let path = dir.join(".git").join(name);
        let kept = dir.join(".git/kept");
        let had = std::fs::rename(&path, &kept).is_ok();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let run = run_measured(
            &h.w,
            &dir,
            &["status", "--json"],
            &[],
            Duration::from_secs(30),
        );
        assert_eq!(
            run.code,
            Some(7),
            "{name}: after {:?}: {}",
            run.wall,
            run.stderr
        );
        assert!(
            run.stderr.contains(name) && run.stderr.contains("not a regular file"),
            "{}",
            run.stderr
        );
        assert!(run.peak_mib < 64, "{name}: {} MiB", run.peak_mib);
        std::fs::remove_file(&path).unwrap();
        if had {
            std::fs::rename(&kept, &path).unwrap();
        }
        h.w.run(&dir, &["status"], &[]).assert_code(0);
    }
}

/// Every wait before the pack is bounded by the clock, whatever the server sends meanwhile
/// (issue 38): a server that accepts and never answers, one that sends headers and then nothing,
/// one that sends keep-alives or progress forever before the pack. The read timeout is longer
/// than the budget for all attempts, so only the budget, the section's and the first byte's
/// bounds can end these in time (before, the first never-answering server took 4 read
/// timeouts; the keep-alives never ended).
#[test]
fn every_wait_before_the_pack_is_bounded_by_the_clock() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    let url = h.url();
    let knobs = [
        ("GIT_SESSION_READ_TIMEOUT_MS", "8000"),
        ("GIT_SESSION_SECTION_WAIT_MS", "1500"),
        ("GIT_SESSION_FIRST_BYTE_WAIT_MS", "1500"),
        ("GIT_SESSION_RETRY_TOTAL_MS", "3000"),
        ("GIT_SESSION_RETRY_BASE_MS", "100"),
    ];
    let run = |name: &str| {
        let mut vars = vec![
            ("READ_URL", url.as_str()),
            ("SESSION_BRANCH", "sessions/h"),
            ("TIP_SHA", tip.as_str()),
        ];
        vars.extend_from_slice(&knobs);
        let dir = h.w.path(name);
        let m = run_measured(
            &h.w,
            &dir,
            &["restore", "--json"],
            &vars,
            Duration::from_secs(60),
        );
        h.srv.knobs.scripted.lock().unwrap().clear();
        // Bound: the 3 s budget, one more wait that began inside it, process start; the machine
        // may be slow: still far below the 4 x 8 s read timeouts of before.
        assert_eq!(m.code, Some(5), "{name}: after {:?}: {}", m.wall, m.stderr);
        assert!(m.wall < Duration::from_secs(15), "{name}: {:?}", m.wall);
        assert!(!dir.join(".git").exists(), "{name}: half written");
        m
    };
    let forever = |on: Endpoint, head: Vec<u8>, repeat: Vec<u8>| {
        let mut s = Scripted::once(on, head);
        s.repeat = repeat;
        s.drip_ms = 200;
        s.drip_bytes = 64;
        s.times = 10;
        s
    };

    h.srv
        .knobs
        .stall_next
        .store(10, std::sync::atomic::Ordering::SeqCst);
    let m = run("never-answers");
    h.srv
        .knobs
        .stall_next
        .store(0, std::sync::atomic::Ordering::SeqCst);
    assert!(m.stderr.contains("no response head"), "{}", m.stderr);
    assert!(!m.stderr.contains("could not connect"), "{}", m.stderr);

    // Headers, then one byte every 10 minutes.
    let mut silent = forever(Endpoint::UploadPackAdvertisement, Vec::new(), b"0".to_vec());
    silent.drip_ms = 600_000;
    h.script(silent);
    let m = run("headers-then-nothing");
    assert!(m.stderr.contains("headers"), "{}", m.stderr);

    for (name, packet) in [
        ("keep-alives", b"0005\x01".to_vec()),
        ("progress", band(2, b"Counting objects\n")),
    ] {
        let head = pkt("packfile\n").into_bytes();
        h.script(forever(Endpoint::Fetch, head, packet));
        let m = run(name);
        assert!(
            m.stderr.contains("GIT_SESSION_FIRST_BYTE_WAIT_MS")
                || m.stderr.contains("GIT_SESSION_RETRY_TOTAL_MS"),
            "{name}: {}",
            m.stderr
        );
    }

    // A section before the pack that never ends: acknowledgments, then keep-alives.
    let mut head = pkt("acknowledgments\n").into_bytes();
    head.extend_from_slice(pkt("NAK\n").as_bytes());
    h.script(forever(Endpoint::Fetch, head, band(2, b"x\n")));
    let m = run("endless-section");
    assert!(
        m.stderr.contains("acknowledgments") || m.stderr.contains("GIT_SESSION_RETRY_TOTAL_MS"),
        "{}",
        m.stderr
    );
}

/// A lock another process holds is waited for at most `GIT_SESSION_LOCK_WAIT_S`, then exit 7
/// naming it (before, a second restore of a folder waited for the first however long it took).
#[test]
fn a_held_lock_is_waited_for_within_the_lock_wait() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    let dir = h.w.path("locked");
    std::fs::create_dir_all(&dir).unwrap();
    let holder = std::fs::File::open(&dir).unwrap();
    holder.lock().unwrap();
    let url = h.url();
    let m = run_measured(
        &h.w,
        &dir,
        &["restore", "--json"],
        &[
            ("READ_URL", url.as_str()),
            ("SESSION_BRANCH", "sessions/h"),
            ("TIP_SHA", tip.as_str()),
            ("GIT_SESSION_LOCK_WAIT_S", "1"),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(m.code, Some(7), "after {:?}: {}", m.wall, m.stderr);
    assert!(m.wall < Duration::from_secs(20), "{:?}", m.wall);
    assert!(m.stderr.contains("GIT_SESSION_LOCK_WAIT_S"), "{}", m.stderr);
    drop(holder);
    h.restore(&dir, &tip, &[]).assert_code(0);
}

/// A FIFO put in place of a file the killed restore wrote (by whoever owns the folder) is not
/// waited on by the rerun: it is not the restore's file, so the rerun refuses (exit 7, naming
/// it) within the bounds. Before, the rerun read it to compare and waited for a writer forever.
#[test]
fn a_fifo_in_place_of_a_written_file_does_not_hold_the_rerun() {
    let files: Vec<(String, String)> = (0..40)
        .map(|i| (format!("d/f{i:02}.txt"), format!("file {i}\n")))
        .collect();
    let commit: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_str())))
        .collect();
    let h = Hostile::new(&[&commit]);
    let tip = h.ids[0].clone();
    let dir = h.w.path("s");
    let run = h.restore(&dir, &tip, &[("GIT_SESSION_FAILPOINT", "mid-checkout")]);
    assert!(
        run.stderr.contains("failpoint 'mid-checkout'"),
        "{}",
        run.stderr
    );
    let (written, _) = files
        .iter()
        .find(|(p, _)| dir.join(p).is_file())
        .expect("the kill came before any file was written");
    std::fs::remove_file(dir.join(written)).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(dir.join(written))
        .status()
        .unwrap();
    assert!(status.success());
    let url = h.url();
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/h"),
        ("TIP_SHA", tip.as_str()),
    ];
    let run =
        h.w.run_limited(&dir, &["restore", "--json"], &vars, Duration::from_secs(60))
            .expect("the rerun waited on the FIFO");
    run.assert_code(7);
    assert!(run.stdout.contains(written.as_str()), "{}", run.stdout);
}

/// Shallow lines that name a commit not asked for (the tip's parent, which the server has) or
/// one that exists nowhere are refused alike over v2 (`shallow-info`) and v0 (`shallow` lines):
/// exit 6, nothing written. Before, the v0 answer was taken (exit 0) with the server's id in
/// `.git/shallow`, and `git fsck` found a broken link. The same answer with the right id boots.
#[test]
fn shallow_lines_naming_another_commit_are_refused_over_v2_and_v0() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))], &[("a.txt", Some("b\n"))]]);
    let (parent, tip) = (h.ids[0].clone(), h.ids[1].clone());
    let (tree, blobs) = h.tree_of(&tip);
    let pack = pack_of(&h.w, &h.bare(), &[&tip, &tree, &blobs[0].1]);
    let v2 = |id: &str| {
        let mut body = pkt("shallow-info\n").into_bytes();
        body.extend(pkt(&format!("shallow {id}\n")).into_bytes());
        body.extend(b"0001");
        body.extend(fetch_response(&pack, &[]));
        Scripted::once(Endpoint::Fetch, body)
    };
    let v0 = |id: &str| {
        let mut body = pkt(&format!("shallow {id}\n")).into_bytes();
        body.extend(b"0000");
        body.extend(pkt("NAK\n").into_bytes());
        for chunk in pack.chunks(65515) {
            body.extend(band(1, chunk));
        }
        body.extend(b"0000");
        Scripted::once(Endpoint::FetchV0, body)
    };
    let nowhere = &"1234567890123456789012345678901234567890123456789012345678901234"
        [..crate::support::hex_len()];
    for (protocol, answer) in [("2", &v2 as &dyn Fn(&str) -> Scripted), ("0", &v0)] {
        for (what, id) in [("not asked for", parent.as_str()), ("nowhere", nowhere)] {
            let case = format!("v{protocol}, {what}");
            h.srv.knobs.scripted.lock().unwrap().clear();
            h.script(answer(id));
            let dir = h.w.path(&format!("s-{protocol}-{}", &id[..4]));
            let run = h.restore(&dir, &tip, &[("GIT_SESSION_PROTOCOL", protocol)]);
            run.assert_case_says(&case, 6, &["shallow", id]);
            assert!(
                !dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none(),
                "{case}: something was written"
            );
        }
        // The same answer naming the tip: restored, and git finds nothing wrong.
        h.srv.knobs.scripted.lock().unwrap().clear();
        h.script(answer(&tip));
        let dir = h.w.path(&format!("s-{protocol}-ok"));
        let run = h.restore(&dir, &tip, &[("GIT_SESSION_PROTOCOL", protocol)]);
        run.assert_code(0);
        assert_eq!(
            h.srv.knobs.scripted.lock().unwrap()[0].times,
            0,
            "answered by the script"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(".git/shallow")).unwrap(),
            format!("{tip}\n")
        );
        h.w.git(&dir, &["fsck", "--no-progress"]);
    }
}

/// A `REF_DELTA` whose base comes later in the pack (Dulwich sends ref-deltas; git's `index-pack`
/// takes them wherever the base lies): restored, the files as git has them. Before, the delta
/// was indexed but reading it failed, exit 6 ("a delta chain could not be followed as the ref
/// base … could not be found").
#[test]
fn a_ref_delta_whose_base_comes_later_in_the_pack_is_restored() {
    let h = Hostile::new(&[&[
        ("base.txt", Some("the base, which comes last\n")),
        ("derived.txt", Some("derived from the base\n")),
    ]]);
    let tip = h.ids[0].clone();
    let (tree, blobs) = h.tree_of(&tip);
    let blob = |path: &str| blobs.iter().find(|(p, _)| p == path).unwrap().1.clone();
    let raw = |ty: &str, id: &str| h.w.git_output(&h.bare(), &["cat-file", ty, id]).stdout;
    let whole = |kind: u8, ty: &str, id: &str| {
        let data = raw(ty, id);
        let mut entry = entry_header(kind, data.len() as u64);
        entry.extend(zlib(&data));
        entry
    };
    let (base, derived) = (
        raw("blob", &blob("base.txt")),
        raw("blob", &blob("derived.txt")),
    );
    let mut delta = delta_size(base.len() as u64);
    delta.extend(delta_size(derived.len() as u64));
    delta.push(derived.len() as u8);
    delta.extend_from_slice(&derived);
    let mut ref_delta = entry_header(7, delta.len() as u64);
    let base_id = gix::ObjectId::from_hex(blob("base.txt").as_bytes()).unwrap();
    ref_delta.extend(base_id.as_slice());
    ref_delta.extend(zlib(&delta));
    let pack = raw_pack(&[
        whole(1, "commit", &tip),
        whole(2, "tree", &tree),
        ref_delta,
        whole(3, "blob", &blob("base.txt")),
    ]);
    h.serve_pack(&pack);
    let dir = h.w.path("s");
    h.restore(&dir, &tip, &[]).assert_code(0);
    assert_eq!(std::fs::read(dir.join("derived.txt")).unwrap(), derived);
    assert_eq!(std::fs::read(dir.join("base.txt")).unwrap(), base);
    h.w.git(&dir, &["fsck", "--no-progress"]);
    assert_eq!(h.w.git(&dir, &["status", "--porcelain"]), "");
}

/// A `.gitattributes` pattern with more runs of `*` than `glob::MAX_STAR_RUNS`: gix's wildmatch
/// takes time exponential in the runs (3.6 ms at 15 against a path twenty deep, doubling with each
/// more; the fuzzer found 18 s at nine), so a hostile server's pattern could hold a restore for
/// days: the tree is refused (exit 6) before any matching (it was checked out, exit 0). The
/// same count in `GIT_SESSION_LFS_INCLUDE` is exit 2 before any request.
#[test]
fn a_gitattributes_pattern_costing_exponential_time_is_refused_at_once() {
    let stars = "**/".repeat(9);
    let attributes = format!("h/{stars}**.t filter=lfs diff=lfs merge=lfs -text\n");
    let h = Hostile::new(&[&[
        (".gitattributes", Some(attributes.as_str())),
        ("h/a/x.u", Some("not a pointer\n")),
        ("README.md", Some("r\n")),
    ]]);
    let dir = h.w.path("stars");
    let url = h.url();
    let vars = [
        ("READ_URL", url.as_str()),
        ("SESSION_BRANCH", "sessions/h"),
        ("TIP_SHA", h.ids[0].as_str()),
    ];
    let run = h.w.run(&dir, &["restore", "--json"], &vars);
    run.assert_says(6, &[".gitattributes", "runs of '*'"]);
    let include = format!("{}x", "*/".repeat(9));
    let mut vars = vars.to_vec();
    vars.push(("GIT_SESSION_LFS_INCLUDE", include.as_str()));
    h.srv.clear_log();
    let run = h.w.run(&h.w.path("knob"), &["restore", "--json"], &vars);
    run.assert_says(2, &["GIT_SESSION_LFS_INCLUDE", "runs of '*'"]);
    assert!(h.srv.log().is_empty(), "a request was made");
}

/// A server that answers in the other object format than the one it announced (SPEC rule 1, no
/// conversion): an `ls-refs` id of the other length is exit 5, a pack whose trailer is the other
/// hash's length is refused (its checksum cannot match), a pack of the right length passes; nothing
/// is written. Run on both formats: SHA-1 ids to a SHA-256 session and the reverse.
#[test]
fn answers_in_the_other_object_format_are_refused_and_nothing_is_written() {
    let h = Hostile::new(&[&[("a.txt", Some("a\n"))]]);
    let tip = h.ids[0].clone();
    let other_len = if crate::support::hex_len() == 64 {
        40
    } else {
        64
    };
    let other_id = "ab".repeat(other_len / 2);
    let mut ls = pkt(&format!("{other_id} refs/heads/sessions/h\n")).into_bytes();
    ls.extend(b"0000");
    let mut s = Scripted::once(Endpoint::LsRefs, ls);
    s.times = 10;
    h.script(s);
    let dir = h.w.path("ls-refs");
    let run = h.restore(&dir, &tip, &[]);
    run.assert_case_says("ls-refs", 5, &["malformed object id"]);
    assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none());

    let (tree, blobs) = h.tree_of(&tip);
    let pack = pack_of(&h.w, &h.bare(), &[&tip, &tree, &blobs[0].1]);
    let hash = crate::support::hex_len() / 2;
    let entries = &pack[..pack.len() - hash];
    let trailer = &pack[pack.len() - hash..];
    // The trailer cut to 20 bytes (a SHA-256 pack), or grown to 32 (a SHA-1 one).
    let wrong: Vec<u8> = if hash == 32 {
        [entries, &trailer[..20]].concat()
    } else {
        [entries, trailer, &[0u8; 12]].concat()
    };
    h.srv.knobs.scripted.lock().unwrap().clear();
    h.serve_pack(&wrong);
    let dir = h.w.path("trailer");
    let run = h.restore(&dir, &tip, &[]);
    // Too short: the checksum cannot be read whole; too long: data after the pack.
    let said = if hash == 32 {
        "checksum (32 bytes: SHA-256)"
    } else {
        "data after the end of the pack"
    };
    run.assert_case_says("wrong-length trailer", 6, &["pack", "is corrupt", said]);
    assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none());

    // The same pack as sent: restored (the script answered, not the server).
    h.srv.knobs.scripted.lock().unwrap().clear();
    h.serve_pack(&pack);
    let dir = h.w.path("right");
    h.restore(&dir, &tip, &[]).assert_code(0);
    h.w.git(&dir, &["fsck", "--no-progress"]);
}

crate::sha256_too!(
    answers_in_the_other_object_format_are_refused_and_nothing_is_written,
    shallow_lines_naming_another_commit_are_refused_over_v2_and_v0,
    a_pack_missing_a_blob_is_exit_6_and_nothing_is_written,
    a_ref_delta_whose_base_comes_later_in_the_pack_is_restored,
);

/// A file system out of inodes (a tmpfs with few) while 8300 files are written by several early
/// writers, then again (more inodes, still too few) while the rerun's checkout writes the rest
/// with two threads: each run is exit 10, kind `io`, saying to free some space, never 1 or 7;
/// with inodes enough the next rerun completes the restore exactly.
#[test]
fn running_out_of_inodes_under_several_writers_is_exit_10_and_the_rerun_completes() {
    let files: Vec<(String, String)> = (0..8300)
        .map(|i| (format!("d{:02}/f{i:04}.txt", i % 12), format!("file {i}\n")))
        .collect();
    let commit: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_str())))
        .collect();
    let h = Hostile::new(&[&commit]);
    let tip = h.ids[0].clone();
    let mnt = h.w.tmp.path().join("mnt");
    let Some(fs) = Tmpfs::mount(&mnt, "256m,nr_inodes=3000") else {
        return;
    };
    let dir = mnt.join("tree");
    for inodes in ["3000", "7000"] {
        fs.resize(&format!("256m,nr_inodes={inodes}"));
        let run = h.restore(&dir, &tip, &[]);
        assert_eq!(
            run.code,
            Some(10),
            "{inodes} inodes: {}\n{}",
            run.stdout,
            run.stderr
        );
        let j = run.json();
        assert_eq!(j["error"]["kind"], "io", "{inodes} inodes");
        let msg = j["error"]["message"].as_str().unwrap();
        assert!(msg.contains("free some space"), "{inodes} inodes: {msg}");
    }
    fs.resize("256m,nr_inodes=20000");
    h.restore(&dir, &tip, &[]).assert_code(0);
    assert_eq!(h.w.git(&dir, &["rev-parse", "HEAD"]), tip);
    assert_eq!(
        h.w.git(&dir, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert_eq!(h.w.git(&dir, &["ls-files"]).lines().count(), 8300);
}
