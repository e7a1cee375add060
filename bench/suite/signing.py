"""signing: save's one-file edit (the save mode's work) signed and not, side by side in the same
rounds, each contender on its own session branch of the same server copy:
  git-session          PUSH_URL=… git-session -C DIR save -m MSG            (unsigned)
  gs-key               the same with SIGNING_KEY_FILE (an Ed25519 key made by ssh-keygen)
  gs-service           the same with SIGNING_URL (examples/signing-service.py on 127.0.0.1, holding
                       the key) and SIGNING_PUBLIC_KEY
  git                  git add -A && git commit && git push                    (unsigned)
  git-signed           the same with `commit -S` (gpg.format=ssh, ssh-keygen signing with the key file)
Each run records the requests the git server (examples/serve --requests) and the service (its --log)
answered, so "one extra round trip" is counted, not inferred (the replaying remote-server model
cannot stand in front of a push: it would answer later advertisements from memory). Each
commit is checked by `git verify-commit` (allowed-signers file) on the server, and each run like
save's (the remote branch is the new HEAD, a child of the previous one; `git status` clean).
Section save-signed."""

import os
import subprocess
import time
from pathlib import Path

from . import common, repo, rounds, servers
from .report import machine_md, median, medians_note, produced_by, ratio_verdict, repo_md, runs_table, sections
from .report import summary_table
from .save import PUSH, edit_file

CONTENDERS = ["git-session", "gs-key", "gs-service", "git", "git-signed"]
SIGNED = {"gs-key", "gs-service", "git-signed"}
SERVICE = common.ROOT / "examples/signing-service.py"


class Signing(rounds.Mode):
    prefix = "save-signed"

    def __init__(self, url, sha, edit, key, service, counters):
        self.url, self.edit, self.key = url, edit, key
        self.prev = {n: sha for n in CONTENDERS}
        self.service, self.counters = service, counters
        self.seen = counters()
        self.env = os.environ | {"GIT_AUTHOR_NAME": "Bench Author", "GIT_AUTHOR_EMAIL": "author@bench.invalid",
                                 "GIT_COMMITTER_NAME": "Bench Committer",
                                 "GIT_COMMITTER_EMAIL": "committer@bench.invalid"}

    def dir(self, name, r):
        return common.RUNS / self.prefix / name

    def command(self, name, d, r):
        msg = f"bench: round {r}"
        if name not in ("git", "git-signed"):
            env = {"git-session": [], "gs-key": [f"SIGNING_KEY_FILE={self.key}"],
                   "gs-service": [f"SIGNING_URL={self.service}",
                                  f"SIGNING_PUBLIC_KEY={self.key.with_suffix('.pub').read_text().strip()}"]}[name]
            return ["env", f"PUSH_URL={self.url}", *env, common.BIN, "-C", d, "save", "-m", msg]
        push = PUSH.format(q="-q")
        if name == "git-signed":
            push = push.replace('git commit -q -m "$2"', f'git -c gpg.format=ssh -c user.signingkey={self.key} '
                                                         'commit -S -q -m "$2"')
        return ["bash", "-c", push, "_", d, msg, self.url, branch(name)]

    def prepare(self, name, d, r):
        with open(d / self.edit, "a") as f:
            f.write(f"bench: edit of round {r} by {name}\n")
        self.seen = self.counters()
        return ""

    def verify(self, name, d, log, r):
        git_requests, service_requests = (b - a for a, b in zip(self.seen, self.counters()))
        head = common.git(d, "rev-parse", "HEAD")
        remote = common.sh(["git", "ls-remote", self.url, f"refs/heads/{branch(name)}"]).split("\t")[0]
        if remote != head or common.git(d, "rev-parse", "HEAD~1") != self.prev[name]:
            common.show(log.read_text())
            common.die(f"signing: {name}: the remote is {remote!r}, HEAD {head}, expected a child of {self.prev[name]}")
        self.prev[name] = head
        signed = verified(d, head, self.key)
        if signed != (name in SIGNED):
            common.die(f"signing: {name}: git verify-commit {head} {'passed' if signed else 'failed'}")
        took = rounds.clean_status(name, d)
        return {"git_requests": git_requests, "service_requests": service_requests, "status_s": took,
                "extra": f"{git_requests} / {service_requests}"}


def branch(name):
    return f"sessions/bench-{name}"


def verified(d, commit, key):
    allowed = key.with_name("allowed_signers")
    out = subprocess.run(["git", "-C", str(d), "-c", "gpg.format=ssh", "-c", "gpg.ssh.program=ssh-keygen",
                          "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", commit],
                         capture_output=True, text=True)
    return out.returncode == 0


