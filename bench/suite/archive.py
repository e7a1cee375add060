"""archive: `git-session restore --archive-url URL` vs `curl -sSf URL | tar xzf - -C DIR
--strip-components 1`, both from the same `python3 -m http.server`, for two archives: `git archive
--format=tar.gz` of TIP_SHA (BENCH_ROUNDS rounds), and a generated one of BENCH_BIG_MIB MiB of files
(hex text, tar + gzip -1; BENCH_ARCHIVE_ROUNDS rounds), both cached under the work folder. The two
results are compared once (the first round) with `diff -r` and a listing of types, exec bits and
link targets; later rounds must extract as many files and links. Each archive's trees stay until
its last round (creating files right after deleting as many cost ext4 mounted with `discard`
seconds)."""

import hashlib
import os
import random
import subprocess
import time
from pathlib import Path

from . import common, repo, rounds, servers
from .report import (machine_md, median, produced_by, ratio_verdict, repo_md, runs_table, sections,
                     summary_table, verdict)

CONTENDERS = ["git-session", "curl-tar"]
BIG_VERSION = "v1"  # bump when the generated archive changes: the cache is keyed on it
ARCH_DIR = common.WORK / "archives"
LISTING = ("cd \"$1\" && find . -mindepth 1 -path ./.git -prune -o -printf '%y %P %l\\n' -type f -perm -u=x "
           "-printf 'x %P\\n' | sort")


class Archive(rounds.Mode):
    prefix = "archive"

    def __init__(self, kind, url, tip):
        self.kind, self.url, self.tip, self.count, self.same = kind, url, tip, None, "not checked"

    def dir(self, name, r):
        return common.RUNS / "archive" / f"{self.kind}-{r}-{name}"

    def command(self, name, d, r):
        if name == "git-session":
            return ["env", f"SESSION_BRANCH={common.BRANCH}", f"TIP_SHA={self.tip}", common.BIN, "-C", d,
                    "restore", "--archive-url", self.url]
        return ["bash", "-c", 'set -o pipefail; curl -sSf "$1" | tar xzf - -C "$2" --strip-components 1', "_",
                self.url, d]

    def verify(self, name, d, log, r):
        """extra: the number of files and links."""
        if name == "git-session" and not (d / ".git/git-session.json").is_file():
            common.show(log.read_text())
            common.die(f"archive: git-session left no session record in {d}")
        n = entries(d)
        if self.count is not None and n != self.count:
            common.die(f"archive: {name} extracted {n} files and links into {d}, the first round {self.count}")
        return {"extra": n}

    def after(self, r):
        """The first round: the two trees must be the same."""
        if r:
            return
        a, b = self.dir("git-session", r), self.dir("curl-tar", r)
        common.say("archive: comparing git-session's tree with curl | tar's (diff -r, types, exec bits, link targets)")
        diff = subprocess.run(["diff", "-r", "--no-dereference", "-x", ".git", str(a), str(b)],
                              capture_output=True, text=True)
        if diff.returncode:
            os.environ["BENCH_KEEP"] = "1"
            common.show("\n".join((diff.stdout + diff.stderr).splitlines()[:20]))
            common.die(f"archive ({self.kind}): git-session's {a} and curl | tar's {b} differ")
        listing = lambda d: common.sh(["bash", "-c", LISTING, "_", d])
        if listing(a) != listing(b):
            os.environ["BENCH_KEEP"] = "1"
            common.die(f"archive ({self.kind}): {a} and {b} differ in types, exec bits or link targets")
        self.count = entries(b)
        self.same = f"yes ({self.count} files and links)"


def entries(d):
    """Files and links under `d`, less its .git."""
    out = common.sh(["find", d, "-mindepth", "1", "-path", f"{d}/.git", "-prune", "-o", "!", "-type", "d", "-print"])
    return len(out.splitlines())


