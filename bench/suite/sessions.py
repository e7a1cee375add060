"""sessions: the restore of a sessions manifest of three repositories (GIT_SESSION_SESSIONS_FILE,
restored at once) against the same three single restores one after another, from one git
http-backend on 127.0.0.1 (the same cores). The three are git/git (BENCH_SESSIONS_REPO, default the
mirror `fetch` brings to /work/.mirror/git+git/repo), served as three repositories sharing its
objects (alternates): each restore makes the server build its own pack, which is what a manifest
restore overlaps. Depth 1, as both default to. The goal (issue 42): manifest ÷ sequential ≤ 0.5×.
With --link: through the remote-server model (link.py) instead, every answer replayed from memory
after the warm-up, so no server CPU runs; each answer is paced at RATE on its own (the model does not
share one link between answers at once)."""

import json
import os
import resource
import time

from . import common, link, servers

NAMES = ["manifest", "sequential"]
REPOS = ["a", "b", "c"]
MIRROR = "/work/.mirror/git+git/repo"
GOAL = 0.5


def served(work, mirror, env):
    """The three bare repositories, sharing the mirror's objects."""
    for name in REPOS:
        bare = work / "srv" / f"{name}.git"
        if not bare.exists():
            common.sh(["git", "clone", "-q", "--bare", "--shared", mirror, str(bare)], env=env)
    return common.sh(["git", "rev-parse", "HEAD"], cwd=work / "srv" / "a.git", env=env)


def commands(base, tip, work, runs):
    """The two contenders' shell commands against the server at `base`."""
    manifest = work / "sessions.json"
    manifest.write_text(json.dumps({"sessions": [
        {"dir": name, "read_url": f"{base}/{name}.git", "session_branch": common.BRANCH, "tip_sha": tip}
        for name in REPOS]}))
    mk = f'd=$(mktemp -d -p {runs})'
    one = (f'READ_URL={base}/{{r}}.git SESSION_BRANCH={common.BRANCH} TIP_SHA={tip} '
           f'{common.BIN} -q -C "$d/{{r}}" restore')
    return {
        "manifest": f'{mk} && cp {manifest} "$d/" && GIT_SESSION_SESSIONS_FILE="$d/sessions.json" '
                    f'{common.BIN} -q restore',
        "sequential": f'{mk} && ' + " && ".join(f'mkdir "$d/{r}" && ' + one.format(r=r) for r in REPOS),
    }


