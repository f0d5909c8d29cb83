#!/usr/bin/env python3
"""ViTScope installs like an app, and the installed copy needs nothing from the
source or build tree.

1. `cmake --install` of the existing build into a temporary prefix; the prefix is
   then copied to a fresh directory and the original deleted (an absolute path
   baked in anywhere would now point at nothing).
2. No installed file contains the source or build directory's path.
3. From another working directory, with the source and build trees hidden
   (a private mount namespace mounts empty tmpfs over them when `unshare`
   allows it; otherwise the test says so and relies on 1-2):
   the installed `vitscope-cli trace` classifies the installed ankle-boot sample,
   `info` takes the installed ImageNet class list for a 1000-class preset, and the
   installed `vitscope --screenshot` (under Xvfb) finds its sample image and data
   next to itself, draws a non-blank window, remembers the image and options in a
   --settings file across two launches, and reports a corrupt settings file
   without overwriting it.
4. The icon is what packaging/make_icon.py draws; the .desktop file names the
   installed binary and icon.
5. `cpack -G DEB` of the same build (no rebuild): refused for a -march=native
   build unless VITSCOPE_PACKAGE_NATIVE=1; the .deb lists the expected files,
   Depends names the Debian packages of the linked libraries and the font, and
   the CLI extracted from it runs.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gui"))
from layout import load_layout  # noqa: E402

import numpy as np
from PIL import Image

ap = argparse.ArgumentParser()
ap.add_argument("--build", required=True)
ap.add_argument("--source", required=True)
ap.add_argument("--no-deb", action="store_true")
args = ap.parse_args()
BUILD = os.path.realpath(args.build)
SOURCE = os.path.realpath(args.source)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, **kw)


tmp = tempfile.mkdtemp(prefix="vitscope-install-")  # outside the source and build trees
try:
    # ------------------------------------------------------------ 1. install, then move
    stage = os.path.join(tmp, "stage")
    r = run(["cmake", "--install", BUILD, "--prefix", stage])
    if not check(r.returncode == 0, "cmake --install into a temporary prefix"):
        print(r.stdout, r.stderr)
        sys.exit(1)
    prefix = os.path.join(tmp, "moved", "opt", "vitscope")
    shutil.copytree(stage, prefix, symlinks=True)
    shutil.rmtree(stage)
    data = os.path.join(prefix, "share", "vitscope")
    expected = [
        "bin/vitscope", "bin/vitscope-cli",
        "share/vitscope/fmnist_vit.safetensors",
        "share/vitscope/samples/9_ankle_boot_test0.png",
        "share/vitscope/classes/fashion_mnist.txt", "share/vitscope/classes/imagenet1k.txt",
        "share/vitscope/shaders/heatmap.vert", "share/vitscope/shaders/heatmap.frag",
        "share/applications/vitscope.desktop",
        "share/icons/hicolor/256x256/apps/vitscope.png",
        "share/doc/vitscope/README.md", "share/doc/vitscope/copyright", "share/doc/vitscope/LICENSE",
        "share/doc/vitscope/docs/testing.md",
    ]
    missing = [p for p in expected if not os.path.isfile(os.path.join(prefix, p))]
    check(not missing, "installed files present (missing: %s)" % missing)
    check(len([f for f in os.listdir(os.path.join(data, "samples")) if f.endswith(".png")]) == 10,
          "ten Fashion-MNIST sample images installed")
    scenes = os.path.join(data, "samples", "scenes")
    check(os.path.isfile(os.path.join(scenes, "labels.json")) and
          len([f for f in os.listdir(scenes) if f.endswith(".png")]) == 8, "eight test scenes installed with their labels.json")
    photos = os.path.join(data, "samples", "photos")
    check(os.path.isdir(photos) and len([f for f in os.listdir(photos) if f.endswith(".jpg")]) >= 3
          and os.path.isfile(os.path.join(photos, "SOURCES.txt")),
          "the colour photographs installed with SOURCES.txt beside them")
    # The licence: MIT, the same words in LICENSE and in the copyright file's stanza for ViTScope's own files.
    with open(os.path.join(prefix, "share/doc/vitscope/LICENSE")) as f:
        lic = f.read()
    with open(os.path.join(prefix, "share/doc/vitscope/copyright")) as f:
        cpr = f.read()
    own = cpr.split("\n\n")[1] if "\n\n" in cpr else ""
    check(lic.startswith("MIT License") and "The ViTScope authors" in lic and "UNDECIDED" not in cpr
          and own.startswith("Files: *") and "License: Expat" in own,
          "LICENSE is MIT and the copyright file licenses ViTScope's own files as Expat (MIT)")
    installed = [os.path.join(d, f) for d, _, fs in os.walk(prefix) for f in fs]
    check(not any(os.path.basename(p) == "vitscope-source-dir" for p in installed),
          "the build tree's vitscope-source-dir marker is not installed")

    # ------------------------------------------------------------ 2. no baked-in paths
    leaks = []
    for p in installed:
        with open(p, "rb") as f:
            blob = f.read()
        for d in {SOURCE, BUILD}:
            if d.encode() in blob:
                leaks.append((os.path.relpath(p, prefix), d))
    check(not leaks, "no installed file contains the source or build path (%s)" % leaks)

    # ------------------------------------------------------------ 3. run the installed copy, trees hidden
    hide = [d for d in sorted({SOURCE, BUILD}) if not any(d.startswith(o + "/") for o in {SOURCE, BUILD} if o != d)]
    hider = None
    for cand in (["unshare", "-rm"], ["unshare", "-m"]):
        if shutil.which("unshare") and run(cand + ["sh", "-c", "mount -t tmpfs none %s" % hide[0]]).returncode == 0:
            hider = cand
            break
    mounts = " && ".join("mount -t tmpfs none '%s'" % d for d in hide)

    def hidden(cmd):
        if not hider:
            return cmd
        # Inside: the trees are empty directories; check that, then run.
        script = mounts + " && test -z \"$(ls -A '%s')\" && exec \"$@\"" % hide[0]
        return hider + ["sh", "-c", script, "sh"] + cmd

    if hider:
        print("     source and build trees hidden with: %s + tmpfs over %s" % (" ".join(hider), hide))
    else:
        print("     NOTE: cannot make a private mount namespace here; relying on the moved prefix and the path scan")
    work = os.path.join(tmp, "elsewhere")
    os.makedirs(work)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", LIBGL_ALWAYS_SOFTWARE="1",
               HOME=os.path.join(tmp, "home"), XDG_CONFIG_HOME=os.path.join(tmp, "home", ".config"))
    cli = os.path.join(prefix, "bin", "vitscope-cli")
    app = os.path.join(prefix, "bin", "vitscope")
    sample = os.path.join(data, "samples", "9_ankle_boot_test0.png")

    r = run(hidden([cli, "trace", "--image", sample, "--out", "t.npz"]), cwd=work, env=env)
    ok = check(r.returncode == 0, "installed vitscope-cli trace runs from another directory")
    if not ok:
        print(r.stdout, r.stderr)
    else:
        with zipfile.ZipFile(os.path.join(work, "t.npz")) as z:
            names = set(z.namelist())
        probs = np.load(os.path.join(work, "t.npz"))["probs"]
        check("blocks.0.attn.pattern.npy" in names and len(names) > 100, "the trace has every stage (%d)" % len(names))
        check(int(np.argmax(probs)) == 9, "the embedded model calls the installed ankle boot class 9 (p=%.3f)"
              % float(probs.max()))
    r = run(hidden([cli, "info", "--model", "vit-ti16", "--labels", os.path.join(data, "classes", "imagenet1k.txt")]),
            cwd=work, env=env)
    check(r.returncode == 0, "installed ImageNet class list fits a 1000-class preset" + ("" if r.returncode == 0 else ": " + r.stderr))
    r = run(hidden([cli, "info", "--labels", os.path.join(data, "classes", "fashion_mnist.txt")]), cwd=work, env=env)
    check(r.returncode == 0, "installed Fashion-MNIST class list fits the default model")

    xvfb = shutil.which("xvfb-run")
    if check(xvfb is not None, "xvfb-run available for the app"):
        def launch(extra, name):
            out = os.path.join(work, name)
            cmd = [xvfb, "-a", "-s", "-screen 0 1280x800x24"] + hidden(
                [app, "--width", "1280", "--height", "800", "--screenshot", out + ".png", "--layout", out + ".json"] + extra)
            r = run(cmd, cwd=work, env=env)
            lay = load_layout(out + ".json") if os.path.exists(out + ".json") else {}
            return r, lay, out + ".png"

        r, lay, png = launch([], "plain")
        if check(r.returncode == 0 and lay, "installed vitscope --screenshot runs under Xvfb"):
            check(lay.get("image") == sample, "it found the sample image under share/vitscope (%s)" % lay.get("image"))
            check(lay.get("data_dir") == data, "its data directory is <exe>/../share/vitscope (%s)" % lay.get("data_dir"))
            check(not lay.get("error") and not lay.get("shader_error"), "no error in the window")
            px = np.asarray(Image.open(png).convert("RGB")).astype(float)
            check(px.std() > 10, "the window is not blank (pixel std %.1f)" % px.std())
        else:
            print(r.stdout, r.stderr)

        settings = os.path.join(tmp, "cfg", "settings.json")
        dress = os.path.join(data, "samples", "3_dress_test13.png")
        r, lay, _ = launch(["--settings", settings, "--image", dress, "--no-affine", "--overlay", "rollout"], "first")
        ok = check(r.returncode == 0 and os.path.exists(settings), "first launch with --settings writes the file")
        if ok:
            st = json.load(open(settings))
            check(st["recent_images"] == [dress] and st["recent_models"] == ["default"]
                  and st["options"]["affine"] is False and st["view"]["overlay"] == "rollout",
                  "it holds the image, the model and the options: %s" % json.dumps(st, sort_keys=True))
            r, lay, _ = launch(["--settings", settings], "second")
            check(r.returncode == 0 and lay.get("image") == dress and lay.get("options", {}).get("affine") is False,
                  "the second launch reopens the image with the options (%s, %s)" % (lay.get("image"), lay.get("options")))
        with open(settings, "w") as f:
            f.write('{"recent_images": ["/x.png"], "options": {')
        before = open(settings, "rb").read()
        r, lay, _ = launch(["--settings", settings], "corrupt")
        check(r.returncode == 0 and settings in lay.get("settings_error", "") and "not valid JSON" in lay.get("settings_error", ""),
              "a corrupt settings file is reported by name: %r" % lay.get("settings_error"))
        check(open(settings, "rb").read() == before, "and left as it was")
        check(lay.get("image") == sample, "defaults are used instead")

    # ------------------------------------------------------------ 4. icon and .desktop
    icon2 = os.path.join(tmp, "icon.png")
    r = run([sys.executable, os.path.join(SOURCE, "packaging", "make_icon.py"), icon2])
    if check(r.returncode == 0, "packaging/make_icon.py draws the icon"):
        a = np.asarray(Image.open(icon2).convert("RGBA"))
        b = np.asarray(Image.open(os.path.join(prefix, "share/icons/hicolor/256x256/apps/vitscope.png")).convert("RGBA"))
        check(a.shape == (256, 256, 4) and np.array_equal(a, b), "the installed icon is the script's drawing, pixel for pixel")
    desk = dict(line.split("=", 1) for line in open(os.path.join(prefix, "share/applications/vitscope.desktop"))
                if "=" in line)
    check(desk.get("Exec", "").split()[0] == "vitscope" and os.access(os.path.join(prefix, "bin", "vitscope"), os.X_OK)
          and desk.get("Icon", "").strip() == "vitscope" and desk.get("Type", "").strip() == "Application",
          ".desktop file: Type=Application, Exec=vitscope, Icon=vitscope")

    # ------------------------------------------------------------ 5. the .deb, from the same build
    if not args.no_deb:
        cache = open(os.path.join(BUILD, "CMakeCache.txt")).read()
        native = "VITSCOPE_NATIVE:BOOL=ON" in cache
        cfg = os.path.join(BUILD, "CPackConfig.cmake")
        debdir = os.path.join(tmp, "deb")
        penv = {k: v for k, v in os.environ.items() if k != "VITSCOPE_PACKAGE_NATIVE"}
        if native:
            r = run(["cpack", "-G", "DEB", "--config", cfg, "-B", debdir], env=penv)
            check(r.returncode != 0 and "VITSCOPE_NATIVE=OFF" in r.stdout + r.stderr,
                  "cpack refuses a -march=native build and says how to package")
        r = run(["cpack", "-G", "DEB", "--config", cfg, "-B", debdir], env=dict(penv, VITSCOPE_PACKAGE_NATIVE="1"))
        debs = [f for f in os.listdir(debdir) if f.endswith(".deb")] if os.path.isdir(debdir) else []
        if check(r.returncode == 0 and len(debs) == 1, "cpack -G DEB builds one package (%s)" % debs):
            deb = os.path.join(debdir, debs[0])
            listing = run(["dpkg-deb", "-c", deb]).stdout
            files = {line.split()[-1] for line in listing.splitlines() if line.strip()}
            want = ["./usr/" + p for p in expected]
            check(all(w in files for w in want), "dpkg-deb -c lists %d expected files (missing: %s)"
                  % (len(want), [w for w in want if w not in files]))
            depends = run(["dpkg-deb", "-f", deb, "Depends"]).stdout.strip()
            print("     Depends: " + depends)
            pkgs = {d.strip().split()[0] for alt in depends.split(",") for d in alt.split("|")}
            need = ["libopenblas0", "libdnnl2", "libglfw3", "libzip4", "libgomp1", "libstdc++6", "libc6", "fonts-dejavu-core",
                    "libcurl4", "ca-certificates"]
            check(all(n in pkgs for n in need), "Depends names %s" % need)
            fields = {k: run(["dpkg-deb", "-f", deb, k]).stdout.strip() for k in
                      ("Package", "Maintainer", "Section", "Description", "Architecture")}
            check(fields["Package"] == "vitscope" and fields["Maintainer"] and fields["Section"]
                  and "Vision Transformer" in fields["Description"] and fields["Architecture"] == "amd64",
                  "control: Package, Maintainer, Section, Description, Architecture")
            x = os.path.join(tmp, "x")
            run(["dpkg-deb", "-x", deb, x])
            r = run(hidden([os.path.join(x, "usr", "bin", "vitscope-cli"), "trace", "--image",
                            os.path.join(x, "usr", "share", "vitscope", "samples", "0_tshirt_test19.png"), "--out", "d.npz"]),
                    cwd=work, env=env)
            check(r.returncode == 0 and int(np.argmax(np.load(os.path.join(work, "d.npz"))["probs"])) == 0,
                  "the CLI unpacked from the .deb runs (T-shirt sample is class 0)")
        else:
            print(r.stdout[-3000:], r.stderr[-3000:])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
