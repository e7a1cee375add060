"""What every mode shares: the binaries, the servers, hyperfine, peak RSS, results and tables."""

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench-work"))
RESULTS = ROOT / "bench" / "results"
BIN = Path(os.environ.get("BENCH_BIN", ROOT / "target/release/git-session"))
SERVE = ROOT / "target/release/examples/serve"


def sh(cmd, **kw):
    """Run `cmd` (a list), failing loudly; returns stdout."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    return out.stdout.strip()


def build():
    """The release binary and the test server (skipped with BENCH_NO_BUILD=1)."""
    if os.environ.get("BENCH_NO_BUILD") == "1":
        return
    subprocess.run(
        ["cargo", "build", "--release", "--bin", "git-session", "--example", "serve"],
        cwd=ROOT,
        check=True,
    )


def ensure_hyperfine():
    """hyperfine from Debian when it is missing."""
    if shutil.which("hyperfine"):
        return
    print("bench: installing hyperfine", file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-qq", "hyperfine"], check=True)


def git_env(home):
    """An isolated environment for git (and git-lfs, installed in that HOME)."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").touch()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "NO_PROXY": "127.0.0.1",
        "LC_ALL": "C",
        "GIT_AUTHOR_NAME": "Bench",
        "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "Bench",
        "GIT_COMMITTER_EMAIL": "bench@example.com",
    }
    return env


class Process:
    """A server process started for a mode, killed on exit; `ready` parses its first line."""

    def __init__(self, cmd, ready, env=None):
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env,
        )
        line = self.proc.stdout.readline()
        self.value = ready(line)
        if not self.value:
            self.proc.kill()
            raise SystemExit(f"bench: {cmd[0]} did not start: {line!r}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def serve(root):
    """examples/serve (git http-backend) over the bare repositories under `root`: base URL."""
    return Process([str(SERVE), str(root)], lambda l: l.split()[1] if l.startswith("ready ") else None)


def giftless(store, port):
    """The giftless LFS server (scripts/peers installs it) on `port`: its base URL."""
    py = ROOT / "target/peers/giftless/venv/bin/python"
    if not py.exists():
        subprocess.run([str(ROOT / "scripts/peers")], check=True)
    return Process(
        [str(py), str(ROOT / "tests/peers/giftless_server.py"), str(store), str(port)],
        lambda l: f"http://127.0.0.1:{l.split()[1]}" if l.startswith("PORT ") else None,
    )


def replay_proxy(upstream, rate, rtt, port=0, keep_host=False):
    """scripts/replay-proxy in front of `upstream` (the remote-server model): its base URL."""
    cmd = [str(ROOT / "scripts/replay-proxy"), upstream, "--rate", str(rate), "--rtt", str(rtt),
           "--port", str(port)]
    if keep_host:
        cmd.append("--keep-host")
    return Process(cmd, lambda l: l.split()[1] if l.startswith("ready ") else None)


def link():
    """BENCH_LINK=RATE[,RTT_MS]: the remote-server model's link, or None (the shared cores)."""
    given = os.environ.get("BENCH_LINK")
    if not given:
        return None
    rate, _, rtt = given.partition(",")
    return float(rate), float(rtt or 20)


def hyperfine(commands, env, runs, warmup, cleanup=None):
    """Time `commands` ({name: shell command}) with hyperfine; {name: seconds stats}."""
    ensure_hyperfine()
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = ["hyperfine", "--shell=bash", "--runs", str(runs),
               "--warmup", str(warmup), "--export-json", out.name, "--style", "basic"]
        if cleanup:
            cmd += ["--cleanup", cleanup]
        for name, c in commands.items():
            cmd += ["--command-name", name, c]
        subprocess.run(cmd, check=True, env=env)
        data = json.load(open(out.name))
    return {
        r["command"]: {k: r[k] for k in ("mean", "stddev", "median", "min", "max")} | {"runs": len(r["times"])}
        for r in data["results"]
    }


def measure(commands, env):
    """hyperfine over `commands` (BENCH_ROUNDS runs after BENCH_WARMUP), then one run of each
    under GNU time for its peak RSS."""
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    stats = hyperfine(commands, env, rounds, int(os.environ.get("BENCH_WARMUP", "1")))
    for name, c in commands.items():
        stats[name]["peak_rss_kib"] = peak_rss_kib(c, env)
    return stats


def peak_rss_kib(command, env):
    """Peak RSS of one run of `command` (GNU time's %M, of the largest process it waited for)."""
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%M", "bash", "-c", command],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return int(open(out.name).read().split()[-1])


def machine():
    """What the figures were taken on."""
    return {
        "date": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "git": sh(["git", "--version"]),
        "commit": sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
    }


def save(mode, results):
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{mode}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def load(mode):
    return json.loads((RESULTS / f"{mode}.json").read_text())


def write_section(name, text):
    """Replace the `<!-- bench:NAME -->` section of BENCHMARKS.md (appended when missing)."""
    path = ROOT / "BENCHMARKS.md"
    doc = path.read_text()
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in doc:
        before, rest = doc.split(start, 1)
        doc = before + block + rest.split(end, 1)[1]
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc)


def contender_table(results, names):
    """A markdown table of the contenders' medians, spread, ratio to the last one, peak RSS."""
    base = results["contenders"][names[-1]]["median"]
    rows = ["| contender | median (s) | min–max (s) | ratio to " + names[-1] + " | peak RSS (MiB) |",
            "| --- | --- | --- | --- | --- |"]
    for n in names:
        c = results["contenders"][n]
        rows.append(f"| {n} | {c['median']:.2f} | {c['min']:.2f}–{c['max']:.2f} | "
                    f"{c['median'] / base:.2f}× | {c['peak_rss_kib'] / 1024:.0f} |")
    return "\n".join(rows)
