//! The slow-server matrix (issue 38): every command that talks to a server, through
//! [`SlowProxy`] in front of git's `http-backend` (and giftless for LFS), × each point of its
//! exchanges × each fault (stall, drip, keep-alives, progress, interim-response storm) ends with
//! the documented exit within the documented bound computed from the knobs set here, and leaves
//! nothing half-written. The points of each command come from a control run through a healthy
//! proxy (which must succeed). Cells run in parallel, each killed at its bound plus a margin
//! (a hang fails with the cell's name). `SLOW_SERVER_ONLY=<substring>` runs the cells whose name
//! holds it; the table goes to stdout (`--nocapture`) and `$CARGO_TARGET_TMPDIR`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support::lfs::{Giftless, lfs_repo};
use crate::support::slow_proxy::{Fault, SlowProxy, Spot};
use crate::support::{GitServer, TOKEN, World, branch_tip, left_nothing, userinfo};
use git_session::restore::STAGING_DIR;

/// Every single wait (read, section, first byte, low speed, connect), in milliseconds.
const WAIT_MS: u64 = 3000;
/// All attempts of one operation together.
const RETRY_TOTAL_MS: u64 = 8000;
/// SPEC: at most 4 attempts.
const ATTEMPTS: u64 = 4;
/// Scheduling slack on a shared, loaded machine: a bound is asserted, never a timing.
const SLACK: Duration = Duration::from_secs(30);

fn knobs() -> Vec<(&'static str, String)> {
    let wait = WAIT_MS.to_string();
    vec![
        ("GIT_SESSION_READ_TIMEOUT_MS", wait.clone()),
        ("GIT_SESSION_SECTION_WAIT_MS", wait.clone()),
        ("GIT_SESSION_FIRST_BYTE_WAIT_MS", wait.clone()),
        ("GIT_SESSION_LOW_SPEED_TIME_MS", wait.clone()),
        ("GIT_SESSION_CONNECT_TIMEOUT_MS", wait),
        ("GIT_SESSION_RETRY_TOTAL_MS", RETRY_TOTAL_MS.to_string()),
        ("GIT_SESSION_RETRY_BASE_MS", "100".to_owned()),
    ]
}

/// The commands that talk to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cmd {
    RestoreV2,
    RestoreV0,
    Boot,
    Cache,
    ArchiveUrl,
    Lfs,
    Submodules,
    Save,
    StatusRemote,
    LazyFetch,
}

const CMDS: [Cmd; 10] = [
    Cmd::RestoreV2,
    Cmd::RestoreV0,
    Cmd::Boot,
    Cmd::Cache,
    Cmd::ArchiveUrl,
    Cmd::Lfs,
    Cmd::Submodules,
    Cmd::Save,
    Cmd::StatusRemote,
    Cmd::LazyFetch,
];

impl Cmd {
    fn name(self) -> &'static str {
        match self {
            Cmd::RestoreV2 => "restore v2",
            Cmd::RestoreV0 => "restore v0",
            Cmd::Boot => "boot (bake)",
            Cmd::Cache => "restore --cache",
            Cmd::ArchiveUrl => "archive URL",
            Cmd::Lfs => "LFS",
            Cmd::Submodules => "submodules",
            Cmd::Save => "save",
            Cmd::StatusRemote => "status --remote",
            Cmd::LazyFetch => "git lazy fetch",
        }
    }
}

/// The servers and repositories every cell shares (each cell has its own proxy and folder).
struct Fixture {
    w: World,
    srv: GitServer,
    lfs: Giftless,
    /// repo.git's commits.
    ids: Vec<String>,
    /// A baked template of `ids[0]` for `--cache`.
    cache: PathBuf,
    /// The top of the superproject `top.git` (a submodule `sub.git` at `lib/sub`).
    top: String,
    /// `sparse.git`'s tip (served with `uploadpack.allowFilter`).
    sparse: String,
    /// The LFS scratch repository: each cell commits its own `.lfsconfig` there.
    lfs_scratch: Mutex<PathBuf>,
}

fn seed_files(n: usize, seed: &mut u64) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let noise = crate::support::incompressible(3000, seed);
            let hex: String = noise.iter().map(|b| format!("{b:02x}")).collect();
            (format!("d/f{i:02}.txt"), format!("{hex}\n"))
        })
        .collect()
}

