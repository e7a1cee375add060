"""charts: the pictures at the top of BENCHMARKS.md, drawn as SVG (standard library only: text,
rects, lines) from the results kept in bench/results/, into bench/results/charts/:
  ratios.svg    each git-session contender's median wall ÷ git's, per section (every results file
                whose contenders include git's and git-session's; PAIRS says which git contender a
                section compares with), one bar per section and contender, a line at 1.0×
  fleet.svg     the fleet's boot times (fleet.json, the fleet mode's: {"n": N, "kinds": {KIND: {"walls":
                [seconds...], "p50", "p95", "n", "server_cpu_s", ...}}}, the walls of the successful
                boots; p50/p95 computed by nearest rank when absent), a histogram per kind with p50
                and p95 marked; skipped when fleet.json is absent
  timeline-restore.svg, timeline-boot.svg   the time line of one restore and of one boot from a
                baked template (timeline.json, written by the timeline mode from `restore -vv`):
                requests, the pack's bytes, resolving it, the checkout or the switch, the index, so
                the tail after the last byte shows (zoomed in a second panel); skipped when
                timeline.json is absent
`python3 -m bench.suite charts` draws them and writes their links between `<!-- bench:charts -->`
and `<!-- /bench:charts -->` at the top of BENCHMARKS.md; every `--write` and `--tables` does too."""

import json
import math
import os
import re
import statistics
import xml.sax.saxutils
from pathlib import Path

from . import common

CHARTS = common.RESULTS / "charts"
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
# Per kind: (git-session contender, git contender it is compared with). A kind not listed counts
# when its contenders include "git-session" and "git".
PAIRS = {
    "restore": [("git-session", "git-shallow")],
    "save": [("git-session", "git")],
    "signing": [("git-session", "git"), ("gs-key", "git-signed"), ("gs-service", "git-signed")],
    "baked": [("baked-boot", "git-recipe"), ("cache-boot", "git-recipe")],
    "lfs": [("git-session", "git-clone+lfs-pull")],
    "sparse": [("git-session", "git-clone-sparse")],
    "agents": [("git-session-agent-add", "git-worktree-add"), ("git-session-agent-add", "git-clone-depth-1")],
    "version": [("git-session", "git")],
}
FASTER, SLOWER, GIT = "#2e7d32", "#e65100", "#c62828"


def esc(s):
    return xml.sax.saxutils.escape(str(s), {'"': "&quot;"})


HALO = ' stroke="#fff" stroke-width="4" stroke-linejoin="round" paint-order="stroke"'


def text(x, y, s, size=13, anchor="start", weight="normal", fill="#222", extra=""):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{fill}"{extra}>{esc(s)}</text>')


def rect(x, y, w, h, fill, cls=None, title=None):
    c = f' class="{cls}"' if cls else ""
    t = f"<title>{esc(title)}</title>" if title else ""
    return f'<rect{c} x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" fill="{fill}">{t}</rect>'


def line(x1, y1, x2, y2, stroke="#999", width=1, dash=None):
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" stroke-width="{width}"{d}/>'


def svg(width, height, parts):
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}">',
        rect(0, 0, width, height, "#ffffff"), *parts, "</svg>", ""])


def chars(s, size=13):
    """A width for `s` in DejaVu Sans at `size` px (0.6 em a character on average)."""
    return len(str(s)) * size * 0.6


def nice_step(span, ticks=6):
    """A round tick step that cuts `span` into about `ticks` parts."""
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def x_axis(x0, x1, y, vmax, label, fmt, top=None, vmin=0.0):
    """Ticks from `vmin` to `vmax` along y, grid lines up to `top`, and the axis label under them."""
    step = nice_step(vmax - vmin)
    parts, v = [line(x0, y, x1, y, "#444")], math.ceil(vmin / step - 1e-9) * step
    while v <= vmax * 1.0001:
        x = x0 + (x1 - x0) * (v - vmin) / (vmax - vmin)
        if top is not None:
            parts.append(line(x, top, x, y, "#e0e0e0"))
        parts += [line(x, y, x, y + 5, "#444"), text(x, y + 19, fmt(v), 12, "middle", fill="#444")]
        v += step
    parts.append(text((x0 + x1) / 2, y + 40, label, 13, "middle", "bold"))
    return parts


# --- 1. wall ÷ git's, per section ---


