"""The measuring loop of restore, save, archive and baked.

`loop(mode, contenders, rounds, warmup, meter)` runs warmup + rounds rounds; in each, every contender
once, in an order that rotates every other round and is reversed every other round (so no contender
always runs first, or right after a given other one). `mode` may be a list of modes (one per object
format): then each contender runs in each, one right after the other, in an order that changes
likewise, and each run records its mode's format. Each run is one hyperfine run
(`hyperfine -N --runs 1 --export-json`): its --prepare does the mode's unmeasured set-up, `sync`, and a
snapshot of the server's costs; the command is the contender's, under GNU time (`/usr/bin/time -f
"%e %M %U %S"`: peak RSS, user and system CPU); its --cleanup waits 0.2 s (the server reaps its
processes) and snapshots again. Then the mode verifies the result (unmeasured). The wall time is
hyperfine's; the rest GNU time's and /proc's, as the bash bench measured them.
"""

import json
import shlex
import subprocess
import sys
import time

from . import common
from .servers import Meter

TIME_FORMAT = "%e %M %U %S"


class Mode:
    """What a mode gives the loop; each mode overrides `command` and `verify`, and may override the
    rest. `prepare` does Python-side set-up and returns shell text for hyperfine's --prepare."""

    prefix = "mode"
    env = None
    link = None  # (rate, rtt) behind the remote-server model: each run gets its wire time
    format = None  # the object format a run records (formats.py), when several are compared

    def dir(self, name, r):
        return common.RUNS / self.prefix / f"{r}-{name}"

    def prepare(self, name, d, r):
        return ""

    def command(self, name, d, r):
        raise NotImplementedError

    def verify(self, name, d, log, r):
        """Dies on a wrong result; returns the run's extra fields (e.g. {"status_s": 0.2})."""
        return {}

    def after(self, r):
        pass


