#!/usr/bin/env python3
"""A giftless Git LFS server for the integration tests.

Usage: giftless_server.py STORE PORT [WORKERS]

Serves the LFS batch API of every <org>/<repo> at http://127.0.0.1:PORT/<org>/<repo>/objects/batch
(giftless's legacy endpoints), anonymous read and write, objects kept under STORE/<org>/<repo>/<oid>
(basic transfer, streamed through the server). PORT 0 picks a free port. Once listening it prints
exactly one line `PORT <n>` to stdout; the request log goes to stderr. It exits when stdin reaches
EOF, so a test that dies never leaves a server behind.

With WORKERS (the bench), giftless runs as it is deployed: under gunicorn, WORKERS processes with
one request each at a time, instead of werkzeug's development server (one process, whose threads
share one interpreter lock). PORT must then be a fixed port.

Run it with the interpreter of the virtualenv that `scripts/peers` makes:
target/peers/giftless/venv/bin/python tests/peers/giftless_server.py STORE 0
"""

import os
import sys
import tempfile
import threading


def main():
    store, port = sys.argv[1], int(sys.argv[2])
    config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    config.write(
        "AUTH_PROVIDERS:\n"
        "  - giftless.auth.allow_anon:read_write\n"
        "TRANSFER_ADAPTERS:\n"
        "  basic:\n"
        "    factory: giftless.transfer.basic_streaming:factory\n"
        "    options:\n"
        "      storage_class: giftless.storage.local_storage:LocalStorage\n"
        "      storage_options:\n"
        f"        path: {store}\n"
    )
    config.close()
    os.environ["GIFTLESS_CONFIG_FILE"] = config.name
    if len(sys.argv) > 3:
        return gunicorn(port, int(sys.argv[3]), config.name)
    from giftless.app import init_app
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", port, init_app(), threaded=True)
    print(f"PORT {server.server_port}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    os.unlink(config.name)
    os._exit(0)


def gunicorn(port, workers, config):
    """giftless under gunicorn's pre-fork server, until stdin reaches EOF."""
    import subprocess

    import ctypes
    import signal

    def die_with_parent():
        # PR_SET_PDEATHSIG: gunicorn ends when this process is killed, not only at stdin's EOF.
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)

    gun = os.path.join(os.path.dirname(sys.executable), "gunicorn")
    server = subprocess.Popen(
        [gun, "--workers", str(workers), "--bind", f"127.0.0.1:{port}", "--log-level", "warning",
         "--timeout", "120", "giftless.wsgi_entrypoint:app"],
        stderr=sys.stderr,
        preexec_fn=die_with_parent,
    )
    import socket
    import time

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    print(f"PORT {port}", flush=True)
    sys.stdin.read()
    server.terminate()
    server.wait()
    os.unlink(config)
    os._exit(0)


if __name__ == "__main__":
    main()
