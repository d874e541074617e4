#!/usr/bin/env bash
# Runs the four cargo-fuzz targets (CONTRIBUTING.md, "Fuzzing") side by side, each with JOBS
# libFuzzer processes for FUZZ_SECONDS, seeded with the repository's real inputs, and prints a
# summary: executions, corpus, crashes and CPU seconds per target. Crashing inputs are kept
# under WORK/TARGET/artifacts (replay one with `BIN/TARGET FILE`).
#
#   cargo +nightly fuzz build -O -s none      # once, from fuzz/ (or with the default ASan)
#   FUZZ_SECONDS=3600 JOBS=1 bash tools/fuzz_all.sh
#
# Environment: BIN (the built targets; default fuzz/target/x86_64-unknown-linux-gnu/release),
# FUZZ_SECONDS (per job, default 3600), JOBS (per target, default 1), WORK (default
# /tmp/switchyard-fuzz), TARGETS (default "ptx gpu_config spec functional").
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/fuzz/target/x86_64-unknown-linux-gnu/release}
secs=${FUZZ_SECONDS:-3600}
jobs=${JOBS:-1}
work=${WORK:-/tmp/switchyard-fuzz}
targets=${TARGETS:-"ptx gpu_config spec functional"}

seed() {
    case $1 in
    ptx | functional) ls "$root"/kernels/*/*.ptx "$root"/examples/*/*.ptx ;;
    gpu_config) ls "$root"/configs/*.toml ;;
    spec) ls "$root"/scenarios/*.toml "$root"/examples/*/*.toml ;;
    esac
}

for t in $targets; do
    [ -x "$bin/$t" ] || { echo "no fuzz target $bin/$t (build it first)" >&2; exit 1; }
    mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
    for f in $(seed "$t"); do cp "$f" "$work/$t/corpus/"; done
done
for t in $targets; do
    (
        cd "$work/$t" || exit 1
        /usr/bin/time -f "%U %S" -o cpu "$bin/$t" corpus -jobs="$jobs" -workers="$jobs" \
            -max_total_time="$secs" -timeout=60 -rss_limit_mb=4096 \
            -artifact_prefix=artifacts/ -print_final_stats=1 >run.log 2>&1
    ) &
done
wait
printf '%-12s %6s %12s %8s %8s %10s\n' target jobs executions corpus crashes cpu_s
for t in $targets; do
    d=$work/$t
    # Each job's final statistics (printed on a crash too).
    execs=$(cat "$d"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' |
        awk '{s += $1} END {print s + 0}')
    corpus=$(ls "$d/corpus" | wc -l)
    crashes=$(ls "$d/artifacts" | wc -l)
    # The jobs are children of the first process: its CPU time counts them all.
    # The last line (time writes "Command exited with non-zero status" first on a crash).
    cpu=$(tail -n 1 "$d/cpu" 2>/dev/null | awk '{printf "%.0f", $1 + $2}')
    printf '%-12s %6s %12s %8s %8s %10s\n' "$t" "$jobs" "$execs" "$corpus" "$crashes" "$cpu"
done
