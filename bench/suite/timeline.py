"""timeline: two runs of git-session with -vv, each line of their log stamped with when it arrived
(ms since the process started; the log lines carry no time of their own, some print the ms a step
took), served like restore's (examples/serve over the same repository, TIP_SHA its default branch's
parent), each after one unrecorded warm-up run of its own:
  restore   `git-session restore` into an empty folder
  boot      `git-session restore` in a template baked (`git-session bake`) at TIP_SHA's first parent
From those: when each request was sent, when the pack's first and last bytes came and it was
indexed, the checkout (or the boot's switch) step by step, the index written, the exit. Section
timeline; the charts bench/results/charts/timeline-restore.svg and timeline-boot.svg are drawn
from it (charts.py)."""

import os
import re
import subprocess
import time
from pathlib import Path

from . import baked, common, repo, rounds, servers
from .report import machine_md, repo_md, sections

SPAN = re.compile(r"(?<=[A-Z] )restore\{[^}]*\}: ")  # the restore span's fields, the same on every line
REQUEST = re.compile(r"\b(GET|POST) (\S+)$")
PACK = re.compile(r"pack: (\d+) objects; stream ended after (\d+) ms, deltas resolved and indexed after (\d+) ms")
TREE = re.compile(r"index built from the tree in (\d+) ms")
FILES = re.compile(r"(\d+) files checked out after (\d+) ms")
INDEX = re.compile(r"index written after (\d+) ms")
EARLY = re.compile(r"early checkout: (\d+) files written")
THIN = re.compile(r"thin pack: received after (\d+) ms")
THIN_BASES = re.compile(r"thin pack: (\d+) bases appended after (\d+) ms")
SWITCH = re.compile(r"switch: (.*?),? (?:planned )?after (\d+) ms")
SHA = re.compile(r"\b[0-9a-f]{40}(?:[0-9a-f]{24})?\b")


