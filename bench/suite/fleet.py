"""fleet: BENCH_FLEET_N boots at once (default 100) against ONE git http-backend (examples/serve) on
127.0.0.1, on the cores the boots run on. The repository is tokio (BENCH_FLEET_REPO, default the
mirror `fetch` brings to /work/.mirror/tokio-rs+tokio/repo), served through a bare clone sharing its
objects whose session branch is its tip, TIP_SHA; the base is TIP_SHA~10 (first parent). One batch
of each kind, the N boots of a batch started together:
  baked-boot    `git-session restore` at TIP_SHA in a copy (`cp -a`) of a template baked at the base
  cold-restore  `git-session restore` at TIP_SHA into an empty folder
  git-cold      git's cold recipe: `git init`, `git fetch --depth 1 origin TIP_SHA`, `git switch -c`
Each boot is timed by GNU time and checked (HEAD on the branch at TIP_SHA, the work tree TIP_SHA's,
`git status` clean); a failed boot is counted, not fatal. Server CPU: the server runs in a cgroup of
its own (v1 cpuacct, or v2), which counts every process it starts (git http-backend, upload-pack),
reaped or not; without one, /proc/PID/stat's user + system of the server and the children it reaped.
Bytes: examples/serve --sent-bytes (response bodies); requests: --requests. Issue 43's goals: server
CPU per baked boot ÷ per cold boot ≤ 0.05×, p95 ÷ p50 of the baked boots ≤ 1.5."""

import os
import subprocess
import time
from pathlib import Path

from . import baked, common, rounds, servers
from .report import machine_md, ratio, ratio_verdict, sections

MIRROR = "/work/.mirror/tokio-rs+tokio/repo"
AHEAD = 10
KINDS = ["baked-boot", "cold-restore", "git-cold"]
GOAL_CPU, GOAL_SPREAD = 0.05, 1.5
GIT_COLD = ('set -e; git init -q "$1"; git -C "$1" remote add origin "$2"; '
            'git -c protocol.version=2 -C "$1" fetch -q --depth 1 origin "$3"; git -C "$1" switch -q -c "$4" "$3"')


def served(work, mirror, env):
    """The served repository (a bare clone sharing the mirror's objects), its session branch at
    its tip: (base, tip)."""
    bare = work / "srv" / "repo.git"
    if not bare.exists():
        common.sh(["git", "clone", "-q", "--bare", "--shared", mirror, bare], env=env)
    tip = common.git(bare, "rev-parse", "HEAD^{commit}")
    base = common.git(bare, "rev-parse", f"{tip}~{AHEAD}")
    common.git(bare, "update-ref", f"refs/heads/{common.BRANCH}", tip)
    return base, tip


class CpuGroup:
    """A cgroup of the server's own: the CPU seconds of every process in it (cgroup v1 cpuacct, or
    v2's cpu.stat), or `dir` None when none can be made (then /proc is read instead)."""

    def __init__(self, pid):
        v1, v2 = Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup")
        self.v2 = not v1.is_dir() and (v2 / "cgroup.controllers").exists()
        self.dir = (v2 if self.v2 else v1) / f"bench-fleet-{os.getpid()}"
        try:
            self.dir.mkdir()
            (self.dir / "cgroup.procs").write_text(f"{pid}\n")
        except OSError as e:
            common.say(f"fleet: no cgroup for the server ({e}): its CPU from /proc (reaped children only)")
            self.close()
            self.dir = None

    def now(self):
        if self.dir is None:
            return None
        if self.v2:
            usec = (self.dir / "cpu.stat").read_text().split("usage_usec", 1)[1].split()[0]
            return int(usec) / 1e6
        return int((self.dir / "cpuacct.usage").read_text()) / 1e9

    def close(self):
        """Removed once empty (the server's last processes may take a moment to leave)."""
        for _ in range(20):
            try:
                self.dir and self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)
        common.say(f"fleet: could not remove the cgroup {self.dir}")


def snapshot(pid, group, sent, requests):
    """The server's costs so far."""
    ticks, sent_bytes, *_ = servers.Meter(pid, sent).now()
    try:
        asked = int(requests.read_text().split()[0])
    except (OSError, IndexError, ValueError):
        asked = 0
    return {"cgroup_cpu_s": group.now(), "proc_cpu_s": ticks / servers.TICKS, "sent_bytes": sent_bytes,
            "requests": asked}


