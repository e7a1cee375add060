"""baked: a boot from a baked template (base: BENCH_BAKED_BASE first-parent commits behind the
default branch, TIP_SHA: BENCH_BAKED_TIP behind), each run in a fresh folder prepared unmeasured
(hyperfine's --prepare):
  baked-boot    `git-session bake` at the base; measured: `git-session restore` at TIP_SHA
  git-recipe    depth-1 fetch of the base + `checkout --detach`; measured: `git fetch --depth 1
                origin TIP && git switch -c BRANCH TIP` (git's same-cache recipe)
  cold-restore  `git-session restore` into an empty folder
  cache-boot    `git-session restore --cache CACHE` into an empty folder (one cache for all rounds)
reporting wall, peak RSS, server CPU and the bytes the server sent; then BENCH_LOAD baked boots
(copies of one template, `cp -a`) at once, and as many cold restores at once: p50, p95, total
server CPU. With --link (link.py): through the remote-server model, without the load test."""

import os
import shlex
import subprocess
import time
from pathlib import Path

from . import common, link, repo, rounds, servers
from .report import (machine_md, median, medians_note, mib, produced_by, ratio, ratio_verdict, repo_md,
                     runs_table, secs, sections, span)

CONTENDERS = ["baked-boot", "git-recipe", "cold-restore", "cache-boot"]
SWITCH = 'set -e; git -c protocol.version=2 -C "$1" fetch -q --depth 1 origin "$2"; git -C "$1" switch -q -c "$3" "$2"'


class Baked(rounds.Mode):
    prefix = "baked"

    def __init__(self, url, spec, cache, model=None):
        self.url, self.s, self.cache, self.link = url, spec, cache, model

    def prepare(self, name, d, r):
        """The template each contender boots from."""
        q = lambda *a: shlex.join(map(str, a))
        base = self.s["base"]
        if name == "baked-boot":
            return q("env", f"READ_URL={self.url}", f"TIP_SHA={base}", common.BIN, "-C", d, "-q", "bake")
        if name == "git-recipe":
            return "\n".join([q("git", "init", "-q", d), q("git", "-C", d, "remote", "add", "origin", self.url),
                              q("git", "-c", "protocol.version=2", "-C", d, "fetch", "-q", "--depth", "1", "origin",
                                f"{base}:refs/remotes/origin/{self.s['branch']}"),
                              q("git", "-C", d, "checkout", "-q", "--detach", base)])
        return ""

    def command(self, name, d, r):
        if name == "git-recipe":
            return ["bash", "-c", SWITCH, "_", d, self.s["tip"], common.BRANCH]
        cache = ["--cache", self.cache] if name == "cache-boot" else []
        return ["env", f"READ_URL={self.url}", f"SESSION_BRANCH={common.BRANCH}", f"TIP_SHA={self.s['tip']}",
                common.BIN, "-C", d, "restore", *cache]

    def verify(self, name, d, log, r):
        check(f"baked: {name}", d, self.s["tip"], log)
        return {}


def check(name, d, tip, log):
    """HEAD on the branch at TIP_SHA, the work tree exactly TIP_SHA's, `git status` clean."""
    rounds.check_head(name, d, tip, log)
    if subprocess.run(["git", "-C", str(d), "diff", "--quiet", tip, "--"]).returncode:
        common.die(f"{name}: the work tree in {d} differs from {tip}")
    rounds.clean_status(name, d)


def spec(info):
    """The base and TIP_SHA, first-parent commits behind the default branch."""
    base_n, tip_n = common.knob("BENCH_BAKED_BASE"), common.knob("BENCH_BAKED_TIP")
    if tip_n > base_n:
        common.die(f"BENCH_BAKED_TIP ({tip_n}) must be no more commits back than BENCH_BAKED_BASE ({base_n}) (equal: a boot at the base)")
    path, ref, branch = info["path"], info["ref"], info["branch"]
    base = common.git(path, "rev-parse", "-q", "--verify", f"{ref}~{base_n}^{{commit}}", check=False)
    if not base:
        common.die(f"{path}: {branch} has no commit {base_n} back (first parent): set BENCH_BAKED_BASE")
    tip = common.git(path, "rev-parse", "--verify", f"{ref}~{tip_n}^{{commit}}")
    changed = len(common.git(path, "diff", "--name-only", base, tip).splitlines())
    common.say(f"baked: base {base} ({branch}~{base_n}), TIP_SHA {tip} ({branch}~{tip_n}): {changed} files differ")
    return {"base": base, "tip": tip, "branch": branch, "base_label": f"{branch}~{base_n}",
            "tip_label": f"{branch}~{tip_n}", "changed": changed}


