"""--link RATE[,RTT_MS]: restore and baked against a model of a remote server instead of the shared
cores. A replaying proxy (bench/suite/replay_proxy.py) in front of the server answers every request
it has seen before from memory, after RTT_MS (default 20), at RATE MB/s (10^6 bytes), so no server
CPU runs here after the warm-up round (at least one). restore adds a file-floor contender (`tar xf`
of TIP_SHA's tree from an uncompressed local tar: the least any restore spends on the disk) and
reports every contender's wall against the wire time (bytes / RATE + requests x RTT) and the floor;
baked reports the same against the wire time (no load test). Their sections are restore-link-RATE
and baked-link-RATE (the shared-core ones are kept). lfs takes --link too (or BENCH_LINK): both
its servers behind the proxy, section lfs-link-RATE (lfs.py)."""

import re
import time

from . import common, rounds, servers
from .report import (machine_md, median, medians_note, mib, produced_by, ratio, ratio_verdict, repo_md,
                     runs_table, secs, sections, span)

NOT_MODELLED = "Not modelled: TCP connection set-up, the upload of the requests, TCP slow start."


def parse(spec):
    """RATE[,RTT_MS] -> (rate MB/s, rtt ms)."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(?:,([0-9]+(?:\.[0-9]+)?))?", spec or "")
    if not m:
        common.die(f"--link takes RATE[,RTT_MS] (MB/s, ms), e.g. 12.5,20; got {spec!r}")
    rate, rtt = float(m.group(1)), float(m.group(2) or 20)
    if rate <= 0:
        common.die("--link: the rate must be above 0")
    return rate, rtt


def model(args):
    return getattr(args, "link", None)


def proxy(srv, model_):
    """The proxy in front of `srv` (its answers and bytes in WORK/proxy.stats): (process, stats)."""
    stats = common.WORK / "proxy.stats"
    stats.unlink(missing_ok=True)
    px = servers.replay_proxy(srv.base, model_[0], model_[1], stats=stats)
    common.say(f"a model of a remote server at {px.value}: {model_[0]:g} MB/s, {model_[1]:g} ms round trip, "
               "answers replayed from memory")
    return px, stats


def restore(args, srv, info, make_mode, contenders):
    """The restore's rounds through the proxy, with the file-floor contender."""
    rate, rtt = model_ = model(args)
    n, warmup = common.rounds()
    warmup = max(warmup, 1)  # the warm-up fills the proxy's memory: the measured rounds are all replays
    tip_tar = common.RUNS / "tip.tar"
    tip_tar.parent.mkdir(parents=True, exist_ok=True)
    common.git(info["path"], "archive", "--format=tar", "-o", tip_tar, info["sha"])
    px, stats = proxy(srv, model_)
    with px:
        mode = make_mode(f"{px.value}/repo.git", info["sha"], None, model_, tip_tar)
        load, t0 = common.check_load("restore-link"), time.monotonic()
        runs = rounds.loop(mode, contenders, n, warmup, srv.meter(stats))
        took = time.monotonic() - t0
    r = rounds.results(args, f"restore-link-{rate:g}", "restore", took, load, runs, n, warmup, repo=info,
                       link=[rate, rtt], protocol=None, git_proto="2", contenders=contenders)
    common.remove(common.RUNS / "restore")
    return r


def proxy_note(r, what):
    rate, rtt = (f"{x:g}" for x in r["link"])
    return (f"{what}, through `bench/suite/replay_proxy.py` in front of the same server:\n"
            f"each answer is computed once (in the warm-up round) and then replayed from memory after {rtt} ms at\n"
            f"{rate} MB/s, so no server CPU runs on this machine during the measured rounds")


def wire_note(r):
    rate, rtt = (f"{x:g}" for x in r["link"])
    return f"The wire time of a run is the bytes the proxy sent ÷ {rate} MB/s + its answers × {rtt} ms."