def delta(a, b):
    out = {k: (b[k] - a[k] if a[k] is not None else None) for k in a}
    out["server_cpu_s"] = out["cgroup_cpu_s"] if out["cgroup_cpu_s"] is not None else out["proc_cpu_s"]
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


def prepare(kind, dirs, template):
    """Each boot's folder: a copy of the template (as a template image is copied: mtimes kept, new
    inodes and ctimes), an empty folder, or none (git init makes it)."""
    for d in dirs:
        if kind == "baked-boot":
            common.sh(["cp", "-a", template, d])
        elif kind == "cold-restore":
            d.mkdir(parents=True)


def argv(kind, d, url, tip):
    if kind == "git-cold":
        return ["bash", "-c", GIT_COLD, "_", d, url, tip, common.BRANCH]
    return [common.BIN, "-C", d, "restore"]


def problem(d, tip, code):
    """Why boot `d` failed (exit code, HEAD, work tree, status), or None."""
    if code:
        return f"exit {code}"
    if common.git(d, "rev-parse", "HEAD", check=False) != tip:
        return "HEAD is not TIP_SHA"
    if common.git(d, "symbolic-ref", "-q", "HEAD", check=False) != f"refs/heads/{common.BRANCH}":
        return f"HEAD is not on {common.BRANCH}"
    if subprocess.run(["git", "-C", str(d), "diff", "--quiet", tip, "--"]).returncode:
        return "the work tree differs from TIP_SHA"
    if common.git(d, "status", "--porcelain", check=False) != "":
        return "git status is not clean"
    return None


def summary(dirs, codes, tip):
    """Successes, the walls of the successful boots (sorted), p50/p95/max, client CPU, failures."""
    walls, cpu, failed = [], 0.0, {}
    for d, code in zip(dirs, codes):
        line = [l for l in Path(f"{d}.time").read_text().splitlines() if l.strip()][-1].split()
        cpu += float(line[2]) + float(line[3])
        if why := problem(d, tip, code):
            failed[d.name] = why
        else:
            walls.append(float(line[0]))
    walls.sort()
    n = len(walls)
    pick = lambda q: walls[min(n, max(1, int(n * q + 0.999))) - 1] if walls else None  # noqa: E731
    return {"successes": n, "p50": pick(0.5), "p95": pick(0.95), "max": walls[-1] if walls else None,
            "walls": walls, "client_cpu_s": round(cpu, 2), "failed": failed}


def batch(kind, n, url, tip, probe):
    """N boots of `kind` at once: their figures and the server's costs meanwhile."""
    root = common.RUNS / "fleet"
    dirs = [root / f"{kind}-{i}" for i in range(n)]
    prepare(kind, dirs, root / "template")
    common.settle()
    env = os.environ | {"READ_URL": url, "SESSION_BRANCH": common.BRANCH, "TIP_SHA": tip}
    logs = [open(f"{d}.log", "w") for d in dirs]
    a, t0 = probe(), time.monotonic()
    procs = [subprocess.Popen(rounds.timed(f"{d}.time", argv(kind, d, url, tip)), env=env, stdout=log,
                              stderr=subprocess.STDOUT) for d, log in zip(dirs, logs)]
    codes = [p.wait() for p in procs]
    took = time.monotonic() - t0
    time.sleep(0.5)  # the server's last processes exit
    cost = delta(a, probe())
    for log in logs:
        log.close()
    out = summary(dirs, codes, tip) | {"n": n, "batch_s": round(took, 2)} | cost
    for name, why in list(out["failed"].items())[:3]:
        common.show(f"fleet: {name} failed: {why}\n" + (root / f"{name}.log").read_text()[-2000:])
    common.say(f"fleet: {kind}: {out['successes']}/{n} in {took:.1f} s, p50 {out['p50']} s, p95 {out['p95']} s, "
               f"server CPU {out['server_cpu_s']} s, sent {out['sent_bytes']} B in {out['requests']} requests")
    return out


