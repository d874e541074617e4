#!/usr/bin/env python3
"""Builds the differential corpus of Switchyard's PTX checker and records ptxas's verdicts.

The corpus is the suite's PTX (``kernels/*/*.sm_70.ptx``, ``*.sm_90.ptx``) unchanged, plus
mutations of it: each changes one instruction line (a register swapped for one of another
class or width, the instruction type changed, a modifier dropped, an integer immediate
pushed to or past the edge of its type). Mutations are drawn with a fixed seed, so the
corpus is the same on every run.

Each entry is one line of ``crates/kir/tests/data/ptxas_verdicts.tsv``::

    id  file  line  kind  verdict  replacement

``line`` is 1-based (0 for an unchanged file), ``verdict`` is ``accept`` or ``reject`` (the exit
status of ``ptxas -arch=<target> file -o /dev/null``), and ``replacement`` is the new text of
the line with ``\\`` and tab escaped as ``\\\\`` and ``\\t``. The Rust test
``crates/kir/tests/ptxas_differential.rs`` rebuilds every entry from the committed PTX and
checks Switchyard's verdict against it, so CI needs no ptxas.

Usage::

    python3 tools/install_ptxas.py          # once: pinned ptxas into .venv-ptxas/
    python3 tools/ptxas_verdicts.py         # regenerate the corpus and verdicts
    python3 tools/ptxas_verdicts.py --check # re-run ptxas on the committed corpus, diff
"""

import argparse
import glob
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_ptxas  # noqa: E402

ROOT = install_ptxas.ROOT
OUT = os.path.join(ROOT, "crates", "kir", "tests", "data", "ptxas_verdicts.tsv")
SEED = 14
PER_FILE = 9

TYPES = ["pred", "b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
         "f16", "f32", "f64"]
TYPE_RE = re.compile(r"\.(pred|[bus](8|16|32|64)|f(16|32|64))\b")
REG_RE = re.compile(r"%(r|rd|f|fd|p|rs|h|hh|fs)\d+\b")
DECL_RE = re.compile(r"\.reg\s+\.(\w+)\s+%(\w+?)<(\d+)>")
INST_RE = re.compile(r"^(\s*)(@!?%p\d+\s+)?([a-z][a-z0-9_]*)((?:\.[a-z0-9_]+)*)(\s+)(.*);\s*$")
IMM_RE = re.compile(r"(?<=[,\s])(-?\d+)(?=\s*[,;]|\s*$)")


