"""What every mode shares: paths and knobs, the binaries, hyperfine, peak RSS, the machine, results
and BENCHMARKS.md's sections."""

import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench-work")).absolute()
RUNS = WORK / "runs"
RESULTS = Path(os.environ.get("BENCH_RESULTS", ROOT / "bench" / "results")).absolute()
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).absolute()
BIN = Path(os.environ.get("BENCH_BIN", TARGET / "release/git-session")).absolute()
SERVE = Path(os.environ.get("BENCH_SERVE", TARGET / "release/examples/serve")).absolute()
STAMP = BIN.with_name(BIN.name + ".built-from")
DOC = Path(os.environ.get("BENCH_DOC", ROOT / "BENCHMARKS.md")).absolute()
TIME = "/usr/bin/time"
BRANCH = "sessions/bench"
# BENCHMARKS.md's sections by kind, in their order (a section named after a kind and a link rate,
# restore-link-12.5, sits with its kind).
SECTIONS = ["restore", "restore-v0", "restore-link", "restore-sha256", "timeline", "save", "save-sha256", "save-signed", "archive", "baked",
            "baked-link", "version", "lfs", "sparse", "lfs-link", "agents", "sessions", "sessions-link", "fleet"]
# The knobs and their defaults: those that differ are written into the command a section gives.
KNOBS = {"BENCH_ROUNDS": "5", "BENCH_WARMUP": "1", "BENCH_ARCHIVE_ROUNDS": "3", "BENCH_BIG_MIB": "1024",
         "BENCH_VERSION_RUNS": "200", "BENCH_BAKED_BASE": "30", "BENCH_BAKED_TIP": "3",
         "BENCH_LOAD": "16", "BENCH_SAVE_EDIT": "middle", "BENCH_SETTLE": "3", "BENCH_SETTLE_DELETED": "310",
         "BENCH_SETTLE_MAX": "900",
         "BENCH_BIN": None, "BENCH_SERVE": None,
         "BENCH_LFS_FILES": "200", "BENCH_SPARSE_REPO": None, "BENCH_SPARSE_DIR": "Documentation",
         "BENCH_AGENTS_REPO": None, "BENCH_AGENTS_FS_MIB": "4096",
         "BENCH_SESSIONS_REPO": None, "BENCH_FLEET_N": "100", "BENCH_FLEET_REPO": None}


class Failed(SystemExit):
    """A benchmark failed: its work folder is kept for a look."""


def say(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def show(text):
    """Output a failed command left, for the reader (stderr)."""
    print(text, file=sys.stderr, flush=True)


def die(msg):
    raise Failed(f"bench: {msg}")


def sh(cmd, **kw):
    """Run `cmd` (a list), failing loudly; returns stdout."""
    out = subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kw)
    return out.stdout.strip()


def git(repo, *args, check=True):
    """`git -C repo ARGS`: stdout, or None when it fails and `check` is off."""
    out = subprocess.run(["git", "-C", str(repo), *map(str, args)], capture_output=True, text=True)
    if out.returncode and check:
        die(f"git -C {repo} {' '.join(map(str, args))} failed: {out.stderr.strip()}")
    return out.stdout.strip() if out.returncode == 0 else None


def knob(name, minimum=1):
    """An integer knob from the environment (default in KNOBS), at least `minimum`."""
    value = os.environ.get(name, KNOBS[name])
    if not re.fullmatch(r"[0-9]+", value) or int(value) < minimum:
        die(f"{name} must be an integer of at least {minimum}, not {value!r}")
    return int(value)


def rounds():
    return knob("BENCH_ROUNDS"), knob("BENCH_WARMUP", 0)


def neutralize():
    """Nothing from the user's or the system's git config, nor a session's variables: the same,
    neutral git for every contender."""
    for name in ("GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES "
                 "GIT_NAMESPACE GIT_PROTOCOL GIT_TRACE GIT_TRACE_PACKET GIT_CURL_VERBOSE SESSION_DIR "
                 "READ_URL READ_URL_FILE PUSH_URL PUSH_URL_FILE ARCHIVE_URL SESSION_BRANCH TIP_SHA RUST_LOG "
                 "GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL "
                 "GIT_COMMITTER_DATE HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy").split():
        os.environ.pop(name, None)
    os.environ.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
                      LC_ALL="C")


