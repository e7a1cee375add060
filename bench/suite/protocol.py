"""--protocol 0|2: the restore over one protocol. Without it, git-session picks (v2 here) and git runs
with protocol.version=2. 0: the server runs with --v0 (it speaks v0/v1 only, as JGit 4.11, Dulwich and
Azure DevOps do) and uploadpack.allowReachableSHA1InWant in its own config (git's v0 fetch of a commit
no ref tips needs it), git-session with GIT_SESSION_PROTOCOL=0, the git contenders with
`-c protocol.version=0`, server-floor posts git-session's v0 request; its section is restore-v0, which
compares git-session with the last v2 restore kept (bench/results/restore.json: same repository,
TIP_SHA and binary) when there is one. 2: the same with 2, section restore."""

import hashlib
import json

from . import common
from .report import median, ratio, ratio_verdict, secs


def pkt(line):
    """One pkt-line (gitprotocol-common)."""
    return b"%04x%s" % (len(line) + 4, line.encode())


def floor_request(sha, protocol):
    """The fetch request git-session sends: v2's (src/restore/fetch.rs: no-progress, ofs-delta,
    deepen 1, want, done) or v0's (src/wire/upload_pack/v0.rs: want with capabilities, deepen 1,
    flush, done); object-format as long as the id."""
    fmt = "sha256" if len(sha) == 64 else "sha1"
    if protocol == "0":
        caps = f"multi_ack_detailed no-done side-band-64k ofs-delta no-progress thin-pack shallow object-format={fmt}"
        return pkt(f"want {sha} {caps}\n") + pkt("deepen 1\n") + b"0000" + pkt("done\n")
    return (pkt("command=fetch\n") + pkt(f"object-format={fmt}\n") + b"0001" + pkt("ofs-delta\n")
            + pkt("no-progress\n") + pkt("deepen 1\n") + pkt(f"want {sha}\n") + pkt("done\n") + b"0000")


def floor_headers(protocol):
    return [] if protocol == "0" else ["-H", "Git-Protocol: version=2"]


def section(protocol):
    return "restore-v0" if protocol == "0" else "restore"


def run_id(repo_path, sha):
    """What a restore run measured: the repository, TIP_SHA and the binary."""
    digest = hashlib.sha256(common.BIN.read_bytes()).hexdigest()[:16]
    return f"{repo_path} {sha} {digest}"


def v2_reference(run_id_):
    """The last v2 restore kept (bench/results/restore.json) when it measured the same run id:
    its date and medians, for restore-v0's comparison."""
    path = common.RESULTS / "restore.json"
    if not path.exists():
        return None
    r = json.loads(path.read_text())
    if r.get("id") != run_id_ or r.get("link"):
        return None
    return {"finished": r["finished"],
            "medians": {n: median(r["runs"], n) for n in ("git-session", "git-shallow", "seeds-recipe", "server-floor")}}


def server_note():
    return ("(checked after every run). The server runs with `--v0`: it drops the `Git-Protocol` header, so "
            "`git http-backend`\nspeaks protocol v0/v1 only, as JGit 4.11, Dulwich and Azure DevOps do; with "
            "`uploadpack.allowReachableSHA1InWant`\nin the server's own config (not the repository's), without "
            "which git's v0 fetch refuses to ask for a commit no\nref tips (`Server does not allow request for "
            "unadvertised object`):")


def floor_note(protocol):
    if protocol == "0":
        return ("  protocol v0 request git-session sends (`want $SHA` with `multi_ack_detailed no-done side-band-64k "
                "ofs-delta\n  no-progress thin-pack shallow object-format=sha1`, `deepen 1`, flush, `done`; no "
                "`Git-Protocol` header). The")
    return ("  protocol v2 fetch request git-session sends (`ofs-delta`, `no-progress`, `deepen 1`, `want $SHA`, "
            "`done`). The")


def v0_lines(r):
    """restore-v0's comparison with git over v0, and with the v2 run of the same id."""
    runs, v2 = r["runs"], r.get("v2")
    gs = median(runs, "git-session")
    lines = ["- git-session over v0 ÷ git-shallow over v0 (`git fetch --depth 1`), median wall: "
             + ratio_verdict(gs, median(runs, "git-shallow"), 1.0)]
    if not v2:
        lines.append("- over v2: no restore run of this repository, TIP_SHA and binary kept in "
                     "bench/results/restore.json to compare with (run `python3 -m bench.suite restore` first)")
        return "\n".join(lines)
    m = v2["medians"]
    lines += [
        f"- git-session over v0 ÷ over v2, median wall: {ratio_verdict(gs, m['git-session'], 1.1)}; git-shallow "
        f"v0 ÷ v2: {ratio(median(runs, 'git-shallow'), m['git-shallow'])}; server-floor v0 ÷ v2: "
        f"{ratio(median(runs, 'server-floor'), m['server-floor'])}",
        f"  (v2: the restore run kept in bench/results/restore.json, {v2['finished']}: the same server without "
        "`--v0`, the same",
        f"  repository, TIP_SHA and binary; medians: git-session {secs(m['git-session'])} s, git-shallow "
        f"{secs(m['git-shallow'])} s,",
        f"  seeds-recipe {secs(m['seeds-recipe'])} s, server-floor {secs(m['server-floor'])} s)",
    ]
    return "\n".join(lines)
