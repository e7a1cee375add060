"""version: `git-session --version` run BENCH_VERSION_RUNS times in a bash loop (each round's loop
timed by hyperfine; the mean per run), beside `git --version` and `true` (the loop's own cost),
BENCH_ROUNDS rounds after BENCH_WARMUP, the order rotating every round; the peak RSS of one run of
each (GNU time); and hyperfine's own figures (`hyperfine -N --warmup 20 --runs BENCH_VERSION_RUNS`)."""

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from . import common, rounds
from .report import machine_md, median, mib, produced_by, sections, verdict

NAMES = ["git-session", "git", "true"]
LOOP = 'n=$1; shift; for ((i = 0; i < n; i++)); do "$@" >/dev/null; done'


def commands(true_bin):
    return {"git-session": [str(common.BIN), "--version"], "git": ["git", "--version"], "true": [true_bin]}


def loop_ms(argv, runs, tmp):
    """The mean wall milliseconds per run of `argv`, run `runs` times in a bash loop."""
    log, js = tmp / "loop.log", tmp / "loop.json"
    wall = rounds.hyperfine_one(["bash", "-c", LOOP, "_", runs, *argv], ":", ":", log, None, js)
    if wall is None:
        common.show(log.read_text())
        common.die(f"version: the loop of {' '.join(argv)} failed")
    return round(wall / runs * 1000, 3)


def peak_rss(argv, tmp):
    out = tmp / "rss"
    subprocess.run([common.TIME, "-f", "%M", "-o", str(out), *argv], check=True, stdout=subprocess.DEVNULL)
    return int(out.read_text().split()[-1])


def hyperfine_rows(runs, tmp):
    """hyperfine's figures for git-session and git (ms)."""
    js = tmp / "hyperfine.json"
    subprocess.run(["hyperfine", "-N", "--warmup", "20", "--runs", str(runs), "--export-json", str(js),
                    f"{common.BIN} --version", "git --version"], check=True, stdout=subprocess.DEVNULL)
    return [{"command": r["command"].split("/")[-1]} | {k: r[k] * 1e3 for k in ("mean", "stddev", "min", "max")}
            for r in json.loads(js.read_text())["results"]]


def run(args):
    common.need("time")
    common.ensure_hyperfine()
    n, warmup = common.rounds()
    per = common.knob("BENCH_VERSION_RUNS")
    true_bin = shutil.which("true") or common.die("no true binary")
    cmds, runs = commands(true_bin), []
    load, t0 = common.check_load("version"), time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for r in range(warmup + n):
            for name in (NAMES[(i + r) % len(NAMES)] for i in range(len(NAMES))):
                ms = loop_ms(cmds[name], per, tmp)
                label = f"warm-up {r + 1}/{warmup}" if r < warmup else f"round {r - warmup + 1}/{n}"
                common.say(f"version  {label}  {name}: {ms} ms per run")
                if r >= warmup:
                    runs.append({"name": name, "round": r - warmup + 1, "ms": ms})
        took = time.monotonic() - t0
        rss = {name: peak_rss(cmds[name], tmp) for name in NAMES}
        common.say("version: hyperfine")
        hf = hyperfine_rows(per, tmp)
    return rounds.results(args, "version", "version", took, load, runs, n, warmup, rss_kib=rss, hyperfine=hf,
                          true_bin=true_bin, version_runs=per)


def results_md(r):
    runs, base = r["runs"], median(r["runs"], "true", "ms")
    label = {"git-session": "git-session --version", "git": "git --version", "true": "true"}
    rows = ["| command | median of the round means (ms per run) | range (ms) | minus the loop's own cost (ms) "
            "| peak RSS (MiB) |", "| --- | ---: | ---: | ---: | ---: |"]
    for n in NAMES:
        v = sorted(x["ms"] for x in runs if x["name"] == n)
        m = median(runs, n, "ms")
        rows.append(f"| `{label[n]}` | {m:.2f} | {v[0]:.2f}–{v[-1]:.2f} | {m - base:.2f} | {mib(r['rss_kib'][n])} |")
    gs = median(runs, "git-session", "ms")
    return "\n".join(rows) + "\n\n" + "\n".join([
        f"- `git-session --version`: {gs:.2f} ms per run (target ≤ 5 ms: {verdict(round(gs, 2), 5)}); it prints "
        f"`{r['machine']['version']}`",
        f"- medians over {r['rounds']} round(s) after {r['warmup']} warm-up round(s); the order of the commands "
        "rotates every round",
        "- peak RSS: GNU `/usr/bin/time -f %M`, one run"])


def table(r):
    hf = "\n".join(f"| `{x['command']}` | {x['mean']:.2f} ± {x['stddev']:.2f} | {x['min']:.2f} | {x['max']:.2f} |"
                   for x in r["hyperfine"])
    return sections(
        "## version: `git-session --version`", produced_by(r),
        f"Each round runs each command {r['version_runs']} times in a bash loop (`for …; do CMD >/dev/null; done`, "
        "the loop timed by\nhyperfine) and takes the mean per run: the process start-up a boot script pays for "
        f"every call. `true` ({r['true_bin']}) is the\nloop's own cost (fork, exec, wait).",
        "### Results", results_md(r),
        f"hyperfine (`hyperfine -N --warmup 20 --runs {r['version_runs']}`):",
        "| command | mean ± σ (ms) | min (ms) | max (ms) |\n| --- | ---: | ---: | ---: |\n" + hf,
        machine_md(r))
