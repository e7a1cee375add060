"""timeline: one `git-session restore -vv` into an empty folder (after one unrecorded warm-up
restore), served like restore's (examples/serve over the same repository, TIP_SHA its default
branch's parent), each line of its log stamped with when it arrived (ms since the process started;
the log lines carry no time of their own, some print the ms a step took). From those: when each
request was sent, when the pack's first and last bytes came and it was indexed, the index built
from the tree, the files checked out, the index written, the exit. Section timeline; the chart
bench/results/charts/timeline.svg is drawn from it (charts.py)."""

import os
import re
import subprocess
import time
from pathlib import Path

from . import common, repo, rounds, servers
from .report import machine_md, repo_md, sections

SPAN = re.compile(r"(?<=[A-Z] )restore\{[^}]*\}: ")  # the restore span's fields, the same on every line
REQUEST = re.compile(r"\b(GET|POST) (\S+)$")
PACK = re.compile(r"pack: (\d+) objects; stream ended after (\d+) ms, deltas resolved and indexed after (\d+) ms")
TREE = re.compile(r"index built from the tree in (\d+) ms")
FILES = re.compile(r"(\d+) files checked out after (\d+) ms")
INDEX = re.compile(r"index written after (\d+) ms")
EARLY = re.compile(r"early checkout: (\d+) files written")


def record(url, sha, d):
    """Run one -vv restore into `d`: ([{"t_ms", "text"}], wall ms). stderr is read line by line
    as it is written (Rust's stderr is unbuffered)."""
    env = {"READ_URL": url, "SESSION_BRANCH": common.BRANCH, "TIP_SHA": sha}
    t0 = time.monotonic()
    proc = subprocess.Popen([str(common.BIN), "-vv", "-C", str(d), "restore"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=os.environ | env)
    events = [{"t_ms": round((time.monotonic() - t0) * 1000, 1), "text": SPAN.sub("", line.rstrip("\n"), 1)}
              for line in proc.stderr]
    code = proc.wait()
    wall = round((time.monotonic() - t0) * 1000, 1)
    if code:
        common.show("\n".join(e["text"] for e in events))
        common.die(f"timeline: git-session restore failed ({code})")
    return events, wall


def request_name(path):
    """`info/refs`, `git-upload-pack` and the like, from a logged URL."""
    return "/".join(path.rsplit("/", 2)[-2:]) if path.endswith("info/refs") else path.rsplit("/", 1)[-1]


def phases(events, wall):
    """The steps, each {"name", "start_ms", "end_ms"} in ms since the process started, and the
    pack's last byte (None when no pack line was logged)."""
    out, sent, last_byte = [], [], None
    pack_start = early = None
    for e in events:
        t, s = e["t_ms"], e["text"]
        if m := REQUEST.search(s):
            sent.append((t, f"{m.group(1)} {request_name(m.group(2))}"))
        elif m := PACK.search(s):
            stream, indexed = int(m.group(2)), int(m.group(3))
            pack_start = t - indexed
            last_byte = pack_start + stream
            out += [{"name": f"pack: first byte to last ({m.group(1)} objects)", "start_ms": pack_start,
                     "end_ms": last_byte, "colour": "#6a1b9a"},
                    {"name": "pack: deltas resolved, indexed", "start_ms": last_byte, "end_ms": t,
                     "colour": "#8e24aa"}]
        elif m := EARLY.search(s):
            early = (t, int(m.group(1)))
        elif m := TREE.search(s):
            out.append({"name": "index built from the tree", "start_ms": t - int(m.group(1)), "end_ms": t,
                        "colour": "#00838f"})
        elif m := FILES.search(s):
            begun = max([p["end_ms"] for p in out if p["name"].startswith("index built")] or [t - int(m.group(2))])
            out.append({"name": f"checkout: {m.group(1)} files written", "start_ms": begun, "end_ms": t,
                        "colour": "#2e7d32"})
        elif INDEX.search(s):
            begun = max([p["end_ms"] for p in out if p["name"].startswith("checkout")] or [t])
            out.append({"name": "index file written", "start_ms": begun, "end_ms": t, "colour": "#00838f"})
    if early and pack_start is not None:
        out.append({"name": f"early checkout: {early[1]} files written as the pack arrives", "start_ms": pack_start,
                    "end_ms": early[0], "colour": "#66bb6a"})
    first = sent[0][0] if sent else (out[0]["start_ms"] if out else wall)
    steps = [{"name": "start-up (to the first request)", "start_ms": 0, "end_ms": first, "colour": "#757575"}]
    # A request's line says when it was sent, not when its answer came (requests may overlap).
    steps += [{"name": f"request {i + 1}: {name}", "start_ms": t, "end_ms": t, "colour": "#1565c0"}
              for i, (t, name) in enumerate(sent)]
    if sent and pack_start is not None and pack_start > sent[-1][0]:
        steps.append({"name": "to the pack's first byte", "start_ms": sent[-1][0], "end_ms": pack_start,
                      "colour": "#90caf9"})
    done = max([p["end_ms"] for p in out] or [first])
    tail = [{"name": "the rest, to the exit", "start_ms": done, "end_ms": wall, "colour": "#757575"}]
    return steps + sorted(out, key=lambda p: p["start_ms"]) + tail, last_byte


def run(args):
    common.need("git")
    info = repo.get(args)
    work = common.RUNS / "timeline"
    work.mkdir(parents=True, exist_ok=True)
    load, t0 = common.check_load("timeline"), time.monotonic()
    with servers.GitServer(Path(info["path"]), info["ref"]) as srv:
        record(srv.url, info["sha"], work / "warm-up")
        d = work / "recorded"
        events, wall = record(srv.url, info["sha"], d)
    rounds.check_head("timeline", d, info["sha"], None)
    rounds.clean_status("timeline", d)
    steps, last_byte = phases(events, wall)
    r = rounds.results(args, "timeline", "timeline", time.monotonic() - t0, load, [], 1, 1, repo=info,
                       wall_ms=wall, last_byte_ms=last_byte, phases=steps, events=events)
    common.remove(work)
    return r


def table(r):
    rows = ["| step | from (ms) | to (ms) | took (ms) |", "| --- | ---: | ---: | ---: |"]
    rows += [f"| {p['name']} | {p['start_ms']:.0f} | {p['end_ms']:.0f} | {p['end_ms'] - p['start_ms']:.0f} |"
             for p in r["phases"]]
    last = r.get("last_byte_ms")
    tail = (f"The pack's last byte came at {last:.0f} ms; the exit at {r['wall_ms']:.0f} ms: "
            f"{r['wall_ms'] - last:.0f} ms after it ({100 * (r['wall_ms'] - last) / r['wall_ms']:.0f}% of the wall)."
            if last is not None else "No pack was received (nothing logged its stream).")
    intro = ("One `git-session -vv -C DIR restore` into an empty folder (after one unrecorded warm-up restore), "
             "each log line stamped with when it arrived; a step's start is its line's arrival less the ms it "
             "prints. A request's line says when it was sent (its answer is not logged; requests may overlap); "
             "the pack's rows run from the response's first byte, after the server began making it. Chart: "
             "[charts/timeline.svg](bench/results/charts/timeline.svg).")
    log = "\n".join(f"{e['t_ms']:8.1f} ms  {e['text']}" for e in r["events"])
    made = f"Produced by `{r['command']}` on {r['finished']}."
    return sections("## timeline: one restore, step by step", made, intro, tail, "\n".join(rows),
                    repo_md(r["repo"]), machine_md(r), "### The log, stamped", f"```\n{log}\n```")
