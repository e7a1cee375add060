"""git-session's benchmark suite (the program `scripts/bench` is becoming, issue 28).

Each mode is a module with `run(args) -> dict` (the raw results, kept as JSON in
bench/results/<mode>.json) and `table(results) -> str` (its section of BENCHMARKS.md, generated from
those results). Whole-command timings go through hyperfine (--export-json), installed when missing.
"""
