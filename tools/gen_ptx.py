#!/usr/bin/env python3
"""Regenerates the committed PTX of Switchyard's kernel suite with NVRTC.

Every ``kernels/<name>/<name>.cu`` is compiled for each of its targets, and so is every
``scenarios/programs/<name>.cu`` (the kernels of the scenarios' whole-program examples,
written next to their source as ``<name>.<target>.ptx``):

* ``kernels/<name>/<name>.sm_70.ptx`` by NVRTC 12.x for ``compute_70``
  (CUDA 13 no longer targets Volta, so the 12.x compiler is needed there);
* ``kernels/<name>/<name>.sm_80.ptx`` by NVRTC 12.x for ``compute_80``;
* ``kernels/<name>/<name>.sm_90.ptx`` by NVRTC 13.x for ``compute_90``.

A kernel's targets are sm_70 and sm_90 unless its source names others on a line
``// targets: sm_80 sm_90`` (tensor-core kernels, whose ``mma``/``cp.async`` need
Ampere or later).

No CUDA toolkit and no GPU are needed: the NVRTC shared libraries come from
PyPI wheels, installed (pinned) into the ignored directory ``.venv-nvrtc/``,
and the CUDA headers a kernel may include (``mma.h``, ``cuda_fp16.h``,
``cuda_bf16.h``, ``cuda_pipeline.h``) from the matching CUDA runtime wheel.
The wheels ship only ``libnvrtc.so.12`` / ``libnvrtc.so.13``; a loader that
asked for plain ``libnvrtc.so`` could silently find some other NVRTC on the
system, so the script loads the wheel's file by full path and checks the
major version it reports.

Usage::

    python3 tools/gen_ptx.py            # regenerate all PTX in place
    python3 tools/gen_ptx.py --check    # regenerate into a temp dir, diff, exit 1 on change
    python3 tools/gen_ptx.py gemm bfs   # only these kernels

The PTX is written verbatim as NVRTC emits it (it carries its own header
naming the compiler version), so ``--check`` is an exact comparison.
"""

import argparse
import ctypes
import difflib
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels")
PROGRAMS = os.path.join(ROOT, "scenarios", "programs")
VENV = os.path.join(ROOT, ".venv-nvrtc")

# (target suffix, wheel requirements, install dir, library file, major, arch, extra options).
# The first requirement is NVRTC; the others are used only for their headers: the CUDA
# runtime's, and `crt/` (`mma.h` includes `crt/mma.h`), which CUDA 12 ships in the compiler
# wheel and CUDA 13 in its own.
CU12 = ["nvidia-cuda-nvrtc-cu12==12.9.86", "nvidia-cuda-runtime-cu12==12.9.79",
        "nvidia-cuda-nvcc-cu12==12.9.86"]
CU13 = ["nvidia-cuda-nvrtc==13.0.88", "nvidia-cuda-runtime==13.0.88", "nvidia-cuda-crt==13.0.88"]
TOOLCHAINS = [
    ("sm_70", CU12, "cu12", "libnvrtc.so.12", 12, "compute_70", []),
    ("sm_80", CU12, "cu12", "libnvrtc.so.12", 12, "compute_80", []),
    ("sm_90", CU13, "cu13", "libnvrtc.so.13", 13, "compute_90", []),
]
DEFAULT_TARGETS = ("sm_70", "sm_90")
TARGETS_MARKER = "// targets:"

# NVRTC 12.x warns on every compile that pre-sm_75 targets are deprecated. We know; the line
# would drown real diagnostics, and NVRTC has no option to silence just this one (nvcc's
# -Wno-deprecated-gpu-targets is not accepted), so it is filtered from the log.
KNOWN_NOISE = ("Architectures prior to '<compute/sm>_75' are deprecated",)

# Fixed options: C++17, no fast-math (transcendentals stay IEEE-accurate to a few ulp
# and the CPU references can use the same formulas), line info off so the PTX does
# not depend on the checkout path.
COMMON_OPTIONS = ["-std=c++17"]

NVRTC_SUCCESS = 0


def fail(msg):
    print("gen_ptx: error: " + msg, file=sys.stderr)
    sys.exit(1)