def record(url, sha, d):
    """Run one -vv restore in `d`: ([{"t_ms", "text"}], wall ms). stderr is read line by line
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
    pack_start = early = thin = None
    switch = []
    for e in events:
        t, s = e["t_ms"], e["text"]
        if m := REQUEST.search(s):
            sent.append((t, f"{m.group(1)} {request_name(m.group(2))}"))
        elif (m := PACK.search(s)) and thin:
            # The thin pack, completed with its bases, indexed here: no bytes from the wire.
            out.append({"name": f"pack: the completed pack indexed ({m.group(1)} objects)",
                        "start_ms": t - int(m.group(3)), "end_ms": t, "colour": "#8e24aa"})
        elif m := PACK.search(s):
            stream, indexed = int(m.group(2)), int(m.group(3))
            pack_start = t - indexed
            last_byte = pack_start + stream
            out += [{"name": f"pack: first byte to last ({m.group(1)} objects)", "start_ms": pack_start,
                     "end_ms": last_byte, "colour": "#6a1b9a"},
                    {"name": "pack: deltas resolved, indexed", "start_ms": last_byte, "end_ms": t,
                     "colour": "#8e24aa"}]
        elif m := THIN.search(s):
            pack_start, last_byte = thin = t - int(m.group(1)), t
            out.append({"name": "pack (thin): first byte to last", "start_ms": pack_start, "end_ms": t,
                        "colour": "#6a1b9a"})
        elif (m := THIN_BASES.search(s)) and thin:
            out.append({"name": f"pack (thin): {m.group(1)} delta bases appended", "start_ms": last_byte,
                        "end_ms": thin[0] + int(m.group(2)), "colour": "#8e24aa"})
        elif m := SWITCH.search(s):
            switch.append((t, SHA.sub("TIP_SHA", m.group(1)), int(m.group(2))))
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
    out += switch_steps(switch)
    first = sent[0][0] if sent else (min(p["start_ms"] for p in out) if out else wall)
    steps = [{"name": "start-up (to the first request)", "start_ms": 0, "end_ms": first, "colour": "#757575"}]
    # A request's line says when it was sent, not when its answer came (requests may overlap).
    steps += [{"name": f"request {i + 1}: {name}", "start_ms": t, "end_ms": t, "colour": "#1565c0"}
              for i, (t, name) in enumerate(sent)]
    if sent and pack_start is not None and pack_start > sent[-1][0]:
        steps.append({"name": "to the pack's first byte", "start_ms": sent[-1][0], "end_ms": pack_start,
                      "colour": "#90caf9"})
    done = max([p["end_ms"] for p in out] or [first])
    tail = [{"name": "the rest, to the exit", "start_ms": done, "end_ms": wall, "colour": "#757575"}]
    return steps + sorted(out, key=lambda p: (p["end_ms"], p["start_ms"])) + tail, last_byte


def switch_steps(lines):
    """The boot's switch, from its lines [(arrival, what, ms since the switch began)]: each step
    from the one before it."""
    if not lines:
        return []
    began = lines[0][0] - lines[0][2]
    steps, before = [], 0
    for _, what, ms in lines:
        steps.append({"name": f"switch: {what}", "start_ms": began + before, "end_ms": began + ms,
                      "colour": "#2e7d32"})
        before = ms
    return steps


def recording(name, title, url, sha, d, warm_up, base=None):
    """One recorded run in `d` (after one in `warm_up`; each prepared by baking at `base` when
    given), checked; its steps."""
    for folder in (warm_up, d):
        if base:
            baked.bake(url, base, folder)
        events, wall = record(url, sha, folder)
    baked.check(f"timeline: {name}", d, sha, None)
    steps, last_byte = phases(events, wall)
    return {"name": name, "title": title, "tip": sha, "base": base, "wall_ms": wall, "last_byte_ms": last_byte,
            "phases": steps, "events": events}


def run(args):
    common.need("git")
    info = repo.get(args)
    work = common.RUNS / "timeline"
    work.mkdir(parents=True, exist_ok=True)
    load, t0 = common.check_load("timeline"), time.monotonic()
    sha = info["sha"]
    base = common.git(info["path"], "rev-parse", f"{sha}~1")
    with servers.GitServer(Path(info["path"]), info["ref"]) as srv:
        runs = [recording("restore", "a restore into an empty folder", srv.url, sha, work / "restore",
                          work / "restore-warm-up"),
                recording("boot", "a boot from a template baked at TIP_SHA's first parent", srv.url, sha,
                          work / "boot", work / "boot-warm-up", base)]
    r = rounds.results(args, "timeline", "timeline", time.monotonic() - t0, load, [], 1, 1, repo=info,
                       recordings=runs)
    common.remove(work)
    return r


def recording_md(x):
    """One recording's steps, its tail and its stamped log."""
    rows = ["| step | from (ms) | to (ms) | took (ms) |", "| --- | ---: | ---: | ---: |"]
    rows += [f"| {p['name']} | {p['start_ms']:.0f} | {p['end_ms']:.0f} | {p['end_ms'] - p['start_ms']:.0f} |"
             for p in x["phases"]]
    last, wall = x.get("last_byte_ms"), x["wall_ms"]
    tail = (f"The pack's last byte came at {last:.0f} ms; the exit at {wall:.0f} ms: "
            f"{wall - last:.0f} ms after it ({100 * (wall - last) / wall:.0f}% of the wall)."
            if last is not None else f"No pack was received (nothing logged its stream); the exit at {wall:.0f} ms.")
    base = f" (the template baked at `{x['base'][:12]}`)" if x.get("base") else ""
    log = "\n".join(f"{e['t_ms']:8.1f} ms  {e['text']}" for e in x["events"])
    return sections(f"### {x['name']}: {x['title']}{base}", tail, "\n".join(rows),
                    f"Chart: [charts/timeline-{x['name']}.svg](bench/results/charts/timeline-{x['name']}.svg).",
                    "The log, stamped:", f"```\n{log}\n```")


def table(r):
    intro = ("Each run with `git-session -vv`, after one unrecorded warm-up run of its own, its log lines "
             "stamped with when they arrived; a step's start is its line's arrival less the ms it prints. A "
             "request's line says when it was sent (its answer is not logged; requests may overlap); the "
             "pack's rows run from the response's first byte, after the server began making it.")
    made = f"Produced by `{r['command']}` on {r['finished']}."
    return sections("## timeline: one restore and one boot, step by step", made, intro,
                    *(recording_md(x) for x in r["recordings"]), repo_md(r["repo"]), machine_md(r))
