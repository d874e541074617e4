#!/usr/bin/env python3
"""Pairs two release binaries of `switchyard` kernel by kernel over the suite.

For each kernel, runs OLD then NEW, `--reps` times alternating, and keeps each one's
best `sim ms` (the simulation's own time, printed by `switchyard run`); prints the ratio
per kernel, then the median and geometric mean over the kernels. Alternating and taking
the best keeps a ratio meaningful on a shared, noisy machine (BENCHMARKS.md).

    tools/pair_suite.py OLD NEW [--reps 2] [--kernels gemm,spmv] [--threads 1] [-- RUN ARGS...]

RUN ARGS default to `--size large --target sm_70 --gpu gtx480`. `--threads N` (default 1)
is passed to a binary that knows the option (the engines before the "Parallel machine"
work do not).
"""

import argparse
import statistics
import subprocess
import sys

SUITE = (
    "gemm dct8 conv2d bitonic hist reduce scan bfs hotspot pathfinder mandel branchy kmeans "
    "spmv blackscholes dgemv igemv srad layernorm softmax mulword"
).split()


def knows_threads(binary: str) -> bool:
    out = subprocess.run([binary, "run", "--help"], capture_output=True, text=True).stdout
    return "--threads" in out


def sim_ms(binary: str, kernel: str, run_args: list[str], threads: int | None) -> float:
    cmd = [binary, "run", kernel, "--no-stats", *run_args]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    total = 0.0
    for line in p.stdout.splitlines():
        cols = line.split()
        if cols and cols[0] == kernel:
            if "PASS" not in cols:
                sys.exit(f"{binary} {kernel}: did not pass:\n{line}")
            # ... sim ms, Kwi/s, PASS, (N values match)
            total += float(cols[cols.index("PASS") - 2])
    if total == 0.0:
        sys.exit(f"{binary} {kernel}: no result line (exit {p.returncode}):\n{p.stderr}")
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--kernels", help="comma-separated (default: the suite's sm_70 kernels)")
    ap.add_argument("--threads", type=int, default=1, help="simulation threads (default 1)")
    ap.epilog = "after --: arguments of `switchyard run`"
    # Everything after `--` goes to `switchyard run` as it is (argparse would leave
    # options there unrecognised once the two binaries are read).
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    kernels = a.kernels.split(",") if a.kernels else SUITE
    run_args = argv[cut + 1 :] or ["--size", "large", "--target", "sm_70", "--gpu", "gtx480"]
    threads = {b: a.threads if knows_threads(b) else None for b in (a.old, a.new)}
    ratios = []
    for k in kernels:
        old, new = [], []
        for _ in range(max(a.reps, 1)):
            old.append(sim_ms(a.old, k, run_args, threads[a.old]))
            new.append(sim_ms(a.new, k, run_args, threads[a.new]))
        r = min(old) / min(new)
        ratios.append(r)
        print(f"{k:14s} old {min(old):9.1f} ms  new {min(new):9.1f} ms  {r:.3f}x", flush=True)
    print(
        f"median {statistics.median(ratios):.3f}x  "
        f"geometric mean {statistics.geometric_mean(ratios):.3f}x  ({len(ratios)} kernels)"
    )


if __name__ == "__main__":
    main()
