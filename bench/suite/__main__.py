"""Usage: python3 -m bench.suite MODE... [--write] [--tables]

Modes: lfs, sparse. Each runs, keeps its raw results in bench/results/MODE.json, and prints its
table; --write also replaces its section of BENCHMARKS.md. --tables regenerates the sections from
the kept results without running anything. Knobs: BENCH_ROUNDS (5), BENCH_WARMUP (1),
BENCH_NO_BUILD=1, BENCH_BIN, BENCH_WORK; per mode, see each module."""

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
        results = common.load(mode) if args.tables else m.run(args)
        if not args.tables:
            common.save(mode, results)
        text = m.table(results)
        print(text + "\n")
        if args.write or args.tables:
            common.write_section(mode, text)


main()