def escape(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t")


def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append("\t" if s[i + 1] == "t" else s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


# The kernels of the first corpus, whose mutations (and the disagreements reviewed for them
# in docs/ptxas-differential.md) stay as they were: the corpus grows by appending the files
# of kernels added later, in name order, after these.
FIRST_KERNELS = ["bfs", "bitonic", "blackscholes", "branchy", "conv2d", "dct8", "dgemv", "gemm",
                 "hist", "hotspot", "kmeans", "mandel", "pathfinder", "reduce", "scan", "spmv",
                 "srad"]


def base_files():
    files = sorted(glob.glob(os.path.join(ROOT, "kernels", "*", "*.sm_70.ptx")) +
                   glob.glob(os.path.join(ROOT, "kernels", "*", "*.sm_80.ptx")) +
                   glob.glob(os.path.join(ROOT, "kernels", "*", "*.sm_90.ptx")))
    rel = [os.path.relpath(f, ROOT) for f in files]
    kernel = lambda r: r.split(os.sep)[1]
    return sorted(rel, key=lambda r: (kernel(r) not in FIRST_KERNELS, r))


def target_of(text):
    m = re.search(r"^\.target\s+(sm_\d+)", text, re.M)
    return m.group(1) if m else None


def mutations(rng, lines):
    """Yields (line index, kind, new line) candidates for one file."""
    decls = {}
    for line in lines:
        for ty, prefix, n in DECL_RE.findall(line):
            decls[prefix] = (ty, int(n))
    insts = []
    for k, line in enumerate(lines):
        m = INST_RE.match(line)
        if m and m.group(3) not in ("ret", "bra", "exit", "call") and ":" not in line:
            insts.append((k, m))
    if not insts:
        return
    kinds = ["swap-reg", "swap-reg", "swap-reg", "retype", "retype", "drop-mod", "drop-mod",
             "immediate", "immediate"]
    for kind in kinds:
        for _attempt in range(20):
            k, m = rng.choice(insts)
            line = lines[k]
            indent, guard, op, mods, sp, args = m.groups()
            guard = guard or ""
            new = None
            if kind == "swap-reg":
                regs = list(REG_RE.finditer(args))
                if not regs:
                    continue
                r = rng.choice(regs)
                others = [p for p in decls if p != r.group(1)]
                if not others:
                    continue
                p = rng.choice(sorted(others))
                n = decls[p][1]
                repl = "%%%s%d" % (p, min(1, n - 1))
                args2 = args[:r.start()] + repl + args[r.end():]
                new = "%s%s%s%s%s%s;" % (indent, guard, op, mods, sp, args2)
            elif kind == "retype":
                ts = list(TYPE_RE.finditer(mods))
                if not ts:
                    continue
                t = rng.choice(ts)
                other = rng.choice([x for x in TYPES if x != t.group(1)])
                mods2 = mods[:t.start()] + "." + other + mods[t.end():]
                new = "%s%s%s%s%s%s;" % (indent, guard, op, mods2, sp, args)
            elif kind == "drop-mod":
                parts = [x for x in mods.split(".") if x]
                droppable = [x for x in parts if not TYPE_RE.fullmatch("." + x)]
                if not droppable:
                    continue
                d = rng.choice(droppable)
                parts.remove(d)
                mods2 = "".join("." + x for x in parts)
                new = "%s%s%s%s%s%s;" % (indent, guard, op, mods2, sp, args)
            elif kind == "immediate":
                ts = TYPE_RE.findall(mods)
                imms = list(IMM_RE.finditer(args))
                if not ts or not imms or "[" in args:
                    continue
                name = ts[-1][0]
                if name == "pred" or name.startswith("f"):
                    continue
                bits = int(re.sub(r"\D", "", name))
                i = rng.choice(imms)
                value = rng.choice([
                    (1 << bits) - 1,        # largest unsigned: fits
                    -(1 << (bits - 1)),     # smallest signed: fits
                    (1 << bits) + 3,        # too large
                    -(1 << (bits - 1)) - 1,  # too small
                ])
                args2 = args[:i.start()] + str(value) + args[i.end():]
                new = "%s%s%s%s%s%s;" % (indent, guard, op, mods, sp, args2)
            if new is not None and new != line:
                yield k, kind, new
                break


def ptxas_verdict(text, target):
    path = install_ptxas.ptxas_for(target)
    if path is None:
        sys.exit("ptxas_verdicts: ptxas for %s is not installed (run python3 tools/install_ptxas.py)"
                 % target)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(text)
        name = f.name
    try:
        rc = subprocess.call([path, "-arch=" + target, name, "-o", os.devnull],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        os.unlink(name)
    return "accept" if rc == 0 else "reject"


def build_corpus():
    rng = random.Random(SEED)
    entries = []
    for rel in base_files():
        with open(os.path.join(ROOT, rel)) as f:
            text = f.read()
        entries.append((rel, 0, "original", None))
        lines = text.split("\n")
        for k, kind, new in mutations(rng, lines):
            entries.append((rel, k + 1, kind, new))
    return entries


# Hand-written cases (issue 21): what the PTX ISA forbids and mutation found the checker
# accepting, each next to a legal variant. (file, the line as committed, replacement); the
# line is found by its text, so the entries survive a regenerated suite.
HAND_FILE = "kernels/scan/scan.sm_70.ptx"
HAND = [
    (".version 8.8", ".version 65.0"),
    (".target sm_70", ".target sm_99"),
    (".target sm_70", ".target sm_0"),
    (".target sm_70", ".target sm_70, texmode_independent"),
    (".extern .shared .align 16 .b8 s[];", ".extern .shared .align 3 .b8 s[];"),
    (".extern .shared .align 16 .b8 s[];", ".extern .shared .align 0 .b8 s[];"),
    (".extern .shared .align 16 .b8 s[];", ".extern .shared .align 8 .b8 s[];"),
    ("\t@%p1 bra \t$L__BB0_2;", "\t@%r6 bra \t$L__BB0_2;"),
    (".visible .entry scan_add(", ".visible .entry scan_blocks("),
    ("\t.param .u64 scan_blocks_param_1,", "\t.param .u64 scan_blocks_param_0,"),
    ("\tst.global.u32 \t[%rd21], %r34;", "\tst.const.u32 \t[%rd21], %r34;"),
    ("\tbar.sync \t0;", "\tbar.sync \t16;"),
    ("\tbar.sync \t0;", "\tbar.sync \t15;"),
    (")", ") .reqntid 0"),
    (")", ") .reqntid 256"),
]


def hand_cases():
    with open(os.path.join(ROOT, HAND_FILE)) as f:
        lines = f.read().split("\n")
    for old, new in HAND:
        yield HAND_FILE, lines.index(old) + 1, "isa", new


def apply(rel, line, new):
    with open(os.path.join(ROOT, rel)) as f:
        text = f.read()
    if line == 0:
        return text
    lines = text.split("\n")
    lines[line - 1] = new
    return "\n".join(lines)


def read_committed():
    rows = []
    with open(OUT) as f:
        for raw in f:
            if raw.startswith("#") or not raw.strip():
                continue
            id_, rel, line, kind, verdict, repl = raw.rstrip("\n").split("\t", 5)
            rows.append((id_, rel, int(line), kind, verdict, unescape(repl)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="re-run ptxas on the committed corpus and report changed verdicts")
    args = ap.parse_args()
    if args.check:
        for target in install_ptxas.TOOLCHAINS:
            if install_ptxas.ptxas_for(target) is None:
                print("skipped: ptxas not installed (run python3 tools/install_ptxas.py)")
                return
        changed = 0
        rows = read_committed()
        for id_, rel, line, kind, verdict, repl in rows:
            text = apply(rel, line, repl)
            now = ptxas_verdict(text, target_of(text))
            if now != verdict:
                changed += 1
                print("%s %s:%d (%s): committed %s, ptxas now %s" % (id_, rel, line, kind, verdict, now))
        print("ptxas_verdicts: %d entries, %d changed" % (len(rows), changed))
        sys.exit(1 if changed else 0)
    entries = build_corpus()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    counts = {"accept": 0, "reject": 0}
    with open(OUT, "w") as f:
        f.write("# Generated by tools/ptxas_verdicts.py (seed %d): id, file, line (0: unchanged), "
                "kind, ptxas verdict, replacement line (\\t and \\\\ escaped).\n" % SEED)
        for n, (rel, line, kind, new) in enumerate(entries):
            text = apply(rel, line, new)
            verdict = ptxas_verdict(text, target_of(text))
            counts[verdict] += 1
            f.write("m%03d\t%s\t%d\t%s\t%s\t%s\n" % (n, rel, line, kind, verdict,
                                                     escape(new if new is not None else "")))
        for n, (rel, line, kind, new) in enumerate(hand_cases()):
            # The committed file's target picks ptxas (a case may change `.target`).
            verdict = ptxas_verdict(apply(rel, line, new), target_of(apply(rel, 0, None)))
            counts[verdict] += 1
            entries.append((rel, line, kind, new))
            f.write("h%03d\t%s\t%d\t%s\t%s\t%s\n" % (n, rel, line, kind, verdict, escape(new)))
    print("ptxas_verdicts: %d entries (%d accepted, %d rejected) -> %s"
          % (len(entries), counts["accept"], counts["reject"], os.path.relpath(OUT, ROOT)))


if __name__ == "__main__":
    main()