def find_file(top, filename):
    for dirpath, _dirs, files in os.walk(top):
        if filename in files:
            return os.path.join(dirpath, filename)
    return None


def ensure_wheels(requirements, subdir, libname):
    """Installs the wheels into .venv-nvrtc/<subdir> unless they are already there (same
    pins); returns (NVRTC library path, CUDA include directories)."""
    target = os.path.join(VENV, subdir)
    stamp = os.path.join(target, ".switchyard-pin")
    pins = "\n".join(requirements)
    lib = find_file(target, libname) if os.path.isdir(target) else None
    pinned = None
    if os.path.exists(stamp):
        with open(stamp) as f:
            pinned = f.read().strip()
    if lib is None or pinned != pins:
        print("gen_ptx: installing %s into %s"
              % (", ".join(requirements), os.path.relpath(target, ROOT)))
        # The directory is ours (ignored by git); start clean so no older pin lingers.
        shutil.rmtree(target, ignore_errors=True)
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--upgrade",
               "--no-deps", "--target", target] + list(requirements)
        if subprocess.call(cmd) != 0:
            fail("pip install of %s failed" % ", ".join(requirements))
        with open(stamp, "w") as f:
            f.write(pins + "\n")
        lib = find_file(target, libname)
    if lib is None:
        fail("%s not found under %s after installing %s" % (libname, target, pins))
    # The runtime's include/mma.h and the compiler's include/crt/mma.h.
    includes = sorted({os.path.dirname(dirpath) if os.path.basename(dirpath) == "crt" else dirpath
                       for dirpath, _dirs, files in os.walk(target) if "mma.h" in files})
    crt = find_file(target, "mma.hpp")
    if not includes or crt is None or os.path.basename(os.path.dirname(crt)) != "crt":
        fail("expected mma.h and crt/mma.h under %s after installing %s; found %s"
             % (target, pins, includes))
    return lib, includes


class Nvrtc:
    """A thin ctypes binding of the NVRTC calls the script needs."""

    def __init__(self, path, want_major):
        libdir = os.path.dirname(path)
        # libnvrtc dlopen()s its builtins library by soname; load it first, by full path,
        # so the wheel's copy is the one that gets used.
        for name in sorted(os.listdir(libdir)):
            if name.startswith("libnvrtc-builtins.so"):
                ctypes.CDLL(os.path.join(libdir, name), mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = (major.value, minor.value)
        if major.value != want_major:
            fail("%s reports NVRTC %d.%d, expected major version %d"
                 % (path, major.value, minor.value, want_major))
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def _check(self, rc, what):
        if rc != NVRTC_SUCCESS:
            msg = what
            try:
                self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
                msg += ": " + self.lib.nvrtcGetErrorString(rc).decode()
            except Exception:  # noqa: BLE001 - best effort message only
                msg += ": error %d" % rc
            raise RuntimeError(msg)

    def compile(self, source, name, options):
        """Returns (ptx or None, log)."""
        prog = ctypes.c_void_p()
        self._check(self.lib.nvrtcCreateProgram(
            ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
            "nvrtcCreateProgram")
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            rc = self.lib.nvrtcCompileProgram(prog, len(options), opts)
            log_size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size)),
                        "nvrtcGetProgramLogSize")
            log_buf = ctypes.create_string_buffer(log_size.value)
            self._check(self.lib.nvrtcGetProgramLog(prog, log_buf), "nvrtcGetProgramLog")
            log = log_buf.value.decode(errors="replace")
            if rc != NVRTC_SUCCESS:
                return None, log
            ptx_size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetPTXSize(prog, ctypes.byref(ptx_size)), "nvrtcGetPTXSize")
            ptx_buf = ctypes.create_string_buffer(ptx_size.value)
            self._check(self.lib.nvrtcGetPTX(prog, ptx_buf), "nvrtcGetPTX")
            return ptx_buf.value.decode(), log
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def kernel_names(selected):
    """The sources to compile: (name, source path, output folder relative to the root)."""
    units = [(d, os.path.join(KERNELS, d, d + ".cu"), os.path.join("kernels", d))
             for d in sorted(os.listdir(KERNELS))
             if os.path.isfile(os.path.join(KERNELS, d, d + ".cu"))]
    if os.path.isdir(PROGRAMS):
        units += [(f[:-3], os.path.join(PROGRAMS, f), os.path.join("scenarios", "programs"))
                  for f in sorted(os.listdir(PROGRAMS)) if f.endswith(".cu")]
    if selected:
        names = [u[0] for u in units]
        missing = [s for s in selected if s not in names]
        if missing:
            fail("no kernels/<name>/<name>.cu or scenarios/programs/<name>.cu for: "
                 + ", ".join(missing))
        units = [u for u in units if u[0] in selected]
    if not units:
        fail("no kernels found under " + KERNELS)
    return units


