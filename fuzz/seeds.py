#!/usr/bin/env python3
"""Write the seed corpus of every fuzz target into fuzz/corpus/ (run from the repository root).

Seeds are real captures where there are some (tests/fixtures/wire, tests/fixtures/archive) and
small crafted inputs elsewhere; the pack seed is made by git from a small repository. Inputs the
fuzzers keep later are added next to these.
"""
import gzip, hashlib, os, struct, subprocess, tempfile, zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
WIRE = os.path.join(ROOT, "tests", "fixtures", "wire")
ARCHIVE = os.path.join(ROOT, "tests", "fixtures", "archive")


def put(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def wire(name):
    with open(os.path.join(WIRE, name), "rb") as f:
        return f.read()


def side_band_1(body, after):
    """The bytes of side-band channel 1 after the pkt-line `after`."""
    at, out, started = 0, b"", False
    while at + 4 <= len(body):
        n = int(body[at:at + 4], 16)
        if n < 4:
            at += 4
            continue
        data = body[at + 4:at + n]
        at += n
        if started and data[:1] == b"\x01":
            out += data[1:]
        if data.rstrip(b"\n") == after:
            started = True
    return out


def git(cwd, *args, stdin=None):
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True,
                          capture_output=True).stdout


def made_pack():
    """A whole pack of one commit as git's pack-objects writes it: folders, an executable, a
    symlink, a .gitattributes, and a file edited so that a delta is likely."""
    with tempfile.TemporaryDirectory() as d:
        env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
        git(d, "init", "-q")
        text = "".join(f"line {i} of the file\n" for i in range(40))
        os.makedirs(os.path.join(d, "src", "deep"))
        for path, content in [("README.md", text), ("src/main.rs", "fn main() {}\n"),
                              ("src/deep/a.txt", text.replace("line 7", "LINE 7")),
                              (".gitattributes", "*.bat eol=crlf\n"), ("run.bat", "echo\n"),
                              ("bin.sh", "#!/bin/sh\n")]:
            with open(os.path.join(d, path), "w") as f:
                f.write(content)
        os.chmod(os.path.join(d, "bin.sh"), 0o755)
        os.symlink("README.md", os.path.join(d, "link"))
        git(d, "add", "-A")
        git(d, *env, "commit", "-q", "-m", "one")
        pack = ["pack-objects", "--stdout", "--revs", "--window=10", "--depth=10"]
        # As upload-pack sends it (ofs-delta asked for), and with deltas naming their base by id.
        return (git(d, *pack, "--delta-base-offset", stdin=b"HEAD\n"),
                git(d, *pack, stdin=b"HEAD\n"))


def pkt(data):
    return b"%04x" % (len(data) + 4) + data