def restore_rows(r):
    runs = r["runs"]
    rows = ["| contender | median wall (s) | wall range (s) | median peak RSS (MiB) | client user / sys CPU (s) "
            "| server CPU (s) | median wire time (s) | wall ÷ wire time | wall ÷ git-shallow |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in r["contenders"]:
        m = lambda k: median(runs, n, k)
        per_wire = "-" if n == "file-floor" else ratio(m("wall_s"), m("wire_s"))
        rows.append(f"{client_cells(runs, n)} | {secs(m('server_cpu_s'))} | {secs(m('wire_s'))} | {per_wire} | "
                    f"{ratio(m('wall_s'), median(runs, 'git-shallow'))} |")
    return "\n".join(rows)


def client_cells(runs, n):
    """The row's first cells: the contender, its wall (median, range), peak RSS and CPU."""
    m = lambda k: median(runs, n, k)
    return (f"| {n} | {secs(m('wall_s'))} | {span(runs, n)} | {mib(m('rss_kib'))} | {secs(m('user_s'))} / "
            f"{secs(m('sys_s'))}")


def restore_table(r):
    runs = r["runs"]
    rate, rtt = (f"{x:g}" for x in r["link"])
    gs, gsh, ff = median(runs, "git-session"), median(runs, "git-shallow"), median(runs, "file-floor")
    wgs, wgsh = median(runs, "git-session", "wire_s"), median(runs, "git-shallow", "wire_s")
    lim = max(wgs, ff)
    intro = (proxy_note(r, "The same contenders as the restore benchmark") + " and the client's own time\n"
             "shows. **file-floor**: `tar -xf TIP.tar -C DIR` of TIP_SHA's tree from a local uncompressed tar "
             "(`git archive\n--format=tar`), measured beside the others in every round: the least any restore "
             "spends on the disk.\n" + wire_note(r))
    lines = (f"- git-session ÷ its wire time: {ratio(gs, wgs)}; ÷ the larger of the wire time and the file-creation "
             f"floor\n  ({secs(lim)} s): {ratio(gs, lim)}; ÷ git-shallow: {ratio(gs, gsh)}\n"
             f"- git-session's time after the wire (median wall − its wire time): {secs(gs - wgs)} s; "
             f"git-shallow's: {secs(gsh - wgsh)} s")
    return sections(
        f"## restore-link: against a model of a remote server ({rate} MB/s, {rtt} ms round trip)",
        produced_by(r), intro, "### Results", restore_rows(r), lines, medians_note(r) + "\n" + NOT_MODELLED,
        repo_md(r["repo"]), machine_md(r), "### Every run", runs_table(runs, "wire time (s)", "proxy_bytes"))


def baked_rows(r):
    runs = r["runs"]
    rows = ["| contender | median wall (s) | wall range (s) | median peak RSS (MiB) | client user / sys CPU (s) "
            "| median bytes received | median wire time (s) | wall ÷ wire time |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in r["contenders"]:
        m = lambda k: median(runs, n, k)
        rows.append(f"{client_cells(runs, n)} | {m('proxy_bytes'):.0f} | {secs(m('wire_s'))} | "
                    f"{ratio(m('wall_s'), m('wire_s'))} |")
    return "\n".join(rows)


def baked_table(r):
    runs = r["runs"]
    rate, rtt = (f"{x:g}" for x in r["link"])
    m = lambda n, k="wall_s": median(runs, n, k)
    bb, gr, cr, cb = (m(n) for n in ("baked-boot", "git-recipe", "cold-restore", "cache-boot"))
    intro = (f"The contenders of the baked benchmark (base `{r['base_label']}`, `TIP_SHA` = `{r['tip_label']}`, "
             f"{r['changed']} files differ; the\nsame set-up and checks)"
             + proxy_note(r, "") + " (the template's set-up goes through the proxy too, unmeasured).\n"
             + wire_note(r))
    lines = "\n".join([
        f"- baked-boot ÷ git-recipe, median wall: {ratio_verdict(bb, gr, 0.6)}",
        f"- baked-boot ÷ cold-restore, median wall: {ratio_verdict(bb, cr, 0.35)}; bytes: "
        f"{ratio(m('baked-boot', 'proxy_bytes'), m('cold-restore', 'proxy_bytes'))}",
        f"- time after the wire (median wall − median wire time): baked-boot {secs(bb - m('baked-boot', 'wire_s'))} s, "
        f"git-recipe {secs(gr - m('git-recipe', 'wire_s'))} s, cold-restore {secs(cr - m('cold-restore', 'wire_s'))} s",
        f"- cache-boot ÷ cold-restore, median wall: {ratio(cb, cr)}",
    ])
    return sections(
        f"## baked-link: a boot from a baked template, against a model of a remote server ({rate} MB/s, {rtt} ms "
        "round trip)", produced_by(r), intro, "### Results", baked_rows(r), lines,
        medians_note(r) + "\n" + NOT_MODELLED, repo_md(r["repo"]), machine_md(r), "### Every run",
        runs_table(runs, "wire time (s)", "proxy_bytes"))