def repo_archive(info):
    """`git archive` of TIP_SHA (cached): its file name under ARCH_DIR."""
    name, sha = repo.name(Path(info["path"])), info["sha"]
    file = ARCH_DIR / f"{name}-{sha}.tar.gz"
    if not file.exists():
        common.say(f"archive: git archive --format=tar.gz --prefix={name}-{sha[:12]}/ {sha}")
        tmp = file.with_name(f"{file.name}.tmp.{os.getpid()}")
        common.git(info["path"], "archive", "--format=tar.gz", f"--prefix={name}-{sha[:12]}/", "-o", tmp, sha)
        tmp.rename(file)
    return file.name, name


def big_tree(root, mib_):
    """Files of 2–250 KiB of random hex text (so gzip halves it, and inflating it is real work), 256
    per folder, until the total reaches the size asked for (the same files as scripts/bench's)."""
    target, rng, total, n = mib_ << 20, random.Random(20240602), 0, 0
    while total < target:
        d = os.path.join(root, "d_%03d" % (n // 256))
        if n % 256 == 0:
            os.makedirs(d)
        size = min(rng.randrange(1, 126) * 2048, max(2, (target - total + 1) & ~1))
        with open(os.path.join(d, "f_%03d.txt" % (n % 256)), "wb") as f:
            f.write(rng.randbytes(size // 2).hex().encode())
        total += size
        n += 1
    return "%d files, %.0f MiB" % (n, total / 1048576)


def big_archive(mib_):
    """The generated archive (cached): (file name, its TIP, its description)."""
    # The TIP is a hash of what scripts/bench called it, so the cached archives stay valid.
    sha = hashlib.sha1(f"scripts/bench generated archive {BIG_VERSION} {mib_}".encode()).hexdigest()
    file = ARCH_DIR / f"big-{BIG_VERSION}-{mib_}mib.tar.gz"
    info = file.with_name(file.name + ".info")
    if not (file.exists() and info.exists()):
        common.say(f"archive: generating {mib_} MiB of files and {file.name} (tar + gzip -1; once, cached)")
        t0 = time.monotonic()
        src, tmp = (file.with_name(f"{file.name}.{x}.{os.getpid()}") for x in ("src", "tmp"))
        top = f"big-{sha[:12]}"
        try:
            (src / top).mkdir(parents=True)
            text = big_tree(src / top, mib_)
            subprocess.run(["bash", "-c", 'set -o pipefail; tar -C "$1" --sort=name --owner=0 --group=0 '
                            '--numeric-owner --mtime=@1700000000 -cf - "$2" | gzip -1 >"$3"', "_", src, top, tmp],
                           check=True)
            tmp.rename(file)
            info.write_text(text + "\n")
        finally:
            common.delete(src)
            tmp.unlink(missing_ok=True)
        common.say(f"archive: generated in {time.monotonic() - t0:.0f}s: {text}")
    return file.name, sha, info.read_text().strip()


def one(srv, kind, file, tip, n, warmup):
    """One archive's rounds: its part of the results."""
    mode = Archive(kind, f"{srv.value}/{file}", tip)
    if subprocess.run(["curl", "-sSfI", mode.url], capture_output=True).returncode:
        common.die(f"archive: curl -I {mode.url} failed")
    common.settle()  # after the archive generated or the kind before deleted
    runs = rounds.loop(mode, CONTENDERS, n, warmup, servers.Meter(srv.pid))
    common.remove(common.RUNS / "archive")
    return {"kind": kind, "file": file, "tip": tip, "rounds": n, "warmup": warmup, "same": mode.same,
            "bytes": (ARCH_DIR / file).stat().st_size, "runs": runs}


def run(args):
    common.need("git", "curl", "tar", "gzip", "diff", "find", "time")
    info = repo.get(args)
    n, warmup = common.rounds()
    big_rounds, big_mib = common.knob("BENCH_ARCHIVE_ROUNDS"), common.knob("BENCH_BIG_MIB")
    ARCH_DIR.mkdir(parents=True, exist_ok=True)
    repo_file, name = repo_archive(info)
    big_file, big_sha, big_info = big_archive(big_mib)
    raw = int(common.sh(["gzip", "-l", ARCH_DIR / repo_file]).splitlines()[1].split()[1])
    with servers.http_server(ARCH_DIR) as srv:
        common.say(f"serving {ARCH_DIR} at {srv.value}")
        load, t0 = common.check_load("archive"), time.monotonic()
        parts = [one(srv, "repo", repo_file, info["sha"], n, warmup),
                 one(srv, "big", big_file, big_sha, big_rounds, warmup)]
        took = time.monotonic() - t0
    parts[0]["title"] = (f"`git archive` of TIP_SHA: {repo_file}, {parts[0]['bytes'] // 1024} KiB "
                         f"(tar: {raw // 1048576} MiB)")
    parts[1]["title"] = f"generated: {big_file}, {parts[1]['bytes'] // 1048576} MiB ({big_info})"
    return rounds.results(args, "archive", "archive", took, load, [], n, warmup, repo=info, archives=parts,
                          repo_name=name, big_sha=big_sha, settle=common.knob("BENCH_SETTLE", 0))


def part_md(p):
    runs = p["runs"]
    rss = median(runs, "git-session", "rss_kib") / 1024
    return sections(
        f"#### {p['title']}", summary_table(runs, CONTENDERS),
        f"- git-session ÷ curl | tar, median wall: "
        f"{ratio_verdict(median(runs, 'git-session'), median(runs, 'curl-tar'), 1.0)}\n"
        f"- git-session's median peak RSS: {rss:.1f} MiB (target ≤ 32 MiB: {verdict(round(rss, 1), 32)})\n"
        f"- same files as curl | tar (`diff -r`, types, exec bits, link targets; first round): {p['same']}\n"
        f"- medians over {p['rounds']} round(s) after {p['warmup']} warm-up round(s)",
        "<details><summary>Every run</summary>", runs_table(runs, "files and links"), "</details>")


def intro(r):
    sha, big = r["repo"]["sha"], r["big_sha"]
    return (
        "Both contenders read the same `tar.gz` from the same `python3 -m http.server --bind 127.0.0.1` into a fresh\n"
        "empty directory:\n\n"
        f"- **git-session**: `SESSION_BRANCH={common.BRANCH} TIP_SHA=$TIP git-session -C DIR restore --archive-url $URL`\n"
        "  (it strips the one top-level folder, whose name holds TIP's first 7 hex digits, and adds a `.git`)\n"
        "- **curl-tar**: `curl -sSf $URL | tar xzf - -C DIR --strip-components 1` (one `bash -c`; GNU tar runs `gzip -d`)\n\n"
        f"Two archives: `git archive --format=tar.gz --prefix={r['repo_name']}-{sha[:12]}/ $SHA` of the repository's TIP_SHA\n"
        "(git's own gzip, with the commit id in its pax header), and a generated one: files of 2–250 KiB of random hex\n"
        f"text (so gzip halves it and inflating it is real work) under one folder `big-{big[:12]}`, made with\n"
        f"`tar` + `gzip -1`, without a commit id (git-session warns about that), TIP `{big}`.\n"
        "In the first round, git-session's tree (less its `.git`) and curl | tar's are compared with `diff -r`, and\n"
        "their listings of types, exec bits and link targets; later rounds must extract as many files and links.\n"
        f"Each archive's trees are deleted after its last round, then `sync` and {r['settle']}s of rest. Wall time from\n"
        "hyperfine; peak RSS and client CPU from GNU `/usr/bin/time`; for curl | tar, the peak RSS is that of the\n"
        "largest of curl, tar and gzip. \"server CPU\" is the Python server's CPU time during the run.")


def table(r):
    least = min(p["rounds"] for p in r["archives"])
    return sections("## archive: `git-session restore --archive-url` vs `curl | tar`", produced_by(r, least),
                    intro(r), "### Results", *(part_md(p) for p in r["archives"]), repo_md(r["repo"]),
                    machine_md(r))