impl Fixture {
    fn new() -> Self {
        let w = World::new();
        let mut seed = 38u64;
        let many = seed_files(12, &mut seed);
        let first: Vec<(&str, Option<&str>)> = many
            .iter()
            .map(|(p, c)| (p.as_str(), Some(c.as_str())))
            .chain([("a.txt", Some("a\n"))])
            .collect();
        let ids = w.repo(
            "repo.git",
            &[&first, &[("a.txt", Some("a2\n")), ("b.txt", Some("b\n"))]],
        );
        let sub = w
            .repo("sub.git", &[&[("s.txt", Some("sub\n"))]])
            .pop()
            .unwrap();
        let top = w.scratch("top-scratch");
        std::fs::write(top.join("t.txt"), "top\n").unwrap();
        std::fs::write(
            top.join(".gitmodules"),
            "[submodule \"sub\"]\n\tpath = lib/sub\n\turl = ../sub.git\n",
        )
        .unwrap();
        w.git(&top, &["add", "."]);
        let link = format!("160000,{sub},lib/sub");
        w.git(&top, &["update-index", "--add", "--cacheinfo", &link]);
        w.git(&top, &["commit", "-q", "-m", "top"]);
        let top_tip = w.git(&top, &["rev-parse", "HEAD"]);
        w.serve_scratch(&top, "top.git");
        let sparse = w
            .repo(
                "sparse.git",
                &[&[("a/x.txt", Some("x\n")), ("d/e.txt", Some("e\n"))]],
            )
            .pop()
            .unwrap();
        w.git(
            &w.srv().join("sparse.git"),
            &["config", "uploadpack.allowFilter", "true"],
        );
        let srv = GitServer::start(&w.srv(), Some(TOKEN));
        let lfs = Giftless::start(&w.tmp.path().join("lfs-store"));
        let blob = crate::support::incompressible(20_000, &mut seed);
        let (lfs_scratch, _) = lfs_repo(
            &w,
            "lfs-scratch",
            &lfs.url("org/repo"),
            &[("big.bin", blob.as_slice()), ("readme.txt", &b"lfs\n"[..])],
        );
        w.serve_scratch(&lfs_scratch, "lfs.git");
        let cache = w.path("cache");
        let url = srv.url("repo.git", Some(&userinfo()));
        w.run(
            &cache,
            &["bake", "--json"],
            &[("READ_URL", url.as_str()), ("TIP_SHA", ids[0].as_str())],
        )
        .assert_code(0);
        let archive = w.tmp.path().join("files");
        std::fs::create_dir_all(&archive).unwrap();
        let out = archive.join("tip.tar.gz");
        let bare = w.srv().join("repo.git");
        w.git(
            &bare,
            &[
                "archive",
                "--format=tar.gz",
                "-o",
                out.to_str().unwrap(),
                &ids[1],
            ],
        );
        srv.serve_files(&archive);
        Fixture {
            w,
            srv,
            lfs,
            ids,
            cache,
            top: top_tip,
            sparse,
            lfs_scratch: Mutex::new(lfs_scratch),
        }
    }

    fn tip(&self) -> &str {
        &self.ids[1]
    }

    /// A commit of `lfs.git` whose `.lfsconfig` names `proxy` (its own branch, `cell-n`).
    fn lfs_commit(&self, proxy: &SlowProxy, n: usize) -> String {
        let scratch = self.lfs_scratch.lock().unwrap();
        let url = proxy.url("org/repo", None);
        self.w
            .git(&scratch, &["config", "-f", ".lfsconfig", "lfs.url", &url]);
        self.w
            .git(&scratch, &["commit", "-q", "-am", &format!("cell {n}")]);
        let bare = self.w.srv().join("lfs.git");
        let refspec = format!("HEAD:refs/heads/cell-{n}");
        self.w
            .git(&scratch, &["push", "-q", bare.to_str().unwrap(), &refspec]);
        self.w.git(&scratch, &["rev-parse", "HEAD"])
    }

    fn direct(&self, repo: &str) -> String {
        self.srv.url(repo, Some(&userinfo()))
    }
}

/// One cell: a command, and where and how the proxy misbehaves (`None`: the control).
#[derive(Debug, Clone)]
struct Cell {
    cmd: Cmd,
    fault: Option<(Spot, Fault)>,
}

impl Cell {
    fn name(&self) -> String {
        match &self.fault {
            None => format!("{} | control | -", self.cmd.name()),
            Some((spot, fault)) => format!(
                "{} | {} {} | {}",
                self.cmd.name(),
                spot.kind,
                spot.point,
                fault.name()
            ),
        }
    }

