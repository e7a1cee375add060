"""save: a one-file edit, committed and pushed to the same server (a copy of the repository, with
both session branches at TIP_SHA). Unmeasured set-up: a tree restored by git-session (depth 1) and a
shallow clone made the git way. Every round appends a line to the same file in each tree, then
measures
  git-session   PUSH_URL=… git-session -C DIR save -m MSG
  git           git add -A && git commit -q -m MSG && git push -q URL HEAD:refs/heads/BRANCH
and checks that the remote branch (git ls-remote) is the new local HEAD, a child of the previous
one, and that `git status` is clean. The first warm-up round (at least one) runs git-session with -v
and git's push with --progress, to read the size of the pack each pushed. BENCH_SAVE_EDIT: the file
edited: middle (of the tree, the default), largest, or a path. --object-format sha256|both
(formats.py): on a SHA-256 copy too (its own server copy and trees; git's with `git init
--object-format=sha256`); section save-sha256."""

import os
import re
import subprocess
import time
from pathlib import Path

from . import common, formats, repo, rounds, servers
from .report import (machine_md, median, medians_note, produced_by, ratio_verdict, repo_md, runs_table,
                     sections, summary_table)

CONTENDERS = ["git-session", "git"]
BRANCHES = {"git-session": "sessions/bench-save", "git": "sessions/bench-git"}
PUSH = 'set -e; cd "$1"; git add -A; git commit -q -m "$2"; git push {q} "$3" HEAD:refs/heads/"$4"'
PLAIN = re.compile(r"[A-Za-z0-9._/-]+")


class Save(rounds.Mode):
    prefix = "save"

    def __init__(self, url, sha, edit, fmt=None):
        self.url, self.edit, self.prev = url, edit, {n: sha for n in CONTENDERS}
        if fmt:
            self.prefix, self.format = f"save-{fmt}", fmt
        self.env = os.environ | {"GIT_AUTHOR_NAME": "Bench Author", "GIT_AUTHOR_EMAIL": "author@bench.invalid",
                                 "GIT_COMMITTER_NAME": "Bench Committer",
                                 "GIT_COMMITTER_EMAIL": "committer@bench.invalid"}

    def dir(self, name, r):
        return common.RUNS / self.prefix / name

    def prepare(self, name, d, r):
        with open(d / self.edit, "a") as f:
            f.write(f"bench: edit of round {r} by {name}\n")
        return ""

    def command(self, name, d, r):
        msg = f"bench: round {r}"
        if name == "git-session":  # round 0, the probe: the same run, logging the size of the pack it sends
            return ["env", f"PUSH_URL={self.url}", common.BIN, "-C", d, *(["-v"] if r == 0 else []), "save", "-m", msg]
        push = PUSH.format(q="--progress" if r == 0 else "-q")
        return ["bash", "-c", push, "_", d, msg, self.url, BRANCHES["git"]]

    def verify(self, name, d, log, r):
        """The remote branch is the new local HEAD, a child of the previous one; extra: the status time."""
        head = common.git(d, "rev-parse", "HEAD")
        parent = common.git(d, "rev-parse", "-q", "--verify", "HEAD~1", check=False) or "none"
        remote = common.sh(["git", "ls-remote", self.url, f"refs/heads/{BRANCHES[name]}"]).split("\t")[0]
        if remote != head:
            common.show(log.read_text())
            common.die(f"save: {name}: the remote {BRANCHES[name]} is {remote!r}, the local HEAD {head}")
        if parent != self.prev[name]:
            common.die(f"save: {name}: the new HEAD {head} has parent {parent}, expected {self.prev[name]}")
        self.prev[name] = head
        took = rounds.clean_status(name, d)
        return {"status_s": took, "extra": f"{took:.2f}"}


