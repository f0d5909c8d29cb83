"""What the Python test scripts share: their command line (the paths CTest passes them)."""
import argparse
import os


def script_args(*names):
    """Parses the required --NAME PATH options (cli, workdir, assets, image, ...) and creates the
    work directory when one is asked for."""
    ap = argparse.ArgumentParser()
    for n in names:
        ap.add_argument("--" + n, required=True)
    a = ap.parse_args()
    if "workdir" in names:
        os.makedirs(a.workdir, exist_ok=True)
    return a
