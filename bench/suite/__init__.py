"""git-session's benchmark suite (issue 28's "bench as a program"; `scripts/bench` runs it).

Each mode is a module with `run(args) -> dict` (the raw results, kept as JSON in
bench/results/<section>.json) and `table(results) -> str` (its section of BENCHMARKS.md, generated
from those results): restore, save, archive, baked, version, lfs, sparse. Shared pieces: common
(paths, knobs, the binaries, hyperfine, results and sections), servers (examples/serve, the archive
server, giftless, the proxy; what a run costs the server), rounds (the measuring loop: one hyperfine
run per contender and round, GNU time, the checks), report (statistics and markdown), repo (the
generated repository), link (--link: the remote-server model, replay_proxy), protocol (--protocol).
Whole-command timings go through hyperfine (--export-json), installed when missing.
"""
