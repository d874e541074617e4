#!/usr/bin/env python3
"""Installs NVIDIA's ``ptxas`` (pinned) for the differential test of Switchyard's PTX checker.

``ptxas`` ships in the PyPI wheels of the CUDA compiler (``nvidia-cuda-nvcc``); it runs
without a GPU. Two versions are needed, matching the two compilers ``tools/gen_ptx.py``
uses for the suite:

* ``sm_70`` PTX (ISA 8.8, NVRTC 12.9): ptxas 12.9 (CUDA 13 no longer targets Volta);
* ``sm_90`` PTX (ISA 9.0, NVRTC 13.0): ptxas 13.0 (12.9 does not read ISA 9.0).

Both are installed into the ignored directory ``.venv-ptxas/`` and the script prints one
line per target, ``<target> <path to ptxas>``.

Usage::

    python3 tools/install_ptxas.py           # install if missing, print the paths
    python3 tools/install_ptxas.py --path sm_90   # print only that target's ptxas (no install)

``tools/ptxas_verdicts.py`` uses :func:`ptxas_for` to find the binaries.
"""

import argparse
import os
import shutil
import stat
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv-ptxas")

# target → (wheel requirement, install subdirectory)
TOOLCHAINS = {
    "sm_70": ("nvidia-cuda-nvcc-cu12==12.9.86", "cu12"),
    "sm_80": ("nvidia-cuda-nvcc-cu12==12.9.86", "cu12"),
    "sm_90": ("nvidia-cuda-nvcc==13.0.88", "cu13"),
}


def fail(msg):
    print("install_ptxas: error: " + msg, file=sys.stderr)
    sys.exit(1)


def find_file(top, filename):
    for dirpath, _dirs, files in os.walk(top):
        if filename in files:
            return os.path.join(dirpath, filename)
    return None


def installed(target):
    """The path of the pinned ptxas for `target` if it is installed, else None."""
    requirement, subdir = TOOLCHAINS[target]
    top = os.path.join(VENV, subdir)
    stamp = os.path.join(top, ".switchyard-pin")
    if not os.path.exists(stamp):
        return None
    with open(stamp) as f:
        if f.read().strip() != requirement:
            return None
    return find_file(top, "ptxas")


def install(target):
    requirement, subdir = TOOLCHAINS[target]
    path = installed(target)
    if path is not None:
        return path
    top = os.path.join(VENV, subdir)
    print("install_ptxas: installing %s into %s" % (requirement, os.path.relpath(top, ROOT)),
          file=sys.stderr)
    # The directory is ours (ignored by git); start clean so no older pin lingers.
    shutil.rmtree(top, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", top,
           requirement]
    if subprocess.call(cmd) != 0:
        fail("pip install of %s failed" % requirement)
    path = find_file(top, "ptxas")
    if path is None:
        fail("ptxas not found under %s after installing %s" % (top, requirement))
    # Wheels do not always keep the executable bit.
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    with open(os.path.join(top, ".switchyard-pin"), "w") as f:
        f.write(requirement + "\n")
    return path


def ptxas_for(target):
    """The installed ptxas for `target` (`sm_70`, `sm_90`), or None when not installed."""
    return installed(target) if target in TOOLCHAINS else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", metavar="TARGET", choices=sorted(TOOLCHAINS),
                    help="print the installed ptxas for TARGET and exit (1 if not installed)")
    args = ap.parse_args()
    if args.path:
        path = installed(args.path)
        if path is None:
            sys.exit(1)
        print(path)
        return
    for target in sorted(TOOLCHAINS):
        path = install(target)
        out = subprocess.run([path, "--version"], capture_output=True, text=True)
        if out.returncode != 0:
            fail("%s --version failed: %s" % (path, out.stderr.strip()))
        print("%s %s" % (target, path))


if __name__ == "__main__":
    main()
