"""restore: `git-session restore` vs the git CLI. Serves the repository over smart HTTP on 127.0.0.1
(examples/serve: real `git http-backend`), takes a non-tip commit (HEAD~1 of the default branch) as
TIP_SHA, and restores it into a fresh empty directory with each contender:
  git-session   READ_URL=… SESSION_BRANCH=sessions/bench TIP_SHA=… git-session -C DIR restore
  git-shallow   git init DIR; git fetch --depth 1 URL SHA; git switch -c sessions/bench SHA
  seeds-recipe  git clone --no-checkout URL DIR; git fetch origin SHA; git switch -c sessions/bench SHA
  server-floor  no client: curl POSTs git-session's fetch request and drops the pack, the wall time of
                the server and the wire alone (the best any client can do)
Every run ends with HEAD on refs/heads/sessions/bench at TIP_SHA and a clean `git status` (checked).
--protocol 0|2 (protocol.py): over one protocol, section restore-v0 or restore. --link RATE[,RTT]
(link.py): against the remote-server model, with a file-floor contender; section restore-link-RATE.
--object-format sha256|both (formats.py): on the SHA-256 repository (alongside the SHA-1 one), the git
contenders' `git init` with --object-format=sha256; section restore-sha256.
Every run gets its own directory, all deleted only at the end (deleting a tree this size right
before a run made the next run's file creation seconds slower)."""

import re
import time
from pathlib import Path

from . import common, formats, link, protocol, repo, rounds, servers
from .report import (machine_md, median, medians_note, produced_by, ratio, repo_md, runs_table, secs,
                     sections, summary_table)

CONTENDERS = ["git-session", "git-shallow", "seeds-recipe", "server-floor"]
LINK_CONTENDERS = ["git-session", "git-shallow", "server-floor", "file-floor"]
SHALLOW = ('set -e; git init -q ${6:+--object-format=$6} "$1"; '
           'git -c protocol.version="$5" -C "$1" fetch -q --depth 1 "$2" "$3"; git -C "$1" switch -q -c "$4" "$3"')
SEEDS = ('set -e; git -c protocol.version="$5" clone -q --no-checkout "$2" "$1"; '
         'git -c protocol.version="$5" -C "$1" fetch -q origin "$3"; git -C "$1" switch -q -c "$4" "$3"')


class Restore(rounds.Mode):
    prefix = "restore"

    def __init__(self, url, sha, proto, model=None, tip_tar=None, fmt=None):
        self.url, self.sha, self.proto, self.link, self.tip_tar = url, sha, proto, model, tip_tar
        self.git_proto = proto or "2"
        self.init_format = "sha256" if len(sha) == 64 else ""  # git init's, for git-shallow
        if fmt:
            self.prefix, self.format = f"restore-{fmt}", fmt

    def prepare(self, name, d, r):
        if name == "server-floor":
            (d / "request").write_bytes(protocol.floor_request(self.sha, self.proto))
        return ""

    def command(self, name, d, r):
        if name == "file-floor":
            return ["tar", "-xf", self.tip_tar, "-C", d]
        if name == "git-session":
            gsp = [f"GIT_SESSION_PROTOCOL={self.proto}"] if self.proto else []
            return ["env", *gsp, f"READ_URL={self.url}", f"SESSION_BRANCH={common.BRANCH}", f"TIP_SHA={self.sha}",
                    common.BIN, "-C", d, "restore"]
        if name in ("git-shallow", "seeds-recipe"):
            script = SHALLOW if name == "git-shallow" else SEEDS
            return ["bash", "-c", script, "_", d, self.url, self.sha, common.BRANCH, self.git_proto, self.init_format]
        return ["curl", "-sS", "-o", "/dev/null", "-w", r"%{http_code} %{size_download}\n",
                *protocol.floor_headers(self.proto), "-H", "Content-Type: application/x-git-upload-pack-request",
                "-H", "Accept: application/x-git-upload-pack-result", "--data-binary", f"@{d}/request",
                f"{self.url}/git-upload-pack"]

    def verify(self, name, d, log, r):
        """extra: the seconds the first `git status` took (server-floor: the bytes received)."""
        if name == "file-floor":
            if not any(d.iterdir()):
                common.die(f"file-floor: tar left {d} empty")
            return {"extra": 0}
        if name == "server-floor":
            m = re.search(r"^(\d{3}) (\d+)$", log.read_text(), re.M)
            if not m or m.group(1) != "200" or int(m.group(2)) <= 1000:
                common.show(log.read_text())
                common.die(f"server-floor: {m.group(0) if m else 'no HTTP status'}")
            return {"received_bytes": int(m.group(2)), "extra": f"{m.group(2)} B"}
        rounds.check_head(name, d, self.sha, log)
        took = rounds.clean_status(name, d)
        return {"status_s": took, "extra": f"{took:.2f}"}


def run(args):
    common.need("git", "curl", "tar", "time")
    fmts, infos = formats.of(args), formats.infos(args, repo.get)
    info = next(iter(infos.values()))
    n, warmup = common.rounds()
    proto, model = args.protocol, link.model(args)
    with servers.GitServer(Path(info["path"]), info["ref"], v0=proto == "0") as srv:
        if model:
            return link.restore(args, srv, info, Restore, LINK_CONTENDERS)
        modes = [Restore(srv.add(f"repo-{f}.git", i["path"]) if i is not info else srv.url, i["sha"], proto,
                         fmt=f if formats.tagged(fmts) else None) for f, i in infos.items()]
        section = formats.section(protocol.section(proto), fmts)
        load, t0 = common.check_load(section), time.monotonic()
        runs = rounds.loop(modes, CONTENDERS, n, warmup, srv.meter())
        took = time.monotonic() - t0
    r = rounds.results(args, section, "restore", took, load, runs, n, warmup,
                       repo=info, protocol=proto, git_proto=modes[0].git_proto, contenders=CONTENDERS,
                       id=protocol.run_id(info["path"], info["sha"]), **formats.extra(fmts, infos))
    if proto == "0":
        r["v2"] = protocol.v2_reference(r["id"])
    common.remove(*(common.RUNS / m.prefix for m in modes))
    return r