    /// Whether data may flow before the fault: each attempt with pack data has the whole retry
    /// budget again (README "Network").
    fn flowing(&self) -> bool {
        self.fault.as_ref().is_some_and(|(spot, fault)| {
            let raw = spot.kind.starts_with("file@") || spot.kind.starts_with("lfs-object@");
            matches!(spot.point.as_str(), "mid-pack" | "mid-body")
                || (*fault == Fault::Drip && (spot.point == "pack-start" || raw))
        })
    }

    /// The documented worst case, from the knobs: plain git's own low-speed rule for a lazy
    /// fetch; the retry budget plus one wait (a server working before its first byte is outside
    /// the budget); with data flowing, that for each attempt.
    fn bound(&self) -> Duration {
        let ms = if self.cmd == Cmd::LazyFetch {
            2 * WAIT_MS
        } else if self.flowing() {
            ATTEMPTS * (RETRY_TOTAL_MS + WAIT_MS)
        } else {
            RETRY_TOTAL_MS + WAIT_MS
        };
        Duration::from_millis(ms)
    }
}

struct Outcome {
    name: String,
    code: Option<i32>,
    secs: f64,
    bound: Duration,
    stderr: String,
    seen: BTreeSet<String>,
    problems: Vec<String>,
}

/// The command's process, its folder prepared (through the proxy or directly, as the cell needs).
fn command(fx: &Fixture, cell: &Cell, proxy: &SlowProxy, n: usize, dir: &Path) -> Command {
    let w = &fx.w;
    let branch = format!("sessions/c{n}");
    let via = |repo: &str| proxy.url(repo, Some(&userinfo()));
    let mut vars: Vec<(&str, String)> = vec![
        ("SESSION_BRANCH", branch.clone()),
        ("TIP_SHA", fx.tip().to_owned()),
        ("READ_URL", via("repo.git")),
    ];
    let mut args = vec!["restore", "--json"];
    match cell.cmd {
        Cmd::RestoreV2 => vars.push(("GIT_SESSION_PROTOCOL", "2".into())),
        Cmd::RestoreV0 => vars.push(("GIT_SESSION_PROTOCOL", "0".into())),
        Cmd::Boot => {
            let direct = fx.direct("repo.git");
            let vars = [
                ("READ_URL", direct.as_str()),
                ("TIP_SHA", fx.ids[0].as_str()),
            ];
            w.run(dir, &["bake", "--json"], &vars).assert_code(0);
        }
        Cmd::Cache => args.extend(["--cache", fx.cache.to_str().unwrap()]),
        Cmd::ArchiveUrl => {
            vars.retain(|(k, _)| *k != "READ_URL");
            let url = format!("http://{}@{}/files/tip.tar.gz", userinfo(), proxy.addr);
            vars.push(("ARCHIVE_URL", url));
        }
        Cmd::Lfs => {
            vars[1].1 = fx.lfs_commit(proxy, n);
            vars[2].1 = fx.direct("lfs.git");
        }
        Cmd::Submodules => {
            args.extend(["--submodules", "recursive"]);
            vars[1].1 = fx.top.clone();
            vars[2].1 = via("top.git");
        }
        Cmd::Save | Cmd::StatusRemote => {
            let direct = fx.direct("repo.git");
            w.restore_with(dir, &direct, &branch, fx.tip(), &[], &[])
                .assert_code(0);
            std::fs::write(dir.join("a.txt"), format!("edited in cell {n}\n")).unwrap();
            vars.push(("PUSH_URL", via("repo.git")));
            args = if cell.cmd == Cmd::Save {
                vec!["save", "--json", "-m", "cell"]
            } else {
                vec!["status", "--json", "--remote"]
            };
        }
        Cmd::LazyFetch => {
            let healthy = proxy.url("sparse.git", Some(&userinfo()));
            let mut restore = knobs();
            restore.push(("GIT_SESSION_PROTOCOL", "2".into()));
            let restore: Vec<(&str, &str)> =
                restore.iter().map(|(k, v)| (*k, v.as_str())).collect();
            w.restore_with(
                dir,
                &healthy,
                &branch,
                &fx.sparse,
                &["--sparse", "a"],
                &restore,
            )
            .assert_code(0);
            proxy.clear();
            let mut git = Command::new("git");
            git.args(["cat-file", "-p", "HEAD:d/e.txt"])
                .current_dir(dir)
                .env_clear()
                .envs(w.env())
                .env("READ_URL", healthy);
            return git;
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_git-session"));
    cmd.args(&args)
        .current_dir(dir)
        .env_clear()
        .envs(w.env())
        .envs(knobs())
        .envs(vars);
    cmd
}

fn run_cell(fx: &Fixture, cell: &Cell, n: usize) -> Outcome {
    let upstream = if cell.cmd == Cmd::Lfs {
        let url = fx.lfs.url("");
        let host = url.trim_start_matches("http://").trim_end_matches('/');
        host.parse().unwrap()
    } else {
        fx.srv.addr
    };
    let proxy = SlowProxy::start(upstream);
    let dir = fx.w.path(&format!("c{n}"));
    let mut cmd = command(fx, cell, &proxy, n, &dir);
    let remote_before = branch_tip(
        &fx.w,
        &fx.w.srv().join("repo.git"),
        &format!("sessions/c{n}"),
    );
    let head_before = dir
        .join(".git")
        .exists()
        .then(|| fx.w.git(&dir, &["rev-parse", "HEAD"]));
    proxy.set(cell.fault.clone());
    let log = fx.w.tmp.path().join(format!("c{n}.stderr"));
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let bound = cell.bound();
    let out = crate::support::wait_with_limit(child, bound + SLACK + Duration::from_secs(20));
    let secs = started.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    let mut problems = Vec::new();
    let code = out.status.code();
    let want_ok = cell.fault.is_none();
    let pushed = cell
        .fault
        .as_ref()
        .is_some_and(|(spot, _)| spot.kind.starts_with("receive-pack@") && spot.point != "connect");
    match (cell.cmd, want_ok, code) {
        (_, true, Some(0)) => {}
        (_, true, c) => problems.push(format!("the control ended with {c:?}")),
        (_, false, None) => problems.push("killed: it hung past its bound".to_owned()),
        (Cmd::LazyFetch, false, Some(c)) if c != 0 => {}
        (_, false, Some(5)) => {}
        // The server applied the push before the fault: a retry finds it there.
        (Cmd::Save, false, Some(0)) if pushed => {}
        (_, false, c) => problems.push(format!("exit {c:?}, not 5")),
    }
    if secs > (bound + SLACK).as_secs_f64() {
        problems.push(format!(
            "took {secs:.1} s, over the bound {bound:?} + slack"
        ));
    }
    if says_no_phase(cell, code, &stderr) {
        problems.push("the message does not say which phase stalled".to_owned());
    }
    if !want_ok && proxy.fired() == 0 {
        problems.push("the fault never fired".to_owned());
    }
    if !want_ok && code != Some(0) {
        problems.extend(half_written(fx, cell, &dir, n, remote_before, head_before));
    }
    if !want_ok && code == Some(0) && !landed(fx, cell, &dir, n) {
        problems.push("exit 0, and the push did not land".to_owned());
    }
    // SPEC rule 6: a restore that wrote files keeps its staging folder; the rerun completes.
    if !want_ok && dir.join(STAGING_DIR).exists() {
        proxy.set(None);
        let rerun = again(&cmd).status().unwrap();
        if !rerun.success() {
            problems.push(format!(
                "the rerun through a healthy server ended with {rerun}"
            ));
        }
    }
    Outcome {
        name: cell.name(),
        code,
        secs,
        bound,
        stderr,
        seen: proxy.seen(),
        problems,
    }
}

/// What a stall's message says, by phase (`src/wire/watch.rs`).
const PHASE_WORDS: [&str; 7] = [
    "no response head came",
    "the server sent headers and then",
    "the server did not finish its",
    "the server sent no pack data",
    "the server stopped sending data",
    "the server sent no answer",
    "the transfer stayed below",
];

/// Whether a git-session stall ended without naming its phase (keep-alives where none belong
/// may end sooner, as a malformed answer).
fn says_no_phase(cell: &Cell, code: Option<i32>, stderr: &str) -> bool {
    let Some((_, fault)) = &cell.fault else {
        return false;
    };
    cell.cmd != Cmd::LazyFetch
        && code == Some(5)
        && *fault != Fault::KeepAlive
        && !PHASE_WORDS.iter().any(|w| stderr.contains(w))
}

/// Whether the session branch on the server is the tree's `HEAD` (a push that landed).
fn landed(fx: &Fixture, cell: &Cell, dir: &Path, n: usize) -> bool {
    let w = &fx.w;
    let remote = branch_tip(w, &w.srv().join("repo.git"), &format!("sessions/c{n}"));
    cell.cmd == Cmd::Save && remote == Some(w.git(dir, &["rev-parse", "HEAD"]))
}

/// The same process again (a rerun).
fn again(cmd: &Command) -> Command {
    let mut rerun = Command::new(cmd.get_program());
    rerun.args(cmd.get_args()).env_clear();
    if let Some(dir) = cmd.get_current_dir() {
        rerun.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            rerun.env(k, v);
        }
    }
    rerun
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    rerun
}

/// What a failed command left that it should not have.
fn half_written(
    fx: &Fixture,
    cell: &Cell,
    dir: &Path,
    n: usize,
    remote_before: Option<String>,
    head_before: Option<String>,
) -> Option<String> {
    let w = &fx.w;
    let staging = dir.join(STAGING_DIR);
    match cell.cmd {
        Cmd::RestoreV2
        | Cmd::RestoreV0
        | Cmd::Cache
        | Cmd::ArchiveUrl
        | Cmd::Lfs
        | Cmd::Submodules => (!left_nothing(dir) && !dir.join(STAGING_DIR).exists()).then(|| {
            format!(
                "left {:?} in the empty folder",
                crate::support::names_in(dir)
            )
        }),
        Cmd::Boot | Cmd::StatusRemote => {
            let head = w.git(dir, &["rev-parse", "HEAD"]);
            (Some(&head) != head_before.as_ref() || staging.exists()).then(|| {
                format!(
                    "the tree changed: HEAD {head}, staging {}",
                    staging.exists()
                )
            })
        }
        Cmd::Save => {
            let now = branch_tip(w, &w.srv().join("repo.git"), &format!("sessions/c{n}"));
            (now != remote_before).then(|| format!("the remote ref moved to {now:?}"))
        }
        Cmd::LazyFetch => None,
    }
}

/// The faults worth trying at `point`, for a request of `kind`.
fn faults_at(kind: &str, point: &str) -> Vec<Fault> {
    let binary = kind.starts_with("file") || kind.starts_with("lfs-object");
    match point {
        "head" if binary => vec![Fault::Stall, Fault::Drip, Fault::Storm],
        "head" => vec![Fault::Stall, Fault::Drip, Fault::KeepAlive, Fault::Storm],
        "pack-start" => vec![Fault::Stall, Fault::Drip, Fault::KeepAlive, Fault::Progress],
        "mid-pack" | "mid-body" => vec![Fault::Stall, Fault::Drip],
        _ => vec![Fault::Stall, Fault::Drip, Fault::KeepAlive],
    }
}

/// The cells of `cmd`: connect, then each point its control passed, × the faults there.
fn cells_of(cmd: Cmd, seen: &BTreeSet<String>) -> Vec<Cell> {
    let mut cells = Vec::new();
    if cmd != Cmd::Submodules {
        let spot = Spot::new("*", "connect");
        cells.push(Cell {
            cmd,
            fault: Some((spot, Fault::Stall)),
        });
    }
    for entry in seen {
        let (kind, point) = entry.split_once(' ').unwrap();
        // A submodule's own exchanges; the superproject's are restore's.
        if cmd == Cmd::Submodules && !kind.ends_with("@sub.git") {
            continue;
        }
        for fault in faults_at(kind, point) {
            cells.push(Cell {
                cmd,
                fault: Some((Spot::new(kind, point), fault)),
            });
        }
    }
    cells
}

/// Run `cells` on `threads` threads, in order of the list.
fn run_all(fx: &Fixture, cells: Vec<Cell>, first: usize, threads: usize) -> Vec<Outcome> {
    let queue = Mutex::new(cells.into_iter().enumerate().collect::<Vec<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().unwrap().pop();
                    let Some((i, cell)) = next else { break };
                    let outcome = run_cell(fx, &cell, first + i);
                    results.lock().unwrap().push(outcome);
                }
            });
        }
    });
    results.into_inner().unwrap()
}

