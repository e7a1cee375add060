"""lfs: restore of a repository with many Git LFS files (BENCH_LFS_FILES x 1 MiB, default 200,
incompressible) from git http-backend and the giftless LFS server, against the git CLI's recipe:
`GIT_LFS_SKIP_SMUDGE=1 git clone --depth 1` then `git lfs pull` (its batch download; a clone that
smudges file by file is slower still). Both read from the same two servers on these cores.
giftless runs as it is deployed, under gunicorn with BENCH_LFS_WORKERS processes (default 8, the
transfers each client runs at once); BENCH_LFS_WORKERS=0 runs it on werkzeug's development server
(one process whose threads share one interpreter lock: the server is then the limit)."""

import contextlib
import os
import subprocess
from pathlib import Path

from . import common, servers

NAMES = ["git-session", "git-clone+lfs-pull"]


def make_repo(work, lfs_url, files, env):
    """The bare repository served, made once per (files, LFS URL) and kept."""
    bare = work / "srv" / "lfs.git"
    stamp = work / "repo.stamp"
    want = f"{files} {lfs_url}"
    if bare.exists() and stamp.exists() and stamp.read_text() == want:
        return bare
    subprocess.run(["rm", "-rf", str(work / "srv"), str(work / "scratch")], check=True)
    scratch = work / "scratch"
    scratch.mkdir(parents=True)
    run = lambda *a: common.sh(["git", *a], cwd=scratch, env=env)
    run("init", "-q", "-b", "main")
    run("lfs", "install", "--local")
    run("lfs", "track", "*.bin")
    run("config", "-f", ".lfsconfig", "lfs.url", lfs_url)
    for i in range(files):
        d = scratch / f"data/{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:04}.bin").write_bytes(os.urandom(1 << 20))
    (scratch / "README.md").write_text("LFS bench\n")
    run("add", "-A")
    run("commit", "-q", "-m", "lfs files")
    run("lfs", "push", "--all", lfs_url)
    common.sh(["git", "clone", "-q", "--bare", str(scratch), str(bare)], env=env)
    stamp.write_text(want)
    return bare


def run(args):
    files = int(os.environ.get("BENCH_LFS_FILES", "200"))
    port = int(os.environ.get("BENCH_LFS_PORT", "18765"))
    workers = int(os.environ.get("BENCH_LFS_WORKERS", "8"))
    work = common.WORK / "lfs"
    env = common.git_env(work / "home")
    common.sh(["git", "lfs", "install", "--skip-repo"], env=env)
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    model = common.link()
    lfs_url = f"http://127.0.0.1:{port}/bench/lfs"
    # With the remote-server model, giftless listens one port up, behind a replaying proxy at
    # the URL .lfsconfig records.
    with servers.giftless(work / "store", port + 1 if model else port, workers) as lfs, \
            (servers.replay_proxy(lfs.value, *model, port=port, keep_host=True) if model
             else contextlib.nullcontext()):
        bare = make_repo(work, lfs_url, files, env)
        tip = common.sh(["git", "rev-parse", "main"], cwd=bare, env=env)
        with servers.serve(work / "srv") as srv, \
                (servers.replay_proxy(srv.value, *model) if model else contextlib.nullcontext()) as proxy:
            url = f"{(proxy or srv).value}/lfs.git"
            mk = f'd=$(mktemp -d -p {runs})'
            commands = {
                "git-session": f'{mk} && READ_URL={url} SESSION_BRANCH=sessions/bench TIP_SHA={tip} '
                               f'{common.BIN} -q -C "$d" restore',
                "git-clone+lfs-pull": f'{mk} && GIT_LFS_SKIP_SMUDGE=1 git clone -q --depth 1 {url} "$d" '
                                      f'&& git -C "$d" lfs pull',
            }
            stats = common.measure(commands, env)
    common.delete(runs)
    return {"mode": "lfs" + (f"-link-{model[0]:g}" if model else ""), "machine": common.machine(),
            "files": files, "file_bytes": 1 << 20, "link": model, "workers": workers,
            "contenders": stats}


def table(r):
    server = (f"giftless 0.6.2 under gunicorn, {r['workers']} worker processes" if r.get("workers")
              else "giftless 0.6.2 on werkzeug's development server (one Python process)")
    where = (f"git http-backend (examples/serve) and {server}, on the same cores"
             if not r.get("link") else
             f"both servers behind bench/suite/replay_proxy.py (the remote-server model: {r['link'][0]:g} MB/s per "
             f"answer, {r['link'][1]:g} ms round trip, answers replayed from memory after the warm-up)")
    head = (f"## {r['mode']}: restore of {r['files']} Git LFS files of 1 MiB\n\n"
            f"{r['machine']['date']}, {r['machine']['cores']} cores, git-session {r['machine']['commit']}, "
            f"{r['machine']['git']}; {where}. git's recipe: `GIT_LFS_SKIP_SMUDGE=1 git clone --depth 1` then "
            f"`git lfs pull`. Medians of hyperfine runs (raw: bench/results/{r['mode']}.json).\n\n")
    return head + common.contender_table(r, NAMES)