def contenders_md(r):
    gsp = f"GIT_SESSION_PROTOCOL={r['protocol']} " if r.get("protocol") else ""
    p, b = r["git_proto"], common.BRANCH
    sha256 = "sha256" in r.get("formats", []) or r["repo"].get("format") == "sha256"
    init = "git init -q --object-format=sha256 DIR" if sha256 else "git init -q DIR"
    return "\n".join([
        f"- **git-session**: `{gsp}READ_URL=$URL SESSION_BRANCH={b} TIP_SHA=$SHA git-session -C DIR restore`",
        f"- **git-shallow**: `{init} && git -c protocol.version={p} -C DIR fetch -q --depth 1 $URL $SHA "
        f"&& git -C DIR switch -q -c {b} $SHA`" + (" (`--object-format=sha256` on the SHA-256 repository only)"
                                                  if len(r.get("formats", [])) > 1 else ""),
        f"- **seeds-recipe**: `git -c protocol.version={p} clone -q --no-checkout $URL DIR && git -c "
        f"protocol.version={p} -C DIR fetch -q origin $SHA && git -C DIR switch -q -c {b} $SHA`",
        "- **server-floor**: no client, the wire alone: `curl --data-binary @REQUEST $URL/git-upload-pack -o "
        "/dev/null`, with the",
        protocol.floor_note(r.get("protocol")),
        "  server computes and sends the same pack, which is dropped: no client restores faster than this.",
    ])


def intro(r):
    v0 = r.get("protocol") == "0"
    title = ("## restore-v0: `git-session restore` vs the git CLI over protocol v0 (a server that speaks v0/v1 only)"
             if v0 else "## restore: `git-session restore` vs the git CLI")
    if r.get("formats"):
        title = "## restore-sha256: `git-session restore` of a SHA-256 repository, vs SHA-1 and the git CLI"
    text = ("Every contender restores the same commit from the same loopback smart-HTTP server into a fresh empty\n"
            f"directory, and ends with `HEAD` on `refs/heads/{common.BRANCH}` at `TIP_SHA` and a clean `git status`\n"
            + (protocol.server_note() if v0 else "(checked after every run):"))
    return sections(title, produced_by(r), formats.lead(r) if r.get("formats") else None, text, contenders_md(r),
                    "All with `GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1`.")


def floor_md(r):
    runs = r["runs"]
    gs, gsh, fl = (median(runs, n) for n in ("git-session", "git-shallow", "server-floor"))
    reach = "within reach" if fl / gsh <= 0.8 else "**out of reach for any client**"
    return (f"The server's share: server-floor ÷ git-shallow = {ratio(fl, gsh)} — the best wall ratio any client "
            f"could reach\nagainst this server (target ≤ 0.8×: {reach}).\n"
            f"The clients' own time above the floor (median wall − server-floor's): git-session {secs(gs - fl)} s, "
            f"git-shallow {secs(gsh - fl)} s (within a run's noise of the floor when near 0 or below).")


def method_md(r):
    return "\n".join([
        medians_note(r),
        "Wall time: hyperfine (`hyperfine -N --runs 1 --export-json`, one run per contender and round, the set-up "
        "in its `--prepare`);",
        "peak RSS and client CPU (user, system; medians) come from GNU `/usr/bin/time -f \"%e %M %U %S\"`. For the git",
        "recipes (several commands in one `bash -c`), the peak RSS is that of the largest single process of the tree",
        "(e.g. `git index-pack`), not a sum of the processes.",
        "The server (`examples/serve`: `git http-backend` → `git upload-pack` → `git pack-objects`) runs on the same",
        f"{r['machine']['cores']} cores and is in none of those figures; \"server CPU\" is its CPU time during the run "
        "(user + system of the",
        "server and of the git processes it reaped, from /proc/PID/stat). On a busy machine the system time (and with it",
        "the wall time) is the noisiest figure.",
    ])


EVERY = ("### Every run\n\n\"first status\" is the verification `git status --porcelain` right after the run "
         "(not part of the\nmeasurement): it would stand out if the index a contender wrote made git re-hash "
         "the files.")


def table(r):
    if r.get("link"):
        return link.restore_table(r)
    if r.get("formats"):
        return formats.table(r, intro(r), "git-shallow", method_md(r), EVERY, "first status (s)",
                             lambda runs, f: floor_md({"runs": runs}))
    runs = r["runs"]
    m = lambda n, k="wall_s": median(runs, n, k)
    pair = (f"git-session / git-shallow: wall {ratio(m('git-session'), m('git-shallow'))}, peak RSS "
            f"{ratio(m('git-session', 'rss_kib'), m('git-shallow', 'rss_kib'))}; git-session / seeds-recipe: wall "
            f"{ratio(m('git-session'), m('seeds-recipe'))}, peak RSS "
            f"{ratio(m('git-session', 'rss_kib'), m('seeds-recipe', 'rss_kib'))}.")
    every = EVERY + "\n\n" + runs_table(runs, "first status (s)")
    return sections(intro(r), "### Results", summary_table(runs, r["contenders"]), pair,
                    protocol.v0_lines(r) if r.get("protocol") == "0" else None, floor_md(r), method_md(r),
                    repo_md(r["repo"]), machine_md(r), every)
