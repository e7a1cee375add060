#!/usr/bin/env python3
"""A giftless Git LFS server for the integration tests.

Usage: giftless_server.py STORE PORT

Serves the LFS batch API of every <org>/<repo> at http://127.0.0.1:PORT/<org>/<repo>/objects/batch
(giftless's legacy endpoints), anonymous read and write, objects kept under STORE/<org>/<repo>/<oid>
(basic transfer, streamed through the server). PORT 0 picks a free port. Once listening it prints
exactly one line `PORT <n>` to stdout; the request log goes to stderr. It exits when stdin reaches
EOF, so a test that dies never leaves a server behind.

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
    from giftless.app import init_app
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", port, init_app(), threaded=True)
    print(f"PORT {server.server_port}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    os.unlink(config.name)
    os._exit(0)


if __name__ == "__main__":
    main()