def kernel_targets(source, src_path):
    """The targets a kernel source asks for (its `// targets:` line), else the defaults."""
    known = [t[0] for t in TOOLCHAINS]
    for line in source.splitlines():
        if line.startswith(TARGETS_MARKER):
            targets = line[len(TARGETS_MARKER):].split()
            bad = [t for t in targets if t not in known]
            if bad or not targets:
                fail("%s: `%s` names %s; known targets: %s"
                     % (src_path, line.strip(), ", ".join(bad) or "nothing", ", ".join(known)))
            return targets
    return list(DEFAULT_TARGETS)


def generate(units, out_root):
    """Compiles every unit for each of its targets into its folder under out_root; returns
    the paths."""
    written = []
    sources = {}
    for name, src_path, _ in units:
        with open(src_path) as f:
            sources[name] = f.read()
    for suffix, req, subdir, libname, major, arch, extra in TOOLCHAINS:
        if not any(suffix in kernel_targets(sources[n], p) for n, p, _ in units):
            continue
        lib, includes = ensure_wheels(req, subdir, libname)
        nvrtc = Nvrtc(lib, major)
        print("gen_ptx: %s with NVRTC %d.%d (%s)" % (suffix, nvrtc.version[0], nvrtc.version[1], req[0]))
        options = COMMON_OPTIONS + extra + ["--gpu-architecture=" + arch] + ["-I" + i for i in includes]
        for name, src_path, out_rel in units:
            source = sources[name]
            if suffix not in kernel_targets(source, src_path):
                continue
            ptx, log = nvrtc.compile(source, name + ".cu", options)
            if ptx is None:
                print(log, file=sys.stderr)
                fail("NVRTC %d.%d failed on %s (%s)" % (nvrtc.version + (src_path, arch)))
            log = "\n".join(l for l in log.splitlines()
                            if not any(noise in l for noise in KNOWN_NOISE))
            if log.strip():
                # Warnings are shown but do not fail the build.
                print("gen_ptx: %s (%s):\n%s" % (name, suffix, log), file=sys.stderr)
            out_dir = os.path.join(out_root, out_rel)
            os.makedirs(out_dir, exist_ok=True)
            out_path = os.path.join(out_dir, "%s.%s.ptx" % (name, suffix))
            with open(out_path, "w", newline="\n") as f:
                f.write(ptx)
            written.append((out_rel, name, suffix, out_path))
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and diff against the committed PTX")
    ap.add_argument("kernels", nargs="*", help="only these kernels (default: all)")
    args = ap.parse_args()
    units = kernel_names(args.kernels)

    if not args.check:
        written = generate(units, ROOT)
        print("gen_ptx: wrote %d PTX files for %d kernels" % (len(written), len(units)))
        return

    with tempfile.TemporaryDirectory(prefix="switchyard-ptx-") as tmp:
        written = generate(units, tmp)
        stale = 0
        for out_rel, name, suffix, path in written:
            committed = os.path.join(ROOT, out_rel, "%s.%s.ptx" % (name, suffix))
            with open(path) as f:
                new = f.read()
            old = ""
            if os.path.exists(committed):
                with open(committed) as f:
                    old = f.read()
            if old != new:
                stale += 1
                rel = os.path.relpath(committed, ROOT)
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True),
                    "a/" + rel, "b/" + rel, n=2))
        if stale:
            fail("%d PTX file(s) differ from their sources; run tools/gen_ptx.py" % stale)
        print("gen_ptx: all %d PTX files are up to date" % len(written))


if __name__ == "__main__":
    main()
