"""sparse: restore of one folder of a real repository (default: git/git's Documentation, from the
mirror `fetch` brings to /work/.mirror/git+git/repo) from git http-backend with
`uploadpack.allowFilter`, against git's `clone --filter=blob:none --sparse --depth 1` then
`sparse-checkout set FOLDER`. The served repository shares the mirror's objects (alternates)."""

import os
from pathlib import Path

from . import common, servers

NAMES = ["git-session", "git-clone-sparse"]
MIRROR = "/work/.mirror/git+git/repo"


def served(work, mirror, env):
    bare = work / "srv" / "repo.git"
    if not bare.exists():
        common.sh(["git", "clone", "-q", "--bare", "--shared", mirror, str(bare)], env=env)
        common.sh(["git", "config", "uploadpack.allowFilter", "true"], cwd=bare, env=env)
    return bare


def run(args):
    mirror = os.environ.get("BENCH_SPARSE_REPO", MIRROR)
    folder = os.environ.get("BENCH_SPARSE_DIR", "Documentation")
    work = common.WORK / "sparse"
    env = common.git_env(work / "home")
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    bare = served(work, mirror, env)
    tip = common.sh(["git", "rev-parse", "HEAD"], cwd=bare, env=env)
    with servers.serve(work / "srv") as srv:
        url = f"{srv.value}/repo.git"
        mk = f'd=$(mktemp -d -p {runs})'
        commands = {
            "git-session": f'{mk} && READ_URL={url} SESSION_BRANCH=sessions/bench TIP_SHA={tip} '
                           f'{common.BIN} -q -C "$d" restore --sparse {folder}',
            "git-clone-sparse": f'{mk} && git clone -q --filter=blob:none --sparse --depth 1 {url} "$d" '
                                f'&& git -C "$d" sparse-checkout set {folder}',
        }
        stats = common.measure(commands, env)
    common.delete(runs)
    return {"mode": "sparse", "machine": common.machine(), "repo": "git/git", "tip": tip,
            "folder": folder, "contenders": stats}


def table(r):
    head = (f"## sparse: restore of one folder ({r['folder']}) of {r['repo']} at {r['tip'][:12]}\n\n"
            f"{r['machine']['date']}, {r['machine']['cores']} cores, git-session {r['machine']['commit']}, "
            f"{r['machine']['git']}; git http-backend (examples/serve, `uploadpack.allowFilter`) on the "
            "same cores. git's recipe: `git clone --filter=blob:none --sparse --depth 1` then "
            "`git sparse-checkout set FOLDER`. Medians of hyperfine runs (raw: bench/results/sparse.json).\n\n")
    return head + common.contender_table(r, NAMES)
