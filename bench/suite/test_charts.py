"""Tests of charts.py and timeline.py's log reading: `python3 -m unittest bench.suite.test_charts`
(from the repository's root). Each SVG must parse as XML and hold one bar per row of its data."""

import json
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

from . import charts, common, timeline

NS = "{http://www.w3.org/2000/svg}"


def bars(svg_text):
    root = ET.fromstring(svg_text)
    return [r for r in root.iter(f"{NS}rect") if r.get("class") == "bar"]


def run(name, wall, rnd=1, **tags):
    return {"round": rnd, "name": name, "wall_s": wall, **tags}


def texts(svg_text):
    return [t.text for t in ET.fromstring(svg_text).iter(f"{NS}text")]


RESULTS = {
    "restore": {"kind": "restore", "runs": [run("git-session", 2.0), run("git-shallow", 4.0), run("server-floor", 1.0),
                                            run("git-session", 2.2, 2), run("git-shallow", 4.0, 2)]},
    "save-sha256": {"kind": "save", "runs": [run("git", 0.2, format="sha1"), run("git-session", 0.1, format="sha1"),
                                             run("git", 0.2, format="sha256"), run("git-session", 0.3, format="sha256")]},
    "lfs": {"mode": "lfs", "contenders": {"git-session": {"median": 2.0}, "git-clone+lfs-pull": {"median": 3.0}}},
    "sessions": {"kind": "sessions", "contenders": {"manifest": {"median": 8.0}, "sequential": {"median": 8.4}}},
    "version": {"kind": "version", "runs": [{"name": "git", "round": 1, "ms": 1.5},
                                            {"name": "git-session", "round": 1, "ms": 1.8}]},
}


class Ratios(unittest.TestCase):
    def test_one_bar_per_section_and_contender(self):
        rows = charts.ratio_rows(RESULTS)
        # sessions has no git contender; save-sha256 splits into its two formats.
        self.assertEqual([t for t, _, _ in rows], ["restore", "save-sha256 (sha256)", "save-sha256 (sha1)", "version", "lfs"])
        self.assertAlmostEqual(rows[0][1][0][1], 2.1 / 4.0)  # the medians' ratio
        self.assertAlmostEqual(rows[1][1][0][1], 1.5)
        found = bars(charts.ratios_svg(rows))
        self.assertEqual(len(found), sum(len(r) for _, r, _ in rows))
        widths = [float(b.get("width")) for b in found]
        self.assertAlmostEqual(widths[1] / widths[2], 1.5 / 0.5, places=2)  # lengths follow the ratios

    def test_the_results_kept_draw(self):
        rows = charts.ratio_rows({p.stem: json.loads(p.read_text()) for p in common.RESULTS.glob("*.json")
                                  if p.stem not in ("fleet", "timeline")})
        if not rows:
            self.skipTest("no results kept")
        self.assertEqual(len(bars(charts.ratios_svg(rows))), sum(len(r) for _, r, _ in rows))


class Fleet(unittest.TestCase):
    def test_a_histogram_per_kind(self):
        # The fleet mode's shape (the walls of the successful boots, sorted; p50/p95 by nearest rank).
        fleet = {"n": 100, "kinds": {
            "baked-boot": {"n": 100, "walls": [0.1 + i / 1000 for i in range(100)], "server_cpu_s": 3.5},
            "cold-restore": {"n": 100, "walls": [2.0 + i / 100 for i in range(98)], "p50": 2.49, "p95": 2.93},
            "git-cold": {"n": 100, "walls": []}}}  # a kind without a successful boot: no panel
        svg = charts.fleet_svg(fleet, bins=20)
        self.assertEqual(len(bars(svg)), 40)
        heads = texts(svg)
        self.assertIn("baked-boot: 100 boots, p50 0.15 s, p95 0.19 s, p95 ÷ p50 1.30, server CPU 3.5 s "
                      "(0.035 s a boot)", heads)
        self.assertIn("cold-restore: 98 of 100 boots, p50 2.49 s, p95 2.93 s, p95 ÷ p50 1.18", heads)

    def test_fleet_results_draw(self):
        fleet = {"mode": "fleet", "kind": "fleet", "n": 3, "kinds": {
            "baked-boot": {"n": 3, "walls": [0.1, 0.12, 0.2], "p50": 0.12, "p95": 0.2}}}
        with tempfile.TemporaryDirectory() as out:
            made = dict(charts.draw(dict(RESULTS, fleet=fleet), Path(out)))
            self.assertEqual(made["fleet.svg"], "the fleet's boot times, per kind: baked-boot p50 0.12 s, p95 0.20 s")
            self.assertEqual(len(bars((Path(out) / "fleet.svg").read_text())), 20)

    def test_no_fleet_results_no_chart(self):
        with tempfile.TemporaryDirectory() as out:
            made = charts.draw(dict(RESULTS), Path(out))
            self.assertEqual([m for m, _ in made], ["ratios.svg"])
            self.assertEqual(sorted(p.name for p in Path(out).iterdir()), ["ratios.svg"])