def bake(url, base, d):
    d.parent.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"READ_URL": url, "TIP_SHA": base}
    if subprocess.run([str(common.BIN), "-C", str(d), "-q", "bake"], env=env).returncode:
        common.die(f"baked: baking {d} failed")


def load_batch(kind, n, url, s, meter):
    """N boots of `kind` (baked-boot, from copies of the template, or cold-restore) at once."""
    root = common.RUNS / "load"
    dirs = [root / f"{kind}-{i}" for i in range(n)]
    for d in dirs:  # as a template image is copied: mtimes kept, new inodes and ctimes
        if kind == "baked-boot":
            common.sh(["cp", "-a", root / "template", d])
        else:
            d.mkdir(parents=True)
    common.settle()
    env = os.environ | {"READ_URL": url, "SESSION_BRANCH": common.BRANCH, "TIP_SHA": s["tip"]}
    s0, t0 = meter.now(), time.monotonic()
    procs = [subprocess.Popen(rounds.timed(f"{d}.time", [common.BIN, "-C", d, "restore"]), env=env,
                              stdout=open(f"{d}.log", "w"), stderr=subprocess.STDOUT) for d in dirs]
    failed = [d for d, p in zip(dirs, procs) if p.wait()]
    batch = time.monotonic() - t0
    time.sleep(0.3)
    cost = servers.Meter.delta(s0, meter.now())
    for d in failed:
        common.show(Path(f"{d}.log").read_text())
    if failed:
        os.environ["BENCH_KEEP"] = "1"
        common.die(f"load: a {kind} boot failed (of {n} at once); {common.RUNS} is left in place")
    for d in dirs:
        check(f"load {d.name}", d, s["tip"], Path(f"{d}.log"))
    walls = sorted(float(Path(f"{d}.time").read_text().split()[-4]) for d in dirs)
    i95 = min(n, int(n * 0.95 + 0.999))
    return {"p50": walls[(n + 1) // 2 - 1], "p95": walls[i95 - 1], "max": walls[-1], "batch_s": round(batch, 2),
            "server_cpu_s": cost["server_cpu_s"], "sent_bytes": cost["sent_bytes"]}


def measure(args, srv, url, s, meter, model):
    """The rounds (one baked cache for cache-boot's every round: restore --cache reads it, never
    writes it), then, on the shared cores, the load test."""
    n, warmup = common.rounds()
    if model:
        warmup = max(warmup, 1)  # the warm-up fills the proxy's memory: the measured rounds are all replays
    cache = common.RUNS / "baked/cache"
    bake(url, s["base"], cache)
    common.settle()
    name = f"baked-link-{model[0]:g}" if model else "baked"
    load_before, t0 = common.check_load(name), time.monotonic()
    runs = rounds.loop(Baked(url, s, cache, model), CONTENDERS, n, warmup, meter)
    took = time.monotonic() - t0
    load, load_n = {}, common.knob("BENCH_LOAD")
    if not model:
        common.say(f"baked: load: {load_n} baked boots at once, then {load_n} cold restores at once")
        bake(url, s["base"], common.RUNS / "load/template")
        load = {k: load_batch(k, load_n, url, s, meter) for k in ("baked-boot", "cold-restore")}
    return rounds.results(args, name, "baked", took, load_before, runs, n, warmup, contenders=CONTENDERS,
                          load=load, load_n=load_n, link=list(model) if model else None, **s)


def run(args):
    common.need("git", "cp", "time")
    info = repo.get(args)
    s, model = spec(info), link.model(args)
    for d in ("baked", "load"):
        common.delete(common.RUNS / d)
    with servers.GitServer(Path(info["path"]), info["ref"]) as srv:
        if model:
            px, stats = link.proxy(srv, model)
            with px:
                r = measure(args, srv, f"{px.value}/repo.git", s, srv.meter(stats), model)
        else:
            r = measure(args, srv, srv.url, s, srv.meter(), None)
    r["repo"] = info
    common.remove(common.RUNS / "baked", common.RUNS / "load")
    return r


def results_md(r):
    runs = r["runs"]
    rows = ["| contender | median wall (s) | wall range (s) | median peak RSS (MiB) | client user / sys CPU (s) "
            "| median server CPU (s) | median bytes the server sent |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in CONTENDERS:
        m = lambda k: median(runs, n, k)
        rows.append(f"| {n} | {secs(m('wall_s'))} | {span(runs, n)} | {mib(m('rss_kib'))} | {secs(m('user_s'))} / "
                    f"{secs(m('sys_s'))} | {secs(m('server_cpu_s'))} | {m('sent_bytes'):.0f} |")
    m = lambda n, k="wall_s": median(runs, n, k)
    bb, gr, cr = m("baked-boot"), m("git-recipe"), m("cold-restore")
    bbb, grb, crb = (m(n, "sent_bytes") for n in ("baked-boot", "git-recipe", "cold-restore"))
    return sections("\n".join(rows), "\n".join([
        f"- baked-boot ÷ git-recipe, median wall: {ratio_verdict(bb, gr, 0.6)}",
        f"- baked-boot ÷ cold-restore, bytes the server sent: {ratio_verdict(bbb, crb, 0.25)}; median wall: "
        f"{ratio_verdict(bb, cr, 0.35)}",
        f"- bytes the server sent, baked-boot ÷ git-recipe (the same fetch): {ratio_verdict(bbb, grb, 1.0)}",
        f"- cache-boot ÷ cold-restore, median wall: {ratio(m('cache-boot'), cr)}"]))


def load_md(r):
    rows = ["| kind | p50 wall (s) | p95 wall (s) | slowest (s) | whole batch (s) | total server CPU (s) "
            "| bytes the server sent |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind, x in r["load"].items():
        rows.append(f"| {r['load_n']} × {kind} | {x['p50']:.2f} | {x['p95']:.2f} | {x['max']:.2f} | {x['batch_s']:.2f} "
                    f"| {x['server_cpu_s']:.2f} | {x['sent_bytes']} |")
    return sections(
        f"### Load: {r['load_n']} boots at once against the one server",
        "Each baked boot runs in its own copy (`cp -a`, as a template image is copied: mtimes kept, new inodes and\n"
        "ctimes) of one tree baked at the base; each cold restore in an empty directory. All "
        f"{r['load_n']} of a kind start\ntogether; every one must succeed and pass the checks above. "
        "Each boot's wall time from GNU `/usr/bin/time`.", "\n".join(rows))


def intro(r):
    b = common.BRANCH
    return (
        f"The template is baked at the base `{r['base_label']}` and every contender ends on `refs/heads/{b}` at\n"
        f"`TIP_SHA` = `{r['tip_label']}` ({r['changed']} files differ), with the work tree exactly `TIP_SHA`'s "
        "(`git diff --quiet`) and\na clean `git status` (checked after every run). Set up before each run, "
        "unmeasured (hyperfine's `--prepare`):\n\n"
        "- **baked-boot**: `READ_URL=$URL TIP_SHA=$BASE git-session -C DIR bake`; measured:\n"
        f"  `READ_URL=$URL SESSION_BRANCH={b} TIP_SHA=$TIP git-session -C DIR restore`\n"
        "- **git-recipe** (git's same-cache recipe): a depth-1 clone at the base, `git init DIR && git remote add "
        "origin $URL &&\n"
        f"  git fetch --depth 1 origin $BASE:refs/remotes/origin/{r['branch']} && git checkout --detach $BASE` "
        "(the ref is what a clone leaves, and what git's fetch sends as `have`);\n"
        f"  measured: `git fetch -q --depth 1 origin $TIP && git switch -q -c {b} $TIP`\n"
        "- **cold-restore**: nothing; measured: the same `git-session restore` into an empty directory\n"
        "- **cache-boot**: nothing (one cache baked at the base for all rounds); measured:\n"
        "  `git-session -C DIR restore --cache CACHE` into an empty directory")


def table(r):
    if r.get("link"):
        return link.baked_table(r)
    method = (medians_note(r) + "\nWall time from hyperfine; peak RSS and client CPU from GNU `/usr/bin/time` "
              "(for git, the largest single process). \"server CPU\"\nis that of `examples/serve` and the git "
              "processes it reaped during the run; \"bytes the server sent\" are the response\nbodies of every "
              "request of the run (`examples/serve --sent-bytes`). The server shares the client's "
              f"{r['machine']['cores']} cores.")
    return sections("## baked: a boot from a baked template", produced_by(r), intro(r), "### Results",
                    results_md(r), load_md(r) if r["load"] else None, method, repo_md(r["repo"]), machine_md(r), "### Every run",
                    runs_table(r["runs"], "-"))
