"""replay_proxy — a model of a remote git server, for the bench (formerly scripts/replay-proxy).

Usage: python3 -m bench.suite.replay_proxy UPSTREAM_BASE_URL --rate MB_PER_S [--rtt MS] [--stats FILE]
                                           [--port N] [--keep-host]

Listens on 127.0.0.1 (a free port) and prints `ready http://127.0.0.1:PORT` on stdout. The first
request with a given method, path and query, body and the headers that change an answer
(Git-Protocol, Content-Type, Content-Encoding, Authorization) is forwarded to UPSTREAM_BASE_URL and
its answer kept in memory; every later identical request is answered from memory: after one round
trip (RTT ms), the answer's bytes are sent at RATE megabytes (10^6 bytes) per second. So after a
warm-up, no server CPU runs on this machine and the client sees a server elsewhere, behind a link
of that rate and round trip. Forwarded answers are sent the same way.

With --stats, FILE holds `REQUESTS BYTES` (answers sent so far, and their bytes: status line,
headers and body), replaced atomically after every answer: the bench reads it before and after a
run to compute the run's wire time, BYTES / RATE + REQUESTS x RTT.

--port listens on that port (an LFS server's URL is recorded in the repository's .lfsconfig);
An LFS batch request is keyed by its operation and set of objects only (git-lfs orders them
differently from run to run). --keep-host forwards the client's Host header, so a server that writes
links from it (an LFS server's batch answer) sends the client back through the proxy.

Each answer is paced on its own: N answers at once share no link (an LFS client's N transfers
get N times RATE, as from N storage nodes).

Not modelled: TCP connection set-up (both contenders reuse connections), the upload of requests
(tiny for a fetch), TCP slow start.
"""

import argparse
import hashlib
import http.client
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse

# Headers that change what a git server answers; the rest (User-Agent, Accept, ...) do not.
KEY_HEADERS = ("git-protocol", "content-type", "content-encoding", "authorization")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection",
              "te", "trailer", "upgrade"}
CHUNK = 64 * 1024


def lfs_key(body):
    """An LFS batch request as far as the answer depends on it: the operation and the set of
    objects (git-lfs orders them differently from run to run and adds the ref)."""
    try:
        req = json.loads(body)
        objects = sorted((o["oid"], o["size"]) for o in req["objects"])
        return json.dumps([req.get("operation"), objects]).encode()
    except (ValueError, KeyError, TypeError):
        return body


class Link:
    """What every handler shares: the upstream, the link's pace, the answers kept, the counts."""

    def __init__(self, upstream, rate_mb, rtt_ms, stats, keep_host):
        self.up = urllib.parse.urlsplit(upstream)
        self.rate = rate_mb * 1e6
        self.rtt = rtt_ms / 1000.0
        self.stats = stats
        self.keep_host = keep_host
        self.cache = {}
        self.cache_lock = threading.Lock()
        self.requests = self.bytes = 0
        self.stats_lock = threading.Lock()
        if stats:
            with open(stats, "w") as f:
                f.write("0 0\n")

    def record(self, nbytes):
        with self.stats_lock:
            self.requests += 1
            self.bytes += nbytes
            if self.stats:
                tmp = self.stats + ".tmp"
                with open(tmp, "w") as f:
                    f.write("%d %d\n" % (self.requests, self.bytes))
                os.replace(tmp, self.stats)

    def lookup(self, key):
        with self.cache_lock:
            return self.cache.get(key)

    def keep(self, key, answer):
        with self.cache_lock:
            self.cache[key] = answer


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def forward(self, link, body):
        up = link.up
        conn = http.client.HTTPConnection(up.hostname, up.port or 80, timeout=600)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in HOP_BY_HOP and (link.keep_host or k.lower() != "host")}
        headers["Content-Length"] = str(len(body))
        path = up.path.rstrip("/") + self.path
        conn.request(self.command, path, body=body if self.command != "GET" else None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
        conn.close()
        return resp.status, resp.reason, kept, data

    def key(self, body):
        lfs = "git-lfs" in self.headers.get("Content-Type", "")
        return (self.command, self.path, tuple(self.headers.get(h, "") for h in KEY_HEADERS),
                hashlib.sha256(lfs_key(body) if lfs else body).hexdigest())

    def send_paced(self, link, out):
        """After one round trip, `out` at the link's rate."""
        time.sleep(link.rtt)
        t0 = time.monotonic()
        for off in range(0, len(out), CHUNK):
            piece = out[off:off + CHUNK]
            delay = t0 + (off + len(piece)) / link.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.wfile.write(piece)
        self.wfile.flush()

    def handle_one(self):
        link = self.server.link
        body = self.read_body() if self.command == "POST" else b""
        key = self.key(body)
        answer = link.lookup(key)
        if answer is None:
            answer = self.forward(link, body)
            if answer[0] == 200:
                link.keep(key, answer)
        status, reason, headers, data = answer
        head = ["HTTP/1.1 %d %s\r\n" % (status, reason)]
        head += ["%s: %s\r\n" % (k, v) for k, v in headers]
        head.append("Content-Length: %d\r\n\r\n" % len(data))
        out = "".join(head).encode("latin-1") + data
        self.send_paced(link, out)
        link.record(len(out))

    def do_GET(self):
        self.handle_one()

    def do_POST(self):
        self.handle_one()


def parse(argv):
    ap = argparse.ArgumentParser(prog="python3 -m bench.suite.replay_proxy",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("upstream")
    ap.add_argument("--rate", type=float, required=True, help="link rate, MB (10^6 bytes) per second")
    ap.add_argument("--rtt", type=float, default=0.0, help="round trip, milliseconds")
    ap.add_argument("--stats", help="file to hold 'REQUESTS BYTES' sent so far")
    ap.add_argument("--port", type=int, default=0, help="the port to listen on (default: a free one)")
    ap.add_argument("--keep-host", action="store_true", help="forward the client's Host header")
    args = ap.parse_args(argv)
    if args.rate <= 0 or args.rtt < 0:
        ap.error("--rate must be positive and --rtt not negative")
    if urllib.parse.urlsplit(args.upstream).scheme != "http":
        ap.error("the upstream must be an http:// URL")
    return args


def main(argv=None):
    args = parse(argv)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.link = Link(args.upstream, args.rate, args.rtt, args.stats, args.keep_host)
    print("ready http://127.0.0.1:%d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
