"""--object-format sha1|sha256|both: restore and save on a repository of that object format (repo.py
makes the generated one from the same fast-import stream in a repository of that format, or
converts the one given), and with `both` on the SHA-1 and the SHA-256 repository in the same
rounds, served by the same server: each contender runs on one right after the other (which one
first alternates, like the contenders' order), so SHA-256 ÷ SHA-1 is the same run's. The git
contenders create their repositories with `--object-format=sha256` for SHA-256 (clone finds it).
Sections restore-sha256 and save-sha256 (sha256 or both; sha1 alone writes restore and save): per
contender, the SHA-256 and SHA-1 medians and their ratio, and git-session ÷ each contender on
each format; then every format's own table and every run."""

import statistics

from .report import machine_md, median, mib, ratio, repo_md, runs_table, secs, sections, summary_table, verdict

LABEL = {"sha1": "SHA-1", "sha256": "SHA-256"}


def of(args):
    """The formats to run, SHA-256 first; None without the option (the repository's own)."""
    return {None: None, "sha1": ["sha1"], "sha256": ["sha256"], "both": ["sha256", "sha1"]}[
        getattr(args, "object_format", None)]


def tagged(fmts):
    """Whether the runs are tagged with their format and go to a -sha256 section."""
    return bool(fmts) and "sha256" in fmts


def section(name, fmts):
    return f"{name}-sha256" if tagged(fmts) else name


def infos(args, get):
    """{format: repository info} to run on (one entry, keyed None, without the option)."""
    return {f: get(args, f) for f in of(args) or [None]}


def extra(fmts, infos_):
    """What a -sha256 section's results keep beside the runs: the formats and each one's repository."""
    return {"formats": fmts, "repos": infos_} if tagged(fmts) else {}


def cpu(runs, name):
    v = [r["user_s"] + r["sys_s"] for r in runs if r["name"] == name]
    return statistics.median(v) if v else float("nan")


def compare_table(r):
    """Per contender: the SHA-256 and SHA-1 medians, their ratio, git-session ÷ it on each format."""
    by = {f: [x for x in r["runs"] if x.get("format") == f] for f in LABEL}
    m = lambda f, n, k="wall_s": median(by[f], n, k)
    rows = ["| contender | SHA-256 median wall (s) | SHA-1 median wall (s) | SHA-256 ÷ SHA-1: wall "
            "| SHA-256 ÷ SHA-1: client CPU | peak RSS SHA-256 / SHA-1 (MiB) | git-session ÷ this: SHA-256 "
            "| git-session ÷ this: SHA-1 |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in r["contenders"]:
        rows.append(f"| {n} | {secs(m('sha256', n))} | {secs(m('sha1', n))} | {ratio(m('sha256', n), m('sha1', n))} | "
                    f"{ratio(cpu(by['sha256'], n), cpu(by['sha1'], n))} | "
                    f"{mib(m('sha256', n, 'rss_kib'))} / {mib(m('sha1', n, 'rss_kib'))} | "
                    f"{ratio(m('sha256', 'git-session'), m('sha256', n))} | "
                    f"{ratio(m('sha1', 'git-session'), m('sha1', n))} |")
    return "\n".join(rows)


def goals(r, git):
    """Issue 40's two goals, when both formats ran: git-session SHA-256 ÷ SHA-1 ≤ 1.1×, and its ratio
    to `git` on SHA-256 no worse than on SHA-1."""
    if r["formats"] != ["sha256", "sha1"]:
        return "(one format only: no SHA-256 ÷ SHA-1 ratios; run with `--object-format both`)"
    by = {f: [x for x in r["runs"] if x["format"] == f] for f in LABEL}
    gs = {f: median(by[f], "git-session") for f in LABEL}
    vs = {f: gs[f] / median(by[f], git) for f in LABEL}
    same = gs["sha256"] / gs["sha1"]
    return (f"- git-session SHA-256 ÷ SHA-1, median wall: {same:.2f}× "
            f"(target ≤ 1.1×: {verdict(round(same, 2), 1.1)})\n"
            f"- git-session ÷ {git}, median wall: SHA-256 {vs['sha256']:.2f}×, SHA-1 {vs['sha1']:.2f}× "
            f"(target: SHA-256's no worse than SHA-1's: {verdict(round(vs['sha256'], 2), round(vs['sha1'], 2))})")


def table(r, intro, git, method, every, extra_title, per_format=None):
    """A -sha256 section: `intro` (title and contenders), the comparison, the goals against `git`,
    each format's own table (and `per_format(runs, format)`'s lines), `method`, the repositories,
    the machine, and every run under `every` (its extra column titled `extra_title`)."""
    parts = [intro, "### Results", compare_table(r), goals(r, git)]
    for f in r["formats"]:
        runs = [x for x in r["runs"] if x["format"] == f]
        parts += [f"#### {LABEL[f]} alone", summary_table(runs, r["contenders"]),
                  per_format(runs, f) if per_format else None]
    repos = [repo_md(r["repos"][f]).replace("### Repository", f"### Repository ({LABEL[f]})") for f in r["formats"]]
    shown = [x | {"name": f"{x['name']} ({LABEL[x['format']]})"} for x in r["runs"]]
    return sections(*parts, method + "\n" + pairing(r), *repos, machine_md(r), every, runs_table(shown, extra_title))


def pairing(r):
    if len(r["formats"]) == 1:
        return f"Every run on the {LABEL[r['formats'][0]]} repository."
    return ("In every round each contender runs on the SHA-256 and on the SHA-1 repository, one right after the "
            "other\n(which one first alternates too), both served by the same server.")


def lead(r):
    """Which repositories a -sha256 section ran on."""
    return ("The repository in SHA-256" + (" and, in the same rounds, in SHA-1" if len(r["formats"]) > 1 else "")
            + " (`--object-format`): the generated one is made from the same\nfast-import stream in each format, "
            "a given one converted (`git fast-export | git fast-import`); the same commit\nhas another id in each.")