def make_key():
    keys = common.WORK / "signing-keys"
    common.delete(keys)
    keys.mkdir(parents=True)
    key = keys / "agent"
    common.sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bench@agent", "-f", key])
    (keys / "allowed_signers").write_text(f"* {key.with_suffix('.pub').read_text().strip()}\n")
    return key


def counters(requests, service_log):
    """(requests the git server answered, requests the service answered) so far."""
    git = int(requests.read_text().split()[0]) if requests.exists() else 0
    service = len(service_log.read_text().splitlines()) if service_log.exists() else 0
    return git, service


def set_up(srv, info):
    """The server's copy (every contender's branch at TIP_SHA) and one tree per contender."""
    copy, sha, runs = srv.root / "save-signed.git", info["sha"], common.RUNS / "save-signed"
    common.delete(copy, runs)
    common.sh(["git", "clone", "-q", "--bare", info["path"], copy])
    for n in CONTENDERS:
        common.git(copy, "update-ref", f"refs/heads/{branch(n)}", sha)
    url = f"{srv.base}/{copy.name}"
    for n in CONTENDERS:
        d = runs / n
        d.mkdir(parents=True)
        if n in ("git", "git-signed"):
            common.sh(["git", "init", "-q", d])
            common.git(d, "-c", "protocol.version=2", "fetch", "-q", "--depth", "1", url, sha)
            common.git(d, "switch", "-q", "-c", branch(n), sha)
        else:
            env = os.environ | {"READ_URL": url, "SESSION_BRANCH": branch(n), "TIP_SHA": sha}
            if subprocess.run([str(common.BIN), "-C", str(d), "-q", "restore"], env=env).returncode:
                common.die(f"signing: set-up: git-session restore into {d} failed")
    return url


def run(args):
    common.need("git", "time", "ssh-keygen")
    info = repo.get(args, None)
    n, warmup = common.rounds()
    edit = edit_file(info["path"], info["sha"])
    key = make_key()
    requests, service_log = common.WORK / "signing-git.requests", common.WORK / "signing-service.log"
    service_log.unlink(missing_ok=True)
    with servers.GitServer(Path(info["path"]), info["ref"], requests=requests) as srv, \
            servers.signing_service(key, service_log) as service:
        url = set_up(srv, info)
        count = lambda: counters(requests, service_log)
        mode = Signing(url, info["sha"], edit, key, f"{service.value}/sign", count)
        load, t0 = common.check_load("save-signed"), time.monotonic()
        runs = rounds.loop(mode, CONTENDERS, n, max(warmup, 1), srv.meter())
        took = time.monotonic() - t0
    common.remove(common.RUNS / "save-signed")
    return rounds.results(args, "save-signed", "signing", took, load, runs, n, max(warmup, 1), repo=info,
                          contenders=CONTENDERS, edit_file=edit)


def goals(runs):
    reqs = lambda name, k: median(runs, name, k)
    extra = reqs("gs-service", "git_requests") - reqs("git-session", "git_requests")
    return (f"- signed with a key file ÷ unsigned, median wall: "
            f"{ratio_verdict(median(runs, 'gs-key'), median(runs, 'git-session'), 1.1)}\n"
            f"- with the service: {reqs('gs-service', 'service_requests'):.0f} request to the service per save "
            f"(goal 1), {extra:+.0f} requests to the git server beside the unsigned save's (goal +0); "
            f"wall ÷ the key file's: {median(runs, 'gs-service') / median(runs, 'gs-key'):.2f}×\n"
            f"- git-session signed ÷ git signed (`commit -S` with ssh-keygen), median wall: "
            f"{ratio_verdict(median(runs, 'gs-key'), median(runs, 'git-signed'), 1.0)}")


def table(r):
    runs = r["runs"]
    intro = (
        "save's one-file edit, signed and not, in the same rounds, each contender on its own session branch of\n"
        "one server copy (`examples/serve`, counting the requests it answers), the signing service\n"
        "(`examples/signing-service.py`, `ssh-keygen -Y sign` per request) beside it on 127.0.0.1. "
        "Contenders: `git-session` (unsigned save), `gs-key`\n(`SIGNING_KEY_FILE`, Ed25519), `gs-service` "
        "(`SIGNING_URL` + `SIGNING_PUBLIC_KEY`), `git` (`git add -A && git commit &&\ngit push`), `git-signed` "
        "(the same with `commit -S`, `gpg.format=ssh`, ssh-keygen). Every signed commit is\nchecked by "
        "`git verify-commit` with an allowed-signers file, every unsigned one must fail it.")
    method = medians_note(r) + " \"requests\" in the runs table: to the git server / to the signing service."
    return sections("## save-signed: save signed with a key file and with a signing service", produced_by(r),
                    intro, "### Results", summary_table(runs, r["contenders"]), goals(runs), method,
                    repo_md(r["repo"]), machine_md(r), "### Every run", runs_table(runs, "requests (git / service)"))