def client_cpu():
    """CPU seconds (user + system) of the children waited for so far, git-session's included."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def server_cpu(commands_, env, meter):
    """One more run of each contender: its wall time, the server's CPU seconds meanwhile and the
    client's (git-session's)."""
    out = {}
    for name, c in commands_.items():
        a, t0, c0 = meter.now(), time.monotonic(), client_cpu()
        common.sh(["bash", "-c", c], env=env)
        wall, cost = time.monotonic() - t0, servers.Meter.delta(a, meter.now())
        out[name] = {"wall_s": round(wall, 2), "client_cpu_s": round(client_cpu() - c0, 2), **cost}
    return out


def run(args):
    mirror = os.environ.get("BENCH_SESSIONS_REPO", MIRROR)
    model = link.model(args)
    work = common.WORK / "sessions"
    env = common.git_env(work / "home")
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    tip = served(work, mirror, env)
    sent = common.WORK / "serve.sent"
    sent.unlink(missing_ok=True)
    load = common.check_load("sessions")
    with servers.serve(work / "srv", sent) as srv:
        meter = servers.Meter(srv.pid, sent)
        if model:
            os.environ["BENCH_WARMUP"] = str(max(int(os.environ.get("BENCH_WARMUP", "1")), 1))
            stats = common.WORK / "proxy.stats"
            stats.unlink(missing_ok=True)
            px = servers.replay_proxy(srv.value, model[0], model[1], stats=stats)
            with px:
                meter.proxy_stats = stats
                cmds = commands(px.value, tip, work, runs)
                stats_ = common.measure(cmds, env)
                cost = server_cpu(cmds, env, meter)
        else:
            cmds = commands(srv.value, tip, work, runs)
            stats_ = common.measure(cmds, env)
            cost = server_cpu(cmds, env, meter)
    common.delete(runs)
    for name in NAMES:
        stats_[name]["one_run"] = cost[name]
    name = f"sessions-link-{model[0]:g}" if model else "sessions"
    return {"mode": name, "kind": "sessions", "machine": common.machine(), "repo": "git/git", "tip": tip,
            "load_before": load, "link": list(model) if model else None, "contenders": stats_,
            "concurrency": os.environ.get("GIT_SESSION_SESSIONS_CONCURRENCY", "4 (default)")}


def table(r):
    c = r["contenders"]
    ratio = c["manifest"]["median"] / c["sequential"]["median"]
    where = (f"through the remote-server model ({r['link'][0]:g} MB/s, {r['link'][1]:g} ms round trip; "
             "answers replayed from memory, each paced on its own)" if r.get("link")
             else "from git http-backend (examples/serve) on the same cores")
    head = (f"## sessions: a manifest of three repositories restored at once vs three single restores in a row"
            f"{' (link)' if r.get('link') else ''}\n\n"
            f"{r['machine']['date']}, {r['machine']['cores']} cores, git-session {r['machine']['commit']}, "
            f"{r['machine']['git']}; three copies of {r['repo']} at {r['tip'][:12]} (depth 1) {where}; "
            f"load average before: {r.get('load_before', 'n/a')}. `manifest`: one `restore` of "
            f"GIT_SESSION_SESSIONS_FILE (GIT_SESSION_SESSIONS_CONCURRENCY {r['concurrency']}); `sequential`: "
            f"the three single restores one after another. Medians of hyperfine runs (raw: "
            f"bench/results/{r['mode']}.json).\n\n"
            f"**manifest ÷ sequential: {ratio:.2f}×** (issue 42's goal ≤ {GOAL}×: "
            f"{'met' if ratio <= GOAL else 'not met'}).\n\n")
    cost = ["", "One more run of each, with the CPU it took:", "",
            "| contender | wall (s) | server CPU (s) | git-session CPU (s) | bytes sent (MiB) |",
            "| --- | --- | --- | --- | --- |"]
    num = lambda o, k: f"{o[k]:.2f}" if k in o else "n/a"  # noqa: E731 (not kept by older runs)
    for n in NAMES:
        o = c[n].get("one_run", {})
        sent = o.get("proxy_bytes") if r.get("link") else o.get("sent_bytes")
        cost.append(f"| {n} | {num(o, 'wall_s')} | {num(o, 'server_cpu_s')} | {num(o, 'client_cpu_s')} | "
                    f"{(sent or 0) / 1048576:.1f} |")
    seq = c["sequential"].get("one_run", {})
    if not r.get("link") and "client_cpu_s" in seq:
        cpu = seq["server_cpu_s"] + seq["client_cpu_s"]
        floor = cpu / r["machine"]["cores"]
        cost += ["", f"Server and client together need {cpu:.2f} s of CPU for the three: on "
                 f"{r['machine']['cores']} cores no overlap brings the manifest under {floor:.2f} s, "
                 f"{floor / c['sequential']['median']:.2f}× the sequential median, even on idle cores."]
    if r.get("link"):
        wire = c["sequential"].get("one_run", {}).get("proxy_bytes", 0) / (r["link"][0] * 1e6)
        cost += ["", f"The three packs over one shared {r['link'][0]:g} MB/s link would take at least "
                 f"{wire:.2f} s; a manifest wall below that comes from the model pacing each answer on its "
                 "own (a remote whose limit is per connection), not from a shared pipe."]
    return head + common.contender_table(r, NAMES) + "\n" + "\n".join(cost)