def medians(r):
    """{group: {contender: median wall in seconds}}; a group splits a section by object format or
    file system when its runs say which."""
    runs = r.get("runs")
    if isinstance(runs, list) and runs and ("wall_s" in runs[0] or "ms" in runs[0]):
        by = {}
        for x in runs:
            group = x.get("format") or x.get("fs") or ""
            wall = x["wall_s"] if "wall_s" in x else x["ms"] / 1000
            by.setdefault(group, {}).setdefault(x["name"], []).append(wall)
        return {g: {n: statistics.median(v) for n, v in c.items()} for g, c in by.items()}
    c = r.get("contenders")
    if isinstance(c, dict):
        return {"": {n: v["median"] for n, v in c.items() if isinstance(v, dict) and "median" in v}}
    return {}


def ratio_rows(results):
    """[(section title, [(label, ratio, ours_s, git_s)], repository and date)] of every section that compares a
    git-session contender with git's, in BENCHMARKS.md's order."""
    rank = lambda name: common.SECTIONS.index(common.kind(name)) if common.kind(name) in common.SECTIONS else 99
    out = []
    for name in sorted(results, key=lambda n: (rank(n), n)):
        r = results[name]
        kind = r.get("kind", name.split("-")[0])
        for group, walls in sorted(medians(r).items(), key=lambda g: g[0] != "sha256"):
            pairs = PAIRS.get(kind, [("git-session", "git")])
            rows = [(f"{ours} ÷ {git}", walls[ours] / walls[git], walls[ours], walls[git])
                    for ours, git in pairs if walls.get(ours) and walls.get(git)]
            if rows:
                out.append((f"{name} ({group})" if group else name, rows, where(r)))
    return out


def where(r):
    """The repository and date of a section's run, short: 'git/git, 2026-12-04'."""
    repo = r.get("repo")
    label = repo.get("label", "") if isinstance(repo, dict) else str(repo or "")
    if m := re.search(r"\.mirror/([^/+]+)\+([^/]+)/", label + "/"):
        label = f"{m.group(1)}/{m.group(2)}"
    label = "generated" if label.startswith("generated") else label
    if not label and r.get("files") and r.get("file_bytes"):
        label = f"{r['files']} LFS files of {r['file_bytes'] / 1048576:g} MiB"
    date = (r.get("finished") or r.get("machine", {}).get("date") or "")[:10]
    return ", ".join(x for x in (label, date) if x)


def seconds(v):
    return f"{v * 1000:.1f} ms" if v < 0.1 else f"{v:.2f} s"


def tick_seconds(v):
    """An axis tick: 0, 50 ms, 0.25 s, 5 s."""
    return "0" if not v else f"{v * 1000:g} ms" if v < 0.1 else f"{v:g} s"


def ratios_svg(sections, cap=3.0):
    """Horizontal bars, one per row, grouped under each section's title; a line at 1.0×."""
    label_w = max(chars(lab) for _, rows, _ in sections for lab, *_ in rows) + 40
    plot_w, row_h, head_h, top = 560, 24, 26, 78
    xmax = min(cap, max(1.25, max(r for _, rows, _ in sections for _, r, *_ in rows) * 1.08))
    xmax = nice_step(xmax) * math.ceil(xmax / nice_step(xmax))
    x0, width = label_w, label_w + plot_w + 190
    height = top + sum(head_h + row_h * len(rows) for _, rows, _ in sections) + 70
    sx = lambda v: x0 + plot_w * min(v, xmax) / xmax
    parts = [text(16, 28, "Wall time ÷ git's, per benchmark (median of each section's rounds)", 18, weight="bold"),
             text(16, 50, "Shorter is faster; left of the red line git-session beats git. "
                  "Each section's own run (command, date, machine: its section below).", 13, fill="#555")]
    y, bars = top, []
    for title, rows, run in sections:
        bars.append(f'<text x="16" y="{y + 17:.1f}" font-size="13" fill="#222"><tspan font-weight="bold">'
                    f'{esc(title)}</tspan><tspan dx="8" fill="#777">{esc(run)}</tspan></text>')
        y += head_h
        for label, r, ours, git in rows:
            colour = FASTER if r < 1 else SLOWER
            bars.append(text(x0 - 10, y + 16, label, 13, "end"))
            bars.append(rect(x0, y + 4, sx(r) - x0, row_h - 8, colour, "bar",
                             f"{label}: {r:.2f}× ({seconds(ours)} vs {seconds(git)})"))
            value = f"{'▸ ' if r > xmax else ''}{r:.2f}×  ({seconds(ours)} vs {seconds(git)})"
            bars += [rect(sx(r) + 3, y + 4, chars(value, 12) + 4, row_h - 8, "#ffffff"),
                     text(sx(r) + 6, y + 16, value, 12, weight="bold", fill=colour)]
            y += row_h
    parts += x_axis(x0, x0 + plot_w, y + 6, xmax, "git-session's wall ÷ git's wall (×)", lambda v: f"{v:g}×",
                    top=top)
    parts += [line(sx(1.0), top - 6, sx(1.0), y + 6, GIT, 2, "6 4"),
              text(sx(1.0), top - 10, "git = 1.0×", 12, "middle", "bold", GIT)]
    return svg(width, height, parts + bars)