def build():
    """The release binary and the test server (skipped with BENCH_NO_BUILD=1), and beside the
    binary what it was built from, which a later BENCH_NO_BUILD run reports."""
    if os.environ.get("BENCH_NO_BUILD") in (None, "", "0"):
        say("building (cargo build --release --bin git-session --example serve)")
        label = source_label()
        subprocess.run(["cargo", "build", "--release", "--bin", "git-session", "--example", "serve"],
                       cwd=ROOT, check=True, stdout=sys.stderr)
        STAMP.write_text(label + "\n")
    for path in (BIN, SERVE):
        if not os.access(path, os.X_OK):
            die(f"missing {path} (build it, or drop BENCH_NO_BUILD)")


def need(*tools):
    """The tools a mode runs, and GNU time."""
    for tool in tools:
        if not shutil.which(tool):
            die(f"{tool} is needed")
    out = subprocess.run([TIME, "--version"], capture_output=True, text=True) if os.access(TIME, os.X_OK) else None
    if out is None or "GNU" not in out.stdout + out.stderr:
        die(f"GNU time is needed at {TIME} (apt-get install time)")


def ensure_hyperfine():
    """hyperfine from Debian when it is missing."""
    if shutil.which("hyperfine"):
        return
    print("bench: installing hyperfine", file=sys.stderr)
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "hyperfine"]
    if subprocess.run(install, env=env).returncode:
        # A fresh machine has no package lists yet.
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    if not shutil.which("hyperfine"):
        die("hyperfine is needed: apt-get install hyperfine")


