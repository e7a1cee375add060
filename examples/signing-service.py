#!/usr/bin/env python3
"""A reference signing service for git-session (docs/CONTRACT.md, "Signing service").

The backend runs it beside its keys, so no private key enters the sandbox; the sandbox gets
SIGNING_URL (or SIGNING_URL_FILE) and SIGNING_PUBLIC_KEY. Python 3's standard library only; signs
with `ssh-keygen -Y sign -n git` (openssh-client), as git does for gpg.format = ssh.

    signing-service.py --key KEY [--key KEY2 ...] [--token-file FILE] [--port PORT]

  --key KEY          an OpenSSH private key (unencrypted) it signs with; repeat for several: each
                     request's Git-Session-Public-Key header picks one.
  --token-file FILE  a file holding the token a request must carry (Basic auth with it as the
                     password, or the user name when there is no password, or Bearer), read at
                     each request so a rotated token works at once; without it, no check.
  --port PORT        the port on 127.0.0.1 (default 0: any free one).
  --log FILE         append one line per request: "POST <path> <status>" (no header, no token).

It prints the port it listens on (one line) once it is ready. The exchange:

    POST <any path>
    Content-Type: application/octet-stream
    Git-Session-Namespace: git
    Git-Session-Public-Key: ssh-ed25519 AAAA...
    Authorization: Basic ... | Bearer ...

    <the commit object without its signature header>

answered `200` with the armored signature (`-----BEGIN SSH SIGNATURE-----` ...), or 400 (a
request not of this form), 401 (no or another token), 411, 413 (over 16 MiB), 422 (a key it does
not hold), 500 (ssh-keygen failed).

For git-session's tests only, --mode makes it a hostile service (the client must refuse each):
garbage (200 and no signature), other-key (signs with --other-key), other-bytes (signs other bytes),
stall (reads the request, never answers), 500 (always HTTP 500), huge (200 and an endless answer),
huge-length (200 announcing a 1 GiB Content-Length, then nothing),
401-then-rotate (a request with another token than the file's is answered 401 after the URL
with the file's token is written to --rotate-url-file, as a backend rotating a token does).
"""

import argparse
import base64
import hmac
import http.server
import subprocess
import sys
import threading
import time
import urllib.parse

MAX_REQUEST = 16 << 20
MODES = [
    "sign", "garbage", "other-key", "other-bytes", "stall", "500", "huge", "huge-length",
    "401-then-rotate",
]


def public_line(key):
    """`<type> <base64>` of the private key file `key` (ssh-keygen -y)."""
    out = subprocess.run(["ssh-keygen", "-y", "-f", key], capture_output=True, check=True)
    return " ".join(out.stdout.decode().split()[:2])


def sign(key, payload):
    """The armored SSH signature of `payload` by `key`, namespace git."""
    out = subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", "git", "-f", key],
        input=payload,
        capture_output=True,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.decode(errors="replace").strip())
    return out.stdout


def token_ok(header, token):
    """Whether the Authorization header carries `token` (Basic or Bearer)."""
    scheme, _, value = (header or "").partition(" ")
    if scheme.lower() == "bearer":
        return hmac.compare_digest(value.strip().encode(), token.encode())
    if scheme.lower() != "basic":
        return False
    try:
        user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except ValueError:
        return False
    given = password if password else user
    return hmac.compare_digest(given.encode(), token.encode())


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "git-session-signing-service"

    def log_message(self, format, *args):  # the default prints to stderr; --log has its own
        pass

    def answer(self, status, body=b"", content_type="text/plain"):
        # Logged before it is sent: a client that has the answer finds its line in the log.
        self.record(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, status):
        if self.server.log:
            with self.server.lock, open(self.server.log, "a") as log:
                log.write(f"{self.command} {self.path.split('?')[0]} {status}\n")

    def do_GET(self):
        self.answer(405, b"POST the bytes to sign\n")

    def do_POST(self):
        opts = self.server.opts
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return self.answer(411, b"a Content-Length is required\n")
        if int(length) > MAX_REQUEST:
            self.close_connection = True
            return self.answer(413, b"over 16 MiB\n")
        payload = self.rfile.read(int(length))
        if opts.token_file:
            with open(opts.token_file) as f:
                token = f.read().strip()
            if not token_ok(self.headers.get("Authorization"), token):
                if opts.mode == "401-then-rotate":
                    host, port = self.server.server_address[:2]
                    secret = urllib.parse.quote(token, safe="")
                    with open(opts.rotate_url_file, "w") as f:
                        f.write(f"http://t:{secret}@{host}:{port}{self.path}\n")
                return self.answer(401, b"the token is not valid\n")
        if self.headers.get("Git-Session-Namespace") != "git":
            return self.answer(400, b"Git-Session-Namespace must be git\n")
        wanted = " ".join((self.headers.get("Git-Session-Public-Key") or "").split()[:2])
        key = self.server.keys.get(wanted)
        if key is None:
            return self.answer(422, b"no key for Git-Session-Public-Key\n")
        mode = opts.mode
        if mode == "stall":
            self.record("stalled")
            while True:
                time.sleep(3600)
        if mode == "500":
            return self.answer(500, b"the signer is down\n")
        if mode == "garbage":
            return self.answer(200, b"this is no signature\n")
        if mode == "huge":
            return self.endless()
        if mode == "huge-length":
            self.record(200)
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
            self.wfile.flush()
            while True:
                time.sleep(3600)
        if mode == "other-key":
            key = opts.other_key
        if mode == "other-bytes":
            payload = payload + b"\nand some more\n"
        try:
            signature = sign(key, payload)
        except RuntimeError as e:
            return self.answer(500, f"ssh-keygen failed: {e}\n".encode())
        self.answer(200, signature)

    def endless(self):
        """200 and bytes until the client goes away (no Content-Length)."""
        self.record(200)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b"-----BEGIN SSH SIGNATURE-----\n" + b"A" * 65536
        try:
            while True:
                self.wfile.write(chunk)
        except OSError:
            pass


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--key", action="append", required=True)
    p.add_argument("--token-file")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log")
    p.add_argument("--mode", choices=MODES, default="sign")
    p.add_argument("--other-key")
    p.add_argument("--rotate-url-file")
    opts = p.parse_args()
    if opts.mode == "other-key" and not opts.other_key:
        p.error("--mode other-key needs --other-key")
    if opts.mode == "401-then-rotate" and not (opts.rotate_url_file and opts.token_file):
        p.error("--mode 401-then-rotate needs --rotate-url-file and --token-file")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    server.daemon_threads = True
    server.opts = opts
    server.keys = {public_line(k): k for k in opts.key}
    server.log = opts.log
    server.lock = threading.Lock()
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