# --- 2. the fleet's boot times ---


def percentile(values, p):
    """The p-th percentile (nearest rank), as the fleet and baked modes report it."""
    v = sorted(values)
    return v[min(len(v) - 1, max(0, -(-len(v) * p // 100) - 1))] if v else float("nan")


def span_of(walls):
    """The time range a panel shows: from 0 when the fastest boot is within a quarter of the
    slowest's time, else from a round value under the fastest (the spread is what it shows)."""
    lo, hi = min(walls), max(walls)
    step = nice_step(max(hi - lo, hi * 0.05, 1e-6), 5)
    start = math.floor(lo / step) * step
    start = 0.0 if start < hi * 0.25 else start
    return start, max(math.ceil(hi / step + 1e-9) * step, start + step)


def panel(k, v, y, x0, plot_w, bins):
    """One kind's histogram: its header, its bars (with counts), its axis, p50 and p95."""
    walls = v["walls"]
    p50, p95 = v.get("p50") or percentile(walls, 50), v.get("p95") or percentile(walls, 95)
    lo, hi = span_of(walls)
    counts = [0] * bins
    for w in walls:
        counts[min(bins - 1, int((w - lo) / (hi - lo) * bins))] += 1
    base, h = y + PANEL - 50, PANEL - 110
    cpu = v.get("server_cpu_s")
    cpu = f", server CPU {cpu:.1f} s ({cpu / len(walls):.3f} s a boot)" if isinstance(cpu, (int, float)) else ""
    ok = f"{len(walls)} of {v['n']}" if v.get("n", len(walls)) != len(walls) else f"{len(walls)}"
    head = f"{k}: {ok} boots, p50 {seconds(p50)}, p95 {seconds(p95)}, p95 ÷ p50 {p95 / p50:.2f}{cpu}"
    parts = [text(16, y + 14, head, 14, weight="bold")]
    for p, val, side in (("p50", p50, -1), ("p95", p95, 1)):
        x = x0 + plot_w * (val - lo) / (hi - lo)
        parts += [line(x, base - h - 24, x, base, GIT, 2, "5 3"),
                  text(x + 4 * side, base - h - 14, f"{p} {seconds(val)}", 12, "start" if side > 0 else "end",
                       "bold", GIT, extra=HALO)]
    cmax, bw = max(counts), plot_w / bins
    for j, c in enumerate(counts):
        bh = h * c / cmax
        parts.append(rect(x0 + j * bw + 1, base - bh, bw - 2, bh, "#1565c0", "bar",
                          f"{seconds(lo + j * (hi - lo) / bins)}–{seconds(lo + (j + 1) * (hi - lo) / bins)}: {c}"))
        if c:
            parts.append(text(x0 + (j + 0.5) * bw, base - bh - 4, c, 11, "middle", fill="#1565c0", extra=HALO))
    parts += x_axis(x0, x0 + plot_w, base, hi, "", tick_seconds, vmin=lo)[:-1]
    return parts, chars(head, 14)


PANEL = 190


def fleet_svg(fleet, bins=20):
    """A histogram of each kind's boot walls, one panel each (its own scale), p50 and p95 marked."""
    kinds = [(k, v) for k, v in fleet["kinds"].items() if v.get("walls")]
    plot_w, x0, top = 640, 70, 70
    height = top + PANEL * len(kinds) + 20
    n = fleet.get("n") or max(len(v["walls"]) for _, v in kinds)
    parts = [text(16, 28, f"Boot times of the fleet ({n} boots at once, per kind)", 18, weight="bold"),
             text(16, 50, "How many boots took how long; dashed: the median (p50) and p95. "
                  "Each panel has its own time scale, not always from 0.", 13, fill="#555")]
    width = x0 + plot_w + 40
    for i, (k, v) in enumerate(kinds):
        drawn, wide = panel(k, v, top + i * PANEL, x0, plot_w, bins)
        parts += drawn
        width = max(width, wide + 40)
    parts.append(text(x0 + plot_w / 2, height - 12, "boot wall time (each boot's own, all started at once)", 13,
                      "middle", "bold"))
    return svg(width, height, parts)


# --- 3. one restore's time line ---


def gantt(phases, lo, hi, x0, plot_w, top, cls):
    """Rows of bars for the phases over [lo, hi] ms (clipped to it), with their labels: (parts, sx)."""
    sx = lambda ms: x0 + plot_w * (min(max(ms, lo), hi) - lo) / (hi - lo)
    parts = []
    for i, p in enumerate(phases):
        y, dur = top + i * ROW, p["end_ms"] - p["start_ms"]
        parts.append(text(x0 - 10, y + 19, p["name"], 13, "end"))
        parts.append(rect(sx(p["start_ms"]), y + 6, max(sx(p["end_ms"]) - sx(p["start_ms"]), 2), ROW - 12,
                          p.get("colour", "#1565c0"), cls, f"{p['name']}: {p['start_ms']:.0f}–{p['end_ms']:.0f} ms"))
        label = f"{dur:.0f} ms" if dur >= 1 else f"at {p['start_ms']:.0f} ms"
        label += f" (from {p['start_ms']:.0f} ms)" if p["start_ms"] < lo else ""
        parts.append(text(sx(p["end_ms"]) + 6, y + 19, label, 12, fill="#333", extra=HALO))
    return parts, sx


def marks(sx, top, bottom, last, wall):
    """The pack's last byte and the exit, as vertical lines over the rows."""
    out = []
    if last is not None:
        out += [line(sx(last), top - 14, sx(last), bottom, SLOWER, 2, "6 4"),
                text(sx(last), top - 18, "last byte", 12, "end", "bold", SLOWER)]
    return out + [line(sx(wall), top - 14, sx(wall), bottom, "#333", 2),
                  text(sx(wall), top - 18, "exit", 12, "start", "bold")]


ROW = 30


def timeline_svg(t, repo=""):
    """A row per phase (bars from start to end, ms since the process started), the last byte of
    the pack and the exit marked, the tail between them printed; under it, the tail zoomed (the
    phases from a little before the last byte to the exit)."""
    phases, wall, last = t["phases"], t["wall_ms"], t.get("last_byte_ms")
    plot_w, top = 640, 106
    x0 = max(chars(p["name"]) for p in phases) + 40
    end = top + ROW * len(phases)
    title = t.get("title", "one restore")
    parts = [text(16, 28, f"{title[0].upper()}{title[1:]}, step by step ({wall:.0f} ms in all)", 18, weight="bold"),
             text(16, 50, f"`git-session -vv restore`{' of ' + repo if repo else ''}: when each step ran, "
                  "from its log lines' arrival and the times they print.", 13, fill="#555")]
    lo = max(0.0, last - 0.25 * (wall - last)) if last is not None else None
    # The tail zoomed in, when it is too short a part of the wall to read.
    small = last is not None and wall - last < wall / 3
    zoom = [p for p in phases if small and p["end_ms"] >= lo and p["start_ms"] <= wall]
    if last is not None:
        tail = wall - last
        parts.append(text(16, 72, f"Tail after the pack's last byte: {tail:.0f} ms ({100 * tail / wall:.0f}% of the "
                          f"wall), shaded{'; zoomed in below' if zoom else ''}.", 13, weight="bold", fill=SLOWER))
        parts.append(rect(x0 + plot_w * last / wall, top - 4, plot_w * tail / wall, end - top + 8, "#fff3e0"))
    parts += x_axis(x0, x0 + plot_w, end + 4, wall, "milliseconds since the process started", lambda v: f"{v:g}",
                    top=top - 4)
    rows, sx = gantt(phases, 0.0, wall, x0, plot_w, top, "bar")
    parts += rows + marks(sx, top, end + 4, last, wall)
    height = end + 70
    if zoom:
        ztop = end + 120
        zend = ztop + ROW * len(zoom)
        parts.append(text(16, ztop - 34, f"The tail, zoomed: {lo:.0f} to {wall:.0f} ms", 15, weight="bold"))
        parts.append(rect(x0 + plot_w * (last - lo) / (wall - lo), ztop - 4, plot_w * (wall - last) / (wall - lo),
                          zend - ztop + 8, "#fff3e0"))
        parts += x_axis(x0, x0 + plot_w, zend + 4, wall, "milliseconds since the process started",
                        lambda v: f"{v:g}", top=ztop - 4, vmin=lo)
        rows, zx = gantt(zoom, lo, wall, x0, plot_w, ztop, "zoom")
        parts += rows + marks(zx, ztop, zend + 4, last, wall)
        height = zend + 70
    return svg(x0 + plot_w + 150, height, parts)


# --- writing them ---


def load_all():
    """{section: results} of every results file kept."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(common.RESULTS.glob("*.json"))}


def draw(results=None, out=CHARTS):
    """The charts the results kept allow, written to `out`: [(file name, alt text)]."""
    results = load_all() if results is None else results
    out.mkdir(parents=True, exist_ok=True)
    made = []
    rows = ratio_rows({n: r for n, r in results.items() if n not in ("fleet", "timeline")})
    if rows:
        (out / "ratios.svg").write_text(ratios_svg(rows))
        every = [r for _, rs, _ in rows for _, r, *_ in rs]
        made.append(("ratios.svg", f"git-session's wall time ÷ git's, per benchmark: {sum(r < 1 for r in every)} "
                                   f"of {len(every)} below 1.0×, {min(every):.2f}× to {max(every):.2f}×"))
    if results.get("fleet", {}).get("kinds"):
        (out / "fleet.svg").write_text(fleet_svg(results["fleet"]))
        kinds = results["fleet"]["kinds"]
        made.append(("fleet.svg", "the fleet's boot times, per kind: " + "; ".join(
            f"{k} p50 {seconds(v['p50'])}, p95 {seconds(v['p95'])}" for k, v in kinds.items() if v.get("p50"))))
    else:
        common.say("charts: no fleet results (bench/results/fleet.json): no fleet chart")
    timeline = results.get("timeline", {})
    for t in timeline.get("recordings", []):
        name = f"timeline-{t['name']}.svg"
        (out / name).write_text(timeline_svg(t, timeline.get("repo", {}).get("label", "")))
        tail = (f", {t['wall_ms'] - t['last_byte_ms']:.0f} ms of them after the pack's last byte"
                if t.get("last_byte_ms") is not None else "")
        made.append((name, f"the time line of {t['title']}: {t['wall_ms']:.0f} ms{tail}"))
    if not timeline.get("recordings"):
        common.say("charts: no time line (bench/results/timeline.json): no time line chart")
    for stale in {p.name for p in out.glob("*.svg")} - {m for m, _ in made}:
        (out / stale).unlink()
    return made


def markdown(made, doc=common.DOC):
    """The charts' links, relative to BENCHMARKS.md."""
    rel = Path(os.path.relpath(CHARTS, doc.parent))
    lines = [f"![{alt}]({(rel / name).as_posix()})" for name, alt in made]
    return "\n\n".join(lines) + ("\n\n" if lines else "") + (
        "(Drawn by `python3 -m bench.suite charts` from `bench/results/*.json`; each `--write` redraws them.)")


def write(doc=common.DOC):
    """Draw the charts and put their links at the top of BENCHMARKS.md, after its first lines
    (the title), between `<!-- bench:charts -->` markers."""
    made = draw()
    block = f"<!-- bench:charts -->\n{markdown(made, doc)}\n<!-- /bench:charts -->"
    text_ = doc.read_text()
    start, end = "<!-- bench:charts -->", "<!-- /bench:charts -->"
    if start in text_:
        before, rest = text_.split(start, 1)
        text_ = before + block + rest.split(end, 1)[1]
    else:
        head, _, tail = text_.partition("\n\n")
        text_ = f"{head}\n\n{block}\n\n{tail}"
    doc.write_text(text_)
    common.say(f"charts: drew {', '.join(n for n, _ in made) or 'none'} in {CHARTS}; linked them in {doc.name}")
    return made
