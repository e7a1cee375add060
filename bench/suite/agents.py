"""agents: eight agents' work trees beside one session tree of a real repository (default: git/git,
from the mirror `fetch` brings to /work/.mirror/git+git/repo; BENCH_AGENTS_REPO), served by git
http-backend on 127.0.0.1: eight `git worktree add` (each on its own branch), eight `git clone
--depth 1` over http from the same server, and eight `git-session agent add` (when the binary has
the command; else skipped, said). Each contender's time for the eight, and its EXTRA DISK: the
file system's free-space delta (statvfs, after sync), which counts extents shared by copy-on-write
once; `du` of the eight trees beside it for reference (it counts shared extents in every file).
On ext4 and on XFS with reflink, each a loop-device image of BENCH_AGENTS_FS_MIB (sparse) under
BENCH_WORK/agents, made fresh every round: a file system of its own, so other work on the machine's
disk does not show in the delta, and nothing is deleted between a contender's runs. Needs root
(mount) and xfsprogs. One session tree (git-session restore) per file system and round; the
contenders take turns on it in an order that changes every round (BENCH_ROUNDS)."""

import os
import subprocess
import time

from . import common, servers

MIRROR = "/work/.mirror/git+git/repo"
COUNT = 8
FILESYSTEMS = {"ext4": ["mkfs.ext4", "-q", "-F"], "xfs-reflink": ["mkfs.xfs", "-q", "-f", "-m", "reflink=1"]}
NAMES = ["git-session-agent-add", "git-worktree-add", "git-clone-depth-1"]


def served(work, mirror, env):
    bare = work / "srv" / "repo.git"
    if not bare.exists():
        common.sh(["git", "clone", "-q", "--bare", "--shared", mirror, str(bare)], env=env)
    return bare


class Mounted:
    """A fresh file system of `kind` on a loop device: image under `work`, mounted on work/KIND."""

    def __init__(self, work, kind):
        self.img, self.dir = work / f"{kind}.img", work / kind
        self.unmount()
        self.img.unlink(missing_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.img, "wb") as f:
            f.truncate(common.knob("BENCH_AGENTS_FS_MIB") << 20)
        common.sh(FILESYSTEMS[kind] + [self.img])
        common.sh(["mount", "-o", "loop", self.img, self.dir])

    def free(self):
        subprocess.run(["sync", "-f", str(self.dir)], check=True)
        st = os.statvfs(self.dir)
        return st.f_bfree * st.f_frsize

    def unmount(self):
        if os.path.ismount(getattr(self, "dir", "")):
            subprocess.run(["umount", self.dir], check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unmount()
        self.img.unlink(missing_ok=True)


def has_agent_add(env):
    out = subprocess.run([common.BIN, "agent", "add", "--help"], env=env, capture_output=True)
    return out.returncode == 0


def commands(session, url, name, i):
    """The shell command that makes agent `i`'s tree for contender `name`, and the tree's folder."""
    tree = session.parent / f"{name}-{i}"
    if name == "git-worktree-add":
        return f'git -C {session} worktree add -q -b agent-{i} {tree}', tree
    if name == "git-clone-depth-1":
        return f'git clone -q --depth 1 {url} {tree}', tree
    return f'{common.BIN} -q -C {session} agent add agent-{i} --dir {tree}', tree


def contender(session, url, name, env, fs):
    """Eight trees of `name` in a row: wall time, free-space delta, du of the trees."""
    before = fs.free()
    trees, start = [], time.monotonic()
    for i in range(COUNT):
        cmd, tree = commands(session, url, name, i)
        out = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True)
        if out.returncode:
            common.show(out.stderr)
            common.die(f"{name} {i} failed (exit {out.returncode}): {cmd}")
        trees.append(tree)
    wall = time.monotonic() - start
    extra = before - fs.free()
    du = int(common.sh(["du", "-s", "-B1", "-c"] + trees).splitlines()[-1].split()[0])
    for t in trees:
        if not (t / ".git").exists():
            common.die(f"{name}: {t} holds no .git")
    return {"wall_s": round(wall, 3), "extra_bytes": extra, "du_bytes": du}


