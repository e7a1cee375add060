"""Statistics over a mode's kept runs, and the markdown its section is made of (the same tables
and lines the bash bench wrote)."""

import statistics


def values(runs, name, key):
    return sorted(r[key] for r in runs if r["name"] == name)


def median(runs, name, key="wall_s"):
    v = values(runs, name, key)
    return statistics.median(v) if v else float("nan")


def span(runs, name, key="wall_s"):
    v = values(runs, name, key)
    return f"{v[0]:.2f}–{v[-1]:.2f}" if v else "n/a"


def ratio(a, b):
    return f"{a / b:.2f}×" if b and b > 0 else "n/a"


def secs(v):
    return f"{v:.2f}"


def mib(kib):
    return f"{kib / 1024:.1f}"


def verdict(value, target):
    return "met" if value <= target else "**not met**"


def ratio_verdict(a, b, target):
    """`a ÷ b` and whether it is within `target`: '0.78× (target ≤ 0.8×: met)'."""
    if not b:
        return "n/a"
    return f"{a / b:.2f}× (target ≤ {target}×: {verdict(round(a / b, 2), target)})"


def summary_table(runs, names):
    """Medians of every contender; the ratios are of the first contender to each."""
    base = names[0]
    rows = [f"| contender | median wall (s) | wall range (s) | median peak RSS (MiB) | client user / sys CPU (s) "
            f"| server CPU (s) | {base} ÷ this: wall | {base} ÷ this: peak RSS |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in names:
        m = lambda key: median(runs, n, key)
        rows.append(f"| {n} | {secs(m('wall_s'))} | {span(runs, n)} | {mib(m('rss_kib'))} | "
                    f"{secs(m('user_s'))} / {secs(m('sys_s'))} | {secs(m('server_cpu_s'))} | "
                    f"{ratio(median(runs, base), m('wall_s'))} | "
                    f"{ratio(median(runs, base, 'rss_kib'), m('rss_kib'))} |")
    return "\n".join(rows)


def runs_table(runs, title, sent="sent_bytes"):
    """Every measured run; `title` heads its `extra` column."""
    rows = [f"| round | contender | wall (s) | peak RSS (MiB) | client user (s) | client sys (s) | server CPU (s) "
            f"| server sent (bytes) | {title} |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in runs:
        rows.append(f"| {r['round']} | {r['name']} | {secs(r['wall_s'])} | {mib(r['rss_kib'])} | "
                    f"{secs(r['user_s'])} | {secs(r['sys_s'])} | {secs(r['server_cpu_s'])} | {r[sent]} | "
                    f"{r.get('extra', '-')} |")
    return "\n".join(rows)


def produced_by(r, rounds=None):
    """The command, date and duration of a run; a note when it is a smoke run."""
    rounds = r["rounds"] if rounds is None else rounds
    text = (f"Produced by `{r['command']}` on {r['finished']} (the rounds took {r['secs']}s, "
            "checks included).")
    if rounds < 3:
        text += (f"\n\n**Smoke run** ({rounds} measured round(s)): it shows the benchmark works end to end; "
                 "its figures are not a measurement.")
    return text


def medians_note(r, warmup=None):
    warmup = r["warmup"] if warmup is None else warmup
    return (f"Medians over {r['rounds']} round(s), after {warmup} unmeasured warm-up round(s); the order of "
            "the contenders changes every round.")


def machine_md(r):
    m = r["machine"]
    return "\n".join([
        "### Machine", "",
        f"- git-session built from `{m['built_from']}` (release profile): `{m['version']}`",
        f"- {m['git']}; {m['uname']}",
        f"- CPU: {m['cpu']}; `nproc`: {m['cores']}; memory: {m['memory_gib']} GiB",
        f"- load average (1, 5, 15 min): {r['load_before']} before the runs, {r['load_after']} after",
    ])


def repo_md(repo):
    return "\n".join([
        "### Repository", "",
        f"- source: {repo['label']}",
        f"- objects: {repo['objects']} ({repo['in_pack']} packed, {repo['loose']} loose), pack "
        f"{repo['size_pack_kib'] // 1024} MiB; {repo['refs']} refs",
        f"- commits: {repo['commits_all']} in the repository, {repo['commits_tip']} reachable from TIP_SHA",
        f"- TIP_SHA: `{repo['sha']}` (`{repo['sha_label']}`): {repo['tip_files']} files ({repo['tip_mib']} MiB) "
        f"in {repo['tip_trees'] + 1} trees, so a depth-1 fetch carries {repo['tip_objects']} objects",
    ])


def sections(*parts):
    """Markdown blocks joined by blank lines."""
    return "\n\n".join(p.rstrip("\n") for p in parts if p is not None)
