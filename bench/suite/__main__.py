"""Usage: python3 -m bench.suite [MODE...] [charts] [--write] [--tables] [--link RATE[,RTT_MS]] [--protocol 0|2]
                           [--object-format sha1|sha256|both] [BARE_REPO_PATH]

(scripts/bench runs the same program.) MODE: restore, save, archive, baked, version, lfs, sparse, signing,
agents, sessions, timeline, fleet, or
all (the default: restore, save, archive, baked and version, in that order; with only --link or
--protocol, restore).

Each mode runs, keeps its raw results in bench/results/SECTION.json and prints its section of
BENCHMARKS.md, generated from them; --write also replaces that section of BENCHMARKS.md (the others
are kept). --tables runs nothing: it regenerates the sections of the results kept (of the modes
given, or all). `charts` (alone: runs nothing) draws the charts at the top of BENCHMARKS.md from the
results kept (charts.py); every --write and --tables redraws them too. Sections: restore, restore-v0, restore-link-RATE, restore-sha256, save, save-sha256,
save-signed, archive, baked, baked-link-RATE, version, lfs, lfs-link-RATE, sparse, agents, sessions,
sessions-link-RATE, timeline, fleet.

Whole-command timings go through hyperfine (installed when missing) with --export-json; peak RSS and
CPU through GNU time (/usr/bin/time -f), the server's CPU through /proc. Restore, save, archive and
baked: each run is one hyperfine run (its unmeasured set-up in --prepare), in rounds whose order of
contenders changes every round, each result checked after its run.

Without BARE_REPO_PATH, restore, save, archive and baked read a repository generated with `git
fast-import` (>= 100k objects, >= 20k files in the tip tree, 400 commits touching files), cached under
the work folder. The repository given is never written to: save pushes to a copy. --object-format
(restore and save): the repository in that object format, or with `both` in SHA-256 and in SHA-1 in
the same rounds (formats.py below).

Environment knobs:
  BENCH_ROUNDS=5           measured rounds (each runs every contender once)
  BENCH_WARMUP=1           unmeasured warm-up rounds before them (save, --link: at least 1)
  BENCH_ARCHIVE_ROUNDS=3   archive: measured rounds for the generated archive (the big one)
  BENCH_BIG_MIB=1024       archive: size of the generated archive's files, in MiB (uncompressed)
  BENCH_VERSION_RUNS=200   version: runs of each command per round
  BENCH_BAKED_BASE=30      baked: the base, in first-parent commits behind the default branch
  BENCH_BAKED_TIP=3        baked: TIP_SHA, likewise
  BENCH_LOAD=16            baked: boots at once in the load test (of each kind)
  BENCH_SAVE_EDIT=middle   save: the file edited: middle (of the tree), largest, or a path
  BENCH_SETTLE=3           seconds to let the disk settle after deleting trees
  BENCH_SETTLE_DELETED=310 after deleting trees, wait until this long after (ext4's inode reuse)
  BENCH_SETTLE_MAX=900     then wait at most this long for the I/O pressure to fall below 1%
  BENCH_LFS_FILES=200      lfs: files of 1 MiB (BENCH_LFS_PORT=18765: giftless's port)
  BENCH_SPARSE_REPO, BENCH_SPARSE_DIR   sparse: the repository (git/git's mirror) and folder
  BENCH_AGENTS_REPO        agents: the repository (git/git's mirror)
  BENCH_AGENTS_FS_MIB=4096 agents: size of each loop-device file system (a sparse image)
  BENCH_SESSIONS_REPO      sessions: the repository served three times (git/git's mirror)
  BENCH_FLEET_N=100        fleet: boots at once (of each kind)
  BENCH_FLEET_REPO         fleet: the repository served (tokio's mirror)
  BENCH_LINK=RATE[,RTT]    lfs: the remote-server model (as --link)
  BENCH_NO_BUILD=1         skip `cargo build` (use the binaries already in target/release)
  BENCH_BIN=PATH           the git-session binary to measure (default: target/release/git-session)
  BENCH_SERVE=PATH         the test server, examples/serve (default: target/release/examples/serve)
  BENCH_WORK=DIR           work folder (default: bench-work/ in the repository root)
  BENCH_RESULTS=DIR        where results are kept (default: bench/results; e.g. elsewhere for a smoke run)
  BENCH_DOC=FILE           the file --write and --tables write (default: BENCHMARKS.md)
  BENCH_KEEP=1             keep the trees made (BENCH_WORK/runs/)
"""

import argparse
import importlib
import os
import shutil
import sys

from . import charts, common, link

MODES = ["restore", "save", "archive", "baked", "version", "lfs", "sparse", "signing", "agents",
         "sessions", "timeline", "fleet"]
DEFAULT = MODES[:5]
WITH_REPO = {"restore", "save", "archive", "baked", "signing", "timeline"}
EXTRAS = ["link", "protocol", "formats", "charts"]  # the options' modules, described after the modes


