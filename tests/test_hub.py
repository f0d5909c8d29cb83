#!/usr/bin/python3
"""hf:ORG/NAME end to end against a Hugging Face hub served on 127.0.0.1 by this script
(http.server): the hub's URL layout /{org}/{name}/resolve/{rev}/{file}, HEAD and GET, X-Repo-Commit,
ETag / X-Linked-Etag / X-Linked-Size, large files redirected to a CDN path (on the same server)
that answers Range requests with 206, and the hub's error headers (X-Error-Code). Nothing here
reaches beyond 127.0.0.1. The cache is a temporary folder (HF_HUB_CACHE); HF_HOME points at an
empty folder so no real token is read.

Checked: the first run downloads with progress into the cache in huggingface_hub's layout (blobs
named by ETag, relative snapshot symlinks, refs/main) and the model traces as a PyTorch reference
with the config.json's heads and eps computes it; the second run finds it offline with the server
stopped; a transfer cut mid-body leaves an .incomplete blob that the next run resumes with a Range
request, byte-identical; a cut inside one run is resumed by that run; pytorch_model.bin when there
is no model.safetensors; errors for 404 (repository and file named), a missing revision, 401 and
403 (the token named), no server (the endpoint named), and offline with nothing cached; and
`vitscope-cli models` on a fake Hugging Face cache and torch.hub folder: specs, families and sizes,
from headers only (a sparse 1 GiB checkpoint is listed without being read)."""
import argparse
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import urllib.parse

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "parity"))
import vitref  # noqa: E402

torch.set_num_threads(1)
FAIL = []