def edit_file(path, sha):
    """The file edited (BENCH_SAVE_EDIT): a regular file with a plain path from the middle of the
    tree, the largest such file, or the path given."""
    how = os.environ.get("BENCH_SAVE_EDIT", "middle")
    if how not in ("middle", "largest"):
        if common.git(path, "cat-file", "-e", f"{sha}:{how}", check=False) is None:
            common.die(f"save: BENCH_SAVE_EDIT: no {how} in TIP_SHA's tree")
        return how
    entries = []
    for line in common.git(path, "-c", "core.quotePath=false", "ls-tree", "-r", "-l", sha).splitlines():
        meta, name = line.split("\t", 1)
        mode, kind, _, size = meta.split()
        if mode == "100644" and kind == "blob" and PLAIN.fullmatch(name):
            entries.append((int(size), name))
    if not entries:
        common.die("save: no regular file with a plain path in TIP_SHA's tree")
    return max(entries)[1] if how == "largest" else entries[(len(entries) + 1) // 2 - 1][1]


def set_up(srv, info, prefix):
    """The server's copy (a local clone, both session branches at TIP_SHA, so the pushes are
    fast-forwards from it) and the two trees; the copy's URL."""
    copy, sha, runs = srv.root / f"{prefix}.git", info["sha"], common.RUNS / prefix
    url = f"{srv.base}/{copy.name}"
    common.say(f"save: copying the repository to {copy}")
    common.delete(copy, runs)
    common.sh(["git", "clone", "-q", "--bare", info["path"], copy])
    for branch in BRANCHES.values():
        common.git(copy, "update-ref", f"refs/heads/{branch}", sha)
    common.say("save: setting up the trees (git-session restore, git shallow fetch)")
    gs, gd = runs / "git-session", runs / "git"
    gs.mkdir(parents=True)
    env = os.environ | {"READ_URL": url, "SESSION_BRANCH": BRANCHES["git-session"], "TIP_SHA": sha}
    if subprocess.run([str(common.BIN), "-C", str(gs), "-q", "restore"], env=env).returncode:
        common.die(f"save: set-up: git-session restore into {gs} failed")
    common.sh(["git", "init", "-q", *(["--object-format=sha256"] if len(sha) == 64 else []), gd])
    common.git(gd, "-c", "protocol.version=2", "fetch", "-q", "--depth", "1", url, sha)
    common.git(gd, "switch", "-q", "-c", BRANCHES["git"], sha)
    return url


def packs(prefix):
    """The packs sent in the probe round (the first warm-up), from the logs."""
    gs = re.findall(r"sending (\d+) objects \((\d+) bytes\)", (common.RUNS / f"{prefix}-0-git-session.log").read_text())
    git = re.findall(r"Writing objects: 100% \(\d+/(\d+)\), ([^|\r\n]*[^ |\r\n])",
                     (common.RUNS / f"{prefix}-0-git.log").read_text().replace("\r", "\n"))
    if not gs:
        common.say("warning: no 'sending N objects (B bytes)' line in git-session -v's log")
    return (f"{gs[-1][0]} objects, {gs[-1][1]} bytes" if gs else "n/a (no log line)",
            f"{git[-1][0]} objects, {git[-1][1]}" if git else "n/a")


def run(args):
    common.need("git", "time")
    fmts, infos = formats.of(args), formats.infos(args, repo.get)
    info = next(iter(infos.values()))
    n, warmup = common.rounds()
    warmup = max(warmup, 1)
    edit = edit_file(info["path"], info["sha"])  # the same path in every format's tree
    with servers.GitServer(Path(info["path"]), info["ref"]) as srv:
        modes = []
        for f, i in infos.items():
            fmt = f if formats.tagged(fmts) else None
            url = set_up(srv, i, f"save-{fmt}" if fmt else "save")
            modes.append(Save(url, i["sha"], edit, fmt))
        section = formats.section("save", fmts)
        load, t0 = common.check_load(section), time.monotonic()
        runs = rounds.loop(modes, CONTENDERS, n, warmup, srv.meter())
        took = time.monotonic() - t0
    sent = {m.format: packs(m.prefix) for m in modes}
    gs_pack, git_pack = sent[modes[0].format]
    r = rounds.results(args, section, "save", took, load, runs, n, warmup, repo=info, contenders=CONTENDERS,
                       edit_file=edit, edit_bytes=int(common.git(info["path"], "cat-file", "-s", f"{info['sha']}:{edit}")),
                       gs_pack=gs_pack, git_pack=git_pack, **formats.extra(fmts, infos))
    if formats.tagged(fmts):
        r["packs"] = sent
    common.remove(*(common.RUNS / m.prefix for m in modes))
    return r


def intro(r):
    gs, git = BRANCHES["git-session"], BRANCHES["git"]
    init = "git init --object-format=sha256" if "sha256" in r.get("formats", []) else "git init"
    only = "; the option on the SHA-256 repository only" if len(r.get("formats", [])) > 1 else ""
    return (
        "Both contenders push to the same loopback smart-HTTP server (`examples/serve`, `git http-backend` →\n"
        "`git receive-pack`), to a copy of the repository where both session branches start at `TIP_SHA`.\n"
        f"Set up once, unmeasured: a tree restored by `git-session restore` (depth 1) on `{gs}`, and a\n"
        f"shallow clone made the git way (`{init}; git fetch --depth 1 $URL $SHA; git switch -c {git} $SHA`{only}).\n"
        f"Every round appends one line to `{r['edit_file']}` ({r['edit_bytes']} bytes at TIP_SHA) in each tree "
        "(unmeasured), then measures:\n\n"
        "- **git-session**: `PUSH_URL=$URL git-session -C DIR save -m MSG`\n"
        f"- **git**: `git add -A && git commit -q -m MSG && git push -q $URL HEAD:refs/heads/{git}` (one `bash -c`)\n\n"
        "Author and committer from `GIT_AUTHOR_*`/`GIT_COMMITTER_*`; `GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1`.\n"
        "After every run, the remote branch (`git ls-remote`) must be the new local `HEAD`, whose parent is the\n"
        "previous one, and `git status --porcelain` must be empty.")


def packs_md(gs_pack, git_pack):
    return (f"- pack pushed by git-session (`-v`: `sending N objects (B bytes)`): {gs_pack}; by git "
            f"(`Writing objects`): {git_pack}")


EVERY = "### Every run\n\n\"status after\" is the verification `git status --porcelain` (not measured)."


def table(r):
    runs = r["runs"]
    lines = (f"- git-session ÷ git, median wall: {ratio_verdict(median(runs, 'git-session'), median(runs, 'git'), 1.0)}\n"
             + packs_md(r["gs_pack"], r["git_pack"]))
    method = (medians_note(r).replace("warm-up round(s);", "warm-up round(s) (the first runs git-session with "
                                      "`-v` and\ngit's push with `--progress`, for the pack sizes);")
              + " Wall time from hyperfine;\npeak RSS and client CPU from GNU `/usr/bin/time`; for git, the peak "
              "RSS is that of the largest single process\nof the three commands. \"server CPU\" is the server's "
              "(`http-backend`, `receive-pack`, `index-pack` or\n`unpack-objects`) CPU time during the run.")
    if r.get("formats"):
        title = "## save-sha256: a one-file edit, committed and pushed, on a SHA-256 repository vs SHA-1 and git"
        return formats.table(r, sections(title, produced_by(r), formats.lead(r), intro(r)), "git", method, EVERY,
                             "status after (s)", lambda _, f: packs_md(*r["packs"][f]))
    return sections("## save: a one-file edit, committed and pushed", produced_by(r), intro(r), "### Results",
                    summary_table(runs, r["contenders"]), lines, method, repo_md(r["repo"]), machine_md(r),
                    EVERY, runs_table(runs, "status after (s)"))
