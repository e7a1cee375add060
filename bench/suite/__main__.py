"""Usage: python3 -m bench.suite MODE... [--write] [--tables]

Modes: lfs, sparse. Each runs, keeps its raw results in bench/results/MODE.json, and prints its
table; --write also replaces its section of BENCHMARKS.md. --tables regenerates the sections from
the kept results without running anything. Knobs: BENCH_ROUNDS (5), BENCH_WARMUP (1),
BENCH_NO_BUILD=1, BENCH_BIN, BENCH_WORK, BENCH_LINK=RATE[,RTT_MS] (lfs: both servers behind the
remote-server model, scripts/replay-proxy; results and section lfs-link-RATE); per mode, see each
module."""

import argparse
import importlib

from . import common

MODES = ["lfs", "sparse"]


def main():
    p = argparse.ArgumentParser(prog="bench")
    p.add_argument("modes", nargs="+", choices=MODES)
    p.add_argument("--write", action="store_true")
    p.add_argument("--tables", action="store_true")
    args = p.parse_args()
    if not args.tables:
        common.build()
    for mode in args.modes:
        m = importlib.import_module(f"bench.suite.{mode}")
        link = common.link()
        name = f"{mode}-link-{link[0]:g}" if link and mode == "lfs" else mode
        results = common.load(name) if args.tables else m.run(args)
        if not args.tables:
            common.save(name, results)
        text = m.table(results)
        print(text + "\n")
        if args.write or args.tables:
            common.write_section(name, text)


main()