def expect(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        if detail:
            print("     " + detail.strip().replace("\n", "\n     "))
        FAIL.append(what)


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub:
    """Repositories: repo_id -> {"refs": {name: commit}, "files": {commit: {name: bytes}}, "lfs": set of
    names, "token": token needed or None, "denied": tokens answered 403}."""

    def __init__(self):
        self.repos = {}
        self.blobs = {}
        self.log = []               # (method, path, Range header, Authorization header)
        self.cut = {}               # sha256 -> bytes sent before the connection is closed
        self.cut_once = False       # cut only the first transfer of such a blob
        self.down_after_cut = False  # after a cut, close every connection without an answer
        self.down = False
        # Issue 37's misbehaviours (tests/test_hub_hostile.py): sha256 -> how the CDN answers a GET
        #   "wrong206": a Range request gets 206 with the right Content-Range and another file's bytes
        #   "shifted206": 206 with the right Content-Range, the bytes one further on
        #   "other200": 200 with another file of the same size (hub.other[sha]), Range or not
        #   "overlong": 200 without Content-Length, the file then junk until the client hangs up
        #   "chunked": 200 chunked, an endless body
        #   "drip": the right headers, then 2 bytes a second
        #   "file_redirect": 302 to file:///etc/passwd
        #   "nul_header": a header line holding a NUL byte
        self.misbehave = {}
        self.misbehave_once = set()   # shas whose misbehaviour applies to their next Range request only
        self.other = {}               # sha -> bytes served instead ("other200", "wrong206")
        self.head_headers = {}        # repo_id -> headers replacing the HEAD answer's (X-Linked-Size: -1, ...)
        self.sent = {}                # sha -> body bytes the CDN wrote (endless bodies: until the client left)
        self.server = None
        self.lock = threading.Lock()

    def start(self, port=0):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self.answer(head=True)

            def do_GET(self):
                self.answer(head=False)

            def send(self, status, headers, body=b"", head=False):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def error(self, status, code=None, message=None, commit=None, head=False):
                h = {"Content-Type": "application/json"}
                if code:
                    h["X-Error-Code"] = code
                if message:
                    h["X-Error-Message"] = message
                if commit:
                    h["X-Repo-Commit"] = commit
                self.send(status, h, json.dumps({"error": message or ""}).encode(), head)

            def answer(self, head):
                with hub.lock:
                    hub.log.append((self.command, self.path, self.headers.get("Range"), self.headers.get("Authorization")))
                    down = hub.down
                if down:  # the network is gone: the connection closes without an answer
                    self.close_connection = True
                    return
                path = urllib.parse.urlparse(self.path).path
                m = re.match(r"^/cdn/([0-9a-f]{64})$", path)
                if m:
                    return self.cdn(m.group(1), head)
                m = re.match(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$", path)
                if not m:
                    return self.error(404, message="not a hub URL", head=head)
                repo_id = m.group(1) + "/" + m.group(2)
                rev, name = urllib.parse.unquote(m.group(3)), urllib.parse.unquote(m.group(4))
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self.error(401, "RepoNotFound", "Repository not found", head=head)
                token = repo.get("token")
                auth = self.headers.get("Authorization")
                if token:
                    if auth is None:
                        return self.error(401, "GatedRepo", "Access to model %s is restricted. You must have access to it "
                                          "and be authenticated to access it. Please log in." % repo_id, head=head)
                    if auth in ["Bearer " + t for t in repo.get("denied", [])]:
                        return self.error(403, "GatedRepo", "Access to model %s is restricted and you are not in the "
                                          "authorized list." % repo_id, head=head)
                    if auth != "Bearer " + token:
                        return self.error(401, None, "Invalid credentials in Authorization header", head=head)
                commit = repo["refs"].get(rev, rev if rev in repo["files"] else None)
                if commit is None:
                    return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev, head=head)
                files = repo["files"][commit]
                if name not in files:
                    return self.error(404, "EntryNotFound", "Entry not found", commit=commit, head=head)
                data = files[name]
                port_ = self.server.server_address[1]
                if name in repo["lfs"]:
                    sha = hashlib.sha256(data).hexdigest()
                    hub.blobs[sha] = data
                    pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha, len(data))).encode()
                    # As the hub: a redirect to the CDN, the LFS object's sha256 and size in X-Linked-*.
                    h = {"Location": "http://127.0.0.1:%d/cdn/%s?X-Amz-Signature=x" % (port_, sha),
                         "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                         "ETag": '"%s"' % git_sha1(pointer), "X-Repo-Commit": commit}
                    h.update(hub.head_headers.get(repo_id, {}))
                    return self.send(302, h, b"", head)
                etag = git_sha1(data)
                weak = name == "preprocessor_config.json"  # a weak ETag, W/"...", is named without its W/
                self.send(200, {"ETag": ('W/"%s"' if weak else '"%s"') % etag, "X-Repo-Commit": commit,
                                "Content-Type": "application/octet-stream"}, data, head)

            def cdn(self, sha, head):
                data = hub.blobs.get(sha)
                if data is None:
                    return self.error(404, message="no such object", head=head)
                rng = self.headers.get("Range")
                if not head and self.misbehaved(sha, data, rng):
                    return
                start = 0
                if rng:
                    m = re.match(r"^bytes=(\d+)-$", rng)
                    start = int(m.group(1)) if m else 0
                    if start >= len(data):
                        return self.error(416, message="range not satisfiable", head=head)
                body = data[start:]
                h = {"Content-Length": str(len(body)), "ETag": '"%s"' % sha, "Accept-Ranges": "bytes"}
                if rng:
                    h["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
                self.send_response(206 if rng else 200)
                for k, v in h.items():
                    self.send_header(k, v)
                self.end_headers()
                if head:
                    return
                with hub.lock:
                    cut = hub.cut.get(sha)
                    if cut is not None and hub.cut_once:
                        del hub.cut[sha]
                if cut is not None and cut - start < len(body):
                    # The connection drops mid-body: fewer bytes than Content-Length said.
                    self.wfile.write(body[:max(0, cut - start)])
                    self.wfile.flush()
                    self.close_connection = True
                    with hub.lock:
                        if hub.down_after_cut:
                            hub.down = True
                    return
                self.wfile.write(body)

            def misbehaved(self, sha, data, rng):
                """Issue 37's hostile CDN; True when it answered."""
                with hub.lock:
                    mode = hub.misbehave.get(sha)
                    if mode and sha in hub.misbehave_once:
                        if not rng:
                            mode = None
                        else:
                            del hub.misbehave[sha]
                if not mode:
                    return False
                start = int(re.match(r"^bytes=(\d+)-$", rng).group(1)) if rng else 0
                other = hub.other.get(sha, bytes(len(data)))

                def count(n):
                    with hub.lock:
                        hub.sent[sha] = hub.sent.get(sha, 0) + n

                try:
                    if mode in ("wrong206", "shifted206") and rng:
                        body = other[start:] if mode == "wrong206" else data[start + 1:] + b"\0"
                        self.send_response(206)
                        self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        count(len(body))
                        return True
                    if mode in ("wrong206", "shifted206", "other200"):
                        body = other if mode != "shifted206" else data
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        count(len(body))
                        return True
                    if mode == "file_redirect":
                        self.send_response(302)
                        self.send_header("Location", "file:///etc/passwd")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return True
                    if mode == "nul_header":
                        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Bad: a\0b\r\n\r\n" % len(data))
                        self.wfile.write(data)
                        self.close_connection = True
                        return True
                    if mode == "overlong":  # no length: the body ends when the connection closes
                        self.send_response(200)
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.wfile.write(data)
                        count(len(data))
                        junk = b"\xab" * 65536
                        for _ in range(2000):  # at most 128 MB more
                            self.wfile.write(junk)
                            count(len(junk))
                        self.close_connection = True
                        return True
                    if mode == "chunked":
                        self.send_response(200)
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        junk = b"\xcd" * 65536
                        for _ in range(2000):
                            self.wfile.write(b"%x\r\n" % len(junk) + junk + b"\r\n")
                            count(len(junk))
                        self.wfile.write(b"0\r\n\r\n")
                        return True
                    if mode == "drip":
                        self.send_response(206 if rng else 200)
                        if rng:
                            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
                        self.send_header("Content-Length", str(len(data) - start))
                        self.end_headers()
                        self.wfile.flush()
                        import time
                        for i in range(start, min(len(data), start + 600), 2):
                            self.wfile.write(data[i:i + 2])
                            self.wfile.flush()
                            count(2)
                            time.sleep(1)
                        self.close_connection = True
                        return True
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return True
                return False

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def requests(self, since=0):
        with self.lock:
            return list(self.log[since:])


def safetensors_bytes(tensors, path):
    vitref.write_safetensors(path, tensors)
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    w = lambda *n: os.path.join(a.workdir, *n)
    cache = w("hf-cache")
    os.makedirs(w("hf-home"))

    # A small real ViT: 32 px, patch 8, width 48 with 3 heads (not width/64: only config.json says so),
    # Hugging Face layout and eps 1e-12, random non-trivial weights.
    S, P, L, H, D, M, K = 32, 8, 2, 3, 48, 96, 5
    tv = torchvision.models.VisionTransformer(image_size=S, patch_size=P, num_layers=L, num_heads=H, hidden_dim=D,
                                              mlp_dim=M, num_classes=K)
    vitref.randomize(tv, 7)
    canon = vitref.tv_to_canonical({k: v.detach().clone() for k, v in tv.state_dict().items()}, L)
    hf_sd = vitref.canonical_to_hf(canon, L)
    weights = safetensors_bytes(hf_sd, w("model.safetensors"))
    labels = ["tench", "goldfish", "shark", "ray", "hen"]
    config = json.dumps({"architectures": ["ViTForImageClassification"], "model_type": "vit", "hidden_size": D,
                         "num_hidden_layers": L, "num_attention_heads": H, "intermediate_size": M, "image_size": S,
                         "patch_size": P, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
                         "id2label": {str(i): n for i, n in enumerate(labels)},
                         "label2id": {n: i for i, n in enumerate(labels)}}, indent=2).encode()
    preproc = json.dumps({"do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.485, 0.456, 0.406],
                          "image_std": [0.229, 0.224, 0.225], "resample": 2, "rescale_factor": 1 / 255,
                          "size": {"height": S, "width": S}}).encode()
    x = torch.randn(3, S, S, generator=torch.Generator().manual_seed(3))
    np.save(w("x.npy"), x.numpy())
    with torch.no_grad():
        ref = vitref.manual_forward(canon, x, H, 1e-12)
    ref_logits = ref["logits"].double().numpy()

    commit = hashlib.sha1(b"tiny-vit main").hexdigest()
    hub = Hub()

    def repo(files, lfs=("model.safetensors", "pytorch_model.bin"), token=None, denied=(), name="main"):
        c = hashlib.sha1(json.dumps(sorted(files)).encode() + str(len(hub.repos)).encode()).hexdigest()
        return {"refs": {name: c}, "files": {c: files}, "lfs": set(lfs), "token": token, "denied": list(denied)}

    hub.repos["test-org/tiny-vit"] = {"refs": {"main": commit, "v1.0": commit}, "lfs": {"model.safetensors"},
                                      "files": {commit: {"config.json": config, "preprocessor_config.json": preproc,
                                                         "model.safetensors": weights}}}
    port = hub.start()
    endpoint = "http://127.0.0.1:%d" % port
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "TRANSFORMERS_"))}
    base_env.update({"HF_HUB_CACHE": cache, "HF_HOME": w("hf-home"), "HF_ENDPOINT": endpoint,
                     "http_proxy": "", "https_proxy": "", "HTTP_PROXY": "", "HTTPS_PROXY": "", "ALL_PROXY": "",
                     "no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1"})

    def cli(*args, **env):
        e = dict(base_env)
        e.update(env)
        return subprocess.run([a.cli, *args], capture_output=True, text=True, timeout=120, env=e)

    def logits_of(npz):
        with np.load(npz) as z:
            return z["logits"].astype(np.float64)

    def close(l):
        return float(np.abs(l - ref_logits).max() / np.abs(ref_logits).max()) < 1e-4

    storage = os.path.join(cache, "models--test-org--tiny-vit")
    sha = hashlib.sha256(weights).hexdigest()

    # ---------------------------------------------------------------- first run: download
    n0 = len(hub.log)
    r = cli("trace", "--model", "hf:test-org/tiny-vit", "--input", w("x.npy"), "--out", w("t1.npz"))
    expect(r.returncode == 0, "first run: hf:test-org/tiny-vit downloads and traces (exit 0)", r.stderr)
    expect("downloading test-org/tiny-vit model.safetensors" in r.stderr and "100%" in r.stderr,
           "first run: a progress line on stderr reaching 100%", r.stderr)
    if r.returncode == 0:
        expect(close(logits_of(w("t1.npz"))), "first run: logits equal the PyTorch reference with config.json's 3 heads, eps 1e-12")
    expect("prediction: class" in r.stdout and any(n in r.stdout for n in labels),
           "first run: the prediction is named from config.json's id2label", r.stdout)
    reqs = hub.requests(n0)
    heads = [q[1] for q in reqs if q[0] == "HEAD"]
    expect(any(p.endswith("/resolve/main/config.json") for p in heads) and
           any(p.endswith("/model.safetensors") for p in heads), "first run: HEAD for config.json and model.safetensors",
           str(reqs))
    expect(any(q[0] == "GET" and q[1].startswith("/cdn/" + sha) for q in reqs),
           "first run: model.safetensors fetched from the CDN location the hub redirected to", str(reqs))
    expect(open(os.path.join(storage, "refs", "main")).read() == commit, "cache: refs/main holds the commit")
    snap = os.path.join(storage, "snapshots", commit)
    ok = True
    for name, data, etag in [("model.safetensors", weights, sha), ("config.json", config, git_sha1(config)),
                             ("preprocessor_config.json", preproc, git_sha1(preproc))]:
        p = os.path.join(snap, name)
        ok &= os.path.islink(p) and os.readlink(p) == "../../blobs/" + etag
        ok &= open(os.path.join(storage, "blobs", etag), "rb").read() == data
    expect(ok, "cache: snapshots/<commit>/<file> are relative symlinks to ../../blobs/<etag> (sha256 for LFS, git "
               "sha1 for others, W/ and quotes stripped), each blob byte-identical")
    expect(not [f for f in os.listdir(os.path.join(storage, "blobs")) if f.endswith(".incomplete")],
           "cache: no .incomplete blob left")
    r = cli("info", "--model", "hf:test-org/tiny-vit")
    expect(r.returncode == 0 and "mean 0.485 0.456 0.406, std 0.229 0.224 0.225" in r.stdout and
           "straight resize to 32x32" in r.stdout and "heads 3 (d=16)" in r.stdout and "eps 1e-12" in r.stdout,
           "info: heads from config.json, mean/std and resize from preprocessor_config.json", r.stdout + r.stderr)
    expect("hf:test-org/tiny-vit @ " + commit[:12] in r.stdout and "config: " + snap + "/config.json" in r.stdout,
           "info: the source names the commit and the config.json used", r.stdout)

    # ---------------------------------------------------------------- second run: offline, server stopped
    hub.stop()
    for label, args, env in [("--offline", ["--offline"], {}), ("HF_HUB_OFFLINE=1", [], {"HF_HUB_OFFLINE": "1"}),
                             ("no flag (the cache answers first)", [], {})]:
        r = cli("trace", "--model", "hf:test-org/tiny-vit", "--input", w("x.npy"), "--out", w("t2.npz"), *args, **env)
        expect(r.returncode == 0 and close(logits_of(w("t2.npz"))) and "downloading" not in r.stderr,
               "second run with the server stopped, " + label + ": found in the cache, same logits", r.stderr)
    r = cli("trace", "--model", "hf:test-org/tiny-vit@v1.0", "--input", w("x.npy"), "--out", w("t3.npz"), "--offline")
    expect(r.returncode != 0 and "refs/v1.0" in r.stderr, "offline: a revision never fetched is not guessed from main",
           r.stderr)
    r = cli("info", "--model", "hf:test-org/other", "--offline")
    expect(r.returncode == 1 and "not in the Hugging Face cache" in r.stderr and "--offline" in r.stderr and
           "test-org/other" in r.stderr, "--offline with nothing cached says so", r.stderr)
    r = cli("info", "--model", "hf:test-org/other", HF_HUB_OFFLINE="1")
    expect(r.returncode == 1 and "not in the Hugging Face cache" in r.stderr and "HF_HUB_OFFLINE=1" in r.stderr,
           "HF_HUB_OFFLINE=1 with nothing cached says so", r.stderr)

    # ---------------------------------------------------------------- no server at all
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    r = cli("info", "--model", "hf:test-org/other", HF_ENDPOINT="http://127.0.0.1:%d" % dead)
    expect(r.returncode == 1 and "cannot connect to http://127.0.0.1:%d" % dead in r.stderr and "test-org/other" in r.stderr,
           "no server: 'cannot connect' naming the endpoint and the repository", r.stderr)

    # ---------------------------------------------------------------- resumable downloads
    hub = Hub()
    port = hub.start(port)
    assert port == int(endpoint.rsplit(":", 1)[1])
    hub.repos["test-org/tiny-vit"] = {"refs": {"main": commit}, "lfs": {"model.safetensors"},
                                      "files": {commit: {"config.json": config, "preprocessor_config.json": preproc,
                                                         "model.safetensors": weights}}}
    big = weights + b""  # same bytes under another repository: its own cache folder
    hub.repos["test-org/cut"] = repo({"config.json": config, "model.safetensors": big})
    cut_at = len(big) // 3
    hub.cut[sha] = cut_at
    hub.down_after_cut = True
    cut_storage = os.path.join(cache, "models--test-org--cut")
    r = cli("trace", "--model", "hf:test-org/cut", "--input", w("x.npy"), "--out", w("t4.npz"))
    inc = os.path.join(cut_storage, "blobs", sha + ".incomplete")
    expect(r.returncode == 1 and "interrupted after %d of %d bytes" % (cut_at, len(big)) in r.stderr and inc in r.stderr,
           "a transfer cut mid-body (and the network gone): exit 1, the bytes kept in the named .incomplete blob", r.stderr)
    expect(os.path.exists(inc) and open(inc, "rb").read() == big[:cut_at],
           ".incomplete holds exactly the bytes received")
    expect(not os.path.exists(os.path.join(cut_storage, "blobs", sha)) and
           not os.path.exists(os.path.join(cut_storage, "snapshots", hub.repos["test-org/cut"]["refs"]["main"], "model.safetensors")),
           "no blob and no snapshot entry for the unfinished file")
    hub.down = False
    hub.cut.clear()
    n0 = len(hub.log)
    r = cli("trace", "--model", "hf:test-org/cut", "--input", w("x.npy"), "--out", w("t5.npz"))
    ranges = [q[2] for q in hub.requests(n0) if q[0] == "GET" and q[1].startswith("/cdn/")]
    expect(r.returncode == 0 and close(logits_of(w("t5.npz"))), "the next run completes the download and traces", r.stderr)
    expect(ranges == ["bytes=%d-" % cut_at], "the next run asked only for the rest: Range: bytes=%d-" % cut_at, str(ranges))
    expect("resuming test-org/cut model.safetensors" in r.stderr, "the progress says it resumes", r.stderr)
    blob = os.path.join(cut_storage, "blobs", sha)
    expect(os.path.exists(blob) and open(blob, "rb").read() == big and not os.path.exists(inc),
           "the resumed blob is byte-identical and the .incomplete is gone")

    hub.repos["test-org/cut-once"] = repo({"model.safetensors": big, "config.json": config})
    hub.cut[sha] = len(big) // 2
    hub.cut_once = True
    hub.down_after_cut = False
    n0 = len(hub.log)
    r = cli("trace", "--model", "hf:test-org/cut-once", "--input", w("x.npy"), "--out", w("t6.npz"))
    ranges = [q[2] for q in hub.requests(n0) if q[0] == "GET" and q[1].startswith("/cdn/")]
    expect(r.returncode == 0 and close(logits_of(w("t6.npz"))) and ranges == [None, "bytes=%d-" % (len(big) // 2)],
           "a cut inside one run is resumed by that run with a Range request", r.stderr + str(ranges))

    # ---------------------------------------------------------------- pytorch_model.bin, and no config
    torch.save(hf_sd, w("pytorch_model.bin"))
    bin_bytes = open(w("pytorch_model.bin"), "rb").read()
    hub.repos["test-org/bin-only"] = repo({"config.json": config, "pytorch_model.bin": bin_bytes})
    r = cli("trace", "--model", "hf:test-org/bin-only", "--input", w("x.npy"), "--out", w("t7.npz"))
    expect(r.returncode == 0 and close(logits_of(w("t7.npz"))),
           "no model.safetensors: pytorch_model.bin is downloaded and traces the same", r.stderr)
    bin_commit = hub.repos["test-org/bin-only"]["refs"]["main"]
    expect(os.path.exists(os.path.join(cache, "models--test-org--bin-only", ".no_exist", bin_commit, "model.safetensors")),
           "the missing model.safetensors is recorded in .no_exist/<commit>/")
    hub.repos["test-org/no-config"] = repo({"model.safetensors": weights})
    r = cli("info", "--model", "hf:test-org/no-config")
    expect(r.returncode == 1 and "--heads" in r.stderr and "model.safetensors" in r.stderr,
           "without config.json a width-48 model cannot know its heads: the loader's error (pass --heads)", r.stderr)
    r = cli("info", "--model", "hf:test-org/no-config", "--heads", "3")
    expect(r.returncode == 0, "...and with --heads 3 it loads", r.stderr)

    # ---------------------------------------------------------------- a cached snapshot that lacks word of a file
    # The weights and config.json of commit old are cached (as a tool that never asked for
    # preprocessor_config.json leaves them); main has moved on. The missing answer is asked for at
    # the cached commit, not at main, and no second copy of the weights is fetched.
    old_c, new_c = hashlib.sha1(b"old").hexdigest(), hashlib.sha1(b"new").hexdigest()
    hub.repos["test-org/moved"] = {"refs": {"main": new_c}, "lfs": {"model.safetensors"},
                                   "files": {old_c: {"config.json": config, "model.safetensors": weights},
                                             new_c: {"config.json": config, "model.safetensors": weights + b" "}}}
    mv = os.path.join(cache, "models--test-org--moved")
    os.makedirs(os.path.join(mv, "snapshots", old_c))
    os.makedirs(os.path.join(mv, "refs"))
    with open(os.path.join(mv, "refs", "main"), "w") as f:
        f.write(old_c)
    for name, data in [("config.json", config), ("model.safetensors", weights)]:
        with open(os.path.join(mv, "snapshots", old_c, name), "wb") as f:
            f.write(data)
    n0 = len(hub.log)
    r = cli("trace", "--model", "hf:test-org/moved", "--input", w("x.npy"), "--out", w("t8.npz"))
    reqs = hub.requests(n0)
    expect(r.returncode == 0 and close(logits_of(w("t8.npz"))) and
           [q[1] for q in reqs] == ["/test-org/moved/resolve/%s/preprocessor_config.json" % old_c] and
           os.path.exists(os.path.join(mv, ".no_exist", old_c, "preprocessor_config.json")),
           "cached weights with an unknown preprocessor_config.json: one HEAD at the cached commit, recorded "
           "in .no_exist, nothing downloaded", r.stderr + str(reqs))
    n0 = len(hub.log)
    r = cli("trace", "--model", "hf:test-org/moved", "--input", w("x.npy"), "--out", w("t8.npz"))
    expect(r.returncode == 0 and hub.requests(n0) == [], "...after which the cache answers alone", str(hub.requests(n0)))
    os.remove(os.path.join(mv, ".no_exist", old_c, "preprocessor_config.json"))
    r = cli("trace", "--model", "hf:test-org/moved", "--input", w("x.npy"), "--out", w("t8.npz"),
            HF_ENDPOINT="http://127.0.0.1:%d" % dead)
    expect(r.returncode == 0 and close(logits_of(w("t8.npz"))),
           "...and without a network the cached snapshot is used as it is", r.stderr)

    # ---------------------------------------------------------------- errors
    hub.repos["test-org/no-weights"] = repo({"config.json": config})
    r = cli("info", "--model", "hf:test-org/no-weights")
    expect(r.returncode == 1 and "test-org/no-weights" in r.stderr and "model.safetensors" in r.stderr and
           "pytorch_model.bin" in r.stderr and "404" in r.stderr, "404: names the repository and the files", r.stderr)
    r = cli("info", "--model", "hf:test-org/tiny-vit@nope")
    expect(r.returncode == 1 and "revision 'nope' not found in test-org/tiny-vit" in r.stderr,
           "404 RevisionNotFound: names the revision and the repository", r.stderr)
    r = cli("info", "--model", "hf:test-org/missing")
    expect(r.returncode == 1 and "test-org/missing" in r.stderr and "not found" in r.stderr and "HF_TOKEN" in r.stderr,
           "401 RepoNotFound: the repository named, and that a private one needs a token", r.stderr)
    hub.repos["test-org/gated"] = repo({"config.json": config, "model.safetensors": weights}, token="hf_good",
                                       denied=["hf_noaccess"])
    r = cli("info", "--model", "hf:test-org/gated")
    expect(r.returncode == 1 and "401" in r.stderr and "HF_TOKEN" in r.stderr and "huggingface-cli login" in r.stderr and
           "test-org/gated" in r.stderr, "401 without a token: log in or set HF_TOKEN", r.stderr)
    r = cli("info", "--model", "hf:test-org/gated", HF_TOKEN="hf_bad")
    expect(r.returncode == 1 and "the token from HF_TOKEN was not accepted" in r.stderr and "hf_bad" not in r.stderr,
           "401 with a bad token: names where the token came from (HF_TOKEN), never the token", r.stderr)
    with open(w("hf-home", "token"), "w") as f:
        f.write("hf_bad\n")
    r = cli("info", "--model", "hf:test-org/gated")
    expect(r.returncode == 1 and w("hf-home", "token") in r.stderr,
           "401 with the token file huggingface-cli login writes: names that file", r.stderr)
    os.remove(w("hf-home", "token"))
    r = cli("info", "--model", "hf:test-org/gated", HF_TOKEN="hf_noaccess")
    expect(r.returncode == 1 and "403" in r.stderr and "gated" in r.stderr and "HF_TOKEN" in r.stderr,
           "403: gated, not granted to this token", r.stderr)
    n0 = len(hub.log)
    r = cli("info", "--model", "hf:test-org/gated", HF_TOKEN="hf_good")
    auths = {q[3] for q in hub.requests(n0) if q[0] == "HEAD"}
    expect(r.returncode == 0 and auths == {"Bearer hf_good"}, "with HF_TOKEN the requests carry Authorization: Bearer",
           r.stderr + str(auths))
    for bad in ["hf:", "hf:a/b/c", "hf:org--x/y", "hf:org/name@../x", "hf:org/na me"]:
        n0 = len(hub.log)
        r = cli("info", "--model", bad)
        expect(r.returncode == 1 and "hf:ORG/NAME" in r.stderr and len(hub.log) == n0,
               "malformed %r: a usage message, no request" % bad, r.stderr)
    hub.stop()

    # ---------------------------------------------------------------- vitscope-cli models
    fake = w("fake-hf")
    torch_dir = w("fake-torch", "hub", "checkpoints")
    os.makedirs(torch_dir)

    def put_snapshot(repo_id, files, ref="main"):
        st = os.path.join(fake, "models--" + repo_id.replace("/", "--"))
        c = hashlib.sha1(repo_id.encode()).hexdigest()
        os.makedirs(os.path.join(st, "snapshots", c), exist_ok=True)
        os.makedirs(os.path.join(st, "blobs"), exist_ok=True)
        os.makedirs(os.path.join(st, "refs"), exist_ok=True)
        with open(os.path.join(st, "refs", ref), "w") as f:
            f.write(c)
        for name, data in files.items():
            b = os.path.join(st, "blobs", hashlib.sha256(data).hexdigest())
            with open(b, "wb") as f:
                f.write(data)
            os.symlink("../../blobs/" + os.path.basename(b), os.path.join(st, "snapshots", c, name))
        return st, c

    z = lambda *s: torch.zeros(*s)

    def dinov2_hf(D_, L_, regs):
        sd = {"embeddings.cls_token": z(1, 1, D_), "embeddings.mask_token": z(1, D_),
              "embeddings.position_embeddings": z(1, 1 + 37 * 37, D_),
              "embeddings.patch_embeddings.projection.weight": z(D_, 3, 14, 14),
              "embeddings.patch_embeddings.projection.bias": z(D_), "layernorm.weight": z(D_), "layernorm.bias": z(D_)}
        if regs:
            sd["embeddings.register_tokens"] = z(1, regs, D_)
        for i in range(L_):
            sd["encoder.layer.%d.layer_scale1.lambda1" % i] = z(D_)
            sd["encoder.layer.%d.attention.attention.query.weight" % i] = z(D_, D_)
        return sd

    vit_files = {"config.json": config, "model.safetensors": weights}
    put_snapshot("test-org/tiny-vit", vit_files)
    dino = dinov2_hf(384, 12, 4)
    put_snapshot("facebook/dinov2-with-registers-small",
                 {"config.json": json.dumps({"model_type": "dinov2_with_registers"}).encode(),
                  "model.safetensors": safetensors_bytes(dino, w("d.safetensors"))})
    # transformers' DINOv3ViTModel: embeddings.patch_embeddings is the Conv2d itself; no position table
    d3hf = {"embeddings.cls_token": z(1, 1, 384), "embeddings.register_tokens": z(1, 4, 384),
            "embeddings.patch_embeddings.weight": z(384, 3, 16, 16), "norm.weight": z(384)}
    for i in range(12):
        d3hf["layer.%d.attention.q_proj.weight" % i] = z(384, 384)
    put_snapshot("facebook/dinov3-vits16-pretrain-lvd1689m",
                 {"config.json": json.dumps({"model_type": "dinov3_vit"}).encode(),
                  "model.safetensors": safetensors_bytes(d3hf, w("d3.safetensors"))})
    clip = {"vision_model.embeddings.class_embedding": z(768), "vision_model.embeddings.patch_embedding.weight": z(768, 3, 32, 32),
            "vision_model.embeddings.position_embedding.weight": z(50, 768), "vision_model.pre_layrnorm.weight": z(768),
            "visual_projection.weight": z(512, 768), "text_model.embeddings.token_embedding.weight": z(10, 512)}
    for i in range(12):
        clip["vision_model.encoder.layers.%d.self_attn.q_proj.weight" % i] = z(1, 1)
    put_snapshot("openai/clip-vit-base-patch32", {"model.safetensors": safetensors_bytes(clip, w("c.safetensors"))})
    bert = {"bert.embeddings.word_embeddings.weight": z(30, 8), "bert.encoder.layer.0.attention.self.query.weight": z(8, 8)}
    put_snapshot("google-bert/bert-base-uncased", {"config.json": json.dumps({"model_type": "bert"}).encode(),
                                                   "model.safetensors": safetensors_bytes(bert, w("b.safetensors"))})
    put_snapshot("test-org/config-only", {"config.json": config})
    # A sparse 1 GiB checkpoint: listing it must read its header only.
    huge = {"vit.embeddings.patch_embeddings.projection.weight": [1024, 3, 16, 16],
            "vit.embeddings.position_embeddings": [1, 197, 1024],
            "vit.encoder.layer.0.intermediate.dense.weight": [262144, 1024]}
    header, off = {}, 0
    for k, shp in huge.items():
        n = 4 * int(np.prod(shp))
        header[k] = {"dtype": "F32", "shape": shp, "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    st_big, c_big = put_snapshot("test-org/huge", {"model.safetensors": struct.pack("<Q", len(hb)) + hb})
    big_blob = os.path.realpath(os.path.join(st_big, "snapshots", c_big, "model.safetensors"))
    os.truncate(big_blob, 8 + len(hb) + off)
    # torch.hub: torchvision's ViT, an original-layout DINOv2 with registers, a CNN.
    torch.save(tv.state_dict(), os.path.join(torch_dir, "vit_tiny_test-0123abcd.pth"))
    dsd = {"cls_token": z(1, 1, 384), "pos_embed": z(1, 1370, 384), "register_tokens": z(1, 4, 384), "mask_token": z(1, 384),
           "patch_embed.proj.weight": z(384, 3, 14, 14), "norm.weight": z(384)}
    for i in range(12):
        dsd["blocks.%d.ls1.gamma" % i] = z(384)
        dsd["blocks.%d.attn.qkv.weight" % i] = z(1152, 384)
    torch.save(dsd, os.path.join(torch_dir, "dinov2_vits14_reg4_pretrain.pth"))
    # DINOv3's torch.hub file: the same keys as DINOv2's but storage tokens and RoPE periods, no pos_embed
    d3 = {k: v for k, v in dsd.items() if k not in ("pos_embed", "register_tokens")}
    d3["storage_tokens"], d3["rope_embed.periods"] = z(1, 4, 384), z(16)
    d3["patch_embed.proj.weight"] = z(384, 3, 16, 16)
    torch.save(d3, os.path.join(torch_dir, "dinov3_vits16_pretrain_lvd1689m-08c60483.pth"))
    torch.save({"conv1.weight": z(8, 3, 7, 7), "layer1.0.conv1.weight": z(8, 8, 3, 3), "fc.weight": z(10, 8)},
               os.path.join(torch_dir, "resnet_tiny.pth"))
    with open(os.path.join(torch_dir, "notes.txt"), "w") as f:
        f.write("not a checkpoint")

    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); "
             "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    r = subprocess.run([sys.executable, "-c", probe, a.cli, "models", "--json", "--hf-cache", fake, "--torch-dir", torch_dir],
                       capture_output=True, text=True, timeout=120, env=base_env)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    rss = int(re.search(r"MAXRSS_KB (\d+)", r.stdout).group(1)) if "MAXRSS_KB" in r.stdout else 1 << 30
    found = {j["spec"]: j for j in map(json.loads, lines)}
    expect(r.returncode == 0, "models --json exits 0", r.stderr)
    by_name = lambda s: next((j for k, j in found.items() if k.endswith(s)), None)
    t = found.get("hf:test-org/tiny-vit")
    n_params = sum(int(np.prod(v.shape)) for v in hf_sd.values())
    expect(t is not None and t["vit"] and t["family"] == "ViT (Hugging Face)" and
           t["size"] == "width 48, depth 2, patch 8, 32 px, 5 classes" and t["params"] == n_params and
           t["path"].endswith("/model.safetensors") and t["where"] == "huggingface",
           "models: the downloaded-style Hugging Face ViT with its spec, family, size and parameter count", str(t))
    d = found.get("hf:facebook/dinov2-with-registers-small")
    expect(d is not None and d["vit"] and d["family"] == "DINOv2 with 4 registers (Hugging Face)" and
           d["size"] == "ViT-S/14, 518 px, no classification head", "models: DINOv2 with registers (Hugging Face)", str(d))
    d3h = found.get("hf:facebook/dinov3-vits16-pretrain-lvd1689m")
    expect(d3h is not None and d3h["vit"] and d3h["family"] == "DINOv3 with 4 storage tokens (Hugging Face, RoPE)" and
           d3h["size"] == "ViT-S/16, no classification head", "models: DINOv3 (Hugging Face DINOv3ViTModel)", str(d3h))
    c = found.get("hf:openai/clip-vit-base-patch32")
    expect(c is not None and c["vit"] and c["family"] == "CLIP (Hugging Face, image and text towers)" and
           c["size"] == "ViT-B/32, 224 px, embedding 512", "models: CLIP (Hugging Face) ViT-B/32", str(c))
    b = found.get("hf:google-bert/bert-base-uncased")
    expect(b is not None and not b["vit"] and b["family"] == "not a ViT (config.json: model_type 'bert')",
           "models: a language model is 'not a ViT'", str(b))
    expect(not any("config-only" in k for k in found), "models: a snapshot without weights is not listed")
    hg = found.get("hf:test-org/huge")
    expect(hg is not None and hg["params"] == sum(int(np.prod(s)) for s in huge.values()) and hg["bytes"] > 1 << 30,
           "models: a sparse 1 GiB checkpoint is listed with its parameter count", str(hg))
    expect(rss < 200 * 1024, "models: listing it stayed under 200 MB of memory (%d MB): headers only, never the weights"
           % (rss // 1024))
    tvf = by_name("vit_tiny_test-0123abcd.pth")
    expect(tvf is not None and tvf["vit"] and tvf["family"] == "ViT (torchvision)" and tvf["where"] == "torch.hub" and
           tvf["size"] == "width 48, depth 2, patch 8, 32 px, 5 classes" and
           tvf["params"] == sum(v.numel() for v in tv.state_dict().values()),
           "models: torch.hub's torchvision ViT (.pth read from data.pkl only)", str(tvf))
    dn = by_name("dinov2_vits14_reg4_pretrain.pth")
    expect(dn is not None and dn["vit"] and dn["family"] == "DINOv2 with 4 registers (original layout)" and
           dn["size"].startswith("ViT-S/14, 518 px"), "models: torch.hub's original-layout DINOv2 with registers", str(dn))
    d3f = by_name("dinov3_vits16_pretrain_lvd1689m-08c60483.pth")
    expect(d3f is not None and d3f["vit"] and d3f["family"] == "DINOv3 with 4 storage tokens (facebookresearch, RoPE)" and
           d3f["size"] == "ViT-S/16, no classification head", "models: torch.hub's DINOv3 (not DINOv2: no position table)",
           str(d3f))
    rn = by_name("resnet_tiny.pth")
    expect(rn is not None and not rn["vit"] and rn["family"].startswith("not a ViT"), "models: a CNN is 'not a ViT'", str(rn))
    expect(not any(k.endswith("notes.txt") for k in found), "models: files that are not checkpoints are skipped")
    r = cli("models", "--hf-cache", fake, "--torch-dir", torch_dir)
    expect(r.returncode == 0 and "hf:test-org/tiny-vit" in r.stdout and "Hugging Face cache: " + fake in r.stdout and
           "torch.hub checkpoints: " + torch_dir in r.stdout, "models: the text listing names both folders", r.stdout)
    r = cli("models", HF_HUB_CACHE=fake, TORCH_HOME=w("fake-torch"))
    expect(r.returncode == 0 and "Hugging Face cache: " + fake in r.stdout and "torch.hub checkpoints: " + torch_dir in r.stdout
           and "vit_tiny_test-0123abcd.pth" in r.stdout, "models: the folders come from HF_HUB_CACHE and TORCH_HOME", r.stdout)
    # What the list says opens.
    r = cli("info", "--model", "hf:test-org/tiny-vit", "--offline", HF_HUB_CACHE=fake)
    expect(r.returncode == 0 and "heads 3 (d=16)" in r.stdout,
           "a listed hf: spec opens offline, with its config.json", r.stdout + r.stderr)
    r = cli("info", "--model", tvf["spec"] if tvf else "?", "--heads", "3")
    expect(r.returncode == 0, "a listed torch.hub spec opens", r.stderr)

    print("\n%d failure(s)" % len(FAIL))
    for f in FAIL:
        print("  " + f)
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