LOG = """ DEBUG GET http://127.0.0.1:4000/repo.git/info/refs
 DEBUG POST http://127.0.0.1:4000/repo.git/git-upload-pack
 DEBUG POST http://127.0.0.1:4000/repo.git/git-upload-pack
 DEBUG pack: 5074 objects; stream ended after 900 ms, deltas resolved and indexed after 1000 ms
 DEBUG early checkout: 4739 files written
  INFO received 5074 objects
 DEBUG index built from the tree in 20 ms
 DEBUG 4847 files checked out after 400 ms
 DEBUG index written after 450 ms"""
TIMES = [50, 60, 80, 1400, 1420, 1421, 1430, 1810, 1860]


class Timeline(unittest.TestCase):
    def test_steps_from_the_log(self):
        events = [{"t_ms": t, "text": s} for t, s in zip(TIMES, LOG.splitlines())]
        steps, last = timeline.phases(events, 1900)
        self.assertEqual(last, 1300)  # 1400 - 1000 + 900
        names = [p["name"] for p in steps]
        self.assertEqual(names[:5], ["start-up (to the first request)", "request 1: GET info/refs",
                                     "request 2: POST git-upload-pack", "request 3: POST git-upload-pack",
                                     "to the pack's first byte"])
        self.assertEqual((steps[4]["start_ms"], steps[4]["end_ms"]), (80, 400))
        self.assertIn({"name": "early checkout: 4739 files written as the pack arrives", "start_ms": 400, "end_ms": 1420,
                       "colour": "#66bb6a"}, steps)
        self.assertIn("checkout: 4847 files written", names)
        self.assertEqual(steps[-1], {"name": "the rest, to the exit", "start_ms": 1860, "end_ms": 1900,
                                     "colour": "#757575"})
        svg = charts.timeline_svg({"phases": steps, "wall_ms": 1900, "last_byte_ms": last,
                                   "title": "a restore into an empty folder"})
        self.assertEqual(len(bars(svg)), len(steps))
        zoomed = [r for r in ET.fromstring(svg).iter(f"{NS}rect") if r.get("class") == "zoom"]
        self.assertEqual(len(zoomed), len([p for p in steps if p["end_ms"] >= 1150]))  # from 1300 - 0.25 × 600
        self.assertIn("Tail after the pack's last byte: 600 ms (32% of the wall), shaded; zoomed in below.",
                      texts(svg))


BOOT = """ DEBUG GET http://127.0.0.1:4000/repo.git/info/refs
 DEBUG POST http://127.0.0.1:4000/repo.git/git-upload-pack
 DEBUG POST http://127.0.0.1:4000/repo.git/git-upload-pack
 DEBUG thin pack: received after 30 ms, 2 delta bases
 DEBUG thin pack: 2 bases appended after 31 ms
 DEBUG pack: 7 objects; stream ended after 0 ms, deltas resolved and indexed after 1 ms
  INFO received 12 objects
 DEBUG switch: the index of 3f664917c20733253934d3c4ff8330a7a60f27b7 built after 4 ms
 DEBUG switch: 7 to write, 1 to remove, 4839 kept, planned after 60 ms
 DEBUG switch: removed after 61 ms
 DEBUG switch: 7 files rewritten in place after 65 ms
 DEBUG switch: written after 66 ms
 DEBUG switch: the index written after 80 ms"""


class Boot(unittest.TestCase):
    def test_the_switch_step_by_step(self):
        events = [{"t_ms": t, "text": s} for t, s in zip([20, 40, 41, 100, 101, 102, 103, 110, 166, 167, 171, 172, 186],
                                                          BOOT.splitlines())]
        steps, last = timeline.phases(events, 200)
        self.assertEqual(last, 100)
        got = [(p["name"], p["start_ms"], p["end_ms"]) for p in steps]
        self.assertEqual(got[4:], [("to the pack's first byte", 41, 70), ("pack (thin): first byte to last", 70, 100),
                                   ("pack (thin): 2 delta bases appended", 100, 101),
                                   ("pack: the completed pack indexed (7 objects)", 101, 102),
                                   ("switch: the index of TIP_SHA built", 106, 110),
                                   ("switch: 7 to write, 1 to remove, 4839 kept", 110, 166),
                                   ("switch: removed", 166, 167), ("switch: 7 files rewritten in place", 167, 171),
                                   ("switch: written", 171, 172), ("switch: the index written", 172, 186),
                                   ("the rest, to the exit", 186, 200)])
        svg = charts.timeline_svg({"phases": steps, "wall_ms": 200, "last_byte_ms": last, "title": "a boot"})
        self.assertEqual(len(bars(svg)), len(steps))
        self.assertIn("Tail after the pack's last byte: 100 ms (50% of the wall), shaded.", texts(svg))
        self.assertFalse([r for r in ET.fromstring(svg).iter(f"{NS}rect") if r.get("class") == "zoom"])


if __name__ == "__main__":
    unittest.main()