def sha256_seeds():
    """SHA-256 inputs (issue 40): a repository made with a fixed date, so its commit is the one
    src/fuzzing.rs fetches (SHA256_COMMIT); its pack, a v2 fetch answer and ls-refs carrying it,
    advertisements announcing object-format=sha256."""
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
               "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
        run = lambda *a, stdin=None: subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
             *a], cwd=d, input=stdin, env=env, check=True, capture_output=True).stdout
        run("init", "-q", "--object-format=sha256")
        with open(os.path.join(d, "a.txt"), "w") as f:
            f.write("fuzz seed\n")
        run("add", "a.txt")
        run("commit", "-q", "-m", "seed")
        commit = run("rev-parse", "HEAD").strip()
        assert commit == b"516c254a478a140b6edc3edf04ca4aeab6e38545c3c7a00d432a3a700c6089dc", commit
        pack = run("pack-objects", "--stdout", "--revs", "--delta-base-offset", stdin=b"HEAD\n")
        archive = run("archive", "--format=tar", "HEAD")
    ref = b"refs/heads/sessions/abc"
    put("pack", "made-by-git-sha256", b"2" + pack)
    put("tar", "git-archive-sha256.tar", b"\2" + archive)
    packfile = pkt(b"packfile\n") + b"".join(
        pkt(b"\x01" + pack[i:i + 65515]) for i in range(0, len(pack), 65515)) + b"0000"
    shallow = pkt(b"shallow-info\n") + pkt(b"shallow " + commit + b"\n") + b"0001"
    put("upload_pack", "fetch-sha256", b"\6" + shallow + packfile)
    put("upload_pack", "ls-refs-sha256", b"\5" + pkt(commit + b" " + ref + b"\n") + b"0000")
    put("upload_pack", "advertisement-sha256", b"\0" + pkt(b"# service=git-upload-pack\n")
        + b"0000" + pkt(b"version 2\n") + pkt(b"agent=git/2.47\n") + pkt(b"ls-refs=unborn\n")
        + pkt(b"fetch=shallow wait-for-done filter\n") + pkt(b"object-format=sha256\n") + b"0000")
    put("upload_pack", "v0-advertisement-sha256", b"\0" + pkt(b"# service=git-upload-pack\n")
        + b"0000" + pkt(commit + b" HEAD\0multi_ack side-band-64k shallow object-format=sha256\n")
        + pkt(commit + b" " + ref + b"\n") + b"0000")
    put("receive_pack", "advertisement-sha256", b"\0" + pkt(b"# service=git-receive-pack\n")
        + b"0000" + pkt(commit + b" " + ref + b"\0report-status side-band-64k object-format=sha256\n")
        + b"0000")
    c = commit.decode()
    put("state", "session-sha256", b"\0" + (
        '{"version":1,"branch":"sessions/abc","tip":"%s","lease":"%s","source":"git",'
        '"restored_at":"2026-12-01T10:00:00Z","tool_version":"0.1.0",'
        '"read_url":"http://127.0.0.1:1/repo.git","push_url":null,"depth":1,'
        '"object_format":"sha256"}' % (c, c)).encode())
    put("state", "template-sha256", b"\1" + ('{"version":1,"base":"%s",'
        '"baked_at":"2026-12-01T10:00:00Z","tool_version":"0.1.0"}' % c).encode())
    put("state", "ledger-sha256", b"\5" + ("%s %s save\n" % ("0" * 64, c)).encode())
    put("inputs", "sha256", commit)
    put("inputs", "sha256-prefix", commit[:40])
    put("prepush", "update-sha256", b"refs/heads/main %s refs/heads/sessions/abc %s\n"
        % (commit, b"0" * 64))
    blob = hashlib.sha256(b"blob 0\0").digest()
    put("tree", "nested-sha256", b"2" + chunks(
        tree([(b"100644", b"README.md", blob), (b"40000", b"src", tree_id(1, 32))]),
        tree([(b"100644", b"lib.rs", blob), (b"160000", b"module", blob)])))


def manifest_seeds():
    """A manifest of three sessions with every field, one bad entry, and nested folders."""
    tip = b"1" * 40
    entry = lambda d, extra=b"": (b'{"dir": "%s", "read_url": "http://t:tok@127.0.0.1:1/r.git", '
                                  b'"push_url_file": "push.url", "session_branch": "sessions/%s", '
                                  b'"tip_sha": "%s"%s}' % (d, d, tip, extra))
    full = b', "depth": 0, "sparse": ["src", "docs"], "submodules": "shallow", "lfs": "never"'
    put("manifest", "three", b'{"sessions": [' + b", ".join([entry(b"a", full), entry(b"b"), entry(b"c")]) + b"]}")
    put("manifest", "nested", b'{"sessions": [' + entry(b"a") + b", " + entry(b"a/b") + b"]}")
    put("manifest", "bad-tip", b'{"sessions": [{"dir": "x", "read_url": "http://h/r", "session_branch": "s", '
                               b'"tip_sha": "abc"}]}')