def run(args):
    common.need("git", "cp")
    n, t0 = common.knob("BENCH_FLEET_N"), time.monotonic()
    work, root = common.WORK / "fleet", common.RUNS / "fleet"
    base, tip = served(work, os.environ.get("BENCH_FLEET_REPO", MIRROR), common.git_env(work / "home"))
    common.delete(root)
    sent, requests = work / "serve.sent", work / "serve.requests"
    load = common.check_load("fleet")
    with servers.serve(work / "srv", sent, requests=requests) as srv:
        group = CpuGroup(srv.pid)
        try:
            url = f"{srv.value}/repo.git"
            baked.bake(url, base, root / "template")
            probe = lambda: snapshot(srv.pid, group, sent, requests)  # noqa: E731
            kinds = {k: batch(k, n, url, tip, probe) for k in KINDS}
            method = "cgroup" if group.dir else "proc"
        finally:
            srv.__exit__()
            group.close()
    common.remove(root)
    return {"mode": "fleet", "kind": "fleet", "command": common.command_line(args.argv),
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "secs": round(time.monotonic() - t0),
            "machine": common.machine(), "load_before": load, "load_after": common.load_avg(), "n": n,
            "repo": "tokio" if "BENCH_FLEET_REPO" not in os.environ else os.environ["BENCH_FLEET_REPO"],
            "base": base, "tip": tip, "ahead": AHEAD, "cpu_method": method, "kinds": kinds}


def rows(r):
    out = ["| kind | successes | p50 wall (s) | p95 wall (s) | slowest (s) | whole batch (s) | server CPU, total (s) "
           "| server CPU per boot (s) | bytes sent per boot | requests per boot | client CPU per boot (s) |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    f = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    for kind, x in r["kinds"].items():
        n = x["n"]
        out.append(f"| {kind} | {x['successes']} / {n} | {f(x['p50'])} | {f(x['p95'])} | {f(x['max'])} | "
                   f"{x['batch_s']:.2f} | {x['server_cpu_s']:.2f} | {x['server_cpu_s'] / n:.3f} | "
                   f"{x['sent_bytes'] / n:,.0f} | {x['requests'] / n:.1f} | {x['client_cpu_s'] / n:.2f} |")
    return "\n".join(out)


def ratios(r):
    k = r["kinds"]
    b, c, g = k["baked-boot"], k["cold-restore"], k.get("git-cold")
    lines = [f"- server CPU per baked boot ÷ per cold boot: {ratio_verdict(b['server_cpu_s'], c['server_cpu_s'], GOAL_CPU)}",
             f"- p95 ÷ p50 of the baked boots: {ratio_verdict(b['p95'] or 0, b['p50'] or 0, GOAL_SPREAD)}",
             f"- bytes sent per baked boot ÷ per cold boot: {ratio(b['sent_bytes'], c['sent_bytes'])}"]
    if r["cpu_method"] == "cgroup":
        lines.append("- server CPU as /proc/PID/stat counts it (the server and the children it had reaped), for "
                     "comparison: " + ", ".join(f"{kind} {x['proc_cpu_s']:.2f} s" for kind, x in k.items()))
    if g:
        lines += [f"- p50 wall, baked-boot ÷ git-cold: {ratio(b['p50'] or 0, g['p50'])}; cold-restore ÷ git-cold: "
                  f"{ratio(c['p50'] or 0, g['p50'])}",
                  f"- server CPU, cold-restore ÷ git-cold: {ratio(c['server_cpu_s'], g['server_cpu_s'])}"]
    return "\n".join(lines)


def table(r):
    cpu = ("a cgroup of the server's own (every process it started, reaped or not)" if r["cpu_method"] == "cgroup"
           else "/proc/PID/stat of the server (its own CPU and that of the children it reaped)")
    intro = (f"{r['n']} boots of each kind at once against one `examples/serve` (git http-backend) on 127.0.0.1, on the "
             f"same {r['machine']['cores']} cores as the boots, which other sessions share (noisy: read the ratios). "
             f"{r['repo']}: the session branch `{common.BRANCH}` at TIP_SHA `{r['tip'][:12]}`, {r['ahead']} "
             f"first-parent commits past the base `{r['base'][:12]}`. **baked-boot**: `git-session restore` in a copy "
             "(`cp -a`) of a template baked at the base (`git-session bake`); **cold-restore**: `git-session restore` "
             "into an empty folder; **git-cold**: `git init`, `git fetch --depth 1 origin $TIP`, `git switch -c`. "
             "Every boot checked (HEAD on the branch at TIP_SHA, the work tree TIP_SHA's, `git status` clean); walls "
             f"of the successful ones, from GNU time. Server CPU from {cpu}; bytes: the response bodies the server "
             f"sent. Produced by `{r['command']}` on {r['finished']} ({r['secs']} s; raw: bench/results/fleet.json).")
    smoke = "**Smoke run** (fewer than 100 boots at once): not the issue's figure." if r["n"] < 100 else None
    return sections(f"## fleet: {r['n']} boots at once against one server", intro, smoke, rows(r), ratios(r),
                    machine_md(r))