def one_round(work, rnd, kind, url, tip, names, env):
    with Mounted(work, kind) as fs:
        session = fs.dir / "session"
        before = fs.free()
        common.sh([common.BIN, "-q", "-C", session, "restore"], env=env | {
            "READ_URL": url, "SESSION_BRANCH": common.BRANCH, "TIP_SHA": tip})
        session_bytes = before - fs.free()
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        runs = [{"round": rnd, "fs": kind, "name": n, **contender(session, url, n, env, fs)} for n in order]
        common.say(f"round {rnd} on {kind}: session {session_bytes >> 20} MiB; " + ", ".join(
            f"{r['name']} {r['wall_s']:.1f}s +{r['extra_bytes'] >> 20} MiB" for r in runs))
        return session_bytes, runs


def run(args):
    if os.geteuid() != 0:
        common.die("agents: the loop-device file systems need root")
    common.need("mkfs.xfs", "mkfs.ext4", "du", "sync")
    mirror = os.environ.get("BENCH_AGENTS_REPO", MIRROR)
    work = common.WORK / "agents"
    env = common.git_env(work / "home")
    bare = served(work, mirror, env)
    tip = common.sh(["git", "rev-parse", "HEAD"], cwd=bare, env=env)
    names = list(NAMES)
    skipped = None
    if not has_agent_add(env):
        skipped = (f"{common.BIN} has no `agent add` (issue 42 part 2 not merged yet): "
                   "the git-session contender is skipped")
        common.say(skipped)
        names.remove("git-session-agent-add")
    load_before, start = common.check_load("agents"), time.monotonic()
    runs, sessions = [], {}
    with servers.serve(work / "srv") as srv:
        url = f"{srv.value}/repo.git"
        for rnd in range(common.knob("BENCH_ROUNDS")):
            for kind in FILESYSTEMS:
                sessions[kind], got = one_round(work, rnd, kind, url, tip, names, env)
                runs += got
    return {"mode": "agents", "kind": "agents", "machine": common.machine(), "repo": "git/git", "tip": tip,
            "count": COUNT, "fs_mib": common.knob("BENCH_AGENTS_FS_MIB"), "contenders": names,
            "skipped": skipped, "session_bytes": sessions, "runs": runs, "rounds": common.knob("BENCH_ROUNDS"),
            "command": common.command_line(args.argv), "finished": time.strftime("%Y-%m-%d %H:%M"),
            "secs": round(time.monotonic() - start), "load_before": load_before, "load_after": common.load_avg()}


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def table(r):
    mib = lambda b: f"{b / 1048576:.1f}"
    head = (f"## agents: {r['count']} agents' work trees beside one session tree of {r['repo']} at {r['tip'][:12]}\n\n"
            f"{r['machine']['date']}, {r['machine']['cores']} cores, git-session built from {r['machine']['built_from']}, "
            f"{r['machine']['git']}, kernel {r['machine']['kernel']}; git http-backend (examples/serve) on the same "
            f"cores. Each file system a {r['fs_mib']} MiB loop-device image made fresh every round. Extra disk: the "
            "file system's free-space delta over the eight (shared extents counted once); du of the eight trees "
            f"for reference. Medians of {r['rounds']} round(s) (raw: bench/results/agents.json). "
            f"Produced by `{r['command']}` on {r['finished']} ({r['secs']} s).\n\n")
    if r.get("skipped"):
        head += f"**Skipped:** {r['skipped']}.\n\n"
    if r["rounds"] < 3:
        head += "**Smoke run** (fewer than 3 rounds): the figures show the benchmark works, not a measurement.\n\n"
    rows = ["| file system | contender | time for 8 (s) | min–max (s) | extra disk (MiB) | du of the 8 (MiB) |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    for kind in FILESYSTEMS:
        for n in r["contenders"]:
            got = [x for x in r["runs"] if x["fs"] == kind and x["name"] == n]
            if not got:
                continue
            walls = [x["wall_s"] for x in got]
            rows.append(f"| {kind} | {n} | {median(walls):.2f} | {min(walls):.2f}–{max(walls):.2f} | "
                        f"{mib(median([x['extra_bytes'] for x in got]))} | {mib(median([x['du_bytes'] for x in got]))} |")
    sess = ", ".join(f"{k} {mib(v)} MiB" for k, v in r["session_bytes"].items())
    return head + "\n".join(rows) + f"\n\nThe session tree itself (restore, last round): {sess}."