def signing_seeds():
    """Key files of each type ssh-keygen makes (and one with a passphrase), a public key given as
    the private one and as itself, and a signature of the target's payload by another key."""
    payload = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nfuzz\n"
    with tempfile.TemporaryDirectory() as tmp:
        for kind, extra in [("ed25519", []), ("ecdsa", []), ("rsa", ["-b", "1024"]),
                            ("ed25519-encrypted", ["-N", "pass"])]:
            key = os.path.join(tmp, kind)
            subprocess.run(["ssh-keygen", "-q", "-t", kind.split("-")[0], "-N", "", *extra, "-C", "seed",
                            "-f", key], check=True)
            put("signing", "key-" + kind, b"\0" + open(key, "rb").read())
        public = open(os.path.join(tmp, "ed25519.pub"), "rb").read()
        put("signing", "key-is-public", b"\0" + public)
        put("signing", "public-key", b"\1" + public)
        with open(os.path.join(tmp, "payload"), "wb") as f:
            f.write(payload)
        subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-n", "git", "-f", os.path.join(tmp, "ed25519"),
                        os.path.join(tmp, "payload")], check=True, capture_output=True)
        put("signing", "signature-by-another-key", b"\2" + open(os.path.join(tmp, "payload.sig"), "rb").read())


def delta_of(base, target):
    def size(n):
        out = b""
        while True:
            b = n & 0x7F
            n >>= 7
            if n:
                out += bytes([b | 0x80])
            else:
                return out + bytes([b])
    # Copy the base's first half, insert the target's rest (at most 127 bytes a piece).
    half = len(base) // 2
    d = size(len(base)) + size(len(half and target[:0]) + len(target))
    body = b""
    if half and target[:half] == base[:half]:
        body += bytes([0x80 | 0x10]) + bytes([half])
        rest = target[half:]
    else:
        rest = target
    for i in range(0, len(rest), 127):
        piece = rest[i:i + 127]
        body += bytes([len(piece)]) + piece
    return d + body


def tree(entries):
    return b"".join(mode + b" " + name + b"\0" + oid for mode, name, oid in entries)


def tree_id(k, length=20):
    return bytes([k]) + b"\0" * (length - 2) + b"\xee"


def chunks(*trees):
    return b"".join(struct.pack("<H", len(t)) + t for t in trees)


def raw_tar(name):
    with gzip.open(os.path.join(ARCHIVE, name)) as f:
        data = f.read()
    # Keep the end-of-archive marker (two zero blocks), drop the rest of the record's padding.
    end = len(data.rstrip(b"\0"))
    end = (end + 511) // 512 * 512
    return data[:end + 1024]