def parser():
    doc = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(prog="python3 -m bench.suite", usage=doc[0].removeprefix("Usage: "),
                                description=doc[1], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="The modes:\n\n" + "\n\n".join(describe(m) for m in MODES + EXTRAS))
    p.add_argument("words", nargs="*", metavar="MODE|BARE_REPO_PATH")
    p.add_argument("--write", action="store_true", help="replace each mode's section of BENCHMARKS.md")
    p.add_argument("--tables", action="store_true", help="regenerate the sections of the results kept")
    p.add_argument("--link", metavar="RATE[,RTT_MS]", help="restore, baked, lfs, sessions: the remote-server model")
    p.add_argument("--protocol", choices=["0", "2"], help="restore: over one protocol")
    p.add_argument("--object-format", choices=["sha1", "sha256", "both"],
                   help="restore, save: the repository in that object format, or both in the same rounds")
    return p


def describe(mode):
    doc = importlib.import_module(f"bench.suite.{mode}").__doc__.strip()
    return "\n".join("  " + line for line in doc.splitlines())


def parse(argv):
    p = parser()
    args = p.parse_intermixed_args(argv)
    args.argv, args.repo, args.modes, args.charts = list(argv), None, [], False
    for w in args.words:
        if w == "charts":
            args.charts = True
        elif w in MODES or w == "all":
            args.modes += [m for m in (DEFAULT if w == "all" else [w]) if m not in args.modes]
        elif args.repo is None:
            args.repo = w
        else:
            p.error(f"only one repository path, please (modes: {', '.join(MODES)}, all)")
    if not args.modes and not args.tables and not args.charts:
        args.modes = ["restore"] if args.link or args.protocol else list(DEFAULT)
    if args.link:
        spec = args.link
        args.link = link.parse(spec)
        os.environ["BENCH_LINK"] = spec  # for lfs
        if bad := [m for m in args.modes if m not in ("restore", "baked", "lfs", "sessions")]:
            p.error(f"--link models the restore, the baked boot, lfs and sessions only (not {', '.join(bad)})")
    if args.protocol:
        if args.link:
            p.error("--protocol and --link do not go together (the replaying proxy speaks v2)")
        if bad := [m for m in args.modes if m != "restore"]:
            p.error(f"--protocol applies to the restore benchmark only (not {', '.join(bad)})")
    if args.object_format:
        if args.link or args.protocol:
            p.error("--object-format goes with neither --link nor --protocol")
        if bad := [m for m in args.modes if m not in ("restore", "save")]:
            p.error(f"--object-format applies to restore and save only (not {', '.join(bad)})")
    if args.repo and not WITH_REPO & set(args.modes) and not args.tables:
        p.error(f"no repository to give {', '.join(args.modes)} (only restore, save, archive, baked, signing and "
                "timeline read one)")
    return args


def tables(args):
    """The sections of the results kept (of the modes given, or all), regenerated."""
    found = 0
    for path in sorted(common.RESULTS.glob("*.json")):
        r = common.load(path.stem)
        kind = r.get("kind", path.stem.split("-")[0])
        if kind not in MODES or (args.modes and kind not in args.modes):
            continue
        text = importlib.import_module(f"bench.suite.{kind}").table(r)
        print(text + "\n")
        common.write_section(path.stem, text)
        common.say(f"wrote the {path.stem} section of {common.DOC}")
        found += 1
    if not found:
        common.say(f"no results kept in {common.RESULTS} for {', '.join(args.modes or MODES)}: nothing written")


def fresh_runs():
    """A runs folder left by BENCH_KEEP or a failed run: deleted, and the disk let settle."""
    if common.RUNS.exists():
        shutil.rmtree(common.RUNS)
        common.deleted_now()
    common.settle()
    common.RUNS.mkdir(parents=True)


def run(args):
    common.neutralize()
    common.build()
    common.say(f"benchmarks: {' '.join(args.modes)}")
    if set(args.modes) & set(DEFAULT):
        fresh_runs()
    else:
        common.settle()
    try:
        for i, mode in enumerate(args.modes):
            if i:
                common.settle()  # after the trees of the mode before were deleted
            m = importlib.import_module(f"bench.suite.{mode}")
            results = m.run(args)
            name = results["mode"]
            common.say(f"results kept in {common.save(name, results)}")
            text = m.table(results)
            print(text + "\n", flush=True)
            if args.write:
                common.write_section(name, text)
                common.say(f"wrote the {name} section of {common.DOC}")
    except common.Failed:
        os.environ["BENCH_KEEP"] = "1"
        raise
    finally:
        common.remove(common.RUNS)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.tables:
        tables(args)
    elif args.modes:
        run(args)
    if args.charts or args.write or args.tables:
        charts.write()


main()
