#!/usr/bin/python3
"""Issue 37: hf:ORG/NAME against a hostile hub on 127.0.0.1 (tests/test_hub.py's server with the
issue's misbehaviours switched on), `vitscope-cli models` on a hostile cache, and the messages.

Checked, each against what the server sent or the files on disk:
1. a resumed download answered with another file's bytes (206 with the right Content-Range, a shifted
   206, a 200 of another file of the same size) is never stored under the blob's sha256: it is
   discarded and downloaded once more from the start (exit 0 when that copy is right: the blob
   hashes to its name), and refused naming the repository and the file when it is wrong again;
2. a body longer than announced (no Content-Length, or endless chunks) stops at the announced size:
   the server got to send at most a few MB, and nothing is left in the cache;
7. X-Linked-Size "-1", "-0", "+5", "1e3", "0x10", 21 digits: refused by name, no GET;
8. a 2 B/s drip fails within HF_HUB_DOWNLOAD_TIMEOUT (+ slack) naming the server, with progress
   lines on a non-terminal stderr, the bytes kept for a resume;
9. a NUL byte in a header is a malformed reply, not "cannot connect"; a redirect to file:// is
   refused as such, not "run again to resume"; a 1 GiB refs/main is named, not "no refs/main";
   a config.json that is a FIFO is named, not skipped;
3. `models` on a cache with refs/a -> ., refs/b -> ., refs/x -> /usr and a snapshot linked to /
   ends (within 20 s), lists the good model, and follows none of the links;
5. `models` prints a config's model_type, folder and file names with control characters escaped."""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_hub import Hub, expect, FAIL  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--assets", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    w = lambda *n: os.path.join(a.workdir, *n)
    cache = w("hf-cache")
    os.makedirs(w("hf-home"))

    weights = open(os.path.join(a.assets, "fmnist_vit.safetensors"), "rb").read()
    sha = hashlib.sha256(weights).hexdigest()
    # Another file of the same size: the same header, other numbers (the weights 2.5x).
    hlen = int.from_bytes(weights[:8], "little")
    data = np.frombuffer(weights[8 + hlen:], dtype=np.float32) * np.float32(2.5)
    other = weights[:8 + hlen] + data.astype(np.float32).tobytes()
    assert len(other) == len(weights) and other != weights
    np.save(w("x.npy"), np.random.default_rng(0).standard_normal((1, 28, 28)).astype(np.float32))

    hub = Hub()
    port = hub.start()
    endpoint = "http://127.0.0.1:%d" % port
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "TRANSFORMERS_"))}
    base_env.update({"HF_HUB_CACHE": cache, "HF_HOME": w("hf-home"), "HF_ENDPOINT": endpoint,
                     "http_proxy": "", "https_proxy": "", "HTTP_PROXY": "", "HTTPS_PROXY": "", "ALL_PROXY": "",
                     "no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1"})

    def cli(*args, timeout=120, **env):
        e = dict(base_env)
        e.update(env)
        return subprocess.run([a.cli, *args], capture_output=True, text=True, timeout=timeout, env=e)

    n_repo = [0]

    def repo(name, files=None):
        n_repo[0] += 1
        c = hashlib.sha1(("%s %d" % (name, n_repo[0])).encode()).hexdigest()
        hub.repos["evil/" + name] = {"refs": {"main": c}, "lfs": {"model.safetensors"},
                                     "files": {c: files or {"model.safetensors": weights}}}
        return "hf:evil/" + name, os.path.join(cache, "models--evil--" + name), c

    def gets(since):
        return [q[2] for q in hub.requests(since) if q[0] == "GET" and q[1].startswith("/cdn/")]

    def blobs_clean(storage):
        b = os.path.join(storage, "blobs")
        names = os.listdir(b) if os.path.isdir(b) else []
        return all(hashlib.sha256(open(os.path.join(b, n), "rb").read()).hexdigest() == n
                   for n in names if not n.endswith(".incomplete"))

    # ------------------------------------------------------------ 1. resumed downloads verified
    for mode in ["wrong206", "shifted206", "other200"]:
        spec, storage, c = repo("resume-" + mode)
        hub.cut[sha] = len(weights) // 3
        hub.cut_once = True
        hub.misbehave[sha] = mode
        hub.misbehave_once.add(sha)
        hub.other[sha] = other
        n0 = len(hub.log)
        r = cli("trace", "--model", spec, "--input", w("x.npy"), "--out", w("t.npz"))
        ranges = gets(n0)
        blob = os.path.join(storage, "blobs", sha)
        ok_blob = os.path.exists(blob) and open(blob, "rb").read() == weights
        expect(r.returncode == 0 and ok_blob and ranges == [None, "bytes=%d-" % (len(weights) // 3), None] and
               "do not hash to its sha256" in r.stderr,
               "1. a cut download resumed with %s: discarded (said), downloaded again from the start, the blob is "
               "the file its sha256 names" % mode, r.stderr + str(ranges))
        hub.misbehave.clear()
        hub.misbehave_once.clear()

    spec, storage, c = repo("always-other")
    hub.misbehave[sha] = "other200"
    n0 = len(hub.log)
    r = cli("trace", "--model", spec, "--input", w("x.npy"), "--out", w("t_other.npz"))
    expect(r.returncode == 1 and "evil/always-other" in r.stderr and "model.safetensors" in r.stderr and
           "sha256" in r.stderr and sha in r.stderr and len(gets(n0)) == 2,
           "1. a server sending another file of the same size every time: refused after two downloads, naming the "
           "repository, the file and the sha256", r.stderr + str(gets(n0)))
    expect(not os.path.exists(os.path.join(storage, "blobs", sha)) and blobs_clean(storage) and
           not os.path.lexists(os.path.join(storage, "snapshots", c, "model.safetensors")) and not os.path.exists(w("t_other.npz")),
           "1. ...and nothing stored under a sha256 it does not have, no snapshot entry, no trace written")
    hub.misbehave.clear()

    # ------------------------------------------------------------ 2. bodies longer than announced
    for mode in ["overlong", "chunked"]:
        spec, storage, c = repo("long-" + mode)
        hub.misbehave[sha] = mode
        hub.sent.pop(sha, None)
        t0 = time.time()
        r = cli("info", "--model", spec)
        time.sleep(0.5)
        sent = hub.sent.get(sha, 0)
        inc = os.path.join(storage, "blobs", sha + ".incomplete")
        size_inc = os.path.getsize(inc) if os.path.exists(inc) else 0
        pct = [int(p) for p in re.findall(r"(\d+)%", r.stderr)]
        expect(r.returncode == 1 and "more than the %d bytes" % len(weights) in r.stderr and "evil/long-" + mode in r.stderr
               and size_inc <= len(weights) and sent < 64 << 20 and max(pct, default=0) <= 100,
               "2. %s body: stopped at the announced %d bytes (the server got %d bytes out, %d kept), exit 1 naming "
               "the repository" % (mode, len(weights), sent, size_inc), r.stderr[-600:])
        expect(not os.path.exists(os.path.join(storage, "blobs", sha)), "2. %s: no blob committed" % mode)
        hub.misbehave.clear()

    # ------------------------------------------------------------ 7. size headers
    for bad in ["-1", "-0", "+5", "1e3", "0x10", "123456789012345678901", "18446744073709551615"]:
        spec, storage, c = repo("size" + str(n_repo[0]))
        hub.head_headers["evil/" + spec.split("/")[1]] = {"X-Linked-Size": bad}
        n0 = len(hub.log)
        r = cli("info", "--model", spec)
        expect(r.returncode == 1 and "X-Linked-Size '%s'" % bad in r.stderr and gets(n0) == [] and
               not os.path.lexists(os.path.join(storage, "snapshots", c, "model.safetensors")),
               "7. X-Linked-Size: %s refused by name before any download" % bad, r.stderr)

    # ------------------------------------------------------------ 8. a slow drip
    spec, storage, c = repo("drip")
    hub.misbehave[sha] = "drip"
    t0 = time.time()
    try:
        r = cli("info", "--model", spec, timeout=40, HF_HUB_DOWNLOAD_TIMEOUT="6")
        took = time.time() - t0
        lines = [l for l in r.stderr.splitlines() if l.startswith("downloading evil/drip")]
        expect(r.returncode == 1 and took < 20 and "too slow" in r.stderr and endpoint in r.stderr and
               "run again to resume" in r.stderr,
               "8. a 2 B/s drip fails in %.1f s (HF_HUB_DOWNLOAD_TIMEOUT=6), naming the server" % took, r.stderr)
        expect(len(lines) >= 2, "8. ...with progress lines on a non-terminal stderr while it lasted (%d)" % len(lines),
               r.stderr)
    except subprocess.TimeoutExpired:
        expect(False, "8. a 2 B/s drip fails within the stall window (it ran past 40 s)")
    hub.misbehave.clear()

    # ------------------------------------------------------------ 9. messages
    spec, storage, c = repo("nul")
    hub.misbehave[sha] = "nul_header"
    r = cli("info", "--model", spec)
    expect(r.returncode == 1 and "not valid HTTP" in r.stderr and "cannot connect" not in r.stderr and
           "check the network" not in r.stderr.lower(),
           "9. a NUL byte in a header: a malformed reply from the server, not 'cannot connect'", r.stderr)
    spec, storage, c = repo("nul-head")
    hub.head_headers["evil/nul-head"] = {"X-Bad": "a\0b"}
    r = cli("info", "--model", spec)
    expect(r.returncode == 1 and "not valid HTTP" in r.stderr and "cannot connect" not in r.stderr and
           "evil/nul-head" in r.stderr, "9. a NUL byte in the HEAD reply's header: named as a malformed reply", r.stderr)
    spec, storage, c = repo("file-redirect")
    hub.misbehave[sha] = "file_redirect"
    r = cli("info", "--model", spec)
    expect(r.returncode == 1 and "redirected" in r.stderr and "file:" in r.stderr and "resume" not in r.stderr,
           "9. a redirect to file:// is refused as such, not 'run again to resume'", r.stderr)
    hub.misbehave.clear()
    # a 1 GiB refs/main, offline
    spec, storage, c = repo("bigref")
    r = cli("info", "--model", spec)
    expect(r.returncode == 0, "9. (the repository downloads)", r.stderr)
    with open(os.path.join(storage, "refs", "main"), "r+b") as f:
        f.truncate(1 << 30)
    r = cli("info", "--model", spec, "--offline")
    expect(r.returncode == 1 and "refs/main" in r.stderr and "too large" in r.stderr and "no refs/main" not in r.stderr,
           "9. a 1 GiB refs/main is named as too large, not 'no refs/main'", r.stderr)
    os.truncate(os.path.join(storage, "refs", "main"), 0)
    with open(os.path.join(storage, "refs", "main"), "w") as f:
        f.write(c)
    cfg = os.path.join(storage, "snapshots", c, "config.json")
    os.mkfifo(cfg)
    r = cli("info", "--model", spec, timeout=30)
    expect(r.returncode == 1 and cfg in r.stderr and "FIFO" in r.stderr,
           "9. a config.json that is a FIFO is named, not skipped", r.stderr)
    os.remove(cfg)
    hub.stop()

    # ------------------------------------------------------------ 3 and 5. models on a hostile cache
    fake = w("fake-hf")
    torch_dir = w("fake-torch")
    os.makedirs(torch_dir)
    st = os.path.join(fake, "models--evil--\x1b]0;pwned\x07")
    c = hashlib.sha1(b"loops").hexdigest()
    os.makedirs(os.path.join(st, "snapshots", c))
    os.makedirs(os.path.join(st, "refs"))
    os.makedirs(os.path.join(st, "blobs"))
    with open(os.path.join(st, "blobs", sha), "wb") as f:
        f.write(weights)
    os.symlink("../../blobs/" + sha, os.path.join(st, "snapshots", c, "model.safetensors"))
    with open(os.path.join(st, "snapshots", c, "config.json"), "w") as f:
        json.dump({"model_type": "vit\x1b[2J\x1b]0;title\x07"}, f)
    with open(os.path.join(st, "refs", "main"), "w") as f:
        f.write(c)
    os.symlink(".", os.path.join(st, "refs", "a"))
    os.symlink(".", os.path.join(st, "refs", "b"))
    os.symlink("/usr", os.path.join(st, "refs", "x"))
    os.symlink("/", os.path.join(st, "snapshots", "0" * 40))
    # a torch.hub file named with an escape sequence
    shutil.copy(os.path.join(a.assets, "fmnist_vit.safetensors"), os.path.join(torch_dir, "evil\x1b[2J.safetensors"))
    try:
        t0 = time.time()
        r = subprocess.run([a.cli, "models", "--hf-cache", fake, "--torch-dir", torch_dir], capture_output=True,
                           text=True, timeout=20, env=base_env)
        took = time.time() - t0
        expect(r.returncode == 0 and "hf:evil/" in r.stdout and took < 20,
               "3. models with refs/a -> ., refs/b -> ., refs/x -> /usr and a snapshot linked to /: ends in %.1f s and "
               "lists the model" % took, r.stdout + r.stderr)
        expect("/usr" not in r.stdout and "0" * 40 not in r.stdout, "3. ...following none of the directory links",
               r.stdout)
        expect("\x1b" not in r.stdout and "\x07" not in r.stdout and "\\x1b" in r.stdout,
               "5. models: folder names, file names and a config's text printed with control characters escaped",
               repr(r.stdout))
    except subprocess.TimeoutExpired:
        expect(False, "3. models on a cache with symbolic link loops ends (it ran past 20 s)")

    print("\n%d failure(s)" % len(FAIL))
    for f in FAIL:
        print("  " + f)
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