def order(contenders, r):
    """Round r's order: rotated every other round, reversed every other round."""
    n = len(contenders)
    out = [contenders[(i + r // 2) % n] for i in range(n)]
    return out[::-1] if r % 2 == 1 else out


def loop(mode, contenders, rounds, warmup, meter):
    """The measured runs (dicts), after the warm-up rounds (run and checked the same way)."""
    modes, runs = mode if isinstance(mode, list) else [mode], []
    for r in range(warmup + rounds):
        label = f"warm-up {r + 1}/{warmup}" if r < warmup else f"round {r - warmup + 1}/{rounds}"
        for i, name in enumerate(order(contenders, r)):
            for m in order(modes, r + i):
                run = one(m, name, r, label, meter)
                if r >= warmup:
                    runs.append({"round": r - warmup + 1} | ({"format": m.format} if m.format else {}) | run)
        for m in modes:
            m.after(r)
    return runs


def timed(tf, argv):
    """`argv` under GNU time, its figures written to `tf`."""
    return [common.TIME, "-o", str(tf), "-f", TIME_FORMAT, *map(str, argv)]


def hyperfine_one(argv, prepare, cleanup, log, env, out_json):
    """One hyperfine run of `argv` (no shell) after `prepare`: its wall seconds, or None when it
    failed (its output and the command's are in `log`)."""
    common.ensure_hyperfine()
    cmd = ["hyperfine", "-N", "--runs", "1", "--warmup", "0", "--style", "none", "--output", "inherit",
           "--export-json", str(out_json), "--prepare", shlex.join(["bash", "-c", prepare]),
           "--cleanup", shlex.join(["bash", "-c", cleanup]), shlex.join(map(str, argv))]
    with open(log, "w") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode:
        return None
    return json.loads(out_json.read_text())["results"][0]["times"][0]


def read_time(tf):
    """GNU time's figures: peak RSS (KiB), user and system CPU (s)."""
    _, rss, user, system = [l for l in open(tf).read().splitlines() if l.strip()][-1].split()
    return {"rss_kib": int(rss), "user_s": float(user), "sys_s": float(system)}


def one(mode, name, r, label, meter):
    """One run of one contender: prepared, measured, checked; its figures."""
    d = mode.dir(name, r)
    d.mkdir(parents=True, exist_ok=True)
    base = common.RUNS / f"{mode.prefix}-{r}-{name}"
    tf, log, plog, s0, s1, js = (base.with_name(base.name + x)
                                 for x in (".time", ".log", ".prep.log", ".s0", ".s1", ".json"))
    prep = f"set -e\n{{ {mode.prepare(name, d, r) or ':'}\n}} >{shlex.quote(str(plog))} 2>&1\nsync\n{meter.shell(s0)}"
    wall = hyperfine_one(timed(tf, mode.command(name, d, r)), prep, f"sleep 0.2; {meter.shell(s1)}",
                         log, mode.env, js)
    if wall is None:
        print((plog.read_text() if plog.exists() else "") + log.read_text(), file=sys.stderr)
        common.die(f"{mode.prefix}: {name} failed ({label}); its output is above; {d} and "
                   f"{common.RUNS} are left in place")
    run = {"name": name, "wall_s": round(wall, 4)} | read_time(tf) | Meter.delta(Meter.read(s0), Meter.read(s1))
    run |= mode.verify(name, d, log, r)
    if getattr(mode, "link", None):  # the remote-server model: the run's wire time
        run["wire_s"] = round(run["proxy_bytes"] / (mode.link[0] * 1e6) + run["proxy_requests"] * mode.link[1] / 1000, 3)
        if name != "file-floor":
            run["extra"] = f"{run['wire_s']:.3f}"
    common.say(f"{mode.prefix:<8} {label:<14} {name:<13} wall {run['wall_s']:6.2f}s  peak RSS "
               f"{run['rss_kib'] / 1024:7.1f} MiB  user {run['user_s']:5.2f}s  sys {run['sys_s']:5.2f}s  "
               f"server CPU {run['server_cpu_s']:5.2f}s  sent {run['sent_bytes']:9} B  "
               + (f"received {run['proxy_bytes']:9} B  " if mode.link else "") +
               f"{' '.join(f'{k} {v}' for k, v in run.items() if k in ('status_s', 'wire_s', 'extra'))}")
    return run


def results(args, section, kind, took, load_before, runs, n, warmup, **rest):
    """A mode's raw results: what ran, when, on what, and every measured run (`took`: the seconds
    the rounds took)."""
    return {"mode": section, "kind": kind, "command": common.command_line(args.argv),
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "secs": round(took),
            "rounds": n, "warmup": warmup, "machine": common.machine(), "load_before": load_before,
            "load_after": common.load_avg(), "runs": runs} | rest


def clean_status(name, d):
    """`git status --porcelain` in `d` must be empty: the seconds it took."""
    t0 = time.monotonic()
    out = subprocess.run(["git", "-C", str(d), "status", "--porcelain"], capture_output=True, text=True)
    took = time.monotonic() - t0
    if out.returncode:
        common.die(f"{name}: git status failed in {d}: {out.stderr.strip()}")
    if out.stdout.strip():
        print("\n".join(out.stdout.splitlines()[:20]), file=sys.stderr)
        common.die(f"{name}: git status --porcelain in {d} is not empty ({len(out.stdout.splitlines())} lines)")
    return round(took, 2)


def check_head(name, d, sha, log):
    """HEAD in `d` is `sha`, on refs/heads/BRANCH."""
    head = common.git(d, "rev-parse", "HEAD", check=False)
    if head != sha:
        print(log.read_text() if log else "", file=sys.stderr)
        common.die(f"{name}: HEAD in {d} is {head!r}, expected {sha}")
    ref = common.git(d, "symbolic-ref", "-q", "HEAD", check=False)
    if ref != f"refs/heads/{common.BRANCH}":
        common.die(f"{name}: HEAD in {d} is {ref!r}, expected refs/heads/{common.BRANCH}")