def main():
    put("upload_pack", "advertisement", b"\0" + wire("v2-advertisement.response"))
    put("upload_pack", "ls-refs-branch", b"\1" + wire("ls-refs-branch.response"))
    put("upload_pack", "ls-refs-none", b"\1" + wire("ls-refs-none.response"))
    put("upload_pack", "fetch-depth-1", b"\2" + wire("fetch-depth-1.response"))

    put("receive_pack", "advertisement", b"\0" + wire("receive-pack-advertisement.response"))
    for name in ["report-ok", "report-ng", "report-ng-hook"]:
        put("receive_pack", name, b"\1" + wire(name + ".response"))
    put("receive_pack", "report-ng-no-side-band", b"\2" + wire("report-ng-no-side-band.response"))

    put("pack", "fetch-depth-1", side_band_1(wire("fetch-depth-1.response"), b"packfile"))
    ofs, ref = made_pack()
    put("pack", "made-by-git", ofs)
    put("pack", "made-by-git-ref-delta", ref)

    text = b"".join(b"line %d\n" % i for i in range(20))
    edited = text.replace(b"line 15", b"LINE 15")
    put("delta", "edit", struct.pack("<H", len(text)) + text + delta_of(text, edited))
    put("delta", "insert-only", struct.pack("<H", 4) + b"abcd" + b"\x04\x03\x03xyz")

    blob = hashlib.sha1(b"blob 0\0").digest()
    put("tree", "nested", chunks(
        tree([(b"100644", b"README.md", blob), (b"100755", b"run.sh", blob),
              (b"120000", b"link", blob), (b"40000", b"src", tree_id(1))]),
        tree([(b"100644", b"lib.rs", blob), (b"40000", b"deep", tree_id(2)),
              (b"160000", b"module", blob)]),
        tree([(b"100644", b".gitattributes", blob)])))
    put("tree", "dot-git", chunks(tree([(b"40000", b".git", tree_id(1))]),
                                  tree([(b"100644", b"config", blob)])))
    put("tree", "ntfs-alias", chunks(tree([(b"100644", b"GIT~1", blob)])))

    for path in [b"README.md", b"src/deep/lib.rs", b".github/workflows/ci.yml", b"a-b/c.d"]:
        put("names", path.replace(b"/", b"_").decode(), path)

    put("tar", "good.tar", raw_tar("good.tar.gz"))
    put("tar", "symlink-then-file.tar", raw_tar("symlink-then-file.tar.gz"))
    for name in ["good", "dotdot", "two-members", "setuid", "pax-commit-mismatch", "fifo"]:
        with open(os.path.join(ARCHIVE, name + ".tar.gz"), "rb") as f:
            put("tar", name + ".tar.gz", f.read())

    c2, c3 = "9286c450ac867c0b3f83878bc15e185905286280", "8bb771ef0d78962c9c09d236a436f1180b7638be"
    session = ('{"version":1,"branch":"sessions/abc","tip":"%s","lease":"%s","source":"git",'
               '"restored_at":"2026-12-01T10:00:00Z","tool_version":"0.1.0",'
               '"read_url":"http://127.0.0.1:1/repo.git","push_url":null,"depth":1}' % (c2, c2))
    put("state", "session", b"\0" + session.encode())
    put("state", "template", b"\1" + ('{"version":1,"base":"%s","baked_at":"2026-12-01T10:00:00Z",'
                                      '"tool_version":"0.1.0"}' % c3).encode())
    put("state", "ledger", b"\2" + ("%s %s save\n%s %s git-push\n" % ("0" * 40, c2, c2, c3)).encode())

    for name, text in [
        ("sha", c2), ("sha-upper", c2.upper()), ("branch", "sessions/abc"),
        ("full-ref", "refs/heads/sessions/abc"),
        ("url-token", "https://x-access-token:ghs_abcdefgh12345678@example.com/o/r.git"),
        ("url-query", "http://127.0.0.1:8080/repo.git/?sig=abc#frag"),
        ("url-jwt", "https://t:eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjE4OTM0NTYwMDB9.c2ln@h.example/r"),
        ("owner", "sandbox-1\0agent-7\0Ada Lovelace\0Fix it\n\nSigned-off-by: A <a@b>\n"),
        ("knob", "60000"), ("knob-signed", "+5000"),
        ("sparse", "./a//b/\na/b/..\n a \n../x\n"), ("lfs-pattern", "**/assets/*.bin"),
    ]:
        put("inputs", name, text.encode())

    url = b"http://t:TOK12345678@git.example.com/org/r.git\n"
    for name, user in [("read", b"git-session-read"), ("push", b"git-session-push")]:
        put("credential", name, url + b"protocol=http\nhost=git.example.com\npath=org/r.git\n"
            b"username=" + user + b"\n\n")
    put("credential", "decoded-line-break",
        b"http://t:TOK%0Aquit=1@host/r.git\nprotocol=http\nhost=host\npath=r.git\n\n")
    ids = ["1" * 40, "2" * 40]
    for name, text in [
        ("update", b"refs/heads/main %s refs/heads/sessions/abc %s\n"),
        ("spaces-in-local", b"HEAD@{1 minute ago} %s refs/heads/sessions/abc %s\n"),
        ("nbsp-unended", b"refs/heads/a\xc2\xa0b %s refs/heads/sessions/abc %s"),
    ]:
        put("prepush", name, text % (ids[0].encode(), ids[1].encode()))
    put("prepush", "not-utf8-and-delete",
        b"refs/heads/caf\xe9 %s refs/heads/other %s\n(delete) %s refs/heads/sessions/abc %s\n"
        % (ids[0].encode(), b"0" * 40, b"0" * 40, ids[1].encode()))
    put("terminal", "escapes", b"ERR \x1b[2J\x1b]0;title\x07 bell\r overwritten\n")
    sha256_seeds()
    put("terminal", "c1-bidi-invalid", b"c1 \xc2\x9b31m bidi \xe2\x80\xae and \xff not utf-8\ttab\x7f")
    signing_seeds()
    manifest_seeds()


if __name__ == "__main__":
    main()
