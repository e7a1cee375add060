#!/usr/bin/env python3
"""A Dulwich smart-HTTP git server for the integration tests.

Usage: dulwich_server.py ROOT PORT

Serves every bare repository under ROOT at http://127.0.0.1:PORT/<name> (e.g. /repo.git) with
dulwich.web (protocol v0/v1; upload-pack and receive-pack, anonymous) under wsgiref with one thread
per request. PORT 0 picks a free port. Once listening it prints exactly one line `PORT <n>` to
stdout; everything else (the request log, errors) goes to stderr. It exits when stdin reaches EOF,
so a test that dies never leaves a server behind.

Run it with the interpreter of the virtualenv that `scripts/peers` makes:
target/peers/dulwich/venv/bin/python tests/peers/dulwich_server.py ROOT 0
"""

import os
import socketserver
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from dulwich.errors import NotGitRepository
from dulwich.repo import Repo
from dulwich.server import FileSystemBackend
from dulwich.web import make_wsgi_chain


class ConfinedBackend(FileSystemBackend):
    """FileSystemBackend that resolves the URL path below the root, refusing a way out of it.

    dulwich.web asks for "/repo.git" (leading slash), which FileSystemBackend.open_repository joins
    as an absolute path: every repository would be "not inside root". So the path is made relative
    here; `..` segments are refused outright, and the resolved path (symlinks followed) must stay
    below the resolved root.
    """

    def open_repository(self, path):
        path = os.fsdecode(os.fspath(path))
        parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise NotGitRepository(f"Path {path!r} contains '..'")
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(os.path.join(real_root, *parts))
        if real != real_root and not real.startswith(real_root + os.sep):
            raise NotGitRepository(f"Path {path!r} not inside root {self.root!r}")
        return Repo(real)


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class StderrRequestHandler(WSGIRequestHandler):
    """wsgiref's handler, with its request log on stderr (never stdout)."""

    def log_message(self, format, *args):
        sys.stderr.write(
            "dulwich_server: %s %s\n" % (self.address_string(), format % args)
        )
        sys.stderr.flush()


def wait_for_stdin_eof():
    try:
        while sys.stdin.buffer.read(65536):
            pass
    finally:
        os._exit(0)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: dulwich_server.py ROOT PORT\n")
        return 2
    root = os.path.abspath(argv[1])
    if not os.path.isdir(root):
        sys.stderr.write(f"dulwich_server: {root}: not a directory\n")
        return 2
    port = int(argv[2])

    app = make_wsgi_chain(ConfinedBackend(root))
    server = make_server(
        "127.0.0.1",
        port,
        app,
        server_class=ThreadingWSGIServer,
        handler_class=StderrRequestHandler,
    )
    threading.Thread(target=wait_for_stdin_eof, daemon=True).start()
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