fn table(outcomes: &[Outcome]) -> String {
    let mut rows: Vec<&Outcome> = outcomes.iter().collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = String::from(
        "| command | request point | fault | exit | seconds | bound (s) | message (last line) |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for o in rows {
        let last = o.stderr.lines().rev().find(|l| !l.trim().is_empty());
        let last = last.unwrap_or_default().replace('|', "/");
        let last: String = last.chars().take(160).collect();
        let code = o.code.map_or("killed".to_owned(), |c| c.to_string());
        out.push_str(&format!(
            "| {} | {code} | {:.1} | {} | {last} |\n",
            o.name,
            o.secs,
            o.bound.as_secs()
        ));
    }
    out
}

#[test]
fn every_command_ends_in_its_bound_at_every_phase_of_a_slow_server() {
    let only = std::env::var("SLOW_SERVER_ONLY").unwrap_or_default();
    let threads = std::env::var("SLOW_SERVER_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(8);
    let started = Instant::now();
    let fx = Fixture::new();
    let controls: Vec<Cell> = CMDS.iter().map(|&cmd| Cell { cmd, fault: None }).collect();
    let controls = run_all(&fx, controls, 0, threads);
    let mut failed: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    for (cmd, o) in CMDS.iter().zip(order(&controls)) {
        if !o.problems.is_empty() {
            failed.push(format!(
                "{}: {}\n{}",
                o.name,
                o.problems.join("; "),
                o.stderr
            ));
        }
        eprintln!("{}: points {:?}", cmd.name(), o.seen);
        cells.extend(cells_of(*cmd, &o.seen));
    }
    cells.retain(|c| c.name().contains(&only));
    let outcomes = run_all(&fx, cells, 100, threads);
    let text = table(&outcomes);
    println!("{text}");
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("slow-server-matrix.md");
    std::fs::write(&file, &text).unwrap();
    eprintln!(
        "{} cells in {:.0} s; table in {}",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        file.display()
    );
    for o in &outcomes {
        if !o.problems.is_empty() {
            failed.push(format!(
                "{}: {}\n{}",
                o.name,
                o.problems.join("; "),
                o.stderr
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} cells failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The controls in [`CMDS`]'s order.
fn order(outcomes: &[Outcome]) -> Vec<&Outcome> {
    CMDS.iter()
        .map(|cmd| {
            outcomes
                .iter()
                .find(|o| o.name.starts_with(&format!("{} |", cmd.name())))
                .unwrap()
        })
        .collect()
}

#[test]
fn an_lfs_server_that_sends_headers_and_then_nothing_ends_within_the_retry_budget() {
    let fx = Fixture::new();
    let cell = Cell {
        cmd: Cmd::Lfs,
        fault: Some((Spot::new("lfs-object", "head"), Fault::Stall)),
    };
    let upstream = fx.lfs.url("");
    let proxy = SlowProxy::start(
        upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap(),
    );
    let dir = fx.w.path("headers-only");
    let mut cmd = command(&fx, &cell, &proxy, 1, &dir);
    // Waits longer than the budget: only the budget ends it in time (each attempt counted the
    // head as data, and had the whole wait again: 4 × 20 s and more, over the bound).
    cmd.env("GIT_SESSION_LOW_SPEED_TIME_MS", "20000")
        .env("GIT_SESSION_READ_TIMEOUT_MS", "20000");
    proxy.set(cell.fault.clone());
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = crate::support::wait_with_limit(child, Duration::from_secs(150));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    let bound = Duration::from_millis(RETRY_TOTAL_MS + 20000) + SLACK;
    assert!(took <= bound, "took {took:?}, over {bound:?}:\n{stderr}");
    assert!(
        stderr.contains("the server sent headers and then nothing"),
        "{stderr}"
    );
}

/// A download that is slow but steady (4 KiB/s, over the low-speed limit) takes longer than
/// `GIT_SESSION_LOW_SPEED_TIME_MS` in all and is not cut off: the wait for data is renewed by
/// each piece (before, an archive failed once the low-speed time had passed since its first byte).
#[test]
fn a_slow_but_steady_archive_download_is_not_cut_off() {
    let fx = Fixture::new();
    let archive = fx.w.tmp.path().join("files/tip.tar.gz");
    let size = std::fs::metadata(&archive).unwrap().len();
    // At 4 KiB/s it takes over the low-speed time.
    assert!(
        size > (WAIT_MS / 1000 + 1) * 4096,
        "the archive is {size} bytes"
    );
    let cell = Cell {
        cmd: Cmd::ArchiveUrl,
        fault: Some((Spot::new("file", "head"), Fault::Slow)),
    };
    let proxy = SlowProxy::start(fx.srv.addr);
    let dir = fx.w.path("slow");
    let mut cmd = command(&fx, &cell, &proxy, 1, &dir);
    proxy.set(cell.fault.clone());
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = crate::support::wait_with_limit(child, Duration::from_secs(90));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(proxy.fired() > 0);
    assert!(
        started.elapsed() > Duration::from_millis(WAIT_MS),
        "the download was not slow: {:?}",
        started.elapsed()
    );
    assert_eq!(crate::support::read_text(dir.join("a.txt")), "a2\n");
    assert_eq!(crate::support::read_text(dir.join("b.txt")), "b\n");
}