def git_env(home):
    """An isolated environment for git (and git-lfs, installed in that HOME)."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").touch()
    return {
        "PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "NO_PROXY": "127.0.0.1", "LC_ALL": "C",
        "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
    }


def link():
    """BENCH_LINK=RATE[,RTT_MS] (or --link): the remote-server model's link, or None."""
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
        subprocess.run([TIME, "-o", out.name, "-f", "%M", "bash", "-c", command],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return int(open(out.name).read().split()[-1])


def source_label():
    """The commit the work tree is at, and whether its source differs from it."""
    head = git(ROOT, "rev-parse", "--short", "HEAD", check=False) or "unknown"
    dirty = git(ROOT, "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock", "examples", check=False)
    return head + (" + uncommitted changes in src/" if dirty else "")


def built_from():
    """What the measured binary was built from: the stamp its build left (newer than the binary),
    not the work tree, which may have moved on since."""
    if "BENCH_BIN" in os.environ:
        return f"the binary {os.environ['BENCH_BIN']}"
    try:
        if STAMP.stat().st_mtime >= BIN.stat().st_mtime:
            return STAMP.read_text().strip()
    except OSError:
        pass
    return f"unknown: built outside the bench (the work tree is at {source_label()})"


def machine():
    """What the figures were taken on."""
    cpu = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
    mem = re.search(r"^MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text(), re.M)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "uname": f"{platform.system()} {platform.release()} {platform.machine()}",
        "cpu": cpu.group(1) if cpu else "unknown",
        "memory_gib": round(int(mem.group(1)) / 1048576, 1) if mem else None,
        "git": sh(["git", "--version"]),
        "commit": sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "built_from": built_from(),
        "version": sh([BIN, "--version"]) if BIN.exists() else None,
    }


def load_avg():
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def check_load(mode):
    """The load average before a mode's rounds (warned about when other work runs)."""
    load = load_avg()
    if float(load.split()[0]) > 0.5:
        say(f"warning: load average {load} before the {mode} benchmark: other work on this machine adds noise")
    return load


def io_pressure():
    """The share of the last 10 s some task waited on I/O (/proc/pressure/io), or None."""
    try:
        with open("/proc/pressure/io") as f:
            return float(re.search(r"some avg10=([0-9.]+)", f.read()).group(1))
    except (OSError, AttributeError):
        return None


DELETED_AT = WORK / ".deleted-at"


def deleted_now():
    """Note that trees were just deleted (for settle(), in this run and the next)."""
    WORK.mkdir(parents=True, exist_ok=True)
    DELETED_AT.write_text(f"{time.time()}\n")


def settle():
    """Let the disk settle after deleting trees: BENCH_SETTLE seconds; then, when this or an
    earlier run deleted trees less than BENCH_SETTLE_DELETED seconds ago, the rest of that time;
    then until the I/O pressure is below 1% (at most BENCH_SETTLE_MAX seconds).

    Why the wait after deleting: ext4 without a journal (this machine's root) does not reuse an
    inode freed less than 60 s ago (300 s while its inode-table block is dirty, which creating
    files next to it makes it): `find_inode_bit` calls `recently_deleted` on every freed inode it
    passes, a buffer lookup each. After a run deleted its 600,000 files, every file created for
    the next 5 minutes took 10x its system time (perf: `recently_deleted` under `ext4_create`),
    and `tar -x` of the 24,000-file tree 6.5 s instead of 0.6 s."""
    subprocess.run(["sync"])
    time.sleep(knob("BENCH_SETTLE", 0))
    try:
        since = time.time() - float(DELETED_AT.read_text())
    except (OSError, ValueError):
        since = None
    wait = knob("BENCH_SETTLE_DELETED", 0) - since if since is not None else 0
    if wait > 0:
        say(f"waiting {wait:.0f} s: trees were deleted {since:.0f} s ago, and until "
            f"{knob('BENCH_SETTLE_DELETED', 0)} s have passed creating files is slow (see settle())")
        time.sleep(wait)
    start = time.monotonic()
    limit = knob("BENCH_SETTLE_MAX", 0)
    while (p := io_pressure()) is not None and p >= 1.0:
        if time.monotonic() - start > limit:
            say(f"warning: the disk is still busy (I/O pressure {p}%) after {limit} s: "
                "the walls will be noisy")
            return
        time.sleep(5)
    waited = time.monotonic() - start
    if waited >= 5:
        say(f"waited {waited:.0f} s for the disk to settle (I/O pressure below 1%)")


def delete(*paths):
    """Delete trees, noting it for settle() when they held anything."""
    for p in paths:
        if not os.path.lexists(p):
            continue
        with os.scandir(p) as entries:
            held = any(True for _ in entries)
        shutil.rmtree(p, ignore_errors=True)
        if held:
            deleted_now()


def remove(*paths):
    """Delete trees a mode made (kept with BENCH_KEEP=1)."""
    if not os.environ.get("BENCH_KEEP"):
        delete(*paths)


def command_line(argv):
    """The command as run, for a section: the knobs that differ from their defaults, then it."""
    knobs = [f"{k}={os.environ[k]}" for k, d in KNOBS.items() if os.environ.get(k, d) != d]
    words = [w if re.fullmatch(r"[A-Za-z0-9._,=/:+-]+", w) else shlex.quote(w) for w in argv]
    return " ".join(knobs + ["python3 -m bench.suite"] + words)


def save(mode, results):
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{mode}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def load(mode):
    return json.loads((RESULTS / f"{mode}.json").read_text())


def kind(name):
    """A section's kind: restore-link-12.5 -> restore-link."""
    return re.sub(r"-[0-9][0-9.]*$", "", name)


def write_section(name, text, path=DOC):
    """Replace the `<!-- bench:NAME -->` section of BENCHMARKS.md; a new one goes after the last
    section of its kind, else before the first section of a later kind (SECTIONS), else at the end."""
    doc = path.read_text()
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in doc:
        before, rest = doc.split(start, 1)
        path.write_text(before + block + rest.split(end, 1)[1])
        return
    rank = lambda n: SECTIONS.index(kind(n)) if kind(n) in SECTIONS else len(SECTIONS)
    names = re.findall(r"^<!-- /bench:([a-z0-9.-]+) -->$", doc, re.M)
    after = [n for n in names if rank(n) <= rank(name)]
    if after:
        mark = f"<!-- /bench:{after[-1]} -->"
        i = doc.index(mark) + len(mark)
        doc = doc[:i] + "\n\n" + block + doc[i:]
    elif names:
        i = doc.index(f"<!-- bench:{names[0]} -->")
        doc = doc[:i] + block + "\n\n" + doc[i:]
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
