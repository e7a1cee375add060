"""The servers the modes read from, each started for a mode and killed at its end: examples/serve
(git http-backend), `python3 -m http.server` (the archives), giftless (LFS), and the remote-server
model (bench/suite/replay_proxy.py) in front of any of them. Each is a context manager whose `value`
is its base URL."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from . import common

TICKS = os.sysconf("SC_CLK_TCK")


class Process:
    """A server process, killed on exit; `ready` parses its first line of stdout into `value`."""

    def __init__(self, cmd, ready, env=None, cwd=None):
        self.proc = subprocess.Popen(
            [str(c) for c in cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd,
        )
        line = self.proc.stdout.readline()
        self.value = ready(line)
        if not self.value:
            self.proc.kill()
            raise SystemExit(f"bench: {cmd[0]} did not start: {line!r}")

    @property
    def pid(self):
        return self.proc.pid

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def _ready(line):
    return line.split()[1] if line.startswith("ready ") else None


def serve(root, sent=None, v0=False, requests=None):
    """examples/serve (git http-backend) over the bare repositories under `root`: base URL. With
    `sent`, that file holds the bytes of the response bodies sent so far; `v0`: a server that
    speaks protocol v0/v1 only."""
    cmd = [common.SERVE, root] + (["--sent-bytes", sent] if sent else []) + (["--v0"] if v0 else [])
    cmd += ["--requests", requests] if requests else []
    return Process(cmd, _ready)


class GitServer:
    """examples/serve over WORK/srv, where repo.git links to the repository (the bash bench's
    server): `base`, `url` (of repo.git), `root` (more repositories may go there, or `add()`), `meter()`.
    `v0`: a server that speaks protocol v0/v1 only, with uploadpack.allowReachableSHA1InWant in its
    own config (not the repository's): git's v0 fetch asks for a commit no ref tips only from a
    server that advertises allow-reachable-sha1-in-want."""

    def __init__(self, repo, ref, v0=False, requests=None):
        self.root, self.sent = common.WORK / "srv", common.WORK / "serve.sent"
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        (self.root / "repo.git").symlink_to(repo)
        self.sent.unlink(missing_ok=True)
        self.proc = serve(self.root, self.sent, v0, requests)
        self.base = self.proc.value
        self.url = f"{self.base}/repo.git"
        if v0:
            (self.root / ".server-home/.gitconfig").write_text("[uploadpack]\n\tallowReachableSHA1InWant = true\n")
        if subprocess.run(["git", "-c", "protocol.version=2", "ls-remote", self.url, ref],
                          capture_output=True).returncode:
            self.proc.__exit__()
            common.die(f"git ls-remote {self.url} failed")
        common.say(f"serving {repo} at {self.url}" + (" (protocol v0/v1 only)" if v0 else ""))

    def add(self, name, repo):
        """Another repository served beside repo.git, as NAME: its URL."""
        (self.root / name).symlink_to(repo)
        return f"{self.base}/{name}"

    def meter(self, proxy_stats=None):
        return Meter(self.proc.pid, self.sent, proxy_stats)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.__exit__()


def http_server(directory):
    """`python3 -m http.server` over `directory` on 127.0.0.1: base URL."""

    def ready(line):  # "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        words = line.split()
        return f"http://127.0.0.1:{words[5]}" if line.startswith("Serving HTTP on") else None

    return Process([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1",
                    "--directory", directory, "0"], ready)


def giftless(store, port, workers=0):
    """The giftless LFS server (scripts/peers installs it) on `port`: its base URL. With
    `workers`, under gunicorn with that many processes (as giftless is deployed), else on
    werkzeug's development server (one process, one interpreter lock)."""
    py = common.ROOT / "target/peers/giftless/venv/bin/python"
    if not py.exists() or (workers and not (py.parent / "gunicorn").exists()):
        subprocess.run([str(common.ROOT / "scripts/peers")], check=True)
    return Process(
        [py, common.ROOT / "tests/peers/giftless_server.py", store, port] + ([workers] if workers else []),
        lambda l: f"http://127.0.0.1:{l.split()[1]}" if l.startswith("PORT ") else None,
    )


def signing_service(key, log):
    """examples/signing-service.py signing with `key` on 127.0.0.1, a line a request in `log`: its URL."""
    return Process([sys.executable, "-u", common.ROOT / "examples/signing-service.py", "--key", key,
                    "--port", "0", "--log", log], lambda l: f"http://127.0.0.1:{l.strip()}" if l.strip().isdigit() else None)


def replay_proxy(upstream, rate, rtt, port=0, keep_host=False, stats=None):
    """bench/suite/replay_proxy.py in front of `upstream` (the remote-server model): its base URL.
    With `stats`, that file holds `REQUESTS BYTES` answered so far."""
    cmd = [sys.executable, "-m", "bench.suite.replay_proxy", upstream, "--rate", rate, "--rtt", rtt,
           "--port", port]
    if keep_host:
        cmd.append("--keep-host")
    if stats:
        cmd += ["--stats", stats]
    return Process(cmd, _ready, cwd=common.ROOT)


class Meter:
    """What a run costs the server: its CPU (user + system of the process and the children it
    reaped, /proc/PID/stat), the bytes it sent (examples/serve --sent-bytes) and, behind the
    remote-server model, the answers and bytes the proxy sent (its --stats)."""

    def __init__(self, pid, sent=None, proxy_stats=None):
        self.pid, self.sent, self.proxy_stats = pid, sent, proxy_stats

    def shell(self, out):
        """Shell text that writes a snapshot to `out` (for hyperfine's --prepare and --cleanup)."""
        q = lambda p: shlex.quote(str(p or "/dev/null/none"))
        return (f"{{ awk '{{print $14 + $15 + $16 + $17}}' /proc/{self.pid}/stat; "
                f"cat {q(self.sent)} 2>/dev/null || echo 0; "
                f"cat {q(self.proxy_stats)} 2>/dev/null || echo 0 0; }} >{q(out)}")

    def now(self):
        """A snapshot read here: (CPU ticks, bytes sent, proxy answers, proxy bytes)."""
        ticks = sum(int(x) for x in Path(f"/proc/{self.pid}/stat").read_text()
                    .rsplit(")", 1)[1].split()[11:15])
        return (ticks, _read(self.sent, "0"), *(_read(self.proxy_stats, "0 0", 2)))

    @staticmethod
    def read(path):
        words = Path(path).read_text().split()
        return tuple(int(w) for w in words[:4])

    @staticmethod
    def delta(a, b):
        """The run's costs between two snapshots."""
        return {"server_cpu_s": round((b[0] - a[0]) / TICKS, 2), "sent_bytes": b[1] - a[1],
                "proxy_requests": b[2] - a[2], "proxy_bytes": b[3] - a[3]}


def _read(path, default, n=1):
    try:
        text = Path(path).read_text() if path else default
    except OSError:
        text = default
    words = [int(w) for w in text.split()[:n]]
    return words if n > 1 else words[0]
